# A pipeline asked for token ids (return_tensors=True).
import os

from transformers import pipeline

pipe = pipeline("text-generation", model=os.environ["PYCODE"], dtype="float32")
out = pipe("def greet(name):", max_new_tokens=6, do_sample=False, return_tensors=True)
print(sorted(out[0]))
result = {"out": out}
