/* Drafting ahead (ha_assist_params.overlap), the assisted loop's second thread; verify_round (assist.c) starts it
 * beside the target's append and joins it when the append returns.
 *
 * While the target's append verifies a round (on an accelerator, or in another framework's forward that leaves the
 * host's cores idle), a second thread drafts on for every row as if the round will accept all its candidates: it
 * appends the row's last candidate, takes the draft's own choice at the position after it as its guess of the
 * target's token there, then drafts the next round's candidates after that guess, one append per step over the rows
 * still going, until the target's append returns, the next round's cap, or an eos. Where the round does accept every
 * candidate and the target's token is the guess, the next round's draft steps read those logits instead of appending
 * (draft_round: covered rows); otherwise finish_row crops the draft's cache back as it does anyway. The draft's
 * append is batch-invariant and the thread processes and chooses as draft_round does, with the same position-keyed
 * noise: the same candidates, tokens, scores and counts as without drafting ahead, however far it got. The thread
 * touches only the draft, the sampler and the rows' drafted-ahead state, none of which the caller's thread uses
 * until it has joined it; it never calls back into the caller (no on_logits: ha_generate_assisted checks), and it
 * drafts on its own core (ha_pool_alone), not on the pool's. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "assist.h"

/* Whether row r drafts ahead at step j: the steps before went through and its cap is not reached. */
static int ahead_going(const row_state *r, int64_t j) { return r->ahead_n == j && j < r->ahead_cap; }

static void *ahead_main(void *arg) {
    ahead *a = arg;
    const int64_t V = a->V;
    /* One core: the caller's thread runs the target's forward meanwhile (on an accelerator, a Python thread that
     * launches kernels, which the pool's workers spinning on every core would slow by more than drafting ahead
     * gains). */
    ha_pool_alone(1);
    for (int64_t j = 0; !atomic_load_explicit(&a->stop, memory_order_acquire); j++) {
        int64_t n = 0;
        for (int64_t i = 0; i < a->B; i++) {
            const row_state *r = &a->rows[i];
            if (!ahead_going(r, j)) continue;
            a->seq[n] = r->row;
            a->tok[n++] = r->tok[r->L + r->k + j - 1];
        }
        /* a failed append appended nothing: every row keeps the steps it has */
        if (n == 0 || a->draft->append(a->draft->self, n, a->seq, a->tok, NULL, a->logits) != HA_OK) break;
        n = 0;
        for (int64_t i = 0; i < a->B; i++) {
            row_state *r = &a->rows[i];
            if (!ahead_going(r, j)) continue;
            const float *row = a->logits + n++ * V;
            memcpy(r->ahead + j * V, row, (size_t)V * sizeof(float));
            r->draft_len++;
            r->ahead_n++;
            a->passes++;
            /* the token at position L + k + j, as draft_round would choose it there */
            const int64_t pos = r->L + r->k + j;
            memcpy(a->scores, row, (size_t)V * sizeof(float));
            int32_t x = -1;
            if (ha_sampler_process(a->sampler, a->scores, r->row, r->tok, pos, r->generated + r->k + j) == HA_OK)
                x = ha_sampler_choose(a->sampler, a->scores, (uint32_t)r->row, (uint32_t)pos);
            if (x >= 0) r->tok[pos] = x;
            if (x < 0 || ha_is_eos(a->gen, x)) r->ahead_cap = r->ahead_n; /* drafting would stop there too */
        }
    }
    return NULL;
}

int ha_ahead_start(ahead *a, ha_lm *target, ha_lm *draft, const ha_assist_params *p, row_state *rows, int64_t B,
                   buffers *b) {
    int64_t total = 0;
    for (int64_t i = 0; i < B; i++) {
        row_state *r = &rows[i];
        r->ahead_n = r->ahead_cap = 0;
        const int64_t last = r->L + r->k - 1; /* the last candidate's position */
        if (r->done || r->k == 0 || ha_is_eos(&p->gen, r->tok[last])) continue;
        /* The next round's cap if this one accepts every candidate (finish_row's schedule, run_rounds' limits) */
        const int heuristic = p->schedule == HA_SCHEDULE_HEURISTIC || p->schedule == HA_SCHEDULE_HEURISTIC_TRANSIENT;
        const int64_t K = ha_assist_candidate_cap(heuristic ? ha_assist_heuristic_k(r->K, r->k) : r->K, r->L + r->k + 1,
                                                  r->generated + r->k + 1, p, target, draft);
        /* logits rows: the guess, then K candidates; within what a crop after this round may take back of the
         * draft (everything after L) and the draft's capacity; and short of the draft's rope switch where it holds
         * no more than S positions (one token appended at S would run the row again whole: draft_round's to do) */
        int64_t n_rows = K + 1;
        if (n_rows > draft->max_rollback - (r->k - 1)) n_rows = draft->max_rollback - (r->k - 1);
        if (n_rows > draft->capacity - last) n_rows = draft->capacity - last;
        if (draft->rope_switch > 0 && last <= draft->rope_switch && n_rows > draft->rope_switch - last)
            n_rows = draft->rope_switch - last;
        if (n_rows < 2) continue;
        /* the draft holds exactly the positions before the last candidate (more where this round's steps read rows
         * drafted ahead and stopped before their end) */
        if (r->draft_len > last && draft->crop(draft->self, r->row, last) == HA_OK) r->draft_len = last;
        if (r->draft_len != last) continue;
        r->ahead_cap = n_rows;
        total += n_rows;
    }
    if (total == 0 || ha_assist_grow(&b->A, &b->cap_a, total, b->V) != HA_OK) {
        for (int64_t i = 0; i < B; i++) rows[i].ahead_cap = 0;
        return 0;
    }
    for (int64_t i = 0, at = 0; i < B; i++) {
        rows[i].ahead = b->A + at * b->V;
        at += rows[i].ahead_cap;
    }
    atomic_store_explicit(&a->stop, 0, memory_order_release);
    a->passes = 0;
    if (pthread_create(&a->thread, NULL, ahead_main, a) != 0) {
        for (int64_t i = 0; i < B; i++) rows[i].ahead_cap = 0;
        return 0;
    }
    return 1;
}

void ha_ahead_finish(ahead *a, ha_assist_stats *stats) {
    atomic_store_explicit(&a->stop, 1, memory_order_release);
    pthread_join(a->thread, NULL);
    stats->num_ahead_passes += a->passes;
}
