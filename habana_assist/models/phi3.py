"""Phi-3 and Phi-4 (Phi3ForCausalLM): fused projections, self_attn.qkv_proj (rows q | k | v) and
mlp.gate_up_proj (rows gate | up); rotary over partial_rotary_factor of each head; longrope ("su" and "yarn"
in older checkpoints)."""

from .family import Family, Tensor, hidden_size
from .llama import (
    ATTENTION_OUT,
    EMBED_TOKENS,
    FINAL,
    INPUT_LAYERNORM,
    LAYER,
    LLAMA_LIKE,
    MLP_DOWN,
    POST_ATTENTION_LAYERNORM,
    REQUIRED,
)


def qkv_heads(c):
    """The fused q | k | v rows: (num_attention_heads + 2 * num_key_value_heads) * head_dim."""
    return (
        (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim,
        f"(num_attention_heads={c.num_attention_heads} + 2 * num_key_value_heads={c.num_key_value_heads}) * "
        f"head_dim={c.head_dim}",
    )


def gate_up(c):
    """The fused gate | up rows: 2 * intermediate_size."""
    return 2 * c.intermediate_size, f"2 * intermediate_size={c.intermediate_size}"


# Phi3Attention registers o_proj before qkv_proj.
TENSORS = (
    EMBED_TOKENS,
    *ATTENTION_OUT,
    Tensor(LAYER + "self_attn.qkv_proj.weight", (qkv_heads, hidden_size), "wqkv"),
    Tensor(LAYER + "mlp.gate_up_proj.weight", (gate_up, hidden_size), "w_gate_up"),
    *MLP_DOWN,
    INPUT_LAYERNORM,
    POST_ATTENTION_LAYERNORM,
    *FINAL,
)

FAMILY = Family(
    architecture="Phi3ForCausalLM",
    model_type="phi3",
    title="Phi-3",
    required=REQUIRED,
    defaults={
        **LLAMA_LIKE,
        "max_position_embeddings": 4096,
        "original_max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "partial_rotary_factor": 1.0,
        "bos_token_id": 1,
        "eos_token_id": 32000,
        "pad_token_id": 32000,
    },
    norm="rms",
    eps="rms_norm_eps",
    act="hidden_act",
    gated_mlp=True,
    attention_bias=None,
    mlp_bias=None,
    qk_norm=False,
    windows="all",
    rotary="partial",
    rope_type_aliases={"su": "longrope", "yarn": "longrope"},
    tensors=TENSORS,
    transformers_lacks=("attention_bias", "head_dim", "mlp_bias"),
)
