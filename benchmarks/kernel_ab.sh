#!/usr/bin/env bash
# A/B of the AVX2 kernels: csrc/kernels/kernels_avx2.c (csrc/kernels_avx2.c before the layout by layer) at git
# revision REV, or the file REV (A), against the working tree's (B), timed alternately in one process with their
# outputs compared bitwise (benchmarks/kernel_ab.c); A is compiled against the working tree's headers (but REV's
# kernels_panels.h, the panel driver; an A that includes the old "internal.h" gets the working tree's kernels.h
# for it), so it must share the kernel table's layout: commits from
# the one that added int4 on (panel formats need A from the one that added float panels on; kernel_ab refuses
# otherwise). FORMAT: f32, bf16, f16, int8, int4, or f32p, bf16p, f16p (float panels); or w8a8 (int8 panels times
# int8 activations), which compares the AVX-512 kernels instead: csrc/kernels/kernels_avx512.c at REV (or the file
# REV) against the working tree's, on a CPU with AVX-512 F, BW and VNNI (A from the commit that added w8a8 on);
# w8a8c the same through each build's matmul_w8a8_cached (the shape for weights the caches hold) where it has one.
# FORMAT scores times attention's scores of those two AVX-512 builds instead: ROWS keys of N floats, each T value a
# number of queries scored together (a kv group's heads, times a verification's tokens).
# For example
#   bash benchmarks/kernel_ab.sh HEAD bf16 16384 2048 8 1 2 5 8 16   # 64 MB of bf16 rows: from memory
#   bash benchmarks/kernel_ab.sh HEAD int8 64 2048 50 1 3 8          # rows that stay in L2
#   bash benchmarks/kernel_ab.sh HEAD w8a8 65536 2048 8 1 4 8 16     # 136 MB of w8a8 panels: from memory
#   bash benchmarks/kernel_ab.sh HEAD scores 256 64 7 1 4 8 16 20 32  # 64-wide heads over 256 positions
# Pin it to one core (taskset -c 0 ...) to compare single-thread kernels; the kernels run on the caller's thread.
set -euo pipefail
rev=${1:?usage: kernel_ab.sh REV FORMAT ROWS N ROUNDS T...}
shift
src=kernels_avx2.c
ab=()
if [ "${1:-}" = w8a8 ] || [ "${1:-}" = w8a8c ] || [ "${1:-}" = scores ]; then  # the AVX-512 kernels: A's table renamed, B's kept; kernel_ab.c told so
    src=kernels_avx512.c
    ab=(-DKERNEL_AB_AVX512)
fi
if [ -f "$rev" ]; then rev=$(realpath "$rev"); fi  # a file named from the caller's directory, before the cd
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -f "$rev" ]; then  # a variant of the file, e.g. an experiment
    cp "$rev" "$tmp/kernels_a.c"
elif git rev-parse --verify --quiet "$rev^{commit}" > /dev/null; then
    dir=csrc/kernels  # REV's kernels: in csrc/kernels/ since the layout by layer, in csrc/ before it
    git cat-file -e "$rev:$dir/$src" 2> /dev/null || dir=csrc
    if ! git show "$rev:$dir/$src" > "$tmp/kernels_a.c" 2> /dev/null; then
        echo "kernel_ab.sh: '$rev' has no $src; pick a later revision" >&2
        exit 2
    fi
    # REV's panel driver, where it has one: kernels_a.c's #include "kernels_panels.h" finds it beside itself first
    if git cat-file -e "$rev:$dir/kernels_panels.h" 2> /dev/null; then git show "$rev:$dir/kernels_panels.h" > "$tmp/kernels_panels.h"; fi
    # and its w8a8 kernel, where kernels_avx2.c includes it (since the AVX-VNNI variant shares it)
    if git cat-file -e "$rev:$dir/kernels_w8a8_avx2.h" 2> /dev/null; then git show "$rev:$dir/kernels_w8a8_avx2.h" > "$tmp/kernels_w8a8_avx2.h"; fi
else
    echo "kernel_ab.sh: '$rev' is neither a file nor a commit of a git checkout here; run it in a clone" >&2
    exit 2
fi
cc=${CC:-cc}  # compiled at the lowest priority (beside others timing things), timed at the caller's
# KERNEL_AB_NICE: the compilers' niceness (default 19; the test suite, whose other tests run beside, sets 0)
niceness=${KERNEL_AB_NICE:-19}
printf '#include "kernels.h"\n' > "$tmp/internal.h"  # what an A from before the layout by layer includes
flags=(-std=c11 -O2 -ffp-contract=off -Icsrc/kernels -Icsrc)
# The objects compiled side by side (one process each), then linked. compile OUT SRC [FLAGS...]; with KERNEL_AB_CACHE
# set (a directory), an object is kept there under the hash of the compiler, its flags and its preprocessed source,
# and taken from there when the same is asked again (the AVX-512 kernels take most of a minute each to compile).
pids=()
compile() {
    local out=$1 in=$2
    shift 2
    (
        key=
        if [ -n "${KERNEL_AB_CACHE:-}" ]; then
            key=$({ "$cc" --version; echo "${flags[*]} $*"; "$cc" "${flags[@]}" "$@" -E -P "$in"; } | sha256sum | cut -d' ' -f1)
            if cp "$KERNEL_AB_CACHE/$key.o" "$out" 2> /dev/null; then exit 0; fi
        fi
        nice -n "$niceness" "$cc" "${flags[@]}" "$@" -c "$in" -o "$out"
        if [ -n "$key" ]; then
            { mkdir -p "$KERNEL_AB_CACHE" && cp "$out" "$KERNEL_AB_CACHE/$key.o.$BASHPID" &&
                mv "$KERNEL_AB_CACHE/$key.o.$BASHPID" "$KERNEL_AB_CACHE/$key.o"; } || true  # a cache, nothing more
        fi
    ) &
    pids+=($!)
}
if [ "$src" = kernels_avx512.c ]; then
    # A's entry points renamed (its table takes the working tree's AVX2 entries, as B's does); AVX2's table linked
    compile "$tmp/a.o" "$tmp/kernels_a.c" -Dha_kernels_avx512=kernels_a -Dha_avx512_bf16x_kernel=kernels_a_bf16x
    compile "$tmp/b.o" csrc/kernels/kernels_avx512.c
    compile "$tmp/avx2.o" csrc/kernels/kernels_avx2.c
    extra=("$tmp/avx2.o")
else
    compile "$tmp/a.o" "$tmp/kernels_a.c" -Dha_kernels_avx2=kernels_a
    compile "$tmp/b.o" csrc/kernels/kernels_avx2.c  # B keeps its name: dispatch.c's check links to it
    extra=()
fi
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done  # every one waited for before the trap removes $tmp
if [ "$failed" = 1 ]; then
    echo "kernel_ab.sh: a build failed (the compiler's messages above)" >&2
    exit 1
fi
nice -n "$niceness" "$cc" "${flags[@]}" "${ab[@]}" benchmarks/kernel_ab.c "$tmp/a.o" "$tmp/b.o" "${extra[@]}" csrc/kernels/dispatch.c csrc/kernels/kernels_scalar.c \
    csrc/kernels/formats.c csrc/core/error.c csrc/core/threadpool.c csrc/core/cpus.c csrc/model/quant.c csrc/generation/sampling.c \
    -o "$tmp/kernel_ab" -pthread -lm
"$tmp/kernel_ab" "$@"
