# Self-speculative decoding: the model's first layers draft (assistant_early_exit), greedy.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
inputs = tok("def mean(values):\n", return_tensors="pt")
out = model.generate(**inputs, assistant_early_exit=4, max_new_tokens=16, do_sample=False)
print(tok.decode(out[0], skip_special_tokens=True))
result = {"ids": out}
