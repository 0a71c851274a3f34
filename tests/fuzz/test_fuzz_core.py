"""The C core's public entry points under libFuzzer (tests/fuzz/c/fuzz_core.c, with AddressSanitizer and
UndefinedBehaviorSanitizer): the seed corpus and every kept crasher replayed, then a short deterministic run.

The harness is built once per session by tests/fuzz/c/run.sh --build-only into pytest's temporary directory (never
into the repository). Without clang or its libFuzzer runtime the tests fail naming the Debian packages to install
(scripts/setup.sh installs them). A crash, a sanitizer report, a leak, a hang (libFuzzer's -timeout) or a broken
contract the harness checks is a non-zero exit, and the failure shows the tail of the fuzzer's output.
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
HERE = ROOT / "tests" / "fuzz" / "c"
RUN_SH = HERE / "run.sh"
SHORT_RUNS = 2500  # mutations after the corpus is loaded: about 10-20 s on a 2-core machine (not asserted)
TAIL = 6000

_build = {}


def _env():
    env = dict(os.environ)
    env.pop("HA_KERNELS", None)
    env.pop("HA_NUM_THREADS", None)
    return env


def _tail(text):
    return text if len(text) <= TAIL else "...\n" + text[-TAIL:]


@pytest.fixture(scope="session")
def fuzzer(tmp_path_factory):
    if not _build:
        out = tmp_path_factory.mktemp("fuzz_core")
        if shutil.which("clang") is None:
            _build["error"] = (
                "clang is not installed: the C fuzzer needs clang and its libFuzzer runtime; "
                "apt-get install clang libclang-rt-14-dev (scripts/setup.sh installs both)"
            )
        else:
            res = subprocess.run(
                ["bash", str(RUN_SH), "--build-only", "--out", str(out)],
                capture_output=True,
                text=True,
                timeout=600,
                env=_env(),
            )
            if res.returncode != 0:
                _build["error"] = (
                    f"building the fuzzer (tests/fuzz/c/run.sh --build-only) failed with exit "
                    f"{res.returncode}:\n{_tail(res.stdout + res.stderr)}"
                )
            else:
                _build["binary"] = out / "fuzz_core"
                _build["dir"] = out
    if "error" in _build:  # in the test body, so a missing clang reads as a failure, not a skip
        pytest.fail(_build["error"], pytrace=False)
    return _build


def _inputs(folder):
    return sorted(str(p) for p in folder.rglob("*") if p.is_file())


def test_fuzz_core_seed_corpus_is_small_and_present():
    files = _inputs(HERE / "corpus")
    assert len(files) >= 10, f"expected at least 10 seed inputs in {HERE / 'corpus'}, got {len(files)}"
    big = [f for f in files if os.path.getsize(f) > 4096]
    assert not big, f"expected seed inputs of at most 4096 bytes (libFuzzer's default max_len), got {big}"


def test_fuzz_core_replays_corpus_and_crashers(fuzzer):
    files = _inputs(HERE / "corpus") + _inputs(HERE / "crashers")
    res = subprocess.run(
        [str(fuzzer["binary"]), "-timeout=60", *files],
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
        cwd=fuzzer["dir"],
    )
    out = res.stdout + res.stderr
    failing = [line.split("Running: ", 1)[1] for line in out.splitlines() if line.startswith("Running: ")]
    assert res.returncode == 0, (
        f"replaying {len(files)} inputs expected exit 0, got {res.returncode}; last input run: "
        f"{failing[-1] if failing else '?'}\n{_tail(out)}"
    )
    assert len(failing) == len(files), f"expected all {len(files)} inputs run, libFuzzer ran {len(failing)}"


def test_fuzz_core_short_deterministic_run(fuzzer):
    work = Path(tempfile.mkdtemp(prefix="corpus_", dir=fuzzer["dir"]))  # new inputs go here, not to the repo
    cmd = [
        str(fuzzer["binary"]),
        "-seed=1",
        f"-runs={SHORT_RUNS}",
        "-timeout=60",
        "-rss_limit_mb=3072",
        "-print_final_stats=1",
        f"-artifact_prefix={fuzzer['dir']}/",
        str(work),
        str(HERE / "corpus"),
        str(HERE / "crashers"),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=_env(), cwd=fuzzer["dir"])
    out = res.stdout + res.stderr
    assert res.returncode == 0, (
        f"`{' '.join(cmd)}` expected exit 0 (no finding), got {res.returncode}; the input is saved in "
        f"{fuzzer['dir']} (crash-*, leak-*, timeout-*, oom-*)\n{_tail(out)}"
    )
    assert "stat::number_of_executed_units" in out, f"expected libFuzzer's final stats, got:\n{_tail(out)}"
