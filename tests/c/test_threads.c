#include "test_core.h"

/* ---- 8. thread pool ------------------------------------------------------------------------------------- */

void test_threads_set_get_and_reject(void) {
    CHECK_STATUS(ha_set_num_threads(0), HA_ERR_INVALID);
    CHECK_MSG("num_threads=0");
    CHECK_STATUS(ha_set_num_threads(100000), HA_ERR_INVALID);
    CHECK_MSG("100000");
    CHECK_STATUS(ha_set_num_threads(-3), HA_ERR_INVALID);
    CHECK(ha_get_num_threads() >= 1, "default thread count expected >= 1, got %d", ha_get_num_threads());
    CHECK_OK(ha_set_num_threads(3));
    CHECK(ha_get_num_threads() == 3, "after setting 3 expected 3 threads, got %d", ha_get_num_threads());
    CHECK_STATUS(ha_set_num_threads(0), HA_ERR_INVALID);
    CHECK(ha_get_num_threads() == 3, "a rejected setting expected to keep 3 threads, got %d", ha_get_num_threads());
    CHECK_OK(ha_set_num_threads(3));
    CHECK_OK(ha_set_num_threads(1));
    CHECK(ha_get_num_threads() == 1, "after setting 1 expected 1 thread, got %d", ha_get_num_threads());
}

void test_threads_switching_keeps_results(void) {
    const char *vn[NVARIANTS];
    int nv = forward_variants(vn);
    CHECK_OK(ha_kernels_select(vn[nv - 1]));
    tiny *t = tiny_build(HA_BF16, 1, 0, 0, 51);
    float ref[12 * TV], got[12 * TV];
    CHECK_OK(ha_set_num_threads(1));
    workload(t->m, NULL, ref);
    ha_llama_context *kept = ctx_new(t->m, 2, 16); /* created under 1 thread, used under all */
    const int counts[] = { 2, 3, 1, 3, 2, 1, 2, 3, 3, 1 };
    for (size_t i = 0; i < COUNT(counts); i++) {
        CHECK_OK(ha_set_num_threads(counts[i]));
        CHECK(ha_get_num_threads() == counts[i], "expected %d threads, got %d", counts[i], ha_get_num_threads());
        workload(t->m, NULL, got);
        CHECK_SAME_FLOATS(ref, got, 12 * TV, "switch %zu to %d threads, new context", i, counts[i]);
        workload(t->m, kept, got);
        CHECK_SAME_FLOATS(ref, got, 12 * TV, "switch %zu to %d threads, reused context", i, counts[i]);
    }
    ha_llama_context_free(kept);
    CHECK_OK(ha_set_num_threads(1));
    tiny_free(t);
}

typedef struct cover_job {
    int64_t n;
    int *hits;              /* (n,) */
    atomic_int calls;
    int64_t begins[64], ends[64];
} cover_job;

static void cover_range(void *ctx, int64_t b, int64_t e) {
    cover_job *j = ctx;
    int k = atomic_fetch_add(&j->calls, 1);
    if (k < 64) {
        j->begins[k] = b;
        j->ends[k] = e;
    }
    for (int64_t i = b; i < e; i++) j->hits[i]++;
}

void test_threads_parallel_for_covers_range(void) {
    const int64_t ns[] = { 0, 1, 2, 3, 5, 17, 100, 1000 };
    for (int nt = 1; nt <= 4; nt++) {
        CHECK_OK(ha_set_num_threads(nt));
        for (size_t a = 0; a < COUNT(ns); a++) {
            const int64_t n = ns[a];
            cover_job j = { .n = n, .hits = xcalloc((size_t)n + 1, sizeof(int)) };
            atomic_init(&j.calls, 0);
            ha_parallel_for(cover_range, &j, n);
            for (int64_t i = 0; i < n; i++)
                CHECK(j.hits[i] == 1, "%d threads, n=%lld: index %lld expected once, got %d times", nt, (long long)n,
                      (long long)i, j.hits[i]);
            int calls = atomic_load(&j.calls);
            /* threads take pieces of ceil(n / (ha_pool_grains(nt) nt)) indices as they finish the last; or the caller
             * runs [0, n) alone in one call */
            const int64_t parts = ha_pool_grains(nt) * nt, grain = (n + parts - 1) / parts;
            CHECK(n == 0 ? calls == 0 : calls >= 1 && calls <= parts,
                  "%d threads, n=%lld: expected 1..%lld calls (0 for n=0), got %d", nt, (long long)n, (long long)parts,
                  calls);
            for (int k = 0; k < calls && k < 64; k++) {
                const int64_t b = j.begins[k], e = j.ends[k];
                const int whole = calls == 1 && b == 0 && e == n;
                const int piece = whole || (b / grain * grain == b && e == (b + grain < n ? b + grain : n));
                CHECK(piece,
                      "%d threads, n=%lld: range [%lld, %lld) is neither [0, n) whole nor a piece "
                      "[k*%lld, min((k+1)*%lld, n))",
                      nt, (long long)n, (long long)b, (long long)e, (long long)grain, (long long)grain);
            }
            free(j.hits);
        }
    }
    ha_parallel_for(cover_range, NULL, -5); /* nothing to do: fn is never called */
    CHECK_OK(ha_set_num_threads(1));
}

