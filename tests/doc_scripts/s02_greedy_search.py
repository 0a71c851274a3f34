# Transformers docs: generation_strategies.md (v4.4x), "Decoding strategies" > "Greedy Search".
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

prompt = "I look forward to"
checkpoint = os.environ["HA_MODEL"]

tokenizer = AutoTokenizer.from_pretrained(checkpoint)
inputs = tokenizer(prompt, return_tensors="pt")

model = AutoModelForCausalLM.from_pretrained(checkpoint)
outputs = model.generate(**inputs)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))

# Checks: torch in, torch out; (batch, prompt + new) int64; the prompt comes back first; greedy is the default
# and deterministic; the length limit is the model's generation_config (max_new_tokens).
import torch  # noqa: E402 - where Transformers' documentation imports it

assert isinstance(outputs, torch.Tensor) and outputs.dtype == torch.int64, (type(outputs), outputs.dtype)
prompt_len = inputs["input_ids"].shape[1]
assert outputs.shape[0] == 1 and prompt_len < outputs.shape[1] <= prompt_len + model.generation_config.max_new_tokens
assert torch.equal(outputs[:, :prompt_len], inputs["input_ids"])
assert tokenizer.batch_decode(outputs, skip_special_tokens=True)[0].startswith(prompt)
assert torch.equal(outputs, model.generate(**inputs, do_sample=False, num_beams=1))
