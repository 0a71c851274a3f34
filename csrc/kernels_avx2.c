/* AVX2 + FMA + F16C kernels, compiled with target attributes so the file builds on any x86-64 and runs
 * only where dispatch.c found the features.
 *
 * Accumulation order of every dot product of one weight row with one activation row of length n, the
 * same in every path below and for every T, r0, r1 (what makes chunk forwards batch-invariant): one 8-lane
 * accumulator takes the blocks of 8 in order, acc = fma(w[8b:8b+8], x[8b:8b+8], acc); hsum() adds its lanes
 * in a fixed tree; then the last n % 8 products are added one by one. Weights are widened to float32
 * exactly as ha_q8_at / ha_bf16_to_f32 / ha_f16_to_f32 do.
 *
 * Two paths share that order. One token (decode): four weight rows at a time, widened in registers and
 * used at once. Several tokens (verification, prefill): four weight rows are widened once into a float32
 * panel of PANEL elements, which then serves every token in register tiles (panel_tokens); the weights are
 * read from memory once per call whatever T is. Both paths prefetch the next rows into L2 as they go. */
#include <immintrin.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define ROWS 4     /* weight rows per tile */
#define PANEL 256  /* panel width in elements: a multiple of 8 and of HA_Q8_GROUP */
#define MAX_T 32   /* tokens per panel pass; more are taken MAX_T at a time */

