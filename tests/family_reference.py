"""An independent float64 numpy reference of the forward of every model family the package loads.

Written from Transformers' published modeling code (models/llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3,
smollm3 and gpt2: modeling_*.py and configuration_*.py; modeling_rope_utils.py for the rope variants and
masking_utils.py for sliding windows), sharing no code with the package, so that the package's logits can be
checked against it.  Everything runs in float64 on the exact values the checkpoint file holds (see
tests/family_checkpoints.py); the only rounding the reference copies from Transformers is the one that changes
the math on purpose: Gemma's embedding normalizer sqrt(hidden_size) is a tensor of the model's dtype.

Semantics followed where Transformers versions differ (the newest wins):
- sliding windows: key j is visible from query p iff j <= p and p - j < window (masking_utils'
  sliding_window_overlay); which layers slide comes from ``layer_types`` when the config has it, else from
  each family's default rule (``layer_types_of``).
- SmolLM3: without ``layer_types`` the NoPE layers (no_rope_layers[i] == 0) are the sliding ones when
  use_sliding_window and sliding_window are set (configuration_smollm3.py), not Qwen2's max_window_layers rule.
- longrope: the per-token rule: position p uses the long factors iff p >= original_max_position_embeddings
  (Transformers chooses per forward from the sequence length; the two agree when tokens are decoded one at a
  time); cos and sin are multiplied by the attention factor at every position.
- Gemma 3: sliding layers use default rope with rope_local_base_freq, full layers rope_theta with rope_scaling.

Shapes in comments: S = sequence length, D = hidden size, H = query heads, KV = key/value heads,
hd = head_dim, I = intermediate size, V = vocabulary.
"""

import math

import numpy as np

# architectures[0] -> model_type
ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Phi3ForCausalLM": "phi3",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text",
    "SmolLM3ForCausalLM": "smollm3",
    "GPT2LMHeadModel": "gpt2",
}
GEMMA = ("gemma2", "gemma3_text")


def family_of(config):
    archs = config.get("architectures") or []
    for arch in archs:
        if arch in ARCHITECTURES:
            return ARCHITECTURES[arch]
    return config["model_type"]


# ----------------------------------------------------------------------------------------------- config
# Transformers' attribute names and defaults per family, read from the config dict as config.json holds it.


def _get(config, key, default):
    value = config.get(key)
    return default if value is None else value


def num_layers_of(config):
    return int(config["n_layer"] if family_of(config) == "gpt2" else config["num_hidden_layers"])


def hidden_size_of(config):
    return int(config["n_embd"] if family_of(config) == "gpt2" else config["hidden_size"])


def num_heads_of(config):
    return int(config["n_head"] if family_of(config) == "gpt2" else config["num_attention_heads"])


def num_kv_heads_of(config):
    if family_of(config) == "gpt2":
        return num_heads_of(config)
    return int(_get(config, "num_key_value_heads", num_heads_of(config)))


