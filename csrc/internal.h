/* Shared by the core's files, never by the binding: error reporting, the kernel table, the thread pool. */
#ifndef HA_INTERNAL_H
#define HA_INTERNAL_H

#include <math.h>
#include <stdlib.h>

#include "ha.h"

/* Records a printf-style message for ha_last_error() and returns st, so callers write
 * `return ha_fail(HA_ERR_INVALID, "...", ...);`. */
ha_status ha_fail(ha_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

const char *ha_dtype_name(ha_dtype t);
/* IEEE half bits -> float, exact (kernels_scalar.c); bfloat16 bits -> float, exact. */
float ha_f16_to_f32(uint16_t h);
static inline float ha_bf16_to_f32(uint16_t b) {
    union { uint32_t u; float f; } v = { (uint32_t)b << 16 };
    return v.f;
}
/* Bytes of one row of n elements (panel dtypes: a row's share of its panel, n elements). */
static inline size_t ha_row_bytes(ha_dtype t, int64_t n) {
    switch (t) {
    case HA_F32: case HA_F32P: return (size_t)n * 4;
    case HA_Q8: return (size_t)((n + HA_Q8_GROUP - 1) / HA_Q8_GROUP) * HA_Q8_BLOCK_BYTES;
    case HA_Q4: return (size_t)((n + HA_Q4_GROUP - 1) / HA_Q4_GROUP) * HA_Q4_BLOCK_BYTES;
    default: return (size_t)n * 2;
    }
}
/* The alignment a matrix buffer of dtype t needs. */
static inline size_t ha_dtype_align(ha_dtype t) { return t == HA_BF16 || t == HA_F16 || t == HA_BF16P || t == HA_F16P ? 2 : 4; }
/* Integer weights (int8, int4): their matmuls take activations quantized by quant_act. */
static inline int ha_dtype_is_int(ha_dtype t) { return t == HA_Q8 || t == HA_Q4; }
/* Float weights in panels (ha_pack), and the panel dtype of a row-major float one (HA_NDTYPES if none). */
static inline int ha_dtype_is_panels(ha_dtype t) { return t == HA_F32P || t == HA_BF16P || t == HA_F16P; }
static inline ha_dtype ha_panel_dtype(ha_dtype t) {
    return t == HA_F32 ? HA_F32P : t == HA_BF16 ? HA_BF16P : t == HA_F16 ? HA_F16P : HA_NDTYPES;
}
/* Position of row i (< HA_PANEL_ROWS) of a panel within each of its columns (ha.h). */
static inline int64_t ha_panel_pos(ha_dtype t, int64_t i) { return t != HA_BF16P ? i : i < 8 ? 2 * i : 2 * (i - 8) + 1; }
/* Element (r, k) of a panel-dtype matrix W (rows, n), exactly as every kernel reads it. */
static inline float ha_panel_at(const void *W, ha_dtype t, int64_t n, int64_t r, int64_t k) {
    const size_t at = ((size_t)(r / HA_PANEL_ROWS) * (size_t)n + (size_t)k) * HA_PANEL_ROWS + (size_t)ha_panel_pos(t, r % HA_PANEL_ROWS);
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
    for (int64_t i = 0; i < n; i++) {
        q[i] = (int16_t)ha_round_clamp(x[i] * inv, HA_ACT_MAX);
    }
}

/* malloc of a * b elements of size es, NULL if that many bytes cannot even be counted. */
static inline void *ha_malloc_array(size_t a, size_t b, size_t es) {
    size_t n;
    if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, es, &n)) return NULL;
    return malloc(n ? n : 1);
}

/* ---- kernels ---------------------------------------------------------------------------------------
 * One table per ISA variant. Every variant accumulates each output element in an order that depends
 * only on n (never on T, r0/r1 or the thread), which is what makes chunk forwards batch-invariant. */
