/* The cost schedule's choices (csrc/generation/assist_cost.c) given stated costs: which rows it plans to draft for, and
 * which drafted candidates it keeps for the target to verify. Costs are in units of t(1); each test states them. */
#include <math.h>

#include "test_core.h"

#include "../../csrc/generation/assist.h"

enum { ROWS = 8, NT = 64 };

/* t(T) / t(1) for T = 1 .. NT: `base` up to T = flat (the weights streamed once, whatever the rows), then each token
 * `step` more. */
static void cost_table(double *t, double base, int64_t flat, double step) {
    for (int64_t T = 1; T <= NT; T++) t[T - 1] = T <= flat ? base : base + (double)(T - flat) * step;
}

/* A cost model over ROWS rows whose every row accepted `rate` of its candidates at each position (100 tested). */
static cost_model cost_over(const double *t, const double *d, int64_t n_d, acceptance *rows, const double *rate) {
    cost_model c = { .d = d, .n_d = n_d, .t = t, .n_t = NT, .rows = rows };
    for (int64_t i = 0; i < ROWS; i++)
        for (int64_t j = 0; j < COST_K_MAX; j++) {
            rows[i].tested[j] = 100.0;
            rows[i].acc[j] = 100.0 * rate[i];
            c.call.tested[j] += 100.0;
            c.call.acc[j] += 100.0 * rate[i];
        }
    return c;
}

static void plan(cost_model *c, row_state *r) {
    for (int64_t i = 0; i < ROWS; i++) r[i] = (row_state){ .row = (int32_t)i, .k_cap = 16, .k_max = 16 };
    ha_cost_schedule(c, r, ROWS);
}

static int64_t planned(const row_state *r) {
    int64_t n = 0;
    for (int64_t i = 0; i < ROWS; i++) n += r[i].k_max;
    return n;
}

/* At a batch of 8 whose target append costs t(1) per token past the 8 rows of a plain step (the arithmetic bound:
 * t(T) = T t(1) for T >= 8, as a float target on a CPU without AMX), no candidate is worth its place, however often
 * the draft is right and however cheap its steps: every row decodes plainly. Where the append costs the same up to
 * 24 tokens (the weights streamed once for all), every row drafts; where it is flat to 12 tokens and steep past, the
 * rows the draft serves best take the cheap places and the others decode plainly; among rows as good, those with the
 * most tokens left. */
void test_cost_schedule_plans_by_the_batch_s_costs(void) {
    static const double d[] = { 0.05, 0.06, 0.07, 0.08, 0.09, 0.10, 0.11, 0.12 };
    double t[NT];
    acceptance acc[ROWS];
    row_state r[ROWS];
    double good[ROWS];
    for (int64_t i = 0; i < ROWS; i++) good[i] = 0.95;

    for (int64_t T = 1; T <= NT; T++) t[T - 1] = T < ROWS ? (double)ROWS : (double)T; /* T t(1) past 8 rows */
    cost_model c = cost_over(t, d, 8, acc, good);
    plan(&c, r);
    CHECK(planned(r) == 0, "t(T) = T t(1) at a batch of 8: expected no candidate planned, got %lld",
          (long long)planned(r));

    cost_table(t, 1.5, 24, 1.0);
    c = cost_over(t, d, 8, acc, good);
    plan(&c, r);
    for (int64_t i = 0; i < ROWS; i++)
        CHECK(r[i].k_max > 0, "t(T) flat to 24 tokens: expected row %lld to draft, it planned %lld", (long long)i,
              (long long)r[i].k_max);

    double mixed[ROWS];
    for (int64_t i = 0; i < ROWS; i++) mixed[i] = i < 4 ? 0.95 : 0.2;
    cost_table(t, 1.5, 12, 1.0);
    c = cost_over(t, d, 8, acc, mixed);
    plan(&c, r);
    for (int64_t i = 0; i < ROWS; i++)
        CHECK(i < 4 ? r[i].k_max > 0 : r[i].k_max == 0,
              "t(T) flat to 12 tokens, rows 0-3 accepted 95%% and 4-7 20%%: row %lld planned %lld candidates",
              (long long)i, (long long)r[i].k_max);

    /* the same four cheap places, every row as good, rows 0-3 ahead (20 tokens left of 100, the others 100): the
     * batch ends when the rows behind do, so they take the places */
    c = cost_over(t, d, 8, acc, good);
    c.max_new = 100;
    for (int64_t i = 0; i < ROWS; i++)
        r[i] = (row_state){ .row = (int32_t)i, .k_cap = 16, .k_max = 16, .generated = i < 4 ? 80 : 0 };
    ha_cost_schedule(&c, r, ROWS);
    for (int64_t i = 0; i < ROWS; i++)
        CHECK(i < 4 ? r[i].k_max == 0 : r[i].k_max > 0,
              "t(T) flat to 12 tokens, rows 0-3 with 20 tokens left and 4-7 with 100: row %lld planned %lld candidates",
              (long long)i, (long long)r[i].k_max);
}

