/* A small pthread pool: n - 1 workers plus the calling thread take pieces of [0, n) in turn, so each index is
 * always computed whole by one call (results never depend on the thread count, on which thread took what, or
 * on whether the caller ran a job alone, in one call: cheaper than its pieces one by one).
 *
 * Built for cores that other processes share (laptops, notebooks, CI, containers with a CPU quota), where a
 * thread of ours is descheduled for a scheduler slice (milliseconds) at any moment, against jobs of tens of
 * microseconds (a decode step issues dozens back to back):
 *  - a job is complete when its pieces are, not when every worker has shown up: a worker that wakes late finds
 *    nothing left and touches nothing, so the caller never waits for a thread that took no piece;
 *  - waiting is bounded by time, not rounds: workers spin WORKER_SPIN_NS for the next job, the caller
 *    CALLER_SPIN_NS for pieces still running, then each sleeps on a futex, which hands its core to whichever
 *    thread (perhaps the one holding the last piece) the scheduler runs there;
 *  - a worker descheduled while holding a piece still holds up its job, which nothing can take back without
 *    computing an index twice; and two threads can be slower than one where they share a core's units or its
 *    memory bandwidth with others. So the caller times jobs: each kind of job (its function and size, and the
 *    caller's key where one function's jobs of one size differ) now and then alone (ALONE_EVERY), and the rest
 *    on the pool, whose time it holds against the kind's time alone.
 *    When the pool's jobs stop paying (their balance, capped at CREDIT_MAX_NS, goes negative) it runs every
 *    job alone for a while: BACKOFF_MIN_NS at first, BACKOFF_GROWTH times longer while the pool keeps
 *    losing, up to BACKOFF_MAX_NS, then tries the pool again. On an idle machine the pool does not lose and
 *    this never triggers; beside a busy process the default costs about what one thread does. */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

#define HA_MAX_THREADS 256
#define WORKER_SPIN_NS 100000         /* a forward's jobs come microseconds apart; between calls, sleep */
#define CALLER_SPIN_NS 30000          /* pieces in flight take a few microseconds unless their thread is off */
#define CREDIT_MAX_NS 2000000         /* the most the pool's past gains can excuse of a stall */
#define CREDIT_PROBE_NS 300000        /* the balance a try of the pool starts with */
#define BACKOFF_MIN_NS 4000000         /* a try that loses costs about a scheduler slice: try rarely */
#define BACKOFF_GROWTH 4
#define BACKOFF_MAX_NS 512000000
#define ALONE_EVERY 64                /* of a kind's jobs, one runs alone to keep its time alone current */
#define KINDS 256                     /* kinds of job timed at once: a forward has a dozen for each chunk size */
#define UNCLAIMED 0xFFFFFFFFu         /* a piece number above any job's: nothing to take while a job is set up */

/* A kind of job, and what running it alone takes. */
typedef struct kind {
    ha_range_fn fn;
    int64_t n;
    uint64_t key;                     /* the caller's word on what else sets its size (ha_parallel_for_kind) */
    int64_t alone_ns;                 /* a moving average of its times alone; 0: not timed yet */
    unsigned jobs;
    uint64_t used;                    /* when last looked up (a count of lookups): the least recent one makes room */
} kind;

typedef struct pool {
    int n_threads;                    /* including the caller */
    pthread_t workers[HA_MAX_THREADS];
    /* The current job: written by the caller only while `claim` says UNCLAIMED, read by a worker before it
     * claims a piece (a claim that succeeds proves what it read was this job's). Atomics only because a late
     * worker may read them while the next job is being set up. */
    _Atomic(ha_range_fn) fn;
    _Atomic(void *) ctx;
    atomic_int_fast64_t n, grain;
    atomic_uint pieces;
    atomic_uint_fast64_t claim;       /* (job number << 32) | the next piece no thread has taken */
    atomic_uint done;                 /* pieces of the current job finished (a futex word: the caller sleeps on it) */
    atomic_uint caller_asleep;
    atomic_uint job;                  /* the latest job number (a futex word: idle workers sleep on it) */
    atomic_uint sleepers;             /* workers asleep, or about to be, on `job` */
    atomic_int stop;
    ha_pool_stats stats;
} pool;

