# pipeline("text-generation") on the shipped model, greedy: the generated text.
import os

from transformers import pipeline

pipe = pipeline("text-generation", model=os.environ["PYCODE"], dtype="float32")
out = pipe("def fibonacci(n):", max_new_tokens=12, do_sample=False)
print(out[0]["generated_text"])
result = {"out": out}
