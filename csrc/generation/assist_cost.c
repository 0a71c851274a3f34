/* The assisted loop's cost schedule (HA_SCHEDULE_COST): each round's K per row, from the costs and the running
 * acceptance; run_rounds (assist.c) plans with it before drafting, and draft_round asks it after each draft step.
 *
 * A round in which the rows propose k_r candidates costs sum_s d(n_s) (draft step s > 0 appends one token for each
 * of the n_s rows with k_r > s; step 0 appends each such row's catch-up, the decided tokens the draft has not seen, 1
 * after a round the row drafted in and one more for each round it did not, priced as that many rows of one token at
 * its own cost d_first, as it runs right after the target's append) plus t(sum_r (k_r + 1)) (one target append), and
 * yields sum_r E_r tokens in expectation, E_r = 1 plus
 * the chance that each candidate and every one before it is accepted. Two estimates of that chance:
 * - before drafting, from the row's acceptance rate by draft position (leaning on the call's): ha_cost_schedule
 *   plans each row's k (starting from every k_r = 0, it adds one candidate at a time to the row where that gives
 *   the best rate, up to each row's cap, and keeps the best configuration seen on that path); a row drafts this
 *   round iff its plan is k > 0;
 * - while drafting, from the probability the draft gave its candidate, through the call's running acceptance of
 *   candidates in each tenth of that probability (the draft's confidence tells a safe candidate from a
 *   guess): after each candidate, a row drafts one more iff drafting m more (at its positional rates, m up to 8)
 *   would raise the round's expected tokens per unit time.
 * The costs are the table's until the call's own rounds say otherwise: ha_cost_observe fits the appends' observed
 * times to a line in the table's t(T), and scales the draft's steps, once enough rounds of sizes far enough apart are
 * seen (a loop of appends alone, which timed the table, runs faster than appends between draft steps, and a table
 * timed in an odd moment of a shared machine stays the process's).
 * Both rates are counts of the call's candidates, from a prior; with ha_assist_params.cost_state they go on from
 * the counts of the pair's earlier calls. A call learning from nothing is pessimistic through its first rounds,
 * and a position its rate once made look poor is not drafted again, so never measured again: a row can stop at
 * the same short draft round after round while longer drafts would be accepted. Carried counts start a call from
 * what the pair's earlier calls learnt instead.
 * Carried counts that say no candidate is worth it would be final (nothing drafted, nothing counted, in every call
 * after), so a row that planned none for COST_EXPLORE rounds in a row drafts one (and goes on while it is worth
 * it), one row at most every COST_EXPLORE rounds of the call: a check on the verdict for about one draft step and
 * one verified token per COST_EXPLORE rounds, whatever the batch (a batch of 8 rows each checking every 16 rounds
 * spent a tenth of its time on the checks). */
#include <math.h>
#include <string.h>

#include "assist.h"

#define COST_LOOKAHEAD 8
#define COST_EXPLORE 16
_Static_assert(HA_COST_STATE == 2 * COST_K_MAX + 4 * COST_BINS, "ha.h's HA_COST_STATE is the cost state's size");

/* ha_assist_params.cost_state: acc (COST_K_MAX,), tested (COST_K_MAX,), bin_acc (COST_BINS,), bin_tested
 * (COST_BINS,), alt_acc (COST_BINS,), alt_tested (COST_BINS,), the cost model's call-wide counts. */
#define STATE_BINS (2 * COST_K_MAX)
#define STATE_ALT (2 * COST_K_MAX + 2 * COST_BINS)

int ha_cost_state_ok(const double *s) {
    for (int i = 0; i < HA_COST_STATE; i++)
        if (!isfinite(s[i]) || s[i] < 0.0) return 0;
    for (int j = 0; j < COST_K_MAX; j++)
        if (s[j] > s[COST_K_MAX + j]) return 0;
    for (int j = 0; j < COST_BINS; j++)
        if (s[STATE_BINS + j] > s[STATE_BINS + COST_BINS + j] || s[STATE_ALT + j] > s[STATE_ALT + COST_BINS + j])
            return 0;
    return 1;
}

