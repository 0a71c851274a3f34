"""habana_assist.wrap: a torch model (tests/fixtures/torch_causal_lm.py, Transformers' calling convention) behind the
core's model interface, as target, as draft, or both; exactness where its forward is batch-invariant, the disagreement
report where it is not, rejection sampling's distribution, and clear errors for what does not follow the
convention (habana_assist/integrations/external.py)."""

import os
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

# tests/integrations/test_torch_io.py asserts torch is installed by the test set-up
torch = pytest.importorskip("torch")


# this file shares the assisted tests' helpers (tests/generation), importable here when collected alone too
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "generation"))

from checkpoints import write_random_checkpoint  # noqa: E402 - once torch is known to be there
from stats import chi_square  # noqa: E402 - once torch is known to be there
from test_assisted_batches import left_padded  # noqa: E402 - once torch is known to be there
from test_rejection_sampling import (  # noqa: E402 - once torch is known to be there
    PROMPT,
    TEMPERATURE,
    TINY,
    distributions,
    joint,
    outcome_counts,
    pair,  # noqa: E402, F401 - pair: a pytest fixture, named by tests' arguments
)
from torch_causal_lm import KVCache, TorchCausalLM  # noqa: E402 - once torch is known to be there

import habana_assist as ha  # noqa: E402 - once torch is known to be there
from habana_assist import _core  # noqa: E402 - once torch is known to be there
from habana_assist.integrations import external  # noqa: E402 - once torch is known to be there

SMALL = dict(vocab_size=64, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=48)
IDS = np.array([[1, 17, 5, 40, 33, 8]])


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """(target dir, draft dir, native target, native draft): two random models over one vocabulary."""
    root = str(tmp_path_factory.mktemp("external"))
    write_random_checkpoint(os.path.join(root, "t"), seed=31, **SMALL)
    write_random_checkpoint(os.path.join(root, "d"), seed=32, **SMALL)
    t, d = os.path.join(root, "t"), os.path.join(root, "d")
    return t, d, ha.AutoModelForCausalLM.from_pretrained(t), ha.AutoModelForCausalLM.from_pretrained(d)


def test_torch_model_logits_agree_with_the_native_model_on_the_shipped_target():
    native = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode")
    model = TorchCausalLM(native.name_or_path)
    ids = np.array([[1, 500, 600, 700, 800, 901, 1000]])
    got = model(torch.from_numpy(ids)).logits.numpy()
    want = native(ids).logits
    scale = float(np.abs(want).max())
    assert got.shape == want.shape and float(np.abs(got - want).max()) <= 1e-5 * scale, (
        f"the torch model's logits should agree with the native model's to float32 rounding: largest difference "
        f"{float(np.abs(got - want).max()):.3g} on logits up to {scale:.3g}"
    )


@pytest.mark.parametrize("tuple_cache", [False, True])
def test_every_mixed_pair_gives_plain_greedy_output_when_the_forward_is_batch_invariant(small, tuple_cache):
    t, d, native_t, native_d = small
    ext_t = ha.wrap(TorchCausalLM(t, one_at_a_time=True, tuple_cache=tuple_cache))
    ext_d = ha.wrap(TorchCausalLM(d, tuple_cache=tuple_cache))
    assert ext_t.measure_disagreement() == 0.0
    plain = ext_t.generate(IDS, max_new_tokens=24)
    assert np.array_equal(plain, native_t.generate(IDS, max_new_tokens=24)), "torch and native greedy differ"
    for name, target, draft in (
        ("external target, native draft", ext_t, native_d),
        ("external target, external draft", ext_t, ext_d),
        ("native target, external draft", native_t, ext_d),
    ):
        for K in (1, 4):
            res = target.generate(
                IDS,
                max_new_tokens=24,
                assistant_model=draft,
                num_assistant_tokens=K,
                num_assistant_tokens_schedule="constant",
                return_dict_in_generate=True,
            )
            assert np.array_equal(res.sequences, plain), f"{name}, K={K}: assisted greedy differs from plain"
            assert res.num_draft_tokens > 0 and 0 <= res.num_accepted_tokens <= res.num_draft_tokens
            if target is ext_t:
                assert res.num_narrow_margins == 0
    lookup = ext_t.generate(IDS, max_new_tokens=24, prompt_lookup_num_tokens=3)
    assert np.array_equal(lookup, plain), "prompt lookup on an external target differs from plain greedy"


