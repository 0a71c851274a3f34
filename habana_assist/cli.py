"""The command line: `python3 -m habana_assist` (or `habana-assist` once installed).

  generate  complete a prompt, streamed to the terminal as it is produced
  bench     plain against assisted generation on one prompt: tokens/s, speed-up, acceptance, identical?
  demo      the main job: completions of held-out standard-library code, plain then assisted, and a summary
The shipped pair (habana-assist/pycode with habana-assist/pycode-draft) is the default model and draft.
"""

import argparse
import os
import sys
import time

import numpy as np

from .errors import HabanaAssistError
from .pretrained.stdlib_split import stdlib_files

DEFAULT_MODEL = "habana-assist/pycode"
DEFAULT_DRAFT = "habana-assist/pycode-draft"
DEFAULT_DRAFT_DTYPE = "w8a8"  # see --assistant-dtype
DEMO_NO_REPEAT_NGRAM_SIZE = 10  # greedy loops on the demo's prompts: 6 of 12 without, 2 with (docs/training.md)


def _load(args):
    import habana_assist as ha

    if args.threads:
        ha.set_num_threads(args.threads)
    tok = ha.AutoTokenizer.from_pretrained(args.model)
    how = dict(dtype=args.dtype, blas_prefill=args.blas_prefill, repack=args.repack)
    model = ha.AutoModelForCausalLM.from_pretrained(args.model, **how)
    draft = None
    if args.assistant and args.assistant.lower() != "none" and not getattr(args, "prompt_lookup", None):
        draft = ha.AutoModelForCausalLM.from_pretrained(args.assistant, **dict(how, dtype=args.assistant_dtype))
    if draft is not None and args.schedule == "cost":
        model.assisted_costs(draft)  # measured now, not inside a timed call
    return ha, tok, model, draft


class UsageError(Exception):
    """A command-line mistake: printed as one line, exit status 2."""


def _prompt(args):
    if args.prompt_file:
        try:
            with open(args.prompt_file, encoding="utf-8") as f:
                return f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"cannot read --prompt-file {args.prompt_file}: {e}") from None
    if args.prompt is None:
        raise UsageError("pass the text to complete with --prompt TEXT or --prompt-file FILE")
    if not args.escapes:
        return args.prompt
    escapes = {"n": "\n", "t": "\t", "\\": "\\"}
    out, i = [], 0
    while i < len(args.prompt):  # only \n, \t and \\ are escapes; any other character stays as typed
        c = args.prompt[i]
        if c == "\\" and i + 1 < len(args.prompt) and args.prompt[i + 1] in escapes:
            out.append(escapes[args.prompt[i + 1]])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _processors(args):
    """The logits processors the command line takes, by Transformers' names."""
    return dict(repetition_penalty=args.repetition_penalty, no_repeat_ngram_size=args.no_repeat_ngram_size)


