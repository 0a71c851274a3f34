/* Two builds of the AVX2 kernels, A and B (A's table renamed kernels_a at compile time by kernel_ab.sh; B's
 * keeps its name, ha_kernels_avx2), timed alternately in one process on the same data, with their outputs compared bitwise:
 * on a shared, noisy machine only ratios taken this way mean much. Built with KERNEL_AB_AVX512, two builds of the
 * AVX-512 kernels instead (A's table function renamed kernels_a, B's ha_kernels_avx512), for FORMAT w8a8.
 *
 *   kernel_ab FORMAT ROWS N ROUNDS T...   FORMAT: f32, bf16, f16, int8, int4, f32p, bf16p, f16p, w8a8 or w8a8c
 *                                         (w8a8c: each build's matmul_w8a8_cached where it has one)
 *   kernel_ab scores KEYS N ROUNDS NQ...  attention's scores, AVX-512 builds (scores_ab)
 *
 * For each T: Y (T, ROWS) = W (ROWS, N) . X (T, N) by each build, ROUNDS times each, alternating; the best
 * time of each is printed with B/A and whether the two Y are bitwise equal. Integer weights take X quantized
 * once by B's quant_act (w8a8: ha_quant_act8), as model/forward.c does once per matmul, outside the timing. */
#define _GNU_SOURCE /* madvise, MADV_HUGEPAGE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kernels/kernels.h"

#ifdef KERNEL_AB_AVX512
const ha_kernels *kernels_a(void);
#define kernels_a (*kernels_a())
#define kernels_b (*ha_kernels_avx512())
#define VARIANT "avx512"
/* The emulated variant is left out of this program (the longest compile of all), and the AVX-VNNI ones. */
const ha_kernels *ha_kernels_avx512_emulated(void) { return NULL; }
const ha_kernels *ha_kernels_avxvnni(void) { return NULL; }
const ha_kernels *ha_kernels_avxvnni_evex(void) { return NULL; }
#else
extern const ha_kernels kernels_a;
#define kernels_b ha_kernels_avx2
#define VARIANT "avx2"
/* Only AVX2 builds are timed here (w8a8 aside): dispatch.c's AVX-512 variants are left out of this program (their
 * two files would double its build time), and the AVX-VNNI ones, so it never offers them. */
const ha_kernels *ha_kernels_avx512(void) { return NULL; }
const ha_kernels *ha_kernels_avx512_emulated(void) { return NULL; }
const ha_kernels *ha_kernels_avxvnni(void) { return NULL; }
const ha_kernels *ha_kernels_avxvnni_evex(void) { return NULL; }
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t lcg(uint64_t *s) { return *s = *s * 6364136223846793005ull + 1442695040888963407ull; }

/* The best of `rounds` timings of reps calls of run(ctx, &kernels_a, 0) and of run(ctx, &kernels_b, 1), alternating,
 * printed per call with B/A and whether the two builds' outputs (the `bytes` at out_a and out_b) are bitwise equal;
 * label and v name the row, decimals the microseconds' digits. */
typedef void (*ab_run)(void *ctx, const ha_kernels *k, int b);
static void time_ab(ab_run run, void *ctx, int reps, int rounds, const void *out_a, const void *out_b, size_t bytes,
                    const char *label, int64_t v, int decimals) {
    double ba = 1e30, bb = 1e30;
    for (int k = 0; k < rounds; k++) {
        double t0 = now();
        for (int r = 0; r < reps; r++) run(ctx, &kernels_a, 0);
        double t1 = now();
        for (int r = 0; r < reps; r++) run(ctx, &kernels_b, 1);
        double t2 = now();
        ba = t1 - t0 < ba ? t1 - t0 : ba;
        bb = t2 - t1 < bb ? t2 - t1 : bb;
    }
    ba /= reps, bb /= reps;
    const int same = memcmp(out_a, out_b, bytes) == 0;
    printf("%s=%3lld  A %10.*f us  B %10.*f us  B/A %.3f  %s\n", label, (long long)v, decimals, ba * 1e6, decimals,
           bb * 1e6, bb / ba, same ? "bitwise equal" : "OUTPUTS DIFFER");
}

