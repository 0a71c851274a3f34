#!/usr/bin/env bash
# Builds the libFuzzer harness of the C core (tests/fuzz/c/fuzz_core.c linked with the .c files of csrc/'s core
# folders, not csrc/bindings, under AddressSanitizer and UndefinedBehaviorSanitizer) and runs it for N seconds.
#
#   bash tests/fuzz/c/run.sh [--seconds N] [--out DIR] [--build-only] [--kernels-O1] [-- LIBFUZZER_ARGS...]
#
# --seconds N    fuzz for N seconds (default 60)
# --out DIR      build and work in DIR (default: a new directory under /tmp; never the repository). The inputs
#                libFuzzer finds go to DIR/corpus; a crash is written as DIR/crash-<sha1> (keep it as a
#                regression input in tests/fuzz/c/crashers/ once fixed)
# --build-only   build DIR/fuzz_core and stop (tests/fuzz/test_fuzz_core.py builds this way)
# --kernels-O1   build kernels_avx2.c and kernels_avx512.c at -O1 like the rest. By default they are built at -O0:
#                clang 14 takes about 30 s for each at -O1 under the sanitizers and 2 s at -O0, and they stay
#                instrumented either way.
# The seed corpus (tests/fuzz/c/corpus) and the crashers (tests/fuzz/c/crashers) are read, never written.
# Exit status: libFuzzer's (0: no finding; a crash, leak, timeout or sanitizer report is non-zero).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
HERE="$ROOT/tests/fuzz/c"
SECS=60
OUT=""
BUILD_ONLY=0
KERNELS_OPT=-O0
EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) SECS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --build-only) BUILD_ONLY=1; shift ;;
        --kernels-O1) KERNELS_OPT=-O1; shift ;;
        --) shift; EXTRA=("$@"); break ;;
        *) echo "run.sh: unknown argument '$1'; usage: run.sh [--seconds N] [--out DIR] [--build-only] [--kernels-O1] [-- LIBFUZZER_ARGS...]" >&2; exit 2 ;;
    esac
done
case "$SECS" in ''|*[!0-9]*) echo "run.sh: --seconds takes a whole number, got '$SECS'" >&2; exit 2 ;; esac

if ! command -v clang >/dev/null; then
    echo "run.sh: clang is not installed; the C fuzzer needs clang and its libFuzzer runtime: apt-get install clang libclang-rt-14-dev (scripts/setup.sh installs both)" >&2
    exit 3
fi
MAJOR="$(clang -dumpversion | cut -d. -f1)"
FUZZER_LIB="$(clang -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a"
if [ ! -f "$FUZZER_LIB" ]; then
    echo "run.sh: clang's libFuzzer runtime ($FUZZER_LIB) is missing: apt-get install libclang-rt-$MAJOR-dev (scripts/setup.sh installs it)" >&2
    exit 3
fi

OUT="${OUT:-$(mktemp -d /tmp/ha_fuzz_core.XXXXXX)}"
mkdir -p "$OUT/obj" "$OUT/corpus"
# Recoverable UBSan checks (no -fno-sanitize-recover: it makes clang 14 take minutes over the SIMD kernel files);
# the harness's __ubsan_default_options sets halt_on_error=1, so the first report still ends the run.
CFLAGS=(-std=c11 -g -fno-omit-frame-pointer -fsanitize=address,undefined -ffp-contract=off -Wall -Wextra -pthread)
pids=()
objs=()
mapfile -t core < <(find "$ROOT/csrc" -name '*.c' -not -path "$ROOT/csrc/bindings/*" | sort)  # basenames are unique
for src in "${core[@]}" "$HERE/fuzz_core.c"; do
    name="$(basename "$src" .c)"
    opt=-O1
    case "$name" in kernels_avx2|kernels_avx512) opt="$KERNELS_OPT" ;; esac
    san=(-fsanitize=fuzzer-no-link)
    case "$name" in  # comparison tracing in the kernels' inner loops took 40% of the time and guides nothing
        kernels_*) san+=(-fno-sanitize-coverage=trace-cmp) ;;
        fuzz_core) san=(-fsanitize=fuzzer) ;;
    esac
    obj="$OUT/obj/$name.o"
    objs+=("$obj")
    clang "${CFLAGS[@]}" "$opt" "${san[@]}" -c "$src" -o "$obj" 2>"$OUT/obj/$name.log" &
    pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
        echo "run.sh: compiling ${objs[$i]%.o}.c failed:" >&2
        cat "${objs[$i]%.o}.log" >&2
        failed=1
    fi
done
[ "$failed" = 0 ] || exit 4
clang "${CFLAGS[@]}" -fsanitize=fuzzer "${objs[@]}" -o "$OUT/fuzz_core" -lopenblas -lm
echo "run.sh: built $OUT/fuzz_core"
[ "$BUILD_ONLY" = 1 ] && exit 0

# The core's pool and OpenBLAS must not pick up the caller's settings.
unset HA_KERNELS HA_NUM_THREADS
exec "$OUT/fuzz_core" -max_total_time="$SECS" -timeout=20 -rss_limit_mb=3072 -print_final_stats=1 \
    -artifact_prefix="$OUT/" "${EXTRA[@]}" "$OUT/corpus" "$HERE/corpus" "$HERE/crashers"
