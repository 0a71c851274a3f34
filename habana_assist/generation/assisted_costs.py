"""What a round of assisted generation costs on this machine, for num_assistant_tokens_schedule="cost".

The cost schedule (csrc/generation/assist.c) chooses each round's K from measured costs of the model pair: one draft
decode step (and one for n = 2 .. 8 rows drafting together, for batches), and one target append of T tokens
(a verification of K = T - 1 candidates, or of a batch's candidates together) for T = 1 .. 16, 24, 32, 48
and 64, the sizes between those past 16 on straight lines (forwards run in chunks of 64 tokens). For a batch of B
rows the target's appends are timed spread over B sequences (BATCH_ROWS at most), as a batch's round appends
each row's tokens to its own sequence: a plain step of the batch is t(B), and each row attends to its own cache.
They are measured once per (target, draft) pair, batch size and thread count, on first use, and kept on the
target model;
`remeasure=True` measures again, and `set_assisted_costs` pins them (reproducible K choices: with
rejection sampling the tokens a seed gives depend on the K of each round).

A call with a draft model, chains and counts carried from call to call (below) fits this table to its own rounds as
they run (csrc/generation/assist_cost.c, ha_cost_observe): the appends in generation follow the draft's steps and
cost more than in the loop that timed them, and one table is one moment of a shared machine.

What each round's candidates are worth, the schedule learns from the acceptance it counts. With measured costs,
the calls of a pair carry those counts from one to the next (over about the last 512 candidates), as Transformers'
heuristic schedule carries K: a call that learned from nothing drafted too little through its first rounds. K
choices then depend on the calls before; greedy and coupled tokens never do. Rejection sampling, whose tokens
follow the K choices, and pinned costs learn within each call only, so the same call gives the same tokens."""

from __future__ import annotations

import dataclasses
import math
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np

from .. import _core
from ..errors import InvalidInputError

if TYPE_CHECKING:
    from ..modeling_utils import PreTrainedCausalLM

MEASURED_T = tuple(range(1, 17)) + (24, 32, 48, 64)  # target append sizes measured
DRAFT_ROWS = 8  # draft steps measured for 1 .. DRAFT_ROWS rows
BATCH_ROWS = 16  # a target table is timed over min(batch size, BATCH_ROWS) sequences (larger batches: that one)
MAX_T = 64  # most target (and draft) times the core takes
_PREFIX = 256  # positions already in the cache when a cost is timed (fewer where the cache is smaller):
# attention's share of a step grows with the position, and prompts are often this long
_REPEATS = 3  # each cost is the best of this many timings (and a warm-up), taken interleaved


def _times(values: Any, what: str, lo_ok: bool) -> tuple[float, ...]:
    """values as a tuple of 1..MAX_T finite floats (> 0, or >= 0 where lo_ok), else InvalidInputError."""
    try:
        t = tuple(float(x) for x in values if not isinstance(x, (bool, str, bytes)))
        ok = len(t) == len(tuple(values))
    except (TypeError, ValueError):
        t, ok = (), False
    if not ok or not 1 <= len(t) <= MAX_T or not all(math.isfinite(x) and (x >= 0 if lo_ok else x > 0) for x in t):
        raise InvalidInputError(
            f"AssistedCosts.{what}={values!r} must hold 1..{MAX_T} finite times {'>= 0' if lo_ok else '> 0'} in seconds"
        )
    return t


