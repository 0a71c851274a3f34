/* How many CPUs this process may use: its affinity mask, and the CPU time its cgroups allow (a container's
 * `--cpus`, a CI runner's or a notebook's quota), whichever is less. A pool with more threads than that
 * has threads that wait descheduled while the others wait for them. */
#define _GNU_SOURCE
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

#define CGROUP_ROOT "/sys/fs/cgroup"

/* ceil(quota / period) CPUs, at least 1; 0 for no limit or nonsense. */
static int cpus_of(long long quota, long long period) {
    if (quota <= 0 || period <= 0) return 0;
    long long c = (quota + period - 1) / period;
    return c < 1 ? 1 : c > INT_MAX ? INT_MAX : (int)c;
}

/* cgroup v2: dir/cpu.max is "max PERIOD" (no limit) or "QUOTA PERIOD" (microseconds). 0: none. */
static int limit_v2(const char *dir) {
    char path[PATH_MAX], word[32];
    long long period = 0;
    if (snprintf(path, sizeof path, "%s/cpu.max", dir) >= (int)sizeof path) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int got = fscanf(f, "%31s %lld", word, &period);
    fclose(f);
    if (got != 2 || strcmp(word, "max") == 0) return 0;
    char *end;
    long long quota = strtoll(word, &end, 10);
    return *end ? 0 : cpus_of(quota, period);
}

static long long read_ll(const char *dir, const char *name) {
    char path[PATH_MAX];
    long long v = 0;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    if (fscanf(f, "%lld", &v) != 1) v = 0;
    fclose(f);
    return v;
}

/* cgroup v1: dir/cpu.cfs_quota_us (-1: no limit) over dir/cpu.cfs_period_us. 0: none. */
static int limit_v1(const char *dir) {
    return cpus_of(read_ll(dir, "cpu.cfs_quota_us"), read_ll(dir, "cpu.cfs_period_us"));
}

static int min_limit(int a, int b) { return a == 0 ? b : b == 0 ? a : a < b ? a : b; }

/* The least limit of root/mount/path and each folder above it up to root/mount (an ancestor's quota binds
 * its descendants; inside a container the path /proc names may not exist under the mount, whose top is then
 * the container's own cgroup). */
static int limit_along(const char *root, const char *mount, const char *cg, int v2) {
    char dir[PATH_MAX];
    int top = snprintf(dir, sizeof dir, "%s%s%s", root, *mount ? "/" : "", mount);
    if (top < 0 || top >= (int)sizeof dir) return 0;
    int len = snprintf(dir + top, sizeof dir - (size_t)top, "%s", strcmp(cg, "/") == 0 ? "" : cg);
    if (len < 0 || top + len >= (int)sizeof dir) dir[top] = '\0';
    int limit = 0;
    for (;;) {
        limit = min_limit(limit, v2 ? limit_v2(dir) : limit_v1(dir));
        char *slash = strrchr(dir + top, '/');
        if (!slash) break;
        *slash = '\0';
    }
    return limit;
}

/* 1 if the comma-separated list holds "cpu". */
static int lists_cpu(const char *list) {
    for (const char *s = list; *s;) {
        size_t n = strcspn(s, ",");
        if (n == 3 && strncmp(s, "cpu", 3) == 0) return 1;
        s += n + (s[n] == ',');
    }
    return 0;
}

int ha_cgroup_cpu_limit(void) {
    const char *root = getenv("HA_CGROUP_ROOT");
    if (!root || !*root) root = CGROUP_ROOT;
    int limit = 0, found = 0;
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[PATH_MAX + 128];
    while (f && fgets(line, sizeof line, f)) { /* "ID:CONTROLLERS:PATH" */
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = '\0';
        const char *controllers = c1 + 1, *cg = c2 + 1;
        if (strcmp(line, "0") == 0 && !*controllers) {
            limit = min_limit(limit, limit_along(root, "", cg, 1));
            found = 1;
        } else if (lists_cpu(controllers)) {
            limit = min_limit(limit, limit_along(root, controllers, cg, 0));
            found = 1;
        }
    }
    if (f) fclose(f);
    if (!found) /* no /proc: the namespace's own cgroup, either version */
        limit = min_limit(limit_along(root, "", "/", 1), limit_along(root, "cpu", "/", 0));
    return limit;
}

int ha_cpus_available(void) {
    int n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    if (n < 1) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c >= 1 && c <= INT_MAX ? (int)c : 1;
    }
    int quota = ha_cgroup_cpu_limit();
    return quota >= 1 && quota < n ? quota : n;
}

int64_t ha_llc_bytes(void) {
    long b = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (b <= 0) b = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return b > 0 ? (int64_t)b : 0;
}
