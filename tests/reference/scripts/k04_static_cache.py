# cache_implementation="static", and a StaticCache of one's own: the same tokens as the default cache.
import os

import torch
from transformers import AutoModelForCausalLM, StaticCache

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 200, 201, 202]])
default = model.generate(ids, max_new_tokens=6, do_sample=False)
static = model.generate(ids, max_new_tokens=6, do_sample=False, cache_implementation="static")
own = model.generate(
    ids, max_new_tokens=6, do_sample=False, past_key_values=StaticCache(config=model.config, max_cache_len=32)
)
print(torch.equal(default, static), torch.equal(default, own))
result = {"default": default, "static": static, "own": own}
