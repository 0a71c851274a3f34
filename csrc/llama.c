/* The native Llama-family model (Llama, Mistral, Qwen2): weights borrowed from the caller, a context
 * holding the KV cache and every activation buffer, and the chunk forward behind the model interface.
 *
 * Batch invariance: a token's logits depend only on its own inputs and its sequence's cache. Matmuls
 * compute each output element whole (kernel order fixed by n), attention runs per (token, head) over
 * blocks of keys fixed by position, norms are per row; nothing reduces across the tokens of a chunk. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CHUNK 32          /* tokens per forward step; longer appends are cut into chunks */
#define KEY_BLOCK 128     /* keys per online-softmax block */
#define ROW_UNIT 16       /* matmul rows per parallel work unit */
#define SMALL_JOB (1 << 18) /* multiply-adds below which a job runs on the calling thread: waking the pool
                               costs more, and far more when other processes hold the cores */

struct ha_llama {
    ha_llama_config cfg;  /* cfg.rope_inv_freq points at inv_freq */
    double *inv_freq;     /* (hd/2,) */
    ha_llama_weights w;   /* w.layers points at layers */
    ha_llama_layer *layers; /* (n_layers,) */
    int64_t q_dim, kv_dim; /* nh*hd, nkv*hd */
};

struct ha_llama_context {
    ha_lm lm;
    const ha_llama *m;
    const ha_kernels *kern; /* the kernel variant, read once per append so one forward never mixes two */
    int64_t n_seq, capacity;
    int blas;             /* prompt blocks go through OpenBLAS (ha_llama_context_create's blas_prefill) */
    int blas_now;         /* the forward in progress is such a block */
    int64_t *len;         /* (n_seq,) positions held */
    int64_t *adding;      /* (n_seq,) scratch: tokens of the current append per sequence */
    int64_t *blas_left;   /* (n_seq,) scratch: tokens of the current append still due to go through OpenBLAS */
    float *kcache;        /* (n_layers, n_seq, capacity, kv_dim) */
    float *vcache;        /* (n_layers, n_seq, capacity, kv_dim) */
    /* Activations of one forward of up to R tokens: R = HA_BLAS_BLOCK with blas, else CHUNK. */
    float *x;             /* (R, d) residual stream */
    float *xn;            /* (R, d) normed input of a block; packed rows wanting logits at the end */
    float *q;             /* (R, q_dim) */
    float *k, *v;         /* (R, kv_dim) */
    float *att;           /* (R, q_dim) attention output */
    float *tmp;           /* (R, d) projection output before the residual add */
    float *gate, *up;     /* (R, f) */
    float *rope_cos, *rope_sin; /* (R, hd/2) */
    int64_t *pos;         /* (R,) */
    int32_t *seq;         /* (R,) */
    float *wide;          /* (HA_BLAS_SLICE, max(d, f, q_dim)) weights widened for OpenBLAS; NULL if not needed */
    int16_t *xq;          /* (R, ha_act_width(max(d, q_dim, f))) a matmul's input quantized for integer weights; */
    float *xq_scale;      /* (R,) with its scales; both NULL if no matrix is int8 or int4 */
};

/* ---- creation and checks --------------------------------------------------------------------------- */

static ha_status check_matrix(const char *name, int64_t layer, const ha_matrix *m, int64_t rows, int64_t cols) {
    if (!m->data)
        return ha_fail(HA_ERR_INVALID, "weight %s (layer %lld) is missing", name, (long long)layer);
    if ((unsigned)m->dtype >= HA_NDTYPES)
        return ha_fail(HA_ERR_INVALID, "weight %s (layer %lld) has unknown dtype code %d; use float32, bfloat16, float16 (row-major or in panels), int8 or int4",
                       name, (long long)layer, (int)m->dtype);
    if (m->rows != rows || m->cols != cols)
        return ha_fail(HA_ERR_INVALID, "weight %s (layer %lld) has shape (%lld, %lld) but the config needs (%lld, %lld)",
                       name, (long long)layer, (long long)m->rows, (long long)m->cols, (long long)rows, (long long)cols);
    size_t need = ha_matrix_bytes(m->dtype, rows, cols), align = ha_dtype_align(m->dtype);
    if (m->nbytes != need)
        return ha_fail(HA_ERR_INVALID, "weight %s (layer %lld): buffer of %zu bytes for (%lld, %lld) %s, which needs %zu",
                       name, (long long)layer, m->nbytes, (long long)rows, (long long)cols, ha_dtype_name(m->dtype), need);
    if ((uintptr_t)m->data % align)
        return ha_fail(HA_ERR_INVALID, "weight %s (layer %lld) is not aligned to %zu bytes; pass an aligned copy",
                       name, (long long)layer, align);
    return HA_OK;
}

