"""The built-in logits processors and warpers compute what Transformers' do, in Transformers' order.

Every case runs generate(..., return_dict_in_generate=True, output_scores=True, output_logits=True) on the
shipped pair and checks, at every step of every row, that the processed scores are what the float64
reference (tests/fixtures/processors_reference.py, written from Transformers' logits_process.py) computes from that
step's raw logits, the row's tokens so far and the step: -inf exactly where the reference has -inf, the
other values equal to float32 rounding; and that the chosen token is the argmax (greedy) or has a finite
score (sampling).  Then the properties the issue names, checked on the output directly: no repeated 3-gram
with no_repeat_ngram_size=3, bad words never generated, min_p removing exactly the tokens below min_p times
the top probability, forced_eos at the last step, begin_suppress_tokens at the first step only, a user's
logits_processor (a function and a class) whose ban holds and shows in the scores, and which receives each
row's own tokens, shape (1, n).
"""

import os

import numpy as np
import processors_reference as P
import pytest

import habana_assist as ha

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(HERE, os.pardir, "habana_assist", "pretrained")
EOS, PAD = 2, 3  # the shipped pair's generation_config.json

# Prompts in the shipped tokenizer's ids (BOS first).  IMPORT: "import os\nimport sys\nimport", whose continuation
# holds import lines, so the history-dependent flags have work to do.
IMPORT = [1, 639, 691, 4, 639, 872, 4, 639]
# CLASS: "class Stack:\n    def __init__(self):\n        self." (varied code, spread-out distributions)
CLASS_TEXT = "class Stack:\n    def __init__(self):\n        self."
SYS, NEWLINE, IMPORT_TOKEN, OS = 872, 4, 639, 691
# The shipped draft continues IMPORT greedily with "warnings\nfrom collections import namedtuple\nfrom ...": FROM
# ("from") starts its lines, and after 64 new tokens it repeats a line (so a 3-gram).
FROM = 646
NEW = 16  # max_new_tokens of most cases