def _sampling(args):
    kw = dict(max_new_tokens=args.max_new_tokens, do_sample=args.do_sample, **_processors(args))
    if args.do_sample:
        kw.update(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    return kw


def _assist(args, draft):
    """Assisted-generation arguments; sampling is coupled, so assisted output equals plain output for a seed."""
    kw = dict(assisted_sampling="coupled") if getattr(args, "do_sample", False) else {}
    if args.tree_width != 1:  # with a draft model or prompt lookup alike
        kw["assistant_tree_width"] = args.tree_width
    if args.tree_shape != "siblings":
        kw["assistant_tree_shape"] = args.tree_shape
    if args.prompt_lookup:
        return dict(kw, prompt_lookup_num_tokens=args.prompt_lookup)
    if draft is None:
        return {}
    cost = args.schedule == "cost"
    k = args.num_assistant_tokens if args.num_assistant_tokens is not None else 16 if cost else 4
    threshold = args.confidence_threshold if args.confidence_threshold is not None else 0.0 if cost else 0.4
    return dict(
        kw,
        assistant_model=draft,
        num_assistant_tokens=k,
        num_assistant_tokens_schedule=args.schedule,
        assistant_confidence_threshold=threshold,
    )


def cmd_generate(args):
    text = _prompt(args)
    ha, tok, model, draft = _load(args)
    inputs = tok(text, return_tensors="np")
    streamer = (
        None if args.no_stream else ha.TextStreamer(tok, skip_prompt=not args.show_prompt, skip_special_tokens=True)
    )
    t0 = time.perf_counter()
    res = model.generate(
        **inputs, streamer=streamer, return_dict_in_generate=True, **_sampling(args), **_assist(args, draft)
    )
    dt = time.perf_counter() - t0
    new = res.sequences.shape[1] - inputs["input_ids"].shape[1]
    if streamer is None:
        print(
            tok.decode(
                res.sequences[0] if args.show_prompt else res.sequences[0, inputs["input_ids"].shape[1] :],
                skip_special_tokens=True,
            )
        )
    stats = f"{new} tokens in {dt:.2f} s ({new / dt:.1f} tokens/s)"
    if res.num_draft_tokens is not None:  # assisted (the cost schedule may have found no draft worth it)
        stats += f"; drafts accepted {res.num_accepted_tokens}/{res.num_draft_tokens}"
    print(f"\n[{stats}]", file=sys.stderr)


class _Clock:
    """A streamer that times a generation: when its first new tokens arrive (the prompt's prefill is done)
    and how many they are, passing everything on to an inner streamer, if any."""

    def __init__(self, inner=None):
        self.inner, self.seen_prompt, self.first_at, self.first_n = inner, False, None, 0

    def put(self, value):
        if self.seen_prompt and self.first_at is None:
            self.first_at, self.first_n = time.perf_counter(), int(np.asarray(value).size)
        self.seen_prompt = True
        if self.inner is not None:
            self.inner.put(value)

    def end(self):
        if self.inner is not None:
            self.inner.end()


def _timing(n_new, t0, clock, t_end):
    """One timed generation as (new tokens, seconds in all, tokens after the first new ones, seconds after
    them): the latter pair is the generation rate without the prompt's prefill, which plain and assisted do
    alike, as llama.cpp reports its "eval" apart from its "prompt eval". Rows of several calls add up."""
    if clock.first_at is not None and n_new > clock.first_n:
        return np.array([n_new, t_end - t0, n_new - clock.first_n, t_end - clock.first_at])
    # nothing after the first tokens (one token asked for, or an early eos): the whole call
    return np.array([n_new, t_end - t0, n_new, t_end - t0])


def _rate(n, seconds):
    return n / seconds if seconds > 0 else 0.0


def _timed(model, inputs, kw, streamer=None):
    """(result, _timing(...)) of one generate() call."""
    clock = _Clock(streamer)
    t0 = time.perf_counter()
    res = model.generate(**inputs, streamer=clock, return_dict_in_generate=True, **kw)
    t1 = time.perf_counter()
    return res, _timing(res.sequences.shape[1] - inputs["input_ids"].shape[1], t0, clock, t1)


def _timed_pair(model, inputs, kw, assist_kw, streamers=(None, None)):
    """(plain result, its timing, assisted result, its timing) on the same inputs."""
    plain, tp = _timed(model, inputs, kw, streamers[0])
    assisted, ta = _timed(model, inputs, dict(kw, **assist_kw), streamers[1])
    return plain, tp, assisted, ta


def _summary(plain, assisted, drafted, accepted, identical):
    """plain, assisted: timings (_timing), one call's or the sum of several."""

    def ratio(a, b):
        return a / b if b > 0 else float("nan")

    gen_p, gen_a = _rate(plain[2], plain[3]), _rate(assisted[2], assisted[3])
    all_p, all_a = _rate(plain[0], plain[1]), _rate(assisted[0], assisted[1])
    print(f"  plain     {gen_p:8.1f} tokens/s   ({all_p:.1f} with the prompt's prefill)")
    print(f"  assisted  {gen_a:8.1f} tokens/s   ({all_a:.1f} with the prompt's prefill)")
    print(f"  speed-up {ratio(gen_a, gen_p):.2f}x generating ({ratio(all_a, all_p):.2f}x with the prefill)")
    print(f"  acceptance rate {accepted / max(1, drafted):.3f} ({accepted} of {drafted} drafted tokens)")
    print(f"  outputs identical: {'yes' if identical else 'NO'}")


def cmd_bench(args):
    text = _prompt(args)
    ha, tok, model, draft = _load(args)
    inputs = tok(text, return_tensors="np")
    model.generate(**inputs, max_new_tokens=2)  # warm-up
    plain, tp, assisted, ta = _timed_pair(model, inputs, _sampling(args), _assist(args, draft))
    print(
        f"habana_assist bench: {args.model} assisted by {'prompt lookup' if args.prompt_lookup else args.assistant}, "
        f"{int(tp[0])} new tokens, kernels {ha.kernels_name()}, {ha.get_num_threads()} threads"
    )
    _summary(
        tp,
        ta,
        assisted.num_draft_tokens or 0,
        assisted.num_accepted_tokens or 0,
        np.array_equal(plain.sequences, assisted.sequences),
    )


def demo_prompts(n, lines):
    """Code-completion prompts: the first `lines` lines of held-out standard-library files (never trained on)."""
    prompts = []
    for path in stdlib_files()[1]:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        head = "".join(text.splitlines(keepends=True)[:lines])
        if len(head) > 200:
            prompts.append((os.path.basename(path), head))
        if len(prompts) == n:
            break
    return prompts


def _decoding(args):
    """The demo's decoding, as its first line states it."""
    on = []
    if args.no_repeat_ngram_size:
        on.append(f"no_repeat_ngram_size {args.no_repeat_ngram_size}")
    if args.repetition_penalty != 1.0:
        on.append(f"repetition_penalty {args.repetition_penalty:g}")
    return "greedy" + (f" with {', '.join(on)} (plain and assisted alike)" if on else "")


def cmd_demo(args):
    ha, tok, model, draft = _load(args)
    held = draft.weight_dtype if draft is not None else "no draft"
    print(
        f"habana_assist demo: {args.model} ({model.config.num_hidden_layers} layers, {model.weight_dtype}) "
        f"assisted by {args.assistant} ({held}, schedule {args.schedule}), {_decoding(args)}, "
        f"{args.max_new_tokens} new tokens per prompt; kernels {ha.kernels_name()}, "
        f"{ha.get_num_threads()} threads\n"
    )
    model.generate(**tok("import os\n", return_tensors="np"), max_new_tokens=2)  # warm-up
    totals_plain, totals_assisted, drafted, accepted = np.zeros(4), np.zeros(4), 0, 0
    identical = True
    for name, text in demo_prompts(args.prompts, args.prompt_lines):
        inputs = tok(text, return_tensors="np")
        print(f"=== {name}: the next {args.max_new_tokens} tokens after its first {args.prompt_lines} lines ===")
        print(text[-300:], end="")
        streams = (
            ha.TextStreamer(tok, skip_prompt=True, skip_special_tokens=True) if args.show_plain else None,
            ha.TextStreamer(tok, skip_prompt=True, skip_special_tokens=True),
        )
        kw = dict(max_new_tokens=args.max_new_tokens, do_sample=False, **_processors(args))
        plain, tp, assisted, ta = _timed_pair(model, inputs, kw, _assist(args, draft), streams)
        same = np.array_equal(plain.sequences, assisted.sequences)
        identical &= same
        totals_plain, totals_assisted = totals_plain + tp, totals_assisted + ta
        drafted, accepted = drafted + (assisted.num_draft_tokens or 0), accepted + (assisted.num_accepted_tokens or 0)
        print(
            f"--- plain {_rate(tp[2], tp[3]):.1f} tokens/s, assisted {_rate(ta[2], ta[3]):.1f} tokens/s "
            f"(after the prompt), identical: {same}\n"
        )
    print("=== summary over all prompts ===")
    _summary(totals_plain, totals_assisted, drafted, accepted, identical)
    if args.fastest_plain:
        _against_fastest_plain(args, tok, model.weight_dtype, totals_plain, totals_assisted)


# The numerics classes whose held-out perplexity is within 1% of float32's (docs/kernels-and-performance.md): the
# candidates for the fastest plain configuration of a target on this machine.
PLAIN_CLASSES = ("float32", "bfloat16", "bfloat16-pairs", "int8", "w8a8")


def _machine():
    """The CPU's model name (Linux's /proc/cpuinfo), or the platform's processor string."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "this machine"


def _against_fastest_plain(args, tok, dtype, totals_plain, totals_assisted):
    """Times plain generation of the demo's prompts with the target held in each of PLAIN_CLASSES (its own class's
    figure is the one already measured) and prints the assisted run against the fastest: a speed-up is only worth
    what it gains over the best plain configuration of the same target on this machine."""
    import habana_assist as ha

    rates = {dtype: (_rate(totals_plain[2], totals_plain[3]), totals_plain)}
    prompts = [tok(text, return_tensors="np") for _, text in demo_prompts(args.prompts, args.prompt_lines)]
    kw = dict(max_new_tokens=args.max_new_tokens, do_sample=False, **_processors(args))
    for other in PLAIN_CLASSES:
        if other == dtype:
            continue
        model = ha.AutoModelForCausalLM.from_pretrained(
            args.model, dtype=other, blas_prefill=args.blas_prefill, repack=args.repack
        )
        model.generate(**prompts[0], max_new_tokens=2)  # warm-up
        total = sum(_timed(model, inputs, kw)[1] for inputs in prompts)
        rates[other] = (_rate(total[2], total[3]), total)
        del model
    best = max(rates, key=lambda k: rates[k][0])
    rate, total = rates[best]
    others = ", ".join(f"{k} {v[0]:.1f}" for k, v in rates.items() if k != best)
    print(
        f"  fastest plain on this machine ({_machine()}; kernels {ha.kernels_name()}): {best} {rate:.1f} tokens/s "
        f"({others})"
    )
    gen_a, all_a = _rate(totals_assisted[2], totals_assisted[3]), _rate(totals_assisted[0], totals_assisted[1])
    print(
        f"  assisted ({dtype}) against it: {gen_a / rate:.2f}x generating "
        f"({all_a / _rate(total[0], total[1]):.2f}x with the prefill)"
    )


def build_parser():
    ap = argparse.ArgumentParser(
        prog="habana-assist", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="{generate,bench,demo}")

    def common(p, prompt=True, dtype=None, no_repeat_ngram_size=0):
        p.add_argument(
            "--model",
            default=DEFAULT_MODEL,
            help=f"target checkpoint: a directory or a Hub repo id (default {DEFAULT_MODEL})",
        )
        p.add_argument(
            "--assistant",
            default=DEFAULT_DRAFT,
            help=f"draft checkpoint (a directory or a Hub repo id), or 'none' for plain generation "
            f"(default {DEFAULT_DRAFT})",
        )
        p.add_argument(
            "--dtype",
            default=dtype,
            choices=["float32", "bfloat16", "float16", "int8", "w8a8", "int4", "bfloat16-pairs"],
            help=f"how weights are held (default: {dtype or 'as stored'})",
        )
        p.add_argument(
            "--assistant-dtype",
            default=DEFAULT_DRAFT_DTYPE,
            choices=["float32", "bfloat16", "float16", "int8", "w8a8", "int4", "bfloat16-pairs", "auto"],
            help="how the draft's weights are held ('auto': as stored). Default w8a8 (int8 weights times int8 "
            "activations): a draft only proposes and the target's verification keeps the output its own, whatever "
            "the draft's precision, and w8a8 steps are the fastest (docs/benchmarks.md)",
        )
        p.add_argument("--max-new-tokens", type=int, default=128, help="tokens to generate (default 128)")
        p.add_argument(
            "--repetition-penalty",
            type=float,
            default=1.0,
            metavar="R",
            help="Transformers' repetition_penalty (CTRL's): the logits of tokens already in the text are divided "
            "by R where positive, multiplied where negative, in plain and assisted generation alike (default 1.0: "
            "off)",
        )
        p.add_argument(
            "--no-repeat-ngram-size",
            type=int,
            default=no_repeat_ngram_size,
            metavar="N",
            help="Transformers' no_repeat_ngram_size: no N-token run occurs twice in the text (prompt included), "
            f"in plain and assisted generation alike; 0 is off (default {no_repeat_ngram_size})",
        )
        p.add_argument(
            "--schedule",
            choices=["cost", "constant", "heuristic", "heuristic_transient"],
            default="cost",
            help="how many tokens the draft proposes each round: 'cost' chooses it from the pair's measured "
            "costs and the acceptance so far (default); 'constant' always --num-assistant-tokens; "
            "'heuristic' Transformers' +2 / -1 rule",
        )
        p.add_argument(
            "--num-assistant-tokens",
            type=int,
            default=None,
            help="tokens the draft proposes per round ('constant'), its start ('heuristic') or its most "
            "('cost') (default 4, or 16 with 'cost')",
        )
        p.add_argument(
            "--confidence-threshold",
            type=float,
            default=None,
            help="the draft stops proposing after a token it gives less probability (default 0.4, or 0 "
            "(off) with 'cost')",
        )
        p.add_argument(
            "--tree-width",
            type=int,
            default=1,
            metavar="W",
            help="token trees: each drafted token with up to W - 1 siblings, the draft's next choices, all "
            "verified in one pass (default 1: chains; with 'cost', the widest the costs may choose)",
        )
        p.add_argument(
            "--tree-shape",
            choices=("siblings", "dynamic"),
            default="siblings",
            help="with --tree-width W > 1: 'siblings' (default: the W - 1 next choices beside each drafted token) or "
            "'dynamic' (EAGLE-2: the draft expands its W most probable nodes at each depth, the target verifies the "
            "K most probable nodes at any depth up to K; a draft model only)",
        )
        p.add_argument(
            "--prompt-lookup",
            type=int,
            default=None,
            metavar="N",
            help="draft N tokens by n-gram lookup in the prompt instead of a draft model",
        )
        p.add_argument("--threads", type=int, default=None, help="core threads (default: all cores)")
        blas = p.add_mutually_exclusive_group()
        blas.add_argument(
            "--blas-prefill",
            dest="blas_prefill",
            action="store_const",
            const=True,
            default=None,
            help="compute long prompts' 128-token blocks with OpenBLAS (not by default: every row "
            "then stays bitwise a token-by-token forward's; docs/benchmarks.md compares the two)",
        )
        blas.add_argument(
            "--no-blas-prefill",
            dest="blas_prefill",
            action="store_const",
            const=False,
            help="compute prompts with the batch-invariant kernels only, not OpenBLAS (every row "
            "bitwise a token-by-token forward's; the default)",
        )
        p.add_argument(
            "--no-repack",
            dest="repack",
            action="store_false",
            help="keep float weights row-major as stored (memory-mapped, no copy at load) instead of "
            "repacking them into panels, which verify drafts and prefill faster",
        )
        if prompt:
            p.add_argument("--prompt", help="the text to complete (e.g. 'def fib(n):')")
            p.add_argument("--prompt-file", help="read the prompt from this file")
            p.add_argument("--escapes", action="store_true", help="interpret \\n and \\t in --prompt")
            p.add_argument("--do-sample", action="store_true", help="sample instead of greedy decoding")
            p.add_argument("--temperature", type=float, default=1.0)
            p.add_argument("--top-k", type=int, default=50)
            p.add_argument("--top-p", type=float, default=1.0)
            p.add_argument("--seed", type=int, default=0, help="sampling seed (the same seed gives the same text)")

    g = sub.add_parser(
        "generate",
        help="complete a prompt, streaming the text as it comes",
        description="Complete a prompt with the target, assisted by the draft; the text is streamed.",
    )
    common(g)
    g.add_argument("--no-stream", action="store_true", help="print the completion once, at the end")
    g.add_argument("--show-prompt", action="store_true", help="print the prompt before the completion")
    g.set_defaults(fn=cmd_generate)
    b = sub.add_parser(
        "bench",
        help="plain against assisted generation on one prompt",
        description="Time plain and assisted generation of the same prompt; print tokens/s, speed-up, "
        "acceptance and whether the outputs are identical.",
    )
    common(b)
    b.set_defaults(fn=cmd_bench)
    d = sub.add_parser(
        "demo",
        help="the main job: held-out code completions, plain then assisted, and a summary",
        description="Complete the beginnings of held-out standard-library files, greedily, plain then "
        "assisted (streamed), and summarize tokens/s, speed-up, acceptance, identity. The demo decodes with "
        "no_repeat_ngram_size 10: greedy, the shipped target falls into loops on half of its prompts "
        "(docs/training.md); --no-repeat-ngram-size 0 shows plain greedy decoding.",
    )
    # float32: the target is then several times the L3, as big models are
    common(d, prompt=False, dtype="float32", no_repeat_ngram_size=DEMO_NO_REPEAT_NGRAM_SIZE)
    d.add_argument("--prompts", type=int, default=4, help="how many held-out files (default 4)")
    d.add_argument("--prompt-lines", type=int, default=30, help="lines of each file in its prompt (default 30)")
    d.add_argument("--show-plain", action="store_true", help="stream the plain completion too")
    d.add_argument(
        "--no-fastest-plain",
        dest="fastest_plain",
        action="store_false",
        help="skip timing plain generation with the target in each numerics class (float32, bfloat16, "
        "bfloat16-pairs, int8, w8a8), which the summary compares the assisted run with",
    )
    d.set_defaults(fn=cmd_demo)
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        args.fn(args)
    except (HabanaAssistError, UsageError) as e:
        print(f"habana-assist: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: what was streamed stays; no traceback, the shell's code for SIGINT
        print("\nhabana-assist: interrupted", file=sys.stderr)
        return 130
    return 0
