"""C-level tests of the core (tests/c/: one program, its tests by layer, main.c listing them), built with
AddressSanitizer and UndefinedBehaviorSanitizer.

The C program is compiled once per session into pytest's temporary directory (never into the repository) and
asked for its test names with --list while pytest collects, so each C test is one pytest test. Each runs in
its own process with leak detection on; a sanitizer report, a failed check or a leak is a non-zero exit whose
stderr the failure message shows.

`python3 tests/core/test_c_core.py DIR` compiles the same program into DIR beforehand (scripts/test.sh does, while
it downloads the rest) with a fingerprint of the compiler, flags and sources; a session whose HA_C_TESTS_PREBUILT
names that DIR runs it where the fingerprint still matches, and compiles its own otherwise.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SOURCES = sorted(str(p) for p in (ROOT / "tests" / "c").glob("*.c"))  # they share tests/c/test_core.h
CFLAGS = [
    "-std=c11",
    "-O1",
    "-g",
    "-fno-omit-frame-pointer",
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-ffp-contract=off",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-psabi",
    "-pthread",  # -Wno-psabi: see setup.py
]
RUN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}
BUILD_FAILED = "<build>"  # the one test collected when the program cannot be built or listed

_build = {}  # "binary": Path, "names": [str], or "error": str; filled once per session


def _core_sources():
    core = ROOT / "csrc"  # the core's folders only: csrc/bindings (the one part that includes Python.h) is left out
    return sorted(str(p) for p in core.rglob("*.c") if p.relative_to(core).parts[0] != "bindings")


def _tmp_dir(config):
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is not None:
        return factory.mktemp("c_core")
    return Path(tempfile.mkdtemp(prefix="ha_c_core_"))


def _fingerprint(cc):
    """sha256 of the compiler's version, the flags and every source and header the program is built from."""
    h = hashlib.sha256()
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    h.update(f"{cc}\n{version}\n{CFLAGS}\n".encode())
    files = sorted([*(ROOT / "csrc").rglob("*.[ch]"), *(ROOT / "tests" / "c").glob("*.[ch]")])
    for path in files:
        h.update(f"{path.relative_to(ROOT)}\n".encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def compile_program(cc, out_dir):
    """Compiles and links the test program into out_dir (a Path)/test_core; returns None, or what failed."""
    binary = out_dir / "test_core"
    sources = [*SOURCES, *_core_sources()]
    # one compiler per source, all at once (the sanitizers make each slow), then one link
    jobs = []
    for i, src in enumerate(sources):
        cmd = [cc, *CFLAGS, "-c", src, "-o", str(out_dir / f"{i}_{Path(src).stem}.o")]
        jobs.append((cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    link = [cc, *CFLAGS, *(cmd[-1] for cmd, _ in jobs), "-o", str(binary), "-lopenblas", "-lm"]
    failures = []
    for cmd, proc in jobs:
        output = proc.communicate()[0]
        if proc.returncode != 0:
            failures.append(f"command: {' '.join(cmd)}\n{output}")
    if not failures:
        res = subprocess.run(link, capture_output=True, text=True)
        if res.returncode != 0:
            failures.append(f"command: {' '.join(link)}\n{res.stdout}{res.stderr}")
    return "\n".join(failures) if failures else None


def _prebuilt(cc):
    """HA_C_TESTS_PREBUILT's test_core where its fingerprint is this tree's, else None."""
    pre = os.environ.get("HA_C_TESTS_PREBUILT")
    if not pre:
        return None
    stamp, binary = Path(pre) / "fingerprint", Path(pre) / "test_core"
    try:
        ok = stamp.read_text() == _fingerprint(cc) and binary.is_file()
    except OSError:
        ok = False
    return binary if ok else None


def build(config):
    """Compiles the test program once (or takes the prebuilt one) and lists its tests; returns the cached result."""
    if _build:
        return _build
    cc = shutil.which("cc")
    if cc is None:
        _build["error"] = (
            "no C compiler: `cc` is not on PATH. Install gcc (apt-get install gcc; ASan/UBSan come "
            "with it) to build and run the C tests of the core."
        )
        return _build
    binary = _prebuilt(cc)
    if binary is None:
        out_dir = _tmp_dir(config)
        binary = out_dir / "test_core"
        failures = compile_program(cc, out_dir)
        if failures:
            _build["error"] = "building the C tests failed; expected a clean build with -Werror.\n" + failures
            return _build
    res = subprocess.run([str(binary), "--list"], capture_output=True, text=True, env=_env(), timeout=60)
    names = res.stdout.split()
    if res.returncode != 0 or not names:
        _build["error"] = (
            f"`test_core --list` expected exit 0 and test names, got exit {res.returncode} and "
            f"{len(names)} names.\nstderr:\n{res.stderr}"
        )
        return _build
    _build["binary"] = binary
    _build["names"] = names
    return _build


def _env():
    env = dict(os.environ)
    env.update(RUN_ENV)
    # the C tests choose kernels and thread counts themselves; the defaults must not leak in
    env.pop("HA_KERNELS", None)
    env.pop("HA_NUM_THREADS", None)
    return env


def pytest_generate_tests(metafunc):
    if "c_test_name" in metafunc.fixturenames:
        built = build(metafunc.config)
        metafunc.parametrize("c_test_name", built.get("names") or [BUILD_FAILED])


@pytest.fixture(scope="session")
def core_build(request):
    return build(request.config)


def _binary(built):
    if "error" in built:  # in the test body, so a missing compiler reads as a failure, not a skip or setup error
        pytest.fail(built["error"], pytrace=False)
    return built["binary"]


def test_c_core_builds_and_lists_tests(core_build):
    _binary(core_build)
    names = core_build["names"]
    assert len(names) == len(set(names)), f"expected unique C test names, got duplicates in {names}"
    assert all(n.isidentifier() for n in names), f"expected identifier-like C test names, got {names}"


def test_c_core_rejects_unknown_test_name(core_build):
    res = subprocess.run(
        [str(_binary(core_build)), "no_such_test"], capture_output=True, text=True, env=_env(), timeout=60
    )
    assert res.returncode != 0, "expected a non-zero exit for an unknown test name, got 0"
    assert "no_such_test" in res.stderr, f"expected stderr to name the unknown test, got: {res.stderr!r}"


def test_c_core(core_build, c_test_name):
    res = subprocess.run(
        [str(_binary(core_build)), c_test_name], capture_output=True, text=True, env=_env(), timeout=300
    )
    assert res.returncode == 0, (
        f"C test {c_test_name} expected exit 0, got {res.returncode}\n"
        f"--- stderr ---\n{res.stderr}\n--- stdout ---\n{res.stdout}"
    )


def test_kernel_ab_tool_builds_and_compares_two_builds(tmp_path, monkeypatch):
    """benchmarks/kernel_ab.sh (for kernel work) builds HEAD's kernels against the working tree's and reports
    both timings and whether their outputs agree bitwise; outside a git checkout, or on a CPU without AVX2, it
    refuses, naming why. Its calls here share an object cache (KERNEL_AB_CACHE), which the last call's
    objects come from."""
    cache = tmp_path / "objects"
    monkeypatch.setenv("KERNEL_AB_CACHE", str(cache))
    # at the tool's default niceness (19) its compiles waited on the tests running beside it: 65 s alone, 175 s
    # beside another pytest worker
    monkeypatch.setenv("KERNEL_AB_NICE", "0")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    in_git = (
        subprocess.run(["git", "-C", root, "rev-parse", "--verify", "--quiet", "HEAD"], capture_output=True).returncode
        == 0
    )
    r = subprocess.run(
        ["bash", os.path.join(root, "benchmarks", "kernel_ab.sh"), "HEAD", "int8", "9", "70", "1", "1", "4"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if not in_git:
        assert r.returncode == 2 and "git checkout" in r.stderr, (
            f"expected a refusal naming git, got {r.returncode}:\n{r.stderr}"
        )
    elif {"avx2", "fma", "f16c"} <= set(flags):
        assert r.returncode == 0, f"kernel_ab.sh failed ({r.returncode}):\n{r.stderr[-3000:]}"
        lines = [line for line in r.stdout.splitlines() if line.startswith("T=")]
        assert len(lines) == 2 and all(
            "B/A" in line and ("bitwise equal" in line or "DIFFER" in line) for line in lines
        ), r.stdout

        # A as a file (here the working tree's own kernels), on float panels: the same code must agree bitwise
        def own_file_ab(kernels, *args):  # A as a file: the working tree's own kernels must agree bitwise
            own = os.path.join(root, "csrc", "kernels", kernels)
            return subprocess.run(
                ["bash", os.path.join(root, "benchmarks", "kernel_ab.sh"), own, *args],
                capture_output=True,
                text=True,
                timeout=300,
            )

        def bitwise_equal(r, what):
            assert r.returncode == 0, f"kernel_ab.sh {what} failed ({r.returncode}):\n{r.stderr[-3000:]}"
            lines = [line for line in r.stdout.splitlines() if line.startswith("T=")]
            assert len(lines) == 2 and all("bitwise equal" in line for line in lines), r.stdout

        bitwise_equal(own_file_ab("kernels_avx2.c", "bf16p", "21", "70", "1", "1", "8"), "with a file")  # panels
        # w8a8 times the AVX-512 kernels: a cut panel and a tile and a half of tokens; without AVX-512 F, BW and VNNI
        # it refuses, naming the variant
        r = own_file_ab("kernels_avx512.c", "w8a8", "21", "130", "1", "1", "6")
        if {"avx512f", "avx512bw", "avx512_vnni"} <= set(flags):
            bitwise_equal(r, "w8a8")
            # attention's scores of the same two builds: 37 keys (a short last block), 4 and 20 queries (both paths),
            # each object from the cache the w8a8 call filled (the same sources and flags: nothing compiled again)
            held = sorted(os.listdir(cache))
            r = own_file_ab("kernels_avx512.c", "scores", "37", "64", "1", "4", "20")
            lines = [line for line in r.stdout.splitlines() if line.startswith("NQ=")]
            assert r.returncode == 0 and len(lines) == 2 and all("bitwise equal" in line for line in lines), (
                f"kernel_ab.sh scores: expected 2 bitwise equal rows, got {r.returncode}:\n{r.stdout}{r.stderr[-3000:]}"
            )
            assert len(held) >= 3 and sorted(os.listdir(cache)) == held, (
                f"expected the scores call to take its 3 objects from the cache {held}, got {sorted(os.listdir(cache))}"
            )
        else:
            assert r.returncode == 2 and "avx512" in r.stderr, (
                f"expected a refusal naming avx512, got {r.returncode}:\n{r.stderr}"
            )
    else:
        assert r.returncode == 2 and "avx2" in r.stderr, (
            f"expected a refusal naming avx2, got {r.returncode}:\n{r.stderr}"
        )


if __name__ == "__main__":  # python3 tests/core/test_c_core.py DIR: the program and its fingerprint into DIR
    compiler = shutil.which("cc")
    if len(sys.argv) != 2 or compiler is None:
        sys.exit("usage: test_c_core.py DIR (with cc on PATH): compiles the C tests' program into DIR")
    into = Path(sys.argv[1])
    into.mkdir(parents=True, exist_ok=True)
    before = _fingerprint(compiler)
    problem = compile_program(compiler, into)
    if problem:
        sys.exit(problem)  # the session compiles again and reports it
    (into / "fingerprint").write_text(before)
