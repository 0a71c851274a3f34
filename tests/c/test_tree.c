#include "test_core.h"

/* ---- token trees: ha_lm.append_tree and keep_path --------------------------------------------------------- */

/* The families' switches on the tiny model, one case each (ha.h's decoder: one forward, the differences as data). */
enum { FAM_LLAMA, FAM_GEMMA, FAM_GPT2, FAM_QWEN3, FAM_WINDOW, NFAM };
static const char *const FAM_NAMES[NFAM] = { "llama", "gemma (caps, local windows, post norms)",
                                             "gpt2 (layer norm, learned positions)", "qwen3 (q/k norms, partial rope)",
                                             "mistral (window 5 on every layer, rings)" };

/* A tiny model with family fam's switches; positions: the learned positions' rows (GPT-2). */
static tiny *family_build(int fam, ha_dtype dt, uint64_t seed, int64_t positions) {
    tiny *t = tiny_build(dt, fam == FAM_GPT2 || fam == FAM_QWEN3, 0, fam == FAM_WINDOW ? 5 : 0, seed);
    if (fam == FAM_LLAMA || fam == FAM_WINDOW) return t;
    rng r = { seed + 1 };
    ha_llama_free(t->m);
    t->m = NULL;
    static double local[THD / 2];
    for (int j = 0; j < THD / 2; j++) local[j] = pow(500.0, -2.0 * j / THD);
    if (fam == FAM_GEMMA) {
        t->cfg.norm = HA_NORM_RMS_ONE_PLUS;
        t->cfg.act = HA_ACT_GELU_TANH;
        t->cfg.embed_scale = 5.6f;
        t->cfg.attn_softcap = 2.0f;
        t->cfg.final_softcap = 3.0f;
        t->cfg.rope_inv_freq_local = local;
        for (int l = 0; l < TL; l++) {
            t->layers[l].post_attn_norm = tiny_vector(t, &r, TD, 0.0, 0.3);
            t->layers[l].post_ffn_norm = tiny_vector(t, &r, TD, 0.0, 0.3);
            t->layers[l].q_norm = tiny_vector(t, &r, THD, 0.0, 0.3);
            t->layers[l].k_norm = tiny_vector(t, &r, THD, 0.0, 0.3);
        }
        t->layers[0].window = 3;
        t->layers[0].rope = HA_ROPE_LOCAL;
        t->layers[1].attn_scale = 0.2f;
    } else if (fam == FAM_GPT2) {
        t->cfg.norm = HA_NORM_LAYER;
        t->cfg.act = HA_ACT_GELU;
        t->cfg.ungated_mlp = 1;
        t->cfg.rope_inv_freq = NULL;
        t->w.pos_embed = tiny_matrix(t, &r, positions, TD, 0.5);
        t->w.final_norm_b = tiny_vector(t, &r, TD, 0.0, 0.2);
        for (int l = 0; l < TL; l++) {
            t->layers[l].rope = HA_ROPE_NONE;
            t->layers[l].w_gate = (ha_matrix){ 0 };
            t->layers[l].b_gate = (ha_vector){ 0 };
            t->layers[l].attn_norm_b = tiny_vector(t, &r, TD, 0.0, 0.2);
            t->layers[l].ffn_norm_b = tiny_vector(t, &r, TD, 0.0, 0.2);
        }
    } else { /* FAM_QWEN3 */
        t->cfg.rope_dim = 4;
        for (int l = 0; l < TL; l++) {
            t->layers[l].q_norm = tiny_vector(t, &r, THD, 1.0, 0.3);
            t->layers[l].k_norm = tiny_vector(t, &r, THD, 1.0, 0.3);
        }
    }
    CHECK_OK(ha_llama_create(&t->cfg, &t->w, &t->m));
    return t;
}

/* A tree of n nodes by parent (-1: the sequence's end), and a fixed shape's tokens. */
typedef struct tree_case {
    int n;
    int32_t parent[16];
} tree_case;
static const tree_case TREES[] = {
    { 1, { -1 } },
    { 5, { -1, 0, 1, 2, 3 } },                                     /* a chain */
    { 9, { -1, 0, 0, 1, 1, 2, 3, 6, 7 } },                         /* branching, depth 5 */
    { 12, { -1, -1, 0, 1, 0, 2, 4, 4, 6, 8, 9, 10 } },             /* two roots (siblings at depth 0), depth 7 */
    { 16, { -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 0 } }, /* a long chain and a late sibling */
};

static int depth_of(const tree_case *tc, int i) {
    int d = 0;
    for (int a = tc->parent[i]; a >= 0; a = tc->parent[a]) d++;
    return d;
}

/* The path of node i (root first) into path; returns its length. */
static int path_of(const tree_case *tc, int i, int32_t *path) {
    const int d = depth_of(tc, i);
    for (int a = i, j = d; a >= 0; a = tc->parent[a], j--) path[j] = a;
    return d + 1;
}

/* A sequential decode of a path: a copy of pre (one sequence holding the prefix, as one append gave it), then the
 * path's tokens one at a time; the last token's logits into out (V,). */
static void decode_path(const ha_llama_context *pre, ha_llama_context *scratch, const int32_t *tok, const int32_t *path,
                        int n, float *out) {
    CHECK_OK(ha_llama_context_copy(scratch, pre));
    for (int j = 0; j < n; j++) CHECK_OK(append_seq(scratch, 0, 1, tok + path[j], out));
}

/* Two sequences (prefixes np0, np1) each take a tree, in one append_tree call (by_depth 0) or in one call per depth
 * (by_depth 1: each call continues both trees, its nodes' parents named -2 - j; a node's index in its tree is then
 * its place in depth order); every node's logits row must be bitwise its path decoded one token at a time after
 * the prefix. Then keep_path of one path per sequence must leave a cache that continues bitwise as one that
 * appended the path's tokens. */
