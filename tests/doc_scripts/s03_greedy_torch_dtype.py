# Transformers docs: generation_strategies.md (2025), "Basic decoding methods" > "Greedy search".
# Changed from the doc: the import line (habana_assist for transformers), the checkpoint name
# (os.environ["HA_MODEL"]) and the device, "cpu" for "cuda" (no GPU here). What follows "# Checks" is ours.
import os

import torch

from habana_assist import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
inputs = tokenizer("Hugging Face is an open-source company", return_tensors="pt").to("cpu")

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"], torch_dtype=torch.float16).to("cpu")
# explicitly set to default length because Llama2 generation length is 4096
outputs = model.generate(**inputs, max_new_tokens=20)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))

# Checks: exactly 20 new tokens unless the eos came first; torch out; the prompt first.
assert isinstance(outputs, torch.Tensor), type(outputs)
prompt_len = inputs["input_ids"].shape[1]
new = outputs[0, prompt_len:]
assert len(new) == 20 or new[-1].item() == model.generation_config.eos_token_id, outputs
assert torch.equal(outputs[0, :prompt_len], inputs["input_ids"][0])
