# The tokenizer on a batch: padding to the longest and to max_length, truncation, and the masks.
import os

from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
texts = ["def f():\n    pass", "x = 1", "for i in range(3):\n    print(i)\n"]
result = {
    "longest": tok(texts, padding=True)["input_ids"],
    "max_length": tok(texts, padding="max_length", max_length=12, truncation=True)["input_ids"],
    "mask": tok(texts, padding="max_length", max_length=12, truncation=True)["attention_mask"],
    "truncated": tok(texts[2], truncation=True, max_length=5)["input_ids"],
    "no_special": tok(texts[0], add_special_tokens=False)["input_ids"],
    "padding_side": tok.padding_side,
}
print(result["longest"])
