/* AVX-512 kernels (F, BW and VNNI: 512-bit registers, 32 of them) for float weights in panels and for
 * integer weights, attention's scores and values, the exponentials (softmax weights, SiLU) and the w8a8 class's
 * activation groups; the variant's other entries (row-major float weights, the other quantizations, dot, axpy, scale,
 * widening) are AVX2's, which every such CPU also runs. Panels and integer
 * weights give bitwise the results of every other variant, attention's scores and values bitwise AVX2's (the
 * contracts in kernels.h), so choosing this variant over AVX2 changes no output.
 *
 * Built twice. Natively (target attributes), as "avx512", which dispatch.c chooses where cpuid and xgetbv
 * show the features. And as "avx512-emulated" by kernels_avx512_emulated.c, through SIMDe (Debian's
 * libsimde-dev), whose AVX-512 intrinsics run as pairs of AVX2 ones: that is how this source runs in the
 * tests on a CPU without AVX-512. It checks the code against the intrinsics' documented semantics, not against
 * the instructions (and the intrinsics SIMDe 0.7.4 lacks, _mm512_cvtepi32_ps, _mm512_cvttps_epi32, _mm512_cvtps_pd,
 * _mm512_cvtpd_ps and _mm512_cvtph_ps, against this file's own two-half stand-ins); it is never chosen by itself.
 *
 * The tile shapes follow the AVX2 kernels' reasoning (enough independent accumulators to cover the FMA latency on
 * two ports, each weight read once per tile of tokens), with twice the registers; they, the groups and the panels'
 * prefetch distance are the fastest of A/B runs on an AVX-512 CPU (benchmarks/kernel_ab.sh). */
#ifndef HA_AVX512_EMULATED
#define HA_AVX512_EMULATED 0
#endif

#if defined(__x86_64__)

#if HA_AVX512_EMULATED
/* SIMDe picks its AVX2 paths (and fused multiply-adds) from the feature macros this pragma defines. */
#pragma GCC target("avx2,fma,f16c")
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#define AVX512
#define VARIANT_NAME "avx512-emulated"
#define VARIANT_FN ha_kernels_avx512_emulated
/* Intrinsics SIMDe 0.7.4 lacks, as two 256-bit halves: the same exact conversions. */
static inline __attribute__((always_inline)) __m512 emulated_cvtepi32_ps(__m512i v) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_cvtepi32_ps(_mm512_castsi512_si256(v))),
                              _mm256_cvtepi32_ps(_mm512_extracti64x4_epi64(v, 1)), 1);
}
static inline __attribute__((always_inline)) __m512i emulated_cvttps_epi32(__m512 v) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_cvttps_epi32(_mm512_castps512_ps256(v))),
                              _mm256_cvttps_epi32(
                                  _mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(v), 1))),
                              1);
}
static inline __attribute__((always_inline)) __m512d emulated_cvtps_pd(__m256 v) {
    return _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_cvtps_pd(_mm256_castps256_ps128(v))),
                              _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), 1);
}
static inline __attribute__((always_inline)) __m256 emulated_cvtpd_ps(__m512d v) {
    return _mm256_set_m128(_mm256_cvtpd_ps(_mm512_extractf64x4_pd(v, 1)), _mm256_cvtpd_ps(_mm512_castpd512_pd256(v)));
}
static inline __attribute__((always_inline)) __m512 emulated_cvtph_ps(__m256i h) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_cvtph_ps(_mm256_castsi256_si128(h))),
                              _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), 1);
}
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps emulated_cvtepi32_ps
#undef _mm512_cvttps_epi32
#define _mm512_cvttps_epi32 emulated_cvttps_epi32
#undef _mm512_cvtps_pd
#define _mm512_cvtps_pd emulated_cvtps_pd
#undef _mm512_cvtpd_ps
#define _mm512_cvtpd_ps emulated_cvtpd_ps
#undef _mm512_cvtph_ps
#define _mm512_cvtph_ps emulated_cvtph_ps
#else
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma,f16c")))
#define VARIANT_NAME "avx512"
#define VARIANT_FN ha_kernels_avx512
#endif

#include <pthread.h>
#include <string.h>

#include "kernels.h"
#include "kernels_panels.h"

#define INLINE static inline __attribute__((always_inline))

/* A tile's outputs v for the 16 rows b .. b + 15 of a panel into y, those that fall in [r0, r1). */
AVX512 INLINE void store_panel(float *y, int64_t b, int64_t r0, int64_t r1, __m512 v) {
    if (b >= r0 && b + HA_PANEL_ROWS <= r1) {
        _mm512_storeu_ps(y + b, v);
        return;
    }
    float part[HA_PANEL_ROWS];
    _mm512_storeu_ps(part, v);
    ha_store_panel_rows(y, b, r0, r1, part);
}

/* ---- float weights in panels --------------------------------------------------------------------------
 * Column k of a panel is one register: its 16 rows, lane i = row i (p16_*). A tile of P panels x S tokens
 * keeps P * S accumulators, one per output, and per column spends P loads, at most P conversions and S
 * broadcast activations (folded into the FMAs) on P * S FMAs. Every output is the chain s = fma(w[k], x[k], s)
 * over k in order, as MATMUL_PANELS_SCALAR's. */

/* Rows 0-15 of column k of a panel, widened to float32 exactly. */
AVX512 INLINE __m512 p16_f32p(const void *panel, int64_t k) {
    return _mm512_loadu_ps((const float *)panel + k * HA_PANEL_ROWS);
}
/* bfloat16 panels hold row i < 8 at 2i and row 8 + i at 2i + 1, the low and high halves of 32-bit element i
 * of the column. Its 32 bytes go to both halves of the register (a load, no shuffle), then one byte shuffle
 * (within 128-bit lanes, which the broadcast made hold the right elements) moves into the top half of lane i
 * element i's low half (i < 8) or element i - 8's high half (i >= 8), zeros below: bytes 4d + h, 4d + h + 1
 * for lane position d = i % 4 and h = 0 (i < 8) or 2, 0x80 (zero) for the low two. */
AVX512 INLINE __m512 p16_bf16p(const void *panel, int64_t k) {
    const __m512i split = _mm512_setr_epi32(0x01008080, 0x05048080, 0x09088080, 0x0d0c8080, 0x01008080, 0x05048080,
                                            0x09088080, 0x0d0c8080, 0x03028080, 0x07068080, 0x0b0a8080, 0x0f0e8080,
                                            0x03028080, 0x07068080, 0x0b0a8080, 0x0f0e8080);
    const __m256i col = _mm256_loadu_si256((const __m256i *)((const uint16_t *)panel + k * HA_PANEL_ROWS));
    return _mm512_castsi512_ps(_mm512_shuffle_epi8(_mm512_broadcast_i64x4(col), split));
}
AVX512 INLINE __m512 p16_f16p(const void *panel, int64_t k) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)panel + k * HA_PANEL_ROWS)));
}

/* Each panel's stream is prefetched into L1 PANEL_AHEAD columns ahead of the column a tile reads (2 KB of float32,
 * 1 KB of bfloat16 or float16). Without it the FMAs waiting on weights from memory fill the scheduler, and a tile
 * of several tokens streams slower than one token. The column's size is a literal: computed from pbytes / n in
 * the loop, the division stays in it. */
#define PANEL_AHEAD 32
#define COLUMN_BYTES_f32p 64
#define COLUMN_BYTES_bf16p 32
#define COLUMN_BYTES_f16p 32
#define MAX_P 8       /* panels per tile */
#define MAX_S 6       /* tokens per tile of a matmul cut into tiles (float32 of up to 20 tokens: 12) */
#define MAX_CASE \
    12   /* tokens per tile at most: a matmul of up to 12 tokens alone (a bare literal: kernels_panels.h
                         pastes it) */

/* ptile_SUF(P, S, panel, pbytes, X, n, Y, ldy, row, r0, r1, pf): for panels panel + p * pbytes (p < P, the
 * first holding row `row`) and tokens s < S of X (S, n), Y[s * ldy + row + 16 p + i] for the rows in
 * [r0, r1). P and S are literals at every call (P * S <= 24 accumulators); the loops over s unroll up to 12, all
 * of S, so that the accumulators stay in registers (a loop left partly rolled indexes them in memory). */
