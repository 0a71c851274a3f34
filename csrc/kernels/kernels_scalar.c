/* Scalar reference kernels: the definition every ISA variant is tested against, and the fallback on any
 * CPU. dot, attn_scores and row-major float weights: kernels.h's 8-lane dot product; axpy and attn_values:
 * its axpy update; float panels: see MATMUL_PANELS_SCALAR; integer weights: see MATMUL_INT_SCALAR.
 * Plain C whose every rounding is written out (fmaf where a variant fuses, a * b + c where it rounds the
 * product first), so the results are these bits on any machine: built, as setup.py and the tests build it,
 * with -ffp-contract=off, so that the compiler fuses nothing the source does not. */
#include <string.h>

#include "kernels.h"

float ha_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {                      /* inf or NaN */
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {                  /* normal */
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {                  /* zero */
        bits = sign;
    } else {                                /* subnormal: renormalize */
        exp = 113;
        while (!(man & 0x400u)) {
            man <<= 1;
            exp--;
        }
        bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
    union {
        uint32_t u;
        float f;
    } v = { bits };
    return v.f;
}

static void to_f32_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

static void to_f32_bf16(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = ha_bf16_to_f32(s[i]);
}

static void to_f32_f16(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = ha_f16_to_f32(s[i]);
}

static void to_f32_q8(const void *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = ha_q8_at(src, i);
}

static void to_f32_q4(const void *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = ha_q4_at(src, i);
}

static float dot_scalar(const float *a, const float *b, int64_t n) {
    float lane[8] = { 0 };
    const int64_t nv = n - n % 8;
    for (int64_t i = 0; i < nv; i += 8)
        for (int l = 0; l < 8; l++) lane[l] = fmaf(a[i + l], b[i + l], lane[l]);
    float s = ha_lanes_sum8(lane);
    for (int64_t i = nv; i < n; i++) s += a[i] * b[i];
    return s;
}

/* One macro body per weight dtype: LOAD(w, i) gives element i of the weight row w as float (exactly); each
 * output dot_scalar's sum of the row with x. */
#define MATMUL_SCALAR(NAME, TYPE, DTYPE, LOAD)                                                              \
    static void NAME(const void *W, int64_t n, int64_t r0, int64_t r1, const float *X, int64_t T, float *Y, \
                     int64_t ldy) {                                                                         \
        for (int64_t r = r0; r < r1; r++) {                                                                 \
            const TYPE *w = (const TYPE *)((const char *)W + (size_t)r * ha_row_bytes(DTYPE, n));           \
            for (int64_t t = 0; t < T; t++) {                                                               \
                const float *x = X + t * n;                                                                 \
                const int64_t nv = n - n % 8;                                                               \
                float lane[8] = { 0 };                                                                      \
                for (int64_t i = 0; i < nv; i += 8)                                                         \
                    for (int l = 0; l < 8; l++) lane[l] = fmaf(LOAD(w, i + l), x[i + l], lane[l]);          \
                float s = ha_lanes_sum8(lane);                                                              \
                for (int64_t i = nv; i < n; i++) s += LOAD(w, i) * x[i];                                    \
                Y[t * ldy + r] = s;                                                                         \
            }                                                                                               \
        }                                                                                                   \
    }

#define LOAD_F32(w, i) ((w)[i])
#define LOAD_BF16(w, i) ha_bf16_to_f32((w)[i])
#define LOAD_F16(w, i) ha_f16_to_f32((w)[i])
MATMUL_SCALAR(matmul_f32, float, HA_F32, LOAD_F32)
MATMUL_SCALAR(matmul_bf16, uint16_t, HA_BF16, LOAD_BF16)
MATMUL_SCALAR(matmul_f16, uint16_t, HA_F16, LOAD_F16)

/* Panels: each output one chain of fused multiply-adds in index order (the contract every variant meets
 * bitwise; fmaf is one instruction where the CPU has FMA, glibc's exact emulation elsewhere). */
#define MATMUL_PANELS_SCALAR(NAME, DTYPE)                                                                   \
    static void NAME(const void *W, int64_t n, int64_t r0, int64_t r1, const float *X, int64_t T, float *Y, \
                     int64_t ldy) {                                                                         \
        for (int64_t r = r0; r < r1; r++)                                                                   \
            for (int64_t t = 0; t < T; t++) {                                                               \
                const float *x = X + t * n;                                                                 \
                float s = 0.0f;                                                                             \
                for (int64_t k = 0; k < n; k++) s = fmaf(ha_panel_at(W, DTYPE, n, r, k), x[k], s);          \
                Y[t * ldy + r] = s;                                                                         \
            }                                                                                               \
    }
MATMUL_PANELS_SCALAR(matmul_f32p, HA_F32P)
MATMUL_PANELS_SCALAR(matmul_bf16p, HA_BF16P)
MATMUL_PANELS_SCALAR(matmul_f16p, HA_F16P)

#define PANEL_TO_F32_SCALAR(NAME, DTYPE)                                                                       \
    static void NAME(const void *panel, int64_t n, float *dst, int64_t ldd) {                                  \
        for (int64_t k = 0; k < n; k++)                                                                        \
            for (int64_t i = 0; i < HA_PANEL_ROWS; i++) dst[k * ldd + i] = ha_panel_at(panel, DTYPE, n, i, k); \
    }
PANEL_TO_F32_SCALAR(panel_to_f32_f32p, HA_F32P)
PANEL_TO_F32_SCALAR(panel_to_f32_bf16p, HA_BF16P)
PANEL_TO_F32_SCALAR(panel_to_f32_f16p, HA_F16P)

/* Integer weights times int16 activations, in the lanes ha_kernels.matmul_int defines (those of AVX2's
 * vpmaddwd). QAT(blk, i): the integer weight i of a block. */
#define Q8_AT(blk, i) ((const int8_t *)(blk) + 4)[i]
#define MATMUL_INT_SCALAR(NAME, DTYPE, GROUP, BLOCK, QAT)                                                         \
    static void NAME(const void *W, int64_t n, int64_t r0, int64_t r1, const int16_t *Xq, const float *xscale,    \
                     int64_t T, float *Y, int64_t ldy) {                                                          \
        const int64_t width = ha_act_width(n), groups = (n + (GROUP) - 1) / (GROUP);                              \
        for (int64_t r = r0; r < r1; r++) {                                                                       \
            const char *row = (const char *)W + (size_t)r * ha_row_bytes(DTYPE, n);                               \
            for (int64_t t = 0; t < T; t++) {                                                                     \
                float lane[8] = { 0 };                                                                            \
                for (int64_t g = 0; g < groups; g++) {                                                            \
                    const char *blk = row + (size_t)g * (BLOCK);                                                  \
                    const int16_t *xg = Xq + t * width + g * (GROUP);                                             \
                    float scale;                                                                                  \
                    memcpy(&scale, blk, sizeof scale);                                                            \
                    int32_t sum[8] = { 0 };                                                                       \
                    for (int i = 0; i < (GROUP); i++) sum[(i % 16) / 2] += (int32_t)QAT(blk, i) * (int32_t)xg[i]; \
                    for (int j = 0; j < 8; j++) lane[j] = fmaf((float)sum[j], scale, lane[j]);                    \
                }                                                                                                 \
                Y[t * ldy + r] = ha_lanes_sum8(lane) * xscale[t];                                                 \
            }                                                                                                     \
        }                                                                                                         \
    }
MATMUL_INT_SCALAR(matmul_q8, HA_Q8, HA_Q8_GROUP, HA_Q8_BLOCK_BYTES, Q8_AT)
MATMUL_INT_SCALAR(matmul_q4, HA_Q4, HA_Q4_GROUP, HA_Q4_BLOCK_BYTES, ha_q4_q)

/* Int8 weights in panels times int8 activations (the w8a8 class, formats.h): per group an exact int32 sum, then
 * one float chain over the groups. */
static void matmul_w8a8(const void *W, int64_t n, int64_t r0, int64_t r1, const char *Xq, const int32_t *xsum,
                        int64_t T, float *Y, int64_t ldy) {
    (void)xsum;
    const int64_t groups = (n + HA_Q8_GROUP - 1) / HA_Q8_GROUP;
    const size_t xb = ha_row_bytes(HA_Q8, n);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t p = r / HA_PANEL_ROWS, i = r % HA_PANEL_ROWS;
        for (int64_t t = 0; t < T; t++) {
            float y = 0.0f;
            for (int64_t g = 0; g < groups; g++) {
                const char *blk = ha_q8p_block(W, n, p, g), *xg = Xq + (size_t)t * xb + (size_t)g * HA_Q8_BLOCK_BYTES;
                int32_t isum = 0;
                const int8_t *xq = (const int8_t *)xg + 4;
                for (int k = 0; k < HA_Q8_GROUP; k++) isum += ha_q8p_q(blk, i, k) * (int32_t)xq[k];
                float xs;
                memcpy(&xs, xg, sizeof xs);
                const float sc = ha_q8p_scale(blk, i) * xs;
                y = fmaf((float)isum, sc, y);
            }
            Y[t * ldy + r] = y;
        }
    }
}

void ha_panel_to_f32_q8p(const void *panel, int64_t n, float *dst, int64_t ldd) {
    for (int64_t k = 0; k < n; k++)
        for (int64_t i = 0; i < HA_PANEL_ROWS; i++) dst[k * ldd + i] = ha_panel_at(panel, HA_Q8P, n, i, k);
}

/* bfloat16 pairs (formats.h): each output the lane chain, in plain C (the class's definition on any CPU). */
void ha_matmul_bf16x_ref(const void *W, int64_t n, int64_t r0, int64_t r1, const uint32_t *Xb, int64_t T, float *Y,
                         int64_t ldy) {
    const int64_t steps = (n + 1) / 2;
    for (int64_t r = r0; r < r1; r++) {
        const char *P = (const char *)W + (size_t)(r / HA_PANEL_ROWS) * (size_t)steps * HA_BF16X_STEP_BYTES;
        for (int64_t t = 0; t < T; t++) Y[t * ldy + r] = ha_bf16x_dot_ref(P, r % HA_PANEL_ROWS, Xb + t * steps, steps);
    }
}

void ha_panel_to_f32_bf16x(const void *panel, int64_t n, float *dst, int64_t ldd) {
    for (int64_t k = 0; k < n; k++)
        for (int64_t i = 0; i < HA_PANEL_ROWS; i++) dst[k * ldd + i] = ha_panel_at(panel, HA_BF16X, n, i, k);
}

static void axpy_scalar(float a, const float *x, float *y, int64_t n) {
    const int64_t nv = n - n % 8;
    for (int64_t i = 0; i < nv; i++) y[i] = fmaf(a, x[i], y[i]);
    for (int64_t i = nv; i < n; i++) y[i] += a * x[i];
}

static void attn_scores_scalar(const float *q, int64_t nq, int64_t qs, const float *K, int64_t ld, int64_t slot0,
                               int64_t S, int64_t nk, int64_t n, float scale, float *s, int64_t lds) {
    for (int64_t i = 0; i < nq; i++)
        for (int64_t t = 0, slot = slot0; t < nk; t++, slot = slot + 1 == S ? 0 : slot + 1)
            s[i * lds + t] = dot_scalar(q + i * qs, K + slot * ld, n) * scale;
}

static void attn_values_scalar(const float *w, int64_t ldw, int64_t nq, const float *V, int64_t ld, int64_t slot0,
                               int64_t S, int64_t nk, int64_t n, float *acc, int64_t lda) {
    for (int64_t h = 0; h < nq; h++)
        for (int64_t t = 0, slot = slot0; t < nk; t++, slot = slot + 1 == S ? 0 : slot + 1)
            axpy_scalar(w[h * ldw + t], V + slot * ld, acc + h * lda, n);
}

static void scale_scalar(float a, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] *= a;
}

