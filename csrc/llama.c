/* The native decoder (Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2/3, SmolLM3, GPT-2; ha.h gives the layer's
 * math): weights borrowed from the caller, a context holding the KV cache and every activation buffer, and the
 * chunk forward behind the model interface.
 *
 * Batch invariance: a token's logits depend only on its own inputs and its sequence's cache. Matmuls
 * compute each output element whole (kernel order fixed by n), attention runs per (token, head) over
 * blocks of keys fixed by position (a kv head's query heads side by side, each with its own sums), norms
 * are per row, rotary tables per token; nothing reduces across the tokens of a chunk.
 *
 * Sliding-window layers keep their keys and values in rings: a layer with window w holds w + HA_RING_SLACK
 * positions per sequence (position p at slot p mod that), when that is less than the cache's capacity. The
 * slack covers one chunk's writes before its attention reads (a chunk of T tokens needs T - 1 <= slack) and
 * the positions a crop may take back (ha_lm.max_rollback). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CHUNK 64          /* tokens per forward step; longer appends are cut into chunks (a batch of 8 rows verifying
                             K = 4 each is one chunk: a second one reads every weight again) */
#define STEP_MAX (CHUNK > HA_BLAS_BLOCK ? CHUNK : HA_BLAS_BLOCK) /* tokens a forward step holds at most */
#define KEY_BLOCK 128     /* keys per online-softmax block */
#define ROW_UNIT 16       /* matmul rows per parallel work unit */
#define SMALL_JOB (1 << 18) /* multiply-adds below which a job runs on the calling thread: waking the pool
                               costs more, and far more when other processes hold the cores */
#define ATTN_SMALL_JOB (1 << 14) /* the same for attention (query-key pairs times head_dim): a key costs two
                                   multiply-adds per dimension and an expf, so even one decode token's heads over
                                   a few hundred positions are worth both threads */
#define HA_RING_SLACK 256 /* positions a sliding layer's ring holds beyond its window */
_Static_assert(HA_RING_SLACK >= HA_BLAS_BLOCK - 1 && HA_RING_SLACK >= CHUNK - 1,
               "a chunk's own writes must not overwrite keys its first token still sees");

struct ha_llama {
    ha_llama_config cfg;  /* cfg's rope tables point at rope[] */
    double *rope[3];      /* (r2,) each: global, long (or NULL), local (or NULL) */
    ha_llama_weights w;   /* w.layers points at layers */
    ha_llama_layer *layers; /* (n_layers,) */
    int64_t q_dim, kv_dim; /* nh*hd, nkv*hd */
    int64_t r2;           /* rope_dim / 2: rotary pairs per head */
};

struct ha_llama_context {
    ha_lm lm;
    const ha_llama *m;
    const ha_kernels *kern; /* the kernel variant, read once per append so one forward never mixes two */
    int64_t n_seq, capacity;
    int blas;             /* prompt blocks go through OpenBLAS (ha_llama_context_create's blas_prefill) */
    int blas_now;         /* the forward in progress is such a block */
    int64_t rows;         /* R, the tokens one forward holds: HA_BLAS_BLOCK with blas, else CHUNK */
    int64_t *len;         /* (n_seq,) positions held */
    int64_t *top;         /* (n_seq,) the highest position written since the sequence was last empty (-1) */
    int64_t *adding;      /* (n_seq,) scratch: tokens of the current append per sequence */
    int64_t *blas_left;   /* (n_seq,) scratch: tokens of the current append still due to go through OpenBLAS */
    int64_t *slots;       /* (n_layers,) positions a layer holds per sequence: capacity, or a ring's size */
    size_t *layer_at;     /* (n_layers,) where layer l's (n_seq, n_kv_heads, slots[l], head_dim) block starts in the caches */
    float *kcache;        /* every layer's (n_seq, n_kv_heads, slots[l], head_dim) block, one after the other: a head's
                             keys side by side, the rows one attention task reads */
    float *vcache;        /* the same for values */
    size_t cache_bytes;   /* of kcache, and of vcache (ha_alloc_streamed's) */
    int kmapped, vmapped; /* ha_alloc_streamed's *mapped for each */
    /* Activations of one forward of up to R = rows tokens. */
    float *x;             /* (R, d) residual stream */
    float *xn;            /* (R, d) normed input of a block; packed rows wanting logits at the end */
    float *q;             /* (R, q_dim) */
    float *k, *v;         /* (R, kv_dim) */
    float *att;           /* (R, q_dim) attention output */
    float *tmp;           /* (R, d) projection output before the residual add */
    float *gate, *up;     /* (R, f) */
    float *fused;         /* (R, max(q_dim + 2 kv_dim, 2f)) a fused projection's output; NULL if none is fused */
    float *rope_cos, *rope_sin; /* (2, R, r2): the global (or long) and the local table's values per token */
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
    if (need == 0 && rows > 0 && cols > 0) /* ha_matrix_bytes' 0 for a size beyond size_t */
        return ha_fail(HA_ERR_INVALID, "weight %s (layer %lld): (%lld, %lld) is too large to address", name,
                       (long long)layer, (long long)rows, (long long)cols);
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

static ha_status check_table(const char *name, const double *t, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(t[i]) || t[i] < 0)
            return ha_fail(HA_ERR_INVALID, "%s[%lld]=%g must be finite and >= 0", name, (long long)i, t[i]);
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
    if (!(c->norm_eps > 0.0f) || !isfinite(c->norm_eps))
        return ha_fail(HA_ERR_INVALID, "norm_eps=%g must be a positive finite number", (double)c->norm_eps);
    if ((unsigned)c->norm > HA_NORM_LAYER) return ha_fail(HA_ERR_INVALID, "unknown norm kind %d", (int)c->norm);
    if ((unsigned)c->act > HA_ACT_RELU) return ha_fail(HA_ERR_INVALID, "unknown activation %d", (int)c->act);
    const struct { const char *name; float v; } scalars[] = {
        { "embed_scale", c->embed_scale }, { "attn_softcap", c->attn_softcap },
        { "final_softcap", c->final_softcap }, { "rope_scale", c->rope_scale } };
    for (size_t i = 0; i < sizeof scalars / sizeof *scalars; i++)
        if (!(scalars[i].v >= 0.0f) || !isfinite(scalars[i].v))
            return ha_fail(HA_ERR_INVALID, "%s=%g must be a finite number >= 0 (0: off)", scalars[i].name, (double)scalars[i].v);
    if (!c->rope_inv_freq) {
        if (c->rope_dim || c->rope_inv_freq_long || c->rope_inv_freq_local)
            return ha_fail(HA_ERR_INVALID, "rope_inv_freq is missing but rope_dim=%lld or another rotary table is given",
                           (long long)c->rope_dim);
        return HA_OK;
    }
    const int64_t rd = c->rope_dim ? c->rope_dim : c->head_dim;
    if (rd < 2 || rd > c->head_dim || rd % 2)
        return ha_fail(HA_ERR_INVALID, "the rotary dimension %lld must be even and in 2..head_dim=%lld (rope_dim, or "
                       "head_dim when rope_dim is 0)", (long long)rd, (long long)c->head_dim);
    if (c->rope_inv_freq_long && c->rope_long_from < 0)
        return ha_fail(HA_ERR_INVALID, "rope_long_from=%lld must be >= 0", (long long)c->rope_long_from);
    ha_status st = check_table("rope_inv_freq", c->rope_inv_freq, rd / 2);
    if (st == HA_OK && c->rope_inv_freq_long) st = check_table("rope_inv_freq_long", c->rope_inv_freq_long, rd / 2);
    if (st == HA_OK && c->rope_inv_freq_local) st = check_table("rope_inv_freq_local", c->rope_inv_freq_local, rd / 2);
    return st;
}

