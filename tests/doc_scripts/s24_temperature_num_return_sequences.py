# Transformers docs: internal/generation_utils.md, TemperatureLogitsWarper example.
# Changed from the doc: the import lines (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

import torch

from habana_assist import AutoModelForCausalLM, AutoTokenizer, set_seed

set_seed(0)  # for reproducibility

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
model.config.pad_token_id = model.config.eos_token_id
inputs = tokenizer(["Hugging Face Company is"], return_tensors="pt")

# With temperature=1.0, the default, we consistently get random outputs due to random sampling.
generate_kwargs = {"max_new_tokens": 10, "do_sample": True, "temperature": 1.0, "num_return_sequences": 2}
outputs = model.generate(**inputs, **generate_kwargs)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))
hot = outputs

# However, with temperature close to 0, it approximates greedy decoding strategies (invariant)
generate_kwargs["temperature"] = 0.0001
outputs = model.generate(**inputs, **generate_kwargs)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))

# Checks: num_return_sequences=2 gives 2 rows of the one prompt; at temperature 1 they differ; near 0 both are the
# greedy output.
assert model.config.pad_token_id == model.config.eos_token_id
assert hot.shape[0] == 2 and outputs.shape[0] == 2, (hot.shape, outputs.shape)
prompt_len = inputs["input_ids"].shape[1]
assert (hot[:, :prompt_len] == inputs["input_ids"]).all()
assert not torch.equal(hot[0], hot[1]), hot
greedy = model.generate(**inputs, max_new_tokens=10)
assert torch.equal(outputs[0], greedy[0]) and torch.equal(outputs[1], greedy[0]), (outputs, greedy)
