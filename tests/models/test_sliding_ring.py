"""Sliding-window layers keep their keys and values in rings of window + 256 positions (csrc/model/kv_cache.c):
checked against the float64 reference past several wraps, bitwise through crops, with assisted generation's
rollbacks across the wrap, and a Cache.crop further back than the ring holds refused with nothing changed.

A Mistral checkpoint with a window of 4 and max_position_embeddings 700: every cache longer than 260 positions
is a ring (the other family tests use caches too short for one).
"""

import numpy as np
import pytest
from checkpoints import write_random_checkpoint
from reference import reference_logits

import habana_assist as ha

WINDOW, N = 4, 620  # positions: the ring of 260 wraps twice
ARGS = dict(
    arch="MistralForCausalLM",
    sliding_window=WINDOW,
    vocab_size=96,
    hidden_size=32,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    intermediate_size=48,
    max_position_embeddings=700,
)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(target directory, config, float64 tensors, draft directory): the draft a smaller model, same vocab."""
    root = tmp_path_factory.mktemp("ring")
    config, tensors = write_random_checkpoint(root / "target", seed=11, **ARGS)
    write_random_checkpoint(root / "draft", seed=12, **dict(ARGS, num_layers=1))
    return str(root / "target"), config, tensors, str(root / "draft")


def _tokens(n, seed=3):
    return np.random.default_rng(seed).integers(0, ARGS["vocab_size"], size=n)


def test_ring_logits_match_the_reference_past_several_wraps(pair):
    directory, config, tensors, _ = pair
    model = ha.AutoModelForCausalLM.from_pretrained(directory)
    ids = _tokens(N)
    got = model(ids[None]).logits[0].astype(np.float64)
    ref = reference_logits(config, tensors, ids)
    err = np.abs(got - ref).max(axis=1) / np.abs(ref).max(axis=1)
    assert err.max() < 1e-4, (
        f"positions {np.flatnonzero(err >= 1e-4)[:8]} differ from the reference by up to {err.max():.2e}"
    )


def test_ring_decoding_is_bitwise_the_full_forward_through_crops(pair):
    directory, _, _, _ = pair
    model = ha.AutoModelForCausalLM.from_pretrained(directory)
    ids = _tokens(N)
    full = model(ids[None]).logits[0]
    cache = model.create_cache(1, N)
    got = [model(ids[None, :300], past_key_values=cache).logits[0]]
    at = 300
    for step in (1, 7, 33, 2, 130, 1, 5):  # chunks of several sizes, then back 200 and forward again
        got.append(model(ids[None, at : at + step], past_key_values=cache).logits[0])
        at += step
    assert np.array_equal(np.concatenate(got), full[:at]), "chunked decoding differs from the full forward"
    cache.crop(at - 200)
    again = model(ids[None, at - 200 : at], past_key_values=cache).logits[0]
    assert np.array_equal(again, full[at - 200 : at]), "re-extending after a crop of 200 differs"


def test_cache_crop_beyond_the_ring_is_refused_and_changes_nothing(pair):
    directory, _, _, _ = pair
    model = ha.AutoModelForCausalLM.from_pretrained(directory)
    ids = _tokens(N)
    full = model(ids[None]).logits[0]
    cache = model.create_cache(1, N)
    model(ids[None, :500], past_key_values=cache)
    with pytest.raises(ha.UnsupportedModelError, match="sliding-window"):
        cache.crop(100)
    assert cache.get_seq_length() == 500
    nxt = model(ids[None, 500:510], past_key_values=cache).logits[0]
    assert np.array_equal(nxt, full[500:510]), "a refused crop changed what the cache holds"
    cache.reset()
    assert np.array_equal(model(ids[None, :20], past_key_values=cache).logits[0], full[:20]), "after reset()"


@pytest.mark.parametrize("schedule", ["constant", "heuristic"])
def test_assisted_greedy_across_ring_wraps_is_plain_greedy(pair, schedule):
    directory, _, _, draft_dir = pair
    model = ha.AutoModelForCausalLM.from_pretrained(directory)
    draft = ha.AutoModelForCausalLM.from_pretrained(draft_dir)
    prompt = _tokens(240, seed=5)[None]
    plain = model.generate(prompt, max_new_tokens=90, do_sample=False)
    out = model.generate(
        prompt,
        max_new_tokens=90,
        do_sample=False,
        assistant_model=draft,
        num_assistant_tokens=7,
        num_assistant_tokens_schedule=schedule,
        return_dict_in_generate=True,
    )
    assert np.array_equal(out.sequences, plain), "assisted greedy differs from plain greedy across the ring's wrap"
    assert out.num_draft_tokens > 0 and out.num_accepted_tokens < out.num_draft_tokens, (
        "expected rounds with rejections (rollbacks) in the generation"
    )
