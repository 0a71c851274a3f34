#include "test_core.h"

/* ---- 3. the model through the public API ---------------------------------------------------------------- */

void test_model_chunk_equals_token_by_token(void) {
    FOR_EACH_MODEL(t, vname) {
        rng r = { 7 };
        int32_t tok[5];
        random_tokens(&r, tok, 5);
        ha_llama_context *a = ctx_new(t->m, 2, 16), *b = ctx_new(t->m, 2, 16);
        float la[5 * TV], lb[5 * TV];
        CHECK_OK(append_seq(a, 0, 5, tok, la));
        for (int i = 0; i < 5; i++) CHECK_OK(append_seq(b, 0, 1, tok + i, lb + i * TV));
        CHECK(LEN(a, 0) == 5 && LEN(b, 0) == 5 && LEN(a, 1) == 0, "expected lengths 5, 5, 0; got %lld, %lld, %lld",
              (long long)LEN(a, 0), (long long)LEN(b, 0), (long long)LEN(a, 1));
        for (int i = 0; i < 5 * TV; i++)
            CHECK(isfinite(la[i]), CASE_FMT "logit %d expected finite, got %g", CASE_ARGS(t, vname), i, (double)la[i]);
        CHECK(memcmp(la, la + TV, TV * sizeof(float)) != 0,
              CASE_FMT "expected positions 0 and 1 to give different logits", CASE_ARGS(t, vname));
        CHECK_SAME_FLOATS(la, lb, 5 * TV, CASE_FMT "a 5-token append vs 5 one-token appends", CASE_ARGS(t, vname));
        ha_llama_context_free(a);
        ha_llama_context_free(b);
    }
}

/* Appends longer than the forward's internal chunk (64 tokens), two sequences interleaved. */
void test_model_long_append_equals_token_by_token(void) {
    one_thread();
    FOR_EACH_MODEL(t, vname) {
        enum { N = 70, CAP = 40 };
        rng r = { 8 };
        int32_t tok[N], seq[N];
        random_tokens(&r, tok, N);
        for (int i = 0; i < N; i++) seq[i] = (i * 7 / 3) % 2; /* 35 tokens each, irregularly interleaved */
        int n0 = 0;
        for (int i = 0; i < N; i++) n0 += seq[i] == 0;
        CHECK(n0 <= CAP && N - n0 <= CAP, "test setup: %d and %d tokens per sequence for capacity %d", n0, N - n0, CAP);
        float *la = xmalloc(N * TV * sizeof(float)), *lb = xmalloc(N * TV * sizeof(float));
        ha_llama_context *a = ctx_new(t->m, 2, CAP), *b = ctx_new(t->m, 2, CAP);
        CHECK_OK(LM(a)->append(LM(a)->self, N, seq, tok, NULL, la));
        for (int i = 0; i < N; i++) CHECK_OK(append_seq(b, seq[i], 1, tok + i, lb + i * TV));
        CHECK_SAME_FLOATS(la, lb, N * TV, CASE_FMT "a %d-token append vs one token at a time", CASE_ARGS(t, vname), N);
        ha_llama_context_free(a);
        ha_llama_context_free(b);
        free(la);
        free(lb);
    }
}

/* blas_prefill: a sequence's whole 128-token prompt blocks go through OpenBLAS. Two prompts in one append, each
 * contiguous (200 and 150 tokens: one block each), give bitwise what each gives alone in a fresh context, and
 * agree with the kernels to float32 rounding; interleaved irregularly, no block is contiguous, so the append is
 * bitwise the kernels'. */
void test_model_blas_prefill_blocks(void) {
    one_thread();
    FOR_EACH_MODEL(t, vname) {
        enum { A = 200, B = 150, N = A + B, CAP = 220 };
        rng r = { 10 };
        int32_t tok[N], seq[N];
        random_tokens(&r, tok, N);
        for (int i = 0; i < N; i++) seq[i] = i >= A;
        float *both = xmalloc(N * TV * sizeof(float)), *alone = xmalloc(N * TV * sizeof(float));
        float *kern = xmalloc(N * TV * sizeof(float));
        ha_llama_context *c = ctx_new_blas(t->m, 2, CAP, 1), *a = ctx_new_blas(t->m, 1, CAP, 1);
        ha_llama_context *b = ctx_new_blas(t->m, 1, CAP, 1), *k = ctx_new(t->m, 2, CAP);
        CHECK_OK(LM(c)->append(LM(c)->self, N, seq, tok, NULL, both));
        CHECK_OK(append_seq(a, 0, A, tok, alone));
        CHECK_OK(append_seq(b, 0, B, tok + A, alone + A * TV));
        CHECK_SAME_FLOATS(alone, both, N * TV, CASE_FMT "two prompts in one append vs each alone", CASE_ARGS(t, vname));
        CHECK_OK(LM(k)->append(LM(k)->self, N, seq, tok, NULL, kern));
        double worst = 0.0, scale = 1.0;
        for (int i = 0; i < N * TV; i++) {
            worst = fmax(worst, fabs((double)both[i] - (double)kern[i]));
            scale = fmax(scale, fabs((double)kern[i]));
        }
        /* integer weights: the kernels multiply activations rounded to int16 (up to max|x| / 65534 each), OpenBLAS
         * float32 ones */
        const double tol = ha_dtype_is_int(t->dtype) ? 1e-3 : 1e-4;
        CHECK(worst <= tol * scale, CASE_FMT "OpenBLAS prefill vs the kernels: max |diff| %g > %g x %g",
              CASE_ARGS(t, vname), worst, tol, scale);
        ha_llama_context_free(c);
        ha_llama_context_free(k);
        c = ctx_new_blas(t->m, 2, CAP, 1), k = ctx_new(t->m, 2, CAP);
        for (int i = 0; i < N; i++) seq[i] = (i * 7 / 3) % 2; /* interleaved: no 128 contiguous tokens of one */
        CHECK_OK(LM(c)->append(LM(c)->self, N, seq, tok, NULL, both));
        CHECK_OK(LM(k)->append(LM(k)->self, N, seq, tok, NULL, kern));
        CHECK_SAME_FLOATS(kern, both, N * TV, CASE_FMT "interleaved prompts with blas_prefill vs the kernels",
                          CASE_ARGS(t, vname));
        ha_llama_context_free(a);
        ha_llama_context_free(b);
        ha_llama_context_free(c);
        ha_llama_context_free(k);
        free(both);
        free(alone);
        free(kern);
    }
}

/* blas_prefill where the attention output is much wider than both the hidden and the intermediate size (n_heads
 * * head_dim = 512 > max(d, f) = 8): OpenBLAS widens wo's d rows of 512 columns into the context's scratch, which
 * must hold them (it held HA_BLAS_SLICE rows of max(d, f), 2048 floats, and the widening wrote past its end).
 * Every weight dtype but float32 (used in place) is widened; a 128-token prompt block agrees with the kernels to
 * float32 rounding. */
