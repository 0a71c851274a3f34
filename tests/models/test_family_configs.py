"""Each supported family's config.json becomes the core's config and per-layer settings as Transformers reads it,
its tensors are found under the family's own names, and every impossible or unsupported value is refused by name.

The expectations are written here from Transformers' configuration_*.py / modeling_*.py (defaults, which layers
slide, which rotary each layer uses, the attention scale, the tensors each module registers and their order) and
computed with numpy (rotary tables) or torch (Gemma's embedding scale, as Transformers rounds it), not with the
package's code. Full forwards of each family are tests/models/test_model_families.py's.
"""

import json
import math
import os
import re

import numpy as np
import pytest
import torch
from checkpoints import maps_file

import habana_assist as ha
from habana_assist.checkpoints.loading import expected_weights, load_checkpoint
from habana_assist.checkpoints.safetensors import (
    bfloat16_bits_to_float32,
    read_safetensors,
    save_file,
    to_bfloat16_bits,
)
from habana_assist.checkpoints.saving import save_model, state_dict_names, unpack_panels
from habana_assist.configuration_utils import SUPPORTED_ARCHITECTURES, AutoConfig, LlamaConfig, PretrainedConfig
from habana_assist.errors import CheckpointError, InvalidInputError, UnsupportedModelError

ARCH = {model_type: arch for arch, model_type in SUPPORTED_ARCHITECTURES.items()}
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text", "smollm3", "gpt2")
GEMMA = ("gemma2", "gemma3_text")

# Minimal config.json per family: 3 layers, so that every layer pattern shows; Qwen3 and Gemma with a head_dim
# that is not hidden_size // num_attention_heads (8, not 4).
_SHAPE = {
    "vocab_size": 40,
    "hidden_size": 16,
    "intermediate_size": 24,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
}
BASE = {
    "llama": {**_SHAPE},
    "mistral": {**_SHAPE, "sliding_window": 8},
    "qwen2": {**_SHAPE},
    "qwen3": {**_SHAPE, "head_dim": 8},
    "phi3": {**_SHAPE, "pad_token_id": None},
    "gemma2": {**_SHAPE, "head_dim": 8, "query_pre_attn_scalar": 8},
    "gemma3_text": {**_SHAPE, "head_dim": 8, "query_pre_attn_scalar": 8},
    "smollm3": {**_SHAPE, "pad_token_id": None},
    "gpt2": {"vocab_size": 40, "n_embd": 16, "n_layer": 3, "n_head": 4, "n_positions": 32},
}


NULL = object()  # a change that writes null (None deletes the key)


def config_dict(family, **changes):
    """BASE[family] with architectures and model_type, then changes (None deletes the key, NULL writes null)."""
    d = {"architectures": [ARCH[family]], "model_type": family, **BASE[family], **changes}
    return {k: (None if v is NULL else v) for k, v in d.items() if v is not None}


def make(family, **changes):
    return PretrainedConfig.from_dict(config_dict(family, **changes))


def default_inv_freq(theta, dim):
    return 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


# ---- one config class, every family --------------------------------------------------------------------------


def test_llama_config_and_auto_config_are_the_one_config_class():
    assert LlamaConfig is PretrainedConfig and AutoConfig is PretrainedConfig and ha.LlamaConfig is PretrainedConfig


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_builds_names_itself_and_round_trips_through_to_dict(family):
    config = make(family)
    assert config.family == family and config.model_type == family
    assert PretrainedConfig.from_dict(config.to_dict()) == config, "from_dict(to_dict()) must give an equal config"
    by_model_type = PretrainedConfig.from_dict({k: v for k, v in config_dict(family).items() if k != "architectures"})
    assert by_model_type.family == family, "without architectures, model_type names the family"


@pytest.mark.parametrize(
    "family, field, expected",
    [
        ("llama", "rms_norm_eps", 1e-6),
        ("llama", "max_position_embeddings", 2048),
        ("llama", "bos_token_id", 1),
        ("mistral", "sliding_window", 4096),
        ("mistral", "max_position_embeddings", 131072),
        ("qwen2", "max_window_layers", 28),
        ("qwen2", "use_sliding_window", False),
        ("qwen3", "head_dim", 128),
        ("qwen3", "rope_theta", 10000.0),
        ("phi3", "rms_norm_eps", 1e-5),
        ("phi3", "original_max_position_embeddings", 4096),
        ("phi3", "partial_rotary_factor", 1.0),
        ("phi3", "eos_token_id", 32000),
        ("gemma2", "head_dim", 256),
        ("gemma2", "attn_logit_softcapping", 50.0),
        ("gemma2", "final_logit_softcapping", 30.0),
        ("gemma2", "query_pre_attn_scalar", 256),
        ("gemma2", "tie_word_embeddings", True),
        ("gemma2", "hidden_activation", "gelu_pytorch_tanh"),
        ("gemma3_text", "rope_theta", 1000000.0),
        ("gemma3_text", "rope_local_base_freq", 10000.0),
        ("gemma3_text", "sliding_window_pattern", 6),
        ("gemma3_text", "attn_logit_softcapping", None),
        ("smollm3", "rope_theta", 2000000.0),
        ("smollm3", "no_rope_layer_interval", 4),
        ("smollm3", "tie_word_embeddings", True),
        ("smollm3", "pad_token_id", 128004),
        ("gpt2", "n_positions", 1024),
        ("gpt2", "activation_function", "gelu_new"),
        ("gpt2", "layer_norm_epsilon", 1e-5),
        ("gpt2", "bos_token_id", 50256),
        ("gpt2", "eos_token_id", 50256),
        ("gpt2", "tie_word_embeddings", True),
    ],
)
def test_fields_left_out_take_transformers_defaults(family, field, expected):
    changes = {field: None, "pad_token_id": None}
    if family in GEMMA and field in ("head_dim", "query_pre_attn_scalar"):
        changes.update(head_dim=None, query_pre_attn_scalar=None)
    value = getattr(make(family, **changes), field)
    assert value == expected and type(value) is type(expected), (
        f"{family}.{field}: expected {expected!r}, got {value!r}"
    )


