/* The core's services, shared by every folder of csrc/ (never by the binding): error reporting, checked
 * allocation, a vector's maximum, the interrupt poll and the clock, the KV cache's memory, the thread pool. */
#ifndef HA_CORE_H
#define HA_CORE_H

#include <math.h>
#include <stdlib.h>

#include "../ha.h"

/* ---- errors (error.c) -------------------------------------------------------------------------------- */
/* Records a printf-style message for ha_last_error() and returns st, so callers write
 * `return ha_fail(HA_ERR_INVALID, "...", ...);`. */
ha_status ha_fail(ha_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* malloc of a * b elements of size es, NULL if that many bytes cannot even be counted. */
static inline void *ha_malloc_array(size_t a, size_t b, size_t es) {
    size_t n;
    if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, es, &n)) return NULL;
    return malloc(n ? n : 1);
}

/* The largest of s (n,) that is not NaN (-inf for none): attention's online softmax and the sampler's scores. Eight
 * running maxima side by side, then combined, so that the compiler keeps them in vector lanes rather than one chain
 * of n dependent steps (a greedy choice over 4096 scores took about 4 us as one); the same value as one running
 * maximum (maximum is exact; which of two zeros, when zero is the largest, may differ: they compare equal, and
 * exp(s - m) is the same for either). */
static inline float ha_max_of(const float *s, int64_t n) {
    float m[8] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY };
    int64_t t = 0;
    for (; t + 8 <= n; t += 8)
        for (int l = 0; l < 8; l++) m[l] = s[t + l] > m[l] ? s[t + l] : m[l];
    for (; t < n; t++) m[0] = s[t] > m[0] ? s[t] : m[0];
    for (int l = 1; l < 8; l++) m[0] = m[l] > m[0] ? m[l] : m[0];
    return m[0];
}

/* ---- interrupts and time (interrupt.c) ------------------------------------------------------------- */
/* Polls the calling thread's interrupt (ha.h, ha_set_interrupt): nonzero if it asked to stop, now or at an
 * earlier poll since it was set (then poll is not called again). Cheap where the poll is: call it between
 * pieces of work, on the thread that made the core call. */
int ha_interrupted(void);
/* Seconds on the monotonic clock (max_time's). */
double ha_now(void);

/* ---- memory (memory.c) ------------------------------------------------------------------------------- */
/* size bytes for a buffer every forward pass reads through (the KV cache); NULL if out of memory. From 2 MB up
 * (where the system has madvise's MADV_HUGEPAGE, and unless the environment sets HA_HUGE_PAGES=0), a private
 * anonymous mapping of its own at a 2 MB boundary, advised for transparent huge pages, so that reading it costs
 * fewer TLB misses (*mapped = 1); else malloc's (*mapped = 0). Freed with ha_free_streamed(p, the same size, the
 * same mapped). (csrc/core/memory.c) */
void *ha_alloc_streamed(size_t size, int *mapped);
void ha_free_streamed(void *p, size_t size, int mapped);

/* ---- thread pool (threadpool.c) ----------------------------------------------------------------------
 * fn(ctx, begin, end) is called on disjoint ranges covering [0, n): pieces [k*g, min((k+1)*g, n)) with
 * g = ceil(n / (ha_pool_grains(threads) * threads)), which the threads (the caller's among them) take in turn as they
 * finish the last, so which thread computes an index varies but each index is computed whole by one call; or, when
 * the caller runs the job alone, once on [0, n). It runs jobs alone with one thread, now and then to time
 * them, and for a while after the pool stopped paying (a worker descheduled by another process held up its
 * jobs, or two threads ran slower than one); the results are the same. Calls from several threads are
 * serialized. */
typedef void (*ha_range_fn)(void *ctx, int64_t begin, int64_t end);
/* Pieces per thread a job is cut into, for a pool of `threads` (the caller's among them): a thread done first takes
 * another (unequal cores, a late worker); more cost more than they balance: with 8 the shipped target's appends ran
 * 5-13% slower and its prompt chunks 5% (each piece a claim on counters both threads write, and a shorter run of a
 * matmul's rows). Two threads take one piece each: a worker that comes late still finds its piece taken by the
 * caller, and against two each the shipped target's appends took 0.94-1.00 of the time (T = 1 .. 16, w8a8 and
 * float32), prompt chunks of 64 0.99-1.01, the draft's appends 0.97-0.99, and beside a busy process default over 1
 * thread came out alike (an Intel Xeon, 2 cores; docs/kernels-and-performance.md). More threads keep two each, so
 * that faster cores take the pieces of slower ones (unmeasured). */
static inline int64_t ha_pool_grains(int threads) { return threads <= 2 ? 1 : 2; }
/* Never fails: if no thread can be started, the caller's thread runs all of [0, n). fn must not call
 * ha_parallel_for itself. */
void ha_parallel_for(ha_range_fn fn, void *ctx, int64_t n);
/* ha_parallel_for, where jobs of one fn and n differ in size: key tells them apart (e.g. a matmul's multiply-adds), so
 * that each is timed against its own time alone. ha_parallel_for's jobs have key 0. */
void ha_parallel_for_kind(ha_range_fn fn, void *ctx, int64_t n, uint64_t key);
/* Starts the pool if none runs (so that a failure to start threads is reported where it can be). */
ha_status ha_pool_ensure(void);
/* on != 0: the calling thread's jobs run on that thread alone, leaving the pool's workers asleep (the assisted
 * loop's thread drafting ahead, generation/assist_ahead.c, so that it takes one core beside a caller's thread that
 * is busy elsewhere); 0: on the pool. */
void ha_pool_alone(int on);
/* The threads the calling thread's jobs run on: 1 where ha_pool_alone is on (without waiting for another thread's
 * job), else ha_get_num_threads(). */
int ha_pool_threads_here(void);

/* ---- CPUs (cpus.c) ---------------------------------------------------------------------------------------
 * The CPUs this process may use: its affinity mask's count, lowered to what its cgroups' CPU quota allows. The
 * cgroup files are read under $HA_CGROUP_ROOT if set (tests), else /sys/fs/cgroup: v2's cpu.max, v1's
 * cpu/cpu.cfs_quota_us over cpu.cfs_period_us, along the process's cgroup path (/proc/self/cgroup) and each
 * folder above it; a quota of q CPUs' time counts as ceil(q) CPUs. */
int ha_cpus_available(void);
/* The cgroup quota alone, in CPUs (rounded up); 0 when there is none. */
int ha_cgroup_cpu_limit(void);
/* Bytes of the last-level cache (the L3's, else the L2's) as the C library reports it; 0 when it does not. */
int64_t ha_llc_bytes(void);

#endif /* HA_CORE_H */
