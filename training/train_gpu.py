#!/usr/bin/env python3
"""Trains the shipped pair on a GPU in one command: the target (a 27M-parameter Llama) on the corpus that
collect_corpus.py gathered from Debian's packages, then its draft, distilled from it: the target's own greedy and
sampled continuations and its output distribution (KL), so that the draft agrees with it when sampling as well as
when greedy. One call fits the device machine's 600 s limit: the phases share --budget seconds of wall clock, and
each phase's step count (and so its cosine schedule) is set from its measured step time after a few steps.

Runs where habana_assist is not built (torch 2.x with CUDA; also torch 1.13 on the CPU for --smoke): it reads the
corpus (train.bin.xz, held_out.bin.xz) and the SentencePiece tokenizer, and writes to --out only what must come back
from the GPU machine (at most 8 files of 16 MiB):
  pycode/model-0000i-of-00004.safetensors + model.safetensors.index.json   the target, bfloat16 shards
  pycode-draft/model.safetensors                                         the draft, bfloat16
  metrics.json                                                           steps, tokens, times, held-out figures
--init DIR starts from the weights of an earlier run's --out or of a packaged pair (habana_assist/pretrained; a
directory without the draft's weights leaves the draft to start afresh), with a fresh optimizer and schedule.
--ul-share F fine-tunes the target against its own greedy loops (sequence-level unlikelihood) for that share of the
budget after its training; docs/training.md gives what it did. package_pair.py then lays the weights out as the
package ships them.

Usage (on the GPU machine): python3 training/train_gpu.py --corpus .corpus --out $OUT [--budget 520]
       (here, a check of the recipe): /usr/bin/python3 training/train_gpu.py --corpus .corpus --out /tmp/x --smoke
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import sentencepiece as spm
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from collect_corpus import read_docs, read_held_out  # noqa: E402 - found through the sys.path entry above
from llama_torch import SPECIAL, Llama, load_into, n_params, save_bf16  # noqa: E402 - found through the sys.path entry above

TARGET = dict(
    hidden_size=512,
    intermediate_size=1408,
    num_hidden_layers=8,
    num_attention_heads=8,
    num_key_value_heads=2,
    tie_word_embeddings=False,
)
DRAFT = dict(
    hidden_size=256,
    intermediate_size=768,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=1,
    tie_word_embeddings=True,
)
TOKENIZER = os.path.join(HERE, "..", "habana_assist", "pretrained", "pycode", "tokenizer.model")
SHARD_BYTES = 15 * 2**20  # under the 16 MiB a file may have to come back from the GPU machine
T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:6.1f} s] {msg}", flush=True)


# ---- data ------------------------------------------------------------------------------------------------------


def encode(sp, docs, threads):
    """[np.int32 array of <s> doc tokens </s>] per document."""
    ids = sp.encode(docs, num_threads=threads)
    return [np.array([SPECIAL["bos"][0]] + x + [SPECIAL["eos"][0]], dtype=np.int32) for x in ids]


class Windows:
    """(batch, seq + 1) windows of a token stream, epoch by epoch: each epoch cuts the stream into windows at a
    random offset and visits them in a random order, so every token is seen once per epoch."""

    def __init__(self, stream, seq, batch, rng, device):
        self.stream, self.seq, self.batch, self.rng, self.device = stream, seq, batch, rng, device
        self.order, self.tokens, self.epochs = [], 0, 0

    def next(self):
        if len(self.order) < self.batch:
            off = int(self.rng.integers(0, self.seq))
            starts = np.arange(off, len(self.stream) - self.seq - 1, self.seq)
            self.order = list(self.rng.permutation(starts))
            self.epochs += 1
        take, self.order = self.order[: self.batch], self.order[self.batch :]
        self.tokens += self.batch * self.seq
        w = torch.stack([self.stream[s : s + self.seq + 1] for s in take]).long()
        return w.to(self.device, non_blocking=True)


# ---- schedule --------------------------------------------------------------------------------------------------


def lr_at(step, steps, peak, warmup):
    """Linear warmup, then a cosine from peak to a tenth of it at the last step."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, steps - warmup)))))


