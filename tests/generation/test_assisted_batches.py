"""Batched assisted generation and the cost schedule.

A batch runs its rows together, round by round (csrc/generation/assist.c): one draft append per draft step over
the rows still drafting, one target append verifying every row. Each row's output must be bitwise what it gives alone
(greedy) and what plain generation of the same batch gives (greedy, coupled sampling, whose noise is keyed by
the row index), whatever the rows' prompt lengths and however they end (an eos in one row while another runs
to max_new_tokens); rejection sampling with a batch must draw each row from the target's exact distribution
(chi-square). The cost schedule ("cost") must stay exact, never propose past max_new_tokens, fall back to
plain decoding (K = 0) when no draft is worth its cost, and keep K under num_assistant_tokens.
"""

import itertools
import os

import numpy as np
import pytest
import reference as R
from checkpoints import write_random_checkpoint
from stats import chi_square

import habana_assist as ha

VOCAB = 64
NEW = 24
# Three prompts of very different lengths (2, 9 and 30 tokens), left-padded into one batch.
PROMPTS = [
    [17, 3],
    [9, 21, 40, 9, 21, 40, 13, 9, 21],
    [int(x) for x in np.random.default_rng(4).integers(3, VOCAB, size=30)],
]
SCHEDULES = ("constant", "heuristic", "cost")
# Pinned costs (seconds) for "cost", so that its K choices do not depend on this machine's timing: a draft step
# a twentieth of a target step, a verification of T tokens 1 + 0.15 (T - 1) target steps.
COSTS = ha.AssistedCosts(draft_step=0.05, target=tuple(1.0 + 0.15 * t for t in range(16)))


def left_padded(prompts):
    """(ids, mask) int64 (len(prompts), longest): each prompt right-aligned after pad 0s."""
    width = max(len(p) for p in prompts)
    ids = np.zeros((len(prompts), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = p
        mask[i, width - len(p) :] = 1
    return ids, mask


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("assisted_batches"))
    write_random_checkpoint(os.path.join(root, "target"), vocab_size=VOCAB, seed=5)
    write_random_checkpoint(
        os.path.join(root, "draft"),
        vocab_size=VOCAB,
        seed=6,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        intermediate_size=24,
    )
    target = ha.AutoModelForCausalLM.from_pretrained(os.path.join(root, "target"))
    draft = ha.AutoModelForCausalLM.from_pretrained(os.path.join(root, "draft"))
    for drafter in (draft, target, None):
        target.set_assisted_costs(COSTS, drafter)
    return target, draft


@pytest.fixture(autouse=True)
def one_thread_unless_told(one_core_thread):
    yield


def drafting(kind, models, schedule):
    """generate() arguments that make `kind` draft: "draft" (an unrelated small model), "self" (the target
    drafting for itself: every greedy draft accepted) or "lookup" (prompt lookup)."""
    target, draft = models
    if kind == "lookup":
        return dict(prompt_lookup_num_tokens=3, num_assistant_tokens_schedule=schedule)
    return dict(
        assistant_model=draft if kind == "draft" else target,
        num_assistant_tokens=3,
        num_assistant_tokens_schedule=schedule,
        assistant_confidence_threshold=0.0,
    )


def eos_for_row(plain_out, row, width):
    """A token that row `row` of a plain output generates early (its 4th new token) and that does not appear
    before it in that row, so that eos_token_id=it ends the row there."""
    new = plain_out[row, width:]
    for t in new[3:]:
        if t not in new[:3]:
            return int(t)
    raise AssertionError(f"row {row} repeats itself; pick another prompt")


@pytest.mark.parametrize("threads", (1, 2))
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("kind", ("draft", "self", "lookup"))
def test_batched_greedy_is_each_row_alone_and_plain(models, kind, schedule, threads):
    target, _ = models
    ha.set_num_threads(threads)
    ids, mask = left_padded(PROMPTS)
    width = ids.shape[1]
    kw = drafting(kind, models, schedule)
    # eos: row 1 ends early (its 4th new token), rows 0 and 2 run to max_new_tokens unless they meet it too
    plain_free = target.generate(ids, attention_mask=mask, max_new_tokens=NEW, eos_token_id=[])
    eos = eos_for_row(plain_free, 1, width)
    for eos_ids in ([], [eos]):
        label = f"{kind} {schedule} threads={threads} eos={eos_ids}"
        plain = target.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=NEW,
            eos_token_id=eos_ids,
            pad_token_id=0,
            output_scores=True,
            return_dict_in_generate=True,
        )
        res = target.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=NEW,
            eos_token_id=eos_ids,
            pad_token_id=0,
            output_scores=True,
            return_dict_in_generate=True,
            **kw,
        )
        assert np.array_equal(plain.sequences, res.sequences), (
            f"{label}: batched assisted {res.sequences[:, width:].tolist()} differs from plain "
            f"{plain.sequences[:, width:].tolist()}"
        )
        assert len(res.scores) == len(plain.scores) and all(
            np.array_equal(a, b) for a, b in zip(plain.scores, res.scores)
        ), f"{label}: scores differ from plain's"
        if eos_ids:
            ended = list(res.sequences[1, width:]).index(eos)
            assert ended < NEW - 1 and (res.sequences[1, width + ended + 1 :] == 0).all(), (
                f"{label}: row 1 must end at its eos ({eos}) and be padded after it, got "
                f"{res.sequences[1, width:].tolist()}"
            )
            if len(res.scores) > ended + 1:  # as Transformers: the row's scores go on, over its pad tokens
                assert np.isfinite(res.scores[ended + 1][1]).any(), f"{label}: a finished row's scores must go on"
        for row, prompt in enumerate(PROMPTS):
            alone = target.generate(np.array([prompt]), max_new_tokens=NEW, eos_token_id=eos_ids, pad_token_id=0, **kw)
            got = res.sequences[row, width:]
            want = alone[0, len(prompt) :]
            assert np.array_equal(got[: len(want)], want) and (got[len(want) :] == 0).all(), (
                f"{label}: row {row} of the batch {got.tolist()} differs from the row alone {want.tolist()}"
            )


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_batched_coupled_sampling_equals_plain_sampling(models, schedule):
    target, _ = models
    ids, mask = left_padded(PROMPTS)
    for kind in ("draft", "self", "lookup"):
        for seed in (0, 1, 2):
            sampling = dict(do_sample=True, seed=seed, temperature=1.3, top_k=0, max_new_tokens=NEW, eos_token_id=[])
            plain = target.generate(ids, attention_mask=mask, **sampling)
            res = target.generate(
                ids, attention_mask=mask, assisted_sampling="coupled", **sampling, **drafting(kind, models, schedule)
            )
            assert np.array_equal(plain, res), (
                f"coupled {kind} {schedule} seed={seed}: the batch {res[:, ids.shape[1] :].tolist()} differs from "
                f"plain sampling {plain[:, ids.shape[1] :].tolist()} with the same seed"
            )