def test_gpt2_reads_through_transformers_generic_names():
    c = make("gpt2")
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.max_position_embeddings) == (16, 3, 4, 32)
    assert (c.intermediate_size, c.num_key_value_heads, c.head_dim) == (64, 4, 4), "n_inner null is 4 * n_embd"
    assert make("gpt2", n_inner=24).intermediate_size == 24
    assert "hidden_size" not in c.to_dict() and c.to_dict()["n_embd"] == 16, "aliases are not config.json fields"
    aliased = PretrainedConfig.from_dict(
        {"model_type": "gpt2", "vocab_size": 40, "hidden_size": 16, "num_hidden_layers": 3, "num_attention_heads": 4}
    )
    assert (aliased.n_embd, aliased.n_layer, aliased.n_head) == (16, 3, 4), "GPT2Config(hidden_size=...) sets n_embd"


# ---- the core's config --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "family, norm, act, gated, eps",
    [
        ("llama", "rms", "silu", True, 1e-6),
        ("mistral", "rms", "silu", True, 1e-6),
        ("qwen2", "rms", "silu", True, 1e-6),
        ("qwen3", "rms", "silu", True, 1e-6),
        ("phi3", "rms", "silu", True, 1e-5),
        ("gemma2", "rms_one_plus", "gelu_tanh", True, 1e-6),
        ("gemma3_text", "rms_one_plus", "gelu_tanh", True, 1e-6),
        ("smollm3", "rms", "silu", True, 1e-6),
        ("gpt2", "layer", "gelu_tanh", False, 1e-5),
    ],
)
def test_core_config_has_the_familys_norm_activation_and_shapes(family, norm, act, gated, eps):
    c = make(family).core_config("float32")
    assert (c["norm"], c["act"], c["gated_mlp"], c["norm_eps"]) == (norm, act, gated, eps), c
    head_dim = 8 if family in ("qwen3",) + GEMMA else 4
    kv = 4 if family == "gpt2" else 2
    inter = 64 if family == "gpt2" else 24
    assert (
        c["vocab_size"],
        c["hidden_size"],
        c["intermediate_size"],
        c["n_layers"],
        c["n_heads"],
        c["n_kv_heads"],
        c["head_dim"],
    ) == (40, 16, inter, 3, 4, kv, head_dim), c


def test_gpt2_has_no_rotary_and_the_others_a_default_table():
    c = make("gpt2").core_config("float32")
    assert c["rope_dim"] == 0 and c["rope_inv_freq"] is None and c["rope_inv_freq_long"] is None
    assert make("gpt2").rope_inv_freq() is None
    for family, theta, dim in (
        ("llama", 10000.0, 4),
        ("qwen3", 10000.0, 8),
        ("smollm3", 2000000.0, 4),
        ("gemma2", 10000.0, 8),
    ):
        c = make(family).core_config("float32")
        assert c["rope_dim"] == dim and c["rope_inv_freq"].dtype == np.float64
        np.testing.assert_array_equal(c["rope_inv_freq"], default_inv_freq(theta, dim), err_msg=family)
        assert c["rope_inv_freq_long"] is None and c["rope_scale"] == 1.0 and c["rope_inv_freq_local"] is None


def test_linear_scaling_divides_the_table():
    c = make("qwen3", rope_theta=500.0, rope_scaling={"rope_type": "linear", "factor": 4.0}).core_config("float32")
    np.testing.assert_array_equal(c["rope_inv_freq"], default_inv_freq(500.0, 8) / 4.0)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("family", GEMMA)
def test_gemma_embedding_scale_is_sqrt_hidden_size_rounded_as_transformers_rounds_it(family, dtype):
    config = make(family, hidden_size=24, num_attention_heads=3, num_key_value_heads=1)
    # Gemma3TextScaledWordEmbedding: torch.tensor(hidden_size ** 0.5) (float32), cast to the weights' dtype.
    expected = torch.tensor(24**0.5).to(getattr(torch, dtype)).item()
    got = config.core_config(dtype)["embed_scale"]
    assert got == expected, f"{dtype}: expected {expected!r}, got {got!r}"
    assert (got == 4.90625) == (dtype == "bfloat16"), "bfloat16 keeps 8 bits: sqrt(24) = 4.8989... becomes 4.90625"


def test_core_config_refuses_a_dtype_it_cannot_round_to():
    with pytest.raises(InvalidInputError, match=r"dtype='int8'.*float32, bfloat16, float16"):
        make("gemma2").core_config("int8")


def test_gemma_softcaps_come_from_the_config_and_null_is_off():
    c = make("gemma2", attn_logit_softcapping=20.0, final_logit_softcapping=15.0).core_config("float32")
    assert (c["attn_softcap"], c["final_softcap"]) == (20.0, 15.0)
    c = make("gemma2", attn_logit_softcapping=NULL, final_logit_softcapping=NULL).core_config("float32")
    assert (c["attn_softcap"], c["final_softcap"]) == (0.0, 0.0)
    c = make("gemma3_text").core_config("float32")
    assert (c["attn_softcap"], c["final_softcap"]) == (0.0, 0.0), "Gemma 3's defaults are null"
    # Transformers' Gemma 3 attention does not pass attn_logit_softcapping on: a value changes nothing there
    c = make("gemma3_text", attn_logit_softcapping=20.0, final_logit_softcapping=15.0).core_config("float32")
    assert (c["attn_softcap"], c["final_softcap"]) == (0.0, 15.0)
    assert make("llama").core_config("float32")["embed_scale"] == 1.0


def test_gemma3_sliding_layers_use_the_local_base_and_full_layers_rope_theta_with_its_scaling():
    config = make(
        "gemma3_text",
        rope_theta=1000000.0,
        rope_local_base_freq=10000.0,
        rope_scaling={"rope_type": "linear", "factor": 8.0},
    )
    c = config.core_config("bfloat16")
    np.testing.assert_array_equal(c["rope_inv_freq"], default_inv_freq(1000000.0, 8) / 8.0)
    np.testing.assert_array_equal(c["rope_inv_freq_local"], default_inv_freq(10000.0, 8))


def test_gemma3_transformers_5_rope_parameters_per_layer_type_are_read():
    config = make(
        "gemma3_text",
        rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 200000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 5000.0},
        },
    )
    c = config.core_config("float32")
    np.testing.assert_array_equal(c["rope_inv_freq"], default_inv_freq(200000.0, 8) / 8.0)
    np.testing.assert_array_equal(c["rope_inv_freq_local"], default_inv_freq(5000.0, 8))
    assert PretrainedConfig.from_dict(config.to_dict()) == config


# ---- Phi-3: partial rotary and longrope ---------------------------------------------------------------------------


