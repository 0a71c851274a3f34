# Transformers docs: llm_tutorial.md, "Common pitfalls" > "Incorrect generation mode".
# Changed from the doc: the import lines (habana_assist for transformers), the checkpoint name
# (os.environ["HA_MODEL"]) and the device, "cpu" for "cuda" (no GPU here). What follows "# Checks" is ours.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])

# Set seed for reproducibility -- you don't need this unless you want full reproducibility
from habana_assist import set_seed  # noqa: E402 - where Transformers' documentation imports it

set_seed(42)

model_inputs = tokenizer(["I am a cat."], return_tensors="pt").to("cpu")

# LLM + greedy decoding = repetitive, boring output
generated_ids = model.generate(**model_inputs)
print(tokenizer.batch_decode(generated_ids, skip_special_tokens=True)[0])

# With sampling, the output becomes more creative!
generated_ids = model.generate(**model_inputs, do_sample=True)
print(tokenizer.batch_decode(generated_ids, skip_special_tokens=True)[0])

# Checks: set_seed makes sampling reproducible (the same seed, the same two calls, the same text); sampling
# differs from greedy here; both continue the prompt.
import torch  # noqa: E402 - where Transformers' documentation imports it

set_seed(42)
greedy_again = model.generate(**model_inputs)
sampled_again = model.generate(**model_inputs, do_sample=True)
assert torch.equal(sampled_again, generated_ids), "set_seed(42) did not reproduce the sampled output"
assert not torch.equal(greedy_again, generated_ids), "sampling gave the greedy output"
for out in (greedy_again, generated_ids):
    assert tokenizer.batch_decode(out, skip_special_tokens=True)[0].startswith("I am a cat.")