@pytest.mark.parametrize("schedule", ("constant", "heuristic"))
@pytest.mark.parametrize("kind", ("draft", "lookup"))
def test_batch_statistics_are_the_rows_alone_summed(models, kind, schedule):
    """Greedy: each row does in the batch exactly what it does alone (its own K, acceptance and end), so the
    batch's counts are the sums of the rows' counts alone; its rounds are at least the longest row's."""
    target, _ = models
    ids, mask = left_padded(PROMPTS)
    kw = dict(drafting(kind, models, schedule), max_new_tokens=NEW, eos_token_id=[], return_dict_in_generate=True)
    batch = target.generate(ids, attention_mask=mask, **kw)
    alone = [target.generate(np.array([p]), **kw) for p in PROMPTS]
    for key in ("num_draft_tokens", "num_accepted_tokens", "num_target_passes", "num_draft_passes"):
        assert getattr(batch, key) == sum(getattr(a, key) for a in alone), (
            f"{kind} {schedule}: {key} of the batch {getattr(batch, key)} should be the rows' alone summed "
            f"{[getattr(a, key) for a in alone]}"
        )
    for key in ("proposed_per_position", "accepted_per_position"):
        summed = np.zeros(max(len(getattr(a, key)) for a in alone), dtype=np.int64)
        for a in alone:
            summed[: len(getattr(a, key))] += getattr(a, key)
        assert np.array_equal(getattr(batch, key), summed), (
            f"{kind} {schedule}: {key} {getattr(batch, key)} != {summed}"
        )
    rounds_alone = [a.num_rounds for a in alone]
    assert all(a.num_rounds == a.num_target_passes for a in alone), "at batch 1 every round is one target pass"
    assert max(rounds_alone) <= batch.num_rounds <= batch.num_target_passes, (
        f"{kind} {schedule}: {batch.num_rounds} rounds for rows that alone take {rounds_alone}"
    )
    generated = 3 * NEW
    assert generated == batch.num_target_passes + batch.num_accepted_tokens, (
        f"{kind} {schedule}: every row's pass gives one token of its own plus its accepted drafts"
    )


