"""Ctrl-C from outside, as a user or a notebook's "Interrupt kernel" sends it: a child process runs long pieces of
work and its parent sends it a real SIGINT while each runs. Used by tests/test_interrupts.py (which asserts what
happened) and benchmarks/bench_interrupt.py (which reports the latencies).

Protocol: the child (`python3 tests/interrupt_child.py NAME...`) runs each named scenario in turn with the
shipped pair. A scenario prints `ready NAME` once its work is under way (for generation: after the first new
token reached the streamer), then repeats the work up to TRIES times until it is interrupted (a work item lasts
long enough for the signal to arrive during the first; the repeats only make that independent of the machine's
speed). The parent, a moment after `ready`, notes the monotonic clock and sends SIGINT. The child then prints
`result {json}`: where the KeyboardInterrupt surfaced, the clock when it was caught, and what it checked
afterwards (the model still usable, a cache as before, a streamer's consumer released, no pool thread left
spinning). CLOCK_MONOTONIC is one clock for the whole machine, so caught - sent is the latency.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
TRIES = 30
SCENARIOS = ("generate", "assisted", "prompt_lookup", "assisted_sampled", "batched", "wrapped", "forward",
             "from_pretrained", "handler_without_raise", "ignored")


# ---- the parent --------------------------------------------------------------------------------------------

def default_sigint():
    """preexec_fn for a child that must see Ctrl-C as a terminal user does: a process started in the background
    by a non-interactive shell (a CI runner, `cmd &`) inherits SIGINT ignored, and Python then installs no
    handler for it, so SIGINT would do nothing at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_scenarios(names, delay=0.05, timeout=600, env=None):
    """Runs a child over `names`, interrupting each scenario `delay` seconds after it is ready (so that the signal
    finds the work inside the core, not in the Python around it) -> list of result dicts, each with latency_s
    (SIGINT sent -> KeyboardInterrupt caught). A child that has not finished within `timeout` seconds (a hang)
    is killed and its output raised as an AssertionError, with every thread's stack as it hung (the child's
    faulthandler, on SIGUSR1). The child's stderr goes to a file, so that however much it writes it never
    blocks on a pipe nobody reads until the end."""
    err = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([PYTHON, os.path.abspath(__file__), *names], stdout=subprocess.PIPE,
                            stderr=err, text=True, cwd=ROOT, preexec_fn=default_sigint,
                            env={**os.environ, "PYTHONPATH": ROOT, **(env or {})})

    def hung():
        proc.send_signal(signal.SIGUSR1)  # the stacks, written before the kill (faulthandler writes at once)
        time.sleep(1)
        proc.kill()

    watchdog = threading.Timer(timeout, hung)
    watchdog.start()
    sent, results = {}, []
    try:
        for line in proc.stdout:
            if line.startswith("ready "):
                name = line.split()[1]
                time.sleep(delay)
                sent[name] = time.monotonic()
                proc.send_signal(signal.SIGINT)
            elif line.startswith("result "):
                r = json.loads(line[len("result "):])
                if r["name"] in sent and r.get("caught") is not None:
                    r["latency_s"] = r["caught"] - sent[r["name"]]
                results.append(r)
        code = proc.wait()
        err.seek(0)
        stderr = err.read()
    finally:
        watchdog.cancel()
        err.close()
    if code != 0 or len(results) != len(names):
        raise AssertionError(f"the interrupt child exited {code} with {len(results)} of {len(names)} results; "
                             f"stderr:\n{stderr[-8000:]}")
    return results


# ---- the child ---------------------------------------------------------------------------------------------

def _announce(name):
    print(f"ready {name}", flush=True)


def _pool_threads_idle():
    """True once every thread but this one sleeps (state S): the core's pool waits on its condition variable
    after a short spin. Polled up to 500 times 10 ms apart: an event, not a duration."""
    me = str(threading.get_native_id())
    for _ in range(500):
        states = []
        for tid in os.listdir("/proc/self/task"):
            if tid == me:
                continue
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:  # a thread that just ended
                pass
        if all(s in "SDI" for s in states):
            return True
        time.sleep(0.01)
    return False


