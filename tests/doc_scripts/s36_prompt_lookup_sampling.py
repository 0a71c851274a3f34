# Transformers docs: llm_optims.md, "Prompt lookup decoding" (sampling).
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

import torch

from habana_assist import AutoModelForCausalLM, AutoTokenizer

device = "cuda" if torch.cuda.is_available() else "cpu"

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
inputs = tokenizer("The second law of thermodynamics states", return_tensors="pt").to(device)

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"]).to(device)
outputs = model.generate(**inputs, prompt_lookup_num_tokens=3, do_sample=True, temperature=0.7)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))

# Checks: the prompt first, then vocabulary tokens up to the length limit; the decoded text continues the prompt.
prompt_len = inputs["input_ids"].shape[1]
assert isinstance(outputs, torch.Tensor) and outputs.shape[0] == 1
assert torch.equal(outputs[:, :prompt_len], inputs["input_ids"])
assert prompt_len < outputs.shape[1] <= prompt_len + model.generation_config.max_new_tokens
assert int(outputs.max()) < model.config.vocab_size
assert tokenizer.batch_decode(outputs, skip_special_tokens=True)[0].startswith(
    "The second law of thermodynamics states"
)
