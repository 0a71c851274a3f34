# num_return_sequences with sampling: the shape, and each prompt's copies beside each other.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 5, 6, 7], [1, 8, 9, 10]])
out = model.generate(ids, do_sample=True, num_return_sequences=3, max_new_tokens=6)
print(out.shape)
result = {"shape": list(out.shape), "prompts": out[:, :4]}
