/* The native decoder's context (ha_llama_context): the KV cache of n_seq sequences and every activation buffer a
 * forward needs, allocated once; the model interface (ha_lm) over it: append (through forward.c, a chunk at a
 * time), crop and length, and token trees (append_tree: whole sequences' trees a chunk at a time, each node's key and
 * value kept at the tree's base plus its index; keep_path: a path's moved into place).
 *
 * Sliding-window layers keep their keys and values in rings: a layer with window w holds w + HA_RING_SLACK
 * positions per sequence (position p at slot p mod that), when that is less than the cache's capacity. The
 * slack covers one chunk's writes before its attention reads (a chunk of T tokens needs T - 1 <= slack) and
 * the positions a crop may take back (ha_lm.max_rollback); a tree's nodes (at most CHUNK per sequence) overwrite
 * slots of positions more than the slack below the tree, which no node sees. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

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
        return ha_fail(HA_ERR_INTERRUPTED,
                       "interrupted; a sequence whose sliding-window layers this append had "
                       "overwritten was emptied, the others hold what they held before this append");
    return ha_fail(HA_ERR_INTERRUPTED, "interrupted; the cache holds what it held before this append");
}

static ha_status append_tokens(ha_llama_context *c, int64_t n, const int32_t *seq, const int32_t *tokens,
                               const uint8_t *want, float *logits);

/* One append, recording hidden states if asked (ha_llama_context_record_hidden): the request ends with it. */
static ha_status ctx_append(void *self, int64_t n, const int32_t *seq, const int32_t *tokens, const uint8_t *want,
                            float *logits) {
    ha_llama_context *c = self;
    ha_status st = c->hidden && n != c->hidden_n
                       ? ha_fail(HA_ERR_INVALID, "append: %lld tokens, but hidden states were requested for %lld",
                                 (long long)n, (long long)c->hidden_n)
                       : append_tokens(c, n, seq, tokens, want, logits);
    c->hidden = NULL;
    return st;
}

HA_API ha_status ha_llama_context_record_hidden(ha_llama_context *c, float *out, size_t out_floats, int64_t n) {
    if (!c) return ha_fail(HA_ERR_INVALID, "record_hidden: no context");
    const ha_llama_config *cfg = &c->m->cfg;
    if (out && (n < 1 || out_floats != (size_t)((cfg->n_layers + 1) * n * cfg->hidden_size)))
        return ha_fail(HA_ERR_INVALID,
                       "record_hidden: %zu floats for %lld tokens; (n_layers + 1) x n x hidden_size = "
                       "%lld are needed",
                       out_floats, (long long)n, (long long)((cfg->n_layers + 1) * n * cfg->hidden_size));
    c->hidden = out;
    c->hidden_n = out ? n : 0;
    return HA_OK;
}

