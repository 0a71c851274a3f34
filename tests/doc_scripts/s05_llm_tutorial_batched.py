# Transformers docs: llm_tutorial.md, "Generate text" (batched inputs, padded on the left).
# Changed from the doc: the import line (habana_assist for transformers), the checkpoint name
# (os.environ["HA_MODEL"]) and the device, "cpu" for "cuda" (no GPU here). What follows "# Checks" is ours.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"], padding_side="left")

tokenizer.pad_token = tokenizer.eos_token  # Most LLMs don't have a pad token by default
model_inputs = tokenizer(["A list of colors: red, blue", "Portugal is"], return_tensors="pt", padding=True).to("cpu")
generated_ids = model.generate(**model_inputs)
print(tokenizer.batch_decode(generated_ids, skip_special_tokens=True))

# Checks: two rows; the shorter prompt is padded on the left with the eos (now the pad token) and masked; each
# row continues its own prompt and is exactly what that prompt generates alone.
import torch  # noqa: E402 - where Transformers' documentation imports it

assert tokenizer.pad_token == tokenizer.eos_token and tokenizer.pad_token_id == tokenizer.eos_token_id
ids, mask = model_inputs["input_ids"], model_inputs["attention_mask"]
assert ids.shape[0] == 2 and generated_ids.shape[0] == 2, generated_ids.shape
assert mask[1, 0] == 0 and ids[1, 0] == tokenizer.eos_token_id and mask[0].all(), (ids, mask)
texts = tokenizer.batch_decode(generated_ids, skip_special_tokens=True)
assert texts[0].startswith("A list of colors: red, blue") and texts[1].startswith("Portugal is"), texts
width = ids.shape[1]
for row, prompt in enumerate(["A list of colors: red, blue", "Portugal is"]):
    alone_inputs = tokenizer([prompt], return_tensors="pt")
    alone = model.generate(**alone_inputs)[0, alone_inputs["input_ids"].shape[1] :]
    got = generated_ids[row, width:]
    assert torch.equal(got[: len(alone)], alone), (row, got, alone)
    assert (got[len(alone) :] == model.generation_config.pad_token_id).all(), (row, got)  # ended early: padded
