/* AVX2 + FMA + F16C kernels, compiled with target attributes so the file builds on any x86-64 and runs
 * only where dispatch.c found the features. Float weights come row-major (HA_F32, HA_BF16, HA_F16; below) or
 * in panels (HA_F32P, HA_BF16P, HA_F16P; their own section further down, with its own order).
 *
 * Row-major float weights. Accumulation order of every dot product of one weight row with one activation row
 * of length n (kernels.h's 8-lane dot product, which dot and attention's scores also give), the same in every
 * path below and for every T, r0, r1 (what makes chunk forwards batch-invariant): one 8-lane accumulator
 * takes the blocks of 8 in order, acc = fma(w[8b:8b+8], x[8b:8b+8], acc); hsum() adds its lanes in a fixed
 * tree; then the last n % 8 products are added one by one. Weights are widened to float32 exactly as
 * ha_bf16_to_f32 / ha_f16_to_f32 do. ("The same" bits for finite results; a NaN's sign may depend on which
 * FMA form the compiler picks.) Integer weights (int8, int4) multiply int16 activations instead: int32 lane
 * sums per group, no tail (rows are zero-padded to whole groups), in the order ha_kernels.matmul_int defines;
 * bitwise the scalar reference's (tile_int).
 *
 * One path serves every T (row-major weights). Weight rows are taken four at a time; a register tile (tile_*) of those four rows
 * and up to three tokens runs over the whole row, widening each block of weights in registers and keeping
 * its 12 accumulators in registers from the first block to the last (12 + 3 activations + 1 weight = the 16
 * ymm registers; integer weights: see tile_int). The next token tile reads the same four rows again, from
 * L1 or L2. While a row group's tiles run they prefetch the next four rows into L2. One token (decode) is
 * the 4 x 1 tile, its four rows from the four quarters of the range (four streams). Weights are widened in
 * registers by each tile, never into a float32 copy shared between tiles, whose stores and reloads would cost
 * more than widening again. */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"
/* The next group's prefetch is spread over its tiles' columns in steps of 8 columns (kernels_panels.h's default
 * is 64), so that it never issues a long burst of lines at once beside the tiles' own loads. */
#define PANEL_STEP 8
#include "kernels_panels.h"

#if defined(__x86_64__) || defined(__i386__)

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define ROWS 4     /* weight rows per tile */
#define CHUNK 256  /* float weights: elements of a row per prefetch step; a multiple of 8 */

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
/* int8: float(q) of eight weights from element j of the group whose block starts at blk (no scale). */
AVX2 static inline __m256 q8_block(const char *blk, int64_t j) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 4 + j))));
}
AVX2 static inline __m256 w8_q8(const void *w, int64_t k) {
    const char *blk = (const char *)w + (size_t)(k / HA_Q8_GROUP) * HA_Q8_BLOCK_BYTES;
    return _mm256_mul_ps(_mm256_broadcast_ss((const float *)blk), q8_block(blk, k % HA_Q8_GROUP));
}

static inline float w1_f32(const void *w, int64_t k) { return ((const float *)w)[k]; }
static inline float w1_bf16(const void *w, int64_t k) { return ha_bf16_to_f32(((const uint16_t *)w)[k]); }
static inline float w1_f16(const void *w, int64_t k) { return ha_f16_to_f32(((const uint16_t *)w)[k]); }
static inline float w1_q8(const void *w, int64_t k) { return ha_q8_at(w, k); }
/* int4: scale * q of eight weights from element k (k % 8 == 0), as ha_q4_at: the low nibbles of bytes
 * j..j+7 of the block for j = k % 32 below 16, else the high nibbles of bytes j-16..j-9. */
AVX2 static inline __m256 w8_q4(const void *w, int64_t k) {
    const char *blk = (const char *)w + (size_t)(k / HA_Q4_GROUP) * HA_Q4_BLOCK_BYTES;
    const int64_t j = k % HA_Q4_GROUP;
    __m128i v = _mm_loadl_epi64((const __m128i *)(blk + 4 + j % (HA_Q4_GROUP / 2)));
    if (j >= HA_Q4_GROUP / 2) v = _mm_srli_epi16(v, 4);
    v = _mm_sub_epi8(_mm_and_si128(v, _mm_set1_epi8(15)), _mm_set1_epi8(8));
    return _mm256_mul_ps(_mm256_broadcast_ss((const float *)blk), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)));
}
static inline float w1_q4(const void *w, int64_t k) { return ha_q4_at(w, k); }

/* y = hsum(acc) + the tail products of row w with x, in order. */
#define FINISH(SUF, acc, w, x, nv, n, y)                                           \
    do {                                                                           \
        float s_ = hsum(acc);                                                      \
        for (int64_t j_ = (nv); j_ < (n); j_++) s_ += w1_##SUF((w), j_) * (x)[j_]; \
        (y) = s_;                                                                  \
    } while (0)

/* Software prefetch: left to the hardware prefetcher, a tile's short reads of four rows and its compute on
 * them hardly overlap. While the token tiles of rows [r, r + ROWS) run, the next ROWS rows (contiguous bytes,
 * within the call's range) are prefetched into L2, an equal share of them per step of every tile. */
static inline ha_prefetcher prefetch_next_rows(const void *W, size_t rb, int64_t r, int64_t r1, int64_t n_steps) {
    const int64_t b = r + ROWS < r1 ? r + ROWS : r1, e = r + 2 * ROWS < r1 ? r + 2 * ROWS : r1;
    return ha_prefetcher_over((const char *)W + (size_t)b * rb, (size_t)(e - b) * rb, n_steps);
}

/* A matmul's activations: float rows for float weights, quantized rows for integer weights. */
typedef struct acts {
    const float *x;      /* (T, n) */
    const int16_t *q;    /* integer weights: (T, width) from quant_act */
    const float *qscale; /* integer weights: (T,) */
    int64_t width;       /* integer weights: ha_act_width(n) */
} acts;

/* Register tiles. tile_SUF(R, S, w, a, n, nv, t, Y, ldy, r, rs, pf): Y[(t + s) * ldy + r + i * rs] for i < R, s < S,
 * the dot products of weight rows w[i] with activation rows t + s of a; nv is LEN_SUF(n), the elements the
 * vector loop takes. R and S are literals at every call, so the loops unroll completely after inlining;
 * R * S + S + 1 <= 16 ymm. pf, if not NULL, is advanced one step per STEP_SUF elements. */