/* A fused matrix replaces its parts: not both forms (a missing part is reported by check_matrix). */
static ha_status check_fused(const char *fused, const char *parts, int64_t layer, int has_fused, int n_parts) {
    if (has_fused && n_parts)
        return ha_fail(HA_ERR_INVALID, "layer %lld: give either %s or the fused %s, not both", (long long)layer, parts, fused);
    return HA_OK;
}

static ha_status check_weights(const ha_llama_config *c, const ha_llama_weights *w) {
    int64_t d = c->hidden_size, f = c->intermediate_size, hd = c->head_dim, qd = c->n_heads * hd,
            kvd = c->n_kv_heads * hd;
    ha_status st;
#define TRY(e) if ((st = (e)) != HA_OK) return st
    TRY(check_matrix("embed", -1, &w->embed, c->vocab_size, d));
    if (w->pos_embed.data) {
        TRY(check_matrix("pos_embed", -1, &w->pos_embed, w->pos_embed.rows, d));
        if (w->pos_embed.rows < 1 || w->pos_embed.rows > INT32_MAX || ha_dtype_is_int(w->pos_embed.dtype))
            return ha_fail(HA_ERR_INVALID, "pos_embed needs 1..%d rows of float weights", INT32_MAX);
    }
    TRY(check_vector("final_norm", -1, &w->final_norm, d, 1));
    TRY(check_vector("final_norm_b", -1, &w->final_norm_b, d, 0));
    TRY(check_matrix("lm_head", -1, &w->lm_head, c->vocab_size, d));
    if (!w->layers) return ha_fail(HA_ERR_INVALID, "the layer weights are missing");
    for (int64_t l = 0; l < c->n_layers; l++) {
        const ha_llama_layer *L = &w->layers[l];
        TRY(check_vector("attn_norm", l, &L->attn_norm, d, 1));
        TRY(check_vector("attn_norm_b", l, &L->attn_norm_b, d, 0));
        TRY(check_fused("wqkv", "wq, wk, wv", l, L->wqkv.data != NULL,
                        (L->wq.data != NULL) + (L->wk.data != NULL) + (L->wv.data != NULL)));
        if (L->wqkv.data) {
            TRY(check_matrix("wqkv", l, &L->wqkv, qd + 2 * kvd, d));
        } else {
            TRY(check_matrix("wq", l, &L->wq, qd, d));
            TRY(check_matrix("wk", l, &L->wk, kvd, d));
            TRY(check_matrix("wv", l, &L->wv, kvd, d));
        }
        TRY(check_matrix("wo", l, &L->wo, d, qd));
        TRY(check_vector("bq", l, &L->bq, qd, 0));
        TRY(check_vector("bk", l, &L->bk, kvd, 0));
        TRY(check_vector("bv", l, &L->bv, kvd, 0));
        TRY(check_vector("bqkv", l, &L->bqkv, qd + 2 * kvd, 0));
        if (L->bqkv.data && (L->bq.data || L->bk.data || L->bv.data))
            return ha_fail(HA_ERR_INVALID, "layer %lld: give either bq, bk, bv or the fused bqkv", (long long)l);
        TRY(check_vector("bo", l, &L->bo, d, 0));
        TRY(check_vector("q_norm", l, &L->q_norm, hd, 0));
        TRY(check_vector("k_norm", l, &L->k_norm, hd, 0));
        if (!L->q_norm.data != !L->k_norm.data)
            return ha_fail(HA_ERR_INVALID, "layer %lld: q_norm and k_norm come together", (long long)l);
        TRY(check_vector("post_attn_norm", l, &L->post_attn_norm, d, 0));
        TRY(check_vector("ffn_norm", l, &L->ffn_norm, d, 1));
        TRY(check_vector("ffn_norm_b", l, &L->ffn_norm_b, d, 0));
        if (c->ungated_mlp) {
            if (L->w_gate.data || L->w_gate_up.data || L->b_gate.data)
                return ha_fail(HA_ERR_INVALID, "layer %lld: an ungated MLP has no gate weights", (long long)l);
            TRY(check_matrix("w_up", l, &L->w_up, f, d));
        } else {
            TRY(check_fused("w_gate_up", "w_gate, w_up", l, L->w_gate_up.data != NULL,
                            (L->w_gate.data != NULL) + (L->w_up.data != NULL)));
            if (L->w_gate_up.data) {
                TRY(check_matrix("w_gate_up", l, &L->w_gate_up, 2 * f, d));
            } else {
                TRY(check_matrix("w_gate", l, &L->w_gate, f, d));
                TRY(check_matrix("w_up", l, &L->w_up, f, d));
            }
        }
        TRY(check_matrix("w_down", l, &L->w_down, d, f));
        TRY(check_vector("b_gate", l, &L->b_gate, f, 0));
        TRY(check_vector("b_up", l, &L->b_up, f, 0));
        TRY(check_vector("b_down", l, &L->b_down, d, 0));
        TRY(check_vector("post_ffn_norm", l, &L->post_ffn_norm, d, 0));
        if (L->window < 0) return ha_fail(HA_ERR_INVALID, "layer %lld: window=%lld must be >= 0", (long long)l, (long long)L->window);
        if ((unsigned)L->rope > HA_ROPE_NONE) return ha_fail(HA_ERR_INVALID, "layer %lld: unknown rope %d", (long long)l, (int)L->rope);
        if (L->rope == HA_ROPE_LOCAL && !c->rope_inv_freq_local)
            return ha_fail(HA_ERR_INVALID, "layer %lld uses the local rotary table but rope_inv_freq_local is missing", (long long)l);
        if (!(L->attn_scale >= 0.0f) || !isfinite(L->attn_scale))
            return ha_fail(HA_ERR_INVALID, "layer %lld: attn_scale=%g must be finite and >= 0 (0: 1/sqrt(head_dim))",
                           (long long)l, (double)L->attn_scale);
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
    const int64_t r2 = cfg->rope_inv_freq ? (cfg->rope_dim ? cfg->rope_dim : cfg->head_dim) / 2 : 0;
    const double *tables[3] = { cfg->rope_inv_freq, cfg->rope_inv_freq_long, cfg->rope_inv_freq_local };
    ha_llama *m = calloc(1, sizeof *m);
    int ok = m != NULL;
    if (ok) m->layers = malloc((size_t)cfg->n_layers * sizeof(ha_llama_layer));
    ok = ok && m->layers;
    for (int i = 0; ok && i < 3; i++)
        if (tables[i]) {
            m->rope[i] = malloc((size_t)r2 * sizeof(double));
            if ((ok = m->rope[i] != NULL)) memcpy(m->rope[i], tables[i], (size_t)r2 * sizeof(double));
        }
    if (!ok) {
        ha_llama_free(m);
        return ha_fail(HA_ERR_NOMEM, "out of memory creating the model");
    }
    memcpy(m->layers, w->layers, (size_t)cfg->n_layers * sizeof(ha_llama_layer));
    m->cfg = *cfg;
    m->cfg.rope_dim = 2 * r2;
    m->cfg.rope_inv_freq = m->rope[0];
    m->cfg.rope_inv_freq_long = m->rope[1];
    m->cfg.rope_inv_freq_local = m->rope[2];
    if (m->cfg.embed_scale == 0.0f) m->cfg.embed_scale = 1.0f;
    if (m->cfg.rope_scale == 0.0f) m->cfg.rope_scale = 1.0f;
    for (int64_t l = 0; l < cfg->n_layers; l++) {
        if (m->layers[l].attn_scale == 0.0f) m->layers[l].attn_scale = (float)(1.0 / sqrt((double)cfg->head_dim));
        if (!r2) m->layers[l].rope = HA_ROPE_NONE;
    }
    m->w = *w;
    m->w.layers = m->layers;
    m->q_dim = cfg->n_heads * cfg->head_dim;
    m->kv_dim = cfg->n_kv_heads * cfg->head_dim;
    m->r2 = r2;
    *out = m;
    return HA_OK;
}

void ha_llama_free(ha_llama *m) {
    if (!m) return;
    for (int i = 0; i < 3; i++) free(m->rope[i]);
    free(m->layers);
    free(m);
}

/* The matrices of one layer (absent ones have data == NULL). */
#define LAYER_MATRICES 9
static void layer_matrices(const ha_llama_layer *L, const ha_matrix *out[LAYER_MATRICES]) {
    const ha_matrix *mats[LAYER_MATRICES] = { &L->wq, &L->wk, &L->wv, &L->wqkv, &L->wo, &L->w_gate, &L->w_up,
                                              &L->w_gate_up, &L->w_down };
    memcpy(out, mats, sizeof mats);
}

int64_t ha_llama_weight_bytes(const ha_llama *m) {
    int64_t total = (int64_t)m->w.lm_head.nbytes + m->cfg.hidden_size * 4 * (m->w.final_norm_b.data ? 2 : 1);
    for (int64_t l = 0; l < m->cfg.n_layers; l++) {
        const ha_llama_layer *L = &m->layers[l];
        const ha_matrix *mats[LAYER_MATRICES];
        layer_matrices(L, mats);
        for (int i = 0; i < LAYER_MATRICES; i++)
            if (mats[i]->data) total += (int64_t)mats[i]->nbytes;
        const ha_vector *vecs[] = { &L->attn_norm, &L->attn_norm_b, &L->bq, &L->bk, &L->bv, &L->bqkv, &L->bo,
                                    &L->q_norm, &L->k_norm, &L->post_attn_norm, &L->ffn_norm, &L->ffn_norm_b,
                                    &L->b_gate, &L->b_up, &L->b_down, &L->post_ffn_norm };
        for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++)
            if (vecs[i]->data) total += vecs[i]->n * 4;
    }
    return total;
}