const uint64_t HA_EXP2_TAB[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};

/* The vector kernels do these steps lane by lane (the same operations: the five multiply-adds that glibc's FMA
 * build fuses are fma() here, exact wherever it runs; only the reduction's, r, changes a result when it is
 * not fused: two floats, 0x1.04845ep+5 and -0x1.f8cbb2p+5, found by an exhaustive search). */
float ha_expf(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t top = (u >> 20) & 0x7ff;
    if (top >= 0x42b) {                      /* |x| >= 88, inf or NaN: glibc's special cases */
        if (u == 0xff800000u) return 0.0f;   /* -inf */
        if (top >= 0x7f8) return x + x;      /* inf, NaN */
        if (x > 0x1.62e42ep6f) return HUGE_VALF;
        if (x < -0x1.9fe368p6f) return 0.0f;
        if (x < -0x1.9d1d9ep6f) return 0x1p-149f; /* below the smallest subnormal's log: rounds up to it */
    }
    const double xd = (double)x;
    double kd = fma(HA_EXP_INVLN2N, xd, HA_EXP_SHIFT); /* k in its low bits */
    uint64_t ki, t;
    memcpy(&ki, &kd, sizeof ki);
    kd -= HA_EXP_SHIFT;
    const double r = fma(HA_EXP_INVLN2N, xd, -kd); /* in [-1/2, 1/2] */
    t = HA_EXP2_TAB[ki % 32] + (ki << 47);
    double s;
    memcpy(&s, &t, sizeof s);
    const double p = fma(r, HA_EXP_C0, HA_EXP_C1), r2 = r * r, y = fma(r, HA_EXP_C2, 1.0);
    return (float)(fma(p, r2, y) * s);
}