void test_model_blas_prefill_wide_attention_output(void) {
    one_thread();
    enum { V = 20, D = 8, F = 8, NH = 4, HD = 128, Q = NH * HD, N = 128 };
    static const ha_dtype dtypes[] = { HA_BF16, HA_F16, HA_Q8, HA_Q4, HA_BF16P, HA_F32P };
    for (size_t di = 0; di < COUNT(dtypes); di++) {
        const ha_dtype dt = dtypes[di];
        rng r = { 40 + di };
        double inv[HD / 2];
        for (int j = 0; j < HD / 2; j++) inv[j] = pow(10000.0, -2.0 * j / HD);
        ha_llama_config cfg = { .vocab_size = V,
                                .hidden_size = D,
                                .intermediate_size = F,
                                .n_layers = 1,
                                .n_heads = NH,
                                .n_kv_heads = NH,
                                .head_dim = HD,
                                .norm_eps = 1e-5f,
                                .rope_inv_freq = inv };
        void *bufs[9];
        ha_matrix mats[7];
        const int64_t shapes[7][2] = { { V, D }, { Q, D }, { Q, D }, { Q, D }, { D, Q }, { F, D }, { F, D } };
        for (int i = 0; i < 7; i++) {
            bufs[i] = make_weights(dt, shapes[i][0], shapes[i][1], &r, 0.5, 0, NULL);
            mats[i] = (ha_matrix){ .data = bufs[i],
                                   .dtype = dt,
                                   .rows = shapes[i][0],
                                   .cols = shapes[i][1],
                                   .nbytes = ha_matrix_bytes(dt, shapes[i][0], shapes[i][1]) };
        }
        void *down = make_weights(dt, D, F, &r, 0.5, 0, NULL);
        float *norm = make_floats(D, &r, 0.8, 1.2);
        bufs[7] = down;
        bufs[8] = norm;
        ha_llama_layer L = {
            .attn_norm = { norm, D },
            .wq = mats[1],
            .wk = mats[2],
            .wv = mats[3],
            .wo = mats[4],
            .ffn_norm = { norm, D },
            .w_gate = mats[5],
            .w_up = mats[6],
            .w_down = { .data = down, .dtype = dt, .rows = D, .cols = F, .nbytes = ha_matrix_bytes(dt, D, F) }
        };
        ha_llama_weights w = { .embed = mats[0], .final_norm = { norm, D }, .lm_head = mats[0], .layers = &L };
        ha_llama *m = NULL;
        CHECK_OK(ha_llama_create(&cfg, &w, &m));
        ha_llama_context *blas = NULL, *kern = NULL;
        CHECK_OK(ha_llama_context_create(m, 1, N, 1, &blas));
        CHECK_OK(ha_llama_context_create(m, 1, N, 0, &kern));
        int32_t tok[N], seq[N] = { 0 };
        for (int i = 0; i < N; i++) tok[i] = rng_int(&r, V);
        float *a = xmalloc(N * V * sizeof(float)), *b = xmalloc(N * V * sizeof(float));
        CHECK_OK(LM(blas)->append(LM(blas)->self, N, seq, tok, NULL, a));
        CHECK_OK(LM(kern)->append(LM(kern)->self, N, seq, tok, NULL, b));
        double worst = 0.0, scale = 1.0;
        for (int i = 0; i < N * V; i++) {
            worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
            scale = fmax(scale, fabs((double)b[i]));
        }
        const double tol = ha_dtype_is_int(dt) ? 1e-3 : 1e-4;
        CHECK(worst <= tol * scale, "[%s weights] OpenBLAS prefill vs the kernels: max |diff| %g > %g x %g", dname(dt),
              worst, tol, scale);
        ha_llama_context_free(blas);
        ha_llama_context_free(kern);
        ha_llama_free(m);
        for (int i = 0; i < 9; i++) free(bufs[i]);
        free(a);
        free(b);
    }
}

void test_model_crop_then_append_equals_fresh(void) {
    one_thread();
    FOR_EACH_MODEL(t, vname) {
        rng r = { 9 };
        int32_t tok[7], u[4], joined[7];
        random_tokens(&r, tok, 7);
        random_tokens(&r, u, 4);
        memcpy(joined, tok, 3 * sizeof(int32_t));
        memcpy(joined + 3, u, 4 * sizeof(int32_t));
        float la[7 * TV], lb[7 * TV], lc[7 * TV];
        ha_llama_context *a = ctx_new(t->m, 2, 16), *b = ctx_new(t->m, 2, 16), *c = ctx_new(t->m, 1, 16);
        CHECK_OK(append_seq(a, 1, 7, tok, la));
        CHECK_OK(LM(a)->crop(LM(a)->self, 1, 3));
        CHECK(LEN(a, 1) == 3, "after crop to 3 expected length 3, got %lld", (long long)LEN(a, 1));
        CHECK_OK(append_seq(a, 1, 4, u, la));
        CHECK(LEN(a, 1) == 7, "after re-append expected length 7, got %lld", (long long)LEN(a, 1));
        CHECK_OK(append_seq(b, 1, 3, tok, NULL));
        CHECK_OK(append_seq(b, 1, 4, u, lb));
        CHECK_SAME_FLOATS(lb, la, 4 * TV, CASE_FMT "crop(3) + 4 tokens vs a fresh cache with the same 7",
                          CASE_ARGS(t, vname));
        CHECK_OK(append_seq(c, 0, 7, joined, lc));
        CHECK_SAME_FLOATS(lc + 3 * TV, la, 4 * TV, CASE_FMT "crop(3) + 4 tokens vs one 7-token append",
                          CASE_ARGS(t, vname));
        ha_llama_context_free(a);
        ha_llama_context_free(b);
        ha_llama_context_free(c);
    }
}

void test_model_interleaved_sequences_equal_alone(void) {
    FOR_EACH_MODEL(t, vname) {
        enum { N = 10 };
        static const int32_t seq[N] = { 0, 1, 1, 0, 0, 1, 0, 1, 1, 0 };
        rng r = { 10 };
        int32_t tok[N], tok_s[2][N];
        int ns[2] = { 0, 0 };
        random_tokens(&r, tok, N);
        for (int i = 0; i < N; i++) tok_s[seq[i]][ns[seq[i]]++] = tok[i];
        float la[N * TV], ls[2][N * TV];
        ha_llama_context *a = ctx_new(t->m, 2, 16), *b = ctx_new(t->m, 2, 16), *c = ctx_new(t->m, 1, 16);
        CHECK_OK(LM(a)->append(LM(a)->self, N, seq, tok, NULL, la));
        CHECK(LEN(a, 0) == ns[0] && LEN(a, 1) == ns[1], "expected lengths %d, %d; got %lld, %lld", ns[0], ns[1],
              (long long)LEN(a, 0), (long long)LEN(a, 1));
        CHECK_OK(append_seq(b, 1, ns[1], tok_s[1], ls[1]));
        CHECK_OK(append_seq(b, 0, ns[0], tok_s[0], ls[0]));
        int k[2] = { 0, 0 };
        for (int i = 0; i < N; i++) {
            int s = seq[i];
            CHECK_SAME_FLOATS(ls[s] + k[s] * TV, la + i * TV, TV,
                              CASE_FMT "token %d (sequence %d, position %d) interleaved vs its sequence alone",
                              CASE_ARGS(t, vname), i, s, k[s]);
            k[s]++;
        }
        /* and the number of sequences in the cache makes no difference */
        float lc[N * TV];
        CHECK_OK(append_seq(c, 0, ns[0], tok_s[0], lc));
        CHECK_SAME_FLOATS(ls[0], lc, (size_t)ns[0] * TV, CASE_FMT "sequence 0 in a 2-sequence vs a 1-sequence cache",
                          CASE_ARGS(t, vname));
        ha_llama_context_free(a);
        ha_llama_context_free(b);
        ha_llama_context_free(c);
    }
}

