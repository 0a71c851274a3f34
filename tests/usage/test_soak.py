"""benchmarks/soak.py, short: 200 mixed calls (every kind at least 11 times) behave and RSS stays in its bound.

The full soak (10,000 calls, a few minutes) is the benchmark; this only keeps the script working, with the package
under test (tests/fixtures/package_under_test.py).
"""

import os
import subprocess

from package_under_test import PYTHON, child_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # where benchmarks/ is


def test_soak_of_200_mixed_calls_exits_zero():
    run = subprocess.run(
        [PYTHON, os.path.join(REPO, "benchmarks", "soak.py"), "--calls", "200", "--every", "100"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=child_env(),
        timeout=300,
    )
    assert run.returncode == 0, f"soak.py --calls 200 exited {run.returncode}, expected 0:\n{run.stdout}{run.stderr}"
    assert "soak: OK" in run.stdout, run.stdout
