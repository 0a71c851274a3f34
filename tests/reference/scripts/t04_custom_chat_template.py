# A chat template set on a tokenizer that has none (the shipped one), used for a prompt.
import os

from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
tok.chat_template = (
    "{% for m in messages %}# {{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}# assistant:{% endif %}"
)
chat = [{"role": "user", "content": "sort a list"}]
text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
ids = tok.apply_chat_template(chat, tokenize=True, add_generation_prompt=True, return_dict=True)["input_ids"]
print(repr(text))
result = {"text": text, "ids": list(ids)}
