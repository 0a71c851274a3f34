/* Assisted generation (speculative decoding): the draft proposes up to K tokens, the target scores them all in
 * one append, the acceptance step keeps what the target itself would have produced, and both caches are
 * cropped to the accepted length. Models are driven only through the model interface (ha_lm).
 *
 * The rows of a batch run together, round by round: each round every unfinished row gets its own K, the rows
 * still drafting share one draft append per draft step, and one target append verifies every row's candidates;
 * then each row accepts, ends or goes on by itself. Every row's logits are bitwise what it would get alone
 * (ha_lm.append is batch-invariant), so each row's output is bitwise the row run alone.
 *
 * Per row, the invariant between rounds: tok[0, L) are the row's tokens (prompt then generated); the target's
 * cache holds a prefix of them and the draft's cache another prefix; each model first catches up on the
 * tokens it has not seen. Noise is keyed by (seed, row, position), so which tokens are drawn at a position
 * never depends on how many were drafted or accepted before it, nor on the other rows.
 *
 * This file holds the rounds; the cost schedule is assist_cost.c, the thread drafting ahead assist_ahead.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assist.h"

ha_status ha_assist_grow(float **buf, int64_t *cap, int64_t rows, int64_t V) {
    if (rows <= *cap) return HA_OK;
    const int64_t want = rows > 2 * *cap ? rows : 2 * *cap;
    float *n = ha_malloc_array((size_t)want, (size_t)V, sizeof(float));
    if (!n)
        return ha_fail(HA_ERR_NOMEM,
                       "out of memory for the scores of %lld verified positions over a vocabulary of "
                       "%lld",
                       (long long)want, (long long)V);
    free(*buf);
    *buf = n;
    *cap = want;
    return HA_OK;
}

ha_status ha_assist_grow_scores(buffers *b, const ha_assist_params *p, int64_t rows) {
    ha_status st = ha_assist_grow(&b->P, &b->cap_p, rows, b->V);
    if (st == HA_OK && p->gen.logits_out) st = ha_assist_grow(&b->raw, &b->cap_raw, rows, b->V);
    return st;
}

/* Token trees from prompt lookup: the later matches of the same n-gram at i2 > i (n tokens) as branches, each
 * cut to one sibling where it leaves the chain tok[L, L + k): at the first depth j where the tokens that followed
 * it differ from the chain's, that token (not an eos, not there yet) joins candidate j's siblings, up to w - 1. */
static void lookup_siblings(const ha_assist_params *p, row_state *r, int64_t i, int64_t n, int64_t k) {
    const int32_t *t = r->tok;
    const int64_t L = r->L, w1 = p->tree_width - 1;
    for (int64_t j = 0; j < k; j++) r->nsib[j] = 0;
    for (int64_t i2 = i + 1; i2 + n < L; i2++) {
        if (memcmp(t + i2, t + L - n, (size_t)n * sizeof(int32_t)) != 0) continue;
        int64_t j = 0;
        while (j < k && i2 + n + j < L && t[i2 + n + j] == t[L + j]) j++;
        if (j == k || i2 + n + j >= L) continue; /* no branch: it follows the chain as far as it goes */
        const int32_t y = t[i2 + n + j];
        int seen = ha_is_eos(&p->gen, y) || r->nsib[j] >= w1;
        for (int64_t s = 0; !seen && s < r->nsib[j]; s++) seen = r->sib[j * w1 + s] == y;
        if (!seen) r->sib[j * w1 + r->nsib[j]++] = y;
    }
}

/* Transformers' PromptLookupCandidateGenerator: the last n tokens (n from max_ngram down to 1) looked up in
 * the row's tokens, first match first; up to k_max of the tokens that followed it, cut before an eos.
 * Writes them at tok[L, ...) and returns how many; with token trees, the later matches' branches as siblings. */
static int64_t lookup_candidates(const ha_assist_params *p, row_state *r, int64_t k_max) {
    const int32_t *t = r->tok;
    int64_t L = r->L;
    for (int64_t n = p->max_matching_ngram_size < L - 1 ? p->max_matching_ngram_size : L - 1; n >= 1; n--) {
        for (int64_t i = 0; i + n <= L; i++) {
            if (memcmp(t + i, t + L - n, (size_t)n * sizeof(int32_t)) != 0) continue;
            int64_t s = i + n, e = s + k_max < L ? s + k_max : L;
            if (s >= e) continue;
            int64_t k = 0;
            while (s + k < e && !ha_is_eos(&p->gen, t[s + k])) k++;
            memmove(r->tok + L, t + s, (size_t)k * sizeof(int32_t));
            if (p->tree_width > 1) lookup_siblings(p, r, i, n, k);
            return k;
        }
    }
    return 0;
}


/* Whether the draft's candidates need q's normalization: for their probability (the cost schedule, the confidence
 * threshold) or for rejection sampling's acceptance step, which then reads it from row_state.qn. */
static int norm_q(const ha_assist_params *p, const cost_model *cost) {
    return cost || p->confidence_threshold > 0 || ha_rejection_sampling(p);
}

/* The model draft for every row with k_max > 0, together: step 0 appends each such row's tokens the draft has
 * not seen (its catch-up; at the first round its prompt), step s > 0 the candidate each row still drafting
 * chose at step s - 1; one append per step over the rows still drafting. A row stops after k_cap candidates (the
 * cost schedule: sooner, when one more is not worth it), an eos, or a candidate below the confidence threshold.
 * Candidates go to tok[L, L + k), their scores to r->q. cost: the cost schedule's model, else NULL. */
