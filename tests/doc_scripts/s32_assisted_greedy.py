# Transformers docs: assisted_decoding.md, "Speculative decoding" (greedy search).
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint names
# (os.environ["HA_MODEL"], os.environ["HA_DRAFT"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
assistant_model = AutoModelForCausalLM.from_pretrained(os.environ["HA_DRAFT"])
inputs = tokenizer("Hugging Face is an open-source company", return_tensors="pt")

outputs = model.generate(**inputs, assistant_model=assistant_model)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))

# Checks: greedy assisted generation returns exactly what the model alone returns (torch, same shape).
import torch  # noqa: E402 - where Transformers' documentation imports it

plain = model.generate(**inputs)
assert isinstance(outputs, torch.Tensor) and outputs.dtype == torch.int64
assert torch.equal(outputs, plain), (outputs, plain)
assert outputs.shape[1] > inputs["input_ids"].shape[1]
