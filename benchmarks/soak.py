#!/usr/bin/python3
"""Soak: many generate calls of mixed kinds in one process with the shipped pair; RSS must stay flat.

10,000 calls by default (`--calls N`), each a short generation (a few tokens), cycling through: plain greedy,
plain sampled, assisted greedy, assisted sampled (rejection and coupled), prompt lookup, a left-padded batch,
a streamer (plain and assisted), return_dict_in_generate with output_scores (plain and assisted), forward
with a Cache (prefill, one token, crop, one token), and calls that must fail with a given error: a token id
outside the vocabulary, a prompt + max_new_tokens past max_cache_len, a Cache appended past its capacity, an
unknown argument, an invalid argument (temperature=0 with do_sample), and a streamer that raises mid-way.

Every call is checked: greedy kinds must return the same tokens every time (assisted greedy the plain greedy
tokens), sampled kinds the same tokens for the same seed, each failing call exactly its error. Every
--every calls (500) it prints VmRSS (from /proc/self/status, after gc.collect()) as one row of a curve.

Exit status: 0 when every call behaved and RSS grew by at most --bound-mb (8 MB) from the end of the warm-up
(call 1000, or a fifth of the calls when there are fewer than 5000) to the last call; 1 otherwise. The bound
is about memory only: a leak of one 4 KB page a call would add 36 MB over 9000 calls. Nothing here is timed
(the rate printed at the end is for information). One core thread by default: 10,000 calls then take 2-4
minutes on a 2-core machine that other work shares, where two threads handing off under contention took 4x
as long; --threads 2 soaks the thread pool too.

Usage: /usr/bin/python3 benchmarks/soak.py [--calls N] [--every K] [--threads T] [--bound-mb MB]
"""

import argparse
import gc
import os
import sys
import time

import numpy as np

try:
    import habana_assist as ha  # the package on the path (an installed one, or the test suite's on PYTHONPATH)
except ImportError:  # run from a checkout: the package is the folder above benchmarks/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import habana_assist as ha
from habana_assist.errors import CacheCapacityError, InvalidInputError

PROMPTS = [
    "def fib(n):\n    ",
    "import os\nimport sys\n\n",
    "class Stack:\n    def __init__(self):\n        self.",
    "for i in range(10):\n    print(",
    "    return ",
]
NEW = 4  # new tokens a call


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS line in /proc/self/status")


class Collect(ha.BaseStreamer):
    """Keeps what it is given: put(prompt), then put(new ids) for each decided chunk."""

    def __init__(self):
        self.ids = []

    def put(self, value):
        self.ids.extend(int(t) for t in np.asarray(value).reshape(-1))

    def end(self):
        self.ended = True


class StreamerStop(Exception):
    pass


class Raising(ha.BaseStreamer):
    """Raises at its second put: after the prompt, at the first new token."""

    def __init__(self):
        self.puts = 0

    def put(self, value):
        self.puts += 1
        if self.puts == 2:
            raise StreamerStop("soak: the streamer stops the generation")

    def end(self):
        pass


def kinds(tok, model, draft):
    """-> [(name, call(prompt ids (1, S), seed) -> something comparable, expected exception or None)]."""
    batch_texts = [PROMPTS[0], PROMPTS[1]]
    enc = [tok(t, return_tensors="np")["input_ids"][0] for t in batch_texts]
    width = max(len(e) for e in enc)
    pad = model.generation_config.pad_token_id
    batch = np.array([[pad] * (width - len(e)) + list(e) for e in enc])
    mask = np.array([[0] * (width - len(e)) + [1] * len(e) for e in enc])
    sample = dict(do_sample=True, temperature=0.8, top_p=0.95, max_new_tokens=NEW)

    def streamed(ids, round_seed, **kw):
        s = Collect()
        out = model.generate(ids, streamer=s, max_new_tokens=NEW, **kw)
        if s.ids != [int(t) for t in out[0]]:
            raise AssertionError(f"the streamer got {s.ids}, generate returned {out[0].tolist()}")
        return out

    def scores(ids, round_seed, **kw):
        res = model.generate(ids, max_new_tokens=NEW, return_dict_in_generate=True, output_scores=True, **kw)
        if len(res.scores) != res.sequences.shape[1] - ids.shape[1]:
            raise AssertionError(f"{len(res.scores)} scores for {res.sequences.shape[1] - ids.shape[1]} new tokens")
        return res.sequences, np.stack(res.scores).argmax(-1)

    def cached(ids, seed):
        cache = model.create_cache(batch_size=1, max_cache_len=ids.shape[1] + 4)
        first = model(ids, past_key_values=cache).logits[0, -1]
        nxt = np.array([[int(first.argmax())]])
        second = model(nxt, past_key_values=cache).logits[0, -1]
        cache.crop(ids.shape[1])
        again = model(nxt, past_key_values=cache).logits[0, -1]
        if not np.array_equal(second, again) or cache.get_seq_length() != ids.shape[1] + 1:
            raise AssertionError("forward after crop differs from the first forward of the same token")
        return int(first.argmax()), int(second.argmax())

    def cache_overflow(ids, seed):
        cache = model.create_cache(batch_size=1, max_cache_len=ids.shape[1] + 1)
        model(ids, past_key_values=cache)
        model(np.array([[5, 6]]), past_key_values=cache)

    def bad_token(ids, seed):
        bad = ids.copy()
        bad[0, -1] = model.vocab_size + seed
        model.generate(bad, max_new_tokens=NEW)

    return [
        ("plain greedy", lambda ids, seed: model.generate(ids, max_new_tokens=NEW), None),
        ("plain sampled", lambda ids, seed: model.generate(ids, seed=seed, **sample), None),
        (
            "assisted greedy",
            lambda ids, seed: model.generate(ids, assistant_model=draft, max_new_tokens=NEW, num_assistant_tokens=3),
            None,
        ),
        ("assisted rejection", lambda ids, seed: model.generate(ids, assistant_model=draft, seed=seed, **sample), None),
        (
            "assisted coupled",
            lambda ids, seed: model.generate(
                ids, assistant_model=draft, seed=seed, assisted_sampling="coupled", **sample
            ),
            None,
        ),
        ("prompt lookup", lambda ids, seed: model.generate(ids, prompt_lookup_num_tokens=3, max_new_tokens=NEW), None),
        ("left-padded batch", lambda ids, seed: model.generate(batch, attention_mask=mask, max_new_tokens=NEW), None),
        ("streamer", lambda ids, seed: streamed(ids, seed), None),
        (
            "assisted streamer",
            lambda ids, seed: streamed(ids, seed, assistant_model=draft, num_assistant_tokens=3),
            None,
        ),
        ("output_scores", lambda ids, seed: scores(ids, seed), None),
        (
            "assisted output_scores",
            lambda ids, seed: scores(ids, seed, assistant_model=draft, do_sample=True, seed=seed),
            None,
        ),
        ("forward with a Cache", cached, None),
        ("bad token id", bad_token, InvalidInputError),
        (
            "past max_cache_len",
            lambda ids, seed: model.generate(ids, max_new_tokens=model.max_cache_len),
            CacheCapacityError,
        ),
        ("Cache past its capacity", cache_overflow, CacheCapacityError),
        ("unknown argument", lambda ids, seed: model.generate(ids, max_new_tokens=NEW, num_beans=2), InvalidInputError),
        ("invalid argument", lambda ids, seed: model.generate(ids, do_sample=True, temperature=0.0), ValueError),
        (
            "raising streamer",
            lambda ids, seed: model.generate(ids, streamer=Raising(), max_new_tokens=NEW),
            StreamerStop,
        ),
    ]


