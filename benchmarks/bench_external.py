"""An external (torch) target behind the core's loop against the same pair fully native, every figure measured in
this one run (interleaved rounds, best of each).

The shipped target `habana-assist/pycode` as a torch model in float32 (tests/fixtures/torch_causal_lm.py: the calling
convention of Transformers' causal LMs, wrapped by habana_assist.wrap) with the native draft
`habana-assist/pycode-draft`, greedy, on the demo's first two held-out prompts, --new-tokens new tokens each,
num_assistant_tokens=--k (4; constant). Printed: tokens/s end to end of plain and assisted for the torch target and
for the native target, the speed-ups, whether assisted equals plain, acceptance, and the callback overhead per
target forward: the time in the adapter's append (habana_assist/integrations/external.py: building the inputs, reading
the logits over DLPack, counting margins) outside the model's own forward, as a fraction of that forward. The case
"ahead" is the torch target wrapped with overlap=True: the native draft drafts the next round on one core while
the target's forward runs (the other wrapped cases pass overlap=False); printed with how many draft passes it made
ahead and how many later rounds used.

On an accelerator (--device cuda: the torch target there, the native draft on the host's cores) each wrapped
target's case also prints the bytes that crossed per target pass (the prefill's included; token ids in, logits
rows out), and the case "top two" (wrap(..., reduce_logits=True)) the same with each verified position reduced
on the device to its top two (habana_assist/integrations/external.py; by default only from a vocabulary of
REDUCE_FROM_VOCAB, which the shipped 4096 is below). --reduce-sweep compares the two by vocabulary size on a model whose
forward costs little (where that threshold comes from). --transformers adds the checkpoint loaded by Transformers itself
(where it is installed; Debian does not package it) on the same device: its own generate() plain and with its own
assisted generation (the draft also on the device), against habana_assist.wrap of the same model, plain and with
the native draft. benchmarks/cuda_external.sh builds the package and runs this on a CUDA machine.

    /usr/bin/python3 benchmarks/bench_external.py [--new-tokens 64] [--repeats 3] [--k 4] [--device cuda]
        [--transformers] [--reduce-sweep]
"""

import argparse
import os
import sys
import time
import types

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# the torch model
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))

from torch_causal_lm import TorchCausalLM

import habana_assist as ha
from habana_assist.cli import demo_prompts
from habana_assist.integrations import external


class Timed(TorchCausalLM):
    """The torch model, summing the seconds of its forwards (waiting for the device's work to end)."""

    forward_s, forwards = 0.0, 0

    def forward(self, *args, **kwargs):
        t0 = time.perf_counter()
        out = super().forward(*args, **kwargs)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.forward_s += time.perf_counter() - t0
        self.forwards += 1
        return out

    __call__ = forward


class Head(torch.nn.Module):
    """A model of one embedding and one output head over a vocabulary of `vocab` (hidden size 64, random
    weights) on `device`: its forward costs little, so that a greedy call's time is mostly bringing each step's
    logits row to the host and choosing from it. Cache: the positions held, cropped."""

    def __init__(self, vocab, device):
        super().__init__()
        g = torch.Generator().manual_seed(vocab)
        self.embed = torch.nn.Parameter(torch.randn(vocab, 64, generator=g).to(device), requires_grad=False)
        self.head = torch.nn.Parameter(torch.randn(vocab, 64, generator=g).to(device), requires_grad=False)
        self.config = types.SimpleNamespace(vocab_size=vocab, max_position_embeddings=4096)

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=True):
        held = (past_key_values.held if past_key_values is not None else 0) + input_ids.shape[1]
        cache = types.SimpleNamespace(held=held)
        cache.crop = lambda n: setattr(cache, "held", n)
        return types.SimpleNamespace(logits=(self.embed[input_ids[0]] @ self.head.T)[None], past_key_values=cache)


