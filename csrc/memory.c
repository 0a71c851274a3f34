/* How much memory this process can still take without paging or meeting the OOM killer: the kernel's
 * MemAvailable, lowered to what the memory cgroup (v2 or v1, as mounted in this process's view) still allows.
 * Requests that need more fail before allocating (ha_llama_context_create), instead of being overcommitted and
 * killed later when their pages are touched. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* The number that follows `key` at the start of a line of file `path` (key "": the first line's); 0 if there is
 * none (a missing file, or v2's "max"). */
static int read_number(const char *path, const char *key, double *out) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    int found = 0;
    const size_t k = strlen(key);
    while (!found && fgets(line, sizeof line, f)) found = strncmp(line, key, k) == 0 && sscanf(line + k, "%lf", out) == 1;
    fclose(f);
    return found;
}

/* limit - usage of one cgroup interface, into *room if it is lower; "max" (v2) or a huge v1 limit reads as none. */
static void cgroup_room(const char *limit_path, const char *usage_path, double *room) {
    double limit, usage;
    if (read_number(limit_path, "", &limit) && read_number(usage_path, "", &usage) && limit < 0x1p62) {
        double left = limit > usage ? limit - usage : 0.0;
        if (left < *room) *room = left;
    }
}

double ha_available_memory(void) {
    double room = -1.0;
    if (!read_number("/proc/meminfo", "MemAvailable:", &room)) return -1.0;
    room *= 1024.0; /* kB */
    cgroup_room("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", &room);
    cgroup_room("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes", &room);
    return room;
}
