/* Prompt prefill through OpenBLAS (Debian's libopenblas): Y = X W^T for a block of many tokens, where a
 * tuned sgemm outruns the batch-invariant kernels (it keeps the weights of a tile in cache across many
 * tokens). Float32 weights are used in place; other formats are widened to float32 HA_BLAS_SLICE rows at a
 * time (the kernel table's to_f32, or panel_to_f32 for panels), so the scratch stays small.
 *
 * Results are a deterministic function of the block (whatever the thread count), but not bitwise those of
 * the kernels; the append (kv_cache.c) therefore sends only whole prompt blocks of HA_BLAS_BLOCK tokens here (see
 * there). */
#include <cblas.h>
#include <pthread.h>

#include "model.h"

/* OpenBLAS's own calls (libopenblas, linked by setup.py), declared here too because the cblas.h that
 * Debian's alternatives select may be another implementation's. */
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);
char *openblas_get_corename(void);

const char *ha_blas_core(void) { return openblas_get_corename(); }

/* A slice [r0, r0 + nr) of W's rows, in units of UNIT rows spread over the pool: each unit is widened (if W
 * is not float32) and multiplied by one single-threaded sgemm of its own. Units, not threads' shares, are
 * sgemm's calls, so the result does not depend on the thread count. */
#define UNIT 64
_Static_assert(HA_BLAS_SLICE % UNIT == 0 && UNIT % HA_PANEL_ROWS == 0,
               "slices are whole units, and units whole panels (each unit's panels are widened side by side)");

typedef struct blas_job {
    const ha_kernels *k;
    const ha_matrix *W;
    const float *X;   /* (T, W->cols) */
    int64_t T, ldy, r0, nr;
    float *Y;         /* (T, ldy) */
    float *scratch;   /* (nr, W->cols) widened rows, unless W is float32 */
} blas_job;

static void blas_range(void *ctx, int64_t ub, int64_t ue) {
    const blas_job *j = ctx;
    const ha_matrix *W = j->W;
    const int64_t n = W->cols;
    const size_t rb = ha_row_bytes(W->dtype, n);
    for (int64_t u = ub; u < ue; u++) {
        const int64_t b = u * UNIT, e = b + UNIT < j->nr ? b + UNIT : j->nr;
        const float *B = (const float *)((const char *)W->data + (size_t)(j->r0 + b) * rb);
        if (ha_dtype_is_panels(W->dtype)) { /* B (n, UNIT): the unit's panels side by side, column k a row of B */
            float *wide = j->scratch + b * n;
            for (int64_t p = b; p < e; p += HA_PANEL_ROWS)
                j->k->panel_to_f32[W->dtype]((const char *)W->data + (size_t)(j->r0 + p) * rb, n, wide + (p - b), UNIT);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)j->T, (int)(e - b), (int)n, 1.0f, j->X, (int)n,
                        wide, UNIT, 0.0f, j->Y + j->r0 + b, (int)j->ldy);
            continue;
        }
        if (W->dtype != HA_F32) {
            for (int64_t r = b; r < e; r++)
                j->k->to_f32[W->dtype]((const char *)W->data + (size_t)(j->r0 + r) * rb, j->scratch + r * n, n);
            B = j->scratch + b * n;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)j->T, (int)(e - b), (int)n, 1.0f, j->X, (int)n, B,
                    (int)n, 0.0f, j->Y + j->r0 + b, (int)j->ldy);
    }
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void ha_blas_matmul(const ha_kernels *k, const ha_matrix *W, const float *X, int64_t T, float *Y, int64_t ldy,
                    float *scratch) {
    /* The pool splits the rows; OpenBLAS's own threads would fight it for the cores (spinning while the pool's
     * threads need them), so each sgemm runs on the thread that calls it. The setting is
     * process-wide (numpy may share this library), hence restored; the lock keeps two contexts driven from
     * two Python threads from restoring it under each other's sgemm calls. */
    pthread_mutex_lock(&lock);
    const int before = openblas_get_num_threads();
    openblas_set_num_threads(1);
    const int64_t slice = W->dtype == HA_F32 ? W->rows : HA_BLAS_SLICE;
    for (int64_t r0 = 0; r0 < W->rows; r0 += slice) {
        blas_job j = { k, W, X, T, ldy, r0, W->rows - r0 < slice ? W->rows - r0 : slice, Y, scratch };
        ha_parallel_for(blas_range, &j, (j.nr + UNIT - 1) / UNIT);
    }
    openblas_set_num_threads(before);
    pthread_mutex_unlock(&lock);
}