def reduce_sweep(device, new_tokens=64, repeats=5):
    """Per vocabulary size: tokens/s of greedy generate() over Head with each step's row crossing whole and as
    its top two (wrap(reduce_logits=False / True)), best of `repeats` alternating calls, and whether they agree."""
    print(
        f"  greedy generate() of {new_tokens} tokens over a one-layer model (Head), one row crossing per step, "
        f"best of {repeats}:"
    )
    print(f"    {'vocab':>7s} {'whole tok/s':>11s} {'top two tok/s':>13s} {'top two/whole':>13s} {'same':>5s}")
    for vocab in (4096, 32768, 131072, 262144):
        model = Head(vocab, device)
        ids = np.array([[1, 2, 3]])
        models = (ha.wrap(model, reduce_logits=False), ha.wrap(model, reduce_logits=True))
        best, outs = [float("inf")] * 2, [None, None]
        for round_ in range(repeats + 1):  # round 0 warms up
            for i, m in enumerate(models):
                t0 = time.perf_counter()
                outs[i] = m.generate(ids, max_new_tokens=new_tokens, eos_token_id=[])
                if round_:
                    best[i] = min(best[i], time.perf_counter() - t0)
        same = np.array_equal(*outs)
        print(
            f"    {vocab:7d} {new_tokens / best[0]:11.1f} {new_tokens / best[1]:13.1f} {best[0] / best[1]:13.2f} "
            f"{str(same):>5s}"
        )


def ours(target, assistant, kw):
    """A case run by this package: generate(ids) -> (sequences, drafted, accepted, target passes, draft passes, the
    target if it is wrapped (for its transfer_bytes and drafted_ahead) else None)."""

    def run(ids):
        res = target.generate(ids, assistant_model=assistant, return_dict_in_generate=True, **kw)
        wrapped = target if isinstance(target, ha.WrappedModel) else None
        passes = res.num_target_passes or res.sequences.shape[1] - ids.shape[1]  # plain: one forward per token
        return (
            res.sequences,
            res.num_draft_tokens or 0,
            res.num_accepted_tokens or 0,
            passes,
            res.num_draft_passes or 0,
            wrapped,
        )

    return run