static void exp_shift_scalar(float *s, int64_t n, float m) {
    for (int64_t i = 0; i < n; i++) s[i] = ha_expf(s[i] - m);
}

static void silu_scalar(float *x, const float *up, int64_t n) {
    if (up)
        for (int64_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + ha_expf(-x[i])) * up[i];
    else
        for (int64_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + ha_expf(-x[i]));
}

static double mac_burst_scalar(int64_t n) {
    float a[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
    for (int64_t r = 0; r < n; r++)
        for (int i = 0; i < 8; i++) a[i] = a[i] * 0.999f + 1e-3f;
    return (double)n * 8.0 + 0.0 * (double)(a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7]);
}

static double mac_burst_q8_scalar(int64_t n) {
    int32_t a[8] = { 0, 1, 2, 3, 4, 5, 6, 7 }; /* kept in [-2^15, 2^15) by the mask: no overflow */
    for (int64_t r = 0; r < n; r++)
        for (int i = 0; i < 8; i++) a[i] = (a[i] + a[i] * 3) & 0x7fff;
    return (double)n * 8.0 + 0.0 * (double)(a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7]);
}

static void rng_bits_scalar(uint64_t seed, uint32_t row, uint32_t position, uint32_t purpose, uint32_t index0,
                            int64_t n, uint64_t *bits) {
    for (int64_t j = 0; j < n; j++) bits[j] = ha_rng_bits(seed, row, position, purpose, index0 + (uint32_t)j);
}