/* ---- parallel pieces -------------------------------------------------------------------------------- */

/* The feed-forward block's first half after its matmuls (mlp_range): biases, then the activation, into gate. */
typedef struct mlp_step {
    int gated;                /* act(gate) * up, else act(up) (GPT-2's ungated block, whose one matrix is W[0]) */
    ha_act act;
    int64_t f;                /* intermediate size */
    const float *b_gate, *b_up; /* (f,) or NULL; ungated: b_gate is the one matrix's bias */
    float *gate, *up;         /* (T, f): the output, and the up projection's rows (separate matrices) */
    float *fused;             /* (T, 2f) a fused gate-up matrix's output, or NULL */
} mlp_step;

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
    const mlp_step *mlp; /* mlp_range's job: the rest of a feed-forward block's first half (NULL for matmul_range) */
} matmul_job;

/* Rows [lo, hi) of W (rows, n) times X into Y (T, ldy), through the kernel W's dtype takes. */
static void matmul_rows(const matmul_job *j, const ha_matrix *W, int64_t lo, int64_t hi, float *Y, int64_t ldy) {
    if (lo >= hi) return;
    if (ha_dtype_is_int(W->dtype)) j->k->matmul_int[W->dtype](W->data, W->cols, lo, hi, j->Xq, j->xq_scale, j->T, Y, ldy);
    else j->k->matmul[W->dtype](W->data, W->cols, lo, hi, j->X, j->T, Y, ldy);
}

static void matmul_range(void *ctx, int64_t ub, int64_t ue) {
    const matmul_job *j = ctx;
    int64_t b = ub * ROW_UNIT, e = ue * ROW_UNIT, base = 0; /* rows in the concatenation of the W[i] */
    for (int i = 0; i < j->count; i++) {
        const ha_matrix *W = j->W[i];
        int64_t lo = b > base ? b - base : 0, hi = e - base < W->rows ? e - base : W->rows;
        matmul_rows(j, W, lo, hi, j->Y[i], W->rows);
        base += W->rows;
    }
}

/* x[i] = act(x[i]) (times up[i] when up is given) for i < n: ha.h's ha_act in float32, one loop per kind
 * (SiLU the variant's, bitwise the same everywhere). */
static void activate(const ha_kernels *k, ha_act act, float *x, const float *up, int64_t n) {
    switch (act) {
    case HA_ACT_GELU_TANH:
        for (int64_t i = 0; i < n; i++) {
            const float v = x[i];
            x[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))) * (up ? up[i] : 1.0f);
        }
        break;
    case HA_ACT_GELU:
        for (int64_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.7071067811865476f)) * (up ? up[i] : 1.0f);
        break;
    case HA_ACT_RELU:
        for (int64_t i = 0; i < n; i++) x[i] = (x[i] > 0.0f ? x[i] : 0.0f) * (up ? up[i] : 1.0f);
        break;
    default:
        k->silu(x, up, n);
    }
}

/* The elementwise rest of the feed-forward block's first half for rows [lo, hi) of the f, token by token: a
 * fused output's gate half copied into gate, the biases added (in place, in gate and in the up rows), then
 * gate = act(gate) * up (act(gate) when ungated): per element, what split_rows, add_bias and activate give. */
static void mlp_finish(const ha_kernels *k, const mlp_step *s, int64_t T, int64_t lo, int64_t hi) {
    const int64_t f = s->f, n = hi - lo;
    for (int64_t t = 0; t < T; t++) {
        float *g = s->gate + t * f, *u = s->fused ? s->fused + t * 2 * f + f : s->up + t * f;
        if (s->fused) memcpy(g + lo, s->fused + t * 2 * f + lo, (size_t)n * sizeof(float));
        if (s->b_gate)
            for (int64_t r = lo; r < hi; r++) g[r] += s->b_gate[r];
        if (s->gated && s->b_up)
            for (int64_t r = lo; r < hi; r++) u[r] += s->b_up[r];
        activate(k, s->act, g + lo, s->gated ? u + lo : NULL, n);
    }
}

/* Units of ROW_UNIT of the f rows r of the block's first projection, each the gate's (or the ungated block's
 * one matrix's) and the up projection's rows r for every token, then mlp_finish on them: the activation runs
 * on the threads, on outputs still in cache. */
