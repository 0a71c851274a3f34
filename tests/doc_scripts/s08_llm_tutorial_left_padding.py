# Transformers docs: llm_tutorial.md, "Common pitfalls" > "Wrong padding side" (the left-padded half; right
# padding, which the doc shows going wrong, is refused by this package).
# Changed from the doc: the import line (habana_assist for transformers), the checkpoint name
# (os.environ["HA_MODEL"]) and the device, "cpu" for "cuda" (no GPU here). What follows "# Checks" is ours.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])

# With left-padding, it works as expected!
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"], padding_side="left")
tokenizer.pad_token = tokenizer.eos_token  # Most LLMs don't have a pad token by default
model_inputs = tokenizer(["1, 2, 3", "A, B, C, D, E"], padding=True, return_tensors="pt").to("cpu")
generated_ids = model.generate(**model_inputs)
print(tokenizer.batch_decode(generated_ids, skip_special_tokens=True)[0])

# Checks: the short prompt is padded on the left; its row is what "1, 2, 3" gives alone.
import torch  # noqa: E402 - where Transformers' documentation imports it

ids, mask = model_inputs["input_ids"], model_inputs["attention_mask"]
n_pad = int((mask[0] == 0).sum())
assert n_pad > 0 and not mask[0, :n_pad].any() and mask[0, n_pad:].all(), mask
assert (ids[0, :n_pad] == tokenizer.eos_token_id).all(), ids
alone_inputs = tokenizer(["1, 2, 3"], return_tensors="pt")
alone = model.generate(**alone_inputs)[0, alone_inputs["input_ids"].shape[1] :]
row = generated_ids[0, ids.shape[1] :]
assert torch.equal(row[: len(alone)], alone), (row, alone)
assert tokenizer.batch_decode(generated_ids, skip_special_tokens=True)[0].startswith("1, 2, 3")
