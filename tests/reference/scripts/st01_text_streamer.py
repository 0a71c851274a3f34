# TextStreamer printing the new text as it is generated (skip_prompt), against the decoded output.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TextStreamer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
inputs = tok("def parse_args():\n", return_tensors="pt")
out = model.generate(
    **inputs, max_new_tokens=20, do_sample=False, streamer=TextStreamer(tok, skip_prompt=True, skip_special_tokens=True)
)
print()
result = {"ids": out}