/* One matmul of T tokens by build k into its own Y (kernel_ab's FORMATs other than scores). */
typedef struct matmul_ctx {
    ha_dtype dt;
    const void *W;
    int64_t n, rows, T;
    const float *X;
    const int16_t *Xq;
    const float *xscale;
    const char *Xq8;
    const int32_t *xsum;
    float *Y[2]; /* A's outputs, B's */
} matmul_ctx;

static int w8a8_cached; /* FORMAT w8a8c */

static void matmul_run(void *ctx, const ha_kernels *k, int b) {
    const matmul_ctx *c = ctx;
    if (c->dt == HA_Q8P) {
        void (*w8)(const void *, int64_t, int64_t, int64_t, const char *, const int32_t *, int64_t, float *, int64_t) =
            w8a8_cached && k->matmul_w8a8_cached ? k->matmul_w8a8_cached : k->matmul_w8a8;
        w8(c->W, c->n, 0, c->rows, c->Xq8, c->xsum, c->T, c->Y[b], c->rows);
    }
    else if (ha_dtype_is_int(c->dt))
        k->matmul_int[c->dt](c->W, c->n, 0, c->rows, c->Xq, c->xscale, c->T, c->Y[b], c->rows);
    else k->matmul[c->dt](c->W, c->n, 0, c->rows, c->X, c->T, c->Y[b], c->rows);
}

/* FORMAT scores: attention's scores (ha_kernels.attn_scores) of each NQ queries against ROWS keys of N floats (a
 * ring of ROWS + 8 slots, the keys from slot 3 on, so the last wrap around), the NQ values in place of T. */
typedef struct scores_ctx {
    const float *q, *K;
    int64_t nq, n, S, keys;
    float *s[2]; /* A's scores, B's */
} scores_ctx;

static void scores_run(void *ctx, const ha_kernels *k, int b) {
    const scores_ctx *c = ctx;
    k->attn_scores(c->q, c->nq, c->n, c->K, c->n, 3, c->S, c->keys, c->n, 0.125f, c->s[b], c->keys);
}

