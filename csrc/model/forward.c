/* The native decoder's forward (ha.h gives the layer's math; Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2/3,
 * SmolLM3, GPT-2): the chunk of T tokens through every layer, its keys and values into the context's cache, and
 * the logits of the rows that want them.
 *
 * Batch invariance: a token's logits depend only on its own inputs and its sequence's cache. Matmuls
 * compute each output element whole (kernel order fixed by n), attention runs per (token, head) over
 * blocks of keys fixed by position (a kv head's query heads side by side, each with its own sums), norms
 * are per row, rotary tables per token; nothing reduces across the tokens of a chunk. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define STEP_MAX (CHUNK > HA_BLAS_BLOCK ? CHUNK : HA_BLAS_BLOCK) /* tokens a forward step holds at most */
#define KEY_BLOCK 128     /* keys per online-softmax block */
#define ROW_UNIT 16       /* matmul rows per parallel work unit */
#define SMALL_JOB \
    (1 << 18) /* multiply-adds below which a job runs on the calling thread: waking the pool
                               costs more, and far more when other processes hold the cores */
#define ATTN_SMALL_JOB \
    (1 << 14) /* the same for attention (query-key pairs times head_dim): a key costs two
                                   multiply-adds per dimension and an expf, so even one decode token's heads over
                                   a few hundred positions are worth both threads */

/* ---- parallel pieces -------------------------------------------------------------------------------- */

/* Work on each of T tokens' rows on its own (norms, rotary, an activation's quantization): row(ctx, i) for i < T,
 * split across the threads when the T rows' work (about T * width steps) is worth waking them. A row's result is the
 * same on any thread. (From 4096 steps: a prompt chunk of the shipped 512-wide target or 256-wide draft, and a
 * verification of 8 or more tokens, ran 4-8% faster split than on the caller alone while the pool's workers
 * waited; 65536 kept them serial.) */
#define ROWS_SMALL_JOB (1 << 12)
typedef struct rows_job {
    void (*row)(const void *ctx, int64_t i);
    const void *ctx;
} rows_job;

static void rows_range(void *ctx, int64_t b, int64_t e) {
    const rows_job *j = ctx;
    for (int64_t i = b; i < e; i++) j->row(j->ctx, i);
}

/* fn(ctx, b, e) over rows [0, T), on the caller alone or split as for_rows; key: the pool's kind of job. */
static void for_row_ranges(int64_t T, int64_t width, ha_range_fn fn, void *ctx, uint64_t key) {
    if (T < 2 || T * width < ROWS_SMALL_JOB) fn(ctx, 0, T);
    else ha_parallel_for_kind(fn, ctx, T, key);
}

static void for_rows(int64_t T, int64_t width, void (*row)(const void *ctx, int64_t i), const void *ctx) {
    rows_job j = { row, ctx };
    for_row_ranges(T, width, rows_range, &j, (uint64_t)(uintptr_t)row * 31 + (uint64_t)width);
}


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
    const char *Xq8;   /* X quantized by ha_quant_act8, for w8a8 weights, and its group sums */
    const int32_t *xq8_sum;
    const uint32_t *Xbf;  /* X rounded to bfloat16 pairs (ha_round_act_bf16), for bfloat16-pairs weights */
    void (*w8a8)(const void *W, int64_t n, int64_t r0, int64_t r1, const char *Xq, const int32_t *xsum, int64_t T,
                 float *Y, int64_t ldy); /* the kernel's matmul_w8a8, or its matmul_w8a8_cached (bitwise the same) */
    int64_t T;
    const mlp_step *mlp; /* mlp_range's job: the rest of a feed-forward block's first half (NULL for matmul_range) */
} matmul_job;

/* Rows [lo, hi) of W (rows, n) times X into Y (T, ldy), through the kernel W's dtype takes. */
static void matmul_rows(const matmul_job *j, const ha_matrix *W, int64_t lo, int64_t hi, float *Y, int64_t ldy) {
    if (lo >= hi) return;
    if (ha_dtype_is_int(W->dtype))
        j->k->matmul_int[W->dtype](W->data, W->cols, lo, hi, j->Xq, j->xq_scale, j->T, Y, ldy);
    else if (W->dtype == HA_Q8P) j->w8a8(W->data, W->cols, lo, hi, j->Xq8, j->xq8_sum, j->T, Y, ldy);
    else if (W->dtype == HA_BF16X) j->k->matmul_bf16x(W->data, W->cols, lo, hi, j->Xbf, j->T, Y, ldy);
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
        for (int64_t i = 0; i < n; i++)
            x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.7071067811865476f)) * (up ? up[i] : 1.0f);
        break;
    case HA_ACT_RELU:
        for (int64_t i = 0; i < n; i++) x[i] = (x[i] > 0.0f ? x[i] : 0.0f) * (up ? up[i] : 1.0f);
        break;
    default: k->silu(x, up, n);
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

