"""The binding (habana_assist._core) under random arguments: a short deterministic run of
tests/fuzz/fuzz_binding.py (fixed seed and case count: the same inputs every time), in a subprocess, so that a
crash of the interpreter is a failure naming the case and how to replay it, not the end of pytest. Every call
must succeed or raise a HabanaAssistError or one of the built-ins argument parsing raises (see the module's
docstring); the long run is scripts/fuzz.sh (the same module with --seconds). Below it, the generation options'
contract checked directly: they cross the binding by name, an unknown or missing one raising naming it."""

import gc
import os
import re
import subprocess
import sys
import weakref

import numpy as np
import pytest
from package_under_test import PYTHON, child_env

import habana_assist as ha
from habana_assist import _core
from habana_assist.generation.configuration_utils import ASSISTED_SAMPLING, SCHEDULES
from habana_assist.generation.options import processing_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ = os.path.join(ROOT, "tests", "fuzz", "fuzz_binding.py")
SEED = 0
CASES = 3000  # about 5 s (the time is not asserted)


def _run(*args):
    env = child_env()  # the package under test (fuzz_binding.py takes the checkout's only where none is on the path)
    env.pop("HA_KERNELS", None)
    return subprocess.run(
        [PYTHON, "-W", "ignore", FUZZ, *args], capture_output=True, text=True, timeout=600, env=env, cwd=ROOT
    )


def test_binding_random_arguments_raise_only_allowed_exceptions():
    res = _run("--iterations", str(CASES), "--seed", str(SEED))
    out = res.stdout + res.stderr
    assert res.returncode == 0, (
        f"expected no finding from {CASES} cases of seed {SEED}, got exit {res.returncode}:\n{out[-8000:]}"
    )
    assert f"{CASES} cases" in out, f"expected {CASES} cases run, got:\n{out[-3000:]}"
    summary = next(line for line in out.splitlines() if "outcomes:" in line)
    for outcome in ("'ok'", "'InvalidInputError'", "'TypeError'"):
        assert outcome in summary, f"expected the cases to reach {outcome} outcomes too, got: {summary}"
    # the arguments must track the binding's signatures: a harness whose generations all fail to parse fuzzes
    # nothing past argument parsing (as happened once their lists fell behind the binding's)
    ran = re.search(r"generations that ran: generate (\d+), generate_assisted (\d+)", out)
    assert ran, f"expected the count of generations that ran, got:\n{out[-3000:]}"
    assert int(ran.group(1)) >= 20 and int(ran.group(2)) >= 20, (
        f"expected at least 20 generate and 20 generate_assisted calls to run in {CASES} cases, got {ran.group(0)}"
    )


def test_binding_fuzz_reports_a_crash_and_a_bad_exception_naming_the_case():
    res = _run("--iterations", "20", "--seed", str(SEED), "--selftest", "7:abort")
    out = res.stdout + res.stderr
    assert res.returncode == 1, f"expected exit 1 for a worker that aborted, got {res.returncode}:\n{out[-3000:]}"
    assert "died" in out and "case 7 " in out and "--case 7" in out, (
        f"expected the crash reported as case 7, got:\n{out[-3000:]}"
    )
    res = _run("--iterations", "20", "--seed", str(SEED), "--selftest", "5:raise")
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "case 5" in out and "SystemError" in out, (
        f"expected a SystemError reported as a finding in case 5, got exit {res.returncode}:\n{out[-3000:]}"
    )


# ---- generation options cross the binding by name (csrc/bindings/generate.c) --------------------------------
# A dict whose every key is checked: one unknown or missing raises naming it, so adding an option can never shift
# the others, as a positional tuple's fields would.


@pytest.fixture(scope="module")
def core_model(tmp_path_factory):
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from checkpoints import write_random_checkpoint

    d = tmp_path_factory.mktemp("options")
    write_random_checkpoint(
        str(d), vocab_size=32, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=24, seed=4
    )
    return ha.AutoModelForCausalLM.from_pretrained(str(d))


