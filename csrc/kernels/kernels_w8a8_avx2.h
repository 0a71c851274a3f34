/* The w8a8 class's kernel on 256-bit registers (int8 weights in panels times int8 activations): included by
 * kernels_avx2.c, whose integer sums take vpmaddubsw + vpmaddwd (the sign trick, W8_VNNI 0), and by kernels_avxvnni.c,
 * whose sums take one vpdpbusd a step (W8_VNNI 1). The includer defines, before including it:
 *   W8_FN              the target attribute of every function here (kernels_avx2.c's AVX2);
 *   W8_VNNI            0 or 1, as above;
 *   W8_DPBUSD(a, u, s) with W8_VNNI 1: a + the four products of the unsigned bytes u by the signed bytes s in each
 *                      int32 lane (vpdpbusd ymm: _mm256_dpbusd_avx_epi32, VEX, or _mm256_dpbusd_epi32, EVEX).
 * Both give every output bitwise as formats.h defines it: the same exact integer sums per group, then the same float
 * chain in the same order (tile shapes, blocks and prefetch are the same in both). */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"

#if !defined(W8_FN) || !defined(W8_VNNI)
#error "define W8_FN and W8_VNNI before including kernels_w8a8_avx2.h"
#endif

#define W8_TOKENS 32  /* tokens of a block in matmul_w8a8: the float sums, 2 x 32 x 32 bytes, stay in L1 */
#define W8_AHEAD 2048 /* bytes of a panel's stream prefetched ahead of the step a tile reads */

/* ---- int8 weights in panels times int8 activations (the w8a8 class) -------------------------------------
 * Half a step of a HA_Q8P group block is one register: 8 rows x 4 weights (q + 128), lane i = row i.
 * W8_VNNI 0: flipping the top bit gives the signed weights w; vpmaddubsw multiplies |w| (unsigned) by the token's 4
 * activations broadcast and given w's sign (vpsignb), adding pairs into int16: |w| * (x * sign(w)) = w * x, and two of
 * them stay within 2 * 128 * 127 < 2^15 (no saturation); vpmaddwd by ones adds pairs again into each row's int32 lane.
 * W8_VNNI 1: vpdpbusd multiplies the unsigned q + 128 by the signed activations and adds each lane's four products
 * into its int32 (no intermediate to saturate): over the group, sum((q + 128) * x) = isum + 128 * xsum, exact, so the
 * sum starts at -128 * xsum (kernels_avx512.c's arithmetic on half its width). The even and the odd steps run as two
 * chains, added at the group's end (exact), so that a chain's dependent vpdpbusd (latency 5 on Alder Lake's P-cores,
 * two a cycle) do not wait on each other; the sign trick's own chain is a 1-cycle add.
 * After the group's 16 steps lane i holds row i's exact isum; then y = fma(float(isum), wscale * xscale, y), the
 * formats.h chain. A tile of H halves (H / 2 panels) x S tokens keeps H * S integer (VNNI: 2 * H * S) and H * S float
 * accumulators in the 16 registers. */
/* Step k of a group (its activations' bytes 4k .. 4k + 3) for S tokens: each token's four bytes in every lane of xv[s]. */
W8_FN static inline __attribute__((always_inline)) void x4_w8a8(int S, const char *xg, size_t xb, int k,
                                                                __m256i xv[2]) {
#pragma GCC unroll 2
    for (int s = 0; s < S; s++) {
        int32_t four;
        memcpy(&four, xg + (size_t)s * xb + 4 * k, sizeof four);
        xv[s] = _mm256_set1_epi32(four);
    }
}

/* Step k's 32 weight bytes of half h % 2 of panel h / 2 of the group at blk (panels pstride bytes apart, each behind
 * its HA_PANEL_ROWS scales); where ahead, the even halves prefetch their panel's stream W8_AHEAD bytes on. */
W8_FN static inline __attribute__((always_inline)) const char *panel_w8a8(const char *blk, size_t pstride, int h, int k,
                                                                          int ahead) {
    const char *wp = blk + (size_t)(h / 2) * pstride + HA_PANEL_ROWS * 4 + (size_t)k * 64 + 32 * (h % 2);
    if (ahead && h % 2 == 0) __builtin_prefetch(wp + W8_AHEAD, 0, 3);
    return wp;
}

/* dp[h][s] = the exact integer sum of half h (of H) of the group block blk and token s (of S) of xg, its activations
 * (rows xb bytes apart), group g of tokens t .. t + S - 1 (xsum: (T, groups)); with `ahead`, each panel's stream
 * prefetched W8_AHEAD bytes ahead of the step read. */
