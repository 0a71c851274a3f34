"""An external (torch) target behind the core's loop against the same pair fully native, every figure measured in
this one run (interleaved rounds, best of each).

The shipped target `habana-assist/pycode` as a torch model in float32 (tests/torch_causal_lm.py: the calling
convention of Transformers' causal LMs, wrapped by habana_assist.wrap) with the native draft
`habana-assist/pycode-draft`, greedy, on the demo's first two held-out prompts, --new-tokens new tokens each,
num_assistant_tokens=4 (constant). Printed: tokens/s end to end of plain and assisted for the torch target and for
the native target, the speed-ups, whether assisted equals plain, acceptance, and the callback overhead per
target forward: the time in the adapter's append (habana_assist/external.py: building the inputs, reading the
logits over DLPack, counting margins) outside the model's own forward, as a fraction of that forward.

    /usr/bin/python3 benchmarks/bench_external.py [--new-tokens 64] [--repeats 3]
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))  # the torch model

import habana_assist as ha  # noqa: E402
from habana_assist import external  # noqa: E402
from habana_assist.cli import demo_prompts  # noqa: E402
from torch_causal_lm import TorchCausalLM  # noqa: E402


class Timed(TorchCausalLM):
    """The torch model, summing the seconds of its forwards."""

    forward_s, forwards = 0.0, 0

    def forward(self, *args, **kwargs):
        t0 = time.perf_counter()
        out = super().forward(*args, **kwargs)
        Timed.forward_s += time.perf_counter() - t0
        Timed.forwards += 1
        return out

    __call__ = forward


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
    native = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode", dtype="float32")
    draft = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
    torch_target = ha.wrap(Timed(native.name_or_path))
    prompts = [tok(text, return_tensors="np")["input_ids"] for _, text in demo_prompts(2, 30)]
    kw = dict(max_new_tokens=args.new_tokens, eos_token_id=[], num_assistant_tokens=4,
              num_assistant_tokens_schedule="constant")
    cases = {"torch plain": (torch_target, None), "torch + native draft": (torch_target, draft),
             "native plain": (native, None), "native + native draft": (native, draft)}
    append_s = [0.0, 0]  # seconds in the adapter's append (forward included), calls

    original = external._Adapter.append

    def timed_append(self, tokens, want):
        t0 = time.perf_counter()
        try:
            return original(self, tokens, want)
        finally:
            if self.owner is torch_target:
                append_s[0] += time.perf_counter() - t0
                append_s[1] += 1

    external._Adapter.append = timed_append
    best = dict.fromkeys(cases, float("inf"))
    outputs, stats = {}, {}
    for name, (target, assistant) in cases.items():  # warm-up (and the torch target's batch-invariance probe)
        target.generate(prompts[0], max_new_tokens=2, assistant_model=assistant)
    Timed.forward_s, Timed.forwards, append_s[:] = 0.0, 0, [0.0, 0]
    for _ in range(args.repeats):
        for name, (target, assistant) in cases.items():
            t0, outs, drafted, accepted = time.perf_counter(), [], 0, 0
            for ids in prompts:
                res = target.generate(ids, assistant_model=assistant, return_dict_in_generate=True, **kw)
                outs.append(res.sequences)
                drafted += res.num_draft_tokens or 0
                accepted += res.num_accepted_tokens or 0
            best[name] = min(best[name], time.perf_counter() - t0)
            outputs[name], stats[name] = outs, (drafted, accepted)
    external._Adapter.append = original
    tokens = args.new_tokens * len(prompts)
    overhead = (append_s[0] - Timed.forward_s) / max(append_s[1], 1)
    per_forward = Timed.forward_s / max(Timed.forwards, 1)
    print(f"habana_assist external-model benchmark: kernels={ha.kernels_name()}, threads={ha.get_num_threads()}; "
          f"pycode float32 as a torch model (torch threads {__import__('torch').get_num_threads()}) and natively, "
          f"draft pycode-draft, greedy, K = 4, {len(prompts)} prompts x {args.new_tokens} new tokens, best of "
          f"{args.repeats} interleaved rounds")
    print(f"  {'case':24s} {'tok/s':>8s} {'speed-up':>8s} {'same':>5s} {'accept':>7s}")
    for name in cases:
        plain = "torch plain" if name.startswith("torch") else "native plain"
        same = all(np.array_equal(a, b) for a, b in zip(outputs[name], outputs[plain]))
        drafted, accepted = stats[name]
        print(f"  {name:24s} {tokens / best[name]:8.1f} {best[plain] / best[name]:8.2f} {str(same):>5s} "
              f"{accepted / drafted if drafted else float('nan'):7.3f}")
    print(f"  callback overhead per torch forward: {overhead * 1e3:.3f} ms outside a mean forward of "
          f"{per_forward * 1e3:.2f} ms ({overhead / per_forward:.1%}); batch disagreement of the torch target "
          f"{torch_target.batch_disagreement:.3g}")


if __name__ == "__main__":
    main()
