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
    int64_t t = 0;
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
#define HA_DTYPE_q8 HA_Q8
DEFINE_MATMUL(f32, 1)
DEFINE_MATMUL(bf16, 0)
DEFINE_MATMUL(f16, 0)
DEFINE_MATMUL(q8, 0)

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
