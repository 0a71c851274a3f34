#include "test_core.h"

#include "../../csrc/generation/generation.h"

/* ---- 6. sampler ------------------------------------------------------------------------------------ */

static ha_sampling_params greedy_params(void) {
    return (ha_sampling_params){
        .do_sample = 0, .temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .repetition_penalty = 1.0f, .seed = 0
    };
}

static ha_sampling_params sample_params(float temperature, int64_t top_k, float top_p) {
    return (ha_sampling_params){ .do_sample = 1,
                                 .temperature = temperature,
                                 .top_k = top_k,
                                 .top_p = top_p,
                                 .repetition_penalty = 1.0f,
                                 .seed = 42 };
}

static ha_sampler *sampler_new(ha_sampling_params p, int64_t V) {
    ha_sampler *s = NULL;
    CHECK_OK(ha_sampler_create(&p, V, &s));
    return s;
}

void test_rng_uniform_properties(void) {
    const uint64_t seed = 0x0123456789abcdefull;
    double u0 = ha_rng_uniform(seed, 1, 2, HA_RNG_SAMPLE, 3);
    CHECK(u0 == ha_rng_uniform(seed, 1, 2, HA_RNG_SAMPLE, 3), "the same key expected the same number");
    const double variants[] = {
        ha_rng_uniform(seed ^ 1, 1, 2, HA_RNG_SAMPLE, 3),            /* low half of the seed */
        ha_rng_uniform(seed ^ (1ull << 40), 1, 2, HA_RNG_SAMPLE, 3), /* high half */
        ha_rng_uniform(seed, 0, 2, HA_RNG_SAMPLE, 3),
        ha_rng_uniform(seed, 1, 3, HA_RNG_SAMPLE, 3),
        ha_rng_uniform(seed, 1, 2, HA_RNG_ACCEPT, 3),
        ha_rng_uniform(seed, 1, 2, HA_RNG_SAMPLE, 4),
    };
    const char *what[] = { "seed low bits", "seed high bits", "row", "position", "purpose", "index" };
    for (size_t i = 0; i < COUNT(variants); i++)
        CHECK(variants[i] != u0, "changing the %s expected a different number, got the same %.17g", what[i], u0);
    /* 100k draws along the index: in (0, 1), mean 1/2, variance 1/12, lag-1 correlation 0 (4 sigma) */
    const int N = 100000;
    double sum = 0.0, sum2 = 0.0, lag = 0.0, prev = 0.5;
    int bins[10] = { 0 };
    for (int i = 0; i < N; i++) {
        double u = ha_rng_uniform(7, 0, 0, HA_RNG_SAMPLE, (uint32_t)i);
        CHECK(u > 0.0 && u < 1.0, "draw %d expected in (0, 1), got %.17g", i, u);
        sum += u;
        sum2 += (u - 0.5) * (u - 0.5);
        lag += (u - 0.5) * (prev - 0.5);
        prev = u;
        bins[(int)(u * 10)]++;
    }
    double mean = sum / N, var = sum2 / N - (mean - 0.5) * (mean - 0.5);
    CHECK(fabs(mean - 0.5) < 4 * sqrt(1.0 / 12 / N), "mean of %d uniforms expected 0.5 +- %.4f, got %.5f", N,
          4 * sqrt(1.0 / 12 / N), mean);
    double var_sd = sqrt((1.0 / 80 - 1.0 / 144) / N);
    CHECK(fabs(var - 1.0 / 12) < 4 * var_sd, "variance expected %.5f +- %.5f, got %.5f", 1.0 / 12, 4 * var_sd, var);
    CHECK(fabs(lag / N) < 4 * (1.0 / 12) / sqrt(N), "lag-1 covariance expected 0 +- %.5f, got %.5f",
          4 * (1.0 / 12) / sqrt(N), lag / N);
    double chi2 = 0.0;
    for (int b = 0; b < 10; b++) chi2 += (bins[b] - N / 10.0) * (bins[b] - N / 10.0) / (N / 10.0);
    CHECK(chi2 < 33.7, "chi-square of 10 bins (9 dof) expected < 33.7 (p = 1e-4), got %.2f", chi2);
    /* the extremes map inside (0, 1) */
    CHECK(ha_rng_uniform(0, 0, 0, 0, 0) > 0.0 &&
              ha_rng_uniform(UINT64_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX) < 1.0,
          "draws at extreme keys expected in (0, 1)");
}

/* The generator is Philox4x32-10 (Random123's known-answer vectors: counter and key all zeros, all ones, and
 * pi's digits), and every variant's rng_bits gives its bits for blocks of any length, at any index (wrapping
 * past 2^32 - 1 as the scalar generator's uint32 index does). */
void test_rng_bits_philox_and_variants_bitwise(void) {
    static const struct {
        uint64_t seed;
        uint32_t row, position, purpose, index;
        uint64_t first64;
    } KAT[] = {
        { 0, 0, 0, 0, 0, 0x6627e8d5e169c58dull },
        { UINT64_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, 0x408f276d41c83b0eull },
        { 0x299f31d0a4093822ull, 0x13198a2eu, 0x85a308d3u, 0x03707344u, 0x243f6a88u, 0xd16cfe0994fdccebull },
    };
    for (size_t i = 0; i < COUNT(KAT); i++) {
        const uint64_t got = ha_rng_bits(KAT[i].seed, KAT[i].row, KAT[i].position, KAT[i].purpose, KAT[i].index);
        CHECK(got == KAT[i].first64 >> 11, "known-answer vector %zu: expected %013llx, got %013llx", i,
              (unsigned long long)(KAT[i].first64 >> 11), (unsigned long long)got);
    }
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    const int nk = kernel_variants(ks, kn);
    static const uint32_t STARTS[] = { 0, 1, 7, 4093, UINT32_MAX - 10, UINT32_MAX };
    uint64_t got[48];
    for (int v = 0; v < nk; v++)
        for (size_t si = 0; si < COUNT(STARTS); si++)
            for (int64_t n = 0; n <= 40; n++) {
                const uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(n + 1) ^ si;
                const uint32_t row = (uint32_t)n, position = (uint32_t)(1000 + si), purpose = (uint32_t)(n % 4);
                for (int j = 0; j < 48; j++) got[j] = UINT64_MAX; /* past n: must stay untouched */
                ks[v]->rng_bits(seed, row, position, purpose, STARTS[si], n, got);
                for (int64_t j = 0; j < 48; j++) {
                    const uint64_t want = j < n ? ha_rng_bits(seed, row, position, purpose, STARTS[si] + (uint32_t)j)
                                                : UINT64_MAX;
                    CHECK(got[j] == want, "%s rng_bits(index0 %u, n %lld): element %lld expected %013llx, got %013llx",
                          kn[v], STARTS[si], (long long)n, (long long)j, (unsigned long long)want,
                          (unsigned long long)got[j]);
                }
            }
}

void test_sampler_greedy_first_argmax(void) {
    ha_sampler *s = sampler_new(greedy_params(), 6);
    const float a[6] = { 1.0f, 3.0f, -2.0f, 3.0f, 2.0f, 3.0f };
    int32_t c = ha_sampler_choose(s, a, 0, 0);
    CHECK(c == 1, "greedy over {1, 3, -2, 3, 2, 3} expected the first argmax 1, got %d", c);
    const float b[6] = { NAN, -INFINITY, -5.0f, NAN, -5.0f, -7.0f };
    c = ha_sampler_choose(s, b, 0, 0);
    CHECK(c == 2, "greedy over {nan, -inf, -5, nan, -5, -7} expected 2, got %d", c);
    const float only_last[6] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -1e30f };
    c = ha_sampler_choose(s, only_last, 0, 0);
    CHECK(c == 5, "greedy expected the only finite score, index 5, got %d", c);
    /* greedy processing ignores temperature, top_k and top_p */
    ha_sampling_params p = greedy_params();
    p.temperature = 0.5f;
    p.top_k = 1;
    p.top_p = 0.1f;
    ha_sampler *g = sampler_new(p, 6);
    float x[6];
    memcpy(x, a, sizeof x);
    CHECK_OK(ha_sampler_process(g, x, 0, NULL, 0, 0));
    CHECK_SAME_FLOATS(a, x, 6, "greedy processing with temperature, top_k and top_p set");
    ha_sampler_free(g);
    ha_sampler_free(s);
}

/* The first index of the largest score that is not NaN, -1 for none: the greedy choice as one running maximum
 * gives it (the sampler keeps several side by side), over vocabularies whose length is and is not a multiple of
 * their count, with ties in different lanes, zeros of both signs, infinities and NaNs. */
void test_sampler_greedy_matches_one_running_maximum(void) {
    static float x[4099];
    const int64_t sizes[] = { 1, 7, 8, 9, 15, 16, 17, 40, 4096, 4099 };
    const float pool[] = { -INFINITY, INFINITY, NAN, 0.0f, -0.0f, 1.0f, -1.0f, 2.5f, 2.5f, -3.0f, 1e30f, -1e30f };
    uint64_t state = 0x9E3779B97F4A7C15u;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const int64_t n = sizes[si];
        ha_sampler *s = sampler_new(greedy_params(), n);
        for (int trial = 0; trial < 200; trial++) {
            for (int64_t i = 0; i < n; i++) {
                state = state * 6364136223846793005u + 1442695040888963407u;
                const uint64_t r = state >> 33;
                /* mostly a few values (ties, signs of zero, infinities, NaN), sometimes only -inf and NaN */
                x[i] = trial % 17 == 0 ? (r % 2 ? NAN : -INFINITY)
                       : r % 4 == 0    ? (float)(r % 1000) / 7.0f
                                       : pool[r % (sizeof pool / sizeof *pool)];
            }
            int32_t want = -1;
            float best = -INFINITY;
            for (int64_t i = 0; i < n; i++)
                if (x[i] > best) {
                    best = x[i];
                    want = (int32_t)i;
                }
            const int32_t got = ha_sampler_choose(s, x, 0, 0);
            CHECK(got == want, "vocab %lld, trial %d: greedy chose %d, one running maximum %d", (long long)n, trial,
                  got, want);
        }
        ha_sampler_free(s);
    }
}

static void check_kept(const char *what, const float *orig, const float *got, const int *keep, int n) {
    for (int i = 0; i < n; i++) {
        if (keep[i])
            CHECK(fbits(got[i]) == fbits(orig[i]), "%s: token %d expected kept with score %g, got %g", what, i,
                  (double)orig[i], (double)got[i]);
        else
            CHECK(got[i] == -INFINITY, "%s: token %d (score %g) expected removed (-inf), got %g", what, i,
                  (double)orig[i], (double)got[i]);
    }
}

void test_sampler_top_k_keeps_ties(void) {
    const float in[7] = { 1.0f, 5.0f, 3.0f, 5.0f, 2.0f, 3.0f, 0.0f };
    struct {
        int64_t k;
        int keep[7];
    } cases[] = {
        { 1, { 0, 1, 0, 1, 0, 0, 0 } }, /* the top score is tied: both stay */
        { 2, { 0, 1, 0, 1, 0, 0, 0 } }, { 3, { 0, 1, 1, 1, 0, 1, 0 } }, /* the 3rd largest is 3, tied: 4 stay */
        { 5, { 0, 1, 1, 1, 1, 1, 0 } }, { 6, { 1, 1, 1, 1, 1, 1, 0 } },
        { 7, { 1, 1, 1, 1, 1, 1, 1 } }, { 100, { 1, 1, 1, 1, 1, 1, 1 } },
    };
    char what[64];
    for (size_t c = 0; c < COUNT(cases); c++) {
        ha_sampler *s = sampler_new(sample_params(1.0f, cases[c].k, 1.0f), 7);
        float x[7];
        memcpy(x, in, sizeof x);
        CHECK_OK(ha_sampler_process(s, x, 0, NULL, 0, 0));
        snprintf(what, sizeof what, "top_k=%lld", (long long)cases[c].k);
        check_kept(what, in, x, cases[c].keep, 7);
        ha_sampler_free(s);
    }
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The sampler's shortcuts against the full passes they replace, on random scores (spreads from 0.01 to 200,
 * ties, removed and NaN entries): top_k's heap selection keeps what a sort's k-th largest keeps, and the Gumbel
 * choice that skips the keys of hopeless tokens returns the argmax of every key (first index on ties). */