# name: (prompt name, flags for generate() and the reference).  Greedy unless do_sample=True.
CASES = {
    # history-dependent processors
    "repetition_penalty": ("import", dict(repetition_penalty=1.3)),
    "repetition_penalty_below_1": ("class", dict(repetition_penalty=0.7)),  # rewards repeats
    "no_repeat_ngram_size_3": ("import", dict(no_repeat_ngram_size=3)),
    "no_repeat_ngram_size_1": ("class", dict(no_repeat_ngram_size=1)),
    # a row shorter than n at first: nothing to ban until it holds a whole n-gram
    "no_repeat_ngram_size_short_row": ("bos", dict(no_repeat_ngram_size=2)),
    # [[EOS]] is dropped (Transformers lets generation end), the others hold
    "bad_words_single": ("import", dict(bad_words_ids=[[SYS], [IMPORT_TOKEN], [EOS]])),
    "bad_words_multi": ("import", dict(bad_words_ids=[[NEWLINE, IMPORT_TOKEN], [SYS, NEWLINE, OS]])),
    "sequence_bias_dict": (
        "import",
        dict(
            sequence_bias={
                (SYS,): -4.0,
                (NEWLINE, IMPORT_TOKEN): -3.0,
                (IMPORT_TOKEN, SYS): -2.5,
                (IMPORT_TOKEN, OS): 6.0,
                (4, 639, OS): 1.5,
            }
        ),
    ),
    "sequence_bias_list": (
        "import",
        dict(sequence_bias=[[[SYS], -4.0], [[NEWLINE, IMPORT_TOKEN], -3.0], [[IMPORT_TOKEN, OS], 6.0]]),
    ),
    # a bias on a sequence longer than the one-token prompt is skipped until the row is long enough
    # ((1, 313) is skipped at the first step although the one-token row ends with 1: Transformers' length rule)
    "sequence_bias_longer_than_row": (
        "bos",
        dict(sequence_bias={(1, 313): 9.0, (1, 313, 289): 9.0, (IMPORT_TOKEN,): 1.0}),
    ),
    # length-dependent processors
    "min_new_tokens": ("class", dict(min_new_tokens=6)),
    # every eos id of a list is suppressed (and ends the row)
    "min_new_tokens_two_eos": ("class", dict(min_new_tokens=6, eos_token_id=[EOS, 4026])),
    "min_length": ("import", dict(min_length=len(IMPORT) + 4)),
    "forced_bos_token_id": ("bos", dict(forced_bos_token_id=IMPORT_TOKEN)),
    "forced_bos_then_begin_suppress": ("bos", dict(forced_bos_token_id=IMPORT_TOKEN, begin_suppress_tokens=[SYS, OS])),
    "forced_eos_token_id": ("import", dict(forced_eos_token_id=EOS)),
    "forced_eos_token_id_list": ("import", dict(forced_eos_token_id=[7, EOS])),
    "exponential_decay_length_penalty": ("class", dict(exponential_decay_length_penalty=(3, 1.5))),
    "suppress_tokens": ("import", dict(suppress_tokens=[SYS, NEWLINE])),
    "begin_suppress_tokens": ("import", dict(begin_suppress_tokens=[SYS, EOS])),
    # -inf from the processors before it becomes float32's lowest; suppress_tokens after it is -inf again
    "remove_invalid_values": (
        "import",
        dict(remove_invalid_values=True, no_repeat_ngram_size=2, bad_words_ids=[[SYS]], suppress_tokens=[NEWLINE]),
    ),
    "renormalize_logits": ("class", dict(renormalize_logits=True, repetition_penalty=1.2)),
    # warpers: they act only when sampling
    "min_p": ("class", dict(do_sample=True, min_p=0.1, top_k=None)),
    "min_p_with_default_top_k": ("class", dict(do_sample=True, min_p=0.02, temperature=1.5)),
    "typical_p": ("class", dict(do_sample=True, typical_p=0.9, top_k=None)),
    "epsilon_cutoff": ("class", dict(do_sample=True, epsilon_cutoff=3e-3, top_k=None)),
    "eta_cutoff": ("class", dict(do_sample=True, eta_cutoff=3e-3, top_k=None)),
    "top_k_none": ("class", dict(do_sample=True, top_k=None, temperature=1.3)),
    "top_k_zero": ("class", dict(do_sample=True, top_k=0, temperature=1.3)),  # 0: no top-k either
    "warpers_are_off_when_greedy": (
        "class",
        dict(min_p=0.5, typical_p=0.2, epsilon_cutoff=0.1, eta_cutoff=0.1, top_k=2, top_p=0.1, temperature=0.3),
    ),
    "renormalize_after_warpers": ("class", dict(do_sample=True, renormalize_logits=True, temperature=0.8, top_p=0.9)),
    # every processor at once, in Transformers' order
    "all_greedy": (
        "import",
        dict(
            sequence_bias={(SYS,): -1.0, (IMPORT_TOKEN, OS): 2.0},
            repetition_penalty=1.1,
            no_repeat_ngram_size=4,
            bad_words_ids=[[NEWLINE, OS]],
            min_new_tokens=3,
            forced_eos_token_id=EOS,
            exponential_decay_length_penalty=(4, 1.2),
            suppress_tokens=[7],
            begin_suppress_tokens=[SYS],
            renormalize_logits=True,
        ),
    ),
    "all_sampled": (
        "class",
        dict(
            do_sample=True,
            sequence_bias=[[[277, 4026], 1.5]],
            repetition_penalty=1.2,
            no_repeat_ngram_size=3,
            bad_words_ids=[[4026, 750]],
            min_new_tokens=2,
            suppress_tokens=[5],
            begin_suppress_tokens=[4],
            temperature=0.9,
            top_k=200,
            top_p=0.95,
            min_p=0.01,
            typical_p=0.97,
            epsilon_cutoff=1e-4,
            eta_cutoff=1e-4,
            renormalize_logits=True,
        ),
    ),
}

RUN_KEYS = ("max_new_tokens", "seed", "eos_token_id")  # generate() arguments the reference does not need


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def pair():
    target = ha.AutoModelForCausalLM.from_pretrained(os.path.join(MODELS, "pycode"))
    draft = ha.AutoModelForCausalLM.from_pretrained(os.path.join(MODELS, "pycode-draft"))
    return target, draft


@pytest.fixture(scope="module")
def prompts():
    tok = ha.AutoTokenizer.from_pretrained(os.path.join(MODELS, "pycode"))
    class_ids = [int(t) for t in tok([CLASS_TEXT], return_tensors="np")["input_ids"][0]]
    assert tok.decode(IMPORT, skip_special_tokens=True) == "import os\nimport sys\nimport", (
        f"test setup: the shipped tokenizer should spell IMPORT as 'import os\\nimport sys\\nimport', got "
        f"{tok.decode(IMPORT, skip_special_tokens=True)!r}"
    )
    return {"import": [IMPORT], "class": [class_ids], "bos": [[1]]}


# ------------------------------------------------------------------------------------------------- helpers


def left_pad(rows):
    """[[ids], ...] -> (input_ids (B, S) int64 padded on the left with PAD, attention_mask (B, S))."""
    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), PAD, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = r
        mask[i, width - len(r) :] = 1
    return ids, mask


