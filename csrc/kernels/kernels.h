/* The kernel table: one per ISA variant (kernels_scalar.c, kernels_avx2.c, kernels_avx512.c), chosen once by
 * dispatch.c; with the pieces every variant shares (the exponential, the generator's bits, the prefetcher). */
#ifndef HA_KERNELS_H
#define HA_KERNELS_H

#include "formats.h"

/* ---- kernels ---------------------------------------------------------------------------------------
 * One table per ISA variant. Every variant accumulates each output element in an order that depends
 * only on n (never on T, r0/r1 or the thread), which is what makes chunk forwards batch-invariant, and every
 * variant gives the same bits (for finite results; where NaNs meet, which one survives may differ), so that
 * no output depends on the variant. The float sums over row-major data are defined once, in AVX2's order (the
 * vector variants share it; kernels_scalar.c writes it in plain C, exact on any machine):
 * - the 8-lane dot product of a (n,) and b (n,), with nv = n - n % 8: eight lanes from +0, lane l taking
 *   lane_l = fmaf(a[i + l], b[i + l], lane_l) for i = 0, 8, .., nv - 8 in order; s = ha_lanes_sum8(lanes)
 *   (below); then s = s + a[i] * b[i] (the product rounded, then added) for i = nv .. n - 1 in order;
 * - the axpy update of y (n,) by a * x (n,): y[i] = fmaf(a, x[i], y[i]) for i < nv, and
 *   y[i] = y[i] + a * x[i] (the product rounded) for nv <= i < n. */