typedef struct caller_arg {
    const ha_llama *m;
    const float *ref;
    int rounds;
    int mismatches;
    atomic_int *stop;
    int toggler;
    int bad_status;
} caller_arg;

static void *caller_main(void *p) {
    caller_arg *a = p;
    if (a->toggler) {
        for (int i = 0; !atomic_load(a->stop); i++)
            if (ha_set_num_threads(1 + i % 3) != HA_OK) a->bad_status++;
        return NULL;
    }
    float got[12 * TV];
    for (int r = 0; r < a->rounds; r++) {
        workload(a->m, NULL, got);
        if (memcmp(got, a->ref, sizeof got) != 0) a->mismatches++;
    }
    return NULL;
}

/* Forwards from several threads at once (each with its own context on one shared model) are serialized
 * by the pool and give the single-threaded results; so they do while another thread keeps changing the
 * thread count. */
void test_threads_concurrent_callers(void) {
    const char *vn[NVARIANTS];
    int nv = forward_variants(vn);
    CHECK_OK(ha_kernels_select(vn[nv - 1]));
    tiny *t = tiny_build(HA_F32, 1, 0, 0, 52);
    float ref[12 * TV];
    CHECK_OK(ha_set_num_threads(1));
    workload(t->m, NULL, ref);
    CHECK_OK(ha_set_num_threads(2));
    for (int with_toggler = 0; with_toggler < 2; with_toggler++) {
        atomic_int stop;
        atomic_init(&stop, 0);
        caller_arg args[3];
        pthread_t th[3];
        for (int i = 0; i < 3; i++)
            args[i] = (caller_arg){ .m = t->m, .ref = ref, .rounds = 8, .stop = &stop, .toggler = i == 2 };
        int n = with_toggler ? 3 : 2;
        for (int i = 0; i < n; i++)
            CHECK(pthread_create(&th[i], NULL, caller_main, &args[i]) == 0, "pthread_create failed");
        pthread_join(th[0], NULL);
        pthread_join(th[1], NULL);
        atomic_store(&stop, 1);
        if (with_toggler) pthread_join(th[2], NULL);
        for (int i = 0; i < 2; i++)
            CHECK(args[i].mismatches == 0,
                  "%s: caller %d expected the single-threaded logits in all %d rounds, %d differed",
                  with_toggler ? "with a thread toggling the count" : "two callers", i, args[i].rounds,
                  args[i].mismatches);
        CHECK(args[2].bad_status == 0, "ha_set_num_threads failed %d times while forwards ran", args[2].bad_status);
    }
    CHECK_OK(ha_set_num_threads(1));
    tiny_free(t);
}

/* Runs cover_range over [0, n) and checks every index was computed exactly once. */
static void check_covers(int64_t n, const char *when) {
    cover_job j = { .n = n, .hits = xcalloc((size_t)n + 1, sizeof(int)) };
    atomic_init(&j.calls, 0);
    ha_parallel_for(cover_range, &j, n);
    for (int64_t i = 0; i < n; i++)
        CHECK(j.hits[i] == 1, "%s, n=%lld: index %lld expected once, got %d times", when, (long long)n, (long long)i,
              j.hits[i]);
    free(j.hits);
}

/* Polls the pool until all its workers sleep, up to 20 s (they spin only briefly after a job). */
static void wait_workers_asleep(int workers, const char *when) {
    ha_pool_stats st = { 0 };
    for (int i = 0; i < 2000; i++) {
        ha_pool_get_stats(&st);
        if (st.workers_asleep == workers) return;
        nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
    }
    FAIL("%s: expected all %d workers asleep within 20 s of the last job, %d were", when, workers, st.workers_asleep);
}

/* Idle workers leave their cores (they sleep), and a sleeping pool wakes for the next job, again and again;
 * every job is computed whole. */
void test_threads_idle_workers_sleep_and_wake_for_the_next_job(void) {
    for (int nt = 2; nt <= 3; nt++) {
        CHECK_OK(ha_set_num_threads(nt));
        check_covers(1000, "first job");
        for (int round = 0; round < 4; round++) {
            wait_workers_asleep(nt - 1, "after a job");
            check_covers(1000, "a job for sleeping workers");
            check_covers(77, "the job right after");
        }
    }
    CHECK_OK(ha_set_num_threads(1));
}

