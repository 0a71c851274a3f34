#!/usr/bin/python3
"""Plain against assisted generation, every figure measured in this one run (interleaved rounds, best of each).

The shipped pair: the target `habana-assist/pycode` held in float32 with `habana-assist/pycode-draft` held as
the command line holds it (w8a8; --draft-dtype auto for bfloat16 as stored), greedy,
on the demo's held-out prompts (cli.demo_prompts: the first 30 lines of held-out standard-library files),
--new-tokens new tokens per row (eos_token_id=[]: every row makes them all). Two tables:

1. Batch 1, the schedules on the first 4 held-out prompts (the demo's): plain; "cost" (K per round from the
   pair's measured costs, up to 16); "constant" K = 4; "heuristic" (Transformers' rule from K = 4 with its
   confidence threshold 0.4, transient so calls do not carry K); Transformers' defaults (constant K = 20,
   threshold 0.4). For each: tokens/s generation-only (the call less the prompt's prefill, the target's and the
   draft's taking in the prompt, by the core's own clock: result.timings, total - prefill; as llama.cpp reports
   "eval" apart from "prompt eval") and end to end (the wall clock), speed-up over plain, acceptance (accepted /
   proposed), tokens per round, the ideal speed-up and measured over ideal. The ideal is the cost model's
   (Leviathan et al. with measured costs, as the core's cost schedule counts them): from the call's own counts
   (rounds with exactly k drafts, from proposed_per_position and num_target_passes) and the pair's measured costs
   (a target append of T tokens t(T), a draft step d, and a round's first draft step d1, which runs right after the
   target's append, all timed as model.assisted_costs times them, but at the rounds' mean position: the prompts'
   mean length plus half the new tokens (the demo's prompts hold about 320); the schedule's own table is timed at
   position 256, and attention's share of an append grows with the position: t(5) 1.22x and t(9) 1.31x at 480
   what they are at 256 for the w8a8 target), ideal time = sum over rounds of
   t(k + 1) + (d1 + (k - 1) d where k >= 1), ideal speed-up = new tokens x t(1) / ideal time; measured over ideal
   = the generation-only speed-up / the ideal speed-up. Where the generating time went (result.timings): the
   target's forwards over the model's sum of t(k + 1) (target/model), the draft's steps over the model's
   (draft/model), and the rest of the loop (sampling, acceptance, bookkeeping) as a share of it (other).
2. Batches of 1, 2, 4 and 8 held-out prompts (left-padded): plain and assisted ("cost" and constant K = 4)
   tokens/s (all rows' new tokens), generation-only (result.timings) and end to end, speed-up, and assisted
   throughput over
   batch 1's. Measured over ideal for a batch: ideal time = rounds x (s d_b + t_b(T)), T the mean tokens a
   round verifies over all rows, s the mean candidates per row and round (a lower bound on the draft steps of a
   round, so the ideal is optimistic), d_b and t_b timed here as one append of b (draft) and T (target) tokens
   spread over b sequences at position 256; K/row the mean candidates per row and round, T/round the mean tokens
   a round verifies. (--batches-only: only this table.)
The bars set for the pair are printed with the figures they concern.
4. (--trees, --trees-only) Token trees: each tree shape (width w, depth K), the sibling tree (K * w nodes verified)
   and the dynamic tree of the same width (assistant_tree_shape="dynamic" with num_assistant_tokens = K * w: at most
   K * w nodes verified, at any depth up to K * w), against the chain verifying K * w candidates a round, greedy,
   rejection sampling (temperature 0.8) and greedy with an early-exit draft: tokens per target pass, tree over chain,
   the wall-clock speed-up over that chain, and t(T)/t(1) at the pass's width. Then what the cost schedule makes of
   width 4 (siblings, dynamic) against its own chain: nodes and tokens per pass, the target's and the draft's
   milliseconds a pass (result.timings), t(T)/t(1) at the pass's mean width, and the wall-clock speed-up: where a
   tree does not pay here, why (the target's pass or the draft's steps costing more than the tokens they add).
Flags: --callbacks adds the cost of Python callbacks in the loop (a logits_processor and stop_strings);
--random adds the random TinyLlama-1.1B-shape target (bench_decode.py's checkpoint) with a small random draft,
itself as draft, and prompt lookup.
Usage: /usr/bin/python3 benchmarks/bench_assisted.py [--new-tokens 128] [--repeats 3] [--quick] [--callbacks]
       [--random] [--trees | --trees-only] [--batches-only] [--target-dtype float32|w8a8|...]
       [--draft-dtype int8|w8a8|bfloat16|float32|auto] [--pair DIR]
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import habana_assist as ha

os.environ.setdefault("HA_PROGRESS", "0")  # tables only: no progress bars for the large calls
from bench_decode import TINYLLAMA, timed, write_checkpoint

from habana_assist.cli import DEFAULT_DRAFT_DTYPE, PLAIN_CLASSES, _machine, demo_prompts
from habana_assist.generation import assisted_costs
from habana_assist.generation.assisted_costs import append_times

# a random draft with the target's vocabulary (about 45 MB in bfloat16)
SMALL_DRAFT = dict(
    TINYLLAMA,
    hidden_size=512,
    intermediate_size=1408,
    num_hidden_layers=4,
    num_attention_heads=8,
    num_key_value_heads=1,
    tie_word_embeddings=True,
)


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


def rounds_by_k(res):
    """{k: rounds in which a row proposed exactly k drafts} from a result's counts."""
    prop = [int(x) for x in res.proposed_per_position] + [0]
    out = {0: res.num_target_passes - prop[0]}
    for k in range(1, len(prop)):
        out[k] = prop[k - 1] - prop[k]
    return out


