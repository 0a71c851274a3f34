#!/usr/bin/env bash
# The main job: sets up what the demo needs (scripts/setup.sh: its packages, the build), then runs the demo: the
# shipped pair completes held-out standard-library code, plain then assisted (streamed), and prints tokens/s,
# speed-up, acceptance rate and whether the two outputs are identical. Extra arguments go to the demo (see
# python3 -m habana_assist demo --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec /usr/bin/python3 -m habana_assist demo "$@"