#define DEFINE_TILE(SUF)                                                                                               \
    AVX2 static inline __attribute__((always_inline)) void tile_##SUF(int R, int S, const void *const *w,              \
                                                                      const acts *a, int64_t n, int64_t nv, int64_t t, \
                                                                      float *Y, int64_t ldy, int64_t r, int64_t rs,    \
                                                                      ha_prefetcher *pf) {                             \
        const float *X = a->x;                                                                                         \
        __m256 g[ROWS][3];                                                                                             \
        _Pragma("GCC unroll 4") for (int i = 0; i < R; i++) _Pragma("GCC unroll 3") for (int s = 0; s < S; s++)        \
            g[i][s] = _mm256_setzero_ps();                                                                             \
        const float *x = X + t * n;                                                                                    \
        for (int64_t k0 = 0; k0 < nv; k0 += CHUNK) {                                                                   \
            const int64_t ke = nv - k0 < CHUNK ? nv : k0 + CHUNK;                                                      \
            ha_prefetch_step(pf);                                                                                      \
            for (int64_t k = k0; k < ke; k += 8) {                                                                     \
                __m256 v[3];                                                                                           \
                _Pragma("GCC unroll 3") for (int s = 0; s < S; s++) v[s] = _mm256_loadu_ps(x + s * n + k);             \
                _Pragma("GCC unroll 4") for (int i = 0; i < R; i++) {                                                  \
                    const __m256 wi = w8_##SUF(w[i], k);                                                               \
                    _Pragma("GCC unroll 3") for (int s = 0; s < S; s++) g[i][s] = _mm256_fmadd_ps(wi, v[s], g[i][s]);  \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        _Pragma("GCC unroll 4") for (int i = 0; i < R; i++) _Pragma("GCC unroll 3") for (int s = 0; s < S; s++)        \
            FINISH(SUF, g[i][s], w[i], x + s * n, nv, n, Y[(t + s) * ldy + r + i * rs]);                               \
    }
DEFINE_TILE(f32)
DEFINE_TILE(bf16)
DEFINE_TILE(f16)

/* Sixteen integer weights of a block (blk: its first byte, the scale) from element k, widened to int16.
 * int8: bytes k..k+15. int4 (k = 0 or 16): the low or the high nibbles of the 16 bytes, less 8. */
AVX2 static inline __m256i w16_int(const char *blk, int k, int q4) {
    if (!q4) return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 4 + k)));
    __m128i v = _mm_loadu_si128((const __m128i *)(blk + 4));
    if (k) v = _mm_srli_epi16(v, 4);
    return _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_and_si128(v, _mm_set1_epi8(15)), _mm_set1_epi8(8)));
}

/* Integer weights times int16 activations (the order ha_kernels.matmul_int defines). Per group, vpmaddwd
 * multiplies the sixteen int16 activations of a step by sixteen of the group's weights widened to int16
 * (w16_int) and adds pairs into eight int32 lanes, summed exactly over the group's steps; then lane_j =
 * fma(float(sum_j), scale_g, lane_j). vpmaddwd takes the products 16 at a time with no widening to float32
 * (the float path widened every 8 int8 weights in two steps and multiplied them by one FMA per token). The group
 * sums take the registers; where R * S of them leave no room for the running sums (R * S > 6), those live in
 * memory, read and written once per group. Each step's sums are pinned to their register (an empty asm): integer
 * addition being associative, GCC otherwise regrouped the sums into trees and spilled their terms. GROUP, BLOCK
 * and q4 are literals. */
AVX2 static inline __attribute__((always_inline)) void tile_int(int R, int S, int GROUP, int BLOCK, int q4,
                                                                const void *const *w, const acts *a, int64_t nv,
                                                                int64_t t, float *Y, int64_t ldy, int64_t r, int64_t rs,
                                                                ha_prefetcher *pf) {
    __m256 acc[ROWS][3];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 3
        for (int s = 0; s < S; s++) acc[i][s] = _mm256_setzero_ps();
    const int16_t *x = a->q + t * a->width;
    for (int64_t base = 0; base < nv; base += GROUP) {
        ha_prefetch_step(pf);
        const size_t off = (size_t)(base / GROUP) * (size_t)BLOCK;
        __m256i g[ROWS][3];
#pragma GCC unroll 4
        for (int i = 0; i < R; i++)
#pragma GCC unroll 3
            for (int s = 0; s < S; s++) g[i][s] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int k = 0; k < GROUP; k += 16) {
            __m256i v[3];
#pragma GCC unroll 3
            for (int s = 0; s < S; s++) v[s] = _mm256_loadu_si256((const __m256i *)(x + s * a->width + base + k));
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) {
                const __m256i wi = w16_int((const char *)w[i] + off, k, q4);
#pragma GCC unroll 3
                for (int s = 0; s < S; s++) {
                    g[i][s] = _mm256_add_epi32(g[i][s], _mm256_madd_epi16(wi, v[s]));
                    __asm__("" : "+x"(g[i][s]));
                }
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const __m256 sc = _mm256_broadcast_ss((const float *)((const char *)w[i] + off));
#pragma GCC unroll 3
            for (int s = 0; s < S; s++) acc[i][s] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(g[i][s]), sc, acc[i][s]);
        }
        /* Left to itself GCC keeps acc in registers too and spills g inside the loop above. */
        if (R * S > 6) __asm__ volatile("" : : "r"(acc) : "memory");
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 3
        for (int s = 0; s < S; s++) Y[(t + s) * ldy + r + i * rs] = hsum(acc[i][s]) * a->qscale[t + s];
}
#define DEFINE_TILE_INT(SUF, GROUP, BLOCK, Q4)                                                                         \
    AVX2 static inline __attribute__((always_inline)) void tile_##SUF(int R, int S, const void *const *w,              \
                                                                      const acts *a, int64_t n, int64_t nv, int64_t t, \
                                                                      float *Y, int64_t ldy, int64_t r, int64_t rs,    \
                                                                      ha_prefetcher *pf) {                             \
        (void)n;                                                                                                       \
        tile_int(R, S, GROUP, BLOCK, Q4, w, a, nv, t, Y, ldy, r, rs, pf);                                              \
    }
DEFINE_TILE_INT(q8, HA_Q8_GROUP, HA_Q8_BLOCK_BYTES, 0)
DEFINE_TILE_INT(q4, HA_Q4_GROUP, HA_Q4_BLOCK_BYTES, 1)

/* Tiles of four rows for T tokens: three tokens at a time, the last 4 or 2 as pairs, a last single alone. */
#define TILE_WIDTH(left) ((left) == 4 || (left) == 2 ? 2 : (left) >= 3 ? 3 : 1)
static inline int64_t n_tiles(int64_t T) {
    int64_t c = 0;
    for (int64_t t = 0; t < T; c++) t += TILE_WIDTH(T - t);
    return c;
}

/* Y[t, r] for r0 <= r < r1, t < T: four rows at a time, in tiles of up to three tokens (TILE_WIDTH), which
 * share out the prefetch of the next four rows between them (spread over all of them rather than the first, so
 * that no tile waits behind the whole group's prefetches); fewer rows (the end of a range): each row alone,
 * tokens three at a time. One token (decode) takes its four rows from the four quarters of the range instead, so
 * that each core reads four streams side by side, which memory may serve faster than one (core/membw.c measures
 * the bound that way), with the hardware prefetcher alone. LEN_SUF(n): the elements a tile's vector loop takes;
 * STEP_SUF: elements per prefetch step. */
