#!/usr/bin/env bash
# The test command: sets everything up (scripts/setup.sh), then runs the whole suite, the C core's own
# tests under AddressSanitizer and UndefinedBehaviorSanitizer included (tests/test_c_core.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider tests "$@"