/* When the pool pays (see the top of this file): the caller's bookkeeping, under run_mu. It outlives a pool, so
 * that changing the thread count keeps what was learnt of the machine's load and of each kind's time alone. */
static struct {
    int64_t credit, backoff, alone_until;
    uint64_t lookups;
    kind kinds[KINDS];
} policy = { .credit = CREDIT_PROBE_NS, .backoff = BACKOFF_MIN_NS };

static pthread_mutex_t run_mu = PTHREAD_MUTEX_INITIALIZER; /* one job at a time; guards `current` */
static _Thread_local int run_alone; /* ha_pool_alone: this thread's jobs run on it alone */
static pool *current;
static int requested;              /* 0: default */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Sleeps while *word == expected (returns at once if it differs, or on any wake or signal). */
static void futex_wait(atomic_uint *word, unsigned expected) {
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(atomic_uint *word, int count) {
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

/* Takes pieces of the current job, one at a time, until none is left. */
static void run_pieces(pool *p) {
    uint_fast64_t w = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        const uint32_t k = (uint32_t)w;
        if (k == UNCLAIMED) return;
        ha_range_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
        const int64_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
        const int64_t grain = atomic_load_explicit(&p->grain, memory_order_relaxed);
        const unsigned pieces = atomic_load_explicit(&p->pieces, memory_order_relaxed);
        /* The caller marks `claim` UNCLAIMED before it rewrites the job (release fence between): if what was
         * just read is the next job's, that mark is visible to the claim below, which then fails. */
        atomic_thread_fence(memory_order_acquire);
        if (k >= pieces) return;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &w, w + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        const int64_t b = (int64_t)k * grain;
        fn(ctx, b, b + grain < n ? b + grain : n);
        if (atomic_fetch_add(&p->done, 1) + 1 == pieces && atomic_load(&p->caller_asleep)) futex_wake(&p->done, 1);
        w = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

/* Waits until the job number differs from `seen` or the pool stops; returns the job number. */
static unsigned wait_for_job(pool *p, unsigned seen) {
    int64_t until = 0;
    for (unsigned i = 1;; i++) {
        const unsigned j = atomic_load_explicit(&p->job, memory_order_acquire);
        if (j != seen || atomic_load_explicit(&p->stop, memory_order_acquire)) return j;
        if (i % 64 == 0) { /* the clock now and then: a pause is tens of cycles, the clock a few hundred */
            const int64_t t = now_ns();
            if (!until) {
                until = t + WORKER_SPIN_NS;
            } else if (t >= until) {
                /* Announce, then check again: the caller stores `job` before it reads `sleepers`. */
                atomic_fetch_add(&p->sleepers, 1);
                if (atomic_load(&p->job) == seen && !atomic_load(&p->stop)) futex_wait(&p->job, seen);
                atomic_fetch_sub(&p->sleepers, 1);
                until = 0;
            }
        }
        cpu_relax();
    }
}

static void *worker_main(void *arg) {
    pool *p = arg;
    unsigned seen = 0;
    for (;;) {
        seen = wait_for_job(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
        run_pieces(p);
    }
}

/* Waits until the current job's `pieces` are all done. */
static void wait_done(pool *p, unsigned pieces) {
    int64_t until = 0;
    for (unsigned i = 1; atomic_load_explicit(&p->done, memory_order_acquire) != pieces; i++) {
        if (i % 64 == 0) {
            const int64_t t = now_ns();
            if (!until) {
                until = t + CALLER_SPIN_NS;
            } else if (t >= until) {
                atomic_store(&p->caller_asleep, 1);
                const unsigned d = atomic_load(&p->done);
                if (d != pieces) futex_wait(&p->done, d);
                atomic_store(&p->caller_asleep, 0);
                p->stats.caller_sleeps++;
                continue;
            }
        }
        cpu_relax();
    }
}

static int default_threads(void) {
    const char *env = getenv("HA_NUM_THREADS");
    if (env && *env) {
        long v = strtol(env, NULL, 10);
        if (v >= 1 && v <= HA_MAX_THREADS) return (int)v;
    }
    int c = ha_cpus_available();
    return c < 1 ? 1 : c < HA_MAX_THREADS ? c : HA_MAX_THREADS;
}

static void pool_destroy(pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->job, 1);
    futex_wake(&p->job, INT_MAX);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->workers[i], NULL);
    free(p);
}

/* Requires run_mu held. On failure leaves `current` unchanged. */
static ha_status pool_create(int n, pool **out) {
    pool *p = calloc(1, sizeof *p);
    if (!p) return ha_fail(HA_ERR_NOMEM, "out of memory creating a pool of %d threads", n);
    p->n_threads = 1;
    atomic_store(&p->claim, UNCLAIMED);
    for (int i = 1; i < n; i++) {
        if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
            pool_destroy(p);
            return ha_fail(HA_ERR_NOMEM, "could not start thread %d of %d; ask for fewer threads", i + 1, n);
        }
        p->n_threads = i + 1;
    }
    *out = p;
    return HA_OK;
}

/* After fork() the child has this pool's memory but none of its threads: forget the pool (leaking it; its
 * threads are gone) and start afresh on next use. */
static void forget_pool_in_child(void) {
    current = NULL;
    pthread_mutex_init(&run_mu, NULL);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) { (void)pthread_atfork(NULL, NULL, forget_pool_in_child); }

ha_status ha_set_num_threads(int n) {
    if (n < 1 || n > HA_MAX_THREADS)
        return ha_fail(HA_ERR_INVALID, "num_threads=%d is out of range; pass 1..%d", n, HA_MAX_THREADS);
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&run_mu);
    ha_status st = HA_OK;
    if (!current || current->n_threads != n) {
        /* Stop the old pool before starting the new one (two would fight for the cores), and if the new
         * pool cannot start, fall back to the old size rather than to no pool. */
        int old = current ? current->n_threads : 0;
        pool *p = NULL;
        pool_destroy(current);
        current = NULL;
        st = pool_create(n, &p);
        if (st == HA_OK) current = p;
        else if (old > 0 && pool_create(old, &p) == HA_OK) current = p;
    }
    if (st == HA_OK) requested = n;
    pthread_mutex_unlock(&run_mu);
    return st;
}