#define LEN_f32(n) ((n) - (n) % 8)
#define LEN_bf16(n) LEN_f32(n)
#define LEN_f16(n) LEN_f32(n)
#define LEN_q8(n) (((n) + HA_Q8_GROUP - 1) / HA_Q8_GROUP * HA_Q8_GROUP)
#define LEN_q4(n) (((n) + HA_Q4_GROUP - 1) / HA_Q4_GROUP * HA_Q4_GROUP)
#define STEP_f32 CHUNK
#define STEP_bf16 CHUNK
#define STEP_f16 CHUNK
#define STEP_q8 HA_Q8_GROUP
#define STEP_q4 HA_Q4_GROUP
#define DEFINE_MATMUL_ROWS(SUF, DTYPE)                                                                             \
    AVX2 static inline __attribute__((always_inline)) void matmul_rows_##SUF(const void *W, int64_t n, int64_t r0, \
                                                                             int64_t r1, const acts *a, int64_t T, \
                                                                             float *Y, int64_t ldy) {              \
        const size_t rb = ha_row_bytes(DTYPE, n);                                                                  \
        const int64_t nv = LEN_##SUF(n), steps = n_tiles(T) * ((nv + STEP_##SUF - 1) / STEP_##SUF);                \
        const int64_t q = (r1 - r0) / ROWS;                                                                        \
        if (T == 1 && q >= 1) { /* one token: each tile takes rows r, r + q, r + 2q, r + 3q */                     \
            for (int64_t r = r0; r < r0 + q; r++) {                                                                \
                const void *w[ROWS];                                                                               \
                for (int i = 0; i < ROWS; i++) w[i] = (const char *)W + (size_t)(r + i * q) * rb;                  \
                tile_##SUF(4, 1, w, a, n, nv, 0, Y, ldy, r, q, NULL);                                              \
            }                                                                                                      \
            r0 += ROWS * q;                                                                                        \
        }                                                                                                          \
        for (int64_t r = r0; r < r1; r += ROWS) {                                                                  \
            const int rows = r1 - r < ROWS ? (int)(r1 - r) : ROWS;                                                 \
            const void *w[ROWS];                                                                                   \
            for (int i = 0; i < rows; i++) w[i] = (const char *)W + (size_t)(r + i) * rb;                          \
            if (rows == ROWS) {                                                                                    \
                ha_prefetcher next = prefetch_next_rows(W, rb, r, r1, steps), *pf = &next;                         \
                for (int64_t t = 0; t < T;) {                                                                      \
                    const int64_t width = TILE_WIDTH(T - t);                                                       \
                    if (width == 3) tile_##SUF(4, 3, w, a, n, nv, t, Y, ldy, r, 1, pf);                            \
                    else if (width == 2) tile_##SUF(4, 2, w, a, n, nv, t, Y, ldy, r, 1, pf);                       \
                    else tile_##SUF(4, 1, w, a, n, nv, t, Y, ldy, r, 1, pf);                                       \
                    t += width;                                                                                    \
                }                                                                                                  \
                continue;                                                                                          \
            }                                                                                                      \
            for (int i = 0; i < rows; i++) {                                                                       \
                int64_t t = 0;                                                                                     \
                for (; t + 3 <= T; t += 3) tile_##SUF(1, 3, w + i, a, n, nv, t, Y, ldy, r + i, 1, NULL);           \
                for (; t < T; t++) tile_##SUF(1, 1, w + i, a, n, nv, t, Y, ldy, r + i, 1, NULL);                   \
            }                                                                                                      \
        }                                                                                                          \
    }
#define DEFINE_MATMUL(SUF, DTYPE)                                                                              \
    DEFINE_MATMUL_ROWS(SUF, DTYPE)                                                                             \
    AVX2 static void matmul_##SUF(const void *W, int64_t n, int64_t r0, int64_t r1, const float *X, int64_t T, \
                                  float *Y, int64_t ldy) {                                                     \
        const acts a = { .x = X };                                                                             \
        matmul_rows_##SUF(W, n, r0, r1, &a, T, Y, ldy);                                                        \
    }
DEFINE_MATMUL(f32, HA_F32)
DEFINE_MATMUL(bf16, HA_BF16)
DEFINE_MATMUL(f16, HA_F16)
#define DEFINE_MATMUL_INT(SUF, DTYPE)                                                                  \
    DEFINE_MATMUL_ROWS(SUF, DTYPE)                                                                     \
    AVX2 static void matmul_##SUF(const void *W, int64_t n, int64_t r0, int64_t r1, const int16_t *Xq, \
                                  const float *xscale, int64_t T, float *Y, int64_t ldy) {             \
        const acts a = { .q = Xq, .qscale = xscale, .width = ha_act_width(n) };                        \
        matmul_rows_##SUF(W, n, r0, r1, &a, T, Y, ldy);                                                \
    }
DEFINE_MATMUL_INT(q8, HA_Q8)
DEFINE_MATMUL_INT(q4, HA_Q4)

#define W8_FN AVX2
#define W8_VNNI 0
#include "kernels_w8a8_avx2.h"


/* ---- float weights in panels (HA_F32P, HA_BF16P, HA_F16P) ---------------------------------------------
 * Column k of a panel holds 16 rows' weights side by side, so one load and at most two conversions give two
 * vectors of 8 rows (p16_*), each multiplied by a broadcast activation: a tile of P panels x S tokens keeps
 * 2 * P * S accumulators (each the running sum of one output, no horizontal sum at the end) and per column
 * spends P loads, at most 2 * P conversions and S broadcasts on 2 * P * S FMAs. The row-major tiles above
 * spend a conversion per 8 weights and token tile and a 32-byte activation load per 8 products. Every output is
 * the chain s = fma(w[k], x[k], s) over k in order, in any tile, so results do not depend on T or the row range,
 * and equal MATMUL_PANELS_SCALAR's bitwise (for finite results; where NaNs meet, which NaN survives may differ). */

/* Rows 0-7 (lo) and 8-15 (hi) of column k of a panel, widened to float32 exactly. */
AVX2 static inline void p16_f32p(const void *panel, int64_t k, __m256 *lo, __m256 *hi) {
    const float *p = (const float *)panel + k * HA_PANEL_ROWS;
    *lo = _mm256_loadu_ps(p);
    *hi = _mm256_loadu_ps(p + 8);
}
/* bfloat16 panels hold row i < 8 at 2i and row 8 + i at 2i + 1: the low and high halves of 32-bit lane i. */
AVX2 static inline void p16_bf16p(const void *panel, int64_t k, __m256 *lo, __m256 *hi) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)((const uint16_t *)panel + k * HA_PANEL_ROWS));
    *lo = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    *hi = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
}
AVX2 static inline void p16_f16p(const void *panel, int64_t k, __m256 *lo, __m256 *hi) {
    const uint16_t *p = (const uint16_t *)panel + k * HA_PANEL_ROWS;
    *lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    *hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 8)));
}


