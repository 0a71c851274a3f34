"""Batch-invariant kernels and the KV cache give BITWISE the same logits however the tokens are grouped.

The exactness promise (docs/design.md) rests on this: a chunk forward over T tokens gives, for every row,
exactly the float32 logits of feeding that token alone; so cropping, re-extending, left padding in a batch
and the thread count never change a single bit.  Everything here compares with np.array_equal.
"""

import numpy as np
import pytest
from checkpoints import write_random_checkpoint

import habana_assist as ha

VOCAB = 256
# Larger than the logits tests' models so that a 2-thread pool has rows to split.
MODEL_ARGS = dict(vocab_size=VOCAB, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=160)


def tokens(seed, n):
    return np.random.default_rng(seed).integers(0, VOCAB, size=n).astype(np.int64)


# Sizes that are not multiples of any SIMD width, so that every kernel's tail loop runs too.
ODD_ARGS = dict(
    vocab_size=VOCAB + 3, hidden_size=72, num_layers=2, num_heads=6, num_kv_heads=2, head_dim=10, intermediate_size=150
)


# One kv head: with fewer attention tasks than threads the forward splits a kv group's query heads among them,
# which must not change a bit against one thread's whole group.
ONE_KV_ARGS = dict(MODEL_ARGS, num_kv_heads=1)