/* A matmul's input X (T, n) converted token by token for the weights' class (matmul_prepare). */
typedef struct act_rows {
    const ha_llama_context *c;
    const float *X;
    int64_t n;
} act_rows;

static void round_bf16_row(const void *ctx, int64_t t) {
    const act_rows *a = ctx;
    ha_round_act_bf16(a->X + t * a->n, a->n, a->c->xbf + t * ((a->n + 1) / 2));
}

static void quant8_row(const void *ctx, int64_t t) {
    const act_rows *a = ctx;
    const int64_t groups = (a->n + HA_Q8_GROUP - 1) / HA_Q8_GROUP;
    ha_quant_act8(a->c->kern->quant_q8_sum, a->X + t * a->n, a->n, a->c->xq8 + (size_t)t * ha_row_bytes(HA_Q8, a->n),
                  a->c->xq8_sum + t * groups);
}

static void quant_row(const void *ctx, int64_t t) {
    const act_rows *a = ctx;
    a->c->kern->quant_act(a->X + t * a->n, a->n, a->c->xq + t * ha_act_width(a->n), a->c->xq_scale + t);
}

/* Fills j for Y[i] = X @ W[i]^T (X (T, W[0].cols)), quantizing X once for integer weights; the rows of all
 * the W[i]. */