/* ptile_SUF(P, S, panel, pbytes, X, n, Y, ldy, row, r0, r1, pf): for panels panel + p * pbytes (p < P, the
 * first holding row `row`) and tokens s < S of X (S, n), Y[s * ldy + row + 16 p + i] for the rows in
 * [r0, r1). P and S are literals at every call (2 * P * S <= 12 accumulators). */
#define DEFINE_PANEL_TILE(SUF)                                                                                         \
    AVX2 static inline __attribute__((always_inline)) void ptile_##SUF(int P, int S, const char *panel, size_t pbytes, \
                                                                       const float *X, int64_t n, float *Y,            \
                                                                       int64_t ldy, int64_t row, int64_t r0,           \
                                                                       int64_t r1, ha_prefetcher *pf) {                \
        __m256 acc[4][2][6];                                                                                           \
        _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) _Pragma("GCC unroll 6") for (int s = 0; s < S; s++)        \
            acc[p][0][s] = acc[p][1][s] = _mm256_setzero_ps();                                                         \
        for (int64_t k0 = 0; k0 < n; k0 += PANEL_STEP) {                                                               \
            const int64_t ke = n - k0 < PANEL_STEP ? n : k0 + PANEL_STEP;                                              \
            ha_prefetch_step(pf);                                                                                      \
            for (int64_t k = k0; k < ke; k++) {                                                                        \
                _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                                  \
                    __m256 lo, hi;                                                                                     \
                    p16_##SUF(panel + (size_t)p * pbytes, k, &lo, &hi);                                                \
                    _Pragma("GCC unroll 6") for (int s = 0; s < S; s++) {                                              \
                        const __m256 b = _mm256_broadcast_ss(X + s * n + k);                                           \
                        acc[p][0][s] = _mm256_fmadd_ps(lo, b, acc[p][0][s]);                                           \
                        acc[p][1][s] = _mm256_fmadd_ps(hi, b, acc[p][1][s]);                                           \
                    }                                                                                                  \
                    /* 2 x 3: GCC otherwise loads and widens the next panel's weights early and, with both  \
                     * panels' weights live beside the 12 sums, spills; the fence keeps one panel's weights \
                     * live at a time. */          \
                    if (P > 1 && S == 3) __asm__ volatile("" ::: "memory");                                            \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) _Pragma("GCC unroll 6") for (int s = 0; s < S; s++) {      \
            const int64_t b = row + (int64_t)p * HA_PANEL_ROWS;                                                        \
            float *y = Y + s * ldy;                                                                                    \
            if (b >= r0 && b + HA_PANEL_ROWS <= r1) {                                                                  \
                _mm256_storeu_ps(y + b, acc[p][0][s]);                                                                 \
                _mm256_storeu_ps(y + b + 8, acc[p][1][s]);                                                             \
                continue;                                                                                              \
            }                                                                                                          \
            float v[HA_PANEL_ROWS];                                                                                    \
            _mm256_storeu_ps(v, acc[p][0][s]);                                                                         \
            _mm256_storeu_ps(v + 8, acc[p][1][s]);                                                                     \
            ha_store_panel_rows(y, b, r0, r1, v);                                                                      \
        }                                                                                                              \
    }
DEFINE_PANEL_TILE(f32p)
DEFINE_PANEL_TILE(bf16p)
DEFINE_PANEL_TILE(f16p)

/* Panels per group for tiles of up to S tokens: enough accumulators (8 to 12) to cover the FMA latency. */
#define PANEL_GROUP(S) ((S) == 1 ? 4 : (S) <= 3 ? 2 : 1)
/* One token alone streams four panels without software prefetch (kernels_panels.h), and float32 two or three tokens
 * two panels; more tokens, and bfloat16 and float16 at two or three, share a prefetched group: per dtype and T, the
 * faster of the two in A/B runs (benchmarks/kernel_ab.sh). */
#define PANEL_ALONE_f32p(S) ((S) == 1 ? 4 : (S) <= 3 ? 2 : 0)
#define PANEL_ALONE_bf16p(S) ((S) == 1 ? 4 : 0)
#define PANEL_ALONE_f16p(S) ((S) == 1 ? 4 : 0)

#define MAX_S 6 /* tokens per panel tile */
#define MAX_CASE 6 /* the same, as a bare literal kernels_panels.h pastes */
#define PANEL_TILE_MAX_f32p(T) MAX_S
#define PANEL_TILE_MAX_bf16p(T) MAX_S
#define PANEL_TILE_MAX_f16p(T) MAX_S
HA_DEFINE_MATMUL_PANELS(AVX2, f32p, HA_F32P)
HA_DEFINE_MATMUL_PANELS(AVX2, bf16p, HA_BF16P)
HA_DEFINE_MATMUL_PANELS(AVX2, f16p, HA_F16P)

#define DEFINE_PANEL_TO_F32(SUF)                                                                 \
    AVX2 static void panel_to_f32_##SUF(const void *panel, int64_t n, float *dst, int64_t ldd) { \
        for (int64_t k = 0; k < n; k++) {                                                        \
            __m256 lo, hi;                                                                       \
            p16_##SUF(panel, k, &lo, &hi);                                                       \
            _mm256_storeu_ps(dst + k * ldd, lo);                                                 \
            _mm256_storeu_ps(dst + k * ldd + 8, hi);                                             \
        }                                                                                        \
    }
DEFINE_PANEL_TO_F32(f32p)
DEFINE_PANEL_TO_F32(bf16p)
DEFINE_PANEL_TO_F32(f16p)

AVX2 static float dot_avx2(const float *a, const float *b, int64_t n) {
    const int64_t nv = n - n % 8;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < nv; k += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
    float y;
    FINISH(f32, acc, a, b, nv, n, y);
    return y;
}

#define DEFINE_TO_F32(SUF)                                                      \
    AVX2 static void to_f32_##SUF(const void *src, float *dst, int64_t n) {     \
        int64_t i = 0;                                                          \
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, w8_##SUF(src, i)); \
        for (; i < n; i++) dst[i] = w1_##SUF(src, i);                           \
    }
DEFINE_TO_F32(f32)
DEFINE_TO_F32(bf16)
DEFINE_TO_F32(f16)
DEFINE_TO_F32(q8)
DEFINE_TO_F32(q4)

