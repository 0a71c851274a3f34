/* Shared by the generation loops (generate.c, the assisted loop's assist*.c) and the sampler (sampling.c): when a
 * row ends, the checks every loop makes, the deadline, and the sampling pieces of the acceptance step. */
#ifndef HA_GENERATION_H
#define HA_GENERATION_H

#include <math.h>

#include "../core/core.h"

static inline int ha_is_eos(const ha_generate_params *p, int32_t t) {
    for (int64_t i = 0; i < p->n_eos; i++)
        if (p->eos[i] == t) return 1;
    return 0;
}

/* After the row decided tokens[n - 1]: 1 if the row ends there (an eos, or the caller's stopping criteria said
 * so), 0 if it goes on, -1 with HA_ERR_CALLBACK recorded if the criteria asked to stop the whole work. scores
 * (vocab,) are the processed scores the token was chosen from. */
static inline int ha_row_ends(const ha_generate_params *p, int64_t row, const int32_t *tokens, int64_t n,
                              const float *scores, int64_t vocab) {
    const int stop = p->should_stop ? p->should_stop(p->stop_user, row, tokens, n, scores, vocab) : 0;
    if (stop != 0 && stop != 1) {
        ha_fail(HA_ERR_CALLBACK, "generation stopped by a stopping criterion in row %lld", (long long)row);
        return -1;
    }
    return stop || ha_is_eos(p, tokens[n - 1]);
}

/* Whether an append that takes a sequence of lm whose cache holds `held` positions to `to` positions must be made
 * whole, the sequence cropped to 0 and all of its tokens appended again (ha_lm.rope_switch: the append passes S from a
 * cache of <= S positions, where Transformers' Phi-3 generate() runs the whole sequence again). */
static inline int ha_whole_again(const ha_lm *lm, int64_t held, int64_t to) {
    return lm->rope_switch > 0 && held > 0 && held <= lm->rope_switch && to > lm->rope_switch;
}

/* Checks the arguments common to every generation loop; rows must have >= 1 prompt token and empty caches. */
ha_status ha_check_generate_args(const ha_lm *lm, const ha_generate_params *p, int64_t prompt_width,
                                 const int64_t *start);

/* max_time's deadline for a generation that starts now: INFINITY when max_time is off (<= 0). */
static inline double ha_deadline(const ha_generate_params *p) {
    return p->max_time > 0 ? ha_now() + p->max_time : INFINITY;
}

/* Adds the time since t0 to part `part` of p->seconds where the caller asked for it (ha_generate_params.seconds). */
static inline void ha_seconds_add(const ha_generate_params *p, int part, double t0) {
    if (p->seconds) p->seconds[part] += ha_now() - t0;
}

/* Sampling pieces for the acceptance step (sampling.c). Scores are processed scores (V,). */
/* The token chosen as ha_sampler_choose does, with noise of the given purpose. */
int32_t ha_sampler_choose_keyed(const ha_sampler *s, const float *scores, uint32_t row, uint32_t position,
                                uint32_t purpose);
/* With sampling: a draw of up to n tokens without replacement from softmax(scores) (n <= 64), in the order drawn,
 * into out; the first is ha_sampler_choose_keyed's token for the same purpose. Returns how many (fewer where fewer
 * tokens are left). */
int64_t ha_sampler_choose_top(const ha_sampler *s, const float *scores, uint32_t row, uint32_t position,
                              uint32_t purpose, int64_t n, int32_t *out);
/* softmax's normalization of scores (V,): m their max (-inf when every one is), z = sum_i exp(scores[i] - m) in
 * double, in index order. Computed once per distribution and reused (a pass of V exps). */
typedef struct ha_normalizer { double m, z; } ha_normalizer;
ha_normalizer ha_softmax_norm(const float *scores, int64_t vocab);
/* The same normalization for estimates (s's vocabulary of scores): z = sum_i ha_expf(scores[i] - m) (the kernels'
 * exp_shift, bitwise the same in every variant) added in double in eight chains; within about 1e-7 of
 * ha_softmax_norm's z (1.3e-9 on random scores), at under a third of its time (a vocabulary of 4096: 7 us against
 * 23 us of double exps, which cost a third of the shipped draft's w8a8 step again). For what only chooses how far
 * to draft (the draft's confidence under greedy and coupled acceptance: the cost schedule, the confidence
 * threshold, a greedy tree's shape), never for what decides a token (rejection sampling's acceptance and residual
 * take ha_softmax_norm). */
ha_normalizer ha_softmax_estimate(ha_sampler *s, const float *scores);
/* softmax(scores)[t], in double, from its normalization n (0 where every score is -inf). */
double ha_norm_at(const float *scores, int64_t vocab, ha_normalizer n, int32_t t);
/* A draw from max(0, softmax(p) - softmax(q)) renormalized, with HA_RNG_RESIDUAL noise; from softmax(p)
 * if that residual is zero everywhere (p == q up to rounding). np, nq: ha_softmax_norm of p and q. -1 if p is
 * empty. */
int32_t ha_sample_residual(const ha_sampler *s, const float *p, ha_normalizer np, const float *q, ha_normalizer nq,
                           uint32_t row, uint32_t position);
/* Recursive rejection sampling without replacement, after the draft's first draw x from softmax(q) was rejected by
 * min(1, P/Q) (P = softmax(p) processed, Q = softmax(q)): rest (m,) are its next draws from q without replacement, in
 * order. Each rejection sets P = max(0, P - Q) normalized and removes the rejected token from Q (renormalized); rest[i]
 * is taken with probability min(1, P/Q) there (HA_RNG_ACCEPT noise, index 1 + i). Each step is a speculative sampling
 * step of the P before it, so the token is distributed as the first step's residual, whichever the draws. Returns the
 * index in rest taken, or -1 with *next drawn from the last P (HA_RNG_RESIDUAL noise). work: (2, vocab). */
int64_t ha_reject_without_replacement(const ha_sampler *s, const float *p, ha_normalizer np, const float *q,
                                      ha_normalizer nq, int32_t x, const int32_t *rest, int64_t m, double *work,
                                      uint32_t row, uint32_t position, int32_t *next);

#endif /* HA_GENERATION_H */
