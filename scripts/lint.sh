#!/usr/bin/env bash
# The linter: ruff, pinned in tests/tools-requirements.txt, in a small virtual environment of its own (.venv-tools/,
# git-ignored; one wheel from PyPI), then `ruff check .` over the repository with pyproject.toml's [tool.ruff] rules.
# Reused while its stamp (the hash of the pins and of the interpreter's version) is unchanged; otherwise built anew.
# Exit status: ruff's (non-zero when it finds something). Where the environment cannot be built (no PyPI: a clone
# used offline) it says so and exits 0, the check skipped; under CI (CI set) that is an error, so CI never skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-tools
REQ=tests/tools-requirements.txt
STAMP="$VENV/.habana-tools-stamp"
want=$( { grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$REQ"; /usr/bin/python3 -VV; } | sha256sum | cut -d' ' -f1)
if ! [ -x "$VENV/bin/ruff" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    echo "lint: building $VENV from $REQ (PyPI)"
    build() {  # one && chain: set -e does not act inside a function called before ||
        rm -rf "$VENV" &&
        /usr/bin/python3 -m venv "$VENV" &&
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ" &&
        "$VENV/bin/ruff" --version >/dev/null &&
        echo "$want" >"$STAMP"
    }
    if ! build; then
        rm -rf "$VENV"
        if [ -n "${CI:-}" ]; then
            echo "lint: could not build $VENV from $REQ (is PyPI reachable?); CI needs it" >&2
            exit 1
        fi
        echo "lint: could not build $VENV from $REQ (is PyPI reachable?); the lint step is skipped" >&2
        exit 0
    fi
fi
"$VENV/bin/ruff" check .