BATCH = [[17, 3], [9, 21, 40, 9, 21, 40, 13, 9, 21], [1, 17, 5, 40, 33, 8, 60, 2, 11, 5, 7, 12, 30, 41]]


def test_a_batch_of_wrapped_rows_gives_each_row_what_it_gives_alone(small):
    """Rows of very different lengths, left-padded: plain, assisted (each mixed pair) and prompt lookup give each
    row what it gives alone, and what the native twin gives the batch; an eos ends one row while others run on."""
    t, d, native_t, native_d = small
    ext_t, ext_d = ha.wrap(TorchCausalLM(t, one_at_a_time=True)), ha.wrap(TorchCausalLM(d))
    ids, mask = left_padded(BATCH)
    alone = [ext_t.generate(np.array([p]), max_new_tokens=16, eos_token_id=[])[0, len(p) :] for p in BATCH]
    # as eos, a token the last row decides at step 3 or later and the others never: it ends there, they run on
    eos = next(int(tok) for tok in alone[2][3:] if tok not in alone[0] and tok not in alone[1])
    kw = dict(attention_mask=mask, max_new_tokens=16, eos_token_id=eos, pad_token_id=0)
    want = native_t.generate(ids, **kw)
    for name, target, assistant, extra in (
        ("plain", ext_t, None, {}),
        ("external target, native draft", ext_t, native_d, {}),
        ("external target, external draft", ext_t, ext_d, {}),
        ("native target, external draft", native_t, ext_d, {}),
        ("prompt lookup", ext_t, None, dict(prompt_lookup_num_tokens=3)),
    ):
        got = target.generate(ids, assistant_model=assistant, **kw, **extra)
        assert np.array_equal(got, want), f"{name}: the batch differs from the native batch"
    for row, (p, tokens) in enumerate(zip(BATCH, alone)):
        ends = [j for j, tok in enumerate(tokens) if tok == eos]
        n = ends[0] + 1 if ends else len(tokens)
        assert np.array_equal(want[row, ids.shape[1] : ids.shape[1] + n], tokens[:n]), f"row {row} differs from alone"
        assert (want[row, ids.shape[1] + n :] == 0).all()
    assert eos in want[2, ids.shape[1] :] and (want[2, -1] == 0) and want.shape[1] == ids.shape[1] + 16
    kw = dict(attention_mask=mask, max_new_tokens=12, do_sample=True, seed=3, top_k=0, eos_token_id=[])
    assert np.array_equal(
        ext_t.generate(ids, assistant_model=native_d, assisted_sampling="coupled", **kw), ext_t.generate(ids, **kw)
    ), "coupled sampling of a batch differs from plain sampling"


class FailsAt(TorchCausalLM):
    """Raises from its forward on its `at`-th call."""

    def __init__(self, directory, at):
        super().__init__(directory, one_at_a_time=True)
        self.at, self.calls = at, 0

    def forward(self, *args, **kw):
        self.calls += 1
        if self.calls == self.at:
            raise RuntimeError("device lost")
        return super().forward(*args, **kw)

    __call__ = forward


def test_a_failing_row_leaves_no_row_appended_and_the_next_call_is_whole(small):
    t, _, _, native_d = small
    ids, mask = left_padded(BATCH)
    want = ha.wrap(TorchCausalLM(t, one_at_a_time=True)).generate(
        ids, attention_mask=mask, max_new_tokens=10, assistant_model=native_d
    )
    # calls: the probe's 1 + 8, then the prefill's three rows, then each round's; the 14th fails mid-round
    model = FailsAt(t, 14)
    ext = ha.wrap(model)
    with pytest.raises(RuntimeError, match="device lost"):
        ext.generate(ids, attention_mask=mask, max_new_tokens=10, assistant_model=native_d)
    assert model.calls == 14
    assert np.array_equal(ext.generate(ids, attention_mask=mask, max_new_tokens=10, assistant_model=native_d), want)
    # one append over two rows whose second row's forward fails: the first row's positions are taken back too
    adapter = external._Adapter(ha.wrap(FailsAt(t, 2)), 2, False)
    ctx = _core.external_context(adapter, SMALL["vocab_size"], 16, 2)
    with pytest.raises(RuntimeError, match="device lost"):
        ctx.append(
            np.array([0, 0, 1, 1], dtype=np.int32),
            np.array([5, 6, 7, 8], dtype=np.int32),
            None,
            np.empty((4, SMALL["vocab_size"]), dtype=np.float32),
        )
    assert ctx.length(0) == ctx.length(1) == 0 and adapter.length == [0, 0]
    assert adapter.cache[0].get_seq_length() == 0, "row 0's cache keeps the positions of a failed append"