void test_model_want_mask_packs_rows(void) {
    one_thread();
    FOR_EACH_MODEL(t, vname) {
        enum { N = 6 };
        static const uint8_t want[N] = { 1, 0, 0, 1, 1, 0 };
        static const int32_t seq[N] = { 0, 0, 0, 0, 0, 0 };
        rng r = { 11 };
        int32_t tok[N + 1];
        random_tokens(&r, tok, N + 1);
        float all[N * TV], packed[3 * TV], next_a[TV], next_b[TV];
        ha_llama_context *a = ctx_new(t->m, 1, 16), *b = ctx_new(t->m, 1, 16);
        CHECK_OK(LM(a)->append(LM(a)->self, N, seq, tok, NULL, all));
        CHECK_OK(LM(b)->append(LM(b)->self, N, seq, tok, want, packed));
        CHECK_SAME_FLOATS(all + 0 * TV, packed + 0 * TV, TV, CASE_FMT "wanted row 0", CASE_ARGS(t, vname));
        CHECK_SAME_FLOATS(all + 3 * TV, packed + 1 * TV, TV, CASE_FMT "wanted row 3, packed second",
                          CASE_ARGS(t, vname));
        CHECK_SAME_FLOATS(all + 4 * TV, packed + 2 * TV, TV, CASE_FMT "wanted row 4, packed third",
                          CASE_ARGS(t, vname));
        /* no row wanted: no logits buffer needed, and the cache is filled all the same */
        CHECK_OK(LM(a)->crop(LM(a)->self, 0, 0));
        CHECK_OK(append_seq(a, 0, N, tok, NULL));
        CHECK_OK(append_seq(a, 0, 1, tok + N, next_a));
        CHECK_OK(append_seq(b, 0, 1, tok + N, next_b));
        CHECK_SAME_FLOATS(next_b, next_a, TV, CASE_FMT "the token after a logit-less prefill", CASE_ARGS(t, vname));
        ha_llama_context_free(a);
        ha_llama_context_free(b);
    }
}

/* One fixed workload: a 9-token chunk of two sequences then 3 one-token steps; logits (12, V). */
void workload(const ha_llama *m, ha_llama_context *reuse, float *logits) {
    static const int32_t seq[9] = { 0, 0, 1, 0, 1, 1, 0, 0, 1 };
    static const int32_t tok[9] = { 3, 17, 42, 8, 0, 49, 21, 5, 33 };
    ha_llama_context *c = reuse ? reuse : ctx_new(m, 2, 16);
    if (reuse) {
        CHECK_OK(LM(c)->crop(LM(c)->self, 0, 0));
        CHECK_OK(LM(c)->crop(LM(c)->self, 1, 0));
    }
    CHECK_OK(LM(c)->append(LM(c)->self, 9, seq, tok, NULL, logits));
    for (int i = 0; i < 3; i++) {
        int32_t s2[2] = { 0, 1 }, t2[2] = { (int32_t)(7 * i + 1), (int32_t)(11 * i + 2) };
        if (i == 1) CHECK_OK(LM(c)->append(LM(c)->self, 1, s2 + 1, t2 + 1, NULL, logits + (9 + i) * TV));
        else CHECK_OK(LM(c)->append(LM(c)->self, 1, s2, t2, NULL, logits + (9 + i) * TV));
    }
    if (!reuse) ha_llama_context_free(c);
}

void test_model_thread_count_gives_identical_logits(void) {
    FOR_EACH_MODEL(t, vname) {
        float l1[12 * TV], l2[12 * TV];
        CHECK_OK(ha_set_num_threads(1));
        workload(t->m, NULL, l1);
        CHECK_OK(ha_set_num_threads(2));
        workload(t->m, NULL, l2);
        CHECK_SAME_FLOATS(l1, l2, 12 * TV, CASE_FMT "1 thread vs 2 threads", CASE_ARGS(t, vname));
    }
    CHECK_OK(ha_set_num_threads(1));
}

/* Every variant gives the same bits: whole forwards of chunks, of single tokens and of two sequences, every
 * weight format (row-major and panels, integer). */
void test_model_kernel_variants_give_the_same_bits(void) {
    one_thread();
    const char *vn[NVARIANTS];
    int nv = forward_variants(vn);
    for (size_t mc = 0; mc < COUNT(MODEL_CASES); mc++) {
        tiny *t = tiny_build(MODEL_CASES[mc].dtype, MODEL_CASES[mc].bias, 0, 0, 100 + mc);
        float ls[12 * TV], la[12 * TV];
        CHECK_OK(ha_kernels_select("scalar"));
        workload(t->m, NULL, ls);
        for (int v = 1; v < nv; v++) {
            CHECK_OK(ha_kernels_select(vn[v]));
            workload(t->m, NULL, la);
            CHECK_SAME_FLOATS(ls, la, 12 * TV, "[%s weights] scalar vs %s logits", dname(t->dtype), vn[v]);
        }
        tiny_free(t);
    }
}

/* sliding_window 1: every layer attends to the token itself only, so a token's logits do not depend on
 * the tokens before it; a window as long as the cache changes nothing. */
void test_model_sliding_window_limits_attention(void) {
    const char *vn[NVARIANTS];
    int nv = forward_variants(vn);
    for (int v = 0; v < nv; v++) {
        CHECK_OK(ha_kernels_select(vn[v]));
        tiny *full = tiny_build(HA_BF16, 1, 0, 0, 5), *w1 = tiny_build(HA_BF16, 1, 0, 1, 5),
             *w16 = tiny_build(HA_BF16, 1, 0, 16, 5);
        const int32_t p1[3] = { 4, 9, 30 }, p2[3] = { 40, 2, 30 };
        float a[3 * TV], b[3 * TV], c[3 * TV], d[3 * TV];
        ha_llama_context *ca = ctx_new(w1->m, 2, 16);
        CHECK_OK(append_seq(ca, 0, 3, p1, a));
        CHECK_OK(append_seq(ca, 1, 3, p2, b));
        CHECK_SAME_FLOATS(a + 2 * TV, b + 2 * TV, TV, "[%s] window 1: token 30 at position 2 after different tokens",
                          vn[v]);
        ha_llama_context_free(ca);
        ha_llama_context *cf = ctx_new(full->m, 2, 16), *cw = ctx_new(w16->m, 2, 16);
        CHECK_OK(append_seq(cf, 0, 3, p1, a));
        CHECK_OK(append_seq(cf, 1, 3, p2, b));
        CHECK(memcmp(a + 2 * TV, b + 2 * TV, TV * sizeof(float)) != 0,
              "[%s] no window: expected token 30 at position 2 to see the different tokens before it", vn[v]);
        CHECK_OK(append_seq(cw, 0, 3, p1, c));
        CHECK_OK(append_seq(cw, 1, 3, p2, d));
        CHECK_SAME_FLOATS(a, c, 3 * TV, "[%s] window 16 vs none, sequence 0", vn[v]);
        CHECK_SAME_FLOATS(b, d, 3 * TV, "[%s] window 16 vs none, sequence 1", vn[v]);
        ha_llama_context_free(cf);
        ha_llama_context_free(cw);
        tiny_free(full);
        tiny_free(w1);
        tiny_free(w16);
    }
}

/* A window-4 model's cache of 700 positions keeps its layers in rings of 4 + 256 slots, wrapping twice. Two
 * sequences whose tokens differ only where no checked position can see them must give those positions the
 * same logits bitwise (a ring slot read for the wrong position would show the difference), and the others
 * different ones; appended in chunks of varying size. Crops within the ring's slack continue bitwise; deeper
 * ones are refused with nothing changed; crop to 0 always works. */
