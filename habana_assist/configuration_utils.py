"""The model configuration of every supported family, read from a checkpoint's config.json.

One config class (PretrainedConfig; LlamaConfig and AutoConfig are the same class) for the nine families of
SUPPORTED_ARCHITECTURES. What differs between families is data, each family's row in models/<family>.py (read
here from the registry, models.FAMILIES): its required fields and Transformers' defaults per model_type
(LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, Phi3Config, Gemma2Config, Gemma3TextConfig,
SmolLM3Config, GPT2Config), its norm, activation field, bias, window and rotary rules; this module is the generic
reader and validator of those rows. Every other key of config.json is kept as an attribute, as Transformers
does. GPT-2's own names (n_embd, n_layer, n_head, n_positions, n_inner) are what it stores; hidden_size,
num_hidden_layers, num_attention_heads, max_position_embeddings, intermediate_size, num_key_value_heads and
head_dim read through to them (its row's aliases and computed fields), as GPT2Config's attribute_map does.

Validation splits two ways: UnsupportedModelError for a valid model this package does not implement
(another architecture, a mixture of experts, an activation or a RoPE scaling the core does not compute),
CheckpointError for a config.json that cannot describe any model (missing shape fields, non-positive sizes,
heads that do not divide, an odd rotary dimension, layer lists of the wrong length). Each message names the
field.

What the core computes from a config: core_config(dtype) (the model-level dict of _core.Model, see
csrc/ha.h) and layer_settings() (each layer's window, rotary table and attention scale). Where Transformers
versions differ, the newest semantics are followed:
- longrope (Phi-3): rope_scaling's "factor" when given, else max_position_embeddings /
  original_max_position_embeddings; as Transformers, the factors are chosen per forward: the long table for every
  token of a forward whose sequence length (last position + 1) passes original_max_position_embeddings, else the
  short one (the core's rope_long_from, per append and row); generate() runs a row again whole where it passes it,
  as Transformers' Phi-3 generate() does (docs/models.md).
- SmolLM3 without layer_types: with use_sliding_window, the layers without rotary slide (Transformers'
  SmolLM3Config), not Qwen2's i >= max_window_layers rule.
- rope_parameters (Transformers >= 5) is read as rope_theta plus rope_scaling; Gemma 3's per-layer-type form
  ({"full_attention": ..., "sliding_attention": ...}) as rope_theta/rope_scaling and rope_local_base_freq.
"""

from __future__ import annotations

import copy
import json
import math
import os
import warnings
from collections import namedtuple
from typing import Any, Literal, Optional, Union, overload

import numpy as np

from .checkpoints.hub import CONFIG_FILES, pop_hub_arguments, resolve
from .checkpoints.safetensors import bfloat16_bits_to_float32, to_bfloat16_bits
from .errors import (
    CheckpointError,
    CheckpointNotFoundError,
    InvalidInputError,
    UnsupportedModelError,
    unsupported_family_hint,
)
from .models import ARCHITECTURES, FAMILIES
from .utils.files import write_json
from .utils.tensors import optional_torch
from .utils.types import PathLike

__all__ = [
    "PretrainedConfig",
    "LlamaConfig",
    "AutoConfig",
    "CONFIG_NAME",
    "SUPPORTED_ARCHITECTURES",
    "SUPPORTED_ROPE_TYPES",
    "SUPPORTED_ACTIVATIONS",
    "FLOAT_DTYPES",
]

CONFIG_NAME = "config.json"
# architecture -> model_type, from the registry (models/): one row per family
SUPPORTED_ARCHITECTURES = {name: row.model_type for name, row in ARCHITECTURES.items()}
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "longrope")
# Transformers' ACT2FN name -> the core's activation (csrc/ha.h, ha_act). gelu_new, gelu_fast and
# gelu_pytorch_tanh are the same function: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
SUPPORTED_ACTIVATIONS = {
    "silu": "silu",
    "swish": "silu",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_new": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
}
FLOAT_DTYPES = ("float32", "bfloat16", "float16")
_LAYER_TYPES = ("full_attention", "sliding_attention")
_OTHER_LAYER_TYPES = ("chunked_attention", "linear_attention")  # valid in Transformers, not computed here
_LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
_FIX = "use the config.json that was saved with this checkpoint"
MAX_HEAD_DIM = 512  # the core's limit (csrc/ha.h, HA_MAX_HEAD_DIM)

# Mixture-of-experts: model types and config keys that say so (a dense family's forward would be wrong).
_MOE_MODEL_TYPES = (
    "mixtral",
    "dbrx",
    "deepseek_v2",
    "deepseek_v3",
    "jamba",
    "gpt_oss",
    "arctic",
    "llama4",
    "llama4_text",
    "minimax",
    "jetmoe",
)
_MOE_KEYS = (
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "num_experts_per_tok",
    "n_shared_experts",
    "num_shared_experts",
)

# Keyword overrides of from_pretrained (Transformers' PretrainedConfig.from_dict): a keyword sets the config's
# attribute of that name where Transformers' config has one; the others are returned unused (from_pretrained of a
# model refuses them, as Transformers' model constructor does). Every Transformers config has these attributes:
_TRANSFORMERS_COMMON = (
    "architectures",
    "chunk_size_feed_forward",
    "id2label",
    "label2id",
    "num_labels",
    "is_encoder_decoder",
    "output_attentions",
    "output_hidden_states",
    "problem_type",
    "return_dict",
    "transformers_version",
    "name_or_path",
    "_name_or_path",
    "use_cache",
    "tie_word_embeddings",
    "dtype",
    "torch_dtype",
)
# Transformers 5 holds these in rope_parameters (a config.json of Transformers 4 that has them is read into it): no
# attribute of its config, so never an override; pass rope_parameters.
_IN_ROPE_PARAMETERS = ("rope_theta", "partial_rotary_factor", "rope_local_base_freq")
# Attention implementations a config may name: one runs here (from_pretrained's attn_implementation)
_ATTN_IMPLEMENTATIONS = (None, "eager", "sdpa")

