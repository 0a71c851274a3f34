# MaxLengthCriteria given as a stopping criterion, beside max_new_tokens.
import os

import torch
from transformers import AutoModelForCausalLM, MaxLengthCriteria, StoppingCriteriaList

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 400, 401]])
out = model.generate(
    ids, max_new_tokens=10, do_sample=False, stopping_criteria=StoppingCriteriaList([MaxLengthCriteria(max_length=6)])
)
print(out.shape)
result = {"ids": out}
