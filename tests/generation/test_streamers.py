"""Streamers fed from the C generation loops: the streamed text is exactly the decoded new tokens, in plain,
sampled, assisted and prompt-lookup generation; put() sees the prompt, then the new tokens in order, then end()
once; a streamer that raises stops generation with its own exception; the GIL is free while the core works.

The models are small random Llamas over the tokenizer of tests/fixtures/tokenizer_fixture.py: their output is full of
byte-fallback pieces (broken UTF-8), newlines and special tokens, the hard cases for incremental decoding.
"""

import sys
import threading
import time

import numpy as np
import pytest
import tokenizer_fixture as tf

import habana_assist as ha
from habana_assist.errors import InvalidInputError

PROMPTS = ["def fib(n):\n    ", "import os\n", "class A:\n\tpass\n# caf\u00e9 \U0001f600", "x"]
NEW = 40
JOIN_TIMEOUT = 60  # seconds: a hang is a failure, not a stuck test run

# Every way of generating that can feed a streamer; "assisted" uses the draft model.
MODES = {
    "greedy": dict(),
    "sampled": dict(do_sample=True, seed=3, temperature=1.3, top_k=0),
    "assisted": dict(assistant_model="draft", num_assistant_tokens=4, assistant_confidence_threshold=0.0),
    "assisted_sampled": dict(assistant_model="draft", do_sample=True, seed=5, num_assistant_tokens=3),
    "prompt_lookup": dict(prompt_lookup_num_tokens=3),
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tf.write_checkpoint(tmp_path_factory.mktemp("stream_target"), seed=11)


@pytest.fixture(scope="module")
def tok(checkpoint):
    return ha.AutoTokenizer.from_pretrained(checkpoint)


@pytest.fixture(scope="module")
def model(checkpoint):
    return ha.AutoModelForCausalLM.from_pretrained(checkpoint)


@pytest.fixture(scope="module")
def draft(tmp_path_factory):
    directory = tf.write_checkpoint(
        tmp_path_factory.mktemp("stream_draft"), seed=12, hidden_size=32, num_layers=1, intermediate_size=64
    )
    return ha.AutoModelForCausalLM.from_pretrained(directory)


def _kwargs(mode, draft):
    kw = dict(MODES[mode], max_new_tokens=NEW)
    if kw.get("assistant_model") == "draft":
        kw["assistant_model"] = draft
    return kw


class Recorder(ha.BaseStreamer):
    """Records every call: ("put", ids as a flat int64 list, dtype) and ("end",)."""

    def __init__(self):
        self.calls = []

    def put(self, value):
        a = np.asarray(value)
        self.calls.append(("put", a.reshape(-1).astype(np.int64).tolist(), a.dtype))

    def end(self):
        self.calls.append(("end",))


def _stream_from_thread(model, inputs, kwargs, streamer):
    """Runs generate(streamer=...) in a thread, consumes the streamer here: -> (pieces, sequences)."""
    result = {}

    def run():
        try:
            result["out"] = model.generate(**inputs, streamer=streamer, **kwargs)
        except BaseException as e:  # reported below; end() so the consumer does not wait out its timeout
            result["error"] = e
            streamer.end()

    thread = threading.Thread(target=run)
    thread.start()
    pieces = list(streamer)
    thread.join(JOIN_TIMEOUT)
    assert not thread.is_alive(), f"generate did not return within {JOIN_TIMEOUT} s"
    if "error" in result:
        raise result["error"]
    return pieces, result["out"]


# ---- the streamed text is exactly the decoded tokens -------------------------------------------------------------


@pytest.mark.parametrize("mode", list(MODES))
def test_iterator_streamer_text_is_exactly_the_decoded_new_tokens(tok, model, draft, mode):
    for prompt in PROMPTS:
        inputs = tok(prompt, return_tensors="np")
        streamer = ha.TextIteratorStreamer(tok, skip_prompt=True, timeout=JOIN_TIMEOUT, skip_special_tokens=True)
        pieces, out = _stream_from_thread(model, inputs, _kwargs(mode, draft), streamer)
        new = out[0, inputs["input_ids"].shape[1] :]
        expected = tok.decode(new, skip_special_tokens=True)
        got = "".join(pieces)
        assert got == expected, f"{mode}, prompt {prompt!r}: expected {expected!r}, streamed {got!r} in {pieces!r}"
        assert all(pieces), f"{mode}: the iterator should not yield empty strings: {pieces!r}"


@pytest.mark.parametrize("mode", ["greedy", "assisted", "prompt_lookup"])
def test_iterator_streamer_keeps_special_tokens_as_decode_does(tok, model, draft, mode):
    # Random models emit <s>, </s>, <pad> and <unk> now and then: without skip_special_tokens they are text too.
    inputs = tok(PROMPTS[0], return_tensors="np")
    streamer = ha.TextIteratorStreamer(tok, skip_prompt=True, timeout=JOIN_TIMEOUT)
    pieces, out = _stream_from_thread(model, inputs, dict(_kwargs(mode, draft), max_new_tokens=120), streamer)
    expected = tok.decode(out[0, inputs["input_ids"].shape[1] :])
    assert "".join(pieces) == expected, f"{mode}: expected {expected!r}, streamed {''.join(pieces)!r}"


def test_iterator_streamer_without_skip_prompt_streams_the_prompt_first(tok, model, draft):
    for mode in ("greedy", "assisted"):
        prompt = PROMPTS[2]
        inputs = tok(prompt, return_tensors="np")
        streamer = ha.TextIteratorStreamer(tok, skip_prompt=False, timeout=JOIN_TIMEOUT, skip_special_tokens=True)
        pieces, out = _stream_from_thread(model, inputs, _kwargs(mode, draft), streamer)
        got = "".join(pieces)
        expected = tok.decode(out[0], skip_special_tokens=True)
        assert got.startswith(prompt), f"{mode}: the stream should start with the prompt {prompt!r}, got {got[:60]!r}"
        assert got == expected, f"{mode}: expected prompt + completion {expected!r}, streamed {got!r}"


def test_text_streamer_prints_exactly_the_completion(tok, model, draft, capsys):
    for mode in ("greedy", "sampled", "assisted"):
        inputs = tok(PROMPTS[0], return_tensors="np")
        capsys.readouterr()
        out = model.generate(
            **inputs, streamer=ha.TextStreamer(tok, skip_prompt=True, skip_special_tokens=True), **_kwargs(mode, draft)
        )
        printed = capsys.readouterr().out
        expected = tok.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True) + "\n"
        assert printed == expected, f"{mode}: expected {expected!r} on stdout, got {printed!r}"


