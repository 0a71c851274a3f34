/* habana_assist core: the public C API.
 *
 * Plain C11, no Python.h. Every function that can fail returns an ha_status and leaves a message for
 * ha_last_error() on the calling thread; no function exits, aborts or prints. Sizes are int64_t, counts of
 * bytes size_t. Handles are opaque; each *_create has its *_free (free(NULL) is a no-op).
 */
#ifndef HA_H
#define HA_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define HA_API __attribute__((visibility("default")))
#else
#define HA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ha_status {
    HA_OK = 0,
    HA_ERR_INVALID = 1,     /* an argument, buffer or token id outside its contract */
    HA_ERR_NOMEM = 2,       /* an allocation failed; nothing was changed */
    HA_ERR_CAPACITY = 3,    /* appending would pass the KV cache capacity; nothing was appended */
    HA_ERR_UNSUPPORTED = 4, /* a valid request this build does not implement */
    HA_ERR_INTERNAL = 5,    /* a bug: the message says where */
    HA_ERR_CALLBACK = 6,    /* a caller's callback asked to stop (the caller holds the reason) */
    HA_ERR_INTERRUPTED = 7  /* the calling thread's interrupt poll asked to stop (ha_set_interrupt) */
} ha_status;

/* Message of the last failure on this thread ("" if none). Valid until the next failing call. */
HA_API const char *ha_last_error(void);

/* ---- interrupts ----------------------------------------------------------------------------------
 * Long core work polls the calling thread's interrupt: generation before each step (and each draft pass),
 * an append before each chunk of tokens and each layer of a chunk. poll(user) is called on the thread that
 * made the core call, never on a pool worker, so it may take a lock its caller released (the binding's takes
 * the GIL only when a signal is pending); it returns nonzero to stop. The work then returns
 * HA_ERR_INTERRUPTED at that point, leaving every KV cache as it was before the append that was stopped (the
 * lengths are restored: what a stopped append wrote past them is never read) and a generation's outputs
 * undefined; once it has returned nonzero, poll is not called again until the next ha_set_interrupt. */
typedef struct ha_interrupt {
    int (*poll)(void *user);
    void *user;
} ha_interrupt;

/* Sets the calling thread's interrupt (NULL: none; the pointer is kept, so it must outlive its use) and
 * clears its stopped state; returns the previous one, so a nested caller can put it back. */
HA_API const ha_interrupt *ha_set_interrupt(const ha_interrupt *it);

/* ---- weights ------------------------------------------------------------------------------------ */

typedef enum ha_dtype {
    HA_F32 = 0,
    HA_BF16 = 1,
    HA_F16 = 2, /* float weights, row-major */
    HA_Q8 = 3,
    HA_Q4 = 4,                /* integer weights with a scale per group, row-major blocks */
    HA_F32P = 5,
    HA_BF16P = 6,
    HA_F16P = 7, /* float weights in panels of HA_PANEL_ROWS rows (ha_pack) */
    HA_Q8P = 8,                          /* int8 weights in panels, for int8 activations (w8a8; ha_quantize) */
    HA_BF16X = 9,                        /* bfloat16 weights in pair panels, for bf16 activations (ha_quantize) */
    HA_NDTYPES = 10
} ha_dtype;

/* HA_F32P, HA_BF16P, HA_F16P: float32, bfloat16 or float16 weights repacked (ha_pack) for the kernels that
 * broadcast activations against many rows at once. A (rows, cols) matrix is ceil(rows / HA_PANEL_ROWS)
 * panels, one after the other; panel p holds, for each column k in order, the HA_PANEL_ROWS weights of rows
 * p * HA_PANEL_ROWS + i (zero past the last row) at positions ha_panel_pos(i): i itself, except in bfloat16
 * panels, where rows i < 8 sit at 2i and rows 8 + i at 2i + 1 (one 32-byte load then splits into the two
 * halves' float32 by one shift and one mask). The multiply sums each output in index order by fused
 * multiply-adds (see ha_kernels.matmul in kernels/kernels.h), where row-major float weights sum 8-lane blocks. */
#define HA_PANEL_ROWS 16

/* HA_Q8, int8 weights with a scale per group: each row is ceil(cols / HA_Q8_GROUP) blocks of
 * { float scale; int8_t q[HA_Q8_GROUP]; } (68 bytes, 4-byte aligned), element j of a block being
 * scale * q[j]; the last block of a row is zero-padded. */
#define HA_Q8_GROUP 64
#define HA_Q8_BLOCK_BYTES (4 + HA_Q8_GROUP)
/* HA_Q4, 4-bit weights with a scale per group: each row is ceil(cols / HA_Q4_GROUP) blocks of
 * { float scale; uint8_t nib[HA_Q4_GROUP / 2]; } (20 bytes, 4-byte aligned): byte i holds element i in its
 * low nibble and element i + 16 in its high one, each as q + 8 (q in [-8, 7]; quantization makes -7..7),
 * element j of a block being scale * q[j]; the last block of a row is padded with q = 0. */
#define HA_Q4_GROUP 32
#define HA_Q4_BLOCK_BYTES (4 + HA_Q4_GROUP / 2)
/* HA_Q8P, the w8a8 class's weights: HA_Q8's integers and scales (the same quantization) in panels of
 * HA_PANEL_ROWS rows, for kernels that multiply them by int8 activations. A (rows, cols) matrix is
 * ceil(rows / HA_PANEL_ROWS) panels of ceil(cols / HA_Q8_GROUP) group blocks of HA_Q8P_BLOCK_BYTES each:
 * { float scale[16]; uint8_t q[16][16][4]; }, scale[i] being row i's scale for the group, and q[s][i][j] row i's
 * weight 4s + j of the group as q + 128 (an unsigned byte: what vpdpbusd takes). Rows past the last and
 * columns past cols are zeros (scale 0, q 128). Row r's share of the bytes is HA_Q8's, ha_row_bytes(HA_Q8, cols). */
#define HA_Q8P_BLOCK_BYTES (HA_PANEL_ROWS * HA_Q8_BLOCK_BYTES)
/* HA_BF16X, the bf16-pairs class's weights (kernels/formats.h defines the arithmetic): bfloat16 weights laid out
 * for vdpbf16ps. A (rows, cols) matrix is ceil(rows / HA_PANEL_ROWS) panels of ceil(cols / 2) steps of 64 bytes
 * each: step s of a panel is 16 uint32, the i-th holding row i's weights 2s (low half) and 2s + 1 (high half) as
 * bfloat16 bits. Rows past the last and the column past an odd cols are zeros; subnormal weights are stored as
 * zeros of their sign (the instruction reads them so). Row r's share of the bytes is 4 * ceil(cols / 2). */