# Transformers' PretrainedConfig attributes a script may read though config.json rarely holds them.
_PRETRAINED_DEFAULTS = {
    "is_encoder_decoder": False,
    "is_decoder": False,
    "use_cache": True,
    "return_dict": True,
    "output_attentions": False,
    "output_hidden_states": False,
    "add_cross_attention": False,
    "tie_encoder_decoder": False,
    "chunk_size_feed_forward": 0,
    "problem_type": None,
    "name_or_path": "",
    "_name_or_path": "",
}


def _dtype_name(value):
    """A dtype as config.json writes it: a name ("bfloat16") from a name, "torch.bfloat16", a torch.dtype or a numpy
    dtype; anything else (None, what a config.json holds there by mistake) as it is."""
    if isinstance(value, str):
        return value.removeprefix("torch.")
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return str(value).removeprefix("torch.")
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return np.dtype(value).name
    return value


def _dtype_value(name):
    """A dtype name from config.json as the config reports it: torch's dtype where torch is importable and the name
    is one of its dtypes (Transformers' PretrainedConfig holds torch.dtype), else the name (None stays None)."""
    torch = optional_torch() if isinstance(name, str) else None
    value = getattr(torch, name, None) if torch is not None else None
    return value if torch is not None and isinstance(value, torch.dtype) else name


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x):
    """A finite int or float that converts to a finite float (10**400 does not: it would overflow later)."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(float(x))
    except OverflowError:
        return False


def _is_size(x):
    """A positive int the core can take as int64."""
    return _is_int(x) and 0 < x < 2**63


def _bad(field, value, problem):
    return CheckpointError(f"config.json: field {field!r} is {_short(value)}: {problem}; {_FIX}")


def _short(value):
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _supported_list():
    return ", ".join(f"{a} (model_type {t!r})" for a, t in SUPPORTED_ARCHITECTURES.items())


def _is_moe_name(name):
    lowered = name.lower()
    return "moe" in lowered or "mixtral" in lowered or lowered in _MOE_MODEL_TYPES


def _family(d):
    """-> the model_type of a supported family, from "architectures", else from "model_type"."""
    architectures = d.get("architectures")
    model_type = d.get("model_type")
    if architectures is not None:
        if not (isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)):
            raise _bad("architectures", architectures, "expected a list of class names")
        found = [a for a in architectures if a in SUPPORTED_ARCHITECTURES]
        if len(found) == 1:
            return SUPPORTED_ARCHITECTURES[found[0]]
        moe = [a for a in architectures if _is_moe_name(a)]
        if moe and not found:
            raise UnsupportedModelError(
                f"config.json: architectures {architectures} name a mixture-of-experts model ({moe[0]}), which "
                f"is not supported; supported (dense models): {_supported_list()}"
            )
        raise UnsupportedModelError(
            f"config.json: architectures {_short(architectures)} "
            f"{'names several' if found else 'names none'} of the supported architectures; this package runs "
            f"exactly one of {_supported_list()}"
        )
    if isinstance(model_type, str) and model_type in FAMILIES:  # a list or object would not hash
        return model_type
    if isinstance(model_type, str) and _is_moe_name(model_type):
        raise UnsupportedModelError(
            f"config.json: model_type {model_type!r} is a mixture-of-experts model, which is not supported; "
            f"supported (dense models): {_supported_list()}"
        )
    raise UnsupportedModelError(
        f"config.json: no 'architectures' and model_type {_short(model_type)} is not supported; supported: "
        f"{_supported_list()}"
    )


def _check_moe(d):
    """UnsupportedModelError if config.json describes a mixture of experts under a dense family's name."""
    for key, value in d.items():
        if not (key in _MOE_KEYS or key.startswith("moe_")):
            continue
        if value is True or (_is_number(value) and value > 0):
            raise UnsupportedModelError(
                f"config.json: {key!r} is {_short(value)}: a mixture-of-experts model, which is not supported "
                "(only dense models are); use the dense checkpoint of this family"
            )


def _rope_type(scaling, family, field="rope_scaling"):
    """rope_scaling (or None) -> "default" | "linear" | "llama3" | "longrope"; validates its scalar parameters
    (longrope's factor lists are checked where the rotary dimension is known: _longrope)."""
    if scaling is None:
        return "default"
    if not isinstance(scaling, dict):
        raise _bad(field, scaling, "expected null or an object")
    rope_type = scaling.get("rope_type", scaling.get("type"))
    if rope_type is None:
        raise _bad(field, scaling, "it has neither 'rope_type' nor 'type'")
    if isinstance(rope_type, str):  # Phi-3's older names of longrope ("su", "yarn")
        rope_type = FAMILIES[family].rope_type_aliases.get(rope_type, rope_type)
    if not isinstance(rope_type, str) or rope_type not in SUPPORTED_ROPE_TYPES:
        raise UnsupportedModelError(
            f"config.json: {field} type {_short(rope_type)} is not supported (supported: "
            f"{', '.join(SUPPORTED_ROPE_TYPES)}); use a checkpoint whose {field} is one of those, or null"
        )
    if family == "phi3" and rope_type not in ("default", "longrope"):
        raise _bad(field, scaling, f"Phi-3 takes rope type 'default' or 'longrope', not {rope_type!r}")
    if family == "gemma3_text" and rope_type == "longrope":
        raise UnsupportedModelError(
            f"config.json: {field} type 'longrope' is not supported for Gemma 3 (its "
            "sliding layers have their own rotary); supported there: default, linear, llama3"
        )
    needed = {"default": (), "linear": ("factor",), "llama3": _LLAMA3_KEYS, "longrope": ()}[rope_type]
    for key in needed:
        if not (_is_number(scaling.get(key)) and scaling[key] > 0):
            raise _bad(field, scaling, f"rope type {rope_type!r} needs a positive number {key!r}")
    if rope_type == "llama3" and not scaling["high_freq_factor"] > scaling["low_freq_factor"]:
        raise _bad(field, scaling, "llama3 needs high_freq_factor > low_freq_factor")
    if rope_type == "llama3" and not _is_size(scaling["original_max_position_embeddings"]):
        raise _bad(field, scaling, "llama3 needs original_max_position_embeddings, a positive integer")
    if rope_type == "longrope":
        for key in ("factor", "attention_factor"):
            if scaling.get(key) is not None and not (_is_number(scaling[key]) and scaling[key] > 0):
                raise _bad(field, scaling, f"longrope's {key!r} must be a positive number or absent")
        original = scaling.get("original_max_position_embeddings")
        if original is not None and not _is_size(original):
            raise _bad(field, scaling, "longrope's 'original_max_position_embeddings' must be a positive integer")
    return rope_type


