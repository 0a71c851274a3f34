# Inputs as torch tensors give torch tensors; the attention mask from the tokenizer passed along.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
enc = tok(["a = [1, 2, 3]\n"], return_tensors="pt")
out = model.generate(enc.input_ids, attention_mask=enc.attention_mask, max_new_tokens=5, do_sample=False)
print(type(out).__name__, out.dtype, type(enc).__name__, enc.input_ids.dtype)
result = {"ids": out, "types": [type(out).__name__, str(out.dtype), type(enc).__name__, str(enc.input_ids.dtype)]}
