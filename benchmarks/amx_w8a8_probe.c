// The w8a8 class's matmul through Intel AMX tiles, beside its scalar definition and an AVX-512 VNNI loop, on
// the library's HA_Q8P panel layout: are the bits the same, and what does a verification of T tokens cost
// against one? A standalone probe, not the library. On a CPU with AVX512-VNNI it checks the VNNI loop against
// the definition; with amx_tile and amx_int8 too (and Linux's permission for the tile state, ARCH_REQ_XCOMP_PERM)
// it checks the tiles and times both. Exit status 1 if any bit differs, else 0 (also where there is nothing to run).
//
// Layout (HA_Q8P, csrc/kernels/formats.h): panels of 16 output rows; per panel and group of 64 inputs a block
// of 1,088 bytes: 16 float scales, then 16 steps of 16 rows x 4 bytes, each byte q + 128 (q the signed weight).
// Those steps are the VNNI layout AMX takes for its B operand (K/4 rows of N x 4 bytes), so the tiles read the
// panels as they are. (The library's integers lie in [-127, 127]; the probe's take every int8, -128 included.)
// The class's definition, per token t and output n: y = 0; for each group g in order,
//   isum = sum over the group of x[t][k] * q[n][k]                 (exact, int32)
//   y = fmaf((float)isum, wscale[n][g] * xscale[t][g], y)
// AMX: C (T x 16 int32) = A (T x 64 signed x) . B (the panel's group, unsigned q + 128) with _tile_dpbsud, so
// isum = C - 128 * sum(x over the group), as the VNNI loop does with vpdpbusd.
//
// Build and run (a machine with AMX): cc -O2 -std=gnu11 -o amx_w8a8_probe benchmarks/amx_w8a8_probe.c -lm
//   ./amx_w8a8_probe [MiB of weights, default 1024]
#define _GNU_SOURCE
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
#define GROUP 64
#define PANEL 16
#define TMAX 16

typedef struct {
    int n, k;        // outputs (a multiple of 16), inputs (a multiple of 64)
    uint8_t *blocks; // per panel, per group: 16 float scales, then 16 steps x 16 rows x 4 bytes (q + 128)
} Panels;

typedef struct {
    int t, k;
    int8_t *x;       // t x k, row-major
    float *xs;       // t x k/64 scales
    int32_t *xsum;   // t x k/64: sum of x over each group
} Acts;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static inline uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define BLOCK (PANEL * 4 + PANEL * GROUP)  // HA_Q8P_BLOCK_BYTES

static const uint8_t *block(const Panels *w, int p, int g) {
    return w->blocks + ((size_t)p * (w->k / GROUP) + g) * BLOCK;
}

static void make_panels(Panels *w, int n, int k) {
    w->n = n, w->k = k;
    size_t groups = (size_t)(n / PANEL) * (k / GROUP);
    w->blocks = aligned_alloc(64, groups * BLOCK);
    uint64_t *b64 = (uint64_t *)w->blocks;
    for (size_t i = 0; i < groups * BLOCK / 8; i++) b64[i] = next();  // any byte: q = b - 128
    for (size_t i = 0; i < groups; i++)
        for (int r = 0; r < PANEL; r++) {
            float scale = (float)((next() >> 40) + 1) * 0x1p-30f;
            memcpy(w->blocks + i * BLOCK + r * 4, &scale, 4);
        }
}

static void make_acts(Acts *a, int t, int k) {
    a->t = t, a->k = k;
    a->x = aligned_alloc(64, (size_t)t * k);
    a->xs = malloc(sizeof(float) * t * (k / GROUP));
    a->xsum = malloc(sizeof(int32_t) * t * (k / GROUP));
    for (int i = 0; i < t * k; i++) a->x[i] = (int8_t)next();  // -128 included
    for (int i = 0; i < t * (k / GROUP); i++) {
        a->xs[i] = (float)((next() >> 44) + 1) * 0x1p-24f;
        int32_t s = 0;
        for (int j = 0; j < GROUP; j++) s += a->x[(i / (k / GROUP)) * k + (i % (k / GROUP)) * GROUP + j];
        a->xsum[i] = s;
    }
}

