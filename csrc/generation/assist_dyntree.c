/* Dynamic token trees (ha_assist_params.tree_dynamic, with tree_width w > 1 and a model draft), in the manner of
 * EAGLE-2: the draft grows a tree by the cumulative probability of its nodes, and the target verifies its most
 * probable part in one append_tree.
 *
 * Drafting, per round and row (depth D: the round's k_max):
 *   - the draft catches up as for chains (one append over the rows), giving the root's distribution q (r->q[0]);
 *   - every expanded node (the root first) gets w children: greedy, its argmax and the w - 1 next most probable;
 *     coupled, its sample under the target's noise at that position and the w - 1 next most probable; rejection
 *     sampling, w tokens drawn without replacement from q under noise of the node's own (ha_sampler_choose_top). A
 *     child's rank qr is its probability (rejection sampling: the parent's s-th highest probability for its s-th
 *     child, whatever was drawn), a node's cum the product of qr along its path;
 *   - depth d = 1 .. D - 1: the frontier, the w nodes of depth d - 1 of highest cum (ties: the lower index; an eos is
 *     never expanded; under the cost schedule only those worth their draft rows, ha_cost_frontier_takes), is
 *     expanded: the draft scores every row's frontier in one append_tree, which continues the row's tree of the
 *     depths before in the draft's cache (draft_frontier); a node none of whose descendants could
 *     enter the verified tree is not expanded (hopeless: the same tree, fewer draft rows; a row whose frontier is
 *     all such stops drafting).
 * Verifying: the verified tree is at most K nodes (r->budget: a chain's candidates), chosen one at a time,
 * the eligible node (its parent chosen) of highest cum first (then the lower depth, the lower index); with the cost
 * schedule, as many as raise the round's expected tokens per unit time (ha_cost_dyn_budget). The target scores each
 * row's catch-up and verified tree in one append_tree, each node's row processed with its own path as history.
 * Accepting walks from the root: greedy and coupled move to the child that is the target's own token (so the output is
 * bitwise plain generation's); rejection sampling runs recursive rejection sampling without replacement over the
 * node's verified children in the order drawn (reject_down); at a leaf the bonus token comes from p.
 *
 * EXACTNESS RULE (rejection sampling): whether a node's s-th child is verified must not depend on the token drawn for
 * it, nor on the ones drawn after it (they depend on it); otherwise a test min(1, P/Q) of it no longer gives P. So
 * ranks are value-free: a child's qr is its rank's probability under its parent's q, not its own token's; keys
 * (cum, then lower depth, lower index) never rise from a parent to a child nor from a child to its next sibling, so
 * every choice here (the frontier, hopeless, the verified tree, the cost schedule's prefix of it) keeps a node
 * according to nodes of higher keys only: its ancestors, earlier siblings, their subtrees and other branches, never
 * itself, its later siblings or their subtrees. (The cost schedule's frontier decides whether a node gets children by
 * the node's reach, which its own token sets: that decides its children and the nodes ranked below them, never the
 * node itself, whose place is settled before its children's; the budget's draft steps are the planned ones.) The
 * verified children of a node are then the first ones drawn, and each step of the walk is exact whatever the rest.
 * Each node's draft uses noise of its own (not the position's, which every node of a depth would share).
 *
 * Caches: the target keeps the accepted path (keep_path); the draft keeps the longest prefix of the accepted path its
 * tree holds (keep_path) and catches up on the rest next round. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assist.h"

/* Rejection sampling: the draft's choice at drafted node i draws its noise with purpose RNG_DRAFT_NODE + i. */
#define RNG_DRAFT_NODE 16

int64_t ha_dyn_max_nodes(int64_t w, int64_t max_tree) {
    const int64_t D = max_tree / w + 1; /* the deepest: w (D - 1) frontier nodes in the draft's tree */
    return 1 + w + (D - 1) * w * w;
}

/* Whether a drafted node of cumulative probability `cum` is not worth expanding: `budget` nodes drafted already have
 * a higher cum, and a node's descendants have no more than its own, so none of them could enter the verified tree
 * (chosen by cum; a node's chosen child comes in only with a sibling of it, which is no likelier): the tree chosen is
 * the same as if the draft expanded it, for fewer draft rows. */
static int hopeless(const row_state *r, double cum, int64_t budget) {
    int64_t above = 0;
    for (int64_t j = 1; j < r->n_dn && above < budget; j++) above += r->dn[j].cum > cum;
    return above >= budget;
}