static ha_status append_tokens(ha_llama_context *c, int64_t n, const int32_t *seq, const int32_t *tokens,
                               const uint8_t *want, float *logits) {
    const int64_t V = c->m->cfg.vocab_size;
    if (n < 0 || (n > 0 && (!seq || !tokens)))
        return ha_fail(HA_ERR_INVALID, "append: bad token arrays (n=%lld)", (long long)n);
    int64_t wanted = 0;
    memset(c->adding, 0, (size_t)c->n_seq * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) {
        if (seq[i] < 0 || seq[i] >= c->n_seq)
            return ha_fail(HA_ERR_INVALID, "append: sequence %d is out of range; the cache holds %lld sequences",
                           seq[i], (long long)c->n_seq);
        if (tokens[i] < 0 || tokens[i] >= V)
            return ha_fail(HA_ERR_INVALID,
                           "token id %d at index %lld is out of range for vocab_size %lld; "
                           "ids must be in [0, %lld)",
                           tokens[i], (long long)i, (long long)V, (long long)V);
        c->adding[seq[i]]++;
        wanted += !want || want[i];
    }
    for (int64_t s = 0; s < c->n_seq; s++)
        if (c->len[s] + c->adding[s] > c->capacity)
            return ha_fail(HA_ERR_CAPACITY,
                           "sequence %lld holds %lld positions; %lld more would pass the cache capacity "
                           "of %lld; create the cache with a larger max_cache_len",
                           (long long)s, (long long)c->len[s], (long long)c->adding[s], (long long)c->capacity);
    if (wanted && !logits) return ha_fail(HA_ERR_INVALID, "append: logits requested but no output buffer given");
    c->kern = ha_kernels_get();
    /* longrope, as Transformers chooses per forward: the whole append of a sequence takes the long table when the
     * sequence's last position in it is >= rope_long_from, whatever chunks the append is cut into below. */
    const ha_llama_config *cfg = &c->m->cfg;
    for (int64_t s = 0; s < c->n_seq; s++)
        c->long_rope[s] = cfg->rope_inv_freq_long && c->len[s] + c->adding[s] > cfg->rope_long_from;
    /* With blas, a sequence this append starts (empty before it) sends its first
     * HA_BLAS_BLOCK * floor(adding / HA_BLAS_BLOCK) tokens to OpenBLAS, in blocks of exactly HA_BLAS_BLOCK
     * contiguous tokens of that sequence (if they are not contiguous, none of its tokens go). Such a block
     * depends only on the prompt's tokens, so every generation mode that starts a sequence with the same
     * prompt computes it alike; every other token goes through the batch-invariant kernels. */
    for (int64_t s = 0; s < c->n_seq; s++)
        c->blas_left[s] = c->blas && c->len[s] == 0 ? c->adding[s] / HA_BLAS_BLOCK * HA_BLAS_BLOCK : 0;
    c->tree = 0;
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
            c->tnodes[s] = 0;
            c->store[i] = c->pos[i] = c->len[s]++;
            if (c->pos[i] > c->top[s]) c->top[s] = c->pos[i];
        }
        c->hidden_at = b;
        if (ha_llama_forward(c, tokens + b, T, want ? want + b : NULL, logits))
            return interrupted_append(c, seq, b + T);
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
        return ha_fail(HA_ERR_INVALID, "crop: sequence %d is out of range; the cache holds %lld sequences", seq,
                       (long long)c->n_seq);
    if (len < 0 || len > c->len[seq])
        return ha_fail(HA_ERR_INVALID, "crop: cannot keep %lld positions of sequence %d, which holds %lld",
                       (long long)len, seq, (long long)c->len[seq]);
    if (!ha_llama_context_can_crop(c, seq, len))
        return ha_fail(HA_ERR_UNSUPPORTED,
                       "crop: sequence %d has held up to %lld positions; its sliding-window layers keep "
                       "only %d positions beyond their window, so it cannot go back to %lld (crop at most %d positions "
                       "after an append, or crop to 0 and append again)",
                       seq, (long long)c->top[seq] + 1, HA_RING_SLACK, (long long)len, HA_RING_SLACK);
    if (len != c->len[seq]) c->tnodes[seq] = 0;
    c->len[seq] = len;
    if (len == 0) c->top[seq] = -1;
    return HA_OK;
}

static int64_t ctx_length(const void *self, int32_t seq) {
    const ha_llama_context *c = self;
    return seq >= 0 && seq < c->n_seq ? c->len[seq] : 0;
}

/* ---- token trees (ha_lm.append_tree, ha_lm.keep_path) ---------------------------------------------------- */

static size_t kv_at(const ha_llama_context *c, int64_t l, int64_t s, int64_t g, int64_t p);

/* Checks a tree call as ha.h's contract states it, leaving each sequence's node count in c->adding and whether the
 * call continues its tree in c->tcont. */