def head_dim_of(config):
    """Phi-3 and GPT-2 have no head_dim key (hidden // heads); the others use it when set, else their config
    class's default: 128 for Qwen3, 256 for Gemma, hidden // heads for the rest."""
    family = family_of(config)
    if family in ("gpt2", "phi3"):
        return hidden_size_of(config) // num_heads_of(config)
    hd = config.get("head_dim")
    if hd:
        return int(hd)
    return {"qwen3": 128, "gemma2": 256, "gemma3_text": 256}.get(family, hidden_size_of(config) // num_heads_of(config))


def intermediate_size_of(config):
    if family_of(config) == "gpt2":
        n_inner = config.get("n_inner")
        return int(n_inner) if n_inner else 4 * hidden_size_of(config)
    return int(config["intermediate_size"])


def tied_of(config):
    defaults = {"gemma2": True, "gemma3_text": True, "smollm3": True, "gpt2": True}
    return bool(_get(config, "tie_word_embeddings", defaults.get(family_of(config), False)))


def _effective_window(config):
    """The window a sliding layer uses, or None (then no layer slides)."""
    family = family_of(config)
    window = config.get("sliding_window")
    if family in ("qwen2", "qwen3", "smollm3") and not config.get("use_sliding_window", False):
        return None
    if family in ("llama", "gpt2"):
        return None
    return None if window is None else int(window)


def layer_types_of(config):
    """Transformers' layer_types: the config's own list, else each family's default rule."""
    family = family_of(config)
    n = num_layers_of(config)
    if config.get("layer_types") is not None and family in ("qwen2", "qwen3", "smollm3", "gemma2", "gemma3_text"):
        return list(config["layer_types"])
    window = _effective_window(config)
    if family in ("qwen2", "qwen3"):
        first = int(_get(config, "max_window_layers", 28))
        return ["sliding_attention" if window is not None and i >= first else "full_attention" for i in range(n)]
    if family == "smollm3":
        rope = no_rope_layers_of(config)
        return ["sliding_attention" if window is not None and not rope[i] else "full_attention" for i in range(n)]
    if family == "gemma2":
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    if family == "gemma3_text":
        pattern = int(_get(config, "sliding_window_pattern", 6))
        return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]
    if family in ("mistral", "phi3"):
        return ["sliding_attention" if window is not None else "full_attention"] * n
    return ["full_attention"] * n


def no_rope_layers_of(config):
    """SmolLM3: 1 = the layer has rotary, 0 = NoPE; default from no_rope_layer_interval."""
    n = num_layers_of(config)
    given = config.get("no_rope_layers")
    if given:
        return [int(v) for v in given]
    interval = int(_get(config, "no_rope_layer_interval", 4))
    return [int((i + 1) % interval != 0) for i in range(n)]


def layer_plan(config):
    """Per layer: {"window": int or None, "rope": "global" | "local" | "none", "scale": attention scale}."""
    family = family_of(config)
    hd = head_dim_of(config)
    window = _effective_window(config)
    types = layer_types_of(config)
    plan = []
    for i in range(num_layers_of(config)):
        sliding = types[i] == "sliding_attention" and window is not None
        if family == "gpt2":
            scale = 1.0 / math.sqrt(hd) if _get(config, "scale_attn_weights", True) else 1.0
            if config.get("scale_attn_by_inverse_layer_idx", False):
                scale /= float(i + 1)
            plan.append({"window": None, "rope": "none", "scale": scale})
            continue
        rope = "global"
        if family == "smollm3" and not no_rope_layers_of(config)[i]:
            rope = "none"
        if family == "gemma3_text" and types[i] == "sliding_attention":
            rope = "local"
        if family in GEMMA:
            scale = float(_get(config, "query_pre_attn_scalar", 256)) ** -0.5
        else:
            scale = 1.0 / math.sqrt(hd)
        plan.append({"window": window if sliding else None, "rope": rope, "scale": scale})
    return plan


# ------------------------------------------------------------------------------------------------- rope


def _rope_parameters(config):
    """Transformers >= 5's rope_parameters as (full-attention dict, sliding-attention dict or None), or None."""
    params = config.get("rope_parameters")
    if not params:
        return None
    if set(params) <= {"full_attention", "sliding_attention"}:  # one dict per layer type (Gemma 3)
        return params["full_attention"], params.get("sliding_attention")
    return params, None


def rope_dim_of(config):
    factor = config.get("partial_rotary_factor")
    if factor is None and _rope_parameters(config):
        factor = _rope_parameters(config)[0].get("partial_rotary_factor")
    return int(head_dim_of(config) * float(1.0 if factor is None else factor))


