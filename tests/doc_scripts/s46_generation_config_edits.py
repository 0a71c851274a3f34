# Transformers docs: internal/generation_utils.md, WhisperTimeStampLogitsProcessor example ("No timestamps &
# change EOS": model.generation_config.eos_token_id = ... selects the token that ends the sequence), on a causal LM.
# Changed from the doc: the import line (habana_assist for transformers), the checkpoint name
# (os.environ["HA_MODEL"]), a text prompt for the audio input, and the eos token (one this model writes here).
# What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
inputs = tokenizer("def fibonacci(n):", return_tensors="pt")

generated_ids = model.generate(**inputs, max_new_tokens=24)
transcription = tokenizer.batch_decode(generated_ids, skip_special_tokens=True)[0]
print("Transcription:", transcription)

# This allows the user to select a specific token to terminate the sequence on, in this case the 5th new token
prompt_len = inputs["input_ids"].shape[1]
new_eos = generated_ids[0, prompt_len + 4].item()
model.generation_config.eos_token_id = new_eos
generated_ids_eos = model.generate(**inputs, max_new_tokens=24)
transcription = tokenizer.batch_decode(generated_ids_eos, skip_special_tokens=True)[0]
print("Transcription:", transcription)

# Edits of other fields take effect the same way.
model.generation_config.eos_token_id = tokenizer.eos_token_id
model.generation_config.max_new_tokens = 6
generated_ids_short = model.generate(**inputs)

# Checks: with the edited eos the output ends at that token's first new occurrence and is the plain output up to
# there; max_new_tokens set on model.generation_config bounds the next call.
import torch  # noqa: E402 - where Transformers' documentation imports it

first = generated_ids[0, prompt_len:].tolist().index(new_eos)
assert generated_ids_eos.shape[1] == prompt_len + first + 1, (generated_ids_eos.shape, first)
assert torch.equal(generated_ids_eos[0], generated_ids[0, : generated_ids_eos.shape[1]])
assert generated_ids_short.shape[1] == prompt_len + 6, generated_ids_short.shape
assert torch.equal(generated_ids_short[0], generated_ids[0, : prompt_len + 6])
