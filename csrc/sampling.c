/* Logits processing and token choice, with Transformers' semantics, and the position-keyed generator.
 *
 * Noise is a pure function of (seed, row, position, purpose, token), from Philox4x32-10 (Salmon et al.
 * 2011): counter = (token, position, row, purpose), key = the seed's two halves. A sampled token is
 * argmax_i(score_i + Gumbel_i), which draws exactly from softmax(scores). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void philox4x32_10(uint32_t ctr[4], uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * ctr[0], p1 = (uint64_t)0xCD9E8D57u * ctr[2];
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ ctr[1] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ ctr[3] ^ k1;
        ctr[1] = (uint32_t)p1;
        ctr[3] = (uint32_t)p0;
        ctr[0] = n0;
        ctr[2] = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

double ha_rng_uniform(uint64_t seed, uint32_t row, uint32_t position, uint32_t purpose, uint32_t index) {
    uint32_t c[4] = { index, position, row, purpose };
    philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
    uint64_t bits = ((uint64_t)c[0] << 32 | c[1]) >> 11; /* 53 bits */
    return ((double)bits + 0.5) * 0x1p-53;               /* in (0, 1), never 0 or 1 */
}

typedef struct scored { float v; int32_t i; } scored;

struct ha_sampler {
    ha_sampling_params p;
    int64_t vocab;
    scored *pairs;      /* (V,) scratch for sorting */
    uint8_t *seen;      /* (V,) repetition-penalty marks, all 0 between calls */
};

ha_status ha_sampler_create(const ha_sampling_params *p, int64_t vocab, ha_sampler **out) {
    if (!p || !out) return ha_fail(HA_ERR_INVALID, "ha_sampler_create: NULL argument");
    *out = NULL;
    if (vocab < 1 || vocab > INT32_MAX) return ha_fail(HA_ERR_INVALID, "vocab_size %lld is out of range", (long long)vocab);
    if (p->do_sample && !(p->temperature > 0.0f && isfinite(p->temperature)))
        return ha_fail(HA_ERR_INVALID, "temperature=%g must be a strictly positive float when sampling; "
                       "for greedy decoding set do_sample=False", (double)p->temperature);
    if (p->top_k < 0) return ha_fail(HA_ERR_INVALID, "top_k=%lld must be >= 0 (0 disables it)", (long long)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return ha_fail(HA_ERR_INVALID, "top_p=%g must be in (0, 1] (1 disables it)", (double)p->top_p);
    if (!(p->repetition_penalty > 0.0f && isfinite(p->repetition_penalty)))
        return ha_fail(HA_ERR_INVALID, "repetition_penalty=%g must be a strictly positive float (1 disables it)",
                       (double)p->repetition_penalty);
    ha_sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->pairs = malloc((size_t)vocab * sizeof(scored));
        s->seen = calloc((size_t)vocab, 1);
    }
    if (!s || !s->pairs || !s->seen) {
        ha_sampler_free(s);
        return ha_fail(HA_ERR_NOMEM, "out of memory creating a sampler for %lld tokens", (long long)vocab);
    }
    s->p = *p;
    s->vocab = vocab;
    *out = s;
    return HA_OK;
}

void ha_sampler_free(ha_sampler *s) {
    if (!s) return;
    free(s->pairs);
    free(s->seen);
    free(s);
}

