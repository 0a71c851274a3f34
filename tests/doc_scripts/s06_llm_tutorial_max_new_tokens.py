# Transformers docs: llm_tutorial.md, "Common pitfalls" > "Generated output is too short/long".
# Changed from the doc: the import line (habana_assist for transformers), the checkpoint name
# (os.environ["HA_MODEL"]) and the device, "cpu" for "cuda" (no GPU here). What follows "# Checks" is ours.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
tokenizer.pad_token = tokenizer.eos_token  # Most LLMs don't have a pad token by default
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])

model_inputs = tokenizer(["A sequence of numbers: 1, 2"], return_tensors="pt").to("cpu")

# By default, the output will contain up to 20 tokens
generated_ids = model.generate(**model_inputs)
print(tokenizer.batch_decode(generated_ids, skip_special_tokens=True)[0])

# Setting `max_new_tokens` allows you to control the maximum length
generated_ids = model.generate(**model_inputs, max_new_tokens=50)
print(tokenizer.batch_decode(generated_ids, skip_special_tokens=True)[0])

# Checks: max_new_tokens bounds the new tokens (the prompt is returned too); fewer only after an eos.
prompt_len = model_inputs["input_ids"].shape[1]
new = generated_ids[0, prompt_len:]
assert 1 <= len(new) <= 50, generated_ids.shape
assert len(new) == 50 or new[-1].item() == tokenizer.eos_token_id, new
short = model.generate(**model_inputs, max_new_tokens=5)
assert short.shape[1] == prompt_len + 5 or short[0, -1].item() == tokenizer.eos_token_id, short
assert (short[0] == generated_ids[0, : short.shape[1]]).all()  # greedy: a shorter run is a prefix