static ha_status draft_round(ha_lm *draft, const ha_assist_params *p, ha_sampler *sampler, row_state *rows, int64_t B,
                             buffers *b, cost_model *cost, ha_assist_stats *stats) {
    const int64_t V = b->V;
    int64_t q_rows = 0;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        r->drafting = !r->done && r->k_max > 0;
        q_rows += r->drafting ? r->k_cap : 0;
    }
    ha_status st = ha_assist_grow(&b->Q, &b->cap_q, q_rows, V);
    if (st != HA_OK) return st;
    float *q = b->Q;
    for (int64_t s = 0;; s++) {
        /* One append: every drafting row's unseen tokens, logits at its last; then the rows whose logits for this
         * step were drafted ahead (copied: the thread drafting ahead reuses its buffer during this round's verify). */
        int64_t n = 0, n_rows = 0;
        int whole = 0; /* the append takes in some row's whole sequence (its prompt): prefill in p->gen.seconds */
        for (int64_t i = 0; i < B; i++) {
            row_state *r = &rows[i];
            if (!r->drafting || s < r->covered) continue;
            const int64_t to = r->L + s;
            if (r->draft_len >= to)
                return ha_fail(HA_ERR_INTERNAL,
                               "assist.c draft_round: row %d's draft holds %lld positions at step %lld of "
                               "a round from %lld",
                               r->row, (long long)r->draft_len, (long long)s, (long long)r->L);
            if (ha_whole_again(draft, r->draft_len, to)) { /* past the draft's rope switch: the whole row again */
                if ((st = draft->crop(draft->self, r->row, 0)) != HA_OK) return st;
                r->draft_len = 0;
            }
            whole |= r->draft_len == 0;
            for (int64_t j = r->draft_len; j < to; j++) {
                b->seq[n] = r->row;
                b->tok[n] = r->tok[j];
                b->want[n++] = j == to - 1;
            }
            r->draft_len = to;
            r->q[s] = q + n_rows++ * V;
            stats->num_draft_passes++;
        }
        const int64_t appended = n_rows;
        for (int64_t i = 0; i < B; i++) {
            row_state *r = &rows[i];
            if (!r->drafting || s >= r->covered) continue;
            r->q[s] = q + n_rows++ * V;
            memcpy(r->q[s], r->cover + s * V, (size_t)V * sizeof(float));
            stats->num_draft_passes++;
            stats->num_ahead_used++;
        }
        if (n_rows == 0) return HA_OK;
        if (appended > 0) {
            const double t0 = ha_now();
            st = draft->append(draft->self, n, b->seq, b->tok, b->want, q);
            ha_seconds_add(&p->gen, whole ? HA_SECONDS_PREFILL : HA_SECONDS_DRAFT, t0);
            if (st != HA_OK) return st;
        }
        q += n_rows * V;
        /* Each drafting row chooses its candidate s. */
        for (int64_t i = 0; i < B; i++) {
            row_state *r = &rows[i];
            if (!r->drafting) continue;
            const int64_t pos = r->L + s;
            float *qs = r->q[s];
            if ((st = ha_sampler_process(sampler, qs, r->row, r->tok, pos, r->generated + s)) != HA_OK) return st;
            /* trees: the siblings are the draft's next most probable tokens; under rejection sampling x's next draws
             * without replacement (x the first: the chain's token as without siblings) */
            const int64_t w1 = p->tree_width - 1;
            const int draws = w1 > 0 && ha_rejection_sampling(p);
            int32_t drawn[HA_DYN_MAX_WIDTH], x = -1;
            if (draws) {
                const int64_t n_drawn = ha_sampler_choose_top(sampler, qs, (uint32_t)r->row, (uint32_t)pos,
                                                              HA_RNG_SAMPLE, w1 + 1, drawn);
                if (n_drawn > 0) x = drawn[0];
                r->nsib[s] = n_drawn > 1 ? n_drawn - 1 : 0;
                if (r->nsib[s] > 0) memcpy(r->sib + s * w1, drawn + 1, (size_t)r->nsib[s] * sizeof(int32_t));
            } else {
                x = ha_sampler_choose(sampler, qs, (uint32_t)r->row, (uint32_t)pos);
            }
            if (x < 0)
                return ha_fail(HA_ERR_INVALID,
                               "the draft removed every token at position %lld of row %d; check its "
                               "weights",
                               (long long)pos, r->row);
            r->tok[pos] = x;
            r->k = s + 1;
            if (w1 > 0 && !draws) ha_tree_siblings(qs, V, x, w1, r->sib + s * w1, &r->nsib[s]);
            /* one pass of exps over q, for the confidence and rejection sampling's acceptance step alike; where only
             * the confidence reads it, an estimate (it chooses how far to draft, not the tokens) */
            double conf = 1.0;
            if (norm_q(p, cost)) {
                r->qn[s] = ha_rejection_sampling(p) ? ha_softmax_norm(qs, V) : ha_softmax_estimate(sampler, qs);
                conf = ha_norm_at(qs, V, r->qn[s], x);
            }
            if (w1 > 0 && cost) { /* what the cost schedule rates each sibling by (ha_cost_siblings) */
                double rank[HA_DYN_MAX_WIDTH];
                if (draws) ha_tree_rank_probs(qs, V, r->qn[s], w1 + 1, rank);
                for (int64_t j = 0; j < r->nsib[s]; j++)
                    r->sib_rate[s * w1 + j] = draws ? rank[j + 1] : ha_norm_at(qs, V, r->qn[s], r->sib[s * w1 + j]);
            }
            if (cost) { /* the chance that this candidate and every one before it is accepted */
                r->conf[s] = conf;
                r->all_accepted *= ha_cost_conf_rate(cost, conf);
                r->yield += r->all_accepted;
            }
            if (r->k == r->k_cap || ha_is_eos(&p->gen, x) || conf < (double)p->confidence_threshold) r->drafting = 0;
        }
        if (cost) ha_cost_continue(cost, rows, B, s);
    }
}

/* The acceptance step over r's k candidates tok[L, L + k) with target scores r->p[0 .. k] and, for a model
 * draft, draft scores r->q[0 .. k - 1]. Returns n accepted and writes the target's own next token to *next. */