/* A round's first draft step runs after the target's append, with the draft's weights out of the caches: where it
 * costs more than the candidate it makes is worth, no row drafts, though the later steps (d) are cheap; with the
 * same first step as the others, rows draft. */
void test_cost_schedule_counts_the_round_s_first_draft_step(void) {
    static const double d[] = { 0.05 }, dear[] = { 1.5 };
    double t[NT], rate[ROWS];
    acceptance acc[ROWS];
    row_state r[1];
    for (int64_t i = 0; i < ROWS; i++) rate[i] = 0.6;
    for (int64_t T = 1; T <= NT; T++) t[T - 1] = 1.0 + 0.05 * (double)(T - 1);
    cost_model c = cost_over(t, d, 1, acc, rate);
    r[0] = (row_state){ .k_cap = 16 };
    ha_cost_schedule(&c, r, 1);
    CHECK(r[0].k_max > 0, "cheap draft steps at batch 1: expected candidates planned, got %lld", (long long)r[0].k_max);
    c.d_first = dear;
    c.n_d_first = 1;
    r[0] = (row_state){ .k_cap = 16 };
    ha_cost_schedule(&c, r, 1);
    CHECK(r[0].k_max == 0, "a first draft step of 1.5 t(1), candidates accepted 60%%: expected none, got %lld",
          (long long)r[0].k_max);
}

/* The table fitted to a call's own rounds (ha_cost_observe): nothing before FIT_ROUNDS rounds or while they are all
 * of one size; then the least-squares line through the appends' observed times against the table's (and the draft
 * steps' scale), bounded, which the plan then reads. A table where every token costs t(1) plans no candidate at
 * acceptance 0.9; rounds that cost half the table's slope plus half a t(1) make one worth drafting (its draft steps
 * half the table's here too). */
