# return_dict_in_generate with output_scores and output_logits: the fields, their shapes, their values.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
inputs = tok("def is_prime(n):", return_tensors="pt")
out = model.generate(
    **inputs,
    max_new_tokens=5,
    do_sample=False,
    return_dict_in_generate=True,
    output_scores=True,
    output_logits=True,
    repetition_penalty=1.2,
)
print(type(out).__name__, out.sequences.shape, len(out.scores), out.scores[0].shape, out.logits[0].dtype)
result = {"sequences": out.sequences, "scores": torch.stack(out.scores), "logits": torch.stack(out.logits)}