typedef struct ha_kernels {
    const char *name;
    /* Float weights (NULL for integer ones, which go through matmul_int):
     * Y[t, r] = dot(W[r, :], X[t, :]) for t < T, r0 <= r < r1, X (T, n), Y (T, ldy); no other element of Y
     * is written. Row-major W (HA_F32, HA_BF16, HA_F16; row r at W + r * ha_row_bytes(dtype, n)): the 8-lane
     * dot product of the row (widened to float32 exactly) and x[t, :]. Panels (HA_F32P, HA_BF16P, HA_F16P):
     * s = 0, then s = fmaf(w[r, k], x[t, k], s) for k = 0 .. n - 1 in order. r0 may fall inside a panel. */
    void (*matmul[HA_NDTYPES])(const void *W, int64_t n, int64_t r0, int64_t r1, const float *X, int64_t T, float *Y,
                               int64_t ldy);
    /* Integer weights (HA_Q8, HA_Q4; NULL for float ones): the same for W (rows, n) and activations quantized
     * by quant_act, Xq (T, ha_act_width(n)) int16 and xscale (T,). Each output, in every variant bitwise:
     * eight int32 lanes, lane j summing the products of the elements i of each group with i % 16 in
     * {2j, 2j + 1} (exactly: at most 8 * 128 * 32767 in magnitude, even for a hand-made int8 block holding
     * -128), then per group lane_j = fma(float(sum_j), scale_g, lane_j) in float32 (float(sum_j) rounds,
     * alike everywhere, once |sum_j| > 2^24); at the end
     * y = (((lane0 + lane4) + (lane2 + lane6)) + ((lane1 + lane5) + (lane3 + lane7))) * xscale[t]. */
    void (*matmul_int[HA_NDTYPES])(const void *W, int64_t n, int64_t r0, int64_t r1, const int16_t *Xq,
                                   const float *xscale, int64_t T, float *Y, int64_t ldy);
    /* HA_Q8P weights (the w8a8 class): the same for W (rows, n) and activations quantized by ha_quant_act8, Xq (T,
     * ha_row_bytes(HA_Q8, n)) bytes and xsum (T, ceil(n / HA_Q8_GROUP)), each output bitwise as formats.h defines
     * (integer sums per group, then one float chain over the groups). r0 may fall inside a panel. */
    void (*matmul_w8a8)(const void *W, int64_t n, int64_t r0, int64_t r1, const char *Xq, const int32_t *xsum,
                        int64_t T, float *Y, int64_t ldy);
    /* The same, bitwise, shaped for weights the caches hold (a model that fits the last-level cache), where the
     * arithmetic, not the read, bounds a verification; NULL: matmul_w8a8 serves both. */
    void (*matmul_w8a8_cached)(const void *W, int64_t n, int64_t r0, int64_t r1, const char *Xq, const int32_t *xsum,
                               int64_t T, float *Y, int64_t ldy);
    /* HA_BF16X weights (the bf16-pairs class): the same for W (rows, n) and activations rounded by ha_round_act_bf16,
     * Xb (T, ceil(n / 2)) pairs, each output bitwise formats.h's lane chain (ha_bf16x_dot_ref), NaN payloads
     * included. r0 may fall inside a panel. */
    void (*matmul_bf16x)(const void *W, int64_t n, int64_t r0, int64_t r1, const uint32_t *Xb, int64_t T, float *Y,
                         int64_t ldy);
    /* x (n,) -> q (ha_act_width(n),), *scale, bitwise as ha_quant_act_ref */
    void (*quant_act)(const float *x, int64_t n, int16_t *q, float *scale);
    /* dst (n,) = the row src (n,) as float32 (row-major dtypes; NULL for panels) */
    void (*to_f32[HA_NDTYPES])(const void *src, float *dst, int64_t n);
    /* Panel dtypes: one panel (of a matrix with n columns) as float32, dst[k * ldd + i] = its row i's
     * element k for k < n, i < HA_PANEL_ROWS (padding rows give zeros); exact. */
    void (*panel_to_f32[HA_NDTYPES])(const void *panel, int64_t n, float *dst, int64_t ldd);
    /* a (n,) . b (n,): the 8-lane dot product */
    float (*dot)(const float *a, const float *b, int64_t n);
    /* y (n,) += a * x (n,): the axpy update */
    void (*axpy)(float a, const float *x, float *y, int64_t n);
    /* y (n,) *= a (each product rounded once) */
    void (*scale)(float a, float *y, int64_t n);
    /* Attention's two inner loops over nk keys (or values) of one sequence, the t-th at slot (slot0 + t) % S of a
     * cache whose slots are ld floats apart, each bitwise what dot and axpy give key by key (one
     * call over a block instead of a call per key: no call overhead, acc kept in registers):
     * attn_scores: s[i * lds + t] = dot(q + i * qs, K + slot_t * ld, n) * scale for queries i < nq, t < nk
     * (several queries against the same keys: each key is read once for them all);
     * attn_values: for each of nq heads h, acc + h * lda (n,) += w[h * ldw + t] * (V + slot_t * ld) for
     * t = 0 .. nk - 1 in order, as axpy(w[h * ldw + t], ...) calls (several heads of a group: each value row is
     * read once for them all). */
    void (*attn_scores)(const float *q, int64_t nq, int64_t qs, const float *K, int64_t ld, int64_t slot0, int64_t S,
                        int64_t nk, int64_t n, float scale, float *s, int64_t lds);
    void (*attn_values)(const float *w, int64_t ldw, int64_t nq, const float *V, int64_t ld, int64_t slot0, int64_t S,
                        int64_t nk, int64_t n, float *acc, int64_t lda);
    /* The two places a forward takes exponentials, each element bitwise what ha_expf gives (the scalar loops
     * in kernels_scalar.c are the definition): exp_shift: s[i] = ha_expf(s[i] - m) for i < n (softmax
     * weights); silu: x[i] = x[i] / (1 + ha_expf(-x[i])), times up[i] when up is given, for i < n. */
    void (*exp_shift)(float *s, int64_t n, float m);
    void (*silu)(float *x, const float *up, int64_t n);
    /* x (len,) -> one HA_Q8 block, bitwise as ha_quant_q8_ref; 0 if x holds NaN or inf */
    int (*quant_q8)(const float *x, int64_t len, void *blk);
    /* the same for an activation group of the w8a8 class, and *sum its integers' sum, bitwise as
     * ha_quant_q8_sum_ref (ha_quant_act8's step) */
    int (*quant_q8_sum)(const float *x, int64_t len, void *blk, int32_t *sum);
    /* x (len,) -> one HA_Q4 block, bitwise as ha_quant_q4_ref; 0 if x holds NaN or inf */
    int (*quant_q4)(const float *x, int64_t len, void *blk);
    /* bits[j] = ha_rng_bits(seed, row, position, purpose, index0 + j) for j < n (the index wrapping as uint32):
     * sampling's noise for a block of tokens, bitwise the scalar generator's. */
    void (*rng_bits)(uint64_t seed, uint32_t row, uint32_t position, uint32_t purpose, uint32_t index0, int64_t n,
                     uint64_t *bits);
    /* n rounds of independent multiply-add chains from registers, the variant's peak arithmetic (a
     * measurement, ha_measure_mac_rate); returns the multiply-adds done (its value keeps them live). */
    double (*mac_burst)(int64_t n);
    /* The same with vpmaddwd-like int16 x int16 products summed in pairs into int32, matmul_int's multiplies. */
    double (*mac_burst_q8)(int64_t n);
    /* The same with int8 x int8 products summed in int32, matmul_w8a8's multiplies (vpdpbusd where the variant has it). */
    double (*mac_burst_w8a8)(int64_t n);
} ha_kernels;

