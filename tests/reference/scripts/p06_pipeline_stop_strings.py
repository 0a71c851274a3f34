# stop_strings given to a pipeline call without a tokenizer argument.
import os

from transformers import pipeline

pipe = pipeline("text-generation", model=os.environ["PYCODE"], dtype="float32")
stopped = pipe("def f(x):\n", max_new_tokens=20, do_sample=False, stop_strings=["\n"])
print(repr(stopped[0]["generated_text"]))
result = {"stopped": stopped}
