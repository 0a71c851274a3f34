"""The same user script both ways: every script of tests/reference/scripts/ runs once with Transformers, as written,
and once with habana_assist, its `from transformers import ...` lines changed to `from habana_assist import ...`,
both in the reference environment's python (tests/fixtures/hf_reference.py) and on the same models, and what each
printed, raised and computed is compared.

Cost: one child process per library runs the whole corpus (tests/reference/scripts_runner.py: imports once, each
script in a fresh namespace with its stdout captured and its exception recorded), the two side by side on one thread
each, after one child that makes the tiny models (Transformers' own, as tests/reference/test_transformers_parity.py
makes them); the scripts keep max_new_tokens small. docs/transformers-parity.md gives the seconds.

Models (directories named by environment variables the scripts read): PYCODE and PYCODE_DRAFT, the shipped pair
(Transformers loads it as a Llama checkpoint); TINY_LLAMA (the shipped tokenizer beside it), TINY_LLAMA_DRAFT (its
weights plus noise), TINY_GPT2 and TINY_QWEN3 (Qwen3's real tokenizer files, tests/data/npm, with its chat template),
random models Transformers makes.

Comparison: the stdout text and the error type exactly; the script's `result` value by value: integers, strings and
token ids exactly, the positions of non-finite values exactly, every other float within LOGIT_TOL of the largest
|float| of the script's result (test_transformers_parity.py's tolerance, justified there: both sides compute in
float32 and only the order of sums differs). One scale per script, not per value: float32 sums leave an absolute
error at the scale of the logits, and what a script derives from them (log-probabilities and probabilities of
confident tokens, near 0 and 1) carries that absolute error, not one relative to its own size; so a script that
derives such values returns the scores they come from too.

DIFFERENCES names, per script, every place where the two differ and why; a script not named there must agree
everywhere, and a named difference that changes or disappears fails the test, so the table (and
docs/transformers-parity.md's, which mirrors it) cannot go stale silently.
"""

import concurrent.futures
import difflib
import os
import shutil

import numpy as np
import pytest
import tokenizer_data
from package_under_test import PACKAGE_PARENT, SHIPPED
from test_transformers_parity import LOGIT_TOL

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS_DIR = os.path.join(HERE, "scripts")
RUNNER = os.path.join(HERE, "scripts_runner.py")
SCRIPTS = sorted(name for name in os.listdir(SCRIPTS_DIR) if name.endswith(".py"))
TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    initializer_range=0.1,
)
PYCODE_IDS = dict(vocab_size=4096, bos_token_id=1, eos_token_id=2, pad_token_id=3)  # the shipped tokenizer's
QWEN3_IDS = dict(vocab_size=151936, eos_token_id=151645, pad_token_id=151643, tie_word_embeddings=True)

BEING_FIXED = "being fixed"  # a difference another change in progress removes: the test then fails, on purpose