/* The 53 random bits of the uniform (seed, row, position, purpose, index) (generation/sampling.c): the first 64
 * bits of Philox4x32-10 (Salmon et al. 2011) of counter (index, position, row, purpose) under key (seed's low
 * half, high half), shifted right by 11. */
uint64_t ha_rng_bits(uint64_t seed, uint32_t row, uint32_t position, uint32_t purpose, uint32_t index);

/* exp(x) in float32, the one exponential of a forward (kernels_scalar.c; the vector kernels' exp_shift and
 * silu give it bitwise). glibc's expf algorithm (from ARM's optimized routines) as its FMA build runs it, in
 * double: k + r = x * 32 / ln 2 (k the nearest integer, through the shift), 2^(k/32) from the table below,
 * 2^(r/32) by a cubic, one rounding to float at the end; on glibc 2.36 (Debian 12) it equals expf for every
 * float input (checked exhaustively; the C tests check a sweep), so the logits are what libm's expf gave.
 * |x| >= 88, inf and NaN go through the same special cases as glibc's. */
float ha_expf(float x);
/* HA_EXP2_TAB[i] = the bits of 2^(i/32) rounded to double, minus i << 47 (so that adding k << 47 for
 * k = i mod 32 gives the bits of 2^(k/32)); the cubic's coefficients, scaled by 1/32 per power of r. */
extern const uint64_t HA_EXP2_TAB[32];
#define HA_EXP_INVLN2N (0x1.71547652b82fep+0 * 32.0)
#define HA_EXP_SHIFT 0x1.8p+52
#define HA_EXP_C0 (0x1.c6af84b912394p-5 / 32.0 / 32.0 / 32.0)
#define HA_EXP_C1 (0x1.ebfce50fac4f3p-3 / 32.0 / 32.0)
#define HA_EXP_C2 (0x1.62e42ff0c52d6p-1 / 32.0)

/* Panel_to_f32 for HA_Q8P, every table's (exact: scale * q). */
void ha_panel_to_f32_q8p(const void *panel, int64_t n, float *dst, int64_t ldd);
/* The same for HA_BF16X (exact), and the scalar reference of matmul_bf16x, which vector kernels call for the outputs
 * whose chain met a tiny or NaN result (kernels_scalar.c). */
void ha_panel_to_f32_bf16x(const void *panel, int64_t n, float *dst, int64_t ldd);
void ha_matmul_bf16x_ref(const void *W, int64_t n, int64_t r0, int64_t r1, const uint32_t *Xb, int64_t T, float *Y,
                         int64_t ldy);

