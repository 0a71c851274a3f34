#include "test_core.h"

/* ---- 1. kernels against double precision ------------------------------------------------------------ */

void test_kernels_matmul_matches_double(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    rng r = { 1 };
    const int64_t T = 3;
    for (int v = 0; v < nk; v++)
        for (int dt = 0; dt < HA_NDTYPES; dt++)
            for (size_t a = 0; a < COUNT(KN); a++)
                for (size_t b = 0; b < COUNT(KR); b++) {
                    /* rows [1, R + 1) of a (R + 1, n) matrix, into Y (T, ldy) with ldy > R + 1 */
                    const int64_t n = KN[a], R = KR[b], rows = R + 1, r0 = 1, r1 = R + 1, ldy = rows + 3;
                    double *wv = xmalloc((size_t)(rows * n) * sizeof(double));
                    void *W = make_weights((ha_dtype)dt, rows, n, &r, 1.0, 1, wv);
                    float *X = make_floats((size_t)(T * n), &r, -1.0, 1.0);
                    /* the activations the kernel multiplies: X, or for integer weights X quantized (checked on
                     * its own in test_quant_act_variants_match_the_reference) */
                    double *xv = xmalloc((size_t)(T * n) * sizeof(double));
                    int16_t *q = xmalloc((size_t)ha_act_width(n) * sizeof *q);
                    char *q8 = xmalloc(ha_row_bytes(HA_Q8, n));
                    int32_t xsum[16];
                    for (int64_t t = 0; t < T; t++) {
                        float qs = 1.0f;
                        if (ha_dtype_is_int((ha_dtype)dt)) ha_quant_act_ref(X + t * n, n, q, &qs);
                        if (dt == HA_Q8P) ha_quant_act8(ha_quant_q8_sum_ref, X + t * n, n, q8, xsum);
                        for (int64_t i = 0; i < n; i++)
                            xv[t * n + i] = dt == HA_BF16X                  ? bf16_value(ha_bf16_round(X[t * n + i]))
                                            : dt == HA_Q8P                  ? ha_q8_at(q8, i)
                                            : ha_dtype_is_int((ha_dtype)dt) ? (double)q[i] * qs
                                                                            : (double)X[t * n + i];
                    }
                    free(q);
                    free(q8);
                    float *Y = xmalloc((size_t)(T * ldy) * sizeof(float));
                    for (int64_t i = 0; i < T * ldy; i++) Y[i] = bits_f(SENTINEL);
                    run_matmul(ks[v], (ha_dtype)dt, W, n, r0, r1, X, T, Y, ldy);
                    for (int64_t t = 0; t < T; t++)
                        for (int64_t c = 0; c < ldy; c++) {
                            float y = Y[t * ldy + c];
                            if (c < r0 || c >= r1) {
                                CHECK(fbits(y) == SENTINEL,
                                      "%s matmul %s n=%lld rows [%lld,%lld): expected Y[%lld, %lld] "
                                      "(outside the row range) untouched, got %g",
                                      kn[v], dname((ha_dtype)dt), (long long)n, (long long)r0, (long long)r1,
                                      (long long)t, (long long)c, (double)y);
                                continue;
                            }
                            double ref = 0.0, mag = 0.0;
                            for (int64_t i = 0; i < n; i++) {
                                ref += wv[c * n + i] * xv[t * n + i];
                                mag += fabs(wv[c * n + i] * xv[t * n + i]);
                            }
                            CHECK(fabs((double)y - ref) <= 1e-5 * mag,
                                  "%s matmul %s n=%lld R=%lld: Y[%lld, %lld] expected %.10g (double) within %.3g, got "
                                  "%.10g",
                                  kn[v], dname((ha_dtype)dt), (long long)n, (long long)R, (long long)t, (long long)c,
                                  ref, 1e-5 * mag, (double)y);
                        }
                    free(wv);
                    free(W);
                    free(X);
                    free(xv);
                    free(Y);
                }
}

static void check_converted(const char *what, const uint16_t *src, const float *got, int64_t n, int f16) {
    for (int64_t i = 0; i < n; i++) {
        float want = f16 ? ha_f16_to_f32(src[i]) : bits_f((uint32_t)src[i] << 16);
        if (f16 && isnan(want)) {
            /* a NaN stays a NaN of the same sign (hardware may quiet a signalling payload) */
            CHECK(isnan(got[i]) && signbit(got[i]) == signbit(want),
                  "%s: half 0x%04x expected a NaN of sign %d, got %g (0x%08x)", what, src[i], signbit(want) != 0,
                  (double)got[i], fbits(got[i]));
            continue;
        }
        CHECK(fbits(got[i]) == fbits(want), "%s: 0x%04x expected %.9g (0x%08x), got %.9g (0x%08x)", what, src[i],
              (double)want, fbits(want), (double)got[i], fbits(got[i]));
    }
}

void test_kernels_to_f32_exact(void) {
    /* the scalar half decoder against an independent ldexp decoder, on every bit pattern */
    for (uint32_t h = 0; h < 65536; h++) {
        float got = ha_f16_to_f32((uint16_t)h);
        double want = half_value((uint16_t)h);
        if (isnan(want)) {
            CHECK(isnan(got) && (signbit(got) != 0) == ((h & 0x8000) != 0),
                  "ha_f16_to_f32(0x%04x): expected NaN, got %g", h, (double)got);
        } else {
            CHECK(fbits(got) == fbits((float)want), "ha_f16_to_f32(0x%04x): expected %.9g (0x%08x), got %.9g (0x%08x)",
                  h, want, fbits((float)want), (double)got, fbits(got));
        }
    }
    CHECK(fbits(ha_f16_to_f32(0x8000)) == 0x80000000u, "ha_f16_to_f32(-0) expected -0.0, got 0x%08x",
          fbits(ha_f16_to_f32(0x8000)));
    CHECK(ha_f16_to_f32(0x0001) == 0x1p-24f, "smallest subnormal half expected 2^-24, got %g",
          (double)ha_f16_to_f32(1));
    CHECK(ha_f16_to_f32(0x7bff) == 65504.0f, "largest half expected 65504, got %g", (double)ha_f16_to_f32(0x7bff));
    CHECK(ha_f16_to_f32(0xfc00) == -INFINITY, "half 0xfc00 expected -inf, got %g", (double)ha_f16_to_f32(0xfc00));

    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    uint16_t *all = xmalloc(65536 * sizeof(uint16_t));
    for (uint32_t h = 0; h < 65536; h++) all[h] = (uint16_t)h;
    float *out = xmalloc(65536 * sizeof(float));
    char what[128];
    for (int v = 0; v < nk; v++)
        for (int f16 = 0; f16 < 2; f16++) {
            ha_dtype dt = f16 ? HA_F16 : HA_BF16;
            /* whole, shifted by one (each pattern in another lane and the tail), and short lengths */
            snprintf(what, sizeof what, "%s to_f32 %s, all 65536 patterns", kn[v], dname(dt));
            ks[v]->to_f32[dt](all, out, 65536);
            check_converted(what, all, out, 65536, f16);
            snprintf(what, sizeof what, "%s to_f32 %s, patterns 1..65535", kn[v], dname(dt));
            ks[v]->to_f32[dt](all + 1, out, 65535);
            check_converted(what, all + 1, out, 65535, f16);
            for (int64_t n = 1; n <= 17; n++)
                for (int64_t off = 0; off < 65536 - n; off += 4093) {
                    snprintf(what, sizeof what, "%s to_f32 %s, n=%lld from 0x%04llx", kn[v], dname(dt), (long long)n,
                             (long long)off);
                    uint16_t *src = xmalloc((size_t)n * 2);
                    float *dst = xmalloc((size_t)n * sizeof(float));
                    memcpy(src, all + off, (size_t)n * 2);
                    ks[v]->to_f32[dt](src, dst, n);
                    check_converted(what, src, dst, n, f16);
                    free(src);
                    free(dst);
                }
        }
    /* float32: a copy, bit for bit (zeros, subnormals, infinities included) */
    rng r = { 2 };
    for (int v = 0; v < nk; v++)
        for (size_t a = 0; a < COUNT(KN); a++) {
            int64_t n = KN[a];
            float *src = xmalloc((size_t)n * sizeof(float)), *dst = xmalloc((size_t)n * sizeof(float));
            for (int64_t i = 0; i < n; i++) {
                uint32_t u = (uint32_t)rng_next(&r);
                if ((u & 0x7f800000u) == 0x7f800000u) u &= ~0x007fffffu; /* inf, not NaN */
                src[i] = bits_f(u);
            }
            if (n > 2) {
                src[0] = -0.0f;
                src[1] = 0x1p-149f;
                src[2] = -INFINITY;
            }
            ks[v]->to_f32[HA_F32](src, dst, n);
            snprintf(what, sizeof what, "%s to_f32 f32 n=%lld", kn[v], (long long)n);
            CHECK_SAME_FLOATS(src, dst, (size_t)n, "%s", what);
            free(src);
            free(dst);
        }
    free(all);
    free(out);
}

