# use_cache=False gives the tokens the cached run gives.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 50, 60, 70, 80]])
cached = model.generate(ids, max_new_tokens=8, do_sample=False)
uncached = model.generate(ids, max_new_tokens=8, do_sample=False, use_cache=False)
print(torch.equal(cached, uncached), cached.tolist())
result = {"cached": cached, "uncached": uncached}