static int64_t accept(const ha_assist_params *p, const ha_sampler *sampler, const row_state *r, int model_draft,
                      int64_t V, int32_t *next) {
    const uint32_t row = (uint32_t)r->row;
    const int64_t L = r->L, k = r->k;
    int64_t n = 0;
    if (!p->gen.sampling.do_sample || p->acceptance == HA_ACCEPT_COUPLED || !model_draft) {
        /* Greedy, coupled, or a draft without distributions: keep candidates while they equal the target's
         * own choice at their position (argmax, or its sample under the shared noise). */
        for (;; n++) {
            int32_t t = ha_sampler_choose(sampler, r->p[n], row, (uint32_t)(L + n));
            if (n == k || t != r->tok[L + n]) {
                *next = t;
                return n;
            }
        }
    }
    for (; n < k; n++) {
        int32_t x = r->tok[L + n];
        const ha_normalizer np = ha_softmax_norm(r->p[n], V);
        double px = ha_norm_at(r->p[n], V, np, x), qx = ha_norm_at(r->q[n], V, r->qn[n], x);
        double u = ha_rng_uniform(p->gen.sampling.seed, row, (uint32_t)(L + n), HA_RNG_ACCEPT, 0);
        if (!(qx > 0.0) || u > px / qx) { /* q(x) = 0 cannot come from the draft; reject it if it does */
            *next = ha_sample_residual(sampler, r->p[n], np, r->q[n], r->qn[n], row, (uint32_t)(L + n));
            return n;
        }
    }
    *next = ha_sampler_choose(sampler, r->p[k], row, (uint32_t)(L + k)); /* the bonus token, from p */
    return k;
}

int64_t ha_assist_heuristic_k(int64_t K, int64_t n) { return n == K ? K + 2 : (K - 1 > 1 ? K - 1 : 1); }

int64_t ha_assist_candidate_cap(int64_t k, int64_t L, int64_t generated, const ha_assist_params *p, const ha_lm *target,
                                const ha_lm *draft) {
    const int64_t room = p->gen.max_new_tokens - generated - 1, S = target->rope_switch;
    if (k > room) k = room;
    if (k > target->max_rollback) k = target->max_rollback;
    if (draft && k > draft->max_rollback) k = draft->max_rollback;
    if (S > 0 && L <= S && k > S - L) k = S - L;
    if (p->tree_width > 1 && p->tree_dynamic && draft) {
        /* a dynamic tree: at most k nodes after position L - 1 in the target (k is its budget and its depth), and the
         * draft's tree of its frontiers, w per depth below the first: w (k - 1) nodes */
        const int64_t w = p->tree_width, most = target->max_tree - 1, fit = target->capacity - L;
        const int64_t d_most = draft->max_tree / w + 1, d_fit = (draft->capacity - L) / w + 1;
        if (k > most) k = most;
        if (k > fit) k = fit;
        if (k > d_most) k = d_most;
        if (k > d_fit) k = d_fit;
    } else if (p->tree_width > 1) { /* siblings: at most k * w nodes after position L - 1 */
        const int64_t w = p->tree_width, most = (target->max_tree - 1) / w, fit = (target->capacity - L) / w;
        if (k > most) k = most;
        if (k > fit) k = fit;
    }
    return k;
}

/* ---- the rounds ------------------------------------------------------------------------------------------ */

/* A row whose round takes it past the target's rope switch from a cache of <= S positions (ha_whole_again; the
 * candidate cap left it none before S) first runs its decided tokens again from an empty cache, logits at the last
 * one into b->first, as plain generation's step there does; the round then scores it as after the prefill. */
static ha_status run_whole_again(ha_lm *target, const ha_assist_params *p, row_state *rows, int64_t B, buffers *b) {
    const int64_t V = b->V;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (r->done || !ha_whole_again(target, r->target_len, r->L + r->k)) continue;
        for (int64_t j = 0; j < r->L; j++) {
            b->seq[j] = r->row;
            b->tok[j] = r->tok[j];
            b->want[j] = j == r->L - 1;
        }
        const double t0 = ha_now();
        ha_status st = target->crop(target->self, r->row, 0);
        if (st == HA_OK) st = target->append(target->self, r->L, b->seq, b->tok, b->want, b->first + i * V);
        ha_seconds_add(&p->gen, HA_SECONDS_TARGET, t0);
        if (st != HA_OK) return st;
        if (p->gen.logits_out) memcpy(b->first_raw + i * V, b->first + i * V, (size_t)V * sizeof(float));
        r->target_len = r->L;
    }
    return HA_OK;
}

/* The target's append for a round: each running row's unseen tokens up to its last candidate, logits at its
 * candidates' positions and the one after (position L is already scored after the prefill, or after
 * run_whole_again). Points r->p (and r->raw) at its rows and processes them. a: drafting ahead beside the append
 * (NULL: none). */
static ha_status verify_round(ha_lm *target, ha_lm *draft, const ha_assist_params *p, ha_sampler *sampler,
                              row_state *rows, int64_t B, buffers *b, ahead *a, ha_assist_stats *stats) {
    const int64_t V = b->V;
    int64_t n = 0, n_rows = 0;
    ha_status st = run_whole_again(target, p, rows, B, b);
    if (st != HA_OK) return st;
    if (p->tree_width > 1)
        return p->tree_dynamic && draft ? ha_dyn_verify(target, p, sampler, rows, B, b)
                                        : ha_tree_verify(target, p, sampler, rows, B, b);
    for (int64_t i = 0; i < B; i++)
        if (!rows[i].done) n_rows += rows[i].k + 1;
    if ((st = ha_assist_grow_scores(b, p, n_rows)) != HA_OK) return st;
    n_rows = 0;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (r->done) continue;
        const int64_t to = r->L + r->k, scored = r->target_len == r->L;
        if (scored) {
            r->p[0] = b->first + i * V;
            if (r->raw) r->raw[0] = b->first_raw + i * V;
        }
        for (int64_t j = r->target_len; j < to; j++) {
            b->seq[n] = r->row;
            b->tok[n] = r->tok[j];
            b->want[n++] = j >= r->L - 1;
        }
        for (int64_t j = scored; j <= r->k; j++) {
            r->p[j] = b->P + n_rows * V;
            if (r->raw) r->raw[j] = b->raw + n_rows * V;
            n_rows++;
        }
        r->target_len = to;
    }
    /* the draft drafts ahead beside the target's append (a: overlap), stopped and joined as soon as it returns */
    const double t0 = ha_now();
    const int beside = n > 0 && a && ha_ahead_start(a, target, draft, p, rows, B, b);
    if (n > 0) st = target->append(target->self, n, b->seq, b->tok, b->want, b->P);
    if (beside) ha_ahead_finish(a, stats);
    ha_seconds_add(&p->gen, HA_SECONDS_TARGET, t0); /* drafting ahead beside it: its time is the append's */
    if (st != HA_OK) return st;
    if (p->gen.logits_out) memcpy(b->raw, b->P, (size_t)n_rows * (size_t)V * sizeof(float));
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (r->done) continue;
        for (int64_t j = 0; j <= r->k; j++)
            if ((st = ha_sampler_process(sampler, r->p[j], r->row, r->tok, r->L + j, r->generated + j)) != HA_OK)
                return st;
    }
    return HA_OK;
}