def test_phi3_partial_rotary_factor_sets_the_rotary_dimension():
    config = make("phi3", hidden_size=32, num_attention_heads=2, num_key_value_heads=1, partial_rotary_factor=0.75)
    c = config.core_config("float32")
    assert config.head_dim == 16 and c["rope_dim"] == 12 and config.rope_dim == 12
    np.testing.assert_array_equal(c["rope_inv_freq"], default_inv_freq(10000.0, 12))


def longrope(n, **extra):
    return {
        "type": "longrope",
        "short_factor": [1.0 + 0.1 * i for i in range(n)],
        "long_factor": [2.0 + 0.5 * i for i in range(n)],
        **extra,
    }


def test_phi3_longrope_tables_position_and_attention_factor():
    """Phi-3-mini-128k's layout: original_max_position_embeddings at the top level, no factor: the factor is
    max / original, the attention factor sqrt(1 + ln(factor) / ln(original))."""
    config = make(
        "phi3",
        hidden_size=32,
        num_attention_heads=2,
        num_key_value_heads=1,
        partial_rotary_factor=0.5,
        rope_theta=10000.0,
        max_position_embeddings=1024,
        original_max_position_embeddings=64,
        rope_scaling=longrope(4),
    )
    c = config.core_config("float32")
    base = 10000.0 ** (np.arange(0, 8, 2, dtype=np.float64) / 8)
    np.testing.assert_allclose(c["rope_inv_freq"], 1.0 / (np.array([1.0, 1.1, 1.2, 1.3]) * base), rtol=1e-15)
    np.testing.assert_allclose(c["rope_inv_freq_long"], 1.0 / (np.array([2.0, 2.5, 3.0, 3.5]) * base), rtol=1e-15)
    assert c["rope_dim"] == 8 and c["rope_long_from"] == 64, (
        "the long table for a forward that ends at position original_max or later (its length passes original_max)"
    )
    assert c["rope_scale"] == pytest.approx(math.sqrt(1 + math.log(1024 / 64) / math.log(64)), rel=1e-15)
    assert config.rope_type == "longrope"
    np.testing.assert_array_equal(config.rope_inv_freq(), c["rope_inv_freq"])


@pytest.mark.parametrize(
    "scaling_extra, top_level, expected_scale, expected_from",
    [
        ({"factor": 4.0}, {}, math.sqrt(1 + math.log(4.0) / math.log(64)), 64),  # an explicit factor wins
        ({"attention_factor": 1.25}, {}, 1.25, 64),  # as does an attention factor
        ({}, {"max_position_embeddings": 64}, 1.0, 64),  # factor 1: no scaling
        # another family: original_max_position_embeddings from rope_scaling, factor 1024 / 32
        ({"original_max_position_embeddings": 32}, {"family": "llama"}, math.sqrt(1 + math.log(32) / math.log(32)), 32),
    ],
)
def test_longrope_factor_attention_factor_and_original_length(scaling_extra, top_level, expected_scale, expected_from):
    family = top_level.pop("family", "phi3")
    extra = {"original_max_position_embeddings": 64} if family == "phi3" else {}
    changes = {"max_position_embeddings": 64 if "max_position_embeddings" in top_level else 1024, **extra}
    c = make(family, rope_scaling=longrope(2, **({"rope_type": "longrope"} | scaling_extra)), **changes).core_config(
        "float32"
    )
    assert c["rope_scale"] == pytest.approx(expected_scale, rel=1e-15) and c["rope_long_from"] == expected_from


@pytest.mark.parametrize("old_name", ["su", "yarn"])
def test_phi3_reads_older_names_of_longrope(old_name):
    config = make("phi3", rope_scaling=dict(longrope(2), type=old_name))
    assert config.rope_type == "longrope" and config.core_config("float32")["rope_inv_freq_long"] is not None


def test_phi3_sliding_window_is_every_layer():
    assert [s["window"] for s in make("phi3", sliding_window=5).layer_settings()] == [5, 5, 5]
    assert [s["window"] for s in make("phi3").layer_settings()] == [0, 0, 0]


# ---- which layers slide, which rotary, which scale ----------------------------------------------------------------


@pytest.mark.parametrize(
    "family, changes, windows, ropes",
    [
        ("llama", {"sliding_window": 8}, [0, 0, 0], ["global"] * 3),  # Llama reads no window
        ("mistral", {}, [8, 8, 8], ["global"] * 3),
        ("mistral", {"sliding_window": None}, [4096] * 3, ["global"] * 3),  # left out: MistralConfig's 4096
        ("mistral", {"sliding_window": NULL}, [0] * 3, ["global"] * 3),
        ("qwen2", {"sliding_window": 8}, [0, 0, 0], ["global"] * 3),  # use_sliding_window false: no window
        ("qwen2", {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1}, [0, 8, 8], ["global"] * 3),
        (
            "qwen2",
            {
                "use_sliding_window": True,
                "sliding_window": 8,
                "max_window_layers": 1,
                "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
            },
            [8, 0, 8],
            ["global"] * 3,
        ),
        (
            "qwen2",
            {
                "use_sliding_window": False,
                "sliding_window": 8,
                "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
            },
            [0, 0, 0],
            ["global"] * 3,
        ),
        ("qwen3", {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 2}, [0, 0, 8], ["global"] * 3),
        ("gemma2", {"sliding_window": 8}, [8, 0, 8], ["global"] * 3),  # even layers slide
        (
            "gemma2",
            {"sliding_window": 8, "layer_types": ["full_attention", "sliding_attention", "full_attention"]},
            [0, 8, 0],
            ["global"] * 3,
        ),
        ("gemma3_text", {"sliding_window": 8, "sliding_window_pattern": 3}, [8, 8, 0], ["local", "local", "global"]),
        (
            "gemma3_text",
            {"sliding_window": 8, "num_hidden_layers": 7},
            [8] * 5 + [0, 8],
            ["local"] * 5 + ["global", "local"],
        ),
        (
            "gemma3_text",
            {"sliding_window": 8, "layer_types": ["full_attention", "sliding_attention", "sliding_attention"]},
            [0, 8, 8],
            ["global", "local", "local"],
        ),
        ("smollm3", {"num_hidden_layers": 8}, [0] * 8, ["global"] * 3 + ["none"] + ["global"] * 3 + ["none"]),
        ("smollm3", {"no_rope_layers": [1, 0, 1, 1]}, [0, 0, 0], ["global", "none", "global"]),  # longer lists are fine
        ("smollm3", {"no_rope_layer_interval": 2}, [0, 0, 0], ["global", "none", "global"]),
        (
            "smollm3",
            {"use_sliding_window": True, "sliding_window": 8, "no_rope_layers": [1, 0, 1]},
            [0, 8, 0],
            ["global", "none", "global"],
        ),  # SmolLM3Config: the NoPE layers slide
        (
            "smollm3",
            {
                "use_sliding_window": True,
                "sliding_window": 8,
                "layer_types": ["sliding_attention", "full_attention", "full_attention"],
            },
            [8, 0, 0],
            ["global"] * 3,
        ),
        (
            "smollm3",
            {"use_sliding_window": False, "sliding_window": 8, "no_rope_layers": [1, 0, 1]},
            [0, 0, 0],
            ["global", "none", "global"],
        ),
        ("gpt2", {}, [0, 0, 0], ["none"] * 3),
    ],
)
def test_layer_windows_and_rotary_follow_the_familys_rule(family, changes, windows, ropes):
    settings = make(family, **changes).layer_settings()
    assert [s["window"] for s in settings] == windows, settings
    assert [s["rope"] for s in settings] == ropes, settings


