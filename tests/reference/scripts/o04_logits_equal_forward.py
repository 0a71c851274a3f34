# A forward pass: logits' shape and values, the last position's argmax, and the loss with labels.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
inputs = tok("import numpy as np\n", return_tensors="pt")
with torch.no_grad():
    res = model(**inputs, labels=inputs["input_ids"])
print(res.logits.shape, res.logits.dtype, res.logits[0, -1].argmax().item())
result = {"logits": res.logits, "loss": res.loss}
