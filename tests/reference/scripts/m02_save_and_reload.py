# A model saved with save_pretrained and loaded again gives the same logits; the files written.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
model.save_pretrained("saved")
again = AutoModelForCausalLM.from_pretrained("saved")
ids = torch.tensor([[1, 10, 20, 30]])
with torch.no_grad():
    a, b = model(ids).logits, again(ids).logits
print(sorted(os.listdir("saved")), torch.equal(a, b))
result = {"files": sorted(os.listdir("saved")), "same": torch.equal(a, b), "logits": b}