int ha_get_num_threads(void) {
    pthread_mutex_lock(&run_mu);
    int n = current ? current->n_threads : requested ? requested : default_threads();
    pthread_mutex_unlock(&run_mu);
    return n;
}

ha_status ha_pool_ensure(void) {
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&run_mu);
    ha_status st = HA_OK;
    if (!current) {
        pool *p = NULL;
        st = pool_create(requested ? requested : default_threads(), &p);
        if (st == HA_OK) current = p;
    }
    pthread_mutex_unlock(&run_mu);
    return st;
}

void ha_pool_alone(int on) { run_alone = on; }

int ha_pool_threads_here(void) { return run_alone ? 1 : ha_get_num_threads(); }

/* The pieces of [0, n) for `threads` threads: grain indices each, the last one short. */
static int64_t grain_for(int64_t n, int threads) {
    const int64_t parts = (int64_t)threads * ha_pool_grains(threads);
    return (n + parts - 1) / parts;
}

/* The kind's slot: the first on from its hash that holds it, or else the first empty one (none is ever emptied), or
 * else, the table full, the least recently used. (With one slot per hash, two kinds of one forward that met in it,
 * as they may by where the library is loaded, took it from each other at every job, and both ran alone every time as
 * kinds not yet timed.) */
static kind *kind_of(pool *p, ha_range_fn fn, int64_t n, uint64_t key) {
    const uint64_t h = (((uint64_t)(uintptr_t)fn >> 4) * 0x9E3779B97F4A7C15u ^ (uint64_t)n * 0xC2B2AE3D27D4EB4Fu ^
                        key * 0xD6E8FEB86659FD93u) >>
                       32;
    const uint64_t now = ++policy.lookups;
    kind *room = NULL;
    for (int i = 0; i < KINDS; i++) {
        kind *k = &policy.kinds[(h + (uint64_t)i) % KINDS];
        if (!k->fn) {
            room = k;
            break;
        }
        if (k->fn == fn && k->n == n && k->key == key) {
            k->used = now;
            return k;
        }
        if (!room || k->used < room->used) room = k;
    }
    *room = (kind){ .fn = fn, .n = n, .key = key, .used = now };
    p->stats.kinds_new++;
    return room;
}