void test_model_ring_cache_keeps_the_window(void) {
    enum { N = 700, W = 4 };
    tiny *t = tiny_build(HA_F32, 1, 0, W, 6);
    ha_llama_context *c = ctx_new(t->m, 2, 1000);
    CHECK(LM(c)->max_rollback == 256, "a window-4 model with capacity 1000 expected max_rollback 256, got %lld",
          (long long)LM(c)->max_rollback);
    rng r = { 8 };
    int32_t *x = xmalloc(N * sizeof(int32_t)), *y = xmalloc(N * sizeof(int32_t));
    float *a = xmalloc((size_t)N * TV * sizeof(float)), *b = xmalloc((size_t)N * TV * sizeof(float));
    random_tokens(&r, x, N);
    for (int i = 0; i < N; i++) y[i] = i % 50 < 20 ? (x[i] + 1) % TV : x[i]; /* differ where i mod 50 < 20 */
    static const int steps[] = { 1, 7, 32, 45, 3, 128, 19, 64 };
    for (int i = 0, k = 0; i < N; k++) {
        int n = steps[k % COUNT(steps)] < N - i ? steps[k % COUNT(steps)] : N - i;
        CHECK_OK(append_seq(c, 0, n, x + i, a + (size_t)i * TV));
        CHECK_OK(append_seq(c, 1, n, y + i, b + (size_t)i * TV));
        i += n;
    }
    for (int p = 0; p < N; p++) {
        /* through TL layers a position sees TL * (W - 1) positions back: all outside the differing stretch */
        int same_window = p % 50 >= 20 + TL * (W - 1);
        if (same_window)
            CHECK_SAME_FLOATS(a + (size_t)p * TV, b + (size_t)p * TV, TV, "position %d sees the same tokens", p);
        else if (p % 50 < 20)
            CHECK(memcmp(a + (size_t)p * TV, b + (size_t)p * TV, TV * sizeof(float)) != 0,
                  "position %d's own token differs but its logits do not", p);
    }
    /* Back 200 positions (within the slack) and forward again: the same logits. */
    float *again = xmalloc((size_t)200 * TV * sizeof(float));
    CHECK_OK(LM(c)->crop(LM(c)->self, 0, N - 200));
    CHECK_OK(append_seq(c, 0, 200, x + N - 200, again));
    CHECK_SAME_FLOATS(a + (size_t)(N - 200) * TV, again, (size_t)200 * TV, "the last 200 positions after a crop");
    /* Back 300 (past the slack): refused, the sequence unchanged. */
    CHECK_STATUS(LM(c)->crop(LM(c)->self, 0, N - 300), HA_ERR_UNSUPPORTED);
    CHECK_MSG("sliding-window");
    CHECK(LEN(c, 0) == N, "a refused crop changed the length to %lld", (long long)LEN(c, 0));
    CHECK_OK(LM(c)->crop(LM(c)->self, 0, 0));
    CHECK_OK(append_seq(c, 0, 10, x, again));
    CHECK_SAME_FLOATS(a, again, (size_t)10 * TV, "after crop to 0, the first 10 positions");
    ha_llama_context_free(c);
    /* A window near INT64_MAX is no ring (and its size does not overflow). */
    tiny *huge = tiny_build(HA_F32, 1, 0, INT64_MAX, 6);
    c = ctx_new(huge->m, 1, 16);
    CHECK_OK(append_seq(c, 0, 16, x, again));
    ha_llama_context_free(c);
    tiny_free(huge);
    /* A cache no longer than window + slack is not a ring, and crops anywhere. */
    c = ctx_new(t->m, 1, W + 256);
    CHECK(LM(c)->max_rollback == INT64_MAX, "capacity 260 expected no ring, max_rollback %lld",
          (long long)LM(c)->max_rollback);
    CHECK_OK(append_seq(c, 0, 250, x, NULL));
    CHECK_OK(LM(c)->crop(LM(c)->self, 0, 1));
    ha_llama_context_free(c);
    free(x);
    free(y);
    free(a);
    free(b);
    free(again);
    tiny_free(t);
}

/* A copy of a sliding-window cache that was cropped back after a longer append (as generate() and assisted
 * generation leave it) is a clone: into a cache of the same capacity and into a larger one, every layer starts
 * where the source's does, a crop is allowed exactly where the source allows it, and after the same crop both
 * continue bitwise alike (copy.deepcopy of a Python cache is a Context of the same capacity plus this copy). */
void test_model_cache_copy_of_a_cropped_ring_is_a_clone(void) {
    enum { N = 700, BACK = 200, M = 40, W = 4 };
    tiny *t = tiny_build(HA_F32, 1, 0, W, 91);
    rng r = { 14 };
    int32_t *x = xmalloc((N + M) * sizeof(int32_t));
    random_tokens(&r, x, N + M);
    float *want = xmalloc((size_t)M * TV * sizeof(float)), *got = xmalloc((size_t)M * TV * sizeof(float));
    ha_llama_context *src = ctx_new(t->m, 2, 1000);
    CHECK_OK(append_seq(src, 1, N, x, NULL));
    CHECK_OK(LM(src)->crop(LM(src)->self, 1, N - BACK)); /* positions N - BACK .. N - 1 stay written in the ring */
    const int64_t L = N - BACK;
    for (int grow = 0; grow < 2; grow++) {
        ha_llama_context *dst = ctx_new(t->m, 2, grow ? 2000 : 1000);
        CHECK_OK(append_seq(dst, 1, 30, x + 5, NULL)); /* older contents, overwritten by the copy */
        CHECK_OK(ha_llama_context_copy(dst, src));
        CHECK(LEN(dst, 1) == L && LEN(dst, 0) == 0, "[grow %d] copy: lengths %lld, %lld", grow, (long long)LEN(dst, 1),
              (long long)LEN(dst, 0));
        for (int l = 0; l < TL; l++)
            CHECK(ha_llama_context_kv_first(dst, l, 1) == ha_llama_context_kv_first(src, l, 1),
                  "[grow %d] layer %d of the copy starts at %lld, the source's at %lld", grow, l,
                  (long long)ha_llama_context_kv_first(dst, l, 1), (long long)ha_llama_context_kv_first(src, l, 1));
        for (int64_t back = 0; back <= 300; back += 10)
            CHECK(ha_llama_context_can_crop(dst, 1, L - back) == ha_llama_context_can_crop(src, 1, L - back),
                  "[grow %d] crop back %lld: the copy says %d, the source %d", grow, (long long)back,
                  ha_llama_context_can_crop(dst, 1, L - back), ha_llama_context_can_crop(src, 1, L - back));
        ha_llama_context_free(dst);
    }
    /* the same crop (the furthest the source allows) and the same continuation: the same logits */
    int64_t keep = L;
    while (keep > 0 && ha_llama_context_can_crop(src, 1, keep - 1)) keep--;
    ha_llama_context *dst = ctx_new(t->m, 2, 1000);
    CHECK_OK(ha_llama_context_copy(dst, src));
    CHECK(keep < L, "the source allows no crop back from %lld", (long long)L);
    CHECK_OK(LM(src)->crop(LM(src)->self, 1, keep));
    CHECK_OK(LM(dst)->crop(LM(dst)->self, 1, keep));
    CHECK_OK(append_seq(src, 1, M, x + N, want));
    CHECK_OK(append_seq(dst, 1, M, x + N, got));
    CHECK_SAME_FLOATS(want, got, (size_t)M * TV, "the copy cropped to %lld continues as the source", (long long)keep);
    ha_llama_context_free(dst);
    ha_llama_context_free(src);
    free(x);
    free(want);
    free(got);
    tiny_free(t);
}