static ha_status check_vector(const char *name, int64_t layer, const ha_vector *v, int64_t n, int required) {
    if (!v->data) {
        if (required) return ha_fail(HA_ERR_INVALID, "vector %s (layer %lld) is missing", name, (long long)layer);
        return HA_OK;
    }
    if (v->n != n)
        return ha_fail(HA_ERR_INVALID, "vector %s (layer %lld) has %lld elements but the config needs %lld",
                       name, (long long)layer, (long long)v->n, (long long)n);
    if ((uintptr_t)v->data % sizeof(float))
        return ha_fail(HA_ERR_INVALID, "vector %s (layer %lld) is not 4-byte aligned", name, (long long)layer);
    return HA_OK;
}

static ha_status check_config(const ha_llama_config *c) {
#define POSITIVE(f, max)                                                                                  \
    if (c->f < 1 || c->f > (max))                                                                        \
        return ha_fail(HA_ERR_INVALID, "config " #f "=%lld is out of range 1..%lld", (long long)c->f, (long long)(max));
    POSITIVE(vocab_size, INT32_MAX)
    POSITIVE(hidden_size, 1 << 20)
    POSITIVE(intermediate_size, 1 << 22)
    POSITIVE(n_layers, 1 << 12)
    POSITIVE(n_heads, 1 << 12)
    POSITIVE(n_kv_heads, c->n_heads)
    POSITIVE(head_dim, HA_MAX_HEAD_DIM)
#undef POSITIVE
    if (c->n_heads % c->n_kv_heads)
        return ha_fail(HA_ERR_INVALID, "n_heads=%lld is not a multiple of n_kv_heads=%lld", (long long)c->n_heads,
                       (long long)c->n_kv_heads);
    if (c->head_dim % 2) return ha_fail(HA_ERR_INVALID, "head_dim=%lld must be even for rotary embeddings", (long long)c->head_dim);
    if (c->sliding_window < 0) return ha_fail(HA_ERR_INVALID, "sliding_window=%lld must be >= 0", (long long)c->sliding_window);
    if (!(c->rms_norm_eps > 0.0f) || !isfinite(c->rms_norm_eps))
        return ha_fail(HA_ERR_INVALID, "rms_norm_eps=%g must be a positive finite number", (double)c->rms_norm_eps);
    if (!c->rope_inv_freq) return ha_fail(HA_ERR_INVALID, "rope_inv_freq is missing");
    for (int64_t i = 0; i < c->head_dim / 2; i++)
        if (!isfinite(c->rope_inv_freq[i]) || c->rope_inv_freq[i] < 0)
            return ha_fail(HA_ERR_INVALID, "rope_inv_freq[%lld]=%g must be finite and >= 0", (long long)i, c->rope_inv_freq[i]);
    return HA_OK;
}

static ha_status check_weights(const ha_llama_config *c, const ha_llama_weights *w) {
    int64_t d = c->hidden_size, f = c->intermediate_size, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    ha_status st;
#define TRY(e) if ((st = (e)) != HA_OK) return st
    TRY(check_matrix("embed", -1, &w->embed, c->vocab_size, d));
    TRY(check_vector("final_norm", -1, &w->final_norm, d, 1));
    TRY(check_matrix("lm_head", -1, &w->lm_head, c->vocab_size, d));
    if (!w->layers) return ha_fail(HA_ERR_INVALID, "the layer weights are missing");
    for (int64_t l = 0; l < c->n_layers; l++) {
        const ha_llama_layer *L = &w->layers[l];
        TRY(check_vector("attn_norm", l, &L->attn_norm, d, 1));
        TRY(check_matrix("wq", l, &L->wq, qd, d));
        TRY(check_matrix("wk", l, &L->wk, kvd, d));
        TRY(check_matrix("wv", l, &L->wv, kvd, d));
        TRY(check_matrix("wo", l, &L->wo, d, qd));
        TRY(check_vector("bq", l, &L->bq, qd, 0));
        TRY(check_vector("bk", l, &L->bk, kvd, 0));
        TRY(check_vector("bv", l, &L->bv, kvd, 0));
        TRY(check_vector("bo", l, &L->bo, d, 0));
        TRY(check_vector("ffn_norm", l, &L->ffn_norm, d, 1));
        TRY(check_matrix("w_gate", l, &L->w_gate, f, d));
        TRY(check_matrix("w_up", l, &L->w_up, f, d));
        TRY(check_matrix("w_down", l, &L->w_down, d, f));
        TRY(check_vector("b_gate", l, &L->b_gate, f, 0));
        TRY(check_vector("b_up", l, &L->b_up, f, 0));
        TRY(check_vector("b_down", l, &L->b_down, d, 0));
    }
#undef TRY
    return HA_OK;
}

ha_status ha_llama_create(const ha_llama_config *cfg, const ha_llama_weights *w, ha_llama **out) {
    if (!cfg || !w || !out) return ha_fail(HA_ERR_INVALID, "ha_llama_create: NULL argument");
    *out = NULL;
    ha_status st = check_config(cfg);
    if (st == HA_OK) st = check_weights(cfg, w);
    if (st != HA_OK) return st;
    ha_llama *m = calloc(1, sizeof *m);
    if (m) {
        m->inv_freq = malloc((size_t)(cfg->head_dim / 2) * sizeof(double));
        m->layers = malloc((size_t)cfg->n_layers * sizeof(ha_llama_layer));
    }
    if (!m || !m->inv_freq || !m->layers) {
        ha_llama_free(m);
        return ha_fail(HA_ERR_NOMEM, "out of memory creating the model");
    }
    memcpy(m->inv_freq, cfg->rope_inv_freq, (size_t)(cfg->head_dim / 2) * sizeof(double));
    memcpy(m->layers, w->layers, (size_t)cfg->n_layers * sizeof(ha_llama_layer));
    m->cfg = *cfg;
    m->cfg.rope_inv_freq = m->inv_freq;
    m->w = *w;
    m->w.layers = m->layers;
    m->q_dim = cfg->n_heads * cfg->head_dim;
    m->kv_dim = cfg->n_kv_heads * cfg->head_dim;
    *out = m;
    return HA_OK;
}

void ha_llama_free(ha_llama *m) {
    if (!m) return;
    free(m->inv_freq);
    free(m->layers);
    free(m);
}

/* The matrices of one layer. */
#define LAYER_MATRICES 7
static void layer_matrices(const ha_llama_layer *L, const ha_matrix *out[LAYER_MATRICES]) {
    const ha_matrix *mats[LAYER_MATRICES] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down };
    memcpy(out, mats, sizeof mats);
}