#define DEFINE_PANEL_TILE(SUF)                                                                                      \
    AVX512 INLINE void ptile_##SUF(int P, int S, const char *panel, size_t pbytes, const float *X, int64_t n,       \
                                   float *Y, int64_t ldy, int64_t row, int64_t r0, int64_t r1, ha_prefetcher *pf) { \
        __m512 acc[MAX_P][MAX_CASE];                                                                                \
        _Pragma("GCC unroll 8") for (int p = 0; p < P; p++) _Pragma("GCC unroll 12") for (int s = 0; s < S; s++)    \
            acc[p][s] = _mm512_setzero_ps();                                                                        \
        for (int64_t k0 = 0; k0 < n; k0 += PANEL_STEP) {                                                            \
            const int64_t ke = n - k0 < PANEL_STEP ? n : k0 + PANEL_STEP;                                           \
            ha_prefetch_step(pf);                                                                                   \
            for (int64_t k = k0; k < ke; k++) {                                                                     \
                _Pragma("GCC unroll 8") for (int p = 0; p < P; p++) {                                               \
                    const char *pp = panel + (size_t)p * pbytes;                                                    \
                    __builtin_prefetch(pp + (size_t)(k + PANEL_AHEAD) * COLUMN_BYTES_##SUF, 0, 3);                  \
                    const __m512 w = p16_##SUF(pp, k);                                                              \
                    _Pragma("GCC unroll 12") for (int s = 0; s < S; s++)                                            \
                        acc[p][s] = _mm512_fmadd_ps(w, _mm512_set1_ps(X[s * n + k]), acc[p][s]);                    \
                }                                                                                                   \
            }                                                                                                       \
        }                                                                                                           \
        _Pragma("GCC unroll 8") for (int p = 0; p < P; p++) _Pragma("GCC unroll 12") for (int s = 0; s < S; s++)    \
            store_panel(Y + s * ldy, row + (int64_t)p * HA_PANEL_ROWS, r0, r1, acc[p][s]);                          \
    }
DEFINE_PANEL_TILE(f32p)
DEFINE_PANEL_TILE(bf16p)
DEFINE_PANEL_TILE(f16p)

/* Panels per group for tiles of S tokens sharing a prefetched group: two (8 to 12 accumulators). A matmul of up to
 * 12 tokens alone, streaming the weights once with no prefetched group: up to T = 5 as many panels as fit 16
 * accumulators (8 at T = 1 and 2; 5, 4, 3 at T = 3, 4, 5); T = 6 .. 8 as three panels (18 to 24 accumulators of
 * the 32 registers); T = 9 .. 12 as two (18 to 24), instead of tiles over prefetched groups that a second tile
 * reads again from L2. Each is the fastest shape of A/B runs (benchmarks/kernel_ab.sh). */
#define PANEL_GROUP(S) ((S) == 1 ? 8 : 2)
#define PANEL_ALONE(S) ((S) <= 2 ? 8 : (S) == 3 ? 5 : (S) == 4 ? 4 : (S) <= 8 ? 3 : (S) <= 12 ? 2 : 0)
#define PANEL_ALONE_f32p(S) PANEL_ALONE(S)
#define PANEL_ALONE_bf16p(S) PANEL_ALONE(S)
#define PANEL_ALONE_f16p(S) PANEL_ALONE(S)
/* Float32 at T = 13 .. 20 as two tiles of up to 12 tokens over the prefetched groups of two panels (7 + 6 .. 10 +
 * 10), not three or four of up to 6; past 20, and bfloat16 (whose columns cost a shuffle each) and float16 at any
 * T, tiles of up to MAX_S: the faster in A/B runs (benchmarks/kernel_ab.sh; float16 follows bfloat16). */
#define PANEL_TILE_MAX_f32p(T) ((T) <= 20 ? 12 : MAX_S)
#define PANEL_TILE_MAX_bf16p(T) MAX_S
#define PANEL_TILE_MAX_f16p(T) MAX_S

HA_DEFINE_MATMUL_PANELS(AVX512, f32p, HA_F32P)
HA_DEFINE_MATMUL_PANELS(AVX512, bf16p, HA_BF16P)
HA_DEFINE_MATMUL_PANELS(AVX512, f16p, HA_F16P)

#define DEFINE_PANEL_TO_F32(SUF)                                                                   \
    AVX512 static void panel_to_f32_##SUF(const void *panel, int64_t n, float *dst, int64_t ldd) { \
        for (int64_t k = 0; k < n; k++) _mm512_storeu_ps(dst + k * ldd, p16_##SUF(panel, k));      \
    }
DEFINE_PANEL_TO_F32(f32p)
DEFINE_PANEL_TO_F32(bf16p)
DEFINE_PANEL_TO_F32(f16p)

/* ---- integer weights times int16 activations ------------------------------------------------------------
 * Two weight rows share a register: lanes 0-7 hold row a's eight int32 lanes of ha_kernels.matmul_int, lanes
 * 8-15 row b's. Per step of 16 elements one vpdpwssd multiplies both rows' 16 weights (widened to int16) by
 * the token's 16 activations (broadcast to both halves), adds pairs and accumulates into the lanes: lane j
 * of each row gets the products of elements 2j and 2j + 1 of the step, exactly the contract's int32 sums.
 * AVX2 spends a vpmaddwd and a vpaddd on one row. Per group the sums become float and lane_j =
 * fma(float(sum_j), scale_g, lane_j) runs on both rows at once (the scales side by side); at the end each
 * row's eight lanes are added in the contract's tree (ha_lanes_sum8). */

/* Sixteen weights of each of the blocks ba (row a) and bb (row b) from element k, widened to int16: [a | b].
 * int8: bytes k..k+15. int4 (k = 0 or 16): the low or the high nibbles of the 16 bytes, less 8. */
AVX512 INLINE __m512i w32_int(const char *ba, const char *bb, int k, int q4) {
    const int at = q4 ? 4 : 4 + k;
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(ba + at))),
                                        _mm_loadu_si128((const __m128i *)(bb + at)), 1);
    if (q4) {
        if (k) v = _mm256_srli_epi16(v, 4);
        v = _mm256_sub_epi8(_mm256_and_si256(v, _mm256_set1_epi8(15)), _mm256_set1_epi8(8));
    }
    return _mm512_cvtepi8_epi16(v);
}

static inline float block_scale(const char *blk) {
    float s;
    memcpy(&s, blk, sizeof s);
    return s;
}

/* A matmul's quantized activations: Xq (T, width) int16 and their scales (T,). */
typedef struct acts {
    const int16_t *q;
    const float *qscale;
    int64_t width;
} acts;

#define MAX_RP 2     /* row pairs per tile */
#define MAX_ST 4     /* tokens per integer tile */

/* tile_int(R, S, ...): Y[(t + s) * ldy + r + i * rs] for rows i < R (w[i]: row i's first byte) and tokens
 * s < S; rows go in pairs, an odd last row paired with itself (its second half discarded). R, S, GROUP,
 * BLOCK and q4 are literals at every call: (R + 1) / 2 * S * 2 + S + 4 <= 24 registers. */
AVX512 INLINE void tile_int(int R, int S, int GROUP, int BLOCK, int q4, const char *const *w, const acts *a, int64_t nv,
                            int64_t t, float *Y, int64_t ldy, int64_t r, int64_t rs, ha_prefetcher *pf) {
    const int RP = (R + 1) / 2;
    __m512 acc[MAX_RP][MAX_ST];
#pragma GCC unroll 2
    for (int p = 0; p < RP; p++)
#pragma GCC unroll 4
        for (int s = 0; s < S; s++) acc[p][s] = _mm512_setzero_ps();
    const int16_t *x = a->q + t * a->width;
    for (int64_t base = 0; base < nv; base += GROUP) {
        ha_prefetch_step(pf);
        const size_t off = (size_t)(base / GROUP) * (size_t)BLOCK;
        __m512i g[MAX_RP][MAX_ST];
#pragma GCC unroll 2
        for (int p = 0; p < RP; p++)
#pragma GCC unroll 4
            for (int s = 0; s < S; s++) g[p][s] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int k = 0; k < GROUP; k += 16) {
            __m512i v[MAX_ST];
#pragma GCC unroll 4
            for (int s = 0; s < S; s++)
                v[s] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x + s * a->width + base + k)));
#pragma GCC unroll 2
            for (int p = 0; p < RP; p++) {
                const __m512i wp = w32_int(w[2 * p] + off, w[2 * p + 1 < R ? 2 * p + 1 : 2 * p] + off, k, q4);
#pragma GCC unroll 4
                for (int s = 0; s < S; s++) g[p][s] = _mm512_dpwssd_epi32(g[p][s], wp, v[s]);
            }
        }
#pragma GCC unroll 2
        for (int p = 0; p < RP; p++) {
            const float sa = block_scale(w[2 * p] + off), sb = block_scale(w[2 * p + 1 < R ? 2 * p + 1 : 2 * p] + off);
            const __m512 sc = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(sa), _mm512_set1_ps(sb));
#pragma GCC unroll 4
            for (int s = 0; s < S; s++) acc[p][s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(g[p][s]), sc, acc[p][s]);
        }
    }
#pragma GCC unroll 2
    for (int p = 0; p < RP; p++)