#define HA_BF16X_STEP_BYTES (HA_PANEL_ROWS * 4)

/* Bytes of a (rows, cols) matrix of dtype t (panel dtypes: rows rounded up to whole panels); 0 for an unknown
 * dtype, negative sizes, or a size that does not fit in size_t. */
HA_API size_t ha_matrix_bytes(ha_dtype t, int64_t rows, int64_t cols);

/* A contiguous matrix W (rows, cols), row-major or in panels as its dtype says, borrowed from the caller, who keeps it alive and
 * unchanged for the life of the model that holds it. nbytes is the buffer's size, checked against
 * ha_matrix_bytes(dtype, rows, cols). */
typedef struct ha_matrix {
    const void *data;
    ha_dtype dtype;
    int64_t rows, cols;
    size_t nbytes;
} ha_matrix;

/* A float32 vector (n,) borrowed like ha_matrix; data == NULL means absent (optional biases). */
typedef struct ha_vector {
    const float *data;
    int64_t n;
} ha_vector;

/* ---- the decoder model (Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2/3, SmolLM3, GPT-2) -----------------
 * One pre-norm decoder with the switches these families differ by. Per layer:
 *   h = norm(x; attn_norm, attn_norm_b)
 *   q, k, v = h Wq^T + bq, h Wk^T + bk, h Wv^T + bv   (or one fused Wqkv, rows q | k | v, and bqkv)
 *   q, k = per-head norm(q; q_norm), norm(k; k_norm)   (if given), then rotary over each head's first rope_dim
 *   a = softmax(softcap(attn_scale * q.k) over the visible keys) v;  a = a Wo^T + bo;  a = norm(a; post_attn_norm)
 *   x = x + a
 *   h = norm(x; ffn_norm, ffn_norm_b)
 *   m = act(h Wgate^T + bgate) * (h Wup^T + bup)   (gated; fused Wgate_up rows gate | up), or act(h Wup^T + bup)
 *   m = m Wdown^T + bdown;  m = norm(m; post_ffn_norm);  x = x + m
 * with x0 = embed_scale * embed[token] (+ pos_embed[position]) and logits = softcap(norm(x; final_norm) lm_head^T).
 * Every norm is of the config's kind; absent optional pieces are skipped. */

typedef enum ha_norm {
    HA_NORM_RMS = 0,          /* w * x / sqrt(mean(x^2) + eps)        (Llama's RMSNorm) */
    HA_NORM_RMS_ONE_PLUS = 1, /* (1 + w) * x / sqrt(mean(x^2) + eps)  (Gemma's) */
    HA_NORM_LAYER = 2         /* w * (x - mean) / sqrt(var + eps) + b (LayerNorm; b optional) */
} ha_norm;

typedef enum ha_act {
    HA_ACT_SILU = 0,      /* x * sigmoid(x) */
    HA_ACT_GELU_TANH = 1, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    HA_ACT_GELU = 2,      /* 0.5 x (1 + erf(x / sqrt(2))) */
    HA_ACT_RELU = 3
} ha_act;

/* Which rotary table a layer uses. */
typedef enum ha_rope { HA_ROPE_GLOBAL = 0, HA_ROPE_LOCAL = 1, HA_ROPE_NONE = 2 } ha_rope;

typedef struct ha_llama_config {
    int64_t vocab_size;         /* V */
    int64_t hidden_size;        /* d */
    int64_t intermediate_size;  /* f */
    int64_t n_layers;
    int64_t n_heads;            /* nh */
    int64_t n_kv_heads;         /* nkv; nh % nkv == 0 (GQA), nkv == 1 is MQA */
    int64_t head_dim;           /* hd, <= HA_MAX_HEAD_DIM */
    float norm_eps;             /* > 0 */
    ha_norm norm;
    ha_act act;
    int ungated_mlp;            /* 0: act(gate) * up; 1: act(up), no gate (GPT-2) */
    float embed_scale;          /* multiplies embedding rows; 0 means 1 */
    float attn_softcap;         /* > 0: scores s -> cap * tanh(s / cap); 0: off */
    float final_softcap;        /* > 0: logits likewise; 0: off */
    int64_t rope_dim;           /* rotary over each head's first rope_dim dims, pairs (j, j + rope_dim/2); even,
                                   <= hd; 0 means hd when rope_inv_freq is given, else no rotary */
    const double *rope_inv_freq;       /* (rope_dim/2,) any scaling applied; NULL: no rotary; copied at create */
    const double *rope_inv_freq_long;  /* (rope_dim/2,) or NULL: longrope's long table, chosen per append below */
    int64_t rope_long_from;     /* with a long table: an append rotates every token it adds to a sequence with the
                                   long table when the last position it adds there is >= rope_long_from (the
                                   sequence then holds more than rope_long_from positions: Transformers' Phi-3
                                   seq_len > original_max_position_embeddings), else with rope_inv_freq; the keys
                                   already cached keep the rotation of the append that wrote them */
    const double *rope_inv_freq_local; /* (rope_dim/2,) or NULL: the table of layers with rope HA_ROPE_LOCAL */
    float rope_scale;           /* multiplies cos and sin (longrope's attention factor); 0 means 1 */
} ha_llama_config;

#define HA_MAX_HEAD_DIM 512