int64_t ha_llama_weight_bytes(const ha_llama *m) {
    int64_t total = (int64_t)m->w.lm_head.nbytes + m->cfg.hidden_size * 4;
    for (int64_t l = 0; l < m->cfg.n_layers; l++) {
        const ha_llama_layer *L = &m->layers[l];
        const ha_matrix *mats[LAYER_MATRICES];
        layer_matrices(L, mats);
        for (int i = 0; i < LAYER_MATRICES; i++) total += (int64_t)mats[i]->nbytes;
        const ha_vector *vecs[] = { &L->attn_norm, &L->ffn_norm, &L->bq, &L->bk, &L->bv, &L->bo,
                                    &L->b_gate, &L->b_up, &L->b_down };
        for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++)
            if (vecs[i]->data) total += vecs[i]->n * 4;
    }
    return total;
}

/* ---- parallel pieces -------------------------------------------------------------------------------- */

/* Up to three matmuls sharing one input, split by output rows across threads as one job:
 * Y[i] (T, W[i].rows) = X (T, n) @ W[i]^T. */
typedef struct matmul_job {
    const ha_kernels *k;
    int count;
    const ha_matrix *W[3];
    float *Y[3];
    const float *X;
    const int16_t *Xq; /* X quantized by quant_act, for integer weights */
    const float *xq_scale;
    int64_t T;
} matmul_job;

static void matmul_range(void *ctx, int64_t ub, int64_t ue) {
    const matmul_job *j = ctx;
    const ha_kernels *k = j->k;
    int64_t b = ub * ROW_UNIT, e = ue * ROW_UNIT, base = 0; /* rows in the concatenation of the W[i] */
    for (int i = 0; i < j->count; i++) {
        const ha_matrix *W = j->W[i];
        int64_t lo = b > base ? b - base : 0, hi = e - base < W->rows ? e - base : W->rows;
        if (lo < hi && ha_dtype_is_int(W->dtype))
            k->matmul_int[W->dtype](W->data, W->cols, lo, hi, j->Xq, j->xq_scale, j->T, j->Y[i], W->rows);
        else if (lo < hi) k->matmul[W->dtype](W->data, W->cols, lo, hi, j->X, j->T, j->Y[i], W->rows);
        base += W->rows;
    }
}

