"""Transformers' documentation, run against the shipped pair with only the import line changed.

Each script in tests/doc_scripts/ follows one section of Transformers' docs (named in its first comment line):
its code is the doc's, with `from habana_assist import ...` for `from transformers import ...` and the checkpoint
names read from HA_MODEL / HA_DRAFT (any other change is listed in its header), then its own checks of the
documented shapes and properties. Each runs in a fresh process of this Python, with the package under test
(tests/fixtures/package_under_test.py) and its shipped pair, in a temporary working directory (the saving scripts
write there), and must exit 0.

The scripts run two at a time, each with one core thread (HA_NUM_THREADS=1): most of a script's time is
Python's and torch's start-up, which one process cannot spread over two cores. Each test waits for its own
script and reports its exit status and stderr.
"""

import ast
import concurrent.futures
import os
import re
import subprocess

import pytest
from package_under_test import PYTHON, SHIPPED, child_env

TEST_NAME = "test_doc_script_runs_and_its_outputs_have_the_documented_properties"

SCRIPTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "doc_scripts")
SCRIPTS = sorted(name for name in os.listdir(SCRIPTS_DIR) if re.fullmatch(r"s\d\d_\w+\.py", name))


def _environment():
    return child_env(
        HA_MODEL=os.path.join(SHIPPED, "pycode"), HA_DRAFT=os.path.join(SHIPPED, "pycode-draft"), HA_NUM_THREADS="1"
    )


def _run(script, cwd):
    return subprocess.run(
        [PYTHON, os.path.join(SCRIPTS_DIR, script)],
        cwd=cwd,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def launched(request, tmp_path_factory):
    """script name -> Future of its CompletedProcess, for the scripts this session selected, two at a time."""
    selected = [
        item.callspec.params["script"]
        for item in request.session.items
        if getattr(item, "originalname", None) == TEST_NAME and hasattr(item, "callspec")
    ]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    futures = {script: pool.submit(_run, script, tmp_path_factory.mktemp(script[:-3])) for script in selected}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("script", SCRIPTS)
def test_doc_script_runs_and_its_outputs_have_the_documented_properties(script, launched):
    r = launched[script].result()
    assert r.returncode == 0, (
        f"tests/doc_scripts/{script} exited with {r.returncode}; expected 0.\n"
        f"--- stderr (tail) ---\n{r.stderr[-4000:]}\n--- stdout (tail) ---\n{r.stdout[-1500:]}"
    )


def _imported_modules(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_corpus_has_30_scripts_each_the_doc_form_with_only_the_allowed_changes():
    assert len(SCRIPTS) >= 30, f"expected at least 30 doc scripts in tests/doc_scripts, found {len(SCRIPTS)}"
    problems = []
    for script in SCRIPTS:
        with open(os.path.join(SCRIPTS_DIR, script), encoding="utf-8") as f:
            source = f.read()
        header = source.split("\n", 1)[0]
        modules = set(_imported_modules(ast.parse(source)))
        if not re.match(r"# Transformers docs: [\w/]+\.md", header):
            problems.append(f"{script}: the first line does not name the doc it follows ({header!r})")
        if "# Changed from the doc: the import line" not in source:
            problems.append(f"{script}: the header does not say what changed from the doc")
        if "habana_assist" not in modules:
            problems.append(f"{script}: does not import from habana_assist")
        if any(m == "transformers" or m.startswith("transformers.") for m in modules):
            problems.append(f"{script}: imports transformers")
        if re.search(r"^\s*import habana_assist|from habana_assist\.", source, re.M):
            problems.append(f"{script}: reaches into habana_assist beyond `from habana_assist import ...`")
        if 'os.environ["HA_MODEL"]' not in source:
            problems.append(f"{script}: the checkpoint does not come from os.environ['HA_MODEL']")
        if re.search(r"pycode|habana_assist/pretrained|habana-assist/", source):
            problems.append(f"{script}: names the shipped checkpoint instead of reading HA_MODEL / HA_DRAFT")
        if "# Checks" not in source:
            problems.append(f"{script}: has no '# Checks' section asserting the documented properties")
        elif not re.search(r"^\s*assert ", source.split("# Checks", 1)[1], re.M):
            problems.append(f"{script}: its checks assert nothing")
    assert not problems, "\n".join(problems)
