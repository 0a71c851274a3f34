"""The model configuration of the Llama family (Llama, Mistral, Qwen2), read from a checkpoint's config.json.

Field names and defaults are Transformers' (LlamaConfig, MistralConfig, Qwen2Config); every other key of
config.json is kept as an attribute, as Transformers does. Validation splits two ways:
UnsupportedModelError for a valid model this package does not implement (another architecture, activation or
RoPE scaling), CheckpointError for a config.json that cannot describe any model (missing shape fields,
non-positive sizes, heads that do not divide).
"""

import copy
import json
import math
import os

import numpy as np

from .errors import CheckpointError, CheckpointNotFoundError, UnsupportedModelError

__all__ = ["LlamaConfig", "CONFIG_NAME", "SUPPORTED_ARCHITECTURES", "SUPPORTED_ROPE_TYPES"]

CONFIG_NAME = "config.json"
SUPPORTED_ARCHITECTURES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
                           "Qwen2ForCausalLM": "qwen2"}
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3")
_LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")

# The shape of the weights: no default, since a default would describe some other model.
_REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")

# Transformers' defaults per model_type, for the fields not required above.
_COMMON_DEFAULTS = {
    "num_key_value_heads": None,  # None -> num_attention_heads
    "head_dim": None,             # None -> hidden_size // num_attention_heads
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
_DEFAULTS = {
    "llama": {**_COMMON_DEFAULTS, "max_position_embeddings": 2048, "bos_token_id": 1, "eos_token_id": 2},
    "mistral": {**_COMMON_DEFAULTS, "max_position_embeddings": 4096 * 32, "bos_token_id": 1, "eos_token_id": 2,
                "num_key_value_heads": 8, "sliding_window": 4096},
    "qwen2": {**_COMMON_DEFAULTS, "max_position_embeddings": 32768, "bos_token_id": None,
              "eos_token_id": None, "num_key_value_heads": 32, "sliding_window": 4096,
              "use_sliding_window": False, "max_window_layers": 28},
}
_FIX = "use the config.json that was saved with this checkpoint"

# Transformers' PretrainedConfig attributes a script may read though config.json rarely holds them.
_PRETRAINED_DEFAULTS = {"is_encoder_decoder": False, "is_decoder": False, "use_cache": True, "return_dict": True,
                        "output_attentions": False, "output_hidden_states": False, "add_cross_attention": False,
                        "tie_encoder_decoder": False, "chunk_size_feed_forward": 0, "problem_type": None,
                        "name_or_path": "", "_name_or_path": ""}


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


def _bad(field, value, problem):
    return CheckpointError(f"config.json: field {field!r} is {value!r}: {problem}; {_FIX}")


def _family(d):
    """-> "llama" | "mistral" | "qwen2" from "architectures", else from "model_type"."""
    supported = ", ".join(SUPPORTED_ARCHITECTURES)
    architectures = d.get("architectures")
    if architectures is not None:
        if not (isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)):
            raise _bad("architectures", architectures, "expected a list of class names")
        found = [a for a in architectures if a in SUPPORTED_ARCHITECTURES]
        if len(found) != 1:
            raise UnsupportedModelError(
                f"config.json: architectures {architectures} "
                f"{'names several' if found else 'names none'} of the supported architectures ({supported}); "
                "this package runs exactly one of those per checkpoint")
        return SUPPORTED_ARCHITECTURES[found[0]]
    model_type = d.get("model_type")
    if isinstance(model_type, str) and model_type in _DEFAULTS:  # a list or object would not hash
        return model_type
    raise UnsupportedModelError(
        f"config.json: no 'architectures' and model_type {model_type!r}; supported: architectures {supported} "
        f"or model_type {', '.join(_DEFAULTS)}")


def _check_rope_scaling(rope_scaling):
    """-> the rope type ("default", "linear" or "llama3"); validates its parameters."""
    if rope_scaling is None:
        return "default"
    if not isinstance(rope_scaling, dict):
        raise _bad("rope_scaling", rope_scaling, "expected null or an object")
    rope_type = rope_scaling.get("rope_type", rope_scaling.get("type"))
    if rope_type is None:
        raise _bad("rope_scaling", rope_scaling, "it has neither 'rope_type' nor 'type'")
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise UnsupportedModelError(
            f"config.json: rope_scaling type {rope_type!r} is not supported (supported: "
            f"{', '.join(SUPPORTED_ROPE_TYPES)}); use a checkpoint whose rope_scaling is one of those, or null")
    needed = {"default": (), "linear": ("factor",), "llama3": _LLAMA3_KEYS}[rope_type]
    for key in needed:
        if not (_is_number(rope_scaling.get(key)) and rope_scaling[key] > 0):
            raise _bad("rope_scaling", rope_scaling,
                       f"rope type {rope_type!r} needs a positive number {key!r}")
    if rope_type == "llama3" and not rope_scaling["high_freq_factor"] > rope_scaling["low_freq_factor"]:
        raise _bad("rope_scaling", rope_scaling, "llama3 needs high_freq_factor > low_freq_factor")
    return rope_type


