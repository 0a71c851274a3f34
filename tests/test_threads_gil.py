"""The binding releases the GIL around core calls, and concurrent use never changes or corrupts a result.

python-zstandard's habit (STYLE.md): hammer the released GIL from threads. One model is shared by several
Python threads, each with its own cache or generate() call; every result must be bitwise the single-threaded
one. One cache driven from two threads at once must be refused ("in use by another thread") or serialized,
never corrupted. The core's thread count never changes a bit. A cache keeps its model's weights alive.
"""

import gc
import os
import sys
import threading
import time
import weakref

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import habana_assist as ha  # noqa: E402
from habana_assist.errors import InvalidInputError  # noqa: E402
from checkpoints import write_random_checkpoint  # noqa: E402

SMALL_VOCAB = 256
SMALL = dict(vocab_size=SMALL_VOCAB, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
             intermediate_size=160, max_position_embeddings=512)
# Large enough that one long-prompt call runs for a good fraction of a second on one core.
BIG_VOCAB = 512
BIG = dict(vocab_size=BIG_VOCAB, hidden_size=256, num_layers=2, num_heads=4, num_kv_heads=2,
           intermediate_size=512, max_position_embeddings=4096)
N_THREADS = 4
ITERATIONS = 3
JOIN_TIMEOUT = 60  # seconds: a hang is a failure, not a stuck test run


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("gil_small")
    write_random_checkpoint(path, seed=31, eos_token_id=2, bos_token_id=1, **SMALL)
    return str(path)


@pytest.fixture(scope="module")
def small(small_dir):
    return ha.AutoModelForCausalLM.from_pretrained(small_dir)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("gil_big")
    write_random_checkpoint(path, seed=32, **BIG)
    return ha.AutoModelForCausalLM.from_pretrained(str(path))


@pytest.fixture
def restore_threads():
    old = ha.get_num_threads()
    yield
    ha.set_num_threads(old)


def tokens(seed, n, vocab=SMALL_VOCAB):
    return np.random.default_rng(seed).integers(3, vocab, size=n).astype(np.int64)


def run_threads(targets):
    """Starts one thread per callable behind a barrier; -> their return values. Re-raises the first error."""
    barrier = threading.Barrier(len(targets))
    results, errors = [None] * len(targets), [None] * len(targets)

    def body(i):
        try:
            barrier.wait(timeout=JOIN_TIMEOUT)
            results[i] = targets[i]()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            errors[i] = e

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(len(targets))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)
    hung = [i for i, t in enumerate(threads) if t.is_alive()]
    assert not hung, f"expected every thread to finish within {JOIN_TIMEOUT} s; threads {hung} are still running"
    for i, e in enumerate(errors):
        if e is not None:
            raise AssertionError(f"thread {i} raised {type(e).__name__}: {e}") from e
    return results


def workload(model, seed):
    """One thread's work with its own cache and generate calls -> a dict of numpy results."""
    ids = tokens(seed, 12)
    cache = model.create_cache(batch_size=1, max_cache_len=32)
    first = model(ids[None, :7], past_key_values=cache).logits
    second = model(ids[None, 7:], past_key_values=cache).logits
    cache.crop(4)
    third = model(ids[None, 9:], past_key_values=cache).logits
    greedy = model.generate(ids[None, :6], max_new_tokens=10, eos_token_id=None)
    sampled = model.generate(ids[None, :6], max_new_tokens=10, do_sample=True, temperature=1.5, top_p=0.9,
                             seed=seed, eos_token_id=None, return_dict_in_generate=True, output_scores=True)
    padded = np.array([[0, 0, *ids[:4]], list(ids[4:10])])
    batch = model.generate(padded, attention_mask=(np.arange(6)[None] >= [[2], [0]]).astype(np.int64),
                           max_new_tokens=6, do_sample=True, seed=seed + 1, eos_token_id=None)
    return {"first chunk logits": first, "second chunk logits": second, "logits after crop": third,
            "greedy tokens": greedy, "sampled tokens": sampled.sequences, "sampled scores": np.stack(sampled.scores),
            "left-padded batch tokens": batch}