AVX2 static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Eight weights of row w starting at element k (k % 8 == 0), widened to float32. */
AVX2 static inline __m256 w8_f32(const void *w, int64_t k) { return _mm256_loadu_ps((const float *)w + k); }
AVX2 static inline __m256 w8_bf16(const void *w, int64_t k) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + k)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
AVX2 static inline __m256 w8_f16(const void *w, int64_t k) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + k)));
}
AVX2 static inline __m256 w8_q8(const void *w, int64_t k) {
    const char *blk = (const char *)w + (size_t)(k / HA_Q8_GROUP) * HA_Q8_BLOCK_BYTES;
    __m128i q = _mm_loadl_epi64((const __m128i *)(blk + 4 + k % HA_Q8_GROUP));
    return _mm256_mul_ps(_mm256_broadcast_ss((const float *)blk), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
}

static inline float w1_f32(const void *w, int64_t k) { return ((const float *)w)[k]; }
static inline float w1_bf16(const void *w, int64_t k) { return ha_bf16_to_f32(((const uint16_t *)w)[k]); }
static inline float w1_f16(const void *w, int64_t k) { return ha_f16_to_f32(((const uint16_t *)w)[k]); }
static inline float w1_q8(const void *w, int64_t k) { return ha_q8_at(w, k); }

/* y = hsum(acc) + the tail products of row w with x, in order. */
#define FINISH(SUF, acc, w, x, nv, n, y)                                                               \
    do {                                                                                               \
        float s_ = hsum(acc);                                                                          \
        for (int64_t j_ = (nv); j_ < (n); j_++) s_ += w1_##SUF((w), j_) * (x)[j_];                      \
        (y) = s_;                                                                                      \
    } while (0)

/* Panel path. accbuf holds the (rows, T) 8-lane accumulators between panels: acc(i, t) = accbuf[i * T + t].
 *
 * tile(): R weight rows (R x kc panel pw[i] + [0, kc)) against tokens [t, t + S) of X, from element k0; the
 * R * S accumulators live in registers for the panel (R * S + S + 1 <= 16 ymm). With sc == NULL (float
 * weights) they carry on from accbuf; with sc (int8: scales of one group, the panel holds float(q)) they
 * start at zero and are folded in as acc = fma(sc[i], g, acc). R and S are literals at every call, so the
 * loops unroll completely after inlining. */
AVX2 static inline __attribute__((always_inline)) void tile(int R, int S, const float *const *pw, const float *sc,
                                                            const float *X, int64_t n, int64_t k0, int64_t kc,
                                                            int64_t T, int64_t t, __m256 *accbuf) {
    __m256 g[ROWS][4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int s = 0; s < S; s++) g[i][s] = sc ? _mm256_setzero_ps() : accbuf[i * T + t + s];
    const float *x = X + t * n + k0;
    for (int64_t k = 0; k < kc; k += 8) {
        __m256 v[4];
#pragma GCC unroll 4
        for (int s = 0; s < S; s++) v[s] = _mm256_loadu_ps(x + s * n + k);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            __m256 w = _mm256_loadu_ps(pw[i] + k);
#pragma GCC unroll 4
            for (int s = 0; s < S; s++) g[i][s] = _mm256_fmadd_ps(w, v[s], g[i][s]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int s = 0; s < S; s++)
            accbuf[i * T + t + s] = sc ? _mm256_fmadd_ps(_mm256_set1_ps(sc[i]), g[i][s], accbuf[i * T + t + s]) : g[i][s];
}

/* Every (row, token) accumulator over one panel. Four rows: tokens three at a time (12 accumulators, 7 loads
 * per 12 multiply-adds), the last 4 or 2 as pairs, a last single as a 4 x 1 tile; fewer rows (the end of a
 * range): each row alone, tokens four at a time. */
AVX2 static inline __attribute__((always_inline)) void panel_tokens(const float *const *pw, const float *sc, int rows,
                                                                    const float *X, int64_t n, int64_t k0,
                                                                    int64_t kc, int64_t T, __m256 *accbuf) {
    if (rows == ROWS) {
        for (int64_t t = 0; t < T;) {
            const int64_t left = T - t;
            if (left == 4 || left == 2) {
                tile(4, 2, pw, sc, X, n, k0, kc, T, t, accbuf), t += 2;
            } else if (left >= 3) {
                tile(4, 3, pw, sc, X, n, k0, kc, T, t, accbuf), t += 3;
            } else {
                tile(4, 1, pw, sc, X, n, k0, kc, T, t, accbuf), t += 1;
            }
        }
        return;
    }
    for (int i = 0; i < rows; i++) {
        const float *const *pi = pw + i, *si = sc ? sc + i : NULL;
        __m256 *ai = accbuf + i * T;
        int64_t t = 0;
        for (; t + 4 <= T; t += 4) tile(1, 4, pi, si, X, n, k0, kc, T, t, ai);
        for (; t + 2 <= T; t += 2) tile(1, 2, pi, si, X, n, k0, kc, T, t, ai);
        if (t < T) tile(1, 1, pi, si, X, n, k0, kc, T, t, ai);
    }
}

/* Software prefetch for the panel paths, which alternate short reads of ROWS weight rows with compute on
 * them from L1: left to the hardware prefetcher, reading and computing hardly overlap. While the panels of
 * rows [r, r + ROWS) are computed, the next ROWS rows (contiguous bytes, within the call's range) are
 * prefetched into L2, an equal share of them per panel. */
typedef struct prefetcher {
    const char *base;  /* the next rows' first byte */
    size_t off, end;   /* bytes prefetched so far, bytes in all */
    size_t share;      /* bytes per panel */
} prefetcher;

static inline prefetcher prefetch_next_rows(const void *W, size_t rb, int64_t r, int64_t r1, int64_t n_panels) {
    const int64_t b = r + ROWS < r1 ? r + ROWS : r1, e = r + 2 * ROWS < r1 ? r + 2 * ROWS : r1;
    prefetcher pf = { (const char *)W + (size_t)b * rb, 0, (size_t)(e - b) * rb, 0 };
    if (n_panels < 1) n_panels = 1; /* n < 8: no panel runs, nothing to share out */
    pf.share = ((pf.end + (size_t)n_panels - 1) / (size_t)n_panels + 63) & ~(size_t)63;
    return pf;
}

AVX2 static inline void prefetch_panel(prefetcher *pf) {
    for (size_t b = 0; b < pf->share && pf->off < pf->end; b += 64, pf->off += 64) _mm_prefetch(pf->base + pf->off, _MM_HINT_T1);
}

#define DEFINE_MATMUL(SUF, WIDE_IS_F32)                                                                \
    AVX2 static void matmul_##SUF(const void *W, int64_t n, int64_t r0, int64_t r1, const float *X,    \
                                  int64_t T, float *Y, int64_t ldy) {                                  \
        if (T > MAX_T) {                                                                               \
            for (int64_t t0 = 0; t0 < T; t0 += MAX_T)                                                  \
                matmul_##SUF(W, n, r0, r1, X + t0 * n, T - t0 < MAX_T ? T - t0 : MAX_T, Y + t0 * ldy, ldy); \
            return;                                                                                    \
        }                                                                                              \
        const size_t rb = ha_row_bytes(HA_DTYPE_##SUF, n);                                             \
        const int64_t nv = n - n % 8;                                                                  \
        for (int64_t r = r0; r < r1; r += ROWS) {                                                      \
            const int rows = r1 - r < ROWS ? (int)(r1 - r) : ROWS;                                     \
            const void *w[ROWS];                                                                       \
            for (int i = 0; i < rows; i++) w[i] = (const char *)W + (size_t)(r + i) * rb;              \
            if (T == 1) {                                                                              \
                __m256 a[ROWS];                                                                        \
                for (int i = 0; i < ROWS; i++) a[i] = _mm256_setzero_ps();                             \
                if (rows == ROWS) {                                                                    \
                    __m256 a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];                                 \
                    prefetcher pf = prefetch_next_rows(W, rb, r, r1, (nv + PANEL - 1) / PANEL);        \
                    for (int64_t k0 = 0; k0 < nv; k0 += PANEL) {                                       \
                        const int64_t ke = nv - k0 < PANEL ? nv : k0 + PANEL;                          \
                        prefetch_panel(&pf);                                                           \
                        for (int64_t k = k0; k < ke; k += 8) {                                         \
                            __m256 x = _mm256_loadu_ps(X + k);                                         \
                            a0 = _mm256_fmadd_ps(w8_##SUF(w[0], k), x, a0);                            \
                            a1 = _mm256_fmadd_ps(w8_##SUF(w[1], k), x, a1);                            \
                            a2 = _mm256_fmadd_ps(w8_##SUF(w[2], k), x, a2);                            \
                            a3 = _mm256_fmadd_ps(w8_##SUF(w[3], k), x, a3);                            \
                        }                                                                              \
                    }                                                                                  \
                    a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3;                                        \
                } else {                                                                               \
                    for (int i = 0; i < rows; i++)                                                     \
                        for (int64_t k = 0; k < nv; k += 8)                                            \
                            a[i] = _mm256_fmadd_ps(w8_##SUF(w[i], k), _mm256_loadu_ps(X + k), a[i]);   \
                }                                                                                      \
                for (int i = 0; i < rows; i++) FINISH(SUF, a[i], w[i], X, nv, n, Y[r + i]);            \
                continue;                                                                              \
            }                                                                                          \
            __m256 accbuf[ROWS * MAX_T];                                            \
            float panel[ROWS][PANEL] __attribute__((aligned(32)));                                     \
            for (int64_t i = 0; i < rows * T; i++) accbuf[i] = _mm256_setzero_ps();                    \
            prefetcher pf = prefetch_next_rows(W, rb, r, r1, (nv + PANEL - 1) / PANEL);                \
            for (int64_t k0 = 0; k0 < nv; k0 += PANEL) {                                               \
                const int64_t kc = nv - k0 < PANEL ? nv - k0 : PANEL;                                  \
                prefetch_panel(&pf);                                                                   \
                const float *pw[ROWS];                                                                 \
                for (int i = 0; i < rows; i++) {                                                       \
                    if (WIDE_IS_F32) {                                                                 \
                        pw[i] = (const float *)w[i] + k0;                                              \
                    } else {                                                                           \
                        for (int64_t k = 0; k < kc; k += 8) _mm256_store_ps(panel[i] + k, w8_##SUF(w[i], k0 + k)); \
                        pw[i] = panel[i];                                                              \
                    }                                                                                  \
                }                                                                                      \
                panel_tokens(pw, NULL, rows, X, n, k0, kc, T, accbuf);                                    \
            }                                                                                          \
            for (int i = 0; i < rows; i++)                                                             \
                for (int64_t t = 0; t < T; t++) FINISH(SUF, accbuf[i * T + t], w[i], X + t * n, nv, n, Y[t * ldy + r + i]); \
        }                                                                                              \
    }

#define HA_DTYPE_f32 HA_F32
#define HA_DTYPE_bf16 HA_BF16
#define HA_DTYPE_f16 HA_F16
DEFINE_MATMUL(f32, 1)
DEFINE_MATMUL(bf16, 0)
DEFINE_MATMUL(f16, 0)

/* int8 weights. Order for one output, the same on both paths: per group g of HA_Q8_GROUP weights (within
 * the first n - n % 8), a fresh accumulator takes its blocks of 8 in order, ga = fma(float(q), x, ga), and is
 * folded in as acc = fma(scale_g, ga, acc); then hsum(acc) and the tail one by one, as scale * q * x. Summing
 * a group before scaling spends one multiply per group instead of one per block of 8. */
AVX2 static inline __m256 q8_block(const char *blk, int64_t j) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 4 + j))));
}

AVX2 static void matmul_q8(const void *W, int64_t n, int64_t r0, int64_t r1, const float *X, int64_t T, float *Y,
                           int64_t ldy) {
    if (T > MAX_T) {
        for (int64_t t0 = 0; t0 < T; t0 += MAX_T)
            matmul_q8(W, n, r0, r1, X + t0 * n, T - t0 < MAX_T ? T - t0 : MAX_T, Y + t0 * ldy, ldy);
        return;
    }
    const size_t rb = ha_row_bytes(HA_Q8, n);
    const int64_t nv = n - n % 8;
    for (int64_t r = r0; r < r1; r += ROWS) {
        const int rows = r1 - r < ROWS ? (int)(r1 - r) : ROWS;
        const char *w[ROWS];
        for (int i = 0; i < rows; i++) w[i] = (const char *)W + (size_t)(r + i) * rb;
        if (T == 1 && rows == ROWS) {
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            prefetcher pf = prefetch_next_rows(W, rb, r, r1, (nv + HA_Q8_GROUP - 1) / HA_Q8_GROUP);
            for (int64_t base = 0; base < nv; base += HA_Q8_GROUP) {
                prefetch_panel(&pf);
                const int64_t len = nv - base < HA_Q8_GROUP ? nv - base : HA_Q8_GROUP;
                const size_t off = (size_t)(base / HA_Q8_GROUP) * HA_Q8_BLOCK_BYTES;
                const char *b0 = w[0] + off, *b1 = w[1] + off, *b2 = w[2] + off, *b3 = w[3] + off;
                __m256 g0 = _mm256_setzero_ps(), g1 = g0, g2 = g0, g3 = g0;
                for (int64_t k = 0; k < len; k += 8) {
                    __m256 x = _mm256_loadu_ps(X + base + k);
                    g0 = _mm256_fmadd_ps(q8_block(b0, k), x, g0);
                    g1 = _mm256_fmadd_ps(q8_block(b1, k), x, g1);
                    g2 = _mm256_fmadd_ps(q8_block(b2, k), x, g2);
                    g3 = _mm256_fmadd_ps(q8_block(b3, k), x, g3);
                }
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss((const float *)b0), g0, a0);
                a1 = _mm256_fmadd_ps(_mm256_broadcast_ss((const float *)b1), g1, a1);
                a2 = _mm256_fmadd_ps(_mm256_broadcast_ss((const float *)b2), g2, a2);
                a3 = _mm256_fmadd_ps(_mm256_broadcast_ss((const float *)b3), g3, a3);
            }
            FINISH(q8, a0, w[0], X, nv, n, Y[r]);
            FINISH(q8, a1, w[1], X, nv, n, Y[r + 1]);
            FINISH(q8, a2, w[2], X, nv, n, Y[r + 2]);
            FINISH(q8, a3, w[3], X, nv, n, Y[r + 3]);
            continue;
        }
        __m256 accbuf[ROWS * MAX_T];
        float panel[ROWS][HA_Q8_GROUP] __attribute__((aligned(32))), sc[ROWS];
        for (int64_t i = 0; i < rows * T; i++) accbuf[i] = _mm256_setzero_ps();
        prefetcher pf = prefetch_next_rows(W, rb, r, r1, (nv + HA_Q8_GROUP - 1) / HA_Q8_GROUP);
        for (int64_t base = 0; base < nv; base += HA_Q8_GROUP) {
            prefetch_panel(&pf);
            const int64_t len = nv - base < HA_Q8_GROUP ? nv - base : HA_Q8_GROUP;
            const size_t off = (size_t)(base / HA_Q8_GROUP) * HA_Q8_BLOCK_BYTES;
            const float *pq[ROWS];
            for (int i = 0; i < rows; i++) {
                for (int64_t k = 0; k < len; k += 8) _mm256_store_ps(panel[i] + k, q8_block(w[i] + off, k));
                memcpy(&sc[i], w[i] + off, sizeof(float));
                pq[i] = panel[i];
            }
            panel_tokens(pq, sc, rows, X, n, base, len, T, accbuf);
        }
        for (int i = 0; i < rows; i++)
            for (int64_t t = 0; t < T; t++) FINISH(q8, accbuf[i * T + t], w[i], X + t * n, nv, n, Y[t * ldy + r + i]);
    }
}

AVX2 static float dot_avx2(const float *a, const float *b, int64_t n) {
    const int64_t nv = n - n % 8;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < nv; k += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
    float y;
    FINISH(f32, acc, a, b, nv, n, y);
    return y;
}

#define DEFINE_TO_F32(SUF)                                                                             \
    AVX2 static void to_f32_##SUF(const void *src, float *dst, int64_t n) {                            \
        int64_t i = 0;                                                                                 \
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, w8_##SUF(src, i));                        \
        for (; i < n; i++) dst[i] = w1_##SUF(src, i);                                                  \
    }
