/* Token trees in assisted generation (ha_assist_params.tree_width > 1): each draft step's candidate, the chain's,
 * comes with its siblings, the draft's next most probable tokens at the same position (no extra draft passes); the
 * target scores every row's chain and siblings in one append_tree, each node bitwise as a sequential decode of its
 * path; acceptance walks down the chain while the target's own token (its argmax, or its seeded sample: coupled) is
 * the chain's candidate, steps onto a sibling that is the target's token and takes the target's token after it, so
 * the output is bitwise plain generation's; the accepted path's keys and values move into place (keep_path).
 * Rejection sampling: the siblings are the draft's next draws without replacement after the candidate; acceptance
 * walks the chain by min(1, p/q) and, at the first rejection, tests the siblings by recursive rejection sampling
 * without replacement (reject_to_siblings): the output is distributed exactly as the target's.
 *
 * Prompt lookup's trees: the later matches of the n-gram branch off the chain as siblings (assist.c's
 * lookup_siblings), accepted where they are the target's own token (its argmax or its sample: lookup has no
 * distribution for rejection sampling, as for its chains).
 *
 * A row's nodes in the target's tree, in call order: its catch-up (tok[L - catch_up, L), a chain from the sequence's
 * end; at most one token between rounds), then for each draft step j candidate j (its parent the node before: the
 * previous candidate, the last catch-up token, or the sequence's end) and its nsib[j] siblings (the same parent). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assist.h"

void ha_tree_siblings(const float *q, int64_t V, int32_t x, int64_t n_max, int32_t *out, int64_t *n) {
    int64_t k = 0;
    for (int32_t t = 0; t < V; t++) {
        if (t == x || !(q[t] > -INFINITY)) continue; /* the candidate itself, removed tokens and NaN */
        int64_t at = k < n_max ? k++ : n_max;         /* insertion into the descending list, earlier index first */
        while (at > 0 && q[out[at - 1]] < q[t]) {
            if (at < n_max) out[at] = out[at - 1];
            at--;
        }
        if (at < n_max) out[at] = t;
    }
    *n = k;
}

void ha_tree_rank_probs(const float *q, int64_t V, ha_normalizer qn, int64_t n, double *rank) {
    int32_t top[HA_DYN_MAX_WIDTH];
    int64_t nt = 0;
    ha_tree_siblings(q, V, -1, n < HA_DYN_MAX_WIDTH ? n : HA_DYN_MAX_WIDTH, top, &nt);
    for (int64_t s = 0; s < n; s++) rank[s] = nt > 0 ? ha_norm_at(q, V, qn, top[s < nt ? s : nt - 1]) : 0.0;
}

void ha_tree_catch_up(row_state *r, buffers *b, int64_t i, int64_t *n, int64_t *n_rows, float **p0, float **raw0) {
    const int64_t V = b->V, first = *n;
    r->catch_up = r->L - r->target_len;
    if (r->catch_up == 0) { /* position L scored already: by the prefill, or by run_whole_again */
        *p0 = b->first + i * V;
        if (raw0) *raw0 = b->first_raw + i * V;
    }
    for (int64_t j = r->target_len; j < r->L; j++) {
        b->seq[*n] = r->row;
        b->tok[*n] = r->tok[j];
        b->parent[*n] = *n == first ? -1 : (int32_t)(*n - 1);
        b->want[*n] = j == r->L - 1;
        if (b->want[(*n)++]) *p0 = b->P + (*n_rows)++ * V;
    }
}

void ha_tree_note_nodes(row_state *r, const buffers *b, int64_t first, int64_t end) {
    r->n_nodes = end - first;
    for (int64_t j = 0; j < r->n_nodes; j++) {
        r->node_tok[j] = b->tok[first + j];
        r->node_parent[j] = b->parent[first + j] < 0 ? -1 : (int32_t)(b->parent[first + j] - first);
    }
}

