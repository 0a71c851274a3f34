/* The weight formats of ha.h as every kernel reads and writes them: bytes of a row, alignment, the element
 * at (r, k) of each dtype, and the reference quantizations (of weight groups at load, of activation rows before
 * an integer matmul) that every kernel table gives bitwise. Shared by kernels/, model/ and the tests. */
#ifndef HA_FORMATS_H
#define HA_FORMATS_H

#include <math.h>
#include <stdint.h>

#include "../ha.h"

/* The dtype's name in messages ("float32", "int8", "bfloat16 panels", ...; formats.c). */
const char *ha_dtype_name(ha_dtype t);
/* IEEE half bits -> float, exact (kernels_scalar.c); bfloat16 bits -> float, exact. */
float ha_f16_to_f32(uint16_t h);
static inline float ha_bf16_to_f32(uint16_t b) {
    union {
        uint32_t u;
        float f;
    } v = { (uint32_t)b << 16 };
    return v.f;
}
/* Bytes of one row of n elements (panel dtypes: a row's share of its panel, n elements). */
static inline size_t ha_row_bytes(ha_dtype t, int64_t n) {
    switch (t) {
    case HA_F32:
    case HA_F32P: return (size_t)n * 4;
    case HA_Q8:
    case HA_Q8P: return (size_t)((n + HA_Q8_GROUP - 1) / HA_Q8_GROUP) * HA_Q8_BLOCK_BYTES;
    case HA_Q4: return (size_t)((n + HA_Q4_GROUP - 1) / HA_Q4_GROUP) * HA_Q4_BLOCK_BYTES;
    case HA_BF16X: return (size_t)((n + 1) / 2) * 4;
    default: return (size_t)n * 2;
    }
}
/* The alignment a matrix buffer of dtype t needs. */
static inline size_t ha_dtype_align(ha_dtype t) {
    return t == HA_BF16 || t == HA_F16 || t == HA_BF16P || t == HA_F16P ? 2 : 4;
}
/* Integer weights (int8, int4): their matmuls take activations quantized by quant_act. */
static inline int ha_dtype_is_int(ha_dtype t) { return t == HA_Q8 || t == HA_Q4; }
/* Weights in panels (float ones by ha_pack, HA_Q8P and HA_BF16X by ha_quantize), and the panel dtype of a row-major
 * float one (HA_NDTYPES if none). */
static inline int ha_dtype_is_panels(ha_dtype t) {
    return t == HA_F32P || t == HA_BF16P || t == HA_F16P || t == HA_Q8P || t == HA_BF16X;
}
static inline ha_dtype ha_panel_dtype(ha_dtype t) {
    return t == HA_F32 ? HA_F32P : t == HA_BF16 ? HA_BF16P : t == HA_F16 ? HA_F16P : HA_NDTYPES;
}
/* Position of row i (< HA_PANEL_ROWS) of a panel within each of its columns (ha.h). */
static inline int64_t ha_panel_pos(ha_dtype t, int64_t i) {
    return t != HA_BF16P ? i : i < 8 ? 2 * i : 2 * (i - 8) + 1;
}
/* The HA_Q8P group block g of panel p of a matrix W with n columns (ha.h). */
static inline const char *ha_q8p_block(const void *W, int64_t n, int64_t p, int64_t g) {
    const int64_t groups = (n + HA_Q8_GROUP - 1) / HA_Q8_GROUP;
    return (const char *)W + ((size_t)p * (size_t)groups + (size_t)g) * HA_Q8P_BLOCK_BYTES;
}
/* Integer weight k (< HA_Q8_GROUP) of row i (< HA_PANEL_ROWS) of a HA_Q8P group block, and that row's scale. */
static inline int ha_q8p_q(const char *blk, int64_t i, int64_t k) {
    return (int)((const uint8_t *)blk)[HA_PANEL_ROWS * 4 + (k / 4) * (HA_PANEL_ROWS * 4) + i * 4 + k % 4] - 128;
}
static inline float ha_q8p_scale(const char *blk, int64_t i) {
    float s;
    __builtin_memcpy(&s, blk + i * 4, sizeof s);
    return s;
}