/* Concatenates the bytes of matrices of one dtype (row-major rows, or whole panels) into one fused matrix. */
static ha_matrix fuse(tiny *t, const ha_matrix *parts, int n) {
    int64_t rows = 0;
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        rows += parts[i].rows;
        bytes += parts[i].nbytes;
    }
    char *p = tiny_keep(t, xmalloc(bytes)), *at = p;
    for (int i = 0; i < n; i++) {
        memcpy(at, parts[i].data, parts[i].nbytes);
        at += parts[i].nbytes;
    }
    return (ha_matrix){ .data = p, .dtype = parts[0].dtype, .rows = rows, .cols = parts[0].cols, .nbytes = bytes };
}

/* ha_llama_context_copy, read_kv / write_kv / set_length and record_hidden (the Python caches' growth, legacy
 * tuples and output_hidden_states): a copy into a larger and into a smaller cache continues bitwise as the
 * original does, with a sliding window's ring too; keys read out and written into a fresh cache continue the
 * same; hidden states of one append equal those of the same tokens in pieces; bad sizes and ranges are refused. */
void test_model_cache_copy_kv_and_hidden_states(void) {
    enum { N = 300, M = 20, W = 4 };
    for (int windowed = 0; windowed < 2; windowed++) {
        tiny *t = tiny_build(HA_F32, 1, 0, windowed ? W : 0, 77);
        rng r = { 12 };
        int32_t *x = xmalloc((N + M) * sizeof(int32_t));
        random_tokens(&r, x, N + M);
        float *want = xmalloc((size_t)M * TV * sizeof(float)), *got = xmalloc((size_t)M * TV * sizeof(float));
        ha_llama_context *src = ctx_new(t->m, 2, N + M), *big = ctx_new(t->m, 2, 2 * (N + M)),
                         *small = ctx_new(t->m, 2, N + M - 5), *other = ctx_new(t->m, 3, N + M);
        CHECK_OK(append_seq(src, 1, N, x, NULL));
        CHECK_OK(ha_llama_context_copy(big, src));
        CHECK_OK(ha_llama_context_copy(small, src));
        CHECK(LEN(big, 1) == N && LEN(big, 0) == 0, "copy: lengths %lld, %lld", (long long)LEN(big, 1),
              (long long)LEN(big, 0));
        CHECK_OK(append_seq(src, 1, M, x + N, want));
        CHECK_OK(append_seq(big, 1, M, x + N, got));
        CHECK_SAME_FLOATS(want, got, (size_t)M * TV, "[window %d] a copy into a larger cache continues the same",
                          windowed * W);
        CHECK_OK(append_seq(small, 1, M - 5, x + N, got));
        CHECK_SAME_FLOATS(want, got, (size_t)(M - 5) * TV, "[window %d] a copy into a smaller cache", windowed * W);
        CHECK_STATUS(ha_llama_context_copy(other, src), HA_ERR_INVALID);
        CHECK_STATUS(ha_llama_context_copy(src, src), HA_ERR_INVALID);
        CHECK_OK(LM(src)->crop(LM(src)->self, 1, N));
        /* every held position of every layer out, into a fresh cache, then the same continuation */
        ha_llama_context *fresh = ctx_new(t->m, 2, N + M);
        float *k = xmalloc((size_t)TNKV * N * THD * sizeof(float)),
              *v = xmalloc((size_t)TNKV * N * THD * sizeof(float));
        for (int l = 0; l < TL; l++) {
            const int64_t first = ha_llama_context_kv_first(src, l, 1), n = N - first;
            CHECK(windowed ? first > 0 : first == 0, "kv_first %lld (window %d)", (long long)first, windowed * W);
            CHECK_OK(ha_llama_context_read_kv(src, l, 1, first, n, k, v, (size_t)(TNKV * n * THD)));
            CHECK_OK(ha_llama_context_write_kv(fresh, l, 1, first, n, k, v, (size_t)(TNKV * n * THD)));
            if (first > 0)
                CHECK_STATUS(ha_llama_context_read_kv(src, l, 1, 0, 1, k, v, (size_t)(TNKV * THD)), HA_ERR_INVALID);
        }
        CHECK_STATUS(ha_llama_context_read_kv(src, 0, 1, 0, 2, k, v, 3), HA_ERR_INVALID); /* wrong size */
        CHECK_STATUS(ha_llama_context_read_kv(src, 0, 1, N - 1, 2, k, v, (size_t)(TNKV * 2 * THD)), HA_ERR_INVALID);
        CHECK_STATUS(ha_llama_context_write_kv(fresh, TL, 1, 0, 1, k, v, (size_t)(TNKV * THD)), HA_ERR_INVALID);
        CHECK_STATUS(ha_llama_context_set_length(fresh, 1, N + M + 1), HA_ERR_INVALID);
        CHECK_OK(ha_llama_context_set_length(fresh, 1, N));
        CHECK_OK(append_seq(fresh, 1, M, x + N, got));
        CHECK_SAME_FLOATS(want, got, (size_t)M * TV, "[window %d] keys and values written into a fresh cache",
                          windowed * W);
        /* hidden states: one append of 12 tokens vs 5 + 7 */
        enum { H = 12 };
        float *one = xmalloc((size_t)(TL + 1) * H * TD * sizeof(float));
        float *a = xmalloc((size_t)(TL + 1) * 5 * TD * sizeof(float)),
              *b = xmalloc((size_t)(TL + 1) * 7 * TD * sizeof(float));
        ha_llama_context *h = ctx_new(t->m, 1, H), *h2 = ctx_new(t->m, 1, H);
        CHECK_STATUS(ha_llama_context_record_hidden(h, one, 7, H), HA_ERR_INVALID);
        CHECK_OK(ha_llama_context_record_hidden(h, one, (size_t)(TL + 1) * H * TD, H));
        CHECK_STATUS(append_seq(h, 0, H - 1, x, NULL), HA_ERR_INVALID); /* not the count asked for: nothing added */
        CHECK(LEN(h, 0) == 0, "a refused append added %lld positions", (long long)LEN(h, 0));
        CHECK_OK(ha_llama_context_record_hidden(h, one, (size_t)(TL + 1) * H * TD, H));
        CHECK_OK(append_seq(h, 0, H, x, NULL));
        CHECK_OK(ha_llama_context_record_hidden(h2, a, (size_t)(TL + 1) * 5 * TD, 5));
        CHECK_OK(append_seq(h2, 0, 5, x, NULL));
        CHECK_OK(ha_llama_context_record_hidden(h2, b, (size_t)(TL + 1) * 7 * TD, 7));
        CHECK_OK(append_seq(h2, 0, 7, x + 5, NULL));
        for (int e = 0; e <= TL; e++) {
            CHECK_SAME_FLOATS(one + (size_t)e * H * TD, a + (size_t)e * 5 * TD, 5 * TD, "hidden entry %d, tokens 0..4",
                              e);
            CHECK_SAME_FLOATS(one + ((size_t)e * H + 5) * TD, b + (size_t)e * 7 * TD, 7 * TD, "hidden entry %d, 5..11",
                              e);
        }
        ha_llama_context_free(h);
        ha_llama_context_free(h2);
        ha_llama_context_free(fresh);
        ha_llama_context_free(src);
        ha_llama_context_free(big);
        ha_llama_context_free(small);
        ha_llama_context_free(other);
        free(one);
        free(a);
        free(b);
        free(k);
        free(v);
        free(x);
        free(want);
        free(got);
        tiny_free(t);
    }
}

