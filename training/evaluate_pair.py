#!/usr/bin/python3
"""Held-out evaluation of a model pair (a target and its draft, Hugging Face layout directories), with the
checks set for the pair (CHECKS), through habana_assist alone (numpy, no torch). Reads the held-out corpus that
collect_corpus.py wrote (--corpus: held_out.bin.xz and manifest.json); its first sum(files) documents are the held-out
Debian packages ("package documents"), the rest held-out standard-library files.

  1. Bits per byte of the target and of the draft. Each document is tokenized with the model's tokenizer
     with BOS (tok(text)["input_ids"]); its first min(n, 1024) tokens (max_position_embeddings) go through one
     forward; the negative log-likelihood of tokens 1..n-1 (log-softmax in float64, summed in float64) is
     divided by ln 2 x the UTF-8 bytes of tok.decode(ids[1:n]). The tokenizer adds no dummy prefix, so that
     decoding is the document's own prefix: checked for every document (whole text where the window holds it
     all, a prefix where it is cut; a cut through a byte-fallback character would show as a mismatch, counted
     in the output). Totals are sum of bits / sum of bytes over the package documents (the figure the issue
     judges), and separately over the standard-library documents. Also nats per scored token.
  2. Repetition. 12 package documents of >= 400 tokens (without BOS), different ones, chosen by a seeded rng;
     in each a window of 256 tokens of the whole file's tokenization at a seeded start s in
     [0, n - 256 - 128] (so that the file itself goes on for 128 more), with BOS prepended where s = 0.
     Plain greedy generate() of max_new_tokens=128, as decoded and with the demo's processor
     (no_repeat_ngram_size=10, habana_assist/cli.py's DEMO_NO_REPEAT_NGRAM_SIZE), which the check judges. A
     completion "repeats" when some 6-gram of token ids occurs 4 or more times (overlaps counted) among its new
     tokens.
     Decision on eos: the model's eos is kept (as a user of the model gets it), not turned off with
     eos_token_id=[]: after eos a model starts an unrelated document, which says nothing about looping. A
     completion that ends early is judged on the tokens it made; the lengths are reported, so a pair that
     escapes the criterion by stopping shows it.
  3. Acceptance over the same 12 prompts, sum(num_accepted_tokens) / sum(num_draft_tokens):
     a. greedy with the library's defaults (generate(ids, max_new_tokens=128, assistant_model=draft), nothing
        else: num_assistant_tokens, its schedule and assistant_confidence_threshold come from the draft's
        generation_config, else GenerationConfig's defaults; both are recorded), and the count of assisted
        outputs identical to plain greedy ones;
     b. sampled: do_sample=True, temperature=0.8 (the other warpers at their defaults, top_k 50 among them),
        assisted_sampling "rejection" (the default), K = 4 every round: num_assistant_tokens=4,
        num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0 (otherwise a draft token
        under the threshold ends the round early); a fixed seed per prompt (generate()'s seed=);
     b'. the same with the draft's (else the library's) assistant_confidence_threshold left in place (0.4): K = 4
        at most, a round ends where the draft is unsure. The issue's "K = 4 with the library's defaults" reads
        either way, so both are judged;
     a'. greedy with the defaults and the demo's processor, and the count identical to plain;
     c. for reference, greedy with the same K = 4 every round.
     In b and c a round is cut short only by eos or by the tokens left to max_new_tokens; K per round is
     reported. That acceptance counts the drafted tokens after a rejection as not accepted, so it falls with K
     (about (a + a^2 + ... + a^K) / K for a per-token rate a); a itself, accepted / (accepted + rejections), is
     reported beside it (per_token_acceptance), not judged.

generate()'s sequences hold the prompt, then the new tokens; the new tokens are sequences[0, len(prompt):].
--quick: 10 package and 5 standard-library documents, 3 prompts (a smoke test; the checks then say little).

Usage: /usr/bin/python3 training/evaluate_pair.py --target DIR --draft DIR --corpus DIR [--out FILE.json]
                                                  [--seed 0] [--quick]
"""

