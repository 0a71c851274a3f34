# suppress_tokens and begin_suppress_tokens, greedy.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
ids = tok("while True:\n", return_tensors="pt").input_ids
plain = model.generate(ids, max_new_tokens=6, do_sample=False)
new = plain[0, ids.shape[1] :].tolist()
a = model.generate(ids, max_new_tokens=6, do_sample=False, suppress_tokens=new[:2])
b = model.generate(ids, max_new_tokens=6, do_sample=False, begin_suppress_tokens=new[:1])
print(new, a[0, ids.shape[1] :].tolist(), b[0, ids.shape[1] :].tolist())
result = {"suppress": a, "begin_suppress": b}