def run_phase(name, seconds, fixed_steps, params, peak_lr, warmup, step_fn, device, weight_decay):
    """Runs step_fn(step) -> (loss, info) under AdamW with the schedule; the number of steps is fixed_steps, or
    what fits `seconds` at the speed measured over steps 5..24. Returns (steps, seconds spent)."""
    fused = {"fused": True} if device.type == "cuda" else {}
    opt = torch.optim.AdamW(params, lr=peak_lr, betas=(0.9, 0.95), weight_decay=weight_decay, **fused)
    steps, t_start, t5 = fixed_steps or 10**9, time.time(), None
    step = 0
    while step < steps:
        if not fixed_steps and step == 5:
            sync(device)
            t5 = time.time()
        if not fixed_steps and step == 25:
            sync(device)
            per = (time.time() - t5) / 20
            steps = max(26, int((seconds - (time.time() - t_start)) / per) + 25)
            log(f"{name}: {per * 1000:.0f} ms/step -> {steps} steps")
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, peak_lr, warmup)
        loss, info = step_fn(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 100 == 0 or step == steps - 1:
            log(
                f"{name} step {step}/{steps} loss {float(loss.detach()):.4f} {info()} "
                f"lr {opt.param_groups[0]['lr']:.2e}"
            )
        step += 1
    sync(device)
    return steps, time.time() - t_start


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def autocast(device):
    if device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return torch.autocast(device_type="cpu", enabled=False)


# ---- the target's continuations --------------------------------------------------------------------------------


@torch.no_grad()
def continue_with(model, prompts, new_tokens, temperature, gen, device):
    """prompts (B, P) int64 -> (B, P + new_tokens): greedy where temperature is 0, else sampled at it."""
    model.eval()
    cache, out = [], [prompts]
    with autocast(device):
        logits = model(prompts, cache=cache, pos=0)[:, -1].float()
        for i in range(new_tokens):
            if temperature == 0:
                nxt = logits.argmax(-1, keepdim=True)
            else:
                nxt = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen)
            out.append(nxt)
            if i + 1 < new_tokens:
                logits = model(nxt, cache=cache, pos=prompts.shape[1] + i)[:, -1].float()
    model.train()
    return torch.cat(out, 1)


def corpus_prompts(stream, heads, m, length, rng, device):
    """m prompts of `length` tokens of the corpus stream, (m, length) int64: half of them from a file's beginning
    (heads: the offsets where files start), as the demo's prompts are, the rest from anywhere."""
    starts = rng.integers(0, len(stream) - length, size=m)
    at_head = rng.random(m) < 0.5
    starts[at_head] = heads[rng.integers(0, len(heads), size=int(at_head.sum()))]
    return torch.stack([stream[s : s + length] for s in starts]).long().to(device)


