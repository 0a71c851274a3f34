/* Logits processing and token choice, with Transformers' semantics, and the position-keyed generator.
 *
 * Noise is a pure function of (seed, row, position, purpose, token), from Philox4x32-10 (Salmon et al.
 * 2011): counter = (token, position, row, purpose), key = the seed's two halves. A sampled token is
 * argmax_i(score_i + Gumbel_i), which draws exactly from softmax(scores). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/kernels.h"
#include "generation.h"

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

uint64_t ha_rng_bits(uint64_t seed, uint32_t row, uint32_t position, uint32_t purpose, uint32_t index) {
    uint32_t c[4] = { index, position, row, purpose };
    philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
    return ((uint64_t)c[0] << 32 | c[1]) >> 11;
}

/* The uniform in (0, 1) of 53 bits: (bits + 1/2) 2^-53, never 0; its rounding would give 1 for the largest bits
 * (where -log(-log u) would be +inf: that token would win whatever its score), so the largest is 1 - 2^-53. */
static double bits_uniform(uint64_t bits) {
    const double u = ((double)bits + 0.5) * 0x1p-53;
    return u < 1.0 ? u : 0x1.fffffffffffffp-1;
}

double ha_rng_uniform(uint64_t seed, uint32_t row, uint32_t position, uint32_t purpose, uint32_t index) {
    return bits_uniform(ha_rng_bits(seed, row, position, purpose, index));
}

#define CHOOSE_BLOCK 64 /* tokens whose random bits a choice asks the kernels for at a time */

typedef struct scored {
    float v;
    int32_t i;
} scored;
typedef struct dscored {
    double v;
    int32_t i;
} dscored;

struct ha_sampler {
    ha_sampling_params p;
    int64_t vocab;
    scored *pairs;      /* (V,) scratch for sorting */
    dscored *dpairs;    /* (V,) scratch for typical_p's sort; NULL when it is off */
    uint8_t *mark;      /* (V,) per-token marks, all 0 between calls */
    float *bias;        /* (V,) sequence bias being summed, all 0 between calls */
    int32_t *touched;   /* (V,) tokens whose mark or bias is set */
    float *work;        /* (V,) ha_softmax_estimate's exponentials */
    void *lists;        /* the sampler's own copies of p's token lists, sequences and values */
};

/* Bytes of p's arrays (token lists, sequences' tokens, offsets and values), checked first by check_params. */
static size_t lists_bytes(const ha_sampling_params *p) {
    const ha_token_seqs *q[2] = { &p->sequence_bias, &p->bad_words };
    size_t n = (size_t)(p->n_eos + p->n_forced_bos + p->n_forced_eos + p->n_suppress + p->n_begin_suppress) * 4;
    for (int i = 0; i < 2; i++)
        if (q[i]->n) n += (size_t)q[i]->offsets[q[i]->n] * 4 + (size_t)(q[i]->n + 1) * 8 + (size_t)q[i]->n * 4;
    return n;
}

/* Copies n items of size es from *src into the arena at *at and points *src there: the sampler reads only
 * its own copies, so a caller's callback that rewrites its arrays mid-generation cannot reach past V. */
static void own(const void **src, size_t n, size_t es, char **at) {
    if (!n) return;
    memcpy(*at, *src, n * es);
    *src = *at;
    *at += n * es;
}

/* A sequence list's tokens and values (its offsets are copied first, for alignment: see ha_sampler_create). */
static void own_seqs(ha_token_seqs *q, size_t n_tok, char **at) {
    if (!q->n) return;
    own((const void **)&q->tokens, n_tok, 4, at);
    if (q->values) own((const void **)&q->values, (size_t)q->n, 4, at);
}