/* Fused wqkv (with bqkv) and w_gate_up, made of the same rows, give the split model's logits bitwise, in every
 * dtype (the parts' rows are whole panels: 32, 16, 16 and 48, 48). */
void test_model_fused_projections_equal_split(void) {
    for (size_t mc = 0; mc < COUNT(MODEL_CASES); mc++) {
        tiny *t = tiny_build(MODEL_CASES[mc].dtype, 1, 0, 0, 40 + mc),
             *u = tiny_build(MODEL_CASES[mc].dtype, 1, 0, 0, 40 + mc);
        for (int l = 0; l < TL; l++) {
            ha_llama_layer *L = &u->layers[l];
            const ha_matrix qkv[3] = { L->wq, L->wk, L->wv }, gu[2] = { L->w_gate, L->w_up };
            float *bqkv = tiny_keep(u, xmalloc((TQ + 2 * TKV) * sizeof(float)));
            memcpy(bqkv, L->bq.data, TQ * sizeof(float));
            memcpy(bqkv + TQ, L->bk.data, TKV * sizeof(float));
            memcpy(bqkv + TQ + TKV, L->bv.data, TKV * sizeof(float));
            L->wqkv = fuse(u, qkv, 3);
            L->w_gate_up = fuse(u, gu, 2);
            L->bqkv = (ha_vector){ bqkv, TQ + 2 * TKV };
            L->wq = L->wk = L->wv = L->w_gate = L->w_up = (ha_matrix){ 0 };
            L->bq = L->bk = L->bv = (ha_vector){ 0 };
        }
        ha_llama *fused = NULL;
        CHECK_OK(ha_llama_create(&u->cfg, &u->w, &fused));
        rng r = { 3 };
        int32_t tok[20];
        float a[20 * TV], b[20 * TV];
        random_tokens(&r, tok, 20);
        ha_llama_context *ca = ctx_new(t->m, 1, 32), *cb = ctx_new(fused, 1, 32);
        CHECK_OK(append_seq(ca, 0, 20, tok, a));
        CHECK_OK(append_seq(cb, 0, 20, tok, b));
        CHECK_SAME_FLOATS(a, b, 20 * TV, "case %zu: fused vs split projections", mc);
        /* both forms at once: refused */
        u->layers[1].wq = t->layers[1].wq;
        ha_llama *both = NULL;
        CHECK_STATUS(ha_llama_create(&u->cfg, &u->w, &both), HA_ERR_INVALID);
        CHECK_MSG("fused wqkv");
        ha_llama_context_free(ca);
        ha_llama_context_free(cb);
        ha_llama_free(fused);
        tiny_free(t);
        tiny_free(u);
    }
}

/* ---- 4. KV cache contract ----------------------------------------------------------------------------- */

void test_kv_capacity_error_appends_nothing(void) {
    one_thread();
    tiny *t = tiny_build(HA_BF16, 1, 0, 0, 21);
    rng r = { 12 };
    int32_t tok[16], more[7];
    random_tokens(&r, tok, 16);
    random_tokens(&r, more, 7);
    ha_llama_context *a = ctx_new(t->m, 2, 16), *ref = ctx_new(t->m, 2, 16);
    CHECK_OK(append_seq(a, 0, 10, tok, NULL));
    CHECK_OK(append_seq(ref, 0, 10, tok, NULL));
    float la[7 * TV], lr[7 * TV];
    CHECK_STATUS(append_seq(a, 0, 7, more, la), HA_ERR_CAPACITY);
    CHECK_MSG("capacity");
    CHECK_MSG("16");
    CHECK(LEN(a, 0) == 10, "a failed append expected to leave length 10, got %lld", (long long)LEN(a, 0));
    /* one sequence with room and one without: neither gets anything */
    const int32_t seq[9] = { 1, 1, 0, 0, 0, 0, 0, 0, 0 }, t9[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    CHECK_STATUS(LM(a)->append(LM(a)->self, 9, seq, t9, NULL, la), HA_ERR_CAPACITY);
    CHECK(LEN(a, 0) == 10 && LEN(a, 1) == 0, "a failed append expected to leave lengths 10, 0; got %lld, %lld",
          (long long)LEN(a, 0), (long long)LEN(a, 1));
    /* then a valid append is as if the failed calls never happened */
    CHECK_OK(append_seq(a, 0, 6, more, la));
    CHECK_OK(append_seq(ref, 0, 6, more, lr));
    CHECK_SAME_FLOATS(lr, la, 6 * TV, "logits after two failed appends vs a cache that never saw them");
    CHECK(LEN(a, 0) == 16, "expected a full sequence of 16, got %lld", (long long)LEN(a, 0));
    CHECK_STATUS(append_seq(a, 0, 1, more, la), HA_ERR_CAPACITY);
    CHECK(LEN(a, 0) == 16, "expected the full sequence to stay at 16, got %lld", (long long)LEN(a, 0));
    /* the other sequence has its own room */
    CHECK_OK(append_seq(a, 1, 16, tok, NULL));
    CHECK(LEN(a, 1) == 16, "expected sequence 1 to hold 16, got %lld", (long long)LEN(a, 1));
    ha_llama_context_free(a);
    ha_llama_context_free(ref);
    tiny_free(t);
}

/* The KV cache's memory (ha_alloc_streamed): every byte writable, and given back by ha_free_streamed (malloc's,
 * which LeakSanitizer checks, or a mapping of its own); from 2 MB up, where the system has transparent huge
 * pages, a mapping of its own at a 2 MB boundary, so that huge pages can back it; with HA_HUGE_PAGES=0, malloc's. */
void test_streamed_buffers_hold_their_size_at_huge_page_boundaries(void) {
    const size_t sizes[] = { 1, 4096, ((size_t)2 << 20) - 1, (size_t)2 << 20, ((size_t)5 << 20) + 3 };
    for (int off = 0; off <= 1; off++) {
        if (off) setenv("HA_HUGE_PAGES", "0", 1);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            int mapped = -1;
            unsigned char *p = ha_alloc_streamed(sizes[i], &mapped);
            CHECK(p != NULL, "a buffer of %zu bytes expected, got NULL", sizes[i]);
            memset(p, 0xA5, sizes[i]);
            CHECK(p[0] == 0xA5 && p[sizes[i] - 1] == 0xA5, "the first and last of %zu bytes expected written",
                  sizes[i]);
            int own = 0;
#ifdef MADV_HUGEPAGE
            own = !off && sizes[i] >= ((size_t)2 << 20);
#endif
            CHECK(mapped == own, "%zu bytes (HA_HUGE_PAGES=0: %d): mapping of its own expected %d, got %d", sizes[i],
                  off, own, mapped);
            const int at_boundary = ((uintptr_t)p & (((uintptr_t)2 << 20) - 1)) == 0;
            if (own)
                CHECK(at_boundary, "a buffer of %zu bytes expected at a 2 MB boundary, got %p", sizes[i], (void *)p);
            ha_free_streamed(p, sizes[i], mapped);
        }
    }
    unsetenv("HA_HUGE_PAGES");
}

