# The shipped model's generation_config (from its generation_config.json), and an edit to it taking effect.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
gc = model.generation_config
print(gc.max_new_tokens, gc.eos_token_id, gc.pad_token_id, gc.do_sample)
ids = torch.tensor([[1, 909, 289]])
model.generation_config.max_new_tokens = 4
out = model.generate(ids)
print(out.shape)
result = {
    "fields": [gc.max_new_tokens, gc.eos_token_id, gc.bos_token_id, gc.pad_token_id, gc.do_sample, gc.top_k],
    "ids": out,
    "diff": gc.to_diff_dict(),
}