def greedy_options(max_new=3):
    """Every option _core.generate takes, by name: a greedy call of one row with every processor off."""
    return dict(
        processing_args(ha.GenerationConfig(), 4, max_new, [], None, None, None),
        prompt=np.array([[1, 2, 3, 4]], np.int32),
        start=np.zeros(1, np.int64),
        max_new_tokens=max_new,
        min_new_tokens=0,
        eos_token_id=np.zeros(0, np.int32),
        pad_token_id=0,
        do_sample=False,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        repetition_penalty=1.0,
        seed=0,
        max_time=0.0,
        out=np.zeros((1, max_new), np.int32),
        scores=None,
        sources=None,
        on_tokens=None,
        seconds=None,
    )


def assisted_options(max_new=3):
    """Every option _core.generate_assisted takes, by name (the constant schedule, K = 2)."""
    return dict(
        greedy_options(max_new),
        num_assistant_tokens=2,
        schedule="constant",
        confidence_threshold=0.0,
        acceptance="rejection",
        prompt_lookup_num_tokens=1,
        max_matching_ngram_size=1,
        draft_costs=None,
        target_costs=None,
        draft_first_costs=None,
        proposed_at=np.zeros(max_new, np.int64),
        accepted_at=np.zeros(max_new, np.int64),
        overlap=False,
        cost_state=None,
        tree_width=1,
        tree_shape="siblings",
        tree_counts=None,
        tree_rounds=None,
        tree_nodes=None,
    )


def sampler_options():
    """Every option _core.Sampler takes, by name."""
    opts = greedy_options()
    return {
        k: opts[k]
        for k in opts
        if k
        not in (
            "prompt",
            "start",
            "max_new_tokens",
            "pad_token_id",
            "max_time",
            "out",
            "scores",
            "sources",
            "on_tokens",
            "seconds",
        )
    }


def calls(model):
    """(name, function of an options dict) for each binding entry that takes generation options."""
    target, draft = _core.Context(model._core, 1, 16), _core.Context(model._core, 1, 16)
    return [
        ("generate", lambda o: _core.generate(target, o), greedy_options),
        ("generate_assisted", lambda o: _core.generate_assisted(target, draft, o), assisted_options),
        ("Sampler", lambda o: _core.Sampler(model.vocab_size, o), sampler_options),
    ]


def test_generation_options_by_name_run_and_give_plain_greedy_tokens(core_model):
    plain, assisted = greedy_options(), assisted_options()
    target, draft = _core.Context(core_model._core, 1, 16), _core.Context(core_model._core, 1, 16)
    assert _core.generate(target, plain) == 3, "expected 3 steps from a complete options dict"
    for s in range(target.n_seq):
        target.crop(s, 0)
    steps = _core.generate_assisted(target, draft, dict(reversed(list(assisted.items()))))  # any order of keys
    assert steps[0] == 3 and (assisted["out"] == plain["out"]).all(), (
        f"expected assisted greedy tokens {plain['out'].tolist()} in 3 steps, got {assisted['out'].tolist()} in "
        f"{steps[0]}"
    )
    assert _core.Sampler(core_model.vocab_size, sampler_options()) is not None


@pytest.mark.parametrize("key", ["topk", "eos", "logit_fn", "max_new"])
def test_an_unknown_generation_option_raises_naming_it(core_model, key):
    for name, call, options in calls(core_model):
        with pytest.raises(ha.InvalidInputError) as err:
            call(dict(options(), **{key: 0}))
        assert f"{name}: unknown option '{key}'" in str(err.value), (
            f"expected {name} to name the unknown option {key!r}, got: {err.value}"
        )


@pytest.mark.parametrize("key", ["top_k", "eos_token_id", "logits_fn", "seed"])
def test_a_missing_generation_option_raises_naming_it(core_model, key):
    for name, call, options in calls(core_model):
        opts = options()
        del opts[key]
        with pytest.raises(ha.InvalidInputError) as err:
            call(opts)
        assert f"{name}: option '{key}' is required" in str(err.value), (
            f"expected {name} to name the missing option {key!r}, got: {err.value}"
        )