import argparse
import json
import math
import os
import sys
import time
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from collect_corpus import read_held_out  # noqa: E402 - found through the sys.path entry above

import habana_assist as ha  # noqa: E402 - found through the sys.path entry above
from habana_assist.cli import DEMO_NO_REPEAT_NGRAM_SIZE  # noqa: E402 - found through the sys.path entry above

WINDOW = 1024  # tokens per document in the bits-per-byte pass (the models' max_position_embeddings)
N_PROMPTS, PROMPT_LEN, NEW_TOKENS, MIN_FILE_TOKENS = 12, 256, 128, 400
NGRAM, REPEATS = 6, 4  # a completion repeats when some NGRAM-gram occurs REPEATS or more times
DEMO = {"no_repeat_ngram_size": DEMO_NO_REPEAT_NGRAM_SIZE}  # the demo's processor (habana_assist/cli.py)
TEMPERATURE, K = 0.8, 4
CHECKS = {  # the bars set for the pair: (comparison, value)
    "target_bits_per_byte_packages": ("<=", 1.1),
    "repeating_completions": ("<=", 2),
    "acceptance_greedy_defaults": (">=", 0.80),
    "acceptance_sampled_k4": (">=", 0.60),
    "acceptance_sampled_k4_threshold": (">=", 0.60),
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def tokenize(tok, docs):
    """Each document's ids with BOS, whole (verbose=False: longer than the model's window is expected here)."""
    return [tok(text, verbose=False)["input_ids"] for text in docs]


def window_nll(model, ids):
    """Nats (float64) of ids[1:] given what precedes each, ids (n,) with n >= 2, in one forward."""
    logits = model(input_ids=np.asarray([ids], dtype=np.int64), use_cache=False).logits[0, :-1].astype(np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))  # (n - 1, vocab)
    return -float(logp[np.arange(len(ids) - 1), np.asarray(ids[1:])].sum())


def bits_per_byte(model, tok, docs, all_ids, names=None):
    """Totals over docs (see the module's 1.), and per package where names are given."""
    nats = tokens = nbytes = 0.0
    mismatched = cut = 0
    per = {}
    for i, (text, ids) in enumerate(zip(docs, all_ids)):
        ids = ids[:WINDOW]
        if len(ids) < 2:
            continue
        spelled = tok.decode(ids[1:])
        whole = len(all_ids[i]) <= WINDOW
        cut += not whole
        mismatched += not (spelled == text if whole else text.startswith(spelled))
        doc_nats, doc_bytes = window_nll(model, ids), len(spelled.encode("utf-8"))
        nats, tokens, nbytes = nats + doc_nats, tokens + len(ids) - 1, nbytes + doc_bytes
        if names is not None:
            p = per.setdefault(names[i], [0.0, 0])
            p[0], p[1] = p[0] + doc_nats, p[1] + doc_bytes
    result = {
        "documents": len(docs),
        "cut_to_window": cut,
        "decode_mismatches": mismatched,
        "tokens_scored": int(tokens),
        "bytes": int(nbytes),
        "nats": nats,
        "bits_per_byte": nats / math.log(2) / nbytes,
        "nats_per_token": nats / tokens,
    }
    if names is not None:
        result["bits_per_byte_by_package"] = {k: v[0] / math.log(2) / v[1] for k, v in per.items()}
    return result