/* The bfloat16 bits of weight k of row i (< HA_PANEL_ROWS) of panel p of a HA_BF16X matrix W with n columns (ha.h). */
static inline uint16_t ha_bf16x_bits(const void *W, int64_t n, int64_t p, int64_t i, int64_t k) {
    const size_t steps = (size_t)((n + 1) / 2);
    return ((const uint16_t *)
                W)[((size_t)p * steps + (size_t)(k / 2)) * (2 * HA_PANEL_ROWS) + (size_t)i * 2 + (size_t)(k % 2)];
}

/* Element (r, k) of a panel-dtype matrix W (rows, n), exactly as every kernel reads it (HA_Q8P: scale * q). */
static inline float ha_panel_at(const void *W, ha_dtype t, int64_t n, int64_t r, int64_t k) {
    if (t == HA_BF16X) return ha_bf16_to_f32(ha_bf16x_bits(W, n, r / HA_PANEL_ROWS, r % HA_PANEL_ROWS, k));
    if (t == HA_Q8P) {
        const char *blk = ha_q8p_block(W, n, r / HA_PANEL_ROWS, k / HA_Q8_GROUP);
        return ha_q8p_scale(blk, r % HA_PANEL_ROWS) * (float)ha_q8p_q(blk, r % HA_PANEL_ROWS, k % HA_Q8_GROUP);
    }
    const size_t at = ((size_t)(r / HA_PANEL_ROWS) * (size_t)n + (size_t)k) * HA_PANEL_ROWS +
                      (size_t)ha_panel_pos(t, r % HA_PANEL_ROWS);
    if (t == HA_F32P) return ((const float *)W)[at];
    const uint16_t h = ((const uint16_t *)W)[at];
    return t == HA_F16P ? ha_f16_to_f32(h) : ha_bf16_to_f32(h);
}

/* Element j of a HA_Q8 row, exactly as every kernel computes it: scale * q. */
static inline float ha_q8_at(const void *row, int64_t j) {
    const char *blk = (const char *)row + (size_t)(j / HA_Q8_GROUP) * HA_Q8_BLOCK_BYTES;
    float scale;
    __builtin_memcpy(&scale, blk, sizeof scale);
    return scale * (float)((const int8_t *)(blk + 4))[j % HA_Q8_GROUP];
}

/* Weight i (< HA_Q4_GROUP) of a HA_Q4 block as an integer: its nibble less 8. */
static inline int ha_q4_q(const char *blk, int64_t i) {
    const uint8_t b = ((const uint8_t *)blk + 4)[i % (HA_Q4_GROUP / 2)];
    return (i < HA_Q4_GROUP / 2 ? b & 15 : b >> 4) - 8;
}
/* Element j of a HA_Q4 row, exactly as every kernel computes it: scale * q. */
static inline float ha_q4_at(const void *row, int64_t j) {
    const char *blk = (const char *)row + (size_t)(j / HA_Q4_GROUP) * HA_Q4_BLOCK_BYTES;
    float scale;
    __builtin_memcpy(&scale, blk, sizeof scale);
    return scale * (float)ha_q4_q(blk, j % HA_Q4_GROUP);
}

/* max |x[i]| over x (n,), exact in any order for finite x; *finite = 0 if x holds NaN or inf, else left as it
 * was (with a NaN the result is only flagged: its bits may differ between variants). */
static inline float ha_abs_max_ref(const float *x, int64_t n, int *finite) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) *finite = 0;
        amax = fmaxf(amax, fabsf(x[i]));
    }
    return amax;
}
/* roundf(y) (halves away from zero) clamped to [-top, top]; 0 where y is not finite. */
static inline float ha_round_clamp(float y, float top) {
    const float v = roundf(y);
    return isfinite(v) ? (v > top ? top : v < -top ? -top : v) : 0.0f;
}

/* A group's scale max|x| / top, written as the block's first 4 bytes; returns the factor top / max|x| (0 if
 * x is all zeros) that quantizes it, and clears *finite if x holds NaN or inf. */
static inline float ha_group_scale(const float *x, int64_t len, float top, void *blk, int *finite) {
    const float amax = ha_abs_max_ref(x, len, finite), scale = amax / top;
    __builtin_memcpy(blk, &scale, sizeof scale);
    return amax > 0.0f ? top / amax : 0.0f;
}