static void mlp_range(void *ctx, int64_t ub, int64_t ue) {
    const matmul_job *j = ctx;
    const mlp_step *s = j->mlp;
    const int64_t f = s->f, lo = ub * ROW_UNIT, hi = ue * ROW_UNIT < f ? ue * ROW_UNIT : f;
    if (s->fused) { /* (2f, n): gate rows r, up rows f + r, into fused (T, 2f) */
        matmul_rows(j, j->W[0], lo, hi, s->fused, 2 * f);
        matmul_rows(j, j->W[0], f + lo, f + hi, s->fused, 2 * f);
    } else {
        matmul_rows(j, j->W[0], lo, hi, s->gate, f);
        if (s->gated) matmul_rows(j, j->W[1], lo, hi, s->up, f);
    }
    mlp_finish(j->k, s, j->T, lo, hi);
}

/* Fills j for Y[i] = X @ W[i]^T (X (T, W[0].cols)), quantizing X once for integer weights; the rows of all
 * the W[i]. */
static int64_t matmul_prepare(const ha_llama_context *c, matmul_job *j, int count, const ha_matrix *const *W,
                              float *const *Y, const float *X, int64_t T) {
    *j = (matmul_job){ .k = c->kern, .count = count, .X = X, .T = T };
    int64_t rows = 0, quantize = 0;
    for (int i = 0; i < count; i++) {
        j->W[i] = W[i];
        j->Y[i] = Y ? Y[i] : NULL;
        rows += W[i]->rows;
        quantize |= ha_dtype_is_int(W[i]->dtype);
    }
    if (quantize) { /* each token's row on its own, once, shared by the threads (T * n: small beside the matmul) */
        const int64_t n = W[0]->cols, width = ha_act_width(n);
        for (int64_t t = 0; t < T; t++) c->kern->quant_act(X + t * n, n, c->xq + t * width, c->xq_scale + t);
        j->Xq = c->xq;
        j->xq_scale = c->xq_scale;
    }
    return rows;
}

static void matmul(const ha_llama_context *c, int count, const ha_matrix *const *W, float *const *Y, const float *X,
                   int64_t T) {
    /* In a prompt block, OpenBLAS, except for the few rows wanting logits: sgemm would widen the whole
     * output layer for them, where the kernels read it once. */
    if (c->blas_now && T >= HA_BLAS_BLOCK / 4) {
        for (int i = 0; i < count; i++) ha_blas_matmul(c->kern, W[i], X, T, Y[i], W[i]->rows, c->wide);
        return;
    }
    matmul_job j;
    const int64_t rows = matmul_prepare(c, &j, count, W, Y, X, T);
    /* Units of ROW_UNIT rows: units may straddle matrices, which matmul_range splits. */
    int64_t units = (rows + ROW_UNIT - 1) / ROW_UNIT;
    if (rows * W[0]->cols * T < SMALL_JOB) matmul_range(&j, 0, units);
    else ha_parallel_for(matmul_range, &j, units);
}

/* Query heads of a kv head per attention task, up to this many (the rest in further pieces). */
#define ATTN_QUERIES 8
/* Floats of queries (and of value sums) a task holds: ATTN_QUERIES heads of HA_MAX_HEAD_DIM, or more tokens'
 * heads of a smaller head (a run, below). */
#define ATTN_RUN_FLOATS (ATTN_QUERIES * HA_MAX_HEAD_DIM)
/* Queries (a run's tokens times a piece's heads) a task scores together at most. Scoring a verification's 5
 * tokens of the shipped target together (20 queries, not 5 tasks of 4) took 7% off its append (with the
 * softmax's maximum and sums below; 1 token: the same), 5-9% off a batch of 8 rows verifying 1-4 candidates each
 * (two builds alternating, 2026-11-27). */
#define ATTN_RUN_QUERIES 32

typedef struct attention_job {
    const ha_llama_context *c;
    int64_t layer;
    int64_t pieces;     /* tasks per (run, kv head): the group's query heads in pieces of up to ATTN_QUERIES */
    const int64_t *run; /* (runs + 1,) the chunk's runs: run r is tokens run[r] .. run[r + 1] - 1 */
} attention_job;

/* The first key position a query at position p sees under a window of w (0: none). */
static int64_t first_key(int64_t p, int64_t w) { return w > 0 && p + 1 > w ? p + 1 - w : 0; }

/* Splits the chunk's T tokens into runs for a layer whose window is w (0: none): consecutive tokens of one
 * sequence whose visible keys start at the same position (always, without a window), at most `most` each, into
 * run (runs + 1,); returns the number of runs. */
static int64_t attention_runs(const ha_llama_context *c, int64_t T, int64_t w, int64_t most, int64_t *run) {
    int64_t n = 0, lo_run = 0;
    for (int64_t i = 0; i < T; i++) {
        const int64_t lo = first_key(c->pos[i], w);
        if (n == 0 || c->seq[i] != c->seq[run[n - 1]] || lo != lo_run || i - run[n - 1] >= most) {
            run[n++] = i;
            lo_run = lo;
        }
    }
    run[n] = T;
    return n;
}

/* The largest of s (n,) that is not NaN (-inf for none): the scores' maximum for the online softmax. Eight
 * running maxima side by side, then combined, so that no chain of n dependent steps limits it; the same value
 * as one running maximum (maximum is exact; which of two zeros, when zero is the largest, may differ, and
 * exp(s - m) is the same for either). */
static float block_max(const float *s, int64_t n) {
    float m[8] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY };
    int64_t t = 0;
    for (; t + 8 <= n; t += 8)
        for (int l = 0; l < 8; l++) m[l] = s[t + l] > m[l] ? s[t + l] : m[l];
    for (; t < n; t++) m[0] = s[t] > m[0] ? s[t] : m[0];
    for (int l = 1; l < 8; l++) m[0] = m[l] > m[0] ? m[l] : m[0];
    return m[0];
}

/* sum[h] += w[h][t] for t = 0 .. n - 1 in order, for rows h < nh of w: each row's own chain of additions (the
 * softmax's denominator, bitwise the same in any run), four rows' chains side by side. */
static void add_in_order(const float (*w)[KEY_BLOCK], int64_t nh, int64_t n, float *sum) {
    int64_t h = 0;
    for (; h + 4 <= nh; h += 4) {
        float s0 = sum[h], s1 = sum[h + 1], s2 = sum[h + 2], s3 = sum[h + 3];
        for (int64_t t = 0; t < n; t++) {
            s0 += w[h][t];
            s1 += w[h + 1][t];
            s2 += w[h + 2][t];
            s3 += w[h + 3][t];
        }
        sum[h] = s0, sum[h + 1] = s1, sum[h + 2] = s2, sum[h + 3] = s3;
    }
    for (; h < nh; h++) {
        float s0 = sum[h];
        for (int64_t t = 0; t < n; t++) s0 += w[h][t];
        sum[h] = s0;
    }
}

/* Tasks are (run r, kv head g, piece u of its query heads) triples, (r * nkv + g) * pieces + u; a piece holds
 * up to ATTN_QUERIES of the group's heads. A run's tokens see the same keys from the same first one, each up to
 * its own position: attn_scores scores every query of the task (the run's tokens times the piece's heads)
 * against each block of keys together, up to the run's last position (each key read once for them all; a
 * token's scores past its own position are not used), and attn_values sums each token's heads over its own
 * keys (each value row read once for the heads). Keys are read from the layer's slots (a ring: position t at
 * slot t mod slots); blocks of keys start at the first visible position, so they depend on the position alone.
 * Each head's scores, online softmax and sums are its own, in key order, whatever the queries beside it: a
 * token's output is the same in any run. */