#pragma GCC unroll 4
        for (int s = 0; s < S; s++) {
            float lanes[16];
            _mm512_storeu_ps(lanes, acc[p][s]);
            float *y = Y + (t + s) * ldy + r;
            y[2 * p * rs] = ha_lanes_sum8(lanes) * a->qscale[t + s];
            if (2 * p + 1 < R) y[(2 * p + 1) * rs] = ha_lanes_sum8(lanes + 8) * a->qscale[t + s];
        }
}

/* One tile of S tokens (1 to 4) on R (a literal) rows w from row r. */
#define INT_TILE_CASE(R, S, w, r, pf) \
    case S: tile_int(R, S, GROUP, BLOCK, q4, w, a, nv, t, Y, ldy, r, 1, pf); break;
#define INT_TILE(R, S, w, r, pf)                                                                  \
    switch (S) {                                                                                  \
        INT_TILE_CASE(R, 1, w, r, pf)                                                             \
        INT_TILE_CASE(R, 2, w, r, pf) INT_TILE_CASE(R, 3, w, r, pf) INT_TILE_CASE(R, 4, w, r, pf) \
    }

/* Y[t, r] for r0 <= r < r1: four rows at a time (two pairs), in token tiles of up to four, as even as
 * possible, which share out the prefetch of the next four rows into L2; the rows left at the end of the range
 * one at a time. One token (decode) takes its four rows from the four quarters of the range (four streams,
 * as the AVX2 kernels do). */
AVX512 INLINE void matmul_rows_int(int GROUP, int BLOCK, int q4, ha_dtype dtype, const void *W, int64_t n, int64_t r0,
                                   int64_t r1, const acts *a, int64_t T, float *Y, int64_t ldy) {
    const size_t rb = ha_row_bytes(dtype, n);
    const int64_t nv = (n + GROUP - 1) / GROUP * GROUP, tiles = (T + MAX_ST - 1) / MAX_ST;
    const int64_t q = (r1 - r0) / 4;
    if (T == 1 && q >= 1) {
        for (int64_t r = r0; r < r0 + q; r++) {
            const char *w[4];
            for (int i = 0; i < 4; i++) w[i] = (const char *)W + (size_t)(r + i * q) * rb;
            tile_int(4, 1, GROUP, BLOCK, q4, w, a, nv, 0, Y, ldy, r, q, NULL);
        }
        r0 += 4 * q;
    }
    for (int64_t r = r0; r < r1; r += 4) {
        const int rows = r1 - r < 4 ? (int)(r1 - r) : 4;
        const char *w[4];
        for (int i = 0; i < rows; i++) w[i] = (const char *)W + (size_t)(r + i) * rb;
        const int64_t next = r1 - (r + rows) < 4 ? r1 - (r + rows) : 4;
        ha_prefetcher ahead = ha_prefetcher_over(w[0] + (size_t)rows * rb, (size_t)next * rb, tiles * (nv / GROUP));
        ha_prefetcher *pf = rows == 4 ? &ahead : NULL;
        for (int64_t t = 0, i = 0; i < tiles; i++) {
            const int64_t S = (T - t + (tiles - i) - 1) / (tiles - i);
            if (rows == 4) {
                INT_TILE(4, S, w, r, pf)
            } else {
                for (int j = 0; j < rows; j++) INT_TILE(1, S, w + j, r + j, NULL)
            }
            t += S;
        }
    }
}

#define DEFINE_MATMUL_INT(SUF, DTYPE, GROUP, BLOCK, Q4)                                                  \
    AVX512 static void matmul_##SUF(const void *W, int64_t n, int64_t r0, int64_t r1, const int16_t *Xq, \
                                    const float *xscale, int64_t T, float *Y, int64_t ldy) {             \
        if (T < 1 || r0 >= r1) return;                                                                   \
        const acts a = { Xq, xscale, ha_act_width(n) };                                                  \
        matmul_rows_int(GROUP, BLOCK, Q4, DTYPE, W, n, r0, r1, &a, T, Y, ldy);                           \
    }
DEFINE_MATMUL_INT(q8, HA_Q8, HA_Q8_GROUP, HA_Q8_BLOCK_BYTES, 0)
DEFINE_MATMUL_INT(q4, HA_Q4, HA_Q4_GROUP, HA_Q4_BLOCK_BYTES, 1)

/* ---- int8 weights in panels times int8 activations (the w8a8 class) -------------------------------------
 * A step of a HA_Q8P group block is one register: 16 rows x 4 weights (as q + 128, unsigned), lane i = row i.
 * vpdpbusd multiplies it by the token's 4 activations of the step (signed, broadcast to every lane) and adds
 * each lane's four products into its int32: after the group's 16 steps lane i holds row i's
 * sum((q + 128) * x) = isum + 128 * xsum, exact, so starting the sum at -128 * xsum leaves isum (exact). Then
 * y = fma(float(isum), wscale * xscale, y), the formats.h chain, for 16 rows at once.
 * Order of work: P panels at a time; for each group of the P panels, every token of a block of up to W8_TOKENS in
 * tiles (the group's P blocks, up to 4 KB, read from memory once and then from L1 by the block's other tiles), then
 * the next group. So the weights stream from memory at the pace of the whole block's arithmetic (the two overlap),
 * instead of a first tile bound by memory and the others re-reading the panels from L2. The float sums (P x tokens x
 * 16 rows) live in memory between groups; each (row, token) still adds its groups in order.
 * Tiles: 16 integer sums a step either way. Narrow: up to 4 panels x 4 tokens. Wide (matmul_w8a8_cached, past 4
 * tokens): up to 2 panels x 8 tokens, so that 5 to 8 tokens (a verification) run as one tile. On weights read from
 * L3 narrow tiles (3 + 2, 4 + 4) ran 20-28% slower than one wide tile, and 6-19% slower at 9 to 16 tokens
 * (benchmarks/kernel_ab.sh w8a8c 16384 512, one core); on weights read from memory wide tiles lost 2-6%. */
#define W8_MAX_P 4      /* panels of a narrow tile */
#define W8_MAX_S 8      /* tokens of a wide tile */
#define W8_NARROW_S 4   /* tokens of a narrow tile */
#define W8_WIDE_P 2     /* panels of a wide tile */
#define W8_TOKENS 32  /* tokens of a block: the float sums, P x 32 x 64 bytes, stay in L1 */
/* Bytes of a panel's stream prefetched ahead of the step a tile reads: into L2 far ahead, and from there into L1
 * near, so that more of the stream is in flight than L1's own misses can track. For wide tiles, and narrow ones where
 * a group runs two tiles or more; a wide tile without it ran 25-30% slower on weights read from memory. One token
 * streams the panels faster on the hardware's prefetch alone. A block of one narrow tile (T = 2 .. 4) depends on the
 * CPU (docs/kernels-and-performance.md): from memory the prefetch made it 11-24% faster on an Intel Xeon (Emerald
 * Rapids) and 15-25% slower on an AMD Zen 4, and from L3 2-10% slower on the Xeon; so it prefetches where the weights
 * come from memory on an Intel CPU (ha_cpu_is_intel). */
#define W8_NEAR 1024
#define W8_FAR 4096

/* Group g of panels p0 .. p0 + P - 1 for tokens t .. t + S - 1: acc[p * acc_stride + s] (the panel's 16 rows) += the
 * group's terms of panel p0 + p and token t + s. */