void test_sampler_shortcuts_equal_full_passes(void) {
    rng r = { 7 };
    enum { VMAX = 300 };
    float x[VMAX], y[VMAX], sorted[VMAX];
    for (int trial = 0; trial < 3000; trial++) {
        const int64_t V = 1 + (int64_t)(rng_next(&r) % VMAX), k = 1 + (int64_t)(rng_next(&r) % (uint64_t)V);
        const double scale = pow(10.0, rng_uniform(&r, -2.0, 2.3));
        const int levels = (int)(rng_next(&r) % 4); /* 0: continuous; else few distinct values (ties) */
        for (int64_t i = 0; i < V; i++) {
            double v = rng_uniform(&r, -scale, scale);
            if (levels) v = floor(v * levels / scale);
            const uint64_t odd = rng_next(&r) % 50;
            x[i] = odd == 0 ? -INFINITY : odd == 1 && trial % 3 == 0 ? NAN : (float)v;
        }
        /* top_k, on NaN-free scores (a sort has no order for NaN) */
        int64_t n = 0;
        for (int64_t i = 0; i < V; i++) {
            y[i] = isnan(x[i]) ? -INFINITY : x[i];
            sorted[n++] = y[i];
        }
        qsort(sorted, (size_t)n, sizeof(float), cmp_float);
        const float kth = sorted[V - k];
        ha_sampler *s = sampler_new(sample_params(1.0f, k, 1.0f), V);
        CHECK_OK(ha_sampler_process(s, y, 0, NULL, 0, 0));
        for (int64_t i = 0; i < V; i++) {
            const float want = (isnan(x[i]) ? -INFINITY : x[i]) < kth ? -INFINITY : (isnan(x[i]) ? -INFINITY : x[i]);
            CHECK(y[i] == want || (isinf(want) && isinf(y[i])),
                  "trial %d, V=%lld, top_k=%lld: token %lld kept %g, "
                  "expected %g",
                  trial, (long long)V, (long long)k, (long long)i, (double)y[i], (double)want);
        }
        ha_sampler_free(s);
        /* Gumbel-max */
        ha_sampling_params sp = sample_params(1.0f, 0, 1.0f);
        sp.seed = rng_next(&r);
        s = sampler_new(sp, V);
        const uint32_t row = (uint32_t)(trial % 5), position = (uint32_t)trial;
        int32_t best = -1;
        double bv = -INFINITY;
        for (int64_t i = 0; i < V; i++) {
            if (!(x[i] > -INFINITY)) continue;
            const double g = (double)x[i] -
                             log(-log(ha_rng_uniform(sp.seed, row, position, HA_RNG_SAMPLE, (uint32_t)i)));
            if (g > bv) {
                bv = g;
                best = (int32_t)i;
            }
        }
        const int32_t got = ha_sampler_choose(s, x, row, position);
        CHECK(got == best, "trial %d, V=%lld, scale %g: chose %d, the full pass %d", trial, (long long)V, scale, got,
              best);
        enum { DRAW_PURPOSE = 21 }; /* a purpose of the caller's (the dynamic tree: 16 + node) */
        /* the n best keys (a draw without replacement): the full pass's, best first, the lower token on ties */
        const int64_t n_top = 1 + trial % 6;
        int32_t top[8], want[8];
        int64_t n_want = 0;
        for (; n_want < n_top; n_want++) {
            int32_t w = -1;
            double wv = -INFINITY;
            for (int64_t i = 0; i < V; i++) {
                int taken = !(x[i] > -INFINITY);
                for (int64_t j = 0; j < n_want && !taken; j++) taken = want[j] == i;
                if (taken) continue;
                const double g = (double)x[i] -
                                 log(-log(ha_rng_uniform(sp.seed, row, position, DRAW_PURPOSE, (uint32_t)i)));
                if (w < 0 || g > wv) {
                    wv = g;
                    w = (int32_t)i;
                }
            }
            if (w < 0) break;
            want[n_want] = w;
        }
        const int64_t n_got = ha_sampler_choose_top(s, x, row, position, DRAW_PURPOSE, n_top, top);
        CHECK(n_got == n_want, "trial %d, V=%lld: %lld of the %lld best keys, the full pass has %lld", trial,
              (long long)V, (long long)n_got, (long long)n_top, (long long)n_want);
        for (int64_t j = 0; j < n_got && j < n_want; j++)
            CHECK(top[j] == want[j], "trial %d, V=%lld, scale %g: key %lld of the best chose %d, the full pass %d",
                  trial, (long long)V, scale, (long long)j, top[j], want[j]);
        CHECK(n_got == 0 || top[0] == ha_sampler_choose_keyed(s, x, row, position, DRAW_PURPOSE),
              "trial %d: the first of the best keys is not choose_keyed's token", trial);
        ha_sampler_free(s);
    }
}

/* Transformers' TopPLogitsWarper: sort ascending, cumulative softmax, remove where cum <= 1 - top_p,
 * the most likely token always kept. Probabilities 0.15 0.5 0.05 0.3 (ascending: 0.05, 0.15, 0.3, 0.5;
 * cumulative 0.05, 0.2, 0.5, 1.0). Thresholds are chosen away from the cumulative values. */
void test_sampler_top_p_transformers_semantics(void) {
    const float in[4] = { logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f) };
    struct {
        float top_p;
        int keep[4];
    } cases[] = {
        { 0.99f, { 1, 1, 1, 1 } }, /* 1 - p = 0.01 < 0.05: nothing removed */
        { 0.9f, { 1, 1, 0, 1 } }, /* 0.1: the 0.05 goes */
        { 0.75f, { 0, 1, 0, 1 } }, /* 0.25: 0.05 and 0.15 go (cum 0.2) */
        { 0.4f, { 0, 1, 0, 0 } }, /* 0.6: cum 0.5 <= 0.6, only the top stays */
        { 0.01f, { 0, 1, 0, 0 } }, /* the most likely token always stays */
        { 1.0f, { 1, 1, 1, 1 } },
    };
    char what[64];
    for (size_t c = 0; c < COUNT(cases); c++) {
        ha_sampler *s = sampler_new(sample_params(1.0f, 0, cases[c].top_p), 4);
        float x[4];
        memcpy(x, in, sizeof x);
        CHECK_OK(ha_sampler_process(s, x, 0, NULL, 0, 0));
        snprintf(what, sizeof what, "top_p=%g", (double)cases[c].top_p);
        check_kept(what, in, x, cases[c].keep, 4);
        ha_sampler_free(s);
    }
    /* top_k, then top_p over the renormalized rest: probs 0.4 0.3 0.2 0.1, top_k 3 -> 4/9 3/9 2/9;
     * top_p 0.75 (1 - p = 0.25) removes 2/9 = 0.222 but, without top_k first, would keep the 0.2. */
    const float q[4] = { logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f) };
    const int keep_kp[4] = { 1, 1, 0, 0 }, keep_p[4] = { 1, 1, 1, 0 };
    ha_sampler *kp = sampler_new(sample_params(1.0f, 3, 0.75f), 4), *p = sampler_new(sample_params(1.0f, 0, 0.75f), 4);
    float x[4];
    memcpy(x, q, sizeof x);
    CHECK_OK(ha_sampler_process(kp, x, 0, NULL, 0, 0));
    check_kept("top_k=3 then top_p=0.75", q, x, keep_kp, 4);
    memcpy(x, q, sizeof x);
    CHECK_OK(ha_sampler_process(p, x, 0, NULL, 0, 0));
    check_kept("top_p=0.75 alone", q, x, keep_p, 4);
    ha_sampler_free(kp);
    ha_sampler_free(p);
    /* already removed tokens are not counted in top_p */
    float y[5] = { -INFINITY, logf(0.5f), logf(0.5f), -INFINITY, logf(1e-3f) };
    const float y0[5] = { -INFINITY, logf(0.5f), logf(0.5f), -INFINITY, logf(1e-3f) };
    const int keep_y[5] = { 0, 1, 1, 0, 0 };
    ha_sampler *s = sampler_new(sample_params(1.0f, 0, 0.9f), 5);
    CHECK_OK(ha_sampler_process(s, y, 0, NULL, 0, 0));
    check_kept("top_p=0.9 with -inf scores", y0, y, keep_y, 5);
    ha_sampler_free(s);
}

void test_sampler_repetition_penalty_and_temperature(void) {
    ha_sampling_params p = greedy_params();
    p.repetition_penalty = 2.0f;
    ha_sampler *s = sampler_new(p, 6);
    float x[6] = { -1.0f, 2.0f, 0.5f, -3.0f, 4.0f, 0.0f };
    const int32_t hist[8] = { 1, 3, 1, 1, 3, -1, 6, 5 }; /* repeats; ids out of range are ignored */
    CHECK_OK(ha_sampler_process(s, x, 0, hist, 8, 0));
    const float want[6] = { -1.0f, 1.0f, 0.5f, -6.0f, 4.0f, 0.0f };
    CHECK_SAME_FLOATS(want, x, 6, "repetition_penalty 2 over history {1, 3, 1, 1, 3, -1, 6, 5}");
    /* nothing is remembered between calls */
    float y[6] = { -1.0f, 2.0f, 0.5f, -3.0f, 4.0f, 0.0f }, y0[6];
    memcpy(y0, y, sizeof y);
    CHECK_OK(ha_sampler_process(s, y, 0, NULL, 0, 0));
    CHECK_SAME_FLOATS(y0, y, 6, "processing with an empty history after a penalized call");
    const int32_t h2[1] = { 4 };
    CHECK_OK(ha_sampler_process(s, y, 0, h2, 1, 0));
    CHECK(y[1] == 2.0f && y[4] == 2.0f,
          "second history {4}: expected token 1 unpenalized (2) and token 4 halved (2), got %g, %g", (double)y[1],
          (double)y[4]);
    ha_sampler_free(s);

    /* penalty, then temperature; each score divided by the temperature in float */
    ha_sampling_params q = sample_params(0.7f, 0, 1.0f);
    q.repetition_penalty = 1.5f;
    ha_sampler *t = sampler_new(q, 6);
    float z[6] = { -1.0f, 2.0f, 0.5f, -3.0f, 4.0f, 0.0f };
    const int32_t h3[2] = { 0, 4 };
    CHECK_OK(ha_sampler_process(t, z, 0, h3, 2, 0));
    const float wz[6] = { (-1.0f * 1.5f) / 0.7f, 2.0f / 0.7f,          0.5f / 0.7f,
                          -3.0f / 0.7f,          (4.0f / 1.5f) / 0.7f, 0.0f / 0.7f };
    CHECK_SAME_FLOATS(wz, z, 6, "repetition_penalty 1.5 then temperature 0.7");
    ha_sampler_free(t);
}

