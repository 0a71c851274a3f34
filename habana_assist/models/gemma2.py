"""Gemma 2 (Gemma2ForCausalLM): Llama's projections with four norms a layer (the attention's and the MLP's
outputs normalized too), norms x * (1 + w), embeddings scaled by sqrt(hidden_size), soft-capped logits,
alternate layers sliding."""

import dataclasses

from .family import Family, Tensor, hidden_size
from .llama import (
    ATTENTION_OUT,
    ATTENTION_QKV,
    EMBED_TOKENS,
    FINAL,
    INPUT_LAYERNORM,
    LAYER,
    MLP_DOWN,
    MLP_GATE_UP,
    POST_ATTENTION_LAYERNORM,
    QK_NORM,
    REQUIRED,
)

# Defaults Gemma2Config shares with Gemma3TextConfig.
GEMMA_LIKE = {
    "num_key_value_heads": 4,
    "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh",
    "rms_norm_eps": 1e-6,
    "pad_token_id": 0,
    "eos_token_id": 1,
    "bos_token_id": 2,
    "tie_word_embeddings": True,
    "attention_bias": False,
    "query_pre_attn_scalar": 256,
    "sliding_window": 4096,
    "layer_types": None,
    "torch_dtype": None,
}

# Gemma's post_attention_layernorm normalizes the attention's output; pre_feedforward_layernorm is the MLP's input
# norm (Llama's post_attention_layernorm), post_feedforward_layernorm normalizes the MLP's output. The decoder
# layer registers them after the MLP, in this order.
NORMS = (
    INPUT_LAYERNORM,
    dataclasses.replace(POST_ATTENTION_LAYERNORM, role="post_attn_norm"),
    Tensor(LAYER + "pre_feedforward_layernorm.weight", (hidden_size,), "ffn_norm"),
    Tensor(LAYER + "post_feedforward_layernorm.weight", (hidden_size,), "post_ffn_norm"),
)
TENSORS = (EMBED_TOKENS, *ATTENTION_QKV, *ATTENTION_OUT, *QK_NORM, *MLP_GATE_UP, *MLP_DOWN, *NORMS, *FINAL)

FAMILY = Family(
    architecture="Gemma2ForCausalLM",
    model_type="gemma2",
    title="Gemma 2",
    required=REQUIRED,
    defaults={
        **GEMMA_LIKE,
        "max_position_embeddings": 8192,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "final_logit_softcapping": 30.0,
        "attn_logit_softcapping": 50.0,
        "use_bidirectional_attention": None,
    },
    norm="rms_one_plus",
    eps="rms_norm_eps",
    act="hidden_activation",
    gated_mlp=True,
    attention_bias="field",
    mlp_bias=None,
    qk_norm=False,
    windows="alternate",
    rotary="full",
    tensors=TENSORS,
)
