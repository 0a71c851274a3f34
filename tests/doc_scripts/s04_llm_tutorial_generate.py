# Transformers docs: llm_tutorial.md, "Generate text".
# Changed from the doc: the import lines (habana_assist for transformers), the checkpoint name
# (os.environ["HA_MODEL"]) and the device, "cpu" for "cuda" (no GPU here). What follows "# Checks" is ours.
import os

from habana_assist import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"], device_map="auto", load_in_4bit=True)

from habana_assist import AutoTokenizer  # noqa: E402 - where Transformers' documentation imports it

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"], padding_side="left")
model_inputs = tokenizer(["A list of colors: red, blue"], return_tensors="pt").to("cpu")

generated_ids = model.generate(**model_inputs)
print(tokenizer.batch_decode(generated_ids, skip_special_tokens=True)[0])

# Checks: the decoded text continues the prompt; the attention mask came along; output is torch.
import torch  # noqa: E402 - where Transformers' documentation imports it

assert tokenizer.padding_side == "left"
assert isinstance(model_inputs["attention_mask"], torch.Tensor) and bool(model_inputs["attention_mask"].all())
assert isinstance(generated_ids, torch.Tensor) and generated_ids.shape[0] == 1
text = tokenizer.batch_decode(generated_ids, skip_special_tokens=True)[0]
assert text.startswith("A list of colors: red, blue") and len(text) > len("A list of colors: red, blue"), text