def assert_same(got, expected, what):
    for key, value in expected.items():
        g = got[key]
        assert g.shape == value.shape, f"{what}, {key}: expected shape {value.shape}, got {g.shape}"
        if not np.array_equal(g, value):
            diff = np.abs(g.astype(np.float64) - value.astype(np.float64))
            raise AssertionError(f"{what}, {key}: expected bitwise the single-threaded result; "
                                 f"{int((diff > 0).sum())} of {diff.size} entries differ (max |diff| {diff.max():.3g})")


# ---- many threads, one model ---------------------------------------------------------------------------

def test_four_threads_sharing_a_model_get_bitwise_single_threaded_results(small):
    seeds = [100 + i for i in range(N_THREADS)]
    expected = {s: workload(small, s) for s in seeds}

    def hammer(seed):
        return [workload(small, seed) for _ in range(ITERATIONS)]

    results = run_threads([lambda s=s: hammer(s) for s in seeds])
    for seed, runs in zip(seeds, results):
        for it, got in enumerate(runs):
            assert_same(got, expected[seed], f"thread with seed {seed}, iteration {it}")


def test_changing_the_thread_count_during_concurrent_generation_changes_no_bit(small, restore_threads):
    seeds = [200 + i for i in range(3)]
    expected = {s: workload(small, s) for s in seeds}
    stop = threading.Event()

    def switcher():
        n = 0
        while not stop.is_set() and n < 200:
            ha.set_num_threads(1 + n % 2)
            n += 1
            time.sleep(0.0005)
        return n

    def worker(seed):
        try:
            return [workload(small, seed) for _ in range(ITERATIONS)]
        finally:
            stop.set()

    *results, switches = run_threads([lambda s=s: worker(s) for s in seeds] + [switcher])
    assert switches > 0, "expected the switcher thread to change the thread count at least once"
    for seed, runs in zip(seeds, results):
        for it, got in enumerate(runs):
            assert_same(got, expected[seed], f"thread with seed {seed}, iteration {it}, while switching 1 <-> 2")


def test_generate_is_bitwise_identical_with_1_and_2_core_threads(small, restore_threads):
    out = {}
    for n in (1, 2):
        ha.set_num_threads(n)
        assert ha.get_num_threads() == n, f"set_num_threads({n}) then get_num_threads() gave {ha.get_num_threads()}"
        out[n] = workload(small, 300)
        out[n]["long greedy"] = small.generate(tokens(301, 40)[None], max_new_tokens=40, eos_token_id=None)
    assert_same(out[2], out[1], "2 core threads vs 1")


# ---- one cache, two threads ----------------------------------------------------------------------------

def reconstruct(model, successes):
    """successes: per thread, the list in call order of (tokens appended, logits returned) that succeeded.

    A serialized execution appended the chunks in some interleaving that keeps each thread's order; find
    it by checking each candidate chunk's logits against a fresh forward of prefix + chunk. -> the token
    sequence the cache must hold. Fails if no interleaving explains the logits (a corrupted cache)."""
    heads = [0] * len(successes)
    prefix = np.zeros(0, dtype=np.int64)
    total = sum(len(s) for s in successes)
    for step in range(total):
        matched = None
        candidates = [t for t in range(len(successes)) if heads[t] < len(successes[t])]
        for t in sorted(candidates, key=lambda t: successes[t][heads[t]][0].size):  # cheapest check first
            chunk, logits = successes[t][heads[t]]
            full = np.concatenate([prefix, chunk])
            if np.array_equal(model(full[None]).logits[:, prefix.size:], logits):
                matched = t
                break
        assert matched is not None, (
            f"after {step} of {total} successful appends (cache holding {prefix.size} tokens), no thread's next "
            f"result equals a fresh forward of the tokens so far: the shared cache was corrupted")
        prefix = np.concatenate([prefix, successes[matched][heads[matched]][0]])
        heads[matched] += 1
    return prefix


