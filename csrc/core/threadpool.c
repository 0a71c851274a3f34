/* A small pthread pool: n - 1 workers plus the calling thread take pieces of [0, n) in turn, so each index is
 * always computed whole by one call (results never depend on the thread count or on which thread took
 * what), and a thread slowed by another process delays a job by one piece at most. Workers spin briefly
 * for the next job (forward passes issue jobs back to back), then sleep on a condition variable. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "core.h"

#define HA_MAX_THREADS 256
#define SPIN_ROUNDS 20000
#define GRAINS 8 /* pieces per thread a job is cut into */

typedef struct pool {
    int n_threads;                 /* including the caller */
    pthread_t workers[HA_MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_uint_fast64_t generation; /* bumped once per job */
    atomic_int pending;            /* workers still running the current job */
    atomic_int stop;
    ha_range_fn fn;                /* the current job */
    void *ctx;
    int64_t n, grain;              /* indices, and how many a thread takes at a time */
    atomic_int_fast64_t next;      /* the first index no thread has taken yet */
} pool;

static pthread_mutex_t run_mu = PTHREAD_MUTEX_INITIALIZER; /* one job at a time; guards `current` */
static _Thread_local int run_alone; /* ha_pool_alone: this thread's jobs run on it alone */
static pool *current;
static int requested;              /* 0: default */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Each thread takes the next `grain` indices until none are left, so a thread that another process slows
 * down (a shared machine) holds up the others by one grain at most, not by its whole share. */
static void run_share(pool *p) {
    for (;;) {
        int64_t b = atomic_fetch_add_explicit(&p->next, p->grain, memory_order_relaxed);
        if (b >= p->n) return;
        p->fn(p->ctx, b, b + p->grain < p->n ? b + p->grain : p->n);
    }
}

static void *worker_main(void *arg) {
    pool *p = arg;
    uint_fast64_t seen = 0;
    for (;;) {
        int spins = 0;
        while (atomic_load_explicit(&p->generation, memory_order_acquire) == seen &&
               !atomic_load_explicit(&p->stop, memory_order_acquire)) {
            if (++spins < SPIN_ROUNDS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
        seen = atomic_load_explicit(&p->generation, memory_order_acquire);
        run_share(p);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
}

static int default_threads(void) {
    const char *env = getenv("HA_NUM_THREADS");
    if (env && *env) {
        long v = strtol(env, NULL, 10);
        if (v >= 1 && v <= HA_MAX_THREADS) return (int)v;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c >= 1) return c < HA_MAX_THREADS ? c : HA_MAX_THREADS;
    }
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c >= 1 && c <= HA_MAX_THREADS ? (int)c : 1;
}

static void pool_destroy(pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->workers[i], NULL);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* Requires run_mu held. On failure leaves `current` unchanged. */
static ha_status pool_create(int n, pool **out) {
    pool *p = calloc(1, sizeof *p);
    if (!p) return ha_fail(HA_ERR_NOMEM, "out of memory creating a pool of %d threads", n);
    p->n_threads = 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
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

void ha_parallel_for(ha_range_fn fn, void *ctx, int64_t n) {
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
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->grain = (n + (int64_t)p->n_threads * GRAINS - 1) / ((int64_t)p->n_threads * GRAINS);
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    if (p->n_threads > 1) {
        atomic_store_explicit(&p->pending, p->n_threads - 1, memory_order_relaxed);
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    run_share(p);
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
        if (spins < SPIN_ROUNDS) cpu_relax();
        else sched_yield();
    }
    pthread_mutex_unlock(&run_mu);
}