# script -> ({where: how}, why, kind). where: "stdout", "error" or "result.<path>"; how: "differs", "only ours",
# "only Transformers", or for "error" "ours: <type or none>, Transformers: <type or none>". kind: "documented"
# (a decision, docs/transformers-parity.md says why) or BEING_FIXED.
_VERSION_KEY = "our files name our version (habana_assist_version) where Transformers writes transformers_version"
_UNSET = (
    "Transformers 5 leaves every GenerationConfig field None until generate() applies its defaults; ours holds "
    "the defaults themselves (do_sample False, top_k 50, ...): generate() does the same with either"
)
DIFFERENCES = {
    "c02_generation_config_save_load.py": (
        {"stdout": "differs", "result.saved.habana_assist_version": "only ours", "result.loaded[5]": "differs"},
        f"{_VERSION_KEY}; top_k: {_UNSET}",
        "documented",
    ),
    "c03_model_generation_config.py": (
        {
            "stdout": "differs",
            "result.diff.habana_assist_version": "only ours",
            "result.diff.transformers_version": "only Transformers",
            "result.fields[4]": "differs",
            "result.fields[5]": "differs",
        },
        f"{_VERSION_KEY}; do_sample and top_k: {_UNSET}",
        "documented",
    ),
    "c04_generation_config_from_pretrained_kwargs.py": (
        {
            "stdout": "differs",
            "result.diff.habana_assist_version": "only ours",
            "result.diff.foo": "only Transformers",
            "result.unused.foo": "only ours",
        },
        f"{_VERSION_KEY}; GenerationConfig.from_pretrained(..., foo=..., return_unused_kwargs=True) returns a key it "
        "does not know as unused, where Transformers sets it on the config as an attribute",
        "documented",
    ),
    "c05_generation_config_validate.py": (
        {
            "stdout": "differs",
            "result.validate temperature_zero": "differs",
            "result.validate top_p_above_one": "differs",
            "result.generate top_p_above_one": "differs",
        },
        "ours refuses temperature=0.0 and top_p > 1 with do_sample=True in validate(); Transformers' validate() passes "
        "both, its generate() refuses temperature 0.0 and samples with top_p=1.5 as with 1.0",
        "documented",
    ),
    "c07_generation_config_defaults.py": ({"stdout": "differs", "result.unset": "differs"}, _UNSET, "documented"),
    "k06_cache_crop_meaning.py": (
        {"stdout": "differs", "result.left.4": "differs"},
        "crop(n > 0) keeps the first n columns here (Transformers 4's meaning); Transformers 5 takes only a count to "
        "drop and refuses n > 0 (crop(0) drops nothing on both sides)",
        "documented",
    ),
    "m06_refused_beam_search.py": (
        {"error": "ours: InvalidInputError, Transformers: none", "stdout": "differs", "result": "differs"},
        "beam search (num_beams > 1) is refused here, naming what to use instead",
        "documented",
    ),
    "p06_pipeline_stop_strings.py": (
        {"error": "ours: none, Transformers: ValueError", "stdout": "differs", "result": "differs"},
        "the pipeline passes its own tokenizer for stop_strings here; Transformers' pipeline needs tokenizer= in the "
        "call",
        "documented",
    ),
    "t03_chat_template_tokenize_default.py": (
        {"stdout": "differs", "result.type": "differs"},
        "apply_chat_template(tokenize=True) returns the list of ids here (Transformers 4's default), a BatchEncoding "
        "in Transformers 5; the ids are equal",
        "documented",
    ),
}


def _copy_tokenizer(source, target, names):
    for name in names:
        shutil.copy(os.path.join(source, name), os.path.join(target, name))


@pytest.fixture(scope="module")
def model_dirs(hf_reference, tmp_path_factory):
    """{variable: directory} of every model the scripts read, the tiny ones made here by Transformers."""
    root = tmp_path_factory.mktemp("same_script_models")
    dirs = {"PYCODE": os.path.join(SHIPPED, "pycode"), "PYCODE_DRAFT": os.path.join(SHIPPED, "pycode-draft")}
    dirs.update(
        {name: str(root / name.lower()) for name in ("TINY_LLAMA", "TINY_LLAMA_DRAFT", "TINY_GPT2", "TINY_QWEN3")}
    )
    jobs = [
        dict(
            kind="make_model",
            model_type="llama",
            config=dict(TINY, **PYCODE_IDS),
            seed=0,
            saves=[dict(dir=dirs["TINY_LLAMA"], dtype="float32")],
        ),
        dict(
            kind="make_model",
            saves=[dict(dir=dirs["TINY_LLAMA_DRAFT"], dtype="float32")],
            perturb_from=dict(dir=dirs["TINY_LLAMA"], noise=0.15, seed=1),
        ),
        dict(
            kind="make_model",
            model_type="gpt2",
            seed=0,
            saves=[dict(dir=dirs["TINY_GPT2"], dtype="float32")],
            config=dict(n_embd=64, n_layer=2, n_head=4, n_positions=256, initializer_range=0.1, **PYCODE_IDS),
        ),
        dict(
            kind="make_model",
            model_type="qwen3",
            config=dict(TINY, hidden_size=32, head_dim=8, **QWEN3_IDS),
            seed=0,
            saves=[dict(dir=dirs["TINY_QWEN3"], dtype="float32")],
        ),
    ]
    for job, result in zip(jobs, hf_reference.run(jobs)):
        assert "error" not in result, f"Transformers could not make {job['saves'][0]['dir']}: {result['error']}"
    pycode_files = ("tokenizer.model", "tokenizer_config.json", "special_tokens_map.json")
    for name in ("TINY_LLAMA", "TINY_LLAMA_DRAFT", "TINY_GPT2"):
        _copy_tokenizer(dirs["PYCODE"], dirs[name], pycode_files)
    shutil.copy(tokenizer_data.tokenizer_path("qwen3"), dirs["TINY_QWEN3"])
    shutil.copy(tokenizer_data.config_path("qwen3"), dirs["TINY_QWEN3"])
    return dirs