def test_text_streamer_can_be_reused_for_a_second_generation(tok, model, capsys):
    streamer = ha.TextStreamer(tok, skip_prompt=True, skip_special_tokens=True)
    expected = ""
    capsys.readouterr()
    for prompt in PROMPTS[:2]:
        inputs = tok(prompt, return_tensors="np")
        out = model.generate(**inputs, streamer=streamer, max_new_tokens=12)
        expected += tok.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True) + "\n"
    printed = capsys.readouterr().out
    assert printed == expected, f"expected {expected!r}, got {printed!r}"


def test_streamer_decoding_fed_token_by_token_equals_decode(tok):
    # Incremental decoding alone, with byte-fallback characters split across puts and newlines inside.
    texts = [
        "caf\u00e9 \U0001f600\U0001f680 x\n\u4e2d\u6587 y",
        "  a\n\n\tb  c ",
        "\U0001f600",
        "end with space ",
        "\u00e9\n\u00e9 \u00e9",
    ]
    for text in texts:
        ids = tok.encode(text)
        streamer = ha.TextIteratorStreamer(tok, skip_prompt=True, timeout=5)
        streamer.put(np.array(ids[:1]))  # the prompt: <s>
        for t in ids[1:]:
            streamer.put(np.array([t], dtype=np.int64))
        streamer.end()
        got = "".join(streamer)
        assert got == text, f"fed token by token: expected {text!r}, got {got!r}"


