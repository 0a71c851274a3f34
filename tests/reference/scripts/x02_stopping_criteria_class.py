# A StoppingCriteria of one's own (stop once a token has appeared twice), in a StoppingCriteriaList.
import os

import torch
from transformers import AutoModelForCausalLM, StoppingCriteria, StoppingCriteriaList


class RepeatedToken(StoppingCriteria):
    def __call__(self, input_ids, scores, **kwargs):
        last = input_ids[:, -1:]
        return (input_ids[:, :-1] == last).any(dim=-1)


model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 300, 301, 302]])
out = model.generate(ids, max_new_tokens=20, do_sample=False, stopping_criteria=StoppingCriteriaList([RepeatedToken()]))
print(out.tolist())
result = {"ids": out}