def model_times(res, costs):
    """(target, draft) seconds the cost model gives a batch-1 call's rounds, as the core's cost schedule counts them
    (assist_cost.c): a round of k drafts costs t(k + 1) on the target and, for k >= 1, a first draft step right
    after the target's append (draft_first: the draft's weights out of the caches) and k - 1 more (draft_step)."""
    t = costs.target
    first = costs.draft_first[0] if costs.draft_first else costs.draft_step

    def verify(T):  # past the measured table, on the line through its last two points (as the core)
        return t[T - 1] if T <= len(t) else t[-1] + (T - len(t)) * max(0.0, t[-1] - t[-2])

    rounds = rounds_by_k(res).items()
    return (
        sum(n * verify(k + 1) for k, n in rounds),
        sum(n * (first + (k - 1) * costs.draft_step) for k, n in rounds if k > 0),
    )


def ideal_time(res, costs):
    """Seconds the cost model gives a batch-1 call's rounds (model_times: target and draft)."""
    return sum(model_times(res, costs))


def generating(res):
    """Seconds of a result's call after the prompt's prefill (the target's, and the draft's taking in the prompt),
    from the core's own clock (result.timings): what llama.cpp reports as "eval" apart from "prompt eval"."""
    return res.timings["total"] - res.timings["prefill"]


def interleaved(calls, repeats):
    """({key: best seconds}, {key: result}) of calls {key: fn}, timed in rounds that call every fn once (the
    machine's speed drifts from minute to minute; every case sees the same drift); a call that returns a result
    with timings (return_dict_in_generate=True) keeps the result of its fastest generating (generating())."""
    best = dict.fromkeys(calls, float("inf"))
    kept = {}
    for _ in range(repeats):
        for key, fn in calls.items():
            t0 = time.perf_counter()
            res = fn()
            best[key] = min(best[key], time.perf_counter() - t0)
            if getattr(res, "timings", None) is not None and (
                key not in kept or generating(res) < generating(kept[key])
            ):
                kept[key] = res
    return best, kept


def pass_fail(value, target):
    return f"{value:.2f} ({'meets' if value >= target else 'below'} {target})"


def shipped_schedules(target, draft, tok, n_new, repeats, others):
    """Table 1: batch 1 on the demo's 4 held-out prompts, plain and each schedule; plain also with the target held in
    each other numerics class ({class: model}), and every row's speed-up over the fastest of those plain rows.
    Generating figures from the core's clock (result.timings), end to end from the wall clock."""
    prompts = [tok(text, return_tensors="np")["input_ids"] for _, text in demo_prompts(4, 30)]
    schedules = {
        "cost (K <= 16)": dict(
            num_assistant_tokens=16, num_assistant_tokens_schedule="cost", assistant_confidence_threshold=0.0
        ),
        "constant K=4": dict(
            num_assistant_tokens=4, num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0
        ),
        "heuristic from K=4": dict(
            num_assistant_tokens=4,
            num_assistant_tokens_schedule="heuristic_transient",
            assistant_confidence_threshold=0.4,
        ),
        "Transformers' defaults": dict(
            num_assistant_tokens=20, num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.4
        ),
    }
    costs = target.assisted_costs(draft)
    base = dict(max_new_tokens=n_new, eos_token_id=[], return_dict_in_generate=True)
    calls = {}
    for i, ids in enumerate(prompts):
        calls["plain", i] = lambda ids=ids: target.generate(ids, **base)
        for cls, other in others.items():
            calls["plain " + cls, i] = lambda ids=ids, m=other: m.generate(ids, **base)
        # untimed for the table: the pair's first call after the other classes' models runs with their weights in
        # the caches (measured: ~30 ms slower a call here), which would fall on whichever schedule came first
        calls["warm the pair", i] = lambda ids=ids: target.generate(ids, assistant_model=draft, max_new_tokens=4)
        for name, kw in schedules.items():
            calls[name, i] = lambda ids=ids, kw=kw: target.generate(ids, assistant_model=draft, **base, **kw)
    best, kept = interleaved(calls, repeats)
    n = range(len(prompts))
    # the ideal's costs, timed where the rounds ran (the schedule's table is timed at position 256)
    position = round(float(np.mean([ids.shape[1] for ids in prompts]))) + n_new // 2
    at = assisted_costs.measure(target, draft._core, draft.max_cache_len, position=position)

    def wall(key):
        return sum(best[key, i] for i in n)

    def gen(key):
        return sum(generating(kept[key, i]) for i in n)

    n_all = n_new * len(prompts)
    t_plain, g_plain = wall("plain"), gen("plain")
    plain_seqs = [kept["plain", i].sequences for i in n]
    rows = []
    for key in ["plain"] + ["plain " + cls for cls in others]:
        rows.append(
            dict(
                case="plain " + target.weight_dtype if key == "plain" else key,
                gen=n_all / gen(key),
                e2e=n_all / wall(key),
                speed_gen=g_plain / gen(key),
                speed_e2e=t_plain / wall(key),
                a=float("nan"),
                per_round=1.0,
                ideal=1.0 if key == "plain" else float("nan"),
                meas_ideal=float("nan"),
                parts=None,
                same=True if key == "plain" else None,
            )
        )
    for name in schedules:
        results = [kept[name, i] for i in n]
        proposed = sum(r.num_draft_tokens for r in results)
        accepted = sum(r.num_accepted_tokens for r in results)
        model = [model_times(r, at) for r in results]
        t_ideal = sum(sum(m) for m in model)
        g = gen(name)
        speed_gen = g_plain / g
        ideal = n_all * at.target[0] / t_ideal
        rows.append(
            dict(
                case=name,
                gen=n_all / g,
                e2e=n_all / wall(name),
                speed_gen=speed_gen,
                speed_e2e=t_plain / wall(name),
                a=accepted / max(proposed, 1),
                per_round=n_all / sum(r.num_rounds for r in results),
                ideal=ideal,
                meas_ideal=speed_gen / ideal,
                # where the generating time went, against the cost model's share of each part
                parts=dict(
                    target=sum(r.timings["target"] for r in results) / sum(m[0] for m in model),
                    draft=sum(r.timings["draft"] for r in results) / max(sum(m[1] for m in model), 1e-12),
                    other=sum(r.timings["other"] for r in results) / g,
                ),
                same=all(np.array_equal(r.sequences, p) for r, p in zip(results, plain_seqs)),
            )
        )
    fastest = max((r for r in rows if r["case"].startswith("plain")), key=lambda r: r["gen"])
    fastest_e2e = max((r for r in rows if r["case"].startswith("plain")), key=lambda r: r["e2e"])
    for r in rows:
        r["fast_gen"], r["fast_e2e"] = r["gen"] / fastest["gen"], r["e2e"] / fastest_e2e["e2e"]
    prefill_share = sum(kept["plain", i].timings["prefill"] for i in n) / sum(
        kept["plain", i].timings["total"] for i in n
    )
    return rows, (costs, at, position), prefill_share, fastest["case"]