/* counts (n,) and the matching tested (n,) scaled down together so that the tested add up to HA_COST_MEMORY at
 * most. */
static void cost_window(double *counts, double *tested, int n) {
    double all = 0.0;
    for (int i = 0; i < n; i++) all += tested[i];
    if (all <= HA_COST_MEMORY) return;
    for (int i = 0; i < n; i++) counts[i] *= HA_COST_MEMORY / all, tested[i] *= HA_COST_MEMORY / all;
}

void ha_cost_state_load(cost_model *c, const double *s) {
    memcpy(c->call.acc, s, sizeof c->call.acc);
    memcpy(c->call.tested, s + COST_K_MAX, sizeof c->call.tested);
    memcpy(c->bin_acc, s + STATE_BINS, sizeof c->bin_acc);
    memcpy(c->bin_tested, s + STATE_BINS + COST_BINS, sizeof c->bin_tested);
    memcpy(c->alt_acc, s + STATE_ALT, sizeof c->alt_acc);
    memcpy(c->alt_tested, s + STATE_ALT + COST_BINS, sizeof c->alt_tested);
    cost_window(c->call.acc, c->call.tested, COST_K_MAX);
    cost_window(c->bin_acc, c->bin_tested, COST_BINS);
    cost_window(c->alt_acc, c->alt_tested, COST_BINS);
}

void ha_cost_state_store(const cost_model *c, double *s) {
    memcpy(s, c->call.acc, sizeof c->call.acc);
    memcpy(s + COST_K_MAX, c->call.tested, sizeof c->call.tested);
    memcpy(s + STATE_BINS, c->bin_acc, sizeof c->bin_acc);
    memcpy(s + STATE_BINS + COST_BINS, c->bin_tested, sizeof c->bin_tested);
    memcpy(s + STATE_ALT, c->alt_acc, sizeof c->alt_acc);
    memcpy(s + STATE_ALT + COST_BINS, c->alt_tested, sizeof c->alt_tested);
}

/* t(T) / t(1) by the table; past it, on the line through its last two points (T * t(1) with one point). */
static double table_verify(const cost_model *c, int64_t T) {
    if (T <= c->n_t) return c->t[T - 1];
    const double slope = c->n_t >= 2 ? fmax(0.0, c->t[c->n_t - 1] - c->t[c->n_t - 2]) : c->t[0];
    return c->t[c->n_t - 1] + (double)(T - c->n_t) * slope;
}

/* t(T) / t(1) as the call's rounds have it (ha_cost_observe's fit of the table). */
static double verify_cost(const cost_model *c, int64_t T) {
    return c->fitted ? c->fit_a * table_verify(c, T) + c->fit_b : table_verify(c, T);
}

/* A table d (n_d,) of steps for 1 .. n_d rows at n rows (0 for none); past it on the line through its last two
 * points. */
static double rows_cost(const double *d, int64_t n_d, int64_t n) {
    if (n <= 0) return 0.0;
    if (n <= n_d) return d[n - 1];
    const double slope = n_d >= 2 ? fmax(0.0, d[n_d - 1] - d[n_d - 2]) : 0.0;
    return d[n_d - 1] + (double)(n - n_d) * slope;
}

/* What the call's rounds make of the table's draft steps (ha_cost_observe): 1 until fitted. */
static double draft_scale(const cost_model *c) { return c->fitted ? c->fit_d : 1.0; }

/* d(n) / t(1) for n rows drafting. */
static double draft_cost(const cost_model *c, int64_t n) { return draft_scale(c) * rows_cost(c->d, c->n_d, n); }

/* Draft step s of a round for n rows by the table: the first runs after the target's append, the draft's weights
 * out of the caches (d_first where given). */
static double table_step(const cost_model *c, int64_t s, int64_t n) {
    return s == 0 && c->n_d_first > 0 ? rows_cost(c->d_first, c->n_d_first, n) : rows_cost(c->d, c->n_d, n);
}

/* The same as the call's rounds have it. */
static double step_cost(const cost_model *c, int64_t s, int64_t n) { return draft_scale(c) * table_step(c, s, n); }