/* Writes node i's path (its ancestors' tokens and its own) at tok[L, L + depth + 1): the history of the position
 * after it. */
static void put_path(row_state *r, int64_t i) {
    for (int64_t j = i; r->dn[j].parent >= 0; j = r->dn[j].parent) r->tok[r->L + r->dn[j].depth] = r->dn[j].tok;
}

/* Node i's children from its processed draft scores. Greedy and coupled: its chosen token first, then the w - 1 next
 * most probable, each ranked by its own probability. Rejection sampling: w tokens drawn without replacement from q
 * (noise of the node's own), the s-th ranked by q's s-th highest probability, whatever was drawn. */
static ha_status expand(const ha_assist_params *p, const ha_sampler *sampler, const cost_model *cost, row_state *r,
                        int64_t i, int64_t V, int64_t n_max) {
    dyn_node *d = &r->dn[i];
    const uint32_t row = (uint32_t)r->row, pos = (uint32_t)(r->L + d->depth + 1);
    const int rejection = ha_rejection_sampling(p);
    int32_t kid[HA_DYN_MAX_WIDTH];
    double rank[HA_DYN_MAX_WIDTH];
    int64_t nk = 0, nr = 0;
    if (rejection) {
        nk = ha_sampler_choose_top(sampler, d->q, row, pos, (uint32_t)(RNG_DRAFT_NODE + i), p->tree_width, kid);
        ha_tree_rank_probs(d->q, V, d->qn, nk, rank);
    } else {
        kid[0] = ha_sampler_choose(sampler, d->q, row, pos);
        nk = kid[0] >= 0;
        if (nk) ha_tree_siblings(d->q, V, kid[0], p->tree_width - 1, kid + 1, &nr);
        nk += nr;
    }
    if (nk == 0)
        return ha_fail(HA_ERR_INVALID, "the draft removed every token at position %lld of row %d; check its weights",
                       (long long)pos, r->row);
    if (r->n_dn + nk > n_max)
        return ha_fail(HA_ERR_INTERNAL, "assist_dyntree.c: row %d drafted more than %lld nodes", r->row,
                       (long long)n_max);
    d->child0 = (int32_t)r->n_dn;
    d->n_child = (int32_t)nk;
    for (int64_t c = 0; c < nk; c++) {
        const double qx = ha_norm_at(d->q, V, d->qn, kid[c]);
        const double qr = rejection ? rank[c] : qx;
        r->dn[r->n_dn++] = (dyn_node){ .tok = kid[c],
                                       .parent = (int32_t)i,
                                       .depth = d->depth + 1,
                                       .vi = -1,
                                       .di = -1,
                                       .qx = qx,
                                       .qr = qr,
                                       .cum = d->cum * qr };
        if (cost) /* the chance acceptance reaches it: a first child by the chain's candidates' rates, others as
                   * alternatives (what the frontier and select_nodes' gains read) */
            r->dn[r->n_dn - 1].reach = d->reach * (c == 0 ? ha_cost_conf_rate(cost, qx) : ha_cost_alt_rate(cost, qr));
    }
    return HA_OK;
}

/* One depth of every drafting row: its frontier (the w nodes of depth d - 1 of highest cum, not an eos), in ONE
 * append_tree over the rows; logits at the frontier, into q, each row's processed with its path's history; then each
 * frontier node is expanded. The draft's cache holds the row's tree of this round, base L: depth 1 starts it (its
 * frontier, the root's children, at the base), each later depth continues it (ha_lm.append_tree's parents -2 - j: the
 * frontier's parents are the frontier before it, appended by the call before), so each depth appends only its frontier;
 * dyn_node.di is a node's index in that tree. Returns in *n_rows the rows of q used (0: no row had a frontier;
 * drafting is over). */