/* The int8 quantization of one group, as every kernel table's quant_q8 computes it: x (len,), len <=
 * HA_Q8_GROUP, into the HA_Q8 block blk: scale = max|x| / 127, q[i] = round(x[i] * (127 / max|x|)) (halves away
 * from zero) clamped to [-127, 127], 0 past len (and where that product is not finite: max|x| below
 * 127 / FLT_MAX, about 3.7e-37, where the factor overflows to inf; or x not finite). Returns 0 if x holds
 * NaN or inf (which would poison the group), else 1. */
static inline int ha_quant_q8_ref(const float *x, int64_t len, void *blk) {
    int finite = 1;
    const float inv = ha_group_scale(x, len, 127.0f, blk, &finite);
    int8_t *q = (int8_t *)blk + 4;
    __builtin_memset(q, 0, HA_Q8_GROUP);
    for (int64_t i = 0; i < len; i++) q[i] = (int8_t)ha_round_clamp(x[i] * inv, 127.0f);
    return finite;
}

/* The int4 quantization of one group, as every kernel table's quant_q4 computes it: as ha_quant_q8_ref with 7
 * for 127 (scale = max|x| / 7, q in [-7, 7], 0 past len or where x * (7 / max|x|) is not finite), into the
 * HA_Q4 block blk. Returns 0 if x holds NaN or inf, else 1. */
static inline int ha_quant_q4_ref(const float *x, int64_t len, void *blk) {
    int finite = 1;
    const float inv = ha_group_scale(x, len, 7.0f, blk, &finite);
    uint8_t *nib = (uint8_t *)blk + 4;
    __builtin_memset(nib, 0x88, HA_Q4_GROUP / 2);
    for (int64_t i = 0; i < len; i++) {
        const int q = (int)ha_round_clamp(x[i] * inv, 7.0f);
        const int at = (int)(i % (HA_Q4_GROUP / 2)), shift = i < HA_Q4_GROUP / 2 ? 0 : 4;
        nib[at] = (uint8_t)((nib[at] & ~(15 << shift)) | (q + 8) << shift);
    }
    return finite;
}

/* ---- integer weights multiply int16 activations -------------------------------------------------------
 * A matmul with HA_Q8 or HA_Q4 weights first quantizes each activation row x (n,) on its own (ha_quant_act_ref), to
 * int16 q (ha_act_width(n),) and one float scale, x[i] ~ scale * q[i]; the kernel sums each group's integer x
 * int16 products exactly in int32 and scales them in float32 (see ha_kernels.matmul_int). Rounding is about
 * max|x| / 65534 per element at most (half a step, plus the factor's own rounding), far below the weights'
 * (up to max|w| / 254 per group for int8, max|w| / 14 for int4). */
#define HA_ACT_MAX 32767.0f
/* Elements of a quantized activation row: n rounded up to whole HA_Q8 groups (zeros past n). */
static inline int64_t ha_act_width(int64_t n) { return (n + HA_Q8_GROUP - 1) / HA_Q8_GROUP * HA_Q8_GROUP; }
_Static_assert(HA_Q8_GROUP % HA_Q4_GROUP == 0 && HA_Q4_GROUP % 16 == 0,
               "an activation row covers whole int4 groups, and every group whole 16-element steps");

/* The activation quantization every kernel table's quant_act computes: scale = max|x| / 32767 and q[i] =
 * round(x[i] * (32767 / max|x|)) (halves away from zero) clamped to [-32767, 32767], 0 past n and where that
 * product is not finite (max|x| below 32767 / FLT_MAX, about 9.6e-35). If x holds NaN or inf, q is all 0 and
 * scale NaN, so every output of the matmul is NaN, as float activations would make it. */
static inline void ha_quant_act_ref(const float *x, int64_t n, int16_t *q, float *scale) {
    int finite = 1;
    const float amax = ha_abs_max_ref(x, n, &finite);
    __builtin_memset(q, 0, (size_t)ha_act_width(n) * sizeof *q);
    if (!finite) {
        *scale = NAN;
        return;
    }
    const float inv = amax > 0.0f ? HA_ACT_MAX / amax : 0.0f;
    *scale = amax / HA_ACT_MAX;
    for (int64_t i = 0; i < n; i++) { q[i] = (int16_t)ha_round_clamp(x[i] * inv, HA_ACT_MAX); }
}