void test_sampler_frequencies_match_softmax(void) {
    enum { V = 6, N = 20000 };
    const float logits[V] = { 0.5f, -1.0f, 1.2f, 0.0f, -0.3f, -INFINITY };
    for (int temp_case = 0; temp_case < 2; temp_case++) {
        float temperature = temp_case ? 0.6f : 1.0f;
        ha_sampler *s = sampler_new(sample_params(temperature, 0, 1.0f), V);
        float x[V];
        memcpy(x, logits, sizeof x);
        CHECK_OK(ha_sampler_process(s, x, 0, NULL, 0, 0));
        double p[V], z = 0.0;
        for (int i = 0; i < V; i++) z += p[i] = exp((double)logits[i] / temperature);
        int count[V] = { 0 };
        for (int pos = 0; pos < N; pos++) {
            int32_t c = ha_sampler_choose(s, x, 3, (uint32_t)pos);
            CHECK(c >= 0 && c < V - 1, "temperature %g: expected a token in 0..%d (the -inf one never), got %d",
                  (double)temperature, V - 2, c);
            count[c]++;
            CHECK(c == ha_sampler_choose(s, x, 3, (uint32_t)pos), "choose expected deterministic at position %d", pos);
        }
        for (int i = 0; i < V - 1; i++) {
            double pi = p[i] / z, sd = sqrt(N * pi * (1 - pi));
            CHECK(fabs(count[i] - N * pi) <= 4 * sd,
                  "temperature %g: token %d expected %.0f +- %.0f draws of %d, got %d", (double)temperature, i, N * pi,
                  4 * sd, N, count[i]);
        }
        ha_sampler_free(s);
    }
    /* the row is part of the key: two rows at the same positions do not draw the same tokens */
    ha_sampler *s = sampler_new(sample_params(1.0f, 0, 1.0f), V);
    int same = 0;
    for (int pos = 0; pos < 200; pos++)
        same += ha_sampler_choose(s, logits, 0, (uint32_t)pos) == ha_sampler_choose(s, logits, 1, (uint32_t)pos);
    CHECK(same < 150, "rows 0 and 1 expected independent draws (about 50 of 200 equal), got %d equal", same);
    ha_sampler_free(s);
}

void test_sampler_all_removed_returns_minus_one(void) {
    const float none[4] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY }, nans[4] = { NAN, NAN, -INFINITY, NAN };
    ha_sampler *g = sampler_new(greedy_params(), 4), *s = sampler_new(sample_params(1.0f, 2, 0.9f), 4);
    CHECK(ha_sampler_choose(g, none, 0, 0) == -1, "greedy over all -inf expected -1, got %d",
          ha_sampler_choose(g, none, 0, 0));
    CHECK(ha_sampler_choose(g, nans, 0, 0) == -1, "greedy over NaN/-inf expected -1, got %d",
          ha_sampler_choose(g, nans, 0, 0));
    CHECK(ha_sampler_choose(s, none, 0, 0) == -1, "sampling over all -inf expected -1, got %d",
          ha_sampler_choose(s, none, 0, 0));
    CHECK(ha_sampler_choose(s, nans, 0, 0) == -1, "sampling over NaN/-inf expected -1, got %d",
          ha_sampler_choose(s, nans, 0, 0));
    float x[4];
    memcpy(x, none, sizeof x);
    CHECK_OK(ha_sampler_process(s, x, 0, NULL, 0, 0));
    CHECK_SAME_FLOATS(none, x, 4, "processing all -inf scores");
    ha_sampler_free(g);
    ha_sampler_free(s);
}

void test_sampler_create_rejects_bad_params(void) {
    struct {
        ha_sampling_params p;
        const char *needle;
    } cases[] = {
        { sample_params(0.0f, 0, 1.0f), "temperature" },
        { sample_params(-1.0f, 0, 1.0f), "temperature" },
        { sample_params(NAN, 0, 1.0f), "temperature" },
        { sample_params(INFINITY, 0, 1.0f), "temperature" },
        { sample_params(1.0f, 0, 0.0f), "top_p" },
        { sample_params(1.0f, 0, 1.5f), "top_p" },
        { sample_params(1.0f, 0, NAN), "top_p" },
        { sample_params(1.0f, 0, -0.5f), "top_p" },
        { sample_params(1.0f, -1, 1.0f), "top_k" },
        { sample_params(1.0f, 0, 1.0f), "repetition_penalty" },
        { sample_params(1.0f, 0, 1.0f), "repetition_penalty" },
        { sample_params(1.0f, 0, 1.0f), "repetition_penalty" },
    };
    cases[9].p.repetition_penalty = 0.0f;
    cases[10].p.repetition_penalty = -1.0f;
    cases[11].p.repetition_penalty = NAN;
    for (size_t i = 0; i < COUNT(cases); i++) {
        ha_sampler *s = (ha_sampler *)(void *)&sentinel_model;
        ha_status st = ha_sampler_create(&cases[i].p, 10, &s);
        CHECK(st == HA_ERR_INVALID, "case %zu (%s): expected HA_ERR_INVALID, got %s", i, cases[i].needle,
              status_name(st));
        CHECK(s == NULL, "case %zu: a rejected sampler expected *out == NULL", i);
        CHECK_MSG(cases[i].needle);
    }
    /* a temperature of 0 is fine when greedy; vocab must be >= 1 */
    ha_sampling_params g = greedy_params();
    g.temperature = 0.0f;
    ha_sampler *s = NULL;
    CHECK_OK(ha_sampler_create(&g, 10, &s));
    ha_sampler_free(s);
    CHECK_STATUS(ha_sampler_create(&g, 0, &s), HA_ERR_INVALID);
    CHECK_STATUS(ha_sampler_create(NULL, 10, &s), HA_ERR_INVALID);
    ha_sampler_free(NULL);
}

/* ---- 7. ha_generate on the tiny model ------------------------------------------------------------------- */

enum { GW = 4, GMAX = 12 };
static const int32_t GPROMPT[2 * GW] = { 7, 12, 3, 44, /* row 1 left padded: */ 0, 0, 19, 5 };
static const int64_t GSTART[2] = { 0, 2 };

static int32_t argmax_first(const float *x, int64_t n) {
    int32_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = (int32_t)i;
    return best;
}

/* Row b generated alone in its own cache: append the prompt, then for each step process, choose and
 * append. tokens (N,) and the processed scores (N, V) of each step. */
static void manual_generate(const ha_llama *m, const ha_sampling_params *sp, int b, int64_t N, int32_t *tokens,
                            float *scores) {
    ha_llama_context *c = ctx_new(m, 1, 16);
    ha_sampler *s = sampler_new(*sp, TV);
    int32_t hist[GW + GMAX];
    int64_t nh = 0;
    for (int64_t j = GSTART[b]; j < GW; j++) hist[nh++] = GPROMPT[b * GW + j];
    float logits[GW * TV];
    CHECK_OK(append_seq(c, 0, nh, hist, logits));
    float *cur = logits + (nh - 1) * TV;
    for (int64_t step = 0; step < N; step++) {
        CHECK_OK(ha_sampler_process(s, cur, b, hist, nh, step));
        memcpy(scores + step * TV, cur, TV * sizeof(float));
        int32_t t = ha_sampler_choose(s, cur, (uint32_t)b, (uint32_t)nh);
        CHECK(t >= 0, "manual loop: no token chosen");
        if (!sp->do_sample) CHECK(t == argmax_first(cur, TV), "greedy choose expected the first argmax");
        tokens[step] = t;
        hist[nh++] = t;
        if (step + 1 < N) {
            CHECK_OK(append_seq(c, 0, 1, &t, logits));
            cur = logits;
        }
    }
    ha_sampler_free(s);
    ha_llama_context_free(c);
}

static ha_generate_params gen_params(int64_t N, ha_sampling_params sp) {
    return (ha_generate_params){ .max_new_tokens = N, .eos = NULL, .n_eos = 0, .pad_token_id = -7, .sampling = sp };
}

void test_generate_greedy_equals_manual_loop(void) {
    one_thread();
    const char *vn[NVARIANTS];
    int nv = forward_variants(vn);
    for (int v = 0; v < nv; v++)
        for (size_t mc = 0; mc < COUNT(MODEL_CASES); mc += 2) {
            CHECK_OK(ha_kernels_select(vn[v]));
            tiny *t = tiny_build(MODEL_CASES[mc].dtype, MODEL_CASES[mc].bias, 0, 0, 41);
            ha_sampling_params sp = greedy_params();
            const int64_t N = 8;
            int32_t want[2][GMAX];
            float want_scores[2][GMAX * TV];
            for (int b = 0; b < 2; b++) manual_generate(t->m, &sp, b, N, want[b], want_scores[b]);
            ha_llama_context *c = ctx_new(t->m, 2, 16);
            ha_generate_params p = gen_params(N, sp);
            int32_t *out = xmalloc(2 * N * sizeof(int32_t));
            float *scores = xmalloc((size_t)(N * 2 * TV) * sizeof(float));
            int64_t steps = -1;
            CHECK_OK(ha_generate(LM(c), &p, GPROMPT, GW, GSTART, out, scores, &steps));
            CHECK(steps == N, "expected %lld steps, got %lld", (long long)N, (long long)steps);
            for (int b = 0; b < 2; b++)
                for (int64_t i = 0; i < N; i++) {
                    CHECK(out[b * N + i] == want[b][i], "[%s, %s] row %d step %lld: expected %d (manual loop), got %d",
                          vn[v], dname(t->dtype), b, (long long)i, want[b][i], out[b * N + i]);
                    CHECK_SAME_FLOATS(want_scores[b] + i * TV, scores + (i * 2 + b) * TV, TV,
                                      "[%s] row %d step %lld scores", vn[v], b, (long long)i);
                }
            free(out);
            free(scores);
            ha_llama_context_free(c);
            tiny_free(t);
        }
}

void test_generate_sampled_equals_manual_loop(void) {
    one_thread();
    tiny *t = tiny_build(HA_BF16, 1, 0, 0, 42);
    ha_sampling_params sp = {
        .do_sample = 1, .temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .repetition_penalty = 1.3f, .seed = 1234
    };
    const int64_t N = 10;
    int32_t want[2][GMAX], out[2 * 10], again[2 * 10], other[2 * 10];
    float ws[2][GMAX * TV];
    for (int b = 0; b < 2; b++) manual_generate(t->m, &sp, b, N, want[b], ws[b]);
    ha_generate_params p = gen_params(N, sp);
    int64_t steps;
    ha_llama_context *c = ctx_new(t->m, 2, 16);
    CHECK_OK(ha_generate(LM(c), &p, GPROMPT, GW, GSTART, out, NULL, &steps));
    CHECK(steps == N, "expected %lld steps, got %lld", (long long)N, (long long)steps);
    for (int b = 0; b < 2; b++)
        for (int64_t i = 0; i < N; i++)
            CHECK(out[b * N + i] == want[b][i],
                  "sampled row %d step %lld: expected %d (manual loop keyed by row and position), got %d", b,
                  (long long)i, want[b][i], out[b * N + i]);
    ha_llama_context_free(c);
    c = ctx_new(t->m, 2, 16);
    CHECK_OK(ha_generate(LM(c), &p, GPROMPT, GW, GSTART, again, NULL, &steps));
    CHECK(memcmp(out, again, sizeof out) == 0, "the same seed expected the same tokens");
    ha_llama_context_free(c);
    c = ctx_new(t->m, 2, 16);
    p.sampling.seed = 99;
    CHECK_OK(ha_generate(LM(c), &p, GPROMPT, GW, GSTART, other, NULL, &steps));
    CHECK(memcmp(out, other, sizeof out) != 0, "seeds 1234 and 99 expected different tokens over 2 x 10 draws");
    ha_llama_context_free(c);
    tiny_free(t);
}