def test_torch_model_passed_directly_as_assistant_is_wrapped(small):
    t, d, native_t, _ = small
    plain = native_t.generate(IDS, max_new_tokens=16)
    res = native_t.generate(IDS, max_new_tokens=16, assistant_model=TorchCausalLM(d), return_dict_in_generate=True)
    assert np.array_equal(res.sequences, plain) and res.num_draft_tokens > 0


def test_coupled_sampling_equals_plain_sampling_through_the_wrapper(small):
    t, d, _, native_d = small
    ext_t = ha.wrap(TorchCausalLM(t, one_at_a_time=True))
    for seed in range(6):
        kw = dict(do_sample=True, seed=seed, max_new_tokens=16, temperature=1.5, top_k=0)
        plain = ext_t.generate(IDS, **kw)
        coupled = ext_t.generate(IDS, assistant_model=native_d, assisted_sampling="coupled", **kw)
        assert np.array_equal(plain, coupled), f"seed {seed}: coupled assisted sampling differs from plain sampling"


def test_token_trees_need_a_native_target_and_take_a_wrapped_draft(small):
    t, d, native_t, _ = small
    ext_t = ha.wrap(TorchCausalLM(t, one_at_a_time=True))
    with pytest.raises(ha.InvalidInputError) as err:
        ext_t.generate(IDS, assistant_model=TorchCausalLM(d), assistant_tree_width=2, max_new_tokens=8)
    msg = str(err.value)
    assert "assistant_tree_width=2" in msg and "wrap" in msg and "assistant_tree_width=1" in msg, (
        f"a wrapped target with trees: expected a message naming assistant_tree_width=2, wrap and the fix, got {msg!r}"
    )
    plain = native_t.generate(IDS, max_new_tokens=16)
    res = native_t.generate(
        IDS, max_new_tokens=16, assistant_model=TorchCausalLM(d), assistant_tree_width=3, return_dict_in_generate=True
    )
    assert np.array_equal(res.sequences, plain) and res.num_sibling_tokens > 0, (
        f"a native target verifying a wrapped draft's trees: expected plain {plain.tolist()} with siblings proposed, "
        f"got {res.sequences.tolist()} ({res.num_sibling_tokens} siblings)"
    )
    with pytest.raises(ha.InvalidInputError) as err:  # a dynamic tree's frontier needs the draft's tree attention
        native_t.generate(
            IDS,
            max_new_tokens=8,
            assistant_model=TorchCausalLM(d),
            assistant_tree_width=3,
            assistant_tree_shape="dynamic",
        )
    msg = str(err.value)
    assert "assistant_tree_shape='dynamic'" in msg and "assistant_tree_shape='siblings'" in msg, (
        f"a wrapped draft with dynamic trees: expected a message naming the shape and the fix, got {msg!r}"
    )


class Slow(TorchCausalLM):
    """Sleeps 3 ms in each forward: a target slower than the draft, as one on an accelerator."""

    def forward(self, *args, **kw):
        time.sleep(0.003)
        return super().forward(*args, **kw)

    __call__ = forward


STATS = ("num_draft_tokens", "num_accepted_tokens", "num_target_passes", "num_draft_passes", "num_rounds")