def check_cache_consistent(model, cache, successes, what):
    held = reconstruct(model, successes)
    assert cache.get_seq_length() == held.size, \
        f"{what}: expected the cache to hold {held.size} columns (the successful appends), got " \
        f"{cache.get_seq_length()}"
    assert cache._ctx.length(0) == held.size, \
        f"{what}: expected the core cache to hold {held.size} positions, got {cache._ctx.length(0)}"
    probe = np.array([5, 6])
    got = model(probe[None], past_key_values=cache).logits
    expected = model(np.concatenate([held, probe])[None]).logits[:, held.size:]
    assert np.array_equal(got, expected), \
        f"{what}: after the concurrent use, appending to the cache gives logits different from a fresh forward " \
        f"of the {held.size} tokens it should hold"


def is_busy_error(e):
    return isinstance(e, InvalidInputError) and "in use by another thread" in str(e)


def test_one_cache_from_two_threads_is_refused_or_serialized_never_corrupted(small):
    cache = small.create_cache(batch_size=1, max_cache_len=256)
    chunks = {0: [tokens(400 + i, 1 + i % 3) for i in range(25)], 1: [tokens(500 + i, 2 - i % 2) for i in range(25)]}
    refused = {0: 0, 1: 0}

    def appender(t):
        done = []
        for chunk in chunks[t]:
            try:
                done.append((chunk, small(chunk[None], past_key_values=cache).logits))
            except InvalidInputError as e:
                assert is_busy_error(e), f"expected only the 'in use by another thread' error, got: {e}"
                refused[t] += 1
        return done

    successes = run_threads([lambda: appender(0), lambda: appender(1)])
    assert sum(len(s) for s in successes) + sum(refused.values()) == 50, \
        f"expected 50 calls to succeed or be refused, got {[len(s) for s in successes]} + {refused}"
    check_cache_consistent(small, cache, successes, "two threads appending to one cache")


def test_second_thread_using_a_busy_cache_gets_a_clear_error_while_the_gil_is_released(big, restore_threads):
    """Thread A runs one long append; thread B tries the same cache meanwhile. B can only run at all while
    A is inside the core if the GIL is released, and must then be refused with InvalidInputError."""
    ha.set_num_threads(1)  # leave the second core to thread B
    long_chunk = tokens(600, 1024, BIG_VOCAB)
    probe = np.array([7])
    cache = big.create_cache(batch_size=1, max_cache_len=long_chunk.size + 4096)
    entering, a_done = threading.Event(), threading.Event()
    a_successes, b_successes, b_errors = [], [], []

    def thread_a():
        try:
            for _ in range(50):
                entering.set()
                try:
                    a_successes.append((long_chunk, big(long_chunk[None], past_key_values=cache).logits))
                    return
                except InvalidInputError as e:
                    if not is_busy_error(e):
                        raise
                    time.sleep(0.001)
        finally:
            a_done.set()

    def thread_b():
        entering.wait(JOIN_TIMEOUT)
        for _ in range(4000):
            if a_done.is_set():
                break
            try:
                b_successes.append((probe, big(probe[None], past_key_values=cache).logits))
            except Exception as e:  # noqa: BLE001 - every error is checked below
                b_errors.append(e)
            time.sleep(0.0005)

    run_threads([thread_a, thread_b])
    assert len(a_successes) == 1, "expected thread A's long append to succeed (retrying while B held the cache)"
    others = [f"{type(e).__name__}: {e}" for e in b_errors if not is_busy_error(e)]
    assert not others, f"expected thread B to get only InvalidInputError 'in use by another thread', got {others}"
    assert b_errors, ("expected thread B, running while A's 1024-token append was inside the core, to be refused "
                      "with InvalidInputError 'in use by another thread' at least once; it never was: B never ran "
                      "during the call, so the GIL was not released")
    check_cache_consistent(big, cache, [a_successes, b_successes], "a long append against a busy-probing thread")


