/* Weight conversion at load, split across the thread pool: float32 / bfloat16 / float16 quantized to HA_Q8
 * (int8, one float scale per HA_Q8_GROUP weights), HA_Q8P (the same in panels, for int8 activations) or HA_Q4
 * (int4, per HA_Q4_GROUP), or repacked into panels (HA_F32P, HA_BF16P, HA_F16P). */
#include <stdatomic.h>
#include <string.h>

#include "../core/core.h"
#include "../kernels/kernels.h"

typedef struct quant_job {
    const ha_matrix *src;
    ha_dtype to; /* HA_Q8, HA_Q8P or HA_Q4 */
    char *dst;
    atomic_llong bad_row; /* a row holding NaN or inf (it would poison its group), or -1 */
} quant_job;

/* Each group is widened to float32 by the kernel table's to_f32 and quantized by its quant_q8 or quant_q4,
 * which every variant computes bitwise alike (ha_quant_q8_ref, ha_quant_q4_ref). */
static void quant_rows(void *ctx, int64_t r0, int64_t r1) {
    quant_job *j = ctx;
    const ha_matrix *m = j->src;
    const ha_kernels *k = ha_kernels_get();
    const int64_t n = m->cols;
    const int64_t group = j->to == HA_Q8 ? HA_Q8_GROUP : HA_Q4_GROUP;
    const size_t block = j->to == HA_Q8 ? HA_Q8_BLOCK_BYTES : HA_Q4_BLOCK_BYTES;
    int (*quant)(const float *, int64_t, void *) = j->to == HA_Q8 ? k->quant_q8 : k->quant_q4;
    float x[HA_Q8_GROUP > HA_Q4_GROUP ? HA_Q8_GROUP : HA_Q4_GROUP];
    for (int64_t r = r0; r < r1; r++) {
        const char *row = (const char *)m->data + (size_t)r * ha_row_bytes(m->dtype, n);
        char *out = j->dst + (size_t)r * ha_row_bytes(j->to, n);
        for (int64_t b = 0; b < n; b += group, out += block) {
            const int64_t len = n - b < group ? n - b : group;
            k->to_f32[m->dtype](row + ha_row_bytes(m->dtype, b), x, len);
            if (!quant(x, len, out)) atomic_store(&j->bad_row, (long long)r);
        }
    }
}

/* HA_Q8P: panels [p0, p1), each row's groups quantized as quant_rows does for HA_Q8 (the same integers and
 * scales), then laid out as ha.h's group blocks; rows past the matrix's last give zeros. */
static void quant_panels(void *ctx, int64_t p0, int64_t p1) {
    quant_job *j = ctx;
    const ha_matrix *m = j->src;
    const ha_kernels *k = ha_kernels_get();
    const int64_t n = m->cols, groups = (n + HA_Q8_GROUP - 1) / HA_Q8_GROUP;
    float x[HA_Q8_GROUP];
    char q8[HA_Q8_BLOCK_BYTES];
    for (int64_t p = p0; p < p1; p++)
        for (int64_t g = 0; g < groups; g++) {
            uint8_t *blk = (uint8_t *)j->dst + ((size_t)p * (size_t)groups + (size_t)g) * HA_Q8P_BLOCK_BYTES;
            const int64_t b = g * HA_Q8_GROUP, len = n - b < HA_Q8_GROUP ? n - b : HA_Q8_GROUP;
            for (int64_t i = 0; i < HA_PANEL_ROWS; i++) {
                const int64_t r = p * HA_PANEL_ROWS + i;
                memset(q8, 0, sizeof q8);
                if (r < m->rows) {
                    const char *row = (const char *)m->data + (size_t)r * ha_row_bytes(m->dtype, n);
                    k->to_f32[m->dtype](row + ha_row_bytes(m->dtype, b), x, len);
                    if (!k->quant_q8(x, len, q8)) atomic_store(&j->bad_row, (long long)r);
                }
                memcpy(blk + 4 * i, q8, 4);
                for (int64_t c = 0; c < HA_Q8_GROUP; c++)
                    blk[HA_PANEL_ROWS * 4 + (c / 4) * (HA_PANEL_ROWS * 4) + i * 4 + c % 4] = (uint8_t)(q8[4 + c] + 128);
            }
        }
}

