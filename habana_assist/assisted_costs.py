"""What a round of assisted generation costs on this machine, for num_assistant_tokens_schedule="cost".

The cost schedule (csrc/assist.c) chooses each round's K from two measured costs of the model pair: one draft
decode step, and one target append of T tokens for T = 1 .. 16 (a verification of K = T - 1 candidates). They
are measured once per (target, draft) pair and thread count, on first use, and kept on the target model;
`remeasure=True` measures again, and `set_assisted_costs` pins them (reproducible K choices: with
rejection sampling the tokens a seed gives depend on the K of each round)."""

import dataclasses
import math
import time
import weakref

import numpy as np

from . import _core
from .errors import InvalidInputError

MEASURED_T = 16      # target append sizes measured: T = 1 .. MEASURED_T
MAX_T = 64           # most target times the core takes
_PREFIX = 256        # positions already in the cache when a cost is timed (fewer where the cache is smaller):
                     # attention's share of a step grows with the position, and prompts are often this long
_REPEATS = 3         # each cost is the best of this many timings (and a warm-up), taken interleaved


@dataclasses.dataclass(frozen=True)
class AssistedCosts:
    """draft_step: seconds of one draft decode step (0.0 for prompt lookup, which drafts without a model).
    target: seconds of one target append of T tokens, for T = 1 .. len(target)."""

    draft_step: float
    target: tuple

    def __post_init__(self):
        d = self.draft_step
        if isinstance(d, bool) or not isinstance(d, (int, float, np.floating, np.integer)) or not math.isfinite(d) or d < 0:
            raise InvalidInputError(f"AssistedCosts.draft_step={d!r} must be a finite number of seconds >= 0")
        try:
            t = tuple(float(x) for x in self.target if not isinstance(x, (bool, str, bytes)))
            ok = len(t) == len(tuple(self.target))
        except TypeError:
            t, ok = (), False
        if not ok or not 1 <= len(t) <= MAX_T or not all(math.isfinite(x) and x > 0 for x in t):
            raise InvalidInputError(f"AssistedCosts.target={self.target!r} must hold 1..{MAX_T} finite times > 0 in "
                                    "seconds: a target append of T = 1, 2, ... tokens")
        object.__setattr__(self, "draft_step", float(d))
        object.__setattr__(self, "target", t)

    def as_core(self):
        """float64 (1 + len(target),): the draft step, then t(1) .. t(n), as ha_assist_params.costs."""
        return np.array((self.draft_step,) + self.target, dtype=np.float64)


def _append_times(core_model, max_cache_len, sizes, vocab_size, repeats=_REPEATS):
    """{T: seconds} of one append of T tokens to a sequence holding _PREFIX positions (fewer if max_cache_len
    leaves less room), best of `repeats` rounds that time every T once (the machine's speed drifts; each round
    sees the same drift)."""
    n_prefix = max(1, min(_PREFIX, max_cache_len - max(sizes)))
    ctx = _core.Context(core_model, 1, n_prefix + max(sizes), False)
    prefix = (np.arange(n_prefix + max(sizes), dtype=np.int64) * 7919 % vocab_size).astype(np.int32)
    logits = np.empty((max(sizes), vocab_size), dtype=np.float32)
    last = np.zeros(n_prefix, np.uint8)
    last[-1] = 1
    ctx.append(np.zeros(n_prefix, np.int32), prefix[:n_prefix], last, logits[:1])
    best = dict.fromkeys(sizes, math.inf)
    for _ in range(repeats + 1):  # the first round warms caches and the thread pool; it counts as any other
        for T in sizes:
            t0 = time.perf_counter()
            ctx.append(np.zeros(T, np.int32), prefix[n_prefix:n_prefix + T], np.ones(T, np.uint8), logits[:T])
            best[T] = min(best[T], time.perf_counter() - t0)
            ctx.crop(0, n_prefix)
    return best


def measure(target, draft_core, draft_cache_len):
    """AssistedCosts of a target model with a draft core model (None: prompt lookup) whose caches may hold
    draft_cache_len positions."""
    sizes = list(range(1, MEASURED_T + 1))
    t = _append_times(target._core, max(target.max_cache_len, MEASURED_T + 1), sizes, target.vocab_size)
    d = _append_times(draft_core, max(draft_cache_len, 2), [1], target.vocab_size)[1] if draft_core is not None else 0.0
    return AssistedCosts(draft_step=d, target=tuple(t[T] for T in sizes))


class CostTable:
    """A target model's costs per drafter: a draft model (held weakly, so that a dropped draft is forgotten),
    an early-exit depth, or prompt lookup (None). A measured entry holds for the thread count it was measured
    with; a pinned one (set_assisted_costs) for any."""

    def __init__(self):
        self._by_model = weakref.WeakKeyDictionary()
        self._other = {}

    def _slot(self, drafter):
        return (self._by_model, drafter) if drafter is not None and not isinstance(drafter, (int, str)) else (
            self._other, drafter)

    def get(self, drafter):
        """The costs for drafter at today's thread count, or None."""
        table, key = self._slot(drafter)
        costs, threads = table.get(key, (None, None))
        return costs if threads is None or threads == _core.get_num_threads() else None

    def put(self, drafter, costs, measured):
        """measured: the costs hold for today's thread count only; else (pinned) for any."""
        table, key = self._slot(drafter)
        table[key] = (costs, _core.get_num_threads() if measured else None)
