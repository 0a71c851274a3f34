# TextStreamer in assisted generation (the shipped draft): the streamed text is the output's.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TextStreamer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
draft = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE_DRAFT"], dtype=torch.float32)
inputs = tok("def read_file(path):\n", return_tensors="pt")
out = model.generate(
    **inputs, assistant_model=draft, max_new_tokens=24, do_sample=False, streamer=TextStreamer(tok, skip_prompt=True)
)
print()
result = {"ids": out}