class LlamaConfig:
    """Hyperparameters of a Llama, Mistral or Qwen2 causal LM; attributes are config.json's keys.

    Derived: qkv_bias (q/k/v projections have biases), o_bias (o_proj has a bias), rope_type.
    """

    def __init__(self, /, **kwargs):
        methods = sorted(k for k in kwargs if hasattr(LlamaConfig, k) and not isinstance(getattr(LlamaConfig, k),
                                                                                        property))
        if methods:  # data in place of _validate, to_dict... would break every later call
            raise CheckpointError(f"config.json: key(s) {methods} name LlamaConfig methods or attributes, not config "
                                  f"fields; {_FIX}")
        d = copy.deepcopy(kwargs)
        family = _family(d)
        missing = [k for k in _REQUIRED if k not in d]
        if missing:
            raise CheckpointError(f"config.json: required field(s) {', '.join(missing)} missing; {_FIX}")
        for key, value in _DEFAULTS[family].items():
            d.setdefault(key, value)
        d.setdefault("model_type", family)
        d.setdefault("architectures", None)
        if "torch_dtype" not in kwargs and "dtype" in d:  # Transformers >= 5 writes "dtype"
            d["torch_dtype"] = d["dtype"]
        rope_parameters = d.get("rope_parameters")  # Transformers >= 5 folds theta and scaling in here
        if isinstance(rope_parameters, dict):
            if "rope_theta" not in kwargs and "rope_theta" in rope_parameters:
                d["rope_theta"] = rope_parameters["rope_theta"]
            if kwargs.get("rope_scaling") is None and rope_parameters.get("rope_type", "default") != "default":
                d["rope_scaling"] = rope_parameters
        if d["num_key_value_heads"] is None:
            d["num_key_value_heads"] = d["num_attention_heads"]
        if family == "qwen2" and not d["use_sliding_window"]:
            d["sliding_window"] = None  # as Qwen2Config: the window only exists when switched on
        self.__dict__.update(d)
        self._validate(family)
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads

    def _validate(self, family):
        for key in _REQUIRED + ("num_key_value_heads", "max_position_embeddings"):
            value = getattr(self, key)
            if not (_is_int(value) and 0 < value < 2**63):  # the core takes sizes as int64
                raise _bad(key, value, "expected a positive integer (below 2**63)")
        if self.num_attention_heads % self.num_key_value_heads:
            raise _bad("num_key_value_heads", self.num_key_value_heads,
                       f"it must divide num_attention_heads ({self.num_attention_heads})")
        head_dim = self.hidden_size // self.num_attention_heads if self.head_dim is None else self.head_dim
        if not (_is_int(head_dim) and head_dim > 0 and head_dim % 2 == 0):
            raise _bad("head_dim" if self.head_dim is not None else "hidden_size // num_attention_heads",
                       head_dim, "rotary embeddings need a positive even head dimension")
        for key in ("rms_norm_eps", "rope_theta"):
            value = getattr(self, key)
            if not (_is_number(value) and value > 0):
                raise _bad(key, value, "expected a positive number")
        for key in ("tie_word_embeddings", "attention_bias", "mlp_bias"):
            if not isinstance(getattr(self, key), bool):
                raise _bad(key, getattr(self, key), "expected true or false")
        for key in ("bos_token_id", "pad_token_id"):
            value = getattr(self, key)
            if value is not None and not _is_int(value):
                raise _bad(key, value, "expected an integer or null")
        eos = self.eos_token_id
        if not (eos is None or _is_int(eos) or (isinstance(eos, list) and all(_is_int(e) for e in eos))):
            raise _bad("eos_token_id", eos, "expected an integer, a list of integers or null")
        if self.sliding_window is not None and not (_is_int(self.sliding_window) and 0 < self.sliding_window < 2**63):
            raise _bad("sliding_window", self.sliding_window, "expected a positive integer (below 2**63) or null")
        if self.hidden_act != "silu":
            raise UnsupportedModelError(
                f"config.json: hidden_act {self.hidden_act!r} is not supported (supported: 'silu', the SwiGLU "
                "MLP of Llama, Mistral and Qwen2); this checkpoint is not a Llama-family model")
        if family == "qwen2" and self.use_sliding_window is not False:
            raise UnsupportedModelError(
                f"config.json: use_sliding_window {self.use_sliding_window!r} is not supported for Qwen2 "
                "(supported: false, full attention in every layer)")
        partial = getattr(self, "partial_rotary_factor", 1.0)
        if partial not in (None, 1, 1.0):
            raise UnsupportedModelError(f"config.json: partial_rotary_factor {partial!r} is not supported "
                                        "(supported: 1.0, rotary embedding over the whole head)")
        _check_rope_scaling(self.rope_scaling)

    @classmethod
    def from_dict(cls, config_dict):
        """Build and validate from a config.json dict (the dict is copied, not kept)."""
        if not isinstance(config_dict, dict):
            raise CheckpointError(f"config.json: expected a JSON object, got {type(config_dict).__name__}; {_FIX}")
        return cls(**config_dict)

    @classmethod
    def from_pretrained(cls, directory):
        """Read directory/config.json (directory may also be the path of the JSON file itself)."""
        path = directory if os.path.isfile(directory) else os.path.join(directory, CONFIG_NAME)
        if not os.path.isdir(directory) and not os.path.isfile(directory):
            raise CheckpointNotFoundError(f"{directory}: no such checkpoint directory; check the path")
        if not os.path.isfile(path):
            raise CheckpointNotFoundError(
                f"{path}: missing; a checkpoint directory needs the config.json saved with its weights")
        try:
            with open(path, "rb") as f:
                config_dict = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: nesting too deep
            raise CheckpointError(f"{path}: not valid UTF-8 JSON ({e}); fix or re-download config.json") from None
        return cls.from_dict(config_dict)

    @property
    def family(self):
        """"llama" | "mistral" | "qwen2": which architecture's layer layout the weights follow."""
        return _family(self.__dict__)

    @property
    def rope_type(self):
        """"default" | "linear" | "llama3", from rope_scaling."""
        return _check_rope_scaling(self.rope_scaling)

    @property
    def qkv_bias(self):
        """Whether q_proj, k_proj and v_proj have biases (always for Qwen2)."""
        return True if self.family == "qwen2" else self.attention_bias

    @property
    def o_bias(self):
        """Whether o_proj has a bias (never for Qwen2)."""
        return False if self.family == "qwen2" else self.attention_bias

    def to_dict(self):
        """A deep copy of every config.json field (derived values excluded): from_dict(to_dict()) == self."""
        return copy.deepcopy(self.__dict__)

    def rope_inv_freq(self):
        """Rotary inverse frequencies, np.float64 (head_dim // 2,), with rope_scaling applied as Transformers."""
        exponents = np.arange(0, self.head_dim, 2, dtype=np.float64) / self.head_dim
        inv_freq = 1.0 / float(self.rope_theta) ** exponents
        if self.rope_type == "linear":
            inv_freq = inv_freq / self.rope_scaling["factor"]
        elif self.rope_type == "llama3":  # Transformers' _compute_llama3_parameters
            s = self.rope_scaling
            factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
            old_context_len = s["original_max_position_embeddings"]
            low_freq_wavelen, high_freq_wavelen = old_context_len / low, old_context_len / high
            wavelen = 2 * math.pi / inv_freq
            scaled = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
            smooth = (old_context_len / wavelen - low) / (high - low)
            smoothed = (1 - smooth) * scaled / factor + smooth * scaled
            is_medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
            inv_freq = np.where(is_medium, smoothed, scaled)
        return inv_freq

    def __getattr__(self, name):
        # Called only for attributes config.json did not set: Transformers' PretrainedConfig defaults that
        # scripts read (model.config.is_encoder_decoder...), never written back by to_dict().
        if name in _PRETRAINED_DEFAULTS:
            return _PRETRAINED_DEFAULTS[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def get_text_config(self, decoder=None):
        """This config itself: a decoder-only text model (Transformers' PretrainedConfig.get_text_config)."""
        return self

    def __eq__(self, other):
        return isinstance(other, LlamaConfig) and self.to_dict() == other.to_dict()

    __hash__ = None

    def __repr__(self):
        return f"{type(self).__name__} {json.dumps(self.to_dict(), indent=2, sort_keys=True, default=repr)}"