void test_kernels_dot_axpy_scale_match_double(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    rng r = { 3 };
    for (int v = 0; v < nk; v++)
        for (size_t s = 0; s < COUNT(KN); s++) {
            const int64_t n = KN[s];
            float *a = make_floats((size_t)n, &r, -2.0, 2.0), *b = make_floats((size_t)n, &r, -2.0, 2.0);
            double ref = 0.0, mag = 0.0;
            for (int64_t i = 0; i < n; i++) {
                ref += (double)a[i] * b[i];
                mag += fabs((double)a[i] * b[i]);
            }
            float d = ks[v]->dot(a, b, n);
            CHECK(fabs((double)d - ref) <= 1e-5 * mag, "%s dot n=%lld: expected %.10g within %.3g, got %.10g", kn[v],
                  (long long)n, ref, 1e-5 * mag, (double)d);

            float *y = make_floats((size_t)n, &r, -2.0, 2.0), *y0 = xmalloc((size_t)n * sizeof(float));
            memcpy(y0, y, (size_t)n * sizeof(float));
            const float alpha = 0.7371f;
            ks[v]->axpy(alpha, a, y, n);
            for (int64_t i = 0; i < n; i++) {
                double ax = (double)alpha * a[i], want = (double)y0[i] + ax;
                CHECK(fabs((double)y[i] - want) <= 0x1p-23 * (fabs(want) + 2.0 * fabs(ax)),
                      "%s axpy n=%lld: y[%lld] expected %.10g, got %.10g", kn[v], (long long)n, (long long)i, want,
                      (double)y[i]);
            }
            memcpy(y, y0, (size_t)n * sizeof(float));
            const float beta = -1.3125e-3f;
            ks[v]->scale(beta, y, n);
            for (int64_t i = 0; i < n; i++) {
                float want = (float)((double)beta * y0[i]); /* the exact product, rounded once */
                CHECK(fbits(y[i]) == fbits(want), "%s scale n=%lld: y[%lld] expected %.9g, got %.9g", kn[v],
                      (long long)n, (long long)i, (double)want, (double)y[i]);
            }
            free(a);
            free(b);
            free(y);
            free(y0);
        }
    /* n = 0 is a no-op */
    for (int v = 0; v < nk; v++) {
        float one = 1.0f;
        CHECK(ks[v]->dot(&one, &one, 0) == 0.0f, "%s dot of length 0 expected 0", kn[v]);
        ks[v]->axpy(2.0f, &one, &one, 0);
        ks[v]->scale(2.0f, &one, 0);
        CHECK(one == 1.0f, "%s axpy/scale of length 0 expected to write nothing, got %g", kn[v], (double)one);
    }
}

/* kernels.h's 8-lane dot product of a (n,) and b (n,), spelled out here apart from the kernels. */
static float dot8_definition(const float *a, const float *b, int64_t n) {
    const int64_t nv = n - n % 8;
    float lane[8] = { 0 };
    for (int64_t i = 0; i < nv; i++) lane[i % 8] = fmaf(a[i], b[i], lane[i % 8]);
    float s = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
    for (int64_t i = nv; i < n; i++) {
        const float p = a[i] * b[i];
        s = s + p;
    }
    return s;
}

/* The float sums over row-major data, in every variant bitwise kernels.h's definitions spelled out (the 8-lane
 * dot product, the axpy update): dot, axpy, and matmul with row-major float32, bfloat16 and float16 weights over
 * every tile shape of the vector kernels (T = 1 .. 7, 13; one token's four quarters of a range and ranges of fewer
 * than four rows), lengths with and without a tail past the last 8, values across many binades (wide weights). */
void test_kernels_float_sums_bitwise_their_definition(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    rng r = { 5 };
    static const int64_t FT[] = { 1, 2, 3, 4, 5, 6, 7, 13 };
    static const int64_t FR[][3] = { /* rows, r0, r1 */ { 1, 0, 1 }, { 3, 1, 3 }, { 9, 1, 9 }, { 22, 3, 21 } };
    for (size_t a = 0; a < COUNT(KN); a++) {
        const int64_t n = KN[a];
        float *x = make_floats((size_t)n, &r, -2.0, 2.0), *y = make_floats((size_t)n, &r, -2.0, 2.0);
        float *want = xmalloc((size_t)n * sizeof(float)), *got = xmalloc((size_t)n * sizeof(float));
        const float alpha = -0.3713f;
        for (int64_t i = 0; i < n; i++) {
            const float p = alpha * x[i];
            want[i] = i < n - n % 8 ? fmaf(alpha, x[i], y[i]) : y[i] + p;
        }
        for (int v = 0; v < nk; v++) {
            const float d = ks[v]->dot(x, y, n), dw = dot8_definition(x, y, n);
            CHECK(fbits(d) == fbits(dw), "%s dot n=%lld: expected the 8-lane definition's %.9g, got %.9g", kn[v],
                  (long long)n, (double)dw, (double)d);
            memcpy(got, y, (size_t)n * sizeof(float));
            ks[v]->axpy(alpha, x, got, n);
            CHECK_SAME_FLOATS(want, got, (size_t)n, "%s axpy n=%lld against the axpy update's definition", kn[v],
                              (long long)n);
        }
        free(x);
        free(y);
        free(want);
        free(got);
    }
    for (int dt = HA_F32; dt <= HA_F16; dt++)
        for (size_t a = 0; a < COUNT(KN); a++)
            for (size_t b = 0; b < COUNT(FR); b++) {
                const int64_t n = KN[a], rows = FR[b][0], r0 = FR[b][1], r1 = FR[b][2], ldy = rows + 1, T = 13;
                double *wv = xmalloc((size_t)(rows * n) * sizeof(double));
                void *W = make_weights((ha_dtype)dt, rows, n, &r, 1.0, (int)(a % 2), wv);
                float *wf = xmalloc((size_t)(rows * n) * sizeof(float)); /* the weights as float32: exact */
                for (int64_t i = 0; i < rows * n; i++) wf[i] = (float)wv[i];
                float *X = make_floats((size_t)(T * n), &r, -1.0, 1.0);
                float *want = xmalloc((size_t)(T * ldy) * sizeof(float)),
                      *got = xmalloc((size_t)(T * ldy) * sizeof(float));
                for (int64_t t = 0; t < T; t++)
                    for (int64_t c = 0; c < ldy; c++)
                        want[t * ldy + c] = c >= r0 && c < r1 ? dot8_definition(wf + c * n, X + t * n, n)
                                                              : bits_f(SENTINEL);
                for (int v = 0; v < nk; v++)
                    for (size_t c = 0; c < COUNT(FT); c++) {
                        const int64_t Tc = FT[c];
                        for (int64_t i = 0; i < T * ldy; i++) got[i] = bits_f(SENTINEL);
                        ks[v]->matmul[dt](W, n, r0, r1, X, Tc, got, ldy);
                        CHECK_SAME_FLOATS(want, got, (size_t)(Tc * ldy),
                                          "%s %s n=%lld T=%lld rows [%lld, %lld) of %lld against the 8-lane definition",
                                          kn[v], dname((ha_dtype)dt), (long long)n, (long long)Tc, (long long)r0,
                                          (long long)r1, (long long)rows);
                    }
                free(wv);
                free(W);
                free(wf);
                free(X);
                free(want);
                free(got);
            }
}

/* Attention's block kernels against the variant's own dot and axpy key by key, bitwise (their contract):
 * several queries at once (the heads of a kv group, or a verification's tokens times them; AVX-512's values take
 * heads four at a time, 5 and 8 give a remainder and two full tiles; its scores take up to 16 queries four at a time
 * with the keys' pairs in registers, more through an array of them: 17 and 20), key counts around the four (AVX2) and sixteen (AVX-512) keys scored together,
 * head sizes with and without a tail past the last 8 or 16 (and 128 and 136: two tiles of 64 columns), and
 * blocks that wrap around the end of a ring of slots. */
void test_kernels_attention_blocks_equal_dot_axpy(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk_ = kernel_variants(ks, kn);
    rng r = { 11 };
    const int64_t NS[] = { 8, 12, 16, 40, 64, 72, 128, 136 }, NQ[] = { 1, 2, 3, 5, 8, 17, 20 },
                  NKEYS[] = { 1, 3, 4, 7, 13, 16, 17, 33 }, S = 37, lds = 40;
    for (int v = 0; v < nk_; v++)
        for (size_t a = 0; a < COUNT(NS); a++)
            for (size_t b = 0; b < COUNT(NQ); b++)
                for (size_t c = 0; c < COUNT(NKEYS); c++) {
                    const int64_t n = NS[a], nq = NQ[b], nk = NKEYS[c], ld = n + 3, qs = n + 1;
                    const int64_t slot0 = c % 2 ? 30 : 21; /* 21: the 16th key at the ring's last slot */
                    const float scale = 0.125f;
                    float *q = make_floats((size_t)(nq * qs), &r, -2.0, 2.0),
                          *K = make_floats((size_t)(S * ld), &r, -2.0, 2.0);
                    float *sc = make_floats((size_t)(nq * lds), &r, -1.0, 1.0);
                    ks[v]->attn_scores(q, nq, qs, K, ld, slot0, S, nk, n, scale, sc, lds);
                    for (int64_t i = 0; i < nq; i++)
                        for (int64_t t = 0; t < nk; t++) {
                            const float want = ks[v]->dot(q + i * qs, K + (slot0 + t) % S * ld, n) * scale;
                            CHECK(fbits(sc[i * lds + t]) == fbits(want),
                                  "%s attn_scores n=%lld nq=%lld nk=%lld: s[%lld][%lld] expected %.9g (dot), got %.9g",
                                  kn[v], (long long)n, (long long)nq, (long long)nk, (long long)i, (long long)t,
                                  (double)want, (double)sc[i * lds + t]);
                        }
                    /* values: the nq heads' weights nk + 2 apart, their accumulators n + 5 apart (the gaps must
                     * stay as they were) */
                    const int64_t ldw = nk + 2, lda = n + 5;
                    float *w = make_floats((size_t)(nq * ldw), &r, 0.0, 1.0),
                          *acc = make_floats((size_t)(nq * lda), &r, -1.0, 1.0);
                    float *want = xmalloc((size_t)(nq * lda) * sizeof(float));
                    memcpy(want, acc, (size_t)(nq * lda) * sizeof(float));
                    for (int64_t h = 0; h < nq; h++)
                        for (int64_t t = 0; t < nk; t++)
                            ks[v]->axpy(w[h * ldw + t], K + (slot0 + t) % S * ld, want + h * lda, n);
                    ks[v]->attn_values(w, ldw, nq, K, ld, slot0, S, nk, n, acc, lda);
                    for (int64_t i = 0; i < nq * lda; i++)
                        CHECK(fbits(acc[i]) == fbits(want[i]),
                              "%s attn_values n=%lld nq=%lld nk=%lld: acc[%lld] expected %.9g (axpy), got %.9g", kn[v],
                              (long long)n, (long long)nq, (long long)nk, (long long)i, (double)want[i],
                              (double)acc[i]);
                    free(q);
                    free(K);
                    free(sc);
                    free(w);
                    free(acc);
                    free(want);
                }
}