static void matmul(const ha_llama_context *c, int count, const ha_matrix *const *W, float *const *Y, const float *X,
                   int64_t T) {
    /* In a prompt block, OpenBLAS, except for the few rows wanting logits: sgemm would widen the whole
     * output layer for them, where the kernels read it once. */
    if (c->blas_now && T >= HA_BLAS_BLOCK / 4) {
        for (int i = 0; i < count; i++) ha_blas_matmul(c->kern, W[i], X, T, Y[i], W[i]->rows, c->wide);
        return;
    }
    matmul_job j = { .k = c->kern, .count = count, .X = X, .T = T };
    int64_t rows = 0, quantize = 0;
    for (int i = 0; i < count; i++) {
        j.W[i] = W[i];
        j.Y[i] = Y[i];
        rows += W[i]->rows;
        quantize |= ha_dtype_is_int(W[i]->dtype);
    }
    if (quantize) { /* each token's row on its own, once, shared by the threads (T * n: small beside the matmul) */
        const int64_t n = W[0]->cols, width = ha_act_width(n);
        for (int64_t t = 0; t < T; t++) c->kern->quant_act(X + t * n, n, c->xq + t * width, c->xq_scale + t);
        j.Xq = c->xq;
        j.xq_scale = c->xq_scale;
    }
    /* Units of ROW_UNIT rows: units may straddle matrices, which matmul_range splits. */
    int64_t units = (rows + ROW_UNIT - 1) / ROW_UNIT;
    if (rows * W[0]->cols * T < SMALL_JOB) matmul_range(&j, 0, units);
    else ha_parallel_for(matmul_range, &j, units);
}

typedef struct attention_job {
    const ha_llama_context *c;
    int64_t layer;
} attention_job;

/* Tasks are (token i, head h) pairs, i * nh + h. */
static void attention_range(void *ctx, int64_t b, int64_t e) {
    const attention_job *j = ctx;
    const ha_llama_context *c = j->c;
    const ha_llama *m = c->m;
    const ha_kernels *k = c->kern;
    const int64_t nh = m->cfg.n_heads, hd = m->cfg.head_dim, group = nh / m->cfg.n_kv_heads, kvd = m->kv_dim;
    const float scale = (float)(1.0 / sqrt((double)hd));
    float acc[HA_MAX_HEAD_DIM], sc[KEY_BLOCK];
    for (int64_t task = b; task < e; task++) {
        int64_t i = task / nh, h = task % nh, p = c->pos[i];
        const float *q = c->q + i * m->q_dim + h * hd;
        size_t base = ((size_t)(j->layer * c->n_seq + c->seq[i]) * (size_t)c->capacity) * (size_t)kvd + (size_t)((h / group) * hd);
        const float *K = c->kcache + base, *V = c->vcache + base;
        int64_t lo = m->cfg.sliding_window > 0 && p + 1 > m->cfg.sliding_window ? p + 1 - m->cfg.sliding_window : 0;
        float mx = -INFINITY, sum = 0.0f;
        memset(acc, 0, (size_t)hd * sizeof(float));
        for (int64_t kb = lo; kb <= p; kb += KEY_BLOCK) {
            int64_t ke = kb + KEY_BLOCK <= p + 1 ? kb + KEY_BLOCK : p + 1;
            float bm = -INFINITY;
            for (int64_t t = kb; t < ke; t++) {
                sc[t - kb] = k->dot(q, K + (size_t)t * (size_t)kvd, hd) * scale;
                if (sc[t - kb] > bm) bm = sc[t - kb];
            }
            if (bm > mx) {
                if (mx > -INFINITY) {
                    float f = expf(mx - bm);
                    sum *= f;
                    k->scale(f, acc, hd);
                }
                mx = bm;
            }
            for (int64_t t = kb; t < ke; t++) {
                float ex = expf(sc[t - kb] - mx);
                sum += ex;
                k->axpy(ex, V + (size_t)t * (size_t)kvd, acc, hd);
            }
        }
        float *o = c->att + i * m->q_dim + h * hd;
        for (int64_t d = 0; d < hd; d++) o[d] = acc[d] / sum;
    }
}