void test_generate_eos_stops_row_and_pads(void) {
    one_thread();
    tiny *t = tiny_build(HA_F32, 1, 0, 0, 43);
    ha_sampling_params sp = greedy_params();
    const int64_t N = GMAX;
    int32_t man[2][GMAX];
    float ms[2][GMAX * TV];
    for (int b = 0; b < 2; b++) manual_generate(t->m, &sp, b, N, man[b], ms[b]);
    /* an eos that stops row 0 while row 1 runs on: the first occurrence in row 0 at step k, row 1 later
     * or never */
    int32_t eos = -1;
    int64_t e[2] = { -1, -1 };
    for (int64_t k = 0; k + 2 < N && eos < 0; k++) {
        int32_t cand = man[0][k];
        int64_t f0 = -1, f1 = -1;
        for (int64_t i = 0; i < N; i++) {
            if (f0 < 0 && man[0][i] == cand) f0 = i;
            if (f1 < 0 && man[1][i] == cand) f1 = i;
        }
        if (f0 == k && (f1 < 0 || f1 > k + 1)) {
            eos = cand;
            e[0] = f0;
            e[1] = f1;
        }
    }
    CHECK(eos >= 0, "test setup: no token of row 0 stops it before row 1 (rows %d %d %d... and %d %d %d...)", man[0][0],
          man[0][1], man[0][2], man[1][0], man[1][1], man[1][2]);
    /* a second stop token first in the list, one that neither row produces */
    int32_t unused = 0;
    for (int found = 1; found; unused += found) {
        found = 0;
        for (int64_t i = 0; i < N; i++) found |= man[0][i] == unused || man[1][i] == unused;
    }
    const int32_t eos_list[2] = { unused, eos };
    int64_t want_steps = (e[0] < 0 || e[1] < 0) ? N : (e[0] > e[1] ? e[0] : e[1]) + 1;

    ha_llama_context *c = ctx_new(t->m, 2, 16);
    ha_generate_params p = gen_params(N, sp);
    p.eos = eos_list;
    p.n_eos = 2;
    int32_t out[2 * GMAX];
    float *scores = xmalloc((size_t)(N * 2 * TV) * sizeof(float));
    for (int i = 0; i < 2 * GMAX; i++) out[i] = -12345;
    int64_t steps = -1;
    CHECK_OK(ha_generate(LM(c), &p, GPROMPT, GW, GSTART, out, scores, &steps));
    CHECK(steps == want_steps, "eos %d (row stops at %lld, %lld): expected %lld steps, got %lld", eos, (long long)e[0],
          (long long)e[1], (long long)want_steps, (long long)steps);
    CHECK(e[0] + 1 < steps, "test setup: row 0 expected to stop before the last step");
    for (int b = 0; b < 2; b++)
        for (int64_t i = 0; i < steps; i++) {
            int stopped = e[b] >= 0 && i > e[b];
            int32_t w = stopped ? p.pad_token_id : man[b][i];
            CHECK(out[b * N + i] == w, "row %d step %lld (eos at %lld): expected %d, got %d", b, (long long)i,
                  (long long)e[b], w, out[b * N + i]);
            if (stopped) {
                for (int v = 0; v < TV; v++)
                    CHECK(scores[(i * 2 + b) * TV + v] == -INFINITY,
                          "row %d stopped, step %lld: expected -inf scores, got %g at %d", b, (long long)i,
                          (double)scores[(i * 2 + b) * TV + v], v);
            } else {
                CHECK_SAME_FLOATS(ms[b] + i * TV, scores + (i * 2 + b) * TV, TV, "row %d step %lld scores", b,
                                  (long long)i);
            }
        }
    free(scores);
    ha_llama_context_free(c);
    tiny_free(t);
}

void test_generate_max_new_tokens_exact(void) {
    one_thread();
    tiny *t = tiny_build(HA_BF16, 0, 0, 0, 44);
    ha_sampling_params sp = greedy_params();
    int32_t man[2][GMAX];
    float ms[2][GMAX * TV];
    for (int b = 0; b < 2; b++) manual_generate(t->m, &sp, b, GMAX, man[b], ms[b]);
    const int64_t Ns[] = { 1, 3, GMAX };
    for (size_t k = 0; k < COUNT(Ns); k++) {
        const int64_t N = Ns[k];
        /* buffers of exactly (2, N) and (N, 2, V): a write past them is an ASan error */
        int32_t *out = xmalloc((size_t)(2 * N) * sizeof(int32_t));
        float *scores = xmalloc((size_t)(N * 2 * TV) * sizeof(float));
        ha_llama_context *c = ctx_new(t->m, 2, 16);
        ha_generate_params p = gen_params(N, sp);
        int64_t steps = -1;
        CHECK_OK(ha_generate(LM(c), &p, GPROMPT, GW, GSTART, out, scores, &steps));
        CHECK(steps == N, "max_new_tokens=%lld: expected %lld steps, got %lld", (long long)N, (long long)N,
              (long long)steps);
        for (int b = 0; b < 2; b++)
            for (int64_t i = 0; i < N; i++)
                CHECK(out[b * N + i] == man[b][i], "max_new_tokens=%lld row %d step %lld: expected %d, got %d",
                      (long long)N, b, (long long)i, man[b][i], out[b * N + i]);
        for (int b = 0; b < 2; b++) {
            int64_t plen = GW - GSTART[b];
            CHECK(LEN(c, b) <= plen + N,
                  "max_new_tokens=%lld: row %d's cache expected at most %lld positions, got %lld", (long long)N, b,
                  (long long)(plen + N), (long long)LEN(c, b));
        }
        ha_llama_context_free(c);
        free(out);
        free(scores);
    }
    tiny_free(t);
}

void test_generate_min_new_tokens_suppresses_eos(void) {
    one_thread();
    tiny *t = tiny_build(HA_F16, 1, 0, 0, 45);
    ha_sampling_params sp = greedy_params();
    int32_t man[2][GMAX];
    float ms[2][GMAX * TV];
    for (int b = 0; b < 2; b++) manual_generate(t->m, &sp, b, GMAX, man[b], ms[b]);
    const int32_t eos = man[0][0]; /* what row 0 would say first */
    const int64_t N = 6, MIN = 3;
    int32_t out[2 * 6];
    float *scores = xmalloc((size_t)(N * 2 * TV) * sizeof(float));
    ha_llama_context *c = ctx_new(t->m, 2, 16);
    ha_generate_params p = gen_params(N, sp);
    p.eos = p.sampling.eos = &eos;
    p.n_eos = p.sampling.n_eos = 1;
    p.sampling.min_new_tokens = MIN;
    int64_t steps = -1;
    CHECK_OK(ha_generate(LM(c), &p, GPROMPT, GW, GSTART, out, scores, &steps));
    CHECK(steps >= MIN, "min_new_tokens=%lld: expected at least %lld steps, got %lld", (long long)MIN, (long long)MIN,
          (long long)steps);
    float s0[TV];
    memcpy(s0, ms[0], sizeof s0);
    s0[eos] = -INFINITY;
    CHECK(out[0] == argmax_first(s0, TV), "row 0 step 0 with eos %d suppressed: expected the runner-up %d, got %d", eos,
          argmax_first(s0, TV), out[0]);
    for (int b = 0; b < 2; b++)
        for (int64_t i = 0; i < MIN; i++) {
            CHECK(out[b * N + i] != eos, "row %d step %lld < min_new_tokens: expected no eos %d", b, (long long)i, eos);
            CHECK(scores[(i * 2 + b) * TV + eos] == -INFINITY, "row %d step %lld: expected the eos score -inf, got %g",
                  b, (long long)i, (double)scores[(i * 2 + b) * TV + eos]);
        }
    ha_llama_context_free(c);
    /* without min_new_tokens, row 0 stops at once */
    c = ctx_new(t->m, 2, 16);
    p.sampling.min_new_tokens = 0;
    CHECK_OK(ha_generate(LM(c), &p, GPROMPT, GW, GSTART, out, scores, &steps));
    CHECK(out[0] == eos && (steps == 1 || out[1] == p.pad_token_id),
          "min_new_tokens=0: expected row 0 to end with eos %d at once, got %d %d", eos, out[0], out[1]);
    ha_llama_context_free(c);
    free(scores);
    tiny_free(t);
}

void test_generate_rejects_bad_input(void) {
    tiny *t = tiny_build(HA_F32, 0, 0, 0, 46);
    ha_generate_params p = gen_params(4, greedy_params());
    int32_t out[2 * 4];
    int64_t steps;
    ha_llama_context *c = ctx_new(t->m, 2, 16);
    const int32_t one = 1;
    CHECK_OK(append_seq(c, 1, 1, &one, NULL));
    CHECK_STATUS(ha_generate(LM(c), &p, GPROMPT, GW, GSTART, out, NULL, &steps), HA_ERR_INVALID);
    CHECK_MSG("empty");
    ha_llama_context_free(c);

    c = ctx_new(t->m, 2, 16);
    const int64_t no_prompt[2] = { 0, GW }, neg[2] = { -1, 0 };
    CHECK_STATUS(ha_generate(LM(c), &p, GPROMPT, GW, no_prompt, out, NULL, &steps), HA_ERR_INVALID);
    CHECK_MSG("no prompt tokens");
    CHECK_STATUS(ha_generate(LM(c), &p, GPROMPT, GW, neg, out, NULL, &steps), HA_ERR_INVALID);
    ha_generate_params q = p;
    q.max_new_tokens = 0;
    CHECK_STATUS(ha_generate(LM(c), &q, GPROMPT, GW, GSTART, out, NULL, &steps), HA_ERR_INVALID);
    CHECK_MSG("max_new_tokens");
    q = p;
    q.sampling.min_new_tokens = -1;
    CHECK_STATUS(ha_generate(LM(c), &q, GPROMPT, GW, GSTART, out, NULL, &steps), HA_ERR_INVALID);
    CHECK_MSG("min_new_tokens");
    q = p;
    q.n_eos = 1;
    CHECK_STATUS(ha_generate(LM(c), &q, GPROMPT, GW, GSTART, out, NULL, &steps), HA_ERR_INVALID);
    q = p;
    q.sampling.top_p = 0.0f;
    CHECK_STATUS(ha_generate(LM(c), &q, GPROMPT, GW, GSTART, out, NULL, &steps), HA_ERR_INVALID);
    CHECK_MSG("top_p");
    const int32_t bad_prompt[2 * GW] = { 7, 12, 3, TV, 0, 0, 19, 5 };
    CHECK_STATUS(ha_generate(LM(c), &p, bad_prompt, GW, GSTART, out, NULL, &steps), HA_ERR_INVALID);
    CHECK_MSG("token id 50");
    CHECK(LEN(c, 0) == 0 && LEN(c, 1) == 0, "rejected generations expected to leave the caches empty, got %lld, %lld",
          (long long)LEN(c, 0), (long long)LEN(c, 1));
    CHECK_STATUS(ha_generate(NULL, &p, GPROMPT, GW, GSTART, out, NULL, &steps), HA_ERR_INVALID);
    ha_llama_context_free(c);

    /* NaN weights: every logit NaN, no token can be chosen; an error, not a crash or token -1 */
    float *emb = (float *)(void *)t->w.embed.data;
    for (int i = 0; i < TD; i++) emb[44 * TD + i] = NAN;
    c = ctx_new(t->m, 2, 16);
    CHECK_STATUS(ha_generate(LM(c), &p, GPROMPT, GW, GSTART, out, NULL, &steps), HA_ERR_INVALID);
    CHECK_MSG("NaN");
    ha_llama_context_free(c);
    tiny_free(t);
}