/* The forward's one exponential: ha_expf is glibc's expf (where glibc's FMA build is the one expf runs: it was
 * what the forward called before; exhaustively equal on Debian 12, here a sweep of every 16411th float and
 * the edges of its special cases), its table is 2^(i/32), and every variant's exp_shift and silu give it
 * bitwise, specials inside vector blocks and tails included. */
void test_kernels_exp_bitwise_ha_expf(void) {
    for (int i = 0; i < 32; i++) {
        const double want = (double)powl(2.0L, (long double)i / 32.0L);
        uint64_t w, got = HA_EXP2_TAB[i] + ((uint64_t)i << 47);
        memcpy(&w, &want, sizeof w);
        CHECK(got == w, "HA_EXP2_TAB[%d] + (%d << 47): expected the bits of 2^(%d/32) %016llx, got %016llx", i, i, i,
              (unsigned long long)w, (unsigned long long)got);
    }
    /* inputs: a vector block of each of the two floats (found by an exhaustive search) whose result changes
     * when the reduction r = x * 32 / ln 2 - k is not one fused multiply-add (the other fused steps change no
     * result) and of their negations (for silu), then the sweep, then the special cases' edges and neighbours */
    static const uint32_t HARD[] = { 0x4202422fu, 0xc27c65d9u, 0xc202422fu, 0x427c65d9u };
    static const uint32_t EDGES[] = { 0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
                                      0x42b00000u, 0xc2b00000u, 0x42b17217u, 0x42b17218u, 0xc2cff1b4u, 0xc2cff1b5u,
                                      0xc2ce8ecfu, 0xc2ce8ed0u, 0x00000001u, 0x3f800000u, 0xbf800000u, 0xc2aeac50u };
    const size_t n_hard = 8 * COUNT(HARD), n_sweep = (size_t)(0xffffffffu / 16411u) + 1;
    const size_t n = n_hard + n_sweep + 3 * COUNT(EDGES);
    float *x = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n_hard; i++) x[i] = bits_f(HARD[i / 8]);
    for (size_t i = 0; i < n_sweep; i++) x[n_hard + i] = bits_f((uint32_t)(i * 16411u));
    for (size_t i = 0; i < COUNT(EDGES); i++)
        for (int d = -1; d <= 1; d++) x[n_hard + n_sweep + 3 * i + (size_t)(d + 1)] = bits_f(EDGES[i] + (uint32_t)d);
#if defined(__GLIBC__) && (defined(__x86_64__) || defined(__i386__))
    if (__builtin_cpu_supports("fma"))
        for (size_t i = 0; i < n; i++) {
            const float a = ha_expf(x[i]), e = expf(x[i]);
            CHECK(fbits(a) == fbits(e) || (isnan(a) && isnan(e)), "ha_expf(%a) = %a, glibc's expf gives %a",
                  (double)x[i], (double)a, (double)e);
        }
#endif
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    const int nk = kernel_variants(ks, kn);
    float *s = xmalloc(n * sizeof(float)), *up = xmalloc(n * sizeof(float)), *g = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) up[i] = x[(i * 7919u) % n];
    for (int v = 0; v < nk; v++) {
        /* the hard blocks, pieces of every length up to 19 (tails, blocks with a special lane), the rest at once */
        static const float M[] = { 0.0f, 3.5f, -INFINITY };
        for (size_t mi = 0; mi < COUNT(M); mi++) {
            memcpy(s, x, n * sizeof(float));
            for (size_t at = 0, len = n_hard; at < n; at += len, len = len < 19 ? len + 1 : n - at)
                ks[v]->exp_shift(s + at, (int64_t)len, M[mi]);
            for (size_t i = 0; i < n; i++) {
                const float want = ha_expf(x[i] - M[mi]);
                CHECK(fbits(s[i]) == fbits(want) || (isnan(s[i]) && isnan(want)),
                      "%s exp_shift(%a - %g) = %a, ha_expf gives %a", kn[v], (double)x[i], (double)M[mi], (double)s[i],
                      (double)want);
            }
        }
        for (int gated = 0; gated < 2; gated++) {
            memcpy(g, x, n * sizeof(float));
            for (size_t at = 0, len = n_hard; at < n; at += len, len = len < 19 ? len + 1 : n - at)
                ks[v]->silu(g + at, gated ? up + at : NULL, (int64_t)len);
            for (size_t i = 0; i < n; i++) {
                const float a = x[i] / (1.0f + ha_expf(-x[i])), want = gated ? a * up[i] : a;
                CHECK(fbits(g[i]) == fbits(want) || (isnan(g[i]) && isnan(want)), "%s silu(%a)%s = %a, expected %a",
                      kn[v], (double)x[i], gated ? " * up" : "", (double)g[i], (double)want);
            }
        }
    }
    free(x);
    free(s);
    free(up);
    free(g);
}

/* ---- 2. batch invariance of the kernels -------------------------------------------------------------- */

void test_kernels_matmul_batch_invariant(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    rng r = { 4 };
    /* chunk sizes: every tile width of the AVX2 kernels and their mixes (3 + 2, 3 + 3 + 2, ...), and a long one */
    static const int64_t KT[] = { 2, 3, 4, 5, 8, 13, 40 };
    const int64_t rows = 12, r0 = 1, r1 = 11, ldy = rows;
    for (int v = 0; v < nk; v++)
        for (int dt = 0; dt < HA_NDTYPES; dt++)
            for (size_t c = 0; c < COUNT(KN) * COUNT(KT); c++) {
                const int64_t n = KN[c / COUNT(KT)], T = KT[c % COUNT(KT)];
                void *W = make_weights((ha_dtype)dt, rows, n, &r, 1.0, 0, NULL);
                float *X = make_floats((size_t)(T * n), &r, -1.0, 1.0);
                float *full = xcalloc((size_t)(T * ldy), sizeof(float)),
                      *part = xcalloc((size_t)(T * ldy), sizeof(float));
                run_matmul(ks[v], (ha_dtype)dt, W, n, r0, r1, X, T, full, ldy);
                for (int64_t t = 0; t < T; t++) /* rows outside [r0, r1) untouched (still calloc's zeros) */
                    CHECK(fbits(full[t * ldy]) == 0 && fbits(full[t * ldy + ldy - 1]) == 0,
                          "%s %s n=%lld T=%lld: token %lld wrote outside rows [%lld, %lld)", kn[v], dname((ha_dtype)dt),
                          (long long)n, (long long)T, (long long)t, (long long)r0, (long long)r1);
                /* one token at a time */
                for (int64_t t = 0; t < T; t++) {
                    float one[12];
                    run_matmul(ks[v], (ha_dtype)dt, W, n, r0, r1, X + t * n, 1, one, ldy);
                    CHECK_SAME_FLOATS(full + t * ldy + r0, one + r0, (size_t)(r1 - r0),
                                      "%s %s n=%lld: token %lld alone vs in a chunk of %lld", kn[v],
                                      dname((ha_dtype)dt), (long long)n, (long long)t, (long long)T);
                }
                /* one row at a time */
                for (int64_t rr = r0; rr < r1; rr++) {
                    run_matmul(ks[v], (ha_dtype)dt, W, n, rr, rr + 1, X, T, part, ldy);
                    for (int64_t t = 0; t < T; t++)
                        CHECK_SAME_FLOATS(full + t * ldy + rr, part + t * ldy + rr, 1,
                                          "%s %s n=%lld: row %lld alone, token %lld", kn[v], dname((ha_dtype)dt),
                                          (long long)n, (long long)rr, (long long)t);
                }
                /* [r0, mid) + [mid, r1) at every split */
                for (int64_t mid = r0; mid <= r1; mid++) {
                    memset(part, 0, (size_t)(T * ldy) * sizeof(float));
                    run_matmul(ks[v], (ha_dtype)dt, W, n, r0, mid, X, T, part, ldy);
                    run_matmul(ks[v], (ha_dtype)dt, W, n, mid, r1, X, T, part, ldy);
                    for (int64_t t = 0; t < T; t++)
                        CHECK_SAME_FLOATS(full + t * ldy + r0, part + t * ldy + r0, (size_t)(r1 - r0),
                                          "%s %s n=%lld: rows split at %lld, token %lld", kn[v], dname((ha_dtype)dt),
                                          (long long)n, (long long)mid, (long long)t);
                }
                free(W);
                free(X);
                free(full);
                free(part);
            }
}