static ha_status tree_check(ha_llama_context *c, int64_t n, const int32_t *seq, const int32_t *tokens,
                            const int32_t *parent, const uint8_t *want, float *logits) {
    const int64_t V = c->m->cfg.vocab_size;
    if (n < 0 || (n > 0 && (!seq || !tokens || !parent)))
        return ha_fail(HA_ERR_INVALID, "append_tree: bad token arrays (n=%lld)", (long long)n);
    if (c->hidden)
        return ha_fail(HA_ERR_INVALID, "append_tree: hidden states were requested for an append, not a tree");
    int wanted = 0;
    memset(c->adding, 0, (size_t)c->n_seq * sizeof(int64_t));
    memset(c->tcont, 0, (size_t)c->n_seq);
    for (int64_t i = 0; i < n; i++)
        if (seq && parent && seq[i] >= 0 && seq[i] < c->n_seq && parent[i] <= -2) c->tcont[seq[i]] = 1;
    for (int64_t i = 0; i < n; i++) {
        const int32_t s = seq[i];
        if (s < 0 || s >= c->n_seq)
            return ha_fail(HA_ERR_INVALID, "append_tree: sequence %d is out of range; the cache holds %lld sequences",
                           s, (long long)c->n_seq);
        if (tokens[i] < 0 || tokens[i] >= V)
            return ha_fail(HA_ERR_INVALID,
                           "token id %d at index %lld is out of range for vocab_size %lld; ids must be "
                           "in [0, %lld)",
                           tokens[i], (long long)i, (long long)V, (long long)V);
        if (c->adding[s] > 0 && seq[i - 1] != s)
            return ha_fail(HA_ERR_INVALID,
                           "append_tree: the nodes of sequence %d are not together (index %lld); give "
                           "each sequence's nodes one after the other",
                           s, (long long)i);
        if (parent[i] <= -2 && -2 - (int64_t)parent[i] >= c->tnodes[s])
            return ha_fail(HA_ERR_INVALID,
                           "append_tree: node %lld's parent %d names node %lld of sequence %d's tree, which holds "
                           "%lld (a tree ends at the sequence's next append, crop or keep_path)",
                           (long long)i, parent[i], (long long)(-2 - (int64_t)parent[i]), s, (long long)c->tnodes[s]);
        if (parent[i] >= 0 && (parent[i] >= i || seq[parent[i]] != s))
            return ha_fail(HA_ERR_INVALID,
                           "append_tree: node %lld's parent %d is not -1, an earlier node of its sequence in "
                           "this call, nor -2 - j for node j of its tree",
                           (long long)i, parent[i]);
        if (++c->adding[s] + (c->tcont[s] ? c->tnodes[s] : 0) > CHUNK)
            return ha_fail(HA_ERR_INVALID, "append_tree: more than %d nodes in sequence %d's tree (ha_lm.max_tree)",
                           CHUNK, s);
        wanted |= !want || want[i];
    }
    for (int64_t s = 0; s < c->n_seq; s++)
        if (c->len[s] + c->adding[s] > c->capacity)
            return ha_fail(HA_ERR_CAPACITY,
                           "sequence %lld holds %lld positions; a tree of %lld more nodes would pass the "
                           "cache capacity of %lld; create the cache with a larger max_cache_len",
                           (long long)s, (long long)c->len[s], (long long)c->adding[s], (long long)c->capacity);
    if (wanted && !logits) return ha_fail(HA_ERR_INVALID, "append_tree: logits requested but no output buffer given");
    return HA_OK;
}

/* ha_lm.append_tree: forwards of whole sequences' trees, up to CHUNK nodes each; the lengths move at the end. */
static ha_status ctx_append_tree(void *self, int64_t n, const int32_t *seq, const int32_t *tokens,
                                 const int32_t *parent, const uint8_t *want, float *logits) {
    ha_llama_context *c = self;
    const int64_t V = c->m->cfg.vocab_size;
    ha_status st = tree_check(c, n, seq, tokens, parent, want, logits);
    if (st != HA_OK) return st;
    c->kern = ha_kernels_get();
    c->blas_now = 0;
    c->tree = 1;
    const ha_llama_config *cfg = &c->m->cfg;
    for (int64_t b = 0, T; b < n; b += T) {
        if (ha_interrupted()) {
            c->tree = 0;
            return ha_fail(HA_ERR_INTERRUPTED, "interrupted; the cache holds what it held before this tree");
        }
        /* whole sequences' nodes, as many as fit in a chunk */
        T = c->adding[seq[b]];
        while (b + T < n && T + c->adding[seq[b + T]] <= CHUNK) T += c->adding[seq[b + T]];
        for (int64_t i = 0, first = 0; i < T; i++) {
            const int32_t s = seq[b + i];
            if (i == 0 || c->seq[i - 1] != s) first = i; /* the sequence's first node here (its nodes are together) */
            const int64_t held = c->tcont[s] ? c->tnodes[s] : 0; /* its tree's nodes from earlier calls */
            const int32_t j = (int32_t)(held + i - first), pa = parent[b + i];
            int32_t *par = c->tpar + (size_t)s * CHUNK, *depth = c->tdepth + (size_t)s * CHUNK;
            c->seq[i] = s;
            c->tbase[i] = c->len[s] - held;
            c->tnode[i] = j;
            par[j] = pa == -1 ? -1 : pa <= -2 ? -2 - pa : (int32_t)(held + pa - b - first);
            depth[j] = par[j] < 0 ? 0 : depth[par[j]] + 1;
            c->pos[i] = c->tbase[i] + depth[j];
            c->store[i] = c->tbase[i] + j;
            if (c->store[i] > c->top[s]) c->top[s] = c->store[i];
        }
        /* longrope as append's: the table of the sequence's last position in the call (its deepest node) */
        for (int64_t i = 0; i < T; i++) {
            const int32_t s = c->seq[i];
            if (i == 0 || c->seq[i - 1] != s) c->long_rope[s] = 0;
            if (cfg->rope_inv_freq_long && c->pos[i] + 1 > cfg->rope_long_from) c->long_rope[s] = 1;
        }
        int64_t w0 = 0;
        if (ha_llama_forward(c, tokens + b, T, want ? want + b : NULL, logits)) {
            c->tree = 0;
            return ha_fail(HA_ERR_INTERRUPTED, "interrupted; the cache holds what it held before this tree");
        }
        for (int64_t i = 0; i < T; i++) w0 += !want || want[b + i];
        if (logits) logits += w0 * V;
    }
    c->tree = 0;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || seq[i - 1] != seq[i]) {
            const int32_t s = seq[i];
            c->len[s] += c->adding[s];
            c->tnodes[s] = (c->tcont[s] ? c->tnodes[s] : 0) + c->adding[s];
        }
    return HA_OK;
}

