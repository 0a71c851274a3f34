# A decoding loop written by hand with the cache a forward returns: each step's logits and tokens.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 7, 8, 9]])
with torch.no_grad():
    out = model(ids, use_cache=True)
    past, steps, tokens = out.past_key_values, [out.logits[:, -1]], []
    for _ in range(4):
        token = steps[-1].argmax(-1, keepdim=True)
        tokens.append(int(token))
        out = model(token, past_key_values=past, use_cache=True)
        past = out.past_key_values
        steps.append(out.logits[:, -1])
print(tokens, past.get_seq_length())
result = {"tokens": tokens, "logits": torch.stack(steps), "length": past.get_seq_length()}
