# bad_words_ids and sequence_bias: the tokens greedy picks first are banned or pushed down.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
ids = tok("def main():\n    print(", return_tensors="pt").input_ids
plain = model.generate(ids, max_new_tokens=8, do_sample=False)
first = int(plain[0, ids.shape[1]])
banned = model.generate(ids, max_new_tokens=8, do_sample=False, bad_words_ids=[[first]])
biased = model.generate(ids, max_new_tokens=8, do_sample=False, sequence_bias={(first,): -10.0})
print(first, banned[0, ids.shape[1] :].tolist(), biased[0, ids.shape[1] :].tolist())
result = {"plain": plain, "banned": banned, "biased": biased}