AVX512 INLINE void group_w8a8(int P, int S, int PF, const char *W, size_t pstride, int64_t groups, int64_t p0,
                              int64_t g, const char *X, size_t xb, const int32_t *xsum, int64_t t,
                              float (*acc)[HA_PANEL_ROWS], int64_t acc_stride) {
    /* A tile of one or two tokens runs its sums as two chains, the even and the odd steps (added at the group's end,
     * exactly), so that the dependent vpdpbusd of one chain do not wait on each other's latency. (Every loop over
     * the tokens is unrolled whole: one left rolled put xv and the sums in memory, 2-3x slower.) */
    const int two = S <= 2;
    __m512i dp[W8_MAX_P][W8_MAX_S], dq[W8_MAX_P][W8_MAX_S];
    _Pragma("GCC unroll 8") for (int s = 0; s < S; s++) {
        const __m512i corr = _mm512_set1_epi32(-128 * xsum[(t + s) * groups + g]);
        _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) dp[p][s] = corr;
    }
    _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) _Pragma("GCC unroll 8") for (int s = 0; s < S; s++)
        dq[p][s] = _mm512_setzero_si512();
    const char *blk = W + (size_t)p0 * pstride + (size_t)g * HA_Q8P_BLOCK_BYTES;
    const char *xg = X + (size_t)t * xb + (size_t)g * HA_Q8_BLOCK_BYTES + 4;
    /* Steps in pairs, two at a time unrolled: fully unrolled, GCC hoisted the activations' broadcasts of later
     * steps and spilled accumulators to the stack inside the steps (a fifth of the kernel's time at T = 16). */
    _Pragma("GCC unroll 2") for (int k = 0; k < HA_Q8_GROUP / 4; k += 2) {
        _Pragma("GCC unroll 2") for (int odd = 0; odd < 2; odd++) {
            __m512i xv[W8_MAX_S];
            _Pragma("GCC unroll 8") for (int s = 0; s < S; s++) {
                int32_t four;
                memcpy(&four, xg + (size_t)s * xb + 4 * (k + odd), sizeof four);
                xv[s] = _mm512_set1_epi32(four);
            }
            _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {
                const char *wp = blk + (size_t)p * pstride + HA_PANEL_ROWS * 4 + (size_t)(k + odd) * 64;
                if (PF) { /* every tile of the group: measured faster than the first tile's alone */
                    __builtin_prefetch(wp + W8_NEAR, 0, 3);
                    __builtin_prefetch(wp + W8_FAR, 0, 2);
                }
                const __m512i w = _mm512_loadu_si512((const void *)wp);
                _Pragma("GCC unroll 8") for (int s = 0; s < S; s++) {
                    if (two && odd) dq[p][s] = _mm512_dpbusd_epi32(dq[p][s], w, xv[s]);
                    else dp[p][s] = _mm512_dpbusd_epi32(dp[p][s], w, xv[s]);
                }
            }
        }
    }
    if (two)
        _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) _Pragma("GCC unroll 8") for (int s = 0; s < S; s++)
            dp[p][s] = _mm512_add_epi32(dp[p][s], dq[p][s]);
    _Pragma("GCC unroll 8") for (int s = 0; s < S; s++) {
        float xs;
        memcpy(&xs, xg + (size_t)s * xb - 4, sizeof xs);
        const __m512 vxs = _mm512_set1_ps(xs);
        _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {
            const __m512 ws = _mm512_loadu_ps((const float *)(blk + (size_t)p * pstride));
            float *a = acc[p * acc_stride + s];
            _mm512_storeu_ps(a,
                             _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp[p][s]), _mm512_mul_ps(ws, vxs), _mm512_loadu_ps(a)));
        }
    }
}

/* One token (decoding): the whole row of groups in one pass, the float sums in registers (P integer sums as two
 * chains, P float sums, the activations and a weight use a third of the registers), the same sums in the same
 * order as group_w8a8's. Measured: 15% faster at T = 1 than group_w8a8's sums in memory, which are faster for
 * every T > 1 (benchmarks/bench_decode.py). */
AVX512 INLINE void token_w8a8(int P, const char *W, size_t pstride, int64_t groups, int64_t p0, const char *X,
                              const int32_t *xsum, float *Y, int64_t r0, int64_t r1) {
    __m512 acc[W8_MAX_P];
    _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; g++) {
        __m512i dp[W8_MAX_P], dq[W8_MAX_P];
        const __m512i corr = _mm512_set1_epi32(-128 * xsum[g]);
        _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) dp[p] = corr, dq[p] = _mm512_setzero_si512();
        const char *blk = W + (size_t)p0 * pstride + (size_t)g * HA_Q8P_BLOCK_BYTES;
        const char *xg = X + (size_t)g * HA_Q8_BLOCK_BYTES + 4;
        _Pragma("GCC unroll 16") for (int k = 0; k < HA_Q8_GROUP / 4; k++) {
            int32_t four;
            memcpy(&four, xg + 4 * k, sizeof four);
            const __m512i xv = _mm512_set1_epi32(four);
            _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {
                const char *wp = blk + (size_t)p * pstride + HA_PANEL_ROWS * 4 + (size_t)k * 64;
                const __m512i w = _mm512_loadu_si512((const void *)wp);
                if (k % 2) dq[p] = _mm512_dpbusd_epi32(dq[p], w, xv);
                else dp[p] = _mm512_dpbusd_epi32(dp[p], w, xv);
            }
        }
        float xs;
        memcpy(&xs, xg - 4, sizeof xs);
        const __m512 vxs = _mm512_set1_ps(xs);
        _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {
            const __m512 ws = _mm512_loadu_ps((const float *)(blk + (size_t)p * pstride));
            const __m512i isum = _mm512_add_epi32(dp[p], dq[p]);
            acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(ws, vxs), acc[p]);
        }
    }
    _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) store_panel(Y, (p0 + p) * HA_PANEL_ROWS, r0, r1, acc[p]);
}

#define W8_TOKEN(P) token_w8a8(P, W, pstride, groups, p, Xq, xsum, Y, r0, r1);

#define W8_CALL(P, S, PF) group_w8a8(P, S, PF, W, pstride, groups, p, g, Xq, xb, xsum, t, acc + (t - t0), W8_TOKENS)
#define W8_NARROW(P, PF)               \
    switch (S) {                       \
    case 4: W8_CALL(P, 4, PF); break;  \
    case 3: W8_CALL(P, 3, PF); break;  \
    case 2: W8_CALL(P, 2, PF); break;  \
    default: W8_CALL(P, 1, PF); break; \
    }
#define W8_WIDE(P)                    \
    switch (S) {                      \
    case 8: W8_CALL(P, 8, 1); break;  \
    case 7: W8_CALL(P, 7, 1); break;  \
    case 6: W8_CALL(P, 6, 1); break;  \
    case 5: W8_CALL(P, 5, 1); break;  \
    case 4: W8_CALL(P, 4, 1); break;  \
    case 3: W8_CALL(P, 3, 1); break;  \
    case 2: W8_CALL(P, 2, 1); break;  \
    default: W8_CALL(P, 1, 1); break; \
    }
#define W8_NARROWS(PF)               \
    switch (np) {                    \
    case 4: W8_NARROW(4, PF) break;  \
    case 3: W8_NARROW(3, PF) break;  \
    case 2: W8_NARROW(2, PF) break;  \
    default: W8_NARROW(1, PF) break; \
    }
#define W8_GROUP       \
    if (wide) {        \
        if (np == 2) { \
            W8_WIDE(2) \
        } else {       \
            W8_WIDE(1) \
        }              \
    } else if (pf) {   \
        W8_NARROWS(1)  \
    } else {           \
        W8_NARROWS(0)  \
    }

/* Y[t, r] for r0 <= r < r1: groups of the tile's panels; for each, blocks of up to W8_TOKENS tokens, each run group
 * by group in tiles (as even as possible): narrow tiles only unless cached (wide ones past W8_NARROW_S tokens). */
AVX512 __attribute__((noinline)) static void w8a8_tiles(int cached, const void *W, int64_t n, int64_t r0, int64_t r1,
                                                        const char *Xq, const int32_t *xsum, int64_t T, float *Y,
                                                        int64_t ldy) {
    if (T < 1 || r0 >= r1) return;
    const int64_t groups = (n + HA_Q8_GROUP - 1) / HA_Q8_GROUP;
    const size_t pstride = (size_t)groups * HA_Q8P_BLOCK_BYTES, xb = ha_row_bytes(HA_Q8, n);
    const int64_t p_end = (r1 + HA_PANEL_ROWS - 1) / HA_PANEL_ROWS;
    const int wide = cached && T > W8_NARROW_S, one_tile_pf = !cached && ha_cpu_is_intel();
    const int64_t most_p = wide ? W8_WIDE_P : W8_MAX_P, most_s = wide ? W8_MAX_S : W8_NARROW_S;
    float acc[W8_MAX_P * W8_TOKENS][HA_PANEL_ROWS]; /* [p * W8_TOKENS + token of the block][row of the panel] */
    for (int64_t p = r0 / HA_PANEL_ROWS; p < p_end;) {
        const int np = (int)(p_end - p < most_p ? p_end - p : most_p);
        if (T == 1) {
            switch (np) {
            case 4: W8_TOKEN(4) break;
            case 3: W8_TOKEN(3) break;
            case 2: W8_TOKEN(2) break;
            default: W8_TOKEN(1) break;
            }
            p += np;
            continue;
        }
        for (int64_t t0 = 0; t0 < T; t0 += W8_TOKENS) {
            const int64_t nt = T - t0 < W8_TOKENS ? T - t0 : W8_TOKENS, tiles = (nt + most_s - 1) / most_s;
            const int pf = tiles > 1 || one_tile_pf; /* narrow tiles (W8_NEAR) */
            for (int q = 0; q < np; q++)
                for (int64_t s = 0; s < nt; s++) memset(acc[q * W8_TOKENS + s], 0, sizeof acc[0]);
            for (int64_t g = 0; g < groups; g++)
                for (int64_t t = t0, i = 0; i < tiles; i++) {
                    const int64_t S = (t0 + nt - t + (tiles - i) - 1) / (tiles - i);
                    W8_GROUP
                    t += S;
                }
            for (int q = 0; q < np; q++)
                for (int64_t s = 0; s < nt; s++)
                    store_panel(Y + (t0 + s) * ldy, (p + q) * HA_PANEL_ROWS, r0, r1,
                                _mm512_loadu_ps(acc[q * W8_TOKENS + s]));
        }
        p += np;
    }
}

