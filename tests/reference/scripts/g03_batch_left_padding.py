# Two prompts of different lengths in one batch, padded on the left: each row's ids and text.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"], padding_side="left")
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
prompts = ["class Stack:\n    def push(self, item):", "x = 1"]
inputs = tok(prompts, return_tensors="pt", padding=True)
out = model.generate(**inputs, max_new_tokens=10, do_sample=False)
for row in tok.batch_decode(out, skip_special_tokens=True):
    print(repr(row))
result = {"ids": out, "mask": inputs["attention_mask"]}