static void attention_range(void *ctx, int64_t b, int64_t e) {
    const attention_job *j = ctx;
    const ha_llama_context *c = j->c;
    const ha_llama *m = c->m;
    const ha_llama_layer *L = &m->layers[j->layer];
    const ha_kernels *k = c->kern;
    const int64_t nkv = m->cfg.n_kv_heads, hd = m->cfg.head_dim, group = m->cfg.n_heads / nkv, pieces = j->pieces;
    const int64_t S = c->slots[j->layer], w = L->window;
    const float scale = L->attn_scale, cap = m->cfg.attn_softcap;
    float qs[ATTN_RUN_FLOATS], acc[ATTN_RUN_FLOATS], sc[ATTN_RUN_QUERIES][KEY_BLOCK];
    float mx[ATTN_RUN_QUERIES], sum[ATTN_RUN_QUERIES];
    for (int64_t task = b; task < e; task++) {
        const int64_t r = task / (nkv * pieces), g = task / pieces % nkv, h0 = g * group + task % pieces * ATTN_QUERIES;
        const int64_t nq = g * group + group - h0 < ATTN_QUERIES ? g * group + group - h0 : ATTN_QUERIES;
        const int64_t i0 = j->run[r], n = j->run[r + 1] - i0, nall = n * nq; /* queries: token i0 + a, head h */
        int64_t p_last = 0;
        for (int64_t a = 0; a < n; a++) {
            const int64_t p = c->pos[i0 + a];
            p_last = p > p_last ? p : p_last;
            memcpy(qs + a * nq * hd, c->q + (i0 + a) * m->q_dim + h0 * hd, (size_t)(nq * hd) * sizeof(float));
        }
        size_t base = c->layer_at[j->layer] + ((size_t)c->seq[i0] * (size_t)nkv + (size_t)g) * (size_t)S * (size_t)hd;
        const float *K = c->kcache + base, *V = c->vcache + base; /* (S, hd) */
        const int64_t lo = first_key(c->pos[i0], w); /* the run's (every token's) first visible key */
        for (int64_t h = 0; h < nall; h++) {
            mx[h] = -INFINITY;
            sum[h] = 0.0f;
        }
        memset(acc, 0, (size_t)(nall * hd) * sizeof(float));
        for (int64_t kb = lo; kb <= p_last; kb += KEY_BLOCK) {
            const int64_t slot0 = kb % S; /* the block's first slot; later ones follow it, wrapping at S */
            const int64_t nk_all = (kb + KEY_BLOCK <= p_last + 1 ? kb + KEY_BLOCK : p_last + 1) - kb;
            k->attn_scores(qs, nall, hd, K, hd, slot0, S, nk_all, hd, scale, sc[0], KEY_BLOCK);
            for (int64_t a = 0; a < n; a++) {
                const int64_t p = c->pos[i0 + a];
                if (kb > p) continue;
                const int64_t nk = (kb + KEY_BLOCK <= p + 1 ? kb + KEY_BLOCK : p + 1) - kb;
                for (int64_t h = a * nq; h < (a + 1) * nq; h++) {
                    float *s = sc[h];
                    if (cap > 0.0f)
                        for (int64_t t = 0; t < nk; t++) s[t] = cap * tanhf(s[t] / cap);
                    const float bm = block_max(s, nk);
                    if (bm > mx[h]) {
                        if (mx[h] > -INFINITY) {
                            float f = ha_expf(mx[h] - bm);
                            sum[h] *= f;
                            k->scale(f, acc + h * hd, hd);
                        }
                        mx[h] = bm;
                    }
                    k->exp_shift(s, nk, mx[h]); /* the block's weights, in place of its scores */
                }
                add_in_order(sc + a * nq, nq, nk, sum + a * nq);
                k->attn_values(sc[a * nq], KEY_BLOCK, nq, V, hd, slot0, S, nk, hd, acc + a * nq * hd, hd);
            }
        }
        for (int64_t a = 0; a < n; a++)
            for (int64_t h = 0; h < nq; h++) {
                float *o = c->att + (i0 + a) * m->q_dim + (h0 + h) * hd;
                const float *y = acc + (a * nq + h) * hd;
                for (int64_t d = 0; d < hd; d++) o[d] = y[d] / sum[a * nq + h];
            }
    }
}

/* ---- the forward -------------------------------------------------------------------------------------- */

/* y (d,) = the config's norm of x (d,) with weight w (d,) and bias b (d,; LayerNorm only, may be NULL), in
 * float32 as Transformers' modules compute it (sums in double); y may be x. */
static void norm(const ha_llama_config *cfg, const float *x, const float *w, const float *b, float *y, int64_t d) {
    const double eps = (double)cfg->norm_eps;
    if (cfg->norm == HA_NORM_LAYER) {
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < d; i++) mean += (double)x[i];
        mean /= (double)d;
        for (int64_t i = 0; i < d; i++) var += ((double)x[i] - mean) * ((double)x[i] - mean);
        const float r = (float)(1.0 / sqrt(var / (double)d + eps)), mu = (float)mean;
        for (int64_t i = 0; i < d; i++) y[i] = (x[i] - mu) * r * w[i] + (b ? b[i] : 0.0f);
        return;
    }
    double ss = 0.0;
    for (int64_t i = 0; i < d; i++) ss += (double)x[i] * (double)x[i];
    const float r = (float)(1.0 / sqrt(ss / (double)d + eps));
    if (cfg->norm == HA_NORM_RMS_ONE_PLUS)
        for (int64_t i = 0; i < d; i++) y[i] = (x[i] * r) * (1.0f + w[i]);
    else
        for (int64_t i = 0; i < d; i++) y[i] = w[i] * (x[i] * r);
}

/* Each of the T rows of x (T, d) normed in place by the optional vector v (and bias vb); nothing if v is absent. */
static void norm_rows(const ha_llama_config *cfg, float *x, const ha_vector *v, const ha_vector *vb, int64_t T, int64_t d) {
    if (!v->data) return;
    for (int64_t i = 0; i < T; i++) norm(cfg, x + i * d, v->data, vb ? vb->data : NULL, x + i * d, d);
}

static void add_bias(float *y, const ha_vector *b, int64_t T, int64_t n) {
    if (!b->data) return;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < n; i++) y[t * n + i] += b->data[i];
}

/* Rotates heads (T, n_heads*hd) in place with table `table` (0: global or long, 1: local): in each head, pairs
 * (j, j + r2) for j < r2, Transformers' rotate_half convention over the first 2 r2 dims; the rest pass. */
static void rope(const ha_llama_context *c, float *v, int64_t T, int64_t n_heads, int table) {
    const int64_t hd = c->m->cfg.head_dim, h2 = c->m->r2, R = c->rows;
    for (int64_t i = 0; i < T; i++)
        for (int64_t h = 0; h < n_heads; h++) {
            float *x = v + (i * n_heads + h) * hd;
            const float *cs = c->rope_cos + (table * R + i) * h2, *sn = c->rope_sin + (table * R + i) * h2;
            for (int64_t j = 0; j < h2; j++) {
                float a = x[j], b = x[j + h2];
                x[j] = a * cs[j] - b * sn[j];
                x[j + h2] = b * cs[j] + a * sn[j];
            }
        }
}

