"""GPT-2 (GPT2LMHeadModel): learned positions, LayerNorm with biases, a fused c_attn, an ungated MLP, biases
everywhere; Conv1D matrices stored (in, out). GPT2Config's own field names (n_embd, n_layer, n_head,
n_positions, n_inner) are what it stores; the generic names read through to them."""

from .family import Family, Tensor, untied, vocab_size


def n_embd(c):
    return c.n_embd, f"n_embd={c.n_embd}"


def n_embd3(c):
    """c_attn's q | k | v columns."""
    return 3 * c.n_embd, f"3 * n_embd={c.n_embd}"


def n_inner(c):
    return c.intermediate_size, f"n_inner={c.n_inner}" if c.n_inner is not None else f"4 * n_embd={c.n_embd}"


def n_positions(c):
    return c.n_positions, f"n_positions={c.n_positions}"


# GPT2LMHeadModel's state_dict: each Conv1D and LayerNorm its weight, then its bias.
BLOCK = "transformer.h.{i}."
TENSORS = (
    Tensor("transformer.wte.weight", (vocab_size, n_embd), "embed"),
    Tensor("transformer.wpe.weight", (n_positions, n_embd), "pos_embed"),
    Tensor(BLOCK + "ln_1.weight", (n_embd,), "attn_norm"),
    Tensor(BLOCK + "ln_1.bias", (n_embd,), "attn_norm_bias"),
    Tensor(BLOCK + "attn.c_attn.weight", (n_embd, n_embd3), "wqkv", transposed=True),
    Tensor(BLOCK + "attn.c_attn.bias", (n_embd3,), "bqkv"),
    Tensor(BLOCK + "attn.c_proj.weight", (n_embd, n_embd), "wo", transposed=True),
    Tensor(BLOCK + "attn.c_proj.bias", (n_embd,), "bo"),
    Tensor(BLOCK + "ln_2.weight", (n_embd,), "ffn_norm"),
    Tensor(BLOCK + "ln_2.bias", (n_embd,), "ffn_norm_bias"),
    Tensor(BLOCK + "mlp.c_fc.weight", (n_embd, n_inner), "w_up", transposed=True),
    Tensor(BLOCK + "mlp.c_fc.bias", (n_inner,), "b_up"),
    Tensor(BLOCK + "mlp.c_proj.weight", (n_inner, n_embd), "w_down", transposed=True),
    Tensor(BLOCK + "mlp.c_proj.bias", (n_embd,), "b_down"),
    Tensor("transformer.ln_f.weight", (n_embd,), "final_norm"),
    Tensor("transformer.ln_f.bias", (n_embd,), "final_norm_bias"),
    Tensor("lm_head.weight", (vocab_size, n_embd), "lm_head", when=untied),
)

FAMILY = Family(
    architecture="GPT2LMHeadModel",
    model_type="gpt2",
    title="GPT-2",
    required=("vocab_size", "n_embd", "n_layer", "n_head"),
    defaults={
        "n_positions": 1024,
        "n_inner": None,
        "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-5,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "bos_token_id": 50256,
        "eos_token_id": 50256,
        "pad_token_id": None,
        "tie_word_embeddings": True,
        "torch_dtype": None,
    },
    norm="layer",
    eps="layer_norm_epsilon",
    act="activation_function",
    gated_mlp=False,
    attention_bias="always",
    mlp_bias="always",
    qk_norm=False,
    windows=None,
    rotary=None,
    # GPT2Config's attribute_map
    aliases={
        "hidden_size": "n_embd",
        "num_hidden_layers": "n_layer",
        "num_attention_heads": "n_head",
        "max_position_embeddings": "n_positions",
    },
    computed={
        "intermediate_size": lambda d: d["n_inner"] if d.get("n_inner") is not None else 4 * d["n_embd"],
        "num_key_value_heads": lambda d: d["n_head"],
        "head_dim": lambda d: d["n_embd"] // d["n_head"],
    },
    tensors=TENSORS,
    # GPT2LMHeadModel saves "transformer."; the original gpt2 files have no prefix
    optional_prefix="transformer.",
    # GPT2LMHeadModel's _keys_to_ignore_on_load_unexpected: the causal masks older files saved as buffers
    ignore_unexpected=(r"attn.bias", r"crossattention.bias"),
)