/* ha_lm.keep_path: nodes[j]'s keys and values, every layer and kv head, to position base + j. */
static ha_status ctx_keep_path(void *self, int32_t seq, int64_t base, const int32_t *nodes, int64_t n) {
    ha_llama_context *c = self;
    if (seq < 0 || seq >= c->n_seq)
        return ha_fail(HA_ERR_INVALID, "keep_path: sequence %d is out of range; the cache holds %lld sequences", seq,
                       (long long)c->n_seq);
    if (base < 0 || n < 0 || (n > 0 && !nodes))
        return ha_fail(HA_ERR_INVALID, "keep_path: bad arguments (base %lld, n %lld)", (long long)base, (long long)n);
    const int64_t nodes_held = c->tnodes[seq];
    if (n > 0 && (nodes_held == 0 || base != c->len[seq] - nodes_held))
        return ha_fail(HA_ERR_INVALID,
                       "keep_path: sequence %d %s; keep a path of the tree its last append_tree calls made, from its "
                       "base",
                       seq, nodes_held == 0 ? "holds no tree" : "'s tree does not start at the base given");
    const int32_t *par = c->tpar + (size_t)seq * CHUNK;
    for (int64_t j = 0; j < n; j++)
        if (nodes[j] < 0 || nodes[j] >= nodes_held || par[nodes[j]] != (j > 0 ? nodes[j - 1] : -1))
            return ha_fail(HA_ERR_INVALID,
                           "keep_path: node %d (at %lld) is not %s among the %lld nodes of sequence %d's tree; give a "
                           "path from depth 0 down",
                           nodes[j], (long long)j, j > 0 ? "a child of the one before it" : "at depth 0",
                           (long long)nodes_held, seq);
    if (base + n > c->len[seq])
        return ha_fail(HA_ERR_INVALID, "keep_path: %lld positions past %lld, but sequence %d holds %lld", (long long)n,
                       (long long)base, seq, (long long)c->len[seq]);
    int held = ha_llama_context_can_crop(c, seq, base + n);
    for (int64_t l = 0; held && n > 0 && l < c->m->cfg.n_layers; l++) /* a ring still holds the first node moved */
        held = c->slots[l] >= c->capacity || base + nodes[0] + c->slots[l] > c->top[seq];
    if (!held)
        return ha_fail(HA_ERR_UNSUPPORTED,
                       "keep_path: sequence %d's sliding-window layers no longer hold what the path "
                       "needs; keep a path right after the tree it is in",
                       seq);
    const ha_llama_config *cfg = &c->m->cfg;
    const size_t bytes = (size_t)cfg->head_dim * sizeof(float);
    for (int64_t l = 0; l < cfg->n_layers; l++)
        for (int64_t g = 0; g < cfg->n_kv_heads; g++)
            for (int64_t j = 0; j < n; j++) {
                if (nodes[j] == j) continue;
                memcpy(c->kcache + kv_at(c, l, seq, g, base + j), c->kcache + kv_at(c, l, seq, g, base + nodes[j]),
                       bytes);
                memcpy(c->vcache + kv_at(c, l, seq, g, base + j), c->vcache + kv_at(c, l, seq, g, base + nodes[j]),
                       bytes);
            }
    c->len[seq] = base + n;
    c->tnodes[seq] = 0;
    if (c->len[seq] == 0) c->top[seq] = -1;
    return HA_OK;
}

