# What a loaded model says about itself: config fields, dtype, device, parameter count, class name.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
c = model.config
result = {
    "class": type(model).__name__,
    "config": [
        c.model_type,
        c.vocab_size,
        c.hidden_size,
        c.num_hidden_layers,
        c.num_attention_heads,
        c.num_key_value_heads,
        c.max_position_embeddings,
        c.rms_norm_eps,
        c.tie_word_embeddings,
    ],
    "dtype": str(model.dtype),
    "device": str(model.device),
    "parameters": model.num_parameters(),
    "training": model.training,
}
print(result)
