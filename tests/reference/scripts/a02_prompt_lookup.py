# Prompt lookup decoding on a repetitive prompt, greedy.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
code = "x = compute(a, b)\ny = compute(a, b)\nz = compute("
inputs = tok(code, return_tensors="pt")
out = model.generate(**inputs, prompt_lookup_num_tokens=4, max_new_tokens=16, do_sample=False)
print(tok.decode(out[0], skip_special_tokens=True))
result = {"ids": out}