static ha_status draft_frontier(ha_lm *draft, const ha_assist_params *p, ha_sampler *sampler, const cost_model *cost,
                                row_state *rows, int64_t B, buffers *b, int64_t d, float *q, int64_t *n_rows,
                                ha_assist_stats *stats) {
    const int64_t V = b->V, w = p->tree_width;
    int64_t n = 0, wanted = 0;
    ha_status st;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (!r->drafting) continue;
        if (d >= r->k_max) {
            r->drafting = 0;
            continue;
        }
        int32_t front[HA_DYN_MAX_WIDTH];
        int64_t nf = 0;
        for (int64_t j = 1; j < r->n_dn; j++) { /* the w best of depth d - 1, best first, the lower index on ties */
            const dyn_node *x = &r->dn[j];
            if (x->depth != d - 1 || ha_is_eos(&p->gen, x->tok) || hopeless(r, x->cum, r->budget)) continue;
            int64_t at = nf < w ? nf++ : w;
            while (at > 0 && r->dn[front[at - 1]].cum < x->cum) {
                if (at < w) front[at] = front[at - 1];
                at--;
            }
            if (at < w) front[at] = (int32_t)j;
        }
        if (cost) { /* the nodes worth their draft rows (in cum order: ha_cost_frontier_takes) */
            int64_t taken = 0;
            for (int64_t f = 0; f < nf; f++)
                if (ha_cost_frontier_takes(cost, r, d, taken, r->dn[front[f]].reach)) front[taken++] = front[f];
            nf = taken;
        }
        if (nf == 0) {
            r->drafting = 0;
            continue;
        }
        for (int64_t f = 1; f < nf; f++) /* in index order */
            for (int64_t g = f; g > 0 && front[g - 1] > front[g]; g--) {
                const int32_t t = front[g];
                front[g] = front[g - 1];
                front[g - 1] = t;
            }
        const int64_t held = r->draft_len - r->L; /* the tree's nodes from this round's calls before */
        for (int64_t f = 0; f < nf; f++) {
            dyn_node *x = &r->dn[front[f]];
            x->di = (int32_t)(held + f);
            b->seq[n] = r->row;
            b->tok[n] = x->tok;
            b->parent[n] = x->parent == 0 ? -1 : -2 - r->dn[x->parent].di;
            b->want[n++] = 1;
            x->q = q + wanted++ * V;
        }
        r->draft_len += nf;
        stats->num_draft_passes++;
    }
    *n_rows = wanted;
    if (n == 0) return HA_OK;
    const double t0 = ha_now();
    st = draft->append_tree(draft->self, n, b->seq, b->tok, b->parent, b->want, q);
    ha_seconds_add(&p->gen, HA_SECONDS_DRAFT, t0);
    if (st != HA_OK) return st;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (!r->drafting) continue;
        const int64_t made = r->n_dn;
        for (int64_t j = 1; j < made; j++) {
            dyn_node *x = &r->dn[j];
            if (x->di < 0 || x->depth != d - 1) continue;
            put_path(r, j);
            st = ha_sampler_process(sampler, x->q, r->row, r->tok, r->L + d, r->generated + d);
            if (st != HA_OK) return st;
            x->qn = ha_rejection_sampling(p) ? ha_softmax_norm(x->q, V) : ha_softmax_estimate(sampler, x->q);
            if ((st = expand(p, sampler, cost, r, j, V, b->n_dyn)) != HA_OK) return st;
        }
    }
    return HA_OK;
}

/* Row r's verified tree, at most n_max nodes in the order chosen (r->vnode, each node's vi its place), and with a
 * cost model each step's gain: the chance acceptance reaches the node that called the step. */
static int64_t select_nodes(const cost_model *cost, row_state *r, int64_t n_max, double *gain) {
    int64_t n = 0;
    for (int64_t j = 0; j < r->n_dn; j++) r->dn[j].vi = -1;
    while (n < n_max) {
        int64_t best = -1;
        for (int64_t j = 1; j < r->n_dn; j++) {
            const dyn_node *x = &r->dn[j];
            if (x->vi >= 0 || (x->parent != 0 && r->dn[x->parent].vi < 0)) continue;
            if (best < 0 || x->cum > r->dn[best].cum || (x->cum == r->dn[best].cum && x->depth < r->dn[best].depth))
                best = j;
        }
        if (best < 0) break;
        const dyn_node *par = &r->dn[r->dn[best].parent];
        /* a node's first child in the tree is its chosen child (coupled: its sample, ranked by its own probability,
         * comes in with its first sibling; greedy and rejection sampling rank it first anyway) */
        const int64_t add = r->dn[par->child0].vi < 0 ? par->child0 : best;
        r->dn[add].vi = (int32_t)n;
        r->vnode[n] = (int32_t)add;
        if (cost) /* its parent's reach (expand's) times its rate, as expand rates a child */
            gain[n] = par->reach * (best == par->child0 ? ha_cost_conf_rate(cost, r->dn[best].qr)
                                                        : ha_cost_alt_rate(cost, r->dn[best].qr));
        n++;
    }
    return n;
}

