"""Every model family the package loads (Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2, Gemma 3, SmolLM3, GPT-2)
computes what Transformers computes, and keeps the exactness promises, on random checkpoints written in each
family's own config keys and tensor names (tests/fixtures/family_checkpoints.py):

- logits within 1e-4 relative (max |diff| / max |reference|) of the float64 reference
(tests/fixtures/family_reference.py,
  written from Transformers' modeling code): bf16/f16/f32 files, GQA/MQA, tied/untied heads, each family's
  particulars (softcaps, q/k norms, partial and long rope, local/global rope, NoPE layers, windows, Conv1D,
  fused projections), each of which moves the reference far beyond the tolerance;
- greedy generation equal to the reference's argmax chain (prompts chosen so that every argmax wins by far more
  than float32 error);
- decoding token by token, in chunks, and after crops back across sliding windows' edges and across the wrap of
  their rings, bitwise the full forward (longrope: on each side of original_max_position_embeddings, since there a
  forward's factors depend on its own length, as in Transformers); left-padded batch rows bitwise each prompt alone;
- longrope (Phi-3) as Transformers computes it: the factors chosen per forward by its sequence length, the cached
  keys kept, generate() running the sequence again where it first passes original_max_position_embeddings, and
  assisted generation bitwise plain across that point;
- greedy assisted generation bitwise plain greedy: drafts of the same family (the target perturbed, a smaller
  random model, the target itself) over 44 new tokens with windows of 4-6 and 5-8 draft tokens per round, so
  that rejections and rollbacks straddle the windows' edges many times, and over 300 with rings wrapping; drafts
  with another tokenizer (a permuted vocabulary of the same family, and other families) through the
  different-tokenizer path; coupled assisted sampling, early-exit drafts and prompt lookup equal plain generation;
- int8 / int4 logits equal to the reference's on weights quantized as csrc/ha.h documents (every matrix of every
  family along its input dimension), close to the float model's, generating and assisting exactly; repack=False
  (row-major) weights against the reference and bitwise against themselves.
"""

import json
import os
import zlib

import family_reference as R
import numpy as np
import pytest
from checkpoints import round_to_bfloat16
from family_checkpoints import longrope_scaling, write_family_checkpoint

import habana_assist as ha
from habana_assist.errors import UnsupportedModelError

VOCAB = 96
REL_TOL = 1e-4
MIN_MARGIN = 2e-3  # relative to the row's max |logit|: float32 error is ~1e-6 of it
SEQ = 24  # tokens of the logits and incremental tests: several windows of 4-6, and past longrope's 16

