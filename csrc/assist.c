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
 * never depends on how many were drafted or accepted before it, nor on the other rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The cost schedule's largest K, and the per-position acceptance it tracks. */
#define COST_K_MAX 32

typedef struct row_state {
    int32_t row;
    int32_t *tok;        /* (prompt + max_new + 1,) the row's real tokens, then this round's drafts */
    int64_t L;           /* tokens decided so far */
    int64_t target_len;  /* positions in the target's cache */
    int64_t draft_len;   /* positions in the draft's cache */
    int64_t generated;   /* new tokens decided so far */
    int64_t K;           /* constant and heuristic schedules: this row's K */
    int done;            /* ended: an eos, a stopping criterion, or max_new_tokens */
    /* this round */
    int64_t k_cap;       /* most candidates: room, rollback, num_assistant_tokens */
    int64_t k_max;       /* candidates planned (the cost schedule drafts at all iff > 0, and then as long as one more
                            is worth it, up to k_cap); other schedules: k_cap */
    int64_t k;           /* candidates proposed: tok[L, L + k) */
    int drafting;        /* still drafting (model draft) */
    double *conf;        /* (max_new,) candidate j's draft probability, with the cost schedule */
    double rate[COST_K_MAX]; /* cost schedule: the row's acceptance rate at each draft position, this round */
    double all_accepted; /* cost schedule: the chance that every candidate so far is accepted */
    double yield;        /* cost schedule: tokens the round is expected to give the row */
    float **p;           /* (max_new + 1,) position L + j's processed target scores */
    float **raw;         /* (max_new + 1,) position L + j's raw target logits, with logits_out */
    float **q;           /* (max_new,) candidate j's processed draft scores */
    ha_normalizer *qn;   /* (max_new,) their softmax normalizations, where the round needs them (norm_q) */
} row_state;

/* Work buffers of a call; rows of V floats grow with the largest round seen. */
typedef struct buffers {
    int64_t V;
    int32_t *seq, *tok;  /* (n_append,) append scratch */
    uint8_t *want;       /* (n_append,) */
    float *first;        /* (B, V) the prefill's logits at each row's last prompt token */
    float *first_raw;    /* (B, V) their raw copy, with logits_out */
    float *P, *raw, *Q;  /* (cap_p, V), (cap_p, V) with logits_out, (cap_q, V): a round's target and draft rows */
    int64_t cap_p, cap_raw, cap_q;
    struct acceptance *acceptance; /* (B,) the cost schedule's count of each row's acceptance */
    double *conf;                  /* (B, max_new) the cost schedule's draft probabilities of each row's candidates */
    ha_normalizer *qn;             /* (B, max_new) row_state.qn */
} buffers;

/* Grows *buf to hold `rows` rows of V floats (kept if large enough; contents not kept). */
static ha_status grow(float **buf, int64_t *cap, int64_t rows, int64_t V) {
    if (rows <= *cap) return HA_OK;
    const int64_t want = rows > 2 * *cap ? rows : 2 * *cap;
    float *n = ha_malloc_array((size_t)want, (size_t)V, sizeof(float));
    if (!n) return ha_fail(HA_ERR_NOMEM, "out of memory for the scores of %lld verified positions over a vocabulary of "
                           "%lld", (long long)want, (long long)V);
    free(*buf);
    *buf = n;
    *cap = want;
    return HA_OK;
}

/* Transformers' PromptLookupCandidateGenerator: the last n tokens (n from max_ngram down to 1) looked up in
 * the row's tokens, first match first; up to k_max of the tokens that followed it, cut before an eos.
 * Writes them at tok[L, ...) and returns how many. */
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
            return k;
        }
    }
    return 0;
}

