# eos_token_id as a list (stop at a newline token too) in a batch: the stopped row is padded with pad_token_id.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
newline = tok.convert_tokens_to_ids("\n")
inputs = tok(["def f(x):\n    return", "import"], return_tensors="pt", padding=True)
out = model.generate(
    **inputs,
    max_new_tokens=12,
    do_sample=False,
    eos_token_id=[tok.eos_token_id, newline],
    pad_token_id=tok.pad_token_id,
)
print(newline, out.tolist())
result = {"ids": out}
