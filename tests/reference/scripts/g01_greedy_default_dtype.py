# Greedy generation of the shipped model as a user loads it (no dtype): ids and text.
import os

from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"])
inputs = tok("def fibonacci(n):", return_tensors="pt")
out = model.generate(**inputs, max_new_tokens=12, do_sample=False)
text = tok.decode(out[0], skip_special_tokens=True)
print(text)
result = {"ids": out, "dtype": str(model.dtype)}
