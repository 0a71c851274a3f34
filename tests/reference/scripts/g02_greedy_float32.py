# Greedy generation of the shipped model in float32: ids, text, shapes.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
inputs = tok("import os\nimport sys\n\n\ndef main(", return_tensors="pt")
out = model.generate(**inputs, max_new_tokens=16, do_sample=False)
print(out.shape, out.dtype)
print(tok.batch_decode(out, skip_special_tokens=True)[0])
result = {"ids": out, "prompt_ids": inputs["input_ids"], "mask": inputs["attention_mask"]}
