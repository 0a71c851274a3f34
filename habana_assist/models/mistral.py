"""Mistral (MistralForCausalLM): Llama's tensors, without biases; every layer slides when sliding_window is set."""

from .family import Family
from .llama import LLAMA_LIKE, REQUIRED, TENSORS

FAMILY = Family(
    architecture="MistralForCausalLM",
    model_type="mistral",
    title="Mistral",
    required=REQUIRED,
    defaults={
        **LLAMA_LIKE,
        "max_position_embeddings": 4096 * 32,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "num_key_value_heads": 8,
        "sliding_window": 4096,
    },
    norm="rms",
    eps="rms_norm_eps",
    act="hidden_act",
    gated_mlp=True,
    attention_bias=None,
    mlp_bias=None,
    qk_norm=False,
    windows="all",
    rotary="full",
    tensors=TENSORS,
    transformers_lacks=("attention_bias", "mlp_bias"),
)