static void check_trees(const char *what, const ha_llama *m, int64_t cap, int np0, int np1, const tree_case *t0,
                        const tree_case *t1, uint64_t seed, int by_depth) {
    rng r = { seed };
    const int np[2] = { np0, np1 };
    const tree_case *tc[2] = { t0, t1 };
    int32_t *prefix[2], tok[2][16];
    for (int s = 0; s < 2; s++) {
        prefix[s] = xmalloc((size_t)(np[s] + 1) * sizeof(int32_t));
        random_tokens(&r, prefix[s], np[s]);
        random_tokens(&r, tok[s], tc[s]->n);
    }
    ha_llama_context *c = ctx_new(m, 2, cap);
    float *scratch = xmalloc((size_t)(np0 > np1 ? np0 : np1) * TV * sizeof(float) + 1);
    for (int s = 0; s < 2; s++)
        if (np[s] > 0) CHECK_OK(append_seq(c, s, np[s], prefix[s], scratch));
    const int n = t0->n + t1->n;
    int32_t seq[32], tokens[32], parent[32], node_at[2][16], placed[2] = { 0, 0 }; /* node_at: index in its tree */
    int origin[32];                                                                 /* (sequence, node) of a row */
    uint8_t want[32];
    float *logits = xmalloc((size_t)n * TV * sizeof(float)), *got = xmalloc((size_t)n * TV * sizeof(float));
    float want_row[TV];
    for (int d = 0, done = 0; done < n; d++) { /* by_depth: the nodes of depth d; else all of them at d = 0 */
        int k = 0;
        for (int s = 0; s < 2; s++)
            for (int j = 0; j < tc[s]->n; j++) {
                if (by_depth && depth_of(tc[s], j) != d) continue;
                const int pa = tc[s]->parent[j];
                seq[k] = s;
                tokens[k] = tok[s][j];
                parent[k] = pa < 0 ? -1 : by_depth ? -2 - node_at[s][pa] : pa + (s ? t0->n : 0);
                want[k] = 1;
                origin[k++] = s * 16 + j;
                node_at[s][j] = placed[s]++;
            }
        if (k == 0) continue;
        CHECK_OK(LM(c)->append_tree(LM(c)->self, k, seq, tokens, parent, want, got));
        for (int i = 0; i < k; i++) {
            const int s = origin[i] / 16, j = origin[i] % 16;
            memcpy(logits + (size_t)(j + (s ? t0->n : 0)) * TV, got + (size_t)i * TV, TV * sizeof(float));
        }
        done += k;
    }
    free(got);
    CHECK(LEN(c, 0) == np0 + t0->n && LEN(c, 1) == np1 + t1->n,
          "%s: after a tree expected lengths %d, %d, got %lld, %lld", what, np0 + t0->n, np1 + t1->n,
          (long long)LEN(c, 0), (long long)LEN(c, 1));
    int32_t path[16];
    ha_llama_context *pre = ctx_new(m, 1, cap), *one = ctx_new(m, 1, cap);
    for (int s = 0, i = 0; s < 2; s++) {
        CHECK_OK(LM(pre)->crop(LM(pre)->self, 0, 0));
        if (np[s] > 0) CHECK_OK(append_seq(pre, 0, np[s], prefix[s], scratch));
        for (int j = 0; j < tc[s]->n; j++, i++) {
            const int len = path_of(tc[s], j, path);
            decode_path(pre, one, tok[s], path, len, want_row);
            CHECK_SAME_FLOATS(want_row, logits + (size_t)i * TV, TV,
                              "%s: sequence %d (prefix %d), node %d at depth %d vs "
                              "its path decoded one token at a time",
                              what, s, np[s], j, len - 1);
        }
    }
    ha_llama_context_free(pre);
    ha_llama_context_free(one);
    /* keep the path of each tree's last node, then one more token: as the path appended */
    const int32_t next[2] = { 7, 11 };
    for (int s = 0; s < 2; s++) {
        const int len = path_of(tc[s], tc[s]->n - 1, path);
        int32_t kept[16];
        for (int j = 0; j < len; j++) kept[j] = node_at[s][path[j]];
        CHECK_OK(LM(c)->keep_path(LM(c)->self, s, np[s], kept, len));
        CHECK(LEN(c, s) == np[s] + len, "%s: keep_path of %d nodes expected length %d, got %lld", what, len,
              np[s] + len, (long long)LEN(c, s));
        float got[TV];
        CHECK_OK(append_seq(c, s, 1, next + s, got));
        int32_t ext[17];
        for (int j = 0; j < len; j++) ext[j] = tok[s][path[j]];
        ext[len] = next[s];
        ha_llama_context *f = ctx_new(m, 1, cap);
        if (np[s] > 0) CHECK_OK(append_seq(f, 0, np[s], prefix[s], scratch));
        float *fl = xmalloc((size_t)(len + 1) * TV * sizeof(float));
        CHECK_OK(append_seq(f, 0, len + 1, ext, fl));
        CHECK_SAME_FLOATS(fl + (size_t)len * TV, got, TV,
                          "%s: sequence %d: the token after a kept path of %d nodes vs "
                          "a fresh cache that appended them",
                          what, s, len);
        free(fl);
        ha_llama_context_free(f);
    }
    free(logits);
    free(scratch);
    for (int s = 0; s < 2; s++) free(prefix[s]);
    ha_llama_context_free(c);
}

/* Every dtype and kernel variant, small prefixes and trees. */
void test_tree_nodes_are_bitwise_their_paths(void) {
    one_thread();
    FOR_EACH_MODEL(t, vname) {
        char what[160];
        snprintf(what, sizeof what, CASE_FMT, CASE_ARGS(t, vname));
        for (int by_depth = 0; by_depth <= 1; by_depth++) {
            check_trees(what, t->m, 64, 3, 0, &TREES[2], &TREES[3], 1, by_depth);
            check_trees(what, t->m, 64, 1, 6, &TREES[0], &TREES[4], 2, by_depth);
        }
    }
}

/* Every family's switches; prefixes whose trees cross a 128-key block (the blocks mixing cache and tree keys);
 * window 5 with a cache past window + 256 (rings that wrap, ancestors outside the window). */
void test_tree_nodes_are_bitwise_their_paths_in_every_family(void) {
    one_thread();
    const char *vn[NVARIANTS];
    const int nv = forward_variants(vn);
    for (int v = 0; v < nv; v++) {
        select_kernels(vn[v]);
        for (int fam = 0; fam < NFAM; fam++) {
            const int64_t cap = fam == FAM_WINDOW || fam == FAM_GEMMA ? 600 : 300;
            tiny *t = family_build(fam, v % 2 ? HA_BF16 : HA_F32, 40 + fam, cap);
            char what[200];
            snprintf(what, sizeof what, "[%s kernels, %s]", vn[v], FAM_NAMES[fam]);
            check_trees(what, t->m, cap, 124, 126, &TREES[2], &TREES[4], 3 + fam, 0);
            check_trees(what, t->m, cap, 127, 128, &TREES[3], &TREES[1], 5 + fam, 1);
            if (cap == 600) check_trees(what, t->m, cap, 540, 290, &TREES[4], &TREES[2], 7 + fam, fam % 2);
            tiny_free(t);
        }
    }
}

