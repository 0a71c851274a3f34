# Which fields a generate() output holds, and how it indexes (by name and as a tuple).
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
inputs = tok("x = [", return_tensors="pt")
out = model.generate(**inputs, max_new_tokens=3, do_sample=False, return_dict_in_generate=True, output_scores=True)
print(list(out.keys()))
print(torch.equal(out["sequences"], out[0]), torch.equal(out.sequences, out.to_tuple()[0]))
result = {"keys": list(out.keys()), "past": type(out.past_key_values).__name__}