typedef struct ha_llama_layer {
    ha_vector attn_norm, attn_norm_b;    /* (d,), optional (d,) (LayerNorm's bias) */
    ha_matrix wq, wk, wv;                /* (nh*hd, d), (nkv*hd, d), (nkv*hd, d); or all absent and */
    ha_matrix wqkv;                      /* (nh*hd + 2*nkv*hd, d) fused, rows q | k | v */
    ha_matrix wo;                        /* (d, nh*hd) */
    ha_vector bq, bk, bv, bqkv, bo;      /* optional biases (nh*hd,), (nkv*hd,), (nkv*hd,), (nh*hd+2*nkv*hd,), (d,) */
    ha_vector q_norm, k_norm;            /* optional, both or neither: (hd,) per-head norms before rotary */
    ha_vector post_attn_norm;            /* optional (d,): norm of the attention output before the residual add */
    ha_vector ffn_norm, ffn_norm_b;      /* (d,), optional (d,) */
    ha_matrix w_gate, w_up;              /* (f, d) each (no w_gate when ungated); or both absent and */
    ha_matrix w_gate_up;                 /* (2f, d) fused, rows gate | up */
    ha_matrix w_down;                    /* (d, f) */
    ha_vector b_gate, b_up, b_down;      /* optional (f,), (f,), (d,) */
    ha_vector post_ffn_norm;             /* optional (d,): norm of the MLP output before the residual add */
    int64_t window;                      /* 0: attend to the whole past; w > 0: key j visible from p iff p - j < w */
    ha_rope rope;
    float attn_scale;                    /* multiplies q.k; 0 means 1/sqrt(hd) */
} ha_llama_layer;

typedef struct ha_llama_weights {
    ha_matrix embed;             /* (V, d) */
    ha_matrix pos_embed;         /* optional (P, d): learned positions, added to the embedding; P bounds a cache */
    ha_vector final_norm, final_norm_b; /* (d,), optional (d,) */
    ha_matrix lm_head;           /* (V, d); may be the same buffer as embed (tied) */
    const ha_llama_layer *layers; /* (n_layers,) copied at create; the buffers they point to are borrowed */
} ha_llama_weights;

/* Repacks src (HA_F32, HA_BF16 or HA_F16, row-major) into dst, the same matrix as HA_F32P, HA_BF16P or
 * HA_F16P with dst_bytes == ha_matrix_bytes(that dtype, rows, cols); values are copied bit for bit. Uses the
 * thread pool. */
HA_API ha_status ha_pack(const ha_matrix *src, void *dst, size_t dst_bytes);

/* Quantizes src (float32, bfloat16 or float16) into dst, a matrix of the same shape and dtype `to` (HA_Q8,
 * HA_Q8P or HA_Q4) with dst_bytes == ha_matrix_bytes(to, rows, cols): per group, scale = max|w| / 127 and
 * q = round(w * (127 / max|w|)) (int4: 7 for 127); HA_Q8P holds HA_Q8's values in panels. HA_BF16X: each weight
 * rounded to bfloat16 as ha_bf16_round does (a bfloat16 source's bits kept, subnormals made zeros), in pair
 * panels. Uses the thread pool. */
HA_API ha_status ha_quantize(const ha_matrix *src, ha_dtype to, void *dst, size_t dst_bytes);

typedef struct ha_llama ha_llama;

/* Checks every dimension, dtype and buffer size against cfg; on success *out owns a model that
 * borrows the weight buffers. */
HA_API ha_status ha_llama_create(const ha_llama_config *cfg, const ha_llama_weights *w, ha_llama **out);
HA_API void ha_llama_free(ha_llama *m);
/* Bytes of weights one token's forward reads (every matrix once; the embedding row not counted). */
HA_API int64_t ha_llama_weight_bytes(const ha_llama *m);

/* ---- the model interface ------------------------------------------------------------------------
 * What the generation loops drive, and all they know of a model. A model here is a set of n_seq
 * sequences, each with its own KV cache of `capacity` positions. */
typedef struct ha_lm {
    void *self;
    int64_t vocab_size;
    int64_t n_seq;
    int64_t capacity;
    /* Append n tokens: token i goes to sequence seq[i] at that sequence's next position (tokens of one
     * sequence are in order). For each i with want[i] != 0 (want == NULL: every i), in order, one row of
     * logits (V,) is written to logits (n_wanted, V). Requires 0 <= tokens[i] < V, 0 <= seq[i] < n_seq,
     * and room in each sequence's cache; otherwise returns an error having appended nothing (as it does
     * when the interrupt stops it: HA_ERR_INTERRUPTED; except that a model with sliding-window rings empties a
     * sequence whose rings the stopped append had already overwritten, as the message says). Each row's
     * logits are bitwise the same whatever else is in the call and whatever the thread count (a native
     * context with blas_prefill excepts the prompt blocks it sends to OpenBLAS: ha_llama_context_create; a model
     * with rope_switch, an append that adds tokens on both sides of it to one sequence). */
    ha_status (*append)(void *self, int64_t n, const int32_t *seq, const int32_t *tokens, const uint8_t *want,
                        float *logits);
    /* Keep the first len positions of sequence seq; O(1). Requires 0 <= len <= length(seq), and where the model
     * keeps sliding-window layers in rings, that no position above len + max_rollback was written since the
     * positions the window needs below len were (else HA_ERR_UNSUPPORTED, nothing changed): dropping up to
     * max_rollback positions from the end always works. */
    ha_status (*crop)(void *self, int32_t seq, int64_t len);
    int64_t max_rollback; /* >= 1; INT64_MAX where every crop works */
    /* 0, or S > 0 where an append computes its tokens differently once it takes a sequence past S positions
     * (longrope: ha_llama_config.rope_long_from), so that an append of tokens on both sides of S is not the same
     * as appending them one at a time. Generation keeps such a model exact and as Transformers' Phi-3 generate():
     * a verification never scores positions on both sides of S, and the append that takes a sequence whose cache
     * holds <= S positions past S is made whole, from an empty cache (crop to 0: Transformers drops its cache and
     * runs the whole sequence again there), so that every token after S is computed as by one forward of all the
     * sequence before it. */
    int64_t rope_switch;
    /* Positions held by sequence seq (0 if seq is out of range). */
    int64_t (*length)(const void *self, int32_t seq);
    /* Token trees (optional: NULL where the model has none, and generation then verifies chains only).
     * append_tree: n nodes, node i of sequence seq[i] with parent parent[i]: -1 (the node follows the tree's
     * base: depth 0), an earlier node of the same call and sequence, or -2 - j: node j of the sequence's tree
     * from its earlier append_tree calls (depth: the parent's + 1); a sequence's nodes are one after the other in
     * the call. A sequence's tree is its nodes since its base in call order, node 0 first: a call with a node of
     * parent <= -2 continues the sequence's tree (its nodes follow the tree's, base unchanged), any other call
     * starts a new one (base: the sequence's length before the call); the sequence's next append, crop to another
     * length or keep_path ends it. A tree holds at most max_tree nodes. Node i is at position base + depth:
     * rotary, learned positions and windows as there; it attends to the cache below base and to its ancestors and
     * itself, in position order, nothing else. Its logits row (want and logits as append's) is bitwise what
     * appending its path one token at a time gives (ha_lm.append's exceptions apply: a model with rope_switch, a
     * tree with nodes on both sides of it). After the call the sequence holds base + (its tree's nodes)
     * positions: crop it back to base, keep a path, or continue the tree. Errors as append's: nothing appended.
     * keep_path: nodes (n,) strictly increasing indices among the nodes of sequence seq's tree, a path from depth 0
     * down; their keys and values move to positions base, base + 1, ... (base: the tree's) and the sequence then
     * holds base + n positions: what appending those n tokens gives, bitwise, in O(n) copies. HA_ERR_UNSUPPORTED
     * where sliding-window rings no longer hold them (a path is kept right after its tree), nothing changed. */
    ha_status (*append_tree)(void *self, int64_t n, const int32_t *seq, const int32_t *tokens, const int32_t *parent,
                             const uint8_t *want, float *logits);
    ha_status (*keep_path)(void *self, int32_t seq, int64_t base, const int32_t *nodes, int64_t n);
    int64_t max_tree; /* with append_tree: nodes of a sequence's tree, >= 1 */
} ha_lm;