def test_drafting_ahead_beside_a_wrapped_target_changes_nothing(small):
    """overlap=True: the native draft drafts the next round while the wrapped forward runs; the same tokens, sources
    and counts as overlap=False for greedy, coupled and rejection sampling, both schedules, a batch; over the calls
    the thread drafted ahead, and where the draft is the target's own weights (every guess right) rounds used it.
    The default (None) does not draft ahead on the CPU; tests/c/test_generation.c tests the core's side in detail."""
    t, _, native_t, native_d = small
    ext = ha.wrap(Slow(t, one_at_a_time=True))
    assert ext.overlap is None
    ext.generate(IDS, max_new_tokens=8, assistant_model=native_d)
    assert ext.drafted_ahead == {"passes": 0, "used": 0}, "overlap=None drafted ahead beside a model on the CPU"
    ids, mask = left_padded(BATCH)
    passes = used_when_right = 0
    for draft in (native_d, native_t):
        for kw in (
            dict(),
            dict(do_sample=True, seed=4, assisted_sampling="coupled"),
            dict(do_sample=True, seed=4, assisted_sampling="rejection", top_k=0),
        ):
            for schedule, prompt in (
                ("constant", dict(input_ids=IDS)),
                ("heuristic", dict(input_ids=ids, attention_mask=mask)),
            ):
                results = []
                for overlap in (False, True):
                    ext.overlap = overlap
                    results.append(
                        ext.generate(
                            **prompt,
                            max_new_tokens=14,
                            assistant_model=draft,
                            eos_token_id=[],
                            num_assistant_tokens=3,
                            num_assistant_tokens_schedule=schedule,
                            return_dict_in_generate=True,
                            **kw,
                        )
                    )
                    if not overlap:
                        assert ext.drafted_ahead == {"passes": 0, "used": 0}
                without, with_ = results
                what = f"draft {'target' if draft is native_t else 'other'}, {kw}, {schedule}"
                assert np.array_equal(without.sequences, with_.sequences), f"{what}: drafting ahead changed the tokens"
                assert np.array_equal(without.token_sources, with_.token_sources), f"{what}: the sources differ"
                for name in STATS:
                    assert getattr(without, name) == getattr(with_, name), f"{what}: {name} differs"
                assert np.array_equal(without.accepted_per_position, with_.accepted_per_position)
                assert 0 <= ext.drafted_ahead["used"] <= with_.num_draft_passes
                passes += ext.drafted_ahead["passes"]
                used_when_right += ext.drafted_ahead["used"] if draft is native_t and not kw else 0
    assert passes > 0 and used_when_right > 0, (passes, used_when_right)
    with pytest.raises(ha.InvalidInputError, match="overlap"):
        ha.wrap(TorchCausalLM(t), overlap="yes")


class Perturbed(TorchCausalLM):
    """A forward over several positions adds `by` to logit 0 of each: not batch-invariant, by a known amount."""

    def __init__(self, directory, by):
        super().__init__(directory)
        self.by = by

    def forward(self, input_ids, **kw):
        out = super().forward(input_ids, **kw)
        if input_ids.shape[1] > 1:
            out.logits[..., 0] += self.by
        return out

    __call__ = forward


def test_disagreement_is_measured_and_narrow_margins_are_reported(small):
    t, _, _, native_d = small
    invariant = ha.wrap(TorchCausalLM(t, one_at_a_time=True))
    res = invariant.generate(IDS, max_new_tokens=12, assistant_model=native_d, return_dict_in_generate=True)
    assert invariant.batch_disagreement == 0.0 and res.num_narrow_margins == 0
    chunked = ha.wrap(TorchCausalLM(t))
    assert chunked.measure_disagreement() < 1e-4  # float32 rounding only
    big = ha.wrap(Perturbed(t, 1e4))  # every margin is narrower than this disagreement
    res = big.generate(
        IDS,
        max_new_tokens=12,
        assistant_model=native_d,
        num_assistant_tokens=3,
        num_assistant_tokens_schedule="constant",
        return_dict_in_generate=True,
    )
    assert big.batch_disagreement == pytest.approx(1e4, rel=1e-3), "the probe should measure the injected disagreement"
    # the rows the target's appends returned: the prompt's last, then K + 1 per verification of K drafts
    rows = 1 + res.num_draft_tokens + (res.num_target_passes - 1)
    assert res.num_narrow_margins == rows == big.narrow_margins, (
        f"every one of the target's {rows} logits rows has a margin below 1e4; reported {res.num_narrow_margins}"
    )


