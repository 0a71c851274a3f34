"""The binding releases the GIL around core calls, and concurrent use never changes or corrupts a result.

python-zstandard's habit (docs/robustness.md): hammer the released GIL from threads. One model is shared by several
Python threads, each with its own cache or generate() call; every result must be bitwise the single-threaded
one. One cache driven from two threads at once must be refused ("in use by another thread") or serialized,
never corrupted. The core's thread count never changes a bit. A cache keeps its model's weights alive.
"""

import subprocess
import sys
import threading

import numpy as np
import pytest
from checkpoints import write_random_checkpoint
from package_under_test import PACKAGE_PARENT, PYTHON, child_env

import habana_assist as ha
from habana_assist import _core
from habana_assist.errors import InvalidInputError

SMALL_VOCAB = 256
SMALL = dict(
    vocab_size=SMALL_VOCAB,
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    intermediate_size=160,
    max_position_embeddings=512,
)
# Large enough that one long-prompt call runs for a good fraction of a second on one core.
BIG_VOCAB = 512
BIG = dict(
    vocab_size=BIG_VOCAB,
    hidden_size=256,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    intermediate_size=512,
    max_position_embeddings=4096,
)
N_THREADS = 4
ITERATIONS = 3
JOIN_TIMEOUT = 60  # seconds: a hang is a failure, not a stuck test run
# Long core calls repeated until another thread is seen inside them: a binding that keeps the GIL fails every
# try; one that releases it passes the first try unless the watching thread was preempted all through it.
TRIES = 20
PAUSE_LIMIT = 10  # seconds; see _PausingNumpy (under JOIN_TIMEOUT, so a serializing design would still pass)


@pytest.fixture(scope="module")
def small_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("gil_small")
    write_random_checkpoint(path, seed=31, eos_token_id=2, bos_token_id=1, **SMALL)
    return str(path)


@pytest.fixture(scope="module")
def small(small_dir):
    # OpenBLAS prompt blocks on (off by default), so that threads also prefill through it
    return ha.AutoModelForCausalLM.from_pretrained(small_dir, blas_prefill=True)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("gil_big")
    write_random_checkpoint(path, seed=32, **BIG)
    # reconstruct() checks appended chunks against fresh forwards of the whole prefix, which needs every row
    # bitwise the kernels' (OpenBLAS prompt blocks are not), so this model prefills with the kernels only.
    return ha.AutoModelForCausalLM.from_pretrained(str(path), blas_prefill=False)


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


def workload(model, seed, make_streamer=None):
    """One thread's work with its own cache and generate calls -> a dict of numpy results. make_streamer(), if
    given, makes a streamer for each single-prompt generate call (a streamer never changes the output)."""
    ids = tokens(seed, 12)

    def stream():
        return {"streamer": make_streamer()} if make_streamer else {}

    cache = model.create_cache(batch_size=1, max_cache_len=32)
    first = model(ids[None, :7], past_key_values=cache).logits
    second = model(ids[None, 7:], past_key_values=cache).logits
    cache.crop(4)
    third = model(ids[None, 9:], past_key_values=cache).logits
    greedy = model.generate(ids[None, :6], max_new_tokens=10, eos_token_id=None, **stream())
    sampled = model.generate(
        ids[None, :6],
        max_new_tokens=10,
        do_sample=True,
        temperature=1.5,
        top_p=0.9,
        seed=seed,
        eos_token_id=None,
        return_dict_in_generate=True,
        output_scores=True,
        **stream(),
    )
    padded = np.array([[0, 0, *ids[:4]], list(ids[4:10])])
    batch = model.generate(
        padded,
        attention_mask=(np.arange(6)[None] >= [[2], [0]]).astype(np.int64),
        max_new_tokens=6,
        do_sample=True,
        seed=seed + 1,
        eos_token_id=None,
    )
    long = tokens(seed + 7, 200)  # a prompt over 128 tokens, one OpenBLAS block where blas_prefill is on
    long_logits = model(long[None]).logits[0, -3:]
    long_greedy = model.generate(long[None, :150], max_new_tokens=4, eos_token_id=None, **stream())
    return {
        "first chunk logits": first,
        "second chunk logits": second,
        "logits after crop": third,
        "greedy tokens": greedy,
        "sampled tokens": sampled.sequences,
        "sampled scores": np.stack(sampled.scores),
        "left-padded batch tokens": batch,
        "long prompt logits": long_logits,
        "long prompt greedy": long_greedy,
    }