/* A chain appended by append_tree is the chain appended; rows not wanted are skipped; the thread count changes
 * nothing; keep_path refuses what it cannot do and changes nothing then; errors leave the cache as it was. */
void test_tree_contract_and_refusals(void) {
    tiny *t = family_build(FAM_WINDOW, HA_F32, 9, 0);
    ha_llama_context *a = ctx_new(t->m, 2, 600), *b = ctx_new(t->m, 2, 600);
    int32_t tok[300];
    rng r = { 4 };
    random_tokens(&r, tok, 300);
    float *la = xmalloc(300 * TV * sizeof(float)), *lb = xmalloc(300 * TV * sizeof(float));
    CHECK_OK(append_seq(a, 0, 280, tok, NULL));
    CHECK_OK(append_seq(b, 0, 280, tok, NULL));
    const int32_t seq[6] = { 0, 0, 0, 0, 0, 0 }, chain[6] = { -1, 0, 1, 2, 3, 4 };
    const uint8_t want[6] = { 1, 0, 1, 1, 0, 1 };
    for (int threads = 1; threads <= 2; threads++) {
        CHECK_OK(ha_set_num_threads(threads));
        CHECK_OK(LM(a)->append_tree(LM(a)->self, 6, seq, tok + 280, chain, want, la));
        CHECK_OK(LM(b)->append(LM(b)->self, 6, seq, tok + 280, want, lb));
        CHECK_SAME_FLOATS(lb, la, 4 * TV, "%d threads: a chain by append_tree vs append, wanted rows packed", threads);
        CHECK_OK(LM(a)->crop(LM(a)->self, 0, 280));
        CHECK_OK(LM(b)->crop(LM(b)->self, 0, 280));
    }
    one_thread();
    const int32_t bad_parent[3] = { -1, 1, 0 }, other_seq[3] = { 0, 1, 0 }, three[3] = { 0, 1, 2 };
    CHECK_STATUS(LM(a)->append_tree(LM(a)->self, 3, seq, tok, bad_parent, NULL, la), HA_ERR_INVALID);
    CHECK_MSG("parent");
    CHECK_STATUS(LM(a)->append_tree(LM(a)->self, 3, other_seq, tok, (const int32_t[]){ -1, -1, -1 }, NULL, la),
                 HA_ERR_INVALID);
    CHECK_MSG("together");
    CHECK_STATUS(LM(a)->append_tree(LM(a)->self, 3, (const int32_t[]){ 0, 0, 1 }, tok, (const int32_t[]){ -1, 0, 0 },
                                    NULL, la),
                 HA_ERR_INVALID);
    CHECK_MSG("parent");
    CHECK_STATUS(LM(a)->append_tree(LM(a)->self, 3, seq, (const int32_t[]){ 0, TV, 1 }, chain, NULL, la),
                 HA_ERR_INVALID);
    int32_t many_seq[70], many_par[70];
    for (int i = 0; i < 70; i++) many_seq[i] = 1, many_par[i] = i - 1;
    CHECK(LM(a)->max_tree == 64, "expected max_tree 64, got %lld", (long long)LM(a)->max_tree);
    CHECK_STATUS(LM(a)->append_tree(LM(a)->self, 70, many_seq, tok, many_par, NULL, la), HA_ERR_INVALID);
    CHECK_MSG("max_tree");
    ha_llama_context *small = ctx_new(t->m, 1, 10);
    CHECK_OK(append_seq(small, 0, 8, tok, NULL));
    CHECK_STATUS(LM(small)->append_tree(LM(small)->self, 3, seq, tok, chain, NULL, la), HA_ERR_CAPACITY);
    CHECK(LEN(small, 0) == 8, "a refused tree changed the length to %lld", (long long)LEN(small, 0));
    ha_llama_context_free(small);
    CHECK(LEN(a, 0) == 280 && LEN(a, 1) == 0, "refused trees changed the lengths to %lld, %lld", (long long)LEN(a, 0),
          (long long)LEN(a, 1));
    /* keep_path: indices increasing and within the tree */
    CHECK_OK(LM(a)->append_tree(LM(a)->self, 3, seq, tok, (const int32_t[]){ -1, 0, 0 }, NULL, la));
    CHECK_STATUS(LM(a)->keep_path(LM(a)->self, 0, 280, (const int32_t[]){ 2, 1 }, 2), HA_ERR_INVALID);
    CHECK_STATUS(LM(a)->keep_path(LM(a)->self, 0, 280, (const int32_t[]){ 0, 3 }, 2), HA_ERR_INVALID);
    CHECK_STATUS(LM(a)->keep_path(LM(a)->self, 5, 280, three, 1), HA_ERR_INVALID);
    CHECK(LEN(a, 0) == 283, "refused keep_path changed the length to %lld", (long long)LEN(a, 0));
    CHECK_OK(LM(a)->keep_path(LM(a)->self, 0, 280, (const int32_t[]){ 0, 2 }, 2));
    CHECK(LEN(a, 0) == 282, "expected 282 after keeping 2 nodes, got %lld", (long long)LEN(a, 0));
    CHECK_OK(LM(a)->keep_path(LM(a)->self, 0, 282, NULL, 0));
    /* a later call continues a tree through parents -2 - j, while the tree lasts and within max_tree nodes in all */
    CHECK_OK(LM(a)->append_tree(LM(a)->self, 2, seq, tok, (const int32_t[]){ -1, 0 }, NULL, la));
    CHECK_STATUS(LM(a)->append_tree(LM(a)->self, 1, seq, tok, (const int32_t[]){ -4 }, NULL, la), HA_ERR_INVALID);
    CHECK_MSG("tree");
    CHECK_OK(LM(a)->append_tree(LM(a)->self, 2, seq, tok, (const int32_t[]){ -3, -2 }, NULL, la)); /* 1 -> 2, 0 -> 3 */
    CHECK(LEN(a, 0) == 286, "a continued tree: expected 286 positions, got %lld", (long long)LEN(a, 0));
    CHECK_STATUS(LM(a)->keep_path(LM(a)->self, 0, 282, (const int32_t[]){ 0, 1, 3 }, 3), HA_ERR_INVALID);
    CHECK_MSG("path");
    CHECK_STATUS(LM(a)->keep_path(LM(a)->self, 0, 282, (const int32_t[]){ 1, 2 }, 2), HA_ERR_INVALID);
    CHECK_STATUS(LM(a)->keep_path(LM(a)->self, 0, 281, (const int32_t[]){ 0, 1 }, 2), HA_ERR_INVALID);
    CHECK(LEN(a, 0) == 286, "refused paths changed the length to %lld", (long long)LEN(a, 0));
    CHECK_OK(LM(a)->keep_path(LM(a)->self, 0, 282, (const int32_t[]){ 0, 1, 2 }, 3));
    CHECK_STATUS(LM(a)->append_tree(LM(a)->self, 1, seq, tok, (const int32_t[]){ -2 }, NULL, la), HA_ERR_INVALID);
    CHECK_OK(LM(a)->append_tree(LM(a)->self, 2, seq, tok, (const int32_t[]){ -1, 0 }, NULL, la));
    CHECK_OK(LM(a)->crop(LM(a)->self, 0, 286));
    CHECK_STATUS(LM(a)->append_tree(LM(a)->self, 1, seq, tok, (const int32_t[]){ -2 }, NULL, la), HA_ERR_INVALID);
    CHECK(LEN(a, 0) == 286, "refused continuations changed the length to %lld", (long long)LEN(a, 0));
    CHECK_OK(LM(a)->crop(LM(a)->self, 0, 280));
    CHECK_OK(LM(a)->append_tree(LM(a)->self, 60, many_seq, tok, many_par, NULL, la)); /* sequence 1: a chain of 60 */
    int32_t more[5] = { -61, 0, 1, 2, 3 };
    CHECK_STATUS(LM(a)->append_tree(LM(a)->self, 5, many_seq, tok, more, NULL, la), HA_ERR_INVALID);
    CHECK_MSG("max_tree");
    CHECK_OK(LM(a)->append_tree(LM(a)->self, 4, many_seq, tok, more, NULL, la));
    CHECK(LEN(a, 1) == 64, "a tree of 64 nodes over two calls: expected 64 positions, got %lld", (long long)LEN(a, 1));
    free(la);
    free(lb);
    ha_llama_context_free(a);
    ha_llama_context_free(b);
    tiny_free(t);
}