@dataclasses.dataclass(frozen=True)
class AssistedCosts:
    """draft_step: seconds of one draft decode step (0.0 for prompt lookup, which drafts without a model).
    target: seconds of one target append of T tokens, for T = 1 .. len(target).
    draft_rows: seconds of one draft step of n rows together (one token each), n = 1 .. len(draft_rows); None:
    draft_step whatever the rows (past the table, the line through its last two points).
    draft_first: seconds of a round's first draft step of n rows, n = 1 .. len(draft_first), which runs right after
    the target's append: that append streamed the target's weights through the caches, so the step reads the
    draft's from memory (the later steps of a round find them cached); None: as draft_rows."""

    draft_step: float
    target: tuple[float, ...]
    draft_rows: Optional[tuple[float, ...]] = None
    draft_first: Optional[tuple[float, ...]] = None

    def __post_init__(self) -> None:
        d = self.draft_step
        if (
            isinstance(d, bool)
            or not isinstance(d, (int, float, np.floating, np.integer))
            or not math.isfinite(d)
            or d < 0
        ):
            raise InvalidInputError(f"AssistedCosts.draft_step={d!r} must be a finite number of seconds >= 0")
        object.__setattr__(self, "draft_step", float(d))
        object.__setattr__(self, "target", _times(self.target, "target", lo_ok=False))
        if self.draft_rows is not None:
            object.__setattr__(self, "draft_rows", _times(self.draft_rows, "draft_rows", lo_ok=True))
        if self.draft_first is not None:
            object.__setattr__(self, "draft_first", _times(self.draft_first, "draft_first", lo_ok=True))

    def as_core(self) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
        """(draft float64 (n,), target float64 (m,), first float64 (n',) or None): the core's draft_costs,
        target_costs and draft_first_costs."""
        draft = self.draft_rows if self.draft_rows is not None else (self.draft_step,)
        first = None if self.draft_first is None else np.array(self.draft_first, dtype=np.float64)
        return np.array(draft, dtype=np.float64), np.array(self.target, dtype=np.float64), first


def _prefilled(
    core_model: _core.Model, rows: int, n_prefix: int, more: int, vocab_size: int
) -> tuple[_core.Context, np.ndarray, np.ndarray]:
    """(context, tokens, logits): a context of `rows` sequences with room for n_prefix + more positions, each
    sequence holding the same n_prefix tokens; tokens (n_prefix + more,) int32 to append, logits (more, V) float32."""
    ctx = _core.Context(core_model, rows, n_prefix + more, False)
    tokens = (np.arange(n_prefix + more, dtype=np.int64) * 7919 % vocab_size).astype(np.int32)
    logits = np.empty((more, vocab_size), dtype=np.float32)
    last = np.zeros(n_prefix, np.uint8)
    last[-1] = 1
    for r in range(rows):
        ctx.append(np.full(n_prefix, r, np.int32), tokens[:n_prefix], last, logits[:1])
    return ctx, tokens, logits