void test_cost_fits_the_table_to_the_call_s_rounds(void) {
    static const double d[] = { 0.3 };
    double t[NT], rate[ROWS];
    acceptance acc[ROWS];
    row_state r[1];
    for (int64_t i = 0; i < ROWS; i++) rate[i] = 0.9;
    for (int64_t T = 1; T <= NT; T++) t[T - 1] = (double)T;
    cost_model c = cost_over(t, d, 1, acc, rate);
    r[0] = (row_state){ .k_cap = 16 };
    ha_cost_schedule(&c, r, 1);
    CHECK(r[0].k_max == 0, "t(T) = T t(1), draft steps 0.3 t(1), acceptance 0.9: expected no candidate, got %lld",
          (long long)r[0].k_max);

    const double t1 = 0.002; /* seconds of the table's t(1) */
    c.t1 = t1;
    ha_cost_observe(&c, 3, 3.0 * t1, 0.0);
    CHECK(c.obs[0] == 0.0 && !c.fitted, "a model not calibrating expected to ignore the rounds, saw %g", c.obs[0]);
    c.calibrate = 1;
    for (int i = 0; i < 12; i++) ha_cost_observe(&c, 3, 2.0 * t1, 0.0);
    CHECK(!c.fitted, "rounds all of one size: expected no fit (nothing to fit a line through), got a = %g, b = %g",
          c.fit_a, c.fit_b);

    cost_model f = cost_over(t, d, 1, acc, rate);
    f.t1 = t1;
    f.calibrate = 1;
    for (int64_t i = 0; i < 5; i++) {
        const int64_t T = 1 + i % 4;
        f.steps_raw = 1.0; /* the table's t(1)s of the round's draft steps; observed half that */
        ha_cost_observe(&f, T, t1 * (0.5 * (double)T + 0.5), 0.5 * t1);
    }
    CHECK(!f.fitted, "5 rounds seen: expected no fit before %d", 6);
    for (int64_t i = 5; i < 12; i++) {
        const int64_t T = 1 + i % 4;
        f.steps_raw = 1.0;
        ha_cost_observe(&f, T, t1 * (0.5 * (double)T + 0.5), 0.5 * t1);
    }
    CHECK(f.fitted && fabs(f.fit_a - 0.5) < 1e-9 && fabs(f.fit_b - 0.5) < 1e-9 && fabs(f.fit_d - 0.5) < 1e-9,
          "appends of 0.5 t(T) + 0.5 and draft steps half the table's: expected a = 0.5, b = 0.5, d = 0.5, got "
          "fitted %d, %g, %g, %g",
          f.fitted, f.fit_a, f.fit_b, f.fit_d);
    r[0] = (row_state){ .k_cap = 16 };
    ha_cost_schedule(&f, r, 1);
    CHECK(r[0].k_max > 0,
          "the fitted table (one token 1 t(1), two 1.5, draft steps 0.15): expected candidates planned, got %lld",
          (long long)r[0].k_max);

    cost_model g = cost_over(t, d, 1, acc, rate);
    g.t1 = t1;
    g.calibrate = 1;
    for (int64_t i = 0; i < 12; i++) ha_cost_observe(&g, 1 + i % 4, t1 * 10.0 * (double)(1 + i % 4), 0.0);
    CHECK(g.fitted && g.fit_a == 2.0 && g.fit_d == 1.0,
          "appends at 10 times the table's slope, no draft steps: expected the slope bounded at 2 and the draft "
          "unscaled, got %g, %g",
          g.fit_a, g.fit_d);
}

/* After drafting, each row keeps the prefix of its candidates worth verifying, read from the draft's probabilities:
 * where verifying costs nothing more (flat t), every drafted candidate; at a batch of 8 where each verified token costs
 * t(1) / 10 past the plain step's 8, the confident ones (a row keeps a prefix: nothing after a guess) and no guess. */
void test_cost_trim_keeps_the_candidates_worth_verifying(void) {
    static const double d[] = { 0.05 };
    double t[NT], rate[ROWS], conf[ROWS][4];
    acceptance acc[ROWS];
    row_state r[ROWS];
    for (int64_t i = 0; i < ROWS; i++) rate[i] = 0.8;
    for (int64_t flat = 0; flat < 2; flat++) {
        cost_table(t, 1.5, flat ? NT : ROWS, 0.1);
        cost_model c = cost_over(t, d, 1, acc, rate);
        for (int64_t b = 0; b < COST_BINS; b++) { /* the draft is right as often as it is sure */
            c.bin_tested[b] = 1000.0;
            c.bin_acc[b] = 1000.0 * ((double)b + 0.5) / COST_BINS;
        }
        c.steps_cost = 0.1;
        for (int64_t i = 0; i < ROWS; i++) {
            /* rows 0-3: sure, sure, a guess, sure; rows 4-7: a guess first */
            conf[i][0] = i < 4 ? 0.99 : 0.3;
            conf[i][1] = 0.99;
            conf[i][2] = i < 4 ? 0.3 : 0.99;
            conf[i][3] = 0.99;
            r[i] = (row_state){ .row = (int32_t)i, .k = 4, .conf = conf[i], .worth = 1.0 };
        }
        ha_cost_trim(&c, r, ROWS);
        for (int64_t i = 0; i < ROWS; i++) {
            const int64_t want = flat ? 4 : i < 4 ? 2 : 0;
            CHECK(r[i].k == want, "%s t(T), row %lld (%s): expected %lld candidates kept, got %lld",
                  flat ? "flat" : "t(1) / 10 a token past 8", (long long)i,
                  i < 4 ? "sure, sure, guess, sure" : "guess first", (long long)want, (long long)r[i].k);
        }
    }
}

