# Transformers docs: kv_cache.md (cache_explanation), "Disable the cache" (use_cache=False).
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

import torch

from habana_assist import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"], dtype=torch.float16, device_map="auto")
inputs = tokenizer("I like rock music because", return_tensors="pt").to(model.device)

model.generate(**inputs, do_sample=False, max_new_tokens=20, use_cache=False)

# Checks: without the cache the model recomputes everything and produces the same tokens as with it.
no_cache = model.generate(**inputs, do_sample=False, max_new_tokens=20, use_cache=False)
with_cache = model.generate(**inputs, do_sample=False, max_new_tokens=20, use_cache=True)
assert torch.equal(no_cache, with_cache), (no_cache, with_cache)
assert no_cache.shape[1] == inputs["input_ids"].shape[1] + 20 or no_cache[0, -1].item() == tokenizer.eos_token_id