/* Positions a layer with window w keeps per sequence in a cache of `capacity`: a ring of w + HA_RING_SLACK when
 * that is fewer (written so that a window near INT64_MAX does not overflow). */
static int64_t layer_slots(int64_t w, int64_t capacity) {
    return w > 0 && w < capacity - HA_RING_SLACK ? w + HA_RING_SLACK : capacity;
}

/* Position p of a sequence at slot p mod slots[l]: a ring where the layer keeps fewer than capacity. */
void ha_kv_store(ha_llama_context *c, int64_t l, int64_t T) {
    const ha_llama_config *cfg = &c->m->cfg;
    const int64_t hd = cfg->head_dim, kvd = c->m->kv_dim;
    const int64_t S = c->slots[l];
    for (int64_t i = 0; i < T; i++) {
        for (int64_t g = 0; g < cfg->n_kv_heads; g++) {
            size_t off = c->layer_at[l] + (((size_t)c->seq[i] * (size_t)cfg->n_kv_heads + (size_t)g) * (size_t)S +
                                           (size_t)(c->store[i] % S)) *
                                              (size_t)hd;
            memcpy(c->kcache + off, c->k + i * kvd + g * hd, (size_t)hd * sizeof(float));
            memcpy(c->vcache + off, c->v + i * kvd + g * hd, (size_t)hd * sizeof(float));
        }
    }
}