@pytest.fixture(scope="module")
def runs(hf_reference, model_dirs):
    """{"transformers": results, "habana_assist": results}: each {script: {stdout, error, where, result, seconds}}.
    The two children run at the same time, each on one thread (torch's and the core's): two cores, half the wait."""
    scripts = [os.path.join(SCRIPTS_DIR, name) for name in SCRIPTS]
    env = dict(model_dirs, HA_NUM_THREADS="1")
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            library: pool.submit(
                hf_reference.run_file,
                RUNNER,
                dict(library=library, package_parent=PACKAGE_PARENT, env=env, scripts=scripts),
                timeout=900,
            )
            for library in ("transformers", "habana_assist")
        }
        out = {library: future.result() for library, future in futures.items()}
    assert os.path.realpath(out["habana_assist"].pop("__package__")) == os.path.realpath(PACKAGE_PARENT), (
        "the scripts' habana_assist is not the package under test"
    )
    return out


def _error_type(run):
    return run["error"].split(":", 1)[0] if run["error"] else "none"


def _largest_float(value):
    """The largest finite |value| of the floating-point numbers in a result (0.0 where it holds none)."""
    if isinstance(value, np.ndarray):
        finite = value[np.isfinite(value)] if value.dtype.kind == "f" else value[:0]
        return float(np.max(np.abs(finite))) if finite.size else 0.0
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return max((_largest_float(v) for v in value), default=0.0)
    return abs(value) if isinstance(value, float) and np.isfinite(value) else 0.0


def _compare(ours, theirs, where, found, tol):
    """Adds {where: how} to found for each place where ours and theirs (result values) differ; floats by more than
    tol (absolute)."""
    if isinstance(ours, np.ndarray) or isinstance(theirs, np.ndarray):
        if not (isinstance(ours, np.ndarray) and isinstance(theirs, np.ndarray)) or ours.shape != theirs.shape:
            found[where] = "differs"
        elif ours.dtype.kind == "f" or theirs.dtype.kind == "f":
            a, b = ours.astype(np.float64), theirs.astype(np.float64)
            finite = np.isfinite(b)
            if not np.array_equal(np.isfinite(a), finite) or not np.array_equal(a[~finite], b[~finite]):
                found[where] = "differs"
            elif finite.any() and np.max(np.abs(a[finite] - b[finite])) > tol:
                found[where] = "differs"
        elif not np.array_equal(ours, theirs):
            found[where] = "differs"
    elif isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs)):
            if key not in theirs:
                found[f"{where}.{key}"] = "only ours"
            elif key not in ours:
                found[f"{where}.{key}"] = "only Transformers"
            else:
                _compare(ours[key], theirs[key], f"{where}.{key}", found, tol)
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _compare(a, b, f"{where}[{i}]", found, tol)
    elif isinstance(ours, float) and isinstance(theirs, float):
        if not (ours == theirs or abs(ours - theirs) <= tol):
            found[where] = "differs"
    elif type(ours) is not type(theirs) or ours != theirs:
        found[where] = "differs"


