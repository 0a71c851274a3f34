"""habana_assist beside the peers a Transformers user would otherwise pick, every figure measured in this one run.

Runs in the reference environment (scripts/reference_env.sh: Transformers and torch from PyPI), with this
checkout's habana_assist on sys.path:

    bash scripts/reference_env.sh
    bash benchmarks/llamacpp_peer.sh SNAPSHOT      # optional: llama.cpp's tools and GGUFs of the shipped pair
    .venv-reference/bin/python benchmarks/bench_peers.py [--new-tokens 64] [--prompts 4] [--repeats 2]
        [--no-tinyllama | --no-pair] [--tinyllama-prompts 2] [--tinyllama-new-tokens 32]
        [--llamacpp /tmp/habana_assist_bench]

Table 1, the shipped pair (`habana-assist/pycode` + `habana-assist/pycode-draft`), greedy, on the demo's held-out
prompts (cli.demo_prompts), exactly --new-tokens new tokens per prompt (min_new_tokens = max_new_tokens in every
library; llama.cpp: --ignore-eos), batch 1, end to end (prompt prefill included), tokens/s over all prompts, best of
--repeats rounds; the rounds interleave the cases so that each case sees the same stretch of the machine's time:
- habana_assist: the library's default (from_pretrained as stored: bfloat16) plain and assisted with the draft's
  generation config; the demo's (float32 target, int8 draft); the fastest exact class (w8a8 target and draft).
- Transformers (torch on the CPU, as many threads as ours): float32 and bfloat16, plain, assisted with its defaults
  (the assistant's generation config: num_assistant_tokens 4, constant) and its best over num_assistant_tokens
  2, 4, 8 (constant) and its "heuristic" schedule.
- llama.cpp where built (benchmarks/llamacpp_peer.sh): llama-cli plain in f32, bf16, q8_0 and
  llama-speculative-simple (its defaults; and --draft-max 4) with a q8_0 draft; its own timers (prompt eval + eval).
Each row: tokens/s, speed-up over the same library's plain in the same dtype, over the fastest plain of the whole
table, and whether its greedy text equals habana_assist's float32 plain text (ours against Transformers' float32
is the parity promise; bfloat16 and int8 rows round differently and may part after some tokens: the column says
where).

Table 2, the TinyLlama-1.1B shape (benchmarks/bench_decode.py's random bfloat16 checkpoint; token ids of the same
prompts, no tokenizer; --tinyllama-prompts x --tinyllama-new-tokens, fewer than table 1's: Transformers in float32 makes
a few tokens a second there): plain for habana_assist (bfloat16, w8a8) and Transformers (float32, bfloat16), and prompt
lookup (prompt_lookup_num_tokens 10) in each; llama.cpp is left out there (its converter needs a tokenizer).
"""

import argparse
import gc
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
os.environ.setdefault("HA_PROGRESS", "0")

try:
    import torch
    import transformers
except ImportError as e:  # Debian's python3: no Transformers
    sys.exit(
        f"bench_peers: {e}; run it with the reference environment's Python: bash scripts/reference_env.sh, then "
        f".venv-reference/bin/python benchmarks/bench_peers.py"
    )
import numpy as np  # noqa: E402 - after the check above, which names the Python to run

import habana_assist as ha  # noqa: E402 - likewise

transformers.logging.set_verbosity_error()  # its notes on generation arguments and the loading bars: tables only
transformers.utils.logging.disable_progress_bar()
from habana_assist.cli import demo_prompts  # noqa: E402 - likewise

TARGET, DRAFT = "habana-assist/pycode", "habana-assist/pycode-draft"


def pretrained_dir(name):
    return os.path.join(HERE, "..", "habana_assist", "pretrained", name.split("/")[1])


class Case:
    """One row: a callable that generates every prompt's continuation and returns (seconds, texts)."""

    def __init__(self, library, dtype, mode, run, plain_of=None):
        self.library, self.dtype, self.mode, self.run = library, dtype, mode, run
        self.best, self.texts = float("inf"), None

    def measure(self):
        seconds, texts = self.run()
        self.best = min(self.best, seconds)
        if self.texts is None:
            self.texts = texts


