# A pipeline over a list of prompts, return_full_text=False and batch_size=2.
import os

from transformers import pipeline

pipe = pipeline("text-generation", model=os.environ["PYCODE"], dtype="float32")
prompts = ["import json\n", "class Point:\n    def __init__(self, x, y):", "# sum the list\n"]
out = pipe(prompts, max_new_tokens=8, do_sample=False, return_full_text=False, batch_size=2)
for item in out:
    print(repr(item[0]["generated_text"]))
result = {"out": out}