/* The bf16-pairs class (formats.h): the native vdpbf16ps (where the CPU has AVX512_BF16), the avx512 table's
 * emulation compiled natively, and every variant give the scalar reference's bits, NaN payloads included, for
 * chunks of 1 to 64 tokens, row ranges cutting panels, odd n, and activations holding subnormals, NaN, inf and
 * values whose products land at FLT_MIN (the rule where fmaf and the instruction differ). The reference itself is
 * checked against vdpbf16ps lane by lane where the CPU has it. */
void test_kernels_bf16x_bitwise_across_variants(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    ha_matmul_bf16x_fn extra[2] = { ha_avx512_bf16x_kernel(1), ha_avx512_bf16x_kernel(0) };
    static const char *const extra_name[2] = { "avx512 vdpbf16ps", "avx512 emulation" };
    if (!extra[0]) printf("vdpbf16ps unavailable: the reference is checked against the emulations only\n");
    rng r = { 11 };
    static const int64_t WN[] = { 1, 2, 3, 31, 64, 65, 200, 513 };
    static const int64_t WT[] = { 1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 33, 64 };
    const int64_t rows = 53, ldy = rows;
    static const int64_t R0[] = { 0, 5, 16, 17 }, R1[] = { 53, 48, 33, 18 };
    for (size_t a = 0; a < COUNT(WN); a++) {
        const int64_t n = WN[a];
        void *W = make_weights(HA_BF16X, rows, n, &r, 1.0, 1, NULL);
        for (size_t b = 0; b < COUNT(WT); b++) {
            const int64_t T = WT[b];
            float *X = make_floats((size_t)(T * n), &r, -4.0, 4.0);
            for (int64_t i = 0; i < T * n; i += 1 + rng_int(&r, 7)) /* specials: subnormal, huge, tiny, NaN, inf */
                switch (rng_int(&r, 6)) {
                case 0: X[i] = bits_f(0x00012345u | (rng_int(&r, 2) ? 0x80000000u : 0)); break;
                case 1: X[i] = ldexpf(X[i], 120); break;
                case 2: X[i] = ldexpf(X[i], -120); break;
                case 3: X[i] = ldexpf(1.0f, -63 - rng_int(&r, 3)) * (rng_int(&r, 2) ? 1.0f : -1.0f); break;
                case 4:
                    if (T > 2 && i / n == 1) X[i] = NAN;
                    break;
                default:
                    if (T > 2 && i / n == 2) X[i] = -INFINITY;
                    break;
                }
            float *ref = xcalloc((size_t)(T * ldy), sizeof(float)), *got = xcalloc((size_t)(T * ldy), sizeof(float));
            const int64_t steps = (n + 1) / 2;
            uint32_t *xb = xmalloc((size_t)(T * steps) * sizeof *xb);
            for (int64_t t = 0; t < T; t++) ha_round_act_bf16(X + t * n, n, xb + t * steps);
            for (size_t c = 0; c < COUNT(R0); c++) {
                run_matmul(ks[0], HA_BF16X, W, n, R0[c], R1[c], X, T, ref, ldy);
                for (int v = 1; v < nk + 2; v++) {
                    if (v >= nk && !extra[v - nk]) continue;
                    const char *name = v < nk ? kn[v] : extra_name[v - nk];
                    memset(got, 0, (size_t)(T * ldy) * sizeof(float));
                    if (v < nk) run_matmul(ks[v], HA_BF16X, W, n, R0[c], R1[c], X, T, got, ldy);
                    else extra[v - nk](W, n, R0[c], R1[c], xb, T, got, ldy);
                    for (int64_t t = 0; t < T; t++) {
                        CHECK_SAME_FLOATS(ref + t * ldy + R0[c], got + t * ldy + R0[c], (size_t)(R1[c] - R0[c]),
                                          "bf16 pairs %s vs scalar n=%lld T=%lld rows [%lld, %lld) token %lld", name,
                                          (long long)n, (long long)T, (long long)R0[c], (long long)R1[c], (long long)t);
                        CHECK(R0[c] == 0 || fbits(got[t * ldy + R0[c] - 1]) == 0, "bf16 pairs %s: wrote below row %lld",
                              name, (long long)R0[c]);
                        CHECK(R1[c] == rows || fbits(got[t * ldy + R1[c]]) == 0, "bf16 pairs %s: wrote at row %lld",
                              name, (long long)R1[c]);
                    }
                }
            }
            free(xb);
            free(X);
            free(ref);
            free(got);
        }
        free(W);
    }
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bf16"))) static void native_lanes(const float *acc, const uint32_t *a,
                                                                       const uint32_t *b, float *out) {
    _mm512_storeu_ps(out, _mm512_dpbf16_ps(_mm512_loadu_ps(acc), (__m512bh)_mm512_loadu_si512(a),
                                           (__m512bh)_mm512_loadu_si512(b)));
}
__attribute__((target("avx512f,avx512bf16"))) static void native_round(const float *x, uint16_t *out) {
    _mm256_storeu_si256((__m256i *)out, (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x)));
}
#endif

/* formats.h's lane (ha_bf16x_lane) and rounding (ha_bf16_round) against the instructions, where the CPU has them:
 * random bit patterns weighted toward subnormals, infinities, NaN payloads, cancellations and sums at FLT_MIN. */
void test_bf16x_reference_is_the_instruction(void) {
#if defined(__x86_64__)
    if (!ha_cpu_has_avx512_bf16()) {
        printf("no AVX512_BF16: nothing to compare against\n");
        return;
    }
    rng r = { 12 };
    for (int it = 0; it < 200000; it++) {
        float acc[16], out[16], x[16];
        uint32_t a[16], b[16];
        uint16_t rb[16];
        for (int i = 0; i < 16; i++) {
            uint32_t h[4];
            for (int j = 0; j < 4; j++) {
                const uint32_t sign = (uint32_t)rng_int(&r, 2) << 15, mant = (uint32_t)rng_int(&r, 128);
                switch (rng_int(&r, 6)) {
                case 0: h[j] = sign | mant; break;                                           /* subnormal or zero */
                case 1: h[j] = sign | 0x7f80u | (rng_int(&r, 3) ? 0 : mant); break;          /* inf or NaN */
                case 2: h[j] = sign | (uint32_t)(61 + rng_int(&r, 5)) << 7 | mant; break;  /* products near FLT_MIN */
                default: h[j] = sign | (uint32_t)(100 + rng_int(&r, 56)) << 7 | mant; break;
                }
            }
            a[i] = h[0] | h[1] << 16;
            b[i] = h[2] | h[3] << 16;
            const uint32_t k = (uint32_t)rng_int(&r, 4);
            acc[i] = k == 0   ? bits_f((uint32_t)(0x00800000 + rng_int(&r, 64) - 32) | (uint32_t)rng_int(&r, 2) << 31)
                     : k == 1 ? -bf16_value((uint16_t)h[1]) * bf16_value((uint16_t)h[3])
                              : bits_f((uint32_t)rng_int(&r, 1 << 16) << 16 | (uint32_t)rng_int(&r, 1 << 16));
            x[i] = bits_f((uint32_t)rng_int(&r, 1 << 16) << 16 | (uint32_t)rng_int(&r, 1 << 16));
        }
        native_lanes(acc, a, b, out);
        native_round(x, rb);
        for (int i = 0; i < 16; i++) {
            const float want = ha_bf16x_lane(acc[i], a[i], b[i]);
            CHECK(fbits(want) == fbits(out[i]),
                  "lane acc 0x%08x a 0x%08x b 0x%08x: vdpbf16ps gave 0x%08x, the reference 0x%08x", fbits(acc[i]), a[i],
                  b[i], fbits(out[i]), fbits(want));
            CHECK(ha_bf16_round(x[i]) == rb[i], "round 0x%08x: vcvtneps2bf16 gave 0x%04x, the reference 0x%04x",
                  fbits(x[i]), rb[i], ha_bf16_round(x[i]));
        }
    }
#endif
}

/* The w8a8 class (formats.h): integer sums per group, then one float chain over the groups, so every variant gives
 * the scalar reference's bits, for every chunk size and row range (panels cut by the range's ends); a row of
 * activations holding NaN makes that token's outputs NaN and leaves the others' bits alone. */
