/* Shared by the native decoder's files (weights.c, kv_cache.c, forward.c) and its prompt prefill (blas.c): the
 * model and its context, and the forward's entry points. */
#ifndef HA_MODEL_H
#define HA_MODEL_H

#include "../core/core.h"
#include "../kernels/kernels.h"

/* ---- OpenBLAS (blas.c) -------------------------------------------------------------------------------
 * Prompt blocks of HA_BLAS_BLOCK tokens; weights not in float32 are widened HA_BLAS_SLICE rows at a time. */
#define HA_BLAS_BLOCK 128
#define HA_BLAS_SLICE 256
/* Y[t, r] (T, ldy) = dot(W[r, :], X[t, :]) for every row r of W, by cblas_sgemm; scratch holds
 * (HA_BLAS_SLICE, W->cols) floats unless W is float32 (then it may be NULL). */
void ha_blas_matmul(const ha_kernels *k, const ha_matrix *W, const float *X, int64_t T, float *Y, int64_t ldy,
                    float *scratch);

/* ---- the native decoder (weights.c, kv_cache.c, forward.c) ------------------------------------------- */

#define CHUNK \
    64          /* tokens per forward step; longer appends are cut into chunks (a batch of 8 rows verifying
                             K = 4 each is one chunk: a second one reads every weight again) */
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
    int cached;           /* the model's weights fit half the last-level cache: w8a8 takes matmul_w8a8_cached */
    int blas_now;         /* the forward in progress is such a block */
    int64_t rows;         /* R, the tokens one forward holds: HA_BLAS_BLOCK with blas, else CHUNK */
    int64_t *len;         /* (n_seq,) positions held */
    int64_t *top;         /* (n_seq,) the highest position written since the sequence was last empty (-1) */
    int64_t *adding;      /* (n_seq,) scratch: tokens of the current append per sequence */
    int64_t *blas_left;   /* (n_seq,) scratch: tokens of the current append still due to go through OpenBLAS */
    uint8_t *long_rope;   /* (n_seq,) scratch: the current append rotates the sequence's tokens with the long table */
    int64_t *slots;       /* (n_layers,) positions a layer holds per sequence: capacity, or a ring's size */
    size_t
        *layer_at; /* (n_layers,) where layer l's (n_seq, n_kv_heads, slots[l], head_dim) block starts in the caches */
    float *kcache; /* every layer's (n_seq, n_kv_heads, slots[l], head_dim) block, one after the other: a head's
                             keys side by side, the rows one attention task reads */
    float *vcache; /* the same for values */
    size_t cache_bytes; /* of kcache, and of vcache (ha_alloc_streamed's) */
    int kmapped, vmapped; /* ha_alloc_streamed's *mapped for each */
    /* Activations of one forward of up to R = rows tokens. */
    float *x; /* (R, d) residual stream */
    float *xn; /* (R, d) normed input of a block; packed rows wanting logits at the end */
    float *q; /* (R, q_dim) */
    float *k, *v; /* (R, kv_dim) */
    float *att; /* (R, q_dim) attention output */
    float *tmp; /* (R, d) projection output before the residual add */
    float *gate, *up; /* (R, f) */
    float *fused; /* (R, max(q_dim + 2 kv_dim, 2f)) a fused projection's output; NULL if none is fused */
    float *rope_cos, *rope_sin; /* (2, R, r2): the global (or long) and the local table's values per token */
    int64_t *pos; /* (R,) each token's position: rotary, learned positions, the keys it sees */
    int64_t *store; /* (R,) the position whose slots keep its key and value: pos, except a tree's nodes
                             (append_tree), kept at base + their index among their sequence's nodes */
    int32_t *seq; /* (R,) */
    /* A forward of tree nodes (append_tree; tree == 0 for appends): node i, index tnode[i] among its sequence's
     * tree, sees its sequence's positions below tbase[i] from the cache, then its ancestors (tpar) and itself, one
     * per position from tbase[i] to pos[i]; node j of a sequence's tree keeps its key and value at tbase + j. */
    int tree;
    int32_t *tnode; /* (R,) */
    int64_t *tbase; /* (R,) */
    /* Each sequence's tree, kept between append_tree calls so that a later call may continue it: its nodes (0: no
     * tree; an append, crop, keep_path or copy ends it), each node's parent among them (-1 at depth 0) and depth. */
    int64_t *tnodes; /* (n_seq,) */
    int32_t *tpar, *tdepth; /* (n_seq, CHUNK) */
    uint8_t *tcont; /* (n_seq,) scratch: the current append_tree continues the sequence's tree */
    float *wide; /* (HA_BLAS_SLICE, max(d, f, q_dim)) weights widened for OpenBLAS; NULL if not needed */
    float *hidden; /* NULL, or (n_layers + 1, hidden_n, d): the hidden states the current append records */
    int64_t hidden_n; /* tokens of that append (ha_llama_context_record_hidden) */
    int64_t hidden_at; /* index in that append of the forward's first token */
    int16_t *xq; /* (R, ha_act_width(max(d, q_dim, f))) a matmul's input quantized for integer weights; */
    float *xq_scale; /* (R,) with its scales; both NULL if no matrix is int8 or int4 */
    char *xq8; /* (R, ha_row_bytes(HA_Q8, max(d, q_dim, f))) a matmul's input quantized for w8a8 weights */
    int32_t *xq8_sum; /* (R, its groups) each group's sum of integers; both NULL if no matrix is w8a8 */
    uint32_t *xbf; /* (R, ceil(max(d, q_dim, f) / 2)) a matmul's input as bfloat16 pairs; NULL if no matrix is
                           * bfloat16 pairs */
};

/* The matrices of one layer (absent ones have data == NULL), into out (weights.c). */
#define LAYER_MATRICES 9
void ha_layer_matrices(const ha_llama_layer *L, const ha_matrix *out[LAYER_MATRICES]);

/* Forward of T tokens (T <= CHUNK, or T == HA_BLAS_BLOCK with c->blas_now) whose seq/pos are set in c;
 * their K/V go into the cache. Rows with want != NULL && want[i] get logits, packed, into logits. Returns
 * nonzero, with the forward unfinished, if the interrupt asked to stop (polled before each layer). (forward.c) */
int ha_llama_forward(ha_llama_context *c, const int32_t *tokens, int64_t T, const uint8_t *want, float *logits);

/* Layer l's keys and values of the chunk's T tokens (c->k, c->v (T, kv_dim)) into the cache, each token's at
 * its sequence's slot for its position (kv_cache.c). */
void ha_kv_store(ha_llama_context *c, int64_t l, int64_t T);

#endif /* HA_MODEL_H */