class Rope:
    """cos/sin tables of one rope variant: inv_freq (rope_dim/2,) for positions < long_from, inv_freq_long
    at and after it (longrope), both times attention_factor."""

    def __init__(self, inv_freq, inv_freq_long=None, long_from=None, attention_factor=1.0):
        self.inv_freq, self.inv_freq_long = inv_freq, inv_freq_long
        self.long_from, self.attention_factor = long_from, attention_factor

    def cos_sin(self, positions):
        """positions (S,) -> cos, sin (S, rope_dim) in the rotate_half layout (the halves repeat)."""
        positions = np.asarray(positions, dtype=np.float64)
        inv = np.broadcast_to(self.inv_freq, (positions.size, self.inv_freq.size))
        if self.inv_freq_long is not None:
            long_rows = positions >= self.long_from
            inv = np.where(long_rows[:, None], self.inv_freq_long[None, :], inv)
        freqs = positions[:, None] * inv
        emb = np.concatenate([freqs, freqs], axis=-1)
        return np.cos(emb) * self.attention_factor, np.sin(emb) * self.attention_factor


def make_rope(config, base, scaling):
    """Transformers' ROPE_INIT_FUNCTIONS for base ``base`` and rope_scaling ``scaling`` (None = default)."""
    dim = rope_dim_of(config)
    exponents = np.arange(0, dim, 2, dtype=np.float64) / dim
    inv_freq = 1.0 / (float(base) ** exponents)
    if not scaling:
        return Rope(inv_freq)
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type == "default":
        return Rope(inv_freq)
    if rope_type == "linear":
        return Rope(inv_freq / float(scaling["factor"]))
    if rope_type == "llama3":
        factor = float(scaling["factor"])
        low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        old_len = float(scaling["original_max_position_embeddings"])
        wavelen = 2.0 * math.pi / inv_freq
        out = np.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1.0 - smooth) * out / factor + smooth * out
        medium = ~(wavelen < old_len / high) & ~(wavelen > old_len / low)
        return Rope(np.where(medium, smoothed, out))
    if rope_type in ("longrope", "su"):
        # Phi-3's config class has original_max_position_embeddings (default 4096) at the top level, which wins
        # over rope_scaling's (standardize_rope_params); other families read rope_scaling's, else
        # max_position_embeddings.
        if family_of(config) == "phi3":
            original = int(_get(config, "original_max_position_embeddings", 4096))
        else:
            original = int(scaling.get("original_max_position_embeddings") or config["max_position_embeddings"])
        factor = scaling.get("factor")
        if factor is None:
            factor = float(config["max_position_embeddings"]) / original
        attention_factor = scaling.get("attention_factor")
        if attention_factor is None:
            attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1.0 + math.log(factor) / math.log(original))
        short = np.asarray(scaling["short_factor"], dtype=np.float64)
        long_ = np.asarray(scaling["long_factor"], dtype=np.float64)
        base_pow = float(base) ** exponents
        return Rope(1.0 / (short * base_pow), 1.0 / (long_ * base_pow), original, float(attention_factor))
    raise NotImplementedError(f"reference: rope_type {rope_type!r}")


def ropes_of(config):
    """{"global": Rope, "local": Rope or None} for the family."""
    family = family_of(config)
    if family == "gpt2":
        return {}
    default_theta = {"qwen3": 1000000.0, "gemma3_text": 1000000.0, "smollm3": 2000000.0}.get(family, 10000.0)
    v5 = _rope_parameters(config)
    if v5 is not None:  # Transformers >= 5: theta and scaling in one dict (per layer type for Gemma 3)
        full, sliding = v5
        ropes = {"global": make_rope(config, float(full.get("rope_theta", default_theta)), full)}
        if family == "gemma3_text":
            sliding = sliding or {"rope_type": "default", "rope_theta": 10000.0}
            ropes["local"] = make_rope(config, float(sliding.get("rope_theta", 10000.0)), sliding)
        return ropes
    theta = float(_get(config, "rope_theta", default_theta))
    ropes = {"global": make_rope(config, theta, config.get("rope_scaling"))}
    if family == "gemma3_text":
        ropes["local"] = make_rope(config, float(_get(config, "rope_local_base_freq", 10000.0)), None)
    return ropes