void test_kernels_w8a8_bitwise_across_variants(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    rng r = { 9 };
    static const int64_t WN[] = { 1, 63, 64, 65, 200, 512 };
    static const int64_t WT[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 31, 33, 64 };
    const int64_t rows = 53, ldy = rows;
    static const int64_t R0[] = { 0, 5, 16, 17 }, R1[] = { 53, 48, 33, 18 };
    for (size_t a = 0; a < COUNT(WN); a++) {
        const int64_t n = WN[a];
        void *W = make_weights(HA_Q8P, rows, n, &r, 1.0, 1, NULL);
        for (size_t b = 0; b < COUNT(WT); b++) {
            const int64_t T = WT[b];
            float *X = make_floats((size_t)(T * n), &r, -4.0, 4.0);
            if (T > 2) X[n + n / 2] = NAN; /* token 1 */
            float *ref = xcalloc((size_t)(T * ldy), sizeof(float)), *got = xcalloc((size_t)(T * ldy), sizeof(float));
            for (size_t c = 0; c < COUNT(R0); c++) {
                run_matmul(ks[0], HA_Q8P, W, n, R0[c], R1[c], X, T, ref, ldy);
                for (int64_t t = 0; t < T; t++)
                    for (int64_t i = R0[c]; i < R1[c]; i++)
                        CHECK((T > 2 && t == 1) == (isnan(ref[t * ldy + i]) != 0),
                              "scalar w8a8 n=%lld T=%lld: output (%lld, %lld) expected NaN only for the token holding "
                              "one, got %g",
                              (long long)n, (long long)T, (long long)t, (long long)i, (double)ref[t * ldy + i]);
                for (int v = 1; v < nk; v++) {
                    memset(got, 0, (size_t)(T * ldy) * sizeof(float));
                    run_matmul(ks[v], HA_Q8P, W, n, R0[c], R1[c], X, T, got, ldy);
                    for (int64_t t = 0; t < T; t++) {
                        if (T > 2 && t == 1) continue; /* NaN's payload may differ */
                        CHECK_SAME_FLOATS(ref + t * ldy + R0[c], got + t * ldy + R0[c], (size_t)(R1[c] - R0[c]),
                                          "w8a8 %s vs scalar n=%lld T=%lld rows [%lld, %lld) token %lld", kn[v],
                                          (long long)n, (long long)T, (long long)R0[c], (long long)R1[c], (long long)t);
                        CHECK(R0[c] == 0 || fbits(got[t * ldy + R0[c] - 1]) == 0, "w8a8 %s: wrote below row %lld",
                              kn[v], (long long)R0[c]);
                        CHECK(R1[c] == rows || fbits(got[t * ldy + R1[c]]) == 0, "w8a8 %s: wrote at row %lld", kn[v],
                              (long long)R1[c]);
                    }
                }
            }
            free(X);
            free(ref);
            free(got);
        }
        free(W);
    }
}

/* ha_cpu_is_intel (which picks the w8a8 kernel's prefetch for one narrow tile) agrees with the vendor_id Linux reports
 * in /proc/cpuinfo. */
void test_cpu_vendor_matches_proc_cpuinfo(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) {
        printf("no /proc/cpuinfo: nothing to compare against\n");
        return;
    }
    char line[512], vendor[64] = "";
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "vendor_id : %63s", vendor) == 1) break;
    fclose(f);
    if (!vendor[0]) {
        printf("/proc/cpuinfo names no vendor_id: nothing to compare against\n");
        return;
    }
    const int intel = strcmp(vendor, "GenuineIntel") == 0;
    CHECK(ha_cpu_is_intel() == intel, "vendor_id %s: expected ha_cpu_is_intel() %d, got %d", vendor, intel,
          ha_cpu_is_intel());
}

void test_kernels_select_by_name(void) {
    CHECK_OK(ha_kernels_select("scalar"));
    CHECK(strcmp(ha_kernels_name(), "scalar") == 0,
          "after selecting scalar expected ha_kernels_name() \"scalar\", got \"%s\"", ha_kernels_name());
    CHECK_STATUS(ha_kernels_select("avx9000"), HA_ERR_UNSUPPORTED);
    CHECK_MSG("avx9000");
    CHECK_STATUS(ha_kernels_select(NULL), HA_ERR_UNSUPPORTED);
    CHECK(strcmp(ha_kernels_name(), "scalar") == 0, "a rejected selection expected to keep \"scalar\", got \"%s\"",
          ha_kernels_name());
    if (ha_kernels_select("avx2") == HA_OK)
        CHECK(strcmp(ha_kernels_name(), "avx2") == 0, "after selecting avx2 expected \"avx2\", got \"%s\"",
              ha_kernels_name());
    else printf("avx2 unavailable\n");
    /* a variant this CPU lacks is refused, naming what it needs */
    static const struct {
        const char *name, *needs;
    } NEEDS[] = {
        { "avx2", "AVX2" }, { "avx-vnni", "AVX-VNNI" }, { "avx512", "AVX-512 F" }, { "avx-vnni-evex", "AVX-512 VNNI" }
    };
    for (size_t i = 0; i < COUNT(NEEDS); i++) {
        if (ha_kernels_find(NEEDS[i].name)) continue;
        printf("%s unavailable: its refusal checked\n", NEEDS[i].name);
        CHECK_STATUS(ha_kernels_select(NEEDS[i].name), HA_ERR_UNSUPPORTED);
        CHECK_MSG(NEEDS[i].name);
        CHECK_MSG(NEEDS[i].needs);
        CHECK_MSG("choose one of: scalar");
    }
    CHECK_OK(ha_kernels_select("scalar"));
}

/* The AVX-VNNI variants are AVX2's table with their own w8a8 sums and the burst that measures their multiply-adds:
 * every other entry is AVX2's function, which is why tests/core runs their whole-model suites on w8a8 weights only. */
void test_kernels_avx_vnni_tables_are_avx2_but_w8a8(void) {
    static const char *const NAMES[] = { "avx-vnni", "avx-vnni-evex" };
    for (size_t i = 0; i < COUNT(NAMES); i++) {
        const ha_kernels *k = ha_kernels_find(NAMES[i]);
        if (!k) {
            printf("%s unavailable\n", NAMES[i]);
            continue;
        }
        CHECK(k->matmul_w8a8 != ha_kernels_avx2.matmul_w8a8 && k->mac_burst_w8a8 != ha_kernels_avx2.mac_burst_w8a8,
              "%s: expected its own matmul_w8a8 and mac_burst_w8a8, got AVX2's", NAMES[i]);
        ha_kernels same = *k;
        same.name = ha_kernels_avx2.name;
        same.matmul_w8a8 = ha_kernels_avx2.matmul_w8a8;
        same.mac_burst_w8a8 = ha_kernels_avx2.mac_burst_w8a8;
        CHECK(memcmp(&same, &ha_kernels_avx2, sizeof same) == 0,
              "%s: expected AVX2's function in every entry but matmul_w8a8 and mac_burst_w8a8", NAMES[i]);
        const double ops = k->mac_burst_w8a8(5); /* 12 chains of vpdpbusd ymm, 32 products each */
        CHECK(ops == 5.0 * 12 * 32, "%s: expected mac_burst_w8a8(5) to count 1920 products, got %g", NAMES[i], ops);
    }
}

/* ---- int8 and int4 quantization ----------------------------------------------------------------------- */

/* Group size, block bytes and element accessor of an integer dtype. */
static int64_t int_group(ha_dtype dt) { return dt == HA_Q8 ? HA_Q8_GROUP : HA_Q4_GROUP; }
static size_t int_block(ha_dtype dt) { return dt == HA_Q8 ? HA_Q8_BLOCK_BYTES : HA_Q4_BLOCK_BYTES; }
static float int_at(ha_dtype dt, const void *row, int64_t j) {
    return dt == HA_Q8 ? ha_q8_at(row, j) : ha_q4_at(row, j);
}

void test_quantize_error_within_half_a_step(void) {
    rng r = { 77 };
    const int64_t shapes[][2] = { { 3, 64 }, { 2, 100 }, { 5, 1 }, { 1, 257 } };
    for (int dt = HA_Q8; dt <= HA_Q4; dt++)
        for (size_t s = 0; s < COUNT(shapes); s++) {
            const int64_t rows = shapes[s][0], cols = shapes[s][1], group = int_group((ha_dtype)dt);
            float *w = make_floats((size_t)(rows * cols), &r, -3.0, 3.0);
            if (cols >= 64)
                for (int64_t j = 0; j < 64; j++) w[j] = 0.0f; /* an all-zero group: scale 0, every q 0 */
            ha_matrix src = {
                .data = w, .dtype = HA_F32, .rows = rows, .cols = cols, .nbytes = (size_t)(rows * cols) * 4
            };
            size_t nb = ha_matrix_bytes((ha_dtype)dt, rows, cols);
            char *q = xmalloc(nb);
            CHECK_OK(ha_quantize(&src, (ha_dtype)dt, q, nb));
            for (int64_t i = 0; i < rows; i++) {
                const char *row = q + (size_t)i * ha_row_bytes((ha_dtype)dt, cols);
                for (int64_t j = 0; j < cols; j++) {
                    float scale;
                    memcpy(&scale, row + (size_t)(j / group) * int_block((ha_dtype)dt), 4);
                    double err = fabs((double)int_at((ha_dtype)dt, row, j) - (double)w[i * cols + j]);
                    CHECK(err <= 0.5 * scale * (1 + 1e-6) + 1e-12,
                          "%s (%lld, %lld) of a (%lld, %lld) matrix: expected |error| "
                          "<= scale/2 = %g, got %g",
                          dname((ha_dtype)dt), (long long)i, (long long)j, (long long)rows, (long long)cols,
                          0.5 * scale, err);
                }
                for (int64_t j = cols; j % group; j++) /* the padding of the last group */
                    CHECK(int_at((ha_dtype)dt, row, j) == 0.0f, "%s padding element %lld expected 0, got %g",
                          dname((ha_dtype)dt), (long long)j, (double)int_at((ha_dtype)dt, row, j));
            }
            if (cols >= 64)
                CHECK(int_at((ha_dtype)dt, q, 0) == 0.0f && int_at((ha_dtype)dt, q, 63) == 0.0f,
                      "an all-zero group expected to stay zero");
            free(q);
            free(w);
        }
}