/* HA_BF16X: panels [p0, p1), each weight rounded to bfloat16 (ha_bf16_round: a bfloat16 source's bits kept,
 * subnormals made zeros of their sign), as ha.h's pair panels; rows past the matrix's last and the column past an
 * odd n give zeros. */
static void pair_panels(void *ctx, int64_t p0, int64_t p1) {
    quant_job *j = ctx;
    const ha_matrix *m = j->src;
    const ha_kernels *k = ha_kernels_get();
    const int64_t n = m->cols, steps = (n + 1) / 2;
    float x[HA_Q8_GROUP];
    for (int64_t p = p0; p < p1; p++) {
        uint16_t *panel = (uint16_t *)j->dst + (size_t)p * (size_t)steps * (2 * HA_PANEL_ROWS);
        for (int64_t i = 0; i < HA_PANEL_ROWS; i++) {
            const int64_t r = p * HA_PANEL_ROWS + i;
            for (int64_t b = 0; b < 2 * steps; b += HA_Q8_GROUP) {
                const int64_t len = n - b < HA_Q8_GROUP ? n - b : HA_Q8_GROUP;
                if (r < m->rows && len > 0)
                    k->to_f32[m->dtype]((const char *)m->data + (size_t)r * ha_row_bytes(m->dtype, n) +
                                            ha_row_bytes(m->dtype, b),
                                        x, len);
                for (int64_t c = 0; c < HA_Q8_GROUP && b + c < 2 * steps; c++)
                    panel[((size_t)(b + c) / 2) * (2 * HA_PANEL_ROWS) + (size_t)i * 2 + (size_t)(b + c) % 2] =
                        r < m->rows && c < len ? ha_bf16_round(x[c]) : 0;
            }
        }
    }
}

/* What ha_quantize and ha_pack check alike: src (non-NULL) a row-major float32, bfloat16 or float16 matrix of a
 * possible shape whose buffer is exactly its size, both buffers aligned for their dtypes, and dst exactly a
 * (rows, cols) matrix of dtype `to`. what names the caller in the message. */
static ha_status check_conversion(const char *what, const ha_matrix *src, ha_dtype to, const void *dst,
                                  size_t dst_bytes) {
    if (ha_panel_dtype(src->dtype) == HA_NDTYPES)
        return ha_fail(HA_ERR_INVALID, "%s: the source must be row-major float32, bfloat16 or float16, not %s", what,
                       ha_dtype_name(src->dtype));
    if (src->rows < 0 || src->cols < 1)
        return ha_fail(HA_ERR_INVALID,
                       "%s: a (%lld, %lld) source is impossible; a matrix needs rows >= 0 and cols >= 1", what,
                       (long long)src->rows, (long long)src->cols);
    if (src->rows > 0 &&
        (ha_matrix_bytes(src->dtype, src->rows, src->cols) == 0 || ha_matrix_bytes(to, src->rows, src->cols) == 0))
        return ha_fail(HA_ERR_INVALID, "%s: a (%lld, %lld) matrix is too large to address; no buffer can hold it", what,
                       (long long)src->rows, (long long)src->cols);
    if (src->nbytes != ha_matrix_bytes(src->dtype, src->rows, src->cols))
        return ha_fail(HA_ERR_INVALID, "%s: a (%lld, %lld) %s source needs %zu bytes, got %zu", what,
                       (long long)src->rows, (long long)src->cols, ha_dtype_name(src->dtype),
                       ha_matrix_bytes(src->dtype, src->rows, src->cols), src->nbytes);
    if ((uintptr_t)src->data % ha_dtype_align(src->dtype) || (uintptr_t)dst % ha_dtype_align(to))
        return ha_fail(HA_ERR_INVALID, "%s: source or destination is not aligned", what);
    if (dst_bytes != ha_matrix_bytes(to, src->rows, src->cols))
        return ha_fail(HA_ERR_INVALID, "%s: the destination needs %zu bytes, got %zu", what,
                       ha_matrix_bytes(to, src->rows, src->cols), dst_bytes);
    return HA_OK;
}