def rotate(x, cos, sin):
    """x (heads, S, hd); cos/sin (S, rope_dim): rotate_half on the first rope_dim dims, the rest pass."""
    r = cos.shape[-1]
    rot, rest = x[..., :r], x[..., r:]
    half = r // 2
    rotated = np.concatenate([-rot[..., half:], rot[..., :half]], axis=-1)
    return np.concatenate([rot * cos[None] + rotated * sin[None], rest], axis=-1)


# ---------------------------------------------------------------------------------------------- weights


def _t(tensors, name):
    return tensors[name] if name in tensors else None


def _gpt2_prefix(tensors):
    return "transformer." if "transformer.wte.weight" in tensors else ""


def layer_weights(config, tensors, i):
    """The tensors of layer i as (out, in) matrices and vectors under family-neutral keys."""
    family = family_of(config)
    H, KV, hd = num_heads_of(config), num_kv_heads_of(config), head_dim_of(config)
    w = {}
    if family == "gpt2":
        p = _gpt2_prefix(tensors) + f"h.{i}."
        d = hidden_size_of(config)
        c_attn = tensors[p + "attn.c_attn.weight"].T  # Conv1D (in, out) -> (3D, D), rows q | k | v
        b_attn = tensors[p + "attn.c_attn.bias"]
        w["q"], w["k"], w["v"] = c_attn[:d], c_attn[d:2 * d], c_attn[2 * d:]
        w["bq"], w["bk"], w["bv"] = b_attn[:d], b_attn[d:2 * d], b_attn[2 * d:]
        w["o"], w["bo"] = tensors[p + "attn.c_proj.weight"].T, tensors[p + "attn.c_proj.bias"]
        w["attn_norm"], w["attn_norm_b"] = tensors[p + "ln_1.weight"], tensors[p + "ln_1.bias"]
        w["ffn_norm"], w["ffn_norm_b"] = tensors[p + "ln_2.weight"], tensors[p + "ln_2.bias"]
        w["up"], w["b_up"] = tensors[p + "mlp.c_fc.weight"].T, tensors[p + "mlp.c_fc.bias"]
        w["down"], w["b_down"] = tensors[p + "mlp.c_proj.weight"].T, tensors[p + "mlp.c_proj.bias"]
        return w
    p = f"model.layers.{i}."
    w["attn_norm"] = tensors[p + "input_layernorm.weight"]
    if family == "phi3":
        qkv = tensors[p + "self_attn.qkv_proj.weight"]  # (H*hd + 2*KV*hd, D), rows q | k | v
        w["q"], w["k"], w["v"] = qkv[:H * hd], qkv[H * hd:(H + KV) * hd], qkv[(H + KV) * hd:]
        gate_up = tensors[p + "mlp.gate_up_proj.weight"]  # (2I, D), rows gate | up
        inter = intermediate_size_of(config)
        w["gate"], w["up"] = gate_up[:inter], gate_up[inter:]
    else:
        for short, proj in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj")):
            w[short] = tensors[p + f"self_attn.{proj}.weight"]
            w["b" + short] = _t(tensors, p + f"self_attn.{proj}.bias")
        for short, proj in (("gate", "gate_proj"), ("up", "up_proj")):
            w[short] = tensors[p + f"mlp.{proj}.weight"]
            w["b_" + short] = _t(tensors, p + f"mlp.{proj}.bias")
        w["q_norm"] = _t(tensors, p + "self_attn.q_norm.weight")
        w["k_norm"] = _t(tensors, p + "self_attn.k_norm.weight")
    w["o"], w["bo"] = tensors[p + "self_attn.o_proj.weight"], _t(tensors, p + "self_attn.o_proj.bias")
    w["down"], w["b_down"] = tensors[p + "mlp.down_proj.weight"], _t(tensors, p + "mlp.down_proj.bias")
    if family in GEMMA:
        w["post_attn_norm"] = tensors[p + "post_attention_layernorm.weight"]
        w["ffn_norm"] = tensors[p + "pre_feedforward_layernorm.weight"]
        w["post_ffn_norm"] = tensors[p + "post_feedforward_layernorm.weight"]
    else:
        w["ffn_norm"] = tensors[p + "post_attention_layernorm.weight"]
    return w