AVX2 static void axpy_avx2(float a, const float *x, float *y, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

/* hsum of each of a0..a3, [hsum(a0), hsum(a1), hsum(a2), hsum(a3)]: the same tree on the four at once (its
 * first step on pairs of halves, the next two on lanes side by side), each addition the one hsum makes with
 * the same operands. */
AVX2 static inline __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    /* lanes j < 4: l_j + l_{j+4}, of a0 (low half) and a1 (high half); of a2 and a3 */
    const __m256 s01 = _mm256_add_ps(_mm256_permute2f128_ps(a0, a1, 0x20), _mm256_permute2f128_ps(a0, a1, 0x31));
    const __m256 s23 = _mm256_add_ps(_mm256_permute2f128_ps(a2, a3, 0x20), _mm256_permute2f128_ps(a2, a3, 0x31));
    /* per half: [u0 + u2, u1 + u3, w0 + w2, w1 + w3] for u of s01 and w of s23 */
    const __m256 c = _mm256_add_ps(_mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
    /* lanes 0, 4, 2, 6: (u0 + u2) + (u1 + u3) of a0, a1, a2, a3 */
    const __m256 d = _mm256_add_ps(c, _mm256_movehdup_ps(c));
    return _mm256_castps256_ps128(_mm256_permutevar8x32_ps(d, _mm256_setr_epi32(0, 4, 2, 6, 0, 4, 2, 6)));
}

/* Dots of NQ (1 or 2, a literal) queries q + i * qs with four keys k4, times scale, into s[i * lds + r] for
 * i < NQ, r < 4: each dot_avx2's accumulation (n % 8 == 0) and hsum (hsum4). */
AVX2 static inline __attribute__((always_inline)) void scores_tile(int NQ, const float *q, int64_t qs,
                                                                   const float *const *k4, int64_t n, __m128 vs,
                                                                   float *s, int64_t lds) {
    __m256 a[2][4];
    for (int i = 0; i < NQ; i++)
        for (int r = 0; r < 4; r++) a[i][r] = _mm256_setzero_ps();
    for (int64_t k = 0; k < n; k += 8) {
        __m256 x[2];
        for (int i = 0; i < NQ; i++) x[i] = _mm256_loadu_ps(q + i * qs + k);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const __m256 y = _mm256_loadu_ps(k4[r] + k);
            for (int i = 0; i < NQ; i++) a[i][r] = _mm256_fmadd_ps(x[i], y, a[i][r]);
        }
    }
    for (int i = 0; i < NQ; i++) _mm_storeu_ps(s + i * lds, _mm_mul_ps(hsum4(a[i][0], a[i][1], a[i][2], a[i][3]), vs));
}

/* Queries two at a time against keys four at a time (eight accumulators, scores_tile), so that eight chains of
 * multiply-adds overlap and each key is loaded once per two queries; a head size that is not a multiple of 8,
 * the keys past the last four: dot_avx2. */
AVX2 static void attn_scores_avx2(const float *q, int64_t nq, int64_t qs, const float *K, int64_t ld, int64_t slot0,
                                  int64_t S, int64_t nk, int64_t n, float scale, float *s, int64_t lds) {
    const __m128 vs = _mm_set1_ps(scale);
    int64_t t = 0, slot = slot0;
    for (; n % 8 == 0 && t + 4 <= nk; t += 4) {
        const float *k4[4];
        for (int i = 0; i < 4; i++, slot = slot + 1 == S ? 0 : slot + 1) k4[i] = K + slot * ld;
        int64_t i = 0;
        for (; i + 2 <= nq; i += 2) scores_tile(2, q + i * qs, qs, k4, n, vs, s + i * lds + t, lds);
        if (i < nq) scores_tile(1, q + i * qs, qs, k4, n, vs, s + i * lds + t, lds);
    }
    for (; t < nk; t++, slot = slot + 1 == S ? 0 : slot + 1)
        for (int64_t i = 0; i < nq; i++) s[i * lds + t] = dot_avx2(q + i * qs, K + slot * ld, n) * scale;
}

/* 64 accumulators at a time held in eight registers over all nk values (eight chains of multiply-adds in
 * flight, where four waited on their latency), then 32 in four, each updated in key order as axpy_avx2 updates
 * it. */
AVX2 static void values_head_avx2(const float *w, const float *V, int64_t ld, int64_t slot0, int64_t S, int64_t nk,
                                  int64_t n, float *acc) {
    const int64_t nv = n - n % 8;
    int64_t c = 0;
    for (; c + 64 <= nv; c += 64) {
        __m256 y[8];
        for (int r = 0; r < 8; r++) y[r] = _mm256_loadu_ps(acc + c + 8 * r);
        for (int64_t t = 0, slot = slot0; t < nk; t++, slot = slot + 1 == S ? 0 : slot + 1) {
            const float *x = V + slot * ld + c;
            const __m256 a = _mm256_set1_ps(w[t]);
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) y[r] = _mm256_fmadd_ps(a, _mm256_loadu_ps(x + 8 * r), y[r]);
        }
        for (int r = 0; r < 8; r++) _mm256_storeu_ps(acc + c + 8 * r, y[r]);
    }
    for (; c + 32 <= nv; c += 32) {
        __m256 y0 = _mm256_loadu_ps(acc + c), y1 = _mm256_loadu_ps(acc + c + 8), y2 = _mm256_loadu_ps(acc + c + 16),
               y3 = _mm256_loadu_ps(acc + c + 24);
        for (int64_t t = 0, slot = slot0; t < nk; t++, slot = slot + 1 == S ? 0 : slot + 1) {
            const float *x = V + slot * ld + c;
            const __m256 a = _mm256_set1_ps(w[t]);
            y0 = _mm256_fmadd_ps(a, _mm256_loadu_ps(x), y0);
            y1 = _mm256_fmadd_ps(a, _mm256_loadu_ps(x + 8), y1);
            y2 = _mm256_fmadd_ps(a, _mm256_loadu_ps(x + 16), y2);
            y3 = _mm256_fmadd_ps(a, _mm256_loadu_ps(x + 24), y3);
        }
        _mm256_storeu_ps(acc + c, y0);
        _mm256_storeu_ps(acc + c + 8, y1);
        _mm256_storeu_ps(acc + c + 16, y2);
        _mm256_storeu_ps(acc + c + 24, y3);
    }
    for (; c < nv; c += 8) {
        __m256 y = _mm256_loadu_ps(acc + c);
        for (int64_t t = 0, slot = slot0; t < nk; t++, slot = slot + 1 == S ? 0 : slot + 1)
            y = _mm256_fmadd_ps(_mm256_set1_ps(w[t]), _mm256_loadu_ps(V + slot * ld + c), y);
        _mm256_storeu_ps(acc + c, y);
    }
    for (int64_t t = 0, slot = slot0; nv < n && t < nk; t++, slot = slot + 1 == S ? 0 : slot + 1)
        for (int64_t i = nv; i < n; i++) acc[i] += w[t] * V[slot * ld + i];
}

/* The heads one after the other (values_head_avx2). */
AVX2 static void attn_values_avx2(const float *w, int64_t ldw, int64_t nq, const float *V, int64_t ld, int64_t slot0,
                                  int64_t S, int64_t nk, int64_t n, float *acc, int64_t lda) {
    for (int64_t h = 0; h < nq; h++) values_head_avx2(w + h * ldw, V, ld, slot0, S, nk, n, acc + h * lda);
}