def assert_same(got, expected, what):
    for key, value in expected.items():
        g = got[key]
        assert g.shape == value.shape, f"{what}, {key}: expected shape {value.shape}, got {g.shape}"
        if not np.array_equal(g, value):
            diff = np.abs(g.astype(np.float64) - value.astype(np.float64))
            raise AssertionError(
                f"{what}, {key}: expected bitwise the single-threaded result; "
                f"{int((diff > 0).sum())} of {diff.size} entries differ (max |diff| {diff.max():.3g})"
            )


# ---- many threads, one model ---------------------------------------------------------------------------


def test_four_threads_sharing_a_model_get_bitwise_single_threaded_results(small, restore_threads):
    # One core thread: the four Python threads then run in the core at once (two cores). The pool's own
    # workers under concurrent callers are exercised by the next test.
    ha.set_num_threads(1)
    seeds = [100 + i for i in range(N_THREADS)]
    expected = {s: workload(small, s) for s in seeds}

    def hammer(seed):
        return [workload(small, seed) for _ in range(ITERATIONS)]

    results = run_threads([lambda s=s: hammer(s) for s in seeds])
    for seed, runs in zip(seeds, results):
        for it, got in enumerate(runs):
            assert_same(got, expected[seed], f"thread with seed {seed}, iteration {it}")


def test_changing_the_thread_count_during_concurrent_generation_changes_no_bit(small, restore_threads):
    # Paced by the generations, not by a clock: each put of a worker's generation asks a switcher thread for
    # one more change of the core's thread count (1 <-> 2), and the third put of every generation (two new
    # tokens in) waits until a change has been made after it. So every generation has the count changed in
    # its middle, while the other workers run, however fast or loaded the machine.
    seeds = [200 + i for i in range(3)]
    expected = {s: workload(small, s) for s in seeds}
    progress = threading.Condition()
    state = {"asked": 0, "made": 0, "done": 0}
    pacers = []

    class Pacer(ha.BaseStreamer):
        def __init__(self):
            self.n, self.changed_inside = 0, False
            pacers.append(self)

        def put(self, value):
            self.n += 1
            with progress:
                state["asked"] += 1
                progress.notify_all()
                if self.n == 3:
                    target = state["made"] + 1
                    self.changed_inside = progress.wait_for(lambda: state["made"] >= target, JOIN_TIMEOUT)

        def end(self):
            pass

    def switcher():
        made = 0
        while True:
            with progress:
                progress.wait_for(lambda: state["asked"] > made or state["done"] == len(seeds), JOIN_TIMEOUT)
                if state["asked"] <= made:  # every worker is done (or a hang: the workers' checks say so)
                    return made
            ha.set_num_threads(2 if ha.get_num_threads() == 1 else 1)
            made += 1
            with progress:
                state["made"] = made
                progress.notify_all()

    def worker(seed):
        try:
            return [workload(small, seed, Pacer) for _ in range(2)]
        finally:
            with progress:
                state["done"] += 1
                progress.notify_all()

    *results, changes = run_threads([lambda s=s: worker(s) for s in seeds] + [switcher])
    unchanged = sum(not p.changed_inside for p in pacers)
    assert pacers and unchanged == 0, (
        f"expected the thread count to change in the middle of every one of the "
        f"{len(pacers)} generations; {unchanged} waited {JOIN_TIMEOUT} s for a change "
        f"in vain ({changes} changes made)"
    )
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
            if np.array_equal(model(full[None]).logits[:, prefix.size :], logits):
                matched = t
                break
        assert matched is not None, (
            f"after {step} of {total} successful appends (cache holding {prefix.size} tokens), no thread's next "
            f"result equals a fresh forward of the tokens so far: the shared cache was corrupted"
        )
        prefix = np.concatenate([prefix, successes[matched][heads[matched]][0]])
        heads[matched] += 1
    return prefix