/* ---- trees in assisted generation (csrc/generation/assist_tree.c) ------------------------------------------- */

enum { AW = 4, AN = 14 };
static const int32_t APROMPT[2 * AW] = { 7, 12, 3, 44, /* row 1 left padded: */ 0, 0, 19, 5 };
static const int64_t ASTART[2] = { 0, 2 };

static ha_generate_params tree_gen(ha_sampling_params sp, const int32_t *eos, int n_eos, uint8_t *sources) {
    return (ha_generate_params){
        .max_new_tokens = AN, .eos = eos, .n_eos = n_eos, .pad_token_id = 0, .sampling = sp, .sources = sources
    };
}

/* Sequence b of c, after a generation of its row (new tokens (steps,)), holds the row's first LEN positions as
 * appending them gives them: its next token's logits are bitwise a fresh cache's. */
static void check_cache_holds(const char *what, const char *which, const ha_llama *m, ha_llama_context *c, int b,
                              const int32_t *gen, int64_t steps) {
    int32_t all[AW + AN];
    int64_t n = 0;
    for (int64_t j = ASTART[b]; j < AW; j++) all[n++] = APROMPT[b * AW + j];
    for (int64_t j = 0; j < steps; j++) all[n++] = gen[j];
    const int64_t held = LEN(c, b);
    if (held == 0 || held >= n) return;
    float a[TV], *f = xmalloc((size_t)(held + 1) * TV * sizeof(float));
    CHECK_OK(append_seq(c, b, 1, all + held, a));
    ha_llama_context *fresh = ctx_new(m, 1, AW + AN + 64);
    CHECK_OK(append_seq(fresh, 0, held + 1, all, f));
    CHECK_SAME_FLOATS(f + held * TV, a, TV, "%s: the %s's cache of row %d (%lld positions) vs a fresh one", what, which,
                      b, (long long)held);
    free(f);
    ha_llama_context_free(fresh);
}

/* The record of a call's trees (ha_tree_record, 2 rows of AN new tokens, 64 nodes a round) against the call's output
 * `out` and statistics: a row's rounds start at increasing columns, each path a chain of parent links down from a root
 * whose tokens are out's at their columns, the rounds as many as the target passes, the nodes as many as the drafts and
 * the catch-up, the paths' drafts as many as the accepted ones. */
enum { RM = 64 };
static void check_tree_record(const char *what, const ha_tree_record *rec, const int32_t *out,
                              const ha_assist_stats *st) {
    int64_t rounds = 0, nodes = 0, catch_up = 0, accepted = 0;
    for (int b = 0; b < 2; b++) {
        int64_t start = -1;
        for (int64_t i = 0; i < rec->n_rounds[b]; i++) {
            const int64_t *f = rec->rounds + (b * AN + i) * HA_TREE_FIELDS;
            const int32_t *tok = rec->nodes + (b * AN + i) * 3 * RM, *parent = tok + RM, *path = parent + RM;
            const int64_t at = f[HA_TREE_START] - f[HA_TREE_CATCH_UP]; /* the path's first column */
            CHECK(f[HA_TREE_START] > start && at >= 0 && f[HA_TREE_NODES] <= RM &&
                      f[HA_TREE_PATH] <= f[HA_TREE_NODES] && f[HA_TREE_CATCH_UP] <= f[HA_TREE_PATH] &&
                      f[HA_TREE_START] + f[HA_TREE_PATH] - f[HA_TREE_CATCH_UP] <= AN,
                  "%s: row %d round %lld: start %lld after %lld, catch-up %lld, %lld nodes, path %lld", what, b,
                  (long long)i, (long long)f[HA_TREE_START], (long long)start, (long long)f[HA_TREE_CATCH_UP],
                  (long long)f[HA_TREE_NODES], (long long)f[HA_TREE_PATH]);
            start = f[HA_TREE_START];
            for (int64_t d = 0; d < f[HA_TREE_PATH]; d++) {
                CHECK(path[d] >= 0 && path[d] < f[HA_TREE_NODES] && parent[path[d]] == (d ? path[d - 1] : -1) &&
                          tok[path[d]] == out[b * AN + at + d],
                      "%s: row %d round %lld: path node %lld (%d) is no child of the one before or not out's token",
                      what, b, (long long)i, (long long)d, path[d]);
            }
            nodes += f[HA_TREE_NODES];
            catch_up += f[HA_TREE_CATCH_UP];
            accepted += f[HA_TREE_PATH] - f[HA_TREE_CATCH_UP];
        }
        rounds += rec->n_rounds[b];
    }
    CHECK(rounds == st->num_target_passes && nodes == st->num_draft_tokens + catch_up &&
              accepted == st->num_accepted_tokens,
          "%s: recorded %lld rounds, %lld nodes (%lld catch-up), %lld accepted; the call's %lld passes, %lld drafts, "
          "%lld accepted",
          what, (long long)rounds, (long long)nodes, (long long)catch_up, (long long)accepted,
          (long long)st->num_target_passes, (long long)st->num_draft_tokens, (long long)st->num_accepted_tokens);
}