ha_status ha_llama_context_create(const ha_llama *m, int64_t n_seq, int64_t capacity, int blas_prefill,
                                  ha_llama_context **out) {
    if (!m || !out) return ha_fail(HA_ERR_INVALID, "ha_llama_context_create: NULL argument");
    *out = NULL;
    if (n_seq < 1 || n_seq > (1 << 20))
        return ha_fail(HA_ERR_INVALID, "batch size %lld is out of range 1..%d", (long long)n_seq, 1 << 20);
    if (capacity < 1 || capacity > INT32_MAX)
        return ha_fail(HA_ERR_INVALID, "cache capacity %lld is out of range 1..%d", (long long)capacity, INT32_MAX);
    const ha_llama_config *cfg = &m->cfg;
    if (m->w.pos_embed.data && capacity > m->w.pos_embed.rows)
        return ha_fail(HA_ERR_CAPACITY,
                       "a cache of %lld positions is longer than the model's %lld learned positions "
                       "(n_positions); use max_cache_len <= %lld",
                       (long long)capacity, (long long)m->w.pos_embed.rows, (long long)m->w.pos_embed.rows);
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
        return ha_fail(HA_ERR_NOMEM, "a KV cache of %lld sequences x %lld positions is too large to address",
                       (long long)n_seq, (long long)capacity);
    /* A cache the machine cannot hold is refused here, rather than overcommitted and the process killed when its
     * pages are touched (the activation buffers are small beside it). */
    const double need = cache_elems * 8.0, room = ha_available_memory();
    if (room >= 0 && need > room)
        return ha_fail(HA_ERR_NOMEM,
                       "a KV cache of %lld sequences x %lld positions needs %.0f MB, more than the %.0f MB of "
                       "memory available; use a smaller max_cache_len or batch",
                       (long long)n_seq, (long long)capacity, need / 1e6, room / 1e6);
    ha_llama_context *c = calloc(1, sizeof *c);
    if (!c) return ha_fail(HA_ERR_NOMEM, "out of memory creating a context");
    const size_t d = (size_t)cfg->hidden_size, f = (size_t)cfg->intermediate_size, fl = sizeof(float);
    const size_t nl = (size_t)cfg->n_layers, r2 = (size_t)(m->r2 ? m->r2 : 1);
    c->m = m;
    c->n_seq = n_seq;
    c->capacity = capacity;
    c->blas = blas_prefill != 0;
    /* Half: a draft's weights, the activations and the KV cache share it. */
    c->cached = ha_llama_weight_bytes(m) <= ha_llc_bytes() / 2;
    c->rows = c->blas ? HA_BLAS_BLOCK : CHUNK;
    const size_t R = (size_t)c->rows;
    c->len = calloc((size_t)n_seq, sizeof(int64_t));
    c->top = malloc((size_t)n_seq * sizeof(int64_t));
    c->adding = calloc((size_t)n_seq, sizeof(int64_t));
    c->blas_left = calloc((size_t)n_seq, sizeof(int64_t));
    c->long_rope = calloc((size_t)n_seq, 1);
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
    c->store = malloc(R * sizeof(int64_t));
    c->tbase = malloc(R * sizeof(int64_t));
    c->tnode = malloc(R * sizeof(int32_t));
    c->tnodes = calloc((size_t)n_seq, sizeof(int64_t));
    c->tpar = ha_malloc_array((size_t)n_seq, CHUNK, sizeof(int32_t));
    c->tdepth = ha_malloc_array((size_t)n_seq, CHUNK, sizeof(int32_t));
    c->tcont = calloc((size_t)n_seq, 1);
    c->seq = malloc(R * sizeof(int32_t));
    int all_f32 = m->w.lm_head.dtype == HA_F32; /* else OpenBLAS needs rows widened to float32 */
    int any_int = ha_dtype_is_int(m->w.lm_head.dtype), any_w8a8 = m->w.lm_head.dtype == HA_Q8P, any_fused = 0;
    int any_bf16x = m->w.lm_head.dtype == HA_BF16X;
    for (int64_t l = 0; l < cfg->n_layers; l++) {
        const ha_matrix *mats[LAYER_MATRICES];
        ha_layer_matrices(&m->layers[l], mats);
        for (int i = 0; i < LAYER_MATRICES; i++)
            if (mats[i]->data) {
                all_f32 &= mats[i]->dtype == HA_F32;
                any_int |= ha_dtype_is_int(mats[i]->dtype);
                any_w8a8 |= mats[i]->dtype == HA_Q8P;
                any_bf16x |= mats[i]->dtype == HA_BF16X;
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
    if (any_w8a8) {
        const int64_t groups = ((int64_t)widest + HA_Q8_GROUP - 1) / HA_Q8_GROUP;
        c->xq8 = malloc(R * ha_row_bytes(HA_Q8, (int64_t)widest));
        c->xq8_sum = malloc(R * (size_t)groups * sizeof(int32_t));
        xq_ok &= c->xq8 && c->xq8_sum;
    }
    if (any_bf16x) {
        c->xbf = malloc(R * ((widest + 1) / 2) * sizeof(uint32_t));
        xq_ok &= c->xbf != NULL;
    }
    if (any_fused) {
        const size_t qkv = (size_t)(m->q_dim + 2 * m->kv_dim);
        c->fused = malloc(R * (qkv > 2 * f ? qkv : 2 * f) * fl);
        fused_ok = c->fused != NULL;
    }
    if (!c->len || !c->top || !c->adding || !c->blas_left || !c->long_rope || !c->slots || !c->layer_at || !c->kcache ||
        !c->vcache || !c->x || !c->xn || !c->q || !c->k || !c->v || !c->att || !c->tmp || !c->gate || !c->up ||
        !c->rope_cos || !c->rope_sin || !c->pos || !c->store || !c->tbase || !c->tnode || !c->seq || !wide_ok ||
        !c->tnodes || !c->tpar || !c->tdepth || !c->tcont || !xq_ok || !fused_ok) {
        ha_llama_context_free(c);
        return ha_fail(HA_ERR_NOMEM,
                       "out of memory allocating a KV cache of %.0f MB (%lld sequences x %lld positions); "
                       "use a smaller max_cache_len or batch",
                       cache_elems * 8.0 / 1e6, (long long)n_seq, (long long)capacity);
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
    c->lm = (ha_lm){ .self = c,
                     .vocab_size = cfg->vocab_size,
                     .n_seq = n_seq,
                     .capacity = capacity,
                     .append = ctx_append,
                     .crop = ctx_crop,
                     .length = ctx_length,
                     .append_tree = ctx_append_tree,
                     .keep_path = ctx_keep_path,
                     .max_tree = CHUNK,
                     .max_rollback = ring ? HA_RING_SLACK : INT64_MAX,
                     .rope_switch = cfg->rope_inv_freq_long && cfg->rope_long_from > 0 ? cfg->rope_long_from : 0 };
    *out = c;
    return HA_OK;
}

void ha_llama_context_free(ha_llama_context *c) {
    if (!c) return;
    ha_free_streamed(c->kcache, c->cache_bytes, c->kmapped);
    ha_free_streamed(c->vcache, c->cache_bytes, c->vmapped);
    void *bufs[] = { c->len,     c->top,   c->adding, c->blas_left, c->long_rope, c->slots,    c->layer_at,
                     c->x,       c->xn,    c->q,      c->k,         c->v,         c->att,      c->tmp,
                     c->gate,    c->up,    c->fused,  c->rope_cos,  c->rope_sin,  c->pos,      c->seq,
                     c->store,   c->tbase, c->tnode,  c->wide,      c->xq,        c->xq_scale, c->xq8,
                     c->xq8_sum, c->xbf,   c->tnodes, c->tpar,      c->tdepth,    c->tcont };
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(c);
}

ha_lm *ha_llama_context_lm(ha_llama_context *c) { return c ? &c->lm : NULL; }

/* Where position p of sequence s, layer l, kv head g keeps its key (in kcache) and value (in vcache). */
static size_t kv_at(const ha_llama_context *c, int64_t l, int64_t s, int64_t g, int64_t p) {
    const int64_t S = c->slots[l];
    return c->layer_at[l] + (((size_t)s * (size_t)c->m->cfg.n_kv_heads + (size_t)g) * (size_t)S + (size_t)(p % S)) *
                                (size_t)c->m->cfg.head_dim;
}

/* The first position layer l of sequence s still holds: a ring's slot p mod slots holds p until p + slots is
 * written (every position written is at most top); a layer of capacity slots is no ring and holds every position
 * from 0 (top may pass its capacity after a copy from a longer cache). */
static int64_t kv_first(const ha_llama_context *c, int64_t l, int64_t s) {
    if (c->slots[l] >= c->capacity) return 0;
    const int64_t first = c->top[s] + 1 - c->slots[l];
    return first > 0 ? first : 0;
}

HA_API int64_t ha_llama_context_kv_first(const ha_llama_context *c, int64_t layer, int32_t seq) {
    if (!c || layer < 0 || layer >= c->m->cfg.n_layers || seq < 0 || seq >= c->n_seq) return -1;
    const int64_t first = kv_first(c, layer, seq);
    return first < c->len[seq] ? first : c->len[seq];
}

HA_API ha_status ha_llama_context_copy(ha_llama_context *dst, const ha_llama_context *src) {
    if (!dst || !src || dst == src) return ha_fail(HA_ERR_INVALID, "copy: two distinct contexts are needed");
    if (dst->m != src->m) return ha_fail(HA_ERR_INVALID, "copy: the two caches belong to different models");
    if (dst->n_seq != src->n_seq)
        return ha_fail(HA_ERR_INVALID, "copy: %lld sequences into a cache of %lld", (long long)src->n_seq,
                       (long long)dst->n_seq);
    for (int64_t s = 0; s < src->n_seq; s++)
        if (src->len[s] > dst->capacity)
            return ha_fail(HA_ERR_CAPACITY, "copy: sequence %lld holds %lld positions, more than the capacity %lld",
                           (long long)s, (long long)src->len[s], (long long)dst->capacity);
    const ha_llama_config *cfg = &src->m->cfg;
    const size_t bytes = (size_t)cfg->head_dim * sizeof(float);
    for (int64_t s = 0; s < src->n_seq; s++) {
        for (int64_t l = 0; l < cfg->n_layers; l++) {
            int64_t first = kv_first(src, l, s);
            if (src->len[s] - dst->slots[l] > first) first = src->len[s] - dst->slots[l];
            for (int64_t g = 0; g < cfg->n_kv_heads; g++)
                for (int64_t p = first; p < src->len[s]; p++) {
                    memcpy(dst->kcache + kv_at(dst, l, s, g, p), src->kcache + kv_at(src, l, s, g, p), bytes);
                    memcpy(dst->vcache + kv_at(dst, l, s, g, p), src->vcache + kv_at(src, l, s, g, p), bytes);
                }
        }
        dst->len[s] = src->len[s];
        dst->tnodes[s] = 0;
        /* src's high-water mark, not len - 1: a ring of src cropped back has lost the positions that its later
         * ones overwrote, and so has the copy (same ring size, or no ring where src had none), so the copy claims
         * and can crop back to exactly what src can */
        dst->top[s] = src->top[s];
    }
    return HA_OK;
}

/* The checks of read_kv and write_kv: layer, sequence and positions [first, first + n) in range (below the
 * sequence's length when reading, below the capacity when writing). */
static ha_status kv_range(const ha_llama_context *c, int64_t layer, int32_t seq, int64_t first, int64_t n,
                          size_t floats, int reading, const char *what) {
    if (!c) return ha_fail(HA_ERR_INVALID, "%s: no context", what);
    if (layer < 0 || layer >= c->m->cfg.n_layers || seq < 0 || seq >= c->n_seq)
        return ha_fail(HA_ERR_INVALID, "%s: layer %lld or sequence %d is out of range", what, (long long)layer, seq);
    const int64_t end = reading ? c->len[seq] : c->capacity;
    if (floats != (size_t)(n * c->m->cfg.n_kv_heads * c->m->cfg.head_dim))
        return ha_fail(HA_ERR_INVALID,
                       "%s: k and v hold %zu floats each; (n_kv_heads, %lld, head_dim) = %lld are "
                       "needed",
                       what, floats, (long long)n, (long long)(n * c->m->cfg.n_kv_heads * c->m->cfg.head_dim));
    if (first < 0 || n < 0 || first + n > end)
        return ha_fail(HA_ERR_INVALID, "%s: positions [%lld, %lld) are outside [0, %lld)", what, (long long)first,
                       (long long)(first + n), (long long)end);
    return HA_OK;
}

HA_API ha_status ha_llama_context_read_kv(const ha_llama_context *c, int64_t layer, int32_t seq, int64_t first,
                                          int64_t n, float *k, float *v, size_t floats) {
    ha_status st = kv_range(c, layer, seq, first, n, floats, 1, "read_kv");
    if (st != HA_OK) return st;
    if (first < kv_first(c, layer, seq))
        return ha_fail(HA_ERR_INVALID,
                       "read_kv: layer %lld keeps positions from %lld on (a sliding window's ring), "
                       "not %lld",
                       (long long)layer, (long long)kv_first(c, layer, seq), (long long)first);
    const int64_t hd = c->m->cfg.head_dim;
    for (int64_t g = 0; g < c->m->cfg.n_kv_heads; g++)
        for (int64_t i = 0; i < n; i++) {
            memcpy(k + (g * n + i) * hd, c->kcache + kv_at(c, layer, seq, g, first + i), (size_t)hd * sizeof(float));
            memcpy(v + (g * n + i) * hd, c->vcache + kv_at(c, layer, seq, g, first + i), (size_t)hd * sizeof(float));
        }
    return HA_OK;
}

HA_API ha_status ha_llama_context_write_kv(ha_llama_context *c, int64_t layer, int32_t seq, int64_t first, int64_t n,
                                           const float *k, const float *v, size_t floats) {
    ha_status st = kv_range(c, layer, seq, first, n, floats, 0, "write_kv");
    if (st != HA_OK) return st;
    const int64_t hd = c->m->cfg.head_dim;
    for (int64_t g = 0; g < c->m->cfg.n_kv_heads; g++)
        for (int64_t i = 0; i < n; i++) {
            memcpy(c->kcache + kv_at(c, layer, seq, g, first + i), k + (g * n + i) * hd, (size_t)hd * sizeof(float));
            memcpy(c->vcache + kv_at(c, layer, seq, g, first + i), v + (g * n + i) * hd, (size_t)hd * sizeof(float));
        }
    return HA_OK;
}

HA_API ha_status ha_llama_context_set_length(ha_llama_context *c, int32_t seq, int64_t len) {
    if (!c || seq < 0 || seq >= c->n_seq || len < 0 || len > c->capacity)
        return ha_fail(HA_ERR_INVALID, "set_length: sequence %d or length %lld is out of range", seq, (long long)len);
    c->len[seq] = len;
    c->top[seq] = len - 1;
    c->tnodes[seq] = 0;
    return HA_OK;
}

int ha_llama_context_can_crop(const ha_llama_context *c, int32_t seq, int64_t len) {
    if (!c || seq < 0 || seq >= c->n_seq || len < 0 || len > c->len[seq]) return 0;
    return len == 0 || len == c->len[seq] || ring_keeps(c, seq, len);
}
