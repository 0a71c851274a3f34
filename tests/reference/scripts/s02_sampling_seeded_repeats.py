# torch.manual_seed before a sampled call repeats it; without reseeding the next call differs.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 5, 6, 7]])
torch.manual_seed(42)
a = model.generate(ids, do_sample=True, max_new_tokens=10)
b = model.generate(ids, do_sample=True, max_new_tokens=10)
torch.manual_seed(42)
c = model.generate(ids, do_sample=True, max_new_tokens=10)
print(torch.equal(a, c), torch.equal(a, b))
result = {"repeats": torch.equal(a, c), "differs": not torch.equal(a, b), "shape": list(a.shape)}