/* Tree-assisted output (tokens, steps, scores, sources of the plain steps) equals plain output for two drafts (another
 * model, the target itself), widths 2 and 4, K 1 to 5, the constant, heuristic and cost schedules, with and without an
 * eos, caches of room and (constant schedule) of exactly prompt + max_new (the tree then narrows near the end):
 * greedy, and coupled sampling with the same seed; some siblings are accepted, the counts add up, and both caches
 * end holding the row's tokens bitwise. */
static void tree_assisted_equals_plain(int64_t long_from, int dynamic) {
    one_thread();
    tiny *target = tiny_build_longrope(HA_BF16, 1, 0, 0, 61, long_from),
         *other = tiny_build_longrope(HA_Q4, 1, 0, 3, 61, long_from); /* near the target */
    int32_t plain[2 * AN], got[2 * AN];
    uint8_t src[2 * AN], plain_src[2 * AN];
    float *ps = xmalloc((size_t)(AN * 2 * TV) * sizeof(float)), *gs = xmalloc((size_t)(AN * 2 * TV) * sizeof(float));
    int64_t siblings_taken = 0;
    for (int sampled = 0; sampled < 2; sampled++) {
        const ha_sampling_params sp = sampled ? (ha_sampling_params){ .do_sample = 1,
                                                                      .temperature = 0.9f,
                                                                      .top_p = 0.95f,
                                                                      .repetition_penalty = 1.2f,
                                                                      .seed = 77 }
                                              : (ha_sampling_params){ .temperature = 1.0f,
                                                                      .top_p = 1.0f,
                                                                      .repetition_penalty = 1.0f };
        int32_t eos = -1;
        for (int with_eos = 0; with_eos < 2; with_eos++) {
            ha_generate_params gp = tree_gen(sp, &eos, with_eos, plain_src);
            ha_llama_context *pc = ctx_new(target->m, 2, 64);
            int64_t plain_steps = -1;
            CHECK_OK(ha_generate(LM(pc), &gp, APROMPT, AW, ASTART, plain, ps, &plain_steps));
            ha_llama_context_free(pc);
            if (!with_eos) eos = plain[5];
            for (int d = 0; d < 2; d++)
                for (int64_t width = 2; width <= 4; width += 2)
                    for (int64_t K = long_from ? 3 : 1; K <= 5; K += 2)
                        for (int sched = 0; sched < 3; sched++)
                            for (int tight = 0; tight < 2 - (long_from > 0 || sched > 0); tight++) {
                                static const double draft_costs[] = { 0.05 }, target_costs[] = { 1.0, 1.05, 1.1 };
                                ha_assist_params ap = { .gen = tree_gen(sp, &eos, with_eos, src),
                                                        /* a dynamic tree's K is its budget: a sibling tree's */
                                                        .num_assistant_tokens = dynamic ? K * width : K,
                                                        .schedule = sched == 2 ? HA_SCHEDULE_COST
                                                                    : sched    ? HA_SCHEDULE_HEURISTIC
                                                                               : HA_SCHEDULE_CONSTANT,
                                                        .acceptance = HA_ACCEPT_COUPLED,
                                                        .draft_costs = draft_costs,
                                                        .n_draft_costs = 1,
                                                        .target_costs = target_costs,
                                                        .n_target_costs = 3,
                                                        .tree_width = width,
                                                        .tree_dynamic = dynamic };
                                static int64_t rec_n[2], rec_rounds[2 * AN * HA_TREE_FIELDS];
                                static int32_t rec_nodes[2 * AN * 3 * RM];
                                ha_tree_record rec = {
                                    .max_nodes = RM, .n_rounds = rec_n, .rounds = rec_rounds, .nodes = rec_nodes
                                };
                                ap.tree_record = &rec; /* the record read beside; the output as without */
                                const tiny *dm = d ? target : other;
                                const int64_t cap = tight ? AW + AN : 64;
                                ha_llama_context *tc = ctx_new(target->m, 2, cap), *dc = ctx_new(dm->m, 2, cap);
                                ha_assist_stats st = { 0 };
                                int64_t steps = -1;
                                CHECK_OK(ha_generate_assisted(LM(tc), LM(dc), &ap, APROMPT, AW, ASTART, got, gs, &steps,
                                                              &st));
                                char what[200];
                                snprintf(what, sizeof what,
                                         "%s%s, draft %s, width %lld, K=%lld, schedule %d, eos %d, cap %lld",
                                         dynamic ? "dynamic, " : "", sampled ? "coupled" : "greedy",
                                         d ? "the target" : "another model", (long long)width, (long long)K, sched,
                                         with_eos ? eos : -1, (long long)cap);
                                CHECK(steps == plain_steps, "%s: expected %lld steps, got %lld", what,
                                      (long long)plain_steps, (long long)steps);
                                for (int b = 0; b < 2; b++)
                                    for (int64_t i = 0; i < steps; i++) {
                                        CHECK(got[b * AN + i] == plain[b * AN + i],
                                              "%s: row %d step %lld expected %d "
                                              "(plain), got %d",
                                              what, b, (long long)i, plain[b * AN + i], got[b * AN + i]);
                                        CHECK_SAME_FLOATS(ps + (i * 2 + b) * TV, gs + (i * 2 + b) * TV, TV,
                                                          "%s: row %d step %lld scores", what, b, (long long)i);
                                    }
                                CHECK(st.num_sibling_tokens <= st.num_draft_tokens &&
                                          st.num_sibling_accepted <= st.num_sibling_tokens &&
                                          st.num_accepted_tokens <=
                                              st.num_draft_tokens - st.num_sibling_tokens + st.num_sibling_accepted,
                                      "%s: counts drafted %lld (siblings %lld), accepted %lld (siblings %lld)", what,
                                      (long long)st.num_draft_tokens, (long long)st.num_sibling_tokens,
                                      (long long)st.num_accepted_tokens, (long long)st.num_sibling_accepted);
                                CHECK(st.num_draft_tokens == 0 || st.num_sibling_tokens > 0,
                                      "%s: width %lld drafted %lld tokens and no sibling", what, (long long)width,
                                      (long long)st.num_draft_tokens);
                                if (d == 1 && !sampled)
                                    CHECK(st.num_sibling_accepted == 0 &&
                                              st.num_accepted_tokens == st.num_draft_tokens - st.num_sibling_tokens,
                                          "%s: the target as its own draft expected its whole chain accepted and no "
                                          "sibling, got %lld of %lld (siblings %lld)",
                                          what, (long long)st.num_accepted_tokens, (long long)st.num_draft_tokens,
                                          (long long)st.num_sibling_accepted);
                                for (int i = 0; i < 2 * AN; i++) /* a token where plain has one */
                                    CHECK((src[i] != HA_SOURCE_NONE) == (plain_src[i] != HA_SOURCE_NONE),
                                          "%s: row %d step %d source %d, plain's %d", what, i / AN, i % AN, src[i],
                                          plain_src[i]);
                                for (int b = 0; b < 2; b++) { /* both caches hold the row's tokens, bitwise */
                                    check_cache_holds(what, "target", target->m, tc, b, got + b * AN, steps);
                                    check_cache_holds(what, "draft", dm->m, dc, b, got + b * AN, steps);
                                }
                                check_tree_record(what, &rec, got, &st);
                                siblings_taken += st.num_sibling_accepted;
                                ha_llama_context_free(tc);
                                ha_llama_context_free(dc);
                            }
        }
    }
    CHECK(siblings_taken > 0, "no sibling was ever accepted: the tree's acceptance path went untested");
    free(ps);
    free(gs);
    tiny_free(target);
    tiny_free(other);
}