def ours_runner(model, tok, prompts, n, **kw):
    encoded = [tok(p, return_tensors="np")["input_ids"] for p in prompts]

    def run():
        texts, t0 = [], time.perf_counter()
        for ids in encoded:
            out = model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, **kw)
            texts.append(np.asarray(out)[0, ids.shape[1] :])
        return time.perf_counter() - t0, [tok.decode(t) for t in texts]

    return run


def hf_runner(model, tok, prompts, n, **kw):
    encoded = [tok(p, return_tensors="pt") for p in prompts]

    def run():
        texts, t0 = [], time.perf_counter()
        with torch.inference_mode():
            for enc in encoded:
                out = model.generate(**enc, max_new_tokens=n, min_new_tokens=n, do_sample=False, **kw)
                texts.append(out[0, enc["input_ids"].shape[1] :])
        return time.perf_counter() - t0, [tok.decode(t) for t in texts]

    return run


def ids_runner(generate, prompts_ids, n, **kw):
    def run():
        outs, t0 = [], time.perf_counter()
        for ids in prompts_ids:
            outs.append(np.asarray(generate(ids, n, **kw))[0, ids.shape[1] :].tolist())
        return time.perf_counter() - t0, outs

    return run


LLAMA_TIMES = re.compile(r"(prompt eval|eval) time =\s*([\d.]+) ms /\s*(\d+)")
SPEC_TIMES = re.compile(r"(encoded|decoded)\s+(\d+) tokens in\s+([\d.]+) seconds")


def llamacpp_runner(root, model, prompts, n, threads, draft=None, extra=()):
    bin_dir = os.path.join(root, "llama.cpp-build", "bin")

    def run():
        seconds, texts = 0.0, []
        for p in prompts:
            if draft is None:
                cmd = [
                    os.path.join(bin_dir, "llama-cli"),
                    "-m",
                    model,
                    "-p",
                    p,
                    "-n",
                    str(n),
                    "--ignore-eos",
                    "--temp",
                    "0",
                    "-t",
                    str(threads),
                    "-c",
                    "1024",
                    "-no-cnv",
                    "--no-display-prompt",
                    "--simple-io",
                ]
            else:
                cmd = [
                    os.path.join(bin_dir, "llama-speculative-simple"),
                    "-m",
                    model,
                    "-md",
                    draft,
                    "-p",
                    p,
                    "-n",
                    str(n),
                    "--ignore-eos",
                    "--temp",
                    "0",
                    "-t",
                    str(threads),
                    "-td",
                    str(threads),
                    "-c",
                    "1024",
                    *extra,
                ]
            r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
            if r.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd[:3])}... failed: {r.stderr[-2000:]}")
            if draft is None:
                times = {k: float(ms) / 1e3 for k, ms, _ in LLAMA_TIMES.findall(r.stderr)}
                seconds += times["prompt eval"] + times["eval"]
                texts.append(r.stdout)
            else:
                found = {k: (int(count), float(s)) for k, count, s in SPEC_TIMES.findall(r.stderr + r.stdout)}
                # it stops after the round that passes n tokens: its decode rate, over n tokens
                seconds += found["encoded"][1] + found["decoded"][1] * n / found["decoded"][0]
                # stdout: "<s>", the prompt, then the generated text, then two newlines
                texts.append(r.stdout[r.stdout.find(p) + len(p) :] if p in r.stdout else r.stdout)
        return seconds, texts

    return run


def agreement(texts, reference):
    """'=' when every prompt's text equals the reference's, else where the first one parts (characters in)."""
    if texts is None:
        return "-"
    for a, b in zip(texts, reference):
        a, b = a.rstrip("\n"), b.rstrip("\n")
        m = min(len(a), len(b))
        if a[:m] != b[:m]:
            return f"parts at char {next(i for i in range(m) if a[i] != b[i])}"
    return "="