/* ---- 7b. assisted generation (csrc/generation/assist.c): promise 1 under the sanitizers ----------------- */

/* Plain generation of the two GPROMPT rows: out (2, N), scores (N, 2, V). */
static int64_t plain_generate(const ha_llama *m, const ha_generate_params *p, int32_t *out, float *scores) {
    ha_llama_context *c = ctx_new(m, 2, 16);
    int64_t steps = -1;
    CHECK_OK(ha_generate(LM(c), p, GPROMPT, GW, GSTART, out, scores, &steps));
    ha_llama_context_free(c);
    return steps;
}

/* Assisted output (tokens, steps, scores) equals plain output for every draft (another model, the same
 * model, prompt lookup), K and schedule: greedy, and coupled sampling with the same seed. long_from: the models'
 * rope switch (tiny_build_longrope). */
static void assisted_equals_plain(int64_t long_from) {
    one_thread();
    tiny *target = tiny_build_longrope(HA_BF16, 1, 0, 0, 61, long_from),
         *other = tiny_build_longrope(HA_F32, 0, 0, 0, 62, long_from);
    const int64_t N = 10;
    int32_t plain[2 * 10], got[2 * 10];
    float *ps = xmalloc((size_t)(N * 2 * TV) * sizeof(float)), *gs = xmalloc((size_t)(N * 2 * TV) * sizeof(float));
    for (int sampled = 0; sampled < 2; sampled++) {
        ha_sampling_params sp = sampled ? (ha_sampling_params){ .do_sample = 1,
                                                                .temperature = 0.9f,
                                                                .top_k = 0,
                                                                .top_p = 0.95f,
                                                                .repetition_penalty = 1.2f,
                                                                .seed = 77 }
                                        : greedy_params();
        ha_generate_params gp = gen_params(N, sp);
        int32_t eos = -1;
        for (int with_eos = 0; with_eos < 2; with_eos++) {
            gp.eos = with_eos ? &eos : NULL;
            gp.n_eos = with_eos;
            int64_t plain_steps = plain_generate(target->m, &gp, plain, ps);
            if (!with_eos) eos = plain[3]; /* in the second round, row 0 stops at its first such token */
            for (int d = 0; d < 3; d++) /* another model, the same model, prompt lookup */
                for (int64_t K = 1; K <= 5; K += 2)
                    for (int sched = 0; sched < 3; sched++) {
                        const tiny *dm = d == 0 ? other : d == 1 ? target : NULL;
                        static const double draft_costs[] = { 0.05, 0.06 }, target_costs[] = { 1.0, 1.1, 1.2, 1.3 };
                        ha_assist_params ap = { .gen = gp,
                                                .num_assistant_tokens = K,
                                                .schedule = sched == 2 ? HA_SCHEDULE_COST
                                                            : sched    ? HA_SCHEDULE_HEURISTIC
                                                                       : HA_SCHEDULE_CONSTANT,
                                                .confidence_threshold = 0.0f,
                                                .acceptance = HA_ACCEPT_COUPLED,
                                                .prompt_lookup_num_tokens = K,
                                                .max_matching_ngram_size = 2,
                                                .draft_costs = draft_costs,
                                                .n_draft_costs = 2,
                                                .target_costs = target_costs,
                                                .n_target_costs = 4 };
                        ha_llama_context *tc = ctx_new(target->m, 2, 16), *dc = dm ? ctx_new(dm->m, 2, 16) : NULL;
                        int64_t steps = -1;
                        for (int i = 0; i < 2 * 10; i++) got[i] = -999;
                        ha_assist_stats stats = { 0 };
                        CHECK_OK(ha_generate_assisted(LM(tc), dc ? LM(dc) : NULL, &ap, GPROMPT, GW, GSTART, got, gs,
                                                      &steps, &stats));
                        const char *dn = d == 0 ? "another model" : d == 1 ? "the same model" : "prompt lookup";
                        CHECK(steps == plain_steps,
                              "%s, draft %s, K=%lld, schedule %d, eos %d: expected %lld steps, got %lld",
                              sampled ? "coupled sampling" : "greedy", dn, (long long)K, sched, with_eos ? eos : -1,
                              (long long)plain_steps, (long long)steps);
                        for (int b = 0; b < 2; b++)
                            for (int64_t i = 0; i < steps; i++) {
                                CHECK(got[b * N + i] == plain[b * N + i],
                                      "%s, draft %s, K=%lld, schedule %d: row %d step %lld "
                                      "expected %d (plain), got %d",
                                      sampled ? "coupled sampling" : "greedy", dn, (long long)K, sched, b, (long long)i,
                                      plain[b * N + i], got[b * N + i]);
                                CHECK_SAME_FLOATS(ps + (i * 2 + b) * TV, gs + (i * 2 + b) * TV, TV,
                                                  "%s, draft %s, K=%lld: row %d "
                                                  "step %lld scores",
                                                  sampled ? "coupled" : "greedy", dn, (long long)K, b, (long long)i);
                            }
                        CHECK(stats.num_accepted_tokens <= stats.num_draft_tokens, "accepted %lld of %lld drafts",
                              (long long)stats.num_accepted_tokens, (long long)stats.num_draft_tokens);
                        CHECK(stats.num_rounds >= 1 && stats.num_rounds <= stats.num_target_passes,
                              "%lld rounds for %lld target passes over the rows", (long long)stats.num_rounds,
                              (long long)stats.num_target_passes);
                        if (d == 1 && !sampled)
                            CHECK(stats.num_accepted_tokens == stats.num_draft_tokens && stats.num_draft_tokens > 0,
                                  "greedy, the target as its own draft, K=%lld: expected every draft accepted, got "
                                  "%lld of %lld",
                                  (long long)K, (long long)stats.num_accepted_tokens,
                                  (long long)stats.num_draft_tokens);
                        ha_llama_context_free(tc);
                        ha_llama_context_free(dc);
                    }
        }
    }
    free(ps);
    free(gs);
    tiny_free(target);
    tiny_free(other);
}

void test_assisted_equals_plain(void) { assisted_equals_plain(0); }

/* The same where target and draft are longrope models switching at 7 positions (rows of 4 and 2 prompt tokens, 10
 * new: every K lands rounds on both sides of it): ha_assist_candidate_cap keeps each round's scores on one side, and
 * the round past it runs the row again whole, as plain generation's step there does. */
void test_assisted_equals_plain_across_a_rope_switch(void) { assisted_equals_plain(7); }

/* longrope as Transformers chooses it: an append rotates all the tokens it adds to a sequence with the long table iff
 * the sequence then holds more than rope_long_from positions, whatever chunks the append is cut into and whatever
 * the other sequences in it do; cached keys keep their rotation. Compared bitwise with the model always short and the
 * model always long (the same weights, one table each). */
void test_longrope_an_append_takes_the_long_table_iff_it_ends_past_the_switch(void) {
    one_thread();
    enum { N = 70 }; /* more than one chunk (CHUNK = 64) */
    int32_t tok[N];
    rng r = { 17 };
    random_tokens(&r, tok, N);
    tiny *lr7 = tiny_build_longrope(HA_F32, 1, 0, 0, 93, 7), *lr66 = tiny_build_longrope(HA_F32, 1, 0, 0, 93, 66),
         *sh = tiny_build_longrope(HA_F32, 1, 0, 0, 93, TINY_SHORT),
         *lo = tiny_build_longrope(HA_F32, 1, 0, 0, 93, TINY_LONG);
    float *got = xmalloc((size_t)N * TV * sizeof(float)), *want = xmalloc((size_t)N * TV * sizeof(float));
    /* (model, tokens appended in one go, the model it must equal) */
    const struct {
        tiny *m;
        int n;
        tiny *as;
    } cases[] = {
        { lr7, 7, sh }, { lr7, 8, lo }, { lr7, 12, lo }, { lr66, 66, sh }, { lr66, 67, lo }, { lr66, N, lo }
    };
    for (size_t i = 0; i < COUNT(cases); i++) {
        ha_llama_context *c = ctx_new(cases[i].m->m, 1, N), *e = ctx_new(cases[i].as->m, 1, N);
        CHECK(LM(c)->rope_switch == cases[i].m->cfg.rope_long_from && LM(e)->rope_switch == 0,
              "rope_switch expected %lld and 0, got %lld and %lld", (long long)cases[i].m->cfg.rope_long_from,
              (long long)LM(c)->rope_switch, (long long)LM(e)->rope_switch);
        CHECK_OK(append_seq(c, 0, cases[i].n, tok, got));
        CHECK_OK(append_seq(e, 0, cases[i].n, tok, want));
        CHECK_SAME_FLOATS(want, got, (size_t)cases[i].n * TV,
                          "switch %lld, one append of %d tokens vs the model "
                          "always %s",
                          (long long)cases[i].m->cfg.rope_long_from, cases[i].n, cases[i].as == sh ? "short" : "long");
        ha_llama_context_free(c);
        ha_llama_context_free(e);
    }
    /* Two sequences in one append, one ending past 7 and one not: each takes its own table. */
    ha_llama_context *c = ctx_new(lr7->m, 2, N), *s1 = ctx_new(sh->m, 1, N), *l1 = ctx_new(lo->m, 1, N);
    int32_t seq[15], both[15];
    for (int i = 0; i < 15; i++) {
        seq[i] = i % 2 == 0 && i < 14 ? 1 : 0; /* sequence 1: 7 tokens, sequence 0: 8, interleaved */
        both[i] = tok[i];
    }
    CHECK_OK(LM(c)->append(LM(c)->self, 15, seq, both, NULL, got));
    int32_t t0[8], t1[7];
    for (int i = 0, a = 0, b = 0; i < 15; i++) {
        if (seq[i]) t1[b++] = both[i];
        else t0[a++] = both[i];
    }
    CHECK_OK(append_seq(l1, 0, 8, t0, want));
    CHECK_OK(append_seq(s1, 0, 7, t1, want + 8 * TV));
    for (int i = 0, a = 0, b = 0; i < 15; i++) {
        const float *w = seq[i] ? want + (8 + b++) * TV : want + a++ * TV;
        CHECK_SAME_FLOATS(w, got + i * TV, TV, "token %d of an append to two sequences (sequence %d: %s)", i, seq[i],
                          seq[i] ? "7 positions, short" : "8 positions, long");
    }
    ha_llama_context_free(c);
    ha_llama_context_free(s1);
    ha_llama_context_free(l1);
    /* 5 tokens, then 3 that pass 7: the 5 are short, the 3 long over the 5 short keys (neither model's rows). */
    c = ctx_new(lr7->m, 1, N);
    CHECK_OK(append_seq(c, 0, 5, tok, got));
    CHECK_OK(append_seq(c, 0, 3, tok + 5, got + 5 * TV));
    s1 = ctx_new(sh->m, 1, N);
    l1 = ctx_new(lo->m, 1, N);
    CHECK_OK(append_seq(s1, 0, 8, tok, want));
    CHECK_SAME_FLOATS(want, got, 5 * TV, "5 tokens then 3: the first 5 vs the model always short");
    CHECK(memcmp(want + 5 * TV, got + 5 * TV, 3 * TV * sizeof(float)) != 0, "5 tokens then 3: the 3 must not be short");
    CHECK_OK(append_seq(l1, 0, 8, tok, want));
    CHECK(memcmp(want + 5 * TV, got + 5 * TV, 3 * TV * sizeof(float)) != 0,
          "5 tokens then 3: the 3 attend to short keys, so they must not be the rows of the model always long");
    ha_llama_context_free(c);
    ha_llama_context_free(s1);
    ha_llama_context_free(l1);
    free(got);
    free(want);
    tiny_free(lr7);
    tiny_free(lr66);
    tiny_free(sh);
    tiny_free(lo);
}