typedef struct ha_kernels {
    const char *name;
    /* Float weights (NULL for integer ones, which go through matmul_int):
     * Y[t, r] = dot(W[r, :], X[t, :]) for t < T, r0 <= r < r1, X (T, n), Y (T, ldy); no other element of Y
     * is written. Row-major W (HA_F32, HA_BF16, HA_F16; row r at W + r * ha_row_bytes(dtype, n)): in the
     * order kernels_avx2.c's header gives, which variants may differ in. Panels (HA_F32P, HA_BF16P, HA_F16P),
     * in every variant bitwise (for finite results; where NaNs meet, which one survives may differ):
     * s = 0, then s = fmaf(w[r, k], x[t, k], s) for k = 0 .. n - 1 in order. r0 may fall inside a panel. */
    void (*matmul[HA_NDTYPES])(const void *W, int64_t n, int64_t r0, int64_t r1, const float *X,
                               int64_t T, float *Y, int64_t ldy);
    /* Integer weights (HA_Q8, HA_Q4; NULL for float ones): the same for W (rows, n) and activations quantized
     * by quant_act, Xq (T, ha_act_width(n)) int16 and xscale (T,). Each output, in every variant bitwise:
     * eight int32 lanes, lane j summing the products of the elements i of each group with i % 16 in
     * {2j, 2j + 1} (exactly: at most 8 * 128 * 32767 in magnitude, even for a hand-made int8 block holding
     * -128), then per group lane_j = fma(float(sum_j), scale_g, lane_j) in float32 (float(sum_j) rounds,
     * alike everywhere, once |sum_j| > 2^24); at the end
     * y = (((lane0 + lane4) + (lane2 + lane6)) + ((lane1 + lane5) + (lane3 + lane7))) * xscale[t]. */
    void (*matmul_int[HA_NDTYPES])(const void *W, int64_t n, int64_t r0, int64_t r1, const int16_t *Xq,
                                   const float *xscale, int64_t T, float *Y, int64_t ldy);
    /* x (n,) -> q (ha_act_width(n),), *scale, bitwise as ha_quant_act_ref */
    void (*quant_act)(const float *x, int64_t n, int16_t *q, float *scale);
    /* dst (n,) = the row src (n,) as float32 (row-major dtypes; NULL for panels) */
    void (*to_f32[HA_NDTYPES])(const void *src, float *dst, int64_t n);
    /* Panel dtypes: one panel (of a matrix with n columns) as float32, dst[k * ldd + i] = its row i's
     * element k for k < n, i < HA_PANEL_ROWS (padding rows give zeros); exact. */
    void (*panel_to_f32[HA_NDTYPES])(const void *panel, int64_t n, float *dst, int64_t ldd);
    /* a (n,) . b (n,) */
    float (*dot)(const float *a, const float *b, int64_t n);
    /* y (n,) += a * x (n,) */
    void (*axpy)(float a, const float *x, float *y, int64_t n);
    /* y (n,) *= a */
    void (*scale)(float a, float *y, int64_t n);
    /* Attention's two inner loops over nk keys (or values) of one sequence, the t-th at slot (slot0 + t) % S of a
     * cache whose slots are ld floats apart, each bitwise what the variant's dot and axpy give key by key (one
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
} ha_kernels;

/* The 53 random bits of the uniform (seed, row, position, purpose, index) (sampling.c): the first 64 bits of
 * Philox4x32-10 (Salmon et al. 2011) of counter (index, position, row, purpose) under key (seed's low half,
 * high half), shifted right by 11. */
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

extern const ha_kernels ha_kernels_scalar;
extern const ha_kernels ha_kernels_avx2;
/* AVX-512 (F, BW, VNNI; kernels_avx512.c): its own panel and integer kernels, AVX2's other entries. Native,
 * and emulated through SIMDe on AVX2 (kernels_avx512_emulated.c) so that the same source runs in the tests
 * on CPUs without AVX-512. NULL where not built (not x86; the emulation without libsimde-dev's headers).
 * Call only where the CPU has what the variant needs (dispatch.c checks). */
const ha_kernels *ha_kernels_avx512(void);
const ha_kernels *ha_kernels_avx512_emulated(void);
/* The variant in use; set once at first use (ha_kernels_get), or by ha_kernels_select. */
const ha_kernels *ha_kernels_get(void);
/* The variant of that name if this CPU runs it, else NULL: "scalar", "avx2", "avx512", "avx512-emulated". */
const ha_kernels *ha_kernels_find(const char *name);

/* The end of every integer-weight output: its eight float lanes l (8,) added in the tree that
 * ha_kernels.matmul_int defines. */
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

/* ---- OpenBLAS (blas.c) -------------------------------------------------------------------------------
 * Prompt blocks of HA_BLAS_BLOCK tokens; weights not in float32 are widened HA_BLAS_SLICE rows at a time. */
#define HA_BLAS_BLOCK 128
#define HA_BLAS_SLICE 256
/* Y[t, r] (T, ldy) = dot(W[r, :], X[t, :]) for every row r of W, by cblas_sgemm; scratch holds
 * (HA_BLAS_SLICE, W->cols) floats unless W is float32 (then it may be NULL). */
void ha_blas_matmul(const ha_kernels *k, const ha_matrix *W, const float *X, int64_t T, float *Y, int64_t ldy,
                    float *scratch);


/* ---- generation helpers shared by generate.c and assist.c ------------------------------------------ */

static inline int ha_is_eos(const ha_generate_params *p, int32_t t) {
    for (int64_t i = 0; i < p->n_eos; i++)
        if (p->eos[i] == t) return 1;
    return 0;
}

/* After the row decided tokens[n - 1]: 1 if the row ends there (an eos, or the caller's stopping criteria said
 * so), 0 if it goes on, -1 with HA_ERR_CALLBACK recorded if the criteria asked to stop the whole work. scores
 * (vocab,) are the processed scores the token was chosen from. */
static inline int ha_row_ends(const ha_generate_params *p, int64_t row, const int32_t *tokens, int64_t n,
                              const float *scores, int64_t vocab) {
    const int stop = p->should_stop ? p->should_stop(p->stop_user, row, tokens, n, scores, vocab) : 0;
    if (stop != 0 && stop != 1) {
        ha_fail(HA_ERR_CALLBACK, "generation stopped by a stopping criterion in row %lld", (long long)row);
        return -1;
    }
    return stop || ha_is_eos(p, tokens[n - 1]);
}

/* Checks the arguments common to every generation loop; rows must have >= 1 prompt token and empty caches. */
ha_status ha_check_generate_args(const ha_lm *lm, const ha_generate_params *p, int64_t prompt_width, const int64_t *start);

/* Sampling pieces for the acceptance step (sampling.c). Scores are processed scores (V,). */
/* The token chosen as ha_sampler_choose does, with noise of the given purpose. */
int32_t ha_sampler_choose_keyed(const ha_sampler *s, const float *scores, uint32_t row, uint32_t position,
                                uint32_t purpose);
/* softmax's normalization of scores (V,): m their max (-inf when every one is), z = sum_i exp(scores[i] - m) in
 * double, in index order. Computed once per distribution and reused (a pass of V exps). */
typedef struct ha_normalizer { double m, z; } ha_normalizer;
ha_normalizer ha_softmax_norm(const float *scores, int64_t vocab);
/* softmax(scores)[t], in double, from its normalization n (0 where every score is -inf). */
double ha_norm_at(const float *scores, int64_t vocab, ha_normalizer n, int32_t t);
/* A draw from max(0, softmax(p) - softmax(q)) renormalized, with HA_RNG_RESIDUAL noise; from softmax(p)
 * if that residual is zero everywhere (p == q up to rounding). np, nq: ha_softmax_norm of p and q. -1 if p is
 * empty. */
int32_t ha_sample_residual(const ha_sampler *s, const float *p, ha_normalizer np, const float *q, ha_normalizer nq,
                           uint32_t row, uint32_t position);

/* ---- interrupts and time (interrupt.c) ------------------------------------------------------------- */
/* Polls the calling thread's interrupt (ha.h, ha_set_interrupt): nonzero if it asked to stop, now or at an
 * earlier poll since it was set (then poll is not called again). Cheap where the poll is: call it between
 * pieces of work, on the thread that made the core call. */
int ha_interrupted(void);
/* Seconds on the monotonic clock (max_time's). */
double ha_now(void);
/* max_time's deadline for a generation that starts now: INFINITY when max_time is off (<= 0). */
static inline double ha_deadline(const ha_generate_params *p) { return p->max_time > 0 ? ha_now() + p->max_time : INFINITY; }

/* size bytes for a buffer every forward pass reads through (the KV cache); NULL if out of memory. From 2 MB up
 * (where the system has madvise's MADV_HUGEPAGE, and unless the environment sets HA_HUGE_PAGES=0), a private
 * anonymous mapping of its own at a 2 MB boundary, advised for transparent huge pages, so that reading it costs
 * fewer TLB misses (*mapped = 1); else malloc's (*mapped = 0). Freed with ha_free_streamed(p, the same size, the
 * same mapped). (csrc/memory.c) */
void *ha_alloc_streamed(size_t size, int *mapped);
void ha_free_streamed(void *p, size_t size, int mapped);

/* ---- thread pool ------------------------------------------------------------------------------------
 * fn(ctx, begin, end) is called on disjoint ranges covering [0, n): pieces [k*g, min((k+1)*g, n)) with
 * g = ceil(n / (8 * threads)), which the threads (the caller's among them) take in turn as they finish
 * the last, so which thread computes an index varies but each index is computed whole by one call. Calls
 * from several threads are serialized. */
typedef void (*ha_range_fn)(void *ctx, int64_t begin, int64_t end);
/* Never fails: if no thread can be started, the caller's thread runs all of [0, n). fn must not call
 * ha_parallel_for itself. */
void ha_parallel_for(ha_range_fn fn, void *ctx, int64_t n);
/* Starts the pool if none runs (so that a failure to start threads is reported where it can be). */
ha_status ha_pool_ensure(void);
/* on != 0: the calling thread's jobs run on that thread alone, leaving the pool's workers asleep (assist.c's thread
 * drafting ahead, so that it takes one core beside a caller's thread that is busy elsewhere); 0: on the pool. */
void ha_pool_alone(int on);

#endif /* HA_INTERNAL_H */
