# Transformers docs: llm_optims.md, "Speculative decoding" (greedy search, with a device variable).
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint names
# (os.environ["HA_MODEL"], os.environ["HA_DRAFT"]). What follows "# Checks" is ours: the documented properties.
import os

import torch

from habana_assist import AutoModelForCausalLM, AutoTokenizer

device = "cuda" if torch.cuda.is_available() else "cpu"

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
inputs = tokenizer("Einstein's theory of relativity states", return_tensors="pt").to(device)

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"]).to(device)
assistant_model = AutoModelForCausalLM.from_pretrained(os.environ["HA_DRAFT"]).to(device)
outputs = model.generate(**inputs, assistant_model=assistant_model)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))

# Checks: on this machine the device is the CPU; the assisted output is the plain greedy output.
assert device == "cpu"
assert torch.equal(outputs, model.generate(**inputs))
