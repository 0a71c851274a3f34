"""Qwen3 (Qwen3ForCausalLM): Qwen2's layout with per-head q_norm and k_norm, and attention biases only with
attention_bias."""

from .family import Family
from .llama import REQUIRED, TENSORS
from .qwen2 import QWEN_LIKE

FAMILY = Family(
    architecture="Qwen3ForCausalLM",
    model_type="qwen3",
    title="Qwen3",
    required=REQUIRED,
    defaults={**QWEN_LIKE, "head_dim": 128},
    norm="rms",
    eps="rms_norm_eps",
    act="hidden_act",
    gated_mlp=True,
    attention_bias="field",
    mlp_bias=None,
    qk_norm=True,
    windows="from_layer",
    rotary="full",
    tensors=TENSORS,
    transformers_lacks=("mlp_bias",),
)
