# Beam search asked for: what each library does with num_beams=2.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
out = model.generate(torch.tensor([[1, 50, 51]]), max_new_tokens=4, num_beams=2, do_sample=False)
print(out.shape)
result = {"ids": out}
