# decode with and without special tokens, batch_decode, tokenize, and the special tokens' names and ids.
import os

from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
ids = tok("if x:\n    return  y  # done", return_tensors=None)["input_ids"]
result = {
    "decode": tok.decode(ids),
    "decode_skip": tok.decode(ids, skip_special_tokens=True),
    "batch": tok.batch_decode([ids, ids[:3]], skip_special_tokens=True),
    "tokens": tok.tokenize("if x:\n    return  y"),
    "convert": tok.convert_ids_to_tokens(ids[:4]),
    "special": [
        tok.bos_token,
        tok.eos_token,
        tok.pad_token,
        tok.unk_token,
        tok.bos_token_id,
        tok.eos_token_id,
        tok.pad_token_id,
    ],
    "len": len(tok),
}
print(result["decode"])
