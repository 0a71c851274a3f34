#!/usr/bin/python3
"""Plain against assisted generation on the same prompts, every figure measured in this one run.

Target: the random bfloat16 checkpoint with TinyLlama-1.1B's shape that bench_decode.py writes. Drafts:
  - a small random model with the same vocabulary (4 layers, hidden 512, MQA, tied embeddings): it almost
    never agrees with the target, so this row measures the engine's costs;
  - the target itself (every draft accepted, c = 1): what verifying K + 1 tokens in one pass costs;
  - prompt lookup (no draft model, c ~ 0), on a prompt that repeats itself;
and, when the package ships it, the trained pair (pycode in float32 with pycode-draft) on held-out prompts,
also with Python callbacks in the loop: a user logits_processor (a numpy function that bans one token) and
stop_strings (a string that never occurs, so every token is checked), each as the fraction its callbacks add
to the time of a token, plain and assisted.
For each: tokens/s plain and assisted (greedy, prefill included in both), whether the outputs are identical,
the acceptance rate a (accepted / drafts tested, a draft being tested when all before it in its round were
accepted), mean tokens per target pass, the cost ratio c (one draft decode step over one target decode step,
both measured here), the ideal speed-up of Leviathan et al. (1 - a^(K+1)) / ((1 - a)(K c + 1)), and
measured over ideal.
Usage: /usr/bin/python3 benchmarks/bench_assisted.py [--new-tokens N] [--k K]
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import habana_assist as ha  # noqa: E402
from bench_decode import TINYLLAMA, timed, write_checkpoint  # noqa: E402
from habana_assist.cli import demo_prompts  # noqa: E402
from habana_assist.hub import MODELS_DIR  # noqa: E402

# a random draft with the target's vocabulary (about 45 MB in bfloat16)
SMALL_DRAFT = dict(TINYLLAMA, hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8,
                   num_key_value_heads=1, tie_word_embeddings=True)


def decode_step_time(model, prompt, n, repeats):
    """Seconds per decode step: (n + 1 new tokens) - (1 new token), best of repeats."""
    one = timed(lambda: model.generate(prompt, max_new_tokens=1), repeats)
    many = timed(lambda: model.generate(prompt, max_new_tokens=n + 1), repeats)
    return (many - one) / n


def acceptance_rate(res):
    """Accepted over tested drafts: the draft at position j is tested when the one at j - 1 was accepted."""
    acc, prop = res.accepted_per_position, res.proposed_per_position
    tested = sum(int(prop[j]) if j == 0 else min(int(prop[j]), int(acc[j - 1])) for j in range(len(prop)))
    return float(acc.sum()) / tested if tested else 0.0


def ideal_speedup(a, k, c):
    gain = k + 1 if a >= 1 else (1 - a ** (k + 1)) / (1 - a)
    return gain / (k * c + 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.join(tempfile.gettempdir(), "habana_assist_bench")
    ap.add_argument("--dir", default=root, help="where the random checkpoints are written (reused if present)")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--k", type=int, default=4, help="num_assistant_tokens (constant schedule)")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    target_dir, draft_dir = os.path.join(args.dir, "tinyllama-1.1b-random-bf16"), os.path.join(args.dir, "draft-random-bf16")
    write_checkpoint(target_dir)
    write_checkpoint(draft_dir, SMALL_DRAFT, seed=7, exponent=-5)
    n, k = args.new_tokens, args.k
    target = ha.AutoModelForCausalLM.from_pretrained(target_dir, max_cache_len=256)
    small = ha.AutoModelForCausalLM.from_pretrained(draft_dir, max_cache_len=256)
    rng = np.random.default_rng(3)
    prompt = rng.integers(3, target.vocab_size, size=(1, 16))
    repeating = np.tile(rng.integers(3, target.vocab_size, size=(1, 12)), (1, 4))

    target.generate(prompt, max_new_tokens=2)  # warm-up: pages of the memory maps, thread pool
    t_step = decode_step_time(target, prompt, 8, args.repeats)
    c_small = decode_step_time(small, prompt, 16, args.repeats) / t_step
    rows = [measure("random: small random draft", target, small, prompt, c_small, n, k, args.repeats),
            measure("random: target as own draft", target, target, prompt, 1.0, n, k, args.repeats),
            measure("random: prompt lookup", target, None, repeating, 0.0, n, k, args.repeats)]
    if os.path.isdir(os.path.join(MODELS_DIR, "pycode")):
        tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
        pycode = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode", dtype="float32")
        pydraft = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
        prompts = [tok(text, return_tensors="np")["input_ids"] for _, text in demo_prompts(2, 30)]
        c_pair = decode_step_time(pydraft, prompts[0], 16, args.repeats) / decode_step_time(pycode, prompts[0], 16,
                                                                                          args.repeats)
        for i, ids in enumerate(prompts):
            rows.append(measure(f"shipped pair, held-out {i + 1}", pycode, pydraft, ids, c_pair, 4 * n, k, args.repeats))
        callbacks = measure_callbacks(pycode, pydraft, tok, prompts[0], 4 * n, k, args.repeats)

    print(f"habana_assist assisted benchmark: greedy, K={k}, constant schedule, no confidence threshold; "
          f"kernels={ha.kernels_name()}, threads={ha.get_num_threads()}")
    print(f"  random: TinyLlama-1.1B-shape random bf16 target (decode step {t_step * 1e3:.1f} ms), {n} new tokens; "
          f"shipped pair: pycode (float32) with pycode-draft, held-out prompts, {4 * n} new tokens")
    print(f"  {'case':30s} {'same':>5s} {'plain t/s':>10s} {'assist t/s':>10s} {'a':>6s} {'tok/pass':>8s} {'c':>6s} "
          f"{'speed-up':>8s} {'ideal':>6s} {'meas/ideal':>10s}")
    for r in rows:
        print(f"  {r['case']:30s} {str(r['identical']):>5s} {r['plain_tps']:10.2f} {r['assisted_tps']:10.2f} "
              f"{r['a']:6.3f} {r['tokens_per_pass']:8.2f} {r['c']:6.3f} {r['speedup']:8.2f} {r['ideal']:6.2f} "
              f"{r['measured_over_ideal']:10.2f}")
    if os.path.isdir(os.path.join(MODELS_DIR, "pycode")):
        print(f"  callbacks on the shipped pair, held-out 1, {4 * n} new tokens: tokens/s without, with, and the "
              "fraction the callbacks add to a token's time")
        print(f"  {'generation':10s} {'none t/s':>9s} {'logits_processor t/s':>21s} {'added':>7s} {'stop_strings t/s':>17s} "
              f"{'added':>7s}")
        for mode, r in callbacks.items():
            print(f"  {mode:10s} {r['none']:9.2f} {r['logits_processor']:21.2f} {r['none'] / r['logits_processor'] - 1:7.1%} "
                  f"{r['stop_strings']:17.2f} {r['none'] / r['stop_strings'] - 1:7.1%}")


def measure_callbacks(target, draft, tok, ids, n, k, repeats):
    """{"plain" | "assisted": {"none" | "logits_processor" | "stop_strings": tokens/s}}, all in this run; the
    outputs with the callbacks are checked against the outputs without (the processor bans a token the output
    does not hold, the stop string never occurs), so the same tokens are timed."""
    plain = target.generate(ids, max_new_tokens=n, eos_token_id=[])
    banned = int(next(t for t in range(3, target.vocab_size) if t not in plain))

    def ban(input_ids, scores):
        scores[:, banned] = -np.inf
        return scores

    cases = {"none": {}, "logits_processor": dict(logits_processor=[ban]),
             "stop_strings": dict(stop_strings=["\x00never\x00"], tokenizer=tok)}
    modes = {"plain": {}, "assisted": dict(assistant_model=draft, num_assistant_tokens=k,
                                           num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0)}
    calls = {}
    for mode, mkw in modes.items():
        for case, ckw in cases.items():
            kw = dict(max_new_tokens=n, eos_token_id=[], **mkw, **ckw)
            if not np.array_equal(target.generate(ids, **kw), plain):
                raise SystemExit(f"{mode} with {case}: the output differs from plain generation's")
            calls[mode, case] = kw
    # Interleaved rounds, best of each: the machine's speed drifts from minute to minute, and a case timed
    # apart from the others would carry the drift into its ratio.
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(max(3, repeats)):
        for key, kw in calls.items():
            best[key] = min(best[key], timed(lambda kw=kw: target.generate(ids, **kw), 1))
    return {mode: {case: n / best[mode, case] for case in cases} for mode in modes}


def measure(name, target, draft, ids, c, n, k, repeats):
    """One row: plain and assisted generation of n tokens from ids, timed in the same run."""
    plain = target.generate(ids, max_new_tokens=n, eos_token_id=[])
    t_plain = timed(lambda: target.generate(ids, max_new_tokens=n, eos_token_id=[]), repeats)
    kw = dict(assistant_model=draft, num_assistant_tokens=k, num_assistant_tokens_schedule="constant",
              assistant_confidence_threshold=0.0) if draft is not None else dict(prompt_lookup_num_tokens=k)
    res = target.generate(ids, max_new_tokens=n, eos_token_id=[], return_dict_in_generate=True, **kw)
    t_assisted = timed(lambda: target.generate(ids, max_new_tokens=n, eos_token_id=[], **kw), repeats)
    a, measured = acceptance_rate(res), t_plain / t_assisted
    ideal = ideal_speedup(a, k, c)
    return dict(case=name, identical=bool(np.array_equal(plain, res.sequences)), plain_tps=n / t_plain,
                assisted_tps=n / t_assisted, a=a, tokens_per_pass=n / res.num_target_passes, c=c, speedup=measured,
                ideal=ideal, measured_over_ideal=measured / ideal)


if __name__ == "__main__":
    main()
