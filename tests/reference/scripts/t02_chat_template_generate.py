# apply_chat_template to tensors, then generate and decode only the new tokens.
import os

from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["TINY_QWEN3"])
model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_QWEN3"])
chat = [{"role": "user", "content": "Write a haiku."}]
inputs = tok.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
out = model.generate(**inputs, max_new_tokens=8, do_sample=False)
new = out[0, inputs["input_ids"].shape[1] :]
print(repr(tok.decode(new, skip_special_tokens=True)))
result = {"ids": out, "keys": sorted(inputs.keys())}
