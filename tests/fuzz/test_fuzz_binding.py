"""The binding (habana_assist._core) under random arguments: a short deterministic run of
tests/fuzz/fuzz_binding.py (fixed seed and case count: the same inputs every time), in a subprocess, so that a
crash of the interpreter is a failure naming the case and how to replay it, not the end of pytest. Every call
must succeed or raise a HabanaAssistError or one of the built-ins argument parsing raises (see the module's
docstring); the long run is scripts/fuzz.sh (the same module with --seconds)."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ = os.path.join(ROOT, "tests", "fuzz", "fuzz_binding.py")
SEED = 0
CASES = 3000  # about 5 s (the time is not asserted)


def _run(*args):
    env = dict(os.environ)
    env.pop("HA_KERNELS", None)
    return subprocess.run([sys.executable, "-W", "ignore", FUZZ, *args], capture_output=True, text=True, timeout=600,
                          env=env, cwd=ROOT)


def test_binding_random_arguments_raise_only_allowed_exceptions():
    res = _run("--iterations", str(CASES), "--seed", str(SEED))
    out = res.stdout + res.stderr
    assert res.returncode == 0, f"expected no finding from {CASES} cases of seed {SEED}, got exit {res.returncode}:\n{out[-8000:]}"
    assert f"{CASES} cases" in out, f"expected {CASES} cases run, got:\n{out[-3000:]}"
    summary = next(line for line in out.splitlines() if "outcomes:" in line)
    for outcome in ("'ok'", "'InvalidInputError'", "'TypeError'"):
        assert outcome in summary, f"expected the cases to reach {outcome} outcomes too, got: {summary}"
    # the arguments must track the binding's signatures: a harness whose generations all fail to parse fuzzes
    # nothing past argument parsing (as happened once their lists fell behind the binding's)
    ran = re.search(r"generations that ran: generate (\d+), generate_assisted (\d+)", out)
    assert ran, f"expected the count of generations that ran, got:\n{out[-3000:]}"
    assert int(ran.group(1)) >= 20 and int(ran.group(2)) >= 20, (
        f"expected at least 20 generate and 20 generate_assisted calls to run in {CASES} cases, got {ran.group(0)}")


def test_binding_fuzz_reports_a_crash_and_a_bad_exception_naming_the_case():
    res = _run("--iterations", "20", "--seed", str(SEED), "--selftest", "7:abort")
    out = res.stdout + res.stderr
    assert res.returncode == 1, f"expected exit 1 for a worker that aborted, got {res.returncode}:\n{out[-3000:]}"
    assert "died" in out and "case 7 " in out and "--case 7" in out, f"expected the crash reported as case 7, got:\n{out[-3000:]}"
    res = _run("--iterations", "20", "--seed", str(SEED), "--selftest", "5:raise")
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "case 5" in out and "SystemError" in out, (
        f"expected a SystemError reported as a finding in case 5, got exit {res.returncode}:\n{out[-3000:]}")