/* cos and sin of position * table for the chunk's tokens, times rope_scale: row i of table slot `into`. */
static void rope_tables(ha_llama_context *c, int64_t T, int into, const double *table, const double *long_table) {
    const ha_llama_config *cfg = &c->m->cfg;
    const int64_t h2 = c->m->r2, R = c->rows;
    for (int64_t i = 0; i < T; i++) {
        const double *t = long_table && c->pos[i] >= cfg->rope_long_from ? long_table : table;
        for (int64_t j = 0; j < h2; j++) {
            double a = (double)c->pos[i] * t[j];
            c->rope_cos[(into * R + i) * h2 + j] = (float)cos(a) * cfg->rope_scale;
            c->rope_sin[(into * R + i) * h2 + j] = (float)sin(a) * cfg->rope_scale;
        }
    }
}

/* Y (T, rows) of a fused projection into parts: part p takes columns [off_p, off_p + n_p) into dst_p (T, n_p). */
static void split_rows(const float *Y, int64_t T, int64_t rows, int parts, float *const *dst, const int64_t *n) {
    for (int64_t i = 0; i < T; i++)
        for (int p = 0, off = 0; p < parts; off += (int)n[p], p++)
            memcpy(dst[p] + i * n[p], Y + i * rows + off, (size_t)n[p] * sizeof(float));
}

/* The feed-forward block's first half, from c->xn (T, d) into c->gate (T, f): act(xn W_gate^T + b_gate) *
 * (xn W_up^T + b_up), or act(xn W_up^T + b_up) for an ungated block; a fused gate-up matrix's output goes
 * through c->fused. In a prompt block through OpenBLAS, the matmuls and then the same elementwise step here. */
static void mlp_in(const ha_llama_context *c, const ha_llama_layer *L, int64_t T) {
    const ha_llama_config *cfg = &c->m->cfg;
    const int gated = !cfg->ungated_mlp, fused = gated && L->w_gate_up.data;
    const mlp_step s = { .gated = gated, .act = cfg->act, .f = cfg->intermediate_size,
                         .b_gate = gated ? L->b_gate.data : L->b_up.data, .b_up = gated ? L->b_up.data : NULL,
                         .gate = c->gate, .up = c->up, .fused = fused ? c->fused : NULL };
    const ha_matrix *W[2] = { !gated ? &L->w_up : fused ? &L->w_gate_up : &L->w_gate, &L->w_up };
    const int count = gated && !fused ? 2 : 1;
    if (c->blas_now && T >= HA_BLAS_BLOCK / 4) {
        matmul(c, count, W, (float *[]){ fused ? c->fused : c->gate, c->up }, c->xn, T);
        mlp_finish(c->kern, &s, T, 0, s.f);
        return;
    }
    matmul_job j;
    const int64_t rows = matmul_prepare(c, &j, count, W, NULL, c->xn, T), units = (s.f + ROW_UNIT - 1) / ROW_UNIT;
    j.mlp = &s;
    if (rows * W[0]->cols * T < SMALL_JOB) mlp_range(&j, 0, units);
    else ha_parallel_for(mlp_range, &j, units);
}

/* Forward of T tokens (T <= CHUNK, or T == HA_BLAS_BLOCK with c->blas_now) whose seq/pos are set in c;
 * their K/V go into the cache. Rows with want != NULL && want[i] get logits, packed, into logits. Returns
 * nonzero, with the forward unfinished, if the interrupt asked to stop (polled before each layer). */
static int forward_chunk(ha_llama_context *c, const int32_t *tokens, int64_t T, const uint8_t *want, float *logits) {
    const ha_llama *m = c->m;
    const ha_llama_config *cfg = &m->cfg;
    const ha_kernels *k = c->kern;
    const int64_t d = cfg->hidden_size, hd = cfg->head_dim, kvd = m->kv_dim, qd = m->q_dim;

    float *row = c->tmp; /* scratch for a learned position's row */
    for (int64_t i = 0; i < T; i++) {
        const ha_matrix *E = &m->w.embed, *P = &m->w.pos_embed;
        float *x = c->x + i * d;
        if (ha_dtype_is_panels(E->dtype)) /* a tied embedding packed for the output layer: one column at a time */
            for (int64_t j = 0; j < d; j++) x[j] = ha_panel_at(E->data, E->dtype, d, tokens[i], j);
        else k->to_f32[E->dtype]((const char *)E->data + (size_t)tokens[i] * ha_row_bytes(E->dtype, d), x, d);
        if (cfg->embed_scale != 1.0f)
            for (int64_t j = 0; j < d; j++) x[j] *= cfg->embed_scale;
        if (P->data) {
            if (ha_dtype_is_panels(P->dtype))
                for (int64_t j = 0; j < d; j++) row[j] = ha_panel_at(P->data, P->dtype, d, c->pos[i], j);
            else k->to_f32[P->dtype]((const char *)P->data + (size_t)c->pos[i] * ha_row_bytes(P->dtype, d), row, d);
            for (int64_t j = 0; j < d; j++) x[j] += row[j];
        }
    }
    if (m->r2) rope_tables(c, T, 0, cfg->rope_inv_freq, cfg->rope_inv_freq_long);
    if (m->r2 && cfg->rope_inv_freq_local) rope_tables(c, T, 1, cfg->rope_inv_freq_local, NULL);
    /* attention's pieces of a group's heads, and tokens per run: as many as the queries a task holds fit */
    const int64_t group = cfg->n_heads / cfg->n_kv_heads, pieces = (group + ATTN_QUERIES - 1) / ATTN_QUERIES;
    const int64_t piece_q = group < ATTN_QUERIES ? group : ATTN_QUERIES;
    const int64_t fit = ATTN_RUN_FLOATS / hd < ATTN_RUN_QUERIES ? ATTN_RUN_FLOATS / hd : ATTN_RUN_QUERIES;
    const int64_t run_most = fit / piece_q > 1 ? fit / piece_q : 1;
    for (int64_t l = 0; l < cfg->n_layers; l++) {
        if (ha_interrupted()) return 1;
        const ha_llama_layer *L = &m->layers[l];
        for (int64_t i = 0; i < T; i++) norm(cfg, c->x + i * d, L->attn_norm.data, L->attn_norm_b.data, c->xn + i * d, d);
        if (L->wqkv.data) {
            matmul(c, 1, (const ha_matrix *[]){ &L->wqkv }, (float *[]){ c->fused }, c->xn, T);
            add_bias(c->fused, &L->bqkv, T, qd + 2 * kvd);
            split_rows(c->fused, T, qd + 2 * kvd, 3, (float *[]){ c->q, c->k, c->v }, (const int64_t[]){ qd, kvd, kvd });
        } else {
            matmul(c, 3, (const ha_matrix *[]){ &L->wq, &L->wk, &L->wv }, (float *[]){ c->q, c->k, c->v }, c->xn, T);
        }
        add_bias(c->q, &L->bq, T, qd);
        add_bias(c->k, &L->bk, T, kvd);
        add_bias(c->v, &L->bv, T, kvd);
        if (L->q_norm.data) { /* per head, before rotary */
            norm_rows(cfg, c->q, &L->q_norm, NULL, T * cfg->n_heads, hd);
            norm_rows(cfg, c->k, &L->k_norm, NULL, T * cfg->n_kv_heads, hd);
        }
        if (L->rope != HA_ROPE_NONE) {
            rope(c, c->q, T, cfg->n_heads, L->rope == HA_ROPE_LOCAL);
            rope(c, c->k, T, cfg->n_kv_heads, L->rope == HA_ROPE_LOCAL);
        }
        const int64_t S = c->slots[l];
        for (int64_t i = 0; i < T; i++) {
            for (int64_t g = 0; g < cfg->n_kv_heads; g++) {
                size_t off = c->layer_at[l] + (((size_t)c->seq[i] * (size_t)cfg->n_kv_heads + (size_t)g) * (size_t)S +
                                               (size_t)(c->pos[i] % S)) * (size_t)hd;
                memcpy(c->kcache + off, c->k + i * kvd + g * hd, (size_t)hd * sizeof(float));
                memcpy(c->vcache + off, c->v + i * kvd + g * hd, (size_t)hd * sizeof(float));
            }
        }
        int64_t run[STEP_MAX + 1];
        const int64_t runs = attention_runs(c, T, L->window, run_most, run);
        attention_job aj = { c, l, pieces, run };
        const int64_t tasks = runs * cfg->n_kv_heads * aj.pieces;
        if (T * cfg->n_heads * (c->pos[T - 1] + 1) * hd < ATTN_SMALL_JOB) attention_range(&aj, 0, tasks);
        else ha_parallel_for(attention_range, &aj, tasks);
        matmul(c, 1, (const ha_matrix *[]){ &L->wo }, (float *[]){ c->tmp }, c->att, T);
        add_bias(c->tmp, &L->bo, T, d);
        norm_rows(cfg, c->tmp, &L->post_attn_norm, NULL, T, d);
        for (int64_t i = 0; i < T * d; i++) c->x[i] += c->tmp[i];

        for (int64_t i = 0; i < T; i++) norm(cfg, c->x + i * d, L->ffn_norm.data, L->ffn_norm_b.data, c->xn + i * d, d);
        mlp_in(c, L, T);
        matmul(c, 1, (const ha_matrix *[]){ &L->w_down }, (float *[]){ c->tmp }, c->gate, T);
        add_bias(c->tmp, &L->b_down, T, d);
        norm_rows(cfg, c->tmp, &L->post_ffn_norm, NULL, T, d);
        for (int64_t i = 0; i < T * d; i++) c->x[i] += c->tmp[i];
    }
    int64_t nw = 0;
    for (int64_t i = 0; i < T; i++)
        if (!want || want[i])
            norm(cfg, c->x + i * d, m->w.final_norm.data, m->w.final_norm_b.data, c->xn + (nw++) * d, d);
    if (nw) matmul(c, 1, (const ha_matrix *[]){ &m->w.lm_head }, (float *[]){ logits }, c->xn, nw);
    const float cap = cfg->final_softcap;
    for (int64_t i = 0; cap > 0.0f && i < nw * cfg->vocab_size; i++) logits[i] = cap * tanhf(logits[i] / cap);
    return 0;
}

