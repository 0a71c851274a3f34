# Transformers docs: llm_optims.md, "Prompt lookup decoding" (greedy decoding).
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint names
# (os.environ["HA_MODEL"], os.environ["HA_DRAFT"]). What follows "# Checks" is ours: the documented properties.
import os

import torch

from habana_assist import AutoModelForCausalLM, AutoTokenizer

device = "cuda" if torch.cuda.is_available() else "cpu"

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
inputs = tokenizer("The second law of thermodynamics states", return_tensors="pt").to(device)

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"]).to(device)
assistant_model = AutoModelForCausalLM.from_pretrained(os.environ["HA_DRAFT"]).to(device)
outputs = model.generate(**inputs, prompt_lookup_num_tokens=3)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))

# Checks: n-gram drafting changes nothing in greedy output: it is the plain greedy output.
assert isinstance(outputs, torch.Tensor)
assert torch.equal(outputs, model.generate(**inputs)), outputs
