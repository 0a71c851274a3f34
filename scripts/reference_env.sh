#!/usr/bin/env bash
# The reference environment: a virtual environment in .venv-reference/ (git-ignored) with Transformers, torch,
# huggingface_hub, tokenizers, safetensors, numpy, sentencepiece and protobuf pinned in tests/reference-requirements.txt,
# from PyPI. The tests in tests/reference/ run Transformers there, in a child process (tests/fixtures/hf_runner.py),
# and compare it with habana_assist, which keeps running on Debian's /usr/bin/python3 and numpy (and, for the scripts
# run both ways, with habana_assist imported there from the checkout).
#
# Reused while its stamp (the hash of the pins and of the interpreter's version) is unchanged; otherwise built
# anew, never patched in place. Where it cannot be built (no PyPI: a clone used offline) it says so and exits 0,
# and the reference tests skip saying why; under CI (CI set) a failure is an error, so CI never skips them.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-reference
REQ=tests/reference-requirements.txt
STAMP="$VENV/.habana-reference-stamp"
# The stamp: the requirement lines (comments and blank lines left out) and the interpreter's version.
want=$( { grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$REQ"; /usr/bin/python3 -VV; } | sha256sum | cut -d' ' -f1)
if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
    exit 0
fi
echo "reference_env: building $VENV from $REQ (PyPI: several GB and minutes; docs/transformers-parity.md says how much)"
started=$SECONDS
build() {  # one && chain: set -e does not act inside a function called before ||
    rm -rf "$VENV" &&
    /usr/bin/python3 -m venv "$VENV" &&
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ" &&
    "$VENV/bin/python" -c "import transformers, torch, tokenizers, huggingface_hub, safetensors, numpy, sentencepiece, google.protobuf" &&
    echo "$want" >"$STAMP"
}
if build; then
    echo "reference_env: built in $((SECONDS - started)) s, $(du -sh "$VENV" | cut -f1) on disk"
else
    rm -rf "$VENV"
    if [ -n "${CI:-}" ]; then
        echo "reference_env: could not build $VENV from $REQ (is PyPI reachable?); CI needs it" >&2
        exit 1
    fi
    echo "reference_env: could not build $VENV from $REQ (is PyPI reachable?); the reference tests will skip" >&2
fi
