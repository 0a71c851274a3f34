# Sampling with temperature, top_k and top_p: the first step's processed scores (the tokens drawn differ by
# generator, so only the first step, whose prefix is the prompt on both sides, is compared).
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
inputs = tok("def merge_sort(items):", return_tensors="pt")
torch.manual_seed(0)
out = model.generate(
    **inputs,
    do_sample=True,
    temperature=0.7,
    top_k=20,
    top_p=0.9,
    max_new_tokens=4,
    return_dict_in_generate=True,
    output_scores=True,
)
first = out.scores[0]
print(out.sequences.shape, int(torch.isfinite(first).sum()))
result = {"first_scores": first, "kept": torch.isfinite(first), "shape": list(out.sequences.shape)}