def choose_prompts(docs, names, all_ids, tok, n, rng):
    """n prompts (see the module's 2.): dicts with the document, its package, the start and the prompt ids."""
    eligible = [i for i, ids in enumerate(all_ids) if len(ids) - 1 >= MIN_FILE_TOKENS]
    if len(eligible) < n:
        raise SystemExit(f"only {len(eligible)} package documents hold >= {MIN_FILE_TOKENS} tokens; need {n}")
    prompts = []
    for i in rng.choice(eligible, size=n, replace=False):
        body = all_ids[i][1:]  # the file's tokens without BOS
        s = int(rng.integers(0, len(body) - PROMPT_LEN - NEW_TOKENS + 1))
        ids = ([tok.bos_token_id] if s == 0 else []) + list(body[s : s + PROMPT_LEN])
        prompts.append(
            {"document": int(i), "package": names[i], "start": s, "ids": ids, "seed": int(rng.integers(0, 2**63))}
        )
    return prompts


def repetition(target, tok, prompts, **processors):
    """Plain greedy completions of the prompts (with the given logits processors): -> (figures, new tokens)."""
    t0 = time.time()
    plain, completions = [], []
    for p in prompts:
        seq = target.generate(
            np.asarray([p["ids"]], dtype=np.int64), max_new_tokens=NEW_TOKENS, do_sample=False, **processors
        )
        out = seq[0, len(p["ids"]) :].tolist()
        plain.append(out)
        top = max_ngram_count(out)
        completions.append(
            {
                "document": p["document"],
                "package": p["package"],
                "start": p["start"],
                "prompt_tokens": len(p["ids"]),
                "new_tokens": len(out),
                "ended_with_eos": bool(out) and out[-1] in target.generation_config.eos_token_ids(),
                "max_6gram_count": top,
                "repeats": top >= REPEATS,
                "text": tok.decode(out),
            }
        )
    figures = {
        "prompts": len(prompts),
        "prompt_tokens": PROMPT_LEN,
        "max_new_tokens": NEW_TOKENS,
        "processors": processors,
        "ngram": NGRAM,
        "repeats_at": REPEATS,
        "eos": "kept (the model's)",
        "repeating": sum(c["repeats"] for c in completions),
        "seconds": time.time() - t0,
        "completions": completions,
    }
    return figures, plain


def max_ngram_count(tokens, n=NGRAM):
    """The most times any n-gram occurs in tokens (overlapping occurrences counted); 0 if fewer than n."""
    counts = Counter(tuple(tokens[j : j + n]) for j in range(len(tokens) - n + 1))
    return max(counts.values(), default=0)


def run_assisted(target, draft, prompts, **kwargs):
    """Assisted generate() over the prompts -> (summary, new tokens per prompt). acceptance is the library's
    sum(num_accepted_tokens) / sum(num_draft_tokens), which counts the drafted tokens after a rejection as not
    accepted (with K per round and a per-token rate a, about (a + a^2 + ... + a^K) / K); per_token_acceptance is
    a = accepted / (accepted + rejections), a rejection being a CORRECTED token (token_sources)."""
    drafted = accepted = rejected = rounds = new = 0
    proposed_at, accepted_at = np.zeros(0, np.int64), np.zeros(0, np.int64)
    rows, outs = [], []
    t0 = time.time()
    for p in prompts:
        extra = {"seed": p["seed"]} if kwargs.get("do_sample") else {}
        r = target.generate(
            np.asarray([p["ids"]], dtype=np.int64),
            max_new_tokens=NEW_TOKENS,
            assistant_model=draft,
            return_dict_in_generate=True,
            **kwargs,
            **extra,
        )
        out = r.sequences[0, len(p["ids"]) :].tolist()
        outs.append(out)
        d, a, n_rounds = int(r.num_draft_tokens), int(r.num_accepted_tokens), int(r.num_rounds)
        x = int((r.token_sources == ha.TokenSource.CORRECTED).sum())
        drafted, accepted, rejected = drafted + d, accepted + a, rejected + x
        rounds, new = rounds + n_rounds, new + len(out)
        n = max(len(proposed_at), len(r.proposed_per_position))
        proposed_at = np.pad(proposed_at, (0, n - len(proposed_at))) + np.pad(
            r.proposed_per_position, (0, n - len(r.proposed_per_position))
        )
        accepted_at = np.pad(accepted_at, (0, n - len(accepted_at))) + np.pad(
            r.accepted_per_position, (0, n - len(r.accepted_per_position))
        )
        rows.append(
            {
                "drafted": d,
                "accepted": a,
                "rejected": x,
                "rounds": n_rounds,
                "new_tokens": len(out),
                "acceptance": a / d if d else None,
            }
        )
    seconds = time.time() - t0
    return {
        "arguments": dict(kwargs),
        "drafted": drafted,
        "accepted": accepted,
        "acceptance": accepted / drafted if drafted else None,
        "rejected": rejected,
        "per_token_acceptance": accepted / (accepted + rejected) if accepted + rejected else None,
        "rounds": rounds,
        "new_tokens": new,
        "draft_tokens_per_round": drafted / rounds if rounds else None,
        "new_tokens_per_round": new / rounds if rounds else None,
        "proposed_by_position": proposed_at.tolist(),
        "accepted_by_position": accepted_at.tolist(),
        "seconds": seconds,
        "per_prompt": rows,
    }, outs