#if W8_VNNI
W8_FN static inline
    __attribute__((always_inline)) void group_isums_w8a8(int H, int S, const char *blk, size_t pstride, const char *xg,
                                                         size_t xb, const int32_t *xsum, int64_t groups, int64_t g,
                                                         int64_t t, int ahead, __m256i dp[4][2]) {
    __m256i dq[4][2];
#pragma GCC unroll 2
    for (int s = 0; s < S; s++) {
        const __m256i corr = _mm256_set1_epi32(-128 * xsum[(t + s) * groups + g]);
#pragma GCC unroll 4
        for (int h = 0; h < H; h++) dp[h][s] = corr, dq[h][s] = _mm256_setzero_si256();
    }
#pragma GCC unroll 4
    for (int k = 0; k < HA_Q8_GROUP / 4; k++) {
        __m256i xv[2];
        x4_w8a8(S, xg, xb, k, xv);
#pragma GCC unroll 4
        for (int h = 0; h < H; h++) {
            const char *wp = panel_w8a8(blk, pstride, h, k, ahead);
            const __m256i u = _mm256_loadu_si256((const __m256i *)wp); /* q + 128, unsigned */
#pragma GCC unroll 2
            for (int s = 0; s < S; s++) {
                if (k % 2) dq[h][s] = W8_DPBUSD(dq[h][s], u, xv[s]);
                else dp[h][s] = W8_DPBUSD(dp[h][s], u, xv[s]);
            }
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < H; h++)
#pragma GCC unroll 2
        for (int s = 0; s < S; s++) dp[h][s] = _mm256_add_epi32(dp[h][s], dq[h][s]);
}
#else
W8_FN static inline
    __attribute__((always_inline)) void group_isums_w8a8(int H, int S, const char *blk, size_t pstride, const char *xg,
                                                         size_t xb, const int32_t *xsum, int64_t groups, int64_t g,
                                                         int64_t t, int ahead, __m256i dp[4][2]) {
    (void)xsum, (void)groups, (void)g, (void)t; /* the sign trick needs no correction */
    const __m256i top = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
    for (int h = 0; h < H; h++)
#pragma GCC unroll 2
        for (int s = 0; s < S; s++) dp[h][s] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int k = 0; k < HA_Q8_GROUP / 4; k++) {
        __m256i xv[2];
        x4_w8a8(S, xg, xb, k, xv);
#pragma GCC unroll 4
        for (int h = 0; h < H; h++) {
            const char *wp = panel_w8a8(blk, pstride, h, k, ahead);
            const __m256i w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)wp), top);
            const __m256i aw = _mm256_abs_epi8(w);
#pragma GCC unroll 2
            for (int s = 0; s < S; s++) {
                const __m256i pr = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv[s], w));
                dp[h][s] = _mm256_add_epi32(dp[h][s], _mm256_madd_epi16(pr, ones));
            }
        }
    }
}
#endif

W8_FN static inline
    __attribute__((always_inline)) void tile_w8a8(int H, int S, const char *W, size_t pstride, int64_t groups,
                                                  int64_t p0, const char *X, size_t xb, const int32_t *xsum, int64_t t,
                                                  float *Y, int64_t ldy, int64_t r0, int64_t r1, int ahead) {
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int h = 0; h < H; h++)
#pragma GCC unroll 2
        for (int s = 0; s < S; s++) acc[h][s] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; g++) {
        __m256i dp[4][2];
        const char *blk = W + (size_t)p0 * pstride + (size_t)g * HA_Q8P_BLOCK_BYTES;
        const char *xg = X + (size_t)t * xb + (size_t)g * HA_Q8_BLOCK_BYTES + 4;
        group_isums_w8a8(H, S, blk, pstride, xg, xb, xsum, groups, g, t, ahead, dp);
#pragma GCC unroll 2
        for (int s = 0; s < S; s++) {
            float xs;
            memcpy(&xs, xg + (size_t)s * xb - 4, sizeof xs);
            const __m256 vxs = _mm256_set1_ps(xs);
#pragma GCC unroll 4
            for (int h = 0; h < H; h++) {
                const __m256 ws = _mm256_loadu_ps((const float *)(blk + (size_t)(h / 2) * pstride) + 8 * (h % 2));
                acc[h][s] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dp[h][s]), _mm256_mul_ps(ws, vxs), acc[h][s]);
            }
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < H; h++)
#pragma GCC unroll 2
        for (int s = 0; s < S; s++) {
            const int64_t b = p0 * HA_PANEL_ROWS + 8 * h;
            float *y = Y + (t + s) * ldy, v[8];
            if (b >= r0 && b + 8 <= r1) {
                _mm256_storeu_ps(y + b, acc[h][s]);
                continue;
            }
            _mm256_storeu_ps(v, acc[h][s]);
            for (int i = 0; i < 8; i++)
                if (b + i >= r0 && b + i < r1) y[b + i] = v[i];
        }
}

/* Group g of halves 0 .. H - 1 from panel p0 on, for tokens t .. t + S - 1: acc[h * acc_stride + s][8] += the
 * group's terms (tile_w8a8's arithmetic, the float sums in memory). */