/* ---- the cost schedule ----------------------------------------------------------------------------------
 * A round in which the rows propose k_r candidates costs sum_s d(n_s) (draft step s appends one token for each of
 * the n_s rows with k_r > s) plus t(sum_r (k_r + 1)) (one target append), and yields sum_r E_r tokens in expectation, E_r = 1 plus
 * the chance that each candidate and every one before it is accepted. Two estimates of that chance:
 * - before drafting, from the row's acceptance rate by draft position (leaning on the call's): cost_schedule
 *   plans each row's k (starting from every k_r = 0, it adds one candidate at a time to the row where that gives
 *   the best rate, up to each row's cap, and keeps the best configuration seen on that path); a row drafts this
 *   round iff its plan is k > 0;
 * - while drafting, from the probability the draft gave its candidate, through the call's running acceptance of
 *   candidates in each tenth of that probability (the draft's confidence tells a safe candidate from a
 *   guess): after each candidate, a row drafts one more iff drafting m more (at its positional rates, m up to 8)
 *   would raise the round's expected tokens per unit time. */
#define COST_BINS 10
#define COST_LOOKAHEAD 8

typedef struct acceptance {
    double acc[COST_K_MAX];     /* candidates accepted at draft position j */
    double tested[COST_K_MAX];  /* candidates tested at position j: proposed, every one before it accepted */
} acceptance;

typedef struct cost_model {
    const double *d;            /* (n_d,) d(n) / t(1): a draft step for n = 1 .. n_d rows */
    int64_t n_d;
    const double *t;            /* (n_t,) t(T) / t(1) for T = 1 .. n_t */
    int64_t n_t;
    acceptance call;            /* over the call's rows */
    acceptance *rows;           /* (B,) each row's own */
    double steps_cost;          /* this round's draft steps so far */
    double bin_acc[COST_BINS];  /* tested candidates accepted, by tenth of the draft's probability */
    double bin_tested[COST_BINS];
} cost_model;

/* t(T) / t(1); past the measured table, on the line through its last two points (T * t(1) with one point). */
static double verify_cost(const cost_model *c, int64_t T) {
    if (T <= c->n_t) return c->t[T - 1];
    const double slope = c->n_t >= 2 ? fmax(0.0, c->t[c->n_t - 1] - c->t[c->n_t - 2]) : c->t[0];
    return c->t[c->n_t - 1] + (double)(T - c->n_t) * slope;
}

/* d(n) / t(1) for n rows drafting (0 for none); past the table on the line through its last two points. */
static double draft_cost(const cost_model *c, int64_t n) {
    if (n <= 0) return 0.0;
    if (n <= c->n_d) return c->d[n - 1];
    const double slope = c->n_d >= 2 ? fmax(0.0, c->d[c->n_d - 1] - c->d[c->n_d - 2]) : 0.0;
    return c->d[c->n_d - 1] + (double)(n - c->n_d) * slope;
}

static int64_t conf_bin(double conf) {
    const int64_t b = (int64_t)(conf * COST_BINS);
    return b < 0 ? 0 : b >= COST_BINS ? COST_BINS - 1 : b;
}

/* The chance a candidate the draft gave probability conf is accepted: the running rate of its tenth, pulled
 * towards the tenth's middle while little tested. */
static double conf_rate(const cost_model *c, double conf) {
    const int64_t b = conf_bin(conf);
    return (c->bin_acc[b] + 2.0 * ((double)b + 0.5) / COST_BINS) / (c->bin_tested[b] + 2.0);
}

