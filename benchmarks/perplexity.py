#!/usr/bin/python3
"""Held-out perplexity of the shipped target (habana-assist/pycode) in each numerics class: float32, bfloat16
(as stored: bfloat16 weights, float32 activations), int8 (int8 weights, int16 activations), w8a8 (int8 weights and
int8 activations) and int4, measured in one run on the same windows of the held-out standard-library files, and
reported as ratios to float32, with the kernel variant's name (every variant gives the same bits in a class).
Usage: /usr/bin/python3 benchmarks/perplexity.py [--windows N] [--length L] [--model PATH]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import habana_assist as ha
from habana_assist.pretrained.evaluation import held_out_windows, perplexity


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="habana-assist/pycode")
    ap.add_argument("--windows", type=int, default=24)
    ap.add_argument("--length", type=int, default=256)
    args = ap.parse_args()
    windows = held_out_windows(ha.AutoTokenizer.from_pretrained(args.model), args.windows, args.length)
    print(f"{args.model}: {args.windows} held-out windows of {args.length} tokens; kernels {ha.kernels_name()}")
    base = None
    for dtype in ("float32", "bfloat16", "bfloat16-pairs", "int8", "w8a8", "int4"):
        model = ha.AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype)
        t0 = time.perf_counter()
        ppl = perplexity(model, windows)
        base = base or ppl
        print(
            f"  {dtype:14s} perplexity {ppl:9.4f}   ratio to float32 {ppl / base:.4f}   "
            f"({time.perf_counter() - t0:.1f} s)"
        )


if __name__ == "__main__":
    main()