def d_threshold(draft):
    return draft.generation_config.assistant_confidence_threshold


def verdict(value, rule):
    op, bound = rule
    return "pass" if (value <= bound if op == "<=" else value >= bound) else "FAIL"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--corpus", required=True, help="the directory collect_corpus.py wrote")
    ap.add_argument("--out", help="where to write the results as JSON")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="10 package documents, 5 stdlib, 3 prompts")
    args = ap.parse_args()
    t_start = time.time()

    docs, names, stdlib = read_held_out(args.corpus)
    n_prompts = 3 if args.quick else N_PROMPTS
    if args.quick:
        docs, names, stdlib = docs[:10], names[:10], stdlib[:5]
    target = ha.AutoModelForCausalLM.from_pretrained(args.target, dtype="float32")
    draft = ha.AutoModelForCausalLM.from_pretrained(args.draft, dtype="float32")
    tokenizers = {
        "target": ha.AutoTokenizer.from_pretrained(args.target),
        "draft": ha.AutoTokenizer.from_pretrained(args.draft),
    }
    same_vocab = tokenizers["target"].get_vocab() == tokenizers["draft"].get_vocab()
    results = {
        "target": os.path.abspath(args.target),
        "draft": os.path.abspath(args.draft),
        "corpus": os.path.abspath(args.corpus),
        "seed": args.seed,
        "quick": args.quick,
        "habana_assist": ha.__version__,
        "threads": ha.get_num_threads(),
        "same_vocabulary": same_vocab,
        "window": WINDOW,
    }

    # 1. bits per byte
    ids_of = {}
    for role, model in (("target", target), ("draft", draft)):
        tok = tokenizers[role]
        if role == "draft" and same_vocab:
            pkg_ids, std_ids = ids_of["target"]
        else:
            pkg_ids, std_ids = tokenize(tok, docs), tokenize(tok, stdlib)
        ids_of[role] = pkg_ids, std_ids
        t0 = time.time()
        results[f"{role}_packages"] = bits_per_byte(model, tok, docs, pkg_ids, names)
        results[f"{role}_stdlib"] = bits_per_byte(model, tok, stdlib, std_ids)
        log(
            f"{role}: bits per byte {results[f'{role}_packages']['bits_per_byte']:.4f} (packages), "
            f"{results[f'{role}_stdlib']['bits_per_byte']:.4f} (stdlib), {time.time() - t0:.0f} s"
        )

    # 2. repetition, from plain greedy completions: as decoded, and with the demo's processor
    rng = np.random.default_rng(args.seed)
    tok = tokenizers["target"]
    prompts = choose_prompts(docs, names, ids_of["target"][0], tok, n_prompts, rng)
    results["repetition"], plain = repetition(target, tok, prompts)
    results["repetition_demo"], plain_demo = repetition(target, tok, prompts, **DEMO)
    repeating = results["repetition_demo"]["repeating"]
    plain_seconds = results["repetition"]["seconds"]
    log(
        f"repetition: {results['repetition']['repeating']}/{n_prompts} greedy completions repeat, {repeating}/"
        f"{n_prompts} with {DEMO}"
    )

    # 3. acceptance
    defaults = ha.GenerationConfig()
    keys = (
        "num_assistant_tokens",
        "num_assistant_tokens_schedule",
        "assistant_confidence_threshold",
        "assisted_sampling",
        "top_k",
        "top_p",
    )
    results["library_defaults"] = {k: getattr(defaults, k) for k in keys}
    results["defaults_in_effect"] = {  # Transformers reads the assistant keys from the draft's generation config
        k: getattr(
            draft.generation_config if k.startswith(("num_assistant", "assistant_")) else target.generation_config, k
        )
        for k in keys
    }
    k4 = dict(num_assistant_tokens=K, num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0)
    greedy, greedy_outs = run_assisted(target, draft, prompts)
    greedy["identical_to_plain"] = sum(a == b for a, b in zip(greedy_outs, plain))
    results["acceptance_greedy_defaults"] = greedy
    log(
        f"greedy (defaults): acceptance {greedy['acceptance']:.3f}, identical {greedy['identical_to_plain']}/"
        f"{n_prompts}, {greedy['seconds']:.0f} s"
    )
    sampled, _ = run_assisted(target, draft, prompts, do_sample=True, temperature=TEMPERATURE, **k4)
    results["acceptance_sampled_k4"] = sampled
    log(f"sampled (K = {K}): acceptance {sampled['acceptance']:.3f}, {sampled['seconds']:.0f} s")
    sampled_t, _ = run_assisted(
        target,
        draft,
        prompts,
        do_sample=True,
        temperature=TEMPERATURE,
        num_assistant_tokens=K,
        num_assistant_tokens_schedule="constant",
    )
    results["acceptance_sampled_k4_threshold"] = sampled_t
    log(f"sampled (K <= {K}, threshold {d_threshold(draft)}): acceptance {sampled_t['acceptance']:.3f}")
    greedy_demo, greedy_demo_outs = run_assisted(target, draft, prompts, **DEMO)
    greedy_demo["identical_to_plain"] = sum(a == b for a, b in zip(greedy_demo_outs, plain_demo))
    results["acceptance_greedy_demo"] = greedy_demo
    greedy4, greedy4_outs = run_assisted(target, draft, prompts, **k4)
    greedy4["identical_to_plain"] = sum(a == b for a, b in zip(greedy4_outs, plain))
    results["acceptance_greedy_k4"] = greedy4
    results["plain_greedy_seconds"] = plain_seconds

    values = {
        "target_bits_per_byte_packages": results["target_packages"]["bits_per_byte"],
        "repeating_completions": repeating,
        "acceptance_greedy_defaults": greedy["acceptance"],
        "acceptance_sampled_k4": sampled["acceptance"],
        "acceptance_sampled_k4_threshold": sampled_t["acceptance"],
    }
    results["checks"] = {
        k: {"value": values[k], "rule": f"{op} {bound}", "verdict": verdict(values[k], (op, bound))}
        for k, (op, bound) in CHECKS.items()
    }
    results["seconds"] = time.time() - t_start

    print_table(results, n_prompts)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
        log(f"wrote {args.out}")