# ---- what put() and end() receive --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(MODES))
def test_put_gets_the_prompt_then_the_new_tokens_then_end_once(tok, model, draft, mode):
    inputs = tok(PROMPTS[1], return_tensors="np")
    rec = Recorder()
    out = model.generate(**inputs, streamer=rec, **_kwargs(mode, draft))
    S = inputs["input_ids"].shape[1]
    assert rec.calls[0][0] == "put" and rec.calls[0][1] == inputs["input_ids"][0].tolist(), (
        f"{mode}: first call should be put(prompt {inputs['input_ids'][0].tolist()}), got {rec.calls[0]}"
    )
    assert rec.calls[-1] == ("end",) and sum(c == ("end",) for c in rec.calls) == 1, (
        f"{mode}: expected exactly one end(), last; got {[c[0] for c in rec.calls]}"
    )
    chunks = [c[1] for c in rec.calls[1:-1]]
    assert all(c[0] == "put" for c in rec.calls[1:-1]), f"{mode}: only put() between the first put and end()"
    streamed = [t for c in chunks for t in c]
    assert streamed == out[0, S:].tolist(), f"{mode}: expected new tokens {out[0, S:].tolist()}, put got {streamed}"
    assert all(len(c) >= 1 for c in chunks), f"{mode}: an empty put: {chunks}"
    assert all(np.issubdtype(c[2], np.integer) for c in rec.calls[:-1]), (
        f"{mode}: put should get integer ids, got dtypes {[c[2] for c in rec.calls[:-1]]}"
    )
    if mode in ("greedy", "sampled"):
        assert all(len(c) == 1 for c in chunks), f"{mode}: plain generation puts one token at a time, got {chunks}"


def test_left_padded_single_prompt_puts_only_the_real_prompt_tokens(tok, model):
    inputs = tok(["def"], padding="max_length", max_length=8, return_tensors="np")
    assert inputs["attention_mask"][0, 0] == 0, "the test needs left padding"
    rec = Recorder()
    model.generate(**inputs, streamer=rec, max_new_tokens=4)
    real = inputs["input_ids"][0][inputs["attention_mask"][0] == 1].tolist()
    assert rec.calls[0][1] == real, f"the prompt put should hold the real tokens {real}, got {rec.calls[0][1]}"


def test_assisted_put_carries_whole_accepted_drafts_when_the_draft_is_the_target(tok, model):
    K = 4
    inputs = tok(PROMPTS[0], return_tensors="np")
    rec = Recorder()
    res = model.generate(
        **inputs,
        streamer=rec,
        assistant_model=model,
        num_assistant_tokens=K,
        assistant_confidence_threshold=0.0,
        max_new_tokens=NEW,
        return_dict_in_generate=True,
    )
    sizes = [len(c[1]) for c in rec.calls[1:-1]]
    assert max(sizes) > 1, (
        f"a draft equal to the target is always accepted: expected chunks of up to {K + 1}, got {sizes}"
    )
    assert max(sizes) <= K + 1, f"a chunk cannot exceed K + 1 = {K + 1} tokens, got {sizes}"
    assert sum(sizes) == res.sequences.shape[1] - inputs["input_ids"].shape[1], f"chunk sizes {sizes} do not add up"
    plain = model.generate(**inputs, max_new_tokens=NEW)
    assert np.array_equal(res.sequences, plain), "assisted greedy with a streamer must equal plain greedy"