def assert_scores_match(got, want64, border, raw, where):
    """got (V,) float32 from the package; want64 (V,) float64 from the reference; border (V,) bool: the tokens
    whose removal is a float32 rounding decision.  Returns True when a borderline token was decided the other
    way (the values after it legitimately differ, so they are not compared)."""
    with np.errstate(over="ignore"):
        want = want64.astype(np.float32)  # what float32 arithmetic can hold: a float64 beyond it is -inf there too
    assert not np.isnan(got).any(), f"{where}: NaN in the processed scores at {np.flatnonzero(np.isnan(got))[:10]}"
    got_removed, want_removed = np.isneginf(got), np.isneginf(want)
    differ = got_removed != want_removed
    wrong = differ & ~border
    if wrong.any():
        idx = np.flatnonzero(wrong)[:8]
        raise AssertionError(
            f"{where}: {int(wrong.sum())} tokens removed (-inf) differently from Transformers' semantics; e.g. tokens "
            f"{idx.tolist()}: package {got[idx].tolist()}, reference {want[idx].tolist()} (raw logits "
            f"{raw[idx].tolist()}); package keeps {int((~got_removed).sum())}, reference {int((~want_removed).sum())}"
        )
    if differ.any():
        return True
    keep = ~want_removed
    # The reference is exact (float64) on the very float32 raw logits the package processed; the package rounds
    # each of its few float32 operations (a division by the temperature, a bias added, a penalty, a log-sum-exp)
    # to ~6e-8 relative to the values involved.  1e-5 of each value, plus 1e-5 of the row's largest raw logit for
    # values near 0 after a subtraction (log_softmax), covers that many times over, while a wrong formula (a
    # bias missed or applied twice, a penalty on the wrong side, an exponent off by one step) is off by far more.
    scale = max(1.0, float(np.abs(raw[np.isfinite(raw)]).max()))
    np.testing.assert_allclose(
        got[keep],
        want[keep],
        rtol=1e-5,
        atol=1e-5 * scale,
        err_msg=f"{where}: processed scores differ from the reference",
    )
    return False


def run_and_check(model, rows, flags, new=NEW, seed=0, logits_processor=None, eos=EOS):
    """generate() on left-padded rows with flags, then every step of every row checked against the reference.
    -> (result, {row: number of steps checked})."""
    ids, mask = left_pad(rows)
    kw = dict(flags)
    if kw.get("do_sample"):
        kw["seed"] = seed
    if logits_processor is not None:
        kw["logits_processor"] = logits_processor
    res = model.generate(
        ids,
        attention_mask=mask,
        max_new_tokens=new,
        return_dict_in_generate=True,
        output_scores=True,
        output_logits=True,
        **kw,
    )
    B, S = ids.shape
    steps = len(res.scores)
    assert res.logits is not None and len(res.logits) == steps, (
        f"output_logits=True should give one raw-logits array per step ({steps}), got "
        f"{None if res.logits is None else len(res.logits)}"
    )
    assert res.sequences.shape == (B, S + steps)
    gc = {k: v for k, v in flags.items() if k not in RUN_KEYS}
    checked = {}
    for r in range(B):
        row = [int(t) for t in res.sequences[r, S - int(mask[r].sum()) :]]
        prompt_len = int(mask[r].sum())
        for t in range(steps):
            raw = np.asarray(res.logits[t][r])
            got = np.asarray(res.scores[t][r])
            assert raw.dtype == np.float32 and got.dtype == np.float32 and raw.shape == got.shape == (model.vocab_size,)
            border = np.zeros(raw.shape, dtype=bool)
            want = P.process(
                raw,
                row[: prompt_len + t],
                t,
                gc,
                S,
                new,
                eos,
                logits_processor=logits_processor or (),
                borderline=border,
            )
            where = f"{flags} row {r} step {t}"
            assert_scores_match(got, want, border, raw, where)
            token = row[prompt_len + t]
            if kw.get("do_sample"):
                assert np.isfinite(got[token]), f"{where}: sampled token {token} has score {got[token]} (removed)"
            else:
                assert token == int(np.argmax(got)), (
                    f"{where}: greedy chose {token} (score {got[token]}), argmax is {int(np.argmax(got))} "
                    f"(score {got.max()})"
                )
            checked[r] = t + 1
            if token in P._ids(eos):
                break
    return res, checked


