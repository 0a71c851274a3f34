# Transformers docs: internal/generation_utils.md, ForcedEOSTokenLogitsProcessor example.
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])

inputs = tokenizer("A sequence: 1, 2, 3", return_tensors="pt")

# By default, it continues generating according to the model's logits
outputs = model.generate(**inputs, max_new_tokens=10)
print(tokenizer.batch_decode(outputs)[0])

# `forced_eos_token_id` ensures the generation ends with a EOS token
forced = model.generate(**inputs, max_new_tokens=10, forced_eos_token_id=tokenizer.eos_token_id)
print(tokenizer.batch_decode(forced)[0])

# Checks: the last token is the eos, in place of the 10th new token (the first 9 are the plain output's).
import torch  # noqa: E402 - where Transformers' documentation imports it

prompt_len = inputs["input_ids"].shape[1]
assert outputs.shape[1] == prompt_len + 10 and tokenizer.eos_token_id not in outputs[0, prompt_len:].tolist()
assert forced.shape[1] == prompt_len + 10, forced.shape
assert forced[0, -1].item() == tokenizer.eos_token_id, forced
assert torch.equal(forced[0, :-1], outputs[0, :-1])
assert tokenizer.batch_decode(forced)[0].endswith(tokenizer.eos_token)
