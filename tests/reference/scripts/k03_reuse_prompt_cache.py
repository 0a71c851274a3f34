# Re-using a prompt's cache for two continuations (the cache copied for each), as the caching guide shows.
import copy
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
prefix = tok("# Utilities for files.\nimport os\n", return_tensors="pt")
with torch.no_grad():
    prompt_cache = model(**prefix, past_key_values=DynamicCache()).past_key_values
outs = []
for suffix in ["def read(path):", "def write(path, data):"]:
    inputs = tok("# Utilities for files.\nimport os\n" + suffix, return_tensors="pt")
    out = model.generate(**inputs, past_key_values=copy.deepcopy(prompt_cache), max_new_tokens=6, do_sample=False)
    outs.append(tok.decode(out[0], skip_special_tokens=True))
    print(repr(outs[-1]))
result = {"texts": outs, "prompt_length": prompt_cache.get_seq_length()}