def test_streamed_tokens_stop_at_eos_even_inside_an_accepted_draft(tok, model):
    # eos is made a token greedy decoding reaches after a few steps; a draft equal to the target proposes tokens
    # beyond it in the same chunk, which must not be streamed.
    inputs = tok(PROMPTS[0], return_tensors="np")
    S = inputs["input_ids"].shape[1]
    free = model.generate(**inputs, max_new_tokens=NEW, eos_token_id=None)[0, S:].tolist()
    eos = free[6]
    stop = free.index(eos)
    for kw in (dict(), dict(assistant_model=model, num_assistant_tokens=5, assistant_confidence_threshold=0.0)):
        rec = Recorder()
        out = model.generate(**inputs, streamer=rec, max_new_tokens=NEW, eos_token_id=eos, pad_token_id=0, **kw)
        streamed = [t for c in rec.calls[1:-1] for t in c[1]]
        assert streamed == free[: stop + 1], (
            f"{kw or 'plain'}: expected the tokens up to eos {free[: stop + 1]}, streamed {streamed}"
        )
        assert out[0, S:].tolist() == free[: stop + 1], f"output {out[0, S:].tolist()}, expected {free[: stop + 1]}"


def test_streamer_does_not_change_the_output(tok, model, draft):
    for mode in MODES:
        inputs = tok(PROMPTS[0], return_tensors="np")
        kw = _kwargs(mode, draft)
        with_streamer = model.generate(**inputs, streamer=Recorder(), **kw)
        without = model.generate(**inputs, **kw)
        assert np.array_equal(with_streamer, without), (
            f"{mode}: output with a streamer {with_streamer} differs from output without {without}"
        )


# ---- a streamer that fails, bad streamers -----------------------------------------------------------------------


class StreamerBoom(Exception):
    pass


class FailingStreamer(ha.BaseStreamer):
    """Raises StreamerBoom on put number `fail_at` (0 is the prompt)."""

    def __init__(self, fail_at):
        self.fail_at, self.n, self.ended = fail_at, 0, False

    def put(self, value):
        n, self.n = self.n, self.n + 1
        if n == self.fail_at:
            raise StreamerBoom(f"boom at put {n}")

    def end(self):
        self.ended = True


@pytest.mark.parametrize("mode", list(MODES))
def test_streamer_exception_stops_generation_and_propagates_unchanged(tok, model, draft, mode):
    inputs = tok(PROMPTS[0], return_tensors="np")
    kw = _kwargs(mode, draft)
    reference = model.generate(**inputs, **kw)
    for fail_at in (0, 1, 3):
        streamer = FailingStreamer(fail_at)
        with pytest.raises(StreamerBoom) as e:
            model.generate(**inputs, streamer=streamer, **kw)
        assert type(e.value) is StreamerBoom and str(e.value) == f"boom at put {fail_at}", (
            f"{mode}: expected StreamerBoom('boom at put {fail_at}'), got {type(e.value).__name__}({e.value})"
        )
        assert streamer.n == fail_at + 1, (
            f"{mode}: generation should stop at the failing put; put was called "
            f"{streamer.n} times, the failure was call {fail_at + 1}"
        )
        again = model.generate(**inputs, **kw)
        assert np.array_equal(again, reference), (
            f"{mode}: after a failed streamer the model gives {again}, expected {reference}"
        )


def test_streamer_raising_a_builtin_error_keeps_its_type_and_message(tok, model, draft):
    class Bad(ha.BaseStreamer):
        def put(self, value):
            if np.asarray(value).size == 1 and getattr(self, "seen_prompt", False):
                raise KeyError("no such key 42")
            self.seen_prompt = True

        def end(self):
            pass

    inputs = tok("x", return_tensors="np")
    for kw in (dict(), dict(assistant_model=draft)):
        with pytest.raises(KeyError) as e:
            model.generate(**inputs, streamer=Bad(), max_new_tokens=8, **kw)
        assert e.value.args == ("no such key 42",), f"expected KeyError('no such key 42'), got {e.value!r}"


def test_batch_of_two_with_a_streamer_raises_invalid_input(tok, model):
    inputs = tok(["a", "bb cc"], padding=True, return_tensors="np")
    rec = Recorder()
    with pytest.raises(InvalidInputError) as e:
        model.generate(**inputs, streamer=rec, max_new_tokens=4)
    assert "one prompt" in str(e.value) or "batch" in str(e.value), f"the message should name the batch: {e.value}"
    # no token is streamed, and the stream is ended once (BaseStreamer.stop), so that a consumer never waits on it
    assert rec.calls == [("end",)], f"a refused call should stream nothing and end the stream once, got {rec.calls}"


