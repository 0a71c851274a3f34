# StopStringCriteria built by hand and passed as a stopping criterion.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, StopStringCriteria

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
inputs = tok("class Config:\n", return_tensors="pt")
criteria = StopStringCriteria(tokenizer=tok, stop_strings=[":"])
out = model.generate(**inputs, max_new_tokens=24, do_sample=False, stopping_criteria=[criteria])
print(repr(tok.decode(out[0], skip_special_tokens=True)))
result = {"ids": out}
