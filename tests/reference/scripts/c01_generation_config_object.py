# A GenerationConfig passed to generate(), and keyword arguments overriding it.
import os

import torch
from transformers import AutoModelForCausalLM, GenerationConfig

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 20, 21, 22]])
config = GenerationConfig(max_new_tokens=6, do_sample=False, repetition_penalty=1.5, pad_token_id=0)
a = model.generate(ids, generation_config=config)
b = model.generate(ids, generation_config=config, max_new_tokens=3)
print(a.shape, b.shape, config.max_new_tokens)
result = {"a": a, "b": b}