def test_streamer_without_put_and_end_raises_invalid_input(tok, model):
    inputs = tok("a", return_tensors="np")

    class OnlyPut:
        def put(self, value):
            pass

    for bad in (object(), "stdout", OnlyPut(), print):
        with pytest.raises(InvalidInputError) as e:
            model.generate(**inputs, streamer=bad, max_new_tokens=4)
        assert "put" in str(e.value) and "end" in str(e.value), f"the message should name put and end: {e.value}"


def test_text_streamers_refuse_a_batch_put(tok):
    for streamer in (ha.TextStreamer(tok), ha.TextIteratorStreamer(tok)):
        with pytest.raises(InvalidInputError):
            streamer.put(np.ones((2, 3), dtype=np.int64))


# ---- the GIL ---------------------------------------------------------------------------------------------------


def test_gil_is_released_while_the_core_generates_between_puts(tmp_path):
    # An event, not a count. The old version counted how often a spinner (sleep(0.0001) between counts) ran
    # between the first and last put, and once got [0, 20]: 64 plain tokens of this model take about a
    # millisecond, one or two wake-ups of a sleeping thread on a loaded machine, and the generating thread
    # re-takes the GIL at each put before a freshly woken thread is scheduled; so a 0 measured the machine's
    # timer and scheduler, not the binding (assisted generation, a few times longer, counted 20).
    #
    # Here the switch interval is huge, so no thread is ever made to give the GIL up: another Python thread runs
    # only where the holder lets it go. Each put records its index and hands a witness thread a token; the
    # witness, blocked on that token, wakes, waits for the GIL and records the index of the last put it saw.
    # put itself never lets the GIL go, and between two puts of new tokens the generating thread is inside the
    # core's loop; so a witness that saw put i with 1 <= i < last ran while the core worked between puts i and
    # i + 1, which it can only do if the binding released the GIL there (put 0 is the prompt, put from Python
    # before the core starts). Every put is a chance and a generation has hundreds; generations are repeated,
    # up to TRIES, until the event is seen, so no speed or load of the machine can make it fail, while a binding
    # that keeps the GIL fails every try.
    TRIES, N = 40, 300
    directory = tf.write_checkpoint(tmp_path, seed=21, hidden_size=256, intermediate_size=512)
    tok = ha.AutoTokenizer.from_pretrained(directory)
    model = ha.AutoModelForCausalLM.from_pretrained(directory)
    inputs = tok("def f(x):", return_tensors="np")
    state = {"generation": 0, "put": -1, "stop": False}
    seen = []  # (generation, index of the last put) each time the witness ran
    token = threading.Lock()
    token.acquire()  # held: no token; put releases it (gives one), the witness acquires it (takes it)

    def witness():
        while True:
            token.acquire()
            if state["stop"]:
                return
            seen.append((state["generation"], state["put"]))

    class HandingStreamer(ha.BaseStreamer):
        def __init__(self):
            self.n = 0

        def put(self, value):
            state["put"], self.n = self.n, self.n + 1
            if token.locked():
                token.release()

        def end(self):
            pass

    modes = {
        "plain": dict(),
        "assisted": dict(assistant_model=model, num_assistant_tokens=3, assistant_confidence_threshold=0.0),
    }
    tries = {}
    old = sys.getswitchinterval()
    thread = threading.Thread(target=witness, daemon=True)
    try:
        sys.setswitchinterval(1000.0)
        thread.start()
        for mode, kw in modes.items():
            for attempt in range(1, TRIES + 1):
                state["generation"] += 1
                streamer = HandingStreamer()
                model.generate(**inputs, streamer=streamer, max_new_tokens=N, eos_token_id=None, **kw)
                last = streamer.n - 1
                assert last >= 2, f"{mode}: expected several puts of new tokens, got {streamer.n} puts"
                if any(g == state["generation"] and 1 <= i < last for g, i in list(seen)):
                    tries[mode] = attempt
                    break
    finally:
        state["stop"] = True
        sys.setswitchinterval(old)
        if token.locked():
            token.release()
        thread.join(JOIN_TIMEOUT)
    assert not thread.is_alive(), f"the witness thread did not stop within {JOIN_TIMEOUT} s"
    missing = [mode for mode in modes if mode not in tries]
    assert not missing, (
        f"{missing}: in {TRIES} generations of {N} tokens each, another Python thread never ran "
        "between two puts of new tokens, while the core generated: the binding kept the GIL "
        f"(it ran there after {tries} tries in the other modes)"
    )