/* Plans k_max (<= k_cap) of every running row by the positional rates, which it leaves in r->rate. */
static void cost_schedule(const cost_model *c, row_state *rows, int64_t B) {
    double call[COST_K_MAX];
    for (int64_t j = 0; j < COST_K_MAX; j++) { /* the call's rates, each position's prior the one before it */
        const double prior = j == 0 ? 0.5 : call[j - 1];
        call[j] = (c->call.acc[j] + 2.0 * prior) / (c->call.tested[j] + 2.0);
    }
    enum { GROUP = 64 };
    double prefix[GROUP][COST_K_MAX + 1]; /* prefix[r][i] = prod_{j<i} a_rj: candidates 0 .. i - 1 all accepted */
    int64_t cap[GROUP], best_k[GROUP], n_rows = 0;
    row_state *in[GROUP];
    /* Rows beyond 64 in a round are planned in groups of 64, each group on its own. */
    for (int64_t i = 0; i <= B; i++) {
        if (i < B && !rows[i].done) {
            row_state *r = &rows[i];
            const acceptance *own = &c->rows[i];
            prefix[n_rows][0] = 1.0;
            for (int64_t j = 0; j < COST_K_MAX; j++) {
                r->rate[j] = (own->acc[j] + 2.0 * call[j]) / (own->tested[j] + 2.0);
                prefix[n_rows][j + 1] = prefix[n_rows][j] * r->rate[j];
            }
            in[n_rows] = r;
            cap[n_rows] = r->k_cap < COST_K_MAX ? r->k_cap : COST_K_MAX;
            r->k_max = 0;
            n_rows++;
        }
        if (n_rows == 0 || (n_rows < GROUP && i < B)) continue;
        int64_t total = n_rows, at_step[COST_K_MAX] = { 0 }; /* tokens verified; rows drafting at each step */
        double yield = (double)n_rows, drafting = 0.0, best = yield / verify_cost(c, total);
        for (int64_t r = 0; r < n_rows; r++) best_k[r] = 0;
        for (;;) {
            int64_t pick = -1;
            double pick_rate = -1.0;
            for (int64_t r = 0; r < n_rows; r++) {
                const int64_t k = in[r]->k_max;
                if (k >= cap[r]) continue;
                /* one more candidate: row r joins draft step k */
                const double more = draft_cost(c, at_step[k] + 1) - draft_cost(c, at_step[k]);
                const double rate = (yield + prefix[r][k + 1]) / (drafting + more + verify_cost(c, total + 1));
                if (rate > pick_rate) {
                    pick = r;
                    pick_rate = rate;
                }
            }
            if (pick < 0) break;
            const int64_t k = in[pick]->k_max++;
            drafting += draft_cost(c, at_step[k] + 1) - draft_cost(c, at_step[k]);
            at_step[k]++;
            yield += prefix[pick][k + 1];
            total++;
            if (pick_rate > best) {
                best = pick_rate;
                for (int64_t r = 0; r < n_rows; r++) best_k[r] = in[r]->k_max;
            }
        }
        for (int64_t r = 0; r < n_rows; r++) in[r]->k_max = best_k[r];
        n_rows = 0;
    }
    for (int64_t i = 0; i < B; i++) {
        rows[i].all_accepted = 1.0;
        rows[i].yield = 1.0;
    }
}

/* After draft step s (every row still drafting has s + 1 candidates, their yield counted): whether each goes on,
 * by the round's expected tokens per unit time. */
static void cost_continue(cost_model *c, row_state *rows, int64_t B, int64_t s) {
    double yield = 0.0;
    int64_t tokens = 0, n_drafting = 0, n_stepped = 0;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (r->done) continue;
        n_drafting += r->drafting;
        n_stepped += r->k == s + 1;
        yield += r->yield;
        tokens += r->k + 1;
    }
    c->steps_cost += draft_cost(c, n_stepped); /* step s appended a token for each row with s + 1 candidates */
    /* what the round's draft steps cost so far is the same whichever rows go on: compare the verification and the
     * steps to come, each row charged its share of a step's growth for one more row drafting */
    const double share = draft_cost(c, n_drafting) - draft_cost(c, n_drafting - 1);
    const double now = yield / (c->steps_cost + verify_cost(c, tokens));
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (!r->drafting) continue;
        int go = 0;
        double gain = 0.0, chain = r->all_accepted;
        for (int64_t m = 1; !go && m <= COST_LOOKAHEAD && r->k + m <= r->k_cap && r->k + m <= COST_K_MAX; m++) {
            chain *= r->rate[r->k + m - 1];
            gain += chain;
            go = (yield + gain) / (c->steps_cost + (double)m * share + verify_cost(c, tokens + m)) > now;
        }
        if (!go) r->drafting = 0;
    }
}