ha_status ha_dyn_draft(ha_lm *draft, const ha_assist_params *p, ha_sampler *sampler, row_state *rows, int64_t B,
                       buffers *b, cost_model *cost, ha_assist_stats *stats) {
    const int64_t V = b->V, w = p->tree_width;
    int64_t q_rows = 0;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        r->n_v = 0;
        r->k = 0;
        b->n_sel[i] = 0;
        r->drafting = !r->done && r->k_max > 0;
        q_rows += r->drafting ? 1 + w * (r->k_max - 1) : 0;
        if (r->done) continue;
        r->dn[0] = (dyn_node){ .tok = r->tok[r->L - 1],
                               .parent = -1,
                               .depth = -1,
                               .vi = -1,
                               .di = -1,
                               .qx = 1.0,
                               .qr = 1.0,
                               .cum = 1.0,
                               .reach = 1.0 };
        r->n_dn = 1;
    }
    ha_status st = ha_assist_grow(&b->Q, &b->cap_q, q_rows, V);
    if (st != HA_OK) return st;
    float *q = b->Q;
    /* Depth 0: each drafting row's catch-up in one append (as draft_round's first step), logits at its last token. */
    int64_t n = 0, n_rows = 0;
    int whole = 0; /* the append takes in some row's whole sequence (its prompt): prefill in p->gen.seconds */
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (!r->drafting) continue;
        if (r->draft_len >= r->L)
            return ha_fail(HA_ERR_INTERNAL, "assist_dyntree.c: row %d's draft holds %lld positions of %lld", r->row,
                           (long long)r->draft_len, (long long)r->L);
        if (ha_whole_again(draft, r->draft_len, r->L)) {
            if ((st = draft->crop(draft->self, r->row, 0)) != HA_OK) return st;
            r->draft_len = 0;
        }
        whole |= r->draft_len == 0;
        for (int64_t j = r->draft_len; j < r->L; j++) {
            b->seq[n] = r->row;
            b->tok[n] = r->tok[j];
            b->want[n++] = j == r->L - 1;
        }
        r->draft_len = r->L;
        r->dn[0].q = r->q[0] = q + n_rows++ * V;
        stats->num_draft_passes++;
    }
    if (n_rows == 0) return HA_OK;
    const double t0 = ha_now();
    st = draft->append(draft->self, n, b->seq, b->tok, b->want, q);
    ha_seconds_add(&p->gen, whole ? HA_SECONDS_PREFILL : HA_SECONDS_DRAFT, t0);
    if (st != HA_OK) return st;
    q += n_rows * V;
    if (cost) cost->steps_cost += ha_cost_draft_step(cost, 0, n_rows);
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (!r->drafting) continue;
        dyn_node *root = &r->dn[0];
        if ((st = ha_sampler_process(sampler, root->q, r->row, r->tok, r->L, r->generated)) != HA_OK) return st;
        r->qn[0] = root->qn = ha_rejection_sampling(p) ? ha_softmax_norm(root->q, V)
                                                       : ha_softmax_estimate(sampler, root->q);
        if ((st = expand(p, sampler, cost, r, 0, V, b->n_dyn)) != HA_OK) return st;
    }
    /* Depths 1 .. D - 1: the frontiers. The cost schedule's budget weighs the round's draft steps; under rejection
     * sampling it takes the steps planned (each row's k_max) rather than those run, which depend on every node's
     * rank (the exactness rule: no node's place may depend on the nodes ranked below it). */
    const int rejection = ha_rejection_sampling(p);
    for (int64_t d = 1; cost && rejection; d++) {
        int64_t planned = 0; /* w frontier nodes a row */
        for (int64_t i = 0; i < B; i++) planned += rows[i].drafting && rows[i].k_max > d ? w : 0;
        if (planned == 0) break;
        cost->steps_cost += ha_cost_draft_step(cost, d, planned);
    }
    for (int64_t d = 1;; d++) {
        if ((st = draft_frontier(draft, p, sampler, cost, rows, B, b, d, q, &n_rows, stats)) != HA_OK) return st;
        if (n_rows == 0) break;
        q += n_rows * V;
        if (cost && !rejection) cost->steps_cost += ha_cost_draft_step(cost, d, n_rows); /* a row a frontier node */
    }
    /* The verified trees: at most r->budget nodes each (the row's K, as a chain's candidates). */
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (r->done || r->n_dn < 2) continue;
        b->n_sel[i] = select_nodes(cost, r, r->budget, b->gain + i * b->max_tree);
    }
    if (cost) ha_cost_dyn_budget(cost, rows, B, b->gain, b->n_sel, b->max_tree, b->n_keep);
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (r->done || r->n_dn < 2) continue;
        r->n_v = cost ? b->n_keep[i] : b->n_sel[i];
        for (int64_t v = r->n_v; v < b->n_sel[i]; v++) r->dn[r->vnode[v]].vi = -1;
        for (int64_t v = 0; v < r->n_v; v++)
            if (r->dn[r->vnode[v]].depth + 1 > r->k) r->k = r->dn[r->vnode[v]].depth + 1;
    }
    return HA_OK;
}

