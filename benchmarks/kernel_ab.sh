#!/usr/bin/env bash
# A/B of the AVX2 kernels: csrc/kernels_avx2.c at git revision REV, or the file REV (A), against the working
# tree's (B), timed alternately in one process with their outputs compared bitwise (benchmarks/kernel_ab.c);
# A is compiled against the working tree's headers (but REV's csrc/kernels_panels.h, the panel driver), so it
# must share the kernel table's layout: commits from
# the one that added int4 on (panel formats need A from the one that added float panels on; kernel_ab refuses
# otherwise). FORMAT: f32, bf16, f16, int8, int4, or f32p, bf16p, f16p (float panels). For example
#   bash benchmarks/kernel_ab.sh HEAD bf16 16384 2048 8 1 2 5 8 16   # 64 MB of bf16 rows: from memory
#   bash benchmarks/kernel_ab.sh HEAD int8 64 2048 50 1 3 8          # rows that stay in L2
# Pin it to one core (taskset -c 0 ...) to compare single-thread kernels; the kernels run on the caller's thread.
set -euo pipefail
rev=${1:?usage: kernel_ab.sh REV FORMAT ROWS N ROUNDS T...}
shift
if [ -f "$rev" ]; then rev=$(realpath "$rev"); fi  # a file named from the caller's directory, before the cd
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -f "$rev" ]; then  # a variant of the file, e.g. an experiment
    cp "$rev" "$tmp/kernels_a.c"
elif git rev-parse --verify --quiet "$rev^{commit}" > /dev/null; then
    git show "$rev:csrc/kernels_avx2.c" > "$tmp/kernels_a.c"
    # REV's panel driver, where it has one: kernels_a.c's #include "kernels_panels.h" finds it beside itself first
    if git cat-file -e "$rev:csrc/kernels_panels.h" 2> /dev/null; then git show "$rev:csrc/kernels_panels.h" > "$tmp/kernels_panels.h"; fi
else
    echo "kernel_ab.sh: '$rev' is neither a file nor a commit of a git checkout here; run it in a clone" >&2
    exit 2
fi
cc=${CC:-cc}
flags=(-std=c11 -O2 -ffp-contract=off -Icsrc)
"$cc" "${flags[@]}" -Dha_kernels_avx2=kernels_a -c "$tmp/kernels_a.c" -o "$tmp/a.o"
"$cc" "${flags[@]}" -c csrc/kernels_avx2.c -o "$tmp/b.o"  # B keeps its name: dispatch.c's check links to it
"$cc" "${flags[@]}" benchmarks/kernel_ab.c "$tmp/a.o" "$tmp/b.o" csrc/dispatch.c csrc/kernels_scalar.c csrc/error.c \
    csrc/quant.c csrc/sampling.c csrc/threadpool.c -o "$tmp/kernel_ab" -pthread -lm
"$tmp/kernel_ab" "$@"