/* Counts the round of a row that proposed k candidates of draft probabilities conf (k,) (NULL: prompt lookup)
 * and had n accepted. */
static void count_acceptance(cost_model *c, acceptance *row, const double *conf, int64_t k, int64_t n) {
    for (int64_t j = 0; j < k && j <= n; j++) {
        if (j < COST_K_MAX) {
            c->call.tested[j] += 1.0;
            c->call.acc[j] += j < n;
            row->tested[j] += 1.0;
            row->acc[j] += j < n;
        }
        if (conf) {
            c->bin_tested[conf_bin(conf[j])] += 1.0;
            c->bin_acc[conf_bin(conf[j])] += j < n;
        }
    }
}

/* Whether the draft's candidates need q's normalization: for their probability (the cost schedule, the confidence
 * threshold) or for rejection sampling's acceptance step, which then reads it from row_state.qn. */
static int norm_q(const ha_assist_params *p, const cost_model *cost) {
    return cost || p->confidence_threshold > 0 || (p->gen.sampling.do_sample && p->acceptance == HA_ACCEPT_REJECTION);
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
    ha_status st = grow(&b->Q, &b->cap_q, q_rows, V);
    if (st != HA_OK) return st;
    float *q = b->Q;
    for (int64_t s = 0;; s++) {
        /* One append: every drafting row's unseen tokens, logits at its last. */
        int64_t n = 0, n_rows = 0;
        for (int64_t i = 0; i < B; i++) {
            row_state *r = &rows[i];
            if (!r->drafting) continue;
            const int64_t to = r->L + s;
            for (int64_t j = r->draft_len; j < to; j++) {
                b->seq[n] = r->row;
                b->tok[n] = r->tok[j];
                b->want[n++] = j == to - 1;
            }
            r->draft_len = to;
            r->q[s] = q + n_rows++ * V;
            stats->num_draft_passes++;
        }
        if (n_rows == 0) return HA_OK;
        if ((st = draft->append(draft->self, n, b->seq, b->tok, b->want, q)) != HA_OK) return st;
        q += n_rows * V;
        /* Each drafting row chooses its candidate s. */
        for (int64_t i = 0; i < B; i++) {
            row_state *r = &rows[i];
            if (!r->drafting) continue;
            const int64_t pos = r->L + s;
            float *qs = r->q[s];
            if ((st = ha_sampler_process(sampler, qs, r->row, r->tok, pos, r->generated + s)) != HA_OK) return st;
            const int32_t x = ha_sampler_choose(sampler, qs, (uint32_t)r->row, (uint32_t)pos);
            if (x < 0)
                return ha_fail(HA_ERR_INVALID, "the draft removed every token at position %lld of row %d; check its "
                               "weights", (long long)pos, r->row);
            r->tok[pos] = x;
            r->k = s + 1;
            /* one pass of exps over q, for the confidence and the acceptance step alike */
            double conf = 1.0;
            if (norm_q(p, cost)) {
                r->qn[s] = ha_softmax_norm(qs, V);
                conf = ha_norm_at(qs, V, r->qn[s], x);
            }
            if (cost) { /* the chance that this candidate and every one before it is accepted */
                r->conf[s] = conf;
                r->all_accepted *= conf_rate(cost, conf);
                r->yield += r->all_accepted;
            }
            if (r->k == r->k_cap || ha_is_eos(&p->gen, x) || conf < (double)p->confidence_threshold) r->drafting = 0;
        }
        if (cost) cost_continue(cost, rows, B, s);
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

/* ---- the rounds ------------------------------------------------------------------------------------------ */

/* The target's append for a round: each running row's unseen tokens up to its last candidate, logits at its
 * candidates' positions and the one after (position L is already scored after the prefill). Points r->p (and
 * r->raw) at its rows and processes them. */
static ha_status verify_round(ha_lm *target, const ha_assist_params *p, ha_sampler *sampler, row_state *rows, int64_t B,
                              buffers *b) {
    const int64_t V = b->V;
    int64_t n = 0, n_rows = 0;
    for (int64_t i = 0; i < B; i++)
        if (!rows[i].done) n_rows += rows[i].k + 1;
    ha_status st = grow(&b->P, &b->cap_p, n_rows, V);
    if (st == HA_OK && p->gen.logits_out) st = grow(&b->raw, &b->cap_raw, n_rows, V);
    if (st != HA_OK) return st;
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
    if (n > 0 && (st = target->append(target->self, n, b->seq, b->tok, b->want, b->P)) != HA_OK) return st;
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
    int32_t next;
    const int64_t n = accept(p, sampler, r, draft != NULL, V, &next);
    if (next < 0)
        return ha_fail(HA_ERR_INVALID, "row %d: every token was removed or NaN; check the weights and the sampling "
                       "arguments", r->row);
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
    const uint8_t own = k == 0 ? HA_SOURCE_PLAIN : n == k ? HA_SOURCE_BONUS : HA_SOURCE_CORRECTED;
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
    stats->num_draft_tokens += k;
    stats->num_accepted_tokens += n < kept ? n : kept;
    for (int64_t j = 0; j < k; j++) {
        if (stats->proposed_at) stats->proposed_at[j]++;
        if (stats->accepted_at && j < n) stats->accepted_at[j]++;
    }
    if (p->schedule == HA_SCHEDULE_COST) count_acceptance(cost, &cost->rows[r->row], draft ? r->conf : NULL, k, n);
    /* Both caches keep only decided tokens; the newest token is seen on the next catch-up. */
    r->L += kept;
    r->generated += kept;
    if (r->generated == N) r->done = 1;
    if (r->target_len > r->L - 1) r->target_len = r->L - 1;
    if (r->draft_len > r->L - 1) r->draft_len = r->L - 1;
    ha_status st = target->crop(target->self, r->row, r->target_len);
    if (st == HA_OK && draft) st = draft->crop(draft->self, r->row, r->draft_len);
    if (st != HA_OK) return st;
    /* The heuristic schedules, as Transformers' AssistedCandidateGenerator.update_candidate_strategy. */
    if (draft && (p->schedule == HA_SCHEDULE_HEURISTIC || p->schedule == HA_SCHEDULE_HEURISTIC_TRANSIENT))
        r->K = n == r->K ? r->K + 2 : (r->K - 1 > 1 ? r->K - 1 : 1);
    return HA_OK;
}

static ha_status run_rounds(ha_lm *target, ha_lm *draft, const ha_assist_params *p, ha_sampler *sampler,
                            row_state *rows, buffers *b, int32_t *out, float *scores, ha_assist_stats *stats,
                            int64_t *n_rounds, double deadline) {
    const int64_t B = target->n_seq, N = p->gen.max_new_tokens;
    /* The cost schedule's costs in units of one target step. */
    double t_rel[64], d_rel[64];
    cost_model cost = { .t = t_rel, .d = d_rel, .rows = b->acceptance };
    if (p->schedule == HA_SCHEDULE_COST) {
        const double t1 = p->target_costs[0];
        cost.n_t = p->n_target_costs;
        cost.n_d = p->n_draft_costs;
        for (int64_t T = 0; T < cost.n_t; T++) t_rel[T] = p->target_costs[T] / t1;
        for (int64_t n = 0; n < cost.n_d; n++) d_rel[n] = p->draft_costs[n] / t1;
    }
    ha_status st = HA_OK;
    for (int64_t round = 0;; round++) {
        int64_t running = 0;
        for (int64_t i = 0; i < B; i++) running += !rows[i].done;
        if (running == 0) return HA_OK;
        /* Between rounds: the interrupt poll, and max_time once every row has had its first round (a row is
         * never left without a token, as plain generation's first step is never skipped). */
        if (ha_interrupted()) return ha_fail(HA_ERR_INTERRUPTED, "generation interrupted after %lld rounds", (long long)round);
        if (round > 0 && ha_now() >= deadline) return HA_OK;
        /* 1. Candidates: never more than leave room for the target's own token within max_new_tokens, nor more
         * than a model with sliding-window rings can take back (ha_lm.max_rollback). */
        for (int64_t i = 0; i < B; i++) {
            row_state *r = &rows[i];
            if (r->done) continue;
            int64_t k_max = draft ? r->K : p->prompt_lookup_num_tokens;
            const int64_t room = N - r->generated - 1;
            if (k_max > room) k_max = room;
            if (k_max > target->max_rollback) k_max = target->max_rollback;
            if (draft && k_max > draft->max_rollback) k_max = draft->max_rollback;
            r->k_cap = r->k_max = k_max;
            r->k = 0;
        }
        if (p->schedule == HA_SCHEDULE_COST) {
            cost_schedule(&cost, rows, B);
            cost.steps_cost = 0.0;
        }
        if (draft) {
            if ((st = draft_round(draft, p, sampler, rows, B, b, p->schedule == HA_SCHEDULE_COST ? &cost : NULL, stats))
                != HA_OK)
                return st;
        } else {
            for (int64_t i = 0; i < B; i++)
                if (!rows[i].done && rows[i].k_max > 0) rows[i].k = lookup_candidates(p, &rows[i], rows[i].k_max);
        }
        /* 2. Verify every row's candidates in one target append. */
        if ((st = verify_round(target, p, sampler, rows, B, b)) != HA_OK) return st;
        *n_rounds = round + 1;
        /* 3. Accept, row by row. */
        for (int64_t i = 0; i < B; i++)
            if (!rows[i].done && (st = finish_row(target, draft, p, sampler, &rows[i], out, scores, stats, &cost)) != HA_OK)
                return st;
    }
}

ha_status ha_generate_assisted(ha_lm *target, ha_lm *draft, const ha_assist_params *p, const int32_t *prompt,
                               int64_t prompt_width, const int64_t *start, int32_t *out, float *scores, int64_t *n_steps,
                               ha_assist_stats *stats_out) {
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
            return ha_fail(HA_ERR_INVALID, "num_assistant_tokens=%lld must be >= 1", (long long)p->num_assistant_tokens);
        if (!(p->confidence_threshold >= 0.0f && p->confidence_threshold < 1.0f))
            return ha_fail(HA_ERR_INVALID, "assistant_confidence_threshold=%g must be in [0, 1)", (double)p->confidence_threshold);
    } else if (p->prompt_lookup_num_tokens < 1 || p->max_matching_ngram_size < 1) {
        return ha_fail(HA_ERR_INVALID, "prompt lookup needs prompt_lookup_num_tokens >= 1 and max_matching_ngram_size >= 1 "
                       "(got %lld, %lld)", (long long)p->prompt_lookup_num_tokens, (long long)p->max_matching_ngram_size);
    }
    if ((unsigned)p->schedule > HA_SCHEDULE_COST || (unsigned)p->acceptance > HA_ACCEPT_COUPLED)
        return ha_fail(HA_ERR_INVALID, "unknown schedule %d or acceptance %d", (int)p->schedule, (int)p->acceptance);
    if (p->schedule == HA_SCHEDULE_COST) {
        int ok = p->draft_costs && p->target_costs && p->n_draft_costs >= 1 && p->n_draft_costs <= 64 &&
                 p->n_target_costs >= 1 && p->n_target_costs <= 64;
        for (int64_t i = 0; ok && i < p->n_draft_costs; i++) ok = isfinite(p->draft_costs[i]) && p->draft_costs[i] >= 0.0;
        for (int64_t i = 0; ok && i < p->n_target_costs; i++) ok = isfinite(p->target_costs[i]) && p->target_costs[i] > 0.0;
        if (!ok)
            return ha_fail(HA_ERR_INVALID, "the cost schedule needs costs: 1..64 draft step times >= 0 and 1..64 target "
                           "append times > 0, all finite");
    }

    ha_assist_stats stats = { 0 };
    if (stats_out) {
        stats.proposed_at = stats_out->proposed_at;
        stats.accepted_at = stats_out->accepted_at;
    }
    ha_sampler *sampler = NULL;
    if ((st = ha_sampler_create(&p->gen.sampling, V, &sampler)) != HA_OK) return st;
    /* The largest append: every row's prompt and generated tokens (a draft catching up after rounds of K = 0). */
    const int64_t row_cap = prompt_width + N + 1;
    const size_t n_append = (size_t)B * (size_t)row_cap;
    buffers b = { .V = V, .seq = malloc(n_append * sizeof(int32_t)), .tok = malloc(n_append * sizeof(int32_t)),
                  .want = malloc(n_append), .first = ha_malloc_array((size_t)B, (size_t)V, sizeof(float)),
                  .first_raw = p->gen.logits_out ? ha_malloc_array((size_t)B, (size_t)V, sizeof(float)) : NULL };
    b.acceptance = calloc((size_t)B, sizeof(*b.acceptance));
    b.conf = ha_malloc_array((size_t)B, (size_t)N, sizeof(double));
    b.qn = ha_malloc_array((size_t)B, (size_t)N, sizeof(ha_normalizer));
    row_state *rows = calloc((size_t)B, sizeof(row_state));
    int32_t *tok = ha_malloc_array((size_t)B, (size_t)row_cap, sizeof(int32_t));
    float **ptrs = ha_malloc_array((size_t)B, 3 * (size_t)N + 2, sizeof(float *)); /* (B, p | raw | q) */
    if (!b.seq || !b.tok || !b.want || !b.first || !b.acceptance || !b.conf || !b.qn || (p->gen.logits_out && !b.first_raw) || !rows || !tok || !ptrs) {
        st = ha_fail(HA_ERR_NOMEM, "out of memory for assisted generation of %lld rows x %lld tokens over a vocabulary "
                     "of %lld", (long long)B, (long long)N, (long long)V);
        goto cleanup;
    }
    /* Every row as ha_generate starts it: all prompts in one append, logits at each row's last token (so that a
     * context with blas_prefill sends the same prompt blocks to OpenBLAS in both). start is read once here: a
     * token callback may rewrite the caller's array. */
    int64_t n = 0;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        const int64_t first = start[i];
        *r = (row_state){ .row = (int32_t)i, .tok = tok + i * row_cap, .L = prompt_width - first,
                          .K = p->num_assistant_tokens, .p = ptrs + i * (3 * N + 2) };
        r->raw = p->gen.logits_out ? r->p + N + 1 : NULL;
        r->q = r->p + 2 * N + 2;
        r->conf = b.conf + i * N;
        r->qn = b.qn + i * N;
        memcpy(r->tok, prompt + i * prompt_width + first, (size_t)r->L * sizeof(int32_t));
        for (int64_t j = 0; j < r->L; j++) {
            b.seq[n] = (int32_t)i;
            b.tok[n] = r->tok[j];
            b.want[n++] = j == r->L - 1;
        }
        r->target_len = r->L;
    }
    if ((st = target->append(target->self, n, b.seq, b.tok, b.want, b.first)) != HA_OK) goto cleanup;
    if (p->gen.logits_out) memcpy(b.first_raw, b.first, (size_t)B * (size_t)V * sizeof(float));
    int64_t n_rounds = 0;
    st = run_rounds(target, draft, p, sampler, rows, &b, out, scores, &stats, &n_rounds, ha_deadline(&p->gen));
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
            for (int64_t v = 0; j < steps && p->gen.logits_out && v < V; v++) p->gen.logits_out[(j * B + i) * V + v] = -INFINITY;
        }
    *n_steps = steps;
    stats.num_assistant_tokens = rows[B - 1].K;
    stats.num_rounds = n_rounds;
    if (stats_out) *stats_out = stats;

cleanup:
    ha_sampler_free(sampler);
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
    return st;
}