# ----------------------------------------------------------------------------------- rejection sampling


# the chi-square pair of test_rejection_sampling.py (a target and an unrelated draft over a vocabulary of 8)
from test_rejection_sampling import TEMPERATURE, V, pair  # noqa: E402, F401 - this section's own; pair: a fixture

CHI_PROMPTS = [[1, 2, 3], [4, 5, 6, 7, 1]]  # two rows of different lengths, left-padded
T_NEW = 2
DRAWS = 3000


def exact_joint(model, prompt):
    """The target's exact probabilities of the V**T_NEW outcomes of its first T_NEW sampled tokens after
    prompt (ravel order), from model(...) logits at temperature TEMPERATURE."""
    probs = np.ones((V,) * T_NEW)
    for outcome in itertools.product(range(V), repeat=T_NEW):
        seq = list(prompt)
        for t in outcome:
            logits = model(np.array([seq], dtype=np.int64)).logits[0, -1].astype(np.float64)
            probs[outcome] *= R.softmax(logits / TEMPERATURE)[t]
            seq.append(t)
    return probs.ravel()


@pytest.mark.parametrize("schedule", ("constant", "cost"))
def test_batched_rejection_sampling_draws_each_row_from_the_target(pair, schedule):  # noqa: F811 - the fixture
    target, draft = pair
    target.set_assisted_costs(ha.AssistedCosts(draft_step=0.01, target=(1.0, 1.05, 1.1)), draft)
    ids, mask = left_padded(CHI_PROMPTS)
    width = ids.shape[1]
    rows = [[] for _ in CHI_PROMPTS]
    drafted = accepted = 0
    for seed in range(DRAWS):
        res = target.generate(
            ids,
            attention_mask=mask,
            assistant_model=draft,
            do_sample=True,
            seed=seed,
            temperature=TEMPERATURE,
            top_k=0,
            max_new_tokens=T_NEW,
            eos_token_id=[],
            num_assistant_tokens=2,
            num_assistant_tokens_schedule=schedule,
            assistant_confidence_threshold=0.0,
            return_dict_in_generate=True,
        )
        for r in range(len(CHI_PROMPTS)):
            rows[r].append(res.sequences[r, width:])
        drafted += res.num_draft_tokens
        accepted += res.num_accepted_tokens
    assert 0 < accepted < drafted, (
        f"{schedule}: an unrelated draft must be rejected sometimes, accepted {accepted} of {drafted}"
    )
    for r, prompt in enumerate(CHI_PROMPTS):
        tokens = np.array(rows[r])
        counts = np.bincount(np.ravel_multi_index(tokens.T, (V,) * T_NEW), minlength=V**T_NEW)
        stat, df, p = chi_square(counts, exact_joint(target, prompt))
        assert p >= 1e-3, (
            f"{schedule}: row {r} of a batch of {len(CHI_PROMPTS)}: its first {T_NEW} tokens over "
            f"{DRAWS} seeds should follow the target's distribution; chi-square {stat:.1f} on {df} "
            f"degrees of freedom, p = {p:.3g}"
        )


# --------------------------------------------------------------------------------------- the cost schedule


def test_cost_schedule_with_drafts_dearer_than_their_gain_decodes_plainly(models):
    target, draft = models
    ids, mask = left_padded(PROMPTS)
    plain = target.generate(ids, attention_mask=mask, max_new_tokens=NEW, eos_token_id=[])
    for drafter, lookup in ((draft, None), (None, 3)):
        dear = ha.AssistedCosts(draft_step=50.0 if drafter else 0.0, target=(1.0, 100.0))
        target.set_assisted_costs(dear, drafter)
        try:
            res = target.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=NEW,
                eos_token_id=[],
                assistant_model=drafter,
                prompt_lookup_num_tokens=lookup,
                num_assistant_tokens_schedule="cost",
                return_dict_in_generate=True,
            )
        finally:
            target.set_assisted_costs(COSTS, drafter)
        label = "a draft model" if drafter else "prompt lookup"
        assert np.array_equal(res.sequences, plain), f"{label}: K = 0 every round must give plain decoding's tokens"
        assert res.num_draft_tokens == 0 and res.num_draft_passes == 0, (
            f"{label}: no draft is worth its cost, yet {res.num_draft_tokens} were proposed in "
            f"{res.num_draft_passes} draft passes"
        )
        assert res.num_target_passes == 3 * NEW and res.num_rounds == NEW, (
            f"{label}: plain decoding is one target pass per token per row ({3 * NEW}) in {NEW} rounds; got "
            f"{res.num_target_passes} passes in {res.num_rounds} rounds"
        )