AVX2 static void scale_avx2(float a, float *y, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= a;
}

/* roundf(y) (halves away from zero), 0 where y is not finite: rebuilt from exact steps, t = trunc(y), and
 * y - t (exact for |y| < 2^23) decides whether to step one away from zero. */
AVX2 static inline __m256 round_away_finite(__m256 y) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), big = _mm256_set1_ps(3.40282347e38f);
    const __m256 t = _mm256_round_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 away = _mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(y, t), abs_mask), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 r = _mm256_add_ps(t, _mm256_and_ps(away, _mm256_or_ps(_mm256_set1_ps(1.0f),
                                                                       _mm256_and_ps(y, _mm256_set1_ps(-0.0f)))));
    return _mm256_and_ps(r, _mm256_cmp_ps(_mm256_and_ps(y, abs_mask), big, _CMP_LE_OQ));
}

/* max|x| over x (n,), and whether x is all finite (0 if it holds NaN or inf). */
AVX2 static inline float abs_max(const float *x, int64_t n, int *finite) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), big = _mm256_set1_ps(3.40282347e38f);
    __m256 m = _mm256_setzero_ps(), ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    const int64_t nv = n - n % 8;
    for (int64_t i = 0; i < nv; i += 8) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask);
        ok = _mm256_and_ps(ok, _mm256_cmp_ps(a, big, _CMP_LE_OQ)); /* false for inf and NaN */
        m = _mm256_max_ps(m, a);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    *finite = _mm256_movemask_ps(ok) == 0xff;
    const float tail = ha_abs_max_ref(x + nv, n - nv, finite);
    return fmaxf(amax, tail);
}

/* Eight of round(x * inv) clamped to [-top, top] as int32, as ha_round_clamp computes each. */
AVX2 static inline __m256i round_clamp8(const float *x, __m256 vinv, __m256 top) {
    const __m256 r = round_away_finite(_mm256_mul_ps(_mm256_loadu_ps(x), vinv));
    return _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(r, _mm256_sub_ps(_mm256_setzero_ps(), top)), top));
}

/* The group x (group,) as int8 q (group,), in order, for |round(x * inv)| <= 127 (group a multiple of 32):
 * 32-bit lanes -> bytes, where the packs interleave 128-bit lanes and the permute puts them back. */
AVX2 static inline void round_to_bytes(const float *x, int64_t group, float inv, float top, int8_t *q) {
    const __m256 vinv = _mm256_set1_ps(inv), vtop = _mm256_set1_ps(top);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t i = 0; i < group; i += 32) {
        const __m256i a = _mm256_packs_epi32(round_clamp8(x + i, vinv, vtop), round_clamp8(x + i + 8, vinv, vtop));
        const __m256i b = _mm256_packs_epi32(round_clamp8(x + i + 16, vinv, vtop),
                                             round_clamp8(x + i + 24, vinv, vtop));
        _mm256_storeu_si256((__m256i *)(q + i), _mm256_permutevar8x32_epi32(_mm256_packs_epi16(a, b), order));
    }
}

/* A whole group's scale max|x| / top into blk and the factor top / max|x|, as ha_group_scale; 0 if x holds
 * NaN or inf (the caller then leaves the group to the reference, which reports it). */
AVX2 static inline int group_scale_avx2(const float *x, int64_t group, float top, void *blk, float *inv) {
    int finite;
    const float amax = abs_max(x, group, &finite), scale = amax / top;
    memcpy(blk, &scale, sizeof scale);
    *inv = amax > 0.0f ? top / amax : 0.0f;
    return finite;
}

/* One int8 group, bitwise as ha_quant_q8_ref (a partial group, or NaN or inf, goes to it). The maximum is
 * exact in any order; x * inv is the same IEEE product, rounded as roundf. */
AVX2 static int quant_q8_avx2(const float *x, int64_t len, void *blk) {
    float inv;
    if (len != HA_Q8_GROUP || !group_scale_avx2(x, HA_Q8_GROUP, 127.0f, blk, &inv)) return ha_quant_q8_ref(x, len, blk);
    round_to_bytes(x, HA_Q8_GROUP, inv, 127.0f, (int8_t *)blk + 4);
    return 1;
}

/* An activation group and its sum, bitwise as ha_quant_q8_sum_ref. */
AVX2 static int quant_q8_sum_avx2(const float *x, int64_t len, void *blk, int32_t *sum) {
    const int finite = quant_q8_avx2(x, len, blk);
    *sum = ha_q8_block_sum(blk);
    return finite;
}

/* One int4 group, bitwise as ha_quant_q4_ref (a partial group, or NaN or inf, goes to it): q as for int8
 * with 7 for 127, then q + 8 packed two to a byte, element i low and i + 16 high (values below 16: the
 * 16-bit shift moves no bit across a byte). */
AVX2 static int quant_q4_avx2(const float *x, int64_t len, void *blk) {
    float inv;
    if (len != HA_Q4_GROUP || !group_scale_avx2(x, HA_Q4_GROUP, 7.0f, blk, &inv)) return ha_quant_q4_ref(x, len, blk);
    int8_t q[HA_Q4_GROUP];
    round_to_bytes(x, HA_Q4_GROUP, inv, 7.0f, q);
    const __m128i eight = _mm_set1_epi8(8);
    const __m128i lo = _mm_add_epi8(_mm_loadu_si128((const __m128i *)q), eight);
    const __m128i hi = _mm_add_epi8(_mm_loadu_si128((const __m128i *)(q + HA_Q4_GROUP / 2)), eight);
    _mm_storeu_si128((__m128i *)((char *)blk + 4), _mm_or_si128(lo, _mm_slli_epi16(hi, 4)));
    return 1;
}

/* Activations for integer weights, bitwise as ha_quant_act_ref (NaN or inf go to it). */
AVX2 static void quant_act_avx2(const float *x, int64_t n, int16_t *q, float *scale) {
    int finite;
    const float amax = abs_max(x, n, &finite);
    if (!finite) {
        ha_quant_act_ref(x, n, q, scale);
        return;
    }
    const float inv = amax > 0.0f ? HA_ACT_MAX / amax : 0.0f;
    const __m256 vinv = _mm256_set1_ps(inv), vtop = _mm256_set1_ps(HA_ACT_MAX);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i v = round_clamp8(x + i, vinv, vtop);
        _mm_storeu_si128((__m128i *)(q + i),
                         _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
    }
    for (; i < n; i++) q[i] = (int16_t)ha_round_clamp(x[i] * inv, HA_ACT_MAX);
    for (; i < ha_act_width(n); i++) q[i] = 0;
    *scale = amax / HA_ACT_MAX;
}

/* ---- exponentials: ha_expf's steps on four lanes in double (kernels.h), bitwise its result ---- */