/* A time alone into the kind's average; a time far above it (the caller descheduled, which costs alike
 * alone or not) moves it by at most the average itself. */
static void time_alone(kind *k, int64_t ns) {
    if (k->alone_ns == 0) k->alone_ns = ns;
    else k->alone_ns += ((ns < 2 * k->alone_ns ? ns : 2 * k->alone_ns) - k->alone_ns) / 4;
}

/* Whether the pool paid for a job that took `took` ns on it (see the top of this file). */
static void account(pool *p, const kind *k, int64_t took, int64_t now) {
    policy.credit += k->alone_ns - took;
    if (policy.credit >= CREDIT_MAX_NS) { /* the pool pays again: forget earlier losses */
        policy.credit = CREDIT_MAX_NS;
        policy.backoff = BACKOFF_MIN_NS;
    } else if (policy.credit < 0) {
        policy.alone_until = now + policy.backoff;
        p->stats.backoffs++;
        const int64_t longer = policy.backoff * BACKOFF_GROWTH;
        policy.backoff = longer < BACKOFF_MAX_NS ? longer : BACKOFF_MAX_NS;
        policy.credit = CREDIT_PROBE_NS; /* the next try wakes sleeping workers: some slack for that */
    }
}

void ha_parallel_for(ha_range_fn fn, void *ctx, int64_t n) { ha_parallel_for_kind(fn, ctx, n, 0); }

void ha_parallel_for_kind(ha_range_fn fn, void *ctx, int64_t n, uint64_t key) {
    if (n <= 0) return;
    if (run_alone) { /* the same results: every index is computed whole whichever thread takes it */
        fn(ctx, 0, n);
        return;
    }
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&run_mu);
    if (!current) {
        pool *p = NULL;
        if (pool_create(requested ? requested : default_threads(), &p) == HA_OK) current = p;
    }
    pool *p = current;
    if (!p) { /* no thread could be started: the caller's thread does it all, with the same results */
        pthread_mutex_unlock(&run_mu);
        fn(ctx, 0, n);
        return;
    }
    const int64_t grain = grain_for(n, p->n_threads);
    const unsigned pieces = (unsigned)((n + grain - 1) / grain);
    if (p->n_threads == 1 || pieces == 1) {
        fn(ctx, 0, n);
        pthread_mutex_unlock(&run_mu);
        return;
    }
    kind *k = kind_of(p, fn, n, key);
    const int64_t t0 = now_ns();
    if (t0 < policy.alone_until || k->alone_ns == 0 || ++k->jobs % ALONE_EVERY == 0) {
        p->stats.jobs_alone++;
        fn(ctx, 0, n);
        time_alone(k, now_ns() - t0);
        pthread_mutex_unlock(&run_mu);
        return;
    }
    p->stats.jobs_pooled++;
    /* Set up the job while no piece can be claimed (see run_pieces), then open it and wake the sleepers. */
    const uint_fast64_t job = (uint_fast64_t)atomic_load_explicit(&p->job, memory_order_relaxed) + 1;
    atomic_store(&p->claim, ((job & 0xFFFFFFFFu) << 32) | UNCLAIMED);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n, n, memory_order_relaxed);
    atomic_store_explicit(&p->grain, grain, memory_order_relaxed);
    atomic_store_explicit(&p->pieces, pieces, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->claim, (job & 0xFFFFFFFFu) << 32, memory_order_release);
    atomic_store(&p->job, (unsigned)job);
    if (atomic_load(&p->sleepers)) {
        p->stats.jobs_waking++;
        futex_wake(&p->job, INT_MAX);
    }
    run_pieces(p);
    wait_done(p, pieces);
    const int64_t t1 = now_ns();
    account(p, k, t1 - t0, t1);
    pthread_mutex_unlock(&run_mu);
}

void ha_pool_get_stats(ha_pool_stats *out) {
    pthread_mutex_lock(&run_mu);
    if (current) *out = current->stats;
    else *out = (ha_pool_stats){ 0 };
    if (current) out->workers_asleep = atomic_load(&current->sleepers);
    pthread_mutex_unlock(&run_mu);
}