ha_status ha_quantize(const ha_matrix *src, ha_dtype to, void *dst, size_t dst_bytes) {
    if (!src || !src->data || !dst) return ha_fail(HA_ERR_INVALID, "quantize: NULL argument");
    if (to != HA_Q8 && to != HA_Q4 && to != HA_Q8P && to != HA_BF16X)
        return ha_fail(HA_ERR_INVALID, "quantize: the destination must be int8, w8a8, int4 or bfloat16 pairs, not %s",
                       ha_dtype_name(to));
    const ha_status st = check_conversion("quantize", src, to, dst, dst_bytes);
    if (st != HA_OK) return st;
    quant_job j = { .src = src, .to = to, .dst = dst };
    atomic_init(&j.bad_row, -1);
    if (to == HA_Q8P) ha_parallel_for(quant_panels, &j, (src->rows + HA_PANEL_ROWS - 1) / HA_PANEL_ROWS);
    else if (to == HA_BF16X) ha_parallel_for(pair_panels, &j, (src->rows + HA_PANEL_ROWS - 1) / HA_PANEL_ROWS);
    else ha_parallel_for(quant_rows, &j, src->rows);
    if (atomic_load(&j.bad_row) >= 0)
        return ha_fail(HA_ERR_INVALID, "quantize: row %lld holds NaN or inf; the checkpoint is corrupt",
                       (long long)atomic_load(&j.bad_row));
    return HA_OK;
}

typedef struct pack_job {
    const ha_matrix *src;
    ha_dtype to;
    char *dst;
} pack_job;

/* Panels [p0, p1): per panel the 16 source rows are read side by side, column by column, and each column's 16
 * elements written out in order, as 16- or 32-bit words (the bits unchanged, whatever the float format). */
#define DEFINE_PACK(NAME, TYPE)                                                                                  \
    static void NAME(const TYPE *src, int64_t rows, int64_t n, ha_dtype to, TYPE *dst, int64_t p0, int64_t p1) { \
        for (int64_t p = p0; p < p1; p++) {                                                                      \
            const TYPE *row[HA_PANEL_ROWS];                                                                      \
            int64_t at[HA_PANEL_ROWS];                                                                           \
            for (int64_t i = 0; i < HA_PANEL_ROWS; i++) {                                                        \
                const int64_t r = p * HA_PANEL_ROWS + i;                                                         \
                row[i] = r < rows ? src + r * n : NULL; /* padding rows: zeros */                                \
                at[i] = ha_panel_pos(to, i);                                                                     \
            }                                                                                                    \
            TYPE *out = dst + p * HA_PANEL_ROWS * n;                                                             \
            for (int64_t k = 0; k < n; k++, out += HA_PANEL_ROWS)                                                \
                for (int64_t i = 0; i < HA_PANEL_ROWS; i++) out[at[i]] = row[i] ? row[i][k] : (TYPE)0;           \
        }                                                                                                        \
    }
DEFINE_PACK(pack_32, uint32_t)
DEFINE_PACK(pack_16, uint16_t)

static void pack_panels(void *ctx, int64_t p0, int64_t p1) {
    const pack_job *j = ctx;
    const ha_matrix *m = j->src;
    if (m->dtype == HA_F32) pack_32(m->data, m->rows, m->cols, j->to, (uint32_t *)j->dst, p0, p1);
    else pack_16(m->data, m->rows, m->cols, j->to, (uint16_t *)j->dst, p0, p1);
}

ha_status ha_pack(const ha_matrix *src, void *dst, size_t dst_bytes) {
    if (!src || !src->data || !dst) return ha_fail(HA_ERR_INVALID, "pack: NULL argument");
    const ha_dtype to = ha_panel_dtype(src->dtype); /* HA_NDTYPES for a source check_conversion refuses */
    const ha_status st = check_conversion("pack", src, to, dst, dst_bytes);
    if (st != HA_OK) return st;
    pack_job j = { .src = src, .to = to, .dst = dst };
    ha_parallel_for(pack_panels, &j, (src->rows + HA_PANEL_ROWS - 1) / HA_PANEL_ROWS);
    return HA_OK;
}
