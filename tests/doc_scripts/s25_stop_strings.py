# Transformers docs: internal/generation_utils.md, StopStringCriteria example.
# Changed from the doc: the import line (habana_assist for transformers), the checkpoint name
# (os.environ["HA_MODEL"]) and the stop string ("apache.org", which this code model writes here, for "Texas").
# What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
inputs = tokenizer("The biggest states in the USA by land area:", return_tensors="pt")

gen_out = model.generate(**inputs)
print(tokenizer.batch_decode(gen_out, skip_special_tokens=True)[0])
plain = gen_out

# Passing one or more stop strings will halt generation after those strings are emitted
# Note that generating with stop strings requires you to pass the tokenizer too
gen_out = model.generate(**inputs, stop_strings=["apache.org"], tokenizer=tokenizer)
print(tokenizer.batch_decode(gen_out, skip_special_tokens=True)[0])

# Checks: generation ends with the token that completes the first "apache.org" (the string spans tokens); the
# output is the plain output up to there.
import torch  # noqa: E402 - where Transformers' documentation imports it

prompt_len = inputs["input_ids"].shape[1]
text = tokenizer.decode(gen_out[0, prompt_len:], skip_special_tokens=True)
before = tokenizer.decode(gen_out[0, prompt_len:-1], skip_special_tokens=True)
assert "apache.org" in tokenizer.decode(plain[0, prompt_len:], skip_special_tokens=True)
assert "apache.org" in text and "apache.org" not in before, (text, before)
assert gen_out.shape[1] < plain.shape[1] and torch.equal(gen_out[0], plain[0, : gen_out.shape[1]])