/* After the verify: row r accepts, ends or goes on; its decided tokens go to out, scores, the callbacks and
 * the statistics, and both caches drop what was not decided. */
static ha_status finish_row(ha_lm *target, ha_lm *draft, const ha_assist_params *p, const ha_sampler *sampler,
                            row_state *r, int32_t *out, float *scores, ha_assist_stats *stats, cost_model *cost) {
    const int64_t V = target->vocab_size, N = p->gen.max_new_tokens, B = target->n_seq, k = r->k;
    const int tree = p->tree_width > 1, dyn = tree && p->tree_dynamic && draft;
    int32_t next;
    const int64_t n = dyn    ? ha_dyn_accept(p, sampler, r, V, &next)
                      : tree ? ha_tree_accept(p, sampler, r, draft != NULL, V, &next)
                             : accept(p, sampler, r, draft != NULL, V, &next);
    if (next < 0)
        return ha_fail(HA_ERR_INVALID,
                       "row %d: every token was removed or NaN; check the weights and the sampling "
                       "arguments",
                       r->row);
    /* drafted ahead (this round's, taken here): the thread's guess at position L + k, which the target's own token
     * overwrites */
    const int64_t ahead_n = r->ahead_n;
    r->ahead_n = 0;
    const int32_t guess = ahead_n >= 2 ? r->tok[r->L + k] : -1;
    r->tok[r->L + n] = next;
    /* The row ends after an eos, or where a stopping criterion says so, asked token by token in order as
     * plain generation asks it. */
    int64_t kept = n + 1;
    for (int64_t j = 0; j < kept && !r->done; j++) {
        const int ends = ha_row_ends(&p->gen, r->row, r->tok, r->L + j + 1, r->p[j], V);
        if (ends < 0) return HA_ERR_CALLBACK;
        if (ends) {
            kept = j + 1;
            r->done = 1;
        }
    }
    const int bonus = dyn ? r->dyn_leaf : n == k; /* every candidate on the way accepted: a bonus token after them */
    const uint8_t own = k == 0 ? HA_SOURCE_PLAIN : bonus ? HA_SOURCE_BONUS : HA_SOURCE_CORRECTED;
    for (int64_t j = 0; j < kept; j++) {
        out[r->row * N + r->generated + j] = r->tok[r->L + j];
        if (p->gen.sources) p->gen.sources[r->row * N + r->generated + j] = j < n ? HA_SOURCE_ACCEPTED : own;
        const int64_t at = ((r->generated + j) * B + r->row) * V;
        if (scores) memcpy(scores + at, r->p[j], (size_t)V * sizeof(float));
        if (p->gen.logits_out) memcpy(p->gen.logits_out + at, r->raw[j], (size_t)V * sizeof(float));
    }
    if (p->gen.on_tokens && p->gen.on_tokens(p->gen.user, r->row, r->tok + r->L, kept) != 0)
        return ha_fail(HA_ERR_CALLBACK, "generation stopped by the token callback");
    stats->num_target_passes++;
    stats->num_accepted_tokens += n < kept ? n : kept;
    if (dyn) ha_dyn_count(r, n, kept, stats, p->schedule == HA_SCHEDULE_COST ? cost : NULL);
    else stats->num_draft_tokens += k;
    for (int64_t j = 0; tree && !dyn && j < k; j++) { /* siblings: nodes of depth j (the one accepted, counted below) */
        stats->num_draft_tokens += r->nsib[j];
        stats->num_sibling_tokens += r->nsib[j];
        if (stats->proposed_at) stats->proposed_at[j] += r->nsib[j];
    }
    if (tree && !dyn && r->sib_taken >= 0 && r->chain_n < kept) stats->num_sibling_accepted++;
    for (int64_t j = 0; !dyn && j < k; j++) {
        if (stats->proposed_at) stats->proposed_at[j]++;
        if (stats->accepted_at && j < n) stats->accepted_at[j]++;
    }
    if (p->schedule == HA_SCHEDULE_COST && !dyn)
        ha_cost_count(cost, &cost->rows[r->row], draft ? r->conf : NULL, k, tree ? r->chain_n : n);
    if (p->schedule == HA_SCHEDULE_COST && tree && !dyn && draft) { /* the siblings of every depth reached */
        const int64_t w1 = p->tree_width - 1;
        for (int64_t j = 0; j < k && j <= r->chain_n; j++)
            for (int64_t s = 0; s < r->nsib[j]; s++)
                ha_cost_count_alt(cost, r->sib_rate[j * w1 + s], j == r->chain_n && r->sib_taken == s);
    }
    if (tree && p->tree_record) {
        const ha_status st = ha_tree_record_round(p, r, n, kept);
        if (st != HA_OK) return st;
    }
    /* Both caches keep only decided tokens; the newest token is seen on the next catch-up. A tree's target keeps its
     * accepted path (keep_path); the draft holds the chain, of which chain_n candidates were accepted. */
    const int64_t L_old = r->L;
    r->L += kept;
    r->generated += kept;
    if (r->generated == N) r->done = 1;
    if (dyn) { /* the target keeps its accepted path, the draft what its last append_tree holds of it */
        ha_status st = ha_dyn_keep(target, draft, r, L_old, r->L - 1 - (L_old - r->catch_up), &r->draft_len);
        if (st != HA_OK) return st;
    } else if (tree) {
        ha_status st = ha_tree_keep(target, r, L_old, r->L - 1 - (L_old - r->catch_up));
        if (st != HA_OK) return st;
        if (r->draft_len > L_old + r->chain_n) r->draft_len = L_old + r->chain_n;
    }
    if (r->target_len > r->L - 1 || tree) r->target_len = r->L - 1;
    /* The draft keeps what it drafted ahead where the round accepted every candidate, the target's own token is the
     * guess and the row goes on: the next round's first steps read those rows. */
    r->covered = 0;
    if (guess >= 0 && n == k && next == guess && !r->done) {
        r->covered = ahead_n - 1;
        r->cover = r->ahead + V;
    } else if (r->draft_len > r->L - 1) {
        r->draft_len = r->L - 1;
    }
    ha_status st = tree ? HA_OK : target->crop(target->self, r->row, r->target_len);
    if (st == HA_OK && draft) st = draft->crop(draft->self, r->row, r->draft_len);
    if (st != HA_OK) return st;
    if (draft && (p->schedule == HA_SCHEDULE_HEURISTIC || p->schedule == HA_SCHEDULE_HEURISTIC_TRANSIENT))
        r->K = ha_assist_heuristic_k(r->K, n);
    return HA_OK;
}