/* Every variant's quant_q8 and quant_q4 give bitwise the reference's block (and flag), and quant_q8_sum also the
 * reference's sum of the block's integers, on groups built to hit
 * their corners: products exactly halfway between integers (the factor 1 or 1/2), zeros and -0, subnormals,
 * a maximum below 127 / FLT_MAX (subnormal or not: the factor overflows to inf), magnitudes from 1e-30 to
 * 1e30, partial groups, NaN and inf. */
void test_quantize_variants_match_the_reference(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    rng r = { 91 };
    float x[HA_Q8_GROUP];
    for (int dt = HA_Q8; dt <= HA_Q4; dt++) {
        const int64_t group = int_group((ha_dtype)dt);
        const double top = dt == HA_Q8 ? 127.0 : 7.0; /* the largest q */
        for (int c = 0; c < 4000; c++) {
            const int kind = c % 8;
            int64_t len = kind == 7 ? 1 + (int64_t)(rng_next(&r) % group) : group;
            const double mag = pow(10.0, -30.0 + 60.0 * rng_uniform(&r, 0.0, 1.0));
            for (int64_t i = 0; i < len; i++) {
                const double u = rng_uniform(&r, 0.0, 1.0);
                switch (kind) {
                case 0: x[i] = (float)(mag * (2 * u - 1)); break;
                case 1: x[i] = (float)(floor(2 * top * u) - top) + 0.5f * (float)(rng_next(&r) & 1); break; /* halves */
                case 2: x[i] = (float)(floor((4 * top + 1) * u) - 2 * top); break; /* max 2 top: odd values on halves */
                case 3: x[i] = (rng_next(&r) & 1) ? 0.0f : -0.0f; break;
                case 4: x[i] = (float)(((c & 8) ? 1e-37 : 1e-40) * (2 * u - 1)); break; /* top / max overflows */
                case 5: x[i] = (float)((2 * u - 1) * 3.0e38); break; /* near FLT_MAX */
                case 6:
                    x[i] = (float)(2 * u - 1);
                    if (i == (int64_t)(c % len)) x[i] = (c & 8) ? NAN : -INFINITY;
                    break;
                default: x[i] = (float)(3 * (2 * u - 1)); break;
                }
            }
            if (kind == 1) x[c % len] = (float)top;
            if (kind == 2) x[c % len] = (float)(-2 * top);
            char want[HA_Q8_BLOCK_BYTES], got[HA_Q8_BLOCK_BYTES];
            const size_t nb = int_block((ha_dtype)dt);
            const int want_ok = dt == HA_Q8 ? ha_quant_q8_ref(x, len, want) : ha_quant_q4_ref(x, len, want);
            for (int v = 0; v < nk; v++) {
                memset(got, 0x5a, sizeof got);
                const int ok = dt == HA_Q8 ? ks[v]->quant_q8(x, len, got) : ks[v]->quant_q4(x, len, got);
                CHECK(ok == want_ok, "%s quant %s case %d (kind %d, len %lld): finite flag %d, reference %d", kn[v],
                      dname((ha_dtype)dt), c, kind, (long long)len, ok, want_ok);
                if (want_ok)
                    CHECK(memcmp(got, want, nb) == 0,
                          "%s quant %s case %d (kind %d, len %lld): block differs from the "
                          "reference",
                          kn[v], dname((ha_dtype)dt), c, kind, (long long)len);
            }
            for (int v = 0; dt == HA_Q8 && v < nk; v++) { /* an activation group: block, flag and sum */
                int32_t sum = INT32_MIN, want_sum;
                ha_quant_q8_sum_ref(x, len, want, &want_sum);
                memset(got, 0x5a, sizeof got);
                const int ok = ks[v]->quant_q8_sum(x, len, got, &sum);
                CHECK(ok == want_ok && (!want_ok || (memcmp(got, want, nb) == 0 && sum == want_sum)),
                      "%s quant_q8_sum case %d (kind %d, len %lld): flag %d sum %d, reference %d and %d (or the block)",
                      kn[v], c, kind, (long long)len, ok, sum, want_ok, want_sum);
            }
            CHECK(kind != 6 || !want_ok, "case %d: a group with NaN or inf expected to be flagged", c);
        }
    }
}

/* Every variant's to_f32 of integer rows (OpenBLAS's widening, a tied embedding's row) gives bitwise
 * ha_q8_at / ha_q4_at, on raw random blocks (int8 -128, int4 nibble 0, any scale) of every length up to
 * three groups, and writes nothing past n. */
void test_kernels_to_f32_integer_rows_exact(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    rng r = { 97 };
    for (int dt = HA_Q8; dt <= HA_Q4; dt++)
        for (int64_t n = 1; n <= 3 * int_group((ha_dtype)dt); n++) {
            const size_t nb = ha_row_bytes((ha_dtype)dt, n);
            char *row = xmalloc(nb);
            for (size_t i = 0; i < nb; i++) row[i] = (char)(rng_next(&r) & 0xff);
            for (size_t b = 0; b < nb; b += int_block((ha_dtype)dt)) { /* finite scales */
                const float scale = (float)rng_uniform(&r, -3.0, 3.0);
                memcpy(row + b, &scale, sizeof scale);
            }
            float *out = xmalloc((size_t)(n + 1) * sizeof(float));
            for (int v = 0; v < nk; v++) {
                out[n] = bits_f(SENTINEL);
                ks[v]->to_f32[dt](row, out, n);
                for (int64_t j = 0; j < n; j++) {
                    const float want = int_at((ha_dtype)dt, row, j);
                    CHECK(fbits(out[j]) == fbits(want), "%s to_f32 %s n=%lld: element %lld expected %g, got %g", kn[v],
                          dname((ha_dtype)dt), (long long)n, (long long)j, (double)want, (double)out[j]);
                }
                CHECK(fbits(out[n]) == SENTINEL, "%s to_f32 %s n=%lld wrote past n", kn[v], dname((ha_dtype)dt),
                      (long long)n);
            }
            free(row);
            free(out);
        }
}

void test_quantize_rejects_bad_input(void) {
    float w[8] = { 1, 2, 3, NAN, 5, 6, 7, 8 };
    char q[HA_Q8_BLOCK_BYTES];
    ha_matrix src = { .data = w, .dtype = HA_F32, .rows = 1, .cols = 8, .nbytes = sizeof w };
    CHECK_STATUS(ha_quantize(&src, HA_Q8, q, sizeof q), HA_ERR_INVALID);
    CHECK_MSG("NaN");
    CHECK_STATUS(ha_quantize(&src, HA_Q4, q, HA_Q4_BLOCK_BYTES), HA_ERR_INVALID);
    CHECK_MSG("NaN");
    w[3] = 4;
    CHECK_STATUS(ha_quantize(&src, HA_Q8, q, sizeof q - 1), HA_ERR_INVALID);
    CHECK_STATUS(ha_quantize(&src, HA_Q4, q, sizeof q), HA_ERR_INVALID); /* an int8 block's size is not an int4 one's */
    CHECK_STATUS(ha_quantize(&src, HA_BF16, q, sizeof q), HA_ERR_INVALID);
    CHECK_MSG("int8, w8a8, int4 or bfloat16 pairs");
    src.nbytes = 16;
    CHECK_STATUS(ha_quantize(&src, HA_Q8, q, sizeof q), HA_ERR_INVALID);
    src.nbytes = sizeof w;
    src.dtype = HA_Q8;
    CHECK_STATUS(ha_quantize(&src, HA_Q8, q, sizeof q), HA_ERR_INVALID);
    src.dtype = HA_F32;
    CHECK_OK(ha_quantize(&src, HA_Q8, q, sizeof q));
    CHECK(ha_q8_at(q, 7) == 8.0f, "the group's largest weight expected exact (8), got %g", (double)ha_q8_at(q, 7));
    CHECK_OK(ha_quantize(&src, HA_Q4, q, HA_Q4_BLOCK_BYTES));
    CHECK(ha_q4_at(q, 7) == 8.0f && ha_q4_at(q, 0) == 8.0f / 7.0f,
          "int4: the largest weight expected exact (8), got %g; "
          "1 expected 8/7, got %g",
          (double)ha_q4_at(q, 7), (double)ha_q4_at(q, 0));
}

/* A shape whose byte count does not fit in size_t counts 0 bytes (it wrapped: (2^44, 2^20) float32 counted 0),
 * and ha_pack and ha_quantize refuse it whatever buffers they are given (they took a 0-byte source and
 * destination for it and wrote far past them; found by tests/fuzz/c). */