static int scores_ab(int64_t keys, int64_t n, int rounds, int argc, char **argv) {
    int64_t qmax = 1;
    for (int a = 5; a < argc; a++) qmax = atoll(argv[a]) > qmax ? atoll(argv[a]) : qmax;
    const int64_t S = keys + 8;
    float *K = malloc((size_t)(S * n) * sizeof(float)), *q = malloc((size_t)(qmax * n) * sizeof(float));
    float *sa = malloc((size_t)(qmax * keys) * sizeof(float)), *sb = malloc((size_t)(qmax * keys) * sizeof(float));
    if (!K || !q || !sa || !sb) {
        fprintf(stderr, "kernel_ab: out of memory\n");
        return 1;
    }
    uint64_t s = 1;
    for (int64_t i = 0; i < S * n; i++) K[i] = (float)((double)(lcg(&s) >> 11) * 0x1p-52 - 1.0);
    for (int64_t i = 0; i < qmax * n; i++) q[i] = (float)((double)(lcg(&s) >> 11) * 0x1p-52 - 1.0);
    printf("scores, %lld keys x %lld, %d rounds each, alternating A and B\n", (long long)keys, (long long)n, rounds);
    for (int a = 5; a < argc; a++) {
        const int64_t nq = atoll(argv[a]);
        if (nq < 1) continue;
        const int reps = (int)(2e7 / ((double)keys * (double)n * (double)nq)) + 1; /* about 2 ms at 10 G/s */
        scores_ctx c = { q, K, nq, n, S, keys, { sa, sb } };
        time_ab(scores_run, &c, reps, rounds, sa, sb, (size_t)(nq * keys) * sizeof(float), "NQ", nq, 3);
    }
    free(K), free(q), free(sa), free(sb);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "scores") == 0) {
        const int64_t keys = argc > 2 ? atoll(argv[2]) : 0, n = argc > 3 ? atoll(argv[3]) : 0;
        const int rounds = argc > 4 ? atoi(argv[4]) : 0;
        if (keys < 1 || n < 1 || rounds < 1 || argc < 6 || strcmp(VARIANT, "avx512") != 0) {
            fprintf(stderr,
                    "usage: kernel_ab scores KEYS N ROUNDS NQ... (the avx512 build: kernel_ab.sh chooses it)\n");
            return 2;
        }
        if (ha_kernels_select(VARIANT) != HA_OK) {
            fprintf(stderr, "kernel_ab: %s\n", ha_last_error());
            return 2;
        }
        return scores_ab(keys, n, rounds, argc, argv);
    }
    static const struct { const char *name; ha_dtype dt; } formats[] = {
        { "f32", HA_F32 }, { "bf16", HA_BF16 }, { "f16", HA_F16 }, { "int8", HA_Q8 }, { "int4", HA_Q4 },
        { "f32p", HA_F32P }, { "bf16p", HA_BF16P }, { "f16p", HA_F16P }, { "w8a8", HA_Q8P },
        { "w8a8c", HA_Q8P } };
    int f = -1;
    for (int i = 0; argc > 1 && i < (int)(sizeof formats / sizeof *formats); i++)
        if (strcmp(argv[1], formats[i].name) == 0) f = i;
    const int64_t rows = argc > 2 ? atoll(argv[2]) : 0, n = argc > 3 ? atoll(argv[3]) : 0;
    const int rounds = argc > 4 ? atoi(argv[4]) : 0;
    if (f < 0 || rows < 1 || n < 1 || rounds < 1 || argc < 6) {
        fprintf(stderr, "usage: kernel_ab f32|bf16|f16|int8|int4|f32p|bf16p|f16p|w8a8|w8a8c ROWS N ROUNDS T...\n");
        return 2;
    }
    if ((formats[f].dt == HA_Q8P) != (strcmp(VARIANT, "avx512") == 0)) {
        fprintf(stderr, "kernel_ab: this build times the %s kernels; w8a8 takes the avx512 build and the other formats "
                "the avx2 one (kernel_ab.sh chooses by FORMAT)\n", VARIANT);
        return 2;
    }
    if (ha_kernels_select(VARIANT) != HA_OK) { /* both builds would fault on this CPU */
        fprintf(stderr, "kernel_ab: %s\n", ha_last_error());
        return 2;
    }
    /* Panels (f32p, bf16p, f16p): the row-major matrix of their element type is generated, then repacked. */
    const ha_dtype dt = formats[f].dt;
    const int w8 = dt == HA_Q8P;
    w8a8_cached = strcmp(formats[f].name, "w8a8c") == 0;
    if (w8 ? !kernels_a.matmul_w8a8 : ha_dtype_is_int(dt) ? !kernels_a.matmul_int[dt] : !kernels_a.matmul[dt]) {
        fprintf(stderr, "kernel_ab: build A has no %s kernel (a revision from before that format); pick a later one\n",
                formats[f].name);
        return 2;
    }
    /* w8a8: float32 rows quantized into panels by the core's ha_quantize */
    const ha_dtype gen = dt == HA_F32P || w8 ? HA_F32 : dt == HA_BF16P ? HA_BF16 : dt == HA_F16P ? HA_F16 : dt;
    const size_t rb = ha_row_bytes(gen, n);
    int64_t tmax = 1;
    for (int a = 5; a < argc; a++) tmax = atoll(argv[a]) > tmax ? atoll(argv[a]) : tmax;
    /* W in memory advised for transparent huge pages, as a model's weights are (kernels-and-performance.md) */
    const size_t mbytes = ha_matrix_bytes(dt, rows, n), wbytes = mbytes > (size_t)rows * rb ? mbytes : (size_t)rows * rb;
    unsigned char *W = NULL;
    if (posix_memalign((void **)&W, (size_t)2 << 20, wbytes) != 0) W = NULL;
#ifdef MADV_HUGEPAGE
    if (W) (void)madvise(W, (wbytes + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1), MADV_HUGEPAGE);