def shipped_sampling(target, draft, tok, n_new, repeats, seeds, top_k):
    """Table 3: batch 1, sampled (temperature 0.8, the given top_k), plain against rejection and coupled assisted
    sampling (constant K = 4, confidence threshold 0.4: Transformers' threshold), on the demo's 4 held-out prompts x
    `seeds` seeds; figures as table 1's, summed over all the calls."""
    prompts = [tok(text, return_tensors="np")["input_ids"] for _, text in demo_prompts(4, 30)]
    base = dict(
        max_new_tokens=n_new,
        eos_token_id=[],
        do_sample=True,
        temperature=0.8,
        top_k=top_k,
        return_dict_in_generate=True,
    )
    assist = dict(
        assistant_model=draft,
        num_assistant_tokens=4,
        num_assistant_tokens_schedule="constant",
        assistant_confidence_threshold=0.4,
    )
    modes = {
        "plain": {},
        "rejection": dict(assist, assisted_sampling="rejection"),
        "coupled": dict(assist, assisted_sampling="coupled"),
    }
    costs = target.assisted_costs(draft)
    calls = {}
    for i, ids in enumerate(prompts):
        for seed in range(seeds):
            for name, kw in modes.items():
                if name == "rejection":  # untimed: the pair's first call after plain's (as in table 1)
                    calls["warm the pair", i, seed] = lambda ids=ids: target.generate(
                        ids, assistant_model=draft, max_new_tokens=4
                    )
                calls[name, i, seed] = lambda ids=ids, kw=kw, seed=seed: target.generate(ids, seed=seed, **base, **kw)
    best, kept = interleaved(calls, repeats)
    keys = [(i, seed) for i in range(len(prompts)) for seed in range(seeds)]
    n_all = n_new * len(keys)
    t_plain = sum(best["plain", i, seed] for i, seed in keys)
    g_plain = sum(generating(kept["plain", i, seed]) for i, seed in keys)
    rows = [
        dict(
            case="plain",
            gen=n_all / g_plain,
            e2e=n_all / t_plain,
            speed_gen=1.0,
            speed_e2e=1.0,
            a=float("nan"),
            per_round=1.0,
            ideal=1.0,
            meas_ideal=float("nan"),
            same=True,
        )
    ]
    for name in list(modes)[1:]:
        results = [kept[name, i, seed] for i, seed in keys]
        t_all = sum(best[name, i, seed] for i, seed in keys)
        g = sum(generating(r) for r in results)
        speed_gen = g_plain / g
        ideal = n_all * costs.target[0] / sum(ideal_time(r, costs) for r in results)
        rows.append(
            dict(
                case=name,
                gen=n_all / g,
                e2e=n_all / t_all,
                speed_gen=speed_gen,
                speed_e2e=t_plain / t_all,
                a=sum(r.num_accepted_tokens for r in results) / max(sum(r.num_draft_tokens for r in results), 1),
                per_round=n_all / sum(r.num_rounds for r in results),
                ideal=ideal,
                meas_ideal=speed_gen / ideal,
                same=(
                    all(
                        np.array_equal(r.sequences, kept["plain", i, seed].sequences)
                        for r, (i, seed) in zip(results, keys)
                    )
                    if name == "coupled"
                    else None
                ),
            )
        )
    return rows