ha_status ha_dyn_verify(ha_lm *target, const ha_assist_params *p, ha_sampler *sampler, row_state *rows, int64_t B,
                        buffers *b) {
    const int64_t V = b->V;
    int64_t n = 0, n_rows = 0;
    for (int64_t i = 0; i < B; i++)
        if (!rows[i].done) n_rows += rows[i].n_v + (rows[i].target_len < rows[i].L);
    ha_status st = ha_assist_grow_scores(b, p, n_rows);
    if (st != HA_OK) return st;
    n_rows = 0;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (r->done) continue;
        dyn_node *root = &r->dn[0];
        const int64_t first = n;
        root->raw = NULL;
        ha_tree_catch_up(r, b, i, &n, &n_rows, &root->p, r->raw ? &root->raw : NULL);
        const int32_t base = r->catch_up > 0 ? (int32_t)(n - 1) : -1; /* the root in the call */
        for (int64_t v = 0; v < r->n_v; v++) {
            dyn_node *x = &r->dn[r->vnode[v]];
            b->seq[n] = r->row;
            b->tok[n] = x->tok;
            b->parent[n] = x->parent == 0 ? base : (int32_t)(first + r->catch_up + r->dn[x->parent].vi);
            b->want[n++] = 1;
            x->p = b->P + n_rows++ * V;
        }
        ha_tree_note_nodes(r, b, first, n);
    }
    if ((st = ha_tree_score(target, p, b, n, n_rows)) != HA_OK) return st;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (r->done) continue;
        dyn_node *root = &r->dn[0];
        if (r->raw && root->p >= b->P && root->p < b->P + n_rows * V) root->raw = b->raw + (root->p - b->P);
        if ((st = ha_sampler_process(sampler, root->p, r->row, r->tok, r->L, r->generated)) != HA_OK) return st;
        for (int64_t v = 0; v < r->n_v; v++) {
            dyn_node *x = &r->dn[r->vnode[v]];
            x->raw = r->raw ? b->raw + (x->p - b->P) : NULL;
            put_path(r, r->vnode[v]);
            const int64_t h = r->L + x->depth + 1;
            if ((st = ha_sampler_process(sampler, x->p, r->row, r->tok, h, r->generated + x->depth + 1)) != HA_OK)
                return st;
        }
    }
    return HA_OK;
}

/* Rejection sampling at node d after its first child was rejected: its other verified children, in the order drawn
 * (the first ones: the exactness rule), by recursive rejection sampling without replacement. Returns the child taken,
 * or -1 with *next. */
static int64_t reject_down(const ha_sampler *sampler, const row_state *r, const dyn_node *d, ha_normalizer np,
                           uint32_t pos, int32_t *next) {
    int32_t rest[HA_DYN_MAX_WIDTH];
    int64_t m = 0;
    for (int64_t c = d->child0 + 1; c < d->child0 + d->n_child && r->dn[c].vi >= 0; c++) rest[m++] = r->dn[c].tok;
    const int64_t i = ha_reject_without_replacement(sampler, d->p, np, d->q, d->qn, r->dn[d->child0].tok, rest, m,
                                                    r->rrs, (uint32_t)r->row, pos, next);
    return i < 0 ? -1 : d->child0 + 1 + i;
}