W8_FN static inline __attribute__((always_inline)) void group_w8a8(int H, int S, const char *W, size_t pstride,
                                                                   int64_t groups, int64_t g, int64_t p0, const char *X,
                                                                   size_t xb, const int32_t *xsum, int64_t t,
                                                                   float (*acc)[8], int64_t acc_stride) {
    __m256i dp[4][2];
    const char *blk = W + (size_t)p0 * pstride + (size_t)g * HA_Q8P_BLOCK_BYTES;
    const char *xg = X + (size_t)t * xb + (size_t)g * HA_Q8_BLOCK_BYTES + 4;
    group_isums_w8a8(H, S, blk, pstride, xg, xb, xsum, groups, g, t, 1, dp);
#pragma GCC unroll 2
    for (int s = 0; s < S; s++) {
        float xs;
        memcpy(&xs, xg + (size_t)s * xb - 4, sizeof xs);
        const __m256 vxs = _mm256_set1_ps(xs);
#pragma GCC unroll 4
        for (int h = 0; h < H; h++) {
            const __m256 ws = _mm256_loadu_ps((const float *)(blk + (size_t)(h / 2) * pstride) + 8 * (h % 2));
            float *a = acc[h * acc_stride + s];
            _mm256_storeu_ps(a,
                             _mm256_fmadd_ps(_mm256_cvtepi32_ps(dp[h][s]), _mm256_mul_ps(ws, vxs), _mm256_loadu_ps(a)));
        }
    }
}

/* Y[t, r] for r0 <= r < r1: one token as two panels at a time (four halves) through tile_w8a8, the float sums in
 * registers, two tokens one panel at a time likewise (measured faster there; prefetching on Intel CPUs, below).
 * More tokens: one panel at a time (two panels' accumulators spill from the 16 registers); for each, blocks of up to
 * W8_TOKENS tokens run group by group in tiles of two tokens (and a last one alone), so the group's block (1 KB) comes
 * from memory once and from L1 for the block's other tiles, and the weights stream at the pace of the block's
 * arithmetic (kernels_avx512.c's order). */
W8_FN static void matmul_w8a8(const void *W, int64_t n, int64_t r0, int64_t r1, const char *Xq, const int32_t *xsum,
                              int64_t T, float *Y, int64_t ldy) {
    if (T < 1 || r0 >= r1) return;
    const int64_t groups = (n + HA_Q8_GROUP - 1) / HA_Q8_GROUP;
    const size_t pstride = (size_t)groups * HA_Q8P_BLOCK_BYTES, xb = ha_row_bytes(HA_Q8, n);
    const int64_t p_end = (r1 + HA_PANEL_ROWS - 1) / HA_PANEL_ROWS;
    int64_t p = r0 / HA_PANEL_ROWS;
    if (T == 1) {
        for (; p + 2 <= p_end; p += 2) tile_w8a8(4, 1, W, pstride, groups, p, Xq, xb, xsum, 0, Y, ldy, r0, r1, 0);
        if (p < p_end) tile_w8a8(2, 1, W, pstride, groups, p, Xq, xb, xsum, 0, Y, ldy, r0, r1, 0);
        return;
    }
    if (T == 2) {
        /* Prefetching on an Intel CPU: measured on an Intel Xeon (Emerald Rapids), with it two tokens through
         * TinyLlama-1.1B's shape in w8a8 (weights from memory) took 0.73 (avx2) and 0.77-0.79 (avx-vnni) of their time
         * without it, through the shipped target (from L3) 0.92 and 1.01; one token and three were no faster with it.
         * kernels_avx512.c's one-tile blocks lost 15-25% to the prefetch on an AMD Zen 4, so AMD keeps the hardware's
         * prefetch alone (unmeasured there for these kernels). */
        const int ahead = ha_cpu_is_intel();
        for (; p < p_end; p++) tile_w8a8(2, 2, W, pstride, groups, p, Xq, xb, xsum, 0, Y, ldy, r0, r1, ahead);
        return;
    }
    float acc[2 * W8_TOKENS][8]; /* [half * W8_TOKENS + token of the block][row of the half] */
    for (; p < p_end; p++) {
        for (int64_t t0 = 0; t0 < T; t0 += W8_TOKENS) {
            const int64_t nt = T - t0 < W8_TOKENS ? T - t0 : W8_TOKENS;
            for (int h = 0; h < 2; h++)
                for (int64_t s = 0; s < nt; s++) memset(acc[h * W8_TOKENS + s], 0, sizeof acc[0]);
            for (int64_t g = 0; g < groups; g++) {
                int64_t t = t0;
                for (; t + 2 <= t0 + nt; t += 2)
                    group_w8a8(2, 2, W, pstride, groups, g, p, Xq, xb, xsum, t, acc + (t - t0), W8_TOKENS);
                if (t < t0 + nt) group_w8a8(2, 1, W, pstride, groups, g, p, Xq, xb, xsum, t, acc + (t - t0), W8_TOKENS);
            }
            for (int h = 0; h < 2; h++)
                for (int64_t s = 0; s < nt; s++) {
                    const int64_t b = p * HA_PANEL_ROWS + 8 * h;
                    float *y = Y + (t0 + s) * ldy;
                    for (int i = 0; i < 8; i++)
                        if (b + i >= r0 && b + i < r1) y[b + i] = acc[h * W8_TOKENS + s][i];
                }
        }
    }
}