/* ---- int8 weights multiply int8 activations (the w8a8 class) ------------------------------------------
 * A matmul with HA_Q8P weights first quantizes each activation row x (n,) group by group, exactly as weights are
 * (ha_quant_q8_ref on each HA_Q8_GROUP elements: a float scale and 64 int8 in [-127, 127]), into one HA_Q8 row
 * (ha_row_bytes(HA_Q8, n) bytes), and sums each group's integers (xsum, int32, for the kernels that take
 * unsigned weights q + 128 and take 128 * xsum back off). Each output is then, in every variant bitwise:
 *   y = 0; for each group g in order: y = fmaf((float)isum_g, wscale_g * xscale_g, y)
 * with isum_g = sum of wq[i] * xq[i] over the group, exact in int32 (|isum_g| <= 64 * 128 * 127 < 2^24, so its
 * float is exact too) and wscale_g * xscale_g rounded to float32 once. A row holding NaN or inf gets NaN
 * scales, so every output of the matmul is NaN, as float activations would make it. */
/* The sum of a HA_Q8 block's integers. */
static inline int32_t ha_q8_block_sum(const void *blk) {
    const int8_t *v = (const int8_t *)blk + 4;
    int32_t s = 0;
    for (int i = 0; i < HA_Q8_GROUP; i++) s += v[i];
    return s;
}
/* An activation group: ha_quant_q8_ref's block and flag, and *sum its integers' sum, as every kernel table's
 * quant_q8_sum computes them. */
static inline int ha_quant_q8_sum_ref(const float *x, int64_t len, void *blk, int32_t *sum) {
    const int finite = ha_quant_q8_ref(x, len, blk);
    *sum = ha_q8_block_sum(blk);
    return finite;
}
/* x (n,) -> q (ha_row_bytes(HA_Q8, n) bytes), xsum (ceil(n / HA_Q8_GROUP),); `quant` is a kernel table's
 * quant_q8_sum (bitwise ha_quant_q8_sum_ref). */
static inline void ha_quant_act8(int (*quant)(const float *, int64_t, void *, int32_t *), const float *x, int64_t n,
                                 char *q, int32_t *xsum) {
    const int64_t groups = (n + HA_Q8_GROUP - 1) / HA_Q8_GROUP;
    int finite = 1;
    for (int64_t g = 0; g < groups; g++) {
        const int64_t len = n - g * HA_Q8_GROUP < HA_Q8_GROUP ? n - g * HA_Q8_GROUP : HA_Q8_GROUP;
        finite &= quant(x + g * HA_Q8_GROUP, len, q + g * HA_Q8_BLOCK_BYTES, xsum + g);
    }
    if (!finite) {
        const float nan = NAN;
        for (int64_t g = 0; g < groups; g++) __builtin_memcpy(q + g * HA_Q8_BLOCK_BYTES, &nan, sizeof nan);
    }
}

/* ---- bfloat16 weights multiply bfloat16 activations in pairs (the bf16-pairs class) --------------------
 * The arithmetic of vdpbf16ps (AVX512_BF16), measured bit for bit on an AMD Zen 4 against this emulation (10^8
 * random lanes: subnormals, cancellations, results at FLT_MIN, infinities, NaN payloads; docs/kernels-and-
 * performance.md), and Intel's SDM pseudocode. Per 32-bit lane, acc and the bfloat16 pairs (a0, a1), (b0, b1)
 * (element 2i in the low half, 2i + 1 in the high half):
 *   acc = daz(acc); acc = ftz(acc + a1 * b1); acc = ftz(acc + a0 * b0)
 * the high pair first; each product exact (two 8-bit significands), each add rounded once to nearest even
 * (MXCSR is not read), so each step is fmaf; daz: subnormal inputs read as zeros of their sign; ftz: a result
 * tiny after rounding (to 24 bits with an unbounded exponent, x86's rule: so FLT_MIN - 2^-150 gives +0 where
 * fmaf gives FLT_MIN) becomes a zero of its sign. A NaN result is a's NaN quieted, else b's, else acc's, else
 * the default NaN (0xffc00000).
 * A matmul with HA_BF16X weights rounds each activation row x (n,) to bfloat16 once (ha_bf16_round, which is
 * vcvtneps2bf16), as (ceil(n / 2),) uint32 pairs (element 2s low, 2s + 1 high, a zero past an odd n), and each
 * output is, in every variant bitwise:
 *   y = +0; for each step s in order: y = lane(y, W[r] pair s, x pair s)
 * the weights being the instruction's a and the activations its b. */