/* Weights streaming from memory: narrow tiles, whose four panels' streams kept the read 2-6% faster than wide tiles'
 * two at 5 to 16 tokens (kernel_ab.sh w8a8 65536 2048, one core; t(5) of TinyLlama-1.1B's shape 4-5%, two threads). */
AVX512 static void matmul_w8a8(const void *W, int64_t n, int64_t r0, int64_t r1, const char *Xq, const int32_t *xsum,
                               int64_t T, float *Y, int64_t ldy) {
    w8a8_tiles(0, W, n, r0, r1, Xq, xsum, T, Y, ldy);
}

/* Weights the caches hold: wide tiles, whose arithmetic a read from cache keeps up with. */
AVX512 static void matmul_w8a8_cached(const void *W, int64_t n, int64_t r0, int64_t r1, const char *Xq,
                                      const int32_t *xsum, int64_t T, float *Y, int64_t ldy) {
    w8a8_tiles(1, W, n, r0, r1, Xq, xsum, T, Y, ldy);
}

/* ---- exponentials: ha_expf's steps on eight lanes in double, bitwise its result (AVX2's exp4, twice as wide) ----
 * The table's 32 entries are four registers, looked up by two two-register permutes and a blend on the index's bit 4
 * (AVX2 gathers them, which took a third of its exp_shift's time). Each step is the same IEEE operation as AVX2's
 * and the scalar definition's, so the same bits. */

/* ha_expf of eight floats none of which is special (|x| < 88). */
AVX512 INLINE __m256 exp8d(__m256 x) {
    const __m512i *tab = (const __m512i *)HA_EXP2_TAB;
    const __m512d xd = _mm512_cvtps_pd(x), invln2n = _mm512_set1_pd(HA_EXP_INVLN2N),
                  shift = _mm512_set1_pd(HA_EXP_SHIFT);
    __m512d kd = _mm512_fmadd_pd(invln2n, xd, shift);
    const __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    const __m512d r = _mm512_fmsub_pd(invln2n, xd, kd);
    const __m512i i = _mm512_and_si512(ki, _mm512_set1_epi64(31));
    const __m512i lo = _mm512_permutex2var_epi64(_mm512_loadu_si512(tab), i, _mm512_loadu_si512(tab + 1));
    const __m512i hi = _mm512_permutex2var_epi64(_mm512_loadu_si512(tab + 2), i, _mm512_loadu_si512(tab + 3));
    const __m512i t = _mm512_add_epi64(_mm512_mask_mov_epi64(lo, _mm512_test_epi64_mask(i, _mm512_set1_epi64(16)), hi),
                                       _mm512_slli_epi64(ki, 47));
    const __m512d p = _mm512_fmadd_pd(r, _mm512_set1_pd(HA_EXP_C0), _mm512_set1_pd(HA_EXP_C1));
    const __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(HA_EXP_C2), _mm512_set1_pd(1.0));
    return _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_fmadd_pd(p, _mm512_mul_pd(r, r), y), _mm512_castsi512_pd(t)));
}

/* ha_expf of sixteen floats into out; 0 (nothing written) if a lane is special: |x| >= 88, inf or NaN. */
AVX512 INLINE int exp16(__m512 x, __m512 *out) {
    const __m512i mag = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
    if (_mm512_cmpgt_epi32_mask(mag, _mm512_set1_epi32(0x42afffff))) return 0;
    const __m512i lo = _mm512_castsi256_si512(_mm256_castps_si256(exp8d(_mm512_castps512_ps256(x))));
    const __m256 hi = exp8d(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(x), 1)));
    *out = _mm512_castsi512_ps(_mm512_inserti64x4(lo, _mm256_castps_si256(hi), 1));
    return 1;
}

/* Sixteen at a time; a block with a special lane, and the tail, go to AVX2's (bitwise the same). */
AVX512 static void exp_shift_avx512(float *s, int64_t n, float m) {
    const __m512 vm = _mm512_set1_ps(m);
    int64_t i = 0;
    for (__m512 e; i + 16 <= n; i += 16)
        if (exp16(_mm512_sub_ps(_mm512_loadu_ps(s + i), vm), &e)) _mm512_storeu_ps(s + i, e);
        else ha_kernels_avx2.exp_shift(s + i, 16, m);
    if (i < n) ha_kernels_avx2.exp_shift(s + i, n - i, m);
}

AVX512 static void silu_avx512(float *x, const float *up, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512i sign = _mm512_set1_epi32(INT32_MIN);
    int64_t i = 0;
    for (__m512 e; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        if (exp16(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), sign)), &e)) {
            const __m512 a = _mm512_div_ps(v, _mm512_add_ps(one, e));
            _mm512_storeu_ps(x + i, up ? _mm512_mul_ps(a, _mm512_loadu_ps(up + i)) : a);
        } else {
            ha_kernels_avx2.silu(x + i, up ? up + i : NULL, 16);
        }
    }
    if (i < n) ha_kernels_avx2.silu(x + i, up ? up + i : NULL, n - i);
}

/* |v|, the sign bit cleared (SIMDe's _mm512_abs_ps leaves -0 negative). */
AVX512 INLINE __m512 abs16(__m512 v) {
    return _mm512_castsi512_ps(_mm512_and_epi32(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)));
}

/* One int8 group of activations (matmul_w8a8's input) and its integers' sum, bitwise as ha_quant_q8_sum_ref (a
 * partial group, or NaN or inf, goes to it). max|x| is exact in any order and x * inv is the same IEEE product y;
 * |y| <= 127 (and a little) unless inv overflowed to inf, so where y is finite its truncation n fits an int32 and
 * float(n) is exact, and roundf(y) is n stepped one away from zero where |y - n| >= 1/2; 0 where y is not finite;
 * clamped to [-127, 127] and each narrowed to its byte; the sum is the int32 lanes' (exact). Measured: AVX2's
 * eight-lane steps and packs, then the sum from the bytes, took 6-7% of a w8a8 verification's time; this about half
 * of that. */
AVX512 static int quant_q8_sum_avx512(const float *x, int64_t len, void *blk, int32_t *sum) {
    if (len != HA_Q8_GROUP) return ha_quant_q8_sum_ref(x, len, blk, sum);
    const __m512 big = _mm512_set1_ps(3.40282347e38f);
    __m512 v[HA_Q8_GROUP / 16], m = _mm512_setzero_ps();
    __mmask16 finite = 0xffff;
    _Pragma("GCC unroll 4") for (int i = 0; i < HA_Q8_GROUP / 16; i++) {
        v[i] = _mm512_loadu_ps(x + 16 * i);
        const __m512 a = abs16(v[i]);
        finite &= _mm512_cmp_ps_mask(a, big, _CMP_LE_OQ); /* false for inf and NaN */
        m = _mm512_max_ps(m, a);
    }
    if (finite != 0xffff) return ha_quant_q8_sum_ref(x, len, blk, sum);
    const __m512i mi = _mm512_castps_si512(m); /* the lanes' maximum: halves, then quarters, then within one */
    m = _mm512_max_ps(m, _mm512_castsi512_ps(_mm512_shuffle_i32x4(mi, mi, 0x4E)));
    m = _mm512_max_ps(m,
                      _mm512_castsi512_ps(_mm512_shuffle_i32x4(_mm512_castps_si512(m), _mm512_castps_si512(m), 0xB1)));
    __m128 h = _mm512_castps512_ps128(m);
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h), scale = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    memcpy(blk, &scale, sizeof scale);
    const __m512 vinv = _mm512_set1_ps(inv), half = _mm512_set1_ps(0.5f);
    const __m512i top = _mm512_set1_epi32(127), bottom = _mm512_set1_epi32(-127), one = _mm512_set1_epi32(1),
                  minus_one = _mm512_set1_epi32(-1);
    const __m512 zero = _mm512_setzero_ps();
    int8_t *q = (int8_t *)blk + 4;
    __m512i all = _mm512_setzero_si512();
    _Pragma("GCC unroll 4") for (int i = 0; i < HA_Q8_GROUP / 16; i++) {
        const __m512 y = _mm512_mul_ps(v[i], vinv);
        const __mmask16 ok = _mm512_cmp_ps_mask(abs16(y), big, _CMP_LE_OQ);
        const __m512i n = _mm512_cvttps_epi32(y);
        const __mmask16 away = _mm512_cmp_ps_mask(abs16(_mm512_sub_ps(y, _mm512_cvtepi32_ps(n))), half, _CMP_GE_OQ);
        const __m512i step = _mm512_mask_mov_epi32(one, _mm512_cmp_ps_mask(y, zero, _CMP_LT_OQ), minus_one);
        const __m512i r = _mm512_maskz_mov_epi32(ok, _mm512_mask_add_epi32(n, away, n, step));
        const __m512i c = _mm512_min_epi32(_mm512_max_epi32(r, bottom), top);
        all = _mm512_add_epi32(all, c);
        _mm_storeu_si128((__m128i *)(q + 16 * i), _mm512_cvtsepi32_epi8(c));
    }
    __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(all), _mm512_extracti64x4_epi64(all, 1));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    *sum = _mm_cvtsi128_si32(s4);
    return 1;
}