/* The fit needs this many rounds seen, and keeps within these bounds (a few odd rounds, or a table timed in an odd
 * moment, must not make it absurd): slope and draft scale within 2x of the table's, intercept within [-0.5, 1.5] of
 * a table t(1). */
#define FIT_ROUNDS 6
#define FIT_SCALE 2.0
#define FIT_LO (-0.5)
#define FIT_HI 1.5
#define FIT_SPREAD 0.05 /* the variance of the sizes' t(T) / t(1) seen, at least */
#define FIT_DRAFT 4.0   /* the table's t(1)s of draft steps seen, at least */

void ha_cost_observe(cost_model *c, int64_t T, double target_s, double draft_s) {
    if (!c->calibrate || !(c->t1 > 0.0) || T < 1 || !(target_s >= 0.0) || !(draft_s >= 0.0)) return;
    const double x = table_verify(c, T), y = target_s / c->t1;
    c->obs[0] += 1.0, c->obs[1] += x, c->obs[2] += y, c->obs[3] += x * x, c->obs[4] += x * y;
    if (c->steps_raw > 0.0) c->draft_obs += draft_s / c->t1, c->draft_raw += c->steps_raw;
    const double n = c->obs[0];
    const double mx = c->obs[1] / n, my = c->obs[2] / n, var = c->obs[3] / n - mx * mx;
    /* a line only through sizes far enough apart (rounds of one size, or nearly: nothing to fit) */
    if (n < FIT_ROUNDS || var < FIT_SPREAD) return;
    const double a = fmin(FIT_SCALE, fmax(1.0 / FIT_SCALE, (c->obs[4] / n - mx * my) / var));
    const double b = fmin(FIT_HI, fmax(FIT_LO, my - a * mx));
    if (!(a + b > 0.0)) return; /* a one-token append must cost something */
    c->fitted = 1, c->fit_a = a, c->fit_b = b;
    c->fit_d = c->draft_raw >= FIT_DRAFT ? fmin(FIT_SCALE, fmax(1.0 / FIT_SCALE, c->draft_obs / c->draft_raw)) : 1.0;
}

/* Tokens row r adds to draft step s: its catch-up at the first (ha_cost_schedule sets r->unseen), one after. */
static int64_t step_tokens(const row_state *r, int64_t s) { return s == 0 ? r->unseen : 1; }

static int64_t conf_bin(double conf) {
    const int64_t b = (int64_t)(conf * COST_BINS);
    return b < 0 ? 0 : b >= COST_BINS ? COST_BINS - 1 : b;
}

/* The running rate of conf's tenth in counts acc, tested (COST_BINS,), pulled towards the tenth's middle while
 * little tested. */
static double bin_rate(const double *acc, const double *tested, double conf) {
    const int64_t b = conf_bin(conf);
    return (acc[b] + 2.0 * ((double)b + 0.5) / COST_BINS) / (tested[b] + 2.0);
}

/* The chance a candidate the draft gave probability conf is accepted. */
double ha_cost_conf_rate(const cost_model *c, double conf) { return bin_rate(c->bin_acc, c->bin_tested, conf); }

/* An alternative's chance, from counts of its own: a second choice of probability 0.05 under a confident first is
 * the target's token far less often than a first choice of 0.05 (where the draft is unsure of every token), so rated
 * as first choices the width would look worth more than it yields. The same prior, the tenth's middle. */
double ha_cost_alt_rate(const cost_model *c, double conf) { return bin_rate(c->alt_acc, c->alt_tested, conf); }

void ha_cost_count_alt(cost_model *c, double conf, int accepted) {
    c->alt_tested[conf_bin(conf)] += 1.0;
    c->alt_acc[conf_bin(conf)] += accepted != 0;
}

/* What a token of each running row is worth this round: the batch runs until its last row is done, so a token of
 * the row with the most left to make (max_new_tokens less what it made) is worth one, and a row that is ahead
 * (m tokens left where the last has M) is worth m / M: its tokens shorten the call only by the rows dropping out
 * earlier. (A row that ends at an eos sooner is not foreseen.) */
