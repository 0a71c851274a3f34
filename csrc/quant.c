/* Weight quantization at load: float32 / bfloat16 / float16 -> HA_Q8 (int8, one float scale per
 * HA_Q8_GROUP weights), rows split across the thread pool. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

typedef struct quant_job {
    const ha_matrix *src;
    char *dst;
    atomic_llong bad_row; /* a row holding NaN or inf (it would poison its group), or -1 */
} quant_job;

static float src_at(const ha_matrix *m, const char *row, int64_t j) {
    switch (m->dtype) {
    case HA_F32: return ((const float *)row)[j];
    case HA_BF16: return ha_bf16_to_f32(((const uint16_t *)row)[j]);
    default: return ha_f16_to_f32(((const uint16_t *)row)[j]);
    }
}

static void quant_rows(void *ctx, int64_t r0, int64_t r1) {
    quant_job *j = ctx;
    const ha_matrix *m = j->src;
    const int64_t n = m->cols;
    for (int64_t r = r0; r < r1; r++) {
        const char *row = (const char *)m->data + (size_t)r * ha_row_bytes(m->dtype, n);
        char *out = j->dst + (size_t)r * ha_row_bytes(HA_Q8, n);
        for (int64_t g = 0; g * HA_Q8_GROUP < n; g++, out += HA_Q8_BLOCK_BYTES) {
            int64_t b = g * HA_Q8_GROUP, e = b + HA_Q8_GROUP < n ? b + HA_Q8_GROUP : n;
            float amax = 0.0f;
            for (int64_t i = b; i < e; i++) {
                float v = src_at(m, row, i);
                if (!isfinite(v)) atomic_store(&j->bad_row, (long long)r);
                amax = fmaxf(amax, fabsf(v));
            }
            float scale = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
            int8_t *q = (int8_t *)(out + 4);
            memcpy(out, &scale, sizeof scale);
            memset(q, 0, HA_Q8_GROUP);
            for (int64_t i = b; i < e; i++) {
                float v = roundf(src_at(m, row, i) * inv);
                q[i - b] = isfinite(v) ? (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v) : 0; /* NaN: row reported */
            }
        }
    }
}

ha_status ha_quantize_q8(const ha_matrix *src, void *dst, size_t dst_bytes) {
    if (!src || !src->data || !dst) return ha_fail(HA_ERR_INVALID, "quantize_q8: NULL argument");
    if (src->dtype != HA_F32 && src->dtype != HA_BF16 && src->dtype != HA_F16)
        return ha_fail(HA_ERR_INVALID, "quantize_q8: the source must be float32, bfloat16 or float16, not %s",
                       ha_dtype_name(src->dtype));
    if (src->rows < 0 || src->cols < 1 || src->nbytes != ha_matrix_bytes(src->dtype, src->rows, src->cols))
        return ha_fail(HA_ERR_INVALID, "quantize_q8: a (%lld, %lld) %s source needs %zu bytes, got %zu", (long long)src->rows,
                       (long long)src->cols, ha_dtype_name(src->dtype), ha_matrix_bytes(src->dtype, src->rows, src->cols),
                       src->nbytes);
    if ((uintptr_t)src->data % ha_dtype_align(src->dtype) || (uintptr_t)dst % 4)
        return ha_fail(HA_ERR_INVALID, "quantize_q8: source or destination is not aligned");
    if (dst_bytes != ha_matrix_bytes(HA_Q8, src->rows, src->cols))
        return ha_fail(HA_ERR_INVALID, "quantize_q8: the destination needs %zu bytes, got %zu",
                       ha_matrix_bytes(HA_Q8, src->rows, src->cols), dst_bytes);
    quant_job j = { .src = src, .dst = dst };
    atomic_init(&j.bad_row, -1);
    ha_parallel_for(quant_rows, &j, src->rows);
    if (atomic_load(&j.bad_row) >= 0)
        return ha_fail(HA_ERR_INVALID, "quantize_q8: row %lld holds NaN or inf; the checkpoint is corrupt",
                       (long long)atomic_load(&j.bad_row));
    return HA_OK;
}
