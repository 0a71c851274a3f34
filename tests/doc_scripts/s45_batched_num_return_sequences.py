# Transformers docs: generation_strategies.md, "Customize text generation" (num_return_sequences with sampling)
# on a left-padded batch as llm_tutorial.md pads one.
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer, set_seed

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"], padding_side="left")
tokenizer.pad_token = tokenizer.eos_token  # Most LLMs don't have a pad token by default
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])

set_seed(0)
model_inputs = tokenizer(["def add(a, b):", "import"], return_tensors="pt", padding=True)
outputs = model.generate(**model_inputs, do_sample=True, num_return_sequences=3, max_new_tokens=16)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))

# Checks: batch * num_return_sequences rows, each prompt's copies adjacent; row r is what a batch of the repeated
# prompts gives with the same seed; the copies of a prompt differ.
import torch  # noqa: E402 - where Transformers' documentation imports it

assert outputs.shape[0] == 6, outputs.shape
width = model_inputs["input_ids"].shape[1]
for row in range(6):
    assert torch.equal(outputs[row, :width], model_inputs["input_ids"][row // 3]), row
texts = tokenizer.batch_decode(outputs, skip_special_tokens=True)
assert all(t.startswith("def add(a, b):") for t in texts[:3]) and all(t.startswith("import") for t in texts[3:])
set_seed(0)
repeated = {k: v.repeat_interleave(3, dim=0) for k, v in model_inputs.items()}
assert torch.equal(model.generate(**repeated, do_sample=True, max_new_tokens=16), outputs)
assert not (torch.equal(outputs[0], outputs[1]) and torch.equal(outputs[1], outputs[2]))
