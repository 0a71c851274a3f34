#!/usr/bin/python3
"""Prompt prefill of the shipped target (habana-assist/pycode) in each of our numerics classes against llama.cpp's
prompt processing of the same checkpoint in each of its formats, on this machine, in one run.

Ours: one append of an N-token prompt to an empty cache (logits at its last token only, as a generation's
prefill), through the batch-invariant kernels in each class of --classes (default float32, bfloat16-pairs, w8a8),
and in float32 through OpenBLAS too (blas_prefill=True, whole 128-token blocks); best of --repeats, the cases
interleaved. llama.cpp: `llama-bench -p N -n 0 -t THREADS -r REPEATS` on the f32, bf16 and q8_0 GGUFs of the same
weights found in --gguf-dir (pycode-f32.gguf, pycode-bf16.gguf, pycode-q8_0.gguf; its "pp" test: tokens/s of a
prompt of N tokens), run between our rounds. N = 64, 128, 256, 512. Printed: tokens/s of each, our best over
llama.cpp's best at each N, OpenBLAS over the float32 kernels, and the kernels OpenBLAS chose for this CPU
(OPENBLAS_CORETYPE in the environment overrides its choice: Debian 12's OpenBLAS runs Prescott's SSE3 kernels on
CPUs newer than itself).

llama.cpp is not packaged by Debian: benchmarks/llamacpp_peer.sh builds llama-bench from a source snapshot and
writes the GGUFs (see there). Without them, only our figures are printed.
Usage: /usr/bin/python3 benchmarks/bench_prefill.py [--classes float32,w8a8] [--llama-bench PATH]
       [--gguf-dir DIR] [--repeats 5] [--rounds 2]
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
from habana_assist.cli import _machine, demo_prompts

PEER = "/tmp/habana_assist_bench/llama.cpp-build/bin/llama-bench"
GGUF_DIR = "/tmp/habana_assist_bench"
GGUF_FORMATS = ("f32", "bf16", "q8_0")
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
    res = subprocess.run(
        [binary, "-m", gguf, "-p", str(n), "-n", "0", "-t", str(threads), "-r", str(repeats), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if res.returncode != 0:
        print(f"llama-bench failed ({res.returncode}): {res.stderr[-500:]}", file=sys.stderr)
        return None
    rows = json.loads(res.stdout)
    return float(rows[0]["avg_ts"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--classes", default="float32,bfloat16-pairs,w8a8", help="our numerics classes, comma-separated")
    ap.add_argument("--llama-bench", default=PEER)
    ap.add_argument("--gguf-dir", default=GGUF_DIR, help="where pycode-{f32,bf16,q8_0}.gguf are")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (best of each is kept)")
    args = ap.parse_args()
    tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
    models = {
        c: ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode", dtype=c)
        for c in args.classes.split(",")
        if c
    }
    if "float32" in models:
        models["float32 openblas"] = ha.AutoModelForCausalLM.from_pretrained(
            "habana-assist/pycode", dtype="float32", blas_prefill=True
        )
    text = "".join(t for _, t in demo_prompts(4, 60))
    ids = tok(text, return_tensors="np")["input_ids"][0].astype(np.int32)
    assert len(ids) >= max(LENGTHS), f"the held-out text gave only {len(ids)} tokens"
    ggufs = {f: os.path.join(args.gguf_dir, f"pycode-{f}.gguf") for f in GGUF_FORMATS}
    ggufs = {f: path for f, path in ggufs.items() if os.path.exists(path)} if os.path.exists(args.llama_bench) else {}
    threads = ha.get_num_threads()
    best = {}
    for _ in range(args.rounds):
        for n in LENGTHS:
            for name, model in models.items():
                best[name, n] = min(best.get((name, n), float("inf")), ours(model, ids[:n], args.repeats))
            for f, path in ggufs.items():
                rate = peer(args.llama_bench, path, n, threads, args.repeats)
                if rate is not None:
                    best["llama.cpp " + f, n] = min(best.get(("llama.cpp " + f, n), float("inf")), n / rate)
    names = list(models) + ["llama.cpp " + f for f in ggufs]
    print(
        f"prefill of the shipped target (26.7M parameters), {threads} threads, kernels {ha.kernels_name()} on "
        f"{_machine()}, OpenBLAS's kernels {_core.blas_core()}; "
        f"tokens/s, best of {args.rounds} interleaved rounds of {args.repeats}"
    )
    print(
        "  "
        + f"{'prompt':>6s} "
        + " ".join(f"{n:>{max(9, len(n))}s}" for n in names)
        + f" {'ours best / llama.cpp best':>27s}"
    )
    for n in LENGTHS:
        rates = {name: n / best[name, n] for name in names if (name, n) in best}
        ours_best = max((r, name) for name, r in rates.items() if not name.startswith("llama.cpp"))
        peers = [(r, name) for name, r in rates.items() if name.startswith("llama.cpp")]
        ratio = f"{ours_best[0] / max(peers)[0]:.2f} ({ours_best[1]} / {max(peers)[1][10:]})" if peers else "-"
        print(
            "  "
            + f"{n:6d} "
            + " ".join(f"{rates.get(name, float('nan')):>{max(9, len(name))}.0f}" for name in names)
            + f" {ratio:>27s}"
        )
    if "float32 openblas" in models:
        print(
            "  OpenBLAS over the float32 kernels: "
            + " ".join(f"{n}: {best['float32', n] / best['float32 openblas', n]:.2f}" for n in LENGTHS)
        )
    if not ggufs:
        print(
            f"  (no llama.cpp: build it with `bash benchmarks/llamacpp_peer.sh SNAPSHOT_DIR`; looked for "
            f"{args.llama_bench} and pycode-{{{','.join(GGUF_FORMATS)}}}.gguf in {args.gguf_dir})"
        )


if __name__ == "__main__":
    main()