/* Ascending by score, ties by token id, so every order below is fully determined. */
static int cmp_scored(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Transformers' TopKLogitsWarper: keep scores >= the k-th largest (ties with it are kept). */
static void top_k(ha_sampler *s, float *scores) {
    int64_t V = s->vocab, k = s->p.top_k;
    if (k <= 0 || k >= V) return;
    for (int64_t i = 0; i < V; i++) s->pairs[i] = (scored){ scores[i], (int32_t)i };
    /* Partial selection would do; a full sort of V floats is simple and off the model's hot path. */
    qsort(s->pairs, (size_t)V, sizeof(scored), cmp_scored);
    float kth = s->pairs[V - k].v;
    for (int64_t i = 0; i < V; i++)
        if (scores[i] < kth) scores[i] = -INFINITY;
}

/* Transformers' TopPLogitsWarper: sort ascending, cumulative softmax; drop tokens whose cumulative
 * probability is <= 1 - top_p; the most likely token always stays. */
static void top_p(ha_sampler *s, float *scores) {
    if (s->p.top_p >= 1.0f) return;
    int64_t V = s->vocab, n = 0;
    for (int64_t i = 0; i < V; i++)
        if (scores[i] > -INFINITY) s->pairs[n++] = (scored){ scores[i], (int32_t)i };
    if (n <= 1) return;
    qsort(s->pairs, (size_t)n, sizeof(scored), cmp_scored);
    double mx = s->pairs[n - 1].v, z = 0.0, cum = 0.0;
    for (int64_t i = 0; i < n; i++) z += exp((double)s->pairs[i].v - mx);
    double cut = 1.0 - (double)s->p.top_p;
    for (int64_t i = 0; i < n - 1; i++) {
        cum += exp((double)s->pairs[i].v - mx) / z;
        if (cum > cut) break;
        scores[s->pairs[i].i] = -INFINITY;
    }
}

void ha_sampler_process(ha_sampler *s, float *scores, const int32_t *history, int64_t n_history) {
    float rp = s->p.repetition_penalty;
    if (rp != 1.0f && history) {
        for (int64_t i = 0; i < n_history; i++) {
            int32_t t = history[i];
            if (t < 0 || t >= s->vocab || s->seen[t]) continue;
            s->seen[t] = 1;
            scores[t] = scores[t] < 0 ? scores[t] * rp : scores[t] / rp;
        }
        for (int64_t i = 0; i < n_history; i++)
            if (history[i] >= 0 && history[i] < s->vocab) s->seen[history[i]] = 0;
    }
    if (!s->p.do_sample) return;
    if (s->p.temperature != 1.0f)
        for (int64_t i = 0; i < s->vocab; i++) scores[i] /= s->p.temperature;
    top_k(s, scores);
    top_p(s, scores);
}

int32_t ha_sampler_choose_keyed(const ha_sampler *s, const float *scores, uint32_t row, uint32_t position,
                                uint32_t purpose) {
    int32_t best = -1;
    if (!s->p.do_sample) {
        float bv = -INFINITY;
        for (int64_t i = 0; i < s->vocab; i++)
            if (scores[i] > bv) {
                bv = scores[i];
                best = (int32_t)i;
            }
        return best;
    }
    double bv = -INFINITY;
    for (int64_t i = 0; i < s->vocab; i++) {
        if (!(scores[i] > -INFINITY)) continue; /* removed, or NaN */
        double u = ha_rng_uniform(s->p.seed, row, position, purpose, (uint32_t)i);
        double g = (double)scores[i] - log(-log(u));
        if (g > bv) {
            bv = g;
            best = (int32_t)i;
        }
    }
    return best;
}

int32_t ha_sampler_choose(const ha_sampler *s, const float *scores, uint32_t row, uint32_t position) {
    return ha_sampler_choose_keyed(s, scores, row, position, HA_RNG_SAMPLE);
}

/* max and sum of exp(scores - max), in double; max is -inf when every score is. */
static double softmax_norm(const float *scores, int64_t vocab, double *mx) {
    double m = -INFINITY, z = 0.0;
    for (int64_t i = 0; i < vocab; i++)
        if (scores[i] > m) m = scores[i];
    if (m > -INFINITY)
        for (int64_t i = 0; i < vocab; i++) z += exp((double)scores[i] - m);
    *mx = m;
    return z;
}

double ha_softmax_at(const float *scores, int64_t vocab, int32_t t) {
    double m, z = softmax_norm(scores, vocab, &m);
    if (!(m > -INFINITY) || t < 0 || t >= vocab) return 0.0;
    return exp((double)scores[t] - m) / z;
}

int32_t ha_sample_residual(const ha_sampler *s, const float *p, const float *q, uint32_t row, uint32_t position) {
    double mp, mq, zp = softmax_norm(p, s->vocab, &mp), zq = softmax_norm(q, s->vocab, &mq);
    if (!(mp > -INFINITY)) return -1;
    int32_t best = -1;
    double bv = -INFINITY;
    for (int64_t i = 0; i < s->vocab; i++) {
        double pi = exp((double)p[i] - mp) / zp, qi = mq > -INFINITY ? exp((double)q[i] - mq) / zq : 0.0;
        if (!(pi > qi)) continue;
        double u = ha_rng_uniform(s->p.seed, row, position, HA_RNG_RESIDUAL, (uint32_t)i);
        double g = log(pi - qi) - log(-log(u));
        if (g > bv) {
            bv = g;
            best = (int32_t)i;
        }
    }
    return best >= 0 ? best : ha_sampler_choose_keyed(s, p, row, position, HA_RNG_RESIDUAL);
}
