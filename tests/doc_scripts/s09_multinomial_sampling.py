# Transformers docs: generation_strategies.md (v4.4x), "Decoding strategies" > "Multinomial sampling".
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer, set_seed

set_seed(0)  # For reproducibility

checkpoint = os.environ["HA_MODEL"]
tokenizer = AutoTokenizer.from_pretrained(checkpoint)
model = AutoModelForCausalLM.from_pretrained(checkpoint)

prompt = "Today was an amazing day because"
inputs = tokenizer(prompt, return_tensors="pt")

outputs = model.generate(**inputs, do_sample=True, num_beams=1, max_new_tokens=100)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))

# Checks: up to 100 new tokens, all in the vocabulary; reproducible from the seed; a second call (the generator
# moved on) samples something else.
import torch  # noqa: E402 - where Transformers' documentation imports it

prompt_len = inputs["input_ids"].shape[1]
assert isinstance(outputs, torch.Tensor) and outputs.shape[0] == 1 and prompt_len < outputs.shape[1] <= prompt_len + 100
assert int(outputs.max()) < model.config.vocab_size and int(outputs.min()) >= 0
other = model.generate(**inputs, do_sample=True, num_beams=1, max_new_tokens=100)
set_seed(0)
again = model.generate(**inputs, do_sample=True, num_beams=1, max_new_tokens=100)
assert torch.equal(again, outputs), "set_seed(0) did not reproduce the sample"
assert not torch.equal(other, outputs), "two calls after one seed gave the same 100-token sample"