def transformers_cases(directory, draft_directory, device, native_draft, kw):
    """The checkpoint as Transformers' own model on device: {case: generate(ids) -> as ours()}, or {} with the
    reason printed where Transformers is not installed."""
    try:
        import transformers
    except ImportError as e:
        print(f"  (--transformers: not installed here: {e})")
        return {}

    def load(path):
        model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device).eval()
        model.generation_config.eos_token_id = None  # every call runs its full length, as eos_token_id=[] here
        model.generation_config.pad_token_id = 3
        return model

    hf, hf_draft = load(directory), load(draft_directory)
    hf_draft.generation_config.num_assistant_tokens = kw["num_assistant_tokens"]
    hf_draft.generation_config.num_assistant_tokens_schedule = "constant"
    hf_draft.generation_config.assistant_confidence_threshold = (
        native_draft.generation_config.assistant_confidence_threshold
    )
    wrapped, ahead = ha.wrap(hf, overlap=False), ha.wrap(hf, overlap=True)

    def theirs(assistant):
        def run(ids):
            with torch.no_grad():
                out = hf.generate(
                    torch.from_numpy(ids).to(device),
                    max_new_tokens=kw["max_new_tokens"],
                    do_sample=False,
                    assistant_model=assistant,
                )
            return out.cpu().numpy(), 0, 0, 0, 0, None

        return run

    return {
        "HF plain (its generate)": theirs(None),
        "HF + HF draft (its assisted)": theirs(hf_draft),
        "HF wrapped plain": ours(wrapped, None, kw),
        "HF wrapped + native draft": ours(wrapped, native_draft, kw),
        "HF wrapped + native draft, ahead": ours(ahead, native_draft, kw),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu", help="the torch target's device (cpu, cuda)")
    ap.add_argument("--k", type=int, default=4, help="num_assistant_tokens (constant)")
    ap.add_argument("--transformers", action="store_true", help="also Transformers' own model and generate()")
    ap.add_argument("--reduce-sweep", action="store_true", help="also rows whole against their top two by vocabulary")
    args = ap.parse_args()
    tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
    native = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode", dtype="float32")
    draft = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
    timed = Timed(native.name_or_path, device=args.device)
    torch_target = ha.wrap(timed, overlap=False)
    prompts = [tok(text, return_tensors="np")["input_ids"] for _, text in demo_prompts(2, 30)]
    kw = dict(
        max_new_tokens=args.new_tokens,
        eos_token_id=[],
        num_assistant_tokens=args.k,
        num_assistant_tokens_schedule="constant",
    )

    cases = {
        "torch plain": ours(torch_target, None, kw),
        "torch + native draft": ours(torch_target, draft, kw),
        "torch + native draft, ahead": ours(ha.wrap(timed, overlap=True), draft, kw),
    }
    plain_of = dict.fromkeys(cases, "torch plain")
    if args.device != "cpu":  # the shipped vocabulary (4096) is below REDUCE_FROM_VOCAB: the rows cross whole
        reduced = ha.wrap(torch_target.model, reduce_logits=True, overlap=False)
        cases["torch + native draft, top two"] = ours(reduced, draft, kw)
        plain_of["torch + native draft, top two"] = "torch plain"
    cases |= {"native plain": ours(native, None, kw), "native + native draft": ours(native, draft, kw)}
    plain_of |= {"native plain": "native plain", "native + native draft": "native plain"}
    if args.transformers:
        hf = transformers_cases(native.name_or_path, draft.name_or_path, args.device, draft, kw)
        cases |= hf
        plain_of |= {name: "HF plain (its generate)" for name in hf}
    append_s = [0.0, 0]  # seconds in the adapter's append (forward included), calls

    original = external._Adapter.append

    def timed_append(self, seq, tokens, want):
        t0 = time.perf_counter()
        try:
            return original(self, seq, tokens, want)
        finally:
            if self.owner.model is timed:  # its wrappers (top two or not) share the torch model
                append_s[0] += time.perf_counter() - t0
                append_s[1] += 1

    external._Adapter.append = timed_append
    best = dict.fromkeys(cases, float("inf"))
    outputs, stats, crossed, ahead = {}, {}, {}, {}
    for run in cases.values():  # warm-up (and each wrapped target's batch-invariance probe)
        run(prompts[0])
    timed.forward_s, timed.forwards, append_s[:] = 0.0, 0, [0.0, 0]
    for _ in range(args.repeats):
        for name, run in cases.items():
            t0, outs, drafted, accepted, passes, moved = time.perf_counter(), [], 0, 0, 0, 0
            drafted_ahead = [0, 0, 0]  # passes made ahead, of them used, draft passes
            for ids in prompts:
                sequences, d, a, p, dp, wrapped = run(ids)
                outs.append(np.asarray(sequences)[:, : ids.shape[1] + args.new_tokens])
                drafted, accepted, passes = drafted + d, accepted + a, passes + (p or 0)
                if wrapped is not None:
                    moved += sum(wrapped.transfer_bytes.values())
                    drafted_ahead = [
                        drafted_ahead[0] + wrapped.drafted_ahead["passes"],
                        drafted_ahead[1] + wrapped.drafted_ahead["used"],
                        drafted_ahead[2] + dp,
                    ]
            ahead[name] = drafted_ahead
            best[name] = min(best[name], time.perf_counter() - t0)
            outputs[name], stats[name], crossed[name] = outs, (drafted, accepted), (moved, passes)
    external._Adapter.append = original
    tokens = args.new_tokens * len(prompts)
    overhead = (append_s[0] - timed.forward_s) / max(append_s[1], 1)
    per_forward = timed.forward_s / max(timed.forwards, 1)
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(
        f"habana_assist external-model benchmark: kernels={ha.kernels_name()}, threads={ha.get_num_threads()}; "
        f"pycode float32 as a torch model on {device} (torch threads {torch.get_num_threads()}) and natively, "
        f"draft pycode-draft (native, host), greedy, K = {args.k}, {len(prompts)} prompts x {args.new_tokens} new "
        "tokens, "
        f"best of {args.repeats} interleaved rounds"
    )
    print(f"  {'case':34s} {'tok/s':>8s} {'speed-up':>8s} {'same':>5s} {'accept':>7s} {'bytes/pass':>10s}")
    for name in cases:
        plain = plain_of[name]
        same = all(np.array_equal(a, b) for a, b in zip(outputs[name], outputs[plain]))
        drafted, accepted = stats[name]
        moved, passes = crossed[name]
        per = f"{moved / passes:10.0f}" if passes and args.device != "cpu" else f"{'-':>10s}"
        print(
            f"  {name:34s} {tokens / best[name]:8.1f} {best[plain] / best[name]:8.2f} {str(same):>5s} "
            f"{accepted / drafted if drafted else float('nan'):7.3f} {per}"
        )
    for name, (made, used, draft_passes) in ahead.items():
        if made:
            print(
                f"  {name}: {made} draft passes made ahead beside the target's forwards, {used} of them used "
                f"({used / max(draft_passes, 1):.0%} of the {draft_passes} draft passes; the last repeat's counts)"
            )
    print(
        f"  callback overhead per torch forward: {overhead * 1e3:.3f} ms outside a mean forward of "
        f"{per_forward * 1e3:.2f} ms ({overhead / per_forward:.1%}); batch disagreement of the torch target "
        f"{torch_target.batch_disagreement:.3g}; its last call's narrow margins {torch_target.narrow_margins}"
    )
    if args.reduce_sweep:
        reduce_sweep(args.device)


if __name__ == "__main__":
    main()