def flag_acts(model, rows, flags, res, off):
    """True if the reference with `off` removed from flags differs, at some step, from the reference with them:
    the case exercises its flag (a test whose flag never acts proves nothing)."""
    ids, mask = left_pad(rows)
    S = ids.shape[1]
    gc = {k: v for k, v in flags.items() if k not in RUN_KEYS}
    without = {k: v for k, v in gc.items() if k not in off}
    for r in range(len(rows)):
        row = [int(t) for t in res.sequences[r, S - int(mask[r].sum()) :]]
        n = int(mask[r].sum())
        for t in range(len(res.scores)):
            args = (np.asarray(res.logits[t][r]), row[: n + t], t)
            eos = flags.get("eos_token_id", EOS)
            a = P.process(*args, gc, S, NEW, eos)
            b = P.process(*args, without, S, NEW, eos)
            if not np.array_equal(np.isneginf(a), np.isneginf(b)) or not np.allclose(
                a[np.isfinite(a)], b[np.isfinite(a)]
            ):
                return True
    return False


def ngrams_ending_in_new_tokens(seq, n, start):
    """[(position, n-gram)] for the n-grams of seq whose last token is at a position >= start."""
    return [(i, tuple(seq[i - n + 1 : i + 1])) for i in range(max(start, n - 1), len(seq))]


def repeated_ngrams(seq, n, start):
    """[(position, n-gram)]: the n-grams ending at a new token (position >= start) that ended earlier too."""
    return [
        (i, g)
        for i, g in ngrams_ending_in_new_tokens(seq, n, start)
        if any(tuple(seq[j - n + 1 : j + 1]) == g for j in range(n - 1, i))
    ]


# ------------------------------------------------------------------------------------ the reference itself


def test_reference_matches_transformers_worked_examples():
    """The reference on small rows whose Transformers results follow from logits_process.py by hand."""
    s = np.array([1.0, -2.0, 3.0, 0.5, 0.0])
    # repetition penalty: each distinct previous token once; negative scores multiplied, positive divided
    np.testing.assert_allclose(P.RepetitionPenaltyLogitsProcessor(s, [1, 2, 2], 2.0), [1.0, -4.0, 1.5, 0.5, 0.0])
    # n-grams: history 0 1 2 0 1 -> the 3-gram (0, 1, 2) exists, so after "0 1" token 2 is banned
    assert np.isneginf(P.NoRepeatNGramLogitsProcessor(s, [0, 1, 2, 0, 1], 3)).tolist() == [0, 0, 1, 0, 0]
    # a history shorter than n bans nothing; n = 1 bans every token seen
    assert not np.isneginf(P.NoRepeatNGramLogitsProcessor(s, [0, 1], 3)).any()
    assert np.isneginf(P.NoRepeatNGramLogitsProcessor(s, [3, 1, 3], 1)).tolist() == [0, 1, 0, 1, 0]
    # bad words: one-token always; multi-token when the row ends with the prefix; [eos] dropped
    out = P.NoBadWordsLogitsProcessor(s, [4, 0], [[1], [0, 3], [2, 4], [2]], eos=2)
    assert np.isneginf(out).tolist() == [0, 1, 0, 1, 0]
    with pytest.raises(ValueError):
        P.NoBadWordsLogitsProcessor(s, [4, 0], [[2]], eos=[2])
    # sequence bias: one-token always, longer ones when completed; sequences longer than the row are skipped
    bias = {(4,): 1.0, (0, 2): 2.0, (3, 0, 2): 5.0, (1, 0, 1): 7.0}
    np.testing.assert_allclose(P.SequenceBiasLogitsProcessor(s, [1, 0], bias), s + [0, 0, 2, 0, 1])
    np.testing.assert_allclose(P.SequenceBiasLogitsProcessor(s, [0], bias), s + [0, 0, 0, 0, 1])  # (0, 2) > row
    out = P.SequenceBiasLogitsProcessor(s, [1, 3, 0], [[[0, 2], 2.0], [[3, 0, 2], 5.0]])
    np.testing.assert_allclose(out, s + [0, 0, 7, 0, 0])
    out = P.SequenceBiasLogitsProcessor(s, [3, 0], [[[0, 2], 2.0], [[3, 0, 2], 5.0]])  # 3 tokens > the row's 2
    np.testing.assert_allclose(out, s + [0, 0, 2, 0, 0])
    # forced BOS only at cur_len 1, forced EOS only at max_length - 1
    assert P.ForcedBOSTokenLogitsProcessor(s, 1, 3).tolist() == [-np.inf, -np.inf, -np.inf, 0.0, -np.inf]
    assert P.ForcedBOSTokenLogitsProcessor(s, 2, 3).tolist() == s.tolist()
    assert P.ForcedEOSTokenLogitsProcessor(s, 9, 10, [1, 4]).tolist() == [-np.inf, 0.0, -np.inf, -np.inf, 0.0]
    # exponential decay: eos s += |s| * (factor^(cur_len - start - prompt) - 1) once cur_len > start + prompt
    np.testing.assert_allclose(P.ExponentialDecayLengthPenalty(s, 12, (2, 2.0), [1], 8), s + [0, 2.0 * 3, 0, 0, 0])
    np.testing.assert_allclose(P.ExponentialDecayLengthPenalty(s, 10, (2, 2.0), [1], 8), s)
    # top_p 0.5 on probabilities (0.1, 0.2, 0.3, 0.4): cumulative ascending 0.1, 0.3 <= 0.5 go, 0.6 stays
    logp = np.log([0.1, 0.2, 0.3, 0.4])
    assert np.isneginf(P.TopPLogitsWarper(logp, 0.5)).tolist() == [1, 1, 0, 0]
    # min_p 0.4 of the top 0.4 is 0.16: 0.1 goes, 0.2 stays
    assert np.isneginf(P.MinPLogitsWarper(logp, 0.4)).tolist() == [1, 0, 0, 0]
    # epsilon 0.25: 0.1 and 0.2 go; eta: min(eps, sqrt(eps) exp(-H)), H = 1.2799 nats -> min(0.25, 0.139)
    assert np.isneginf(P.EpsilonLogitsWarper(logp, 0.25)).tolist() == [1, 1, 0, 0]
    assert np.isneginf(P.EtaLogitsWarper(logp, 0.25)).tolist() == [1, 0, 0, 0]
    # typical 0.45: H = 1.2799; |-log p - H| = 1.023, 0.330, 0.076, 0.363 -> order 0.3, 0.2, 0.4, 0.1;
    # cumulative 0.3, 0.5, ...: one below 0.45, so the cut-off is the second (0.2): 0.3 and 0.2 stay
    assert np.isneginf(P.TypicalLogitsWarper(logp, 0.45)).tolist() == [1, 0, 0, 1]
    # top_k keeps ties with the k-th
    assert np.isneginf(P.TopKLogitsWarper([1.0, 2.0, 1.0, 0.0], 2)).tolist() == [0, 0, 0, 1]
    # invalid values: float32's extremes
    assert P.InfNanRemoveLogitsProcessor([np.nan, np.inf, -np.inf]).tolist() == [0.0, P.FLOAT32_MAX, -P.FLOAT32_MAX]