/* Plain generation with a rope switch at 7 (rows of 4 and 2 prompt tokens, 10 new): the step that takes a row past 7
 * runs the row again whole, so every step's scores are those of one forward of the row's sequence: bitwise what
 * no_cache gives; and not what appending the token to the cache of short keys would give (manual_generate). */
void test_generate_runs_a_row_again_whole_past_a_rope_switch(void) {
    one_thread();
    tiny *t = tiny_build_longrope(HA_BF16, 1, 0, 0, 61, 7);
    enum { N = 10 };
    int32_t out[2][2 * N], manual[N];
    float *scores[2] = { xmalloc((size_t)(N * 2 * TV) * sizeof(float)), xmalloc((size_t)(N * 2 * TV) * sizeof(float)) };
    float *manual_scores = xmalloc((size_t)(N * TV) * sizeof(float));
    for (int no_cache = 0; no_cache < 2; no_cache++) {
        ha_generate_params p = gen_params(N, greedy_params());
        p.no_cache = no_cache;
        ha_llama_context *c = ctx_new(t->m, 2, 16);
        int64_t steps = -1;
        CHECK_OK(ha_generate(LM(c), &p, GPROMPT, GW, GSTART, out[no_cache], scores[no_cache], &steps));
        CHECK(steps == N, "no_cache %d: expected %d steps, got %lld", no_cache, N, (long long)steps);
        ha_llama_context_free(c);
    }
    CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0, "greedy tokens with the cache and with no_cache differ");
    CHECK_SAME_FLOATS(scores[1], scores[0], (size_t)N * 2 * TV, "scores with the cache vs no_cache");
    /* row 0 (4 prompt tokens): step s scores after position 3 + s, so step 4 is the first past the switch */
    ha_sampling_params sp = greedy_params();
    manual_generate(t->m, &sp, 0, N, manual, manual_scores);
    CHECK_SAME_FLOATS(manual_scores, scores[0], TV, "row 0, step 0 (below the switch) vs token by token");
    CHECK(memcmp(manual_scores + 4 * TV, scores[0] + (4 * 2) * TV, TV * sizeof(float)) != 0,
          "row 0, step 4 (after position 7, past the switch): expected other scores than over the cached short keys");
    free(scores[0]);
    free(scores[1]);
    free(manual_scores);
    tiny_free(t);
}

/* The cost schedule: costs that make every draft a loss give plain decoding (no draft, one target pass per
 * token); free drafts and a flat verify cost never propose past max_new_tokens; malformed costs are refused. */
void test_assisted_cost_schedule_edges(void) {
    one_thread();
    tiny *target = tiny_build(HA_F32, 0, 0, 0, 65);
    const int64_t N = 6;
    int32_t plain[2 * 6], got[2 * 6];
    ha_generate_params gp = gen_params(N, greedy_params());
    int64_t plain_steps = plain_generate(target->m, &gp, plain, NULL);
    const double dear[] = { 100.0 }, free_drafts[] = { 0.0 }, flat[] = { 1.0, 1.0, 1.0 };
    for (int c = 0; c < 2; c++) {
        for (int64_t n_new = 1; n_new <= N; n_new++) {
            int64_t proposed[6] = { 0 }, accepted[6] = { 0 }, steps = -1;
            uint8_t sources[2 * 6];
            memset(sources, 0xff, sizeof sources);
            ha_assist_params ap = { .gen = gen_params(n_new, greedy_params()),
                                    .num_assistant_tokens = 20,
                                    .schedule = HA_SCHEDULE_COST,
                                    .draft_costs = c ? free_drafts : dear,
                                    .n_draft_costs = 1,
                                    .target_costs = flat,
                                    .n_target_costs = c ? 3 : 2 };
            ap.gen.sources = sources;
            ha_assist_stats stats = { .proposed_at = proposed, .accepted_at = accepted };
            ha_llama_context *tc = ctx_new(target->m, 2, 16), *dc = ctx_new(target->m, 2, 16);
            CHECK_OK(ha_generate_assisted(LM(tc), LM(dc), &ap, GPROMPT, GW, GSTART, got, NULL, &steps, &stats));
            CHECK(steps == (n_new < plain_steps ? n_new : plain_steps), "max_new_tokens=%lld: %lld steps",
                  (long long)n_new, (long long)steps);
            for (int b = 0; b < 2; b++)
                for (int64_t i = 0; i < steps; i++)
                    CHECK(got[b * n_new + i] == plain[b * N + i],
                          "costs %d, max_new_tokens=%lld: row %d step %lld expected "
                          "%d, got %d",
                          c, (long long)n_new, b, (long long)i, plain[b * N + i], got[b * n_new + i]);
            /* how each token was decided: dear drafts, plain decoding; free ones, every draft accepted and the
             * target's bonus token last (nothing to draft when one token is left: plain) */
            for (int b = 0; b < 2 && steps == n_new; b++)
                for (int64_t i = 0; i < n_new; i++) {
                    const int want = !c || n_new == 1 ? HA_SOURCE_PLAIN
                                     : i < n_new - 1  ? HA_SOURCE_ACCEPTED
                                                      : HA_SOURCE_BONUS;
                    CHECK(sources[b * n_new + i] == want,
                          "costs %d, max_new_tokens=%lld: row %d token %lld: source %d, "
                          "expected %d",
                          c, (long long)n_new, b, (long long)i, sources[b * n_new + i], want);
                }
            if (!c) {
                CHECK(
                    stats.num_draft_tokens == 0 && stats.num_draft_passes == 0 && stats.num_target_passes == 2 * n_new,
                    "drafts dearer than they gain: expected plain decoding (0 drafts, %lld passes), got %lld drafts in "
                    "%lld draft passes, %lld target passes",
                    (long long)(2 * n_new), (long long)stats.num_draft_tokens, (long long)stats.num_draft_passes,
                    (long long)stats.num_target_passes);
            } else {
                /* the target drafting for itself, for free: every round drafts all the room there is */
                CHECK(stats.num_draft_tokens == 2 * (n_new - 1) && proposed[n_new - 1] == 0,
                      "free drafts, max_new_tokens=%lld: expected %lld drafts over the 2 rows, none at position %lld; "
                      "got "
                      "%lld",
                      (long long)n_new, (long long)(2 * (n_new - 1)), (long long)(n_new - 1),
                      (long long)stats.num_draft_tokens);
            }
            ha_llama_context_free(tc);
            ha_llama_context_free(dc);
        }
    }
    /* (draft, target) pairs: a NaN target time, a negative draft step, a zero target time, no target times, no
     * draft, 65 target times */
    static const double ok_d[] = { 0.1 }, nan_t[] = { 1.0, NAN }, neg_d[] = { -1.0 }, zero_t[] = { 1.0, 0.0 };
    static double many[65];
    for (int i = 0; i < 65; i++) many[i] = 1.0;
    const double *bad_d[] = { ok_d, neg_d, ok_d, ok_d, NULL, ok_d },
                 *bad_t[] = { nan_t, flat, zero_t, flat, flat, many };
    const int64_t n_bad_d[] = { 1, 1, 1, 1, 1, 1 }, n_bad_t[] = { 2, 1, 2, 0, 1, 65 };
    for (int i = 0; i < 6; i++) {
        ha_assist_params ap = { .gen = gp,
                                .num_assistant_tokens = 4,
                                .schedule = HA_SCHEDULE_COST,
                                .draft_costs = bad_d[i],
                                .n_draft_costs = n_bad_d[i],
                                .target_costs = bad_t[i],
                                .n_target_costs = n_bad_t[i] };
        ha_llama_context *tc = ctx_new(target->m, 2, 16), *dc = ctx_new(target->m, 2, 16);
        int64_t steps = -1;
        CHECK(ha_generate_assisted(LM(tc), LM(dc), &ap, GPROMPT, GW, GSTART, got, NULL, &steps, NULL) == HA_ERR_INVALID,
              "malformed costs %d: expected HA_ERR_INVALID", i);
        ha_llama_context_free(tc);
        ha_llama_context_free(dc);
    }
    tiny_free(target);
}

/* A token callback that rewrites the caller's start array while row 0 runs (as a Python streamer may, with the
 * numpy array the call was given) changes nothing: each row's start is read once, when checked (a later row's
 * start of -2^31 had made its prompt length negative and the copy of its prompt run wild; found by
 * tests/fuzz/fuzz_binding.py). */
static int rewrite_start(void *user, int64_t row, const int32_t *tokens, int64_t n) {
    (void)row, (void)tokens, (void)n;
    int64_t *start = user;
    start[0] = INT64_MAX;
    start[1] = INT64_MIN;
    return 0;
}

void test_assisted_reads_start_once(void) {
    one_thread();
    tiny *t = tiny_build(HA_F32, 0, 0, 0, 63);
    const int64_t N = 6;
    int32_t want[2 * 6], got[2 * 6];
    ha_generate_params gp = gen_params(N, greedy_params());
    ha_assist_params ap = {
        .gen = gp, .num_assistant_tokens = 2, .prompt_lookup_num_tokens = 2, .max_matching_ngram_size = 2
    };
    int64_t steps = -1, start[2] = { GSTART[0], GSTART[1] };
    ha_llama_context *c = ctx_new(t->m, 2, 16);
    CHECK_OK(ha_generate_assisted(LM(c), NULL, &ap, GPROMPT, GW, start, want, NULL, &steps, NULL));
    ha_llama_context_free(c);
    c = ctx_new(t->m, 2, 16);
    ap.gen.on_tokens = rewrite_start;
    ap.gen.user = start;
    CHECK_OK(ha_generate_assisted(LM(c), NULL, &ap, GPROMPT, GW, start, got, NULL, &steps, NULL));
    CHECK(start[1] == INT64_MIN, "expected the callback to have rewritten start[1], got %lld", (long long)start[1]);
    for (int i = 0; i < 2 * 6; i++)
        CHECK(got[i] == want[i], "out[%d]: expected %d (start left alone), got %d", i, want[i], got[i]);
    ha_llama_context_free(c);
    tiny_free(t);
}

/* Drafting ahead (ha_assist_params.overlap): a model interface around a native context. As the draft it counts
 * the appends made on a thread other than the one that created it (the thread drafting ahead); as the target (with
 * wait) each append first waits until its draft has made two such appends since the append began, or 20 ms have passed: a
 * target slower than the draft, as an accelerator's behind a callback, without the test depending on timing for
 * anything but how far ahead the thread got (the outputs must not depend on it). */
typedef struct ahead_lm {
    ha_lm lm;
    ha_lm *inner;
    struct ahead_lm *draft; /* the target's draft; NULL in the draft */
    int wait; /* the target: wait for the draft as above (only when it drafts ahead) */
    int calls; /* the target's appends so far */
    pthread_t owner;
    atomic_long off_owner; /* the draft's appends made on another thread */
} ahead_lm;

static ha_status ahead_lm_append(void *self, int64_t n, const int32_t *seq, const int32_t *tokens, const uint8_t *want,
                                 float *logits) {
    ahead_lm *a = self;
    if (!a->draft) {
        if (!pthread_equal(pthread_self(), a->owner)) atomic_fetch_add(&a->off_owner, 1);
    } else if (a->wait && a->calls++ > 0) { /* not the prefill */
        const long before = atomic_load(&a->draft->off_owner);
        const struct timespec nap = { .tv_nsec = 20000 };
        for (const double until = ha_now() + 0.02; atomic_load(&a->draft->off_owner) < before + 2 && ha_now() < until;)
            nanosleep(&nap, NULL);
    }
    return a->inner->append(a->inner->self, n, seq, tokens, want, logits);
}