static void row_worth(const cost_model *c, row_state *rows, int64_t B) {
    int64_t most = 1;
    for (int64_t i = 0; i < B; i++)
        if (!rows[i].done && c->max_new - rows[i].generated > most) most = c->max_new - rows[i].generated;
    for (int64_t i = 0; i < B; i++) {
        const int64_t left = c->max_new - rows[i].generated;
        rows[i].worth = c->max_new <= 0 ? 1.0 : (double)(left > 1 ? left : 1) / (double)most;
    }
}

void ha_cost_schedule(cost_model *c, row_state *rows, int64_t B) {
    row_worth(c, rows, B);
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
            /* the draft's catch-up: its prompt is its prefill, paid once by any row that drafts at all */
            r->unseen = r->draft_len > 0 && r->L - r->draft_len > 1 ? r->L - r->draft_len : 1;
            prefix[n_rows][0] = r->worth;
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
        /* tokens verified; rows drafting at each step (at step 0 tokens: each row's catch-up) */
        int64_t total = n_rows, at_step[COST_K_MAX] = { 0 };
        double yield = 0.0, drafting = 0.0;
        for (int64_t r = 0; r < n_rows; r++) yield += prefix[r][0];
        double best = yield / verify_cost(c, total);
        for (int64_t r = 0; r < n_rows; r++) best_k[r] = 0;
        for (;;) {
            int64_t pick = -1;
            double pick_rate = -1.0;
            for (int64_t r = 0; r < n_rows; r++) {
                const int64_t k = in[r]->k_max;
                if (k >= cap[r]) continue;
                /* one more candidate: row r joins draft step k */
                const double more = step_cost(c, k, at_step[k] + step_tokens(in[r], k)) - step_cost(c, k, at_step[k]);
                const double rate = (yield + prefix[r][k + 1]) / (drafting + more + verify_cost(c, total + 1));
                if (rate > pick_rate) {
                    pick = r;
                    pick_rate = rate;
                }
            }
            if (pick < 0) break;
            const int64_t k = in[pick]->k_max++, add = step_tokens(in[pick], k);
            drafting += step_cost(c, k, at_step[k] + add) - step_cost(c, k, at_step[k]);
            at_step[k] += add;
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
    /* Exploring: one row a round at most, the one idle longest, once it and the call have gone COST_EXPLORE rounds
     * without one (each costs a draft step over the row's catch-up and a verified token, whatever the batch) */
    row_state *longest = NULL;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        r->all_accepted = 1.0;
        r->yield = 1.0;
        r->exploring = 0;
        if (r->done) continue;
        r->idle = r->k_max > 0 ? 0 : r->idle + 1;
        if (r->k_cap > 0 && (!longest || r->idle > longest->idle)) longest = r;
    }
    c->quiet++;
    if (c->explore && longest && longest->idle >= COST_EXPLORE && c->quiet >= COST_EXPLORE) {
        longest->k_max = longest->exploring = 1;
        longest->idle = 0;
        c->quiet = 0;
    }
}

/* After draft step s (every row still drafting has s + 1 candidates, their yield counted): whether each goes on,
 * by the round's expected tokens per unit time. */
void ha_cost_continue(cost_model *c, row_state *rows, int64_t B, int64_t s) {
    double yield = 0.0;
    int64_t tokens = 0, n_drafting = 0, n_stepped = 0;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (r->done) continue;
        n_drafting += r->drafting;
        n_stepped += r->k == s + 1 ? step_tokens(r, s) : 0;
        yield += r->worth * r->yield;
        tokens += r->k + 1;
    }
    c->steps_cost += step_cost(c, s, n_stepped); /* step s appended a token for each row with s + 1 candidates */
    c->steps_raw += table_step(c, s, n_stepped);
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
            gain += r->worth * chain;
            go = (yield + gain) / (c->steps_cost + (double)m * share + verify_cost(c, tokens + m)) > now;
        }
        if (!go) r->drafting = 0;
    }
}

