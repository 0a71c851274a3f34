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
 * panel of PANEL elements, which then serves every token, two at a time; the weights are read from memory
 * once per call whatever T is. */
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

/* Panel path: acc (rows, T) 8-lane accumulators kept in accbuf between panels. The 4-row, 2-token tile
 * keeps its eight accumulators in named registers (GCC spills arrays of them to the stack). */
AVX2 static void panel_tokens(const float *const *pw, int rows, const float *X, int64_t n, int64_t k0, int64_t kc,
                              int64_t T, __m256 *accbuf) {
    /* Tokens [0, t4): 2 rows x 4 tokens, 8 accumulators, 6 loads per 8 multiply-adds; an odd last row
     * alone. Then tokens [t4, T) as below. */
    const int64_t t4 = rows >= 2 ? T - T % 4 : 0;
    int64_t t = 0;
    for (; t < t4; t += 4)
        for (int i = 0; i + 2 <= rows; i += 2) {
            const float *p0 = pw[i], *p1 = pw[i + 1];
            __m256 *c0 = accbuf + i * T + t, *c1 = accbuf + (i + 1) * T + t;
            __m256 a00 = c0[0], a01 = c0[1], a02 = c0[2], a03 = c0[3], a10 = c1[0], a11 = c1[1], a12 = c1[2], a13 = c1[3];
            const float *x0 = X + t * n + k0, *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
            for (int64_t k = 0; k < kc; k += 8) {
                __m256 w0 = _mm256_loadu_ps(p0 + k), w1 = _mm256_loadu_ps(p1 + k), v;
                v = _mm256_loadu_ps(x0 + k), a00 = _mm256_fmadd_ps(w0, v, a00), a10 = _mm256_fmadd_ps(w1, v, a10);
                v = _mm256_loadu_ps(x1 + k), a01 = _mm256_fmadd_ps(w0, v, a01), a11 = _mm256_fmadd_ps(w1, v, a11);
                v = _mm256_loadu_ps(x2 + k), a02 = _mm256_fmadd_ps(w0, v, a02), a12 = _mm256_fmadd_ps(w1, v, a12);
                v = _mm256_loadu_ps(x3 + k), a03 = _mm256_fmadd_ps(w0, v, a03), a13 = _mm256_fmadd_ps(w1, v, a13);
            }
            c0[0] = a00, c0[1] = a01, c0[2] = a02, c0[3] = a03, c1[0] = a10, c1[1] = a11, c1[2] = a12, c1[3] = a13;
        }
    if (rows % 2)
        for (int64_t u = 0; u < t4; u++) {
            __m256 a = accbuf[(rows - 1) * T + u];
            const float *x0 = X + u * n + k0;
            for (int64_t k = 0; k < kc; k += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(pw[rows - 1] + k), _mm256_loadu_ps(x0 + k), a);
            accbuf[(rows - 1) * T + u] = a;
        }
    if (rows == ROWS) {
        const float *p0 = pw[0], *p1 = pw[1], *p2 = pw[2], *p3 = pw[3];
        for (; t + 2 <= T; t += 2) {
            __m256 a00 = accbuf[0 * T + t], a01 = accbuf[0 * T + t + 1], a10 = accbuf[1 * T + t], a11 = accbuf[1 * T + t + 1];
            __m256 a20 = accbuf[2 * T + t], a21 = accbuf[2 * T + t + 1], a30 = accbuf[3 * T + t], a31 = accbuf[3 * T + t + 1];
            const float *x0 = X + t * n + k0, *x1 = x0 + n;
            for (int64_t k = 0; k < kc; k += 8) {
                __m256 v0 = _mm256_loadu_ps(x0 + k), v1 = _mm256_loadu_ps(x1 + k), w;
                w = _mm256_loadu_ps(p0 + k), a00 = _mm256_fmadd_ps(w, v0, a00), a01 = _mm256_fmadd_ps(w, v1, a01);
                w = _mm256_loadu_ps(p1 + k), a10 = _mm256_fmadd_ps(w, v0, a10), a11 = _mm256_fmadd_ps(w, v1, a11);
                w = _mm256_loadu_ps(p2 + k), a20 = _mm256_fmadd_ps(w, v0, a20), a21 = _mm256_fmadd_ps(w, v1, a21);
                w = _mm256_loadu_ps(p3 + k), a30 = _mm256_fmadd_ps(w, v0, a30), a31 = _mm256_fmadd_ps(w, v1, a31);
            }
            accbuf[0 * T + t] = a00, accbuf[0 * T + t + 1] = a01, accbuf[1 * T + t] = a10, accbuf[1 * T + t + 1] = a11;
            accbuf[2 * T + t] = a20, accbuf[2 * T + t + 1] = a21, accbuf[3 * T + t] = a30, accbuf[3 * T + t + 1] = a31;
        }
    }
    for (; t < T; t++)
        for (int i = 0; i < rows; i++) {
            __m256 a = accbuf[i * T + t];
            const float *x0 = X + t * n + k0;
            for (int64_t k = 0; k < kc; k += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(pw[i] + k), _mm256_loadu_ps(x0 + k), a);
            accbuf[i * T + t] = a;
        }
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
                    for (int64_t k = 0; k < nv; k += 8) {                                              \
                        __m256 x = _mm256_loadu_ps(X + k);                                             \
                        a0 = _mm256_fmadd_ps(w8_##SUF(w[0], k), x, a0);                                \
                        a1 = _mm256_fmadd_ps(w8_##SUF(w[1], k), x, a1);                                \
                        a2 = _mm256_fmadd_ps(w8_##SUF(w[2], k), x, a2);                                \
                        a3 = _mm256_fmadd_ps(w8_##SUF(w[3], k), x, a3);                                \
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
            for (int64_t k0 = 0; k0 < nv; k0 += PANEL) {                                               \
                const int64_t kc = nv - k0 < PANEL ? nv - k0 : PANEL;                                  \
                const float *pw[ROWS];                                                                 \
                for (int i = 0; i < rows; i++) {                                                       \
                    if (WIDE_IS_F32) {                                                                 \
                        pw[i] = (const float *)w[i] + k0;                                              \
                    } else {                                                                           \
                        for (int64_t k = 0; k < kc; k += 8) _mm256_store_ps(panel[i] + k, w8_##SUF(w[i], k0 + k)); \
                        pw[i] = panel[i];                                                              \
                    }                                                                                  \
                }                                                                                      \
                panel_tokens(pw, rows, X, n, k0, kc, T, accbuf);                                       \
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

/* One group (len weights from base, len % 8 == 0) of the rows' panels pq (float(q)) with scales sc, for every
 * token; accbuf (rows, T) as in panel_tokens. */
AVX2 static inline __attribute__((always_inline)) void q8_group_tokens(const float *const *pq, const float *sc, int rows, const float *X, int64_t n,
                                 int64_t base, int64_t len, int64_t T, __m256 *accbuf) {
    const int64_t t4 = rows >= 2 ? T - T % 4 : 0;
    for (int64_t t = 0; t < t4; t += 4)
        for (int i = 0; i + 2 <= rows; i += 2) {
            const float *p0 = pq[i], *p1 = pq[i + 1];
            __m256 g00 = _mm256_setzero_ps(), g01 = g00, g02 = g00, g03 = g00, g10 = g00, g11 = g00, g12 = g00, g13 = g00;
            const float *x0 = X + t * n + base, *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
            for (int64_t k = 0; k < len; k += 8) {
                __m256 w0 = _mm256_load_ps(p0 + k), w1 = _mm256_load_ps(p1 + k), v;
                v = _mm256_loadu_ps(x0 + k), g00 = _mm256_fmadd_ps(w0, v, g00), g10 = _mm256_fmadd_ps(w1, v, g10);
                v = _mm256_loadu_ps(x1 + k), g01 = _mm256_fmadd_ps(w0, v, g01), g11 = _mm256_fmadd_ps(w1, v, g11);
                v = _mm256_loadu_ps(x2 + k), g02 = _mm256_fmadd_ps(w0, v, g02), g12 = _mm256_fmadd_ps(w1, v, g12);
                v = _mm256_loadu_ps(x3 + k), g03 = _mm256_fmadd_ps(w0, v, g03), g13 = _mm256_fmadd_ps(w1, v, g13);
            }
            __m256 s0 = _mm256_set1_ps(sc[i]), s1 = _mm256_set1_ps(sc[i + 1]);
            __m256 *c0 = accbuf + i * T + t, *c1 = accbuf + (i + 1) * T + t;
            c0[0] = _mm256_fmadd_ps(s0, g00, c0[0]), c0[1] = _mm256_fmadd_ps(s0, g01, c0[1]);
            c0[2] = _mm256_fmadd_ps(s0, g02, c0[2]), c0[3] = _mm256_fmadd_ps(s0, g03, c0[3]);
            c1[0] = _mm256_fmadd_ps(s1, g10, c1[0]), c1[1] = _mm256_fmadd_ps(s1, g11, c1[1]);
            c1[2] = _mm256_fmadd_ps(s1, g12, c1[2]), c1[3] = _mm256_fmadd_ps(s1, g13, c1[3]);
        }
    int64_t t2 = t4; /* tokens [t4, t2): 4 rows x 2 tokens */
    if (rows == ROWS)
        for (; t2 + 2 <= T; t2 += 2) {
            __m256 g00 = _mm256_setzero_ps(), g01 = g00, g10 = g00, g11 = g00, g20 = g00, g21 = g00, g30 = g00, g31 = g00;
            const float *x0 = X + t2 * n + base, *x1 = x0 + n;
            for (int64_t k = 0; k < len; k += 8) {
                __m256 v0 = _mm256_loadu_ps(x0 + k), v1 = _mm256_loadu_ps(x1 + k), w;
                w = _mm256_load_ps(pq[0] + k), g00 = _mm256_fmadd_ps(w, v0, g00), g01 = _mm256_fmadd_ps(w, v1, g01);
                w = _mm256_load_ps(pq[1] + k), g10 = _mm256_fmadd_ps(w, v0, g10), g11 = _mm256_fmadd_ps(w, v1, g11);
                w = _mm256_load_ps(pq[2] + k), g20 = _mm256_fmadd_ps(w, v0, g20), g21 = _mm256_fmadd_ps(w, v1, g21);
                w = _mm256_load_ps(pq[3] + k), g30 = _mm256_fmadd_ps(w, v0, g30), g31 = _mm256_fmadd_ps(w, v1, g31);
            }
            __m256 *c = accbuf + t2;
            c[0] = _mm256_fmadd_ps(_mm256_set1_ps(sc[0]), g00, c[0]), c[1] = _mm256_fmadd_ps(_mm256_set1_ps(sc[0]), g01, c[1]);
            c += T;
            c[0] = _mm256_fmadd_ps(_mm256_set1_ps(sc[1]), g10, c[0]), c[1] = _mm256_fmadd_ps(_mm256_set1_ps(sc[1]), g11, c[1]);
            c += T;
            c[0] = _mm256_fmadd_ps(_mm256_set1_ps(sc[2]), g20, c[0]), c[1] = _mm256_fmadd_ps(_mm256_set1_ps(sc[2]), g21, c[1]);
            c += T;
            c[0] = _mm256_fmadd_ps(_mm256_set1_ps(sc[3]), g30, c[0]), c[1] = _mm256_fmadd_ps(_mm256_set1_ps(sc[3]), g31, c[1]);
        }
    for (int i = 0; i < rows; i++)
        for (int64_t t = (rows % 2 && i == rows - 1) ? 0 : t4; t < T; t++) {
            if (t >= t4 && t < t2) continue; /* done by the 4 x 2 tile */
            __m256 g = _mm256_setzero_ps();
            const float *x0 = X + t * n + base;
            for (int64_t k = 0; k < len; k += 8) g = _mm256_fmadd_ps(_mm256_load_ps(pq[i] + k), _mm256_loadu_ps(x0 + k), g);
            accbuf[i * T + t] = _mm256_fmadd_ps(_mm256_set1_ps(sc[i]), g, accbuf[i * T + t]);
        }
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
            for (int64_t base = 0; base < nv; base += HA_Q8_GROUP) {
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
        for (int64_t base = 0; base < nv; base += HA_Q8_GROUP) {
            const int64_t len = nv - base < HA_Q8_GROUP ? nv - base : HA_Q8_GROUP;
            const size_t off = (size_t)(base / HA_Q8_GROUP) * HA_Q8_BLOCK_BYTES;
            const float *pq[ROWS];
            for (int i = 0; i < rows; i++) {
                for (int64_t k = 0; k < len; k += 8) _mm256_store_ps(panel[i] + k, q8_block(w[i] + off, k));
                memcpy(&sc[i], w[i] + off, sizeof(float));
                pq[i] = panel[i];
            }
            q8_group_tokens(pq, sc, rows, X, n, base, len, T, accbuf);
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

const ha_kernels ha_kernels_avx2 = {
    .name = "avx2",
    .matmul = { [HA_F32] = matmul_f32, [HA_BF16] = matmul_bf16, [HA_F16] = matmul_f16, [HA_Q8] = matmul_q8 },
    .to_f32 = { [HA_F32] = to_f32_f32, [HA_BF16] = to_f32_bf16, [HA_F16] = to_f32_f16, [HA_Q8] = to_f32_q8 },
    .dot = dot_avx2,
    .axpy = axpy_avx2,
    .scale = scale_avx2,
};

#else /* not x86: the table exists so dispatch.c links; dispatch never selects it */
const ha_kernels ha_kernels_avx2 = { .name = NULL };
#endif