void test_convert_rejects_shapes_too_large_to_address(void) {
    const int64_t big_rows = (int64_t)1 << 44, big_cols = (int64_t)1 << 20;
    CHECK(ha_matrix_bytes(HA_F32, big_rows, big_cols) == 0 && ha_matrix_bytes(HA_F32P, big_rows, big_cols) == 0 &&
              ha_matrix_bytes(HA_Q8, (int64_t)1 << 60, 64) == 0 && ha_matrix_bytes(HA_BF16, 1, INT64_MAX) == 0,
          "sizes past size_t expected to count 0 bytes, got %zu, %zu, %zu, %zu",
          ha_matrix_bytes(HA_F32, big_rows, big_cols), ha_matrix_bytes(HA_F32P, big_rows, big_cols),
          ha_matrix_bytes(HA_Q8, (int64_t)1 << 60, 64), ha_matrix_bytes(HA_BF16, 1, INT64_MAX));
    CHECK(ha_matrix_bytes(HA_F32, (int64_t)1 << 40, 4) == (size_t)1 << 44,
          "a (2^40, 4) float32 matrix expected 2^44 bytes");
    float *src = xmalloc(4), *dst = xmalloc(4);
    ha_matrix m = { .data = src, .dtype = HA_F32, .rows = big_rows, .cols = big_cols, .nbytes = 0 };
    CHECK_STATUS(ha_pack(&m, dst, 0), HA_ERR_INVALID);
    CHECK_MSG("too large to address");
    CHECK_STATUS(ha_quantize(&m, HA_Q8, dst, 0), HA_ERR_INVALID);
    CHECK_MSG("too large to address");
    m = (ha_matrix){ .data = src, .dtype = HA_BF16, .rows = 2, .cols = INT64_MAX / 2, .nbytes = 0 };
    CHECK_STATUS(ha_pack(&m, dst, 0), HA_ERR_INVALID);
    CHECK_STATUS(ha_quantize(&m, HA_Q4, dst, 0), HA_ERR_INVALID);
    free(src);
    free(dst);
}

/* Every variant's quant_act gives bitwise ha_quant_act_ref's row and scale (NaN scale alike), on rows built
 * to hit its corners: products exactly halfway between integers, zeros and -0, a maximum below 32767 /
 * FLT_MAX (the factor overflows to inf), magnitudes from 1e-30 to 1e30, lengths that are not whole groups or
 * blocks of 8, NaN and inf; the padding to whole groups is 0, and each element is within half a step (max|x| /
 * 65534, plus the rounding of the factor) of x. */
void test_quant_act_variants_match_the_reference(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    rng r = { 93 };
    enum { MAXN = 300 };
    float x[MAXN];
    int16_t want[MAXN + HA_Q8_GROUP], got[MAXN + HA_Q8_GROUP];
    for (int c = 0; c < 3000; c++) {
        const int kind = c % 7;
        const int64_t n = 1 + (int64_t)(rng_next(&r) % MAXN), width = ha_act_width(n);
        const double mag = pow(10.0, -30.0 + 60.0 * rng_uniform(&r, 0.0, 1.0));
        for (int64_t i = 0; i < n; i++) {
            const double u = rng_uniform(&r, 0.0, 1.0);
            switch (kind) {
            case 0: x[i] = (float)(mag * (2 * u - 1)); break;
            case 1: x[i] = (float)(floor(65534 * u) - 32767) + 0.5f * (float)(rng_next(&r) & 1); break; /* halves */
            case 2: x[i] = (rng_next(&r) & 1) ? 0.0f : -0.0f; break;
            case 3: x[i] = (float)(((c & 8) ? 1e-35 : 1e-40) * (2 * u - 1)); break; /* 32767 / max overflows */
            case 4: x[i] = (float)((2 * u - 1) * 3.0e38); break; /* near FLT_MAX */
            case 5:
                x[i] = (float)(2 * u - 1);
                if (i == c % n) x[i] = (c & 8) ? NAN : -INFINITY;
                break;
            default: x[i] = (float)(3 * (2 * u - 1)); break;
            }
        }
        if (kind == 1) x[c % n] = 32767.0f; /* factor 1: the halves stay halves */
        float want_s, got_s;
        ha_quant_act_ref(x, n, want, &want_s);
        for (int v = 0; v < nk; v++) {
            memset(got, 0x5a, sizeof got);
            got_s = 0.0f;
            ks[v]->quant_act(x, n, got, &got_s);
            CHECK(memcmp(got, want, (size_t)width * sizeof *got) == 0 &&
                      (fbits(got_s) == fbits(want_s) || (isnan(got_s) && isnan(want_s))),
                  "%s quant_act case %d (kind %d, n %lld): row or scale (%g, reference %g) differs from the reference",
                  kn[v], c, kind, (long long)n, (double)got_s, (double)want_s);
        }
        CHECK(kind != 5 || isnan(want_s), "case %d: a row with NaN or inf expected a NaN scale, got %g", c,
              (double)want_s);
        for (int64_t i = n; i < width; i++)
            CHECK(want[i] == 0, "case %d: padding element %lld expected 0, got %d", c, (long long)i, want[i]);
        if (isnan(want_s)) continue;
        double amax = 0.0;
        for (int64_t i = 0; i < n; i++) amax = fmax(amax, fabs((double)x[i]));
        for (int64_t i = 0; i < n && kind != 3; i++)
            CHECK(
                fabs((double)want[i] * want_s - x[i]) <=
                    0.505 * amax / 32767.0, /* half a step, and the factor's rounding (32767 * 2^-23) */
                "case %d (kind %d): element %lld = %g quantized to %d * %.9g (max %.9g), off by more than half a step",
                c, kind, (long long)i, (double)x[i], want[i], (double)want_s, amax);
    }
}

/* Integer weights times quantized activations: every variant bitwise the scalar reference (integer sums are
 * exact, and each lane's float steps are the same), over row lengths around the group and tile sizes, chunk
 * widths that use every tile, and a row range not starting at 0 (rows outside it untouched). Half the cases
 * are extremes: hand-made blocks of the largest weights (int8 +-127 and -128, int4 -8..7) with garbage in the
 * padding, times activations of +-32767 (int8 lane sums past 2^24, where the conversion to float rounds);
 * and a token holding NaN, whose outputs are all NaN while the other tokens' stay bitwise as they were. */
void test_kernels_matmul_int_variants_bitwise(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    rng r = { 95 };
    static const int64_t NN[] = { 1, 15, 16, 31, 32, 33, 63, 64, 65, 130, 523 }, TT[] = { 1, 2, 3, 4, 5, 8, 16 };
    const int64_t rows = 11, r1 = 11;
    for (int dt = HA_Q8; dt <= HA_Q4; dt++)
        for (int extreme = 0; extreme < 2; extreme++)
            for (size_t a = 0; a < COUNT(NN); a++)
                for (size_t b = 0; b < COUNT(TT); b++) {
                    /* 11, 10 or 9 rows: tiles of 4 and 3, 2 or 1 rows left over; decode: 4 x 2 and those */
                    const int64_t n = NN[a], T = TT[b], r0 = (int64_t)((a + b) % 3);
                    const size_t nb = ha_matrix_bytes((ha_dtype)dt, rows, n), block = int_block((ha_dtype)dt);
                    char *W = extreme ? xmalloc(nb) : make_weights((ha_dtype)dt, rows, n, &r, 2.0, 1, NULL);
                    for (size_t blk = 0; extreme && blk < nb; blk += block) {
                        const float scale = (float)rng_uniform(&r, 0.5, 2.0);
                        memcpy(W + blk, &scale, sizeof scale);
                        for (size_t i = 4; i < block; i++) {
                            static const int8_t ext[] = { 127, -127, -128 };
                            W[blk + i] = dt == HA_Q8 ? (char)ext[rng_next(&r) % 3] : (char)(rng_next(&r) & 0xff);
                        }
                    }
                    float *X = make_floats((size_t)(T * n), &r, -4.0, 4.0);
                    for (int64_t i = 0; extreme && i < T * n; i++) X[i] = (rng_next(&r) & 1) ? 1.0f : -1.0f;
                    if (extreme && T > 1) X[n / 2] = NAN; /* token 0 */
                    float *want = xcalloc((size_t)(T * rows), sizeof(float)),
                          *got = xcalloc((size_t)(T * rows), sizeof(float));
                    run_matmul(&ha_kernels_scalar, (ha_dtype)dt, W, n, r0, r1, X, T, want, rows);
                    for (int v = 1; v < nk; v++) {
                        run_matmul(ks[v], (ha_dtype)dt, W, n, r0, r1, X, T, got, rows);
                        const int64_t nan_rows = extreme && T > 1 ? 1 : 0;
                        for (int64_t c = r0; c < r1 && nan_rows; c++)
                            CHECK(isnan(want[c]) && isnan(got[c]),
                                  "%s matmul %s n=%lld: a token holding NaN expected NaN "
                                  "outputs, got %g (scalar %g)",
                                  kn[v], dname((ha_dtype)dt), (long long)n, (double)got[c], (double)want[c]);
                        CHECK_SAME_FLOATS(want + nan_rows * rows, got + nan_rows * rows,
                                          (size_t)((T - nan_rows) * rows), "%s matmul %s n=%lld T=%lld%s vs scalar",
                                          kn[v], dname((ha_dtype)dt), (long long)n, (long long)T,
                                          extreme ? " (extremes)" : "");
                    }
                    free(W);
                    free(X);
                    free(want);
                    free(got);
                }
}

/* Float panels: every variant bitwise the scalar reference (one fmaf chain per output in index order), over
 * every tile shape the AVX2 and AVX-512 kernels pick (T = 1..13, 20, 24, 25; groups of 1..8 panels, cut short at the
 * range's end),
 * row ranges starting and ending inside panels, subnormal weights; nothing outside the range written. */
