# GenerationConfig saved and loaded again: the file's keys and the loaded values.
import json
import os

from transformers import GenerationConfig

config = GenerationConfig(do_sample=True, temperature=0.6, top_p=0.85, max_new_tokens=40, eos_token_id=[2, 7])
config.save_pretrained("saved")
with open(os.path.join("saved", "generation_config.json")) as f:
    saved = json.load(f)
saved.pop("transformers_version", None)
loaded = GenerationConfig.from_pretrained("saved")
print(sorted(saved))
result = {
    "saved": saved,
    "loaded": [
        loaded.do_sample,
        loaded.temperature,
        loaded.top_p,
        loaded.max_new_tokens,
        loaded.eos_token_id,
        loaded.top_k,
    ],
}