/* ---- the forward -------------------------------------------------------------------------------------- */

/* y (d,) = x (d,) / sqrt(mean(x^2) + eps) * w (d,), as Transformers' LlamaRMSNorm in float32. */
static void rms_norm(const float *x, const float *w, float *y, int64_t d, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < d; i++) ss += (double)x[i] * (double)x[i];
    float r = (float)(1.0 / sqrt(ss / (double)d + (double)eps));
    for (int64_t i = 0; i < d; i++) y[i] = w[i] * (x[i] * r);
}

static void add_bias(float *y, const ha_vector *b, int64_t T, int64_t n) {
    if (!b->data) return;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < n; i++) y[t * n + i] += b->data[i];
}

/* Rotates heads (T, n_heads*hd) in place, pairs (j, j + hd/2), Transformers' rotate_half convention. */
static void rope(const ha_llama_context *c, float *v, int64_t T, int64_t n_heads) {
    const int64_t hd = c->m->cfg.head_dim, h2 = hd / 2;
    for (int64_t i = 0; i < T; i++)
        for (int64_t h = 0; h < n_heads; h++) {
            float *x = v + (i * n_heads + h) * hd;
            const float *cs = c->rope_cos + i * h2, *sn = c->rope_sin + i * h2;
            for (int64_t j = 0; j < h2; j++) {
                float a = x[j], b = x[j + h2];
                x[j] = a * cs[j] - b * sn[j];
                x[j + h2] = b * cs[j] + a * sn[j];
            }
        }
}

/* Forward of T tokens (T <= CHUNK, or T == HA_BLAS_BLOCK with c->blas_now) whose seq/pos are set in c;
 * their K/V go into the cache. Rows with want != NULL && want[i] get logits, packed, into logits. Returns
 * nonzero, with the forward unfinished, if the interrupt asked to stop (polled before each layer). */
static int forward_chunk(ha_llama_context *c, const int32_t *tokens, int64_t T, const uint8_t *want, float *logits) {
    const ha_llama *m = c->m;
    const ha_llama_config *cfg = &m->cfg;
    const ha_kernels *k = c->kern;
    const int64_t d = cfg->hidden_size, f = cfg->intermediate_size, h2 = cfg->head_dim / 2, kvd = m->kv_dim;

    for (int64_t i = 0; i < T; i++) {
        const ha_matrix *E = &m->w.embed;
        if (ha_dtype_is_panels(E->dtype)) /* a tied embedding packed for the output layer: one column at a time */
            for (int64_t j = 0; j < d; j++) c->x[i * d + j] = ha_panel_at(E->data, E->dtype, d, tokens[i], j);
        else k->to_f32[E->dtype]((const char *)E->data + (size_t)tokens[i] * ha_row_bytes(E->dtype, d), c->x + i * d, d);
        for (int64_t j = 0; j < h2; j++) {
            double a = (double)c->pos[i] * cfg->rope_inv_freq[j];
            c->rope_cos[i * h2 + j] = (float)cos(a);
            c->rope_sin[i * h2 + j] = (float)sin(a);
        }
    }
    for (int64_t l = 0; l < cfg->n_layers; l++) {
        if (ha_interrupted()) return 1;
        const ha_llama_layer *L = &m->layers[l];
        for (int64_t i = 0; i < T; i++) rms_norm(c->x + i * d, L->attn_norm.data, c->xn + i * d, d, cfg->rms_norm_eps);
        matmul(c, 3, (const ha_matrix *[]){ &L->wq, &L->wk, &L->wv }, (float *[]){ c->q, c->k, c->v }, c->xn, T);
        add_bias(c->q, &L->bq, T, m->q_dim);
        add_bias(c->k, &L->bk, T, kvd);
        add_bias(c->v, &L->bv, T, kvd);
        rope(c, c->q, T, cfg->n_heads);
        rope(c, c->k, T, cfg->n_kv_heads);
        for (int64_t i = 0; i < T; i++) {
            size_t off = ((size_t)(l * c->n_seq + c->seq[i]) * (size_t)c->capacity + (size_t)c->pos[i]) * (size_t)kvd;
            memcpy(c->kcache + off, c->k + i * kvd, (size_t)kvd * sizeof(float));
            memcpy(c->vcache + off, c->v + i * kvd, (size_t)kvd * sizeof(float));
        }
        attention_job aj = { c, l };
        if (T * cfg->n_heads * (c->pos[T - 1] + 1) * cfg->head_dim < SMALL_JOB) attention_range(&aj, 0, T * cfg->n_heads);
        else ha_parallel_for(attention_range, &aj, T * cfg->n_heads);
        matmul(c, 1, (const ha_matrix *[]){ &L->wo }, (float *[]){ c->tmp }, c->att, T);
        add_bias(c->tmp, &L->bo, T, d);
        for (int64_t i = 0; i < T * d; i++) c->x[i] += c->tmp[i];

        for (int64_t i = 0; i < T; i++) rms_norm(c->x + i * d, L->ffn_norm.data, c->xn + i * d, d, cfg->rms_norm_eps);
        matmul(c, 2, (const ha_matrix *[]){ &L->w_gate, &L->w_up }, (float *[]){ c->gate, c->up }, c->xn, T);
        add_bias(c->gate, &L->b_gate, T, f);
        add_bias(c->up, &L->b_up, T, f);
        for (int64_t i = 0; i < T * f; i++) {
            float g = c->gate[i];
            c->gate[i] = g / (1.0f + expf(-g)) * c->up[i];
        }
        matmul(c, 1, (const ha_matrix *[]){ &L->w_down }, (float *[]){ c->tmp }, c->gate, T);
        add_bias(c->tmp, &L->b_down, T, d);
        for (int64_t i = 0; i < T * d; i++) c->x[i] += c->tmp[i];
    }
    int64_t nw = 0;
    for (int64_t i = 0; i < T; i++)
        if (!want || want[i]) rms_norm(c->x + i * d, m->w.final_norm.data, c->xn + (nw++) * d, d, cfg->rms_norm_eps);
    if (nw) matmul(c, 1, (const ha_matrix *[]){ &m->w.lm_head }, (float *[]){ logits }, c->xn, nw);
    return 0;
}

