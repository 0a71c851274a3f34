# from_pretrained with a config changed by hand (AutoConfig, then config=).
import os

import torch
from transformers import AutoConfig, AutoModelForCausalLM

config = AutoConfig.from_pretrained(os.environ["TINY_LLAMA"])
config.pad_token_id = 5
model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"], config=config)
ids = torch.tensor([[1, 50, 51]])
out = model.generate(ids, max_new_tokens=4, do_sample=False)
print(model.config.pad_token_id, out.tolist())
result = {"pad": model.config.pad_token_id, "ids": out}