/* float32 -> bfloat16 as vcvtneps2bf16 (measured alike): NaN keeps its top half, quieted; subnormals give zeros
 * of their sign; everything else rounds to nearest even (overflowing to inf). */
static inline uint16_t ha_bf16_round(float x) {
    uint32_t u;
    __builtin_memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float ha_bits_f32(uint32_t u) {
    float f;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint32_t ha_f32_bits(float f) {
    uint32_t u;
    __builtin_memcpy(&u, &f, sizeof u);
    return u;
}

/* One step of the lane: ftz(fmaf(a, b, acc)) with the NaN rule, for a, b, acc not subnormal. */
static inline float ha_bf16x_fma(float a, float b, float acc) {
    const float r = fmaf(a, b, acc);
    uint32_t u;
    __builtin_memcpy(&u, &r, sizeof u);
    const uint32_t m = u & 0x7fffffffu;
    if (m > 0x7f800000u) {
        if (isnan(a)) return ha_bits_f32(ha_f32_bits(a) | 0x00400000u);
        if (isnan(b)) return ha_bits_f32(ha_f32_bits(b) | 0x00400000u);
        if (isnan(acc)) return ha_bits_f32(ha_f32_bits(acc) | 0x00400000u);
        return ha_bits_f32(0xffc00000u);
    }
    if (m - 1u < 0x00800000u) { /* subnormal, or +-FLT_MIN: tiny unless the exact sum rounds to it at 24 bits */
        if (m < 0x00800000u) return copysignf(0.0f, r);
        /* exact sum s + e (TwoSum in double; the product is exact in double); tiny iff below FLT_MIN - 2^-151 */
        const double p = (double)a * (double)b, s = p + (double)acc, z = s - p;
        const double e = ((double)acc - z) + (p - (s - z)), t = 0x1p-126 - 0x1p-151;
        const double as = fabs(s), ae = s < 0 ? -e : e;
        if (as < t || (as == t && ae < 0)) return copysignf(0.0f, r);
    }
    return r;
}

/* One lane of vdpbf16ps: acc, weights a (the pair's bits), activations b. */
static inline float ha_bf16x_lane(float acc, uint32_t a, uint32_t b) {
    const uint32_t in[5] = { ha_f32_bits(acc), a & 0xffff0000u, b & 0xffff0000u, a << 16, b << 16 };
    float v[5];
    for (int i = 0; i < 5; i++) v[i] = ha_bits_f32((in[i] & 0x7f800000u) == 0 ? in[i] & 0x80000000u : in[i]); /* daz */
    return ha_bf16x_fma(v[3], v[4], ha_bf16x_fma(v[1], v[2], v[0]));
}

/* x (n,) -> xb (ceil(n / 2),) pairs of bfloat16 (ha_bf16_round), a zero past an odd n. */
static inline void ha_round_act_bf16(const float *x, int64_t n, uint32_t *xb) {
    for (int64_t s = 0; s < n / 2; s++)
        xb[s] = (uint32_t)ha_bf16_round(x[2 * s]) | (uint32_t)ha_bf16_round(x[2 * s + 1]) << 16;
    if (n % 2) xb[n / 2] = ha_bf16_round(x[n - 1]);
}

/* Output (row i of panel P, activations xb) of the class: the lane chain over the n_steps pairs. P is one panel
 * of HA_BF16X weights (n_steps steps). */
static inline float ha_bf16x_dot_ref(const void *P, int64_t i, const uint32_t *xb, int64_t n_steps) {
    float y = 0.0f;
    for (int64_t s = 0; s < n_steps; s++) y = ha_bf16x_lane(y, ((const uint32_t *)P)[s * HA_PANEL_ROWS + i], xb[s]);
    return y;
}

#endif /* HA_FORMATS_H */
