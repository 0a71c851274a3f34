/* How much memory this process can still take without paging or meeting the OOM killer: the kernel's
 * MemAvailable, lowered to what the memory cgroup (v2 or v1) mounted at /sys/fs/cgroup still allows (in a
 * container, its own; a limit set on a cgroup below the mount's root is not seen).
 * Requests that need more fail before allocating (ha_llama_context_create), instead of being overcommitted and
 * killed later when their pages are touched. And the KV cache's memory, in huge pages where the system has them. */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS, madvise */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core.h"

/* The number that follows `key` at the start of a line of file `path` (key "": the first line's); 0 if there is
 * none (a missing file, or v2's "max"). */
static int read_number(const char *path, const char *key, double *out) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    int found = 0;
    const size_t k = strlen(key);
    while (!found && fgets(line, sizeof line, f))
        found = strncmp(line, key, k) == 0 && sscanf(line + k, "%lf", out) == 1;
    fclose(f);
    return found;
}

/* limit - usage of one cgroup interface, into *room if it is lower; "max" (v2) or a huge v1 limit reads as none.
 * Usage counts the page cache, whose inactive part the kernel reclaims before it refuses memory (a checkpoint
 * just read sits there), so that part is left out, as container runtimes do for their "working set". */
static void cgroup_room(const char *dir, const char *limit_name, const char *usage_name, const char *inactive_key,
                        double *room) {
    char limit_path[128], usage_path[128], stat_path[128];
    snprintf(limit_path, sizeof limit_path, "%s/%s", dir, limit_name);
    snprintf(usage_path, sizeof usage_path, "%s/%s", dir, usage_name);
    snprintf(stat_path, sizeof stat_path, "%s/memory.stat", dir);
    double limit, usage, inactive = 0.0;
    if (read_number(limit_path, "", &limit) && read_number(usage_path, "", &usage) && limit < 0x1p62) {
        if (read_number(stat_path, inactive_key, &inactive) && inactive < usage) usage -= inactive;
        double left = limit > usage ? limit - usage : 0.0;
        if (left < *room) *room = left;
    }
}

double ha_available_memory(void) {
    double room = -1.0;
    if (!read_number("/proc/meminfo", "MemAvailable:", &room)) return -1.0;
    room *= 1024.0; /* kB */
    cgroup_room("/sys/fs/cgroup", "memory.max", "memory.current", "inactive_file ", &room); /* v2 */
    cgroup_room("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file ",
                &room); /* v1 */
    return room;
}

/* Transparent huge pages are 2 MB on x86-64 (and on arm64 with 4 KB pages). */
#define HUGE_PAGE ((size_t)2 << 20)

void *ha_alloc_streamed(size_t size, int *mapped) {
    *mapped = 0;
#ifdef MADV_HUGEPAGE
    const char *env = getenv("HA_HUGE_PAGES");
    /* A mapping of its own, not posix_memalign's memory: advice given to memory malloc hands out stays on that
     * memory after free(), for whatever malloc puts there next. */
    if (size >= HUGE_PAGE && !(env && strcmp(env, "0") == 0)) {
        /* HUGE_PAGE more than needed, trimmed to start at its first 2 MB boundary and end at the page after size */
        const size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (size + page - 1) / page * page;
        char *base = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) return NULL;
        char *p = base + (HUGE_PAGE - (uintptr_t)base % HUGE_PAGE) % HUGE_PAGE;
        if (p > base) munmap(base, (size_t)(p - base));
        munmap(p + len, (size_t)(base + HUGE_PAGE - p)); /* the tail: always at least one page */
        (void)madvise(p, len, MADV_HUGEPAGE); /* advice: where it is refused, the pages are 4 KB ones */
        *mapped = 1;
        return p;
    }
#endif
    return malloc(size);
}

void ha_free_streamed(void *p, size_t size, int mapped) {
    if (!p) return;
    if (!mapped) {
        free(p);
        return;
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    munmap(p, (size + page - 1) / page * page);
}
