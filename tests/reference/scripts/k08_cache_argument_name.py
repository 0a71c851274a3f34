# The cache passed by its current name (cache=), to a forward and to generate().
import os

import torch
from transformers import AutoModelForCausalLM, DynamicCache

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 3, 4, 5]])
cache = DynamicCache()
out = model(ids, cache=cache)
print(sorted(out.keys()), cache.get_seq_length())
result = {"keys": sorted(out.keys()), "length": cache.get_seq_length()}