typedef struct ha_llama_context ha_llama_context;

/* A KV cache for n_seq sequences of up to `capacity` positions each, plus every activation buffer the
 * forward needs: allocated here once, so append never allocates. A layer with a window w keeps only
 * w + 256 positions per sequence, in a ring, when that is fewer than capacity (then lm.max_rollback is 256). A
 * model with learned positions (pos_embed) refuses a capacity beyond its rows.
 * blas_prefill != 0: an append that starts a sequence (empty before it) with n of its tokens computes the
 * first 128 * floor(n / 128) of them through OpenBLAS's sgemm, 128 at a time (prompt prefill, for weights and
 * CPUs where a tuned sgemm outruns the kernels: benchmarks/bench_prefill.py compares the two; it keeps their
 * activations float32). Those rows depend only on those tokens (not on the thread count), so greedy and coupled
 * assisted generation still equal plain generation bitwise, but they are not bitwise the rows a token-by-token
 * forward gives (they agree to float32 rounding). 0: every row through the kernels. (The Python package
 * passes 0 unless the model is loaded with blas_prefill=True.) */
HA_API ha_status ha_llama_context_create(const ha_llama *m, int64_t n_seq, int64_t capacity, int blas_prefill,
                                         ha_llama_context **out);
HA_API void ha_llama_context_free(ha_llama_context *c);
/* The context's model interface; valid for the context's life. */
HA_API ha_lm *ha_llama_context_lm(ha_llama_context *c);
/* 1 if crop(seq, len) would succeed now, else 0 (a caller cropping several sequences checks them all first). */
HA_API int ha_llama_context_can_crop(const ha_llama_context *c, int32_t seq, int64_t len);
/* The next append, which must be of n tokens, also writes every token's hidden states into out
 * (n_layers + 1, n, hidden_size) float32, in Transformers' output_hidden_states order: the embeddings (scaled,
 * plus learned positions where the family has them), the output of layers 0 .. n_layers - 2, then the last
 * layer's output after the final norm. The request lasts for that one append (whatever it returns); out == NULL
 * cancels it. HA_ERR_INVALID for n < 1 or out_floats other than (n_layers + 1) * n * hidden_size. */
HA_API ha_status ha_llama_context_record_hidden(ha_llama_context *c, float *out, size_t out_floats, int64_t n);
/* Moving a cache's keys and values (the Python Cache classes' growth and Transformers' legacy tuples):
 * copy: every sequence of src (same model, same number of sequences) into dst, whose capacity holds them; each
 *   layer keeps what it can (a sliding window's ring its last positions), and dst's sequences then hold exactly
 *   src's lengths, and can be cropped back exactly as far as src's (into a capacity of src's or larger: a clone,
 *   Python's copy.deepcopy of a cache);
 * kv_first: the first position layer `layer` of sequence seq still holds (0, or later in a sliding window's ring);
 * read_kv: positions [first, first + n) of one layer and sequence, held ones only, into k and v, each
 *   (n_kv_heads, n, head_dim) float32 (`floats` of them, checked): keys as attention reads them (after q/k norm
 *   and rotary);
 * write_kv: the same layout into positions [first, first + n) (below capacity), for set_length to make them
 *   the sequence's: set_length(seq, len) sets what it holds to positions [0, len) (len <= capacity), whatever was
 *   written there. */
HA_API ha_status ha_llama_context_copy(ha_llama_context *dst, const ha_llama_context *src);
HA_API int64_t ha_llama_context_kv_first(const ha_llama_context *c, int64_t layer, int32_t seq);
HA_API ha_status ha_llama_context_read_kv(const ha_llama_context *c, int64_t layer, int32_t seq, int64_t first,
                                          int64_t n, float *k, float *v, size_t floats);
HA_API ha_status ha_llama_context_write_kv(ha_llama_context *c, int64_t layer, int32_t seq, int64_t first, int64_t n,
                                           const float *k, const float *v, size_t floats);
HA_API ha_status ha_llama_context_set_length(ha_llama_context *c, int32_t seq, int64_t len);

/* ---- sampling --------------------------------------------------------------------------------------
 * Logits processing with Transformers' semantics and in its order (GenerationMixin._get_logits_processor):
 *   sequence_bias, repetition_penalty, no_repeat_ngram_size, bad_words_ids, min length (min_new_tokens),
 *   forced_bos_token_id, forced_eos_token_id, remove_invalid_values, exponential_decay_length_penalty,
 *   suppress_tokens, begin_suppress_tokens, the caller's processors (on_logits), then when sampling
 *   temperature, top_k, top_p, min_p, typical_p, epsilon_cutoff, eta_cutoff, and last renormalize_logits;
 * and draws from a counter-based generator keyed by (seed, row, position, purpose): the noise used at a
 * position never depends on how the tokens before it were computed. Processors that look at earlier tokens
 * see the row's own tokens (its prompt without padding, then what it generated before the position). */

/* n token sequences with a value each: sequence i is tokens[offsets[i], offsets[i + 1]), non-empty. */
typedef struct ha_token_seqs {
    const int32_t *tokens;  /* (offsets[n],) */
    const int64_t *offsets; /* (n + 1,): offsets[0] == 0, strictly increasing */
    const float *values;    /* (n,); bad_words ignores it */
    int64_t n;              /* 0: none */
} ha_token_seqs;