def shipped_pair(args, threads):
    prompts = [text for _, text in demo_prompts(args.prompts, 30)]
    n = args.new_tokens
    cases = []
    tok = ha.AutoTokenizer.from_pretrained(TARGET)
    target = {
        d: ha.AutoModelForCausalLM.from_pretrained(TARGET, **({"dtype": d} if d else {}))
        for d in (None, "float32", "w8a8")
    }
    draft = {
        d: ha.AutoModelForCausalLM.from_pretrained(DRAFT, **({"dtype": d} if d else {})) for d in (None, "int8", "w8a8")
    }
    for label, td, dd in (
        ("bfloat16 (default)", None, None),
        ("float32 + int8 draft (demo)", "float32", "int8"),
        ("w8a8 (fastest)", "w8a8", "w8a8"),
    ):
        cases.append(Case("habana_assist", label, "plain", ours_runner(target[td], tok, prompts, n)))
        cases.append(
            Case(
                "habana_assist", label, "assisted", ours_runner(target[td], tok, prompts, n, assistant_model=draft[dd])
            )
        )
    htok = transformers.AutoTokenizer.from_pretrained(pretrained_dir(TARGET))
    for name, dt in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        t = transformers.AutoModelForCausalLM.from_pretrained(pretrained_dir(TARGET), dtype=dt).eval()
        d = transformers.AutoModelForCausalLM.from_pretrained(pretrained_dir(DRAFT), dtype=dt).eval()
        cases.append(Case("Transformers", name, "plain", hf_runner(t, htok, prompts, n)))
        cases.append(
            Case("Transformers", name, "assisted (defaults)", hf_runner(t, htok, prompts, n, assistant_model=d))
        )
        for k in (2, 8):
            d2 = transformers.AutoModelForCausalLM.from_pretrained(pretrained_dir(DRAFT), dtype=dt).eval()
            d2.generation_config.num_assistant_tokens = k
            cases.append(
                Case("Transformers", name, f"assisted K={k}", hf_runner(t, htok, prompts, n, assistant_model=d2))
            )
        d3 = transformers.AutoModelForCausalLM.from_pretrained(pretrained_dir(DRAFT), dtype=dt).eval()
        d3.generation_config.num_assistant_tokens_schedule = "heuristic"
        cases.append(
            Case("Transformers", name, "assisted heuristic", hf_runner(t, htok, prompts, n, assistant_model=d3))
        )
    root = args.llamacpp
    if os.path.exists(os.path.join(root, "llama.cpp-build", "bin", "llama-cli")):
        for t in ("f32", "bf16", "q8_0"):
            path = os.path.join(root, f"pycode-{t}.gguf")
            if os.path.exists(path):
                cases.append(Case("llama.cpp", t, "plain", llamacpp_runner(root, path, prompts, n, threads)))
        dq = os.path.join(root, "pycode-draft-q8_0.gguf")
        for t in ("f32", "q8_0"):
            path = os.path.join(root, f"pycode-{t}.gguf")
            if os.path.exists(path) and os.path.exists(dq):
                cases.append(
                    Case(
                        "llama.cpp",
                        f"{t} + q8_0 draft",
                        "speculative (defaults)",
                        llamacpp_runner(root, path, prompts, n, threads, draft=dq),
                    )
                )
                cases.append(
                    Case(
                        "llama.cpp",
                        f"{t} + q8_0 draft",
                        "speculative --draft-max 4",
                        llamacpp_runner(
                            root, path, prompts, n, threads, draft=dq, extra=("--draft-max", "4", "--draft-min", "0")
                        ),
                    )
                )
    else:
        print(f"(llama.cpp: no tools under {root}; benchmarks/llamacpp_peer.sh builds them)")
    for case in cases:  # warm-up: pages, thread pools, torch's first-call work
        case.run()
    for _ in range(args.repeats):
        for case in cases:
            case.measure()
    total = n * len(prompts)
    reference = next(
        c.texts for c in cases if c.library == "habana_assist" and c.dtype.startswith("float32") and c.mode == "plain"
    )
    print_table(
        f"The shipped pair, batch 1, greedy, {len(prompts)} held-out prompts x {n} new tokens, "
        f"end to end; text column: against habana_assist float32 plain",
        cases,
        total,
        reference,
    )


