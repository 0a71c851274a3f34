# Assisted generation with the shipped draft, greedy: the same tokens as without it.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
draft = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE_DRAFT"], dtype=torch.float32)
inputs = tok("def binary_search(items, target):\n", return_tensors="pt")
assisted = model.generate(**inputs, assistant_model=draft, max_new_tokens=24, do_sample=False)
plain = model.generate(**inputs, max_new_tokens=24, do_sample=False)
print(torch.equal(assisted, plain))
print(tok.decode(assisted[0], skip_special_tokens=True))
result = {"assisted": assisted, "plain": plain}