AVX512 static int quant_q8_avx512(const float *x, int64_t len, void *blk) {
    int32_t sum;
    return quant_q8_sum_avx512(x, len, blk, &sum);
}

/* ---- bfloat16 pairs (formats.h's class) ------------------------------------------------------------------
 * A step of a HA_BF16X panel is one register: lane i row i's pair of weights, the token's pair broadcast. Native
 * (AVX512_BF16): one vdpbf16ps per step and token, the class's definition itself. Emulation (AVX-512 without
 * BF16, and the SIMDe build, whose _mm512_dpbf16_ps adds the low product first with neither DAZ nor FTZ): the
 * pairs widen to float32 by a mask (high halves) and a shift (low halves), exact, with no subnormals to read as
 * zero (weights hold none, ha.h; ha_bf16_round leaves none); the lane's two steps are two FMAs, which equal
 * ha_bf16x_fma except where the result is NaN or 0 < |r| <= FLT_MIN. So each tile keeps, per panel, the least
 * |acc| - 1 as unsigned over its chains (a NaN stays NaN to the end of its chain), and the outputs of rows whose
 * chains met such a result are recomputed by the scalar reference. A tile of P panels x S tokens keeps P * S
 * accumulators; the P panels' weights are read once per tile of tokens. */
#define BX_MAX_P 4
#define BX_MAX_S 4
#define BX_AHEAD 1024 /* bytes of a panel's stream prefetched ahead of the step a tile reads */

/* One step k of panel p for token s: the native instruction, or the emulation's two FMAs and their tracking. */
#define BX_STEP_NATIVE(p, s) acc[p][s] = _mm512_dpbf16_ps(acc[p][s], (__m512bh)w, (__m512bh)xv[s])
#define BX_TRACK(p, a) \
    least[p] = _mm512_min_epu32(least[p], _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(a), magnitude), one))
#define BX_STEP_EMULATED(p, s)                                                                          \
    do {                                                                                                \
        __m512 a = _mm512_fmadd_ps(whi, _mm512_castsi512_ps(_mm512_and_si512(xv[s], high)), acc[p][s]); \
        BX_TRACK(p, a);                                                                                 \
        a = _mm512_fmadd_ps(wlo, _mm512_castsi512_ps(_mm512_slli_epi32(xv[s], 16)), a);                 \
        BX_TRACK(p, a);                                                                                 \
        acc[p][s] = a;                                                                                  \
    } while (0)

#define DEFINE_TILE_BF16X(SUF, TARGET, NATIVE, STEP)                                                                  \
    TARGET INLINE void tile_bf16x_##SUF(int P, int S, const char *W, int64_t n, int64_t p0, const uint32_t *Xb,       \
                                        int64_t t, float *Y, int64_t ldy, int64_t r0, int64_t r1) {                   \
        const int64_t steps = (n + 1) / 2;                                                                            \
        const size_t pstride = (size_t)steps * HA_BF16X_STEP_BYTES;                                                   \
        const char *P0 = W + (size_t)p0 * pstride;                                                                    \
        __m512 acc[BX_MAX_P][BX_MAX_S];                                                                               \
        __m512i least[BX_MAX_P];                                                                                      \
        const __m512i high = _mm512_set1_epi32((int)0xffff0000u), magnitude = _mm512_set1_epi32(0x7fffffff);          \
        const __m512i one = _mm512_set1_epi32(1);                                                                     \
        (void)high, (void)magnitude, (void)one;                                                                       \
        _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                                         \
            least[p] = _mm512_set1_epi32(-1);                                                                         \
            _Pragma("GCC unroll 4") for (int s = 0; s < S; s++) acc[p][s] = _mm512_setzero_ps();                      \
        }                                                                                                             \
        for (int64_t k = 0; k < steps; k++) {                                                                         \
            __m512i xv[BX_MAX_S];                                                                                     \
            _Pragma("GCC unroll 4") for (int s = 0; s < S; s++)                                                       \
                xv[s] = _mm512_set1_epi32((int)Xb[(t + s) * steps + k]);                                              \
            _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                                     \
                const char *wp = P0 + (size_t)p * pstride + (size_t)k * HA_BF16X_STEP_BYTES;                          \
                __builtin_prefetch(wp + BX_AHEAD, 0, 3);                                                              \
                const __m512i w = _mm512_loadu_si512((const void *)wp);                                               \
                const __m512 whi = _mm512_castsi512_ps(_mm512_and_si512(w, high));                                    \
                const __m512 wlo = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));                                     \
                (void)whi, (void)wlo;                                                                                 \
                _Pragma("GCC unroll 4") for (int s = 0; s < S; s++) STEP(p, s);                                       \
            }                                                                                                         \
        }                                                                                                             \
        _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                                         \
            const int64_t b = (p0 + p) * HA_PANEL_ROWS;                                                               \
            unsigned redo = 0; /* rows whose chains met a NaN or a tiny result (the emulation's) */                   \
            if (!(NATIVE)) {                                                                                          \
                const __m512i lim = _mm512_set1_epi32(0x007fffff);                                                    \
                redo = (unsigned)_mm512_cmpeq_epi32_mask(_mm512_min_epu32(least[p], lim), least[p]);                  \
                _Pragma("GCC unroll 4") for (int s = 0; s < S; s++)                                                   \
                    redo |= (unsigned)_mm512_cmp_ps_mask(acc[p][s], acc[p][s], _CMP_UNORD_Q);                         \
            }                                                                                                         \
            _Pragma("GCC unroll 4") for (int s = 0; s < S; s++) store_panel(Y + (t + s) * ldy, b, r0, r1, acc[p][s]); \
            for (int i = 0; redo && i < HA_PANEL_ROWS; i++)                                                           \
                if (redo >> i & 1 && b + i >= r0 && b + i < r1)                                                       \
                    ha_matmul_bf16x_ref(W, n, b + i, b + i + 1, Xb + t * steps, S, Y + t * ldy, ldy);                 \
        }                                                                                                             \
    }

#define BX_TILE_S(N, P, S)                                                \
    switch (S) {                                                          \
    case 4: tile_bf16x_##N(P, 4, W, n, p, Xb, t, Y, ldy, r0, r1); break;  \
    case 3: tile_bf16x_##N(P, 3, W, n, p, Xb, t, Y, ldy, r0, r1); break;  \
    case 2: tile_bf16x_##N(P, 2, W, n, p, Xb, t, Y, ldy, r0, r1); break;  \
    default: tile_bf16x_##N(P, 1, W, n, p, Xb, t, Y, ldy, r0, r1); break; \
    }

/* Y[t, r] for r0 <= r < r1: groups of BX_MAX_P panels, each run by tiles of up to BX_MAX_S tokens (as even as
 * possible). */
#define DEFINE_MATMUL_BF16X(NAME, N, TARGET)                                                                  \
    TARGET static void NAME(const void *Wv, int64_t n, int64_t r0, int64_t r1, const uint32_t *Xb, int64_t T, \
                            float *Y, int64_t ldy) {                                                          \
        if (T < 1 || r0 >= r1) return;                                                                        \
        const char *W = Wv;                                                                                   \
        const int64_t p_end = (r1 + HA_PANEL_ROWS - 1) / HA_PANEL_ROWS;                                       \
        const int64_t tiles = (T + BX_MAX_S - 1) / BX_MAX_S;                                                  \
        for (int64_t p = r0 / HA_PANEL_ROWS; p < p_end;) {                                                    \
            const int64_t np = p_end - p < BX_MAX_P ? p_end - p : BX_MAX_P;                                   \
            for (int64_t t = 0, i = 0; i < tiles; i++) {                                                      \
                const int64_t S = (T - t + (tiles - i) - 1) / (tiles - i);                                    \
                switch (np) {                                                                                 \
                case 4: BX_TILE_S(N, 4, S) break;                                                             \
                case 3: BX_TILE_S(N, 3, S) break;                                                             \
                case 2: BX_TILE_S(N, 2, S) break;                                                             \
                default: BX_TILE_S(N, 1, S) break;                                                            \
                }                                                                                             \
                t += S;                                                                                       \
            }                                                                                                 \
            p += np;                                                                                          \
        }                                                                                                     \
    }
DEFINE_TILE_BF16X(emulated, AVX512, 0, BX_STEP_EMULATED)
DEFINE_MATMUL_BF16X(matmul_bf16x_emulated, emulated, AVX512)
#if !HA_AVX512_EMULATED
#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vnni,avx512bf16,avx2,fma,f16c")))
DEFINE_TILE_BF16X(native, AVX512BF16, 1, BX_STEP_NATIVE)
DEFINE_MATMUL_BF16X(matmul_bf16x_native, native, AVX512BF16)
#endif