static ha_status run_rounds(ha_lm *target, ha_lm *draft, const ha_assist_params *p, ha_sampler *sampler,
                            row_state *rows, buffers *b, ahead *a, int32_t *out, float *scores, ha_assist_stats *stats,
                            int64_t *n_rounds, double deadline) {
    const int64_t B = target->n_seq;
    const int rejection = ha_rejection_sampling(p);
    /* The cost schedule's costs in units of one target step. */
    double t_rel[64], d_rel[64], d_first_rel[64];
    cost_model cost = { .t = t_rel, .d = d_rel, .d_first = d_first_rel, .rows = b->acceptance };
    if (p->schedule == HA_SCHEDULE_COST) {
        const double t1 = p->target_costs[0];
        cost.n_t = p->n_target_costs;
        cost.n_d = p->n_draft_costs;
        for (int64_t T = 0; T < cost.n_t; T++) t_rel[T] = p->target_costs[T] / t1;
        for (int64_t n = 0; n < cost.n_d; n++) d_rel[n] = p->draft_costs[n] / t1;
        cost.n_d_first = p->draft_first_costs ? p->n_draft_first_costs : 0;
        for (int64_t n = 0; n < cost.n_d_first; n++) d_first_rel[n] = p->draft_first_costs[n] / t1;
        if (p->cost_state) ha_cost_state_load(&cost, p->cost_state);
        cost.explore = p->cost_state != NULL;
        cost.max_new = p->gen.max_new_tokens;
        /* The table fitted to the call's rounds as they run (ha_cost_observe): for chains from a draft model whose
         * counts go from call to call, where K choices change no token anyway; not for rejection sampling, whose
         * tokens follow them, nor pinned costs, whose calls must choose alike (both leave cost_state NULL). */
        cost.t1 = t1;
        cost.calibrate = p->cost_state != NULL && p->tree_width <= 1 && draft != NULL;
    }
    ha_status st = HA_OK;
    for (int64_t round = 0;; round++) {
        int64_t running = 0;
        for (int64_t i = 0; i < B; i++) running += !rows[i].done;
        if (running == 0) return HA_OK;
        /* Between rounds: the interrupt poll, and max_time once every row has had its first round (a row is
         * never left without a token, as plain generation's first step is never skipped). */
        if (ha_interrupted())
            return ha_fail(HA_ERR_INTERRUPTED, "generation interrupted after %lld rounds", (long long)round);
        if (round > 0 && ha_now() >= deadline) return HA_OK;
        /* 1. Candidates, within ha_assist_candidate_cap. */
        for (int64_t i = 0; i < B; i++) {
            row_state *r = &rows[i];
            if (r->done) continue;
            r->k_cap = r->k_max = ha_assist_candidate_cap(draft ? r->K : p->prompt_lookup_num_tokens, r->L,
                                                          r->generated, p, target, draft);
            r->k = 0;
        }
        if (p->schedule == HA_SCHEDULE_COST) {
            ha_cost_schedule(&cost, rows, B);
            cost.steps_cost = cost.steps_raw = 0.0;
        }
        /* the round's times for the table's fit; not where a row drafting for the first time takes in its prompt */
        int observe = cost.calibrate;
        for (int64_t i = 0; observe && i < B; i++)
            observe = rows[i].done || rows[i].k_max == 0 || rows[i].draft_len > 0;
        const double t_draft = observe ? ha_now() : 0.0;
        if (draft && p->tree_width > 1 && p->tree_dynamic) {
            /* a dynamic tree's budget: the row's K (the cost schedule: w times its plan, the widest, which
             * ha_cost_dyn_budget trims), nodes past the depths the round's cap allows (max_new_tokens' room,
             * rollback, the rope switch bound depth, not width) where the target's tree and cache have room */
            for (int64_t i = 0; i < B; i++) {
                row_state *r = &rows[i];
                const int64_t want = p->schedule == HA_SCHEDULE_COST ? r->k_max * p->tree_width : r->K;
                const int64_t room = target->max_tree - 1 < target->capacity - r->L ? target->max_tree - 1
                                                                                    : target->capacity - r->L;
                r->budget = r->done || r->k_max == 0 ? 0 : want < r->k_max ? r->k_max : want < room ? want : room;
            }
            if ((st = ha_dyn_draft(draft, p, sampler, rows, B, b, p->schedule == HA_SCHEDULE_COST ? &cost : NULL,
                                   stats)) != HA_OK)
                return st;
        } else if (draft) {
            if ((st = draft_round(draft, p, sampler, rows, B, b, p->schedule == HA_SCHEDULE_COST ? &cost : NULL,
                                  stats)) != HA_OK)
                return st;
            if (p->schedule == HA_SCHEDULE_COST && p->tree_width > 1)
                ha_cost_siblings(&cost, rows, B, p->tree_width - 1);
            else if (p->schedule == HA_SCHEDULE_COST && !rejection) /* see ha_cost_trim */ ha_cost_trim(&cost, rows, B);
        } else {
            for (int64_t i = 0; i < B; i++)
                if (!rows[i].done && rows[i].k_max > 0) rows[i].k = lookup_candidates(p, &rows[i], rows[i].k_max);
        }
        /* 2. Verify every row's candidates in one target append. */
        int64_t verified = 0;
        for (int64_t i = 0; observe && i < B; i++) verified += rows[i].done ? 0 : rows[i].k + 1;
        const double t_verify = observe ? ha_now() : 0.0;
        if ((st = verify_round(target, draft, p, sampler, rows, B, b, a, stats)) != HA_OK) return st;
        if (observe) ha_cost_observe(&cost, verified, ha_now() - t_verify, t_verify - t_draft);
        *n_rounds = round + 1;
        /* 3. Accept, row by row. */
        for (int64_t i = 0; i < B; i++)
            if (!rows[i].done &&
                (st = finish_row(target, draft, p, sampler, &rows[i], out, scores, stats, &cost)) != HA_OK)
                return st;
        if (p->schedule == HA_SCHEDULE_COST && p->cost_state) ha_cost_state_store(&cost, p->cost_state);
    }
}