@pytest.mark.parametrize("max_new", (1, 2, 3, 5))
def test_cost_schedule_never_proposes_past_max_new_tokens(models, max_new):
    target, _ = models
    ids, mask = left_padded(PROMPTS)
    plain = target.generate(ids, attention_mask=mask, max_new_tokens=max_new, eos_token_id=[])
    free = ha.AssistedCosts(draft_step=0.0, target=(1.0,) * 16)  # drafting and verifying more costs nothing
    target.set_assisted_costs(free, target)
    try:
        res = target.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=max_new,
            eos_token_id=[],
            assistant_model=target,
            num_assistant_tokens=20,
            num_assistant_tokens_schedule="cost",
            assistant_confidence_threshold=0.0,
            return_dict_in_generate=True,
        )
    finally:
        target.set_assisted_costs(COSTS, target)
    assert np.array_equal(res.sequences, plain), f"max_new_tokens={max_new}: the output differs from plain"
    assert len(res.proposed_per_position) <= max_new - 1 and res.num_draft_tokens <= 3 * (max_new - 1), (
        f"max_new_tokens={max_new}: a row may propose at most {max_new - 1} tokens (room for the target's own), "
        f"got {res.num_draft_tokens} proposals at positions {res.proposed_per_position.tolist()}"
    )
    # the target drafting for itself for free: one round drafts all the room there is, and all is accepted
    assert res.num_rounds == 1 and res.num_draft_tokens == 3 * (max_new - 1), (
        f"max_new_tokens={max_new}: free drafts that are always right should fill the room in one round; got "
        f"{res.num_rounds} rounds and {res.num_draft_tokens} drafts"
    )


@pytest.mark.parametrize("cap", (1, 2, 4))
def test_num_assistant_tokens_caps_the_cost_schedule(models, cap):
    target, _ = models
    free = ha.AssistedCosts(draft_step=0.0, target=(1.0,) * 16)
    target.set_assisted_costs(free, target)
    try:
        res = target.generate(
            np.array([PROMPTS[2]]),
            assistant_model=target,
            num_assistant_tokens=cap,
            num_assistant_tokens_schedule="cost",
            max_new_tokens=NEW,
            eos_token_id=[],
            assistant_confidence_threshold=0.0,
            return_dict_in_generate=True,
        )
    finally:
        target.set_assisted_costs(COSTS, target)
    assert len(res.proposed_per_position) == cap, (
        f"num_assistant_tokens={cap} caps K under 'cost'; free drafts should reach it and never pass it, got "
        f"proposals at positions {res.proposed_per_position.tolist()}"
    )


def test_assisted_costs_are_measured_once_and_kept(models):
    target, draft = models
    fresh = ha.AutoModelForCausalLM.from_pretrained(target.name_or_path)
    costs = fresh.assisted_costs(draft)
    assert isinstance(costs, ha.AssistedCosts) and len(costs.target) == 64 and len(costs.draft_rows) == 8, costs
    assert all(t > 0 for t in costs.target) and costs.draft_step > 0, costs
    assert fresh.assisted_costs(draft) is costs, "a second call must return the kept measurement"
    assert fresh.assisted_costs(draft, remeasure=True) is not costs, "remeasure=True must measure again"
    assert fresh.assisted_costs().draft_step == 0.0, "prompt lookup drafts without a model: draft_step 0"
    early = fresh.assisted_costs(assistant_early_exit=1)
    assert early.draft_step > 0 and early is fresh.assisted_costs(assistant_early_exit=1)