def check_cache_consistent(model, cache, successes, what):
    held = reconstruct(model, successes)
    assert cache._ctx.length(0) == held.size, (
        f"{what}: expected the core cache to hold {held.size} positions, got {cache._ctx.length(0)}"
    )
    assert cache.get_seq_length() == held.size, (
        f"{what}: the core holds the {held.size} appended positions, but Cache.get_seq_length() says "
        f"{cache.get_seq_length()}: the Cache's column mask lost updates (see "
        f"test_cache_bookkeeping_survives_a_thread_switch_right_after_an_append)"
    )
    probe = np.array([5, 6])
    got = model(probe[None], past_key_values=cache).logits
    expected = model(np.concatenate([held, probe])[None]).logits[:, held.size :]
    assert np.array_equal(got, expected), (
        f"{what}: after the concurrent use, appending to the cache gives logits different from a fresh forward "
        f"of the {held.size} tokens it should hold"
    )


def is_busy_error(e):
    return isinstance(e, InvalidInputError) and "in use by another thread" in str(e)


def inside_the_core(ctx):
    """True iff a call on the core context ctx is running without the GIL right now: the binding marks a context
    busy, under the GIL, only around the part of a call that runs without it, and Context.length refuses a busy
    context (and changes nothing)."""
    try:
        ctx.length(0)
    except InvalidInputError as e:
        if is_busy_error(e):
            return True
        raise
    return False


def call_watched(call, contexts, then=lambda: True):
    """One try: thread A runs call() while thread B polls contexts() (the core contexts A's call uses) until it
    finds one inside the core, and then runs then() at once. -> (call()'s result, then()'s result, or None
    when B never found A inside the core).

    An event, not a measurement: B polls without sleeping, holding the GIL between polls, so A runs Python only
    when the interpreter makes B switch; once A is in the core, B runs only if A let the GIL go. A binding that
    keeps the GIL around a call is never seen inside it; one that releases it is seen at the latest when the OS
    schedules B during A's long call (one core included); callers repeat up to TRIES times for a B preempted
    all through one call."""
    a_done = threading.Event()

    def thread_a():
        try:
            return call()
        finally:
            a_done.set()

    def thread_b():
        while not a_done.is_set():
            if any(inside_the_core(ctx) for ctx in contexts()):
                return then()
        return None

    return run_threads([thread_a, thread_b])


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
    assert sum(len(s) for s in successes) + sum(refused.values()) == 50, (
        f"expected 50 calls to succeed or be refused, got {[len(s) for s in successes]} + {refused}"
    )
    check_cache_consistent(small, cache, successes, "two threads appending to one cache")


def test_second_thread_using_a_busy_cache_gets_a_clear_error_while_the_gil_is_released(big, restore_threads):
    """Thread A runs one long append; thread B, once it finds the cache's core context inside the core (which
    it can only do if A released the GIL), appends to the same cache and must be refused with
    InvalidInputError; the cache then holds A's append, intact."""
    ha.set_num_threads(1)  # leave the second core, where there is one, to thread B
    long_chunk = tokens(600, 1024, BIG_VOCAB)
    probe = np.array([7])
    outcomes = []
    for _ in range(TRIES):
        cache = big.create_cache(batch_size=1, max_cache_len=long_chunk.size + 8)
        b_successes = []

        def append_probe():
            try:
                b_successes.append((probe, big(probe[None], past_key_values=cache).logits))
                return "appended"
            except InvalidInputError as e:
                assert is_busy_error(e), f"expected only the 'in use by another thread' error, got: {e}"
                return "refused"

        a_logits, outcome = call_watched(
            lambda: big(long_chunk[None], past_key_values=cache).logits, lambda: [cache._ctx], append_probe
        )
        outcomes.append(outcome)
        if outcome == "refused":
            break
    assert outcomes[-1] == "refused", (
        f"expected thread B, running while A's 1024-token append was inside the core, to be refused with "
        f"InvalidInputError 'in use by another thread'; in {len(outcomes)} tries it got {outcomes} (None: B never "
        "ran while A was inside the core, so the GIL was held; 'appended': B's append went in after A's)"
    )
    check_cache_consistent(
        big, cache, [[(long_chunk, a_logits)], b_successes], "a long append against a thread probing the busy cache"
    )


class _PausingNumpy:
    """numpy, except that the first concatenate() called from one chosen thread pauses until released.

    habana_assist.modeling_utils updates a Cache's column mask with np.concatenate after the core append; the
    interpreter may switch threads inside that call (after the old mask was read), so pausing there is one
    legal schedule, made deterministic."""

    def __init__(self, ident):
        self.ident, self.paused = ident, False
        self.reached, self.release = threading.Event(), threading.Event()

    def __getattr__(self, name):
        return getattr(np, name)

    def concatenate(self, *args, **kwargs):
        if threading.get_ident() == self.ident and not self.paused:
            self.paused = True
            self.reached.set()
            # B's attempt (refused or appended) ends the pause. Only a serializing lock elsewhere, which would
            # block B until A goes on, makes A wait out PAUSE_LIMIT; with a refusing cache it is never reached.
            self.release.wait(PAUSE_LIMIT)
        return np.concatenate(*args, **kwargs)


