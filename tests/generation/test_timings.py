"""result.timings: where a call's wall-clock time went (the core's ha_seconds), by part: every part present, finite
and not negative, the parts adding up to the whole call, and each part holding what ran in it (a draft's steps only
where a draft model drafted, the target's steps only where there were any). Events and orderings only: no duration
is compared with a bound."""

import math

import numpy as np
import pytest
from test_assisted_trees import PROMPT
from test_tree_record import perturbed_pair

import habana_assist as ha
from habana_assist import _core
from habana_assist.generation.outputs import timings_from

PARTS = ("prefill", "target", "draft", "other", "total")


@pytest.fixture(autouse=True)
def one_thread_unless_told(one_core_thread):
    yield


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return perturbed_pair(tmp_path_factory.mktemp("timings"))


def checked(timings):
    """timings, after checking what holds of every call's: the parts by name, finite, >= 0, adding up to total."""
    assert timings is not None and tuple(timings) == PARTS, f"expected the parts {PARTS}, got {timings}"
    assert all(math.isfinite(v) and v >= 0.0 for v in timings.values()), timings
    parts = timings["prefill"] + timings["target"] + timings["draft"] + timings["other"]
    assert parts == pytest.approx(timings["total"], rel=1e-9, abs=1e-12), timings
    assert timings["prefill"] + timings["target"] + timings["draft"] <= timings["total"] * (1 + 1e-12), timings
    return timings


@pytest.mark.parametrize(
    "how",
    [
        pytest.param({}, id="plain"),
        pytest.param({"do_sample": True, "seed": 3}, id="plain-sampled"),
        pytest.param({"prompt_lookup_num_tokens": 3}, id="prompt-lookup"),
        pytest.param({"draft": True}, id="draft"),
        pytest.param({"draft": True, "num_assistant_tokens_schedule": "cost"}, id="draft-cost"),
        pytest.param({"draft": True, "assistant_tree_width": 3}, id="draft-siblings"),
        pytest.param({"draft": True, "assistant_tree_width": 2, "assistant_tree_shape": "dynamic"}, id="draft-dynamic"),
    ],
)
def test_every_call_says_where_its_time_went(pair, how):
    target, draft = pair
    kw = dict(how)
    if kw.pop("draft", False):
        kw["assistant_model"] = draft
    res = target.generate(PROMPT, max_new_tokens=12, eos_token_id=[], return_dict_in_generate=True, **kw)
    t = checked(res.timings)
    assert t["prefill"] > 0.0 and t["target"] > 0.0, f"a prefill and later target forwards ran: {t}"
    # a draft's first append takes in the prompt (prefill); any later one is a step (the cost schedule may draft
    # nothing on so small a pair: then no step ran)
    steps = res.num_draft_passes - 1 if "assistant_model" in kw else 0
    assert (t["draft"] > 0.0) == (steps > 0), f"{steps} draft steps ran, and draft time is {t['draft']}"
    assert "timings" not in res.keys(), "timings is an attribute, not a field (Transformers' keys stay)"


def test_one_token_is_all_prefill(pair):
    """max_new_tokens=1: the prompt's forward gives the one token; nothing else runs on the target."""
    target, _ = pair
    t = checked(target.generate(PROMPT, max_new_tokens=1, return_dict_in_generate=True).timings)
    assert t["prefill"] > 0.0 and t["target"] == 0.0 and t["draft"] == 0.0, t


def test_batches_time_the_call_once(pair):
    target, draft = pair
    prompts = np.array([[0, 0, 5, 9, 3, 11], [4, 8, 15, 16, 23, 42]], dtype=np.int64)
    mask = (np.arange(6)[None, :] >= np.array([[2], [0]])).astype(np.int64)
    res = target.generate(
        prompts, attention_mask=mask, assistant_model=draft, max_new_tokens=8, return_dict_in_generate=True
    )
    t = checked(res.timings)
    assert t["draft"] > 0.0 and t["target"] > 0.0, t


def test_without_the_dict_output_nothing_is_timed(pair):
    target, _ = pair
    out = target.generate(PROMPT, max_new_tokens=3)
    assert isinstance(out, np.ndarray) and out.shape == (1, PROMPT.shape[1] + 3), type(out)


def test_timings_from_derives_the_rest():
    t = timings_from(np.array([1.0, 2.0, 0.5, 4.0]))
    assert t == {"prefill": 1.0, "target": 2.0, "draft": 0.5, "other": 0.5, "total": 4.0}, t


def test_the_binding_refuses_a_seconds_buffer_of_another_shape(pair, monkeypatch):
    target, _ = pair
    seen = []
    real = _core.generate

    def spy(ctx, options):
        seen.append(dict(options))
        return real(ctx, options)

    monkeypatch.setattr(_core, "generate", spy)
    target.generate(PROMPT, max_new_tokens=2, return_dict_in_generate=True)
    monkeypatch.setattr(_core, "generate", real)
    (options,) = seen
    assert options["seconds"].shape == (4,), options["seconds"]
    for bad in (np.zeros(3), np.zeros((2, 2)), np.zeros(4, np.float32)):
        ctx = _core.Context(target._core, 1, 32)
        with pytest.raises(ha.InvalidInputError) as err:
            real(ctx, dict(options, seconds=bad, out=np.zeros((1, 2), np.int32), sources=None))
        assert "seconds" in str(err.value), f"expected the message to name seconds, got: {err.value}"