def onpolicy(target, stream, heads, n, seq, batch, rng, gen, device):
    """n windows of seq tokens: a prompt of the corpus (a quarter to a half of seq; half of them from a file's
    beginning, as the demo's prompts are) continued by the target; a third greedy, the rest sampled at 0.8 or 1."""
    out = []
    for b0 in range(0, n, batch):
        m = min(batch, n - b0)
        p = int(rng.integers(seq // 4, seq // 2 + 1))
        prompts = corpus_prompts(stream, heads, m, p, rng, device)
        temperature = [0.0, 0.8, 1.0][(b0 // batch) % 3]
        out.append(continue_with(target, prompts, seq - p, temperature, gen, device).cpu())
    return torch.cat(out)


def next_token_loss(model, w, device):
    """Cross-entropy of each next token of the windows w (B, seq + 1) under the model."""
    with autocast(device):
        logits = model(w[:, :-1])
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1))


# ---- loops: sequence-level unlikelihood -------------------------------------------------------------------------


def loop_mask(cont, n=8, earlier=2):
    """cont (B, N) int64 on the CPU -> (B, N) bool: the tokens of every n-token run that already occurred `earlier`
    times or more before it in the same row. With earlier = 2 a line written twice is left alone (code repeats
    itself for good reasons) and the third copy of a loop is what is marked."""
    mask = torch.zeros(cont.shape, dtype=torch.bool)
    for b, row in enumerate(cont.tolist()):
        seen = {}
        for i in range(n - 1, len(row)):
            g = tuple(row[i - n + 1 : i + 1])
            c = seen.get(g, 0)
            if c >= earlier:
                mask[b, i - n + 1 : i + 1] = True
            seen[g] = c + 1
    return mask


def unlikelihood(model, seqs, mask, prompt, device):
    """Sequence-level unlikelihood (Welleck et al., 2019) on the model's own continuations: seqs (B, L) are prompts
    of `prompt` tokens and what the model continued; at each marked continuation token x_t the loss is
    -log(1 - p(x_t | x_<t)), summed and divided by the number of continuation tokens."""
    with autocast(device):
        logits = model(seqs[:, :-1])[:, prompt - 1 :]
    p = torch.softmax(logits.float(), -1).gather(-1, seqs[:, prompt:, None])[..., 0]
    ul = -torch.log1p(-p.clamp(max=1 - 1e-5))
    return (ul * mask).sum() / mask.numel()


# ---- held-out figures ------------------------------------------------------------------------------------------


@torch.no_grad()
def bits_per_byte(model, sp, docs, device, max_len=1024):
    """Over each held-out document's first max_len tokens: (bits per byte, nats per token)."""
    model.eval()
    nats, tokens, nbytes = 0.0, 0, 0
    for d in docs:
        ids = ([SPECIAL["bos"][0]] + sp.encode(d))[:max_len]
        if len(ids) < 2:
            continue
        x = torch.tensor([ids], device=device)
        with autocast(device):
            logits = model(x[:, :-1]).float()
        nats += float(F.cross_entropy(logits[0].double(), x[0, 1:], reduction="sum"))
        tokens += len(ids) - 1
        nbytes += len(sp.decode(ids[1:]).encode("utf-8"))
    model.train()
    return nats / math.log(2) / nbytes, nats / tokens


@torch.no_grad()
def agreement(target, draft, seqs, prompt, device):
    """On the target's own continuations seqs (B, S) after `prompt` tokens: how often the draft's argmax is the
    target's (what greedy verification accepts), and sum(min(p, q)) at temperature 0.8 (the expected acceptance of
    one drafted token under rejection sampling)."""
    target.eval()
    draft.eval()
    with autocast(device):
        p, q = target(seqs).float()[:, prompt - 1 : -1], draft(seqs).float()[:, prompt - 1 : -1]
    greedy = float((p.argmax(-1) == q.argmax(-1)).float().mean())
    sampled = float(torch.minimum(torch.softmax(p / 0.8, -1), torch.softmax(q / 0.8, -1)).sum(-1).mean())
    target.train()
    draft.train()
    return greedy, sampled


def repeats(seqs, prompt, n=6, times=4):
    """How many rows of seqs repeat some n-token run `times` times or more after `prompt` tokens."""
    count = 0
    for row in seqs[:, prompt:].tolist():
        grams = {}
        for i in range(len(row) - n + 1):
            g = tuple(row[i : i + n])
            grams[g] = grams.get(g, 0) + 1
        count += max(grams.values(), default=0) >= times
    return count


# ---- main ------------------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="collect_corpus.py's --out")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", default=TOKENIZER)
    ap.add_argument("--init", help="an earlier run's --out: start from its weights")
    ap.add_argument("--budget", type=float, default=520.0, help="seconds of wall clock for the whole run")
    ap.add_argument("--target-share", type=float, default=0.62, help="of the budget, for the target's training")
    ap.add_argument(
        "--ul-share",
        type=float,
        default=0.0,
        help="of the budget, for the target's unlikelihood fine-tuning against its own greedy loops (after its "
        "training)",
    )
    ap.add_argument("--ul-lr", type=float, default=2e-4, help="the unlikelihood fine-tuning's peak learning rate")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--draft-lr", type=float, default=3e-3)
    ap.add_argument("--onpolicy", type=int, default=6144, help="target continuations for the draft's training")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="a few steps on a few files, on the CPU: checks the recipe")
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    torch.manual_seed(args.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    threads = os.cpu_count() or 2
    log(f"torch {torch.__version__} on {torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}")

    sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
    vocab = sp.get_piece_size()
    train_docs = read_docs(os.path.join(args.corpus, "train.bin.xz"))
    held_pkg = read_held_out(args.corpus)[0]
    if args.smoke:
        train_docs, held_pkg = train_docs[:60], held_pkg[:3]
        args.seq, args.batch, args.onpolicy = 128, 2, 6
    if args.target_share == 0 and args.ul_share == 0 and not args.init:
        raise SystemExit("--target-share 0 needs --init (a trained target)")
    encoded = encode(sp, train_docs, threads)
    stream = torch.from_numpy(np.concatenate(encoded))
    heads = np.cumsum([0] + [len(e) for e in encoded[:-1]])
    heads = heads[heads < len(stream) - args.seq]
    log(f"{len(train_docs)} training files, {len(stream):,} tokens; {len(held_pkg)} held-out package files")

    target, draft = Llama(vocab, **TARGET).to(device), Llama(vocab, **DRAFT).to(device)
    if args.init:  # an earlier run's --out, or a packaged pair (habana_assist/pretrained)
        load_into(target, os.path.join(args.init, "pycode"))
        if has_weights(os.path.join(args.init, "pycode-draft")):  # else the draft starts afresh
            load_into(draft, os.path.join(args.init, "pycode-draft"))
            log(f"target and draft from {args.init}")
        else:
            log(f"target from {args.init}; the draft starts afresh")
    log(f"target {n_params(target) / 1e6:.2f}M parameters, draft {n_params(draft) / 1e6:.2f}M")
    rng = np.random.default_rng(args.seed)
    metrics = {
        "torch": torch.__version__,
        "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(),
        "seed": args.seed,
        "init": args.init,
        "vocab": vocab,
        "train": {"files": len(train_docs), "tokens": int(len(stream))},
        "seq": args.seq,
        "batch": args.batch,
        "target": TARGET,
        "draft": DRAFT,
        "params": {"target": n_params(target), "draft": n_params(draft)},
    }
    fixed = 3 if args.smoke else 0
    # the time left for the draft: what the budget leaves after tokenizing and the target's share
    target_seconds = args.budget * args.target_share - (time.time() - T0)

    # 1. the target: next-token cross-entropy on the corpus
    data = Windows(stream, args.seq, args.batch, rng, device)

    def target_step(step):
        return next_token_loss(target, data.next(), device), lambda: f"epoch {data.epochs}"

    if args.target_share > 0:  # 0: the target as --init gave it, only the draft trains
        steps, secs = run_phase(
            "target",
            target_seconds,
            fixed,
            list(target.parameters()),
            args.lr,
            10 if args.smoke else 200,
            target_step,
            device,
            0.1,
        )
        metrics["target_training"] = {
            "steps": steps,
            "seconds": secs,
            "tokens": data.tokens,
            "epochs": data.tokens / len(stream),
            "peak_lr": args.lr,
        }
        log(f"target: {steps} steps, {data.tokens:,} tokens ({data.tokens / len(stream):.2f} epochs) in {secs:.0f} s")
    if args.ul_share > 0:
        metrics["target_unlikelihood"] = unlikelihood_phase(target, stream, heads, args, rng, device, fixed)
    if args.target_share > 0 or args.ul_share > 0:
        files = save_bf16(dict(target.hf_params()), os.path.join(args.out, "pycode"), SHARD_BYTES)
        log(f"target saved: {files}")
    bpb, npt = bits_per_byte(target, sp, held_pkg, device)
    metrics["target_held_out"] = {"bits_per_byte": bpb, "nats_per_token": npt}
    log(f"target held-out packages: {bpb:.3f} bits/byte, {npt:.3f} nats/token")
    write_metrics(args.out, metrics)

    # 2. the target's own continuations: greedy and sampled
    t = time.time()
    gen = torch.Generator(device=device)
    gen.manual_seed(args.seed + 1)
    seqs = onpolicy(target, stream, heads, args.onpolicy, args.seq, 4 if args.smoke else 1024, rng, gen, device)
    metrics["onpolicy"] = {"sequences": len(seqs), "seconds": time.time() - t}
    log(f"{len(seqs)} target continuations of {args.seq} tokens in {time.time() - t:.0f} s")

    # 3. the draft: KL to the target's distribution + cross-entropy on its argmax; half of each batch the
    # target's continuations, half corpus text
    text = Windows(stream, args.seq, args.batch - args.batch // 2, rng, device)
    n_on = args.batch // 2
    stats = {}

    def draft_step(step):
        own = seqs[torch.from_numpy(rng.integers(0, len(seqs), size=n_on))].to(device)
        w = torch.cat([own, text.next()[:, :-1]])
        with torch.no_grad(), autocast(device):
            p = target(w).float().reshape(-1, vocab)
        with autocast(device):
            q = draft(w).float().reshape(-1, vocab)
        logq = F.log_softmax(q, -1)
        kl = F.kl_div(logq, F.log_softmax(p, -1), log_target=True, reduction="batchmean")
        hard = F.nll_loss(logq, p.argmax(-1))
        stats["kl"], stats["hard"] = kl, hard
        return kl + hard, lambda: f"kl {float(stats['kl']):.4f} hard {float(stats['hard']):.4f}"

    draft_seconds = args.budget - (time.time() - T0) - 25  # the held-out figures and saving after it
    steps, secs = run_phase(
        "draft",
        draft_seconds,
        fixed,
        list(draft.parameters()),
        args.draft_lr,
        10 if args.smoke else 100,
        draft_step,
        device,
        0.0,
    )
    metrics["draft_training"] = {
        "steps": steps,
        "seconds": secs,
        "peak_lr": args.draft_lr,
        "onpolicy_share": n_on / args.batch,
    }
    files = save_bf16(dict(draft.hf_params()), os.path.join(args.out, "pycode-draft"))
    log(f"draft: {steps} steps in {secs:.0f} s; saved {files}")
    bpb, npt = bits_per_byte(draft, sp, held_pkg, device)
    metrics["draft_held_out"] = {"bits_per_byte": bpb, "nats_per_token": npt}

    # 4. quick held-out checks on the GPU (the package's own evaluation, evaluate_pair.py, is the one reported)
    prompts = []
    for d in held_pkg:
        ids = [SPECIAL["bos"][0]] + sp.encode(d)
        if len(ids) >= 400:
            s = int(rng.integers(0, len(ids) - 256))
            prompts.append(ids[s : s + 256])
    if prompts:
        x = torch.tensor(prompts[:64], device=device)
        greedy = continue_with(target, x, 128, 0.0, gen, device)
        sampled = continue_with(target, x, 128, 0.8, gen, device)
        g_agree, _ = agreement(target, draft, greedy, 256, device)
        _, s_accept = agreement(target, draft, sampled, 256, device)
        metrics["gpu_checks"] = {
            "prompts": len(x),
            "greedy_agreement": g_agree,
            "sampled_min_pq": s_accept,
            "greedy_repeating": repeats(greedy.cpu(), 256),
        }
    metrics["seconds"] = time.time() - T0
    write_metrics(args.out, metrics)
    log(
        f"done: {json.dumps({k: metrics[k] for k in ('target_held_out', 'draft_held_out')})} "
        f"{json.dumps(metrics.get('gpu_checks'))}"
    )


def unlikelihood_phase(target, stream, heads, args, rng, device, fixed):
    """Fine-tunes the target against its own greedy loops for --ul-share of the budget: even steps are sequence-level
    unlikelihood on its greedy continuations (a pool of them regenerated every `reuse` such steps, so the loops it
    learns to leave are the ones it makes now), odd steps plain cross-entropy on corpus text, so that what it
    knows stays. Returns the phase's figures, the share of marked tokens in each fresh pool among them."""
    prompt, new, batch, reuse = (16, 24, 2, 2) if args.smoke else (192, 128, 128, 4)
    text = Windows(stream, args.seq, max(1, args.batch // 2), rng, device)
    pool, marked, stats = {}, [], {}

    def step_fn(step):
        if step % 2:
            loss = next_token_loss(target, text.next(), device)
            stats["ce"] = loss.detach()
        else:
            k = step // 2
            if k % reuse == 0:
                prompts = corpus_prompts(stream, heads, batch * reuse, prompt, rng, device)
                seqs = continue_with(target, prompts, new, 0.0, None, device)  # greedy: no generator
                mask = loop_mask(seqs[:, prompt:].cpu())
                pool["seqs"], pool["mask"] = seqs, mask.to(device)
                marked.append(float(mask.float().mean()))
            rows = slice((k % reuse) * batch, (k % reuse + 1) * batch)
            loss = unlikelihood(target, pool["seqs"][rows], pool["mask"][rows], prompt, device)
            stats["ul"] = loss.detach()
        return (
            loss,
            lambda: f"ul {float(stats.get('ul', 0)):.4f} ce {float(stats.get('ce', 0)):.4f} marked {marked[-1]:.4f}",
        )

    steps, secs = run_phase(
        "unlikelihood",
        args.budget * args.ul_share,
        fixed * 2,
        list(target.parameters()),
        args.ul_lr,
        10 if args.smoke else 50,
        step_fn,
        device,
        0.1,
    )
    log(f"unlikelihood: {steps} steps in {secs:.0f} s; marked share of each pool {marked[0]:.4f} -> {marked[-1]:.4f}")
    return {
        "steps": steps,
        "seconds": secs,
        "peak_lr": args.ul_lr,
        "prompt": prompt,
        "new_tokens": new,
        "pool": batch * reuse,
        "marked_share": marked,
    }


def has_weights(directory):
    return any(
        os.path.exists(os.path.join(directory, f)) for f in ("model.safetensors", "model.safetensors.index.json")
    )


def write_metrics(out, metrics):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)


if __name__ == "__main__":
    main()