void ha_cost_count(cost_model *c, acceptance *row, const double *conf, int64_t k, int64_t n) {
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

/* After a chain round's drafting: which of each row's candidates the target verifies. A row drafts on while more
 * steps look worth it on positional rates (ha_cost_continue); once drafted, a candidate's chance is read from the
 * probability the draft gave it (ha_cost_conf_rate), and a guess may be worth less than its place in the target's
 * append (at a batch, where the append already streams the weights once for all rows, a place costs its arithmetic).
 * The draft steps are paid whatever is kept. From no candidate kept, candidates are added one at a time, the one
 * adding the most expected tokens first (a row's next: the chance that it and every one before it is accepted, so
 * each row keeps a prefix), and the configuration of the best expected tokens per unit time along that path is kept
 * (t(T) is not convex: the kernels' tiles). Greedy and coupled acceptance only: under rejection sampling a candidate
 * kept or dropped by its own probability is no longer a draw from q (with p = (.5, .5), q = (.9, .1) and token 1
 * dropped, token 0 comes out 55% of the time), so there every drafted candidate is verified. A row exploring keeps
 * its first candidate: dropped, it would check nothing. */
void ha_cost_trim(const cost_model *c, row_state *rows, int64_t B) {
    double yield = 0.0;
    int64_t tokens = 0;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        r->k_keep = r->k_best = 0;
        r->keep_chance = 1.0;
        if (r->done) continue;
        yield += r->worth;
        tokens += 1;
        if (r->exploring && r->k > 0) { /* its first candidate is the check it drafted for: always verified */
            r->k_keep = r->k_best = 1;
            r->keep_chance = ha_cost_conf_rate(c, r->conf[0]);
            yield += r->worth * r->keep_chance;
            tokens += 1;
        }
    }
    double best = yield / (c->steps_cost + verify_cost(c, tokens));
    for (;;) {
        row_state *pick = NULL;
        double gain = -1.0;
        for (int64_t i = 0; i < B; i++) {
            row_state *r = &rows[i];
            if (r->done || r->k_keep >= r->k) continue;
            const double g = r->worth * r->keep_chance * ha_cost_conf_rate(c, r->conf[r->k_keep]);
            if (g > gain) pick = r, gain = g;
        }
        if (!pick) break;
        pick->k_keep++;
        pick->keep_chance = gain / pick->worth;
        yield += gain;
        tokens++;
        const double rate = yield / (c->steps_cost + verify_cost(c, tokens));
        if (rate > best) {
            best = rate;
            for (int64_t i = 0; i < B; i++) rows[i].k_best = rows[i].k_keep;
        }
    }
    for (int64_t i = 0; i < B; i++)
        if (!rows[i].done) rows[i].k = rows[i].k_best;
}

/* Token trees under the cost schedule: the tree's shape from the costs. After the chains are drafted, each row's
 * siblings (best first at each depth: ha_tree_siblings) are kept one at a time, the one adding the most expected
 * tokens first, while that raises the round's expected tokens per unit time: a sibling y at depth j adds the chance
 * that the chain reaches depth j and the target's token there is y, taken as the running rate of siblings the
 * draft gave y's probability (ha_cost_alt_rate; under rejection sampling the probability of y's place, r->sib_rate,
 * so that no sibling's presence depends on its own token), and costs one more token in the target's append. Where width is
 * not cheap (t(T + 1) - t(T) near t(1)) no sibling is worth it and the round verifies chains. Leaves r->nsib the
 * kept counts (a prefix of each depth's siblings). */
