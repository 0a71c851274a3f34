/* The rooflines: memory read bandwidth, which every decode figure is compared with (all threads stream
 * disjoint parts of one buffer far larger than the caches, summing 64-bit words so no load can be skipped),
 * and the kernels' peak multiply-add rate, which bounds multi-token verification.
 *
 * Each thread reads STREAMS blocks of a unit side by side, a 64-byte line of each in turn, as the decode kernels
 * read four panels (or four rows) side by side: memory may serve several interleaved streams per core faster
 * than one, and the bound is what the memory can deliver, so it is taken the way the kernels read. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../kernels/kernels.h"
#include "core.h"

#define STREAMS 4
#define BLOCK (1 << 16)          /* bytes of one stream within a unit */
#define UNIT (STREAMS * BLOCK)   /* bytes per parallel work unit */

typedef struct stream_job {
    const uint64_t *buf;
    atomic_uint_fast64_t sink; /* keeps the loads live */
} stream_job;

static void stream_range(void *ctx, int64_t b, int64_t e) {
    stream_job *j = ctx;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t u = b; u < e; u++)
        for (size_t off = 0; off < BLOCK / 8; off += 8)
            for (int s = 0; s < STREAMS; s++) {
                const uint64_t *p = j->buf + (size_t)u * (UNIT / 8) + (size_t)s * (BLOCK / 8) + off;
                s0 += p[0] ^ p[4];
                s1 += p[1] ^ p[5];
                s2 += p[2] ^ p[6];
                s3 += p[3] ^ p[7];
            }
    atomic_fetch_add(&j->sink, s0 ^ s1 ^ s2 ^ s3);
}

ha_status ha_measure_read_bandwidth(size_t nbytes, int repeats, double *bytes_per_s) {
    if (!bytes_per_s || repeats < 1 || nbytes < UNIT)
        return ha_fail(HA_ERR_INVALID, "measure_read_bandwidth: need nbytes >= %d and repeats >= 1", UNIT);
    nbytes -= nbytes % UNIT;
    stream_job j = { .buf = NULL };
    atomic_init(&j.sink, 0);
    uint64_t *buf = malloc(nbytes);
    if (!buf) return ha_fail(HA_ERR_NOMEM, "out of memory for a %zu-byte bandwidth buffer", nbytes);
    memset(buf, 1, nbytes); /* touch every page so the timing reads memory, not page faults */
    j.buf = buf;
    int64_t units = (int64_t)(nbytes / UNIT);
    ha_status st = ha_pool_ensure();
    ha_parallel_for(stream_range, &j, units); /* warm-up */
    double best = 0.0;
    for (int r = 0; st == HA_OK && r < repeats; r++) {
        double t0 = ha_now();
        ha_parallel_for(stream_range, &j, units);
        double dt = ha_now() - t0;
        if (dt > 0 && (double)nbytes / dt > best) best = (double)nbytes / dt;
    }
    free(buf);
    *bytes_per_s = best;
    return st;
}

typedef struct mac_job {
    double (*burst)(int64_t n); /* the kernel table's mac_burst or mac_burst_q8 */
    atomic_uint_fast64_t done; /* multiply-adds, summed over the units */
} mac_job;

#define MAC_ROUNDS (1 << 16) /* rounds per unit: about a millisecond */

static void mac_range(void *ctx, int64_t b, int64_t e) {
    mac_job *j = ctx;
    double d = 0.0;
    for (int64_t u = b; u < e; u++) d += j->burst(MAC_ROUNDS);
    atomic_fetch_add(&j->done, (uint_fast64_t)d);
}

ha_status ha_measure_mac_rate(int repeats, int int_weights, double *macs_per_s) {
    if (!macs_per_s || repeats < 1 || int_weights < 0 || int_weights > 2)
        return ha_fail(HA_ERR_INVALID, "measure_mac_rate: need repeats >= 1 and int_weights 0, 1 or 2");
    ha_status st = ha_pool_ensure();
    const int64_t units = 32 * (int64_t)ha_get_num_threads();
    const ha_kernels *k = ha_kernels_get();
    double best = 0.0;
    for (int r = 0; st == HA_OK && r <= repeats; r++) { /* round 0 warms up */
        mac_job j = { .burst = int_weights == 2 ? k->mac_burst_w8a8 : int_weights ? k->mac_burst_q8 : k->mac_burst };
        atomic_init(&j.done, 0);
        double t0 = ha_now();
        ha_parallel_for(mac_range, &j, units);
        double dt = ha_now() - t0;
        const double done = (double)atomic_load(&j.done);
        if (r > 0 && dt > 0 && done / dt > best) best = done / dt;
    }
    *macs_per_s = best;
    return st;
}