// The definition, one output at a time.
static void matmul_scalar(const Panels *w, const Acts *a, float *y) {
    int groups = w->k / GROUP;
    for (int p = 0; p < w->n / PANEL; p++)
        for (int r = 0; r < PANEL; r++)
            for (int t = 0; t < a->t; t++) {
                float acc = 0;
                for (int g = 0; g < groups; g++) {
                    const uint8_t *blk = block(w, p, g);
                    int32_t isum = 0;
                    for (int k = 0; k < GROUP; k++)
                        isum += a->x[t * w->k + g * GROUP + k] *
                                ((int)blk[PANEL * 4 + (k / 4) * 64 + r * 4 + k % 4] - 128);
                    float ws;
                    memcpy(&ws, blk + r * 4, 4);
                    acc = fmaf((float)isum, ws * a->xs[t * groups + g], acc);
                }
                y[(size_t)t * w->n + p * PANEL + r] = acc;
            }
}

__attribute__((target("avx512f,avx512vnni"))) static void matmul_vnni(const Panels *w, const Acts *a, float *y) {
    int groups = w->k / GROUP;
    for (int p = 0; p < w->n / PANEL; p++) {
        __m512 acc[TMAX];
        for (int t = 0; t < a->t; t++) acc[t] = _mm512_setzero_ps();
        for (int g = 0; g < groups; g++) {
            const uint8_t *blk = block(w, p, g);
            __m512 ws = _mm512_load_ps(blk);
            for (int t = 0; t < a->t; t++) {
                const int8_t *x = a->x + t * w->k + g * GROUP;
                __m512i s = _mm512_set1_epi32(-128 * a->xsum[t * groups + g]);
                for (int st = 0; st < GROUP / 4; st++) {
                    int32_t x4;
                    memcpy(&x4, x + 4 * st, 4);
                    s = _mm512_dpbusd_epi32(s, _mm512_load_si512(blk + PANEL * 4 + st * 64), _mm512_set1_epi32(x4));
                }
                __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(a->xs[t * groups + g]));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[t]);
            }
        }
        for (int t = 0; t < a->t; t++) _mm512_storeu_ps(y + (size_t)t * w->n + p * PANEL, acc[t]);
    }
}

struct tilecfg {
    uint8_t palette_id, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

// Tiles: 0 = C (T x 16 int32), 1 = A (T x 64 int8), 2 = B (16 x 64 bytes: one panel's group).
__attribute__((target("amx-tile"))) static void tile_config(int t) {
    struct tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette_id = 1;
    c.rows[0] = (uint8_t)t, c.colsb[0] = 64;
    c.rows[1] = (uint8_t)t, c.colsb[1] = 64;
    c.rows[2] = 16, c.colsb[2] = 64;
    _tile_loadconfig(&c);
}

__attribute__((target("amx-tile,amx-int8,avx512f"))) static void matmul_amx(const Panels *w, const Acts *a, float *y) {
    int groups = w->k / GROUP;
    int32_t c[TMAX][16] __attribute__((aligned(64)));
    tile_config(a->t);
    for (int p = 0; p < w->n / PANEL; p++) {
        __m512 acc[TMAX];
        for (int t = 0; t < a->t; t++) acc[t] = _mm512_setzero_ps();
        for (int g = 0; g < groups; g++) {
            const uint8_t *blk = block(w, p, g);
            _tile_zero(0);
            _tile_loadd(1, a->x + g * GROUP, w->k);
            _tile_loadd(2, blk + PANEL * 4, 64);
            _tile_dpbsud(0, 1, 2);
            _tile_stored(0, c, 64);
            __m512 ws = _mm512_load_ps(blk);
            for (int t = 0; t < a->t; t++) {
                __m512i s = _mm512_sub_epi32(_mm512_load_si512(c[t]), _mm512_set1_epi32(128 * a->xsum[t * groups + g]));
                __m512 scale = _mm512_mul_ps(ws, _mm512_set1_ps(a->xs[t * groups + g]));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[t]);
            }
        }
        for (int t = 0; t < a->t; t++) _mm512_storeu_ps(y + (size_t)t * w->n + p * PANEL, acc[t]);
    }
    _tile_release();
}