void ha_cost_siblings(const cost_model *c, row_state *rows, int64_t B, int64_t w1) {
    double yield = 0.0;
    int64_t tokens = 0;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        if (r->done) continue;
        yield += r->yield;
        tokens += r->k + 1;
        for (int64_t j = 0; j < r->k; j++) {
            r->nkeep[j] = 0;
            r->reach[j] = j == 0 ? 1.0 : r->reach[j - 1] * ha_cost_conf_rate(c, r->conf[j - 1]);
        }
    }
    for (;;) {
        row_state *best = NULL;
        int64_t best_j = -1;
        double gain = 0.0;
        for (int64_t i = 0; i < B; i++) {
            row_state *r = &rows[i];
            for (int64_t j = 0; !r->done && j < r->k; j++) {
                if (r->nkeep[j] >= r->nsib[j]) continue;
                const double g = r->reach[j] * ha_cost_alt_rate(c, r->sib_rate[j * w1 + r->nkeep[j]]);
                if (g > gain) best = r, best_j = j, gain = g;
            }
        }
        if (!best) break;
        const double now = yield / (c->steps_cost + verify_cost(c, tokens));
        if (!((yield + gain) / (c->steps_cost + verify_cost(c, tokens + 1)) > now)) break;
        best->nkeep[best_j]++;
        yield += gain;
        tokens++;
    }
    for (int64_t i = 0; i < B; i++)
        for (int64_t j = 0; !rows[i].done && j < rows[i].k; j++) rows[i].nsib[j] = rows[i].nkeep[j];
}

double ha_cost_draft_step(const cost_model *c, int64_t s, int64_t n) { return step_cost(c, s, n); }

/* Dynamic trees under the cost schedule: whether row r's frontier at depth d (the nodes whose children will be at
 * depth d) takes one more node of reach `reach` (the chance that acceptance reaches it) after the nf it has: what it
 * adds, the chance that acceptance reaches it and takes its child (reach times the row's rate at position d), against
 * the draft row it adds to the step, at the tokens per unit time of the row's plan (its k_max candidates: their
 * positional rates, its draft steps and t(k_max + 1)). A frontier's first node is always taken (a chain's step). Where
 * a draft row is dear (a draft bound by its arithmetic, each frontier node near a step of its own) the frontier keeps
 * the nodes acceptance will likely reach, often only the chain's. */
int ha_cost_frontier_takes(const cost_model *c, const row_state *r, int64_t d, int64_t nf, double reach) {
    if (nf == 0) return 1;
    double tokens = 1.0, chain = 1.0, time = verify_cost(c, r->k_max + 1);
    for (int64_t j = 0; j < r->k_max && j < COST_K_MAX; j++) {
        chain *= r->rate[j];
        tokens += chain;
        time += step_cost(c, j, 1);
    }
    const double extra = step_cost(c, d, nf + 1) - step_cost(c, d, nf);
    return reach * r->rate[d < COST_K_MAX ? d : COST_K_MAX - 1] >= tokens / time * extra;
}

/* Dynamic trees under the cost schedule: each row's nodes come in the order its tree chose them (assist_dyntree.c),
 * gain (B, stride) the chance that acceptance reaches each; they are kept one at a time, the row whose next one gains
 * most first, while that raises the round's expected tokens per unit time (1 per row plus the gains kept, over the
 * draft steps so far and t(nodes + 1 per row)): the first maximum, as each node's place must be settled before the
 * nodes after it are looked at (the exactness rule there). Where t(T) grows like T this keeps few nodes, a chain's
 * worth. n_keep (B,) the nodes kept of the n_sel (B,) selected. */
void ha_cost_dyn_budget(const cost_model *c, row_state *rows, int64_t B, const double *gain, const int64_t *n_sel,
                        int64_t stride, int64_t *n_keep) {
    double yield = 0.0;
    int64_t tokens = 0;
    for (int64_t i = 0; i < B; i++) {
        n_keep[i] = 0;
        if (rows[i].done) continue;
        yield += 1.0;
        tokens += 1;
    }
    for (;;) {
        int64_t best = -1;
        double g = 0.0;
        for (int64_t i = 0; i < B; i++)
            if (!rows[i].done && n_keep[i] < n_sel[i] && (best < 0 || gain[i * stride + n_keep[i]] > g)) {
                best = i;
                g = gain[i * stride + n_keep[i]];
            }
        if (best < 0) break;
        const double now = yield / (c->steps_cost + verify_cost(c, tokens));
        if (!((yield + g) / (c->steps_cost + verify_cost(c, tokens + 1)) > now)) break;
        n_keep[best]++;
        yield += g;
        tokens++;
    }
}
