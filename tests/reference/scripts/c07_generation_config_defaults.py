# What a new GenerationConfig holds before anything is set.
from transformers import GenerationConfig

config = GenerationConfig()
fields = [
    "max_length",
    "max_new_tokens",
    "min_length",
    "do_sample",
    "num_beams",
    "use_cache",
    "temperature",
    "top_k",
    "top_p",
    "typical_p",
    "repetition_penalty",
    "no_repeat_ngram_size",
    "num_return_sequences",
    "output_scores",
    "return_dict_in_generate",
    "pad_token_id",
    "eos_token_id",
    "num_assistant_tokens",
    "num_assistant_tokens_schedule",
    "assistant_confidence_threshold",
    "max_matching_ngram_size",
]
values = {name: getattr(config, name) for name in fields}
print(values)
result = {"unset": [name for name in fields if values[name] is None]}
