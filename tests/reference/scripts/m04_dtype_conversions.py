# Changing a model's dtype after loading (.float()), and what it then computes.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"])
before = str(model.dtype)
model = model.float()
ids = torch.tensor([[1, 909, 289, 1417]])
with torch.no_grad():
    logits = model(ids).logits
print(before, model.dtype)
result = {"before": before, "after": str(model.dtype), "logits": logits}
