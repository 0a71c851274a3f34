#!/usr/bin/env bash
# The long fuzz run (minutes; the test suite runs a short deterministic one of each): every parser of outside
# bytes (tests/fuzz/fuzz_parsers.py: safetensors files and sharded indexes, config.json, generation_config.json,
# tokenizer files, the whole load), the C core's public entry points under libFuzzer with ASan/UBSan
# (tests/fuzz/c/run.sh) and the binding with random arguments (tests/fuzz/fuzz_binding.py).
#
#   bash scripts/fuzz.sh [SECONDS_PER_FUZZER]     (default 300; SEED=N picks the parsers' and binding's seed)
#
# Each prints its executions and findings; failing parser inputs are saved under tests/fuzz/found/ (replay
# with fuzz_parsers.py --replay DIR), a C crash as crash-<sha1> in the directory run.sh names. Exit status:
# non-zero if any fuzzer found something.
set -uo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-300}"
bash scripts/setup.sh
status=0
echo "== parsers (${SECS} s)"
/usr/bin/python3 tests/fuzz/fuzz_parsers.py --seconds "$SECS" --seed "${SEED:-1}" --save tests/fuzz/found || status=1
echo "== C core under libFuzzer (${SECS} s)"
bash tests/fuzz/c/run.sh --seconds "$SECS" || status=1
echo "== binding (${SECS} s)"
/usr/bin/python3 tests/fuzz/fuzz_binding.py --seconds "$SECS" --seed "${SEED:-1}" || status=1
exit $status