@pytest.fixture(scope="module", params=["F32", "BF16", "F16-odd-sizes", "F32-one-kv-head"])
def model(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(f"cache_{request.param}")
    if request.param == "F16-odd-sizes":
        write_random_checkpoint(path, dtype="F16", seed=6, **ODD_ARGS)
    elif request.param == "F32-one-kv-head":
        write_random_checkpoint(path, dtype="F32", seed=7, **ONE_KV_ARGS)
    else:
        write_random_checkpoint(path, dtype=request.param, seed=5, **MODEL_ARGS)
    return ha.AutoModelForCausalLM.from_pretrained(str(path))


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    old = ha.get_num_threads()
    ha.set_num_threads(request.param)
    assert ha.get_num_threads() == request.param, (
        f"set_num_threads({request.param}) then get_num_threads() gave {ha.get_num_threads()}"
    )
    yield request.param
    ha.set_num_threads(old)


def assert_bitwise(got, expected, what):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: expected shape {expected.shape}, got {got.shape}"
    assert got.dtype == np.float32, f"{what}: expected float32, got {got.dtype}"
    if not np.array_equal(got, expected):
        diff = np.abs(got.astype(np.float64) - expected)
        rows = sorted({int(i) for i in np.argwhere(diff > 0)[:, :-1].reshape(-1)}) if diff.ndim > 1 else []
        raise AssertionError(
            f"{what}: expected bitwise equal logits; {int((diff > 0).sum())} of {diff.size} "
            f"differ, max |diff| = {diff.max():.3g} (differing leading indices {rows[:10]})"
        )


def feed(model, cache, ids, attention_mask=None):
    """Append ids (B, S) to cache -> logits (B, S, V)."""
    return model(ids, attention_mask=attention_mask, past_key_values=cache).logits


def one_token_at_a_time(model, ids):
    cache = model.create_cache(batch_size=1, max_cache_len=64)
    return np.concatenate([feed(model, cache, ids[None, t : t + 1])[0] for t in range(ids.size)])


def test_chunk_rows_are_bitwise_one_token_forwards(model, threads):
    ids = tokens(1, 11)
    cache = model.create_cache(batch_size=1, max_cache_len=64)
    chunk = feed(model, cache, ids[None])[0]
    assert cache.get_seq_length() == 11, (
        f"expected cache length 11 after an 11-token chunk, got {cache.get_seq_length()}"
    )
    assert_bitwise(chunk, one_token_at_a_time(model, ids), "11-token chunk vs 11 one-token forwards")
    assert_bitwise(model(ids[None]).logits[0], chunk, "forward without a cache vs chunk into a cache")


def test_incremental_decoding_is_bitwise_one_full_forward(model, threads):
    ids = tokens(2, 16)
    full = model(ids[None]).logits[0]
    for sizes in ([6] + [1] * 10, [3, 5, 1, 2, 1, 4]):
        cache = model.create_cache(batch_size=1, max_cache_len=32)
        parts, start = [], 0
        for size in sizes:
            parts.append(feed(model, cache, ids[None, start : start + size])[0])
            start += size
            assert cache.get_seq_length() == start, (
                f"expected cache length {start} after chunks {sizes}, got {cache.get_seq_length()}"
            )
        assert_bitwise(np.concatenate(parts), full, f"chunks of sizes {sizes} vs one full forward")


def test_chunk_across_key_blocks_is_bitwise_one_token_forwards(model, threads):
    """A chunk's tokens of one sequence are scored together against each block of 128 keys (csrc/model/forward.c,
    a run), each up to its own position: 40 tokens at positions 110 .. 149 (more than one run, the first block ending
    inside them) give each token's logits as its own one-token forward does."""
    ids = tokens(12, 150)
    cache = model.create_cache(batch_size=1, max_cache_len=160)
    feed(model, cache, ids[None, :110])
    chunk = feed(model, cache, ids[None, 110:])[0]
    alone_cache = model.create_cache(batch_size=1, max_cache_len=160)
    feed(model, alone_cache, ids[None, :110])
    alone = np.concatenate([feed(model, alone_cache, ids[None, t : t + 1])[0] for t in range(110, 150)])
    assert_bitwise(chunk, alone, "40-token chunk at positions 110..149 vs 40 one-token forwards")


def test_crop_then_extend_is_bitwise_a_fresh_cache(model, threads):
    a, b = tokens(3, 10), tokens(4, 5)
    cache = model.create_cache(batch_size=1, max_cache_len=32)
    first = feed(model, cache, a[None])[0]
    cache.crop(6)
    assert cache.get_seq_length() == 6, f"expected length 6 after crop(6), got {cache.get_seq_length()}"
    extended = feed(model, cache, b[None])[0]
    assert cache.get_seq_length() == 11, f"expected length 11 after 5 more tokens, got {cache.get_seq_length()}"

    fresh = model.create_cache(batch_size=1, max_cache_len=32)
    feed(model, fresh, a[None, :6])
    assert_bitwise(extended, feed(model, fresh, b[None])[0], "crop(6) + 5 tokens vs fresh cache of 6 + 5 tokens")
    assert_bitwise(
        extended,
        model(np.concatenate([a[:6], b])[None]).logits[0, 6:],
        "crop(6) + 5 tokens vs full forward of the 11 tokens",
    )

    cache.crop(4)  # crop again, and re-extend with the original tokens: the original logits come back
    assert_bitwise(feed(model, cache, a[None, 4:])[0], first[4:], "crop(4) + original tokens 4..9 vs first pass")


def test_crop_of_a_count_drops_it_crop_zero_drops_nothing_and_reset_empties(model):
    """Transformers 5's crop(-n) drops n columns and crop(0) none (Transformers 4's crop(0) emptied the cache);
    reset() empties it."""
    a = tokens(5, 10)
    cache = model.create_cache(batch_size=1, max_cache_len=32)
    first = feed(model, cache, a[None])[0]
    cache.crop(0)
    assert cache.get_seq_length() == 10, f"expected crop(0) to drop nothing, got length {cache.get_seq_length()}"
    cache.crop(-4)
    assert cache.get_seq_length() == 6, f"expected length 6 after crop(-4), got {cache.get_seq_length()}"
    assert_bitwise(feed(model, cache, a[None, 6:])[0], first[6:], "crop(-4) + original tokens 6..9 vs first pass")
    cache.reset()
    assert cache.get_seq_length() == 0, f"expected an empty cache after reset(), got length {cache.get_seq_length()}"
    assert_bitwise(feed(model, cache, a[None])[0], first, "after reset(), the 10 tokens again vs the first pass")


def left_pad(prompts, pad_id=0):
    width = max(p.size for p in prompts)
    ids = np.full((len(prompts), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(prompts), width), dtype=np.int64)
    for r, p in enumerate(prompts):
        ids[r, width - p.size :] = p
        mask[r, width - p.size :] = 1
    return ids, mask


def test_left_padded_batch_rows_are_bitwise_each_prompt_alone(model, threads):
    prompts = [tokens(5, 9), tokens(6, 5)]
    ids, mask = left_pad(prompts)
    out = model(ids, attention_mask=mask).logits
    for r, p in enumerate(prompts):
        alone = model(p[None]).logits[0]
        assert_bitwise(
            out[r, ids.shape[1] - p.size :],
            alone,
            f"row {r} (prompt of {p.size}) of a left-padded batch vs the prompt alone",
        )


def test_left_padded_batch_decoding_with_cache_is_bitwise_each_prompt_alone(model, threads):
    """Prefill a left-padded batch into a batch cache, then decode 3 steps (attention_mask grows by one
    column per step, as in Transformers); each row equals its prompt decoded alone."""
    prompts = [tokens(7, 4), tokens(8, 8)]
    steps = tokens(9, 6).reshape(3, 2)  # (step, row)
    ids, mask = left_pad(prompts)
    cache = model.create_cache(batch_size=2, max_cache_len=32)
    got = [feed(model, cache, ids, attention_mask=mask)]
    for s in range(3):
        mask = np.concatenate([mask, np.ones((2, 1), dtype=np.int64)], axis=1)
        got.append(feed(model, cache, steps[s][:, None], attention_mask=mask))
    got = np.concatenate(got, axis=1)  # (2, 8 + 3, V)
    for r, p in enumerate(prompts):
        alone_cache = model.create_cache(batch_size=1, max_cache_len=32)
        alone = [feed(model, alone_cache, p[None])[0]]
        for s in range(3):
            alone.append(feed(model, alone_cache, steps[s][r : r + 1][None])[0])
        assert_bitwise(
            got[r, ids.shape[1] - p.size :],
            np.concatenate(alone),
            f"row {r}: left-padded batch prefill + 3 decode steps vs the prompt alone",
        )


def _bundle(model):
    """A set of logits from every path: full, incremental, cropped, left-padded batch."""
    ids = tokens(10, 20)
    out = [model(ids[None]).logits]
    out.append(one_token_at_a_time(model, ids[:8])[None])
    cache = model.create_cache(batch_size=1, max_cache_len=32)
    feed(model, cache, ids[None, :12])
    cache.crop(5)
    out.append(feed(model, cache, ids[None, 12:]))
    padded, mask = left_pad([ids[:7], ids[3:20]])
    out.append(model(padded, attention_mask=mask).logits[:, -7:])
    return out


def test_logits_are_bitwise_identical_with_1_and_2_threads(model):
    old = ha.get_num_threads()
    try:
        ha.set_num_threads(1)
        one = _bundle(model)
        ha.set_num_threads(2)
        two = _bundle(model)
    finally:
        ha.set_num_threads(old)
    for what, a, b in zip(["full forward", "one token at a time", "crop + extend", "left-padded batch"], one, two):
        assert_bitwise(b, a, f"{what}: 2 threads vs 1 thread")
