# Bad values in a GenerationConfig: what validate() refuses, and what generate() then does with them.
import os

import torch
from transformers import AutoModelForCausalLM, GenerationConfig

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 5, 6, 7]])
outcomes = {}
for name, kwargs in {
    "negative_max_new_tokens": dict(max_new_tokens=-1),
    "temperature_zero": dict(do_sample=True, temperature=0.0, max_new_tokens=2),
    "top_p_above_one": dict(do_sample=True, top_p=1.5, max_new_tokens=2),
    "ok": dict(do_sample=True, top_k=5, max_new_tokens=2),
}.items():
    for step in ("validate", "generate"):
        try:
            config = GenerationConfig(**kwargs)
            config.validate() if step == "validate" else model.generate(ids, generation_config=config)
            outcomes[f"{step} {name}"] = "ok"
        except ValueError:
            outcomes[f"{step} {name}"] = "ValueError"
print(outcomes)
result = outcomes