# ---------------------------------------------------------------------------------------------- forward


def rms_norm(x, weight, eps, one_plus=False):
    """x (..., n) / sqrt(mean(x^2) + eps) * weight (Llama) or * (1 + weight) (Gemma)."""
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * ((1.0 + weight) if one_plus else weight)


def layer_norm(x, weight, bias, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


_erf = np.vectorize(math.erf)


def activation(name, x):
    if name in ("silu", "swish"):
        return x / (1.0 + np.exp(-x))
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    if name == "relu":
        return np.maximum(x, 0.0)
    raise NotImplementedError(f"reference: activation {name!r}")


def activation_of(config):
    family = family_of(config)
    if family == "gpt2":
        return _get(config, "activation_function", "gelu_new")
    if family in GEMMA:
        return _get(config, "hidden_activation", _get(config, "hidden_act", "gelu_pytorch_tanh"))
    return _get(config, "hidden_act", "silu")


def _round_to(value, dtype):
    """A Python float as a tensor of ``dtype`` holds it ("float32" | "bfloat16" | "float16")."""
    f32 = np.array([value], dtype=np.float32)
    if dtype == "float32":
        return float(f32[0])
    if dtype == "float16":
        return float(f32.astype(np.float16)[0])
    if dtype == "bfloat16":  # round to nearest even on the top 16 bits of the float32
        bits = f32.view(np.uint32).astype(np.uint64)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        return float(bits.astype(np.uint32).view(np.float32)[0])
    raise ValueError(f"dtype must be float32, bfloat16 or float16, got {dtype!r}")


def model_dtype_of(config):
    return {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}.get(
        config.get("torch_dtype") or config.get("dtype") or "float32", "float32")


def softcap(x, cap):
    return x if not cap else cap * np.tanh(x / cap)


def _linear(x, weight, bias=None):
    y = x @ weight.T
    return y if bias is None else y + bias


def reference_logits(config, tensors, tokens, dtype=None):
    """(S, V) float64 logits of the causal forward of ``tokens`` (S,) from position 0.

    ``dtype``: the dtype the model's weights are held in (Gemma rounds its embedding normalizer to it);
    default the checkpoint's torch_dtype.
    """
    tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
    family = family_of(config)
    dtype = dtype or model_dtype_of(config)
    n_layers = num_layers_of(config)
    H, KV, hd = num_heads_of(config), num_kv_heads_of(config), head_dim_of(config)
    group = H // KV
    S = tokens.size
    positions = np.arange(S)
    plan = layer_plan(config)
    ropes = ropes_of(config)
    tables = {kind: rope.cos_sin(positions) for kind, rope in ropes.items()}
    act = activation_of(config)
    gemma = family in GEMMA
    eps = float(_get(config, "layer_norm_epsilon", 1e-5)) if family == "gpt2" else float(
        _get(config, "rms_norm_eps", 1e-6 if gemma else 1e-5))
    # Gemma 3's attention never passes attn_logit_softcapping to the attention function (modeling_gemma3.py):
    # only Gemma 2 caps attention logits.
    attn_cap = float(_get(config, "attn_logit_softcapping", 0.0)) if family == "gemma2" else 0.0
    final_cap = float(_get(config, "final_logit_softcapping", 0.0)) if gemma else 0.0

    def norm(x, weight, bias=None):
        if family == "gpt2":
            return layer_norm(x, weight, bias, eps)
        return rms_norm(x, weight, eps, one_plus=gemma)

    if family == "gpt2":
        p = _gpt2_prefix(tensors)
        embed = tensors[p + "wte.weight"]
        x = embed[tokens] + tensors[p + "wpe.weight"][positions]
    else:
        embed = tensors["model.embed_tokens.weight"]
        x = embed[tokens].copy()
        if gemma:
            x = x * _round_to(math.sqrt(hidden_size_of(config)), dtype)

    causal = positions[None, :] <= positions[:, None]  # (S query, S key)
    for i in range(n_layers):
        w = layer_weights(config, tensors, i)
        settings = plan[i]
        h = norm(x, w["attn_norm"], w.get("attn_norm_b"))
        q = _linear(h, w["q"], w.get("bq")).reshape(S, H, hd).transpose(1, 0, 2)  # (H, S, hd)
        k = _linear(h, w["k"], w.get("bk")).reshape(S, KV, hd).transpose(1, 0, 2)  # (KV, S, hd)
        v = _linear(h, w["v"], w.get("bv")).reshape(S, KV, hd).transpose(1, 0, 2)
        if w.get("q_norm") is not None:
            q = rms_norm(q, w["q_norm"], eps, one_plus=gemma)
            k = rms_norm(k, w["k_norm"], eps, one_plus=gemma)
        if settings["rope"] != "none":
            cos, sin = tables[settings["rope"]]
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        allowed = causal.copy()
        if settings["window"] is not None:
            allowed &= (positions[:, None] - positions[None, :]) < settings["window"]
        out = np.empty((H, S, hd))
        for head in range(H):
            scores = softcap(q[head] @ k[head // group].T * settings["scale"], attn_cap)  # (S, S)
            scores = np.where(allowed, scores, -np.inf)
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            out[head] = probs @ v[head // group]
        attn = _linear(out.transpose(1, 0, 2).reshape(S, H * hd), w["o"], w.get("bo"))
        if gemma:
            attn = norm(attn, w["post_attn_norm"])
        x = x + attn
        h = norm(x, w["ffn_norm"], w.get("ffn_norm_b"))
        if family == "gpt2":
            mlp = _linear(activation(act, _linear(h, w["up"], w["b_up"])), w["down"], w["b_down"])
        else:
            gate = _linear(h, w["gate"], w.get("b_gate"))
            up = _linear(h, w["up"], w.get("b_up"))
            mlp = _linear(activation(act, gate) * up, w["down"], w.get("b_down"))
        if gemma:
            mlp = norm(mlp, w["post_ffn_norm"])
        x = x + mlp

    if family == "gpt2":
        p = _gpt2_prefix(tensors)
        x = layer_norm(x, tensors[p + "ln_f.weight"], tensors[p + "ln_f.bias"], eps)
        return x @ embed.T
    x = norm(x, tensors["model.norm.weight"])
    head = embed if (tied_of(config) or "lm_head.weight" not in tensors) else tensors["lm_head.weight"]
    return softcap(x @ head.T, final_cap)


def greedy_chain(config, tensors, prompt, steps, dtype=None):
    """The reference's greedy continuation of ``prompt``: at each step the whole sequence is recomputed and
    the last row's argmax appended.  Returns (tokens (steps,), margins (steps,), scales (steps,)) where a
    margin is the gap between the best and second-best logit and a scale is that row's max |logit| (a
    float32 implementation agrees on the argmax when the margin is well above its error ~1e-6 * scale)."""
    seq = [int(t) for t in prompt]
    out, margins, scales = [], [], []
    for _ in range(steps):
        row = reference_logits(config, tensors, seq, dtype=dtype)[-1]
        best = int(np.argmax(row))
        top2 = np.sort(row)[-2:]
        margins.append(float(top2[1] - top2[0]))
        scales.append(float(np.abs(row).max()))
        out.append(best)
        seq.append(best)
    return np.array(out, dtype=np.int64), np.array(margins), np.array(scales)
