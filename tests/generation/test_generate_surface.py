"""generate()'s surface beyond its own arguments, as Transformers': `inputs=` is the prompt, and
the UserWarnings Transformers gives, each where it gives it and nowhere else:

- max_length passed to generate() while max_new_tokens is set (passed too, or in the generation config):
  max_new_tokens wins (Transformers' _prepare_generated_length; min_length and min_new_tokens alike);
- no attention_mask while pad_token_id (eos_token_id's first id where it is unset) is one of the eos ids: the
  mask cannot be inferred from the padding (Transformers' _prepare_special_tokens), once per process (its
  logger.warning_once; each test here starts with none given yet).

Each warning is reported at the line that called generate().
"""

import warnings

import numpy as np
import pytest
from checkpoints import write_random_checkpoint

import habana_assist as ha
from habana_assist.generation import utils as generation_utils

VOCAB = 64
EOS = 2
PROMPT = np.array([[3, 4, 5, 6]], dtype=np.int64)
MASK = np.ones_like(PROMPT)
S = PROMPT.shape[1]
BOTH_MAX = (
    "Both `max_new_tokens` (=3) and `max_length` (=12) seem to have been set. `max_new_tokens` will take "
    "precedence; pass only one of them"
)
NO_MASK = "The attention mask is not set and cannot be inferred from input because pad token is same as eos token"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("surface_target")
    write_random_checkpoint(path, vocab_size=VOCAB, seed=21, bos_token_id=1, eos_token_id=EOS)
    return ha.AutoModelForCausalLM.from_pretrained(str(path))


@pytest.fixture(scope="module")
def draft(tmp_path_factory):
    path = tmp_path_factory.mktemp("surface_draft")
    write_random_checkpoint(path, vocab_size=VOCAB, num_layers=1, seed=22, bos_token_id=1, eos_token_id=EOS)
    return ha.AutoModelForCausalLM.from_pretrained(str(path))


@pytest.fixture(autouse=True)
def none_warned_yet(monkeypatch):
    """The once-per-process warnings as in a fresh process, so that a warning must come (or not) from this test."""
    monkeypatch.setattr(generation_utils, "_WARNED_ONCE", set())


def caught(fn):
    """-> (fn()'s result, the UserWarnings it gave: [(message, file)], every one, repeated or not)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = fn()
    return result, [(str(w.message), w.filename) for w in seen if issubclass(w.category, UserWarning)]


def quiet(fn):
    """fn()'s result; any warning it gives fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()


# ---- inputs= --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["numpy", "list", "torch"])
@pytest.mark.parametrize("mode", ["greedy", "sampled", "assisted"])
def test_inputs_keyword_is_the_prompt_as_the_positional_argument(model, draft, kind, mode):
    ids = PROMPT.tolist() if kind == "list" else PROMPT
    if kind == "torch":
        ids = pytest.importorskip("torch").from_numpy(PROMPT)
    kw = dict(
        attention_mask=MASK,
        max_new_tokens=6,
        **{"greedy": {}, "sampled": dict(do_sample=True, seed=3), "assisted": dict(assistant_model=draft)}[mode],
    )
    positional = model.generate(ids, **kw)
    for name, got in (
        ("inputs=", model.generate(inputs=ids, **kw)),
        ("input_ids=", model.generate(input_ids=ids, **kw)),
        ("input_ids= with inputs=None", model.generate(input_ids=ids, inputs=None, **kw)),
    ):
        assert type(got) is type(positional), f"{name}: expected {type(positional).__name__}, got {type(got).__name__}"
        assert np.array_equal(np.asarray(got), np.asarray(positional)), (
            f"{name} {mode}: expected the positional call's {np.asarray(positional).tolist()}, "
            f"got {np.asarray(got).tolist()}"
        )


# ---- max_length and max_new_tokens (min_length and min_new_tokens) ----------------------------------------------


def test_max_length_passed_with_max_new_tokens_warns_and_max_new_tokens_wins(model):
    out, got = caught(
        lambda: model.generate(PROMPT, attention_mask=MASK, max_new_tokens=3, max_length=12, eos_token_id=None)
    )
    assert [m for m, _ in got] == [BOTH_MAX], f"expected one warning, got {got}"
    assert got[0][1] == __file__, f"expected the warning reported at this test's call, got {got[0][1]}"
    assert out.shape == (1, S + 3), f"max_new_tokens=3 must win over max_length=12: got {out.shape[1] - S} new tokens"


def test_max_length_passed_while_the_model_config_sets_max_new_tokens_warns(model, monkeypatch):
    """As in Transformers, the model's generation_config.max_new_tokens counts as set: max_length passed alone to
    generate() then warns and loses (the shipped pair's generation_config.json sets max_new_tokens=128)."""
    config = ha.GenerationConfig(**{**model.generation_config.to_dict(), "max_new_tokens": 3})
    monkeypatch.setattr(model, "generation_config", config)
    out, got = caught(lambda: model.generate(PROMPT, attention_mask=MASK, max_length=12, eos_token_id=None))
    assert [m for m, _ in got] == [BOTH_MAX], f"expected one warning, got {got}"
    assert out.shape == (1, S + 3), f"the config's max_new_tokens=3 must win: got {out.shape[1] - S} new tokens"


