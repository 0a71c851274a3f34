# A byte-level BPE tokenizer (Qwen3's files): non-ASCII text, special tokens in the text, decode of partial bytes.
import os

from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["TINY_QWEN3"])
text = "naïve café — 東京 <|im_start|>user\nhi<|im_end|>"
ids = tok(text)["input_ids"]
result = {
    "ids": ids,
    "decode": tok.decode(ids),
    "skip": tok.decode(ids, skip_special_tokens=True),
    "partial": tok.decode(tok("東")["input_ids"][:1] + [ids[-1]]),
    "special": [tok.eos_token, tok.pad_token, tok.bos_token, tok.eos_token_id],
}
print(result["skip"])
