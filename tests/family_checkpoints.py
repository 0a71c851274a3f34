"""Tiny random checkpoints of every model family, in each family's own config.json keys and tensor names.

``write_family_checkpoint`` writes config.json + model.safetensors as Transformers saves a model of that family
(names from its modeling_*.py, keys from its configuration_*.py) and returns the config it wrote and the EXACT
stored weights as float64 (after the bf16/f16 rounding of the file's dtype), so that tests/family_reference.py
sees what the file holds.  Weights are random with scales chosen so that every family's nonlinearity matters:
logits of several units, attention scores of a few units (a softcap of ~2 bites), norm weights spread around
their neutral value (Gemma stores its norms as offsets from 1: around 0).
"""

import json
import os

import numpy as np

from checkpoints import _stored
from family_reference import (ARCHITECTURES, GEMMA, head_dim_of, hidden_size_of, intermediate_size_of,
                              layer_types_of, num_heads_of, num_kv_heads_of, num_layers_of, tied_of)
from habana_assist.checkpoints.safetensors import save_file

ARCH_OF = {model_type: arch for arch, model_type in ARCHITECTURES.items()}
FAMILIES = tuple(ARCH_OF)
# Layers' outputs (o_proj, down_proj, Gemma's post-norms) larger than the embedding in the residual stream, so
# that a tied head does not just repeat the last token (its own embedding's logit would win).
OUT_GAIN = 2.0
POST_NORM_OFFSET = 2.0
# The final norm's weights (Gemma: 1 + w) centred on 0: with a tied head the logit of the token whose embedding
# is in the residual stream is then no larger than the others' (around 1 it would win: |e|^2 > e . e').
FINAL_NORM_STD = 1.0
TORCH_DTYPE = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


def longrope_scaling(rope_dim, seed=0, key="type"):
    """A Phi-3 style rope_scaling {"type": "longrope", "short_factor", "long_factor"} with rope_dim/2 factors:
    short ones near 1, long ones from 1 to ~8 (the long context stretches the low frequencies most)."""
    rng = np.random.default_rng(seed)
    n = rope_dim // 2
    short = 1.0 + 0.2 * rng.random(n)
    long_ = 1.0 + 7.0 * (np.arange(n) / max(n - 1, 1)) ** 2 * (0.8 + 0.4 * rng.random(n))
    return {key: "longrope", "short_factor": [round(float(v), 6) for v in short],
            "long_factor": [round(float(v), 6) for v in long_]}