# ---- the GIL really is released --------------------------------------------------------------------------

def longest_pause_of_a_python_thread_during(call):
    """Runs call() while another Python thread spins recording its longest pause; -> (pause s, call s)."""
    state = {"active": False, "stop": False, "gap": 0.0, "ticks": 0}

    def spinner():
        prev = time.perf_counter()
        while not state["stop"]:
            now = time.perf_counter()
            if state["active"]:
                state["gap"] = max(state["gap"], now - prev)
                state["ticks"] += 1
            prev = now

    t = threading.Thread(target=spinner, daemon=True)
    t.start()
    try:
        time.sleep(0.01)
        state["active"] = True
        time.sleep(0.01)
        t0 = time.perf_counter()
        call()
        elapsed = time.perf_counter() - t0
        time.sleep(0.01)
        state["active"] = False
    finally:
        state["stop"] = True
        t.join(JOIN_TIMEOUT)
    assert state["ticks"] > 0, "expected the spinning thread to run at all"
    return state["gap"], elapsed


@pytest.mark.parametrize("kind", ["forward", "generate"])
def test_python_threads_keep_running_during_a_long_core_call(big, restore_threads, kind):
    ha.set_num_threads(1)
    ids = tokens(700, 1536, BIG_VOCAB)[None]
    if kind == "forward":
        def call():
            big(ids)
    else:
        def call():
            big.generate(ids, max_new_tokens=2, eos_token_id=None)
    gap, elapsed = longest_pause_of_a_python_thread_during(call)
    if elapsed < 0.05:
        pytest.skip(f"the core call took only {elapsed * 1e3:.1f} ms: too short to tell a released GIL apart")
    assert gap < 0.5 * elapsed, \
        f"expected another Python thread to keep running during the {elapsed * 1e3:.0f} ms {kind} call (GIL " \
        f"released); it stalled for {gap * 1e3:.0f} ms"


# ---- lifetimes -------------------------------------------------------------------------------------------

def test_cache_keeps_working_after_its_model_is_deleted(small_dir):
    model = ha.AutoModelForCausalLM.from_pretrained(small_dir)
    ids = tokens(800, 9)
    expected = model(ids[None]).logits[0, 6:]
    cache = model.create_cache(batch_size=1, max_cache_len=16)
    model(ids[None, :6], past_key_values=cache)
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None, "expected the LlamaForCausalLM object to be freed after del (the test needs that)"
    np.ones(1 << 20).sum()  # churn the allocator a little

    rest = np.ascontiguousarray(ids[6:], dtype=np.int32)
    out = np.empty((rest.size, SMALL_VOCAB), dtype=np.float32)
    cache._ctx.append(np.zeros(rest.size, dtype=np.int32), rest, None, out)
    assert np.array_equal(out, expected), \
        "expected the cache of a deleted model to give the same logits as before the deletion"
    assert cache._ctx.length(0) == 9, f"expected 9 positions in the cache, got {cache._ctx.length(0)}"


def test_cache_outlives_model_used_from_another_thread(small_dir):
    model = ha.AutoModelForCausalLM.from_pretrained(small_dir)
    ids = tokens(900, 8)
    expected = model(ids[None]).logits[0, 4:]
    cache = model.create_cache(batch_size=1, max_cache_len=16)
    model(ids[None, :4], past_key_values=cache)
    ctx = cache._ctx
    del model, cache
    gc.collect()

    def use():
        rest = np.ascontiguousarray(ids[4:], dtype=np.int32)
        out = np.empty((rest.size, SMALL_VOCAB), dtype=np.float32)
        ctx.append(np.zeros(rest.size, dtype=np.int32), rest, None, out)
        return out

    (out,) = run_threads([use])
    assert np.array_equal(out, expected), "expected the orphaned cache, used from another thread, to give the " \
                                          "logits it gave before its model was deleted"