@pytest.mark.parametrize("key", ["out", "max_new_tokens", "on_tokens"])
def test_generate_requires_its_own_options_too(core_model, key):
    generate, assisted = calls(core_model)[:2]
    for (name, call, options), extra in ((generate, None), (assisted, "cost_state")):
        for k in (key, extra) if extra else (key,):
            opts = options()
            del opts[k]
            with pytest.raises(ha.InvalidInputError, match=f"{name}: option '{k}' is required"):
                call(opts)


def test_generation_options_of_a_wrong_type_name_the_option(core_model):
    for name, call, options in calls(core_model):
        with pytest.raises(TypeError) as err:
            call(dict(options(), top_k="3"))
        assert f"{name}: option 'top_k'" in str(err.value), f"expected the message to name top_k, got: {err.value}"
        with pytest.raises(ha.InvalidInputError, match=f"{name}: the options must be a dict"):
            call(tuple(options().values()))


def test_a_callback_that_empties_the_options_dict_mid_call_leaves_the_call_its_own_references(core_model):
    """The binding holds what it took from the dict (callables included) until the call returns: emptying the dict
    from inside the loop must neither crash nor change the tokens."""
    plain = greedy_options(max_new=5)
    ctx = _core.Context(core_model._core, 1, 16)
    assert _core.generate(ctx, plain) == 5
    opts = greedy_options(max_new=5)
    seen = []
    opts["logits_fn"] = lambda row, ids, scores: None
    opts["stop_fn"] = lambda row, ids, scores: False
    opts["on_tokens"] = lambda row, tokens: (seen.append(tokens), opts.clear())
    out = opts["out"]
    ctx.crop(0, 0)
    assert _core.generate(ctx, opts) == 5 and opts == {}, "expected 5 steps and the dict emptied by the callback"
    assert (out == plain["out"]).all() and len(seen) == 5, (
        f"expected tokens {plain['out'].tolist()} told 5 times, got {out.tolist()} told {len(seen)} times"
    )


# ---- results and enums by name; objects that hold objects are collected in cycles ----------------------------

STATS_FIELDS = (
    "steps",
    "num_draft_tokens",
    "num_accepted_tokens",
    "num_target_passes",
    "num_draft_passes",
    "num_assistant_tokens",
    "num_rounds",
    "num_ahead_passes",
    "num_ahead_used",
    "num_sibling_tokens",
    "num_sibling_accepted",
)


def test_assisted_statistics_come_back_as_a_named_structure(core_model):
    plain = greedy_options(max_new=4)
    assert _core.generate(_core.Context(core_model._core, 1, 16), plain) == 4
    target, draft = _core.Context(core_model._core, 1, 16), _core.Context(core_model._core, 1, 16)
    opts = assisted_options(max_new=4)
    stats = _core.generate_assisted(target, draft, opts)
    assert isinstance(stats, _core.AssistedStats) and type(stats).__match_args__ == STATS_FIELDS, (
        f"expected an AssistedStats with fields {STATS_FIELDS}, got {type(stats).__name__} "
        f"{getattr(type(stats), '__match_args__', None)}"
    )
    assert tuple(getattr(stats, name) for name in STATS_FIELDS) == tuple(stats), (
        f"expected each field by name to be the value at its place, got {stats!r}"
    )
    # the draft is the target itself: every candidate is accepted, K = 2 stays (constant), the tokens are plain's
    assert stats.steps == 4 and (opts["out"] == plain["out"]).all(), (
        f"expected 4 steps of the plain tokens {plain['out'].tolist()}, got {stats!r}, {opts['out'].tolist()}"
    )
    assert stats.num_accepted_tokens == stats.num_draft_tokens > 0 and stats.num_assistant_tokens == 2, (
        f"expected every draft token accepted and K = 2 kept, got {stats!r}"
    )
    assert stats.num_accepted_tokens == int(opts["accepted_at"].sum()), (
        f"expected num_accepted_tokens to be accepted_at's sum {int(opts['accepted_at'].sum())}, got {stats!r}"
    )


