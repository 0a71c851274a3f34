# The other sampling filters (min_p, typical_p, epsilon_cutoff, eta_cutoff): the first step's processed scores.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 11, 12, 13, 14]])
result = {}
for name, kwargs in {
    "min_p": dict(min_p=0.05),
    "typical_p": dict(typical_p=0.8),
    "epsilon": dict(epsilon_cutoff=3e-3),
    "eta": dict(eta_cutoff=3e-3),
}.items():
    out = model.generate(
        ids, do_sample=True, max_new_tokens=1, top_k=0, return_dict_in_generate=True, output_scores=True, **kwargs
    )
    result[name] = out.scores[0]
    print(name, int(torch.isfinite(out.scores[0]).sum()))
