"""The examples in examples/ run as a newcomer would run them, and say what they promise."""
import os
import subprocess
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")


def test_quickstart_runs_and_assisted_outputs_equal_plain_ones(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "quickstart.py")], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, f"examples/quickstart.py failed ({r.returncode}):\n{r.stderr[-3000:]}"
    for claim in ("identical to greedy: True", "coupled assisted sampling equals it: True", "logits shape    (1, 7, 256)"):
        assert claim in r.stdout, f"expected the quickstart to print {claim!r}; it printed:\n{r.stdout}"
