#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for habana_assist and builds the C extension in place.
# Installs only what is missing, from Debian's package registry; uses Debian's /usr/bin/python3 whatever
# python3 comes first on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(gcc libc6-dev python3 python3-dev python3-numpy python3-pytest python3-setuptools python3-wheel
          python3-pip python3-venv python3-sentencepiece libopenblas-dev libsimde-dev
          python3-regex python3-jinja2  # tokenizer.json pre-tokenizer regexes (\p{L}); chat templates
          clang libclang-rt-14-dev  # clang and its libFuzzer runtime: tests/fuzz/c (a Recommends of clang only)
          python3-torch  # torch interop (torch in, torch out; return_tensors="pt"): tests/integrations/test_torch_io.py needs it
          python3-nbclient python3-ipykernel  # the notebooks in examples/, run headlessly by tests/usage/test_notebooks.py
          python3-matplotlib python3-tqdm)  # habana_assist.plot_acceptance; progress bars for long loads and calls
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "setup: need root (or sudo) to apt-get install ${missing[*]}" >&2; exit 1; }
        SUDO=sudo
    fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

echo "setup: building habana_assist._core"
# Built under build/, then renamed into the package: a process that has the old extension loaded keeps its
# file (copying over it in place, as build_ext --inplace does, would change the pages it maps under it).
HA_WERROR="${HA_WERROR:-1}" /usr/bin/python3 setup.py -q build_ext --build-lib build/setup >/dev/null
for so in build/setup/habana_assist/_core*.so; do
    cp "$so" "habana_assist/.$(basename "$so").new"
    mv -f "habana_assist/.$(basename "$so").new" "habana_assist/$(basename "$so")"
done
/usr/bin/python3 -c "import habana_assist as ha; print('setup: habana_assist', ha.__version__, 'kernels', ha.kernels_name(), 'threads', ha.get_num_threads())"