#endif
    float *X = malloc((size_t)(tmax * n) * sizeof(float)), *Ya = malloc((size_t)(tmax * rows) * sizeof(float)),
          *Yb = malloc((size_t)(tmax * rows) * sizeof(float));
    if (!W || !X || !Ya || !Yb) {
        fprintf(stderr, "kernel_ab: out of memory\n");
        return 1;
    }
    uint64_t s = 1;
    float v[HA_Q8_GROUP];
    for (int64_t r = 0; r < rows; r++) /* weights in [-1, 1], as each format stores them */
        for (int64_t j = 0; j < n; j += HA_Q8_GROUP) {
            const int64_t len = n - j < HA_Q8_GROUP ? n - j : HA_Q8_GROUP;
            for (int64_t i = 0; i < len; i++) v[i] = (float)((double)(lcg(&s) >> 11) * 0x1p-52 - 1.0);
            unsigned char *row = W + (size_t)r * rb;
            if (gen == HA_Q8) ha_quant_q8_ref(v, len, row + (size_t)(j / HA_Q8_GROUP) * HA_Q8_BLOCK_BYTES);
            for (int64_t h = 0; gen == HA_Q4 && h < len; h += HA_Q4_GROUP) /* two int4 blocks per 64 */
                ha_quant_q4_ref(v + h, len - h < HA_Q4_GROUP ? len - h : HA_Q4_GROUP,
                                row + (size_t)((j + h) / HA_Q4_GROUP) * HA_Q4_BLOCK_BYTES);
            for (int64_t i = 0; !ha_dtype_is_int(gen) && i < len; i++) {
                uint32_t u;
                memcpy(&u, &v[i], 4);
                if (gen == HA_F32) memcpy(row + (j + i) * 4, &u, 4);
                else { /* bf16: v truncated; f16: random bits below 2 in magnitude (bit 14 clear: never inf or NaN) */
                    const uint16_t h = gen == HA_BF16 ? (uint16_t)(u >> 16) : (uint16_t)((lcg(&s) >> 48) & 0xbfffu);
                    memcpy(row + (j + i) * 2, &h, 2);
                }
            }
        }
    if (dt != gen) { /* repacked into panels by the core's own ha_pack */
        const size_t bytes = (size_t)rows * rb;
        unsigned char *rm = malloc(bytes);
        if (!rm) {
            fprintf(stderr, "kernel_ab: out of memory\n");
            return 1;
        }
        memcpy(rm, W, bytes);
        const ha_matrix src = { .data = rm, .dtype = gen, .rows = rows, .cols = n, .nbytes = bytes };
        if ((w8 ? ha_quantize(&src, dt, W, mbytes) : ha_pack(&src, W, mbytes)) != HA_OK) {
            fprintf(stderr, "kernel_ab: %s\n", ha_last_error());
            return 1;
        }
        free(rm);
    }
    for (int64_t i = 0; i < tmax * n; i++) X[i] = (float)((double)(lcg(&s) >> 11) * 0x1p-52 - 1.0);
    int16_t *Xq = malloc((size_t)(tmax * ha_act_width(n)) * sizeof(int16_t));
    float *xscale = malloc((size_t)tmax * sizeof(float));
    if (!Xq || !xscale) {
        fprintf(stderr, "kernel_ab: out of memory\n");
        return 1;
    }
    for (int64_t t = 0; t < tmax; t++) kernels_b.quant_act(X + t * n, n, Xq + t * ha_act_width(n), xscale + t);
    const int64_t groups = (n + HA_Q8_GROUP - 1) / HA_Q8_GROUP;
    char *Xq8 = malloc((size_t)tmax * ha_row_bytes(HA_Q8, n));
    int32_t *xsum = malloc((size_t)(tmax * groups) * sizeof(int32_t));
    if (!Xq8 || !xsum) {
        fprintf(stderr, "kernel_ab: out of memory\n");
        return 1;
    }
    for (int64_t t = 0; t < tmax; t++)
        ha_quant_act8(kernels_b.quant_q8_sum, X + t * n, n, Xq8 + (size_t)t * ha_row_bytes(HA_Q8, n), xsum + t * groups);
    for (int64_t i = 0; i < tmax * rows; i++) Ya[i] = 1.0f, Yb[i] = 2.0f; /* an output one build leaves unwritten differs */
    printf("%s, %lld rows x %lld, %d rounds each, alternating A and B\n", formats[f].name, (long long)rows, (long long)n, rounds);
    for (int a = 5; a < argc; a++) {
        const int64_t T = atoll(argv[a]);
        if (T < 1) continue;
        /* repeats per timed block: about 2 ms of work at 10 G multiply-adds/s, at least one */
        const int reps = (int)(2e7 / ((double)rows * (double)n * (double)T)) + 1;
        matmul_ctx c = { dt, W, n, rows, T, X, Xq, xscale, Xq8, xsum, { Ya, Yb } };
        time_ab(matmul_run, &c, reps, rounds, Ya, Yb, (size_t)(T * rows) * sizeof(float), "T", T, 1);
    }
    free(W), free(X), free(Xq), free(xscale), free(Xq8), free(xsum), free(Ya), free(Yb);
    return 0;
}