/* A tree's alternatives are rated by their own counts, not by the chain's: one row, a chain of 3 sure candidates and
 * 2 siblings of probability 0.05 at each depth, width cheap (each token 0.01 t(1)). Where the draft's first choices
 * of that probability are right half the time but its alternatives never, no sibling is kept; the other way round,
 * every sibling is (each adds half a token's chance for a hundredth of a step). */
void test_cost_siblings_rate_alternatives_by_their_own_counts(void) {
    static const double d[] = { 0.1 };
    double t[NT], rate[ROWS], conf[3] = { 0.99, 0.99, 0.99 }, sib_rate[3 * 2], reach[3];
    int64_t nsib[3], nkeep[3];
    acceptance acc[ROWS];
    for (int64_t i = 0; i < ROWS; i++) rate[i] = 0.9;
    for (int64_t j = 0; j < 3 * 2; j++) sib_rate[j] = 0.05;
    cost_table(t, 1.0, 1, 0.01);
    for (int64_t alternatives_right = 0; alternatives_right < 2; alternatives_right++) {
        cost_model c = cost_over(t, d, 1, acc, rate);
        c.steps_cost = 0.3;
        for (int64_t b = 0; b < COST_BINS; b++) {
            c.bin_tested[b] = c.alt_tested[b] = 1000.0;
            c.bin_acc[b] = b == 0 && !alternatives_right ? 500.0 : 1000.0 * ((double)b + 0.5) / COST_BINS;
            c.alt_acc[b] = b == 0 && alternatives_right ? 500.0 : 0.0;
        }
        for (int64_t j = 0; j < 3; j++) nsib[j] = 2;
        row_state r = { .k = 3,
                        .conf = conf,
                        .yield = 1.0 + 0.99 + 0.98 + 0.97,
                        .worth = 1.0,
                        .nsib = nsib,
                        .nkeep = nkeep,
                        .reach = reach,
                        .sib_rate = sib_rate };
        ha_cost_siblings(&c, &r, 1, 2);
        for (int64_t j = 0; j < 3; j++)
            CHECK(nsib[j] == (alternatives_right ? 2 : 0),
                  "alternatives accepted %s, first choices of their probability %s: depth %lld expected %d siblings "
                  "kept, got %lld",
                  alternatives_right ? "half the time" : "never", alternatives_right ? "never" : "half the time",
                  (long long)j, alternatives_right ? 2 : 0, (long long)nsib[j]);
    }
}

/* A dynamic tree's frontier under the cost schedule: its first node always, a further one only if the chance that
 * acceptance reaches it pays for its draft row at the tokens per unit time of the row's plan. Plan: 4 candidates each
 * accepted 0.9 (4.1 tokens a round, 1.4 t(1) of time with steps of 0.1 and t(5) = 1.0). A draft row that adds 0.1
 * t(1) needs a node reached with chance >= 0.33 (2.9 tokens per t(1) x 0.1 / 0.9); a row that adds nothing, any. */
void test_cost_frontier_takes_the_nodes_worth_their_draft_rows(void) {
    static const double dear[] = { 0.1, 0.2, 0.3, 0.4 }, cheap[] = { 0.1, 0.1, 0.1, 0.1 };
    double t[NT], rate[ROWS];
    acceptance acc[ROWS];
    for (int64_t i = 0; i < ROWS; i++) rate[i] = 0.9;
    cost_table(t, 1.0, NT, 0.0);
    row_state r = { .k_max = 4 };
    for (int64_t j = 0; j < COST_K_MAX; j++) r.rate[j] = 0.9;
    cost_model c = cost_over(t, dear, 4, acc, rate);
    CHECK(ha_cost_frontier_takes(&c, &r, 1, 0, 0.01), "a frontier's first node must be taken, however unlikely");
    CHECK(ha_cost_frontier_takes(&c, &r, 1, 1, 0.5), "a node reached half the time pays for a row of 0.1 t(1)");
    CHECK(!ha_cost_frontier_takes(&c, &r, 1, 1, 0.2), "a node reached 20%% of the time does not pay for 0.1 t(1)");
    c = cost_over(t, cheap, 4, acc, rate);
    CHECK(ha_cost_frontier_takes(&c, &r, 1, 1, 0.01), "a row that adds nothing: every node of the frontier");
}
