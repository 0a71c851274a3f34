"""The package's logits agree with an independent float64 reference (tests/fixtures/reference.py) on random checkpoints.

Tolerance: max |logit - reference| <= 1e-4 * max(1, max |reference logit|).  The checkpoint's weights are
given to the reference exactly as stored (after bf16/f16 rounding), and the package computes activations in
float32, so the only error left is float32 rounding of the activations (~1e-6 relative here); 1e-4 leaves
room for different summation orders while a wrong formula (rope convention, a missing bias, a wrong kv head,
an off-by-one window) moves logits by whole units.
"""

import numpy as np
import pytest
from checkpoints import round_to_bfloat16, write_random_checkpoint
from reference import reference_logits

import habana_assist as ha

REL_TOL = 1e-4

LLAMA3_SCALING = {
    "rope_type": "llama3",
    "factor": 4.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 8.0,
    "original_max_position_embeddings": 64,
}
LINEAR_SCALING = {"rope_type": "linear", "factor": 2.0}

TOKENS = np.random.default_rng(1234).integers(0, 64, size=13).astype(np.int64)

# name -> write_random_checkpoint arguments; each differs from the plain F32 Llama in one feature.
CASES = {
    "f32": dict(),
    "bf16": dict(dtype="BF16"),
    "f16": dict(dtype="F16"),
    "gqa_4q_2kv": dict(num_heads=4, num_kv_heads=2),
    "mha_4q_4kv": dict(num_heads=4, num_kv_heads=4),
    "mqa_4q_1kv": dict(num_heads=4, num_kv_heads=1),
    "tied_embeddings": dict(tie_word_embeddings=True),
    "tied_embeddings_bf16": dict(tie_word_embeddings=True, dtype="BF16"),
    "rope_llama3": dict(rope_scaling=LLAMA3_SCALING, rope_theta=500.0, max_position_embeddings=1024),
    "rope_linear": dict(rope_scaling=LINEAR_SCALING),
    "rope_theta_500000": dict(rope_theta=500000.0),
    "qwen2_qkv_bias": dict(arch="Qwen2ForCausalLM"),
    "llama_attention_and_mlp_bias": dict(attention_bias=True, mlp_bias=True),
    "explicit_head_dim_16": dict(hidden_size=32, num_heads=4, num_kv_heads=2, head_dim=16),
    "mistral_sliding_window_5": dict(arch="MistralForCausalLM", sliding_window=5),
    "mistral_no_window": dict(arch="MistralForCausalLM"),
    "odd_sizes_simd_tails": dict(vocab_size=67, hidden_size=40, num_heads=4, num_kv_heads=2, intermediate_size=52),
    "odd_sizes_f16": dict(
        vocab_size=67, hidden_size=40, num_heads=4, num_kv_heads=2, intermediate_size=52, dtype="F16"
    ),
    "three_shards": dict(shards=3),
    "three_shards_bf16_tied": dict(shards=3, dtype="BF16", tie_word_embeddings=True),
}


def assert_matches_reference(got, ref, what):
    got = np.asarray(got)
    assert got.shape == ref.shape, f"{what}: expected logits of shape {ref.shape}, got {got.shape}"
    assert got.dtype == np.float32, f"{what}: expected float32 logits, got {got.dtype}"
    tol = REL_TOL * max(1.0, float(np.abs(ref).max()))
    err = np.abs(got.astype(np.float64) - ref)
    worst = np.unravel_index(int(np.argmax(err)), err.shape)
    assert err.max() <= tol, (
        f"{what}: max |logit - reference| = {err.max():.3g} at {worst} "
        f"(got {got[worst]:.6g}, reference {ref[worst]:.6g}); expected <= {tol:.3g}"
    )


@pytest.mark.parametrize("repack", (True, False), ids=("panels", "row-major"))
@pytest.mark.parametrize("case", sorted(CASES))
def test_logits_match_float64_reference(tmp_path, case, repack):
    config, tensors = write_random_checkpoint(tmp_path, **CASES[case])
    model = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path), repack=repack)
    ref = reference_logits(config, tensors, TOKENS)
    out = model(TOKENS[None, :]).logits
    assert_matches_reference(out, ref[None], case)