/* The caller's logits processors (Transformers' logits_processor= list): called once per processed row with
 * the row, its tokens so far (n,) and its scores (vocab,), after the built-in processors and before the
 * sampling warpers, to change the scores in place. Called from the thread that made the core call, for the
 * target's scores and a draft model's alike. Returns 0 to go on; anything else stops the work, which returns
 * HA_ERR_CALLBACK. */
typedef int (*ha_logits_callback)(void *user, int64_t row, const int32_t *tokens, int64_t n, float *scores,
                                  int64_t vocab);

/* Every field after seed is off when zero (NULL, 0): a struct that sets only the first six keeps its
 * meaning. "step" is the index of the new token being chosen (0 for the first after the prompt). */
typedef struct ha_sampling_params {
    int do_sample;             /* 0: greedy (argmax, first index on ties) */
    float temperature;         /* > 0; used when do_sample */
    int64_t top_k;             /* 0: off */
    float top_p;               /* (0, 1]; 1: off */
    float repetition_penalty;  /* > 0; 1: off */
    uint64_t seed;
    ha_token_seqs sequence_bias;      /* value added to the score of a sequence's last token where the row's
                                         tokens end with the rest of it (always, for one-token sequences);
                                         sequences longer than the row's tokens are skipped, as Transformers */
    int64_t no_repeat_ngram_size;     /* > 0: a token that would complete an n-gram already in the row is -inf */
    ha_token_seqs bad_words;          /* -inf for a sequence's last token where the row ends with the rest */
    const int32_t *eos;               /* (n_eos,) -inf while step < min_new_tokens; also the tokens that */
    int64_t n_eos;                    /* exponential decay raises */
    int64_t min_new_tokens;
    const int32_t *forced_bos;        /* (n_forced_bos,) at step 0 every other token is -inf and these 0 */
    int64_t n_forced_bos;             /* (callers pass it only where Transformers' cur_len == 1 holds there) */
    const int32_t *forced_eos;        /* (n_forced_eos,) likewise at step forced_eos_step */
    int64_t n_forced_eos;
    int64_t forced_eos_step;
    int remove_invalid_values;        /* NaN -> 0, +inf -> FLT_MAX, -inf -> -FLT_MAX */
    float decay_factor;               /* > 0: for step > decay_start, each eos score s += |s| * */
    int64_t decay_start;              /*       (decay_factor^(step - decay_start) - 1); 0: off */
    const int32_t *suppress;          /* (n_suppress,) always -inf */
    int64_t n_suppress;
    const int32_t *begin_suppress;    /* (n_begin_suppress,) -inf at step begin_suppress_step */
    int64_t n_begin_suppress;
    int64_t begin_suppress_step;
    ha_logits_callback on_logits;     /* NULL: none */
    void *logits_user;
    float min_p;                      /* [0, 1]; sampling: tokens below min_p * the top probability go; 0: off */
    float typical_p;                  /* (0, 1); sampling: locally typical sampling's mass; 0 or 1: off */
    float epsilon_cutoff;             /* (0, 1); sampling: tokens of probability below it go; 0: off */
    float eta_cutoff;                 /* (0, 1); sampling: eta sampling; 0: off */
    int renormalize;                  /* != 0: log_softmax last (Transformers' renormalize_logits) */
} ha_sampling_params;

enum { HA_RNG_SAMPLE = 1, HA_RNG_ACCEPT = 2, HA_RNG_RESIDUAL = 3 };

/* Uniform double in (0, 1), a pure function of its arguments (Philox4x32-10). */
HA_API double ha_rng_uniform(uint64_t seed, uint32_t row, uint32_t position, uint32_t purpose, uint32_t index);

typedef struct ha_sampler ha_sampler;
/* Scratch for processing rows of V logits; allocated once per generation. Checks every parameter (token ids
 * in [0, V), offsets, ranges) and copies the arrays p points to (a caller's callback may rewrite its own
 * during a generation; the sampler goes on with what it checked). */
HA_API ha_status ha_sampler_create(const ha_sampling_params *p, int64_t vocab_size, ha_sampler **out);
HA_API void ha_sampler_free(ha_sampler *s);
/* In place: scores (V,) raw logits of row `row` -> processed scores (-INFINITY where removed). history (n,)
 * are the row's tokens before the scored position, step the index of the new token it chooses. Returns
 * HA_ERR_CALLBACK if on_logits asked to stop (scores are then undefined), else HA_OK. */
HA_API ha_status ha_sampler_process(ha_sampler *s, float *scores, int64_t row, const int32_t *history,
                                    int64_t n_history, int64_t step);
/* The token chosen from processed scores: argmax when greedy, else a draw from softmax(scores) by the
 * Gumbel-max rule with noise keyed by (seed, row, position, HA_RNG_SAMPLE, token). -1 if every score is
 * -inf or NaN. */
HA_API int32_t ha_sampler_choose(const ha_sampler *s, const float *scores, uint32_t row, uint32_t position);

/* ---- generation ----------------------------------------------------------------------------------- */

/* How a generated token was decided (ha_generate_params.sources). */
typedef enum ha_token_source {
    HA_SOURCE_NONE = 0,      /* no token: the row had stopped (or the call ended) before this column */
    HA_SOURCE_PLAIN = 1,     /* the target's own, with nothing drafted for it (plain decoding, a round of K = 0) */
    HA_SOURCE_ACCEPTED = 2,  /* a draft token the target accepted */
    HA_SOURCE_CORRECTED = 3, /* the target's own, after it rejected the draft token at this position */
    HA_SOURCE_BONUS = 4      /* the target's own, after it accepted every draft token of the round */
} ha_token_source;

/* Told the tokens a step decided for one row, as soon as they are decided (plain generation: one token per
 * running row per step; assisted: a row's accepted tokens and the target's own, together). Returns 0 to go
 * on; anything else stops the generation, which then returns HA_ERR_CALLBACK. */
typedef int (*ha_token_callback)(void *user, int64_t row, const int32_t *tokens, int64_t n);

/* The caller's stopping criteria (Transformers' stopping_criteria= and stop_strings): called once per decided
 * token, in order, with the row's tokens up to and including it (n,) and the processed scores it was chosen
 * from (vocab,), before the token callback sees it. Returns 0 to go on, 1 to end the row after this token
 * (as an eos does), anything else stops the work with HA_ERR_CALLBACK. */