void test_tree_assisted_equals_plain(void) { tree_assisted_equals_plain(0, 0); }

/* The same where both models are longrope models switching at 7 positions: no tree has nodes on both sides of the
 * switch (ha_assist_candidate_cap), and the round past it runs the row again whole before its tree. */
void test_tree_assisted_equals_plain_across_a_rope_switch(void) { tree_assisted_equals_plain(7, 0); }

/* The same with dynamic trees (ha_assist_params.tree_dynamic): the draft's frontier in one append_tree a depth, the
 * verified tree its most probable nodes; both caches (the draft's kept from its last tree) end bitwise. */
void test_dyntree_assisted_equals_plain(void) { tree_assisted_equals_plain(0, 1); }
void test_dyntree_assisted_equals_plain_across_a_rope_switch(void) { tree_assisted_equals_plain(7, 1); }

/* Trees are refused by name where they cannot run: a target without append_tree (an external model), a width the
 * target's tree cannot take, a negative width. */
void test_tree_assisted_refusals(void) {
    tiny *t = tiny_build(HA_F32, 0, 0, 0, 5);
    ha_llama_context *tc = ctx_new(t->m, 2, 40), *dc = ctx_new(t->m, 2, 40);
    int32_t out[2 * AN];
    int64_t steps;
    const ha_sampling_params greedy = { .temperature = 1.0f, .top_p = 1.0f, .repetition_penalty = 1.0f };
    ha_assist_params ap = { .gen = tree_gen(greedy, NULL, 0, NULL),
                            .num_assistant_tokens = 3,
                            .tree_width = 2,
                            .prompt_lookup_num_tokens = 3,
                            .max_matching_ngram_size = 2 };
    ha_lm chains_only = *LM(tc);
    chains_only.append_tree = NULL;
    CHECK_STATUS(ha_generate_assisted(&chains_only, LM(dc), &ap, APROMPT, AW, ASTART, out, NULL, &steps, NULL),
                 HA_ERR_UNSUPPORTED);
    CHECK_MSG("chains only");
    ap.tree_width = 64;
    CHECK_STATUS(ha_generate_assisted(LM(tc), LM(dc), &ap, APROMPT, AW, ASTART, out, NULL, &steps, NULL),
                 HA_ERR_INVALID);
    CHECK_MSG("assistant_tree_width=64");
    ap.tree_width = -1;
    CHECK_STATUS(ha_generate_assisted(LM(tc), LM(dc), &ap, APROMPT, AW, ASTART, out, NULL, &steps, NULL),
                 HA_ERR_INVALID);
    CHECK_MSG("assistant_tree_width");
    int64_t n_rounds[2], rounds[2 * AN * HA_TREE_FIELDS];
    int32_t nodes[2 * AN * 3 * RM];
    ha_tree_record rec = { .max_nodes = RM - 1, .n_rounds = n_rounds, .rounds = rounds, .nodes = nodes };
    ap.tree_record = &rec; /* a round's room below the target's max_tree, then a record of chains */
    ap.tree_width = 2;
    CHECK_STATUS(ha_generate_assisted(LM(tc), LM(dc), &ap, APROMPT, AW, ASTART, out, NULL, &steps, NULL),
                 HA_ERR_INVALID);
    CHECK_MSG("room for 64 nodes");
    rec.max_nodes = RM;
    ap.tree_width = 1;
    CHECK_STATUS(ha_generate_assisted(LM(tc), LM(dc), &ap, APROMPT, AW, ASTART, out, NULL, &steps, NULL),
                 HA_ERR_INVALID);
    CHECK_MSG("tree_record");
    ap.tree_record = NULL;
    ap.tree_width = 2; /* dynamic trees: a model draft with tree attention, and a shape of 0 or 1 */
    ap.tree_dynamic = 1;
    CHECK_STATUS(ha_generate_assisted(LM(tc), NULL, &ap, APROMPT, AW, ASTART, out, NULL, &steps, NULL), HA_ERR_INVALID);
    CHECK_MSG("assistant_tree_shape='dynamic'");
    ha_lm draft_chains_only = *LM(dc);
    draft_chains_only.append_tree = NULL;
    CHECK_STATUS(ha_generate_assisted(LM(tc), &draft_chains_only, &ap, APROMPT, AW, ASTART, out, NULL, &steps, NULL),
                 HA_ERR_UNSUPPORTED);
    CHECK_MSG("assistant_tree_shape='siblings'");
    ap.tree_dynamic = 2;
    CHECK_STATUS(ha_generate_assisted(LM(tc), LM(dc), &ap, APROMPT, AW, ASTART, out, NULL, &steps, NULL),
                 HA_ERR_INVALID);
    CHECK_MSG("tree_dynamic=2");
    ha_llama_context_free(tc);
    ha_llama_context_free(dc);
    tiny_free(t);
}