def append_times(
    core_model: _core.Model,
    max_cache_len: int,
    sizes: Sequence[int],
    vocab_size: int,
    rows: int = 1,
    repeats: int = _REPEATS,
    position: int = _PREFIX,
) -> dict[int, float]:
    """{T: seconds} of one append of T tokens spread evenly over `rows` sequences, each holding `position`
    positions (fewer if max_cache_len leaves less room): for each T in turn, an untimed append, then the best of
    `repeats` appends back to back, as a generation loop runs appends of about one size. (Timed in rounds that
    append every T once, a small append right after large ones runs slower than inside a loop: the large ones'
    activations evict the weights from the caches and their wide FMAs lower the clock for a while; t(T)/t(1) came
    out low and the cost schedule drafted too much.)"""
    most = max(sizes)
    n_prefix = max(1, min(position, max_cache_len - most))
    ctx, tokens, logits = _prefilled(core_model, rows, n_prefix, most, vocab_size)
    best = dict.fromkeys(sizes, math.inf)
    budget = time.perf_counter() + 1.0  # a big model (appends of seconds): 2 timed appends per T, not `repeats`
    for T in sorted(sizes, reverse=True):  # the prefix's prefill and large appends first (see above)
        seq = (np.arange(T) * rows // T).astype(np.int32)  # rows' tokens in order, as evenly as they go
        for i in range(1 + (repeats if time.perf_counter() < budget else 2)):
            t0 = time.perf_counter()
            ctx.append(seq, tokens[n_prefix : n_prefix + T], np.ones(T, np.uint8), logits[:T])
            if i > 0:
                best[T] = min(best[T], time.perf_counter() - t0)
            for row in range(rows):
                ctx.crop(row, n_prefix)
    return best


def _per_row_step(draft_core: _core.Model, cache_len: int, vocab_size: int, position: int) -> tuple[float, ...]:
    """(seconds of a draft step of n rows for n = 1 .. DRAFT_ROWS), best of _REPEATS each."""
    out = []
    for n in range(1, DRAFT_ROWS + 1):
        out.append(append_times(draft_core, cache_len, [n], vocab_size, rows=n, position=position)[n])
    return tuple(out)


def _first_steps(
    target_core: _core.Model, draft_core: _core.Model, cache_len: int, vocab_size: int, position: int
) -> tuple[float, ...]:
    """(seconds of a round's first draft step of n rows, n = 1 .. DRAFT_ROWS): each step timed right after a
    one-token append to the target, as the assisted loop runs it; best of _REPEATS each (and a warm-up)."""
    n_prefix = max(1, min(position, cache_len - 1))
    target_ctx = _core.Context(target_core, 1, 2, False)
    draft_ctx, tokens, _ = _prefilled(draft_core, DRAFT_ROWS, n_prefix, 1, vocab_size)
    logits = np.empty((DRAFT_ROWS, vocab_size), dtype=np.float32)
    one = np.ones(DRAFT_ROWS, np.uint8)
    out = []
    for n in range(1, DRAFT_ROWS + 1):
        best = math.inf
        for i in range(1 + _REPEATS):
            target_ctx.append(np.zeros(1, np.int32), tokens[:1], one[:1], logits[:1])
            t0 = time.perf_counter()
            draft_ctx.append(
                np.arange(n, dtype=np.int32), tokens[n_prefix : n_prefix + 1].repeat(n), one[:n], logits[:n]
            )
            if i > 0:
                best = min(best, time.perf_counter() - t0)
            target_ctx.crop(0, 0)
            for row in range(n):
                draft_ctx.crop(row, n_prefix)
        out.append(best)
    return tuple(out)


def _never_falling(times: Sequence[float]) -> list[float]:
    """times (seconds by size, in increasing size) with each value lowered to the least at its size or above. An
    append of more tokens (a step of more rows) never costs less, so a value above a larger size's was slowed by
    something else on the machine, and the cost schedule, reading it, would draft less than the pair's real costs
    say. This lowers such an outlier only as far as a larger size's own measurement shows."""
    out, least = list(times), math.inf
    for i in range(len(out) - 1, -1, -1):
        least = out[i] = min(out[i], least)
    return out


def measured_rows(batch_size: int) -> int:
    """The sequences a batch of batch_size rows has its target table timed over."""
    return min(batch_size, BATCH_ROWS)


def measure(
    target: PreTrainedCausalLM,
    draft_core: Optional[_core.Model],
    draft_cache_len: int,
    rows: int = 1,
    drafts: Optional[AssistedCosts] = None,
    position: int = _PREFIX,
) -> AssistedCosts:
    """AssistedCosts of a target model with a draft core model (None: prompt lookup) whose caches may hold
    draft_cache_len positions, the target's appends spread over `rows` sequences; drafts: costs of another batch
    size whose draft step times (draft_rows, draft_first) are taken, else they are measured here. Each append is
    timed with `position` positions in the cache before it (fewer where the cache holds less): attention's share
    of a step grows with it (benchmarks/bench_assisted.py times its ideal at its prompts' positions)."""
    cache_len = max(target.max_cache_len, max(MEASURED_T) + 1)
    t = append_times(target._core, cache_len, MEASURED_T, target.vocab_size, rows=rows, position=position)
    if rows > 1:  # a batch's sizes step through the tiles' edges: two passes, so that a burst of load on the
        # machine while some sizes were timed (seen: t(9 .. 16) at twice their value) does not stay in the table
        again = append_times(target._core, cache_len, MEASURED_T, target.vocab_size, rows=rows, position=position)
        t = {T: min(t[T], again[T]) for T in MEASURED_T}
    table = np.interp(np.arange(1, max(MEASURED_T) + 1), MEASURED_T, _never_falling([t[T] for T in MEASURED_T]))
    if draft_core is None:
        return AssistedCosts(draft_step=0.0, target=tuple(table))
    if drafts is not None and drafts.draft_rows is not None and drafts.draft_first is not None:
        draft_rows, first = drafts.draft_rows, drafts.draft_first
    else:
        cache_len = max(draft_cache_len, 2)
        draft_rows = tuple(_never_falling(_per_row_step(draft_core, cache_len, target.vocab_size, position)))
        first = tuple(_never_falling(_first_steps(target._core, draft_core, cache_len, target.vocab_size, position)))
    return AssistedCosts(draft_step=draft_rows[0], target=tuple(table), draft_rows=draft_rows, draft_first=first)


# A cost table's key: a draft model, an early-exit depth, or None for prompt lookup.
_Drafter = Union["PreTrainedCausalLM", int, str, None]
_Entry = tuple[AssistedCosts, Optional[int]]


class CostTable:
    """A target model's costs per drafter: a draft model (held weakly, so that a dropped draft is forgotten),
    an early-exit depth, or prompt lookup (None). A measured entry holds for the batch size (measured_rows) and
    thread count it was measured with; a pinned one (set_assisted_costs) for any. Beside them, per drafter, the
    counts of tested and accepted candidates the cost schedule carries from call to call (the core's cost_state)."""

    def __init__(self) -> None:
        # drafter -> {measured rows, or None where pinned: (costs, the thread count they were measured with, or None)}
        self._by_model: weakref.WeakKeyDictionary[Any, dict[Optional[int], _Entry]] = weakref.WeakKeyDictionary()
        self._other: dict[Any, dict[Optional[int], _Entry]] = {}
        self._learned_by_model: weakref.WeakKeyDictionary[Any, np.ndarray] = weakref.WeakKeyDictionary()
        self._learned_other: dict[Any, np.ndarray] = {}

    def _slot(self, drafter: _Drafter, learned: bool = False) -> tuple[Any, _Drafter]:
        if drafter is not None and not isinstance(drafter, (int, str)):
            return (self._learned_by_model if learned else self._by_model), drafter
        return (self._learned_other if learned else self._other), drafter

    def learned(self, drafter: _Drafter) -> Optional[np.ndarray]:
        """The acceptance counts the cost schedule's calls with drafter start from and add to: float64
        (_core.COST_STATE,), zeros at first; None where drafter's costs are pinned, whose calls each learn from
        nothing (so that the same call makes the same K choices)."""
        if self.pinned(drafter):
            return None
        table, key = self._slot(drafter, learned=True)
        if key not in table:
            table[key] = np.zeros(_core.COST_STATE, dtype=np.float64)
        return table[key]

    def pinned(self, drafter: _Drafter) -> bool:
        """Whether drafter's costs were pinned (set_assisted_costs) rather than measured."""
        table, key = self._slot(drafter)
        return None in table.get(key, {})

    def get(self, drafter: _Drafter, batch_size: int = 1) -> Optional[AssistedCosts]:
        """The costs for drafter at a batch of batch_size rows and today's thread count, or None."""
        table, key = self._slot(drafter)
        entries = table.get(key, {})
        if None in entries:
            return entries[None][0]
        costs, threads = entries.get(measured_rows(batch_size), (None, None))
        return costs if threads == _core.get_num_threads() else None

    def drafts(self, drafter: _Drafter) -> Optional[AssistedCosts]:
        """Costs measured for another batch size at today's thread count (their draft steps hold for any), or
        None."""
        table, key = self._slot(drafter)
        for rows, (costs, threads) in table.get(key, {}).items():
            if rows is not None and threads == _core.get_num_threads():
                return costs
        return None

    def put(self, drafter: _Drafter, costs: AssistedCosts, measured: bool, batch_size: int = 1) -> None:
        """measured: the costs hold for a batch of batch_size rows (measured_rows) and today's thread count only,
        beside those measured for other batch sizes; else (pinned) for any, in place of every measured one."""
        table, key = self._slot(drafter)
        if not measured:
            table[key] = {None: (costs, None)}
            return
        entries = {rows: entry for rows, entry in table.get(key, {}).items() if rows is not None}
        entries[measured_rows(batch_size)] = (costs, _core.get_num_threads())
        table[key] = entries
