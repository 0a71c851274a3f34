# apply_chat_template with its defaults (tokenize=True): what comes back.
import os

from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["TINY_QWEN3"])
out = tok.apply_chat_template([{"role": "user", "content": "2 + 2?"}], add_generation_prompt=True)
print(type(out).__name__)
result = {"type": type(out).__name__, "ids": out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out}