DEFINE_TO_F32(f32)
DEFINE_TO_F32(bf16)
DEFINE_TO_F32(f16)
DEFINE_TO_F32(q8)

AVX2 static void axpy_avx2(float a, const float *x, float *y, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

AVX2 static void scale_avx2(float a, float *y, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= a;
}

/* 12 chains of 8-lane FMAs: more than latency (4) x ports (2) needs to keep both FMA ports busy. */
AVX2 static double mac_burst_avx2(int64_t n) {
    __m256 a[12];
    const __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (int64_t r = 0; r < n; r++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
    __m256 s = a[0];
    for (int i = 1; i < 12; i++) s = _mm256_add_ps(s, a[i]);
    return (double)n * 96.0 + 0.0 * (double)hsum(s);
}

const ha_kernels ha_kernels_avx2 = {
    .name = "avx2",
    .matmul = { [HA_F32] = matmul_f32, [HA_BF16] = matmul_bf16, [HA_F16] = matmul_f16, [HA_Q8] = matmul_q8 },
    .to_f32 = { [HA_F32] = to_f32_f32, [HA_BF16] = to_f32_bf16, [HA_F16] = to_f32_f16, [HA_Q8] = to_f32_q8 },
    .dot = dot_avx2,
    .axpy = axpy_avx2,
    .scale = scale_avx2,
    .mac_burst = mac_burst_avx2,
};

#else /* not x86: the table exists so dispatch.c links; dispatch never selects it */
const ha_kernels ha_kernels_avx2 = { .name = NULL };
#endif