/* Checks a token list (n,) against the vocabulary; on failure names it. */
static ha_status check_tokens(const char *what, const int32_t *t, int64_t n, int64_t vocab) {
    if (n < 0 || (n > 0 && !t)) return ha_fail(HA_ERR_INVALID, "%s: %lld tokens at NULL", what, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (t[i] < 0 || t[i] >= vocab)
            return ha_fail(HA_ERR_INVALID,
                           "%s holds token id %d, outside [0, %lld); pass ids from the model's tokenizer", what, t[i],
                           (long long)vocab);
    return HA_OK;
}

static ha_status check_seqs(const char *what, const ha_token_seqs *q, int64_t vocab) {
    if (q->n == 0) return HA_OK;
    if (q->n < 0 || !q->offsets || !q->tokens)
        return ha_fail(HA_ERR_INVALID, "%s: %lld sequences without their arrays", what, (long long)q->n);
    if (q->offsets[0] != 0) return ha_fail(HA_ERR_INVALID, "%s: offsets[0] must be 0", what);
    for (int64_t i = 0; i < q->n; i++)
        if (q->offsets[i + 1] <= q->offsets[i])
            return ha_fail(HA_ERR_INVALID, "%s: sequence %lld is empty; every sequence needs a token", what,
                           (long long)i);
    return check_tokens(what, q->tokens, q->offsets[q->n], vocab);
}

static ha_status check_params(const ha_sampling_params *p, int64_t vocab) {
    if (p->do_sample && !(p->temperature > 0.0f && isfinite(p->temperature)))
        return ha_fail(HA_ERR_INVALID,
                       "temperature=%g must be a strictly positive float when sampling; "
                       "for greedy decoding set do_sample=False",
                       (double)p->temperature);
    if (p->top_k < 0) return ha_fail(HA_ERR_INVALID, "top_k=%lld must be >= 0 (0 disables it)", (long long)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return ha_fail(HA_ERR_INVALID, "top_p=%g must be in (0, 1] (1 disables it)", (double)p->top_p);
    if (!(p->repetition_penalty > 0.0f && isfinite(p->repetition_penalty)))
        return ha_fail(HA_ERR_INVALID, "repetition_penalty=%g must be a strictly positive float (1 disables it)",
                       (double)p->repetition_penalty);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return ha_fail(HA_ERR_INVALID, "min_p=%g must be in [0, 1]", (double)p->min_p);
    if (!(p->typical_p >= 0.0f && p->typical_p <= 1.0f))
        return ha_fail(HA_ERR_INVALID, "typical_p=%g must be in (0, 1] (0 or 1: off)", (double)p->typical_p);
    if (!(p->epsilon_cutoff >= 0.0f && p->epsilon_cutoff < 1.0f))
        return ha_fail(HA_ERR_INVALID, "epsilon_cutoff=%g must be in [0, 1)", (double)p->epsilon_cutoff);
    if (!(p->eta_cutoff >= 0.0f && p->eta_cutoff < 1.0f))
        return ha_fail(HA_ERR_INVALID, "eta_cutoff=%g must be in [0, 1)", (double)p->eta_cutoff);
    if (p->no_repeat_ngram_size < 0)
        return ha_fail(HA_ERR_INVALID, "no_repeat_ngram_size=%lld must be >= 0", (long long)p->no_repeat_ngram_size);
    if (p->min_new_tokens < 0)
        return ha_fail(HA_ERR_INVALID, "min_new_tokens=%lld must be >= 0", (long long)p->min_new_tokens);
    if (!(p->decay_factor >= 0.0f && isfinite(p->decay_factor)) || p->decay_start < 0)
        return ha_fail(HA_ERR_INVALID,
                       "exponential_decay_length_penalty (%lld, %g) needs a start >= 0 and a finite factor > 0",
                       (long long)p->decay_start, (double)p->decay_factor);
    if (p->sequence_bias.n > 0 && !p->sequence_bias.values)
        return ha_fail(HA_ERR_INVALID, "sequence_bias: %lld sequences without values", (long long)p->sequence_bias.n);
    ha_status st;
    if ((st = check_seqs("sequence_bias", &p->sequence_bias, vocab)) != HA_OK) return st;
    if ((st = check_seqs("bad_words_ids", &p->bad_words, vocab)) != HA_OK) return st;
    if ((st = check_tokens("eos_token_id", p->eos, p->n_eos, vocab)) != HA_OK) return st;
    if ((st = check_tokens("forced_bos_token_id", p->forced_bos, p->n_forced_bos, vocab)) != HA_OK) return st;
    if ((st = check_tokens("forced_eos_token_id", p->forced_eos, p->n_forced_eos, vocab)) != HA_OK) return st;
    if ((st = check_tokens("suppress_tokens", p->suppress, p->n_suppress, vocab)) != HA_OK) return st;
    return check_tokens("begin_suppress_tokens", p->begin_suppress, p->n_begin_suppress, vocab);
}

ha_status ha_sampler_create(const ha_sampling_params *p, int64_t vocab, ha_sampler **out) {
    if (!p || !out) return ha_fail(HA_ERR_INVALID, "ha_sampler_create: NULL argument");
    *out = NULL;
    if (vocab < 1 || vocab > INT32_MAX)
        return ha_fail(HA_ERR_INVALID, "vocab_size %lld is out of range", (long long)vocab);
    ha_status st = check_params(p, vocab);
    if (st != HA_OK) return st;
    const int typical = p->do_sample && p->typical_p > 0.0f && p->typical_p < 1.0f;
    ha_sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->pairs = malloc((size_t)vocab * sizeof(scored));
        s->dpairs = typical ? malloc((size_t)vocab * sizeof(dscored)) : NULL;
        s->mark = calloc((size_t)vocab, 1);
        s->bias = calloc((size_t)vocab, sizeof(float));
        s->touched = malloc((size_t)vocab * sizeof(int32_t));
        s->work = malloc((size_t)vocab * sizeof(float));
        s->lists = malloc(lists_bytes(p) + 8);
    }
    if (!s || !s->pairs || (typical && !s->dpairs) || !s->mark || !s->bias || !s->touched || !s->work || !s->lists) {
        ha_sampler_free(s);
        return ha_fail(HA_ERR_NOMEM, "out of memory creating a sampler for %lld tokens", (long long)vocab);
    }
    s->p = *p;
    s->vocab = vocab;
    char *at = s->lists;
    ha_token_seqs *q[2] = { &s->p.sequence_bias, &s->p.bad_words };
    size_t n_tok[2];
    for (int i = 0; i < 2; i++) { /* the 8-byte offsets first, so the malloc'd arena keeps them aligned */
        n_tok[i] = q[i]->n ? (size_t)q[i]->offsets[q[i]->n] : 0;
        if (q[i]->n) own((const void **)&q[i]->offsets, (size_t)q[i]->n + 1, 8, &at);
    }
    for (int i = 0; i < 2; i++) own_seqs(q[i], n_tok[i], &at);
    own((const void **)&s->p.eos, (size_t)p->n_eos, 4, &at);
    own((const void **)&s->p.forced_bos, (size_t)p->n_forced_bos, 4, &at);
    own((const void **)&s->p.forced_eos, (size_t)p->n_forced_eos, 4, &at);
    own((const void **)&s->p.suppress, (size_t)p->n_suppress, 4, &at);
    own((const void **)&s->p.begin_suppress, (size_t)p->n_begin_suppress, 4, &at);
    *out = s;
    return HA_OK;
}

void ha_sampler_free(ha_sampler *s) {
    if (!s) return;
    free(s->pairs);
    free(s->dpairs);
    free(s->mark);
    free(s->bias);
    free(s->touched);
    free(s->work);
    free(s->lists);
    free(s);
}

/* Ascending by score, ties by token id, so every order below is fully determined. */
static int cmp_scored(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static int cmp_dscored(const void *a, const void *b) {
    const dscored *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* max and sum of exp(scores - max), in double; max is -inf when every score is. */
static double softmax_norm(const float *scores, int64_t vocab, double *mx) {
    const double m = ha_max_of(scores, vocab);
    double z = 0.0;
    if (m > -INFINITY)
        for (int64_t i = 0; i < vocab; i++) z += exp((double)scores[i] - m);
    *mx = m;
    return z;
}

/* Whether the row's tokens h (n,) end with seq[0, len - 1), the sequence's prefix; as Transformers'
 * SequenceBiasLogitsProcessor, a sequence longer than the row's tokens never matches. */
static int ends_with_prefix(const int32_t *h, int64_t n, const int32_t *seq, int64_t len) {
    if (len > n) return 0;
    return len == 1 || memcmp(h + n - (len - 1), seq, (size_t)(len - 1) * sizeof(int32_t)) == 0;
}

/* Transformers' SequenceBiasLogitsProcessor (values) and NoBadWordsLogitsProcessor (values NULL: -inf): one
 * bias per token summed first (one-token sequences, then longer ones in order), then added to the scores. */
static void sequence_bias(ha_sampler *s, float *scores, const ha_token_seqs *q, const int32_t *h, int64_t n) {
    int64_t n_touched = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < q->n; i++) {
            const int32_t *seq = q->tokens + q->offsets[i];
            const int64_t len = q->offsets[i + 1] - q->offsets[i];
            if ((len == 1) != (pass == 0) || !ends_with_prefix(h, n, seq, len)) continue;
            int32_t t = seq[len - 1];
            if (!s->mark[t]) {
                s->mark[t] = 1;
                s->touched[n_touched++] = t;
            }
            s->bias[t] += q->values ? q->values[i] : -INFINITY;
        }
    for (int64_t j = 0; j < n_touched; j++) {
        int32_t t = s->touched[j];
        scores[t] += s->bias[t];
        s->bias[t] = 0.0f;
        s->mark[t] = 0;
    }
}

/* Transformers' RepetitionPenaltyLogitsProcessor: each distinct earlier token's score divided by the penalty
 * where positive, multiplied where negative. */
static void repetition_penalty(ha_sampler *s, float *scores, const int32_t *h, int64_t n) {
    const float rp = s->p.repetition_penalty;
    int64_t n_touched = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t t = h[i];
        if (t < 0 || t >= s->vocab || s->mark[t]) continue;
        s->mark[t] = 1;
        s->touched[n_touched++] = t;
        scores[t] = scores[t] < 0 ? scores[t] * rp : scores[t] / rp;
    }
    for (int64_t j = 0; j < n_touched; j++) s->mark[s->touched[j]] = 0;
}

/* Transformers' NoRepeatNGramLogitsProcessor: the last size - 1 tokens looked up in the row's tokens; every
 * token that followed an earlier occurrence of them would repeat an n-gram, so it goes. */
static void no_repeat_ngram(const ha_sampler *s, float *scores, const int32_t *h, int64_t n) {
    const int64_t size = s->p.no_repeat_ngram_size;
    if (n + 1 < size) return;
    const int32_t *prefix = h + n - (size - 1);
    for (int64_t i = 0; i + size <= n; i++)
        if (memcmp(h + i, prefix, (size_t)(size - 1) * sizeof(int32_t)) == 0) {
            int32_t t = h[i + size - 1];
            if (t >= 0 && t < s->vocab) scores[t] = -INFINITY;
        }
}

static void set_tokens(float *scores, const int32_t *t, int64_t n, float v) {
    for (int64_t i = 0; i < n; i++) scores[t[i]] = v;
}

/* Transformers' ForcedBOS/ForcedEOSTokenLogitsProcessor: only the forced tokens stay, at score 0. */
static void force(float *scores, int64_t vocab, const int32_t *t, int64_t n) {
    for (int64_t i = 0; i < vocab; i++) scores[i] = -INFINITY;
    set_tokens(scores, t, n, 0.0f);
}

/* Whether score a ranks below b in top_k's order: NaN lowest (as never kept), then by value. */
static int below(float a, float b) { return isnan(a) ? !isnan(b) : a < b; }

/* Transformers' TopKLogitsWarper: scores below the k-th highest go (ties with it stay). The k-th highest is
 * found with a min-heap of the k highest seen, O(V log k): most scores fall below the heap's least at once. */
static void top_k(ha_sampler *s, float *scores) {
    int64_t V = s->vocab, k = s->p.top_k;
    if (k <= 0 || k >= V) return;
    scored *heap = s->pairs; /* heap[0 .. k).v: a min-heap in `below` order */
    for (int64_t i = 0; i < V; i++) {
        const float v = scores[i];
        int64_t at;
        if (i < k) { /* sift up */
            for (at = i; at > 0 && below(v, heap[(at - 1) / 2].v); at = (at - 1) / 2) heap[at].v = heap[(at - 1) / 2].v;
        } else if (below(heap[0].v, v)) { /* replaces the least: sift down */
            for (at = 0;;) {
                int64_t c = 2 * at + 1;
                if (c >= k) break;
                if (c + 1 < k && below(heap[c + 1].v, heap[c].v)) c++;
                if (!below(heap[c].v, v)) break;
                heap[at].v = heap[c].v;
                at = c;
            }
        } else {
            continue;
        }
        heap[at].v = v;
    }
    const float kth = heap[0].v;
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

/* Transformers' MinPLogitsWarper: p_i < min_p * max p goes, i.e. exp(s_i - max s) < min_p; the top token
 * always stays. */
static void min_p(const ha_sampler *s, float *scores) {
    double m = -INFINITY;
    for (int64_t i = 0; i < s->vocab; i++)
        if (scores[i] > m) m = scores[i];
    if (!(m > -INFINITY)) return;
    for (int64_t i = 0; i < s->vocab; i++)
        if ((double)scores[i] < m && exp((double)scores[i] - m) < (double)s->p.min_p) scores[i] = -INFINITY;
}

/* -sum p log p of softmax(scores), logz its log normalizer; removed tokens (-inf) add nothing. */
static double entropy(const float *scores, int64_t vocab, double logz) {
    double H = 0.0;
    for (int64_t i = 0; i < vocab; i++)
        if (scores[i] > -INFINITY) {
            double lp = (double)scores[i] - logz;
            H -= lp * exp(lp);
        }
    return H;
}

/* Transformers' TypicalLogitsWarper: tokens sorted by |-log p_i - H| (H the entropy); the smallest set in that
 * order whose mass reaches typical_p stays (ties with its last member too, and always the first). */
static void typical_p(ha_sampler *s, float *scores) {
    const int64_t V = s->vocab;
    double m, z = softmax_norm(scores, V, &m);
    if (!(m > -INFINITY)) return;
    const double logz = m + log(z), H = entropy(scores, V, logz);
    for (int64_t i = 0; i < V; i++) {
        double lp = (double)scores[i] - logz;
        s->dpairs[i] = (dscored){ scores[i] > -INFINITY ? fabs(-lp - H) : INFINITY, (int32_t)i };
    }
    qsort(s->dpairs, (size_t)V, sizeof(dscored), cmp_dscored);
    double cum = 0.0;
    int64_t last = 0; /* how many in sorted order have cumulative probability < typical_p */
    for (int64_t j = 0; j < V; j++) {
        cum += exp((double)scores[s->dpairs[j].i] - logz);
        if (!(cum < (double)s->p.typical_p)) break;
        last++;
    }
    if (last > V - 1) last = V - 1;
    const double cut = s->dpairs[last].v;
    for (int64_t j = 1; j < V; j++)
        if (s->dpairs[j].v > cut) scores[s->dpairs[j].i] = -INFINITY;
}

/* Transformers' EpsilonLogitsWarper (eta == 0) and EtaLogitsWarper: tokens of probability below the cutoff
 * go, apart from the top-scored ones. Eta's cutoff is min(eta, sqrt(eta) * exp(-entropy)). */
static void probability_cutoff(const ha_sampler *s, float *scores, double cutoff, int eta) {
    const int64_t V = s->vocab;
    double m, z = softmax_norm(scores, V, &m);
    if (!(m > -INFINITY)) return;
    if (eta) {
        double e = sqrt(cutoff) * exp(-entropy(scores, V, m + log(z)));
        cutoff = e < cutoff ? e : cutoff;
    }
    for (int64_t i = 0; i < V; i++)
        if ((double)scores[i] < m && exp((double)scores[i] - m) / z < cutoff) scores[i] = -INFINITY;
}

/* Transformers' LogitNormalization: log_softmax. */
static void renormalize(const ha_sampler *s, float *scores) {
    double m, z = softmax_norm(scores, s->vocab, &m);
    if (!(m > -INFINITY)) return;
    const double logz = m + log(z);
    for (int64_t i = 0; i < s->vocab; i++) scores[i] = (float)((double)scores[i] - logz);
}

ha_status ha_sampler_process(ha_sampler *s, float *scores, int64_t row, const int32_t *history, int64_t n_history,
                             int64_t step) {
    const ha_sampling_params *p = &s->p;
    const int64_t V = s->vocab;
    const int32_t *h = history ? history : (const int32_t *)"";
    const int64_t n = history ? n_history : 0;
    if (p->sequence_bias.n) sequence_bias(s, scores, &p->sequence_bias, h, n);
    if (p->repetition_penalty != 1.0f) repetition_penalty(s, scores, h, n);
    if (p->no_repeat_ngram_size > 0) no_repeat_ngram(s, scores, h, n);
    if (p->bad_words.n) {
        ha_token_seqs banned = p->bad_words;
        banned.values = NULL;
        sequence_bias(s, scores, &banned, h, n);
    }
    if (step < p->min_new_tokens) set_tokens(scores, p->eos, p->n_eos, -INFINITY);
    if (p->n_forced_bos && step == 0) force(scores, V, p->forced_bos, p->n_forced_bos);
    if (p->n_forced_eos && step == p->forced_eos_step) force(scores, V, p->forced_eos, p->n_forced_eos);
    if (p->remove_invalid_values)
        for (int64_t i = 0; i < V; i++)
            scores[i] = isnan(scores[i])         ? 0.0f
                        : scores[i] == INFINITY  ? FLT_MAX
                        : scores[i] == -INFINITY ? -FLT_MAX
                                                 : scores[i];
    if (p->decay_factor > 0.0f && step > p->decay_start) {
        const float f = (float)(pow((double)p->decay_factor, (double)(step - p->decay_start)) - 1.0);
        for (int64_t i = 0; i < p->n_eos; i++) scores[p->eos[i]] += fabsf(scores[p->eos[i]]) * f;
    }
    set_tokens(scores, p->suppress, p->n_suppress, -INFINITY);
    if (step == p->begin_suppress_step) set_tokens(scores, p->begin_suppress, p->n_begin_suppress, -INFINITY);
    if (p->on_logits && p->on_logits(p->logits_user, row, h, n, scores, V) != 0)
        return ha_fail(HA_ERR_CALLBACK, "generation stopped by a logits processor");
    if (p->do_sample) {
        if (p->temperature != 1.0f)
            for (int64_t i = 0; i < V; i++) scores[i] /= p->temperature;
        top_k(s, scores);
        top_p(s, scores);
        if (p->min_p > 0.0f) min_p(s, scores);
        if (p->typical_p > 0.0f && p->typical_p < 1.0f) typical_p(s, scores);
        if (p->epsilon_cutoff > 0.0f) probability_cutoff(s, scores, (double)p->epsilon_cutoff, 0);
        if (p->eta_cutoff > 0.0f) probability_cutoff(s, scores, (double)p->eta_cutoff, 1);
    }
    if (p->renormalize) renormalize(s, scores);
    return HA_OK;
}

/* Inserts (g, i) into the n best keys so far (key[0 .. *have), best first; ties: the lower token first). */
static void keep_best(double *key, int32_t *tok, int64_t *have, int64_t n, double g, int32_t i) {
    int64_t at = *have < n ? (*have)++ : n;
    while (at > 0 && (g > key[at - 1] || (g == key[at - 1] && i < tok[at - 1]))) {
        if (at < n) {
            key[at] = key[at - 1];
            tok[at] = tok[at - 1];
        }
        at--;
    }
    if (at < n) {
        key[at] = g;
        tok[at] = i;
    }
}

int64_t ha_sampler_choose_top(const ha_sampler *s, const float *scores, uint32_t row, uint32_t position,
                              uint32_t purpose, int64_t n, int32_t *out) {
    /* The n highest keys scores[i] - log(-log(u_i)) over the tokens not removed (nor NaN), best first, the lower
     * token first on ties: by the Gumbel-max trick, the first is a draw from softmax(scores), and each next one a
     * draw from what is left with the ones before removed (a sample without replacement). The keys are computed
     * (two logs each) only for tokens that can still enter the n best. With the uniform's bits r and
     * c = 2^53 - r >= 1, u as computed (bits_uniform) has 1 - u >= c 2^-54, so -log(-log u) <= -log(1 - u) <=
     * (54 - floor(log2 c)) ln 2 (as -log u >= 1 - u), and at most 54 ln 2 for any noise. So a token whose score
     * plus that bound (and a margin far above the logs' rounding) is below the n-th best key so far cannot enter,
     * and its key is never needed: the result is the full pass's, bit for bit. The highest score goes first, so
     * that the bar is high from the start. The bits come from the kernels' rng_bits for a block of CHOOSE_BLOCK
     * tokens at a time where one of them passes the first bound (without a top-k most of the vocabulary may pass
     * it, and the kernels' blocks of bits cost far less than the scalar generator token by token). */
    enum { TOP_MAX = 64 };
    if (n > TOP_MAX) n = TOP_MAX;
    const uint64_t seed = s->p.seed;
    float top = -INFINITY;
    int32_t first = -1;
    for (int64_t i = 0; i < s->vocab; i++)
        if (scores[i] > top) {
            top = scores[i];
            first = (int32_t)i;
        }
    if (first < 0 || n < 1) return 0;
    double key[TOP_MAX];
    int64_t have = 0;
    keep_best(key, out, &have, n,
              (double)top - log(-log(ha_rng_uniform(seed, row, position, purpose, (uint32_t)first))), first);
    const double margin = 1e-6, ln2 = 0.69314718055994530942;
    const ha_kernels *k = ha_kernels_get();
    uint64_t bits[CHOOSE_BLOCK];
    for (int64_t i0 = 0; i0 < s->vocab; i0 += CHOOSE_BLOCK) {
        const int64_t m = s->vocab - i0 < CHOOSE_BLOCK ? s->vocab - i0 : CHOOSE_BLOCK;
        const double bar = have < n ? -INFINITY : key[n - 1];
        int64_t j = 0;
        while (j < m && !((double)scores[i0 + j] + 54.0 * ln2 + margin >= bar)) j++; /* removed, NaN, hopeless */
        if (j == m) continue;
        k->rng_bits(seed, row, position, purpose, (uint32_t)(i0 + j), m - j, bits + j);
        for (; j < m; j++) {
            const int64_t i = i0 + j;
            const double v = (double)scores[i], bv = have < n ? -INFINITY : key[n - 1];
            if (!(v > -INFINITY) || i == first || v + 54.0 * ln2 + margin < bv) continue;
            const uint64_t r = bits[j], c = (UINT64_C(1) << 53) - r; /* floor(log2 c) = 63 - clz(c), c >= 1 */
            if (v + (double)(54 - (63 - __builtin_clzll(c))) * ln2 + margin < bv) continue;
            keep_best(key, out, &have, n, v - log(-log(bits_uniform(r))), (int32_t)i);
        }
    }
    return have;
}

int32_t ha_sampler_choose_keyed(const ha_sampler *s, const float *scores, uint32_t row, uint32_t position,
                                uint32_t purpose) {
    int32_t best = -1;
    if (!s->p.do_sample) { /* the first index of the largest score, -1 where every score is -inf or NaN */
        const float m = ha_max_of(scores, s->vocab);
        if (!(m > -INFINITY)) return -1;
        for (int64_t i = 0; i < s->vocab; i++)
            if (scores[i] == m) return (int32_t)i;
        return -1;
    }
    return ha_sampler_choose_top(s, scores, row, position, purpose, 1, &best) ? best : -1;
}

int32_t ha_sampler_choose(const ha_sampler *s, const float *scores, uint32_t row, uint32_t position) {
    return ha_sampler_choose_keyed(s, scores, row, position, HA_RNG_SAMPLE);
}

ha_normalizer ha_softmax_norm(const float *scores, int64_t vocab) {
    ha_normalizer n;
    n.z = softmax_norm(scores, vocab, &n.m);
    return n;
}

ha_normalizer ha_softmax_estimate(ha_sampler *s, const float *scores) {
    const int64_t V = s->vocab;
    const float m = ha_max_of(scores, V);
    ha_normalizer n = { m, 0.0 };
    if (!(m > -INFINITY)) return n;
    memcpy(s->work, scores, (size_t)V * sizeof(float));
    ha_kernels_get()->exp_shift(s->work, V, m);
    double part[8] = { 0.0 }; /* eight chains: one would wait on each add's latency */
    int64_t i = 0;
    for (; i + 8 <= V; i += 8)
        for (int j = 0; j < 8; j++) part[j] += (double)s->work[i + j];
    for (; i < V; i++) part[0] += (double)s->work[i];
    n.z = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    return n;
}

double ha_norm_at(const float *scores, int64_t vocab, ha_normalizer n, int32_t t) {
    if (!(n.m > -INFINITY) || t < 0 || t >= vocab) return 0.0;
    return exp((double)scores[t] - n.m) / n.z;
}

int32_t ha_sample_residual(const ha_sampler *s, const float *p, ha_normalizer np, const float *q, ha_normalizer nq,
                           uint32_t row, uint32_t position) {
    const double mp = np.m, zp = np.z, mq = nq.m, zq = nq.z;
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

int64_t ha_reject_without_replacement(const ha_sampler *s, const float *p, ha_normalizer np, const float *q,
                                      ha_normalizer nq, int32_t x, const int32_t *rest, int64_t m, double *work,
                                      uint32_t row, uint32_t position, int32_t *next) {
    const int64_t V = s->vocab;
    double *P = work, *Q = work + V;
    for (int64_t t = 0; t < V; t++) {
        P[t] = ha_norm_at(p, V, np, (int32_t)t);
        Q[t] = ha_norm_at(q, V, nq, (int32_t)t);
    }
    for (int64_t i = 0;; i++) { /* x rejected: P becomes its residual, Q loses x */
        double z = 0.0, zq = 0.0;
        for (int64_t t = 0; t < V; t++) z += P[t] > Q[t] ? P[t] - Q[t] : 0.0;
        if (z > 0.0) /* else P == Q up to rounding (x rejected by a rounding): P stays */
            for (int64_t t = 0; t < V; t++) P[t] = P[t] > Q[t] ? (P[t] - Q[t]) / z : 0.0;
        if (x >= 0 && x < V) Q[x] = 0.0;
        for (int64_t t = 0; t < V; t++) zq += Q[t];
        if (i == m || !(zq > 0.0)) break;
        x = rest[i];
        const double u = ha_rng_uniform(s->p.seed, row, position, HA_RNG_ACCEPT, (uint32_t)(1 + i));
        if (x >= 0 && x < V && Q[x] > 0.0 && u * (Q[x] / zq) <= P[x]) return i;
        for (int64_t t = 0; t < V; t++) Q[t] /= zq;
    }
    int32_t best = -1; /* a draw from P: the Gumbel-max trick with HA_RNG_RESIDUAL noise */
    double bv = -INFINITY;
    for (int64_t t = 0; t < V; t++) {
        if (!(P[t] > 0.0)) continue;
        const double g = log(P[t]) - log(-log(ha_rng_uniform(s->p.seed, row, position, HA_RNG_RESIDUAL, (uint32_t)t)));
        if (g > bv) {
            bv = g;
            best = (int32_t)t;
        }
    }
    *next = best;
    return -1;
}