/* ha_expf of four floats none of which is special (|x| < 88). */
AVX2 static inline __m128 exp4(__m128 x) {
    const __m256d xd = _mm256_cvtps_pd(x), invln2n = _mm256_set1_pd(HA_EXP_INVLN2N),
                  shift = _mm256_set1_pd(HA_EXP_SHIFT);
    __m256d kd = _mm256_fmadd_pd(invln2n, xd, shift);
    const __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    const __m256d r = _mm256_fmsub_pd(invln2n, xd, kd);
    const __m256i i = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    const __m256i t = _mm256_add_epi64(_mm256_i64gather_epi64((const long long *)HA_EXP2_TAB, i, 8),
                                       _mm256_slli_epi64(ki, 47));
    const __m256d p = _mm256_fmadd_pd(r, _mm256_set1_pd(HA_EXP_C0), _mm256_set1_pd(HA_EXP_C1));
    const __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(HA_EXP_C2), _mm256_set1_pd(1.0));
    return _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_fmadd_pd(p, _mm256_mul_pd(r, r), y), _mm256_castsi256_pd(t)));
}

/* ha_expf of eight floats into out; 0 (nothing written) if a lane is special: |x| >= 88, inf or NaN. */
AVX2 static inline int exp8(__m256 x, __m256 *out) {
    const __m256i mag = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
    if (!_mm256_testz_si256(_mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x42afffff)), _mm256_set1_epi32(-1))) return 0;
    *out = _mm256_set_m128(exp4(_mm256_extractf128_ps(x, 1)), exp4(_mm256_castps256_ps128(x)));
    return 1;
}

/* Eight at a time; a block with a special lane, and the tail, go to the scalar definition. */
AVX2 static void exp_shift_avx2(float *s, int64_t n, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    int64_t i = 0;
    for (__m256 e; i + 8 <= n; i += 8)
        if (exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm), &e)) _mm256_storeu_ps(s + i, e);
        else ha_kernels_scalar.exp_shift(s + i, 8, m);
    if (i < n) ha_kernels_scalar.exp_shift(s + i, n - i, m);
}

AVX2 static void silu_avx2(float *x, const float *up, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (__m256 e; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        if (exp8(_mm256_xor_ps(v, sign), &e)) {
            const __m256 a = _mm256_div_ps(v, _mm256_add_ps(one, e));
            _mm256_storeu_ps(x + i, up ? _mm256_mul_ps(a, _mm256_loadu_ps(up + i)) : a);
        } else {
            ha_kernels_scalar.silu(x + i, up ? up + i : NULL, 8);
        }
    }
    if (i < n) ha_kernels_scalar.silu(x + i, up ? up + i : NULL, n - i);
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

/* 12 chains of vpmaddwd (16 int16 x int16 products added in pairs into 8 int32), the multiplies of tile_int;
 * each chain multiplies its own result, so GCC cannot share the products between chains. The adds tile_int
 * also needs run on other ports, so they are left out: with them in the chains (a = a + madd(a, w)) the rate
 * read below what tile_int itself reaches. */
AVX2 static double mac_burst_q8_avx2(int64_t n) {
    __m256i s[12];
    const __m256i w = _mm256_set1_epi16(3);
    for (int i = 0; i < 12; i++) s[i] = _mm256_set1_epi32(i);
    for (int64_t r = 0; r < n; r++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) s[i] = _mm256_madd_epi16(s[i], w);
    __m256i t = s[0];
    for (int i = 1; i < 12; i++) t = _mm256_xor_si256(t, s[i]);
    return (double)n * 12.0 * 16.0 + 0.0 * (double)_mm256_extract_epi32(t, 0);
}

/* 12 chains of vpmaddubsw (32 uint8 x int8 products added in pairs into 16 int16), matmul_w8a8's multiplies; its
 * vpmaddwd widening runs on other ports and is left out, as in mac_burst_q8_avx2. */
AVX2 static double mac_burst_w8a8_avx2(int64_t n) {
    __m256i s[12];
    const __m256i w = _mm256_set1_epi8(3);
    for (int i = 0; i < 12; i++) s[i] = _mm256_set1_epi32(i);
    for (int64_t r = 0; r < n; r++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) s[i] = _mm256_maddubs_epi16(s[i], w);
    __m256i t = s[0];
    for (int i = 1; i < 12; i++) t = _mm256_xor_si256(t, s[i]);
    return (double)n * 12.0 * 32.0 + 0.0 * (double)_mm256_extract_epi32(t, 0);
}

/* Philox4x32-10 for eight counters side by side, lane l the counter (index0 + l, position, row, purpose): each
 * round's two 32 x 32 -> 64-bit products by _mm256_mul_epu32 on the even lanes and on the odd lanes shifted
 * down, their high and low halves blended back into lane order. Integer steps only: bitwise ha_rng_bits. */
AVX2 static void philox8_avx2(uint64_t seed, uint32_t row, uint32_t position, uint32_t purpose, uint32_t index0,
                              uint64_t *bits) {
    const __m256i m0 = _mm256_set1_epi64x(0xD2511F53), m1 = _mm256_set1_epi64x(0xCD9E8D57);
    __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32((int)index0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256i c1 = _mm256_set1_epi32((int)position), c2 = _mm256_set1_epi32((int)row);
    __m256i c3 = _mm256_set1_epi32((int)purpose);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        const __m256i e0 = _mm256_mul_epu32(c0, m0), o0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
        const __m256i e1 = _mm256_mul_epu32(c2, m1), o1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
        const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
        const __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
        const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
        const __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
        const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
        const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
        c1 = lo1;
        c3 = lo0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    /* (c0 << 32 | c1) >> 11 per lane: the interleaves give lanes 0, 1, 4, 5 and 2, 3, 6, 7 */
    const __m256i a = _mm256_srli_epi64(_mm256_unpacklo_epi32(c1, c0), 11);
    const __m256i b = _mm256_srli_epi64(_mm256_unpackhi_epi32(c1, c0), 11);
    _mm256_storeu_si256((__m256i *)bits, _mm256_permute2x128_si256(a, b, 0x20));
    _mm256_storeu_si256((__m256i *)(bits + 4), _mm256_permute2x128_si256(a, b, 0x31));
}

/* ---- bfloat16 pairs (formats.h's class): an exact emulation of vdpbf16ps ----------------------------------
 * Rows 0-7 of a HA_BF16X step are its first 32 bytes, rows 8-15 the next. Per half register, the pairs widen to
 * float32 by a mask (high halves) and a shift (low halves), exact, with no subnormals to read as zero (weights
 * hold none, ha.h; ha_bf16_round leaves none); a lane's two steps are two FMAs, which equal ha_bf16x_fma except
 * where the result is NaN or 0 < |r| <= FLT_MIN. A tile (one panel, up to four tokens) keeps per half the least
 * |acc| - 1 as unsigned over its chains (a NaN stays NaN to the end of its chain); rows whose chains met such a
 * result are recomputed by the scalar reference. */
#define BX_MAX_S 4

AVX2 static inline
    __attribute__((always_inline)) void tile_bf16x(int S, const char *W, int64_t n, int64_t p, const uint32_t *Xb,
                                                   int64_t t, float *Y, int64_t ldy, int64_t r0, int64_t r1) {
    const int64_t steps = (n + 1) / 2;
    const char *P = W + (size_t)p * (size_t)steps * HA_BF16X_STEP_BYTES;
    const __m256i high = _mm256_set1_epi32((int)0xffff0000u), magnitude = _mm256_set1_epi32(0x7fffffff);
    const __m256i one = _mm256_set1_epi32(1);
    __m256 acc[2][BX_MAX_S];
    __m256i least[2] = { _mm256_set1_epi32(-1), _mm256_set1_epi32(-1) };
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < S; s++) acc[h][s] = _mm256_setzero_ps();
    for (int64_t k = 0; k < steps; k++) {
        const char *wp = P + (size_t)k * HA_BF16X_STEP_BYTES;
        __builtin_prefetch(wp + 512, 0, 3);
        for (int h = 0; h < 2; h++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)(wp + 32 * h));
            const __m256 whi = _mm256_castsi256_ps(_mm256_and_si256(w, high));
            const __m256 wlo = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
            for (int s = 0; s < S; s++) {
                const __m256i x = _mm256_set1_epi32((int)Xb[(t + s) * steps + k]);
                __m256 a = _mm256_fmadd_ps(whi, _mm256_castsi256_ps(_mm256_and_si256(x, high)), acc[h][s]);
                least[h] = _mm256_min_epu32(least[h],
                                            _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(a), magnitude), one));
                a = _mm256_fmadd_ps(wlo, _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)), a);
                least[h] = _mm256_min_epu32(least[h],
                                            _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(a), magnitude), one));
                acc[h][s] = a;
            }
        }
    }
    const int64_t b = p * HA_PANEL_ROWS;
    unsigned redo = 0; /* rows whose chains met a NaN or a tiny result */
    for (int h = 0; h < 2; h++) {
        const __m256i lim = _mm256_set1_epi32(0x007fffff);
        unsigned m = (unsigned)_mm256_movemask_ps(
            _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_min_epu32(least[h], lim), least[h])));
        for (int s = 0; s < S; s++)
            m |= (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(acc[h][s], acc[h][s], _CMP_UNORD_Q));
        redo |= m << (8 * h);
    }
    for (int s = 0; s < S; s++) {
        float v[HA_PANEL_ROWS];
        _mm256_storeu_ps(v, acc[0][s]);
        _mm256_storeu_ps(v + 8, acc[1][s]);
        ha_store_panel_rows(Y + (t + s) * ldy, b, r0, r1, v);
    }
    for (int i = 0; redo && i < HA_PANEL_ROWS; i++)
        if (redo >> i & 1 && b + i >= r0 && b + i < r1)
            ha_matmul_bf16x_ref(W, n, b + i, b + i + 1, Xb + t * steps, S, Y + t * ldy, ldy);
}