typedef struct stall_job {
    pthread_t caller;
    atomic_int worker_pieces; /* pieces a worker (not the caller) took */
    int *hits;                /* (n,) */
} stall_job;

/* The caller's pieces take a moment, so that a worker surely takes one; a worker's first piece holds it up
 * far longer than the whole job would take the caller alone (a thread descheduled by another process). */
static void stall_range(void *ctx, int64_t b, int64_t e) {
    stall_job *j = ctx;
    if (pthread_equal(pthread_self(), j->caller)) nanosleep(&(struct timespec){ .tv_nsec = 1000 * 1000 }, NULL);
    else if (atomic_fetch_add(&j->worker_pieces, 1) == 0)
        nanosleep(&(struct timespec){ .tv_nsec = 200 * 1000 * 1000 }, NULL);
    for (int64_t i = b; i < e; i++) j->hits[i]++;
}

/* A worker that holds up a job (here: sleeps in its piece) makes the caller stop handing jobs to the pool for
 * a while; the stalled job, and the ones after, are still computed whole, in the same pieces. */
void test_threads_a_stalled_worker_turns_jobs_to_the_caller(void) {
    CHECK_OK(ha_set_num_threads(2));
    ha_pool_stats before, after;
    ha_pool_get_stats(&before);
    const int64_t n = 64;
    int stalled = 0;
    for (int tries = 0; tries < 50 && !stalled; tries++) {
        stall_job j = { .caller = pthread_self(), .hits = xcalloc((size_t)n, sizeof(int)) };
        atomic_init(&j.worker_pieces, 0);
        ha_parallel_for(stall_range, &j, n);
        for (int64_t i = 0; i < n; i++)
            CHECK(j.hits[i] == 1, "try %d: index %lld expected once, got %d times", tries, (long long)i, j.hits[i]);
        stalled = atomic_load(&j.worker_pieces) > 0;
        free(j.hits);
    }
    CHECK(stalled, "in 50 jobs whose pieces take 1 ms each on the caller, no worker took a piece");
    ha_pool_get_stats(&after);
    CHECK(after.backoffs > before.backoffs,
          "a worker held a job up 200 ms, expected the caller to stop offering jobs "
          "to the pool (backoffs %lld -> %lld)",
          (long long)before.backoffs, (long long)after.backoffs);
    CHECK(after.caller_sleeps > before.caller_sleeps,
          "expected the caller to sleep rather than spin through a 200 ms "
          "wait (caller sleeps %lld -> %lld)",
          (long long)before.caller_sleeps, (long long)after.caller_sleeps);
    test_threads_parallel_for_covers_range(); /* the pieces' contract holds whether or not jobs go to the pool */
    CHECK_OK(ha_set_num_threads(1));
}

/* Jobs of one function: kinds told apart by size and by key. */
static void count_range(void *ctx, int64_t b, int64_t e) {
    atomic_int *done = ctx;
    atomic_fetch_add(done, (int)(e - b));
}

/* Each kind of job (function, size, key) keeps its own time alone, however many kinds forwards of several chunk
 * sizes interleave and wherever their hashes fall: 120 kinds (one function, 60 sizes; one size, 60 keys), each met
 * 10 times in turn, are each new once, and every job is computed whole. */
void test_threads_kinds_are_timed_apart(void) {
    CHECK_OK(ha_set_num_threads(2));
    ha_pool_stats before, after;
    ha_pool_get_stats(&before);
    enum { SIZES = 60, KEYS = 60, ROUNDS = 10 };
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < SIZES + KEYS; i++) {
            atomic_int done;
            atomic_init(&done, 0);
            const int64_t n = i < SIZES ? 100 + i : 40;
            if (i < SIZES) ha_parallel_for(count_range, &done, n);
            else ha_parallel_for_kind(count_range, &done, n, (uint64_t)(i - SIZES + 1) * 2048);
            CHECK(atomic_load(&done) == n, "round %d, kind %d: %lld indices expected, %d computed", round, i,
                  (long long)n, atomic_load(&done));
        }
    }
    ha_pool_get_stats(&after);
    CHECK(after.kinds_new - before.kinds_new == SIZES + KEYS,
          "%d kinds met %d times each in turn: expected each new once (%d), got %lld new", SIZES + KEYS, ROUNDS,
          SIZES + KEYS, (long long)(after.kinds_new - before.kinds_new));
    CHECK_OK(ha_set_num_threads(1));
}