extern const ha_kernels ha_kernels_scalar;
extern const ha_kernels ha_kernels_avx2;
/* AVX-512 (F, BW, VNNI; kernels_avx512.c): its own panel and integer kernels, AVX2's other entries. Native,
 * and emulated through SIMDe on AVX2 (kernels_avx512_emulated.c) so that the same source runs in the tests
 * on CPUs without AVX-512. NULL where not built (not x86; the emulation without libsimde-dev's headers).
 * Call only where the CPU has what the variant needs (dispatch.c checks). */
const ha_kernels *ha_kernels_avx512(void);
const ha_kernels *ha_kernels_avx512_emulated(void);
/* AVX-VNNI (kernels_avxvnni.c): AVX2's table with the w8a8 sums by vpdpbusd on ymm; "avx-vnni" the VEX instruction,
 * "avx-vnni-evex" its EVEX form (AVX512_VNNI + AVX512VL), which the tests run on CPUs without AVX-VNNI. NULL where not
 * built (not x86; a compiler without AVX-VNNI). Call only where the CPU has what the variant needs (dispatch.c). */
const ha_kernels *ha_kernels_avxvnni(void);
const ha_kernels *ha_kernels_avxvnni_evex(void);
/* The avx512 table's matmul_bf16x is vdpbf16ps where the CPU has AVX512_BF16 (ha_cpu_has_avx512_bf16, dispatch.c),
 * else the exact emulation; the tests reach each one here (native 1 or 0; NULL where this CPU cannot run it). */
int ha_cpu_has_avx512_bf16(void);
/* 1 on an Intel CPU (cpuid's vendor "GenuineIntel"), else 0; cheap after the first call: the w8a8 kernels' prefetch
 * where a group of panels runs one narrow tile (avx512, from memory) or two tokens (the 256-bit kernels)
 * (docs/kernels-and-performance.md: faster on an Intel Xeon, slower on AMD Zen 4). */
int ha_cpu_is_intel(void);
typedef void (*ha_matmul_bf16x_fn)(const void *W, int64_t n, int64_t r0, int64_t r1, const uint32_t *Xb, int64_t T,
                                   float *Y, int64_t ldy);
ha_matmul_bf16x_fn ha_avx512_bf16x_kernel(int native);
/* The variant in use; set once at first use (ha_kernels_get), or by ha_kernels_select. */
const ha_kernels *ha_kernels_get(void);
/* The variant of that name if this CPU runs it, else NULL: "scalar", "avx2", "avx-vnni", "avx512", "avx512-emulated",
 * "avx-vnni-evex". */
const ha_kernels *ha_kernels_find(const char *name);

/* The end of every integer-weight output and of every 8-lane dot product: its eight float lanes l (8,) added
 * in the tree that ha_kernels.matmul_int defines (AVX2's hsum). */
static inline float ha_lanes_sum8(const float *l) {
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* Software prefetch into L2 (prefetcht1 on x86), shared out over a tile's steps: the kernels hand each
 * step an equal share of the bytes [base, base + end) that the next tile will read. */
typedef struct ha_prefetcher {
    const char *base;  /* the next rows' or panels' first byte */
    size_t off, end;   /* bytes prefetched so far, bytes in all */
    size_t share;      /* bytes per step */
} ha_prefetcher;

/* The prefetcher of `bytes` bytes from base, over `steps` steps (at least one). */
static inline ha_prefetcher ha_prefetcher_over(const char *base, size_t bytes, int64_t steps) {
    if (steps < 1) steps = 1;
    ha_prefetcher pf = { base, 0, bytes, ((bytes + (size_t)steps - 1) / (size_t)steps + 63) & ~(size_t)63 };
    return pf;
}

/* One step's share; nothing if pf is NULL. */
static inline void ha_prefetch_step(ha_prefetcher *pf) {
    if (!pf) return;
    size_t off = pf->off; /* in a register: through pf, GCC stored it back after every line */
    const size_t left = off < pf->end ? pf->end - off : 0; /* off passes end when end is not whole lines */
    const size_t end = left > pf->share ? off + pf->share : off + left;
    for (; off < end; off += 64) __builtin_prefetch(pf->base + off, 0, 2);
    pf->off = off;
}

#endif /* HA_KERNELS_H */