def test_reference_order_is_transformers_order():
    """The few places where the order shows: forced EOS replaces what the processors before it did; suppress
    comes after remove_invalid_values; warpers only when sampling; renormalize last."""
    raw = np.array([0.0, 1.0, 2.0, 3.0])
    gc = dict(sequence_bias={(1,): 5.0}, forced_eos_token_id=2)
    assert P.process(raw, [0], 3, gc, 1, 4, eos=2).tolist() == [-np.inf, -np.inf, 0.0, -np.inf]
    gc = dict(bad_words_ids=[[0]], remove_invalid_values=True, suppress_tokens=[1])
    out = P.process(raw, [3], 0, gc, 1, 4, eos=None)
    assert out[0] == -P.FLOAT32_MAX and out[1] == -np.inf
    gc = dict(top_k=1, temperature=0.5)
    np.testing.assert_array_equal(P.process(raw, [3], 0, gc, 1, 4, eos=None), raw)
    out = P.process(raw, [3], 0, dict(gc, do_sample=True, renormalize_logits=True), 1, 4, eos=None)
    assert out.tolist() == [-np.inf, -np.inf, -np.inf, 0.0]
    # begin suppression moves one step later after a forced BOS on a one-token prompt
    gc = dict(forced_bos_token_id=0, begin_suppress_tokens=[3])
    assert P.process(raw, [1], 0, gc, 1, 4, eos=None).tolist() == [0.0, -np.inf, -np.inf, -np.inf]
    assert np.isneginf(P.process(raw, [1, 0], 1, gc, 1, 4, eos=None)).tolist() == [0, 0, 0, 1]


# ------------------------------------------------------------------------- every flag against the reference