/* A child forked while the pool's workers sleep (its copy of the pool has no threads) starts a pool of its own. */
void test_threads_forked_child_runs_jobs(void) {
    CHECK_OK(ha_set_num_threads(2));
    check_covers(1000, "parent, before the fork");
    wait_workers_asleep(1, "parent, before the fork");
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
        cover_job j = { .n = 1000, .hits = calloc(1001, sizeof(int)) };
        atomic_init(&j.calls, 0);
        ha_parallel_for(cover_range, &j, 1000);
        int ok = 1;
        for (int i = 0; i < 1000; i++) ok &= j.hits[i] == 1;
        free(j.hits);
        _exit(ok && ha_get_num_threads() == 2 ? 0 : 3);
    }
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 6000 && got == 0; i++) { /* 60 s: a hang is a failure */
        got = waitpid(pid, &status, WNOHANG);
        if (got == 0) nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        FAIL("the forked child hung for 60 s running a job");
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the forked child expected exit 0 (every index once, 2 threads), "
          "got status %d",
          status);
    check_covers(1000, "parent, after the fork");
    CHECK_OK(ha_set_num_threads(1));
}

/* Writes text to dir/name (dir/sub made if need be). */
static void write_text(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    mkdir(path, 0700);
    *slash = '/';
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "could not write %s", path);
    fputs(text, f);
    fclose(f);
}

static void remove_text(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    remove(path);
}

/* The default thread count is the affinity mask's CPUs lowered to the cgroup quota (v2 cpu.max, v1 cfs files),
 * read under HA_CGROUP_ROOT. */
void test_cpus_cgroup_quota_lowers_the_default(void) {
    char root[] = "/tmp/ha_cgroup_XXXXXX";
    CHECK(mkdtemp(root) != NULL, "mkdtemp failed");
    cpu_set_t set;
    CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity failed");
    const int affinity = CPU_COUNT(&set);
    setenv("HA_CGROUP_ROOT", root, 1);
    CHECK(ha_cgroup_cpu_limit() == 0, "no cgroup files: expected no limit (0), got %d", ha_cgroup_cpu_limit());
    CHECK(ha_cpus_available() == affinity, "no cgroup files: expected the %d CPUs of the affinity mask, got %d",
          affinity, ha_cpus_available());
    const struct {
        const char *file, *text;
        int want;
    } v2[] = {
        { "cpu.max", "max 100000\n", 0 },    { "cpu.max", "100000 100000\n", 1 },
        { "cpu.max", "50000 100000\n", 1 },   /* half a CPU's time: still one thread */
        { "cpu.max", "150000 100000\n", 2 },  /* rounded up */
        { "cpu.max", "400000 100000\n", 4 }, { "cpu.max", "garbage\n", 0 },
    };
    for (size_t i = 0; i < COUNT(v2); i++) {
        write_text(root, v2[i].file, v2[i].text);
        const int want_cpus = v2[i].want && v2[i].want < affinity ? v2[i].want : affinity;
        CHECK(ha_cgroup_cpu_limit() == v2[i].want, "cpu.max \"%s\": expected a limit of %d CPUs, got %d", v2[i].text,
              v2[i].want, ha_cgroup_cpu_limit());
        CHECK(ha_cpus_available() == want_cpus, "cpu.max \"%s\" with %d CPUs in the affinity mask: expected %d, got %d",
              v2[i].text, affinity, want_cpus, ha_cpus_available());
    }
    remove_text(root, "cpu.max");
    write_text(root, "cpu/cpu.cfs_period_us", "100000\n");
    write_text(root, "cpu/cpu.cfs_quota_us", "-1\n");
    CHECK(ha_cgroup_cpu_limit() == 0, "v1 quota -1: expected no limit, got %d", ha_cgroup_cpu_limit());
    write_text(root, "cpu/cpu.cfs_quota_us", "100000\n");
    /* The v1 files are read only where /proc/self/cgroup names a cpu controller (or cannot be read). */
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[4096];
    int v1 = f == NULL;
    while (f && fgets(line, sizeof line, f)) v1 |= strstr(line, ":cpu:") != NULL || strstr(line, ":cpu,") != NULL;
    if (f) fclose(f);
    if (v1)
        CHECK(ha_cgroup_cpu_limit() == 1, "v1 quota 100000 / period 100000: expected 1 CPU, got %d",
              ha_cgroup_cpu_limit());
    write_text(root, "cpu.max", "300000 100000\n"); /* both: the lesser binds */
    CHECK(ha_cgroup_cpu_limit() == (v1 ? 1 : 3), "v2 3 CPUs and v1 1 CPU: expected %d, got %d", v1 ? 1 : 3,
          ha_cgroup_cpu_limit());
    remove_text(root, "cpu.max");
    remove_text(root, "cpu/cpu.cfs_quota_us");
    remove_text(root, "cpu/cpu.cfs_period_us");
    remove_text(root, "cpu");
    remove(root);
    unsetenv("HA_CGROUP_ROOT");
}
