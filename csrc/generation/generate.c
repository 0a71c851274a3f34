/* Plain generation: prefill every row, then one token per unfinished row per step, all rows of a step in
 * one append (each row's weights read once per step for the whole batch). Between steps: the interrupt poll
 * and max_time. A model with a rope switch (longrope) has the step that takes a row past it run the row's whole
 * sequence again from an empty cache (ha_whole_again), as Transformers' Phi-3 generate() does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generation.h"

ha_status ha_check_generate_args(const ha_lm *lm, const ha_generate_params *p, int64_t prompt_width,
                                 const int64_t *start) {
    if (p->max_new_tokens < 1 || p->max_new_tokens > lm->capacity)
        return ha_fail(HA_ERR_INVALID, "max_new_tokens=%lld must be in 1..%lld (the cache capacity)",
                       (long long)p->max_new_tokens, (long long)lm->capacity);
    if (prompt_width < 1 || prompt_width > INT32_MAX)
        return ha_fail(HA_ERR_INVALID, "the prompt width %lld is out of range", (long long)prompt_width);
    if (p->n_eos < 0 || (p->n_eos > 0 && !p->eos)) return ha_fail(HA_ERR_INVALID, "bad eos list");
    if (!(p->max_time >= 0.0)) /* NaN too */
        return ha_fail(HA_ERR_INVALID, "max_time=%g must be >= 0 seconds (0: no limit)", p->max_time);
    for (int64_t b = 0; b < lm->n_seq; b++) {
        if (start[b] < 0 || start[b] >= prompt_width)
            return ha_fail(HA_ERR_INVALID,
                           "row %lld has no prompt tokens (start %lld of width %lld); every row needs at least one",
                           (long long)b, (long long)start[b], (long long)prompt_width);
        if (lm->length(lm->self, (int32_t)b) != 0)
            return ha_fail(HA_ERR_INVALID, "generation needs empty caches; row %lld holds %lld positions", (long long)b,
                           (long long)lm->length(lm->self, (int32_t)b));
    }
    return HA_OK;
}