static ha_status ahead_lm_crop(void *self, int32_t seq, int64_t len) {
    ahead_lm *a = self;
    return a->inner->crop(a->inner->self, seq, len);
}

static int64_t ahead_lm_length(const void *self, int32_t seq) {
    const ahead_lm *a = self;
    return a->inner->length(a->inner->self, seq);
}

static void ahead_lm_init(ahead_lm *a, ha_lm *inner, ahead_lm *draft) {
    *a = (ahead_lm){ .lm = *inner, .inner = inner, .draft = draft, .owner = pthread_self() };
    a->lm.self = a;
    a->lm.append = ahead_lm_append;
    a->lm.crop = ahead_lm_crop;
    a->lm.length = ahead_lm_length;
}

/* The same tokens, scores, sources and statistics with drafting ahead as without, for drafts that agree with the
 * target (every guess right) and that do not, greedy, coupled and rejection sampling, constant and heuristic
 * schedules, an eos ending a row, a cache too small for the whole chain; and the thread does draft ahead. */
static void drafting_ahead_changes_nothing(int64_t long_from) {
    one_thread();
    /* drafts: another model (few rounds accept everything), the target's weights in int4 (many do, and some of
     * those have a wrong guess), the target itself (every guess right) */
    tiny *target = tiny_build_longrope(HA_BF16, 1, 0, 0, 61, long_from),
         *other = tiny_build_longrope(HA_F32, 0, 0, 0, 62, long_from),
         *near = tiny_build_longrope(HA_Q4, 1, 0, 0, 61, long_from);
    enum { N = 10 };
    const int64_t V = TV;
    float *scores[2] = { xmalloc((size_t)(N * 2 * V) * sizeof(float)), xmalloc((size_t)(N * 2 * V) * sizeof(float)) };
    int64_t ahead_passes = 0, used_when_right = 0;
    for (int mode = 0; mode < 3; mode++) { /* greedy, coupled, rejection */
        ha_sampling_params sp = mode ? (ha_sampling_params){ .do_sample = 1,
                                                             .temperature = 0.9f,
                                                             .top_p = 0.95f,
                                                             .repetition_penalty = 1.2f,
                                                             .seed = 78 }
                                     : greedy_params();
        for (int d = 0; d < 3; d++)
            for (int64_t K = 1; K <= 3; K += 2)
                for (int sched = 0; sched < 2; sched++)
                    for (int with_eos = 0; with_eos < 2; with_eos++) {
                        const tiny *dm = d == 0 ? other : d == 1 ? near : target;
                        int32_t out[2][2 * N], eos = 9;
                        uint8_t sources[2][2 * N];
                        int64_t proposed[2][N] = { { 0 } }, accepted[2][N] = { { 0 } }, steps[2] = { -1, -1 };
                        ha_assist_stats stats[2];
                        for (int overlap = 0; overlap < 2; overlap++) {
                            ha_assist_params ap = { .gen = gen_params(N, sp),
                                                    .num_assistant_tokens = K,
                                                    .schedule = sched ? HA_SCHEDULE_HEURISTIC : HA_SCHEDULE_CONSTANT,
                                                    .acceptance = mode == 2 ? HA_ACCEPT_REJECTION : HA_ACCEPT_COUPLED,
                                                    .overlap = overlap };
                            ap.gen.eos = with_eos ? &eos : NULL;
                            ap.gen.n_eos = with_eos;
                            ap.gen.sources = sources[overlap];
                            stats[overlap] = (ha_assist_stats){ .proposed_at = proposed[overlap],
                                                                .accepted_at = accepted[overlap] };
                            ha_llama_context *tc = ctx_new(target->m, 2, 16), *dc = ctx_new(dm->m, 2, 16);
                            ahead_lm t, dr;
                            ahead_lm_init(&dr, LM(dc), NULL);
                            ahead_lm_init(&t, LM(tc), &dr);
                            t.wait = overlap;
                            CHECK_OK(ha_generate_assisted(&t.lm, &dr.lm, &ap, GPROMPT, GW, GSTART, out[overlap],
                                                          scores[overlap], &steps[overlap], &stats[overlap]));
                            const long off = atomic_load(&dr.off_owner); /* appends of one or two rows each */
                            CHECK(overlap
                                      ? stats[1].num_ahead_passes >= off && (off > 0) == (stats[1].num_ahead_passes > 0)
                                      : stats[0].num_ahead_passes == 0 && off == 0,
                                  "overlap %d: %lld passes made ahead, %ld draft appends off the caller's thread",
                                  overlap, (long long)stats[overlap].num_ahead_passes, off);
                            ha_llama_context_free(tc);
                            ha_llama_context_free(dc);
                        }
                        char what[160];
                        snprintf(what, sizeof what, "mode %d, draft %s, K=%lld, schedule %d, eos %d, rope switch %lld",
                                 mode,
                                 d == 0   ? "another model"
                                 : d == 1 ? "the target in int4"
                                          : "the target",
                                 (long long)K, sched, with_eos, (long long)long_from);
                        CHECK(steps[0] == steps[1], "%s: %lld steps without drafting ahead, %lld with", what,
                              (long long)steps[0], (long long)steps[1]);
                        for (int i = 0; i < 2 * N; i++)
                            CHECK(out[0][i] == out[1][i] && sources[0][i] == sources[1][i],
                                  "%s: token %d: %d (source %d) "
                                  "without drafting ahead, %d (source %d) with",
                                  what, i, out[0][i], sources[0][i], out[1][i], sources[1][i]);
                        CHECK_SAME_FLOATS(scores[0], scores[1], steps[0] * 2 * V, "%s: scores", what);
                        const ha_assist_stats *a = &stats[0], *b = &stats[1];
                        CHECK(a->num_draft_tokens == b->num_draft_tokens &&
                                  a->num_accepted_tokens == b->num_accepted_tokens &&
                                  a->num_target_passes == b->num_target_passes &&
                                  a->num_draft_passes == b->num_draft_passes && a->num_rounds == b->num_rounds &&
                                  a->num_assistant_tokens == b->num_assistant_tokens,
                              "%s: statistics without drafting ahead (drafts %lld, accepted %lld, target passes %lld, "
                              "draft "
                              "passes %lld, rounds %lld, K %lld) and with (%lld, %lld, %lld, %lld, %lld, %lld)",
                              what, (long long)a->num_draft_tokens, (long long)a->num_accepted_tokens,
                              (long long)a->num_target_passes, (long long)a->num_draft_passes, (long long)a->num_rounds,
                              (long long)a->num_assistant_tokens, (long long)b->num_draft_tokens,
                              (long long)b->num_accepted_tokens, (long long)b->num_target_passes,
                              (long long)b->num_draft_passes, (long long)b->num_rounds,
                              (long long)b->num_assistant_tokens);
                        for (int j = 0; j < N; j++)
                            CHECK(proposed[0][j] == proposed[1][j] && accepted[0][j] == accepted[1][j],
                                  "%s: draft position %d: %lld of %lld accepted without drafting ahead, %lld of %lld "
                                  "with",
                                  what, j, (long long)accepted[0][j], (long long)proposed[0][j],
                                  (long long)accepted[1][j], (long long)proposed[1][j]);
                        CHECK(b->num_ahead_used <= b->num_draft_passes,
                              "%s: %lld of %lld draft passes read what was "
                              "drafted ahead",
                              what, (long long)b->num_ahead_used, (long long)b->num_draft_passes);
                        ahead_passes += b->num_ahead_passes;
                        if (d == 2 && mode == 0) used_when_right += b->num_ahead_used; /* every guess right */
                    }
    }
    /* how far the thread gets in a round depends on the machine; over all these rounds it must have got somewhere */
    CHECK(ahead_passes > 0 && used_when_right > 0,
          "%lld passes made ahead; %lld draft passes read them where every "
          "guess was right",
          (long long)ahead_passes, (long long)used_when_right);
    free(scores[0]);
    free(scores[1]);
    tiny_free(target);
    tiny_free(other);
    tiny_free(near);
}

void test_assisted_drafting_ahead_changes_nothing(void) { drafting_ahead_changes_nothing(0); }

/* The same with target and drafts longrope models switching at 7 positions, which both rows pass (prompts of 4 and 2
 * tokens, 10 new): drafting ahead stops short of the draft's switch, where draft_round runs the row again whole. */
void test_assisted_drafting_ahead_changes_nothing_across_a_rope_switch(void) { drafting_ahead_changes_nothing(7); }

/* Rejection sampling runs clean (tokens in range, stats consistent) and rejects bad arguments. */
void test_assisted_rejection_runs_and_rejects_bad_args(void) {
    one_thread();
    tiny *target = tiny_build(HA_BF16, 1, 0, 0, 63), *draft = tiny_build(HA_F16, 0, 0, 0, 64);
    const int64_t N = 12;
    ha_sampling_params sp = {
        .do_sample = 1, .temperature = 1.0f, .top_k = 10, .top_p = 0.9f, .repetition_penalty = 1.0f, .seed = 5
    };
    ha_assist_params ap = { .gen = gen_params(N, sp),
                            .num_assistant_tokens = 4,
                            .schedule = HA_SCHEDULE_HEURISTIC,
                            .confidence_threshold = 0.3f,
                            .acceptance = HA_ACCEPT_REJECTION,
                            .prompt_lookup_num_tokens = 3,
                            .max_matching_ngram_size = 2 };
    int64_t proposed[12] = { 0 }, accepted[12] = { 0 };
    ha_assist_stats stats = { .proposed_at = proposed, .accepted_at = accepted };
    int32_t out[2 * 12];
    int64_t steps = -1;
    ha_llama_context *tc = ctx_new(target->m, 2, 16), *dc = ctx_new(draft->m, 2, 16);
    CHECK_OK(ha_generate_assisted(LM(tc), LM(dc), &ap, GPROMPT, GW, GSTART, out, NULL, &steps, &stats));
    CHECK(steps == N, "rejection sampling without eos: expected %lld steps, got %lld", (long long)N, (long long)steps);
    for (int i = 0; i < 2 * 12; i++)
        CHECK(out[i] >= 0 && out[i] < TV, "token %d expected in [0, %d), got %d", i, TV, out[i]);
    int64_t sum_p = 0, sum_a = 0;
    for (int j = 0; j < 12; j++) {
        CHECK(accepted[j] <= proposed[j], "position %d: accepted %lld of %lld", j, (long long)accepted[j],
              (long long)proposed[j]);
        sum_p += proposed[j];
        sum_a += accepted[j];
    }
    CHECK(sum_p == stats.num_draft_tokens && sum_a == stats.num_accepted_tokens,
          "per-position stats expected to sum to %lld proposed and %lld accepted, got %lld and %lld",
          (long long)stats.num_draft_tokens, (long long)stats.num_accepted_tokens, (long long)sum_p, (long long)sum_a);
    ha_llama_context_free(tc);
    ha_llama_context_free(dc);

    tc = ctx_new(target->m, 2, 16);
    dc = ctx_new(draft->m, 2, 16);
    ha_assist_params bad = ap;
    bad.num_assistant_tokens = 0;
    CHECK_STATUS(ha_generate_assisted(LM(tc), LM(dc), &bad, GPROMPT, GW, GSTART, out, NULL, &steps, NULL),
                 HA_ERR_INVALID);
    CHECK_MSG("num_assistant_tokens");
    bad = ap;
    bad.confidence_threshold = 1.0f;
    CHECK_STATUS(ha_generate_assisted(LM(tc), LM(dc), &bad, GPROMPT, GW, GSTART, out, NULL, &steps, NULL),
                 HA_ERR_INVALID);
    bad = ap;
    bad.prompt_lookup_num_tokens = 0;
    CHECK_STATUS(ha_generate_assisted(LM(tc), NULL, &bad, GPROMPT, GW, GSTART, out, NULL, &steps, NULL),
                 HA_ERR_INVALID);
    CHECK_MSG("prompt_lookup_num_tokens");
    ha_llama_context *one = ctx_new(draft->m, 1, 16);
    CHECK_STATUS(ha_generate_assisted(LM(tc), LM(one), &ap, GPROMPT, GW, GSTART, out, NULL, &steps, NULL),
                 HA_ERR_INVALID);
    const int32_t t1 = 1;
    CHECK_OK(append_seq(dc, 0, 1, &t1, NULL));
    CHECK_STATUS(ha_generate_assisted(LM(tc), LM(dc), &ap, GPROMPT, GW, GSTART, out, NULL, &steps, NULL),
                 HA_ERR_INVALID);
    CHECK_MSG("empty");
    CHECK(LEN(tc, 0) == 0 && LEN(tc, 1) == 0, "rejected assisted calls expected to leave the target's caches empty");
    ha_llama_context_free(one);
    ha_llama_context_free(tc);
    ha_llama_context_free(dc);
    tiny_free(target);
    tiny_free(draft);
}

