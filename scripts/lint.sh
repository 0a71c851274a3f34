#!/usr/bin/env bash
# The style checks, each tool pinned in tests/tools-requirements.txt and run from a small virtual environment of its
# own (.venv-tools/, git-ignored; wheels from PyPI):
#   ruff check .                 the linter, pyproject.toml's [tool.ruff.lint] rules
#   ruff format --check .        the Python formatter ([tool.ruff.format]): files it would change fail
#   clang-format --dry-run       the C formatter over csrc/ and tests/c (.clang-format): files it would change fail
#   mypy                         the type checker over the package and tests/typing/ ([tool.mypy]), reading the
#                                packages (numpy's stubs) of Debian's /usr/bin/python3, which runs the package
#   stubtest habana_assist._core the extension's stub (habana_assist/_core.pyi) against the built module; skipped,
#                                saying so, where the extension is not built (scripts/setup.sh builds it)
# Every check runs, and the exit status is non-zero if any of them found something. `--env-only` builds the
# environment and stops. To apply the formatters:
#   .venv-tools/bin/ruff format . && git ls-files 'csrc/*.[ch]' 'tests/c/*.[ch]' | xargs .venv-tools/bin/clang-format -i
# The environment is reused while its stamp (the hash of the pins and of the interpreter's version) is unchanged;
# otherwise built anew. Where it cannot be built (no PyPI: a clone used offline) it says so and exits 0, the checks
# skipped; under CI (CI set) that is an error, so CI never skips them.
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
        "$VENV/bin/mypy" --version >/dev/null &&
        "$VENV/bin/clang-format" --version >/dev/null &&
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
[ "${1:-}" != "--env-only" ] || exit 0  # scripts/test.sh builds the environment early, beside other downloads
status=0
step() {  # step NAME COMMAND...: runs it; a failure is reported by name and remembered
    if ! "${@:2}"; then
        echo "lint: $1 failed (above)" >&2
        status=1
    fi
}
step "ruff check" "$VENV/bin/ruff" check .
step "ruff format --check" "$VENV/bin/ruff" format --check .
c_files=()
while IFS= read -r f; do c_files+=("$f"); done < <(git ls-files 'csrc/*.[ch]' 'tests/c/*.[ch]' 2>/dev/null ||
                                                     find csrc tests/c -name '*.[ch]' | sort)
step "clang-format" "$VENV/bin/clang-format" --dry-run --Werror "${c_files[@]}"
step "mypy" "$VENV/bin/mypy" --python-executable /usr/bin/python3
if compgen -G 'habana_assist/_core*.so' >/dev/null; then
    # Run by the venv's interpreter (Debian's python3, which the extension was built for) with Debian's packages
    # after the venv's on its path, so that the module imports, numpy with it.
    step "stubtest" "$VENV/bin/python" -c "import sys; sys.path[:0] = ['.']; sys.path.append('/usr/lib/python3/dist-packages')
from mypy.stubtest import main; sys.exit(main())" habana_assist._core
else
    echo "lint: habana_assist/_core*.so is not built (scripts/setup.sh); stubtest skipped" >&2
fi
exit $status