typedef int (*ha_stop_callback)(void *user, int64_t row, const int32_t *tokens, int64_t n, const float *scores,
                                int64_t vocab);

typedef struct ha_generate_params {
    int64_t max_new_tokens;     /* >= 1 */
    const int32_t *eos;         /* (n_eos,) stop tokens (min_new_tokens is the sampler's: sampling.eos) */
    int64_t n_eos;
    int32_t pad_token_id;       /* written after a row has stopped */
    double max_time;            /* seconds; > 0: no step starts once this much time has passed since the call
                                   began, and the tokens so far are returned (Transformers' max_time); assisted
                                   generation checks it between rounds and gives every row its first round
                                   even past it (rows then padded are not rows that met an eos); 0: off */
    ha_sampling_params sampling;
    ha_token_callback on_tokens; /* NULL: none */
    void *user;                  /* passed to on_tokens */
    ha_stop_callback should_stop; /* NULL: none */
    void *stop_user;
    float *logits_out;           /* NULL, or (max_new_tokens, n_seq, V): each step's raw logits, as the scores
                                    argument holds processed ones (Transformers' output_logits) */
    uint8_t *sources;            /* NULL, or (n_seq, max_new_tokens): how each new token was decided, an
                                    ha_token_source (ha_generate: HA_SOURCE_PLAIN), HA_SOURCE_NONE where out is
                                    padding */
    int no_cache;                /* ha_generate only: each step recomputes every running row's whole sequence
                                    from an empty cache (use_cache=False): the same logits, bitwise, by batch
                                    invariance, at quadratic cost */
    double *seconds;             /* NULL, or (HA_SECONDS,) written: where the call's time went (ha_seconds) */
} ha_generate_params;

/* ha_generate_params.seconds: the call's wall-clock time and its parts, in seconds (each part a sum of intervals
 * inside the call, so their sum is at most HA_SECONDS_ALL; the rest is sampling, acceptance and callbacks):
 * HA_SECONDS_PREFILL the target's append of the prompts, and with a draft model also the draft's appends that take
 * in a row's whole sequence (its first: the prompt); HA_SECONDS_TARGET the target's other appends (plain decoding's
 * steps, assisted generation's verifications); HA_SECONDS_DRAFT the draft's other appends (its steps; 0 in plain
 * generation and prompt lookup); HA_SECONDS_ALL the whole call. */
enum { HA_SECONDS_PREFILL, HA_SECONDS_TARGET, HA_SECONDS_DRAFT, HA_SECONDS_ALL, HA_SECONDS };

/* Plain generation for the n_seq rows of lm, whose caches must be empty.
 * prompt (n_seq, prompt_width) int32, left padded: row b's tokens are prompt[b, start[b]:], at least one.
 * out (n_seq, max_new_tokens) int32 receives the new tokens, pad_token_id after a row stopped and after the
 * last step; scores, if not NULL, (max_new_tokens, n_seq,
 * V) float32 receives the processed scores of each step (-INFINITY for rows already stopped).
 * *n_steps is the number of steps taken: generation ends when every row produced an eos or after
 * max_new_tokens. */
HA_API ha_status ha_generate(ha_lm *lm, const ha_generate_params *p, const int32_t *prompt, int64_t prompt_width,
                             const int64_t *start, int32_t *out, float *scores, int64_t *n_steps);

/* ---- assisted generation -------------------------------------------------------------------------- */

typedef enum ha_schedule {
    HA_SCHEDULE_CONSTANT = 0,            /* K stays num_assistant_tokens */
    HA_SCHEDULE_HEURISTIC = 1,           /* K += 2 after a draft fully accepted, else K = max(1, K - 1) */
    HA_SCHEDULE_HEURISTIC_TRANSIENT = 2, /* the same rule; the caller resets K at each call */
    HA_SCHEDULE_COST = 3                 /* each round, each row's K in 0 .. num_assistant_tokens (at most 32) that
                                            maximizes expected tokens per unit of time, from the costs and the call's
                                            running acceptance by draft position (pooled over its rows); K = 0 is a
                                            plain decoding step */
} ha_schedule;

typedef enum ha_acceptance {
    HA_ACCEPT_REJECTION = 0, /* sampling: min(1, p/q), residual max(0, p - q), bonus from p (Chen et al. 2023) */
    HA_ACCEPT_COUPLED = 1    /* sampling: draft and target share position-keyed noise; accept iff equal */
} ha_acceptance;

#define HA_COST_STATE \
    104    /* ha_assist_params.cost_state: 2 x 32 by draft position, 2 x 10 by draft probability,
                                * 2 x 10 a tree's alternatives by probability */
#define HA_COST_MEMORY 512.0 /* candidates the carried counts stand for at most */

/* A record of each round's verified tree (ha_assist_params.tree_record), what the notebook view draws. For row b and
 * its round i < n_rounds[b] (the row's target passes, in order): rounds[(b * max_new_tokens + i) * HA_TREE_FIELDS +
 * f] for the fields f below, and nodes[((b * max_new_tokens + i) * 3 + a) * max_nodes + j] for a = 0 the tokens of
 * its verified nodes (catch-up first, then in the target's append order), a = 1 each node's parent (its index among
 * the round's nodes; -1 for a root, a node at depth 0), a = 2 the accepted path's node indices from a root down
 * (HA_TREE_PATH of them: node d of the path has depth d and sits at out's column HA_TREE_START -
 * HA_TREE_CATCH_UP + d). Bounded: rounds <= max_new_tokens per row, nodes <= the target's max_tree per round. */
enum {
    HA_TREE_START,    /* out's column of the round's first new token (the row's tokens generated before it) */
    HA_TREE_CATCH_UP, /* nodes on the path that were decided before the round (the target's token of the last) */
    HA_TREE_NODES,    /* nodes verified: the catch-up and the drafted nodes */
    HA_TREE_PATH,     /* nodes of the accepted path that reached out: the catch-up, then the drafts accepted (those
                         after an eos or a stopping criterion's end left out) */
    HA_TREE_FIELDS
};
typedef struct ha_tree_record {
    int64_t max_nodes; /* nodes a round holds, >= the target's max_tree (else HA_ERR_INVALID) */
    int64_t *n_rounds; /* (B,) written: rounds recorded per row */
    int64_t *rounds;   /* (B, max_new_tokens, HA_TREE_FIELDS) written */
    int32_t *nodes;    /* (B, max_new_tokens, 3, max_nodes) written (entries past a round's count left as they are) */
} ha_tree_record;