def same(a, b):
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b)
    return a == b


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=10_000, help="generate calls in all (default 10000)")
    parser.add_argument("--every", type=int, default=500, help="calls between RSS samples (default 500)")
    parser.add_argument(
        "--threads", type=int, default=1, help="core threads (default 1: a few minutes even on a busy 2-core machine)"
    )
    parser.add_argument(
        "--bound-mb",
        type=float,
        default=8.0,
        help="largest RSS growth after the warm-up that passes, in MB (default 8)",
    )
    args = parser.parse_args(argv)
    if args.calls < 1 or args.every < 1 or args.threads < 1:
        parser.error("--calls, --every and --threads must be positive")
    ha.set_num_threads(args.threads)
    warmup = min(1000, args.calls // 5)

    tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
    model = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode")
    draft = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
    prompts = [tok(p, return_tensors="np")["input_ids"] for p in PROMPTS]
    table = kinds(tok, model, draft)
    print(
        f"soak: {args.calls} calls cycling through {len(table)} kinds, {NEW} new tokens each, "
        f"kernels {ha.kernels_name()}, {args.threads} core thread(s); "
        f"RSS bound {args.bound_mb:g} MB after call {warmup}"
    )
    print(f"{'calls':>7} {'RSS MB':>8} {'vs start':>9}")

    first = {}  # (kind, prompt, seed) -> the first result: every later one must equal it
    failures, counts = [], {name: 0 for name, _, _ in table}
    gc.collect()
    start_rss, curve, at_warmup = rss_mb(), [], None
    print(f"{0:7d} {start_rss:8.1f} {0.0:+9.1f}")
    t0 = time.perf_counter()
    for i in range(args.calls):
        name, call, expected = table[i % len(table)]
        k = i // len(table)  # the round: the prompt and seed vary from round to round, all pairs in turn
        p, seed = k % len(prompts), k % 3
        try:
            result = call(prompts[p], seed)
        except Exception as e:  # noqa: BLE001 - each kind says which error it must raise
            if expected is None or not isinstance(e, expected):
                failures.append(f"call {i} ({name}): raised {type(e).__name__}: {e}")
        else:
            if expected is not None:
                failures.append(f"call {i} ({name}): returned, expected {expected.__name__}")
            else:
                key = ("plain greedy" if name == "assisted greedy" else name, p, seed)  # assisted greedy is plain
                if key in first and not same(first[key], result):
                    failures.append(f"call {i} ({name}): result differs from the first call with the same arguments")
                first.setdefault(key, result)
        counts[name] += 1
        done = i + 1
        if done == warmup:
            gc.collect()
            at_warmup = rss_mb()
        if done % args.every == 0 or done == args.calls:
            gc.collect()
            rss = rss_mb()
            curve.append((done, rss))
            print(f"{done:7d} {rss:8.1f} {rss - start_rss:+9.1f}", flush=True)
        if len(failures) > 20:
            break
    seconds = time.perf_counter() - t0

    end_rss = curve[-1][1]
    growth = end_rss - (at_warmup if at_warmup is not None else start_rss)
    print(
        f"calls per kind: {min(counts.values())}-{max(counts.values())}; {args.calls / seconds:.0f} calls/s "
        f"({seconds:.0f} s)"
    )
    print(
        f"RSS growth from call {warmup} ({at_warmup if at_warmup is not None else start_rss:.1f} MB) to call "
        f"{curve[-1][0]} ({end_rss:.1f} MB): {growth:+.1f} MB (bound {args.bound_mb:g} MB)"
    )
    for f in failures[:20]:
        print("FAIL", f)
    ok = not failures and growth <= args.bound_mb
    print("soak: OK" if ok else f"soak: FAILED ({len(failures)} bad calls, RSS growth {growth:+.1f} MB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
