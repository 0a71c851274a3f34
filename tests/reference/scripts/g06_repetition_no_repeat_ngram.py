# Greedy with repetition_penalty and no_repeat_ngram_size.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
ids = tok("for i in range(10):\n    for j in range(10):\n", return_tensors="pt").input_ids
a = model.generate(ids, max_new_tokens=16, do_sample=False, repetition_penalty=1.3)
b = model.generate(ids, max_new_tokens=16, do_sample=False, no_repeat_ngram_size=2)
print(tok.decode(a[0, ids.shape[1] :]))
print(tok.decode(b[0, ids.shape[1] :]))
result = {"repetition": a, "no_repeat": b}