/* Rejection sampling on a tree (its distribution is tests/generation/test_rejection_sampling.py's chi-square test):
 * the target as its own draft accepts every chain candidate (p == q) and never a sibling; another draft runs with
 * siblings accepted now and then, its caches left holding its tokens bitwise. */
void test_tree_rejection_sampling_runs_and_keeps_the_caches(void) {
    one_thread();
    tiny *target = tiny_build(HA_F32, 1, 0, 0, 61), *other = tiny_build(HA_Q4, 1, 0, 0, 61);
    int32_t out[2 * AN];
    int64_t steps, taken[2] = { 0, 0 };
    for (int dyn = 0; dyn < 2; dyn++) /* sibling trees, dynamic trees */
        for (int d = 0; d < 2; d++)
            for (uint64_t seed = 1; seed <= 6; seed++) {
                const ha_sampling_params sp = {
                    .do_sample = 1, .temperature = 1.5f, .top_p = 1.0f, .repetition_penalty = 1.0f, .seed = seed
                };
                ha_assist_params ap = { .gen = tree_gen(sp, NULL, 0, NULL),
                                        .num_assistant_tokens = 3,
                                        .tree_width = 4,
                                        .tree_dynamic = dyn,
                                        .acceptance = HA_ACCEPT_REJECTION };
                const tiny *dm = d ? other : target;
                ha_llama_context *tc = ctx_new(target->m, 2, 64), *dc = ctx_new(dm->m, 2, 64);
                ha_assist_stats st = { 0 };
                CHECK_OK(ha_generate_assisted(LM(tc), LM(dc), &ap, APROMPT, AW, ASTART, out, NULL, &steps, &st));
                CHECK(steps == AN, "seed %llu: expected %d steps, got %lld", (unsigned long long)seed, AN,
                      (long long)steps);
                if (d == 0)
                    CHECK(
                        st.num_sibling_accepted == 0 &&
                            st.num_accepted_tokens == st.num_draft_tokens - st.num_sibling_tokens,
                        "seed %llu, the target as its own draft: expected its whole chain accepted and no sibling, got "
                        "%lld of %lld (siblings %lld)",
                        (unsigned long long)seed, (long long)st.num_accepted_tokens,
                        (long long)(st.num_draft_tokens - st.num_sibling_tokens), (long long)st.num_sibling_accepted);
                for (int b = 0; b < 2; b++) {
                    check_cache_holds("rejection", "target", target->m, tc, b, out + b * AN, steps);
                    check_cache_holds("rejection", "draft", dm->m, dc, b, out + b * AN, steps);
                }
                taken[dyn] += st.num_sibling_accepted;
                ha_llama_context_free(tc);
                ha_llama_context_free(dc);
            }
    CHECK(taken[0] > 0 && taken[1] > 0,
          "rejection sampling never accepted a node off the chain (sibling trees %lld, dynamic %lld): the residual's "
          "path through them went untested",
          (long long)taken[0], (long long)taken[1]);
    tiny_free(target);
    tiny_free(other);
}

static int poll_after(void *user) { return --*(int64_t *)user < 0; }

/* A tree stopped at each of its polls in turn (two sequences' trees in two chunks: before each chunk and each layer)
 * leaves every sequence as it was (window-5 rings included), and the same tree afterwards gives the logits of a
 * cache that never saw it. */
void test_tree_interrupt_leaves_the_cache_as_it_was(void) {
    one_thread();
    tiny *t = family_build(FAM_WINDOW, HA_F32, 12, 0);
    int32_t pre[290], seq[80], tok[80], par[80];
    rng r = { 21 };
    random_tokens(&r, pre, 290);
    random_tokens(&r, tok, 80);
    for (int i = 0; i < 80; i++) { /* 40 nodes each: a chain with a sibling at every other depth */
        seq[i] = i / 40;
        const int j = i % 40, base = i - j;
        par[i] = j == 0 ? -1 : base + (j % 2 ? j - 1 : j - 2);
    }
    float *want = xmalloc(80 * TV * sizeof(float)), *got = xmalloc(80 * TV * sizeof(float));
    ha_llama_context *ref = ctx_new(t->m, 2, 600);
    CHECK_OK(append_seq(ref, 0, 290, pre, NULL));
    CHECK_OK(append_seq(ref, 1, 100, pre, NULL));
    CHECK_OK(LM(ref)->append_tree(LM(ref)->self, 80, seq, tok, par, NULL, want));
    int64_t fire = 0;
    for (;; fire++) {
        ha_llama_context *c = ctx_new(t->m, 2, 600);
        CHECK_OK(append_seq(c, 0, 290, pre, NULL));
        CHECK_OK(append_seq(c, 1, 100, pre, NULL));
        int64_t left = fire;
        ha_interrupt it = { poll_after, &left };
        ha_set_interrupt(&it);
        const ha_status st = LM(c)->append_tree(LM(c)->self, 80, seq, tok, par, NULL, got);
        ha_set_interrupt(NULL);
        if (st == HA_OK) {
            CHECK_SAME_FLOATS(want, got, 80 * TV, "a tree never stopped");
            ha_llama_context_free(c);
            break;
        }
        CHECK(st == HA_ERR_INTERRUPTED, "poll firing at call %lld: expected HA_ERR_INTERRUPTED, got %s",
              (long long)fire, status_name(st));
        CHECK(LEN(c, 0) == 290 && LEN(c, 1) == 100, "an interrupted tree expected lengths 290, 100, got %lld, %lld",
              (long long)LEN(c, 0), (long long)LEN(c, 1));
        CHECK_OK(LM(c)->append_tree(LM(c)->self, 80, seq, tok, par, NULL, got));
        CHECK_SAME_FLOATS(want, got, 80 * TV, "the tree after an interrupt at poll %lld vs a cache that never saw it",
                          (long long)fire);
        ha_llama_context_free(c);
    }
    CHECK(fire == 2 * (1 + TL), "a tree of 2 chunks expected %d polls, counted %lld", 2 * (1 + TL), (long long)fire);
    ha_llama_context_free(ref);
    free(want);
    free(got);
    tiny_free(t);
}

