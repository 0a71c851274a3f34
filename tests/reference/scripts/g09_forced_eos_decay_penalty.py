# forced_eos_token_id at max_length, and exponential_decay_length_penalty pushing eos up.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
ids = tok("def square(x):", return_tensors="pt").input_ids
forced = model.generate(ids, max_new_tokens=5, do_sample=False, forced_eos_token_id=tok.eos_token_id)
decay = model.generate(
    ids,
    max_new_tokens=20,
    do_sample=False,
    exponential_decay_length_penalty=(2, 3.0),
    return_dict_in_generate=True,
    output_scores=True,
)
print(forced[0, -1].item() == tok.eos_token_id, decay.sequences.shape)
result = {"forced": forced, "decay": decay.sequences, "eos_scores": [s[0, tok.eos_token_id] for s in decay.scores]}