# name -> (family, write_family_checkpoint arguments). Each family: GQA/MQA, tied and untied where it has both,
# the three storage dtypes, and its own features.
CASES = {
    "llama_f32_gqa": ("llama", dict()),
    "mistral_window4_f32": ("mistral", dict(sliding_window=4)),
    "mistral_window6_bf16_mqa_hd16": ("mistral", dict(dtype="BF16", num_kv_heads=1, head_dim=16, sliding_window=6)),
    "qwen2_sliding_f32": ("qwen2", dict(num_layers=3, sliding_window=5, max_window_layers=1)),
    "qwen2_all_sliding_f16_mqa_tied": (
        "qwen2",
        dict(dtype="F16", num_kv_heads=1, tie_word_embeddings=True, sliding_window=4, max_window_layers=0),
    ),
    "qwen2_window_off_bf16": ("qwen2", dict(dtype="BF16")),
    "qwen3_f32_gqa_hd16": ("qwen3", dict(head_dim=16)),
    "qwen3_bf16_mqa_tied_bias": (
        "qwen3",
        dict(dtype="BF16", num_kv_heads=1, tie_word_embeddings=True, attention_bias=True),
    ),
    "qwen3_sliding_f16": ("qwen3", dict(dtype="F16", num_layers=3, sliding_window=5, max_window_layers=1)),
    "qwen3_v5_rope_parameters_llama3": (
        "qwen3",
        dict(
            dtype="BF16",
            v5=True,
            rope_scaling={
                "rope_type": "llama3",
                "factor": 4.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        ),
    ),
    "qwen3_default_head_dim_128": ("qwen3", dict(num_heads=2, num_kv_heads=1, head_dim=128, omit=("head_dim",))),
    "phi3_f32_mha": ("phi3", dict(num_kv_heads=4)),
    "phi4mini_bf16_gqa_partial_tied": (
        "phi3",
        dict(dtype="BF16", hidden_size=64, intermediate_size=64, tie_word_embeddings=True, partial_rotary_factor=0.75),
    ),
    "phi3_longrope_f32": (
        "phi3",
        dict(max_position_embeddings=64, original_max_position_embeddings=16, rope_scaling=longrope_scaling(8, seed=1)),
    ),
    "phi3_longrope_partial_f16_mqa": (
        "phi3",
        dict(
            dtype="F16",
            hidden_size=64,
            intermediate_size=64,
            num_kv_heads=1,
            partial_rotary_factor=0.5,
            max_position_embeddings=64,
            original_max_position_embeddings=16,
            rope_scaling=longrope_scaling(8, seed=2, key="rope_type"),
        ),
    ),
    "phi3_window5_f32": ("phi3", dict(sliding_window=5)),
    "phi4mini_v5_rope_parameters_longrope": (
        "phi3",
        dict(
            hidden_size=64,
            intermediate_size=64,
            v5=True,
            partial_rotary_factor=0.75,
            max_position_embeddings=64,
            original_max_position_embeddings=16,
            rope_scaling=longrope_scaling(12, seed=6),
        ),
    ),
    # original_max_position_embeddings only inside rope_scaling: Phi3Config's own (default 4096) wins
    "phi3_longrope_original_max_default": (
        "phi3",
        dict(
            max_position_embeddings=64,
            omit=("original_max_position_embeddings",),
            rope_scaling=dict(longrope_scaling(8, seed=5), original_max_position_embeddings=16),
        ),
    ),
    "gemma2_f32_gqa": ("gemma2", dict(num_layers=3, sliding_window=4)),
    "gemma2_bf16_mqa_hd16": (
        "gemma2",
        dict(dtype="BF16", hidden_size=48, num_kv_heads=1, head_dim=16, sliding_window=5),
    ),
    "gemma2_f16_untied": ("gemma2", dict(dtype="F16", hidden_size=48, tie_word_embeddings=False, sliding_window=6)),
    "gemma2_default_head_dim_256_no_scalar": (
        "gemma2",
        dict(num_heads=2, num_kv_heads=1, head_dim=256, sliding_window=4, omit=("head_dim", "query_pre_attn_scalar")),
    ),
    "gemma3_f32_pattern2_linear": (
        "gemma3_text",
        dict(num_layers=3, sliding_window=4, rope_scaling={"rope_type": "linear", "factor": 2.0}),
    ),
    "gemma3_bf16_layer_types_mqa": (
        "gemma3_text",
        dict(
            dtype="BF16",
            hidden_size=48,
            num_kv_heads=1,
            num_layers=3,
            sliding_window=5,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        ),
    ),
    "gemma3_f16_final_softcap_untied": (
        "gemma3_text",
        dict(
            dtype="F16",
            num_layers=3,
            sliding_window=6,
            sliding_window_pattern=3,
            final_logit_softcapping=10.0,
            tie_word_embeddings=False,
        ),
    ),
    "gemma3_v5_rope_parameters_per_layer_type": (
        "gemma3_text",
        dict(
            num_layers=3,
            sliding_window=4,
            v5=True,
            layer_types="auto",
            rope_scaling={"rope_type": "linear", "factor": 4.0},
        ),
    ),
    "smollm3_f32_nope": ("smollm3", dict(num_layers=4)),
    "smollm3_bf16_no_rope_list_untied_mqa": (
        "smollm3",
        dict(dtype="BF16", num_layers=3, no_rope_layers=[1, 0, 1], tie_word_embeddings=False, num_kv_heads=1),
    ),
    "smollm3_sliding_nope_layers_f32": ("smollm3", dict(num_layers=4, sliding_window=4)),
    "smollm3_sliding_layer_types_f16": (
        "smollm3",
        dict(
            dtype="F16",
            num_layers=4,
            sliding_window=5,
            layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        ),
    ),
    "gpt2_f32": ("gpt2", dict()),
    "gpt2_v5_dtype_key": ("gpt2", dict(dtype="BF16", v5=True)),
    "gpt2_bf16_no_prefix_inverse_layer_idx": (
        "gpt2",
        dict(dtype="BF16", num_layers=3, gpt2_prefix=False, scale_attn_by_inverse_layer_idx=True),
    ),
    "gpt2_f16_gelu_erf_unscaled_upcast": (
        "gpt2",
        dict(dtype="F16", activation_function="gelu", scale_attn_weights=False, reorder_and_upcast_attn=True),
    ),
    "gpt2_relu_n_inner_null": ("gpt2", dict(activation_function="relu", intermediate_size=None)),
    "gpt2_f32_old_hub_layout_mask_buffers": (
        "gpt2",
        dict(gpt2_prefix=False, gpt2_mask_buffers=True, max_position_embeddings=64),
    ),
}
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text", "smollm3", "gpt2")
# The first case of each family, for the quantized tests.
FIRST_CASE = {family: next(n for n, (f, _) in CASES.items() if f == family) for family in FAMILIES}


def tokens(seed, n, vocab=VOCAB):
    return np.random.default_rng(seed).integers(0, vocab, size=n).astype(np.int64)


TOKENS = tokens(1234, SEQ)


class Store:
    """Checkpoints written once per session and models loaded once per (case, load arguments)."""

    def __init__(self, root):
        self.root, self.written, self.models = root, {}, {}

    def checkpoint(self, name, family=None, seed=None, **kwargs):
        """(path, config, tensors64) of a named case: CASES[name], or family + kwargs (seed: default from the name)."""
        if name not in self.written:
            if family is None:
                family, kwargs = CASES[name]
            seed = zlib.crc32(name.encode()) % 1000 if seed is None else seed
            path = os.path.join(self.root, name)
            config, tensors = write_family_checkpoint(path, family, seed=seed, vocab_size=VOCAB, **kwargs)
            self.written[name] = (path, config, tensors)
        return self.written[name]

    def model(self, name, **load):
        key = (name, tuple(sorted(load.items())))
        if key not in self.models:
            path, config, _ = self.checkpoint(name)
            if config.get("model_type") == "gpt2" and "mask_buffers" in name:
                # the old files' attention buffers: named as unused, as Transformers' load report names them
                with pytest.warns(UserWarning, match=r"were not used.*h\.0\.attn\.masked_bias"):
                    self.models[key] = ha.AutoModelForCausalLM.from_pretrained(path, **load)
            else:
                self.models[key] = ha.AutoModelForCausalLM.from_pretrained(path, **load)
        return self.models[key]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return Store(str(tmp_path_factory.mktemp("families")))


def relative_error(got, ref):
    return float(np.abs(np.asarray(got, dtype=np.float64) - ref).max() / np.abs(ref).max())


def assert_matches_reference(got, ref, what, tol=REL_TOL):
    got = np.asarray(got)
    assert got.shape == ref.shape, f"{what}: expected logits of shape {ref.shape}, got {got.shape}"
    assert got.dtype == np.float32, f"{what}: expected float32 logits, got {got.dtype}"
    err = np.abs(got.astype(np.float64) - ref)
    worst = np.unravel_index(int(np.argmax(err)), err.shape)
    rel = err.max() / np.abs(ref).max()
    assert rel <= tol, (
        f"{what}: max |logit - reference| / max |reference| = {rel:.3g} at {worst} (got "
        f"{got[worst]:.6g}, reference {ref[worst]:.6g}); expected <= {tol}; rows over the "
        f"tolerance: {sorted({int(r) for r in np.argwhere(err > tol * np.abs(ref).max())[:, 0]})}"
    )


def assert_bitwise(got, expected, what):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: expected shape {expected.shape}, got {got.shape}"
    if not np.array_equal(got, expected):
        diff = np.abs(got.astype(np.float64) - expected)
        rows = sorted({int(i) for i in np.argwhere(diff > 0)[:, 0]})
        raise AssertionError(
            f"{what}: expected bitwise equal logits; {int((diff > 0).sum())} of {diff.size} differ, "
            f"max |diff| = {diff.max():.3g}, rows {rows[:12]}"
        )


def assert_tokens(got, expected, what):
    got = np.asarray(got)
    assert got.shape == expected.shape and np.array_equal(got, expected), (
        f"{what}:\nexpected {np.asarray(expected).tolist()}\ngot      {got.tolist()}"
    )


def generate(model, ids, **kwargs):
    """Greedy generate() with an all-ones attention_mask: Gemma's pad_token_id 0 may be a prompt token here, and
    generate() would infer padding from it as Transformers does."""
    return model.generate(ids, attention_mask=np.ones_like(ids), **kwargs)


# ------------------------------------------------------------------------------------------- the classes


def test_each_architecture_is_a_sibling_class_of_the_neutral_base():
    """As in Transformers, each architecture's class is its own: a subclass of the neutral PreTrainedCausalLM and of
    no other architecture's, so that isinstance(model, LlamaForCausalLM) holds for a Llama checkpoint only."""
    names = sorted(ha.ARCHITECTURE_CLASSES)
    assert "LlamaForCausalLM" in names and "GPT2LMHeadModel" in names, f"expected every family's class, got {names}"
    for name in names:
        cls = getattr(ha, name)
        assert cls.__name__ == name and issubclass(cls, ha.PreTrainedCausalLM), (
            f"expected ha.{name} to be a PreTrainedCausalLM named {name}, got {cls!r} with bases {cls.__mro__}"
        )
        others = [other for other in names if other != name and issubclass(cls, getattr(ha, other))]
        assert not others, f"expected ha.{name} to subclass no other architecture's class, but it subclasses {others}"


@pytest.mark.parametrize("case", ["llama_f32_gqa", "gpt2_f32"])
def test_a_loaded_model_is_an_instance_of_its_architecture_only(store, case):
    model = store.model(case)
    family = CASES[case][0]
    mine = {"llama": ha.LlamaForCausalLM, "gpt2": ha.GPT2LMHeadModel}[family]
    other = ha.GPT2LMHeadModel if mine is ha.LlamaForCausalLM else ha.LlamaForCausalLM
    assert type(model) is mine, f"{case}: expected a {mine.__name__}, got {type(model).__name__}"
    assert not isinstance(model, other), f"{case}: a {mine.__name__} must not be an instance of {other.__name__}"


# ------------------------------------------------------------------------------------------- the reference


@pytest.mark.parametrize("case", list(CASES))
def test_logits_match_float64_reference(store, case):
    _, config, tensors = store.checkpoint(case)
    model = store.model(case)
    assert type(model).__name__ == config["architectures"][0], (
        f"{case}: expected a {config['architectures'][0]}, got {type(model).__name__}"
    )
    ref = R.reference_logits(config, tensors, TOKENS)
    assert_matches_reference(model(TOKENS[None]).logits[0], ref, case)


# Each feature, changed in the reference alone, moves the logits far beyond the tolerance: the cases above could
# not pass with the feature missing or wrong.
def _without(config, **changes):
    return {**config, **changes}


FEATURES = {
    "gemma2 attn softcap": ("gemma2_f32_gqa", lambda c: _without(c, attn_logit_softcapping=None)),
    "gemma2 final softcap": ("gemma2_f32_gqa", lambda c: _without(c, final_logit_softcapping=None)),
    "gemma3 final softcap": ("gemma3_f16_final_softcap_untied", lambda c: _without(c, final_logit_softcapping=None)),
    "gemma2 query_pre_attn_scalar": ("gemma2_f32_gqa", lambda c: _without(c, query_pre_attn_scalar=c["head_dim"])),
    "gemma2 even layers slide": ("gemma2_f32_gqa", lambda c: _without(c, sliding_window=None)),
    "gemma3 local rope base": (
        "gemma3_f32_pattern2_linear",
        lambda c: _without(c, rope_local_base_freq=c["rope_theta"]),
    ),
    "gemma3 global rope scaling": ("gemma3_f32_pattern2_linear", lambda c: _without(c, rope_scaling=None)),
    "gemma3 layer_types": ("gemma3_bf16_layer_types_mqa", lambda c: _without(c, layer_types=None)),
    "phi3 longrope long factors": (
        "phi3_longrope_f32",
        lambda c: _without(c, rope_scaling={**c["rope_scaling"], "long_factor": c["rope_scaling"]["short_factor"]}),
    ),
    "phi3 longrope attention factor": (
        "phi3_longrope_f32",
        lambda c: _without(c, rope_scaling={**c["rope_scaling"], "attention_factor": 1.0}),
    ),
    "phi3 partial rotary": ("phi4mini_bf16_gqa_partial_tied", lambda c: _without(c, partial_rotary_factor=1.0)),
    "phi3 window": ("phi3_window5_f32", lambda c: _without(c, sliding_window=None)),
    "qwen2 max_window_layers": ("qwen2_sliding_f32", lambda c: _without(c, max_window_layers=0)),
    "qwen3 window": ("qwen3_sliding_f16", lambda c: _without(c, use_sliding_window=False)),
    "smollm3 NoPE layer": ("smollm3_f32_nope", lambda c: _without(c, no_rope_layer_interval=100)),
    "smollm3 NoPE layers slide": ("smollm3_sliding_nope_layers_f32", lambda c: _without(c, use_sliding_window=False)),
    "gpt2 inverse layer idx": (
        "gpt2_bf16_no_prefix_inverse_layer_idx",
        lambda c: _without(c, scale_attn_by_inverse_layer_idx=False),
    ),
    "gpt2 scale_attn_weights": ("gpt2_f16_gelu_erf_unscaled_upcast", lambda c: _without(c, scale_attn_weights=True)),
    "gpt2 gelu erf vs tanh": (
        "gpt2_f16_gelu_erf_unscaled_upcast",
        lambda c: _without(c, activation_function="gelu_new"),
    ),
    "mistral window": ("mistral_window4_f32", lambda c: _without(c, sliding_window=None)),
}


@pytest.mark.parametrize("feature", list(FEATURES))
def test_each_feature_changes_the_reference(store, feature):
    case, change = FEATURES[feature]
    _, config, tensors = store.checkpoint(case)
    base = R.reference_logits(config, tensors, TOKENS)
    changed = R.reference_logits(change(config), tensors, TOKENS)
    rel = relative_error(changed, base)
    # GELU's erf and tanh forms differ by < 1e-3 anywhere: 3x the tolerance is what it can give.
    need = (3 if "gelu" in feature else 30) * REL_TOL
    assert rel > need, f"{feature}: changing it moves the reference logits by only {rel:.3g} (relative)"


def test_gemma_embedding_normalizer_is_rounded_to_the_dtype_the_model_is_held_in(store):
    """sqrt(48) is 6.9375 in bfloat16, 6.9296875 in float16 and 6.928203 in float32: a bf16 file loaded as float32
    matches the reference with the float32 normalizer (which differs from the bf16 one beyond the tolerance)."""
    path, config, tensors = store.checkpoint("gemma2_bf16_mqa_hd16")
    as_bf16 = R.reference_logits(config, tensors, TOKENS, dtype="bfloat16")
    as_f32 = R.reference_logits(config, tensors, TOKENS, dtype="float32")
    assert relative_error(as_f32, as_bf16) > 10 * REL_TOL, "the normalizer's rounding should matter in this test"
    assert_matches_reference(
        store.model("gemma2_bf16_mqa_hd16", dtype="float32")(TOKENS[None]).logits[0],
        as_f32,
        "gemma2 bf16 file loaded as float32",
    )
    # An f16 file loaded as bfloat16: weights and vectors rounded to bf16, and the normalizer too.
    path, config, tensors = store.checkpoint("gemma2_f16_untied")
    as_loaded = R.reference_logits(config, round_to_bfloat16(tensors), TOKENS, dtype="bfloat16")
    assert_matches_reference(
        store.model("gemma2_f16_untied", dtype="bfloat16")(TOKENS[None]).logits[0],
        as_loaded,
        "gemma2 f16 file loaded as bfloat16",
    )


def longrope_switch(store, case):
    """longrope's original_max_position_embeddings where TOKENS pass it (a forward's factors then depend on its own
    length), else None."""
    rope = R.ropes_of(store.checkpoint(case)[1]).get("global")
    return rope.original if rope is not None and rope.inv_freq_long is not None and rope.original < SEQ else None


# --------------------------------------------------------------------------------------------- generation


def safe_prompt(config, tensors, length, steps):
    """(prompt, reference greedy chain) with every argmax margin > MIN_MARGIN * max |logit|."""
    for seed in range(100, 160):
        prompt = tokens(seed, length)
        chain, margins, scales = R.greedy_chain(config, tensors, prompt, steps)
        if np.all(margins > MIN_MARGIN * scales):
            return prompt, chain
    raise AssertionError(f"test setup: no prompt with a greedy chain of {steps} safe argmaxes")


@pytest.mark.parametrize("case", list(CASES))
def test_greedy_generation_is_the_reference_argmax_chain(store, case):
    _, config, tensors = store.checkpoint(case)
    prompt, chain = safe_prompt(config, tensors, 10, 10)  # 20 positions: past every window and longrope's 16
    out = generate(store.model(case), prompt[None], max_new_tokens=10)
    assert_tokens(out, np.concatenate([prompt, chain])[None], f"{case}: greedy generation vs the reference's chain")


@pytest.mark.parametrize("case", list(CASES))
def test_incremental_decoding_is_bitwise_the_full_forward(store, case):
    """Chunks and crops give the full forward's bits. longrope past its switch S (16): a forward's factors follow its
    own length (Transformers' rule), so below S the chunks are checked against a forward of the first S tokens, and
    past it where every chunk ends past S (the first chunk already does: every key long, as in the full forward)."""
    model = store.model(case)
    full = model(TOKENS[None]).logits[0]
    S = longrope_switch(store, case)
    plans = (
        [(SEQ, [5] + [1] * (SEQ - 5)), (SEQ, [3, 1, 4, 2, 7, 1, 6])]
        if S is None
        else [
            (S, [5] + [1] * (S - 5)),
            (S, [3, 1, 4, 2, S - 10]),
            (SEQ, [S + 1] + [1] * (SEQ - S - 1)),
            (SEQ, [S + 2, 3, 1, SEQ - S - 6]),
        ]
    )
    for n, sizes in plans:
        expected = full if n == SEQ else model(TOKENS[None, :n]).logits[0]
        cache = model.create_cache(batch_size=1, max_cache_len=32)
        parts, start = [], 0
        for size in sizes:
            parts.append(model(TOKENS[None, start : start + size], past_key_values=cache).logits[0])
            start += size
        assert cache.get_seq_length() == n, f"{case}: expected cache length {n}, got {cache.get_seq_length()}"
        assert_bitwise(np.concatenate(parts), expected, f"{case}: chunks {sizes} vs one forward of {n}")
    # Crop back across the windows' edges (assisted generation's rollback) and re-extend: the same bits (longrope:
    # each re-extension ends past S, over keys the 20-token forward rotated with the long factors).
    cache = model.create_cache(batch_size=1, max_cache_len=32)
    model(TOKENS[None, :20], past_key_values=cache)
    for keep, more in ((13, 7), (9, 2), (4, 9), (12, 12)) if S is None else ((13, 7), (9, 8), (4, 13), (12, 12)):
        cache.crop(keep)
        assert cache.get_seq_length() == keep, (
            f"{case}: expected length {keep} after crop({keep}), got {cache.get_seq_length()}"
        )
        again = model(TOKENS[None, keep : keep + more], past_key_values=cache).logits[0]
        assert_bitwise(again, full[keep : keep + more], f"{case}: crop({keep}) then tokens {keep}..{keep + more - 1}")


@pytest.mark.parametrize("case", list(CASES))
def test_left_padded_batch_rows_are_each_prompt_alone(store, case):
    """A row's positions (learned positions, rotary, longrope's switch, windows) count from its first real token:
    a left-padded batch gives each row bitwise its prompt's logits and generation alone."""
    model = store.model(case)
    a, b = tokens(5, 20), tokens(6, 9)
    ids, mask = np.zeros((2, 20), dtype=np.int64), np.zeros((2, 20), dtype=np.int64)
    ids[0], mask[0] = a, 1
    ids[1, 11:], mask[1, 11:] = b, 1
    out = model(ids, attention_mask=mask).logits
    assert_bitwise(out[0], model(a[None]).logits[0], f"{case}: batch row 0 vs the prompt alone")
    assert_bitwise(out[1, 11:], model(b[None]).logits[0], f"{case}: left-padded batch row 1 vs the prompt alone")
    both = model.generate(ids, attention_mask=mask, max_new_tokens=12)
    assert_tokens(both[0], generate(model, a[None], max_new_tokens=12)[0], f"{case}: batch row 0 generation")
    assert_tokens(both[1, 11:], generate(model, b[None], max_new_tokens=12)[0], f"{case}: batch row 1 generation")


@pytest.mark.parametrize("case", list(CASES))
def test_row_major_weights_match_the_reference_and_decode_bitwise(store, case):
    """repack=False (float weights row-major, as stored) sums in 8-lane blocks where the panels (repack=True) sum
    in index order (from_pretrained's documentation): the two agree to float32 rounding, not bit for bit; each
    is exact against itself."""
    _, config, tensors = store.checkpoint(case)
    model = store.model(case, repack=False)
    full = model(TOKENS[None]).logits[0]
    assert_matches_reference(full, R.reference_logits(config, tensors, TOKENS), f"{case}, repack=False")
    panels = store.model(case)(TOKENS[None]).logits[0]
    assert relative_error(full, panels.astype(np.float64)) < 1e-5, f"{case}: repack=False vs True beyond rounding"
    cache = model.create_cache(batch_size=1, max_cache_len=32)
    first = 7 if longrope_switch(store, case) is None else longrope_switch(store, case) + 1  # longrope: past it
    parts = [model(TOKENS[None, :first], past_key_values=cache).logits[0]]
    parts += [model(TOKENS[None, t : t + 1], past_key_values=cache).logits[0] for t in range(first, SEQ)]
    assert_bitwise(np.concatenate(parts), full, f"{case}, repack=False: decoded one token at a time vs full")


# ------------------------------------------------------------------------------------ assisted generation

# family -> target arguments for the assisted tests: a sliding window of 4-6 where the family has one.
ASSISTED_TARGETS = {  # seeds whose plain greedy output does not fall into a short loop (>= 12 distinct of 44)
    "llama": dict(num_layers=3, seed=21),
    "mistral": dict(num_layers=3, sliding_window=4, seed=22),
    "qwen2": dict(num_layers=3, sliding_window=5, max_window_layers=1, seed=22),
    "qwen3": dict(num_layers=3, num_kv_heads=1, sliding_window=4, max_window_layers=0, seed=25),
    "phi3": dict(
        num_layers=3,
        sliding_window=6,
        max_position_embeddings=64,
        original_max_position_embeddings=16,
        rope_scaling=longrope_scaling(8, seed=3),
        seed=21,
    ),
    "gemma2": dict(num_layers=3, sliding_window=4, seed=25),
    "gemma3_text": dict(num_layers=3, sliding_window=5, sliding_window_pattern=2, seed=27),
    "smollm3": dict(num_layers=4, sliding_window=4, dtype="BF16", seed=22),
    "gpt2": dict(num_layers=3, seed=26),
}


def _assisted_models(store, family, **changes):
    target_args = dict(ASSISTED_TARGETS[family], **changes)
    seed = target_args.pop("seed", 21)
    tag = "-".join(f"{k}{v}" for k, v in sorted(changes.items()))
    store.checkpoint(f"{family}-target{tag}", family, seed=seed, **target_args)
    # the target's weights plus noise: agrees with the target often, not always (measured 15-65% accepted)
    store.checkpoint(f"{family}-perturbed{tag}", family, seed=seed, perturb=(7, 0.1), **target_args)
    small = {k: v for k, v in target_args.items() if k not in ("num_layers", "max_window_layers")}
    store.checkpoint(f"{family}-small{tag}", family, seed=seed + 1, num_layers=1, **small)
    return (
        store.model(f"{family}-target{tag}"),
        {
            "perturbed": store.model(f"{family}-perturbed{tag}"),
            "small": store.model(f"{family}-small{tag}"),
            "itself": store.model(f"{family}-target{tag}"),
        },
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_assisted_greedy_within_the_family_is_bitwise_plain_greedy(store, family, one_core_thread):
    target, drafts = _assisted_models(store, family)
    proposed = accepted = 0
    for seed in (11, 12):
        prompt = tokens(seed, 6)[None]
        plain = generate(target, prompt, max_new_tokens=44)
        distinct = len(set(plain[0, 6:].tolist()))
        assert distinct >= 8, f"test setup: {family}'s plain output loops over {distinct} tokens: {plain.tolist()}"
        for name, draft in drafts.items():
            for k, schedule in ((5, "constant"), (8, "constant"), (6, "heuristic")):
                res = generate(
                    target,
                    prompt,
                    max_new_tokens=44,
                    assistant_model=draft,
                    num_assistant_tokens=k,
                    num_assistant_tokens_schedule=schedule,
                    return_dict_in_generate=True,
                )
                assert_tokens(res.sequences, plain, f"{family}, {name} draft, K={k} {schedule}: assisted vs plain")
                if name == "perturbed":
                    proposed += res.num_draft_tokens
                    accepted += res.num_accepted_tokens
    assert 0 < accepted < proposed, (
        f"{family}: the perturbed draft should be accepted sometimes and rejected "
        f"sometimes (rollbacks), got {accepted} of {proposed}"
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_coupled_sampling_early_exit_and_prompt_lookup_are_plain_generation(store, family, one_core_thread):
    """The other exact paths on every family: coupled assisted sampling is plain sampling for the same seed; an
    early-exit draft (the target's first layers, its final norm, softcap and head) and prompt lookup are plain
    greedy."""
    target, drafts = _assisted_models(store, family)
    prompt = tokens(13, 6)[None]
    for seed in (0, 3):
        plain = generate(target, prompt, max_new_tokens=44, do_sample=True, seed=seed, temperature=0.8, top_k=0)
        for name in ("perturbed", "small"):
            res = generate(
                target,
                prompt,
                max_new_tokens=44,
                do_sample=True,
                seed=seed,
                temperature=0.8,
                top_k=0,
                assistant_model=drafts[name],
                assisted_sampling="coupled",
                num_assistant_tokens=6,
            )
            assert_tokens(res, plain, f"{family}, {name} draft, coupled sampling, seed {seed}")
    plain = generate(target, prompt, max_new_tokens=44)
    for layers in (1, 2):
        assert_tokens(
            generate(target, prompt, max_new_tokens=44, assistant_early_exit=layers),
            plain,
            f"{family}, early exit after {layers} layers",
        )
    assert_tokens(
        generate(target, prompt, max_new_tokens=44, prompt_lookup_num_tokens=5), plain, f"{family}, prompt lookup"
    )


SLIDING = ("mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text", "smollm3")
LONG = 300  # past a window of 4 plus the rings' 256 positions of rollback room (csrc: rings of window + 256)


@pytest.mark.parametrize("family", SLIDING)
def test_long_sequences_wrap_the_sliding_window_rings(store, family, one_core_thread):
    """Sequences longer than a sliding layer's ring: logits against the reference, decoding token by token and
    crops back across the wrap bitwise the full forward, assisted generation bitwise plain."""
    layers = 4 if family == "smollm3" else 2  # SmolLM3 slides only on its NoPE layers: layer 3
    target, drafts = _assisted_models(store, family, num_layers=layers, max_position_embeddings=512)
    _, config, tensors = store.checkpoint(f"{family}-targetmax_position_embeddings512-num_layers{layers}")
    assert any(p["window"] for p in R.layer_plan(config)), "test setup: the target should have sliding layers"
    ids = tokens(77, LONG)
    full = target(ids[None]).logits[0]
    assert_matches_reference(full, R.reference_logits(config, tensors, ids), f"{family}: {LONG} tokens")
    cache = target.create_cache(batch_size=1, max_cache_len=LONG)
    # (Phi-3's longrope switches at 16: from a first forward past it, every key is long, as in the full forward)
    parts = [target(ids[None, :20], past_key_values=cache).logits[0]]
    parts += [target(ids[None, t : t + 1], past_key_values=cache).logits[0] for t in range(20, LONG - 20)]
    assert_bitwise(np.concatenate(parts), full[: LONG - 20], f"{family}: one token at a time to {LONG - 20}")
    # Back across the ring's wrap and forward again. Rings hold window + 256 positions: after 282 tokens
    # positions 22..281 are held, so crop(100) keeps what position 100 needs; the 12 tokens written again
    # leave 22..111, so crop(30) is possible, crop(20) (needing positions from 17 on) is refused.
    for keep in (LONG - 30, 100, 30):
        cache.crop(keep)
        again = target(ids[None, keep : keep + 12], past_key_values=cache).logits[0]
        assert_bitwise(again, full[keep : keep + 12], f"{family}: crop({keep}) then 12 tokens")
    with pytest.raises(UnsupportedModelError, match="crop"):
        cache.crop(20)
    assert cache.get_seq_length() == 42, f"{family}: a refused crop must leave the cache as it was"
    prompt = tokens(78, 6)[None]
    plain = generate(target, prompt, max_new_tokens=LONG)
    for name in ("perturbed", "small"):
        res = generate(target, prompt, max_new_tokens=LONG, assistant_model=drafts[name], num_assistant_tokens=7)
        assert_tokens(res, plain, f"{family}, {name} draft, {LONG} new tokens")


def _write_char_tokenizer(directory, alphabet, n_merges, seed, permutation=None):
    """A tokenizer.json: BPE over single characters (ids in a seeded order) plus n_merges merges of random pairs;
    no normalizer or pre-tokenizer, a Fuse decoder (tokens joined as they are). Two of these with different seeds
    split the same text differently; with a permutation, token id i becomes permutation[i] (the same text, the
    same tokens, other ids)."""
    rng = np.random.default_rng(seed)
    chars = [alphabet[i] for i in rng.permutation(len(alphabet))]
    pairs = set()
    while len(pairs) < n_merges:
        a, b = rng.choice(len(alphabet), 2)
        pairs.add(alphabet[a] + alphabet[b])
    merges = sorted(pairs)
    vocab = {c: i for i, c in enumerate(chars)}
    for m in merges:
        vocab.setdefault(m, len(vocab))
    if permutation is not None:
        vocab = {token: int(permutation[i]) for token, i in vocab.items()}
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {"type": "Fuse"},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [[m[0], m[1]] for m in merges],
        },
    }
    with open(os.path.join(directory, "tokenizer.json"), "w") as f:
        json.dump(spec, f)
    return len(vocab)


ALPHABET = "abcdefghijklmnopqrstuvwxyz .,;!?"  # 32 characters
CROSS_PAIRS = [("gemma2", "qwen3"), ("phi3", "gpt2"), ("smollm3", "mistral"), ("qwen2", "gemma3_text")]


@pytest.mark.parametrize("target_family,draft_family", CROSS_PAIRS)
def test_assisted_greedy_across_families_and_tokenizers_is_plain_greedy(
    store, target_family, draft_family, one_core_thread
):
    """A draft of another family with its own tokenizer (another segmentation of the same alphabet): random
    models of different families rarely agree, so nearly every round is rejected and rolled back."""
    built = {}
    for role, family, merges, seed in (("target", target_family, 32, 1), ("draft", draft_family, 16, 2)):
        name = f"cross-{role}-{family}"
        args = dict(ASSISTED_TARGETS[family], num_layers=2)
        args.pop("max_window_layers", None)
        args.pop("seed", None)
        path = os.path.join(store.root, name)
        os.makedirs(path, exist_ok=True)
        vocab = _write_char_tokenizer(path, ALPHABET, merges, seed)
        write_family_checkpoint(path, family, seed=seed + 40, vocab_size=vocab, **args)
        built[role] = (ha.AutoModelForCausalLM.from_pretrained(path), ha.AutoTokenizer.from_pretrained(path))
    (target, tok), (draft, draft_tok) = built["target"], built["draft"]
    assert target.vocab_size != draft.vocab_size, "the pair must have different vocabularies"
    for text in ("the cat sat on the mat.", "a, b; c!"):
        ids = np.array([tok.encode(text)], dtype=np.int64)
        plain = generate(target, ids, max_new_tokens=30)
        for k in (3, 6):
            res = generate(
                target,
                ids,
                max_new_tokens=30,
                assistant_model=draft,
                tokenizer=tok,
                assistant_tokenizer=draft_tok,
                num_assistant_tokens=k,
            )
            assert_tokens(res, plain, f"{target_family} target, {draft_family} draft, K={k}, {text!r}")


@pytest.mark.parametrize("family", FAMILIES)
def test_assisted_greedy_through_a_permuted_tokenizer_is_plain_greedy(store, family, one_core_thread):
    """The different-tokenizer path with acceptance: the draft is the target perturbed, its vocabulary permuted
    (embedding and head rows moved with the ids of its tokenizer.json), so its proposals reach the target
    through text and are often right; across sliding windows, longrope's 16 and rollbacks, plain greedy."""
    args = {k: v for k, v in ASSISTED_TARGETS[family].items() if k != "seed"}
    models = {}
    for role, extra in (("target", {}), ("draft", {"perturb": (9, 0.1)})):
        path = os.path.join(store.root, f"permuted-{role}-{family}")
        os.makedirs(path, exist_ok=True)
        perm = np.random.default_rng(4).permutation(len(ALPHABET) + 32) if role == "draft" else None
        vocab = _write_char_tokenizer(path, ALPHABET, 32, seed=1, permutation=perm)
        write_family_checkpoint(
            path,
            family,
            seed=ASSISTED_TARGETS[family].get("seed", 21),
            vocab_size=vocab,
            permute_vocab=perm,
            **args,
            **extra,
        )
        models[role] = (ha.AutoModelForCausalLM.from_pretrained(path), ha.AutoTokenizer.from_pretrained(path))
    (target, tok), (draft, draft_tok) = models["target"], models["draft"]
    assert tok.get_vocab() != draft_tok.get_vocab(), "test setup: the vocabularies must differ (the universal path)"
    accepted = proposed = 0
    for text in ("the cat sat on the mat.", "a, b; c!"):
        ids = np.array([tok.encode(text)], dtype=np.int64)
        plain = generate(target, ids, max_new_tokens=40)
        for k in (5, 8):
            res = generate(
                target,
                ids,
                max_new_tokens=40,
                assistant_model=draft,
                tokenizer=tok,
                assistant_tokenizer=draft_tok,
                num_assistant_tokens=k,
                return_dict_in_generate=True,
            )
            assert_tokens(res.sequences, plain, f"{family}, permuted draft, K={k}, {text!r}")
            accepted += res.num_accepted_tokens
            proposed += res.num_draft_tokens
    assert 0 < accepted < proposed, (
        f"{family}: expected some proposals accepted and some not, got {accepted} of {proposed}"
    )


# -------------------------------------------------------------------------------------------- quantized

# (weights per group, top): csrc/ha.h HA_Q8 / HA_Q4; w8a8 holds int8's values in panels (HA_Q8P)
QUANT = {"int8": (64, 127), "w8a8": (64, 127), "int4": (32, 7)}
# int8, int4: measured <= 2.3e-4, the int16 rounding of activations (one scale per token)
QUANT_REL_TOL = {
    "int8": 1e-3,
    "int4": 1e-3,
    # measured <= 0.092 on these random tiny models (their activations have no structure for 7-bit
    # steps to follow); the kernels' arithmetic itself is checked against double in tests/c
    "w8a8": 0.15,
}


def quantized_tensors(config, tensors, dtype):
    """The float64 values an int8 / int4 model holds, from the format ha.h documents: every matrix in the core's
    (out, in) orientation (GPT-2's Conv1D transposed), per group of 64 (int8) or 32 (int4) weights along a row:
    scale = max|w| / top (float32), q = round(w * (top / max|w|)) with halves away from zero. Tables read a row
    per token (an untied embedding, GPT-2's wpe) stay as stored (loading.load_checkpoint)."""
    group, top = QUANT[dtype]
    family, tied = R.family_of(config), R.tied_of(config)
    out = {}
    for name, value in tensors.items():
        row_read = name.endswith("wpe.weight") or (name == "model.embed_tokens.weight" and not tied)
        if value.ndim != 2 or row_read:
            out[name] = value
            continue
        conv = family == "gpt2" and not name.endswith("wte.weight")
        w = np.asarray(value.T if conv else value, dtype=np.float32)
        rows, cols = w.shape
        blocks = np.pad(w, ((0, 0), (0, (-cols) % group))).reshape(rows, -1, group)
        amax = np.abs(blocks).max(axis=-1, keepdims=True)
        scale = amax / np.float32(top)
        factor = np.float32(top) / np.where(amax > 0, amax, np.float32(1))
        y = blocks * factor
        q = np.sign(y) * np.floor(np.abs(y) + np.float32(0.5))
        deq = (q.astype(np.float64) * scale.astype(np.float64)).reshape(rows, -1)[:, :cols]
        out[name] = deq.T if conv else deq
    return out


@pytest.mark.parametrize("dtype", ["int8", "w8a8", "int4"])
@pytest.mark.parametrize("case", list(CASES))
def test_quantized_logits_match_the_reference_on_quantized_weights(store, case, dtype):
    """Every matrix of every family is quantized along its input dimension (fused qkv and gate_up, Conv1D, tied
    and untied heads): the logits are the reference's on the quantized weights, to activation rounding; and
    stay close to the float model's (int8 within 0.1 relative, measured <= 0.067; int4 correlated > 0.7,
    measured >= 0.85: random tiny models amplify 4-bit noise)."""
    _, config, tensors = store.checkpoint(case)
    got = store.model(case, dtype=dtype)(TOKENS[None]).logits[0]
    assert_matches_reference(
        got,
        R.reference_logits(config, quantized_tensors(config, tensors, dtype), TOKENS),
        f"{case} as {dtype}",
        tol=QUANT_REL_TOL[dtype],
    )
    ref = R.reference_logits(config, tensors, TOKENS)
    if dtype in ("int8", "w8a8"):
        rel, bound = relative_error(got, ref), 0.1 if dtype == "int8" else 0.15
        assert rel < bound, f"{case} as {dtype}: relative error {rel:.3g} from the float reference (expected < {bound})"
    else:
        corr = float(np.corrcoef(got.astype(np.float64).ravel(), ref.ravel())[0, 1])
        assert corr > 0.7, f"{case} as int4: logits correlate {corr:.3f} with the float reference (expected > 0.7)"


@pytest.mark.parametrize("dtype", ["int8", "w8a8", "int4", "bfloat16-pairs"])
@pytest.mark.parametrize("family", FAMILIES)
def test_quantized_models_generate_and_assist_exactly(store, family, dtype, one_core_thread):
    """An int8 / int4 model of every family generates, bitwise the same with its float model as the draft, and
    decodes token by token bitwise as its full forward."""
    case = FIRST_CASE[family]
    model = store.model(case, dtype=dtype)
    prompt = tokens(5, 6)[None]
    plain = generate(model, prompt, max_new_tokens=20)
    assert plain.shape == (1, 26) and np.array_equal(plain[:, :6], prompt), f"{case} as {dtype}: {plain}"
    assisted = generate(model, prompt, max_new_tokens=20, assistant_model=store.model(case), num_assistant_tokens=5)
    assert_tokens(assisted, plain, f"{case} as {dtype} with its float model as the draft")
    full = model(TOKENS[None]).logits[0]
    cache = model.create_cache(batch_size=1, max_cache_len=32)
    parts = [model(TOKENS[None, :4], past_key_values=cache).logits[0]]
    parts += [model(TOKENS[None, t : t + 1], past_key_values=cache).logits[0] for t in range(4, SEQ)]
    assert_bitwise(np.concatenate(parts), full, f"{case} as {dtype}: decoded one token at a time vs full")


@pytest.mark.parametrize("case", list(CASES))
def test_bfloat16_pairs_logits_are_near_the_reference(store, case):
    """bfloat16-pairs rounds weights and each matmul's input to bfloat16 (8 bits of mantissa; products exact, sums
    in float32 in vdpbf16ps's order): every family's logits stay within 5% of the largest float64 reference logit
    on these random tiny models (measured <= 0.025)."""
    _, config, tensors = store.checkpoint(case)
    got = store.model(case, dtype="bfloat16-pairs")(TOKENS[None]).logits[0]
    assert_matches_reference(got, R.reference_logits(config, tensors, TOKENS), f"{case} as bfloat16-pairs", tol=0.05)


@pytest.mark.parametrize("case", ["gpt2_f32", "qwen3_bf16_mqa_tied_bias", "gemma2_f16_untied"])
def test_num_parameters_counts_each_tensor_once_and_leaves_out_the_embeddings(store, case):
    """As Transformers: every tensor once (a tied head not again); exclude_embeddings drops the nn.Embedding
    modules, the token embedding and GPT-2's learned positions."""
    _, config, tensors = store.checkpoint(case)
    model = store.model(case)
    total = sum(v.size for v in tensors.values())
    embeddings = sum(
        v.size for name, v in tensors.items() if name.endswith(("wte.weight", "wpe.weight", "embed_tokens.weight"))
    )
    assert model.num_parameters() == total
    assert model.num_parameters(exclude_embeddings=True) == total - embeddings


def test_assisted_greedy_across_tokenizers_with_ring_caches_is_plain_greedy(store, one_core_thread):
    """The different-tokenizer path over sliding-window rings (caches longer than window + 256): its candidates are
    capped by the rings' max_rollback and every crop stays exact, through 300 new tokens past two wraps."""
    built = {}
    for role, merges, seed in (("target", 32, 5), ("draft", 16, 6)):
        path = os.path.join(store.root, f"ring-cross-{role}")
        os.makedirs(path, exist_ok=True)
        vocab = _write_char_tokenizer(path, ALPHABET, merges, seed)
        write_family_checkpoint(
            path,
            "mistral" if role == "target" else "gemma2",
            seed=seed + 40,
            vocab_size=vocab,
            num_layers=2,
            sliding_window=4,
            max_position_embeddings=1024,
        )
        built[role] = (ha.AutoModelForCausalLM.from_pretrained(path), ha.AutoTokenizer.from_pretrained(path))
    (target, tok), (draft, draft_tok) = built["target"], built["draft"]
    ids = np.array([tok.encode("the cat sat on the mat. " * 12)], dtype=np.int64)
    plain = generate(target, ids, max_new_tokens=300)
    res = generate(
        target,
        ids,
        max_new_tokens=300,
        assistant_model=draft,
        tokenizer=tok,
        assistant_tokenizer=draft_tok,
        num_assistant_tokens=6,
    )
    assert_tokens(res, plain, "mistral target, gemma2 draft, rings")
