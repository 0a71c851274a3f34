# Length controls: max_length, then min_new_tokens keeping eos away, then max_new_tokens winning over max_length.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
ids = tok("def add(a, b):\n    return a + b\n", return_tensors="pt").input_ids
a = model.generate(ids, max_length=ids.shape[1] + 5, do_sample=False)
b = model.generate(ids, min_new_tokens=6, max_new_tokens=6, do_sample=False)
c = model.generate(ids, max_length=4, max_new_tokens=3, do_sample=False)
print(a.shape, b.shape, c.shape)
result = {"a": a, "b": b, "c": c}