def test_assisted_costs_are_timed_for_the_batch_and_kept_per_batch_size(models):
    """A batch's round appends each row's tokens to its own sequence: its costs are a table timed over that many
    sequences, kept per batch size beside batch 1's (whose draft steps, which hold for any batch, it shares), and
    used by a batch's call; pinned costs hold for every batch size; a bad batch_size is refused by name."""
    target, draft = models
    fresh = ha.AutoModelForCausalLM.from_pretrained(target.name_or_path)
    ids, mask = left_padded(PROMPTS)
    kw = dict(max_new_tokens=4, num_assistant_tokens_schedule="cost", assistant_model=draft)
    fresh.generate(ids, attention_mask=mask, **kw)  # a batch of 3: measures batch 1's draft steps and its own table
    three = fresh.assisted_costs(draft, batch_size=3)
    one = fresh.assisted_costs(draft)
    assert three is fresh.assisted_costs(draft, batch_size=3), "the batch's call must keep the table it measured"
    assert three is not one and len(three.target) == 64, (three, one)
    assert three.draft_rows == one.draft_rows and three.draft_first == one.draft_first, (three, one)
    assert len(one.draft_first) == 8 and all(d > 0 for d in one.draft_first), one.draft_first
    fresh.set_assisted_costs(COSTS, draft)
    assert fresh.assisted_costs(draft, batch_size=5) is COSTS and fresh.assisted_costs(draft) is COSTS
    for bad in (0, -2, 1.5, True, "8"):
        with pytest.raises(ha.InvalidInputError, match="batch_size"):
            fresh.assisted_costs(draft, batch_size=bad)


def test_assisted_costs_take_a_first_draft_step_table():
    """draft_first (a round's first draft step, after the target's append) is checked as draft_rows is, and goes to
    the core beside it; without it the core reads draft_rows for every step."""
    costs = ha.AssistedCosts(draft_step=0.1, target=(1.0, 1.1), draft_rows=(0.1, 0.15), draft_first=(0.3, 0.4))
    draft, target, first = costs.as_core()
    assert first.tolist() == [0.3, 0.4] and draft.tolist() == [0.1, 0.15] and target.tolist() == [1.0, 1.1]
    assert ha.AssistedCosts(draft_step=0.1, target=(1.0,)).as_core()[2] is None
    for bad in ((), (float("nan"),), (-0.1,), ("0.1",)):
        with pytest.raises(ha.InvalidInputError, match="draft_first"):
            ha.AssistedCosts(draft_step=0.1, target=(1.0,), draft_first=bad)


def test_measured_costs_never_fall_with_size(models):
    """A larger append (a draft step of more rows) never costs less in the table the cost schedule reads: an
    outlier slowed by the machine is lowered to the least cost at its size or above."""
    from habana_assist.generation.assisted_costs import _never_falling

    assert _never_falling([1.0, 1.7, 1.3, 2.0, 1.9]) == [1.0, 1.3, 1.3, 1.9, 1.9]
    assert _never_falling([1.0, 2.0, 3.0]) == [1.0, 2.0, 3.0], "a rising table must stay as measured"
    target, draft = models
    fresh = ha.AutoModelForCausalLM.from_pretrained(target.name_or_path)
    costs = fresh.assisted_costs(draft)
    assert all(a <= b for a, b in zip(costs.target, costs.target[1:])), costs.target
    assert all(a <= b for a, b in zip(costs.draft_rows, costs.draft_rows[1:])), costs.draft_rows
    assert all(a <= b for a, b in zip(costs.draft_first, costs.draft_first[1:])), costs.draft_first


def test_measured_costs_are_timed_at_the_position_asked(models, monkeypatch):
    """assisted_costs.measure(position=P) times every append (the target's, the draft's steps) with P positions in
    the cache before it, 256 by default, and fewer where the cache cannot hold P and the append."""
    from habana_assist.generation import assisted_costs

    target, draft = models
    seen = []  # (the target's?, positions in the cache) of every context the measurement filled
    real = assisted_costs._prefilled

    def recording(core_model, rows, n_prefix, more, vocab_size):
        seen.append((core_model is target._core, n_prefix))
        return real(core_model, rows, n_prefix, more, vocab_size)

    monkeypatch.setattr(assisted_costs, "_prefilled", recording)
    most = max(assisted_costs.MEASURED_T)  # the target's largest timed append
    target_cache = max(target.max_cache_len, most + 1)
    for position, draft_cache in ((40, 256), (None, 512), (1000, 256)):
        seen.clear()
        costs = assisted_costs.measure(
            target, draft._core, draft_cache, **({} if position is None else {"position": position})
        )
        assert isinstance(costs, ha.AssistedCosts) and len(costs.draft_rows) == assisted_costs.DRAFT_ROWS, costs
        P = 256 if position is None else position
        assert {n for is_target, n in seen if is_target} == {min(P, target_cache - most)}, (position, seen)
        # a step of r draft rows needs room for one more token each: P, or what the draft's cache leaves
        want = {min(P, draft_cache - rows) for rows in range(1, assisted_costs.DRAFT_ROWS + 1)}
        assert {n for is_target, n in seen if not is_target} == want, (position, seen)