def print_table(r, n_prompts):
    checks = r["checks"]

    def judged(key):
        c = checks[key]
        return f"{c['rule']:>7}  {c['verdict']}"

    def row(label, target, draft, rest=""):
        print(f"{label:<46}{target:>9}{draft:>11}  {rest}".rstrip())

    tp, dp, ts, ds = r["target_packages"], r["draft_packages"], r["target_stdlib"], r["draft_stdlib"]
    d = r["defaults_in_effect"]
    print(f"target {r['target']}\ndraft  {r['draft']}\n")
    row("held out", "target", "draft", "criterion")
    row(
        f"bits/byte, packages ({tp['documents']} docs, {tp['tokens_scored']} tok)",
        f"{tp['bits_per_byte']:.4f}",
        f"{dp['bits_per_byte']:.4f}",
        judged("target_bits_per_byte_packages"),
    )
    row("nats/token, packages", f"{tp['nats_per_token']:.4f}", f"{dp['nats_per_token']:.4f}")
    for name, bpb in tp["bits_per_byte_by_package"].items():
        row(f"  bits/byte, {name}", f"{bpb:.4f}", f"{dp['bits_per_byte_by_package'][name]:.4f}")
    row(
        f"bits/byte, stdlib ({ts['documents']} docs, {ts['tokens_scored']} tok)",
        f"{ts['bits_per_byte']:.4f}",
        f"{ds['bits_per_byte']:.4f}",
    )
    row("nats/token, stdlib", f"{ts['nats_per_token']:.4f}", f"{ds['nats_per_token']:.4f}")

    print()
    print(f"a completion repeats when some {NGRAM}-gram occurs {REPEATS}+ times in it")
    for key, label in (
        ("repetition", "greedy"),
        ("repetition_demo", f"the demo's {DEMO_NO_REPEAT_NGRAM_SIZE}-gram ban"),
    ):
        rep = r[key]
        row(
            f"repeating completions, {label}",
            f"{rep['repeating']}/{n_prompts}",
            "",
            judged("repeating_completions") if key == "repetition_demo" else "",
        )
        counts = " ".join(str(c["max_6gram_count"]) for c in rep["completions"])
        print(f"  max {NGRAM}-gram count per completion: {counts}")
        print(f"  new tokens per completion (eos kept):  {' '.join(str(c['new_tokens']) for c in rep['completions'])}")

    print()
    row("assisted, over the same prompts", "accept", "acc/dft", "criterion     per-tok K/round tok/rnd  same    s")
    rows = (
        (
            "acceptance_greedy_defaults",
            f"greedy, defaults (K {d['num_assistant_tokens']} {d['num_assistant_tokens_schedule']}, "
            f"conf {d['assistant_confidence_threshold']})",
        ),
        ("acceptance_sampled_k4", f"sampled T {TEMPERATURE}, K {K} constant, {d['assisted_sampling']}"),
        ("acceptance_sampled_k4_threshold", f"  the same, K <= {K}, conf {d['assistant_confidence_threshold']}"),
        ("acceptance_greedy_demo", f"greedy, defaults, the demo's {DEMO_NO_REPEAT_NGRAM_SIZE}-gram ban"),
        ("acceptance_greedy_k4", f"greedy, K {K} constant (reference)"),
    )
    for key, label in rows:
        a = r[key]
        same = f"{a['identical_to_plain']}/{n_prompts}" if "identical_to_plain" in a else "-"
        rule = judged(key) if key in checks else ""
        row(
            label,
            f"{a['acceptance']:.3f}",
            f"{a['accepted']}/{a['drafted']}",
            f"{rule:<13}{a['per_token_acceptance']:>8.3f}{a['draft_tokens_per_round']:>8.2f}"
            f"{a['new_tokens_per_round']:>8.2f}{same:>6}{a['seconds']:>5.0f}",
        )
    row("plain greedy (no draft)", "", "", f"{'':<13}{'':>8}{'':>8}{'':>8}{'':>6}{r['plain_greedy_seconds']:>5.0f}")
    print(
        f"\n{sum(c['verdict'] == 'pass' for c in checks.values())}/{len(checks)} checks pass; "
        f"{r['seconds']:.0f} s in all"
    )


if __name__ == "__main__":
    main()