def test_schedules_and_acceptance_modes_cross_by_the_cores_names(core_model):
    """GenerationConfig validates against the core's own table of names, and generate_assisted takes them by name:
    every schedule Transformers names (and ours, "cost") and both acceptance modes."""
    assert SCHEDULES is _core.SCHEDULES and ASSISTED_SAMPLING is _core.ACCEPTANCES, (
        f"expected GenerationConfig's names to be the core's, got {SCHEDULES}, {ASSISTED_SAMPLING}"
    )
    assert {"constant", "heuristic", "heuristic_transient", "cost"} == set(SCHEDULES) and {
        "rejection",
        "coupled",
    } == set(ASSISTED_SAMPLING), f"got {SCHEDULES}, {ASSISTED_SAMPLING}"
    plain = greedy_options(max_new=3)
    assert _core.generate(_core.Context(core_model._core, 1, 16), plain) == 3
    for schedule in ("constant", "heuristic", "heuristic_transient"):
        for acceptance in ASSISTED_SAMPLING:
            target, draft = _core.Context(core_model._core, 1, 16), _core.Context(core_model._core, 1, 16)
            opts = dict(assisted_options(), schedule=schedule, acceptance=acceptance)
            stats = _core.generate_assisted(target, draft, opts)
            assert stats.steps == 3 and (opts["out"] == plain["out"]).all(), (
                f"{schedule}/{acceptance}: expected the plain tokens {plain['out'].tolist()}, got "
                f"{opts['out'].tolist()} ({stats!r})"
            )


@pytest.mark.parametrize(
    "key, value",
    [
        ("schedule", "Constant"),
        ("schedule", "bogus"),
        ("schedule", 0),
        ("schedule", None),
        ("acceptance", "greedy"),
        ("acceptance", 1),
    ],
)
def test_an_unknown_schedule_or_acceptance_name_is_refused_naming_the_choices(core_model, key, value):
    target, draft = _core.Context(core_model._core, 1, 16), _core.Context(core_model._core, 1, 16)
    names = SCHEDULES if key == "schedule" else ASSISTED_SAMPLING
    with pytest.raises(ha.InvalidInputError) as err:
        _core.generate_assisted(target, draft, dict(assisted_options(), **{key: value}))
    message = str(err.value)
    assert f"generate_assisted: option '{key}': {value!r} is not a" in message and all(
        repr(name) in message for name in names
    ), f"expected the message to name the option, the value {value!r} and each of {names}, got: {message}"


def test_a_cycle_through_a_sampler_or_an_external_context_is_collected(core_model):
    """A Sampler whose logits_fn belongs to an object holding the Sampler, and an external model's Context held by
    its own adapter, are reference cycles through the binding's objects: the garbage collector frees them."""

    class Owner:
        def logits(self, row, ids, scores):
            return None

        def append(self, seq, tokens, want):
            raise AssertionError("never called")

        def crop(self, seq, length):
            raise AssertionError("never called")

    opts = sampler_options()
    for kind, make in (
        ("Sampler", lambda o: _core.Sampler(core_model.vocab_size, dict(opts, logits_fn=o.logits))),
        ("external Context", lambda o: _core.external_context(o, core_model.vocab_size, 16)),
    ):
        owner = Owner()
        owner.held = make(owner)
        assert gc.is_tracked(owner.held), f"expected {type(owner.held).__name__} to be tracked by the collector"
        gone = weakref.ref(owner)
        del owner
        gc.collect()
        assert gone() is None, f"expected the cycle through a {kind} to be collected"


def test_the_collector_sees_what_the_binding_objects_hold(core_model):
    model = core_model._core
    ctx = _core.Context(model, 1, 8)
    embed = core_model._parts[1]["embed"]
    embed = embed[0] if isinstance(embed, tuple) else embed
    assert gc.get_referents(ctx) == [model], f"expected a Context to hold its Model, got {gc.get_referents(ctx)}"
    assert any(r is embed for r in gc.get_referents(model)), (
        "expected a Model to hold the arrays whose buffers it reads (the embedding among them)"
    )