def test_cache_bookkeeping_survives_a_thread_switch_right_after_an_append(small, monkeypatch):
    """Thread A's append has finished in the core but A has not yet recorded its columns when thread B
    appends to the same cache. B must be refused or serialized; either way no column may be lost."""
    modeling = sys.modules["habana_assist.modeling_utils"]
    cache = small.create_cache(batch_size=1, max_cache_len=64)
    small(tokens(1000, 4)[None], past_key_values=cache)
    a_chunk, b_chunk = tokens(1001, 3), tokens(1002, 2)
    appended = {"A": 0, "B": 0}
    b_outcome = []

    def thread_a():
        pausing = _PausingNumpy(threading.get_ident())
        monkeypatch.setattr(modeling, "np", pausing)
        go.set()
        try:
            small(a_chunk[None], past_key_values=cache)
            appended["A"] = a_chunk.size
        finally:
            pausing.reached.set()
            monkeypatch.setattr(modeling, "np", np)

    def thread_b():
        go.wait(JOIN_TIMEOUT)
        pausing = modeling.np
        pausing.reached.wait(JOIN_TIMEOUT)
        try:
            small(b_chunk[None], past_key_values=cache)
            appended["B"] = b_chunk.size
            b_outcome.append("appended")
        except InvalidInputError as e:
            assert is_busy_error(e), f"expected only the 'in use by another thread' error, got: {e}"
            b_outcome.append("refused")
        finally:
            pausing.release.set()

    go = threading.Event()
    run_threads([thread_a, thread_b])
    total = 4 + appended["A"] + appended["B"]
    assert cache._ctx.length(0) == total, (
        f"expected the core cache to hold {total} positions (4 + A's {appended['A']} + B's {appended['B']}), "
        f"got {cache._ctx.length(0)}"
    )
    assert cache.get_seq_length() == total, (
        f"B's append was {b_outcome[0]} while A was between its core append and its mask update; expected "
        f"Cache.get_seq_length() to count all {total} columns the core holds, got {cache.get_seq_length()}: "
        f"a column update was lost (the mask update is not atomic with the append)"
    )


def test_a_crop_refused_as_busy_leaves_the_cache_unchanged(big, restore_threads):
    """Thread B's crop runs while thread A's long append is inside the core: it is refused, and must then
    change nothing (neither the core's lengths nor the Cache's columns)."""
    ha.set_num_threads(1)
    long_chunk = tokens(1101, 1024, BIG_VOCAB)
    outcomes = []
    for _ in range(TRIES):
        cache = big.create_cache(batch_size=1, max_cache_len=2048)
        big(tokens(1100, 6, BIG_VOCAB)[None], past_key_values=cache)

        def crop():
            try:
                cache.crop(3)
                return "done"
            except InvalidInputError as e:
                assert is_busy_error(e), f"expected only the 'in use by another thread' error, got: {e}"
                return "refused"

        _, outcome = call_watched(lambda: big(long_chunk[None], past_key_values=cache), lambda: [cache._ctx], crop)
        outcomes.append(outcome)
        if outcome == "refused":
            break
    assert outcomes[-1] == "refused", (
        f"expected thread B's crop(3), made while A's append was inside the core, to be refused; in {len(outcomes)} "
        f"tries it got {outcomes} (None: B never ran while A was inside the core, so the GIL was held)"
    )
    assert cache._ctx.length(0) == 6 + 1024, (
        f"expected the refused crop to leave the core cache at 6 + 1024 positions, got {cache._ctx.length(0)}"
    )
    assert cache.get_seq_length() == 6 + 1024, (
        f"expected the refused crop(3) to leave the Cache's columns at 6 + 1024 = 1030, got "
        f"{cache.get_seq_length()}: Cache.crop() shortened its mask before the core refused the crop"
    )


# ---- the GIL really is released --------------------------------------------------------------------------


