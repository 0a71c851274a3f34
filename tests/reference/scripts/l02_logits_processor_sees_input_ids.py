# What a logits processor is given: input_ids' shape at each call, and the scores' shape.
import os

import torch
from transformers import AutoModelForCausalLM

calls = []


def record(input_ids, scores):
    calls.append((tuple(input_ids.shape), tuple(scores.shape), input_ids[0, -1].item()))
    return scores


model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
out = model.generate(torch.tensor([[1, 600, 601]]), max_new_tokens=3, do_sample=False, logits_processor=[record])
print(calls)
result = {"calls": calls, "ids": out}