def differences(ours, theirs):
    """{where: how} over one script's two runs (module docstring)."""
    found = {}
    if _error_type(ours) != _error_type(theirs):
        found["error"] = f"ours: {_error_type(ours)}, Transformers: {_error_type(theirs)}"
    if ours["stdout"] != theirs["stdout"]:
        found["stdout"] = "differs"
    _compare(ours["result"], theirs["result"], "result", found, LOGIT_TOL * _largest_float(theirs["result"]))
    return found


def _report(script, ours, theirs, found):
    """What came on each side, for a failure message."""
    lines = [f"{script}:"]
    for side, run in (("ours", ours), ("Transformers", theirs)):
        if run["error"]:
            lines.append(f"  {side} raised {run['error'][:600]} (at {run['where']})")
    if "stdout" in found:
        diff = difflib.unified_diff(
            theirs["stdout"].splitlines(), ours["stdout"].splitlines(), "Transformers", "ours", lineterm="", n=1
        )
        lines.append("  stdout:\n    " + "\n    ".join(list(diff)[:30]))
    for where in sorted(found):
        if where.startswith("result"):
            lines.append(
                f"  {where}: ours {_at(ours['result'], where)!r:.500}\n"
                f"  {' ' * len(where)}  Transformers {_at(theirs['result'], where)!r:.500}"
            )
    return "\n".join(lines)


def _at(value, where):
    import re

    for key, index in re.findall(r"\.([^.\[]+)|\[(\d+)\]", where[len("result") :]):
        try:
            value = value[key] if key else value[int(index)]
        except (KeyError, IndexError, TypeError):
            return "<absent>"
    return value.tolist() if isinstance(value, np.ndarray) and value.size <= 64 else value


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_gives_transformers_results_but_the_named_differences(runs, script):
    ours, theirs = runs["habana_assist"][script], runs["transformers"][script]
    found = differences(ours, theirs)
    expected, why, _ = DIFFERENCES.get(script, ({}, None, None))
    if found != expected:
        pytest.fail(
            f"expected differences {expected or 'none'}{f' ({why})' if why else ''}, found "
            f"{found or 'none'}\n{_report(script, ours, theirs, found)}",
            pytrace=False,
        )


def test_corpus_is_40_user_scripts_each_run_by_both_libraries(runs):
    assert len(SCRIPTS) >= 40, f"expected at least 40 scripts in tests/reference/scripts, found {len(SCRIPTS)}"
    assert not set(DIFFERENCES) - set(SCRIPTS), (
        f"DIFFERENCES names scripts that do not exist: {sorted(set(DIFFERENCES) - set(SCRIPTS))}"
    )
    for library in ("transformers", "habana_assist"):
        assert sorted(runs[library]) == SCRIPTS, f"{library} ran {sorted(runs[library])}, expected {SCRIPTS}"


def _docs_table():
    """{script: result cell} of the table in docs/transformers-parity.md's section "The same script both ways"."""
    path = os.path.join(os.path.dirname(os.path.dirname(HERE)), "docs", "transformers-parity.md")
    with open(path, encoding="utf-8") as f:
        section = f.read().split("## The same script both ways", 1)[-1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[0].endswith(".py`"):
            rows[cells[0].strip("`")] = cells[2]
    return rows


def test_docs_table_lists_every_script_with_its_result():
    """docs/transformers-parity.md's table: one row per script; "equal" exactly where DIFFERENCES names nothing,
    else "differs" ("being fixed" where the difference is one)."""
    rows = _docs_table()
    assert sorted(rows) == SCRIPTS, (
        f"the docs table's scripts differ from tests/reference/scripts: missing "
        f"{sorted(set(SCRIPTS) - set(rows))}, extra {sorted(set(rows) - set(SCRIPTS))}"
    )
    wrong = []
    for script, cell in rows.items():
        kind = DIFFERENCES.get(script, (None, None, None))[2]
        want = "equal" if kind is None else ("differs, being fixed" if kind == BEING_FIXED else "differs as documented")
        if not cell.startswith(want):
            wrong.append(f"{script}: {cell!r} should start with {want!r}")
    assert not wrong, "docs/transformers-parity.md's table disagrees with DIFFERENCES:\n" + "\n".join(wrong)
