"""Interrupts: Ctrl-C (a real SIGINT sent by a parent process), an exception raised by a streamer, and max_time
stop generate() (plain, assisted, prompt lookup, sampled, batched), a long forward and from_pretrained, and
leave everything usable: the model computes what it computed before, a cache holds what it held before the
interrupted append and goes on exactly, a TextIteratorStreamer's consumer is released, no pool thread keeps
running. The latency from SIGINT to KeyboardInterrupt is printed (-s), never asserted:
benchmarks/bench_interrupt.py reports it. Requests the machine cannot hold are refused before allocating.
"""

import signal
import subprocess
import threading

import interrupt_child
import numpy as np
import pytest
from package_under_test import PACKAGE_PARENT, PYTHON, child_env

import habana_assist as ha
from habana_assist import _core

STREAMED = ("generate", "assisted", "prompt_lookup", "assisted_sampled", "wrapped")


@pytest.fixture(scope="module")
def pair():
    return (
        ha.AutoTokenizer.from_pretrained("habana-assist/pycode"),
        ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode"),
        ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft"),
    )


def test_ctrl_c_stops_every_kind_of_work_and_leaves_everything_usable():
    results = {r["name"]: r for r in interrupt_child.run_scenarios(list(interrupt_child.SCENARIOS))}
    for name, r in results.items():
        print(f"{name}: {r}")
        if name in ("handler_without_raise", "ignored"):
            assert r["new_tokens"] == 1000, f"{name}: SIGINT must not stop generation; got {r}"
            want = [] if name == "ignored" else [True]  # the handler ran once, while generate() was running
            assert r["handler_calls"] == want, f"{name}: expected handler calls {want}, got {r}"
            continue
        assert r["where"] == "inside", f"{name}: expected KeyboardInterrupt from inside the work, got {r}"
        assert r["model_usable"], f"{name}: after the interrupt the model must give its earlier greedy output; {r}"
        assert r["pool_idle"], f"{name}: after the interrupt every core thread must go to sleep; {r}"
        if name in STREAMED:
            assert r["consumer"] == "GenerationStoppedError caused by KeyboardInterrupt", (
                f"{name}: the streamer's consumer must be released with GenerationStoppedError; got {r}"
            )
    fwd = results["forward"]
    assert fwd["cache_length"] == [8, 8], f"an interrupted append must leave the cache's 8 positions; got {fwd}"
    assert fwd["cache_goes_on_exactly"], f"the cache must go on as if the interrupted append never ran; got {fwd}"


class FailingStreamer(ha.TextIteratorStreamer):
    """Raises at its third put; a thread consumes the text and records how its iteration ended."""

    def __init__(self, tok, fail_end=False):
        super().__init__(tok, skip_prompt=True, timeout=120)
        self.puts, self.consumer_saw, self.fail_end = 0, None, fail_end
        self.thread = threading.Thread(target=self.consume)
        self.thread.start()

    def put(self, value):
        self.puts += 1
        if self.puts == 3:
            raise ValueError("streamer failed on purpose")
        super().put(value)

    def end(self):
        if self.fail_end:
            raise RuntimeError("end failed too")
        super().end()

    def consume(self):
        try:
            self.consumer_saw = "".join(self)
        except ha.GenerationStoppedError as e:
            self.consumer_saw = e


@pytest.mark.parametrize("mode", ["plain", "assisted", "prompt_lookup"])
def test_a_streamer_error_stops_generation_and_releases_the_consumer(pair, mode):
    tok, model, draft = pair
    kw = dict(plain={}, assisted=dict(assistant_model=draft), prompt_lookup=dict(prompt_lookup_num_tokens=4))[mode]
    streamer = FailingStreamer(tok)
    with pytest.raises(ValueError, match="on purpose"):
        model.generate(**tok(["def f(x):"], return_tensors="np"), streamer=streamer, max_new_tokens=50, **kw)
    streamer.thread.join(120)
    assert not streamer.thread.is_alive(), "the consumer must not wait forever"
    assert isinstance(streamer.consumer_saw, ha.GenerationStoppedError), (
        f"the consumer expected GenerationStoppedError, got {streamer.consumer_saw!r}"
    )
    assert isinstance(streamer.consumer_saw.__cause__, ValueError), "GenerationStoppedError must name its cause"


class EndOnly:
    """A user's streamer with only put and end, as Transformers documents them."""

    def __init__(self):
        self.events = []

    def put(self, value):
        self.events.append("put")
        if len(self.events) == 3:
            raise KeyError("put failed")

    def end(self):
        self.events.append("end")