@pytest.mark.parametrize(
    "kwargs,new",
    [
        (dict(max_new_tokens=3), 3),
        (dict(max_length=12), 12 - S),
        (dict(max_new_tokens=3, max_length=None), 3),
        (dict(generation_config=ha.GenerationConfig(max_new_tokens=3, max_length=12)), 3),
    ],
    ids=["max_new_tokens", "max_length", "max_length_None", "both_in_generation_config"],
)
def test_max_length_and_max_new_tokens_warn_only_when_both_are_passed(model, kwargs, new):
    """Transformers warns only where max_length is an argument of this generate() call (has_default_max_length is
    False); both in a generation_config passed whole is quiet, and max_new_tokens still wins."""
    out = quiet(lambda: model.generate(PROMPT, attention_mask=MASK, eos_token_id=None, **kwargs))
    assert out.shape == (1, S + new), f"{kwargs}: expected {new} new tokens, got {out.shape[1] - S}"


def test_min_length_passed_with_min_new_tokens_warns_and_min_new_tokens_wins(model):
    """Transformers sets min_length to min_new_tokens + the prompt's width when min_new_tokens is set: eos is
    allowed after min_new_tokens new tokens, however large min_length is."""
    free = model.generate(PROMPT, attention_mask=MASK, max_new_tokens=8, eos_token_id=None)[0, S:].tolist()
    j = next((j for j in range(1, 5) if free[j] not in free[:j]), None)
    assert j is not None, f"the test needs a new token among the first 5 greedy ones of {free}; change the seed"
    eos = free[j]  # greedy ends at new token j where eos is allowed there
    kw = dict(attention_mask=MASK, max_new_tokens=8, eos_token_id=eos, pad_token_id=0)
    alone = quiet(lambda: model.generate(PROMPT, min_new_tokens=1, **kw))
    assert alone[0, S:].tolist() == free[: j + 1], f"expected greedy to end at eos {eos}: {alone[0, S:].tolist()}"
    both, got = caught(lambda: model.generate(PROMPT, min_new_tokens=1, min_length=S + 7, **kw))
    want = (
        f"Both `min_new_tokens` (=1) and `min_length` (={S + 7}) seem to have been set. `min_new_tokens` will "
        "take precedence; pass only one of them"
    )
    assert [m for m, _ in got] == [want], f"expected one warning, got {got}"
    assert np.array_equal(both, alone), f"min_new_tokens=1 must win over min_length: got {both.tolist()}"
    longer = quiet(lambda: model.generate(PROMPT, min_length=S + 7, **kw))
    assert longer[0, S + j] != eos, f"min_length alone must hold eos back at new token {j}: {longer.tolist()}"


# ---- pad_token_id among the eos ids and no attention_mask ------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [dict(pad_token_id=EOS), dict(), dict(eos_token_id=[7, EOS], pad_token_id=EOS), dict(assistant_model="draft")],
    ids=["pad_is_eos", "pad_unset", "pad_among_eos", "assisted_pad_unset"],
)
def test_no_attention_mask_with_pad_among_eos_warns_that_it_cannot_be_inferred(model, draft, kwargs):
    kwargs = {k: draft if v == "draft" else v for k, v in kwargs.items()}
    _, got = caught(lambda: model.generate(PROMPT, max_new_tokens=2, **kwargs))
    assert len(got) == 1 and got[0][0].startswith(NO_MASK) and "attention_mask" in got[0][0], (
        f"{kwargs}: expected one warning that the mask cannot be inferred, got {got}"
    )
    assert got[0][1] == __file__, f"expected the warning reported at this test's call, got {got[0][1]}"


def test_the_attention_mask_warning_comes_once_per_process(model):
    _, got = caught(lambda: [model.generate(PROMPT, max_new_tokens=2) for _ in range(3)])
    _, later = caught(lambda: model.generate(PROMPT, max_new_tokens=3))
    _, other = caught(lambda: model.generate(PROMPT, max_new_tokens=2, pad_token_id=EOS, eos_token_id=[EOS, 9]))
    assert len(got) == 1 and later == [] and other == [], (
        f"expected one warning for five calls (another pad and eos included), got {got}, then {later} and {other}"
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(attention_mask=MASK, pad_token_id=EOS),
        dict(attention_mask=MASK),
        dict(pad_token_id=0),
        dict(pad_token_id=3),
        dict(eos_token_id=None),
        dict(eos_token_id=None, pad_token_id=EOS),
    ],
    ids=["mask_pad_is_eos", "mask_pad_unset", "pad_not_eos", "pad_in_prompt_not_eos", "no_eos", "no_eos_pad_set"],
)
def test_the_attention_mask_warning_is_quiet_where_transformers_is(model, kwargs):
    """A mask given, or a pad that is no eos id (a pad in the prompt is then read as padding), or no eos at all."""
    quiet(lambda: model.generate(PROMPT, max_new_tokens=2, **kwargs))


def test_custom_generate_is_refused_by_name_and_none_changes_nothing(model):
    """Transformers' custom_generate runs generation code from the Hub; none is run here, so a value is refused by
    name, and None gives the plain output."""
    ids = np.array([[1, 5, 9]])
    mask = np.ones_like(ids)
    with pytest.raises(ha.InvalidInputError, match="`custom_generate`.*no generation code"):
        model.generate(ids, attention_mask=mask, custom_generate="someone/dola", max_new_tokens=2)
    assert np.array_equal(
        model.generate(ids, attention_mask=mask, custom_generate=None, max_new_tokens=3),
        model.generate(ids, attention_mask=mask, max_new_tokens=3),
    )
