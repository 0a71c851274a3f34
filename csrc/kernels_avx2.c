/* AVX2 + FMA + F16C kernels, compiled with target attributes so the file builds on any x86-64 and runs
 * only where dispatch.c found the features.
 *
 * Accumulation order of every dot product of length n (one weight row with one activation row), the
 * same in every kernel below and for every T, r0, r1: two 8-lane accumulators take alternate blocks of
 * 8 (a0: blocks 0, 2, 4...; a1: blocks 1, 3, 5...), a0 + a1 is summed across lanes by hsum(), then the
 * last n % 8 products are added one by one. */
#include <immintrin.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2 static inline __m256 load8_f32(const float *p) { return _mm256_loadu_ps(p); }
AVX2 static inline __m256 load8_bf16(const uint16_t *p) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
AVX2 static inline __m256 load8_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

static inline float load1_f32(const float *p) { return *p; }
static inline float load1_bf16(const uint16_t *p) { return ha_bf16_to_f32(*p); }
static inline float load1_f16(const uint16_t *p) { return ha_f16_to_f32(*p); }

/* ROWS weight rows against one activation row x, in the order described at the top. */
#define DEFINE_DOT_ROWS(SUFFIX, TYPE, ROWS)                                                            \
    AVX2 static inline void dot##ROWS##_##SUFFIX(const TYPE *w, int64_t n, const float *x, float *out) { \
        __m256 a0[ROWS], a1[ROWS];                                                                     \
        for (int k = 0; k < ROWS; k++) a0[k] = a1[k] = _mm256_setzero_ps();                            \
        int64_t i = 0;                                                                                 \
        for (; i + 16 <= n; i += 16) {                                                                 \
            __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);                       \
            for (int k = 0; k < ROWS; k++) {                                                           \
                a0[k] = _mm256_fmadd_ps(load8_##SUFFIX(w + k * n + i), x0, a0[k]);                     \
                a1[k] = _mm256_fmadd_ps(load8_##SUFFIX(w + k * n + i + 8), x1, a1[k]);                 \
            }                                                                                          \
        }                                                                                              \
        if (i + 8 <= n) {                                                                              \
            __m256 x0 = _mm256_loadu_ps(x + i);                                                        \
            for (int k = 0; k < ROWS; k++) a0[k] = _mm256_fmadd_ps(load8_##SUFFIX(w + k * n + i), x0, a0[k]); \
            i += 8;                                                                                    \
        }                                                                                              \
        for (int k = 0; k < ROWS; k++) {                                                               \
            float s = hsum(_mm256_add_ps(a0[k], a1[k]));                                               \
            for (int64_t j = i; j < n; j++) s += load1_##SUFFIX(w + k * n + j) * x[j];                 \
            out[k] = s;                                                                                \
        }                                                                                              \
    }

/* Weight rows go four at a time (each block read from memory once, then from cache for every token). */
#define DEFINE_MATMUL(SUFFIX, TYPE)                                                                    \
    DEFINE_DOT_ROWS(SUFFIX, TYPE, 1)                                                                   \
    DEFINE_DOT_ROWS(SUFFIX, TYPE, 4)                                                                   \
    AVX2 static void matmul_##SUFFIX(const void *W, int64_t n, int64_t r0, int64_t r1, const float *X, \
                                     int64_t T, float *Y, int64_t ldy) {                               \
        const TYPE *w = W;                                                                             \
        int64_t r = r0;                                                                                \
        for (; r + 4 <= r1; r += 4) {                                                                  \
            for (int64_t t = 0; t < T; t++) {                                                          \
                float out[4];                                                                          \
                dot4_##SUFFIX(w + r * n, n, X + t * n, out);                                           \
                for (int k = 0; k < 4; k++) Y[t * ldy + r + k] = out[k];                               \
            }                                                                                          \
        }                                                                                              \
        for (; r < r1; r++)                                                                            \
            for (int64_t t = 0; t < T; t++) dot1_##SUFFIX(w + r * n, n, X + t * n, &Y[t * ldy + r]);   \
    }

DEFINE_MATMUL(f32, float)
DEFINE_MATMUL(bf16, uint16_t)
DEFINE_MATMUL(f16, uint16_t)

AVX2 static float dot_avx2(const float *a, const float *b, int64_t n) {
    float s;
    dot1_f32(a, n, b, &s);
    return s;
}

AVX2 static void to_f32_f32(const void *src, float *dst, int64_t n) {
    const float *s = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8_f32(s + i));
    for (; i < n; i++) dst[i] = s[i];
}

AVX2 static void to_f32_bf16(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8_bf16(s + i));
    for (; i < n; i++) dst[i] = load1_bf16(s + i);
}

AVX2 static void to_f32_f16(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8_f16(s + i));
    for (; i < n; i++) dst[i] = load1_f16(s + i);
}

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
    .matmul = { [HA_F32] = matmul_f32, [HA_BF16] = matmul_bf16, [HA_F16] = matmul_f16 },
    .to_f32 = { [HA_F32] = to_f32_f32, [HA_BF16] = to_f32_bf16, [HA_F16] = to_f32_f16 },
    .dot = dot_avx2,
    .axpy = axpy_avx2,
    .scale = scale_avx2,
};

#else /* not x86: the table exists so dispatch.c links; dispatch never selects it */
const ha_kernels ha_kernels_avx2 = { .name = NULL };
#endif
