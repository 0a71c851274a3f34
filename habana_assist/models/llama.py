"""Llama (LlamaForCausalLM, Transformers' models/llama): the decoder the other rotary families build on, whose
tensors and defaults they import from here as Transformers' modular files do."""

from .family import (
    Family,
    Tensor,
    head_dim,
    hidden_size,
    intermediate_size,
    key_value_heads,
    mlp_biases,
    o_bias,
    qk_norm,
    qkv_bias,
    query_heads,
    untied,
    vocab_size,
)

# The shape fields every rotary family's config.json must give.
REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
# Defaults LlamaConfig shares with the families built on it (each adds or overrides its own).
LLAMA_LIKE = {
    "num_key_value_heads": None,
    "head_dim": None,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "mlp_bias": False,
    "sliding_window": None,
    "pad_token_id": None,
    "torch_dtype": None,
}

# The tensors, in the order LlamaForCausalLM registers its modules (its state_dict's order), in groups that the
# families built on it reuse.
LAYER = "model.layers.{i}."
EMBED_TOKENS = Tensor("model.embed_tokens.weight", (vocab_size, hidden_size), "embed")
ATTENTION_QKV = (
    Tensor(LAYER + "self_attn.q_proj.weight", (query_heads, hidden_size), "wq"),
    Tensor(LAYER + "self_attn.q_proj.bias", (query_heads,), "bq", when=qkv_bias),
    Tensor(LAYER + "self_attn.k_proj.weight", (key_value_heads, hidden_size), "wk"),
    Tensor(LAYER + "self_attn.k_proj.bias", (key_value_heads,), "bk", when=qkv_bias),
    Tensor(LAYER + "self_attn.v_proj.weight", (key_value_heads, hidden_size), "wv"),
    Tensor(LAYER + "self_attn.v_proj.bias", (key_value_heads,), "bv", when=qkv_bias),
)
ATTENTION_OUT = (
    Tensor(LAYER + "self_attn.o_proj.weight", (hidden_size, query_heads), "wo"),
    Tensor(LAYER + "self_attn.o_proj.bias", (hidden_size,), "bo", when=o_bias),
)
# Qwen3's and Gemma 3's per-head norms, registered after o_proj
QK_NORM = (
    Tensor(LAYER + "self_attn.q_norm.weight", (head_dim,), "q_norm", when=qk_norm),
    Tensor(LAYER + "self_attn.k_norm.weight", (head_dim,), "k_norm", when=qk_norm),
)
MLP_GATE_UP = (
    Tensor(LAYER + "mlp.gate_proj.weight", (intermediate_size, hidden_size), "w_gate"),
    Tensor(LAYER + "mlp.gate_proj.bias", (intermediate_size,), "b_gate", when=mlp_biases),
    Tensor(LAYER + "mlp.up_proj.weight", (intermediate_size, hidden_size), "w_up"),
    Tensor(LAYER + "mlp.up_proj.bias", (intermediate_size,), "b_up", when=mlp_biases),
)
MLP_DOWN = (
    Tensor(LAYER + "mlp.down_proj.weight", (hidden_size, intermediate_size), "w_down"),
    Tensor(LAYER + "mlp.down_proj.bias", (hidden_size,), "b_down", when=mlp_biases),
)
INPUT_LAYERNORM = Tensor(LAYER + "input_layernorm.weight", (hidden_size,), "attn_norm")
# the MLP's input norm (Gemma applies a norm of this name to the attention's output instead: gemma2.py)
POST_ATTENTION_LAYERNORM = Tensor(LAYER + "post_attention_layernorm.weight", (hidden_size,), "ffn_norm")
FINAL = (
    Tensor("model.norm.weight", (hidden_size,), "final_norm"),
    Tensor("lm_head.weight", (vocab_size, hidden_size), "lm_head", when=untied),
)
TENSORS = (
    EMBED_TOKENS,
    *ATTENTION_QKV,
    *ATTENTION_OUT,
    *QK_NORM,
    *MLP_GATE_UP,
    *MLP_DOWN,
    INPUT_LAYERNORM,
    POST_ATTENTION_LAYERNORM,
    *FINAL,
)

FAMILY = Family(
    architecture="LlamaForCausalLM",
    model_type="llama",
    title="Llama",
    required=REQUIRED,
    defaults={**LLAMA_LIKE, "max_position_embeddings": 2048, "bos_token_id": 1, "eos_token_id": 2},
    norm="rms",
    eps="rms_norm_eps",
    act="hidden_act",
    gated_mlp=True,
    attention_bias="field",
    mlp_bias="field",
    qk_norm=False,
    windows=None,
    rotary="full",
    tensors=TENSORS,
    transformers_lacks=("sliding_window",),
)