def test_greedy_calls_reduce_the_targets_rows_to_their_top_two_and_decide_the_same(small, monkeypatch):
    """reduce_logits=True runs on the host what an accelerator's logits get by default: the same tokens, the same
    narrow-margin count (margins are read from the top two), and only where the call reads nothing but the argmax."""
    t, d, _, native_d = small
    calls = []
    real = external.top_two
    monkeypatch.setattr(external, "top_two", lambda rows: calls.append(int(rows.shape[0])) or real(rows))
    whole, reduced = ha.wrap(Perturbed(t, 0.5), reduce_logits=False), ha.wrap(Perturbed(t, 0.5), reduce_logits=True)
    kw = dict(
        max_new_tokens=20,
        num_assistant_tokens=3,
        num_assistant_tokens_schedule="constant",
        return_dict_in_generate=True,
    )
    for assistant in (None, native_d):
        a = whole.generate(IDS, assistant_model=assistant, **kw)
        assert not calls
        b = reduced.generate(IDS, assistant_model=assistant, **kw)
        assert np.array_equal(a.sequences, b.sequences) and a.num_narrow_margins == b.num_narrow_margins
        if assistant is not None:
            assert a.num_accepted_tokens == b.num_accepted_tokens
        assert 0 < a.num_narrow_margins, "0.5 should be wider than some margins (else the count is not compared)"
        # every row the target's appends returned was reduced: the prompt's last, then one per step (plain) or
        # K + 1 per verification of K drafts (the probe's forwards are not reduced)
        rows = (
            b.sequences.shape[1] - IDS.shape[1]
            if assistant is None
            else 1 + b.num_draft_tokens + b.num_target_passes - 1
        )
        assert sum(calls) == rows, f"{sum(calls)} rows reduced of {rows}"
        calls.clear()
    assert whole.transfer_bytes == reduced.transfer_bytes == {"to_device": 0, "to_host": 0}, (
        "nothing crosses on the host"
    )
    for extra in (
        dict(output_scores=True, return_dict_in_generate=True),
        dict(repetition_penalty=1.2),
        dict(min_new_tokens=3),
        dict(do_sample=True, seed=1),
        dict(logits_processor=[lambda ids, s: s]),
        dict(stopping_criteria=[lambda ids, s, **k: False]),
        dict(output_logits=True, return_dict_in_generate=True),
        dict(suppress_tokens=[3]),
        dict(no_repeat_ngram_size=2),
    ):
        reduced.generate(IDS, max_new_tokens=6, assistant_model=native_d, **extra)
        assert not calls, f"{extra} reads more of the target's rows than their argmax; they must cross whole"
    with pytest.raises(ha.InvalidInputError, match="reduce_logits"):
        ha.wrap(TorchCausalLM(t), reduce_logits="yes")


@pytest.mark.parametrize("case", ["distinct", "ties", "all -inf", "one token"])
def test_top_two_are_the_largest_logits_and_the_first_of_equals(case):
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((6, 1 if case == "one token" else 9)).astype(np.float32)
    if case == "ties":
        rows[1] = rng.integers(-2, 3, size=9)
        rows[4, [2, 7]] = 5.0
    if case == "all -inf":
        rows[1] = -np.inf
    top = external.top_two(torch.from_numpy(rows.copy()))
    assert top.shape == (len(rows), 4) and top.dtype == np.float64
    for full, (v1, i1, v2, i2) in zip(rows, top):
        assert v1 == full.max() and i1 == np.argmax(full)  # numpy's argmax: the first of equals
        if len(full) > 1:
            others = np.delete(full, int(i1))
            assert v2 == others.max() and full[int(i2)] == v2 and i2 != i1 or v2 == -np.inf
        else:
            assert (v2, i2) == (v1, i1)


@pytest.mark.parametrize(
    "top, message",
    [
        ([[1.0, 70.0, 0.5, 1.0]], "outside the vocabulary"),
        ([[1.0, 2.5, 0.5, 1.0]], "outside the vocabulary"),
        ([[1.0, 2.0, 1.5, 1.0]], "not the largest"),
        ([[1.0, 2.0, 0.5, 2.0]], "not the largest"),
        ([[float("nan"), 2.0, 0.5, 1.0]], "NaN logits .position 0 of this forward, token id 2"),
        ([[1.0, 2.0, 0.5, 1.0, 0.0]], "expected 4 per position"),
        (np.zeros((1, 4), dtype=np.int64), "format '[lq]'"),
        ("text", "must return float32 logits"),
    ],
)
def test_the_core_checks_an_adapters_top_two(top, message):
    class Adapter:
        def append(self, seq, tokens, want):
            return np.asarray(top) if not isinstance(top, str) else top

        def crop(self, seq, length):
            pass

    ctx = _core.external_context(Adapter(), 64, 16)
    with pytest.raises(ha.InvalidInputError, match=message):
        ctx.append(
            np.zeros(1, dtype=np.int32), np.array([1], dtype=np.int32), None, np.empty((1, 64), dtype=np.float32)
        )
    assert ctx.length(0) == 0


