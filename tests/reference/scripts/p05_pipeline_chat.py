# A chat through the pipeline (Qwen3's chat template, a tiny random model): the messages that come back.
import os

from transformers import pipeline

pipe = pipeline("text-generation", model=os.environ["TINY_QWEN3"])
chat = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a prime."}]
out = pipe(chat, max_new_tokens=6, do_sample=False)
messages = out[0]["generated_text"]
print(len(messages), messages[-1]["role"])
result = {"messages": messages}
