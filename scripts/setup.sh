#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for habana_assist and builds the C extension in place. Installs only what is
# missing, from Debian's package registry; uses Debian's /usr/bin/python3 whatever python3 comes first on PATH.
#
#   bash scripts/setup.sh [STEP...]     the steps, in the order given; without any: packages build check
#     packages       what the demo (scripts/run.sh) and the build need
#     test-packages  what only the test suite needs (scripts/test.sh runs this step)
#     venv-packages  python3-venv alone, of test-packages: the virtual environments scripts/test.sh builds from PyPI
#                    while it installs the rest
#     build          the extension habana_assist._core (setup.py: the sources compiled in parallel, objects that are
#                    up to date reused), built under build/, then renamed into the package
#     check          imports the package and prints its version, kernel variants and threads
#
# HA_AVX512_EMULATED=1 also builds the kernel variant avx512-emulated (the AVX-512 source on SIMDe, for the tests on
# CPUs without AVX-512; a minute of one core), and then `packages` installs libsimde-dev for it; 0 leaves it out;
# unset keeps it where build/ holds it up to date (setup.py). HA_WERROR=1 (the default here) makes warnings errors.
set -euo pipefail
cd "$(dirname "$0")/.."

# What the build (setup.py) and pyproject.toml's dependencies need: the demo's packages.
PACKAGES=(gcc libc6-dev python3 python3-dev python3-setuptools libopenblas-dev
          python3-numpy python3-sentencepiece python3-regex python3-jinja2 python3-tqdm)
if [ "${HA_AVX512_EMULATED:-}" = 1 ]; then
    PACKAGES+=(libsimde-dev)  # SIMDe's headers: the avx512-emulated kernel variant
fi
TEST_PACKAGES=(python3-pytest python3-pytest-xdist  # the suite in one process a core (scripts/test.sh)
               python3-wheel python3-pip python3-venv  # pip installs: tests/usage/test_install_venv.py, test.sh
               clang libclang-rt-14-dev  # clang and its libFuzzer runtime: tests/fuzz/c (a Recommends of clang only)
               python3-torch  # torch in and out (return_tensors="pt"): tests/integrations/test_torch_io.py
               python3-nbclient python3-ipykernel  # examples/' notebooks, run headlessly: tests/usage/test_notebooks.py
               python3-matplotlib)  # habana_assist.plot_acceptance

VENV_PACKAGES=(python3-venv)  # python3 -m venv with its pip (the reference and linters' environments)

install_missing() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    echo "setup: installing ${missing[*]}"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null ||
            { echo "setup: need root (or sudo) to apt-get install ${missing[*]}" >&2; exit 1; }
        sudo=sudo
    fi
    # Package lists fetched once per machine: a later step installs from them without fetching them again, and
    # fetches them only where that fails (lists from before a package's update).
    local install=($sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends
                   "${missing[@]}")
    if ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null || ! "${install[@]}" >/dev/null 2>&1; then
        $sudo apt-get update -qq
        "${install[@]}" >/dev/null
    fi
}

build() {
    echo "setup: building habana_assist._core"
    # Built under build/, then renamed into the package: a process that has the old extension loaded keeps its
    # file (copying over it in place, as build_ext --inplace does, would change the pages it maps under it).
    HA_WERROR="${HA_WERROR:-1}" /usr/bin/python3 setup.py -q build_ext --build-lib build/setup >/dev/null
    local so
    for so in build/setup/habana_assist/_core*.so; do
        cp "$so" "habana_assist/.$(basename "$so").new"
        mv -f "habana_assist/.$(basename "$so").new" "habana_assist/$(basename "$so")"
    done
}

check() {
    /usr/bin/python3 - <<'EOF'
import habana_assist as ha
from habana_assist import _core
kernels, variants = ha.kernels_name(), []
for name in ("scalar", "avx2", "avx-vnni", "avx512", "avx512-emulated", "avx-vnni-evex"):
    try:
        _core.select_kernels(name)
        variants.append(name)
    except ha.UnsupportedModelError:
        pass
_core.select_kernels(kernels)
print(f"setup: habana_assist {ha.__version__} kernels {kernels} (this CPU runs {', '.join(variants)}), "
      f"threads {ha.get_num_threads()}")
EOF
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(packages build check)
for step in "${steps[@]}"; do
    case "$step" in
        packages) install_missing "${PACKAGES[@]}" ;;
        test-packages) install_missing "${TEST_PACKAGES[@]}" ;;
        venv-packages) install_missing "${VENV_PACKAGES[@]}" ;;
        build) build ;;
        check) check ;;
        *) echo "setup: unknown step '$step'; the steps are packages, test-packages, venv-packages, build and check" >&2; exit 2 ;;
    esac
done
