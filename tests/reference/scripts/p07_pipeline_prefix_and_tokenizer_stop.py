# Pipeline arguments: a prefix put before the prompt, and stop_strings with the pipeline's tokenizer passed along.
import os

from transformers import pipeline

pipe = pipeline("text-generation", model=os.environ["PYCODE"], dtype="float32")
prefixed = pipe("return x", prefix="def f(x):\n    ", max_new_tokens=6, do_sample=False)
stopped = pipe("def f(x):\n", max_new_tokens=20, do_sample=False, stop_strings=["\n"], tokenizer=pipe.tokenizer)
print(repr(prefixed[0]["generated_text"]), repr(stopped[0]["generated_text"]))
result = {"prefixed": prefixed, "stopped": stopped}
