# Assisted generation's options on the assistant's generation_config: num_assistant_tokens and its schedule.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
draft = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA_DRAFT"])
draft.generation_config.num_assistant_tokens = 3
draft.generation_config.num_assistant_tokens_schedule = "constant"
draft.generation_config.assistant_confidence_threshold = 0.0
ids = torch.tensor([[1, 800, 801, 802, 803]])
out = model.generate(ids, assistant_model=draft, max_new_tokens=12, do_sample=False)
plain = model.generate(ids, max_new_tokens=12, do_sample=False)
print(torch.equal(out, plain))
result = {"ids": out, "plain": plain, "num_assistant_tokens": draft.generation_config.num_assistant_tokens}