const ha_kernels ha_kernels_scalar = {
    .name = "scalar",
    .matmul = { [HA_F32] = matmul_f32,
                [HA_BF16] = matmul_bf16,
                [HA_F16] = matmul_f16,
                [HA_F32P] = matmul_f32p,
                [HA_BF16P] = matmul_bf16p,
                [HA_F16P] = matmul_f16p },
    .matmul_int = { [HA_Q8] = matmul_q8, [HA_Q4] = matmul_q4 },
    .matmul_w8a8 = matmul_w8a8,
    .matmul_bf16x = ha_matmul_bf16x_ref,
    .quant_act = ha_quant_act_ref,
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
    .dot = dot_scalar,
    .axpy = axpy_scalar,
    .attn_scores = attn_scores_scalar,
    .attn_values = attn_values_scalar,
    .scale = scale_scalar,
    .exp_shift = exp_shift_scalar,
    .silu = silu_scalar,
    .quant_q8 = ha_quant_q8_ref,
    .quant_q8_sum = ha_quant_q8_sum_ref,
    .quant_q4 = ha_quant_q4_ref,
    .rng_bits = rng_bits_scalar,
    .mac_burst = mac_burst_scalar,
    .mac_burst_q8 = mac_burst_q8_scalar,
    .mac_burst_w8a8 = mac_burst_q8_scalar,
};