typedef struct ha_assist_params {
    ha_generate_params gen;
    int64_t num_assistant_tokens;     /* K at the start of the call, >= 1 */
    ha_schedule schedule;
    float confidence_threshold;       /* the draft stops after a token it gives probability < this; 0: off */
    ha_acceptance acceptance;         /* used when gen.sampling.do_sample */
    int64_t prompt_lookup_num_tokens; /* without a draft model: tokens proposed by n-gram lookup, >= 1 */
    int64_t max_matching_ngram_size;  /* without a draft model: largest n-gram tried, >= 1 */
    /* HA_SCHEDULE_COST's costs, in any one unit: draft_costs (n_draft_costs,) one draft append of one token for
     * each of 1 .. n_draft_costs rows drafting together (n_draft_costs >= 1, each >= 0; prompt lookup: {0}), and
     * target_costs (n_target_costs,) one target append of T = 1 .. n_target_costs tokens (1..64 values, each > 0).
     * Past either table the cost follows the line through its last two points (the draft's one point: flat; the
     * target's: T * t(1)). Else unused. */
    const double *draft_costs;
    int64_t n_draft_costs;
    const double *target_costs;
    int64_t n_target_costs;
    /* HA_SCHEDULE_COST: draft_first_costs (n_draft_first_costs,) a round's first draft step, for 1 .. n rows as
     * draft_costs: it runs right after the target's append, which streamed the target's weights through the caches
     * and evicted the draft's (each >= 0, 1..64 values; NULL with 0: draft_costs). Else unused. */
    const double *draft_first_costs;
    int64_t n_draft_first_costs;
    /* HA_SCHEDULE_COST: NULL (the call learns its acceptance from nothing, so the same call makes the same K
     * choices), or (HA_COST_STATE,) counts of tested and accepted candidates (by draft position, and by tenth of the
     * draft's probability) that the call starts from and leaves its own in: calls of one model pair then learn from
     * each other, as Transformers' heuristic carries K from call to call. Zeros the first time; counts >= 0, finite,
     * accepted <= tested, else HA_ERR_INVALID. Past HA_COST_MEMORY candidates the carried counts are scaled down
     * (a window over the latest calls); a row that planned no candidate for 16 rounds drafts one, so that counts
     * saying no draft is worth it are checked again. */
    double *cost_state;
    /* Nonzero: while the target's append verifies a round, a second thread drafts ahead (generation/assist_ahead.c:
     * the next round's candidates after a guess of the target's token, used where the round accepts every candidate
     * and the guess is right). Same output, scores and statistics as without; for a target whose append leaves the
     * host's cores idle (an accelerator behind a callback). The draft's append is then called from that thread too,
     * so it must not need the caller's thread (a native context's does not; the binding passes 0 for other drafts).
     * Off without a model draft or with sampling.on_logits (a callback the caller's thread must run). */
    int overlap;
    /* Token trees: 0 or 1, chains; w > 1, each draft step's candidate comes with up to w - 1 siblings, the draft's
     * next most probable tokens at its position (by its processed scores; no extra draft passes), and one target
     * append_tree per round scores every row's chain and siblings (generation/assist_tree.c). Acceptance walks the
     * chain and steps onto a sibling that is the target's own token (greedy: its argmax; coupled: its seeded sample),
     * so the output stays bitwise the plain output; rejection sampling walks the chain by min(1, p/q) and offers the
     * siblings to the residual one by one (recursive rejection sampling), so the output is distributed exactly as
     * the target's. Prompt lookup (no draft): the n-gram's later matches branch off the chain as siblings, accepted
     * by equality as its chains are. Needs a target with append_tree (else HA_ERR_UNSUPPORTED naming what works), and
     * w < target->max_tree; a round's candidates are then at most (max_tree - 1) / w, and
     * at most (capacity - L) / w for a row of L tokens (the tree's nodes take cache positions past it); no overlap.
     * With HA_SCHEDULE_COST, w is the widest: a sibling is kept only where it raises the round's expected tokens per
     * unit time at the measured t(T) (assist_cost.c, ha_cost_siblings), so where width is not cheap rounds verify
     * chains. */
    int64_t tree_width;
    /* With tree_width w > 1 and a model draft: 0, sibling trees (above); 1, dynamic trees (EAGLE-2's shape,
     * generation/assist_dyntree.c): the root's and every expanded node's children are the draft's chosen token and
     * its w - 1 next most probable; at each depth the draft expands the w nodes of highest cumulative probability
     * (the product of its probabilities along the path), all rows' in one append_tree per depth, each continuing the
     * row's tree of the depths before (the draft then needs append_tree and keep_path, max_tree >= w (K - 1), and
     * cache room past each row's tokens for that many nodes); the target verifies the K nodes (a chain's
     * candidates: K is the tree's budget and its deepest depth) of highest cumulative probability, ancestor-closed,
     * each node's chosen child first (with HA_SCHEDULE_COST: as many as raise the round's expected tokens per unit
     * time); the draft expands no node that K nodes drafted already beat (none of its descendants could be verified). Acceptance walks the tree from
     * the root as for siblings: bitwise plain output for greedy and coupled, the target's distribution for
     * rejection sampling. Not with prompt lookup (HA_ERR_INVALID). */
    int tree_dynamic;
    /* NULL, or with tree_width > 1 (else HA_ERR_INVALID) where each round's tree is recorded (ha_tree_record) */
    ha_tree_record *tree_record;
} ha_assist_params;