/* ---- attention's scores --------------------------------------------------------------------------------
 * Bitwise dot_avx2's scores (AVX2's attn_scores: per key eight lanes, lane l the chain over blocks b of
 * fma(q[8b + l], k[8b + l], .) in order, then hsum's tree (l + l+4, then (0 + 2) + (1 + 3)), then * scale),
 * sixteen keys at a time with two keys per register: register m holds block b of keys 2m and 2m + 1 side by
 * side (built once per sixteen keys, for all the queries), times block b of the query in both halves, so each
 * half runs its key's eight chains exactly. The sixteen keys' lanes are then added across registers in
 * hsum's tree (each step one pair of shuffles and an add, on four, two and one pair of registers) and put in
 * key order by one permutation. Head sizes that are not a multiple of 8 (AVX2 adds their last products one by
 * one) or over 256 take AVX2's kernel (which sums each key's lanes on its own, four keys at a time). */
#define SCORES_MAX_BLOCKS 32 /* 8-float blocks of a head: n <= 256 */
#define SCORES_FEW 16 /* queries up to which scores_few builds the pairs in registers */

/* lanes 0-3 of each 128-bit quarter: [l + l+4 of key 2m | of key 2m + 1 | of key 2m' | of key 2m' + 1] */
AVX512 INLINE __m512 scores_step1(__m512 p, __m512 q) {
    const __m512i a = _mm512_castps_si512(p), b = _mm512_castps_si512(q); /* (SIMDe lacks shuffle_f32x4) */
    return _mm512_add_ps(_mm512_castsi512_ps(_mm512_shuffle_i32x4(a, b, 0x88)),
                         _mm512_castsi512_ps(_mm512_shuffle_i32x4(a, b, 0xDD)));
}
/* per quarter [0 + 2, 1 + 3 of the first register's key, of the second's] */
AVX512 INLINE __m512 scores_step2(__m512 z, __m512 w) {
    return _mm512_add_ps(_mm512_shuffle_ps(z, w, 0x44), _mm512_shuffle_ps(z, w, 0xEE));
}
/* per quarter [the first register's two keys' sums, the second's] */
AVX512 INLINE __m512 scores_step3(__m512 r, __m512 q) {
    return _mm512_add_ps(_mm512_shuffle_ps(r, q, 0x88), _mm512_shuffle_ps(r, q, 0xDD));
}

/* after the three steps lane 4c + j holds key 4j + c */
#define SCORES_ORDER _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15)

/* The sixteen keys' scores of one query, v (16,) in key order: its eight accumulators' halves added in hsum's tree
 * (lo: keys 0-7 from acc[0..3], hi: keys 8-15 from acc[4..7]), put in key order and scaled. */
AVX512 INLINE __m512 scores_of(__m512 lo, __m512 hi, __m512i order, __m512 vs) {
    return _mm512_mul_ps(_mm512_permutexvar_ps(order, scores_step3(lo, hi)), vs);
}

/* The m16 (<= 16) scores v into s. */
AVX512 INLINE void scores_store(float *s, int m16, __m512 v) {
    if (m16 == 16) {
        _mm512_storeu_ps(s, v);
        return;
    }
    float part[16]; /* (SIMDe lacks the masked store) */
    _mm512_storeu_ps(part, v);
    memcpy(s, part, (size_t)m16 * sizeof(float));
}

/* QN (<= 4) queries against the sixteen keys key[16], nb blocks of 8: for each half of the keys (pairs 4h .. 4h + 3)
 * the four pair registers are built per block in registers and used by every query at once, so that with few
 * queries nothing is stored and loaded again (the pairs array's stores took half of the kernel's time at four
 * queries, a decode step's kv group). The same chains and tree as the pairs array's path: the same bits. */
AVX512 INLINE void scores_few(int QN, const float *q, int64_t qs, const float *const key[16], int64_t nb, __m512 vs,
                              float *s, int64_t lds, int m16) {
    const __m512i order = SCORES_ORDER;
    __m512 lo[4];
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        __m512 acc[4][4];
        _Pragma("GCC unroll 4") for (int i = 0; i < QN; i++) _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
            acc[i][m] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            __m512 pair[4];
            _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) pair[m] = _mm512_castpd_ps(_mm512_insertf64x4(
                _mm512_castpd256_pd512(_mm256_loadu_pd((const double *)(key[8 * h + 2 * m] + 8 * b))),
                _mm256_loadu_pd((const double *)(key[8 * h + 2 * m + 1] + 8 * b)), 1));
            _Pragma("GCC unroll 4") for (int i = 0; i < QN; i++) {
                const __m512 qb = _mm512_castpd_ps(
                    _mm512_broadcast_f64x4(_mm256_loadu_pd((const double *)(q + i * qs + 8 * b))));
                _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) acc[i][m] = _mm512_fmadd_ps(qb, pair[m], acc[i][m]);
            }
        }
        _Pragma("GCC unroll 4") for (int i = 0; i < QN; i++) {
            const __m512 r = scores_step2(scores_step1(acc[i][0], acc[i][1]), scores_step1(acc[i][2], acc[i][3]));
            if (h == 0) lo[i] = r;
            else scores_store(s + i * lds, m16, scores_of(lo[i], r, order, vs));
        }
    }
}

/* The sixteen keys from slot `slot` on (wrapping at S), key[i] = K + its slot * ld, the last of the m16 <= 16 again
 * up to sixteen (those scores are not stored); returns the slot after them. */
AVX512 INLINE int64_t scores_keys(const float *K, int64_t ld, int64_t slot, int64_t S, int m16, const float *key[16]) {
    for (int i = 0; i < m16; i++, slot = slot + 1 == S ? 0 : slot + 1) key[i] = K + slot * ld;
    for (int i = m16; i < 16; i++) key[i] = key[m16 - 1];
    return slot;
}

/* attn_scores for nq <= SCORES_FEW queries: scores_few on each four. */
AVX512 static void attn_scores_few(const float *q, int64_t nq, int64_t qs, const float *K, int64_t ld, int64_t slot0,
                                   int64_t S, int64_t nk, int64_t n, float scale, float *s, int64_t lds) {
    const __m512 vs = _mm512_set1_ps(scale);
    for (int64_t t0 = 0, slot = slot0; t0 < nk; t0 += 16) {
        const int m16 = (int)(nk - t0 < 16 ? nk - t0 : 16);
        const float *key[16];
        slot = scores_keys(K, ld, slot, S, m16, key);
        for (int64_t i = 0; i < nq; i += 4) switch (nq - i < 4 ? nq - i : 4) {
            case 4: scores_few(4, q + i * qs, qs, key, n / 8, vs, s + i * lds + t0, lds, m16); break;
            case 3: scores_few(3, q + i * qs, qs, key, n / 8, vs, s + i * lds + t0, lds, m16); break;
            case 2: scores_few(2, q + i * qs, qs, key, n / 8, vs, s + i * lds + t0, lds, m16); break;
            default: scores_few(1, q + i * qs, qs, key, n / 8, vs, s + i * lds + t0, lds, m16); break;
            }
    }
}

AVX512 static void attn_scores_avx512(const float *q, int64_t nq, int64_t qs, const float *K, int64_t ld, int64_t slot0,
                                      int64_t S, int64_t nk, int64_t n, float scale, float *s, int64_t lds) {
    if (n % 8 || n > 8 * SCORES_MAX_BLOCKS) {
        ha_kernels_avx2.attn_scores(q, nq, qs, K, ld, slot0, S, nk, n, scale, s, lds);
        return;
    }
    if (nq <= SCORES_FEW) {
        attn_scores_few(q, nq, qs, K, ld, slot0, S, nk, n, scale, s, lds);
        return;
    }
    const __m512i order = SCORES_ORDER;
    const __m512 vs = _mm512_set1_ps(scale);
    const int64_t nb = n / 8;
    __m512 pairs[8 * SCORES_MAX_BLOCKS]; /* pairs[b * 8 + m]: block b of keys 2m, 2m + 1 */
    for (int64_t t0 = 0, slot = slot0; t0 < nk; t0 += 16) {
        const int m16 = (int)(nk - t0 < 16 ? nk - t0 : 16);
        const float *key[16];
        slot = scores_keys(K, ld, slot, S, m16, key);
        for (int64_t b = 0; b < nb; b++)
            for (int m = 0; m < 8; m++)
                pairs[b * 8 + m] = _mm512_castpd_ps(
                    _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd((const double *)(key[2 * m] + 8 * b))),
                                       _mm256_loadu_pd((const double *)(key[2 * m + 1] + 8 * b)), 1));
        for (int64_t i = 0; i < nq; i++) {
            const float *qi = q + i * qs;
            __m512 acc[8];
            _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++) acc[m] = _mm512_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                const __m256d qd = _mm256_loadu_pd((const double *)(qi + 8 * b)); /* 8 floats, as doubles */
                const __m512 qb = _mm512_castpd_ps(_mm512_broadcast_f64x4(qd));
                _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++)
                    acc[m] = _mm512_fmadd_ps(qb, pairs[b * 8 + m], acc[m]);
            }
            const __m512 lo = scores_step2(scores_step1(acc[0], acc[1]), scores_step1(acc[2], acc[3]));
            const __m512 hi = scores_step2(scores_step1(acc[4], acc[5]), scores_step1(acc[6], acc[7]));
            scores_store(s + i * lds + t0, m16, scores_of(lo, hi, order, vs));
        }
    }
}

