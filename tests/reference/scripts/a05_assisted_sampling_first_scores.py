# Assisted sampling (the default acceptance of draft tokens): the shape and that it runs; tokens differ by generator.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
draft = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA_DRAFT"])
ids = torch.tensor([[1, 900, 901, 902]])
torch.manual_seed(0)
out = model.generate(ids, assistant_model=draft, do_sample=True, top_k=10, max_new_tokens=8)
print(out.shape)
result = {"shape": list(out.shape), "prompt": out[:, :4]}