@pytest.mark.parametrize(
    "family, changes, scales",
    [
        ("llama", {}, [None] * 3),
        ("gemma2", {"query_pre_attn_scalar": 8}, [None] * 3),  # equal to head_dim: the default 1/sqrt(head_dim)
        ("gemma2", {"query_pre_attn_scalar": 32}, [32**-0.5] * 3),
        ("gemma3_text", {"query_pre_attn_scalar": 2.5}, [2.5**-0.5] * 3),
        ("gpt2", {}, [None] * 3),
        ("gpt2", {"scale_attn_by_inverse_layer_idx": True}, [None, 0.5 / 2, 0.5 / 3]),
        ("gpt2", {"scale_attn_weights": False}, [1.0] * 3),
        ("gpt2", {"scale_attn_weights": False, "scale_attn_by_inverse_layer_idx": True}, [1.0, 1 / 2, 1 / 3]),
    ],
)
def test_attention_scale_is_given_only_where_it_is_not_one_over_sqrt_head_dim(family, changes, scales):
    got = [s.get("attn_scale") for s in make(family, **changes).layer_settings()]
    assert [g is None for g in got] == [e is None for e in scales], f"expected scales {scales}, got {got}"
    assert [g for g in got if g is not None] == pytest.approx([e for e in scales if e is not None], rel=1e-15), got


# ---- refusals ---------------------------------------------------------------------------------------------------

