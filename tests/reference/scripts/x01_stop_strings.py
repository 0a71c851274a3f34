# stop_strings with the tokenizer: generation stops right after the string, also across tokens.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
inputs = tok("def fibonacci(n):\n", return_tensors="pt")
full = model.generate(**inputs, max_new_tokens=24, do_sample=False)
text = tok.decode(full[0, inputs.input_ids.shape[1] :])
stop = text[5:9]
out = model.generate(**inputs, max_new_tokens=24, do_sample=False, stop_strings=[stop], tokenizer=tok)
print(repr(stop), repr(tok.decode(out[0, inputs.input_ids.shape[1] :])))
result = {"stop": stop, "ids": out}