def _base_inv_freq(theta, dim):
    """Transformers' default rope: 1 / theta ** (2i / dim), i < dim / 2, in float64 (dim,)/2."""
    return 1.0 / float(theta) ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def _llama3(inv_freq, s):
    """Transformers' _compute_llama3_parameters on a float64 table."""
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old_context_len = s["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_context_len / low, old_context_len / high
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return np.where(is_medium, smoothed, scaled)


def _factor_table(scaling, key, n):
    """longrope's short_factor / long_factor -> float64 (n,), checked."""
    values = scaling.get(key)
    if not (isinstance(values, list) and all(_is_number(v) and v > 0 for v in values)):
        raise _bad("rope_scaling", scaling, f"longrope's {key!r} must be a list of positive numbers")
    if len(values) != n:
        raise _bad(
            "rope_scaling",
            scaling,
            f"longrope's {key!r} has {len(values)} values but the rotary dimension "
            f"{2 * n} needs {n} (rotary dimension / 2)",
        )
    return np.array(values, dtype=np.float64)


# A rotary variant as the core takes it: inv_freq (rope_dim/2,) float64, inv_freq_long (or None) for positions
# >= long_from, scale multiplying cos and sin.
Rope = namedtuple("Rope", "inv_freq inv_freq_long long_from scale")


# Multimodal architectures whose text model is a supported one: its config.json nests the text model's config in
# "text_config" (Gemma 3 4B/12B/27B are Gemma3ForConditionalGeneration checkpoints).
_TEXT_MODELS = {name: (row.architecture, row.model_type) for row in FAMILIES.values() for name in row.multimodal}


def _text_model(d):
    """d, or for a multimodal config in _TEXT_MODELS its text model's config: text_config, with the top level's
    token ids and dtype (what Transformers' generate and from_pretrained read) where given; the vision part is
    left out (loading reads only the text model's tensors)."""
    archs = d.get("architectures")
    name = (
        next((a for a in archs if isinstance(a, str) and a in _TEXT_MODELS), None) if isinstance(archs, list) else None
    )
    if name is None:
        return d
    text = d.get("text_config")
    if not isinstance(text, dict):
        raise _bad("text_config", text, f"{name} needs its text model's config object")
    architecture, model_type = _TEXT_MODELS[name]
    out = copy.deepcopy(text)
    for key in ("bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype"):
        if key in d:
            out[key] = d[key]
    out["architectures"] = [architecture]
    out.setdefault("model_type", model_type)
    return out


def _named_family(d):
    """The row of the family config dict d names (its first supported architecture, else its model_type), or
    None; never raises (what __getattr__ reads, also on a config being copied or unpickled)."""
    archs = d.get("architectures")
    if isinstance(archs, list):
        return next((ARCHITECTURES[a] for a in archs if isinstance(a, str) and a in ARCHITECTURES), None)
    model_type = d.get("model_type")
    return FAMILIES.get(model_type) if isinstance(model_type, str) else None


class PretrainedConfig:
    """Hyperparameters of a causal LM of a supported family; attributes are config.json's keys (Transformers'
    defaults filled in). LlamaConfig and AutoConfig name this same class.

    Derived: family (the model_type), rope_type, rope_dim, activation (the core's name), qkv_bias (q/k/v
    projections have biases), o_bias (o_proj has one), mlp_biases (gate/up/down have them), qk_norm.
    """

    def __init__(self, /, **kwargs: Any) -> None:
        methods = sorted(
            k for k in kwargs if hasattr(PretrainedConfig, k) and not isinstance(getattr(PretrainedConfig, k), property)
        )
        if methods:  # data in place of _validate, to_dict... would break every later call
            raise CheckpointError(
                f"config.json: key(s) {methods} name config methods or attributes, not config fields; {_FIX}"
            )
        d = _text_model(copy.deepcopy(kwargs))
        family = _family(d)
        _check_moe(d)
        spec = FAMILIES[family]
        for alias, name in spec.aliases.items():  # GPT2Config(hidden_size=...) sets n_embd
            if alias in d:
                value = d.pop(alias)
                if name in d and d[name] != value:
                    raise _bad(alias, value, f"it disagrees with {name}={_short(d[name])} ({spec.title} stores {name})")
                d[name] = value
        missing = [k for k in spec.required if k not in d]
        if missing:
            raise CheckpointError(f"config.json: required field(s) {', '.join(missing)} missing; {_FIX}")
        for key, value in spec.defaults.items():
            d.setdefault(key, value)
        d.setdefault("model_type", family)
        d.setdefault("architectures", None)
        if "torch_dtype" not in kwargs and "dtype" in d:  # Transformers >= 5 writes "dtype"
            d["torch_dtype"] = d["dtype"]
        for key in ("torch_dtype", "dtype"):  # held as config.json writes them (torch_dtype/dtype report torch's)
            if key in d:
                d[key] = _dtype_name(d[key])
        if spec.rotary is not None:
            self._read_rope_parameters(d, kwargs)
        if "num_key_value_heads" in spec.defaults and d["num_key_value_heads"] is None:
            d["num_key_value_heads"] = d["num_attention_heads"]
        if spec.windows == "from_layer" and not d["use_sliding_window"]:
            d["sliding_window"] = None  # as Qwen2Config/Qwen3Config: the window only exists when switched on
        self.__dict__.update(d)
        self._validate(family)
        if "head_dim" in spec.defaults and self.head_dim is None:
            self.__dict__["head_dim"] = self.hidden_size // self.num_attention_heads  # a field, as those above

    @staticmethod
    def _read_rope_parameters(d, kwargs):
        """Transformers >= 5 folds rope_theta, rope_scaling and partial_rotary_factor into rope_parameters, per
        layer type for Gemma 3: copy them out where config.json does not set them itself."""
        rope_parameters = d.get("rope_parameters")
        if not isinstance(rope_parameters, dict) or not rope_parameters:
            return
        nested = set(rope_parameters) <= set(_LAYER_TYPES)
        full = rope_parameters.get("full_attention") if nested else rope_parameters
        if isinstance(full, dict):
            if "rope_theta" not in kwargs and "rope_theta" in full:
                d["rope_theta"] = full["rope_theta"]
            if "partial_rotary_factor" not in kwargs and "partial_rotary_factor" in full:
                d["partial_rotary_factor"] = full["partial_rotary_factor"]
            if kwargs.get("rope_scaling") is None and full.get("rope_type", full.get("type", "default")) != "default":
                d["rope_scaling"] = full
        local = rope_parameters.get("sliding_attention") if nested else None
        if isinstance(local, dict):
            if "rope_local_base_freq" not in kwargs and "rope_theta" in local:
                d["rope_local_base_freq"] = local["rope_theta"]
            if local.get("rope_type", local.get("type", "default")) != "default":
                raise UnsupportedModelError(
                    f"config.json: rope_parameters['sliding_attention'] has rope type "
                    f"{_short(local.get('rope_type', local.get('type')))}; only 'default' is supported for the "
                    "sliding layers' rotary"
                )

    # ---- validation ----------------------------------------------------------------------------------------

    def _validate(self, family):
        spec = FAMILIES[family]
        gpt2 = family == "gpt2"
        sizes = spec.required + (("n_positions",) if gpt2 else ("num_key_value_heads", "max_position_embeddings"))
        for key in sizes:
            value = getattr(self, key)
            if not _is_size(value):  # the core takes sizes as int64
                raise _bad(key, value, "expected a positive integer (below 2**63)")
        if gpt2:
            if self.n_inner is not None and not _is_size(self.n_inner):
                raise _bad("n_inner", self.n_inner, "expected a positive integer (below 2**63) or null (4 * n_embd)")
            if self.n_embd % self.n_head:
                raise _bad("n_embd", self.n_embd, f"it must be a multiple of n_head ({self.n_head})")
        else:
            if self.num_attention_heads % self.num_key_value_heads:
                raise _bad(
                    "num_key_value_heads",
                    self.num_key_value_heads,
                    f"it must divide num_attention_heads ({self.num_attention_heads})",
                )
            head_dim = self.hidden_size // self.num_attention_heads if self.head_dim is None else self.head_dim
            if not _is_size(head_dim):
                raise _bad(
                    "head_dim" if self.head_dim is not None else "hidden_size // num_attention_heads",
                    head_dim,
                    "expected a positive integer",
                )
        head_dim = self.n_embd // self.n_head if gpt2 else head_dim
        if head_dim > MAX_HEAD_DIM:
            raise UnsupportedModelError(
                f"config.json: a head dimension of {head_dim} is not supported (the core "
                f"computes heads of up to {MAX_HEAD_DIM})"
            )
        eps = getattr(self, spec.eps)
        if not (_is_number(eps) and eps > 0):
            raise _bad(spec.eps, eps, "expected a positive number")
        bools = (
            "tie_word_embeddings",
            "attention_bias",
            "mlp_bias",
            "use_sliding_window",
            "scale_attn_weights",
            "scale_attn_by_inverse_layer_idx",
            "reorder_and_upcast_attn",
        )
        for key in (k for k in bools if k in spec.defaults):
            if not isinstance(getattr(self, key), bool):
                raise _bad(key, getattr(self, key), "expected true or false")
        for key in ("bos_token_id", "pad_token_id"):
            value = getattr(self, key)
            if value is not None and not _is_int(value):
                raise _bad(key, value, "expected an integer or null")
        eos = self.eos_token_id
        if not (eos is None or _is_int(eos) or (isinstance(eos, list) and all(_is_int(e) for e in eos))):
            raise _bad("eos_token_id", eos, "expected an integer, a list of integers or null")
        act = getattr(self, spec.act)
        if not isinstance(act, str) or act not in SUPPORTED_ACTIVATIONS:
            raise UnsupportedModelError(
                f"config.json: {spec.act} {_short(act)} is not supported (supported: "
                f"{', '.join(repr(a) for a in SUPPORTED_ACTIVATIONS)}); the core computes those activations only"
            )
        if gpt2:
            return
        self._validate_attention(family)
        self._validate_rotary(family)

    def _validate_attention(self, family):
        """Windows, layer lists, Gemma's attention scale and softcaps."""
        spec = FAMILIES[family]
        n = self.num_hidden_layers
        if "sliding_window" in spec.defaults:
            window = self.sliding_window
            if window is not None and not _is_size(window):
                raise _bad("sliding_window", window, "expected a positive integer (below 2**63) or null")
        if (
            spec.windows == "from_layer"
            and self.use_sliding_window
            and self.layer_types is None
            and not (_is_int(self.max_window_layers) and self.max_window_layers >= 0)
        ):
            raise _bad("max_window_layers", self.max_window_layers, "expected a non-negative integer")
        if spec.windows in ("from_layer", "nope", "alternate", "pattern") and self.layer_types is not None:
            types = self.layer_types
            if not isinstance(types, list) or len(types) != n:
                raise _bad("layer_types", types, f"expected a list of num_hidden_layers={n} layer types")
            for t in types:
                if isinstance(t, str) and t in _OTHER_LAYER_TYPES:
                    raise UnsupportedModelError(
                        f"config.json: layer_types holds {t!r}, which is not supported "
                        f"(supported: {', '.join(_LAYER_TYPES)})"
                    )
                if not (isinstance(t, str) and t in _LAYER_TYPES):
                    raise _bad(
                        "layer_types",
                        types,
                        f"{_short(t)} is not a layer type (expected {' or '.join(repr(x) for x in _LAYER_TYPES)})",
                    )
        if spec.rotary == "nope":
            if self.no_rope_layers is None and not _is_size(self.no_rope_layer_interval):
                raise _bad("no_rope_layer_interval", self.no_rope_layer_interval, "expected a positive integer")
            flags = self.no_rope_layers
            if flags is not None and not (
                isinstance(flags, list)
                and len(flags) >= n
                and all(isinstance(v, (int, bool)) and v in (0, 1) for v in flags)
            ):
                raise _bad(
                    "no_rope_layers",
                    flags,
                    f"expected a list of at least num_hidden_layers={n} values, each "
                    "1 (the layer has rotary) or 0 (it has none)",
                )
        if spec.windows == "pattern" and not _is_size(self.sliding_window_pattern):
            raise _bad("sliding_window_pattern", self.sliding_window_pattern, "expected a positive integer")
        if spec.norm == "rms_one_plus":
            if not (_is_number(self.query_pre_attn_scalar) and self.query_pre_attn_scalar > 0):
                raise _bad("query_pre_attn_scalar", self.query_pre_attn_scalar, "expected a positive number")
            for key in ("attn_logit_softcapping", "final_logit_softcapping"):
                value = getattr(self, key)
                if value is not None and not (_is_number(value) and value > 0):
                    raise _bad(key, value, "expected a positive number, or null for no soft-capping")
            if self.use_bidirectional_attention not in (None, False):
                raise UnsupportedModelError(
                    f"config.json: use_bidirectional_attention {_short(self.use_bidirectional_attention)} is not "
                    "supported (a causal language model only; supported: false or null)"
                )

    def _validate_rotary(self, family):
        rotary = FAMILIES[family].rotary
        for key in ("rope_theta",) + (("rope_local_base_freq",) if rotary == "local" else ()):
            value = getattr(self, key)
            if not (_is_number(value) and value > 0):
                raise _bad(key, value, "expected a positive number")
        partial = getattr(self, "partial_rotary_factor", 1.0)
        head_dim = self.hidden_size // self.num_attention_heads if self.head_dim is None else self.head_dim
        if rotary == "partial":
            if not (_is_number(partial) and 0 < partial <= 1):
                raise _bad("partial_rotary_factor", partial, "expected a number in (0, 1]")
            rope_dim = int(head_dim * partial)
            if rope_dim <= 0 or rope_dim % 2:
                raise _bad(
                    "partial_rotary_factor",
                    partial,
                    f"the rotary dimension int(head_dim={head_dim} * {partial}) = {rope_dim} must be even and positive",
                )
        elif partial not in (None, 1, 1.0):
            raise UnsupportedModelError(
                f"config.json: partial_rotary_factor {_short(partial)} is not supported for "
                f"{family} (supported: 1.0, rotary embedding over the whole head; partial "
                "rotary: Phi-3)"
            )
        elif head_dim % 2 and self._any_rope():
            raise _bad(
                "head_dim" if self.head_dim is not None else "hidden_size // num_attention_heads",
                head_dim,
                "rotary embeddings need a positive even head dimension",
            )
        _rope_type(self.rope_scaling, family)
        self._global_rope(head_dim)  # longrope's tables and lengths

    # ---- construction ---------------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any]) -> PretrainedConfig:
        """Build and validate from a config.json dict (the dict is copied, not kept)."""
        if not isinstance(config_dict, dict):
            raise CheckpointError(f"config.json: expected a JSON object, got {type(config_dict).__name__}; {_FIX}")
        return cls(**config_dict)

    @overload
    @classmethod
    def from_pretrained(
        cls, pretrained_model_name_or_path: PathLike, *, return_unused_kwargs: Literal[False] = False, **kwargs: Any
    ) -> PretrainedConfig: ...
    @overload
    @classmethod
    def from_pretrained(
        cls, pretrained_model_name_or_path: PathLike, *, return_unused_kwargs: Literal[True], **kwargs: Any
    ) -> tuple[PretrainedConfig, dict[str, Any]]: ...
    @classmethod
    def from_pretrained(
        cls, pretrained_model_name_or_path: PathLike, **kwargs: Any
    ) -> Union[PretrainedConfig, tuple[PretrainedConfig, dict[str, Any]]]:
        """Read config.json of a local directory, a shipped name or a Hub repo id (checkpoints/hub.py, with the
        hub arguments revision, cache_dir, local_files_only, token, force_download, proxies, subfolder), or the
        JSON file itself where a file's path is given.

        Other keyword arguments override the file's fields, as in Transformers (num_hidden_layers=2,
        output_attentions=True, rope_parameters={...}): each sets the attribute of that name where Transformers'
        config of this model_type has one (split_overrides); the others are returned with return_unused_kwargs=True
        as (config, {unused}), as Transformers returns them, and without it warned of (UserWarning) and left out,
        where Transformers drops them silently. attn_implementation ("eager", "sdpa" or None: one implementation
        runs here) and dtype="auto" are taken, as Transformers takes them, and change nothing.
        trust_remote_code is accepted (no checkpoint code is ever run)."""
        hub_arguments = pop_hub_arguments(kwargs, "from_pretrained")
        return_unused = kwargs.pop("return_unused_kwargs", False)
        trust_remote_code = kwargs.pop("trust_remote_code", None)
        for key in ("_from_auto", "_from_pipeline"):
            kwargs.pop(key, None)
        if trust_remote_code not in (None, True, False):
            raise InvalidInputError(f"trust_remote_code={trust_remote_code!r}: pass True or False")
        if kwargs.get("attn_implementation", None) not in _ATTN_IMPLEMENTATIONS:
            raise InvalidInputError(
                f"attn_implementation={kwargs['attn_implementation']!r}: one attention "
                "implementation runs here; pass 'eager', 'sdpa' or leave it unset"
            )
        kwargs.pop("attn_implementation", None)
        for key in ("dtype", "torch_dtype"):
            if isinstance(kwargs.get(key), str) and kwargs[key] == "auto":
                del kwargs[key]
        given = (
            os.fspath(pretrained_model_name_or_path)
            if isinstance(pretrained_model_name_or_path, (str, os.PathLike))
            else pretrained_model_name_or_path
        )
        if isinstance(given, str) and os.path.isfile(given):
            path = given
        else:
            path = os.path.join(resolve(given, CONFIG_FILES, **hub_arguments), CONFIG_NAME)
        if not os.path.isfile(path):
            raise CheckpointNotFoundError(
                f"{path}: missing; a checkpoint directory needs the config.json saved with its weights"
            )
        try:
            with open(path, "rb") as f:
                config_dict = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: nesting too deep
            raise CheckpointError(f"{path}: not valid UTF-8 JSON ({e}); fix or re-download config.json") from None
        try:
            config = cls.from_dict(config_dict)
            known, unused = config.split_overrides(kwargs, config_dict)
            if known:
                config = config.overridden(config_dict, known)
        except UnsupportedModelError as e:
            raise unsupported_family_hint(e, trust_remote_code) from None
        if return_unused:
            return config, unused
        if unused:
            warnings.warn(
                f"AutoConfig.from_pretrained: {sorted(unused)} are no attributes of this "
                f"{FAMILIES[config.family].title} config and were left out (as Transformers drops them); "
                "pass return_unused_kwargs=True to get them back",
                UserWarning,
                stacklevel=2,
            )
        return config

    def split_overrides(
        self, kwargs: dict[str, Any], config_dict: Optional[dict[str, Any]] = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """from_pretrained's keyword overrides -> (known, unused), two dicts: known sets attributes that Transformers'
        config of this model_type has (config_dict's keys, the family's fields and generic names, every config's
        common attributes such as output_attentions); unused are the rest, as Transformers' from_dict returns them
        (rope_theta among them: Transformers 5 holds it in rope_parameters)."""
        spec = FAMILIES[self.family]
        in_file = set(config_dict or ())
        lacks = set(_IN_ROPE_PARAMETERS) | (set(spec.transformers_lacks) - in_file)
        fields = (set(self.__dict__) | in_file | set(spec.aliases) | set(_TRANSFORMERS_COMMON)) - lacks
        known = {k: v for k, v in kwargs.items() if k in fields}
        return known, {k: v for k, v in kwargs.items() if k not in known}

    def overridden(self, config_dict: dict[str, Any], known: dict[str, Any]) -> PretrainedConfig:
        """A new config: config_dict (config.json's) with the known overrides set, validated as a file's. A new
        rope_parameters replaces what the file gave of the rotary (rope_theta, rope_scaling...), as Transformers sets
        the attribute whole; dtype and torch_dtype set both names."""
        d = {k: v for k, v in config_dict.items()}
        if "rope_parameters" in known:
            for key in _IN_ROPE_PARAMETERS + ("rope_scaling",):
                d.pop(key, None)
        dtype = [known[k] for k in ("dtype", "torch_dtype") if k in known]
        aliases = FAMILIES[self.family].aliases  # GPT-2's hidden_size=... sets the n_embd it stores
        d.update({aliases.get(k, k): v for k, v in known.items() if k not in ("dtype", "torch_dtype")})
        config = type(self).from_dict(d)
        if dtype:
            config._set_dtype(dtype[-1])
        return config

    # ---- derived values -------------------------------------------------------------------------------------

    @property
    def torch_dtype(self) -> Any:
        """The dtype the weights are held in: config.json's "torch_dtype" (or "dtype"), and in a loaded model's config
        the dtype it was loaded in (as Transformers sets it). torch's dtype where torch is importable (torch.float32),
        else its name; to_dict() and config.json hold the name. Setting it sets dtype too."""
        return _dtype_value(self.__dict__.get("torch_dtype"))

    @torch_dtype.setter
    def torch_dtype(self, value: Any) -> None:
        self._set_dtype(value)

    @property
    def dtype(self) -> Any:
        """Transformers 5's name of torch_dtype: config.json's "dtype" where it has one, else torch_dtype."""
        d = self.__dict__
        return _dtype_value(d["dtype"] if "dtype" in d else d.get("torch_dtype"))

    @dtype.setter
    def dtype(self, value: Any) -> None:
        self._set_dtype(value)

    def _set_dtype(self, value: Any) -> None:
        """torch_dtype and, where config.json has it, dtype: the two name one value (Transformers 5 aliases them)."""
        name = _dtype_name(value)
        self.__dict__["torch_dtype"] = name
        if "dtype" in self.__dict__:
            self.__dict__["dtype"] = name

    @property
    def family(self) -> str:
        """The model_type of the family whose layer layout the weights follow ("llama", ..., "gpt2")."""
        return _family(self.__dict__)

    @property
    def rope_type(self) -> Optional[str]:
        """The rotary type, from rope_scaling: "default" | "linear" | "llama3" | "longrope"; None for GPT-2 (learned
        positions)."""
        family = self.family
        return None if FAMILIES[family].rotary is None else _rope_type(self.rope_scaling, family)

    @property
    def rope_dim(self) -> int:
        """Rotary dimensions of each head: head_dim, int(head_dim * partial_rotary_factor) for Phi-3, 0 for GPT-2."""
        rotary = FAMILIES[self.family].rotary
        if rotary is None:
            return 0
        return int(self.head_dim * self.partial_rotary_factor) if rotary == "partial" else self.head_dim

    @property
    def activation(self) -> str:
        """The core's activation ("silu" | "gelu_tanh" | "gelu" | "relu")."""
        return SUPPORTED_ACTIVATIONS[getattr(self, FAMILIES[self.family].act)]

    @property
    def qkv_bias(self) -> bool:
        """Whether q, k and v have biases (always for Qwen2 and GPT-2; with attention_bias for Llama, Qwen3, Gemma,
        SmolLM3)."""
        rule = FAMILIES[self.family].attention_bias
        return rule in ("qkv", "always") or (rule == "field" and self.attention_bias)

    @property
    def o_bias(self) -> bool:
        """Whether the attention output projection has a bias (never for Qwen2, Mistral, Phi-3; always GPT-2)."""
        rule = FAMILIES[self.family].attention_bias
        return rule == "always" or (rule == "field" and self.attention_bias)

    @property
    def mlp_biases(self) -> bool:
        """Whether the MLP's projections have biases (mlp_bias for Llama and SmolLM3; always for GPT-2)."""
        rule = FAMILIES[self.family].mlp_bias
        return rule == "always" or (rule == "field" and self.mlp_bias)

    @property
    def qk_norm(self) -> bool:
        """Whether attention has per-head q_norm and k_norm (Qwen3, Gemma 3)."""
        return FAMILIES[self.family].qk_norm

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of every config.json field (derived values excluded): from_dict(to_dict()) == self."""
        return copy.deepcopy(self.__dict__)

    def save_pretrained(self, save_directory: PathLike, push_to_hub: bool = False, **kwargs: Any) -> None:
        """Transformers' config.save_pretrained: save_directory/config.json (the directory created), which
        from_pretrained reads back; architectures named where the config names none, as model.save_pretrained
        writes it."""
        if push_to_hub:
            raise InvalidInputError(
                "push_to_hub=True: this package uploads nothing; save, then upload the directory "
                "with huggingface_hub (HfApi().upload_folder)"
            )
        if kwargs:
            raise InvalidInputError(
                f"save_pretrained() got {', '.join(sorted(kwargs))}: a config saves with "
                "save_directory (and push_to_hub=False) only"
            )
        os.makedirs(save_directory, exist_ok=True)
        write_json(os.path.join(save_directory, CONFIG_NAME), named_config_dict(self))

    def rope_inv_freq(self) -> Optional[np.ndarray]:
        """Rotary inverse frequencies of the (global) layers, np.float64 (rope_dim // 2,), with rope_scaling
        applied as Transformers (longrope: the short table); None for GPT-2."""
        if FAMILIES[self.family].rotary is None:
            return None
        return self._global_rope(self.head_dim).inv_freq

    def _global_rope(self, head_dim):
        """-> Rope of the layers with rotary "global" (rope_theta and rope_scaling)."""
        family = self.family
        dim = int(head_dim * self.partial_rotary_factor) if FAMILIES[family].rotary == "partial" else head_dim
        scaling = self.rope_scaling
        rope_type = _rope_type(scaling, family)
        inv_freq = _base_inv_freq(self.rope_theta, dim)
        if rope_type == "linear":
            return Rope(inv_freq / scaling["factor"], None, 0, 1.0)
        if rope_type == "llama3":
            return Rope(_llama3(inv_freq, scaling), None, 0, 1.0)
        if rope_type == "longrope":
            return self._longrope(scaling, dim)
        return Rope(inv_freq, None, 0, 1.0)

    def _longrope(self, scaling, dim):
        """Transformers' _compute_longrope_parameters (newest): the short and long tables, the length a forward's
        sequence must pass to take the long one (original_max_position_embeddings) and the attention factor that
        scales cos and sin with either."""
        original = getattr(self, "original_max_position_embeddings", None)  # Phi-3 keeps it at the top level
        if original is None:
            original = scaling.get("original_max_position_embeddings", self.max_position_embeddings)
        if not _is_size(original):
            raise _bad("original_max_position_embeddings", original, "expected a positive integer (below 2**63)")
        factor = scaling.get("factor")
        if factor is None:
            factor = self.max_position_embeddings / original
        attention_factor = scaling.get("attention_factor")
        if attention_factor is None and factor > 1.0 and original == 1:
            raise _bad(
                "original_max_position_embeddings",
                original,
                "longrope's attention factor sqrt(1 + "
                "ln(factor) / ln(original_max_position_embeddings)) needs it above 1",
            )
        if attention_factor is None:
            attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
        exponents = np.arange(0, dim, 2, dtype=np.float64) / dim
        base = float(self.rope_theta) ** exponents
        short = _factor_table(scaling, "short_factor", dim // 2)
        long_ = _factor_table(scaling, "long_factor", dim // 2)
        return Rope(1.0 / (short * base), 1.0 / (long_ * base), int(original), float(attention_factor))

    def _layer_types(self):
        """Per layer "sliding_attention" or "full_attention", by the family's rule (before the window is known
        to be set)."""
        family, n = self.family, self.num_hidden_layers
        rule = FAMILIES[family].windows
        given = getattr(self, "layer_types", None) if rule in ("from_layer", "nope", "alternate", "pattern") else None
        if given is not None:
            return list(given)
        if rule == "all":
            return ["sliding_attention"] * n
        if rule == "from_layer":
            return ["sliding_attention" if i >= self.max_window_layers else "full_attention" for i in range(n)]
        if rule == "nope":
            rope = self._has_rope()
            return ["full_attention" if rope[i] else "sliding_attention" for i in range(n)]
        if rule == "alternate":
            return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
        if rule == "pattern":
            return [
                "sliding_attention" if (i + 1) % self.sliding_window_pattern else "full_attention" for i in range(n)
            ]
        return ["full_attention"] * n

    def _has_rope(self):
        """SmolLM3: per layer whether it has rotary (no_rope_layers, else every no_rope_layer_interval-th has none)."""
        n = self.num_hidden_layers
        if self.no_rope_layers is not None:
            return [bool(v) for v in self.no_rope_layers[:n]]
        return [(i + 1) % self.no_rope_layer_interval != 0 for i in range(n)]

    def _any_rope(self):
        """Whether some layer has rotary (all but a SmolLM3 whose every layer is NoPE); without listing the layers."""
        if FAMILIES[self.family].rotary != "nope":
            return True
        if self.no_rope_layers is not None:
            return any(self.no_rope_layers[: self.num_hidden_layers])
        return self.no_rope_layer_interval > 1

    def _window(self):
        """The window of the sliding layers, or None when nothing slides."""
        rule = FAMILIES[self.family].windows
        if rule is None:
            return None
        if rule in ("from_layer", "nope") and not self.use_sliding_window:
            return None
        return self.sliding_window

    def _plan(self):
        """layer_settings() without attention scales: [{"window": int, "rope": str}]."""
        rotary, n = FAMILIES[self.family].rotary, self.num_hidden_layers
        if rotary is None:
            return [{"window": 0, "rope": "none"} for _ in range(n)]
        window = self._window()
        # which layers slide matters with a window, and for Gemma 3's local rotary
        types = self._layer_types() if window is not None or rotary == "local" else ["full_attention"] * n
        rope = self._has_rope() if rotary == "nope" else [True] * n
        plan = []
        for i in range(n):
            sliding = types[i] == "sliding_attention"
            kind = "none" if not rope[i] else "local" if rotary == "local" and sliding else "global"
            plan.append({"window": window if sliding and window is not None else 0, "rope": kind})
        return plan

    def layer_settings(self) -> list[dict[str, Any]]:
        """Per layer (num_hidden_layers dicts) what the core's layer dict takes besides weights: "window" (0:
        full attention; w: key j visible from query p iff p - j < w), "rope" ("global" | "local" | "none"), and
        "attn_scale" only where it is not 1/sqrt(head_dim): Gemma's query_pre_attn_scalar ** -0.5, GPT-2's 1.0
        without scale_attn_weights and its division by (layer index + 1) with scale_attn_by_inverse_layer_idx."""
        reads = FAMILIES[self.family].defaults  # the fields the family has
        plan = self._plan()
        if "query_pre_attn_scalar" in reads and self.query_pre_attn_scalar != self.head_dim:
            for settings in plan:
                settings["attn_scale"] = float(self.query_pre_attn_scalar) ** -0.5
        if "scale_attn_weights" in reads:
            for i, settings in enumerate(plan):
                scale = 1.0 / math.sqrt(self.head_dim) if self.scale_attn_weights else 1.0
                if self.scale_attn_by_inverse_layer_idx:
                    scale /= float(i + 1)
                if not (self.scale_attn_weights and (i == 0 or not self.scale_attn_by_inverse_layer_idx)):
                    settings["attn_scale"] = scale
        return plan

    def core_config(self, dtype: str) -> dict[str, Any]:
        """The model-level config dict of _core.Model (csrc/ha.h, ha_llama_config). dtype ("float32" | "bfloat16" |
        "float16"): the dtype the model's float values are held in (integer-quantized models: their stored
        dtype), to which Gemma's embedding scale sqrt(hidden_size) is rounded as Transformers rounds it (a
        float32 tensor cast to the weights' dtype)."""
        if dtype not in FLOAT_DTYPES:
            raise InvalidInputError(f"core_config: dtype={dtype!r} must be one of {', '.join(FLOAT_DTYPES)}")
        family = self.family
        spec = FAMILIES[family]
        config = {
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "n_layers": self.num_hidden_layers,
            "n_heads": self.num_attention_heads,
            "n_kv_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "norm_eps": float(getattr(self, spec.eps)),
            "norm": spec.norm,
            "act": self.activation,
            "gated_mlp": spec.gated_mlp,
            "embed_scale": 1.0,
            "attn_softcap": 0.0,
            "final_softcap": 0.0,
            "rope_dim": self.rope_dim,
            "rope_inv_freq": None,
            "rope_inv_freq_long": None,
            "rope_long_from": 0,
            "rope_inv_freq_local": None,
            "rope_scale": 1.0,
        }
        if spec.rotary is None:
            return config
        rope = self._global_rope(self.head_dim)
        config.update(
            rope_inv_freq=rope.inv_freq,
            rope_inv_freq_long=rope.inv_freq_long,
            rope_long_from=rope.long_from,
            rope_scale=rope.scale,
        )
        if spec.rotary == "local":
            config["rope_inv_freq_local"] = _base_inv_freq(self.rope_local_base_freq, self.head_dim)
        if spec.norm == "rms_one_plus":
            config["embed_scale"] = _round_to(self.hidden_size**0.5, dtype)
            # Transformers' Gemma 3 attention ignores attn_logit_softcapping (null in every Gemma 3 config):
            # only Gemma 2 caps attention logits.
            config["attn_softcap"] = float(self.attn_logit_softcapping or 0.0) if family == "gemma2" else 0.0
            config["final_softcap"] = float(self.final_logit_softcapping or 0.0)
        return config

    def __getattr__(self, name: str) -> Any:
        # Called only for attributes config.json did not set: the generic names of a family with its own (GPT-2's
        # aliases and computed fields), then Transformers' PretrainedConfig defaults that scripts read
        # (model.config.is_encoder_decoder...); never written back by to_dict().
        d = self.__dict__
        spec = _named_family(d)
        if spec is not None and name in spec.aliases:
            return d[spec.aliases[name]]
        if spec is not None and name in spec.computed:
            return spec.computed[name](d)
        if name == "partial_rotary_factor":
            return 1.0
        if name in _PRETRAINED_DEFAULTS:
            return _PRETRAINED_DEFAULTS[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def get_text_config(self, decoder: Optional[bool] = None) -> PretrainedConfig:
        """This config itself: a decoder-only text model (Transformers' PretrainedConfig.get_text_config)."""
        return self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PretrainedConfig) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]  # unhashable (equal by value, and mutable); mypy wants a method here

    def __repr__(self) -> str:
        return f"{type(self).__name__} {json.dumps(self.to_dict(), indent=2, sort_keys=True, default=repr)}"


def named_config_dict(config):
    """config.to_dict() as config.json is saved: architectures named (the family's class) where the config names
    none (config.save_pretrained, model.save_pretrained)."""
    out = config.to_dict()
    if not out.get("architectures"):
        out["architectures"] = [FAMILIES[config.family].architecture]
    return out


def _round_to(value, dtype):
    """A Python float as Transformers holds it in a tensor of `dtype`: float32 first (torch.tensor's default),
    then rounded to nearest even in bfloat16 or float16."""
    f32 = np.array([value], dtype=np.float32)
    if dtype == "bfloat16":
        return float(bfloat16_bits_to_float32(to_bfloat16_bits(f32))[0])
    if dtype == "float16":
        return float(f32.astype(np.float16)[0])
    return float(f32[0])


LlamaConfig = PretrainedConfig
AutoConfig = PretrainedConfig