ha_status ha_tree_score(ha_lm *target, const ha_assist_params *p, buffers *b, int64_t n, int64_t n_rows) {
    const double t0 = ha_now();
    ha_status st = n > 0 ? target->append_tree(target->self, n, b->seq, b->tok, b->parent, b->want, b->P) : HA_OK;
    ha_seconds_add(&p->gen, HA_SECONDS_TARGET, t0);
    if (st == HA_OK && p->gen.logits_out) memcpy(b->raw, b->P, (size_t)n_rows * (size_t)b->V * sizeof(float));
    return st;
}

/* The index among row r's nodes of candidate j (its sibling i: that + 1 + i). */
static int64_t node_of(const row_state *r, int64_t j) {
    int64_t at = r->catch_up;
    for (int64_t s = 0; s < j; s++) at += 1 + r->nsib[s];
    return at;
}

ha_status ha_tree_verify(ha_lm *target, const ha_assist_params *p, ha_sampler *sampler, row_state *rows, int64_t B,
                         buffers *b) {
    const int64_t V = b->V, w1 = p->tree_width - 1;
    int64_t n = 0, n_rows = 0;
    for (int64_t i = 0; i < B; i++) {
        const row_state *r = &rows[i];
        if (r->done) continue;
        n_rows += r->k + (r->target_len < r->L);
        for (int64_t j = 0; j < r->k; j++) n_rows += r->nsib[j];
    }
    ha_status st = ha_assist_grow_scores(b, p, n_rows);
    if (st != HA_OK) return st;
    n_rows = 0;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (r->done) continue;
        const int64_t first = n; /* the row's node 0 in the call */
        ha_tree_catch_up(r, b, i, &n, &n_rows, &r->p[0], r->raw ? &r->raw[0] : NULL);
        int32_t parent = r->catch_up > 0 ? (int32_t)(n - 1) : -1;
        for (int64_t j = 0; j < r->k; j++) {
            const int32_t cand = (int32_t)n;
            b->seq[n] = r->row;
            b->tok[n] = r->tok[r->L + j];
            b->parent[n] = parent;
            b->want[n++] = 1;
            r->p[j + 1] = b->P + n_rows++ * V;
            for (int64_t s = 0; s < r->nsib[j]; s++) {
                b->seq[n] = r->row;
                b->tok[n] = r->sib[j * w1 + s];
                b->parent[n] = parent;
                b->want[n++] = 1;
                r->ps[j * w1 + s] = b->P + n_rows++ * V;
            }
            parent = cand;
        }
        ha_tree_note_nodes(r, b, first, n);
    }
    if ((st = ha_tree_score(target, p, b, n, n_rows)) != HA_OK) return st;
    /* raw rows beside the processed ones, at the same index; then each row processed with the history it follows */
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (r->done) continue;
        for (int64_t j = 0; r->raw && j <= r->k; j++)
            if (r->p[j] >= b->P && r->p[j] < b->P + n_rows * V) r->raw[j] = b->raw + (r->p[j] - b->P);
        for (int64_t j = 0; j <= r->k; j++)
            if ((st = ha_sampler_process(sampler, r->p[j], r->row, r->tok, r->L + j, r->generated + j)) != HA_OK)
                return st;
        for (int64_t j = 0; j < r->k; j++) {
            const int32_t cand = r->tok[r->L + j];
            for (int64_t s = 0; s < r->nsib[j]; s++) { /* a sibling's row follows the sibling in place of candidate j */
                if (r->praw) r->praw[j * w1 + s] = b->raw + (r->ps[j * w1 + s] - b->P);
                r->tok[r->L + j] = r->sib[j * w1 + s];
                st = ha_sampler_process(sampler, r->ps[j * w1 + s], r->row, r->tok, r->L + j + 1, r->generated + j + 1);
                r->tok[r->L + j] = cand;
                if (st != HA_OK) return st;
            }
        }
    }
    return HA_OK;
}

/* Candidate n's sibling s is taken: written at tok[L + n], its rows as p[n + 1]; the target's token after it. */
static int64_t take_sibling(const ha_sampler *sampler, row_state *r, int64_t w1, int64_t n, int64_t s, int32_t *next) {
    const int64_t L = r->L;
    r->sib_taken = s;
    r->tok[L + n] = r->sib[n * w1 + s];
    r->p[n + 1] = r->ps[n * w1 + s];
    if (r->raw) r->raw[n + 1] = r->praw[n * w1 + s];
    *next = ha_sampler_choose(sampler, r->p[n + 1], (uint32_t)r->row, (uint32_t)(L + n + 1));
    return n + 1;
}