class _CapturingCore:
    """habana_assist._core, except that each Context made through it is also kept in .contexts (so a test can
    watch the context a forward or generate() makes for itself)."""

    def __init__(self):
        self.contexts = []

    def __getattr__(self, name):
        return getattr(_core, name)

    def Context(self, *args):
        ctx = _core.Context(*args)
        self.contexts.append(ctx)
        return ctx


@pytest.mark.parametrize("kind", ["forward", "generate"])
def test_python_threads_keep_running_during_a_long_core_call(big, restore_threads, monkeypatch, kind):
    """Another Python thread runs while a long forward or generate() (a 1536-token prompt) is inside the core:
    it finds the call's own core context busy, which it can only do if the binding let the GIL go."""
    ha.set_num_threads(1)
    ids = tokens(700, 1536, BIG_VOCAB)[None]
    capturing = _CapturingCore()
    monkeypatch.setattr(sys.modules["habana_assist.modeling_utils"], "_core", capturing)
    monkeypatch.setattr(sys.modules["habana_assist.cache_utils"], "_core", capturing)  # the forward's DynamicCache
    if kind == "forward":

        def call():
            big(ids)
    else:

        def call():
            big.generate(ids, max_new_tokens=2, eos_token_id=None)

    for attempt in range(1, TRIES + 1):
        capturing.contexts.clear()
        _, seen = call_watched(call, lambda: list(capturing.contexts))
        assert capturing.contexts, f"test setup: the {kind} call made no core context through habana_assist._core"
        if seen:
            break
    assert seen, (
        f"expected another Python thread to run while the {kind} call was inside the core (GIL "
        f"released); in {TRIES} calls it never did"
    )


# ---- lifetimes -------------------------------------------------------------------------------------------

# Run in a child process: if the binding let the weights go with the model, the child crashes (a failure
# reported here with its output) instead of taking the whole test run down.
ORPHAN_CACHE_SCRIPT = r"""
import gc, sys, threading, weakref
import numpy as np
import habana_assist as ha

path, vocab = sys.argv[1], int(sys.argv[2])
ids = np.random.default_rng(800).integers(3, vocab, size=9).astype(np.int64)

model = ha.AutoModelForCausalLM.from_pretrained(path)
expected = model(ids[None]).logits[0, 6:]
cache = model.create_cache(batch_size=1, max_cache_len=16)
model(ids[None, :6], past_key_values=cache)
second = model.create_cache(batch_size=1, max_cache_len=16)
model(ids[None, :6], past_key_values=second)
alive = weakref.ref(model)
del model
gc.collect()
if alive() is not None:
    sys.exit("the LlamaForCausalLM object was not freed by del + gc.collect(); the test cannot check anything")
junk = [np.full(1 << 16, 7.0) for _ in range(64)]  # reuse freed memory, so dangling weights would show

def append(ctx, out):
    rest = np.ascontiguousarray(ids[6:], dtype=np.int32)
    ctx.append(np.zeros(rest.size, dtype=np.int32), rest, None, out)

out = np.empty((3, vocab), dtype=np.float32)
append(cache._ctx, out)
if not np.array_equal(out, expected):
    sys.exit("the cache of a deleted model gave logits different from before the deletion")
if cache._ctx.length(0) != 9:
    sys.exit(f"expected 9 positions in the cache, got {cache._ctx.length(0)}")

ctx = second._ctx  # the last reference to the weights: a bare core context, used from another thread
del second
gc.collect()
out2 = np.empty((3, vocab), dtype=np.float32)
t = threading.Thread(target=append, args=(ctx, out2))
t.start()
t.join(60)
if t.is_alive() or not np.array_equal(out2, expected):
    sys.exit("the orphaned core context, used from another thread, did not give the logits it gave before")
print("OK")
"""


def test_cache_keeps_working_after_its_model_is_deleted(small_dir):
    proc = subprocess.run(
        [PYTHON, "-c", ORPHAN_CACHE_SCRIPT, small_dir, str(SMALL_VOCAB)],
        env=child_env(),
        cwd=PACKAGE_PARENT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "OK", (
        f"expected a cache to keep its deleted model's weights alive and keep working; the child process exited "
        f"with {proc.returncode}{' (killed by a signal: a crash)' if proc.returncode < 0 else ''}, "
        f"stdout {proc.stdout[-500:]!r}, stderr {proc.stderr[-1500:]!r}"
    )