# The carried counts' layout (the core's cost_state): accepted (POSITIONS,), tested (POSITIONS,) by draft position,
# then accepted (10,), tested (10,) by tenth of the draft's probability, and the same for a tree's alternatives.
POSITIONS = 32


def measured_as(model, drafter, costs):
    """model with `costs` kept for drafter as if measured for batches of 1 and of len(PROMPTS) rows (deterministic
    numbers, a measured table's semantics)."""
    for rows in (1, len(PROMPTS)):
        model._costs.put(drafter, costs, measured=True, batch_size=rows)
    return model


def cost_call(model, draft, ids, mask, **kw):
    args = dict(
        assistant_model=draft,
        num_assistant_tokens=6,
        num_assistant_tokens_schedule="cost",
        assistant_confidence_threshold=0.0,
        max_new_tokens=NEW,
        eos_token_id=[],
        return_dict_in_generate=True,
    )
    return model.generate(ids, attention_mask=mask, **{**args, **kw})


def choices(res):
    """What a call's K choices show: rounds and the candidates proposed and accepted at each draft position."""
    return res.num_rounds, res.proposed_per_position.tolist(), res.accepted_per_position.tolist()


def test_measured_costs_carry_acceptance_from_call_to_call(models):
    """With measured costs the cost schedule's acceptance counts go on from call to call (the core's cost_state,
    kept beside the costs): each call adds its tested and accepted candidates, and the counts a call starts from
    are all it carries (the same counts, the same K choices). Greedy tokens stay plain's."""
    target, draft = models
    fresh = measured_as(ha.AutoModelForCausalLM.from_pretrained(target.name_or_path), draft, COSTS)
    ids, mask = left_padded(PROMPTS)
    plain = fresh.generate(ids, attention_mask=mask, max_new_tokens=NEW, eos_token_id=[])
    state = fresh._costs.learned(draft)
    assert state is not None and state.shape == (ha._core.COST_STATE,) and not state.any(), "zeros before any call"
    K = POSITIONS
    for call in range(3):
        before = state.copy()
        res = cost_call(fresh, draft, ids, mask)
        assert np.array_equal(res.sequences, plain), f"call {call + 1}: carried counts must not change greedy tokens"
        added = state[K : 2 * K].sum() - before[K : 2 * K].sum()
        assert added > 0 and added <= res.num_draft_tokens, (
            f"call {call + 1}: its tested candidates ({added}) must be added, at most its {res.num_draft_tokens} "
            f"proposals"
        )
        bins, alts = state[2 * K : 2 * K + 20], state[2 * K + 20 :]
        assert (state[:K] <= state[K : 2 * K]).all() and (bins[:10] <= bins[10:]).all(), state
        assert not alts.any(), f"call {call + 1}: a chain has no alternatives to count: {alts}"
    # the same starting counts give the same K choices
    start = state.copy()
    first = cost_call(fresh, draft, ids, mask)
    state[:] = start
    again = cost_call(fresh, draft, ids, mask)
    assert choices(first) == choices(again), "from the same carried counts a call must make the same K choices"
    # coupled sampling carries them too, and keeps plain sampling's tokens
    plain_s = fresh.generate(ids, attention_mask=mask, max_new_tokens=NEW, eos_token_id=[], do_sample=True, seed=3)
    before = state.copy()
    res = cost_call(fresh, draft, ids, mask, do_sample=True, seed=3, assisted_sampling="coupled")
    assert np.array_equal(res.sequences, plain_s) and state[K : 2 * K].sum() > before[K : 2 * K].sum()