@pytest.mark.parametrize("case", CASES)
def test_processed_scores_equal_transformers_reference(pair, prompts, case):
    prompt, flags = CASES[case]
    _, draft = pair
    if case == "warpers_are_off_when_greedy":
        with pytest.warns(UserWarning, match="only used when sampling"):  # as Transformers warns
            res, checked = run_and_check(draft, prompts[prompt], flags)
    else:
        res, checked = run_and_check(draft, prompts[prompt], flags, eos=flags.get("eos_token_id", EOS))
    assert sum(checked.values()) >= 3, f"{case}: expected several steps to check, got {checked}"
    if case != "warpers_are_off_when_greedy":
        meaningful = [k for k in flags if k not in ("do_sample", "top_k")] or ["top_k"]
        assert flag_acts(draft, prompts[prompt], flags, res, meaningful), (
            f"test setup: {case}'s flags {meaningful} never change the scores of this generation; pick a case "
            "where they act"
        )


@pytest.mark.parametrize("case", ["all_greedy", "all_sampled", "no_repeat_ngram_size_3", "min_p"])
def test_processed_scores_equal_transformers_reference_on_the_target(pair, prompts, case):
    prompt, flags = CASES[case]
    target, _ = pair
    run_and_check(target, prompts[prompt], flags, new=10)


@pytest.mark.parametrize(
    "flags",
    [
        dict(
            no_repeat_ngram_size=2,
            repetition_penalty=1.2,
            sequence_bias={(4, 639): -2.0},
            min_length=21,
            exponential_decay_length_penalty=(4, 1.3),
        ),
        dict(
            do_sample=True,
            no_repeat_ngram_size=1,
            bad_words_ids=[[4, 639]],
            top_k=None,
            min_p=0.05,
            begin_suppress_tokens=[SYS, 4026],
            forced_eos_token_id=EOS,
        ),
    ],
    ids=["greedy", "sampled"],
)
def test_left_padded_batch_rows_see_their_own_tokens(pair, prompts, flags):
    """Row 0 is padded on the left with PAD (3); its history-dependent processors see its prompt without the
    padding (the repetition penalty and no_repeat_ngram_size=1 would otherwise act on PAD), as the reference.
    The length-dependent ones count from the padded width (18), as Transformers' input_ids.shape[-1] does."""
    _, draft = pair
    rows = [prompts["import"][0][:5], prompts["class"][0]]
    assert PAD not in rows[0] and PAD not in rows[1]
    res, checked = run_and_check(draft, rows, flags)
    assert set(checked) == {0, 1}
    if not flags.get("do_sample"):
        assert res.scores[0][0, PAD] == res.logits[0][0, PAD], (
            f"row 0's padding counted as its tokens: PAD's score {res.scores[0][0, PAD]} is not its logit "
            f"{res.logits[0][0, PAD]} under repetition_penalty"
        )


# -------------------------------------------------------------------------------- properties, directly


@pytest.mark.parametrize("sample", [False, True], ids=["greedy", "sampled"])
def test_no_repeat_ngram_size_3_leaves_no_repeated_trigram(pair, prompts, sample):
    _, draft = pair
    prompt = np.array(prompts["import"])
    S = prompt.shape[1]
    kw = dict(max_new_tokens=64, do_sample=sample, seed=3, top_k=None)
    plain = [int(t) for t in draft.generate(prompt, **kw)[0]]
    assert repeated_ngrams(plain, 3, S), f"test setup: without the flag the output should repeat a 3-gram: {plain}"
    seq = [int(t) for t in draft.generate(prompt, no_repeat_ngram_size=3, **kw)[0]]
    assert len(seq) == S + 64
    repeats = repeated_ngrams(seq, 3, S)
    assert not repeats, f"no_repeat_ngram_size=3: (position, 3-gram) {repeats} repeat earlier 3-grams of {seq}"


@pytest.mark.parametrize("sample", [False, True], ids=["greedy", "sampled"])
def test_bad_words_are_never_generated(pair, prompts, sample):
    _, draft = pair
    prompt = np.array(prompts["import"])
    S = prompt.shape[1]
    kw = dict(max_new_tokens=20, do_sample=sample, seed=5, top_k=None, **(dict(temperature=0.6) if sample else {}))
    plain = [int(t) for t in draft.generate(prompt, **kw)[0]]
    assert FROM in plain[S:] and (NEWLINE, FROM) in zip(plain[S:], plain[S + 1 :]), (
        f"test setup: without bad_words_ids the output should hold {FROM} and ({NEWLINE}, {FROM}): {plain}"
    )
    single = [int(t) for t in draft.generate(prompt, bad_words_ids=[[FROM], [IMPORT_TOKEN]], **kw)[0]]
    assert FROM not in single[S:] and IMPORT_TOKEN not in single[S:], (
        f"bad_words_ids=[[{FROM}], [{IMPORT_TOKEN}]] appear in the new tokens {single[S:]}"
    )
    # multi-token: the sequence is never completed by a new token (its prefix may come from the prompt)
    bad = (NEWLINE, FROM)
    multi = [int(t) for t in draft.generate(prompt, bad_words_ids=[list(bad)], **kw)[0]]
    found = [i for i, g in ngrams_ending_in_new_tokens(multi, 2, S) if g == bad]
    assert not found, f"bad_words_ids=[{list(bad)}] completed at positions {found} of {multi}"


