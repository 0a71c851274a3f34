# crop(0) and crop(n > 0) on a filled cache: what is left.
import os

import torch
from transformers import AutoModelForCausalLM, DynamicCache

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 3, 4, 5, 6, 7]])
left = {}
for n in (0, 4):
    cache = DynamicCache()
    model(ids, past_key_values=cache)
    try:
        cache.crop(n)
        left[n] = cache.get_seq_length()
    except ValueError:
        left[n] = "ValueError"
print(left)
result = {"left": left}