@pytest.mark.parametrize("shape", ["siblings", "dynamic"])
def test_trees_count_their_alternatives_apart_from_the_chain(models, shape):
    """A tree's alternatives (siblings, a dynamic tree's children after the first) are counted apart from the chain's
    candidates, by tenth of what the cost schedule rates them by: a call of trees adds tested alternatives, some
    accepted, none more than tested, and keeps greedy's tokens."""
    target, draft = models
    wide = ha.AssistedCosts(draft_step=0.01, target=(1.0,) * 16)  # width free: the schedule drafts and keeps siblings
    fresh = measured_as(ha.AutoModelForCausalLM.from_pretrained(target.name_or_path), draft, wide)
    ids, mask = left_padded(PROMPTS)
    plain = fresh.generate(ids, attention_mask=mask, max_new_tokens=NEW, eos_token_id=[])
    state = fresh._costs.learned(draft)
    K = POSITIONS
    res = cost_call(fresh, draft, ids, mask, assistant_tree_width=3, assistant_tree_shape=shape)
    assert np.array_equal(res.sequences, plain), "trees under the cost schedule must keep greedy's tokens"
    alt_acc, alt_tested = state[2 * K + 20 : 2 * K + 30], state[2 * K + 30 :]
    assert alt_tested.sum() > 0 and (alt_acc <= alt_tested).all(), state
    assert alt_tested.sum() <= res.num_sibling_tokens, (alt_tested.sum(), res.num_sibling_tokens)
    assert alt_acc.sum() <= res.num_sibling_accepted, (alt_acc.sum(), res.num_sibling_accepted)


def test_carried_acceptance_is_a_window_over_the_latest_calls(models):
    target, draft = models
    fresh = measured_as(ha.AutoModelForCausalLM.from_pretrained(target.name_or_path), draft, COSTS)
    ids, mask = left_padded(PROMPTS)
    state = fresh._costs.learned(draft)
    K = POSITIONS
    state[K] = 20000.0  # tested at position 0, as if from many calls
    state[0] = 5000.0  # a quarter accepted
    res = cost_call(fresh, draft, ids, mask)
    assert state[K : 2 * K].sum() <= 512 + res.num_draft_tokens, (
        f"the carried counts stand for 512 candidates at most before the call's own ({res.num_draft_tokens} "
        f"proposed); tested now {state[K : 2 * K].sum()}"
    )


def test_pinned_costs_and_rejection_sampling_learn_within_each_call(models):
    """Pinned costs (reproducible K choices) and rejection sampling (whose tokens follow the K choices) carry
    nothing between calls: the same call twice gives the same choices and tokens."""
    target, draft = models
    ids, mask = left_padded(PROMPTS)
    assert target._costs.learned(draft) is None, "pinned costs carry no counts"
    assert choices(cost_call(target, draft, ids, mask)) == choices(cost_call(target, draft, ids, mask))
    fresh = measured_as(ha.AutoModelForCausalLM.from_pretrained(target.name_or_path), draft, COSTS)
    state = fresh._costs.learned(draft)
    kw = dict(do_sample=True, seed=11, temperature=0.9)
    one, two = cost_call(fresh, draft, ids, mask, **kw), cost_call(fresh, draft, ids, mask, **kw)
    assert np.array_equal(one.sequences, two.sequences) and choices(one) == choices(two)
    assert not state.any(), "rejection sampling must leave the carried counts alone"


@pytest.mark.parametrize("where, value", [(0, float("nan")), (40, -1.0), (0, 3.0)])  # (0, 3.0): accepted > tested
def test_corrupt_carried_acceptance_is_refused(models, where, value):
    target, draft = models
    fresh = measured_as(ha.AutoModelForCausalLM.from_pretrained(target.name_or_path), draft, COSTS)
    ids, mask = left_padded(PROMPTS)
    state = fresh._costs.learned(draft)
    state[where] = value
    with pytest.raises(ha.InvalidInputError, match="cost schedule's state"):
        cost_call(fresh, draft, ids, mask)