def print_table(title, cases, total, reference):
    fastest_plain = min(c.best for c in cases if c.mode == "plain")
    plain = {(c.library, c.dtype): c.best for c in cases if c.mode == "plain"}
    print(f"\n{title}\n")
    print("| library | class | mode | tokens/s | vs its plain | vs fastest plain | text |")
    print("|---|---|---|---|---|---|---|")
    for c in cases:
        own = plain.get((c.library, c.dtype)) or plain.get((c.library, c.dtype.split(" + ")[0]))
        vs_own = f"{own / c.best:.2f}x" if own else "-"
        print(
            f"| {c.library} | {c.dtype} | {c.mode} | {total / c.best:.0f} | {vs_own} | "
            f"{fastest_plain / c.best:.2f}x | {agreement(c.texts, reference)} |"
        )


def tinyllama(args):
    from bench_decode import DEFAULT_DIR, write_checkpoint

    write_checkpoint(DEFAULT_DIR)
    tok = ha.AutoTokenizer.from_pretrained(TARGET)
    prompts = [tok(text, return_tensors="np")["input_ids"] for _, text in demo_prompts(args.tinyllama_prompts, 30)]
    n, cases = args.tinyllama_new_tokens, []
    ours = {d: ha.AutoModelForCausalLM.from_pretrained(DEFAULT_DIR, dtype=d) for d in ("bfloat16", "w8a8")}
    for d, m in ours.items():
        gen = lambda ids, k, m=m, **kw: m.generate(ids, max_new_tokens=k, min_new_tokens=k, do_sample=False, **kw)  # noqa: E731 - one model's call, bound by m=m
        cases.append(Case("habana_assist", d, "plain", ids_runner(gen, prompts, n)))
        cases.append(
            Case("habana_assist", d, "prompt lookup", ids_runner(gen, prompts, n, prompt_lookup_num_tokens=10))
        )
    for name, dt in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        m = transformers.AutoModelForCausalLM.from_pretrained(DEFAULT_DIR, dtype=dt).eval()

        def gen(ids, k, m=m, **kw):
            with torch.inference_mode():
                return m.generate(
                    torch.from_numpy(ids),
                    attention_mask=torch.ones(ids.shape, dtype=torch.long),
                    max_new_tokens=k,
                    min_new_tokens=k,
                    do_sample=False,
                    **kw,
                ).numpy()

        cases.append(Case("Transformers", name, "plain", ids_runner(gen, prompts, n)))
        cases.append(
            Case("Transformers", name, "prompt lookup", ids_runner(gen, prompts, n, prompt_lookup_num_tokens=10))
        )
    for case in cases:
        case.run()
    for _ in range(args.repeats):
        for case in cases:
            case.measure()
    reference = next(c.texts for c in cases if c.library == "habana_assist" and c.mode == "plain")
    ref_text = [" ".join(map(str, t)) for t in reference]
    for c in cases:
        c.texts = [" ".join(map(str, t)) for t in c.texts]
    print_table(
        f"The TinyLlama-1.1B shape (random bfloat16 weights), batch 1, greedy, {len(prompts)} prompts x {n} "
        f"new tokens, end to end; text column: token ids against habana_assist bfloat16 plain",
        cases,
        n * len(prompts),
        ref_text,
    )
    del ours
    gc.collect()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--no-tinyllama", action="store_true")
    p.add_argument("--no-pair", action="store_true", help="only the TinyLlama-shape table")
    p.add_argument("--tinyllama-prompts", type=int, default=2, help="prompts of table 2 (default 2)")
    p.add_argument("--tinyllama-new-tokens", type=int, default=32, help="new tokens per prompt in table 2 (default 32)")
    p.add_argument("--llamacpp", default="/tmp/habana_assist_bench")
    args = p.parse_args()
    threads = ha.get_num_threads()
    torch.set_num_threads(threads)
    isa = sorted(
        set(re.findall(r"\b(avx512[a-z_0-9]*|avx_vnni[a-z_0-9]*|amx[a-z_0-9]*|avx2)\b", open("/proc/cpuinfo").read()))
    )
    print(
        f"habana_assist {ha.__version__} (kernels {ha.kernels_name()}), Transformers {transformers.__version__}, "
        f"torch {torch.__version__}, {threads} threads each; ISA: {' '.join(isa)}"
    )
    if not args.no_pair:
        shipped_pair(args, threads)
    if not args.no_tinyllama:
        tinyllama(args)


if __name__ == "__main__":
    main()