typedef struct ha_assist_stats {
    int64_t num_draft_tokens;     /* proposed */
    int64_t num_accepted_tokens;  /* proposed and kept */
    int64_t num_target_passes;    /* verifying target appends, one per round and row (the prefill not counted, nor
                                     a row's run again whole past a rope switch: ha_lm.rope_switch) */
    int64_t num_draft_passes;     /* draft appends (the first also takes in the prompt) */
    int64_t num_assistant_tokens; /* K when the call ended (what a heuristic schedule carries on); each row
                                     starts from the call's K, and this is the last row's */
    int64_t num_rounds;           /* rounds: target appends that verified (all rows' together) */
    int64_t num_ahead_passes;     /* with overlap: draft appends made ahead, beside the target's (per row; not in
                                     num_draft_passes) */
    int64_t num_ahead_used;       /* with overlap: draft passes that read logits drafted ahead instead of appending
                                     (counted in num_draft_passes, as the passes they stand for) */
    int64_t num_sibling_tokens;   /* trees: siblings proposed (counted in num_draft_tokens, the nodes verified;
                                     dynamic trees: the verified nodes off the chain of the draft's chosen tokens) */
    int64_t num_sibling_accepted; /* trees: siblings accepted (counted in num_accepted_tokens; dynamic: nodes off
                                     that chain) */
    int64_t *proposed_at;         /* (max_new_tokens,) or NULL: drafts proposed at draft position j (trees: nodes
                                     at depth j, siblings included) */
    int64_t *accepted_at;         /* (max_new_tokens,) or NULL: drafts accepted at draft position j */
} ha_assist_stats;

/* Assisted generation for the n_seq rows of target (and draft: the same n_seq and vocabulary; NULL for
 * prompt lookup), caches empty. Arguments as ha_generate; every row is its own sequence in both models, with its
 * own K, acceptance and end, and the rows run together: all prompts in one target append (as ha_generate), then
 * rounds of one draft append per draft step over the rows still drafting and one target append verifying every
 * unfinished row. Greedy output is bitwise the output of ha_generate, row by row; so is coupled sampling's.
 * Rejection sampling's output is distributed exactly as the target's. stats may be NULL; its counts other than
 * num_rounds are sums over the rows of what each row did. */
HA_API ha_status ha_generate_assisted(ha_lm *target, ha_lm *draft, const ha_assist_params *p, const int32_t *prompt,
                                      int64_t prompt_width, const int64_t *start, int32_t *out, float *scores,
                                      int64_t *n_steps, ha_assist_stats *stats);

/* ---- BPE merges (tokenizer.json's BPE model; csrc/tokenizer/bpe.c) -----------------------------------
 * A word's first symbols are its code points' ids (chars[i] -> char_ids[i]); a code point not among them becomes
 * the ids of its UTF-8 bytes where byte_ids (256 entries, -1 for a byte without one) has all of them (byte
 * fallback), else unk_id (consecutive unknown code points fused into one unk where fuse_unk). Then the adjacent
 * pair of lowest rank is merged into its result until none is left, leftmost first on ties: Hugging Face
 * tokenizers' Word::merge_all. merges: (n_merges, 3) int32 rows of left id, right id, result id; a row's rank is
 * its index, and a pair listed twice keeps its later rank. Every id is checked against vocab_size at create. */
typedef struct ha_bpe ha_bpe;
HA_API ha_status ha_bpe_create(const int32_t *merges, int64_t n_merges, const uint32_t *chars, const int32_t *char_ids,
                               int64_t n_chars, const int32_t *byte_ids, int32_t unk_id, int fuse_unk,
                               int64_t vocab_size, ha_bpe **out);
HA_API void ha_bpe_free(ha_bpe *b);
/* word: n code points -> ids[0 .. *n_ids); cap >= 4 n (byte fallback gives up to 4 ids per code point). Reads
 * only b, so one ha_bpe serves any number of threads. HA_ERR_INVALID for a value above U+10FFFF or a code point
 * with no id, no byte fallback and no unk_id. */
HA_API ha_status ha_bpe_encode(const ha_bpe *b, const uint32_t *word, int64_t n, int32_t *ids, int64_t cap,
                               int64_t *n_ids);

/* ---- threads, kernels, measurement ---------------------------------------------------------------- */

/* Threads used by every core call (the caller's thread counts as one); n >= 1. */
HA_API ha_status ha_set_num_threads(int n);
HA_API int ha_get_num_threads(void);
/* What the thread pool has done since it started (all zero when none runs): for tests and benchmarks. The pool runs
 * a job alone on the caller's thread now and then to time it, and for a while after its jobs stopped paying
 * (csrc/core/threadpool.c). */
typedef struct ha_pool_stats {
    int64_t jobs_pooled;   /* jobs offered to the workers */
    int64_t jobs_alone;    /* jobs of more than one piece the caller ran alone: to time them, or while the pool
                              did not pay */
    int64_t backoffs;      /* times the caller stopped offering jobs to the workers */
    int64_t caller_sleeps; /* times the caller slept waiting for a worker's piece */
    int64_t jobs_waking;   /* jobs offered while a worker slept (woken for them) */
    int64_t kinds_new;     /* kinds of job (function, size, key) met first, or again after others took their place */
    int workers_asleep;    /* workers asleep now, waiting for a job */
} ha_pool_stats;
HA_API void ha_pool_get_stats(ha_pool_stats *out);
/* Name of the kernel variant in use ("scalar", "avx2", ...), chosen once from the CPU and the
 * HA_KERNELS environment variable. */
HA_API const char *ha_kernels_name(void);
/* Chooses a variant by name; HA_ERR_UNSUPPORTED if this CPU or build lacks it. */
HA_API ha_status ha_kernels_select(const char *name);
/* The kernels OpenBLAS (blas_prefill's sgemm) chose for this CPU ("SkylakeX", "Haswell", "Prescott", ...): chosen
 * once, from cpuid or the OPENBLAS_CORETYPE environment variable, when the process first loads the library. */
HA_API const char *ha_blas_core(void);
/* Bytes of memory this process can still take: the kernel's MemAvailable, or less where the memory cgroup
 * mounted at /sys/fs/cgroup allows less; -1 where MemAvailable cannot be read (not Linux). */
HA_API double ha_available_memory(void);
/* Read bandwidth in bytes/s: every thread streams its share of a buffer of nbytes, `repeats` times. */
HA_API ha_status ha_measure_read_bandwidth(size_t nbytes, int repeats, double *bytes_per_s);
/* Peak multiply-adds per second of the kernel variant in use, every thread running independent chains from
 * registers: the compute roofline (a verification of T tokens needs T * weights multiply-adds). int_weights
 * 1: of the int16 x int16 products summed in int32 that the integer (int8, int4) weights' kernels run (their
 * activations quantized to int16), instead of float32 FMAs; 2: of the int8 x int8 products of the w8a8 class's
 * kernel (HA_Q8P). */
HA_API ha_status ha_measure_mac_rate(int repeats, int int_weights, double *macs_per_s);

#ifdef __cplusplus
}
#endif
#endif /* HA_H */