def test_bad_words_single_eos_is_dropped_as_transformers_does(pair, prompts):
    """NoBadWordsLogitsProcessor drops a one-token bad word equal to an eos id: eos keeps its score."""
    _, draft = pair
    res = draft.generate(
        np.array(prompts["class"]),
        max_new_tokens=4,
        bad_words_ids=[[EOS], [SYS]],
        return_dict_in_generate=True,
        output_scores=True,
        output_logits=True,
    )
    for t in range(len(res.scores)):
        assert res.scores[t][0, EOS] == res.logits[t][0, EOS], (
            f"step {t}: eos {EOS} in bad_words_ids should be dropped (Transformers), got score {res.scores[t][0, EOS]}"
            f" from logit {res.logits[t][0, EOS]}"
        )
        assert np.isneginf(res.scores[t][0, SYS])


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_min_p_removes_exactly_the_tokens_below_min_p_times_the_top_probability(pair, prompts, temperature):
    _, draft = pair
    min_p = 0.1
    res = draft.generate(
        np.array(prompts["class"]),
        max_new_tokens=NEW,
        do_sample=True,
        seed=11,
        top_k=None,
        min_p=min_p,
        temperature=temperature,
        return_dict_in_generate=True,
        output_scores=True,
        output_logits=True,
    )
    kept_some = removed_some = False
    for t in range(len(res.scores)):
        raw, got = np.asarray(res.logits[t][0]), np.asarray(res.scores[t][0])
        p = P.softmax(raw.astype(np.float64) / temperature)
        keep = p >= min_p * p.max()
        border = np.abs(p / (min_p * p.max()) - 1.0) < P.PARAM_TOLERANCE
        wrong = (np.isfinite(got) != keep) & ~border
        assert not wrong.any(), (
            f"step {t}: min_p={min_p} should keep exactly the tokens with p >= {min_p} * {p.max():.4g}; tokens "
            f"{np.flatnonzero(wrong)[:8].tolist()} have p {p[wrong][:8].tolist()} and scores {got[wrong][:8].tolist()}"
        )
        kept = np.isfinite(got)
        with np.errstate(over="ignore"):
            want = (raw.astype(np.float64) / temperature).astype(np.float32) if temperature != 1.0 else raw
        if temperature == 1.0:
            # nothing but a mask: the kept scores are the raw logits, bit for bit
            np.testing.assert_array_equal(got[kept], raw[kept], err_msg=f"step {t}: kept scores are not the logits")
        else:
            np.testing.assert_allclose(got[kept], want[kept], rtol=1e-6, err_msg=f"step {t}: kept scores != logits / T")
        kept_some |= kept.sum() > 1
        removed_some |= (~kept).any()
    assert kept_some and removed_some, "test setup: min_p should keep several tokens somewhere and remove some"


def test_forced_eos_token_is_the_last_token(pair, prompts):
    _, draft = pair
    prompt = np.array(prompts["import"])
    S, new = prompt.shape[1], 7
    res = draft.generate(
        prompt, max_new_tokens=new, forced_eos_token_id=EOS, return_dict_in_generate=True, output_scores=True
    )
    seq = res.sequences[0]
    assert len(seq) == S + new and seq[-1] == EOS and EOS not in seq[S:-1].tolist(), (
        f"forced_eos_token_id={EOS}: expected {new} new tokens ending with {EOS}, got {seq[S:].tolist()}"
    )
    last = np.asarray(res.scores[-1][0])
    assert np.flatnonzero(np.isfinite(last)).tolist() == [EOS] and last[EOS] == 0.0
    for t in range(new - 1):
        assert np.isfinite(res.scores[t][0]).sum() > 1, f"step {t}: forced_eos must act at the last step only"


def test_begin_suppress_tokens_act_at_the_first_step_only(pair, prompts):
    _, draft = pair
    prompt = np.array(prompts["import"])
    S = prompt.shape[1]
    first = int(draft.generate(prompt, max_new_tokens=1)[0, S])
    res = draft.generate(
        prompt,
        max_new_tokens=8,
        begin_suppress_tokens=[first, NEWLINE],
        return_dict_in_generate=True,
        output_scores=True,
        output_logits=True,
    )
    assert int(res.sequences[0, S]) != first, f"begin_suppress_tokens=[{first}] still chose {first} first"
    assert np.isneginf(res.scores[0][0, [first, NEWLINE]]).all()
    for t in range(1, len(res.scores)):
        for token in (first, NEWLINE):
            assert res.scores[t][0, token] == res.logits[t][0, token], (
                f"step {t}: begin_suppress_tokens must act at the first step only; token {token} has score "
                f"{res.scores[t][0, token]}, logit {res.logits[t][0, token]}"
            )


