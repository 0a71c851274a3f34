# Transformers docs: assisted_decoding.md, "Self-speculative decoding" (assistant_early_exit).
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

prompt = "Alice and Bob"
checkpoint = os.environ["HA_MODEL"]

tokenizer = AutoTokenizer.from_pretrained(checkpoint)
inputs = tokenizer(prompt, return_tensors="pt")

model = AutoModelForCausalLM.from_pretrained(checkpoint)
outputs = model.generate(**inputs, assistant_early_exit=4, do_sample=False, max_new_tokens=20)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))

# Checks: "the final generated result ... is the same as the original model's generation": greedy output equals
# plain greedy output, for this and other exit layers.
import torch  # noqa: E402 - where Transformers' documentation imports it

plain = model.generate(**inputs, do_sample=False, max_new_tokens=20)
assert torch.equal(outputs, plain), (outputs, plain)
for layer in (1, model.config.num_hidden_layers - 1):
    assert torch.equal(model.generate(**inputs, assistant_early_exit=layer, do_sample=False, max_new_tokens=20), plain)
