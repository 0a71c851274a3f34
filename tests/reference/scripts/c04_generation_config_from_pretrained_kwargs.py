# GenerationConfig.from_pretrained with an override and an unknown key (return_unused_kwargs), and to_diff_dict.
import os

from transformers import GenerationConfig

config, unused = GenerationConfig.from_pretrained(os.environ["PYCODE"], top_k=7, foo="bar", return_unused_kwargs=True)
print(config.top_k, unused)
d = config.to_diff_dict()
d.pop("transformers_version", None)
result = {"diff": d, "unused": unused, "top_k": config.top_k, "max_new_tokens": config.max_new_tokens}