void test_kernels_matmul_panels_bitwise(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    rng r = { 21 };
    static const int64_t PT[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 20, 24, 25 };
    static const int64_t PR[][3] = { /* rows, r0, r1 */ { 1, 0, 1 },
                                     { 16, 0, 16 },
                                     { 17, 0, 17 },
                                     { 40, 3, 37 },
                                     { 70, 16, 70 },
                                     { 100, 5, 99 },
                                     { 300, 7, 290 } };
    for (int dt = HA_F32P; dt <= HA_F16P; dt++)
        for (size_t a = 0; a < COUNT(KN); a++)
            for (size_t b = 0; b < COUNT(PR); b++) {
                const int64_t n = KN[a], rows = PR[b][0], r0 = PR[b][1], r1 = PR[b][2], ldy = rows + 2;
                void *W = make_weights((ha_dtype)dt, rows, n, &r, 1.0, 1, NULL);
                float *X = make_floats((size_t)(25 * n), &r, -1.0, 1.0);
                float *want = xmalloc((size_t)(25 * ldy) * sizeof(float)),
                      *got = xmalloc((size_t)(25 * ldy) * sizeof(float)),
                      *chain = xmalloc((size_t)(25 * ldy) * sizeof(float));
                for (int64_t t = 0; t < 25; t++) /* the reference's own contract, spelled out: the fmaf chain */
                    for (int64_t row = r0; row < r1; row++) {
                        float sum = 0.0f;
                        for (int64_t k = 0; k < n; k++)
                            sum = fmaf(ha_panel_at(W, (ha_dtype)dt, n, row, k), X[t * n + k], sum);
                        chain[t * ldy + row] = sum;
                    }
                for (int v = 0; v < nk; v++) { /* T = 0 and an empty row range: nothing to do, nothing written */
                    for (int64_t i = 0; i < 25 * ldy; i++) got[i] = bits_f(SENTINEL);
                    ks[v]->matmul[dt](W, n, r0, r1, X, 0, got, ldy);
                    ks[v]->matmul[dt](W, n, r1 - 1, r1 - 1, X, 5, got, ldy);
                    for (int64_t i = 0; i < 25 * ldy; i++)
                        CHECK(fbits(got[i]) == SENTINEL, "%s %s: T = 0 or an empty range wrote Y[%lld]", kn[v],
                              dname((ha_dtype)dt), (long long)i);
                }
                for (size_t c = 0; c < COUNT(PT); c++) {
                    const int64_t T = PT[c];
                    for (int64_t i = 0; i < T * ldy; i++) want[i] = got[i] = bits_f(SENTINEL);
                    ha_kernels_scalar.matmul[dt](W, n, r0, r1, X, T, want, ldy);
                    for (int64_t t = 0; t < T; t++) /* the contract at every T */
                        for (int64_t row = r0; row < r1; row++) {
                            const float sum = chain[t * ldy + row];
                            CHECK(fbits(want[t * ldy + row]) == fbits(sum),
                                  "scalar %s n=%lld: Y[%lld, %lld] expected the fmaf chain's %.9g, got %.9g",
                                  dname((ha_dtype)dt), (long long)n, (long long)t, (long long)row, (double)sum,
                                  (double)want[t * ldy + row]);
                        }
                    for (int v = 1; v < nk; v++) {
                        ks[v]->matmul[dt](W, n, r0, r1, X, T, got, ldy);
                        CHECK_SAME_FLOATS(want, got, (size_t)(T * ldy),
                                          "%s %s n=%lld T=%lld rows [%lld, %lld) of %lld against scalar", kn[v],
                                          dname((ha_dtype)dt), (long long)n, (long long)T, (long long)r0, (long long)r1,
                                          (long long)rows);
                    }
                }
                free(W);
                free(X);
                free(want);
                free(got);
                free(chain);
            }
}

/* The kernels' software prefetch covers its region [base, base + end) in whole lines, shared out over the
 * steps, and never goes past it, also when end is not whole lines (it once wrapped around there and went on
 * prefetching a share beyond the region at every later step). */
void test_prefetcher_stays_in_its_region(void) {
    static const size_t ENDS[] = { 0, 1, 63, 64, 65, 100, 4096, 4100, 65536 + 36 };
    static const int64_t STEPS[] = { 0, 1, 3, 7, 64 };
    for (size_t a = 0; a < COUNT(ENDS); a++)
        for (size_t b = 0; b < COUNT(STEPS); b++) {
            const size_t end = ENDS[a], whole = (end + 63) / 64 * 64;
            ha_prefetcher pf = ha_prefetcher_over((const char *)&pf, end, STEPS[b]); /* a valid base; never read */
            const int64_t steps = STEPS[b] < 1 ? 1 : STEPS[b];
            for (int64_t i = 0; i < steps + 5; i++) {
                ha_prefetch_step(&pf);
                CHECK(pf.off <= whole,
                      "region of %zu bytes, %lld steps: after step %lld prefetched %zu bytes, past its "
                      "%zu in whole lines",
                      end, (long long)STEPS[b], (long long)i, pf.off, whole);
                if (i == steps - 1)
                    CHECK(pf.off == whole,
                          "region of %zu bytes: after all %lld steps expected %zu bytes prefetched, got %zu", end,
                          (long long)steps, whole, pf.off);
            }
        }
    ha_prefetch_step(NULL); /* no prefetcher: nothing to do */
}

/* panel_to_f32: every bfloat16 and float16 bit pattern (and random float32 bits) in panels, exactly. */
void test_kernels_panel_to_f32_exact(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    const int64_t n = 65536 / HA_PANEL_ROWS, ldd = HA_PANEL_ROWS + 3;
    uint32_t *bits = xmalloc(65536 * sizeof(uint32_t));
    float *out = xmalloc((size_t)(n * ldd) * sizeof(float));
    rng r = { 22 };
    for (int dt = HA_F32P; dt <= HA_F16P; dt++) {
        for (uint32_t i = 0; i < 65536; i++) bits[i] = dt == HA_F32P ? (uint32_t)(rng_next(&r) >> 32) : i;
        if (dt != HA_F32P)
            for (uint32_t i = 0; i < 65536; i++) ((uint16_t *)bits)[i] = (uint16_t)i;
        for (int v = 0; v < nk; v++) {
            for (int64_t i = 0; i < n * ldd; i++) out[i] = bits_f(SENTINEL);
            ks[v]->panel_to_f32[dt](bits, n, out, ldd);
            for (int64_t k = 0; k < n; k++)
                for (int64_t i = 0; i < ldd; i++) {
                    const float y = out[k * ldd + i];
                    if (i >= HA_PANEL_ROWS) {
                        CHECK(fbits(y) == SENTINEL, "%s panel_to_f32 %s wrote column %lld past its 16 rows", kn[v],
                              dname((ha_dtype)dt), (long long)k);
                        continue;
                    }
                    const float want = ha_panel_at(bits, (ha_dtype)dt, n, i, k);
                    CHECK(fbits(y) == fbits(want) || (isnan(want) && isnan(y) && signbit(want) == signbit(y)),
                          "%s panel_to_f32 %s: row %lld column %lld expected 0x%08x, got 0x%08x", kn[v],
                          dname((ha_dtype)dt), (long long)i, (long long)k, fbits(want), fbits(y));
                }
        }
    }
    free(bits);
    free(out);
}

/* ---- 9. bandwidth probe ------------------------------------------------------------------------------ */

void test_membw_measures_and_rejects(void) {
    double bw = -1.0;
    CHECK_OK(ha_measure_read_bandwidth(8u << 20, 2, &bw));
    CHECK(isfinite(bw) && bw > 0.0, "8 MB x 2: expected a positive finite bandwidth, got %g", bw);
    CHECK(bw > 1e6 && bw < 1e13, "8 MB x 2: expected a plausible bandwidth (1 MB/s .. 10 TB/s), got %g B/s", bw);
    bw = -1.0;
    CHECK_OK(ha_measure_read_bandwidth((1u << 20) + 100, 1, &bw)); /* not a multiple of the unit */
    CHECK(isfinite(bw) && bw > 0.0, "1 MB + 100: expected a positive finite bandwidth, got %g", bw);
    CHECK_STATUS(ha_measure_read_bandwidth(1000, 2, &bw), HA_ERR_INVALID);
    CHECK_MSG("nbytes");
    CHECK_STATUS(ha_measure_read_bandwidth(0, 2, &bw), HA_ERR_INVALID);
    CHECK_STATUS(ha_measure_read_bandwidth(8u << 20, 0, &bw), HA_ERR_INVALID);
    CHECK_STATUS(ha_measure_read_bandwidth(8u << 20, 2, NULL), HA_ERR_INVALID);
    double one = -1.0, rate = -1.0;
    CHECK_OK(ha_set_num_threads(1));
    for (int int8 = 0; int8 < 2; int8++) {
        CHECK_OK(ha_measure_mac_rate(1, int8, &one));
        /* the floor is the scalar variant under the sanitizers; the ceiling a few hundred cores' worth */
        CHECK(isfinite(one) && one > 1e7 && one < 1e13,
              "1 thread, int8=%d: expected a plausible multiply-add rate, "
              "got %g/s",
              int8, one);
    }
    CHECK_STATUS(ha_measure_mac_rate(0, 0, &rate), HA_ERR_INVALID);
    CHECK_MSG("repeats");
    CHECK_STATUS(ha_measure_mac_rate(1, 0, NULL), HA_ERR_INVALID);
}
