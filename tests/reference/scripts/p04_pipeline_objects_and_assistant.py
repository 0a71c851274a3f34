# A pipeline built from loaded objects, with an assistant model: greedy text.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
draft = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE_DRAFT"], dtype=torch.float32)
pipe = pipeline("text-generation", model=model, tokenizer=tok, assistant_model=draft)
out = pipe("for line in open(path):", max_new_tokens=12, do_sample=False)
print(out[0]["generated_text"])
result = {"out": out}
