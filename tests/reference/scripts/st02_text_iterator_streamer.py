# TextIteratorStreamer with generate() in a thread: the pieces joined, and the whole text.
import os
from threading import Thread

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TextIteratorStreamer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
inputs = tok("import os\n", return_tensors="pt")
streamer = TextIteratorStreamer(tok, skip_prompt=True)
thread = Thread(target=model.generate, kwargs=dict(**inputs, streamer=streamer, max_new_tokens=16, do_sample=False))
thread.start()
pieces = [piece for piece in streamer]
thread.join()
print("".join(pieces))
result = {"text": "".join(pieces), "count": len(pieces) > 1}