/* ---- attention's values --------------------------------------------------------------------------------
 * A tile of NH heads x NC blocks of 16 value columns (NH * NC <= 16 accumulators) runs over all nk keys, each
 * value row's blocks loaded once for the NH heads; every output is updated in key order by one fused
 * multiply-add, as axpy_avx2 updates it (vector width does not change an element's chain). The n % 16 last
 * columns go to AVX2's kernel, which fuses and rounds them as axpy_avx2 does. (AVX2's runs the heads one after
 * the other, each value row loaded once per head.) */
AVX512 INLINE void values_tile(int NH, int NC, const float *w, int64_t ldw, const float *V, int64_t ld, int64_t slot0,
                               int64_t S, int64_t nk, float *acc, int64_t lda) {
    __m512 y[4][4];
    _Pragma("GCC unroll 4") for (int h = 0; h < NH; h++) _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++)
        y[h][c] = _mm512_loadu_ps(acc + h * lda + 16 * c);
    for (int64_t t = 0, slot = slot0; t < nk; t++, slot = slot + 1 == S ? 0 : slot + 1) {
        const float *x = V + slot * ld;
        __m512 v[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) v[c] = _mm512_loadu_ps(x + 16 * c);
        _Pragma("GCC unroll 4") for (int h = 0; h < NH; h++) {
            const __m512 a = _mm512_set1_ps(w[h * ldw + t]);
            _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) y[h][c] = _mm512_fmadd_ps(a, v[c], y[h][c]);
        }
    }
    _Pragma("GCC unroll 4") for (int h = 0; h < NH; h++) _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++)
        _mm512_storeu_ps(acc + h * lda + 16 * c, y[h][c]);
}

#define VALUES_TILES(NC)                                                            \
    switch (nh) {                                                                   \
    case 4: values_tile(4, NC, wh, ldw, V + c0, ld, slot0, S, nk, ah, lda); break;  \
    case 3: values_tile(3, NC, wh, ldw, V + c0, ld, slot0, S, nk, ah, lda); break;  \
    case 2: values_tile(2, NC, wh, ldw, V + c0, ld, slot0, S, nk, ah, lda); break;  \
    default: values_tile(1, NC, wh, ldw, V + c0, ld, slot0, S, nk, ah, lda); break; \
    }

AVX512 static void attn_values_avx512(const float *w, int64_t ldw, int64_t nq, const float *V, int64_t ld,
                                      int64_t slot0, int64_t S, int64_t nk, int64_t n, float *acc, int64_t lda) {
    const int64_t n16 = n - n % 16;
    for (int64_t h0 = 0; h0 < nq; h0 += 4) {
        const int64_t nh = nq - h0 < 4 ? nq - h0 : 4;
        const float *wh = w + h0 * ldw;
        for (int64_t c0 = 0; c0 < n16;) {
            float *ah = acc + h0 * lda + c0;
            const int64_t nc = (n16 - c0) / 16 < 4 ? (n16 - c0) / 16 : 4;
            switch (nc) {
            case 4: VALUES_TILES(4) break;
            case 3: VALUES_TILES(3) break;
            case 2: VALUES_TILES(2) break;
            default: VALUES_TILES(1) break;
            }
            c0 += 16 * nc;
        }
    }
    if (n16 < n) ha_kernels_avx2.attn_values(w, ldw, nq, V + n16, ld, slot0, S, nk, n - n16, acc + n16, lda);
}

/* ---- peak rates (ha_measure_mac_rate) ---------------------------------------------------------------- */

/* 16 chains of 16-lane FMAs: more than latency (4) x ports (2) needs. */
AVX512 static double mac_burst_avx512(int64_t n) {
    __m512 c[16];
    const __m512 m = _mm512_set1_ps(0.999f), d = _mm512_set1_ps(1e-3f);
    for (int i = 0; i < 16; i++) c[i] = _mm512_set1_ps((float)i);
    for (int64_t r = 0; r < n; r++)
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) c[i] = _mm512_fmadd_ps(c[i], m, d);
    float lanes[16], sum = 0.0f;
    for (int i = 0; i < 16; i++) {
        _mm512_storeu_ps(lanes, c[i]);
        sum += lanes[i];
    }
    return (double)n * 256.0 + 0.0 * (double)sum;
}

/* 16 chains of vpdpwssd (32 int16 x int16 products into 16 int32), matmul_int's multiply-adds; each chain
 * multiplies its own value (wrapping), so no two chains share work. */
AVX512 static double mac_burst_q8_avx512(int64_t n) {
    __m512i c[16];
    const __m512i w = _mm512_set1_epi16(3);
    for (int i = 0; i < 16; i++) c[i] = _mm512_set1_epi32(i);
    for (int64_t r = 0; r < n; r++)
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) c[i] = _mm512_dpwssd_epi32(c[i], c[i], w);
    int32_t lanes[16], x = 0;
    for (int i = 0; i < 16; i++) {
        _mm512_storeu_si512(lanes, c[i]);
        x ^= lanes[i];
    }
    return (double)n * 16.0 * 32.0 + 0.0 * (double)x;
}

/* 16 chains of vpdpbusd (64 uint8 x int8 products into 16 int32), matmul_w8a8's multiply-adds. */
AVX512 static double mac_burst_w8a8_avx512(int64_t n) {
    __m512i c[16];
    const __m512i w = _mm512_set1_epi8(3);
    for (int i = 0; i < 16; i++) c[i] = _mm512_set1_epi32(i);
    for (int64_t r = 0; r < n; r++)
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) c[i] = _mm512_dpbusd_epi32(c[i], c[i], w);
    int32_t lanes[16], x = 0;
    for (int i = 0; i < 16; i++) {
        _mm512_storeu_si512(lanes, c[i]);
        x ^= lanes[i];
    }
    return (double)n * 16.0 * 64.0 + 0.0 * (double)x;
}

static ha_kernels table;

static void fill_table(void) {
    table = ha_kernels_avx2;
    table.name = VARIANT_NAME;
    table.matmul[HA_F32P] = matmul_f32p;
    table.matmul[HA_BF16P] = matmul_bf16p;
    table.matmul[HA_F16P] = matmul_f16p;
    table.matmul_int[HA_Q8] = matmul_q8;
    table.matmul_int[HA_Q4] = matmul_q4;
    table.matmul_w8a8 = matmul_w8a8;
    table.matmul_w8a8_cached = matmul_w8a8_cached;
    table.quant_q8 = quant_q8_avx512;
    table.quant_q8_sum = quant_q8_sum_avx512;
    table.exp_shift = exp_shift_avx512;
    table.silu = silu_avx512;
#if HA_AVX512_EMULATED
    table.matmul_bf16x = matmul_bf16x_emulated;
#else
    table.matmul_bf16x = ha_cpu_has_avx512_bf16() ? matmul_bf16x_native : matmul_bf16x_emulated;
#endif
    table.panel_to_f32[HA_BF16X] = ha_panel_to_f32_bf16x;
    table.panel_to_f32[HA_F32P] = panel_to_f32_f32p;
    table.panel_to_f32[HA_BF16P] = panel_to_f32_bf16p;
    table.panel_to_f32[HA_F16P] = panel_to_f32_f16p;
    table.attn_scores = attn_scores_avx512;
    table.attn_values = attn_values_avx512;
    table.mac_burst = mac_burst_avx512;
    table.mac_burst_q8 = mac_burst_q8_avx512;
    table.mac_burst_w8a8 = mac_burst_w8a8_avx512;
}

const ha_kernels *VARIANT_FN(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill_table);
    return &table;
}

#if !HA_AVX512_EMULATED
ha_matmul_bf16x_fn ha_avx512_bf16x_kernel(int native) {
    if (native) return ha_cpu_has_avx512_bf16() ? matmul_bf16x_native : NULL;
    return ha_kernels_avx512() ? matmul_bf16x_emulated : NULL;
}
#endif

#elif !HA_AVX512_EMULATED /* not x86-64: no AVX-512 */
#include "kernels.h"
const ha_kernels *ha_kernels_avx512(void) { return NULL; }
ha_matmul_bf16x_fn ha_avx512_bf16x_kernel(int native) {
    (void)native;
    return NULL;
}
#endif
