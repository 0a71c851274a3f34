# Transformers docs: assisted_decoding.md, "Prompt lookup decoding" (which passes an assistant_model and
# prompt_lookup_num_tokens together: Transformers then drafts by prompt lookup).
# Changed from the doc: the import line (habana_assist for transformers), the checkpoint names
# (os.environ["HA_MODEL"], os.environ["HA_DRAFT"]) and the device ("cpu" for Accelerator().device: accelerate is
# not installed here). What follows "# Checks" is ours: the documented properties.
import os

import torch

from habana_assist import AutoModelForCausalLM, AutoTokenizer

device = "cpu"

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"], dtype=torch.float16).to(device)
assistant_model = AutoModelForCausalLM.from_pretrained(os.environ["HA_DRAFT"], dtype=torch.float16).to(device)
inputs = tokenizer("Hugging Face is an open-source company", return_tensors="pt").to(device)

outputs = model.generate(**inputs, assistant_model=assistant_model, max_new_tokens=20, prompt_lookup_num_tokens=5)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))

# Checks: greedy, so the output is the plain greedy output of 20 new tokens (or fewer, up to an eos).
plain = model.generate(**inputs, max_new_tokens=20)
assert torch.equal(outputs, plain), (outputs, plain)
