# Transformers docs: generation_strategies.md (v4.4x), "Speculative Decoding", with sampling (set_seed,
# do_sample=True, temperature=0.5).
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint names
# (os.environ["HA_MODEL"], os.environ["HA_DRAFT"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer, set_seed

set_seed(42)  # For reproducibility

prompt = "Alice and Bob"
checkpoint = os.environ["HA_MODEL"]
assistant_checkpoint = os.environ["HA_DRAFT"]

tokenizer = AutoTokenizer.from_pretrained(checkpoint)
inputs = tokenizer(prompt, return_tensors="pt")

model = AutoModelForCausalLM.from_pretrained(checkpoint)
assistant_model = AutoModelForCausalLM.from_pretrained(assistant_checkpoint)
outputs = model.generate(**inputs, assistant_model=assistant_model, do_sample=True, temperature=0.5)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))

# Checks: the prompt first, then tokens of the vocabulary up to the length limit; the seed reproduces the sample.
import torch  # noqa: E402 - where Transformers' documentation imports it

prompt_len = inputs["input_ids"].shape[1]
assert torch.equal(outputs[:, :prompt_len], inputs["input_ids"])
assert prompt_len < outputs.shape[1] <= prompt_len + model.generation_config.max_new_tokens
assert 0 <= int(outputs.min()) and int(outputs.max()) < model.config.vocab_size
set_seed(42)
again = model.generate(**inputs, assistant_model=assistant_model, do_sample=True, temperature=0.5)
assert torch.equal(again, outputs)
