/* Assisted generation (speculative decoding): the draft proposes up to K tokens, the target scores them all in
 * one append, the acceptance step keeps what the target itself would have produced, and both caches are
 * cropped to the accepted length. Models are driven only through the model interface (ha_lm).
 *
 * Per row, the invariant between rounds: tok[0, L) are the row's tokens (prompt then generated); the target's
 * cache holds a prefix of them and the draft's cache another prefix; each model first catches up on the
 * tokens it has not seen. Noise is keyed by (seed, row, position), so which tokens are drawn at a position
 * never depends on how many were drafted or accepted before it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct row_state {
    int32_t row;
    int32_t *tok;        /* (capacity,) the row's real tokens, then drafts */
    int64_t L;           /* tokens decided so far */
    int64_t target_len;  /* positions in the target's cache */
    int64_t draft_len;   /* positions in the draft's cache */
    int64_t generated;   /* new tokens decided so far */
} row_state;

typedef struct buffers {
    int32_t *seq;        /* (n,) append scratch: sequence ids */
    uint8_t *want;       /* (n,) append scratch */
    float *p;            /* (max_new + 1, V) target's processed scores for the verified positions */
    float *q;            /* (max_new, V) draft's processed scores for its proposals */
    float *raw;          /* (max_new + 1, V) the target's raw logits of p's rows, when they are asked for */
} buffers;

