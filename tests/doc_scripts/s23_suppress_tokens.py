# Transformers docs: internal/generation_utils.md, SuppressTokensLogitsProcessor and
# SuppressTokensAtBeginLogitsProcessor examples (written for Whisper there; here the flags on a causal LM).
# Changed from the doc: the import line (habana_assist for transformers), the checkpoint name
# (os.environ["HA_MODEL"]), a text prompt for the audio input, and the suppressed token (the one greedy writes
# first here). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
inputs = tokenizer("def fibonacci(n):", return_tensors="pt")
prompt_len = inputs["input_ids"].shape[1]

outputs = model.generate(**inputs, max_new_tokens=8, return_dict_in_generate=True, output_scores=True)
token = outputs.sequences[0, prompt_len].item()  # what greedy writes first
print(outputs.scores[1][0, token])

# If we suppress it, it can't be generated anywhere
outputs = model.generate(
    **inputs, max_new_tokens=8, return_dict_in_generate=True, output_scores=True, suppress_tokens=[token]
)
print(outputs.scores[1][0, token])
suppressed = outputs

# With begin_suppress_tokens, it can't be generated in the first iteration, but it can in the others.
outputs = model.generate(
    **inputs, max_new_tokens=8, return_dict_in_generate=True, output_scores=True, begin_suppress_tokens=[token]
)
print(outputs.scores[0][0, token])
print(outputs.scores[-1][0, token])

# Checks: suppress_tokens sets the token's score to -inf at every step and it never appears;
# begin_suppress_tokens only at the first step.
ninf = float("-inf")
assert all(s[0, token].item() == ninf for s in suppressed.scores)
assert token not in suppressed.sequences[0, prompt_len:].tolist()
assert outputs.scores[0][0, token].item() == ninf and outputs.sequences[0, prompt_len].item() != token
assert all(s[0, token].item() != ninf for s in outputs.scores[1:])