static int64_t matmul_prepare(const ha_llama_context *c, matmul_job *j, int count, const ha_matrix *const *W,
                              float *const *Y, const float *X, int64_t T) {
    *j = (matmul_job){ .k = c->kern, .count = count, .X = X, .T = T };
    j->w8a8 = c->cached && c->kern->matmul_w8a8_cached ? c->kern->matmul_w8a8_cached : c->kern->matmul_w8a8;
    int64_t rows = 0, quantize = 0, quantize8 = 0, round_bf16 = 0;
    for (int i = 0; i < count; i++) {
        j->W[i] = W[i];
        j->Y[i] = Y ? Y[i] : NULL;
        rows += W[i]->rows;
        quantize |= ha_dtype_is_int(W[i]->dtype);
        quantize8 |= W[i]->dtype == HA_Q8P;
        round_bf16 |= W[i]->dtype == HA_BF16X;
    }
    /* Each token's row converted on its own, once, shared by the matmul's threads (formats.h's classes). */
    const act_rows a = { c, X, W[0]->cols };
    if (round_bf16) { /* rounded to bfloat16 pairs (the bf16-pairs class) */
        for_rows(T, a.n, round_bf16_row, &a);
        j->Xbf = c->xbf;
    }
    if (quantize8) { /* group by group into int8 (the w8a8 class) */
        for_rows(T, a.n, quant8_row, &a);
        j->Xq8 = c->xq8;
        j->xq8_sum = c->xq8_sum;
    }
    if (quantize) { /* into int16 with one scale (int8 and int4 weights) */
        for_rows(T, a.n, quant_row, &a);
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
    else ha_parallel_for_kind(matmul_range, &j, units, (uint64_t)(rows * W[0]->cols * T)); /* o_proj, down_proj apart */
}

/* Query heads of a kv head per attention task, up to this many (the rest in further pieces). */
#define ATTN_QUERIES 8
/* Floats of queries (and of value sums) a task holds: ATTN_QUERIES heads of HA_MAX_HEAD_DIM, or more tokens'
 * heads of a smaller head (a run, below). */
#define ATTN_RUN_FLOATS (ATTN_QUERIES * HA_MAX_HEAD_DIM)
/* Queries (a run's tokens times a piece's heads) a task scores together at most: a verification's tokens are
 * scored together, each block of keys read once for them all, rather than a task per token. */
#define ATTN_RUN_QUERIES 32

typedef struct attention_job {
    const ha_llama_context *c;
    int64_t layer;
    int64_t pieces; /* tasks per (run, kv head): the group's query heads in pieces of per_piece */
    int64_t per_piece; /* query heads a task holds: ATTN_QUERIES, or fewer where that gives every thread a task */
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

/* One block of a token's nk keys whose scores are in sc (nq, KEY_BLOCK), for its nq heads: soft cap, the online
 * softmax's running maximum mx (nq,) (rescaling sum (nq,) and acc (nq, hd) where it grows), the block's weights in
 * place of its scores, added to sum in key order. The same for every token and run, so that a token's output never
 * depends on the queries beside it. */
static void block_weights(const ha_kernels *k, float (*sc)[KEY_BLOCK], int64_t nq, int64_t nk, float cap, float *mx,
                          float *sum, float *acc, int64_t hd) {
    for (int64_t h = 0; h < nq; h++) {
        float *s = sc[h];
        if (cap > 0.0f)
            for (int64_t t = 0; t < nk; t++) s[t] = cap * tanhf(s[t] / cap);
        const float bm = ha_max_of(s, nk);
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
    add_in_order(sc, nq, nk, sum);
}

/* The block of keys from position kb of tree node i (chunk index): the positions below its tree's base from the
 * cache's slots, then its ancestors' and its own from theirs (node j of the tree at slot base + j; ancestors from
 * an earlier call of the same tree alike), each stretch of consecutive slots scored and summed by one kernel call
 * at its column of the block. The kernels score each key on its own and add values key by key in order
 * (ha_kernels.attn_scores, attn_values), so the block is bitwise the one a sequential decode of the node's path
 * reads from consecutive positions. qs (nq, hd) the node's queries, the rest as attention_range's. */
static void tree_block(const ha_llama_context *c, const ha_kernels *k, int64_t i, int64_t kb, int64_t S, const float *K,
                       const float *V, const float *qs, int64_t nq, int64_t hd, float scale, float cap,
                       float (*sc)[KEY_BLOCK], float *mx, float *sum, float *acc) {
    const int64_t p = c->pos[i], tb = c->tbase[i], end = kb + KEY_BLOCK <= p + 1 ? kb + KEY_BLOCK : p + 1;
    const int64_t nk = end - kb, nc = tb > kb ? (tb < end ? tb : end) - kb : 0; /* keys, and those in the cache */
    const int32_t *par = c->tpar + (size_t)c->seq[i] * CHUNK;
    int32_t path[CHUNK]; /* the tree index of the node's ancestor at each depth, and its own */
    for (int64_t d = p - tb, at = c->tnode[i]; d >= 0; d--, at = par[at]) path[d] = (int32_t)at;
    const int64_t d0 = (kb > tb ? kb : tb) - tb, d1 = end - tb; /* the tree's depths in the block */
    if (nc > 0) k->attn_scores(qs, nq, hd, K, hd, kb % S, S, nc, hd, scale, sc[0], KEY_BLOCK);
    for (int64_t d = d0, e; d < d1; d = e) {
        for (e = d + 1; e < d1 && path[e] == path[e - 1] + 1;) e++;
        k->attn_scores(qs, nq, hd, K, hd, (tb + path[d]) % S, S, e - d, hd, scale, sc[0] + (tb + d - kb), KEY_BLOCK);
    }
    block_weights(k, sc, nq, nk, cap, mx, sum, acc, hd);
    if (nc > 0) k->attn_values(sc[0], KEY_BLOCK, nq, V, hd, kb % S, S, nc, hd, acc, hd);
    for (int64_t d = d0, e; d < d1; d = e) {
        for (e = d + 1; e < d1 && path[e] == path[e - 1] + 1;) e++;
        k->attn_values(sc[0] + (tb + d - kb), KEY_BLOCK, nq, V, hd, (tb + path[d]) % S, S, e - d, hd, acc, hd);
    }
}

/* Tasks are (run r, kv head g, piece u of its query heads) triples, (r * nkv + g) * pieces + u; a piece holds
 * up to per_piece of the group's heads. A run's tokens see the same keys from the same first one, each up to
 * its own position: attn_scores scores every query of the task (the run's tokens times the piece's heads)
 * against each block of keys together, up to the run's last position (each key read once for them all; a
 * token's scores past its own position are not used), and attn_values sums each token's heads over its own
 * keys (each value row read once for the heads). Keys are read from the layer's slots (a ring: position t at
 * slot t mod slots); blocks of keys start at the first visible position, so they depend on the position alone.
 * Each head's scores, online softmax and sums are its own, in key order, whatever the queries beside it: a
 * token's output is the same in any run. Tree nodes (c->tree): the blocks below the run's tree base are shared as
 * above, each later block is each node's own (tree_block: the cache's keys, then its ancestors'). */
static void attention_range(void *ctx, int64_t b, int64_t e) {
    const attention_job *j = ctx;
    const ha_llama_context *c = j->c;
    const ha_llama *m = c->m;
    const ha_llama_layer *L = &m->layers[j->layer];
    const ha_kernels *k = c->kern;
    const int64_t nkv = m->cfg.n_kv_heads, hd = m->cfg.head_dim, group = m->cfg.n_heads / nkv, pieces = j->pieces,
                  per = j->per_piece;
    const int64_t S = c->slots[j->layer], w = L->window;
    const float scale = L->attn_scale, cap = m->cfg.attn_softcap;
    float qs[ATTN_RUN_FLOATS], acc[ATTN_RUN_FLOATS], sc[ATTN_RUN_QUERIES][KEY_BLOCK];
    float mx[ATTN_RUN_QUERIES], sum[ATTN_RUN_QUERIES];
    for (int64_t task = b; task < e; task++) {
        const int64_t r = task / (nkv * pieces), g = task / pieces % nkv, h0 = g * group + task % pieces * per;
        const int64_t nq = g * group + group - h0 < per ? g * group + group - h0 : per;
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
        const int64_t tb = c->tree ? c->tbase[i0] : INT64_MAX; /* positions from tb on: the run's tree nodes */
        for (int64_t kb = lo; kb <= p_last; kb += KEY_BLOCK) {
            const int64_t slot0 = kb % S; /* the block's first slot; later ones follow it, wrapping at S */
            if (kb + KEY_BLOCK > tb) { /* a block holding tree positions: each node's own keys */
                for (int64_t a = 0; a < n; a++)
                    if (kb <= c->pos[i0 + a])
                        tree_block(c, k, j->run[r] + a, kb, S, K, V, qs + a * nq * hd, nq, hd, scale, cap, sc + a * nq,
                                   mx + a * nq, sum + a * nq, acc + a * nq * hd);
                continue;
            }
            const int64_t nk_all = (kb + KEY_BLOCK <= p_last + 1 ? kb + KEY_BLOCK : p_last + 1) - kb;
            k->attn_scores(qs, nall, hd, K, hd, slot0, S, nk_all, hd, scale, sc[0], KEY_BLOCK);
            for (int64_t a = 0; a < n; a++) {
                const int64_t p = c->pos[i0 + a];
                if (kb > p) continue;
                const int64_t nk = (kb + KEY_BLOCK <= p + 1 ? kb + KEY_BLOCK : p + 1) - kb;
                block_weights(k, sc + a * nq, nq, nk, cap, mx + a * nq, sum + a * nq, acc + a * nq * hd, hd);
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
/* y (d,) = an RMS norm of x (d,) whose sum of squares in double is ss, with weight w (d,). */
static void rms_scale(const ha_llama_config *cfg, const float *x, const float *w, float *y, int64_t d, double ss) {
    const float r = (float)(1.0 / sqrt(ss / (double)d + (double)cfg->norm_eps));
    if (cfg->norm == HA_NORM_RMS_ONE_PLUS)
        for (int64_t i = 0; i < d; i++) y[i] = (x[i] * r) * (1.0f + w[i]);
    else
        for (int64_t i = 0; i < d; i++) y[i] = w[i] * (x[i] * r);
}

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
    rms_scale(cfg, x, w, y, d, ss);
}

/* y (T, d) = each row of x (T, d) normed (norm's w and b), rows across the threads where worth it (for_rows). */
typedef struct norm_job {
    const ha_llama_config *cfg;
    const float *x, *w, *b;
    float *y;
    int64_t d;
} norm_job;

/* Rows [b, e) of a norm job. RMS norms four rows at a time: each row's sum of squares is the same chain in the same
 * order as norm's, the four side by side so that each add does not wait on the one before (one row's chain of d
 * dependent double adds bounds its loop); LayerNorm row by row. */
static void norm_range(void *ctx, int64_t b, int64_t e) {
    const norm_job *j = ctx;
    const ha_llama_config *cfg = j->cfg;
    const int64_t d = j->d;
    for (int64_t i = b; i < e;) {
        if (cfg->norm == HA_NORM_LAYER || e - i < 4) {
            norm(cfg, j->x + i * d, j->w, j->b, j->y + i * d, d);
            i++;
            continue;
        }
        const float *x0 = j->x + i * d, *x1 = x0 + d, *x2 = x1 + d, *x3 = x2 + d;
        double ss[4] = { 0.0, 0.0, 0.0, 0.0 };
        for (int64_t k = 0; k < d; k++) {
            ss[0] += (double)x0[k] * (double)x0[k];
            ss[1] += (double)x1[k] * (double)x1[k];
            ss[2] += (double)x2[k] * (double)x2[k];
            ss[3] += (double)x3[k] * (double)x3[k];
        }
        for (int r = 0; r < 4; r++, i++) rms_scale(cfg, j->x + i * d, j->w, j->y + i * d, d, ss[r]);
    }
}

static void norm_all(const ha_llama_config *cfg, const float *x, const float *w, const float *b, float *y, int64_t T,
                     int64_t d) {
    norm_job j = { cfg, x, w, b, y, d };
    for_row_ranges(T, d, norm_range, &j, (uint64_t)(uintptr_t)norm_range * 31 + (uint64_t)d);
}

/* Each of the T rows of x (T, d) normed in place by the optional vector v (and bias vb); nothing if v is absent. */
static void norm_rows(const ha_llama_config *cfg, float *x, const ha_vector *v, const ha_vector *vb, int64_t T,
                      int64_t d) {
    if (v->data) norm_all(cfg, x, v->data, vb ? vb->data : NULL, x, T, d);
}

static void add_bias(float *y, const ha_vector *b, int64_t T, int64_t n) {
    if (!b->data) return;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < n; i++) y[t * n + i] += b->data[i];
}

/* Rotates token i's heads of v (T, n_heads * hd) in place with table `table` (0: global or long, 1: local): in each
 * head, pairs (j, j + r2) for j < r2, Transformers' rotate_half convention over the first 2 r2 dims; the rest pass. */
static void rope_token(const ha_llama_context *c, float *v, int64_t i, int64_t n_heads, int table) {
    const int64_t hd = c->m->cfg.head_dim, h2 = c->m->r2, R = c->rows;
    const float *cs = c->rope_cos + (table * R + i) * h2, *sn = c->rope_sin + (table * R + i) * h2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *x = v + (i * n_heads + h) * hd;
        for (int64_t j = 0; j < h2; j++) {
            float a = x[j], b = x[j + h2];
            x[j] = a * cs[j] - b * sn[j];
            x[j + h2] = b * cs[j] + a * sn[j];
        }
    }
}

/* The chunk's queries c->q and keys c->k rotated, token by token (for_rows). */
typedef struct rope_job {
    const ha_llama_context *c;
    int table;
} rope_job;

static void rope_row(const void *ctx, int64_t i) {
    const rope_job *j = ctx;
    const ha_llama_config *cfg = &j->c->m->cfg;
    rope_token(j->c, j->c->q, i, cfg->n_heads, j->table);
    rope_token(j->c, j->c->k, i, cfg->n_kv_heads, j->table);
}

/* cos and sin of position * table for the chunk's tokens, times rope_scale: row i of table slot `into`; long_table
 * instead for the tokens of the sequences whose append takes it (c->long_rope). */
static void rope_tables(ha_llama_context *c, int64_t T, int into, const double *table, const double *long_table) {
    const ha_llama_config *cfg = &c->m->cfg;
    const int64_t h2 = c->m->r2, R = c->rows;
    for (int64_t i = 0; i < T; i++) {
        const double *t = long_table && c->long_rope[c->seq[i]] ? long_table : table;
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
    const mlp_step s = { .gated = gated,
                         .act = cfg->act,
                         .f = cfg->intermediate_size,
                         .b_gate = gated ? L->b_gate.data : L->b_up.data,
                         .b_up = gated ? L->b_up.data : NULL,
                         .gate = c->gate,
                         .up = c->up,
                         .fused = fused ? c->fused : NULL };
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
    else ha_parallel_for_kind(mlp_range, &j, units, (uint64_t)(rows * W[0]->cols * T));
}

/* x (T, d): the forward's T tokens' hidden states at entry `entry` of the recording (ha_llama_context_record_hidden). */
static void record_hidden(const ha_llama_context *c, int64_t entry, const float *x, int64_t T) {
    const int64_t d = c->m->cfg.hidden_size;
    memcpy(c->hidden + (size_t)(entry * c->hidden_n + c->hidden_at) * (size_t)d, x, (size_t)(T * d) * sizeof(float));
}

int ha_llama_forward(ha_llama_context *c, const int32_t *tokens, int64_t T, const uint8_t *want, float *logits) {
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
    if (c->hidden) record_hidden(c, 0, c->x, T);
    if (m->r2) rope_tables(c, T, 0, cfg->rope_inv_freq, cfg->rope_inv_freq_long);
    if (m->r2 && cfg->rope_inv_freq_local) rope_tables(c, T, 1, cfg->rope_inv_freq_local, NULL);
    /* attention's pieces of a group's heads, and tokens per run: as many as the queries a task holds fit */
    const int64_t group = cfg->n_heads / cfg->n_kv_heads, pieces = (group + ATTN_QUERIES - 1) / ATTN_QUERIES;
    const int64_t piece_q = group < ATTN_QUERIES ? group : ATTN_QUERIES;
    const int64_t fit = ATTN_RUN_FLOATS / hd < ATTN_RUN_QUERIES ? ATTN_RUN_FLOATS / hd : ATTN_RUN_QUERIES;
    const int64_t run_most = fit / piece_q > 1 ? fit / piece_q : 1;
    const int threads = ha_pool_threads_here(); /* a head's output is its own whichever task holds it */
    for (int64_t l = 0; l < cfg->n_layers; l++) {
        if (ha_interrupted()) return 1;
        const ha_llama_layer *L = &m->layers[l];
        norm_all(cfg, c->x, L->attn_norm.data, L->attn_norm_b.data, c->xn, T, d);
        if (L->wqkv.data) {
            matmul(c, 1, (const ha_matrix *[]){ &L->wqkv }, (float *[]){ c->fused }, c->xn, T);
            add_bias(c->fused, &L->bqkv, T, qd + 2 * kvd);
            split_rows(c->fused, T, qd + 2 * kvd, 3, (float *[]){ c->q, c->k, c->v },
                       (const int64_t[]){ qd, kvd, kvd });
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
            const rope_job rj = { c, L->rope == HA_ROPE_LOCAL };
            for_rows(T, (cfg->n_heads + cfg->n_kv_heads) * cfg->head_dim, rope_row, &rj);
        }
        ha_kv_store(c, l, T);
        int64_t run[STEP_MAX + 1];
        const int64_t runs = attention_runs(c, T, L->window, run_most, run);
        attention_job aj = { c, l, pieces, piece_q, run };
        if (runs * cfg->n_kv_heads * pieces < threads) { /* fewer tasks than threads (one kv head, one token): */
            const int64_t want = (threads + runs * cfg->n_kv_heads - 1) / (runs * cfg->n_kv_heads); /* smaller pieces */
            aj.per_piece = (group + want - 1) / want;
            aj.pieces = (group + aj.per_piece - 1) / aj.per_piece;
        }
        const int64_t tasks = runs * cfg->n_kv_heads * aj.pieces;
        if (T * cfg->n_heads * (c->pos[T - 1] + 1) * hd < ATTN_SMALL_JOB) attention_range(&aj, 0, tasks);
        else ha_parallel_for(attention_range, &aj, tasks);
        matmul(c, 1, (const ha_matrix *[]){ &L->wo }, (float *[]){ c->tmp }, c->att, T);
        add_bias(c->tmp, &L->bo, T, d);
        norm_rows(cfg, c->tmp, &L->post_attn_norm, NULL, T, d);
        for (int64_t i = 0; i < T * d; i++) c->x[i] += c->tmp[i];

        norm_all(cfg, c->x, L->ffn_norm.data, L->ffn_norm_b.data, c->xn, T, d);
        mlp_in(c, L, T);
        matmul(c, 1, (const ha_matrix *[]){ &L->w_down }, (float *[]){ c->tmp }, c->gate, T);
        add_bias(c->tmp, &L->b_down, T, d);
        norm_rows(cfg, c->tmp, &L->post_ffn_norm, NULL, T, d);
        for (int64_t i = 0; i < T * d; i++) c->x[i] += c->tmp[i];
        if (c->hidden && l + 1 < cfg->n_layers) record_hidden(c, l + 1, c->x, T);
    }
    if (c->hidden) { /* the last entry: every token's final norm (tmp is free now) */
        for (int64_t i = 0; i < T; i++)
            norm(cfg, c->x + i * d, m->w.final_norm.data, m->w.final_norm_b.data, c->tmp + i * d, d);
        record_hidden(c, cfg->n_layers, c->tmp, T);
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