/* Appends tok[from, to) of row r to lm, logits for the last `n_logits` of them. */
static ha_status catch_up(ha_lm *lm, const row_state *r, buffers *b, int64_t from, int64_t to, int64_t n_logits,
                          float *logits) {
    for (int64_t i = from; i < to; i++) {
        b->seq[i - from] = r->row;
        b->want[i - from] = i >= to - n_logits;
    }
    return lm->append(lm->self, to - from, b->seq, r->tok + from, b->want, logits);
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

/* Draft up to k_max tokens with the draft model into tok[L, L + k), their processed scores into b->q. */
static ha_status draft_candidates(ha_lm *draft, const ha_assist_params *p, ha_sampler *sampler, row_state *r, buffers *b,
                                  int64_t k_max, int64_t *k_out, ha_assist_stats *stats) {
    const int64_t V = draft->vocab_size;
    int64_t k = 0;
    ha_status st = catch_up(draft, r, b, r->draft_len, r->L, 1, b->q);
    if (st != HA_OK) return st;
    r->draft_len = r->L;
    stats->num_draft_passes++;
    while (k < k_max) {
        int64_t pos = r->L + k;
        float *q = b->q + k * V;
        if ((st = ha_sampler_process(sampler, q, r->row, r->tok, pos, r->generated + k)) != HA_OK) return st;
        int32_t x = ha_sampler_choose(sampler, q, (uint32_t)r->row, (uint32_t)pos);
        if (x < 0) return ha_fail(HA_ERR_INVALID, "the draft removed every token at position %lld; check its weights", (long long)pos);
        r->tok[pos] = x;
        k++;
        if (ha_is_eos(&p->gen, x)) break;
        if (p->confidence_threshold > 0 && ha_softmax_at(q, V, x) < (double)p->confidence_threshold) break;
        if (k == k_max) break;
        st = catch_up(draft, r, b, pos, pos + 1, 1, b->q + k * V);
        if (st != HA_OK) return st;
        r->draft_len = pos + 1;
        stats->num_draft_passes++;
    }
    *k_out = k;
    return HA_OK;
}

/* The acceptance step over k candidates tok[L, L + k) with target scores p (k + 1, V) and, for a model draft,
 * draft scores q (k, V). Returns n accepted and writes the target's own next token to *next. */
static int64_t accept(const ha_assist_params *p, const ha_sampler *sampler, const row_state *r, const float *P,
                      const float *Q, int64_t k, int64_t V, int32_t *next) {
    const uint32_t row = (uint32_t)r->row;
    const int64_t L = r->L;
    int64_t n = 0;
    if (!p->gen.sampling.do_sample || p->acceptance == HA_ACCEPT_COUPLED || !Q) {
        /* Greedy, coupled, or a draft without distributions: keep candidates while they equal the target's
         * own choice at their position (argmax, or its sample under the shared noise). */
        for (;; n++) {
            int32_t t = ha_sampler_choose(sampler, P + n * V, row, (uint32_t)(L + n));
            if (n == k || t != r->tok[L + n]) {
                *next = t;
                return n;
            }
        }
    }
    for (; n < k; n++) {
        int32_t x = r->tok[L + n];
        double px = ha_softmax_at(P + n * V, V, x), qx = ha_softmax_at(Q + n * V, V, x);
        double u = ha_rng_uniform(p->gen.sampling.seed, row, (uint32_t)(L + n), HA_RNG_ACCEPT, 0);
        if (!(qx > 0.0) || u > px / qx) { /* q(x) = 0 cannot come from the draft; reject it if it does */
            *next = ha_sample_residual(sampler, P + n * V, Q + n * V, row, (uint32_t)(L + n));
            return n;
        }
    }
    *next = ha_sampler_choose(sampler, P + k * V, row, (uint32_t)(L + k)); /* the bonus token, from p */
    return k;
}

static ha_status run_row(ha_lm *target, ha_lm *draft, const ha_assist_params *p, ha_sampler *sampler, row_state *r,
                         buffers *b, int64_t *K, int32_t *out, float *scores, ha_assist_stats *stats, double deadline) {
    const int64_t V = target->vocab_size, N = p->gen.max_new_tokens, B = target->n_seq;
    const int adaptive = p->schedule != HA_SCHEDULE_CONSTANT;
    ha_status st = HA_OK;
    /* 0. The prompt alone, as plain generation appends it, so that a context with blas_prefill sends the same
     * prompt blocks to OpenBLAS in both; the logits at its last token score position L for the first round. */
    if (r->target_len == 0) {
        if ((st = catch_up(target, r, b, 0, r->L, 1, b->p)) != HA_OK) return st;
        r->target_len = r->L;
    }
    while (r->generated < N) {
        /* Between rounds: the interrupt poll, and max_time once the row has had its first round (a row is never
         * left without a token, as plain generation's first step is never skipped). */
        if (ha_interrupted()) return ha_fail(HA_ERR_INTERRUPTED, "generation interrupted in row %d", r->row);
        if (r->generated > 0 && ha_now() >= deadline) break;
        /* 1. Candidates: never more than leave room for the target's own token within max_new_tokens. */
        int64_t room = N - r->generated - 1, k = 0;
        int64_t k_max = draft ? (*K < room ? *K : room) : (p->prompt_lookup_num_tokens < room ? p->prompt_lookup_num_tokens : room);
        /* ... nor more than a model with sliding-window rings can take back (ha_lm.max_rollback) */
        if (k_max > target->max_rollback) k_max = target->max_rollback;
        if (draft && k_max > draft->max_rollback) k_max = draft->max_rollback;
        if (k_max > 0) {
            if (draft) st = draft_candidates(draft, p, sampler, r, b, k_max, &k, stats);
            else k = lookup_candidates(p, r, k_max);
            if (st != HA_OK) return st;
        }
        /* 2. Verify: the target catches up and scores positions L .. L + k in one append (position L is
         * already scored, in b->p, right after the prompt's append). */
        const int64_t scored = r->target_len == r->L;
        if (r->L + k > r->target_len)
            st = catch_up(target, r, b, r->target_len, r->L + k, k + 1 - scored, b->p + scored * V);
        if (st != HA_OK) return st;
        r->target_len = r->L + k;
        stats->num_target_passes++;
        if (p->gen.logits_out) memcpy(b->raw, b->p, (size_t)(k + 1) * (size_t)V * sizeof(float));
        for (int64_t j = 0; j <= k; j++)
            if ((st = ha_sampler_process(sampler, b->p + j * V, r->row, r->tok, r->L + j, r->generated + j)) != HA_OK)
                return st;
        /* 3. Accept n candidates and the target's next token; an eos among them ends the row there. */
        int32_t next;
        int64_t n = accept(p, sampler, r, b->p, draft ? b->q : NULL, k, V, &next);
        if (next < 0)
            return ha_fail(HA_ERR_INVALID, "row %d: every token was removed or NaN; check the weights and the sampling "
                           "arguments", r->row);
        r->tok[r->L + n] = next;
        /* The row ends after an eos, or where a stopping criterion says so, asked token by token in order as
         * plain generation asks it. */
        int64_t kept = n + 1, done = 0;
        for (int64_t j = 0; j < kept && !done; j++) {
            const int ends = ha_row_ends(&p->gen, r->row, r->tok, r->L + j + 1, b->p + j * V, V);
            if (ends < 0) return HA_ERR_CALLBACK;
            if (ends) {
                kept = j + 1;
                done = 1;
            }
        }
        for (int64_t j = 0; j < kept; j++) {
            out[r->row * N + r->generated + j] = r->tok[r->L + j];
            const int64_t at = ((r->generated + j) * B + r->row) * V;
            if (scores) memcpy(scores + at, b->p + j * V, (size_t)V * sizeof(float));
            if (p->gen.logits_out) memcpy(p->gen.logits_out + at, b->raw + j * V, (size_t)V * sizeof(float));
        }
        if (p->gen.on_tokens && p->gen.on_tokens(p->gen.user, r->row, r->tok + r->L, kept) != 0)
            return ha_fail(HA_ERR_CALLBACK, "generation stopped by the token callback");
        stats->num_draft_tokens += k;
        stats->num_accepted_tokens += n < kept ? n : kept;
        for (int64_t j = 0; j < k; j++) {
            if (stats->proposed_at) stats->proposed_at[j]++;
            if (stats->accepted_at && j < n) stats->accepted_at[j]++;
        }
        /* 4. Both caches keep only decided tokens; the newest token is seen on the next catch-up. */
        r->L += kept;
        r->generated += kept;
        if (r->target_len > r->L - 1) r->target_len = r->L - 1;
        if (r->draft_len > r->L - 1) r->draft_len = r->L - 1;
        if ((st = target->crop(target->self, r->row, r->target_len)) != HA_OK) return st;
        if (draft && (st = draft->crop(draft->self, r->row, r->draft_len)) != HA_OK) return st;
        /* 5. Schedule, as Transformers' AssistedCandidateGenerator.update_candidate_strategy. */
        if (adaptive && draft) *K = n == *K ? *K + 2 : (*K - 1 > 1 ? *K - 1 : 1);
        if (done) break;
    }
    return HA_OK;
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
    if ((unsigned)p->schedule > HA_SCHEDULE_HEURISTIC_TRANSIENT || (unsigned)p->acceptance > HA_ACCEPT_COUPLED)
        return ha_fail(HA_ERR_INVALID, "unknown schedule %d or acceptance %d", (int)p->schedule, (int)p->acceptance);

    ha_assist_stats stats = { 0 };
    if (stats_out) {
        stats.proposed_at = stats_out->proposed_at;
        stats.accepted_at = stats_out->accepted_at;
    }
    ha_sampler *sampler = NULL;
    if ((st = ha_sampler_create(&p->gen.sampling, V, &sampler)) != HA_OK) return st;
    const int64_t cap = prompt_width + N + 1;
    buffers b = { .seq = malloc((size_t)cap * sizeof(int32_t)), .want = malloc((size_t)cap),
                  .p = ha_malloc_array((size_t)N + 1, (size_t)V, sizeof(float)),
                  .q = ha_malloc_array((size_t)N, (size_t)V, sizeof(float)),
                  .raw = p->gen.logits_out ? ha_malloc_array((size_t)N + 1, (size_t)V, sizeof(float)) : NULL };
    int32_t *tok = malloc((size_t)cap * sizeof(int32_t));
    int64_t *generated = calloc((size_t)B, sizeof(int64_t)); /* (B,) new tokens per row */
    /* (B,) the rows' starts as checked: read once here, since a token callback of an earlier row may rewrite the
     * caller's array (a start changed to -2^31 made a later row's prompt length negative) */
    int64_t *first = malloc((size_t)B * sizeof(int64_t));
    if (!b.seq || !b.want || !b.p || !b.q || (p->gen.logits_out && !b.raw) || !tok || !generated || !first) {
        st = ha_fail(HA_ERR_NOMEM, "out of memory for assisted generation of %lld tokens over a vocabulary of %lld",
                     (long long)N, (long long)V);
        goto cleanup;
    }
    memcpy(first, start, (size_t)B * sizeof(int64_t));
    int64_t K = p->num_assistant_tokens, steps = 0;
    const double deadline = ha_deadline(&p->gen); /* max_time counts from the call, over every row */
    for (int64_t row = 0; row < B && st == HA_OK; row++) {
        /* Every row starts from the call's K and adapts it on its own; the last row's K is reported. */
        row_state r = { .row = (int32_t)row, .tok = tok, .L = prompt_width - first[row] };
        memcpy(tok, prompt + row * prompt_width + first[row], (size_t)r.L * sizeof(int32_t));
        K = p->num_assistant_tokens;
        st = run_row(target, draft, p, sampler, &r, &b, &K, out, scores, &stats, deadline);
        generated[row] = r.generated;
        if (r.generated > steps) steps = r.generated;
    }
    /* Rows that stopped early are padded up to max_new_tokens and their scores are -inf up to the longest
     * row, as in ha_generate. */
    for (int64_t row = 0; row < B && st == HA_OK; row++)
        for (int64_t j = generated[row]; j < N; j++) {
            out[row * N + j] = p->gen.pad_token_id;
            for (int64_t i = 0; j < steps && scores && i < V; i++) scores[(j * B + row) * V + i] = -INFINITY;
            for (int64_t i = 0; j < steps && p->gen.logits_out && i < V; i++) p->gen.logits_out[(j * B + row) * V + i] = -INFINITY;
        }
    *n_steps = steps;
    stats.num_assistant_tokens = K;
    if (stats_out) *stats_out = stats;

cleanup:
    ha_sampler_free(sampler);
    free(b.seq);
    free(b.want);
    free(b.p);
    free(b.q);
    free(b.raw);
    free(tok);
    free(generated);
    free(first);
    return st;
}
