# A DynamicCache passed to generate(): the output, and the cache's length afterwards.
import os

import torch
from transformers import AutoModelForCausalLM, DynamicCache

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 100, 101, 102, 103]])
cache = DynamicCache()
out = model.generate(ids, past_key_values=cache, max_new_tokens=6, do_sample=False, return_dict_in_generate=True)
print(out.sequences.tolist(), cache.get_seq_length(), out.past_key_values is cache)
result = {"ids": out.sequences, "length": cache.get_seq_length()}