int64_t ha_dyn_accept(const ha_assist_params *p, const ha_sampler *sampler, row_state *r, int64_t V, int32_t *next) {
    const uint32_t row = (uint32_t)r->row;
    const int rejection = ha_rejection_sampling(p);
    int64_t n = 0, cur = 0;
    r->n_path = 0;
    for (int64_t j = 0; j < r->catch_up; j++) r->path[r->n_path++] = (int32_t)j;
    for (;;) {
        const dyn_node *d = &r->dn[cur];
        const uint32_t pos = (uint32_t)(r->L + n);
        r->p[n] = d->p;
        if (r->raw) r->raw[n] = d->raw;
        const int has_child = d->n_child > 0 && r->dn[d->child0].vi >= 0;
        r->dyn_leaf = !has_child;
        int64_t to = -1;
        if (!rejection || !has_child) { /* greedy, coupled, or the bonus token at a leaf: the target's own token */
            const int32_t t = ha_sampler_choose(sampler, d->p, row, pos);
            for (int64_t c = d->child0; has_child && c < d->child0 + d->n_child && to < 0; c++)
                if (r->dn[c].vi >= 0 && r->dn[c].tok == t) to = c;
            if (to < 0) *next = t;
        } else {
            const ha_normalizer np = ha_softmax_norm(d->p, V);
            const int32_t x = r->dn[d->child0].tok;
            const double px = ha_norm_at(d->p, V, np, x), qx = ha_norm_at(d->q, V, d->qn, x);
            const double u = ha_rng_uniform(p->gen.sampling.seed, row, pos, HA_RNG_ACCEPT, 0);
            to = qx > 0.0 && u <= px / qx ? d->child0 : reject_down(sampler, r, d, np, pos, next);
        }
        if (to < 0) return n;
        r->tok[r->L + n++] = r->dn[to].tok;
        r->path[r->n_path++] = (int32_t)(r->catch_up + r->dn[to].vi);
        cur = to;
    }
}

ha_status ha_dyn_keep(ha_lm *target, ha_lm *draft, row_state *r, int64_t L_old, int64_t keep, int64_t *draft_len) {
    ha_status st = target->keep_path(target->self, r->row, L_old - r->catch_up, r->path, keep);
    if (st != HA_OK) return st;
    int32_t dpath[64];
    int64_t m = 0;
    for (int64_t j = r->catch_up; j < r->n_path && m < 64; j++) { /* the accepted nodes the draft's tree holds */
        const dyn_node *x = &r->dn[r->vnode[r->path[j] - r->catch_up]];
        if (x->di < 0) break;
        dpath[m++] = x->di;
    }
    if (m > 0 && (st = draft->keep_path(draft->self, r->row, L_old, dpath, m)) != HA_OK) return st;
    if (*draft_len > L_old + m) *draft_len = L_old + m;
    return HA_OK;
}

/* Whether node i is on the path accepted (of n nodes). */
static int accepted(const row_state *r, int64_t i, int64_t n) {
    const int64_t d = r->dn[i].depth;
    return d >= 0 && d < n && r->vnode[r->path[r->catch_up + d] - r->catch_up] == i;
}

/* Whether node i is on the chain of chosen tokens from the root. */
static int on_chain(const row_state *r, int64_t i) {
    for (int64_t j = i; j > 0; j = r->dn[j].parent)
        if (r->dn[r->dn[j].parent].child0 != j) return 0;
    return 1;
}

void ha_dyn_count(const row_state *r, int64_t n, int64_t kept, ha_assist_stats *stats, cost_model *cost) {
    double conf[64];
    int64_t k_chain = 0, n_chain = 0;
    stats->num_draft_tokens += r->n_v;
    for (int64_t v = 0; v < r->n_v; v++) {
        const int64_t i = r->vnode[v];
        const dyn_node *x = &r->dn[i];
        const int chain = on_chain(r, i);
        stats->num_sibling_tokens += !chain;
        if (chain && k_chain < 64) conf[k_chain++] = x->qx;
        if (stats->proposed_at) stats->proposed_at[x->depth]++;
        /* an alternative (not its parent's first child) whose parent acceptance reached: tested */
        if (cost && r->dn[x->parent].child0 != i && (x->parent == 0 || accepted(r, x->parent, n)))
            ha_cost_count_alt(cost, x->qr, accepted(r, i, n));
    }
    const int64_t acc = n < kept ? n : kept;
    for (int64_t j = 0; j < acc; j++) {
        const int64_t i = r->vnode[r->path[r->catch_up + j] - r->catch_up];
        const int chain = on_chain(r, i);
        stats->num_sibling_accepted += !chain;
        n_chain += chain && n_chain == j;
        if (stats->accepted_at) stats->accepted_at[j]++;
    }
    if (cost) ha_cost_count(cost, &cost->rows[r->row], conf, k_chain, n_chain);
}