# token trees (width w, depth K) against the chain of the same verification width (K * w candidates)
TREE_SHAPES = ((2, 2), (2, 4), (3, 2), (4, 2), (2, 8), (4, 4), (4, 8), (8, 4))


def _tree_runs(target, draft, tok, n_new, repeats, sampled, early_exit, cases):
    """Batch 1 on the demo's 4 held-out prompts, each case {name: generate() arguments} timed in interleaved rounds
    (rejection sampling at temperature 0.8 with seeds 0 and 1 where sampled, else greedy; early_exit: the target's
    first layers draft instead). {name: per_pass (new tokens over the target's verifying passes), nodes (drafted
    nodes verified a pass), t (seconds of the whole calls), same (greedy: every output the plain output)}."""
    prompts = [tok(text, return_tensors="np")["input_ids"] for _, text in demo_prompts(4, 30)]
    base = dict(max_new_tokens=n_new, eos_token_id=[], assistant_confidence_threshold=0.0)
    base.update(dict(do_sample=True, temperature=0.8) if sampled else {})
    base.update(dict(assistant_early_exit=early_exit) if early_exit else dict(assistant_model=draft))
    seeds = (0, 1) if sampled else (None,)

    def call(ids, kw, seed, **more):
        return target.generate(ids, **base, **kw, **more, **({} if seed is None else dict(seed=seed)))

    calls = {
        (name, i, seed): (lambda ids=ids, kw=kw, seed=seed: call(ids, kw, seed))
        for name, kw in cases.items()
        for i, ids in enumerate(prompts)
        for seed in seeds
    }
    best, _ = interleaved(calls, repeats)
    plain_out = [target.generate(ids, max_new_tokens=n_new, eos_token_id=[]) for ids in prompts]
    rows = {}
    for name, kw in cases.items():
        results = [call(ids, kw, seed, return_dict_in_generate=True) for ids in prompts for seed in seeds]
        passes = sum(r.num_target_passes for r in results)
        rows[name] = dict(
            per_pass=n_new * len(results) / passes,
            nodes=sum(r.num_draft_tokens for r in results) / passes,
            target_pass=sum(r.timings["target"] for r in results) / passes,  # seconds of the target a pass
            draft_pass=sum(r.timings["draft"] for r in results) / passes,  # of the draft's steps a pass
            t=sum(best[name, i, seed] for i in range(len(prompts)) for seed in seeds),
            same=None if sampled else all(np.array_equal(r.sequences, p) for r, p in zip(results, plain_out)),
        )
    return rows


def shipped_trees(target, draft, tok, n_new, repeats, sampled, early_exit=None):
    """Table 4: each tree shape against the chain that verifies as many candidates a round (constant schedules,
    threshold 0): tokens per target pass, their ratio tree / chain, the wall-clock speed-up over that chain
    (interleaved rounds), and t(T)/t(1) of the target at the verification's width T (what a wider pass costs)."""
    costs = target.assisted_costs(None if early_exit else draft, assistant_early_exit=early_exit)
    constant = dict(num_assistant_tokens_schedule="constant")
    cases = {}
    for w, K in TREE_SHAPES:
        cases[f"chain K={K * w}"] = dict(constant, num_assistant_tokens=K * w)
        cases[f"tree w={w} K={K}"] = dict(constant, num_assistant_tokens=K, assistant_tree_width=w)
        cases[f"dynamic w={w} K={K * w}"] = dict(  # its K is its budget: the chain's verification width
            constant, num_assistant_tokens=K * w, assistant_tree_width=w, assistant_tree_shape="dynamic"
        )
    rows = _tree_runs(target, draft, tok, n_new, repeats, sampled, early_exit, cases)
    for name, kw in cases.items():
        T = 1 + kw["num_assistant_tokens"] * (
            kw.get("assistant_tree_shape") != "dynamic" and kw.get("assistant_tree_width") or 1
        )
        rows[name].update(T=T, tT=costs.target[min(T, len(costs.target)) - 1] / costs.target[0])
    return [
        (name, rows[name], rows[f"chain K={K * w}"])
        for w, K in TREE_SHAPES
        for name in (f"tree w={w} K={K}", f"dynamic w={w} K={K * w}")
    ]


def shipped_tree_choice(target, draft, tok, n_new, repeats, sampled, early_exit=None):
    """Table 4's second part: what the cost schedule (K <= 16) chooses with each tree shape of width 4 on this
    machine's measured costs, against its chain: drafted nodes verified a pass (above the chain's where it keeps a
    tree), tokens per pass, the target's and the draft's milliseconds a pass (result.timings: what the width cost),
    t(T)/t(1) at the pass's mean width T = 1 + nodes (the measured table, interpolated), and the wall-clock speed-up
    over the cost schedule's chain."""
    cost = dict(num_assistant_tokens=16, num_assistant_tokens_schedule="cost")
    cases = {
        "chain": cost,
        "siblings w=4": dict(cost, assistant_tree_width=4),
        "dynamic w=4": dict(cost, assistant_tree_width=4, assistant_tree_shape="dynamic"),
    }
    rows = _tree_runs(target, draft, tok, n_new, repeats, sampled, early_exit, cases)
    table = target.assisted_costs(None if early_exit else draft, assistant_early_exit=early_exit).target
    for row in rows.values():
        width = 1 + row["nodes"]
        row["tT"] = float(np.interp(width, np.arange(1, len(table) + 1), table)) / table[0]
    return [(name, rows[name], rows["chain"]) for name in cases]