/* The cost schedule shapes the tree: where a wider target append costs nothing more (t(T) flat) siblings are
 * verified, where each token costs a step of its own (t(T) = T t(1)) no sibling is worth it and the rounds verify
 * chains; the output is plain's either way. The same for dynamic trees (nodes off the chain of chosen tokens). */
void test_tree_cost_schedule_keeps_siblings_only_where_width_is_cheap(void) {
    one_thread();
    tiny *target = tiny_build(HA_BF16, 1, 0, 0, 61), *other = tiny_build(HA_Q4, 1, 0, 3, 61);
    const ha_sampling_params greedy = { .temperature = 1.0f, .top_p = 1.0f, .repetition_penalty = 1.0f };
    int32_t plain[2 * AN], got[2 * AN];
    int64_t steps;
    ha_llama_context *pc = ctx_new(target->m, 2, 64);
    ha_generate_params gp = tree_gen(greedy, NULL, 0, NULL);
    CHECK_OK(ha_generate(LM(pc), &gp, APROMPT, AW, ASTART, plain, NULL, &steps));
    ha_llama_context_free(pc);
    static const double draft_costs[] = { 0.02 }, flat[] = { 1.0, 1.0, 1.0, 1.0 }, linear[] = { 1.0, 2.0, 3.0, 4.0 };
    for (int dyn = 0; dyn < 2; dyn++)
        for (int steep = 0; steep < 2; steep++) {
            ha_assist_params ap = { .gen = gp,
                                    .tree_dynamic = dyn,
                                    .num_assistant_tokens = 4,
                                    .schedule = HA_SCHEDULE_COST,
                                    .tree_width = 4,
                                    .draft_costs = draft_costs,
                                    .n_draft_costs = 1,
                                    .target_costs = steep ? linear : flat,
                                    .n_target_costs = 4 };
            ha_llama_context *tc = ctx_new(target->m, 2, 64), *dc = ctx_new(other->m, 2, 64);
            ha_assist_stats st = { 0 };
            CHECK_OK(ha_generate_assisted(LM(tc), LM(dc), &ap, APROMPT, AW, ASTART, got, NULL, &steps, &st));
            const char *shape = dyn ? "dynamic" : "siblings";
            CHECK(memcmp(got, plain, sizeof got) == 0, "%s, %s target costs: expected plain greedy output", shape,
                  steep ? "linear" : "flat");
            if (steep)
                CHECK(st.num_sibling_tokens == 0, "%s, t(T) = T t(1): expected no sibling worth verifying, got %lld",
                      shape, (long long)st.num_sibling_tokens);
            else
                CHECK(st.num_sibling_tokens > 0 && st.num_draft_tokens > st.num_sibling_tokens,
                      "%s, flat t(T): expected siblings beside the chain, got %lld siblings of %lld nodes", shape,
                      (long long)st.num_sibling_tokens, (long long)st.num_draft_tokens);
            ha_llama_context_free(tc);
            ha_llama_context_free(dc);
        }
    tiny_free(target);
    tiny_free(other);
}

/* Prompt lookup's trees: the later matches of the n-gram branch off the chain as siblings; greedy and coupled output
 * is plain's, with siblings verified (a prompt that repeats with variations has several matches that differ). */
void test_tree_prompt_lookup_branches_equal_plain(void) {
    one_thread();
    tiny *t = tiny_build(HA_F32, 1, 0, 0, 71);
    enum { W = 16, N = 20 };
    static const int32_t prompt[W] = { 5, 9, 3, 5, 7, 3, 5, 9, 4, 5, 7, 3, 5, 9, 3, 5 };
    const int64_t start[1] = { 0 };
    int32_t plain[N], got[N];
    int64_t steps, plain_steps, siblings = 0;
    for (int sampled = 0; sampled < 2; sampled++) {
        const ha_sampling_params sp = {
            .do_sample = sampled, .temperature = 1.0f, .top_p = 1.0f, .repetition_penalty = 1.0f, .seed = 5
        };
        ha_generate_params gp = { .max_new_tokens = N, .sampling = sp };
        ha_llama_context *pc = ctx_new(t->m, 1, 64);
        CHECK_OK(ha_generate(LM(pc), &gp, prompt, W, start, plain, NULL, &plain_steps));
        ha_llama_context_free(pc);
        for (int64_t width = 2; width <= 3; width++)
            for (int64_t ngram = 1; ngram <= 2; ngram++) {
                ha_assist_params ap = { .gen = gp,
                                        .tree_width = width,
                                        .prompt_lookup_num_tokens = 4,
                                        .max_matching_ngram_size = ngram,
                                        .acceptance = HA_ACCEPT_REJECTION };
                ha_llama_context *tc = ctx_new(t->m, 1, 64);
                ha_assist_stats st = { 0 };
                CHECK_OK(ha_generate_assisted(LM(tc), NULL, &ap, prompt, W, start, got, NULL, &steps, &st));
                CHECK(steps == plain_steps && memcmp(got, plain, sizeof got) == 0,
                      "%s, prompt lookup width %lld, n-gram %lld: expected plain output",
                      sampled ? "sampled" : "greedy", (long long)width, (long long)ngram);
                siblings += st.num_sibling_tokens;
                ha_llama_context_free(tc);
            }
    }
    CHECK(siblings > 0, "prompt lookup proposed no sibling from a prompt with several different matches");
    tiny_free(t);
}
