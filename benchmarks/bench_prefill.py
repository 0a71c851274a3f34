#!/usr/bin/python3
"""Prompt prefill of the shipped target (habana-assist/pycode held in float32) against llama.cpp's prompt
processing of the same checkpoint, on this machine, in one run.

Ours: one append of an N-token prompt to an empty cache (logits at its last token only, as a generation's
prefill), through the batch-invariant kernels, and through OpenBLAS (blas_prefill=True, whole 128-token blocks);
best of --repeats, the cases interleaved. llama.cpp: `llama-bench -p N -n 0 -t THREADS -r REPEATS` on the f32
GGUF of the same weights (its "pp" test: tokens/s of a prompt of N tokens), run between our rounds. N = 64,
128, 256, 512. Printed: tokens/s of each, ours over llama.cpp's and OpenBLAS over the kernels, and the kernels
OpenBLAS chose for this CPU (OPENBLAS_CORETYPE in the environment overrides its choice: Debian 12's OpenBLAS
runs Prescott's SSE3 kernels on CPUs newer than itself).

llama.cpp is not packaged by Debian: benchmarks/llamacpp_peer.sh builds llama-bench from a source snapshot and
writes the GGUF (see there). Without it, only our figures are printed.
Usage: /usr/bin/python3 benchmarks/bench_prefill.py [--llama-bench PATH] [--gguf PATH] [--repeats 5]
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import habana_assist as ha
from habana_assist import _core
from habana_assist.cli import demo_prompts

PEER = "/tmp/habana_assist_bench/llama.cpp-build/bin/llama-bench"
GGUF = "/tmp/habana_assist_bench/pycode-f32.gguf"
LENGTHS = (64, 128, 256, 512)


def ours(model, ids, repeats):
    """Best seconds of one append of ids (n,) to an empty cache of model, logits at the last token."""
    n = len(ids)
    want = np.zeros(n, np.uint8)
    want[-1] = 1
    logits = np.empty((1, model.vocab_size), np.float32)
    best = float("inf")
    for _ in range(repeats):
        ctx = _core.Context(model._core, 1, n + 1, model.blas_prefill)
        t0 = time.perf_counter()
        ctx.append(np.zeros(n, np.int32), ids, want, logits)
        best = min(best, time.perf_counter() - t0)
    return best


def peer(binary, gguf, n, threads, repeats):
    """llama-bench's mean tokens/s of an n-token prompt, or None if it fails."""
    res = subprocess.run([binary, "-m", gguf, "-p", str(n), "-n", "0", "-t", str(threads), "-r", str(repeats),
                          "-o", "json"], capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        print(f"llama-bench failed ({res.returncode}): {res.stderr[-500:]}", file=sys.stderr)
        return None
    rows = json.loads(res.stdout)
    return float(rows[0]["avg_ts"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-bench", default=PEER)
    ap.add_argument("--gguf", default=GGUF)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (best of each is kept)")
    args = ap.parse_args()
    tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
    kernels = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode", dtype="float32")
    blas = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode", dtype="float32", blas_prefill=True)
    text = "".join(t for _, t in demo_prompts(4, 60))
    ids = tok(text, return_tensors="np")["input_ids"][0].astype(np.int32)
    assert len(ids) >= max(LENGTHS), f"the held-out text gave only {len(ids)} tokens"
    have_peer = os.path.exists(args.llama_bench) and os.path.exists(args.gguf)
    threads = ha.get_num_threads()
    best = {}
    for _ in range(args.rounds):
        for n in LENGTHS:
            for name, model in (("kernels", kernels), ("openblas", blas)):
                best[name, n] = min(best.get((name, n), float("inf")), ours(model, ids[:n], args.repeats))
            if have_peer:
                rate = peer(args.llama_bench, args.gguf, n, threads, args.repeats)
                if rate is not None:
                    best["llama.cpp", n] = min(best.get(("llama.cpp", n), float("inf")), n / rate)
    print(f"prefill of the shipped target in float32 (26.7M parameters), {threads} threads, kernels "
          f"{ha.kernels_name()}, OpenBLAS's kernels {_core.blas_core()}; tokens/s, best of {args.rounds} interleaved "
          f"rounds of {args.repeats}")
    print(f"  {'prompt':>6s} {'kernels':>9s} {'openblas':>9s} {'llama.cpp':>10s} {'kernels/llama.cpp':>18s} "
          f"{'openblas/kernels':>17s}")
    for n in LENGTHS:
        k, b = n / best["kernels", n], n / best["openblas", n]
        lc = n / best["llama.cpp", n] if ("llama.cpp", n) in best else None
        print(f"  {n:6d} {k:9.0f} {b:9.0f} {lc if lc else float('nan'):10.0f} "
              f"{(k / lc if lc else float('nan')):18.2f} {b / k:17.2f}")
    if not have_peer:
        print(f"  (no llama.cpp: build it with `bash benchmarks/llamacpp_peer.sh SNAPSHOT_DIR`; looked for "
              f"{args.llama_bench} and {args.gguf})")


if __name__ == "__main__":
    main()