/* ---- the model interface -------------------------------------------------------------------------------- */

static int ring_keeps(const ha_llama_context *c, int32_t s, int64_t len);

/* An append stopped by the interrupt after its first n tokens were given positions: those positions are
 * taken back, so the cache holds what it held before the append; except a sequence whose rings the append
 * overwrote past what its window needs (more than HA_RING_SLACK new positions), which is emptied. */
static ha_status interrupted_append(ha_llama_context *c, const int32_t *seq, int64_t n) {
    for (int64_t i = 0; i < n; i++) c->len[seq[i]]--;
    int emptied = 0;
    for (int64_t i = 0; i < n; i++) {
        const int32_t s = seq[i];
        if (c->len[s] > 0 && !ring_keeps(c, s, c->len[s])) {
            c->len[s] = 0;
            emptied = 1;
        }
        if (c->len[s] == 0) c->top[s] = -1;
    }
    if (emptied)
        return ha_fail(HA_ERR_INTERRUPTED, "interrupted; a sequence whose sliding-window layers this append had "
                       "overwritten was emptied, the others hold what they held before this append");
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
            const int32_t s = seq[b + i];
            c->seq[i] = s;
            c->pos[i] = c->len[s]++;
            if (c->pos[i] > c->top[s]) c->top[s] = c->pos[i];
        }
        if (forward_chunk(c, tokens + b, T, want ? want + b : NULL, logits)) return interrupted_append(c, seq, b + T);
        for (int64_t i = 0; i < T; i++) w0 += !want || want[b + i];
        if (logits) logits += w0 * V;
    }
    return HA_OK;
}

/* Whether keeping len positions of sequence s leaves every ring layer holding the keys the next position sees:
 * positions q in [len - w + 1, len) are lost iff a position q + slots was written after them, and every
 * position written since the sequence was last empty is at most top[s]. */
static int ring_keeps(const ha_llama_context *c, int32_t s, int64_t len) {
    for (int64_t l = 0; l < c->m->cfg.n_layers; l++) {
        const int64_t w = c->m->layers[l].window, first = len - w + 1 > 0 ? len - w + 1 : 0;
        if (c->slots[l] < c->capacity && first + c->slots[l] <= c->top[s]) return 0;
    }
    return 1;
}

static ha_status ctx_crop(void *self, int32_t seq, int64_t len) {
    ha_llama_context *c = self;
    if (seq < 0 || seq >= c->n_seq)
        return ha_fail(HA_ERR_INVALID, "crop: sequence %d is out of range; the cache holds %lld sequences", seq, (long long)c->n_seq);
    if (len < 0 || len > c->len[seq])
        return ha_fail(HA_ERR_INVALID, "crop: cannot keep %lld positions of sequence %d, which holds %lld",
                       (long long)len, seq, (long long)c->len[seq]);
    if (!ha_llama_context_can_crop(c, seq, len))
        return ha_fail(HA_ERR_UNSUPPORTED, "crop: sequence %d has held up to %lld positions; its sliding-window layers keep "
                       "only %d positions beyond their window, so it cannot go back to %lld (crop at most %d positions "
                       "after an append, or crop to 0 and append again)", seq, (long long)c->top[seq] + 1,
                       HA_RING_SLACK, (long long)len, HA_RING_SLACK);
    c->len[seq] = len;
    if (len == 0) c->top[seq] = -1;
    return HA_OK;
}

static int64_t ctx_length(const void *self, int32_t seq) {
    const ha_llama_context *c = self;
    return seq >= 0 && seq < c->n_seq ? c->len[seq] : 0;
}

/* Positions a layer with window w keeps per sequence in a cache of `capacity`: a ring of w + HA_RING_SLACK when
 * that is fewer (written so that a window near INT64_MAX does not overflow). */
static int64_t layer_slots(int64_t w, int64_t capacity) {
    return w > 0 && w < capacity - HA_RING_SLACK ? w + HA_RING_SLACK : capacity;
}