typedef void (*Matmul)(const Panels *, const Acts *, float *);

static double best_of(Matmul f, const Panels *w, const Acts *a, float *y, int reps) {
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        double t0 = now();
        f(w, a, y);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv) {
    unsigned ea, eb, ec, ed;
    __cpuid_count(7, 0, ea, eb, ec, ed);
    int amx = ((ed >> 24) & 1) && ((ed >> 25) & 1), vnni = (ec >> 11) & 1;
    printf("cpuid: amx_tile+amx_int8 %d, avx512_vnni %d\n", amx, vnni);
    if (!vnni) {
        printf("this probe needs AVX512-VNNI; nothing to check here\n");
        return 0;
    }
    int tiles = amx && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    if (amx && !tiles) printf("the kernel refused the tile state (ARCH_REQ_XCOMP_PERM): AMX left out\n");
    // 1. bits: every T from 1 to 16, a small matrix; VNNI (and AMX) against the definition, bit for bit
    Panels small;
    make_panels(&small, 256, 2048);
    int mismatches = 0;
    for (int t = 1; t <= TMAX; t++) {
        Acts a;
        make_acts(&a, t, 2048);
        size_t n = (size_t)t * small.n;
        float *y0 = malloc(n * 4), *y1 = malloc(n * 4), *y2 = malloc(n * 4);
        matmul_scalar(&small, &a, y0);
        matmul_vnni(&small, &a, y1);
        int d1 = memcmp(y0, y1, n * 4) != 0, d2 = 0;
        if (tiles) {
            matmul_amx(&small, &a, y2);
            d2 = memcmp(y0, y2, n * 4) != 0;
        }
        if (d1) printf("T = %d: VNNI differs from the definition\n", t);
        if (d2) printf("T = %d: AMX differs from the definition\n", t);
        mismatches += d1 + d2;
        free(y0), free(y1), free(y2), free(a.x), free(a.xs), free(a.xsum);
    }
    printf("bits: T = 1..16, 256 x 2048: %s\n", mismatches ? "MISMATCHES (above)"
                                                : tiles    ? "AMX and VNNI both equal the definition bit for bit"
                                                           : "VNNI equals the definition bit for bit (no AMX here)");
    free(small.blocks);
    if (mismatches) return 1;
    if (!tiles) return 0;  // the timing compares the tiles with VNNI
    // 2. time: a matrix of MiB megabytes (default 1 GiB, well beyond any L3), one thread
    long mib = argc > 1 ? atol(argv[1]) : 1024;
    int k = 2048, n = (int)((mib << 20) / k / PANEL * PANEL);
    Panels big;
    make_panels(&big, n, k);
    printf("time: %d x %d int8 weights (%.0f MiB + scales), one thread, best of 3\n", n, k, (double)n * k / (1 << 20));
    float *y = malloc((size_t)TMAX * n * 4);
    double v1 = 0, a1 = 0;
    int ts[] = { 1, 2, 4, 8, 16 };
    printf("%4s %10s %10s %9s %9s %9s %8s\n", "T", "vnni ms", "amx ms", "vnni t/t1", "amx t/t1", "amx/vnni",
           "amx GB/s");
    for (int i = 0; i < 5; i++) {
        Acts a;
        make_acts(&a, ts[i], k);
        double tv = best_of(matmul_vnni, &big, &a, y, 3), ta = best_of(matmul_amx, &big, &a, y, 3);
        if (i == 0) v1 = tv, a1 = ta;
        printf("%4d %10.1f %10.1f %9.2f %9.2f %9.2f %8.1f\n", ts[i], tv * 1e3, ta * 1e3, tv / v1, ta / a1, ta / tv,
               (double)n * k * BLOCK / (PANEL * GROUP) / ta / 1e9);
        free(a.x), free(a.xs), free(a.xsum);
    }
    free(big.blocks), free(y);
    return 0;
}