/* ---- the model interface -------------------------------------------------------------------------------- */

/* An append stopped by the interrupt after its first n tokens were given positions: those positions are
 * taken back, so the cache holds what it held before the append. */
static ha_status interrupted_append(ha_llama_context *c, const int32_t *seq, int64_t n) {
    for (int64_t i = 0; i < n; i++) c->len[seq[i]]--;
    return ha_fail(HA_ERR_INTERRUPTED, "interrupted; the cache holds what it held before this append");
}

static ha_status ctx_append(void *self, int64_t n, const int32_t *seq, const int32_t *tokens, const uint8_t *want,
                            float *logits) {
    ha_llama_context *c = self;
    const int64_t V = c->m->cfg.vocab_size;
    if (n < 0 || (n > 0 && (!seq || !tokens))) return ha_fail(HA_ERR_INVALID, "append: bad token arrays (n=%lld)", (long long)n);
    int64_t wanted = 0;
    memset(c->adding, 0, (size_t)c->n_seq * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) {
        if (seq[i] < 0 || seq[i] >= c->n_seq)
            return ha_fail(HA_ERR_INVALID, "append: sequence %d is out of range; the cache holds %lld sequences",
                           seq[i], (long long)c->n_seq);
        if (tokens[i] < 0 || tokens[i] >= V)
            return ha_fail(HA_ERR_INVALID, "token id %d at index %lld is out of range for vocab_size %lld; "
                           "ids must be in [0, %lld)", tokens[i], (long long)i, (long long)V, (long long)V);
        c->adding[seq[i]]++;
        wanted += !want || want[i];
    }
    for (int64_t s = 0; s < c->n_seq; s++)
        if (c->len[s] + c->adding[s] > c->capacity)
            return ha_fail(HA_ERR_CAPACITY, "sequence %lld holds %lld positions; %lld more would pass the cache capacity "
                           "of %lld; create the cache with a larger max_cache_len", (long long)s, (long long)c->len[s],
                           (long long)c->adding[s], (long long)c->capacity);
    if (wanted && !logits) return ha_fail(HA_ERR_INVALID, "append: logits requested but no output buffer given");
    c->kern = ha_kernels_get();
    /* With blas, a sequence this append starts (empty before it) sends its first
     * HA_BLAS_BLOCK * floor(adding / HA_BLAS_BLOCK) tokens to OpenBLAS, in blocks of exactly HA_BLAS_BLOCK
     * contiguous tokens of that sequence (if they are not contiguous, none of its tokens go). Such a block
     * depends only on the prompt's tokens, so every generation mode that starts a sequence with the same
     * prompt computes it alike; every other token goes through the batch-invariant kernels. */
    for (int64_t s = 0; s < c->n_seq; s++)
        c->blas_left[s] = c->blas && c->len[s] == 0 ? c->adding[s] / HA_BLAS_BLOCK * HA_BLAS_BLOCK : 0;
    for (int64_t b = 0, T; b < n; b += T) {
        if (ha_interrupted()) return interrupted_append(c, seq, b);
        int64_t w0 = 0;
        c->blas_now = 0;
        if (c->blas_left[seq[b]] > 0) {
            int64_t i = b + 1;
            while (i < b + HA_BLAS_BLOCK && seq[i] == seq[b]) i++; /* blas_left <= the sequence's tokens left */
            c->blas_now = i == b + HA_BLAS_BLOCK;
            c->blas_left[seq[b]] = c->blas_now ? c->blas_left[seq[b]] - HA_BLAS_BLOCK : 0;
        }
        if (c->blas_now) {
            T = HA_BLAS_BLOCK;
        } else { /* up to CHUNK tokens, ending before a token that starts a block */
            T = 1;
            while (T < CHUNK && b + T < n && c->blas_left[seq[b + T]] == 0) T++;
        }
        for (int64_t i = 0; i < T; i++) {
            c->seq[i] = seq[b + i];
            c->pos[i] = c->len[seq[b + i]]++;
        }
        if (forward_chunk(c, tokens + b, T, want ? want + b : NULL, logits)) return interrupted_append(c, seq, b + T);
        for (int64_t i = 0; i < T; i++) w0 += !want || want[b + i];
        if (logits) logits += w0 * V;
    }
    return HA_OK;
}