def _config(family, *, dtype, vocab_size, hidden_size, num_layers, num_heads, num_kv_heads, head_dim,
            intermediate_size, tie_word_embeddings, sliding_window, max_position_embeddings):
    """The family's config.json (the keys its hub checkpoints carry), before the caller's overrides."""
    common = {"architectures": [ARCH_OF[family]], "model_type": family, "vocab_size": vocab_size,
              "torch_dtype": TORCH_DTYPE[dtype], "bos_token_id": None, "eos_token_id": None, "pad_token_id": None,
              "use_cache": True}
    if family == "gpt2":
        if num_kv_heads not in (None, num_heads) or head_dim not in (None, hidden_size // num_heads):
            raise ValueError("GPT-2 has multi-head attention with head_dim = n_embd // n_head only")
        if tie_word_embeddings is False:
            raise ValueError("GPT-2's head is tied to wte")
        return {**common, "n_embd": hidden_size, "n_layer": num_layers, "n_head": num_heads,
                "n_inner": intermediate_size, "n_positions": max_position_embeddings,
                "n_ctx": max_position_embeddings, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
                "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "initializer_range": 0.02,
                "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
                "reorder_and_upcast_attn": False, "summary_type": "cls_index", "summary_use_proj": True,
                "summary_activation": None, "summary_proj_to_labels": True, "summary_first_dropout": 0.1}
    config = {**common, "hidden_size": hidden_size, "intermediate_size": intermediate_size,
              "num_hidden_layers": num_layers, "num_attention_heads": num_heads,
              "num_key_value_heads": num_kv_heads, "max_position_embeddings": max_position_embeddings,
              "initializer_range": 0.02, "attention_dropout": 0.0,
              "tie_word_embeddings": bool(tie_word_embeddings)}
    if head_dim is not None:
        if family == "phi3":
            raise ValueError("Phi-3 has no head_dim key (hidden_size // num_attention_heads)")
        config["head_dim"] = head_dim
    if family in GEMMA:
        config.update({"hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
                       "rms_norm_eps": 1e-6, "query_pre_attn_scalar": 4, "attention_bias": False,
                       "sliding_window": sliding_window if sliding_window is not None else 4096,
                       "pad_token_id": 0, "cache_implementation": "hybrid"})
        config.setdefault("head_dim", hidden_size // num_heads)
        if family == "gemma2":
            config.update({"rope_theta": 10000.0, "attn_logit_softcapping": 2.0, "final_logit_softcapping": 10.0})
        else:
            config.update({"rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": None,
                           "sliding_window_pattern": 2, "attn_logit_softcapping": None,
                           "final_logit_softcapping": None})
        return config
    config.update({"hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": None})
    if family == "llama":
        config.update({"attention_bias": False, "mlp_bias": False})
    elif family == "mistral":
        config["sliding_window"] = sliding_window
    elif family in ("qwen2", "qwen3"):
        # Hub configs carry a sliding_window that only counts with use_sliding_window.
        config.update({"use_sliding_window": sliding_window is not None,
                       "sliding_window": sliding_window if sliding_window is not None else 4096,
                       "max_window_layers": num_layers})
        if family == "qwen3":
            config.update({"attention_bias": False, "rope_theta": 1000000.0})
            config.setdefault("head_dim", hidden_size // num_heads)
    elif family == "phi3":
        config.update({"original_max_position_embeddings": max_position_embeddings, "sliding_window": sliding_window,
                       "resid_pdrop": 0.0, "embd_pdrop": 0.0, "pad_token_id": None})
    elif family == "smollm3":
        config.update({"rope_theta": 2000000.0, "use_sliding_window": sliding_window is not None,
                       "sliding_window": sliding_window, "no_rope_layer_interval": 4, "attention_bias": False,
                       "mlp_bias": False, "max_window_layers": num_layers})
    return config


def _names_and_shapes(config, family, gpt2_prefix):
    """[(tensor name, stored shape, kind)] in the family's safetensors names; kind picks the random scale."""
    d, inter = hidden_size_of(config), intermediate_size_of(config)
    H, KV, hd = num_heads_of(config), num_kv_heads_of(config), head_dim_of(config)
    V = config["vocab_size"]
    out = []
    if family == "gpt2":
        p = "transformer." if gpt2_prefix else ""
        out += [(p + "wte.weight", (V, d), "embed"), (p + "wpe.weight", (config["n_positions"], d), "pos")]
        for i in range(num_layers_of(config)):
            q = f"{p}h.{i}."
            out += [(q + "ln_1.weight", (d,), "norm"), (q + "ln_1.bias", (d,), "norm_bias"),
                    (q + "attn.c_attn.weight", (d, 3 * d), "conv_qkv"), (q + "attn.c_attn.bias", (3 * d,), "bias"),
                    (q + "attn.c_proj.weight", (d, d), "convout"), (q + "attn.c_proj.bias", (d,), "bias"),
                    (q + "ln_2.weight", (d,), "norm"), (q + "ln_2.bias", (d,), "norm_bias"),
                    (q + "mlp.c_fc.weight", (d, inter), "conv"), (q + "mlp.c_fc.bias", (inter,), "bias"),
                    (q + "mlp.c_proj.weight", (inter, d), "convout"), (q + "mlp.c_proj.bias", (d,), "bias")]
        out += [(p + "ln_f.weight", (d,), "final_norm"), (p + "ln_f.bias", (d,), "norm_bias")]
        return out
    attn_bias = bool(config.get("attention_bias")) and family != "qwen2"
    mlp_bias = bool(config.get("mlp_bias"))
    out.append(("model.embed_tokens.weight", (V, d), "embed"))
    for i in range(num_layers_of(config)):
        p = f"model.layers.{i}."
        out.append((p + "input_layernorm.weight", (d,), "norm"))
        if family == "phi3":
            out.append((p + "self_attn.qkv_proj.weight", ((H + 2 * KV) * hd, d), "fused_qkv"))
        else:
            for proj, rows, gain in (("q_proj", H * hd, "qk"), ("k_proj", KV * hd, "qk"), ("v_proj", KV * hd, "")):
                out.append((p + f"self_attn.{proj}.weight", (rows, d), "matrix" + gain))
                if attn_bias or family == "qwen2":
                    out.append((p + f"self_attn.{proj}.bias", (rows,), "bias"))
        if family in ("qwen3", "gemma3_text"):
            out += [(p + "self_attn.q_norm.weight", (hd,), "norm"), (p + "self_attn.k_norm.weight", (hd,), "norm")]
        out.append((p + "self_attn.o_proj.weight", (d, H * hd), "matrixout"))
        if attn_bias:
            out.append((p + "self_attn.o_proj.bias", (d,), "bias"))
        out.append((p + "post_attention_layernorm.weight", (d,), "postnorm" if family in GEMMA else "norm"))
        if family in GEMMA:
            out += [(p + "pre_feedforward_layernorm.weight", (d,), "norm"),
                    (p + "post_feedforward_layernorm.weight", (d,), "postnorm")]
        if family == "phi3":
            out.append((p + "mlp.gate_up_proj.weight", (2 * inter, d), "matrix"))
        else:
            for proj in ("gate_proj", "up_proj"):
                out.append((p + f"mlp.{proj}.weight", (inter, d), "matrix"))
                if mlp_bias:
                    out.append((p + f"mlp.{proj}.bias", (inter,), "bias"))
        out.append((p + "mlp.down_proj.weight", (d, inter), "matrixout"))
        if mlp_bias:
            out.append((p + "mlp.down_proj.bias", (d,), "bias"))
    out.append(("model.norm.weight", (d,), "final_norm"))
    if not tied_of(config):
        out.append(("lm_head.weight", (V, d), "embed"))
    return out


def _random(rng, family, config, kind, shape, scale):
    """One tensor's random values (float64) for its kind."""
    if kind == "norm":
        # Gemma's RMSNorm multiplies by (1 + w): its stored weights are offsets around 0.
        return 0.25 * rng.standard_normal(shape) + (0.0 if family in GEMMA else 1.0)
    if kind == "final_norm":  # see FINAL_NORM_STD
        return FINAL_NORM_STD * rng.standard_normal(shape) - (1.0 if family in GEMMA else 0.0)
    if kind == "postnorm":  # Gemma's norms after attention and MLP: their outputs outweigh the scaled embedding
        return 0.25 * rng.standard_normal(shape) + POST_NORM_OFFSET
    if kind == "norm_bias":
        return 0.1 * rng.standard_normal(shape)
    if kind == "bias":
        return 0.2 * rng.standard_normal(shape)
    if kind == "embed":
        # The final norm brings the hidden state's rms near 1: a logit's std is ~0.75 * sqrt(D) * scale.
        return scale * 0.75 * rng.standard_normal(shape)
    if kind == "pos":
        return 0.5 * rng.standard_normal(shape)
    if kind in ("matrix", "matrixqk", "matrixout"):  # (out, in); sharper, non-uniform attention from larger q, k
        gain = {"matrix": 1.0, "matrixqk": 1.5, "matrixout": OUT_GAIN}[kind]
        return gain * rng.standard_normal(shape) / np.sqrt(shape[1])
    if kind == "fused_qkv":  # Phi-3 rows q | k | v: q and k with the same gain as the split families
        qk_rows = (num_heads_of(config) + num_kv_heads_of(config)) * head_dim_of(config)
        value = rng.standard_normal(shape) / np.sqrt(shape[1])
        value[:qk_rows] *= 1.5
        return value
    if kind in ("conv", "convout"):  # GPT-2 Conv1D (in, out)
        return (OUT_GAIN if kind == "convout" else 1.0) * rng.standard_normal(shape) / np.sqrt(shape[0])
    if kind == "conv_qkv":  # (D, 3D), columns q | k | v
        value = rng.standard_normal(shape) / np.sqrt(shape[0])
        value[:, :2 * shape[0]] *= 1.5
        return value
    raise ValueError(kind)


def _to_v5(config, family):
    """In place: Transformers 5's config.json keys for the rope and the dtype."""
    config["dtype"] = config.pop("torch_dtype")
    if family == "gpt2":
        return
    scaling = dict(config.pop("rope_scaling", None) or {"rope_type": "default"})
    scaling["rope_type"] = scaling.pop("type", scaling.get("rope_type", "default"))
    scaling["rope_theta"] = config.pop("rope_theta")
    if "partial_rotary_factor" in config:
        scaling["partial_rotary_factor"] = config.pop("partial_rotary_factor")
    if family == "gemma3_text":
        local = {"rope_type": "default", "rope_theta": config.pop("rope_local_base_freq")}
        config["rope_parameters"] = {"full_attention": scaling, "sliding_attention": local}
    else:
        config["rope_parameters"] = scaling


def write_family_checkpoint(directory, family, *, dtype="F32", seed=0, vocab_size=96, hidden_size=32,
                            num_layers=2, num_heads=4, num_kv_heads=2, head_dim=None, intermediate_size=48,
                            tie_word_embeddings=None, sliding_window=None, max_position_embeddings=128,
                            gpt2_prefix=True, gpt2_mask_buffers=False, scale=1.0, perturb=None, permute_vocab=None,
                            omit=(), v5=False, **config_keys):
    """Write a random ``family`` checkpoint into ``directory``; return (config dict, {name: float64 values}).

    family: a model_type (llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text, smollm3, gpt2).
    dtype: the file's dtype, "F32" | "BF16" | "F16".
    tie_word_embeddings: None = the family's usual choice (tied for Gemma, SmolLM3 and GPT-2).
    sliding_window: the window, in the family's own keys (Qwen2/Qwen3/SmolLM3 also set use_sliding_window;
        Gemma: the window of its sliding layers; None there means the hub default 4096, longer than any test).
    gpt2_prefix: GPT-2 tensor names with "transformer." (as GPT2LMHeadModel saves) or without (as the original
        gpt2 / distilgpt2 files on the hub).
    gpt2_mask_buffers: also write each layer's attention buffers h.N.attn.bias (the causal mask, (1, 1,
        n_positions, n_positions)) and h.N.attn.masked_bias, as checkpoints converted from old pytorch_model.bin
        files carry them; they are not weights (the returned tensors leave them out).
    scale: multiplies the embedding / lm_head weights.
    perturb: (seed, relative size): adds that much independent noise to every tensor, for a draft that agrees
        with the unperturbed model often but not always.
    permute_vocab: a permutation of the vocabulary: row i of the embedding and of the head moves to row
        permute_vocab[i], so that the model predicts in a vocabulary whose id i is id permute_vocab[i] here.
    v5: write the config as Transformers >= 5 saves it: "dtype" for "torch_dtype", and rope_theta, rope_scaling
        and partial_rotary_factor folded into rope_parameters (Gemma 3: one dict per layer type, the sliding
        one from rope_local_base_freq).
    omit: config.json keys left out (after the weights' shapes are chosen: e.g. head_dim, so that its config
        class's default applies).
    config_keys: config.json keys set after the family's defaults (a value None writes null); layer_types="auto"
        writes the list Transformers derives (as save_pretrained does).
    """
    if family not in ARCH_OF:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    if tie_word_embeddings is None:
        tie_word_embeddings = family in ("gemma2", "gemma3_text", "smollm3", "gpt2")
    if num_kv_heads is None or family == "gpt2":
        num_kv_heads = num_heads if family != "gpt2" else None
    os.makedirs(directory, exist_ok=True)
    config = _config(family, dtype=dtype, vocab_size=vocab_size, hidden_size=hidden_size, num_layers=num_layers,
                     num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                     intermediate_size=intermediate_size, tie_word_embeddings=tie_word_embeddings,
                     sliding_window=sliding_window, max_position_embeddings=max_position_embeddings)
    layer_types = config_keys.pop("layer_types", None)
    config.update(config_keys)
    if layer_types == "auto":
        config["layer_types"] = layer_types_of(config)
    elif layer_types is not None:
        config["layer_types"] = list(layer_types)

    rng = np.random.default_rng(seed)
    noise = np.random.default_rng(perturb[0]) if perturb else None
    to_file, tensors64 = {}, {}
    for name, shape, kind in _names_and_shapes(config, family, gpt2_prefix):
        value = _random(rng, family, config, kind, shape, scale)
        if noise is not None:
            spread = float(np.std(value)) if value.size > 1 else 0.1
            value = value + perturb[1] * spread * noise.standard_normal(shape)
        if permute_vocab is not None and kind == "embed":
            moved = np.empty_like(value)
            moved[np.asarray(permute_vocab)] = value
            value = moved
        to_file[name], tensors64[name] = _stored(value, dtype)
    if v5:
        _to_v5(config, family)
    for key in omit:
        config.pop(key, None)
    if family == "gpt2" and gpt2_mask_buffers:
        p, n = ("transformer." if gpt2_prefix else ""), config["n_positions"]
        for i in range(num_layers):
            to_file[f"{p}h.{i}.attn.bias"] = np.tril(np.ones((n, n), dtype=np.float32)).reshape(1, 1, n, n)
            to_file[f"{p}h.{i}.attn.masked_bias"] = np.array(-1e4, dtype=np.float32)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_file(to_file, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    return config, tensors64
