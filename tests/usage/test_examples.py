"""The examples in examples/ run as a newcomer would run them, and say what they promise, with the package under
test (tests/fixtures/package_under_test.py)."""

import os
import subprocess

from package_under_test import PYTHON, child_env

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")


def test_quickstart_runs_and_assisted_outputs_equal_plain_ones(tmp_path):
    r = subprocess.run(
        [PYTHON, os.path.join(EXAMPLES, "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=child_env(),
    )
    assert r.returncode == 0, f"examples/quickstart.py failed ({r.returncode}):\n{r.stderr[-3000:]}"
    for claim in (
        "identical to greedy: True",
        "coupled assisted sampling equals it: True",
        "logits shape    (1, 7, 256)",
    ):
        assert claim in r.stdout, f"expected the quickstart to print {claim!r}; it printed:\n{r.stdout}"