void test_kv_invalid_token_appends_nothing(void) {
    tiny *t = tiny_build(HA_F32, 0, 0, 0, 22);
    ha_llama_context *a = ctx_new(t->m, 2, 16), *ref = ctx_new(t->m, 2, 16);
    float la[4 * TV], lr[4 * TV];
    const int32_t neg[3] = { 3, 4, -1 }, big[3] = { 3, 4, TV }, good[4] = { 3, 4, 5, TV - 1 };
    CHECK_STATUS(append_seq(a, 0, 3, neg, la), HA_ERR_INVALID);
    CHECK_MSG("-1");
    CHECK(LEN(a, 0) == 0, "token id -1: expected nothing appended, got length %lld", (long long)LEN(a, 0));
    CHECK_STATUS(append_seq(a, 0, 3, big, la), HA_ERR_INVALID);
    CHECK_MSG("50");
    CHECK(LEN(a, 0) == 0, "token id == vocab: expected nothing appended, got length %lld", (long long)LEN(a, 0));
    const int32_t s2[2] = { 0, 2 }, sneg[2] = { 0, -1 }, t2[2] = { 1, 2 };
    CHECK_STATUS(LM(a)->append(LM(a)->self, 2, s2, t2, NULL, la), HA_ERR_INVALID);
    CHECK_MSG("sequence 2");
    CHECK_STATUS(LM(a)->append(LM(a)->self, 2, sneg, t2, NULL, la), HA_ERR_INVALID);
    CHECK(LEN(a, 0) == 0, "sequence out of range: expected nothing appended, got length %lld", (long long)LEN(a, 0));
    /* logits wanted but no buffer */
    const int32_t s00[2] = { 0, 0 };
    CHECK_STATUS(LM(a)->append(LM(a)->self, 2, s00, t2, NULL, NULL), HA_ERR_INVALID);
    CHECK(LEN(a, 0) == 0, "no logits buffer: expected nothing appended, got length %lld", (long long)LEN(a, 0));
    CHECK_STATUS(LM(a)->append(LM(a)->self, -1, s00, t2, NULL, la), HA_ERR_INVALID);
    CHECK_OK(LM(a)->append(LM(a)->self, 0, NULL, NULL, NULL, NULL));
    CHECK_OK(append_seq(a, 0, 4, good, la));
    CHECK_OK(append_seq(ref, 0, 4, good, lr));
    CHECK_SAME_FLOATS(lr, la, 4 * TV, "logits after rejected appends vs a fresh cache");
    ha_llama_context_free(a);
    ha_llama_context_free(ref);
    tiny_free(t);
}

void test_kv_bad_sequence_and_crop_rejected(void) {
    tiny *t = tiny_build(HA_F32, 1, 0, 0, 23);
    ha_llama_context *a = ctx_new(t->m, 2, 16);
    const int32_t tok[5] = { 1, 2, 3, 4, 5 };
    CHECK_OK(append_seq(a, 0, 5, tok, NULL));
    CHECK_STATUS(LM(a)->crop(LM(a)->self, 0, 6), HA_ERR_INVALID);
    CHECK_MSG("5");
    CHECK_STATUS(LM(a)->crop(LM(a)->self, 0, -1), HA_ERR_INVALID);
    CHECK_STATUS(LM(a)->crop(LM(a)->self, 1, 1), HA_ERR_INVALID);
    CHECK_STATUS(LM(a)->crop(LM(a)->self, 2, 0), HA_ERR_INVALID);
    CHECK_MSG("sequence 2");
    CHECK_STATUS(LM(a)->crop(LM(a)->self, -1, 0), HA_ERR_INVALID);
    CHECK(LEN(a, 0) == 5 && LEN(a, 1) == 0, "rejected crops expected to leave lengths 5, 0; got %lld, %lld",
          (long long)LEN(a, 0), (long long)LEN(a, 1));
    CHECK(LEN(a, 2) == 0 && LEN(a, -1) == 0, "length of an out-of-range sequence expected 0, got %lld, %lld",
          (long long)LEN(a, 2), (long long)LEN(a, -1));
    CHECK_OK(LM(a)->crop(LM(a)->self, 0, 5));
    CHECK(LEN(a, 0) == 5, "crop to the current length expected to keep 5, got %lld", (long long)LEN(a, 0));
    ha_llama_context *c = NULL;
    CHECK_STATUS(ha_llama_context_create(t->m, 0, 16, 0, &c), HA_ERR_INVALID);
    CHECK_STATUS(ha_llama_context_create(t->m, 1, 0, 0, &c), HA_ERR_INVALID);
    CHECK_STATUS(ha_llama_context_create(NULL, 1, 16, 0, &c), HA_ERR_INVALID);
    CHECK(c == NULL, "a rejected context expected NULL");
    ha_llama_context_free(NULL);
    ha_llama_context_free(a);
    tiny_free(t);
}

void test_kv_crop_to_zero_equals_fresh(void) {
    tiny *t = tiny_build(HA_BF16, 0, 0, 0, 24);
    rng r = { 13 };
    int32_t t1[9], t2[6];
    random_tokens(&r, t1, 9);
    random_tokens(&r, t2, 6);
    float la[6 * TV], lf[6 * TV];
    ha_llama_context *a = ctx_new(t->m, 2, 16), *f = ctx_new(t->m, 2, 16);
    CHECK_OK(append_seq(a, 0, 9, t1, NULL));
    CHECK_OK(append_seq(a, 1, 9, t1, NULL));
    CHECK_OK(LM(a)->crop(LM(a)->self, 0, 0));
    CHECK(LEN(a, 0) == 0 && LEN(a, 1) == 9, "crop(0, 0) expected lengths 0, 9; got %lld, %lld", (long long)LEN(a, 0),
          (long long)LEN(a, 1));
    CHECK_OK(append_seq(a, 0, 6, t2, la));
    CHECK_OK(append_seq(f, 0, 6, t2, lf));
    CHECK_SAME_FLOATS(lf, la, 6 * TV, "crop to 0 and re-append vs a fresh cache");
    ha_llama_context_free(a);
    ha_llama_context_free(f);
    tiny_free(t);
}

/* ---- 5. ha_llama_create rejects bad weights and configs ----------------------------------------------- */


#define EXPECT_CREATE_FAILS(t, needle1, needle2)                                                          \
    do {                                                                                                  \
        ha_llama *m_ = (ha_llama *)(void *)&sentinel_model;                                               \
        ha_status st_ = ha_llama_create(&(t)->cfg, &(t)->w, &m_);                                         \
        if (st_ != HA_ERR_INVALID)                                                                        \
            FAIL("expected HA_ERR_INVALID mentioning \"%s\", got %s (\"%s\")", needle1, status_name(st_), \
                 ha_last_error());                                                                        \
        if (m_ != NULL) FAIL("a rejected ha_llama_create expected *out == NULL, got %p", (void *)m_);     \
        CHECK_MSG(needle1);                                                                               \
        CHECK_MSG(needle2);                                                                               \
    } while (0)

