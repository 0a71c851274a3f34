"""SmolLM3 (SmolLM3ForCausalLM): Llama's tensors; every no_rope_layer_interval-th layer (or those no_rope_layers
marks 0) has no rotary, and with use_sliding_window those layers slide."""

from .family import Family
from .llama import LLAMA_LIKE, REQUIRED, TENSORS

FAMILY = Family(
    architecture="SmolLM3ForCausalLM",
    model_type="smollm3",
    title="SmolLM3",
    required=REQUIRED,
    defaults={
        **LLAMA_LIKE,
        "max_position_embeddings": 32768,
        "num_key_value_heads": 4,
        "rope_theta": 2000000.0,
        "pad_token_id": 128004,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "use_sliding_window": False,
        "no_rope_layers": None,
        "no_rope_layer_interval": 4,
        "layer_types": None,
        "tie_word_embeddings": True,
    },
    norm="rms",
    eps="rms_norm_eps",
    act="hidden_act",
    gated_mlp=True,
    attention_bias="field",
    mlp_bias="field",
    qk_norm=False,
    windows="nope",
    rotary="nope",
    tensors=TENSORS,
    transformers_lacks=("head_dim",),
)