static ha_status ctx_crop(void *self, int32_t seq, int64_t len) {
    ha_llama_context *c = self;
    if (seq < 0 || seq >= c->n_seq)
        return ha_fail(HA_ERR_INVALID, "crop: sequence %d is out of range; the cache holds %lld sequences", seq, (long long)c->n_seq);
    if (len < 0 || len > c->len[seq])
        return ha_fail(HA_ERR_INVALID, "crop: cannot keep %lld positions of sequence %d, which holds %lld",
                       (long long)len, seq, (long long)c->len[seq]);
    c->len[seq] = len;
    return HA_OK;
}

static int64_t ctx_length(const void *self, int32_t seq) {
    const ha_llama_context *c = self;
    return seq >= 0 && seq < c->n_seq ? c->len[seq] : 0;
}

ha_status ha_llama_context_create(const ha_llama *m, int64_t n_seq, int64_t capacity, int blas_prefill,
                                  ha_llama_context **out) {
    if (!m || !out) return ha_fail(HA_ERR_INVALID, "ha_llama_context_create: NULL argument");
    *out = NULL;
    if (n_seq < 1 || n_seq > (1 << 20)) return ha_fail(HA_ERR_INVALID, "batch size %lld is out of range 1..%d", (long long)n_seq, 1 << 20);
    if (capacity < 1 || capacity > INT32_MAX)
        return ha_fail(HA_ERR_INVALID, "cache capacity %lld is out of range 1..%d", (long long)capacity, INT32_MAX);
    const ha_llama_config *cfg = &m->cfg;
    double cache_elems = (double)cfg->n_layers * (double)n_seq * (double)capacity * (double)m->kv_dim;
    if (cache_elems * 8.0 > 0.9 * (double)SIZE_MAX)
        return ha_fail(HA_ERR_NOMEM, "a KV cache of %lld sequences x %lld positions is too large to address", (long long)n_seq,
                       (long long)capacity);
    /* A cache the machine cannot hold is refused here, rather than overcommitted and the process killed when its
     * pages are touched (the activation buffers are small beside it). */
    const double need = cache_elems * 8.0, room = ha_available_memory();
    if (room >= 0 && need > room)
        return ha_fail(HA_ERR_NOMEM, "a KV cache of %lld sequences x %lld positions needs %.0f MB, more than the %.0f MB of "
                       "memory available; use a smaller max_cache_len or batch", (long long)n_seq, (long long)capacity,
                       need / 1e6, room / 1e6);
    ha_llama_context *c = calloc(1, sizeof *c);
    if (!c) return ha_fail(HA_ERR_NOMEM, "out of memory creating a context");
    const size_t d = (size_t)cfg->hidden_size, f = (size_t)cfg->intermediate_size, fl = sizeof(float);
    c->m = m;
    c->n_seq = n_seq;
    c->capacity = capacity;
    c->blas = blas_prefill != 0;
    const size_t R = c->blas ? HA_BLAS_BLOCK : CHUNK;
    c->len = calloc((size_t)n_seq, sizeof(int64_t));
    c->adding = calloc((size_t)n_seq, sizeof(int64_t));
    c->blas_left = calloc((size_t)n_seq, sizeof(int64_t));
    c->kcache = malloc((size_t)cache_elems * fl);
    c->vcache = malloc((size_t)cache_elems * fl);
    c->x = malloc(R * d * fl);
    c->xn = malloc(R * d * fl);
    c->q = malloc(R * (size_t)m->q_dim * fl);
    c->k = malloc(R * (size_t)m->kv_dim * fl);
    c->v = malloc(R * (size_t)m->kv_dim * fl);
    c->att = malloc(R * (size_t)m->q_dim * fl);
    c->tmp = malloc(R * d * fl);
    c->gate = malloc(R * f * fl);
    c->up = malloc(R * f * fl);
    c->rope_cos = malloc(R * (size_t)(cfg->head_dim / 2) * fl);
    c->rope_sin = malloc(R * (size_t)(cfg->head_dim / 2) * fl);
    c->pos = malloc(R * sizeof(int64_t));
    c->seq = malloc(R * sizeof(int32_t));
    int all_f32 = m->w.lm_head.dtype == HA_F32; /* else OpenBLAS needs rows widened to float32 */
    int any_int = ha_dtype_is_int(m->w.lm_head.dtype);
    for (int64_t l = 0; l < cfg->n_layers; l++) {
        const ha_matrix *mats[LAYER_MATRICES];
        layer_matrices(&m->layers[l], mats);
        for (int i = 0; i < LAYER_MATRICES; i++) {
            all_f32 &= mats[i]->dtype == HA_F32;
            any_int |= ha_dtype_is_int(mats[i]->dtype);
        }
    }
    /* The widest matmul input: d, f, or q_dim (wo's, which may pass both: n_heads * head_dim need not be d). */
    size_t widest = d > f ? d : f;
    if ((size_t)m->q_dim > widest) widest = (size_t)m->q_dim;
    int wide_ok = 1, xq_ok = 1;
    if (c->blas && !all_f32) {
        c->wide = malloc((size_t)HA_BLAS_SLICE * widest * fl);
        wide_ok = c->wide != NULL;
    }
    if (any_int) {
        c->xq = malloc(R * (size_t)ha_act_width((int64_t)widest) * sizeof(int16_t));
        c->xq_scale = malloc(R * fl);
        xq_ok = c->xq && c->xq_scale;
    }
    if (!c->len || !c->adding || !c->blas_left || !c->kcache || !c->vcache || !c->x || !c->xn || !c->q || !c->k ||
        !c->v || !c->att || !c->tmp || !c->gate || !c->up || !c->rope_cos || !c->rope_sin || !c->pos || !c->seq ||
        !wide_ok || !xq_ok) {
        ha_llama_context_free(c);
        return ha_fail(HA_ERR_NOMEM, "out of memory allocating a KV cache of %.0f MB (%lld sequences x %lld positions); "
                       "use a smaller max_cache_len or batch", cache_elems * 8.0 / 1e6, (long long)n_seq, (long long)capacity);
    }
    /* Start the pool now, so that a failure to start threads surfaces here and not inside a forward (where
     * the work would run on the calling thread alone). */
    ha_status st = ha_pool_ensure();
    if (st != HA_OK) {
        ha_llama_context_free(c);
        return st;
    }
    c->lm = (ha_lm){ .self = c, .vocab_size = cfg->vocab_size, .n_seq = n_seq, .capacity = capacity,
                     .append = ctx_append, .crop = ctx_crop, .length = ctx_length };
    *out = c;
    return HA_OK;
}

void ha_llama_context_free(ha_llama_context *c) {
    if (!c) return;
    void *bufs[] = { c->len, c->adding, c->blas_left, c->kcache, c->vcache, c->x, c->xn, c->q, c->k, c->v, c->att,
                     c->tmp, c->gate, c->up, c->rope_cos, c->rope_sin, c->pos, c->seq, c->wide, c->xq, c->xq_scale };
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(c);
}

ha_lm *ha_llama_context_lm(ha_llama_context *c) { return c ? &c->lm : NULL; }
