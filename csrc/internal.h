/* Shared by the core's files, never by the binding: error reporting, the kernel table, the thread pool. */
#ifndef HA_INTERNAL_H
#define HA_INTERNAL_H

#include "ha.h"

/* Records a printf-style message for ha_last_error() and returns st, so callers write
 * `return ha_fail(HA_ERR_INVALID, "...", ...);`. */
ha_status ha_fail(ha_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline size_t ha_dtype_size(ha_dtype t) { return t == HA_F32 ? 4 : 2; }
const char *ha_dtype_name(ha_dtype t);

/* ---- kernels ---------------------------------------------------------------------------------------
 * One table per ISA variant. Every variant accumulates each output element in an order that depends
 * only on n (never on T, r0/r1 or the thread), which is what makes chunk forwards batch-invariant. */
typedef struct ha_kernels {
    const char *name;
    /* Y[t, r] = dot(W[r, :], X[t, :]) for t < T, r0 <= r < r1.
     * W (rows, n) of the table's dtype, X (T, n), Y (T, ldy). */
    void (*matmul[HA_NDTYPES])(const void *W, int64_t n, int64_t r0, int64_t r1, const float *X,
                               int64_t T, float *Y, int64_t ldy);
    /* dst (n,) = src (n,) as float32 */
    void (*to_f32[HA_NDTYPES])(const void *src, float *dst, int64_t n);
    /* a (n,) . b (n,) */
    float (*dot)(const float *a, const float *b, int64_t n);
    /* y (n,) += a * x (n,) */
    void (*axpy)(float a, const float *x, float *y, int64_t n);
    /* y (n,) *= a */
    void (*scale)(float a, float *y, int64_t n);
} ha_kernels;

extern const ha_kernels ha_kernels_scalar;
extern const ha_kernels ha_kernels_avx2;
/* The variant in use; set once at first use (ha_kernels_get), or by ha_kernels_select. */
const ha_kernels *ha_kernels_get(void);

/* IEEE half and bfloat16 bits -> float, exact. */
float ha_f16_to_f32(uint16_t h);
static inline float ha_bf16_to_f32(uint16_t b) {
    union { uint32_t u; float f; } v = { (uint32_t)b << 16 };
    return v.f;
}

/* ---- thread pool ------------------------------------------------------------------------------------
 * fn(ctx, begin, end) is called on disjoint ranges covering [0, n): range t of nt is
 * [n*t/nt, n*(t+1)/nt), one per thread, the caller's thread taking range 0. Calls from several threads
 * are serialized. */
typedef void (*ha_range_fn)(void *ctx, int64_t begin, int64_t end);
ha_status ha_parallel_for(ha_range_fn fn, void *ctx, int64_t n);

#endif /* HA_INTERNAL_H */
