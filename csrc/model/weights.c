/* The native decoder's model object (ha_llama): the config and the weights borrowed from the caller, every
 * dimension, dtype and buffer checked against the config at create. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* ---- creation and checks --------------------------------------------------------------------------- */

static ha_status check_matrix(const char *name, int64_t layer, const ha_matrix *m, int64_t rows, int64_t cols) {
    if (!m->data) return ha_fail(HA_ERR_INVALID, "weight %s (layer %lld) is missing", name, (long long)layer);
    if ((unsigned)m->dtype >= HA_NDTYPES)
        return ha_fail(HA_ERR_INVALID,
                       "weight %s (layer %lld) has unknown dtype code %d; use float32, bfloat16, float16 (row-major or "
                       "in panels), int8 or int4",
                       name, (long long)layer, (int)m->dtype);
    if (m->rows != rows || m->cols != cols)
        return ha_fail(HA_ERR_INVALID,
                       "weight %s (layer %lld) has shape (%lld, %lld) but the config needs (%lld, %lld)", name,
                       (long long)layer, (long long)m->rows, (long long)m->cols, (long long)rows, (long long)cols);
    size_t need = ha_matrix_bytes(m->dtype, rows, cols), align = ha_dtype_align(m->dtype);
    if (need == 0 && rows > 0 && cols > 0) /* ha_matrix_bytes' 0 for a size beyond size_t */
        return ha_fail(HA_ERR_INVALID, "weight %s (layer %lld): (%lld, %lld) is too large to address", name,
                       (long long)layer, (long long)rows, (long long)cols);
    if (m->nbytes != need)
        return ha_fail(HA_ERR_INVALID,
                       "weight %s (layer %lld): buffer of %zu bytes for (%lld, %lld) %s, which needs %zu", name,
                       (long long)layer, m->nbytes, (long long)rows, (long long)cols, ha_dtype_name(m->dtype), need);
    if ((uintptr_t)m->data % align)
        return ha_fail(HA_ERR_INVALID, "weight %s (layer %lld) is not aligned to %zu bytes; pass an aligned copy", name,
                       (long long)layer, align);
    return HA_OK;
}

static ha_status check_vector(const char *name, int64_t layer, const ha_vector *v, int64_t n, int required) {
    if (!v->data) {
        if (required) return ha_fail(HA_ERR_INVALID, "vector %s (layer %lld) is missing", name, (long long)layer);
        return HA_OK;
    }
    if (v->n != n)
        return ha_fail(HA_ERR_INVALID, "vector %s (layer %lld) has %lld elements but the config needs %lld", name,
                       (long long)layer, (long long)v->n, (long long)n);
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
#define POSITIVE(f, max)          \
    if (c->f < 1 || c->f > (max)) \
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
    const struct {
        const char *name;
        float v;
    } scalars[] = { { "embed_scale", c->embed_scale },
                    { "attn_softcap", c->attn_softcap },
                    { "final_softcap", c->final_softcap },
                    { "rope_scale", c->rope_scale } };
    for (size_t i = 0; i < sizeof scalars / sizeof *scalars; i++)
        if (!(scalars[i].v >= 0.0f) || !isfinite(scalars[i].v))
            return ha_fail(HA_ERR_INVALID, "%s=%g must be a finite number >= 0 (0: off)", scalars[i].name,
                           (double)scalars[i].v);
    if (!c->rope_inv_freq) {
        if (c->rope_dim || c->rope_inv_freq_long || c->rope_inv_freq_local)
            return ha_fail(HA_ERR_INVALID,
                           "rope_inv_freq is missing but rope_dim=%lld or another rotary table is given",
                           (long long)c->rope_dim);
        return HA_OK;
    }
    const int64_t rd = c->rope_dim ? c->rope_dim : c->head_dim;
    if (rd < 2 || rd > c->head_dim || rd % 2)
        return ha_fail(HA_ERR_INVALID,
                       "the rotary dimension %lld must be even and in 2..head_dim=%lld (rope_dim, or "
                       "head_dim when rope_dim is 0)",
                       (long long)rd, (long long)c->head_dim);
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
        return ha_fail(HA_ERR_INVALID, "layer %lld: give either %s or the fused %s, not both", (long long)layer, parts,
                       fused);
    return HA_OK;
}

static ha_status check_weights(const ha_llama_config *c, const ha_llama_weights *w) {
    int64_t d = c->hidden_size, f = c->intermediate_size, hd = c->head_dim, qd = c->n_heads * hd,
            kvd = c->n_kv_heads * hd;
    ha_status st;
#define TRY(e) \
    if ((st = (e)) != HA_OK) return st
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
        if (L->window < 0)
            return ha_fail(HA_ERR_INVALID, "layer %lld: window=%lld must be >= 0", (long long)l, (long long)L->window);
        if ((unsigned)L->rope > HA_ROPE_NONE)
            return ha_fail(HA_ERR_INVALID, "layer %lld: unknown rope %d", (long long)l, (int)L->rope);
        if (L->rope == HA_ROPE_LOCAL && !c->rope_inv_freq_local)
            return ha_fail(HA_ERR_INVALID, "layer %lld uses the local rotary table but rope_inv_freq_local is missing",
                           (long long)l);
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
void ha_layer_matrices(const ha_llama_layer *L, const ha_matrix *out[LAYER_MATRICES]) {
    const ha_matrix *mats[LAYER_MATRICES] = { &L->wq,     &L->wk,   &L->wv,        &L->wqkv,  &L->wo,
                                              &L->w_gate, &L->w_up, &L->w_gate_up, &L->w_down };
    memcpy(out, mats, sizeof mats);
}

int64_t ha_llama_weight_bytes(const ha_llama *m) {
    int64_t total = (int64_t)m->w.lm_head.nbytes + m->cfg.hidden_size * 4 * (m->w.final_norm_b.data ? 2 : 1);
    for (int64_t l = 0; l < m->cfg.n_layers; l++) {
        const ha_llama_layer *L = &m->layers[l];
        const ha_matrix *mats[LAYER_MATRICES];
        ha_layer_matrices(L, mats);
        for (int i = 0; i < LAYER_MATRICES; i++)
            if (mats[i]->data) total += (int64_t)mats[i]->nbytes;
        const ha_vector *vecs[] = { &L->attn_norm, &L->attn_norm_b,    &L->bq,       &L->bk,
                                    &L->bv,        &L->bqkv,           &L->bo,       &L->q_norm,
                                    &L->k_norm,    &L->post_attn_norm, &L->ffn_norm, &L->ffn_norm_b,
                                    &L->b_gate,    &L->b_up,           &L->b_down,   &L->post_ffn_norm };
        for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++)
            if (vecs[i]->data) total += vecs[i]->n * 4;
    }
    return total;
}
