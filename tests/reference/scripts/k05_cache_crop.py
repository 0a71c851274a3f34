# A cache cropped by a negative count (the last tokens dropped), then extended again: the same logits as a whole
# forward.
import os

import torch
from transformers import AutoModelForCausalLM, DynamicCache

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 3, 4, 5, 6, 7]])
with torch.no_grad():
    cache = DynamicCache()
    model(ids, past_key_values=cache)
    cache.crop(-2)
    length = cache.get_seq_length()
    again = model(ids[:, 4:], past_key_values=cache).logits
    whole = model(ids).logits[:, 4:]
print(length, cache.get_seq_length())
result = {"again": again, "whole": whole, "lengths": [length, cache.get_seq_length()]}