/* Y[t, r] for r0 <= r < r1: panel by panel, tiles of up to BX_MAX_S tokens (as even as possible). */
AVX2 static void matmul_bf16x(const void *W, int64_t n, int64_t r0, int64_t r1, const uint32_t *Xb, int64_t T, float *Y,
                              int64_t ldy) {
    if (T < 1 || r0 >= r1) return;
    const int64_t tiles = (T + BX_MAX_S - 1) / BX_MAX_S;
    for (int64_t p = r0 / HA_PANEL_ROWS; p * HA_PANEL_ROWS < r1; p++)
        for (int64_t t = 0, i = 0; i < tiles; i++) {
            const int64_t S = (T - t + (tiles - i) - 1) / (tiles - i);
            switch (S) {
            case 4: tile_bf16x(4, W, n, p, Xb, t, Y, ldy, r0, r1); break;
            case 3: tile_bf16x(3, W, n, p, Xb, t, Y, ldy, r0, r1); break;
            case 2: tile_bf16x(2, W, n, p, Xb, t, Y, ldy, r0, r1); break;
            default: tile_bf16x(1, W, n, p, Xb, t, Y, ldy, r0, r1); break;
            }
            t += S;
        }
}

/* Eight tokens at a time, each lane one Philox counter; the last n % 8 by the scalar kernel. */
AVX2 static void rng_bits_avx2(uint64_t seed, uint32_t row, uint32_t position, uint32_t purpose, uint32_t index0,
                               int64_t n, uint64_t *bits) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) philox8_avx2(seed, row, position, purpose, index0 + (uint32_t)j, bits + j);
    ha_kernels_scalar.rng_bits(seed, row, position, purpose, index0 + (uint32_t)j, n - j, bits + j);
}

const ha_kernels ha_kernels_avx2 = {
    .name = "avx2",
    .matmul = { [HA_F32] = matmul_f32,
                [HA_BF16] = matmul_bf16,
                [HA_F16] = matmul_f16,
                [HA_F32P] = matmul_f32p,
                [HA_BF16P] = matmul_bf16p,
                [HA_F16P] = matmul_f16p },
    .matmul_int = { [HA_Q8] = matmul_q8, [HA_Q4] = matmul_q4 },
    .matmul_w8a8 = matmul_w8a8,
    .matmul_bf16x = matmul_bf16x,
    .quant_act = quant_act_avx2,
    .to_f32 = { [HA_F32] = to_f32_f32,
                [HA_BF16] = to_f32_bf16,
                [HA_F16] = to_f32_f16,
                [HA_Q8] = to_f32_q8,
                [HA_Q4] = to_f32_q4 },
    .panel_to_f32 = { [HA_F32P] = panel_to_f32_f32p,
                      [HA_BF16P] = panel_to_f32_bf16p,
                      [HA_F16P] = panel_to_f32_f16p,
                      [HA_Q8P] = ha_panel_to_f32_q8p,
                      [HA_BF16X] = ha_panel_to_f32_bf16x },
    .dot = dot_avx2,
    .axpy = axpy_avx2,
    .attn_scores = attn_scores_avx2,
    .attn_values = attn_values_avx2,
    .scale = scale_avx2,
    .exp_shift = exp_shift_avx2,
    .silu = silu_avx2,
    .quant_q8 = quant_q8_avx2,
    .quant_q8_sum = quant_q8_sum_avx2,
    .quant_q4 = quant_q4_avx2,
    .rng_bits = rng_bits_avx2,
    .mac_burst = mac_burst_avx2,
    .mac_burst_q8 = mac_burst_q8_avx2,
    .mac_burst_w8a8 = mac_burst_w8a8_avx2,
};

#else /* not x86: the table exists so dispatch.c links; dispatch never selects it */
const ha_kernels ha_kernels_avx2 = { .name = NULL };
#endif