def _child(names):
    import faulthandler

    import numpy as np

    import habana_assist as ha

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # run_scenarios asks for the stacks of a hang
    tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
    model = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode")
    draft = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
    prompt = tok(["import os\n"], return_tensors="np")
    reference = model.generate(**prompt, max_new_tokens=8)  # what the model must still give afterwards
    long = dict(max_new_tokens=1000, eos_token_id=None)

    class ReadyStreamer(ha.TextIteratorStreamer):
        """Announces the scenario when the first new tokens arrive; a thread consumes the text."""

        def __init__(self, name):
            super().__init__(tok, skip_prompt=True)
            self.name, self.puts, self.consumer_saw = name, 0, None
            self.thread = threading.Thread(target=self.consume)
            self.thread.start()

        def put(self, value):
            super().put(value)
            self.puts += 1
            if self.puts == 2:
                _announce(self.name)

        def consume(self):
            try:
                for _ in self:
                    pass
                self.consumer_saw = "end"
            except ha.GenerationStoppedError as e:
                self.consumer_saw = f"GenerationStoppedError caused by {type(e.__cause__).__name__}"

    wrapped = None
    if "wrapped" in names:  # the shipped target as a torch model (ha.wrap) with the native draft
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from torch_causal_lm import TorchCausalLM
        wrapped = ha.wrap(TorchCausalLM(model.name_or_path), overlap=True)  # drafting ahead beside its forward
        wrapped_reference = wrapped.generate(**prompt, max_new_tokens=8, assistant_model=draft)

    def generation(kwargs, batch=False, target=None):
        def work(name, first):
            streamer = None if batch else ReadyStreamer(name)
            ids = np.array([[3, 3, 1, 500], [1, 700, 800, 900]]) if batch else prompt["input_ids"]
            mask = np.array([[0, 0, 1, 1], [1, 1, 1, 1]]) if batch else None
            if batch and first:
                _announce(name)
            try:
                (target or model).generate(ids, attention_mask=mask, streamer=streamer, **long, **kwargs)
            finally:
                if streamer is not None:
                    streamer.thread.join()
                    state["consumer"] = streamer.consumer_saw
        return work

    def forward_work(name, first):
        cache = state["cache"] = model.create_cache(1, 1024)
        model(state["ids"][:, :8], past_key_values=cache)
        if first:
            _announce(name)
        model(state["ids"][:, 8:], past_key_values=cache)

    def load_work(name, first):
        if first:
            _announce(name)
        # float32 (bfloat16 widened): about 2.5 times the parent's delay here, so that the signal lands well inside
        # the first load (an int8 load, shorter than the delay, let it land in a later load's last instructions
        # once in about 40 runs, where Python raises it only after the load has returned)
        ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode", dtype="float32")

    work = {
        "generate": generation({}),
        "assisted": generation(dict(assistant_model=draft)),
        "prompt_lookup": generation(dict(prompt_lookup_num_tokens=10)),
        "assisted_sampled": generation(dict(assistant_model=draft, do_sample=True, seed=1)),
        "batched": generation(dict(assistant_model=draft), batch=True),
        "wrapped": generation(dict(assistant_model=draft), target=wrapped),
        "forward": forward_work,
        "from_pretrained": load_work,
    }

    for name in names:
        state = {"ids": np.random.default_rng(0).integers(4, 4000, size=(1, 1000))}
        result = {"name": name, "where": None, "caught": None, "tries": 0}
        if name in ("handler_without_raise", "ignored"):
            # A Python handler that does not raise: the core asks Python, nothing is raised, the work goes on.
            # SIGINT ignored: nothing reaches the core at all.
            calls = []
            handler = signal.SIG_IGN if name == "ignored" else lambda signum, frame: calls.append(state.get("inside"))
            old = signal.signal(signal.SIGINT, handler)
            try:
                state["inside"] = True
                _announce(name)
                out = model.generate(**prompt, **long)
                state["inside"] = False
                result.update(where="none", new_tokens=int(out.shape[1] - prompt["input_ids"].shape[1]),
                              handler_calls=calls)
            finally:
                signal.signal(signal.SIGINT, old)
            print("result " + json.dumps(result), flush=True)
            continue
        try:
            for i in range(TRIES):
                result["tries"] = i + 1
                state["inside"] = True
                work[name](name, i == 0)
                state["inside"] = False
            result["where"] = "never"
        except KeyboardInterrupt:
            result["caught"] = time.monotonic()
            result["where"] = "inside" if state["inside"] else "between"
        result["consumer"] = state.get("consumer")
        # after the interrupt: the model computes what it computed before
        result["model_usable"] = bool(np.array_equal(model.generate(**prompt, max_new_tokens=8), reference))
        if name == "wrapped":  # and the wrapped model too (its cache was taken back wherever the signal landed)
            result["model_usable"] &= bool(np.array_equal(
                wrapped.generate(**prompt, max_new_tokens=8, assistant_model=draft), wrapped_reference))
        if "cache" in state:  # a cache interrupted mid-append holds what it held before, and goes on exactly
            cache = state["cache"]
            result["cache_length"] = [cache.get_seq_length(), cache._ctx.length(0)]
            more = state["ids"][:, 8:40]
            got = model(more, past_key_values=cache).logits
            want = model(state["ids"][:, :40]).logits[:, 8:]
            result["cache_goes_on_exactly"] = bool(np.array_equal(got, want))
        result["pool_idle"] = _pool_threads_idle()
        print("result " + json.dumps(result), flush=True)


if __name__ == "__main__":
    _child(sys.argv[1:])
