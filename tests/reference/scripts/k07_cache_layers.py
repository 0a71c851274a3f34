# A filled cache's per-layer keys and values, as the cache object shows them.
import os

import torch
from transformers import AutoModelForCausalLM, DynamicCache

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
cache = DynamicCache()
model(torch.tensor([[1, 3, 4, 5]]), past_key_values=cache)
shapes = [(tuple(layer.keys.shape), tuple(layer.values.shape)) for layer in cache.layers]
print(len(cache.layers), shapes)
result = {"shapes": shapes, "keys": cache.layers[0].keys}