def test_forced_bos_token_with_a_one_token_prompt(pair):
    _, draft = pair
    res = draft.generate(
        np.array([[1]]),
        max_new_tokens=3,
        forced_bos_token_id=IMPORT_TOKEN,
        return_dict_in_generate=True,
        output_scores=True,
    )
    assert int(res.sequences[0, 1]) == IMPORT_TOKEN
    assert np.flatnonzero(np.isfinite(res.scores[0][0])).tolist() == [IMPORT_TOKEN]
    assert np.isfinite(res.scores[1][0]).all(), "forced_bos_token_id acts at the first step only"
    # Transformers forces it only where cur_len == 1: a longer prompt is left alone
    longer = draft.generate(
        np.array([[1, 639]]),
        max_new_tokens=2,
        forced_bos_token_id=SYS,
        return_dict_in_generate=True,
        output_scores=True,
    )
    assert np.isfinite(longer.scores[0][0]).all()


# ----------------------------------------------------------------------------- the caller's logits_processor


def ban_newline(input_ids, scores):
    """A plain function processor: bans NEWLINE."""
    scores = scores.copy()
    scores[:, NEWLINE] = -np.inf
    return scores


class BanAndRecord:
    """A class processor: bans one token, adds 2.5 to another, and records what it was given."""

    def __init__(self, banned, boosted):
        self.banned, self.boosted, self.calls = banned, boosted, []

    def __call__(self, input_ids, scores):
        self.calls.append((np.array(input_ids, copy=True), scores.dtype, scores.shape))
        scores = scores.copy()
        scores[:, self.banned] = -np.inf
        scores[:, self.boosted] += 2.5
        return scores


@pytest.mark.parametrize("sample", [False, True], ids=["greedy", "sampled"])
def test_user_function_processor_bans_its_token_and_shows_in_the_scores(pair, prompts, sample):
    _, draft = pair
    prompt = np.array(prompts["import"])
    S = prompt.shape[1]
    flags = dict(do_sample=sample, temperature=0.8, top_k=None) if sample else {}
    plain = draft.generate(prompt, max_new_tokens=NEW, seed=0, **flags)
    assert NEWLINE in plain[0, S:].tolist(), "test setup: the banned token should appear without the processor"
    res, _ = run_and_check(draft, prompts["import"], flags, logits_processor=[ban_newline])
    assert NEWLINE not in res.sequences[0, S:].tolist()
    assert all(np.isneginf(s[0, NEWLINE]) for s in res.scores), "the processor's ban should show in the scores"


def test_user_class_processor_receives_each_rows_own_tokens(pair, prompts):
    """Called once per row and step with input_ids (1, n) int64: the row's prompt without padding, then its
    tokens so far; scores float32 (1, vocab); its ban and boost show in the scores (checked by the reference)."""
    _, draft = pair
    rows = [prompts["import"][0][2:], prompts["class"][0]]
    ids, mask = left_pad(rows)
    S = ids.shape[1]
    proc = BanAndRecord(banned=SYS, boosted=4026)
    res, checked = run_and_check(draft, rows, {}, logits_processor=[proc])
    calls = proc.calls[: sum(checked.values())]  # the reference's own calls came after generate()'s
    assert len(calls) == sum(checked.values()), f"expected one call per row and step ({checked}), got {len(calls)}"
    expected = []
    for r, steps in checked.items():
        row = [int(t) for t in res.sequences[r, S - int(mask[r].sum()) :]]
        expected += [tuple(row[: int(mask[r].sum()) + t]) for t in range(steps)]
    for input_ids, dtype, shape in calls:
        assert input_ids.ndim == 2 and input_ids.shape[0] == 1 and input_ids.dtype == np.int64, (
            f"input_ids should be int64 of shape (1, n), got {input_ids.dtype} {input_ids.shape}"
        )
        assert dtype == np.float32 and shape == (1, draft.vocab_size)
    got = sorted(tuple(int(t) for t in c[0][0]) for c in calls)
    assert got == sorted(expected), "the processor should see each row's own tokens (no padding) at each step"
    for r in checked:
        assert SYS not in res.sequences[r, S:].tolist()