ha_status ha_generate(ha_lm *lm, const ha_generate_params *p, const int32_t *prompt, int64_t prompt_width,
                      const int64_t *start, int32_t *out, float *scores, int64_t *n_steps) {
    if (!lm || !p || !prompt || !start || !out || !n_steps)
        return ha_fail(HA_ERR_INVALID, "ha_generate: NULL argument");
    const int64_t B = lm->n_seq, V = lm->vocab_size, N = p->max_new_tokens;
    *n_steps = 0;
    ha_status st = ha_check_generate_args(lm, p, prompt_width, start);
    if (st != HA_OK) return st;
    const double t_call = ha_now();
    if (p->seconds) memset(p->seconds, 0, HA_SECONDS * sizeof(double));

    ha_sampler *sampler = NULL;
    st = ha_sampler_create(&p->sampling, V, &sampler);
    if (st != HA_OK) return st;
    const int64_t hist_w = prompt_width + N;
    int64_t n_prefill = 0;
    for (int64_t b = 0; b < B; b++) n_prefill += prompt_width - start[b];
    int32_t *history = malloc((size_t)(B * hist_w) * sizeof(int32_t));   /* (B, hist_w) each row's real tokens */
    int64_t *hist_n = calloc((size_t)B, sizeof(int64_t));                 /* (B,) */
    /* the largest append: the prefill, a step, or with no_cache (or rows passing a rope switch) every row's whole
     * sequence */
    const size_t n_append = (size_t)(p->no_cache || lm->rope_switch > 0 ? B * hist_w : n_prefill > B ? n_prefill : B);
    int32_t *seq = malloc(n_append * sizeof(int32_t));
    int32_t *tok = malloc(n_append * sizeof(int32_t));
    uint8_t *want = calloc(n_append, 1);
    uint8_t *done = calloc((size_t)B, 1);
    int32_t *row_of = malloc((size_t)B * sizeof(int32_t));                /* logits row -> batch row */
    float *logits = ha_malloc_array((size_t)B, (size_t)V, sizeof(float)); /* (B, V) */
    if (!history || !hist_n || !seq || !tok || !want || !done || !row_of || !logits) {
        st = ha_fail(HA_ERR_NOMEM, "out of memory for a generation of %lld rows x %lld tokens", (long long)B,
                     (long long)hist_w);
        goto cleanup;
    }

    const double deadline = ha_deadline(p);
    /* 1. Prefill: every row's prompt in one append, logits only at each row's last token. */
    int64_t n = 0, active = B;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t j = start[b]; j < prompt_width; j++) {
            int32_t t = prompt[b * prompt_width + j];
            seq[n] = (int32_t)b;
            tok[n] = t;
            want[n] = j == prompt_width - 1;
            history[b * hist_w + hist_n[b]++] = t;
            n++;
        }
        row_of[b] = (int32_t)b;
    }
    double t0 = ha_now();
    st = lm->append(lm->self, n, seq, tok, want, logits);
    ha_seconds_add(p, HA_SECONDS_PREFILL, t0);
    for (int64_t step = 0; st == HA_OK && step < N; step++) {
        /* 2. Rows that stopped at an earlier step are padded. */
        for (int64_t b = 0; b < B; b++) {
            if (!done[b]) continue;
            out[b * N + step] = p->pad_token_id;
            if (p->sources) p->sources[b * N + step] = HA_SOURCE_NONE;
            for (int64_t i = 0; scores && i < V; i++) scores[(step * B + b) * V + i] = -INFINITY;
            for (int64_t i = 0; p->logits_out && i < V; i++) p->logits_out[(step * B + b) * V + i] = -INFINITY;
        }
        /* 3. One token for each running row; logits row r belongs to batch row row_of[r]. */
        for (int64_t r = 0; r < active; r++) {
            int32_t b = row_of[r];
            float *s = logits + r * V;
            int32_t *h = history + b * hist_w;
            if (p->logits_out) memcpy(p->logits_out + (step * B + b) * V, s, (size_t)V * sizeof(float));
            if ((st = ha_sampler_process(sampler, s, b, h, hist_n[b], step)) != HA_OK) break;
            int32_t t = ha_sampler_choose(sampler, s, (uint32_t)b, (uint32_t)hist_n[b]);
            if (t < 0) {
                st = ha_fail(HA_ERR_INVALID,
                             "row %d at step %lld: every token was removed or NaN; check the weights "
                             "and the sampling arguments",
                             b, (long long)step);
                break;
            }
            if (scores) memcpy(scores + (step * B + b) * V, s, (size_t)V * sizeof(float));
            out[b * N + step] = t;
            if (p->sources) p->sources[b * N + step] = HA_SOURCE_PLAIN;
            h[hist_n[b]++] = t;
            const int ends = ha_row_ends(p, b, h, hist_n[b], s, V);
            if (ends < 0) {
                st = HA_ERR_CALLBACK;
                break;
            }
            done[b] = (uint8_t)ends;
            if (p->on_tokens && p->on_tokens(p->user, b, &t, 1) != 0) {
                st = ha_fail(HA_ERR_CALLBACK, "generation stopped by the token callback at step %lld", (long long)step);
                break;
            }
        }
        if (st != HA_OK) break;
        *n_steps = step + 1;
        /* 4. The rows still running go on with the token just chosen, in one append; with no_cache, and where the
         * token takes the row past a rope switch, each row's whole sequence again from an empty cache (logits only at
         * its last token). */
        int64_t n_tok = 0;
        active = 0;
        for (int64_t b = 0; b < B; b++) {
            if (done[b]) continue;
            const int64_t from = p->no_cache || ha_whole_again(lm, hist_n[b] - 1, hist_n[b]) ? 0 : hist_n[b] - 1;
            for (int64_t j = from; j < hist_n[b]; j++) {
                seq[n_tok] = (int32_t)b;
                tok[n_tok] = history[b * hist_w + j];
                want[n_tok++] = j == hist_n[b] - 1;
            }
            row_of[active++] = (int32_t)b;
        }
        if (active == 0 || step + 1 == N || ha_now() >= deadline) break; /* max_time: after the step, as Transformers */
        if (ha_interrupted()) {
            st = ha_fail(HA_ERR_INTERRUPTED, "generation interrupted after step %lld", (long long)step);
            break;
        }
        for (int64_t r = 0; r < active && st == HA_OK; r++) {
            const int64_t n_b = hist_n[row_of[r]];
            if (p->no_cache || ha_whole_again(lm, n_b - 1, n_b)) st = lm->crop(lm->self, row_of[r], 0);
        }
        t0 = ha_now();
        if (st == HA_OK) st = lm->append(lm->self, n_tok, seq, tok, want, logits);
        ha_seconds_add(p, HA_SECONDS_TARGET, t0);
    }

    if (st == HA_OK) /* columns past the last step, as ha_generate_assisted leaves them */
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = *n_steps; j < N; j++) {
                out[b * N + j] = p->pad_token_id;
                if (p->sources) p->sources[b * N + j] = HA_SOURCE_NONE;
            }

cleanup:
    ha_seconds_add(p, HA_SECONDS_ALL, t_call);
    ha_sampler_free(sampler);
    free(history);
    free(hist_n);
    free(seq);
    free(tok);
    free(want);
    free(done);
    free(row_of);
    free(logits);
    return st;
}