def test_rejection_sampling_through_the_wrapper_draws_the_target_distribution(pair, one_core_thread):  # noqa: F811 - the imported fixture
    target, draft = pair
    ext = ha.wrap(TorchCausalLM(target.name_or_path))
    K, T, draws = 2, 3, 6000
    probs = joint(distributions(target, T), T)  # the native twin's: equal to float32 rounding
    rows, drafted, accepted = [], 0, 0
    for seed in range(draws):
        res = ext.generate(
            np.array([PROMPT]),
            assistant_model=draft,
            do_sample=True,
            seed=seed,
            max_new_tokens=T,
            temperature=TEMPERATURE,
            top_k=0,
            num_assistant_tokens=K,
            num_assistant_tokens_schedule="constant",
            return_dict_in_generate=True,
        )
        rows.append(res.sequences[0, len(PROMPT) :])
        drafted += res.num_draft_tokens
        accepted += res.num_accepted_tokens
    stat, df, p = chi_square(outcome_counts(np.array(rows), T), probs)
    assert p >= 1e-3, f"chi-square {stat:.1f} on {df} degrees of freedom, p = {p:.3g} < 1e-3"
    assert 0.1 < accepted / drafted < 0.9, f"accepted {accepted} of {drafted}"


# ------------------------------------------------------------------------------------------------- errors


class Returns(torch.nn.Module):
    """A model whose forward returns what make(n, cache) gives."""

    def __init__(self, make, vocab=TINY["vocab_size"]):
        super().__init__()
        self.config = SimpleNamespace(vocab_size=vocab, max_position_embeddings=64, eos_token_id=None)
        self.make, self.w = make, torch.nn.Parameter(torch.zeros(1), requires_grad=False)

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=True):
        return self.make(input_ids.shape[1], past_key_values)


def _good(n, cache, dtype=torch.float32, vocab=TINY["vocab_size"]):
    cache = cache if cache is not None else SimpleNamespace(crop=lambda m: None)
    return SimpleNamespace(logits=torch.arange(n * vocab, dtype=dtype).reshape(1, n, vocab) % 7, past_key_values=cache)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda n, c: SimpleNamespace(past_key_values=c), "without `logits`"),
        (lambda n, c: _good(n, c, vocab=5), "shape"),
        (lambda n, c: _good(n, c, dtype=torch.float64), "float64"),
        (lambda n, c: _good(n, c, dtype=torch.int32), "int32"),
        (
            lambda n, c: SimpleNamespace(
                logits=torch.full((1, n, TINY["vocab_size"]), float("nan")),
                past_key_values=SimpleNamespace(crop=lambda m: None),
            ),
            "NaN",
        ),
        (lambda n, c: SimpleNamespace(logits=_good(n, c).logits, past_key_values=object()), "cannot be cropped"),
    ],
)
def test_models_that_break_the_convention_get_clear_errors(pair, make, message):  # noqa: F811 - the imported fixture
    _, draft = pair
    model = ha.wrap(Returns(make))
    with pytest.raises(ha.HabanaAssistError, match=message):
        model.generate(np.array([PROMPT]), max_new_tokens=6, assistant_model=draft)
    with pytest.raises(ha.HabanaAssistError, match=message):
        draft.generate(np.array([PROMPT]), max_new_tokens=6, assistant_model=model)


class KeepsItsCache(TorchCausalLM):
    """Uses one cache object of its own, whatever past_key_values it is given."""

    def forward(self, input_ids, past_key_values=None, **kw):
        if not hasattr(self, "kept"):
            self.kept = KVCache(len(self.layers))
        return super().forward(input_ids, past_key_values=self.kept, **kw)

    __call__ = forward


def test_wrap_refuses_what_it_cannot_drive(pair, small):  # noqa: F811 - the imported fixture
    target, draft = pair
    with pytest.raises(ha.InvalidInputError, match="not callable"):
        ha.wrap(42)
    with pytest.raises(ha.InvalidInputError, match="vocab_size"):
        ha.wrap(torch.nn.Linear(2, 2))
    with pytest.raises(ha.InvalidInputError, match="already"):
        ha.wrap(target)
    with pytest.raises(ha.InvalidInputError, match="assistant_model must be"):
        target.generate(np.array([PROMPT]), max_new_tokens=3, assistant_model="draft")
    ext = ha.wrap(TorchCausalLM(small[0]))
    with pytest.raises(ha.InvalidInputError, match="'cost'"):
        ext.generate(IDS, max_new_tokens=3, assistant_model=small[3], num_assistant_tokens_schedule="cost")
    with pytest.raises(ha.InvalidInputError, match="assistant_early_exit"):
        ha.wrap(Returns(_good)).generate(np.array([PROMPT]), max_new_tokens=3, assistant_early_exit=1)
    with pytest.raises(ha.InvalidInputError, match="native models"):
        ext.save_pretrained("/nonexistent")
    with pytest.raises(ha.UnsupportedModelError, match="one cache object for two rows"):
        ha.wrap(KeepsItsCache(small[0])).generate(np.array([[1, 2], [3, 4]]), max_new_tokens=3)
