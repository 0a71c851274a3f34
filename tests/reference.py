"""An independent float64 numpy reference of the Hugging Face Llama-family forward and logits processors.

Written from the architecture as Transformers defines it (models/llama/modeling_llama.py, models/mistral,
models/qwen2, modeling_rope_utils.py, generation/logits_process.py), sharing no code with the package, so
that the package's logits and generation can be checked against it.  Everything here runs in float64 on
the exact weight values the checkpoint file holds (see tests/checkpoints.py), so the only differences from
the package are the package's own float32 rounding.

Shapes in comments: S = sequence length, D = hidden size, H = query heads, KV = key/value heads,
hd = head_dim, V = vocabulary.
"""

import math

import numpy as np


# ----------------------------------------------------------------------------------------------- config


def head_dim_of(config):
    """Transformers: ``getattr(config, "head_dim", None) or hidden_size // num_attention_heads``."""
    hd = config.get("head_dim")
    return int(hd) if hd else config["hidden_size"] // config["num_attention_heads"]


def num_kv_heads_of(config):
    kv = config.get("num_key_value_heads")
    return int(kv) if kv is not None else int(config["num_attention_heads"])


def sliding_window_of(config):
    """The attention window in tokens, or None for full causal attention.

    Mistral uses ``sliding_window`` whenever it is set; Qwen2 only with ``use_sliding_window`` (and this
    reference does not model Qwen2's per-layer ``max_window_layers``, so it refuses that case); Llama never.
    """
    arch = (config.get("architectures") or ["LlamaForCausalLM"])[0]
    window = config.get("sliding_window")
    if arch == "MistralForCausalLM":
        return int(window) if window is not None else None
    if arch == "Qwen2ForCausalLM" and config.get("use_sliding_window") and window is not None:
        raise NotImplementedError("reference: Qwen2 use_sliding_window is not modelled")
    return None


# ------------------------------------------------------------------------------------------------- rope


def rope_inv_freq(config):
    """(hd/2,) float64 inverse frequencies, following Transformers' ROPE_INIT_FUNCTIONS.

    default: inv_freq[i] = 1 / theta^(2i/hd)
    linear:  default / factor
    llama3:  wavelength 2*pi/inv_freq; above original_max/low_freq_factor divide by factor, below
             original_max/high_freq_factor keep, in between interpolate with
             smooth = (original_max/wavelen - low) / (high - low):
             (1 - smooth) * inv_freq / factor + smooth * inv_freq.
    """
    dim = head_dim_of(config)
    dim = int(dim * float(config.get("partial_rotary_factor", 1.0)))
    base = float(config.get("rope_theta", 10000.0))
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    scaling = config.get("rope_scaling")
    if not scaling:
        return inv_freq
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type == "default":
        return inv_freq
    if rope_type == "linear":
        return inv_freq / float(scaling["factor"])
    if rope_type == "llama3":
        factor = float(scaling["factor"])
        low = float(scaling["low_freq_factor"])
        high = float(scaling["high_freq_factor"])
        old_len = float(scaling["original_max_position_embeddings"])
        low_freq_wavelen = old_len / low
        high_freq_wavelen = old_len / high
        wavelen = 2.0 * math.pi / inv_freq
        out = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1.0 - smooth) * out / factor + smooth * out
        medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
        return np.where(medium, smoothed, out)
    raise NotImplementedError(f"reference: rope_type {rope_type!r}")


def rotate_half(x):
    """(..., hd) -> (..., hd): [-x2, x1] where x1, x2 are the two halves (pairs i and i + hd/2)."""
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def apply_rope(x, positions, inv_freq):
    """x (heads, S, hd), positions (S,) -> rotated (heads, S, hd), the rotate_half convention."""
    freqs = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]  # (S, hd/2)
    emb = np.concatenate([freqs, freqs], axis=-1)  # (S, hd)
    return x * np.cos(emb)[None] + rotate_half(x) * np.sin(emb)[None]


# ---------------------------------------------------------------------------------------------- forward