def test_features_under_test_change_the_reference(tmp_path):
    """The cases above are only meaningful if each feature moves the logits far beyond the tolerance."""
    base_cfg, base_t = write_random_checkpoint(tmp_path / "base")
    base = reference_logits(base_cfg, base_t, TOKENS)
    tol = REL_TOL * max(1.0, float(np.abs(base).max()))
    for name, change in [
        ("rope_scaling llama3", dict(rope_scaling=LLAMA3_SCALING, rope_theta=500.0)),
        ("rope_scaling linear", dict(rope_scaling=LINEAR_SCALING)),
        ("rope_theta", dict(rope_theta=500000.0)),
    ]:
        changed = reference_logits(dict(base_cfg, **change), base_t, TOKENS)
        if name == "rope_scaling llama3":  # against the same theta without scaling
            changed_base = reference_logits(dict(base_cfg, rope_theta=500.0), base_t, TOKENS)
            diff = np.abs(changed - changed_base).max()
        else:
            diff = np.abs(changed - base).max()
        assert diff > 100 * tol, f"{name} changes the reference logits by only {diff:.3g} (tolerance {tol:.3g})"
    cfg, t = write_random_checkpoint(tmp_path / "mistral", arch="MistralForCausalLM", sliding_window=5)
    windowed = reference_logits(cfg, t, TOKENS)
    full = reference_logits(dict(cfg, sliding_window=None), t, TOKENS)
    assert np.array_equal(windowed[:5], full[:5]), "a window of 5 must not change the first 5 positions"
    row_change = np.abs(windowed[5:] - full[5:]).max(axis=-1)
    assert row_change.min() > 100 * tol, (
        f"the sliding window should change every position past the window; changes per row: {row_change}"
    )


def test_batch_of_two_sequences_matches_reference_row_by_row(tmp_path):
    config, tensors = write_random_checkpoint(tmp_path, num_kv_heads=1)
    model = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path))
    other = np.random.default_rng(99).integers(0, 64, size=TOKENS.size).astype(np.int64)
    out = model(np.stack([TOKENS, other])).logits
    ref = np.stack([reference_logits(config, tensors, TOKENS), reference_logits(config, tensors, other)])
    assert_matches_reference(out, ref, "batch of 2")


def test_one_dimensional_input_ids_give_batch_of_one(tmp_path):
    config, tensors = write_random_checkpoint(tmp_path)
    model = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path))
    out = model(TOKENS).logits
    assert_matches_reference(out, reference_logits(config, tensors, TOKENS)[None], "1-D input_ids")


def test_bf16_file_loaded_as_float32_matches_reference(tmp_path):
    config, tensors = write_random_checkpoint(tmp_path, dtype="BF16")
    model = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype="float32")
    assert_matches_reference(
        model(TOKENS[None]).logits,
        reference_logits(config, tensors, TOKENS)[None],
        "BF16 file loaded with dtype='float32'",
    )


def test_f32_file_loaded_as_bfloat16_matches_bf16_rounded_reference(tmp_path):
    config, tensors = write_random_checkpoint(tmp_path, dtype="F32")
    model = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype="bfloat16")
    got = model(TOKENS[None]).logits
    rounded = reference_logits(config, round_to_bfloat16(tensors), TOKENS)[None]
    assert_matches_reference(got, rounded, "F32 file loaded with dtype='bfloat16' vs bf16-rounded reference")
    unrounded = reference_logits(config, tensors, TOKENS)[None]
    tol = REL_TOL * max(1.0, float(np.abs(unrounded).max()))
    far = np.abs(got.astype(np.float64) - unrounded).max()
    assert far > tol, (
        f"dtype='bfloat16' should round the weights to bfloat16, but the logits match the "
        f"float32 weights to {far:.3g} (<= {tol:.3g})"
    )


def test_f32_file_loaded_as_float16_matches_f16_rounded_reference(tmp_path):
    config, tensors = write_random_checkpoint(tmp_path, dtype="F32")
    model = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype="float16")
    rounded = {k: v.astype(np.float32).astype(np.float16).astype(np.float64) for k, v in tensors.items()}
    assert_matches_reference(
        model(TOKENS[None]).logits,
        reference_logits(config, rounded, TOKENS)[None],
        "F32 file loaded with dtype='float16' vs f16-rounded reference",
    )