/* ---- interrupts and max_time ------------------------------------------------------------------------- */

/* A poll that asks to stop at its fire-th call (never when fire < 0), counting its calls and checking that it
 * runs on the thread that set it, never on a pool worker. */
typedef struct counting_poll {
    int64_t calls, fire;
    pthread_t owner;
    int foreign; /* calls made on another thread */
} counting_poll;

static int poll_count(void *user) {
    counting_poll *cp = user;
    if (!pthread_equal(pthread_self(), cp->owner)) cp->foreign++;
    return ++cp->calls > cp->fire && cp->fire >= 0;
}

static void set_poll(counting_poll *cp, ha_interrupt *it, int64_t fire) {
    *cp = (counting_poll){ .fire = fire, .owner = pthread_self() };
    *it = (ha_interrupt){ poll_count, cp };
    ha_set_interrupt(it);
}

/* An append stopped at each of its polls in turn leaves the cache as it was; the poll is not called again
 * once it asked to stop, and the same append afterwards gives the logits of a cache that never saw it. */
void test_interrupt_stops_append_and_keeps_the_cache(void) {
    CHECK_OK(ha_set_num_threads(2));
    tiny *t = tiny_build(HA_BF16P, 1, 0, 0, 71);
    rng r = { 13 };
    int32_t first[5], more[80]; /* 80 tokens: two chunks (of 64), each polled before it and before each layer */
    random_tokens(&r, first, 5);
    random_tokens(&r, more, 80);
    float *got = xmalloc(80 * TV * sizeof(float)), *want = xmalloc(80 * TV * sizeof(float));
    ha_llama_context *ref = ctx_new(t->m, 1, 96);
    CHECK_OK(append_seq(ref, 0, 5, first, NULL));
    CHECK_OK(append_seq(ref, 0, 80, more, want));
    counting_poll cp;
    ha_interrupt it;
    int64_t fire = 0;
    for (;; fire++) {
        ha_llama_context *c = ctx_new(t->m, 1, 96);
        CHECK_OK(append_seq(c, 0, 5, first, NULL));
        set_poll(&cp, &it, fire);
        ha_status st = append_seq(c, 0, 80, more, got);
        CHECK(cp.foreign == 0, "the poll expected on the calling thread only; %d calls came from pool workers",
              cp.foreign);
        if (st == HA_OK) {
            ha_set_interrupt(NULL);
            ha_llama_context_free(c);
            break;
        }
        CHECK(st == HA_ERR_INTERRUPTED, "poll firing at call %lld: expected HA_ERR_INTERRUPTED, got %s",
              (long long)fire, status_name(st));
        CHECK_MSG("interrupted");
        CHECK(cp.calls == fire + 1, "after asking to stop, the poll expected no more calls: %lld calls for fire=%lld",
              (long long)cp.calls, (long long)fire);
        CHECK(LEN(c, 0) == 5, "an interrupted append expected to leave length 5, got %lld", (long long)LEN(c, 0));
        CHECK_STATUS(append_seq(c, 0, 1, more, got), HA_ERR_INTERRUPTED); /* still stopped until set again */
        ha_set_interrupt(NULL);
        CHECK_OK(append_seq(c, 0, 80, more, got));
        CHECK_SAME_FLOATS(want, got, 80 * TV, "append after an interrupt at poll %lld vs a cache that never saw it",
                          (long long)fire);
        ha_llama_context_free(c);
    }
    /* 2 chunks x (1 + TL layers) polls */
    CHECK(fire == 2 * (1 + TL), "an append of 2 chunks expected %d polls, counted %lld", 2 * (1 + TL), (long long)fire);
    ha_llama_context_free(ref);
    free(got);
    free(want);
    tiny_free(t);
}

/* Plain and assisted generation stop with HA_ERR_INTERRUPTED at whichever poll asks, and a poll that never
 * asks changes nothing. */
void test_interrupt_stops_generation(void) {
    CHECK_OK(ha_set_num_threads(2));
    tiny *target = tiny_build(HA_F32P, 1, 0, 0, 72), *draft = tiny_build(HA_BF16, 0, 0, 0, 73);
    const int64_t N = 10;
    ha_assist_params ap = { .gen = gen_params(N, greedy_params()),
                            .num_assistant_tokens = 3,
                            .schedule = HA_SCHEDULE_CONSTANT,
                            .acceptance = HA_ACCEPT_REJECTION,
                            .prompt_lookup_num_tokens = 3,
                            .max_matching_ngram_size = 2 };
    int32_t want[2 * 10], got[2 * 10];
    int64_t steps;
    counting_poll cp;
    ha_interrupt it;
    for (int mode = 0; mode < 3; mode++) { /* plain, assisted by a draft, prompt lookup */
        int64_t polls = -1;
        for (int64_t fire = -1;; fire++) {
            ha_llama_context *tc = ctx_new(target->m, 2, 16), *dc = ctx_new(draft->m, 2, 16);
            set_poll(&cp, &it, fire);
            ha_status st = mode == 0
                               ? ha_generate(LM(tc), &ap.gen, GPROMPT, GW, GSTART, fire < 0 ? want : got, NULL, &steps)
                               : ha_generate_assisted(LM(tc), mode == 1 ? LM(dc) : NULL, &ap, GPROMPT, GW, GSTART,
                                                      fire < 0 ? want : got, NULL, &steps, NULL);
            ha_set_interrupt(NULL);
            ha_llama_context_free(tc);
            ha_llama_context_free(dc);
            CHECK(cp.foreign == 0, "mode %d: the poll expected on the calling thread only; %d foreign calls", mode,
                  cp.foreign);
            if (fire < 0) { /* the reference run: counts the polls */
                CHECK(st == HA_OK, "mode %d: a poll that never asks expected HA_OK, got %s", mode, status_name(st));
                polls = cp.calls;
                CHECK(polls > N, "mode %d: expected more than %lld polls over %lld tokens, got %lld", mode,
                      (long long)N, (long long)N, (long long)polls);
                continue;
            }
            if (st == HA_OK) {
                CHECK(fire == polls,
                      "mode %d: expected every one of the %lld polls to stop the generation, but firing at "
                      "call %lld did not",
                      mode, (long long)polls, (long long)fire);
                CHECK(memcmp(want, got, sizeof want) == 0, "mode %d: tokens differ once the poll no longer fires",
                      mode);
                break;
            }
            CHECK(st == HA_ERR_INTERRUPTED, "mode %d, poll firing at call %lld: expected HA_ERR_INTERRUPTED, got %s",
                  mode, (long long)fire, status_name(st));
            CHECK(cp.calls == fire + 1, "mode %d: the poll expected no calls after asking to stop (%lld for fire=%lld)",
                  mode, (long long)cp.calls, (long long)fire);
        }
    }
    tiny_free(target);
    tiny_free(draft);
}

/* max_time: no step starts once it has passed; the tokens so far come back with HA_OK (a prefix of the full
 * output, each row with at least its first token); negative or NaN is refused. */
void test_generate_max_time_returns_the_tokens_so_far(void) {
    one_thread();
    tiny *target = tiny_build(HA_F32, 1, 0, 0, 74), *draft = tiny_build(HA_F16, 0, 0, 0, 75);
    const int64_t N = 10;
    ha_assist_params ap = { .gen = gen_params(N, greedy_params()),
                            .num_assistant_tokens = 2,
                            .schedule = HA_SCHEDULE_CONSTANT,
                            .acceptance = HA_ACCEPT_REJECTION,
                            .prompt_lookup_num_tokens = 3,
                            .max_matching_ngram_size = 2 };
    int32_t full[2 * 10], got[2 * 10];
    int64_t steps;
    for (int mode = 0; mode < 2; mode++) {
        ha_llama_context *tc = ctx_new(target->m, 2, 16), *dc = ctx_new(draft->m, 2, 16);
        ap.gen.max_time = 0.0;
        CHECK_OK(mode == 0 ? ha_generate(LM(tc), &ap.gen, GPROMPT, GW, GSTART, full, NULL, &steps)
                           : ha_generate_assisted(LM(tc), LM(dc), &ap, GPROMPT, GW, GSTART, full, NULL, &steps, NULL));
        ha_llama_context_free(tc);
        ha_llama_context_free(dc);
        tc = ctx_new(target->m, 2, 16);
        dc = ctx_new(draft->m, 2, 16);
        ap.gen.max_time = 1e-300; /* passed before the first step ends */
        CHECK_OK(mode == 0 ? ha_generate(LM(tc), &ap.gen, GPROMPT, GW, GSTART, got, NULL, &steps)
                           : ha_generate_assisted(LM(tc), LM(dc), &ap, GPROMPT, GW, GSTART, got, NULL, &steps, NULL));
        /* plain: one step; assisted: one round per row (its accepted drafts and the target's token) */
        CHECK(steps >= 1 && steps <= (mode == 0 ? 1 : 3),
              "mode %d: max_time passed at once: expected 1..%d steps, got %lld", mode, mode == 0 ? 1 : 3,
              (long long)steps);
        for (int b = 0; b < 2; b++) {
            CHECK(got[b * N] == full[b * N], "mode %d row %d: the first token expected %d, got %d", mode, b,
                  full[b * N], got[b * N]);
            int64_t j = 0;
            while (j < N && got[b * N + j] == full[b * N + j]) j++;
            for (; j < N; j++)
                CHECK(got[b * N + j] == -7, "mode %d row %d: after the prefix expected padding at %lld, got %d", mode,
                      b, (long long)j, got[b * N + j]);
        }
        ha_llama_context_free(tc);
        ha_llama_context_free(dc);
        tc = ctx_new(target->m, 2, 16);
        for (int k = 0; k < 2; k++) {
            ap.gen.max_time = k == 0 ? -1.0 : NAN;
            CHECK_STATUS(ha_generate(LM(tc), &ap.gen, GPROMPT, GW, GSTART, got, NULL, &steps), HA_ERR_INVALID);
            CHECK_MSG("max_time");
        }
        ha_llama_context_free(tc);
    }
    tiny_free(target);
    tiny_free(draft);
}