@pytest.mark.parametrize(
    "bad",
    [
        dict(draft_step=float("nan"), target=(1.0,)),
        dict(draft_step=-1.0, target=(1.0,)),
        dict(draft_step=0.1, target=()),
        dict(draft_step=0.1, target=(1.0, 0.0)),
        dict(draft_step=0.1, target=(1.0, float("inf"))),
        dict(draft_step=0.1, target=tuple([1.0] * 65)),
        dict(draft_step="fast", target=(1.0,)),
        dict(draft_step=0.1, target=("slow",)),
        dict(draft_step=0.1, target=None),
        dict(draft_step=0.1, target=(1.0,), draft_rows=(-1.0,)),
        dict(draft_step=0.1, target=(1.0,), draft_rows=()),
        dict(draft_step=0.1, target=(1.0,), draft_rows=(float("nan"),)),
    ],
)
def test_malformed_costs_are_refused(bad):
    with pytest.raises(ha.InvalidInputError, match="AssistedCosts"):
        ha.AssistedCosts(**bad)


def test_set_assisted_costs_refuses_what_is_not_costs(models):
    target, draft = models
    for bad in ((0.1, (1.0,)), {"draft_step": 0.1, "target": (1.0,)}, None):
        with pytest.raises(ha.InvalidInputError, match="AssistedCosts"):
            target.set_assisted_costs(bad, draft)
    with pytest.raises(ha.InvalidInputError, match="assistant_model"):
        target.set_assisted_costs(COSTS, "draft")


def test_a_batch_checks_a_no_verdict_about_as_often_as_one_row(models):
    """Carried counts that say no candidate is worth drafting: a row checks the verdict by drafting one candidate
    after 16 idle rounds, but a batch whose rows all plan none explores about as often as one row (a row after 16
    idle rounds for each idle row), not once per row: each exploration costs a draft step over the row's catch-up and
    a verified token, whatever the batch. Greedy tokens stay plain's."""
    target, draft = models
    fresh = measured_as(ha.AutoModelForCausalLM.from_pretrained(target.name_or_path), draft, COSTS)
    state = fresh._costs.learned(draft)
    K = POSITIONS
    n = 16 * len(PROMPTS) + 2

    def explorations(prompts):
        state[:] = 0.0
        state[K] = 512.0  # 512 candidates tested at draft position 0, none accepted
        ids, mask = left_padded(prompts)
        plain = fresh.generate(ids, attention_mask=mask, max_new_tokens=n, eos_token_id=[])
        res = cost_call(fresh, draft, ids, mask, max_new_tokens=n)
        assert np.array_equal(res.sequences, plain), "exploring must not change greedy tokens"
        first = res.proposed_per_position.tolist()[:1]
        return first[0] if first else 0, res.num_rounds

    one, rounds_one = explorations(PROMPTS[1:2])
    batch, rounds_batch = explorations(PROMPTS)
    assert 1 <= one <= rounds_one // 16, f"one row: {one} explorations in {rounds_one} rounds (one per 16 idle rounds)"
    assert 1 <= batch <= one, (
        f"a batch of {len(PROMPTS)} idle rows explored {batch} times in {rounds_batch} rounds, one row {one} times in "
        f"{rounds_one}: a batch must check the verdict about as often as one row, not once per row"
    )


def test_cost_schedule_prices_the_drafts_catch_up(models):
    """A round's first draft step appends the decided tokens the draft has not seen: one after a round whose
    candidates were not all accepted, two after one that accepted them all (the last candidate and the target's
    token), more after rounds without drafting. Pinned costs where a draft step over one token is nearly free and
    one over two tokens dear, and the target drafting for itself (every candidate accepted): the first round drafts
    (the draft's prompt is its prefill, paid once), and no round after it, each facing a catch-up of two tokens or
    more. Greedy tokens stay plain's."""
    target, _ = models
    fresh = ha.AutoModelForCausalLM.from_pretrained(target.name_or_path)
    one_token = ha.AssistedCosts(
        draft_step=0.01, target=(1.0,) * 16, draft_rows=(0.01, 100.0), draft_first=(0.01, 100.0)
    )
    fresh.set_assisted_costs(one_token, fresh)
    ids, mask = left_padded(PROMPTS[1:2])
    plain = fresh.generate(ids, attention_mask=mask, max_new_tokens=NEW, eos_token_id=[])
    res = cost_call(fresh, fresh, ids, mask, num_assistant_tokens=3)
    assert np.array_equal(res.sequences, plain), "the cost schedule must keep greedy's tokens"
    assert res.proposed_per_position.tolist() == [1, 1, 1] and res.num_rounds == NEW - 3, (
        f"expected 3 candidates in the first round and none after (each later first step appends 2 tokens or more, "
        f"priced at 100 target steps), got {choices(res)}"
    )