def _wait_for(predicate, what):
    """Polls predicate every 10 ms for up to 60 s: an event, not a duration (it holds at once on any machine)."""
    for _ in range(6000):
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _interrupt_at(n, files):
    """A trace function raising KeyboardInterrupt before the n-th bytecode (from 0) that this thread runs in frames of
    `files`: where a Ctrl-C's handler may run, between two bytecodes of the main thread. -> (tracer, fired)."""
    count, fired = [0], []

    def local(frame, event, arg):
        if event == "opcode" and not fired:
            if count[0] == n:
                fired.append(frame.f_code.co_name)
                raise KeyboardInterrupt
            count[0] += 1
        return local

    def tracer(frame, event, arg):
        if fired or not frame.f_code.co_filename.endswith(files):
            return None
        frame.f_trace_opcodes = True
        return local(frame, event, arg)

    return tracer, fired


def test_iterator_streamer_releases_its_consumer_wherever_ctrl_c_lands_in_put_or_end(tok):
    """A Ctrl-C raised between any two bytecodes of the streamer's put() and end() (and of the queue and threading code
    they call), then the stop(error) that generate() calls, must end the consumer's iteration: with the whole text and
    StopIteration, or with GenerationStoppedError caused by the interrupt; never a consumer waiting forever, nor a
    stop() that blocks (seen: queue.Queue's lock left held by an interrupt inside Condition.__enter__, and the
    interrupt tests' child hanging)."""
    ids = tok(["x = 1\nfor i in range(3):\n    print(i)\n"], return_tensors="np")["input_ids"]
    chunks = [ids[:, :2], ids[0, 2:3], ids[:, 3:6], ids[0, 6:]]
    files = ("streamers.py", "queue.py", "threading.py")
    landed = []
    for n in range(100000):
        streamer = ha.TextIteratorStreamer(tok)
        got, ended = [], []

        def consume(streamer=streamer, got=got, ended=ended):
            try:
                for text in streamer:
                    got.append(text)
                ended.append("end")
            except ha.GenerationStoppedError as e:
                ended.append(type(e.__cause__).__name__)

        consumer = threading.Thread(target=consume, daemon=True)
        consumer.start()
        tracer, fired = _interrupt_at(n, files)
        stopper = threading.Thread(target=lambda: None)
        sys.settrace(tracer)
        try:
            for chunk in chunks:
                streamer.put(chunk)
            streamer.end()
        except KeyboardInterrupt as error:
            sys.settrace(None)
            stopper = threading.Thread(target=streamer.stop, args=(error,), daemon=True)  # generate()'s stop_streamer
        finally:
            sys.settrace(None)
        stopper.start()
        stopper.join(60)
        consumer.join(60)
        where = f"interrupted before bytecode {n} (in {fired[0] if fired else 'nothing: no interrupt'})"
        assert not stopper.is_alive(), f"{where}: stop() blocked"
        assert not consumer.is_alive(), f"{where}: the consumer still waits after stop()"
        assert ended in (["end"], ["KeyboardInterrupt"]), f"{where}: the consumer ended with {ended}"
        if ended == ["end"]:
            assert "".join(got) == tok.decode(ids[0]), f"{where}: the stream ended whole but its text differs"
        if not fired:
            break
        landed.append(fired[0])
    assert {"put", "on_finalized_text", "end"} <= set(landed), f"the interrupt never landed in some of them: {landed}"