void test_create_rejects_bad_weights(void) {
    tiny *t = tiny_build(HA_BF16, 1, 0, 0, 31);
    ha_llama_layer *L0 = &t->layers[0], *L1 = &t->layers[1];
    ha_matrix saved;

    saved = L1->wk;
    L1->wk.rows = TKV - 4;
    L1->wk.nbytes = (size_t)(TKV - 4) * TD * 2;
    EXPECT_CREATE_FAILS(t, "weight wk (layer 1)", "shape");
    L1->wk = saved;

    saved = t->w.lm_head;
    t->w.lm_head.cols = TD - 1;
    EXPECT_CREATE_FAILS(t, "lm_head", "shape");
    t->w.lm_head = saved;

    saved = L0->w_up;
    L0->w_up.nbytes -= 2;
    EXPECT_CREATE_FAILS(t, "weight w_up (layer 0)", "bytes");
    L0->w_up = saved;

    saved = L1->wo;
    L1->wo.data = NULL;
    EXPECT_CREATE_FAILS(t, "weight wo (layer 1)", "missing");
    L1->wo = saved;

    saved = L0->wq;
    L0->wq.dtype = HA_NDTYPES;
    EXPECT_CREATE_FAILS(t, "weight wq (layer 0)", "dtype");
    L0->wq = saved;

    /* a bfloat16 matrix one byte off its element alignment */
    saved = L1->w_down;
    char *shifted = xmalloc(saved.nbytes + 2);
    memcpy(shifted + 1, saved.data, saved.nbytes);
    L1->w_down.data = shifted + 1;
    EXPECT_CREATE_FAILS(t, "weight w_down (layer 1)", "aligned");
    L1->w_down = saved;

    ha_vector vsaved = L0->attn_norm;
    char *fshift = xmalloc(TD * sizeof(float) + 4);
    L0->attn_norm.data = (const float *)(const void *)(fshift + 2);
    EXPECT_CREATE_FAILS(t, "attn_norm (layer 0)", "aligned");
    L0->attn_norm.data = NULL;
    EXPECT_CREATE_FAILS(t, "attn_norm (layer 0)", "missing");
    L0->attn_norm = vsaved;

    vsaved = L1->bk;
    L1->bk.n = TKV - 1;
    EXPECT_CREATE_FAILS(t, "bk (layer 1)", "elements");
    L1->bk = vsaved;

    vsaved = t->w.final_norm;
    t->w.final_norm.data = NULL;
    EXPECT_CREATE_FAILS(t, "final_norm", "missing");
    t->w.final_norm = vsaved;

    t->w.layers = NULL;
    EXPECT_CREATE_FAILS(t, "layer weights", "missing");
    t->w.layers = t->layers;

    /* everything restored: it builds again */
    ha_llama *m = NULL;
    CHECK_OK(ha_llama_create(&t->cfg, &t->w, &m));
    ha_llama_free(m);
    CHECK_STATUS(ha_llama_create(NULL, &t->w, &m), HA_ERR_INVALID);
    CHECK_STATUS(ha_llama_create(&t->cfg, NULL, &m), HA_ERR_INVALID);
    CHECK_STATUS(ha_llama_create(&t->cfg, &t->w, NULL), HA_ERR_INVALID);
    ha_llama_free(NULL);
    free(shifted);
    free(fshift);
    tiny_free(t);
}

void test_create_rejects_bad_config(void) {
    tiny *t = tiny_build(HA_F32, 0, 0, 0, 32);
    ha_llama_config saved = t->cfg;

    t->cfg.n_kv_heads = 3;
    EXPECT_CREATE_FAILS(t, "n_heads=4", "n_kv_heads=3");
    t->cfg = saved;
    t->cfg.n_kv_heads = 8;
    EXPECT_CREATE_FAILS(t, "n_kv_heads=8", "range");
    t->cfg = saved;
    t->cfg.head_dim = 7;
    EXPECT_CREATE_FAILS(t, "head_dim=7", "even");
    t->cfg = saved;
    t->cfg.head_dim = HA_MAX_HEAD_DIM + 2;
    EXPECT_CREATE_FAILS(t, "head_dim", "range");
    t->cfg = saved;
    const float bad_eps[] = { 0.0f, -1e-5f, NAN, INFINITY };
    for (size_t i = 0; i < COUNT(bad_eps); i++) {
        t->cfg.norm_eps = bad_eps[i];
        EXPECT_CREATE_FAILS(t, "norm_eps", "positive");
    }
    t->cfg = saved;
    t->inv_freq[2] = NAN;
    EXPECT_CREATE_FAILS(t, "rope_inv_freq[2]", "finite");
    t->inv_freq[2] = INFINITY;
    EXPECT_CREATE_FAILS(t, "rope_inv_freq[2]", "finite");
    t->inv_freq[2] = -0.5;
    EXPECT_CREATE_FAILS(t, "rope_inv_freq[2]", ">= 0");
    t->inv_freq[2] = pow(10000.0, -4.0 / THD);
    t->cfg.rope_inv_freq = NULL;
    t->cfg.rope_dim = THD;
    EXPECT_CREATE_FAILS(t, "rope_inv_freq", "missing");
    t->cfg = saved;
    t->cfg.vocab_size = 0;
    EXPECT_CREATE_FAILS(t, "vocab_size", "range");
    t->cfg = saved;
    t->layers[1].window = -1;
    EXPECT_CREATE_FAILS(t, "layer 1: window=-1", ">= 0");
    t->layers[1].window = 0;
    t->cfg = saved;
    t->cfg.n_layers = 0;
    EXPECT_CREATE_FAILS(t, "n_layers", "range");
    t->cfg = saved;
    /* a config that disagrees with the weights */
    t->cfg.intermediate_size = TF + 1;
    EXPECT_CREATE_FAILS(t, "w_gate", "shape");
    t->cfg = saved;

    /* the model copies the rope frequencies: changing the caller's array afterwards changes nothing */
    float before[TV], after[TV];
    ha_llama_context *c = ctx_new(t->m, 1, 16);
    const int32_t tok[2] = { 1, 2 };
    CHECK_OK(append_seq(c, 0, 2, tok, NULL));
    CHECK_OK(append_seq(c, 0, 1, tok, before));
    for (int j = 0; j < THD / 2; j++) t->inv_freq[j] = 0.123;
    CHECK_OK(LM(c)->crop(LM(c)->self, 0, 0));
    CHECK_OK(append_seq(c, 0, 2, tok, NULL));
    CHECK_OK(append_seq(c, 0, 1, tok, after));
    CHECK_SAME_FLOATS(before, after, TV, "logits after the caller changed its rope_inv_freq array");
    ha_llama_context_free(c);
    tiny_free(t);
}

void test_create_accepts_tied_and_counts_bytes(void) {
    for (int dt = 0; dt < HA_NDTYPES; dt++)
        for (int bias = 0; bias < 2; bias++) {
            tiny *t = tiny_build((ha_dtype)dt, bias, 1, 0, 33);
#define MB(rows, cols) ((int64_t)ha_matrix_bytes((ha_dtype)dt, (rows), (cols)))
            int64_t per_layer = MB(TQ, TD) + MB(TD, TQ) + 2 * MB(TKV, TD) + 2 * MB(TF, TD) + MB(TD, TF) + 2 * TD * 4;
#undef MB
            if (bias) per_layer += (TQ + 2 * TKV + TD + 2 * TF + TD) * 4;
            int64_t want = (int64_t)ha_matrix_bytes((ha_dtype)dt, TV, TD) + TD * 4 + TL * per_layer;
            CHECK(ha_llama_weight_bytes(t->m) == want, "[%s, bias %d] weight bytes expected %lld, got %lld",
                  dname((ha_dtype)dt), bias, (long long)want, (long long)ha_llama_weight_bytes(t->m));
            float l[3 * TV];
            const int32_t tok[3] = { 0, 49, 25 };
            ha_llama_context *c = ctx_new(t->m, 1, 4);
            CHECK_OK(append_seq(c, 0, 3, tok, l));
            for (int i = 0; i < 3 * TV; i++)
                CHECK(isfinite(l[i]), "tied model: logit %d expected finite, got %g", i, (double)l[i]);
            ha_llama_context_free(c);
            tiny_free(t);
        }
}
