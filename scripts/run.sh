#!/usr/bin/env bash
# The main job: sets everything up (scripts/setup.sh), then runs the decode benchmark on a random
# checkpoint with TinyLlama-1.1B's shape (benchmarks/bench_decode.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec /usr/bin/python3 benchmarks/bench_decode.py "$@"