/* Rejection sampling at depth n after the chain's candidate x was rejected: its siblings, x's next draws from q
 * without replacement (a prefix of them kept), by recursive rejection sampling without replacement; the token is
 * distributed as the residual max(0, p - q) normalized, whatever the siblings. */
static int64_t reject_to_siblings(const ha_sampler *sampler, row_state *r, int64_t w1, int64_t n, ha_normalizer np,
                                  int32_t *next) {
    const int64_t s = ha_reject_without_replacement(sampler, r->p[n], np, r->q[n], r->qn[n], r->tok[r->L + n],
                                                    r->sib + n * w1, r->nsib[n], r->rrs, (uint32_t)r->row,
                                                    (uint32_t)(r->L + n), next);
    return s < 0 ? n : take_sibling(sampler, r, w1, n, s, next);
}

static int64_t accept_nodes(const ha_assist_params *p, const ha_sampler *sampler, row_state *r, int model_draft,
                            int64_t V, int32_t *next) {
    const uint32_t row = (uint32_t)r->row;
    const int64_t L = r->L, k = r->k, w1 = p->tree_width - 1;
    r->sib_taken = -1;
    if (ha_rejection_sampling(p) && model_draft) {
        for (int64_t n = 0; n < k; n++) { /* the chain's candidates by min(1, p/q), as accept() in assist.c */
            const int32_t x = r->tok[L + n];
            const ha_normalizer np = ha_softmax_norm(r->p[n], V);
            const double px = ha_norm_at(r->p[n], V, np, x), qx = ha_norm_at(r->q[n], V, r->qn[n], x);
            const double u = ha_rng_uniform(p->gen.sampling.seed, row, (uint32_t)(L + n), HA_RNG_ACCEPT, 0);
            if (!(qx > 0.0) || u > px / qx) {
                r->chain_n = n;
                return reject_to_siblings(sampler, r, w1, n, np, next);
            }
        }
        r->chain_n = k;
        *next = ha_sampler_choose(sampler, r->p[k], row, (uint32_t)(L + k)); /* the bonus token, from p */
        return k;
    }
    for (int64_t n = 0;; n++) { /* greedy, coupled, or candidates without distributions: the target's own token */
        const int32_t t = ha_sampler_choose(sampler, r->p[n], row, (uint32_t)(L + n));
        if (n < k && t == r->tok[L + n]) continue;
        r->chain_n = n;
        for (int64_t s = 0; n < k && s < r->nsib[n]; s++)
            if (r->sib[n * w1 + s] == t) return take_sibling(sampler, r, w1, n, s, next);
        *next = t;
        return n;
    }
}

int64_t ha_tree_accept(const ha_assist_params *p, const ha_sampler *sampler, row_state *r, int model_draft, int64_t V,
                       int32_t *next) {
    const int64_t n = accept_nodes(p, sampler, r, model_draft, V, next);
    r->n_path = 0; /* the accepted path: the catch-up, the chain's chain_n candidates, then the sibling taken */
    for (int64_t j = 0; j < r->catch_up; j++) r->path[r->n_path++] = (int32_t)j;
    for (int64_t c = 0; c < r->chain_n; c++) r->path[r->n_path++] = (int32_t)node_of(r, c);
    if (r->sib_taken >= 0) r->path[r->n_path++] = (int32_t)(node_of(r, r->chain_n) + 1 + r->sib_taken);
    return n;
}

ha_status ha_tree_keep(ha_lm *target, const row_state *r, int64_t L_old, int64_t keep) {
    if (keep > r->n_path)
        return ha_fail(HA_ERR_INTERNAL, "assist_tree.c: keeps %lld nodes of a path of %lld", (long long)keep,
                       (long long)r->n_path);
    return target->keep_path(target->self, r->row, L_old - r->catch_up, r->path, keep);
}