def rms_norm(x, weight, eps):
    """x (S, D) * 1/sqrt(mean(x^2) + eps) * weight (D,)."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def silu(x):
    return x / (1.0 + np.exp(-x))


def _linear(tensors, name, x):
    """x (S, in) @ W.T (out, in) (+ bias (out,) when the checkpoint has one)."""
    y = x @ tensors[name + ".weight"].T
    bias = tensors.get(name + ".bias")
    return y if bias is None else y + bias


class ReferenceCache:
    """Per-layer float64 keys and values of the positions seen so far: lists of (KV, T, hd)."""

    def __init__(self, num_layers):
        self.keys = [None] * num_layers
        self.values = [None] * num_layers
        self.length = 0


def reference_forward(config, tensors, token_ids, cache=None):
    """Logits (S, V) float64 of ``token_ids`` (S,) appended after what ``cache`` holds (positions count on).

    Without a cache this is the plain causal forward of the sequence from position 0.
    """
    token_ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
    n_layers = int(config["num_hidden_layers"])
    n_heads = int(config["num_attention_heads"])
    n_kv = num_kv_heads_of(config)
    hd = head_dim_of(config)
    eps = float(config.get("rms_norm_eps", 1e-6))
    window = sliding_window_of(config)
    inv_freq = rope_inv_freq(config)
    if cache is None:
        cache = ReferenceCache(n_layers)
    seq = token_ids.shape[0]
    start = cache.length
    positions = np.arange(start, start + seq)
    total = start + seq
    key_pos = np.arange(total)
    # allowed[s, j]: query at absolute position p = start + s may see key j.
    allowed = key_pos[None, :] <= positions[:, None]
    if window is not None:
        allowed &= (positions[:, None] - key_pos[None, :]) < window
    group = n_heads // n_kv

    x = tensors["model.embed_tokens.weight"][token_ids]  # (S, D)
    for layer in range(n_layers):
        p = f"model.layers.{layer}."
        h = rms_norm(x, tensors[p + "input_layernorm.weight"], eps)
        q = _linear(tensors, p + "self_attn.q_proj", h).reshape(seq, n_heads, hd).transpose(1, 0, 2)
        k = _linear(tensors, p + "self_attn.k_proj", h).reshape(seq, n_kv, hd).transpose(1, 0, 2)
        v = _linear(tensors, p + "self_attn.v_proj", h).reshape(seq, n_kv, hd).transpose(1, 0, 2)
        q = apply_rope(q, positions, inv_freq)  # (H, S, hd)
        k = apply_rope(k, positions, inv_freq)  # (KV, S, hd)
        if cache.keys[layer] is not None:
            k = np.concatenate([cache.keys[layer], k], axis=1)  # (KV, total, hd)
            v = np.concatenate([cache.values[layer], v], axis=1)
        cache.keys[layer], cache.values[layer] = k, v
        out = np.empty((n_heads, seq, hd))
        for head in range(n_heads):
            kv_head = head // group
            scores = q[head] @ k[kv_head].T / math.sqrt(hd)  # (S, total)
            scores = np.where(allowed, scores, -np.inf)
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            out[head] = probs @ v[kv_head]
        attn = out.transpose(1, 0, 2).reshape(seq, n_heads * hd)
        x = x + _linear(tensors, p + "self_attn.o_proj", attn)
        h = rms_norm(x, tensors[p + "post_attention_layernorm.weight"], eps)
        gate = _linear(tensors, p + "mlp.gate_proj", h)
        up = _linear(tensors, p + "mlp.up_proj", h)
        x = x + _linear(tensors, p + "mlp.down_proj", silu(gate) * up)
    cache.length = total
    x = rms_norm(x, tensors["model.norm.weight"], eps)
    head_w = tensors.get("lm_head.weight")
    if head_w is None or config.get("tie_word_embeddings", False):
        head_w = tensors["model.embed_tokens.weight"]
    return x @ head_w.T


def reference_logits(config, tensors, token_ids):
    """(S, V) float64 logits of the causal forward of ``token_ids`` (S,) from position 0."""
    return reference_forward(config, tensors, token_ids)


# ----------------------------------------------------------------------------------- logits processors
# Each takes and returns a (V,) float64 row (one sequence); removed entries become -inf.


def repetition_penalty(scores, previous_tokens, penalty):
    """Transformers RepetitionPenaltyLogitsProcessor: for each distinct previous token,
    score < 0 ? score * penalty : score / penalty."""
    out = np.array(scores, dtype=np.float64)
    if penalty == 1.0:
        return out
    idx = np.unique(np.asarray(previous_tokens, dtype=np.int64))
    s = out[idx]
    out[idx] = np.where(s < 0, s * penalty, s / penalty)
    return out


def suppress_tokens(scores, tokens):
    """MinNewTokensLengthLogitsProcessor while too few tokens are new: the eos ids get -inf."""
    out = np.array(scores, dtype=np.float64)
    out[np.asarray(tokens, dtype=np.int64)] = -np.inf
    return out


def temperature(scores, temp):
    """TemperatureLogitsWarper: scores / temperature (Transformers adds it only when temperature != 1)."""
    out = np.array(scores, dtype=np.float64)
    return out if temp == 1.0 else out / temp


def top_k(scores, k):
    """TopKLogitsWarper: keep scores >= the k-th largest (ties kept); k = 0 or None disables it."""
    out = np.array(scores, dtype=np.float64)
    if not k:
        return out
    k = min(max(int(k), 1), out.shape[-1])
    kth = np.sort(out)[::-1][k - 1]
    out[out < kth] = -np.inf
    return out


def _softmax(x):
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)
    m = x[finite].max()
    e = np.where(finite, np.exp(np.where(finite, x, m) - m), 0.0)
    return e / e.sum()


def top_p_cumulative(scores):
    """(order, cumulative): indices sorted ascending by score and the cumulative softmax in that order."""
    order = np.argsort(scores, kind="stable")
    return order, np.cumsum(_softmax(np.asarray(scores)[order]))


def top_p(scores, p):
    """TopPLogitsWarper: sort ascending, cumulative softmax, remove where cumprob <= 1 - top_p,
    always keep the largest one.  Transformers adds it only when top_p < 1."""
    out = np.array(scores, dtype=np.float64)
    if p >= 1.0:
        return out
    order, cum = top_p_cumulative(out)
    remove = cum <= (1.0 - p)
    remove[-1] = False
    out[order[remove]] = -np.inf
    return out


def process_scores(logits, *, previous_tokens=(), new_tokens=0, do_sample=False, temperature_=1.0,
                   top_k_=50, top_p_=1.0, repetition_penalty_=1.0, eos_token_ids=(), min_new_tokens=0):
    """The processed scores of one row at one step, in Transformers' order: repetition penalty,
    min_new_tokens eos suppression, then (sampling only) temperature, top_k, top_p."""
    s = np.array(logits, dtype=np.float64)
    s = repetition_penalty(s, list(previous_tokens), repetition_penalty_)
    if min_new_tokens and new_tokens < min_new_tokens and len(eos_token_ids):
        s = suppress_tokens(s, list(eos_token_ids))
    if do_sample:
        s = temperature(s, temperature_)
        s = top_k(s, top_k_)
        s = top_p(s, top_p_)
    return s


def softmax(scores):
    """Probabilities of a (V,) score row; -inf entries get 0."""
    return _softmax(scores)


def greedy_chain(config, tensors, prompt, steps, **process_kwargs):
    """The greedy continuation of ``prompt`` by the reference: each step recomputes the logits of the whole
    sequence, processes the last row (repetition penalty over prompt + generated, min_new_tokens) and takes
    the argmax.  Returns (tokens (steps,), margins (steps,)) where a margin is the gap between the best
    and the second best processed score (how safely a float32 implementation must agree)."""
    seq = [int(t) for t in prompt]
    out, margins = [], []
    for step in range(steps):
        logits = reference_logits(config, tensors, seq)[-1]
        s = process_scores(logits, previous_tokens=seq, new_tokens=step, **process_kwargs)
        best = int(np.argmax(s))
        srt = np.sort(s[np.isfinite(s)])
        margins.append(float(srt[-1] - srt[-2]) if srt.size > 1 else float("inf"))
        out.append(best)
        seq.append(best)
    return np.array(out, dtype=np.int64), np.array(margins)