def test_a_streamer_without_stop_is_ended_and_its_errors_never_hide_the_first(pair):
    tok, model, _ = pair
    ids = tok(["x = 1"], return_tensors="np")
    s = EndOnly()
    with pytest.raises(KeyError, match="put failed"):
        model.generate(**ids, streamer=s, max_new_tokens=20)
    assert s.events == ["put", "put", "put", "end"], f"expected end() once after the failing put, got {s.events}"
    s = FailingStreamer(tok, fail_end=True)
    with pytest.raises(ValueError, match="on purpose") as info:
        model.generate(**ids, streamer=s, max_new_tokens=20)
    assert any("end failed too" in note for note in getattr(info.value, "__notes__", [])), (
        "the streamer's own failure to stop must be noted on the first error; notes: "
        f"{getattr(info.value, '__notes__', None)}"
    )
    s.text_queue.put(s.stop_signal)  # its end() failed, so release its consumer here
    s.thread.join(120)


@pytest.mark.parametrize("mode", ["plain", "assisted"])
def test_max_time_zero_ends_after_the_first_step_with_the_tokens_so_far(pair, mode):
    tok, model, draft = pair
    ids = tok(["import sys\n"], return_tensors="np")
    kw = dict(assistant_model=draft) if mode == "assisted" else {}
    full = model.generate(**ids, max_new_tokens=40, eos_token_id=None, **kw)
    cut = model.generate(**ids, max_new_tokens=40, eos_token_id=None, max_time=0.0, **kw)
    S = ids["input_ids"].shape[1]
    rounds = 1 if mode == "plain" else 1 + 20  # one step, or one assisted round (up to 20 drafts and a token)
    assert S < cut.shape[1] <= S + rounds, f"max_time=0: expected one step, got {cut.shape[1] - S} new tokens"
    assert np.array_equal(cut, full[:, : cut.shape[1]]), "max_time must return a prefix of the full output"
    again = model.generate(**ids, max_new_tokens=40, eos_token_id=None, max_time=3600.0, **kw)
    assert np.array_equal(again, full), "a max_time never reached must change nothing"


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "1s", True])
def test_max_time_must_be_a_non_negative_number(pair, bad):
    tok, model, _ = pair
    with pytest.raises(ha.InvalidInputError, match="max_time"):
        model.generate(np.array([[1, 5]]), max_new_tokens=2, max_time=bad)


def test_a_kv_cache_beyond_available_memory_is_refused_before_allocating(pair):
    _, model, _ = pair
    per_position = 2 * 4 * model.config.num_hidden_layers * model.config.num_key_value_heads * model.config.head_dim
    room = _core.available_memory()
    assert room > 0, "available_memory() must read /proc/meminfo on Linux"
    positions = int(1.5 * room / per_position) + 1
    assert positions < 2**31, "the model is too small for this test's arithmetic"
    with pytest.raises(ha.OutOfMemoryError, match="memory available") as info:
        model.create_cache(batch_size=1, max_cache_len=positions)
    assert isinstance(info.value, MemoryError), "OutOfMemoryError must be caught by `except MemoryError`"


def test_outputs_beyond_available_memory_are_refused_before_allocating(pair):
    _, model, _ = pair
    V, room = model.vocab_size, _core.available_memory()
    rows = int(1.5 * room / (4 * 1000 * V)) + 1  # output_scores of 1000 steps
    with pytest.raises(ha.OutOfMemoryError, match="output_scores"):
        model.generate(
            np.ones((rows, 2), dtype=np.int64), max_new_tokens=1000, output_scores=True, return_dict_in_generate=True
        )
    tokens = int(1.5 * room / (8 * V)) + 1  # a forward's logits, and the core's copy of them
    with pytest.raises(ha.OutOfMemoryError, match="logits"):
        model(np.ones((1, tokens), dtype=np.int64))


def test_ctrl_c_ends_the_command_line_quietly_with_130():
    proc = subprocess.Popen(
        [PYTHON, "-m", "habana_assist", "demo"],
        cwd=PACKAGE_PARENT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interrupt_child.default_sigint,
        env=child_env(),
    )
    first = proc.stdout.readline()  # the demo is under way (it runs for tens of seconds)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert first, f"the demo printed nothing; stderr: {err[-2000:]}"
    assert proc.returncode == 130, f"Ctrl-C: expected exit code 130, got {proc.returncode}; stderr: {err[-2000:]}"
    assert "habana-assist: interrupted" in err and "Traceback" not in err, (
        f"expected one quiet line, got: {err[-2000:]}"
    )


def test_a_call_refused_before_it_starts_releases_the_consumer_too(pair):
    tok, model, _ = pair
    streamer = FailingStreamer(tok)
    with pytest.raises(ha.CacheCapacityError):
        model.generate(**tok(["def f(x):"], return_tensors="np"), streamer=streamer, max_new_tokens=10**6)
    streamer.thread.join(120)
    assert isinstance(streamer.consumer_saw, ha.GenerationStoppedError) and isinstance(
        streamer.consumer_saw.__cause__, ha.CacheCapacityError
    ), f"the consumer expected GenerationStoppedError caused by CacheCapacityError, got {streamer.consumer_saw!r}"