def print_trees(target, draft, tok, n_new, repeats):
    layers = target.config.num_hidden_layers
    for title, sampled, early_exit, bar in (
        ("greedy", False, None, 1.1),
        ("rejection sampling, temperature 0.8", True, None, 1.2),
        (f"greedy, early exit (the target's first {max(layers // 4, 1)} layers)", False, max(layers // 4, 1), 1.2),
    ):
        print(
            f"\n4. token trees against the chain of the same verification width, {title}: tokens per target pass, "
            f"tree over chain, wall-clock speed-up over the chain ({_machine()})"
        )
        print(
            f"  {'tree':17s} {'T':>3s} {'same':>5s} {'tree t/pass':>11s} {'chain t/pass':>12s} {'ratio':>6s} "
            f"{'speed-up':>8s} {'t(T)/t(1)':>9s}"
        )
        rows = shipped_trees(target, draft, tok, n_new, repeats, sampled, early_exit)
        for name, tr, ch in rows:
            same = "-" if tr["same"] is None else str(tr["same"] and ch["same"])
            print(
                f"  {name:17s} {tr['T']:3d} {same:>5s} {tr['per_pass']:11.2f} {ch['per_pass']:12.2f} "
                f"{tr['per_pass'] / ch['per_pass']:6.2f} {ch['t'] / tr['t']:8.2f} {tr['tT']:9.2f}"
            )
        top = max(rows, key=lambda r: r[1]["per_pass"] / r[2]["per_pass"])
        print(
            f"  target: accepted tokens per pass over the chain's, best shape ({top[0]}) "
            f"{pass_fail(top[1]['per_pass'] / top[2]['per_pass'], bar)}"
        )
        print(f"  the cost schedule's choice (K <= 16, width 4), {title}, against its chain:")
        print(
            f"  {'shape':17s} {'same':>5s} {'nodes/pass':>10s} {'t/pass':>7s} {'target ms':>9s} {'draft ms':>8s} "
            f"{'t(T)/t(1)':>9s} {'speed-up':>8s}   (ms: a pass's, by result.timings; T = 1 + nodes/pass)"
        )
        for name, tr, ch in shipped_tree_choice(target, draft, tok, n_new, repeats, sampled, early_exit):
            same = "-" if tr["same"] is None else str(tr["same"])
            print(
                f"  {name:17s} {same:>5s} {tr['nodes']:10.2f} {tr['per_pass']:7.2f} {tr['target_pass'] * 1e3:9.3f} "
                f"{tr['draft_pass'] * 1e3:8.3f} {tr['tT']:9.2f} {ch['t'] / tr['t']:8.2f}"
            )


def shipped_batches(target, draft, tok, n_new, repeats, batches):
    """Table 2: batches of held-out prompts, plain and assisted."""
    tok.padding_side = "left"
    texts = [text for _, text in demo_prompts(max(batches), 30)]
    modes = {
        "plain": {},
        "cost": dict(
            assistant_model=draft,
            num_assistant_tokens=16,
            num_assistant_tokens_schedule="cost",
            assistant_confidence_threshold=0.0,
        ),
        "constant K=4": dict(
            assistant_model=draft,
            num_assistant_tokens=4,
            num_assistant_tokens_schedule="constant",
            assistant_confidence_threshold=0.0,
        ),
    }
    base = dict(max_new_tokens=n_new, eos_token_id=[], return_dict_in_generate=True)
    encs = {b: tok(texts[:b], return_tensors="np", padding=True) for b in batches}
    calls = {}
    for b, enc in encs.items():
        for mode, kw in modes.items():
            if mode == "cost":  # untimed: the pair's first call after plain's (as in table 1)
                calls[b, "warm the pair"] = lambda enc=enc: target.generate(
                    **enc, assistant_model=draft, max_new_tokens=4
                )
            calls[b, mode] = lambda enc=enc, kw=kw: target.generate(**enc, **base, **kw)
    best, kept = interleaved(calls, repeats)
    costs = target.assisted_costs(draft)
    d1 = costs.draft_step
    table = []
    for b, enc in encs.items():
        plain = kept[b, "plain"]
        for mode in modes:
            n_all = b * n_new
            res = kept[b, mode]
            row = dict(
                batch=b,
                mode=mode,
                gen=n_all / generating(res),
                e2e=n_all / best[b, mode],
                speed_gen=generating(plain) / generating(res),
                speed_e2e=best[b, "plain"] / best[b, mode],
                meas_ideal=None,
                same=True,
                k_mean=0.0,
                T=b,
            )
            if mode != "plain":
                row["same"] = bool(np.array_equal(res.sequences, plain.sequences))
                T = max(round((res.num_target_passes + res.num_draft_tokens) / res.num_rounds), b)
                k_mean = res.num_draft_tokens / res.num_target_passes
                d_b = d1 if b == 1 else append_times(draft._core, 256 + b, [b], target.vocab_size, rows=b)[b]
                t_b = append_times(target._core, 256 + T, [T], target.vocab_size, rows=b)[T]
                row["meas_ideal"] = res.num_rounds * (k_mean * d_b + t_b) / generating(res)
                row["k_mean"], row["T"] = k_mean, T
            table.append(row)
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.join(tempfile.gettempdir(), "habana_assist_bench")
    ap.add_argument("--dir", default=root, help="where the random checkpoints are written (reused if present)")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--k", type=int, default=4, help="num_assistant_tokens of the --random rows (constant schedule)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="32 new tokens, 2 repeats, batches 1 and 8")
    ap.add_argument("--callbacks", action="store_true", help="also the cost of Python callbacks in the loop")
    ap.add_argument("--random", action="store_true", help="also the random TinyLlama-shape target (slow)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per prompt of the sampled table")
    ap.add_argument(
        "--target-dtype",
        default="float32",
        help="how the shipped target is held (a numerics class: float32, bfloat16, int8, w8a8, ...; default float32)",
    )
    ap.add_argument(
        "--draft-dtype",
        default=DEFAULT_DRAFT_DTYPE,
        help="how the shipped draft is held (default: the "
        f"command line's, {DEFAULT_DRAFT_DTYPE}; 'auto': as stored, bfloat16)",
    )
    ap.add_argument("--top-k", type=int, default=0, help="top_k of the sampled table (Transformers' default: 50)")
    ap.add_argument("--sampling-only", action="store_true", help="only the sampled table")
    ap.add_argument("--batches-only", action="store_true", help="only the batches' table (2)")
    ap.add_argument("--trees", action="store_true", help="also the token trees' table (4)")
    ap.add_argument("--trees-only", action="store_true", help="only the token trees' table (4)")
    ap.add_argument(
        "--pair",
        metavar="DIR",
        help="another pair laid out as the package's (DIR/pycode, "
        "DIR/pycode-draft), such as an earlier release's, in place of the shipped one",
    )
    args = ap.parse_args()
    n_new, repeats, batches = args.new_tokens, args.repeats, (1, 2, 4, 8)
    if args.quick:
        n_new, repeats, batches = 32, 2, (1, 8)

    names = (
        (os.path.join(args.pair, "pycode"), os.path.join(args.pair, "pycode-draft"))
        if args.pair
        else ("habana-assist/pycode", "habana-assist/pycode-draft")
    )
    tok = ha.AutoTokenizer.from_pretrained(names[0])
    target = ha.AutoModelForCausalLM.from_pretrained(names[0], dtype=args.target_dtype)
    # the draft held as the command line holds it (w8a8 unless --assistant-dtype), --draft-dtype to compare
    draft = ha.AutoModelForCausalLM.from_pretrained(names[1], dtype=args.draft_dtype)
    target.generate(tok("import os\n", return_tensors="np")["input_ids"], max_new_tokens=2)  # warm-up
    print(
        f"habana_assist assisted benchmark: kernels={ha.kernels_name()}, threads={ha.get_num_threads()}; "
        f"{'pair ' + args.pair if args.pair else 'shipped pair'} (pycode {target.weight_dtype} + pycode-draft "
        f"{draft.weight_dtype}), greedy, {n_new} new tokens per row, "
        f"best of {repeats} interleaved rounds"
    )
    if args.sampling_only:
        print_sampling(target, draft, tok, n_new, repeats, args)
        return
    if args.trees_only:
        print_trees(target, draft, tok, n_new, repeats)
        return
    if args.batches_only:
        print_batches(target, draft, tok, n_new, repeats, batches)
        return
    # plain with the target in each other numerics class within 1% of float32's perplexity: every speed-up is also
    # given against the fastest plain configuration of the same target on this machine
    others = {
        cls: ha.AutoModelForCausalLM.from_pretrained(names[0], dtype=cls)
        for cls in PLAIN_CLASSES
        if cls != target.weight_dtype
    }
    rows, (costs, at, position), prefill_share, fastest = shipped_schedules(target, draft, tok, n_new, repeats, others)

    def described(c):
        t1 = c.target[0]
        return (
            f"draft step {c.draft_step * 1e3:.3f} ms (c = {c.draft_step / t1:.3f}), target t(1) {t1 * 1e3:.2f} ms, "
            f"t(T)/t(1) for T = 2, 5, 9, 16: " + ", ".join(f"{c.target[T - 1] / t1:.2f}" for T in (2, 5, 9, 16))
        )

    print(
        f"\n1. batch 1, the demo's 4 held-out prompts. Measured costs at position 256 (the cost schedule's table): "
        f"{described(costs)}; at position {position}, the rounds' mean (the ideal's): {described(at)}; "
        f"prefill is {prefill_share:.0%} of plain's end-to-end time. x: over plain {target.weight_dtype}; "
        f"fast x: over the fastest plain row (generating: {fastest}; {_machine()})"
    )
    print(
        f"  {'case':24s} {'same':>5s} {'gen t/s':>8s} {'e2e t/s':>8s} {'gen x':>6s} {'e2e x':>6s} {'fast x':>6s} "
        f"{'fast e2e':>8s} {'accept':>7s} {'tok/round':>9s} {'ideal x':>7s} {'meas/ideal':>10s} "
        f"{'target/model':>12s} {'draft/model':>11s} {'other':>6s}"
    )
    for r in rows:
        same = "-" if r["same"] is None else str(r["same"])
        print(
            f"  {r['case']:24s} {same:>5s} {r['gen']:8.1f} {r['e2e']:8.1f} {r['speed_gen']:6.2f} "
            f"{r['speed_e2e']:6.2f} {r['fast_gen']:6.2f} {r['fast_e2e']:8.2f} {r['a']:7.3f} {r['per_round']:9.2f} "
            f"{r['ideal']:7.2f} {r['meas_ideal']:10.2f}"
            + (
                f" {r['parts']['target']:12.2f} {r['parts']['draft']:11.2f} {r['parts']['other']:6.1%}"
                if r["parts"]
                else ""
            )
        )
    cost_row = next(r for r in rows if r["case"].startswith("cost"))
    print(
        f"  targets (cost schedule): generation-only speed-up {pass_fail(cost_row['speed_gen'], 2.2)}, end to end "
        f"{pass_fail(cost_row['speed_e2e'], 2.0)}, measured over ideal {pass_fail(cost_row['meas_ideal'], 0.9)}"
    )

    print_batches(target, draft, tok, n_new, repeats, batches)

    print_sampling(target, draft, tok, n_new, repeats, args)
    if args.callbacks:
        ids = tok(demo_prompts(1, 30)[0][1], return_tensors="np")["input_ids"]
        callbacks = measure_callbacks(target, draft, tok, ids, n_new, args.k, repeats)
        print(
            f"\n3. callbacks on the shipped pair, held-out 1, {n_new} new tokens: tokens/s without, with, and the "
            "fraction the callbacks add to a token's time"
        )
        print(
            f"  {'generation':10s} {'none t/s':>9s} {'logits_processor t/s':>21s} {'added':>7s} "
            f"{'stop_strings t/s':>17s} {'added':>7s}"
        )
        for mode, r in callbacks.items():
            print(
                f"  {mode:10s} {r['none']:9.2f} {r['logits_processor']:21.2f} "
                f"{r['none'] / r['logits_processor'] - 1:7.1%} {r['stop_strings']:17.2f} "
                f"{r['none'] / r['stop_strings'] - 1:7.1%}"
            )
    if args.trees:
        print_trees(target, draft, tok, n_new, repeats)
    if args.random:
        random_rows(args)


def print_batches(target, draft, tok, n_new, repeats, batches):
    table = shipped_batches(target, draft, tok, n_new, repeats, batches)
    print("\n2. batches of held-out prompts (left-padded), tokens/s over all rows")
    print(
        f"  {'batch':>5s} {'mode':14s} {'same':>5s} {'gen t/s':>8s} {'e2e t/s':>8s} {'gen x':>6s} {'e2e x':>6s} "
        f"{'meas/ideal':>10s} {'x batch 1':>9s} {'K/row':>6s} {'T/round':>7s}"
    )
    one = {r["mode"]: r for r in table if r["batch"] == 1}
    for r in table:
        mi = f"{r['meas_ideal']:10.2f}" if r["meas_ideal"] is not None else f"{'-':>10s}"
        print(
            f"  {r['batch']:5d} {r['mode']:14s} {str(r['same']):>5s} {r['gen']:8.1f} {r['e2e']:8.1f} "
            f"{r['speed_gen']:6.2f} {r['speed_e2e']:6.2f} {mi} {r['gen'] / one[r['mode']]['gen']:9.2f} "
            f"{r['k_mean']:6.2f} {r['T']:7d}"
        )
    top = max(batches)
    b8 = next(r for r in table if r["batch"] == top and r["mode"] == "cost")
    print(
        f"  target: batch {top} assisted (cost) throughput over batch 1 assisted, generation-only "
        f"{pass_fail(b8['gen'] / one['cost']['gen'], 3.0)}"
    )


def print_sampling(target, draft, tok, n_new, repeats, args):
    rows = shipped_sampling(target, draft, tok, n_new, repeats, args.seeds, args.top_k)
    print(
        f"\n3. batch 1, sampled (temperature 0.8, top_k {args.top_k}; K = 4, threshold 0.4), the demo's 4 held-out "
        f"prompts x {args.seeds} seeds; same: coupled equals plain sampling"
    )
    print(
        f"  {'case':12s} {'same':>5s} {'gen t/s':>8s} {'e2e t/s':>8s} {'gen x':>6s} {'e2e x':>6s} {'accept':>7s} "
        f"{'tok/round':>9s} {'ideal x':>7s} {'meas/ideal':>10s}"
    )
    for r in rows:
        print(
            f"  {r['case']:12s} {str(r['same'] if r['same'] is not None else '-'):>5s} {r['gen']:8.1f} "
            f"{r['e2e']:8.1f} {r['speed_gen']:6.2f} {r['speed_e2e']:6.2f} {r['a']:7.3f} {r['per_round']:9.2f} "
            f"{r['ideal']:7.2f} {r['meas_ideal']:10.2f}"
        )
    for r in rows[1:]:
        print(
            f"  target ({r['case']}): measured over ideal {pass_fail(r['meas_ideal'], 0.9)}; faster than plain "
            f"where the ideal says so: {r['speed_gen'] > 1.0 or r['ideal'] <= 1.0}"
        )


def random_rows(args):
    """The random TinyLlama-1.1B-shape bf16 target with a small random draft (almost never agrees: the
    engine's costs), itself as draft (every draft accepted: what verifying K + 1 tokens costs), and prompt
    lookup on a prompt that repeats itself; constant K, 32 new tokens."""
    target_dir, draft_dir = (
        os.path.join(args.dir, "tinyllama-1.1b-random-bf16"),
        os.path.join(args.dir, "draft-random-bf16"),
    )
    write_checkpoint(target_dir)
    write_checkpoint(draft_dir, SMALL_DRAFT, seed=7, exponent=-5)
    n, k = 32, args.k
    target = ha.AutoModelForCausalLM.from_pretrained(target_dir, max_cache_len=256)
    small = ha.AutoModelForCausalLM.from_pretrained(draft_dir, max_cache_len=256)
    rng = np.random.default_rng(3)
    prompt = rng.integers(3, target.vocab_size, size=(1, 16))
    repeating = np.tile(rng.integers(3, target.vocab_size, size=(1, 12)), (1, 4))
    target.generate(prompt, max_new_tokens=2)
    t_step = decode_step_time(target, prompt, 8, 2)
    c_small = decode_step_time(small, prompt, 16, 2) / t_step
    rows = [
        measure("random: small random draft", target, small, prompt, c_small, n, k, 2),
        measure("random: target as own draft", target, target, prompt, 1.0, n, k, 2),
        measure("random: prompt lookup", target, None, repeating, 0.0, n, k, 2),
    ]
    print(f"\n4. random TinyLlama-1.1B-shape bf16 target (decode step {t_step * 1e3:.1f} ms), {n} new tokens, K={k}")
    print(
        f"  {'case':30s} {'same':>5s} {'plain t/s':>10s} {'assist t/s':>10s} {'a':>6s} {'tok/pass':>8s} {'c':>6s} "
        f"{'speed-up':>8s} {'ideal':>6s} {'meas/ideal':>10s}"
    )
    for r in rows:
        print(
            f"  {r['case']:30s} {str(r['identical']):>5s} {r['plain_tps']:10.2f} {r['assisted_tps']:10.2f} "
            f"{r['a']:6.3f} {r['tokens_per_pass']:8.2f} {r['c']:6.3f} {r['speedup']:8.2f} {r['ideal']:6.2f} "
            f"{r['measured_over_ideal']:10.2f}"
        )


def measure_callbacks(target, draft, tok, ids, n, k, repeats):
    """{"plain" | "assisted": {"none" | "logits_processor" | "stop_strings": tokens/s}}, all in this run; the
    outputs with the callbacks are checked against the outputs without (the processor bans a token the output
    does not hold, the stop string never occurs), so the same tokens are timed."""
    plain = target.generate(ids, max_new_tokens=n, eos_token_id=[])
    banned = int(next(t for t in range(3, target.vocab_size) if t not in plain))

    def ban(input_ids, scores):
        scores[:, banned] = -np.inf
        return scores

    cases = {
        "none": {},
        "logits_processor": dict(logits_processor=[ban]),
        "stop_strings": dict(stop_strings=["\x00never\x00"], tokenizer=tok),
    }
    modes = {
        "plain": {},
        "assisted": dict(
            assistant_model=draft,
            num_assistant_tokens=k,
            num_assistant_tokens_schedule="constant",
            assistant_confidence_threshold=0.0,
        ),
    }
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
    kw = (
        dict(
            assistant_model=draft,
            num_assistant_tokens=k,
            num_assistant_tokens_schedule="constant",
            assistant_confidence_threshold=0.0,
        )
        if draft is not None
        else dict(prompt_lookup_num_tokens=k)
    )
    res = target.generate(ids, max_new_tokens=n, eos_token_id=[], return_dict_in_generate=True, **kw)
    t_assisted = timed(lambda: target.generate(ids, max_new_tokens=n, eos_token_id=[], **kw), repeats)
    a, measured = acceptance_rate(res), t_plain / t_assisted
    ideal = ideal_speedup(a, k, c)
    return dict(
        case=name,
        identical=bool(np.array_equal(plain, res.sequences)),
        plain_tps=n / t_plain,
        assisted_tps=n / t_assisted,
        a=a,
        tokens_per_pass=n / res.num_target_passes,
        c=c,
        speedup=measured,
        ideal=ideal,
        measured_over_ideal=measured / ideal,
    )


def pool_line():
    """What the core's thread pool did over the run: a run whose jobs went to the caller alone (the pool backs off
    while its jobs stop paying: another process on the cores, a stalled vCPU) ran on one thread, whatever it asked."""
    st = ha._core.pool_stats()
    jobs = st["jobs_pooled"] + st["jobs_alone"]
    return (
        f"\nthread pool over the run: {st['jobs_alone'] / max(jobs, 1):.1%} of {jobs} jobs ran on the caller alone "
        f"(one in 64 to time them, the rest while it backed off, {st['backoffs']} times); {st['jobs_waking']} woke "
        "sleeping workers"
    )


if __name__ == "__main__":
    main()
    print(pool_line())