BAD = [
    ("llama", {"head_dim": 5}, CheckpointError, r"'head_dim' is 5.*even"),
    (
        "llama",
        {"hidden_size": 20, "num_attention_heads": 4},
        CheckpointError,
        r"hidden_size // num_attention_heads.*even",
    ),
    ("qwen3", {"head_dim": 7}, CheckpointError, r"'head_dim' is 7"),
    (
        "phi3",
        {"partial_rotary_factor": 0.375, "hidden_size": 32, "num_attention_heads": 4},
        CheckpointError,
        r"'partial_rotary_factor'.*int\(head_dim=8 \* 0.375\) = 3 must be even",
    ),
    ("phi3", {"partial_rotary_factor": 0.0}, CheckpointError, r"'partial_rotary_factor' is 0.0"),
    ("phi3", {"partial_rotary_factor": 1.5}, CheckpointError, r"'partial_rotary_factor' is 1.5"),
    ("llama", {"partial_rotary_factor": 0.5}, UnsupportedModelError, r"partial_rotary_factor 0.5"),
    ("mistral", {"sliding_window": 0}, CheckpointError, r"'sliding_window' is 0"),
    ("phi3", {"sliding_window": -3}, CheckpointError, r"'sliding_window' is -3"),
    ("gemma2", {"sliding_window": 0}, CheckpointError, r"'sliding_window' is 0"),
    ("qwen2", {"use_sliding_window": True, "sliding_window": 0}, CheckpointError, r"'sliding_window' is 0"),
    ("qwen2", {"use_sliding_window": "yes"}, CheckpointError, r"'use_sliding_window' is 'yes'"),
    ("qwen2", {"use_sliding_window": True, "max_window_layers": -1}, CheckpointError, r"'max_window_layers' is -1"),
    ("qwen3", {"layer_types": ["full_attention"] * 2}, CheckpointError, r"'layer_types'.*num_hidden_layers=3"),
    (
        "gemma3_text",
        {"layer_types": ["full_attention", "global", "full_attention"]},
        CheckpointError,
        r"'layer_types'.*'global' is not a layer type",
    ),
    ("gemma2", {"layer_types": "sliding_attention"}, CheckpointError, r"'layer_types'"),
    ("smollm3", {"layer_types": ["chunked_attention"] * 3}, UnsupportedModelError, r"layer_types.*chunked_attention"),
    ("smollm3", {"no_rope_layers": [1, 0]}, CheckpointError, r"'no_rope_layers'.*at least num_hidden_layers=3"),
    ("smollm3", {"no_rope_layers": [1, 2, 1]}, CheckpointError, r"'no_rope_layers'"),
    ("smollm3", {"no_rope_layer_interval": 0}, CheckpointError, r"'no_rope_layer_interval' is 0"),
    ("gemma3_text", {"sliding_window_pattern": 0}, CheckpointError, r"'sliding_window_pattern' is 0"),
    ("gemma2", {"query_pre_attn_scalar": 0}, CheckpointError, r"'query_pre_attn_scalar' is 0"),
    ("gemma3_text", {"query_pre_attn_scalar": -4.0}, CheckpointError, r"'query_pre_attn_scalar' is -4.0"),
    ("gemma2", {"attn_logit_softcapping": 0.0}, CheckpointError, r"'attn_logit_softcapping' is 0.0"),
    ("gemma3_text", {"final_logit_softcapping": -30.0}, CheckpointError, r"'final_logit_softcapping' is -30.0"),
    ("gemma2", {"use_bidirectional_attention": True}, UnsupportedModelError, r"use_bidirectional_attention True"),
    ("llama", {"hidden_act": "quick_gelu"}, UnsupportedModelError, r"hidden_act 'quick_gelu'.*'silu'"),
    ("gemma2", {"hidden_activation": "tanh"}, UnsupportedModelError, r"hidden_activation 'tanh'.*'gelu_pytorch_tanh'"),
    ("gpt2", {"activation_function": "gelu_10"}, UnsupportedModelError, r"activation_function 'gelu_10'.*'gelu_new'"),
    ("gpt2", {"n_embd": 18}, CheckpointError, r"'n_embd' is 18.*multiple of n_head \(4\)"),
    ("gpt2", {"n_head": 0}, CheckpointError, r"'n_head' is 0"),
    ("gpt2", {"n_embd": None}, CheckpointError, r"required field\(s\) n_embd"),
    ("gpt2", {"n_embd": 16, "hidden_size": 32}, CheckpointError, r"'hidden_size' is 32.*n_embd=16"),
    ("gpt2", {"scale_attn_weights": "yes"}, CheckpointError, r"'scale_attn_weights'"),
    (
        "llama",
        {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
        UnsupportedModelError,
        r"rope_scaling type 'yarn'.*longrope",
    ),
    (
        "qwen3",
        {"rope_scaling": {"type": "dynamic", "factor": 2.0}},
        UnsupportedModelError,
        r"rope_scaling type 'dynamic'",
    ),
    (
        "phi3",
        {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
        CheckpointError,
        r"'rope_scaling'.*'default' or 'longrope'",
    ),
    ("gemma3_text", {"rope_scaling": longrope(4)}, UnsupportedModelError, r"longrope.*Gemma 3"),
    (
        "gemma3_text",
        {
            "rope_parameters": {
                "sliding_attention": {"rope_type": "linear", "factor": 2.0},
                "full_attention": {"rope_type": "default"},
            }
        },
        UnsupportedModelError,
        r"sliding_attention.*'linear'",
    ),
    ("phi3", {"rope_scaling": longrope(3)}, CheckpointError, r"'short_factor' has 3 values.*needs 2"),
    (
        "phi3",
        {"rope_scaling": dict(longrope(2), long_factor=[1.0, "2"])},
        CheckpointError,
        r"'long_factor' must be a list of positive numbers",
    ),
    ("phi3", {"rope_scaling": dict(longrope(2), short_factor=[1.0, 0.0])}, CheckpointError, r"'short_factor'"),
    ("phi3", {"rope_scaling": longrope(2, attention_factor=-1.0)}, CheckpointError, r"'attention_factor'"),
    (
        "phi3",
        {"rope_scaling": longrope(2), "original_max_position_embeddings": 0},
        CheckpointError,
        r"'original_max_position_embeddings' is 0",
    ),
    (
        "phi3",
        {"rope_scaling": longrope(2), "original_max_position_embeddings": 1},
        CheckpointError,
        r"'original_max_position_embeddings' is 1.*above 1",
    ),
    ("llama", {"rope_scaling": {"factor": 2.0}}, CheckpointError, r"neither 'rope_type' nor 'type'"),
    ("qwen3", {"head_dim": 1024}, UnsupportedModelError, r"head dimension of 1024.*up to 512"),
    ("gpt2", {"n_embd": 2048, "n_head": 2}, UnsupportedModelError, r"head dimension of 1024.*up to 512"),
    ("qwen3", {"num_experts": 8}, UnsupportedModelError, r"'num_experts' is 8: a mixture-of-experts"),
    ("mistral", {"num_local_experts": 8}, UnsupportedModelError, r"'num_local_experts'.*mixture-of-experts"),
    ("qwen2", {"moe_intermediate_size": 64}, UnsupportedModelError, r"'moe_intermediate_size'.*mixture-of-experts"),
    (
        "llama",
        {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral"},
        UnsupportedModelError,
        r"MixtralForCausalLM.*mixture-of-experts.*Qwen3ForCausalLM",
    ),
    (
        "llama",
        {"architectures": None, "model_type": "qwen3_moe"},
        UnsupportedModelError,
        r"'qwen3_moe' is a mixture-of-experts",
    ),
    (
        "llama",
        {"architectures": ["FalconForCausalLM"]},
        UnsupportedModelError,
        r"FalconForCausalLM.*names none.*LlamaForCausalLM.*Gemma3ForCausalLM \(model_type 'gemma3_text'\)"
        r".*GPT2LMHeadModel",
    ),
    (
        "gemma3_text",
        {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3"},
        CheckpointError,
        r"'text_config' is None: Gemma3ForConditionalGeneration needs its text model's config",
    ),
    (
        "llama",
        {"architectures": None, "model_type": "bert"},
        UnsupportedModelError,
        r"model_type 'bert' is not supported.*SmolLM3ForCausalLM",
    ),
    ("llama", {"architectures": ["LlamaForCausalLM", "GPT2LMHeadModel"]}, UnsupportedModelError, r"names several"),
]


@pytest.mark.parametrize("family, changes, error, needle", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_impossible_or_unsupported_values_are_refused_naming_the_field(family, changes, error, needle):
    with pytest.raises(error, match=needle):
        make(family, **changes).core_config("float32")


def test_fields_of_a_switched_off_window_are_not_read():
    """Qwen2 without use_sliding_window never reads max_window_layers (a fuzzed config once broke layer_settings)."""
    settings = make("qwen2", use_sliding_window=False, sliding_window=8, max_window_layers="x").layer_settings()
    assert [s["window"] for s in settings] == [0, 0, 0]


def test_expert_counts_of_zero_are_a_dense_model():
    assert make("qwen3", num_experts=0, num_experts_per_tok=0).family == "qwen3"


def test_a_longrope_table_shorter_than_the_rotary_dimension_is_caught_with_the_partial_factor():
    """short_factor fits head_dim / 2 but not the partial rotary dimension: the length check uses the latter."""
    with pytest.raises(CheckpointError, match=r"'short_factor' has 4 values but the rotary dimension 4 needs 2"):
        make("phi3", hidden_size=32, partial_rotary_factor=0.5, rope_scaling=longrope(4))


# ---- tensors: names, roles, order -----------------------------------------------------------------------------


def transformers_state_dict(family, config):
    """[(name, stored shape)] of one Transformers model of this family, in its state_dict order, written from the
    modeling files (module registration order; Linear/Conv1D/LayerNorm: weight then bias), a tied head left out."""
    if family == "gpt2":
        d, inner, n = config["n_embd"], config.get("n_inner") or 4 * config["n_embd"], config["n_layer"]
        out = [
            ("transformer.wte.weight", (config["vocab_size"], d)),
            ("transformer.wpe.weight", (config.get("n_positions", 1024), d)),
        ]
        for i in range(n):
            p = f"transformer.h.{i}."
            out += [
                (p + "ln_1.weight", (d,)),
                (p + "ln_1.bias", (d,)),
                (p + "attn.c_attn.weight", (d, 3 * d)),
                (p + "attn.c_attn.bias", (3 * d,)),
                (p + "attn.c_proj.weight", (d, d)),
                (p + "attn.c_proj.bias", (d,)),
                (p + "ln_2.weight", (d,)),
                (p + "ln_2.bias", (d,)),
                (p + "mlp.c_fc.weight", (d, inner)),
                (p + "mlp.c_fc.bias", (inner,)),
                (p + "mlp.c_proj.weight", (inner, d)),
                (p + "mlp.c_proj.bias", (d,)),
            ]
        out += [("transformer.ln_f.weight", (d,)), ("transformer.ln_f.bias", (d,))]
        if config.get("tie_word_embeddings") is False:
            out.append(("lm_head.weight", (config["vocab_size"], d)))
        return out
    d, inter, V = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    H, KV = config["num_attention_heads"], config["num_key_value_heads"]
    hd = config.get("head_dim") or d // H
    attn_bias = config.get("attention_bias", False)
    qkv_bias = family == "qwen2" or (attn_bias and family not in ("mistral", "phi3"))
    o_bias = attn_bias and family not in ("mistral", "phi3", "qwen2")
    mlp_bias = config.get("mlp_bias", False) and family in ("llama", "smollm3")
    out = [("model.embed_tokens.weight", (V, d))]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        if family == "phi3":
            out += [
                (p + "self_attn.o_proj.weight", (d, H * hd)),
                (p + "self_attn.qkv_proj.weight", ((H + 2 * KV) * hd, d)),
            ]
        else:
            for proj, rows in (("q_proj", H * hd), ("k_proj", KV * hd), ("v_proj", KV * hd)):
                out.append((p + f"self_attn.{proj}.weight", (rows, d)))
                if qkv_bias:
                    out.append((p + f"self_attn.{proj}.bias", (rows,)))
            out.append((p + "self_attn.o_proj.weight", (d, H * hd)))
            if o_bias:
                out.append((p + "self_attn.o_proj.bias", (d,)))
        if family in ("qwen3", "gemma3_text"):
            out += [(p + "self_attn.q_norm.weight", (hd,)), (p + "self_attn.k_norm.weight", (hd,))]
        if family == "phi3":
            out += [(p + "mlp.gate_up_proj.weight", (2 * inter, d)), (p + "mlp.down_proj.weight", (d, inter))]
        else:
            for proj, shape in (("gate_proj", (inter, d)), ("up_proj", (inter, d)), ("down_proj", (d, inter))):
                out.append((p + f"mlp.{proj}.weight", shape))
                if mlp_bias:
                    out.append((p + f"mlp.{proj}.bias", shape[:1]))
        out += [(p + "input_layernorm.weight", (d,)), (p + "post_attention_layernorm.weight", (d,))]
        if family in GEMMA:
            out += [(p + "pre_feedforward_layernorm.weight", (d,)), (p + "post_feedforward_layernorm.weight", (d,))]
    out.append(("model.norm.weight", (d,)))
    tied = config.get("tie_word_embeddings", family in GEMMA + ("smollm3",))
    if not tied:
        out.append(("lm_head.weight", (V, d)))
    return out


VARIANTS = [
    ("llama", {}),
    ("llama", {"attention_bias": True, "mlp_bias": True, "tie_word_embeddings": True}),
    ("mistral", {"attention_bias": True}),
    ("qwen2", {}),
    ("qwen3", {}),
    ("qwen3", {"attention_bias": True}),
    ("phi3", {}),
    ("gemma2", {}),
    ("gemma3_text", {"tie_word_embeddings": False}),
    ("smollm3", {}),
    ("smollm3", {"mlp_bias": True, "attention_bias": True}),
    ("gpt2", {}),
    ("gpt2", {"tie_word_embeddings": False}),
]
VARIANT_IDS = [f"{f}-{i}" for i, (f, _) in enumerate(VARIANTS)]


@pytest.mark.parametrize("family, changes", VARIANTS, ids=VARIANT_IDS)
def test_expected_weights_are_the_familys_tensors_with_their_stored_shapes(family, changes):
    raw = config_dict(family, **changes)
    config = PretrainedConfig.from_dict(raw)
    expected = dict(transformers_state_dict(family, config.to_dict()))
    specs = expected_weights(config)
    got = {spec.name: tuple(size for size, _ in spec.dims) for spec in specs}
    assert got == expected, f"names or shapes differ: {sorted(set(got) ^ set(expected))}"
    assert [name for name, _ in transformers_state_dict(family, config.to_dict())] == state_dict_names(config), (
        "save order must be Transformers' state_dict order"
    )


@pytest.mark.parametrize(
    "family, name, role, layer, transposed",
    [
        ("llama", "model.layers.1.post_attention_layernorm.weight", "ffn_norm", 1, False),
        ("gemma2", "model.layers.1.post_attention_layernorm.weight", "post_attn_norm", 1, False),
        ("gemma2", "model.layers.0.pre_feedforward_layernorm.weight", "ffn_norm", 0, False),
        ("gemma3_text", "model.layers.2.post_feedforward_layernorm.weight", "post_ffn_norm", 2, False),
        ("gemma3_text", "model.layers.0.self_attn.k_norm.weight", "k_norm", 0, False),
        ("qwen3", "model.layers.0.self_attn.q_norm.weight", "q_norm", 0, False),
        ("qwen2", "model.layers.0.self_attn.v_proj.bias", "bv", 0, False),
        ("phi3", "model.layers.2.self_attn.qkv_proj.weight", "wqkv", 2, False),
        ("phi3", "model.layers.2.mlp.gate_up_proj.weight", "w_gate_up", 2, False),
        ("llama", "model.embed_tokens.weight", "embed", None, False),
        ("llama", "lm_head.weight", "lm_head", None, False),
        ("gpt2", "transformer.wpe.weight", "pos_embed", None, False),
        ("gpt2", "transformer.h.1.attn.c_attn.weight", "wqkv", 1, True),
        ("gpt2", "transformer.h.1.attn.c_attn.bias", "bqkv", 1, False),
        ("gpt2", "transformer.h.0.attn.c_proj.weight", "wo", 0, True),
        ("gpt2", "transformer.h.0.mlp.c_fc.weight", "w_up", 0, True),
        ("gpt2", "transformer.h.0.mlp.c_fc.bias", "b_up", 0, False),
        ("gpt2", "transformer.h.2.mlp.c_proj.weight", "w_down", 2, True),
        ("gpt2", "transformer.h.2.ln_2.bias", "ffn_norm_bias", 2, False),
        ("gpt2", "transformer.ln_f.bias", "final_norm_bias", None, False),
    ],
)
def test_each_tensor_has_its_role_in_the_core(family, name, role, layer, transposed):
    specs = {spec.name: spec for spec in expected_weights(make(family))}
    spec = specs[name]
    assert (spec.role, spec.layer, spec.transposed, spec.is_matrix) == (
        role,
        layer,
        transposed,
        role[0] == "w" or role in ("embed", "pos_embed", "lm_head"),
    ), spec


@pytest.mark.parametrize("family", FAMILIES)
def test_roles_are_unique_per_layer_and_every_layer_has_its_norms_and_matrices(family):
    specs = expected_weights(make(family, attention_bias=True) if family in ("llama", "qwen3") else make(family))
    for layer in range(3):
        roles = [spec.role for spec in specs if spec.layer == layer]
        assert len(roles) == len(set(roles)), f"layer {layer}: a role twice in {roles}"
        assert {"attn_norm", "wo", "w_down", "ffn_norm"} <= set(roles), roles
        assert ("wqkv" in roles) != ("wq" in roles), roles
    model_roles = [spec.role for spec in specs if spec.layer is None]
    assert model_roles[0] == "embed" and "final_norm" in model_roles and len(model_roles) == len(set(model_roles))


# ---- loading: GPT-2's names and Conv1D matrices --------------------------------------------------------------------


def _stored(values, dtype):
    """float64 values -> (what save_file takes, the exact stored values as float32)."""
    f32 = np.ascontiguousarray(values, dtype=np.float32)
    if dtype == "BF16":
        bits = to_bfloat16_bits(f32)
        return (bits, "BF16"), bfloat16_bits_to_float32(bits)
    if dtype == "F16":
        return f32.astype(np.float16), f32.astype(np.float16).astype(np.float32)
    return f32, f32


def write_checkpoint(directory, family, dtype="F32", prefix=True, seed=0, **changes):
    """config.json + model.safetensors of a random model (names and shapes: transformers_state_dict) ->
    (config dict, {name as expected_weights names it: stored values as float32})."""
    os.makedirs(directory, exist_ok=True)
    config = config_dict(family, torch_dtype={"F32": "float32", "BF16": "bfloat16", "F16": "float16"}[dtype], **changes)
    full = PretrainedConfig.from_dict(config).to_dict()
    rng = np.random.default_rng(seed)
    to_file, values = {}, {}
    for name, shape in transformers_state_dict(family, full):
        to_file[name if prefix else name.removeprefix("transformer.")], values[name] = _stored(
            rng.standard_normal(shape) * 0.5, dtype
        )
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    save_file(to_file, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    return config, values


def held(weight):
    """A loaded Weight -> float32 (rows, cols), unpacked from panels."""
    array = weight.array
    if weight.panels:
        array = unpack_panels(array, weight.dtype, weight.rows, weight.cols)
    return bfloat16_bits_to_float32(array) if weight.dtype == "bfloat16" else np.asarray(array, dtype=np.float32)


@pytest.mark.parametrize("prefix", [True, False], ids=["transformer.", "no-prefix"])
@pytest.mark.parametrize("repack", [True, False], ids=["repack", "row-major"])
def test_gpt2_conv1d_matrices_load_transposed_under_the_prefixed_names(tmp_path, prefix, repack):
    _, values = write_checkpoint(tmp_path, "gpt2", prefix=prefix)
    ckpt = load_checkpoint(tmp_path, repack=repack)
    assert set(ckpt.weights) == set(values) | {"lm_head.weight"}
    assert ckpt.weights["lm_head.weight"] is ckpt.weights["transformer.wte.weight"], "GPT-2's head is tied"
    for name in (
        "transformer.h.0.attn.c_attn.weight",
        "transformer.h.2.mlp.c_fc.weight",
        "transformer.h.1.mlp.c_proj.weight",
        "transformer.h.1.attn.c_proj.weight",
    ):
        w = ckpt.weights[name]
        assert w.cols == values[name].shape[0], f"{name}: cols must be the input features (stored rows)"
        np.testing.assert_array_equal(held(w), values[name].T, err_msg=name)
        assert w.panels == repack and not maps_file(w.array), f"{name}: a copy of its own, never a view of the file"
    assert maps_file(ckpt.weights["transformer.wte.weight"].array) != repack, (
        "control: with repack=False a matrix as stored is a view of the file"
    )
    wpe = ckpt.weights["transformer.wpe.weight"]
    assert not wpe.panels and wpe.array.shape == (32, 16), "learned positions are read a row per position"
    np.testing.assert_array_equal(held(wpe), values["transformer.wpe.weight"])
    np.testing.assert_array_equal(
        ckpt.weights["transformer.h.1.attn.c_attn.bias"].array, values["transformer.h.1.attn.c_attn.bias"]
    )


def test_gpt2_int8_quantizes_the_transposed_matrices_and_keeps_positions_as_stored(tmp_path):
    write_checkpoint(tmp_path, "gpt2", dtype="BF16")
    w = load_checkpoint(tmp_path, dtype="int8").weights
    assert w["transformer.h.0.mlp.c_fc.weight"].dtype == "int8" and w["transformer.h.0.mlp.c_fc.weight"].cols == 16
    assert w["transformer.h.0.mlp.c_fc.weight"].array.shape[0] == 64, "rows: the 4 * n_embd output features"
    assert w["transformer.wpe.weight"].dtype == "bfloat16", "positions are added per row, never quantized"


def test_gpt2_checkpoint_with_neither_name_is_a_clear_error(tmp_path):
    write_checkpoint(tmp_path, "gpt2")
    tensors = {("model." + k): v for k, (v, _) in read_safetensors(tmp_path / "model.safetensors").items()}
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"'transformer\.wte\.weight' \(or 'wte\.weight'.*not found"):
        load_checkpoint(tmp_path)


def test_phi3_fused_matrix_of_the_wrong_shape_names_the_fields(tmp_path):
    write_checkpoint(tmp_path, "phi3")
    with open(tmp_path / "config.json") as f:
        config = json.load(f)
    config["num_key_value_heads"] = 1
    with open(tmp_path / "config.json", "w") as f:
        json.dump(config, f)
    with pytest.raises(
        CheckpointError,
        match=r"'model\.layers\.0\.self_attn\.qkv_proj\.weight' has shape \[32, 16\] "
        r"but config\.json \(\(num_attention_heads=4 \+ 2 \* "
        r"num_key_value_heads=1\) \* head_dim=4",
    ):
        load_checkpoint(tmp_path)


@pytest.mark.parametrize(
    "family, missing",
    [
        ("gemma2", "model.layers.1.pre_feedforward_layernorm.weight"),
        ("phi3", "model.layers.0.self_attn.qkv_proj.weight"),  # saved with split q/k/v (a Llama layout): refused
    ],
)
def test_a_missing_tensor_of_the_family_is_named(tmp_path, family, missing):
    write_checkpoint(tmp_path, family)
    tensors = {k: v for k, v in read_safetensors(tmp_path / "model.safetensors").items() if k != missing}
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=re.escape(repr(missing)) + " not found"):
        load_checkpoint(tmp_path)


@pytest.mark.parametrize("layout", ["model.language_model.", "language_model.model."])
def test_gemma3_for_conditional_generation_loads_its_text_model(tmp_path, layout):
    """A Gemma 3 4B-style checkpoint (Gemma3ForConditionalGeneration: text_config nested, the text model's tensors
    under Transformers' >= 4.52 or earlier prefix, a vision tower beside them) gives the text model's logits
    bitwise, with the top level's token ids."""
    text = tmp_path / "text"
    config, _ = write_checkpoint(text, "gemma3_text", seed=4)
    mm = tmp_path / "multimodal"
    os.makedirs(mm)
    top = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": {k: v for k, v in config.items() if k not in ("architectures", "eos_token_id")},
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 8},
        "eos_token_id": [1, 7],
        "torch_dtype": config["torch_dtype"],
    }
    with open(mm / "config.json", "w") as f:
        json.dump(top, f)
    tensors = {
        layout + k[len("model.") :] if k.startswith("model.") else k: v
        for k, v in read_safetensors(text / "model.safetensors").items()
    }
    tensors["vision_tower.vision_model.embeddings.patch_embedding.weight"] = (np.ones((8, 3), np.float32), "F32")
    save_file(tensors, mm / "model.safetensors")
    a, b = ha.AutoModelForCausalLM.from_pretrained(str(text)), ha.AutoModelForCausalLM.from_pretrained(str(mm))
    assert type(b).__name__ == "Gemma3ForCausalLM" and b.config.eos_token_id == [1, 7]
    ids = np.arange(1, 20)[None]
    assert np.array_equal(a(ids).logits, b(ids).logits)
    with open(mm / "config.json", "w") as f:
        json.dump({k: v for k, v in top.items() if k != "text_config"}, f)
    with pytest.raises(CheckpointError, match="text_config"):
        ha.AutoModelForCausalLM.from_pretrained(str(mm))


# ---- saving: every family round trips bit for bit ------------------------------------------------------------------


def _raw_tensors(path):
    """{name: (dtype, shape, bytes)} read with struct + json, independent of the package's reader."""
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    return {
        k: (v["dtype"], v["shape"], body[v["data_offsets"][0] : v["data_offsets"][1]])
        for k, v in header.items()
        if k != "__metadata__"
    }


ROUND_TRIPS = [
    ("llama", "BF16", {}),
    ("mistral", "F16", {}),
    ("qwen2", "F32", {"use_sliding_window": True}),
    ("qwen3", "BF16", {"attention_bias": True}),
    ("phi3", "BF16", {"partial_rotary_factor": 0.5}),
    ("gemma2", "F32", {}),
    ("gemma3_text", "BF16", {}),
    ("smollm3", "F32", {}),
    ("gpt2", "BF16", {"prefix": False}),
    ("gpt2", "F32", {"tie_word_embeddings": False}),
]


@pytest.mark.parametrize("repack", [True, False], ids=["repack", "row-major"])
@pytest.mark.parametrize(
    "family, dtype, changes", ROUND_TRIPS, ids=[f"{f}-{d}-{i}" for i, (f, d, _) in enumerate(ROUND_TRIPS)]
)
def test_load_save_load_writes_the_checkpoints_own_bytes_in_transformers_order(
    tmp_path, family, dtype, changes, repack
):
    changes = dict(changes)
    prefix = changes.pop("prefix", True)
    write_checkpoint(tmp_path / "src", family, dtype=dtype, prefix=prefix, **changes)
    model = ha.AutoModelForCausalLM.from_pretrained(tmp_path / "src", repack=repack)
    assert type(model).__name__ == ARCH[family]
    save_model(model, tmp_path / "out")
    original = _raw_tensors(tmp_path / "src" / "model.safetensors")
    saved = _raw_tensors(tmp_path / "out" / "model.safetensors")
    renamed = {(k if prefix or k == "lm_head.weight" else "transformer." + k): v for k, v in original.items()}
    assert set(saved) == set(renamed), f"names differ: {sorted(set(saved) ^ set(renamed))}"
    for name, (stored, shape, data) in renamed.items():
        assert saved[name][:2] == (stored, shape), f"{name}: saved {saved[name][:2]}, stored {(stored, shape)}"
        assert saved[name][2] == data, f"{name}: the saved bytes differ from the checkpoint's"
    with open(tmp_path / "out" / "config.json") as f:
        written = json.load(f)
    assert written["architectures"] == [ARCH[family]] and written["model_type"] == family
    reloaded = ha.AutoModelForCausalLM.from_pretrained(tmp_path / "out", repack=repack)
    assert reloaded.config == model.config
    for name, weight in model._weights.items():
        again = reloaded._weights[name]
        assert (weight.dtype, weight.cols, weight.panels, weight.rows) == (
            again.dtype,
            again.cols,
            again.panels,
            again.rows,
        ), name
        assert np.array_equal(np.asarray(weight.array).view(np.uint8), np.asarray(again.array).view(np.uint8)), name
