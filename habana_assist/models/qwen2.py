"""Qwen2 (Qwen2ForCausalLM): Llama's tensors with q, k and v biases always (o_proj none); with
use_sliding_window, the layers from max_window_layers on slide."""

from .family import Family
from .llama import LLAMA_LIKE, REQUIRED, TENSORS

# Defaults Qwen2Config shares with Qwen3Config.
QWEN_LIKE = {
    **LLAMA_LIKE,
    "max_position_embeddings": 32768,
    "bos_token_id": None,
    "eos_token_id": None,
    "num_key_value_heads": 32,
    "sliding_window": 4096,
    "use_sliding_window": False,
    "max_window_layers": 28,
    "layer_types": None,
}

FAMILY = Family(
    architecture="Qwen2ForCausalLM",
    model_type="qwen2",
    title="Qwen2",
    required=REQUIRED,
    defaults=QWEN_LIKE,
    norm="rms",
    eps="rms_norm_eps",
    act="hidden_act",
    gated_mlp=True,
    attention_bias="qkv",
    mlp_bias=None,
    qk_norm=False,
    windows="from_layer",
    rotary="full",
    tensors=TENSORS,
    transformers_lacks=("attention_bias", "head_dim", "mlp_bias"),
)