ha_status ha_generate_assisted(ha_lm *target, ha_lm *draft, const ha_assist_params *p, const int32_t *prompt,
                               int64_t prompt_width, const int64_t *start, int32_t *out, float *scores,
                               int64_t *n_steps, ha_assist_stats *stats_out) {
    if (!target || !p || !prompt || !start || !out || !n_steps)
        return ha_fail(HA_ERR_INVALID, "ha_generate_assisted: NULL argument");
    *n_steps = 0;
    const int64_t B = target->n_seq, V = target->vocab_size, N = p->gen.max_new_tokens;
    ha_status st = ha_check_generate_args(target, &p->gen, prompt_width, start);
    if (st != HA_OK) return st;
    if (p->gen.no_cache)
        return ha_fail(HA_ERR_INVALID, "assisted generation verifies drafts against the KV cache; pass use_cache=True");
    if (draft) {
        if (draft->vocab_size != V || draft->n_seq != B)
            return ha_fail(HA_ERR_INVALID, "the draft has vocab_size %lld and %lld rows; the target has %lld and %lld",
                           (long long)draft->vocab_size, (long long)draft->n_seq, (long long)V, (long long)B);
        if ((st = ha_check_generate_args(draft, &p->gen, prompt_width, start)) != HA_OK) return st;
        if (p->num_assistant_tokens < 1)
            return ha_fail(HA_ERR_INVALID, "num_assistant_tokens=%lld must be >= 1",
                           (long long)p->num_assistant_tokens);
        if (!(p->confidence_threshold >= 0.0f && p->confidence_threshold < 1.0f))
            return ha_fail(HA_ERR_INVALID, "assistant_confidence_threshold=%g must be in [0, 1)",
                           (double)p->confidence_threshold);
    } else if (p->prompt_lookup_num_tokens < 1 || p->max_matching_ngram_size < 1) {
        return ha_fail(HA_ERR_INVALID,
                       "prompt lookup needs prompt_lookup_num_tokens >= 1 and max_matching_ngram_size >= 1 "
                       "(got %lld, %lld)",
                       (long long)p->prompt_lookup_num_tokens, (long long)p->max_matching_ngram_size);
    }
    if ((unsigned)p->schedule > HA_SCHEDULE_COST || (unsigned)p->acceptance > HA_ACCEPT_COUPLED)
        return ha_fail(HA_ERR_INVALID, "unknown schedule %d or acceptance %d", (int)p->schedule, (int)p->acceptance);
    const int64_t w = p->tree_width;
    if (w < 0) return ha_fail(HA_ERR_INVALID, "assistant_tree_width=%lld must be >= 1 (1: chains)", (long long)w);
    if (w > 1) {
        if (!target->append_tree || !target->keep_path || target->max_tree < 2)
            return ha_fail(HA_ERR_UNSUPPORTED,
                           "assistant_tree_width=%lld: this target model verifies chains only (it "
                           "has no tree attention: a wrapped external model); trees need a native habana_assist model, "
                           "or pass assistant_tree_width=1",
                           (long long)w);
        if (w >= target->max_tree)
            return ha_fail(HA_ERR_INVALID,
                           "assistant_tree_width=%lld must be below %lld (the nodes one tree verification "
                           "takes per row)",
                           (long long)w, (long long)target->max_tree);
    }
    if (p->tree_record && (w <= 1 || !p->tree_record->n_rounds || !p->tree_record->rounds || !p->tree_record->nodes ||
                           p->tree_record->max_nodes < target->max_tree))
        return ha_fail(HA_ERR_INVALID,
                       "tree_record: a record of token trees needs assistant_tree_width > 1 (got %lld) and room for "
                       "%lld nodes a round (got %lld)",
                       (long long)w, (long long)target->max_tree, (long long)p->tree_record->max_nodes);
    if (p->tree_dynamic != 0 && p->tree_dynamic != 1)
        return ha_fail(HA_ERR_INVALID, "tree_dynamic=%d must be 0 (assistant_tree_shape='siblings') or 1 ('dynamic')",
                       p->tree_dynamic);
    const int dyn = w > 1 && p->tree_dynamic;
    if (dyn && !draft)
        return ha_fail(HA_ERR_INVALID,
                       "assistant_tree_shape='dynamic' grows the tree from a draft model's probabilities, and prompt "
                       "lookup has none; pass assistant_tree_shape='siblings' (the n-gram's later matches as "
                       "branches), or an assistant_model");
    if (dyn && w > HA_DYN_MAX_WIDTH)
        return ha_fail(HA_ERR_INVALID, "assistant_tree_shape='dynamic' takes assistant_tree_width <= %d (got %lld)",
                       HA_DYN_MAX_WIDTH, (long long)w);
    if (dyn && (!draft->append_tree || !draft->keep_path || draft->max_tree < w))
        return ha_fail(HA_ERR_UNSUPPORTED,
                       "assistant_tree_shape='dynamic': this draft model has no tree attention (a wrapped external "
                       "model) to score a tree's frontier in one pass; pass a native habana_assist draft, or "
                       "assistant_tree_shape='siblings'");
    if (p->schedule == HA_SCHEDULE_COST) {
        int ok = p->draft_costs && p->target_costs && p->n_draft_costs >= 1 && p->n_draft_costs <= 64 &&
                 p->n_target_costs >= 1 && p->n_target_costs <= 64;
        for (int64_t i = 0; ok && i < p->n_draft_costs; i++)
            ok = isfinite(p->draft_costs[i]) && p->draft_costs[i] >= 0.0;
        for (int64_t i = 0; ok && i < p->n_target_costs; i++)
            ok = isfinite(p->target_costs[i]) && p->target_costs[i] > 0.0;
        if (ok && p->draft_first_costs) ok = p->n_draft_first_costs >= 1 && p->n_draft_first_costs <= 64;
        for (int64_t i = 0; ok && p->draft_first_costs && i < p->n_draft_first_costs; i++)
            ok = isfinite(p->draft_first_costs[i]) && p->draft_first_costs[i] >= 0.0;
        if (!ok)
            return ha_fail(
                HA_ERR_INVALID,
                "the cost schedule needs costs: 1..64 draft step times >= 0 (and 1..64 first-step times >= 0, "
                "or none) and 1..64 target append times > 0, all finite");
        if (p->cost_state && !ha_cost_state_ok(p->cost_state))
            return ha_fail(HA_ERR_INVALID, "the cost schedule's state holds a count that is negative, not finite, or "
                                           "accepted above tested; start from zeros");
    }

    ha_assist_stats stats = { 0 };
    if (stats_out) {
        stats.proposed_at = stats_out->proposed_at;
        stats.accepted_at = stats_out->accepted_at;
    }
    ha_sampler *sampler = NULL;
    ahead a = { 0 }; /* drafting ahead's buffers, allocated below with overlap */
    const double t_call = ha_now();
    if (p->gen.seconds) memset(p->gen.seconds, 0, HA_SECONDS * sizeof(double));
    if ((st = ha_sampler_create(&p->gen.sampling, V, &sampler)) != HA_OK) return st;
    /* The largest append: every row's prompt and generated tokens (a draft catching up after rounds of K = 0). */
    const int64_t row_cap = prompt_width + N + 1, w1 = w > 1 ? w - 1 : 0;
    const size_t n_append = (size_t)B * (size_t)(w > 1 && target->max_tree > row_cap ? target->max_tree : row_cap);
    buffers b = { .V = V,
                  .seq = malloc(n_append * sizeof(int32_t)),
                  .tok = malloc(n_append * sizeof(int32_t)),
                  .want = malloc(n_append),
                  .first = ha_malloc_array((size_t)B, (size_t)V, sizeof(float)),
                  .first_raw = p->gen.logits_out ? ha_malloc_array((size_t)B, (size_t)V, sizeof(float)) : NULL };
    b.acceptance = calloc((size_t)B, sizeof(*b.acceptance));
    b.conf = ha_malloc_array((size_t)B, (size_t)N, sizeof(double));
    b.qn = ha_malloc_array((size_t)B, (size_t)N, sizeof(ha_normalizer));
    row_state *rows = calloc((size_t)B, sizeof(row_state));
    int32_t *tok = ha_malloc_array((size_t)B, (size_t)row_cap, sizeof(int32_t));
    float **ptrs = ha_malloc_array((size_t)B, 3 * (size_t)N + 2, sizeof(float *)); /* (B, p | raw | q) */
    /* trees: (B, max_new, w - 1) siblings and their rows' pointers (processed | raw), (B, max_new) their counts */
    int32_t *sib = w1 ? ha_malloc_array((size_t)B * (size_t)N, (size_t)w1, sizeof(int32_t)) : NULL;
    int64_t *nsib = w1 ? calloc((size_t)B * (size_t)N, sizeof(int64_t)) : NULL;
    double *sib_rate = w1 ? ha_malloc_array((size_t)B * (size_t)N, (size_t)w1, sizeof(double)) : NULL;
    float **sib_ptrs = w1 ? ha_malloc_array((size_t)B * (size_t)N, 2 * (size_t)w1, sizeof(float *)) : NULL;
    b.parent = w1 ? malloc(n_append * sizeof(int32_t)) : NULL;
    double *rrs = w1 ? ha_malloc_array(2, (size_t)V, sizeof(double)) : NULL;
    int64_t *nkeep = w1 ? ha_malloc_array((size_t)B, (size_t)N, sizeof(int64_t)) : NULL;
    double *reach = w1 ? ha_malloc_array((size_t)B, (size_t)N, sizeof(double)) : NULL;
    /* trees: (B, 3, max_tree) each row's verified nodes' tokens, parents and accepted path (row_state.node_tok) */
    int32_t *nodes = w1 ? ha_malloc_array((size_t)B * 3, (size_t)target->max_tree, sizeof(int32_t)) : NULL;
    /* dynamic trees: (B, n_dyn) drafted nodes, (B, max_tree) the verified ones, their gains; (B,) counts */
    b.n_dyn = dyn ? ha_dyn_max_nodes(w, target->max_tree) : 0;
    b.max_tree = target->max_tree;
    dyn_node *dn = dyn ? ha_malloc_array((size_t)B, (size_t)b.n_dyn, sizeof(dyn_node)) : NULL;
    int32_t *vnode = dyn ? ha_malloc_array((size_t)B, (size_t)target->max_tree, sizeof(int32_t)) : NULL;
    b.gain = dyn ? ha_malloc_array((size_t)B, (size_t)target->max_tree, sizeof(double)) : NULL;
    b.n_sel = dyn ? calloc((size_t)B, sizeof(int64_t)) : NULL;
    b.n_keep = dyn ? calloc((size_t)B, sizeof(int64_t)) : NULL;
    if (dyn && (!dn || !vnode || !b.gain || !b.n_sel || !b.n_keep)) {
        st = ha_fail(HA_ERR_NOMEM, "out of memory for the token trees of %lld rows", (long long)B);
        goto cleanup;
    }
    if (!b.seq || !b.tok || !b.want || !b.first || !b.acceptance || !b.conf || !b.qn ||
        (p->gen.logits_out && !b.first_raw) || !rows || !tok || !ptrs ||
        (w1 && (!sib || !nsib || !sib_rate || !sib_ptrs || !b.parent || !rrs || !nkeep || !reach || !nodes))) {
        st = ha_fail(HA_ERR_NOMEM,
                     "out of memory for assisted generation of %lld rows x %lld tokens over a vocabulary "
                     "of %lld",
                     (long long)B, (long long)N, (long long)V);
        goto cleanup;
    }
    /* Every row as ha_generate starts it: all prompts in one append, logits at each row's last token (so that a
     * context with blas_prefill sends the same prompt blocks to OpenBLAS in both). start is read once here: a
     * token callback may rewrite the caller's array. */
    int64_t n = 0;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        const int64_t first = start[i];
        *r = (row_state){ .row = (int32_t)i,
                          .tok = tok + i * row_cap,
                          .L = prompt_width - first,
                          .K = p->num_assistant_tokens,
                          .p = ptrs + i * (3 * N + 2) };
        r->raw = p->gen.logits_out ? r->p + N + 1 : NULL;
        r->q = r->p + 2 * N + 2;
        r->conf = b.conf + i * N;
        r->qn = b.qn + i * N;
        if (w1) {
            r->sib = sib + i * N * w1;
            r->nsib = nsib + i * N;
            r->sib_rate = sib_rate + i * N * w1;
            r->rrs = rrs;
            r->ps = sib_ptrs + i * N * 2 * w1;
            r->praw = p->gen.logits_out ? r->ps + N * w1 : NULL;
            r->nkeep = nkeep + i * N;
            r->reach = reach + i * N;
            r->node_tok = nodes + i * 3 * target->max_tree;
            r->node_parent = r->node_tok + target->max_tree;
            r->path = r->node_parent + target->max_tree;
        }
        if (dyn) {
            r->dn = dn + i * b.n_dyn;
            r->vnode = vnode + i * target->max_tree;
        }
        if (p->tree_record) p->tree_record->n_rounds[i] = 0;
        memcpy(r->tok, prompt + i * prompt_width + first, (size_t)r->L * sizeof(int32_t));
        for (int64_t j = 0; j < r->L; j++) {
            b.seq[n] = (int32_t)i;
            b.tok[n] = r->tok[j];
            b.want[n++] = j == r->L - 1;
        }
        r->target_len = r->L;
    }
    const double t_prefill = ha_now();
    st = target->append(target->self, n, b.seq, b.tok, b.want, b.first);
    ha_seconds_add(&p->gen, HA_SECONDS_PREFILL, t_prefill);
    if (st != HA_OK) goto cleanup;
    if (p->gen.logits_out) memcpy(b.first_raw, b.first, (size_t)B * (size_t)V * sizeof(float));
    /* Drafting ahead: a model draft, and no callback that must run on this thread (on_logits) */
    a = (ahead){ .draft = draft, .sampler = sampler, .gen = &p->gen, .rows = rows, .B = B, .V = V };
    const int overlap = p->overlap && draft && !p->gen.sampling.on_logits && w1 == 0;
    if (overlap) {
        a.seq = malloc((size_t)B * sizeof(int32_t));
        a.tok = malloc((size_t)B * sizeof(int32_t));
        a.logits = ha_malloc_array((size_t)B, (size_t)V, sizeof(float));
        a.scores = ha_malloc_array(1, (size_t)V, sizeof(float));
        if (!a.seq || !a.tok || !a.logits || !a.scores) {
            st = ha_fail(HA_ERR_NOMEM, "out of memory for drafting ahead over %lld rows of a vocabulary of %lld",
                         (long long)B, (long long)V);
            goto cleanup;
        }
    }
    int64_t n_rounds = 0;
    st = run_rounds(target, draft, p, sampler, rows, &b, overlap ? &a : NULL, out, scores, &stats, &n_rounds,
                    ha_deadline(&p->gen));
    if (st != HA_OK) goto cleanup;
    /* Rows that stopped early are padded up to max_new_tokens and their scores are -inf up to the longest
     * row, as in ha_generate. */
    int64_t steps = 0;
    for (int64_t i = 0; i < B; i++) steps = rows[i].generated > steps ? rows[i].generated : steps;
    for (int64_t i = 0; i < B; i++)
        for (int64_t j = rows[i].generated; j < N; j++) {
            out[i * N + j] = p->gen.pad_token_id;
            if (p->gen.sources) p->gen.sources[i * N + j] = HA_SOURCE_NONE;
            for (int64_t v = 0; j < steps && scores && v < V; v++) scores[(j * B + i) * V + v] = -INFINITY;
            for (int64_t v = 0; j < steps && p->gen.logits_out && v < V; v++)
                p->gen.logits_out[(j * B + i) * V + v] = -INFINITY;
        }
    *n_steps = steps;
    stats.num_assistant_tokens = rows[B - 1].K;
    stats.num_rounds = n_rounds;
    if (stats_out) *stats_out = stats;

cleanup:
    ha_seconds_add(&p->gen, HA_SECONDS_ALL, t_call);
    ha_sampler_free(sampler);
    free(a.seq);
    free(a.tok);
    free(a.logits);
    free(a.scores);
    free(b.A);
    free(b.seq);
    free(b.tok);
    free(b.want);
    free(b.first);
    free(b.first_raw);
    free(b.P);
    free(b.raw);
    free(b.Q);
    free(b.acceptance);
    free(b.conf);
    free(b.qn);
    free(rows);
    free(tok);
    free(ptrs);
    free(sib);
    free(nsib);
    free(sib_rate);
    free(sib_ptrs);
    free(b.parent);
    free(rrs);
    free(nkeep);
    free(reach);
    free(nodes);
    free(dn);
    free(vnode);
    free(b.gain);
    free(b.n_sel);
    free(b.n_keep);
    return st;
}
