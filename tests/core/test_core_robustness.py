"""Regressions from the review of the C core and its binding: shapes that could wrap, re-initialization,
fork, out-of-range thread counts and counts beyond the core's 32-bit positions. Each must raise a clear
error (or just work), never corrupt memory or hang."""

import multiprocessing

import numpy as np
import pytest
from checkpoints import write_random_checkpoint

import habana_assist as ha
from habana_assist import _core
from habana_assist.generation.options import processing_args

# every processor off (the processors' options of _core.generate with a default GenerationConfig)
OFF = processing_args(ha.GenerationConfig(), 3, 4, [], None, None, None)


def greedy(prompt, max_new, out):
    """_core.generate's options, by name, for a greedy call of max_new tokens with every processor off."""
    return dict(
        OFF,
        prompt=prompt,
        start=np.zeros(len(prompt), np.int64),
        max_new_tokens=max_new,
        min_new_tokens=0,
        eos_token_id=np.zeros(0, np.int32),
        pad_token_id=0,
        do_sample=False,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        repetition_penalty=1.0,
        seed=0,
        max_time=0.0,
        out=out,
        scores=None,
        sources=None,
        on_tokens=None,
        seconds=None,
    )


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("robust")
    write_random_checkpoint(str(d), vocab_size=64, num_layers=2, seed=3)
    return ha.AutoModelForCausalLM.from_pretrained(str(d))


def test_core_generate_refuses_buffers_whose_shape_disagrees_even_when_sizes_wrap(model):
    ctx = _core.Context(model._core, 1, 16)
    prompt = np.array([[1, 2, 3]], np.int32)
    huge = 2**62 + 1  # 4 * huge wraps to 4 bytes: a one-element buffer must still be refused
    with pytest.raises(ha.InvalidInputError, match="shapes disagree"):
        _core.generate(ctx, greedy(prompt, huge, np.zeros((1, 1), np.int32)))
    with pytest.raises(ha.InvalidInputError, match="shapes disagree"):
        _core.generate(ctx, greedy(prompt, 4, np.zeros((1, 3), np.int32)))
    out = np.zeros((1, 4), np.int32)
    assert _core.generate(ctx, greedy(prompt, 4, out)) == 4


def test_core_generate_refuses_more_new_tokens_than_the_cache_holds(model):
    ctx = _core.Context(model._core, 1, 8)
    with pytest.raises(ha.InvalidInputError, match="cache capacity"):
        _core.generate(ctx, greedy(np.array([[1]], np.int32), 9, np.zeros((1, 9), np.int32)))


def test_a_model_or_context_cannot_be_initialized_twice(model):
    with pytest.raises(ha.InvalidInputError, match="already initialized"):
        model._core.__init__(None, None, None, None, None)
    ctx = _core.Context(model._core, 1, 4)
    with pytest.raises(ha.InvalidInputError, match="already initialized"):
        ctx.__init__(model._core, 1, 4)
    assert ctx.capacity == 4 and ctx.n_seq == 1


@pytest.mark.parametrize("n", [0, -1, 2**32 + 1, 10**30])
def test_set_num_threads_out_of_range_is_refused_not_truncated(n):
    before = ha.get_num_threads()
    with pytest.raises(ha.InvalidInputError):
        _core.set_num_threads(n)
    assert ha.get_num_threads() == before, "a refused thread count must leave the pool as it was"


@pytest.mark.parametrize(
    "flag", ["top_k", "min_new_tokens", "num_assistant_tokens", "prompt_lookup_num_tokens", "max_new_tokens"]
)
def test_counts_beyond_32_bits_are_refused_naming_the_flag(model, flag):
    with pytest.raises(ha.InvalidInputError, match=flag):
        model.generate(np.array([[1, 2]]), **{"max_new_tokens": 2, flag: 10**20})


def _child_generates(path, queue):
    ha._core.measure_read_bandwidth(1 << 20, 1)  # a job for every pool thread, in the child
    m = ha.AutoModelForCausalLM.from_pretrained(path)
    queue.put(m.generate(np.array([[1, 2, 3]]), max_new_tokens=6).tolist())


@pytest.fixture
def restore_threads():
    old = ha.get_num_threads()
    yield
    ha.set_num_threads(old)  # the tests after this one run with the thread count they would have had


def test_a_forked_child_can_use_the_core_after_the_parent_started_its_threads(tmp_path, restore_threads):
    write_random_checkpoint(str(tmp_path), vocab_size=64, num_layers=2, seed=4, hidden_size=128, intermediate_size=256)
    m = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path))
    ha.set_num_threads(2)  # a worker thread in the parent even on one core
    want = m.generate(np.array([[1, 2, 3]]), max_new_tokens=6).tolist()
    ha._core.measure_read_bandwidth(1 << 20, 1)  # the pool's workers are running in the parent now
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_generates, args=(str(tmp_path), q))
    p.start()
    p.join(60)
    hung = p.is_alive()
    if hung:
        p.kill()
    assert not hung, "the forked child hung in the core (its copy of the thread pool has no threads)"
    assert p.exitcode == 0, f"the forked child failed with exit code {p.exitcode}"
    assert q.get(timeout=60) == want, "the forked child's greedy output differs from the parent's"


def test_measure_mac_rate_reports_both_rooflines_and_refuses_bad_arguments():
    for int8 in (False, True):
        rate = _core.measure_mac_rate(1, int8=int8)
        assert np.isfinite(rate) and 1e7 < rate < 1e13, f"int8={int8}: implausible multiply-add rate {rate}/s"
    with pytest.raises(ha.InvalidInputError, match="repeats"):
        _core.measure_mac_rate(0)
    with pytest.raises(TypeError):
        _core.measure_mac_rate("3")


def test_pack_refuses_bad_buffers_naming_the_problem():
    """_core.pack (the loader's repacking into panels) checks what it is given, and writes bit for bit."""
    src = np.arange(3 * 5, dtype=np.float32).reshape(3, 5)
    dst = np.full((16, 5), -1.0, dtype=np.float32)
    ha._core.pack(src, "float32", dst)
    # column k of the one panel holds rows 0..2, then zeros for the padding rows 3..15
    assert np.array_equal(dst.reshape(5, 16)[:, :3], src.T) and not dst.reshape(5, 16)[:, 3:].any()
    bad = [
        ((src, "float32", np.zeros((15, 5), np.float32)), "destination needs"),  # one row short
        ((src, "float32-panels", dst), "source must be row-major"),  # a panel dtype as source
        ((src, "int8", np.zeros(80, np.uint8)), "item format"),  # not a float source
        ((src, "float32", np.zeros((16, 5), np.float16)), "item format"),  # dst of another type
        ((src, "bfloat16", dst.view(np.uint16)), "item format"),  # src not uint16 bits
        ((src[:, ::2], "float32", dst), "contiguous"),  # a strided view
    ]
    for args, match in bad:
        with pytest.raises((ha.InvalidInputError, TypeError, ValueError), match=match):
            ha._core.pack(*args)
    frozen = np.zeros((16, 5), np.float32)
    frozen.flags.writeable = False
    with pytest.raises((ha.InvalidInputError, TypeError, ValueError, BufferError)):
        ha._core.pack(src, "float32", frozen)