ha_status ha_llama_context_create(const ha_llama *m, int64_t n_seq, int64_t capacity, int blas_prefill,
                                  ha_llama_context **out) {
    if (!m || !out) return ha_fail(HA_ERR_INVALID, "ha_llama_context_create: NULL argument");
    *out = NULL;
    if (n_seq < 1 || n_seq > (1 << 20)) return ha_fail(HA_ERR_INVALID, "batch size %lld is out of range 1..%d", (long long)n_seq, 1 << 20);
    if (capacity < 1 || capacity > INT32_MAX)
        return ha_fail(HA_ERR_INVALID, "cache capacity %lld is out of range 1..%d", (long long)capacity, INT32_MAX);
    const ha_llama_config *cfg = &m->cfg;
    if (m->w.pos_embed.data && capacity > m->w.pos_embed.rows)
        return ha_fail(HA_ERR_CAPACITY, "a cache of %lld positions is longer than the model's %lld learned positions "
                       "(n_positions); use max_cache_len <= %lld", (long long)capacity, (long long)m->w.pos_embed.rows,
                       (long long)m->w.pos_embed.rows);
    /* Positions each layer holds: a sliding layer's ring where that is smaller than the capacity. */
    double per_seq = 0.0; /* positions over all layers, per sequence */
    int ring = 0;
    for (int64_t l = 0; l < cfg->n_layers; l++) {
        const int64_t slots = layer_slots(m->layers[l].window, capacity);
        ring |= slots < capacity;
        per_seq += (double)slots;
    }
    double cache_elems = per_seq * (double)n_seq * (double)m->kv_dim;
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
    const size_t nl = (size_t)cfg->n_layers, r2 = (size_t)(m->r2 ? m->r2 : 1);
    c->m = m;
    c->n_seq = n_seq;
    c->capacity = capacity;
    c->blas = blas_prefill != 0;
    c->rows = c->blas ? HA_BLAS_BLOCK : CHUNK;
    const size_t R = (size_t)c->rows;
    c->len = calloc((size_t)n_seq, sizeof(int64_t));
    c->top = malloc((size_t)n_seq * sizeof(int64_t));
    c->adding = calloc((size_t)n_seq, sizeof(int64_t));
    c->blas_left = calloc((size_t)n_seq, sizeof(int64_t));
    c->slots = malloc(nl * sizeof(int64_t));
    c->layer_at = malloc(nl * sizeof(size_t));
    c->cache_bytes = (size_t)cache_elems * fl;
    c->kcache = ha_alloc_streamed(c->cache_bytes, &c->kmapped);
    c->vcache = ha_alloc_streamed(c->cache_bytes, &c->vmapped);
    c->x = malloc(R * d * fl);
    c->xn = malloc(R * d * fl);
    c->q = malloc(R * (size_t)m->q_dim * fl);
    c->k = malloc(R * (size_t)m->kv_dim * fl);
    c->v = malloc(R * (size_t)m->kv_dim * fl);
    c->att = malloc(R * (size_t)m->q_dim * fl);
    c->tmp = malloc(R * d * fl);
    c->gate = malloc(R * f * fl);
    c->up = malloc(R * f * fl);
    c->rope_cos = malloc(2 * R * r2 * fl);
    c->rope_sin = malloc(2 * R * r2 * fl);
    c->pos = malloc(R * sizeof(int64_t));
    c->seq = malloc(R * sizeof(int32_t));
    int all_f32 = m->w.lm_head.dtype == HA_F32; /* else OpenBLAS needs rows widened to float32 */
    int any_int = ha_dtype_is_int(m->w.lm_head.dtype), any_fused = 0;
    for (int64_t l = 0; l < cfg->n_layers; l++) {
        const ha_matrix *mats[LAYER_MATRICES];
        layer_matrices(&m->layers[l], mats);
        for (int i = 0; i < LAYER_MATRICES; i++)
            if (mats[i]->data) {
                all_f32 &= mats[i]->dtype == HA_F32;
                any_int |= ha_dtype_is_int(mats[i]->dtype);
            }
        any_fused |= m->layers[l].wqkv.data || m->layers[l].w_gate_up.data;
    }
    /* The widest matmul input: d, f, or q_dim (wo's, which may pass both: n_heads * head_dim need not be d). */
    size_t widest = d > f ? d : f;
    if ((size_t)m->q_dim > widest) widest = (size_t)m->q_dim;
    int wide_ok = 1, xq_ok = 1, fused_ok = 1;
    if (c->blas && !all_f32) {
        c->wide = malloc((size_t)HA_BLAS_SLICE * widest * fl);
        wide_ok = c->wide != NULL;
    }
    if (any_int) {
        c->xq = malloc(R * (size_t)ha_act_width((int64_t)widest) * sizeof(int16_t));
        c->xq_scale = malloc(R * fl);
        xq_ok = c->xq && c->xq_scale;
    }
    if (any_fused) {
        const size_t qkv = (size_t)(m->q_dim + 2 * m->kv_dim);
        c->fused = malloc(R * (qkv > 2 * f ? qkv : 2 * f) * fl);
        fused_ok = c->fused != NULL;
    }
    if (!c->len || !c->top || !c->adding || !c->blas_left || !c->slots || !c->layer_at || !c->kcache || !c->vcache ||
        !c->x || !c->xn || !c->q || !c->k || !c->v || !c->att || !c->tmp || !c->gate || !c->up || !c->rope_cos ||
        !c->rope_sin || !c->pos || !c->seq || !wide_ok || !xq_ok || !fused_ok) {
        ha_llama_context_free(c);
        return ha_fail(HA_ERR_NOMEM, "out of memory allocating a KV cache of %.0f MB (%lld sequences x %lld positions); "
                       "use a smaller max_cache_len or batch", cache_elems * 8.0 / 1e6, (long long)n_seq, (long long)capacity);
    }
    for (int64_t s = 0; s < n_seq; s++) c->top[s] = -1;
    for (size_t l = 0, at = 0; l < nl; l++) {
        c->slots[l] = layer_slots(m->layers[l].window, capacity);
        c->layer_at[l] = at;
        at += (size_t)n_seq * (size_t)c->slots[l] * (size_t)m->kv_dim;
    }
    /* Start the pool now, so that a failure to start threads surfaces here and not inside a forward (where
     * the work would run on the calling thread alone). */
    ha_status st = ha_pool_ensure();
    if (st != HA_OK) {
        ha_llama_context_free(c);
        return st;
    }
    c->lm = (ha_lm){ .self = c, .vocab_size = cfg->vocab_size, .n_seq = n_seq, .capacity = capacity,
                     .append = ctx_append, .crop = ctx_crop, .length = ctx_length,
                     .max_rollback = ring ? HA_RING_SLACK : INT64_MAX };
    *out = c;
    return HA_OK;
}

void ha_llama_context_free(ha_llama_context *c) {
    if (!c) return;
    ha_free_streamed(c->kcache, c->cache_bytes, c->kmapped);
    ha_free_streamed(c->vcache, c->cache_bytes, c->vmapped);
    void *bufs[] = { c->len, c->top, c->adding, c->blas_left, c->slots, c->layer_at, c->x, c->xn, c->q, c->k, c->v,
                     c->att, c->tmp, c->gate, c->up, c->fused, c->rope_cos, c->rope_sin, c->pos, c->seq, c->wide, c->xq,
                     c->xq_scale };
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(c);
}

ha_lm *ha_llama_context_lm(ha_llama_context *c) { return c ? &c->lm : NULL; }

int ha_llama_context_can_crop(const ha_llama_context *c, int32_t seq, int64_t len) {
    if (!c || seq < 0 || seq >= c->n_seq || len < 0 || len > c->len[seq]) return 0;
    return len == 0 || len == c->len[seq] || ring_keeps(c, seq, len);
}
