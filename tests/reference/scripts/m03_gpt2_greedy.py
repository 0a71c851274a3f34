# A GPT-2 checkpoint (tiny, random): greedy ids and the logits of a forward.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_GPT2"])
ids = torch.tensor([[1, 11, 22, 33, 44]])
out = model.generate(ids, max_new_tokens=10, do_sample=False, pad_token_id=0)
with torch.no_grad():
    logits = model(ids).logits
print(type(model).__name__, out.tolist())
result = {"ids": out, "logits": logits}
