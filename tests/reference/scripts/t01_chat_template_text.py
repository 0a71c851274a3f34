# apply_chat_template to text: with and without the generation prompt, and continuing the last message.
import os

from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["TINY_QWEN3"])
chat = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello! How"}]
result = {
    "plain": tok.apply_chat_template(chat[:1], tokenize=False),
    "prompt": tok.apply_chat_template(chat[:1], tokenize=False, add_generation_prompt=True),
    "no_thinking": tok.apply_chat_template(chat[:1], tokenize=False, add_generation_prompt=True, enable_thinking=False),
    "continued": tok.apply_chat_template(chat, tokenize=False, continue_final_message=True),
}
print(result["prompt"])
