/* The checks, test data, decoders and tiny model every C test uses (declared in test_core.h). */
#include "test_core.h"

const char *current_test = "?";

int sentinel_model;

__attribute__((format(printf, 3, 4), noreturn)) void fail_at(const char *file, int line, const char *fmt, ...) {
    fprintf(stderr, "%s:%d: test %s failed: ", file, line, current_test);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    _Exit(1);
}

const char *status_name(ha_status s) {
    switch (s) {
    case HA_OK: return "HA_OK";
    case HA_ERR_INVALID: return "HA_ERR_INVALID";
    case HA_ERR_NOMEM: return "HA_ERR_NOMEM";
    case HA_ERR_CAPACITY: return "HA_ERR_CAPACITY";
    case HA_ERR_UNSUPPORTED: return "HA_ERR_UNSUPPORTED";
    case HA_ERR_INTERNAL: return "HA_ERR_INTERNAL";
    case HA_ERR_CALLBACK: return "HA_ERR_CALLBACK";
    case HA_ERR_INTERRUPTED: return "HA_ERR_INTERRUPTED";
    }
    return "(unknown status)";
}

uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

__attribute__((format(printf, 6, 7))) void check_same_floats(const char *file, int line, const float *want,
                                                             const float *got, size_t n, const char *fmt, ...) {
    if (memcmp(want, got, n * sizeof(float)) == 0) return;
    size_t i = 0;
    while (fbits(want[i]) == fbits(got[i])) i++;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fail_at(file, line,
            "%s: expected bitwise equal floats; first difference at index %zu of %zu: expected %.9g (0x%08x), got %.9g "
            "(0x%08x)",
            what, i, n, (double)want[i], fbits(want[i]), (double)got[i], fbits(got[i]));
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) FAIL("out of memory allocating %zu bytes for the test itself", n);
    return p;
}

void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) FAIL("out of memory allocating %zu x %zu bytes for the test itself", n, size);
    return p;
}

uint64_t rng_next(rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi) */
double rng_uniform(rng *r, double lo, double hi) { return lo + (hi - lo) * (double)(rng_next(r) >> 11) * 0x1p-53; }

int32_t rng_int(rng *r, int32_t n) { return (int32_t)(rng_next(r) % (uint64_t)n); }

/* ---- independent decoders: the definition the kernels are checked against ----------------------- */

double half_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

double bf16_value(uint16_t b) { return (double)bits_f((uint32_t)b << 16); }

/* float -> half by truncation, for making test weights (|f| < 65504) */
uint16_t half_from_float(float f) {
    uint32_t u = fbits(f), sign = (u >> 16) & 0x8000u, m = u & 0x7fffffu;
    int e = (int)((u >> 23) & 0xff) - 127 + 15;
    if (((u >> 23) & 0xff) == 0) return (uint16_t)sign;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        return (uint16_t)(sign | ((m | 0x800000u) >> (14 - e)));
    }
    return (uint16_t)(sign | ((uint32_t)e << 10) | (m >> 13));
}

const char *dname(ha_dtype t) {
    static const char *names[HA_NDTYPES] = {
        [HA_F32] = "f32",  [HA_BF16] = "bf16",       [HA_F16] = "f16",           [HA_Q8] = "q8",
        [HA_Q4] = "q4",    [HA_F32P] = "f32 panels", [HA_BF16P] = "bf16 panels", [HA_F16P] = "f16 panels",
        [HA_Q8P] = "w8a8", [HA_BF16X] = "bf16 pairs"
    };
    return (unsigned)t < HA_NDTYPES ? names[t] : "?";
}

/* The row-major dtype whose values a panel dtype holds (t itself for the others). */
ha_dtype element_dtype(ha_dtype t) {
    return t == HA_F32P ? HA_F32 : t == HA_BF16P ? HA_BF16 : t == HA_F16P ? HA_F16 : t;
}

/* A weight matrix (rows, cols) of dtype dt from values uniform in (-scale, scale); if wide, each value is
 * also scaled by 2^-k, k in 0..20, so f16 subnormals and tiny bf16 values appear. HA_Q8 and HA_Q4 weights are
 * those values quantized by ha_quantize, panel dtypes those of their element type repacked by ha_pack. vals
 * (rows * cols,) receives the exact stored values (may be NULL). */
void *make_weights(ha_dtype dt, int64_t rows, int64_t cols, rng *r, double scale, int wide, double *vals) {
    if (dt == HA_BF16X) { /* float32 values rounded by ha_quantize: each element ha_bf16_round's, padding zero */
        float *src = make_row_major_weights(HA_F32, rows, cols, r, scale, wide, NULL);
        ha_matrix m = {
            .data = src, .dtype = HA_F32, .rows = rows, .cols = cols, .nbytes = ha_matrix_bytes(HA_F32, rows, cols)
        };
        const size_t bytes = ha_matrix_bytes(HA_BF16X, rows, cols);
        char *buf = xmalloc(bytes);
        memset(buf, 0xff, bytes); /* ha_quantize must write every byte, the padding's too */
        CHECK_OK(ha_quantize(&m, HA_BF16X, buf, bytes));
        const int64_t prow = (rows + HA_PANEL_ROWS - 1) / HA_PANEL_ROWS * HA_PANEL_ROWS, pcol = (cols + 1) / 2 * 2;
        for (int64_t i = 0; i < prow; i++)
            for (int64_t k = 0; k < pcol; k++) {
                const uint16_t want = i < rows && k < cols ? ha_bf16_round(src[i * cols + k]) : 0;
                const uint16_t got = ha_bf16x_bits(buf, cols, i / HA_PANEL_ROWS, i % HA_PANEL_ROWS, k);
                CHECK(got == want, "quantize bf16 pairs (%lld, %lld): element (%lld, %lld) expected 0x%04x, got 0x%04x",
                      (long long)rows, (long long)cols, (long long)i, (long long)k, want, got);
                if (vals && i < rows && k < cols) vals[i * cols + k] = bf16_value(got);
            }
        free(src);
        return buf;
    }
    if (dt == HA_Q8P) { /* the same values quantized to HA_Q8 and to HA_Q8P: every element equal, padding zero */
        float *src = make_row_major_weights(HA_F32, rows, cols, r, scale, wide, NULL);
        ha_matrix m = {
            .data = src, .dtype = HA_F32, .rows = rows, .cols = cols, .nbytes = ha_matrix_bytes(HA_F32, rows, cols)
        };
        const size_t bytes = ha_matrix_bytes(HA_Q8P, rows, cols), rbytes = ha_matrix_bytes(HA_Q8, rows, cols);
        char *buf = xmalloc(bytes), *q8 = xmalloc(rbytes);
        memset(buf, 0xff, bytes); /* ha_quantize must write every byte, the padding rows' too */
        CHECK_OK(ha_quantize(&m, HA_Q8P, buf, bytes));
        CHECK_OK(ha_quantize(&m, HA_Q8, q8, rbytes));
        const int64_t prow = (rows + HA_PANEL_ROWS - 1) / HA_PANEL_ROWS * HA_PANEL_ROWS;
        const int64_t pcol = (cols + HA_Q8_GROUP - 1) / HA_Q8_GROUP * HA_Q8_GROUP;
        for (int64_t i = 0; i < prow; i++)
            for (int64_t k = 0; k < pcol; k++) {
                const float want = i < rows && k < cols ? ha_q8_at(q8 + (size_t)i * ha_row_bytes(HA_Q8, cols), k)
                                                        : 0.0f;
                const float got = ha_panel_at(buf, HA_Q8P, cols, i, k);
                CHECK(fbits(got) == fbits(want),
                      "quantize w8a8 (%lld, %lld): element (%lld, %lld) expected int8's %g, got %g", (long long)rows,
                      (long long)cols, (long long)i, (long long)k, (double)want, (double)got);
                if (vals && i < rows && k < cols) vals[i * cols + k] = got;
            }
        free(src);
        free(q8);
        return buf;
    }
    if (!ha_dtype_is_panels(dt)) return make_row_major_weights(dt, rows, cols, r, scale, wide, vals);
    const ha_dtype el = element_dtype(dt);
    void *src = make_row_major_weights(el, rows, cols, r, scale, wide, vals);
    const size_t bytes = ha_matrix_bytes(dt, rows, cols);
    void *buf = xmalloc(bytes); /* exactly: ASan catches a read past the end */
    memset(buf, 0xff, bytes); /* ha_pack must write every byte, the padding rows' zeros too */
    ha_matrix m = { .data = src, .dtype = el, .rows = rows, .cols = cols, .nbytes = ha_matrix_bytes(el, rows, cols) };
    CHECK_OK(ha_pack(&m, buf, bytes));
    const size_t es = ha_row_bytes(el, 1);
    for (int64_t i = 0; i < rows; i++) /* every element where ha_panel_at finds it, bit for bit */
        for (int64_t k = 0; k < cols; k++) {
            const size_t at = ((size_t)(i / HA_PANEL_ROWS) * (size_t)cols + (size_t)k) * HA_PANEL_ROWS +
                              (size_t)ha_panel_pos(dt, i % HA_PANEL_ROWS);
            CHECK(memcmp((char *)buf + at * es, (char *)src + ((size_t)i * (size_t)cols + (size_t)k) * es, es) == 0,
                  "pack %s (%lld, %lld): element (%lld, %lld) not where ha_panel_pos puts it", dname(dt),
                  (long long)rows, (long long)cols, (long long)i, (long long)k);
        }
    for (int64_t i = rows; i < (rows + HA_PANEL_ROWS - 1) / HA_PANEL_ROWS * HA_PANEL_ROWS; i++)
        for (int64_t k = 0; k < cols; k++)
            CHECK(ha_panel_at(buf, dt, cols, i, k) == 0.0f, "pack %s (%lld, %lld): padding row %lld not zero",
                  dname(dt), (long long)rows, (long long)cols, (long long)i);
    free(src);
    return buf;
}

void *make_row_major_weights(ha_dtype dt, int64_t rows, int64_t cols, rng *r, double scale, int wide, double *vals) {
    const size_t count = (size_t)(rows * cols);
    float *f32 = xmalloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) {
        double v = rng_uniform(r, -scale, scale);
        f32[i] = (float)(wide ? ldexp(v, -rng_int(r, 21)) : v);
    }
    if (dt == HA_F32) {
        if (vals)
            for (size_t i = 0; i < count; i++) vals[i] = f32[i];
        return f32;
    }
    void *buf = xmalloc(ha_matrix_bytes(dt, rows, cols)); /* exactly: ASan catches a read past the end */
    if (dt == HA_Q8 || dt == HA_Q4) {
        ha_matrix src = { .data = f32, .dtype = HA_F32, .rows = rows, .cols = cols, .nbytes = count * sizeof(float) };
        CHECK_OK(ha_quantize(&src, dt, buf, ha_matrix_bytes(dt, rows, cols)));
        for (int64_t i = 0; vals && i < rows; i++) {
            const char *row = (const char *)buf + (size_t)i * ha_row_bytes(dt, cols);
            for (int64_t j = 0; j < cols; j++) vals[i * cols + j] = dt == HA_Q8 ? ha_q8_at(row, j) : ha_q4_at(row, j);
        }
        free(f32);
        return buf;
    }
    for (size_t i = 0; i < count; i++) {
        uint16_t h = dt == HA_BF16 ? (uint16_t)(fbits(f32[i]) >> 16) : half_from_float(f32[i]);
        ((uint16_t *)buf)[i] = h;
        if (vals) vals[i] = dt == HA_BF16 ? bf16_value(h) : half_value(h);
    }
    free(f32);
    return buf;
}

float *make_floats(size_t n, rng *r, double lo, double hi) {
    float *x = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)rng_uniform(r, lo, hi);
    return x;
}

int kernel_variants(const ha_kernels **out, const char **names) {
    int n = 0;
    for (int i = 0; i < NVARIANTS; i++) {
        const ha_kernels *k = ha_kernels_find(VARIANTS[i]);
        if (!k) {
            printf("%s unavailable\n", VARIANTS[i]);
            continue;
        }
        CHECK(strcmp(k->name, VARIANTS[i]) == 0, "variant %s: expected that name in its table, got %s", VARIANTS[i],
              k->name);
        out[n] = k;
        names[n++] = VARIANTS[i];
    }
    return n;
}

/* k's matmul for weights of dtype dt, as model/forward.c runs it: integer weights first quantize each token's row of
 * X with k's quant_act (into (T, ha_act_width(n)) int16 and T scales) and go through matmul_int. */
void run_matmul(const ha_kernels *k, ha_dtype dt, const void *W, int64_t n, int64_t r0, int64_t r1, const float *X,
                int64_t T, float *Y, int64_t ldy) {
    if (dt == HA_BF16X) { /* bfloat16 pairs: each token's row rounded once (ha_round_act_bf16) */
        const int64_t steps = (n + 1) / 2;
        uint32_t *xb = xmalloc((size_t)(T * steps) * sizeof *xb);
        for (int64_t t = 0; t < T; t++) ha_round_act_bf16(X + t * n, n, xb + t * steps);
        k->matmul_bf16x(W, n, r0, r1, xb, T, Y, ldy);
        free(xb);
        return;
    }
    if (dt == HA_Q8P) { /* w8a8: each token's row quantized group by group (ha_quant_act8) */
        const int64_t groups = (n + HA_Q8_GROUP - 1) / HA_Q8_GROUP;
        const size_t xb = ha_row_bytes(HA_Q8, n);
        char *q = xmalloc((size_t)T * xb);
        int32_t *xsum = xmalloc((size_t)(T * groups) * sizeof *xsum);
        for (int64_t t = 0; t < T; t++) ha_quant_act8(k->quant_q8_sum, X + t * n, n, q + t * xb, xsum + t * groups);
        k->matmul_w8a8(W, n, r0, r1, q, xsum, T, Y, ldy);
        if (k->matmul_w8a8_cached) { /* the cached shape: bitwise the same */
            float *Y2 = xmalloc((size_t)(T * ldy) * sizeof *Y2);
            k->matmul_w8a8_cached(W, n, r0, r1, q, xsum, T, Y2, ldy);
            for (int64_t t = 0; t < T; t++)
                CHECK(memcmp(Y + t * ldy + r0, Y2 + t * ldy + r0, (size_t)(r1 - r0) * sizeof *Y2) == 0,
                      "%s: matmul_w8a8_cached differs from matmul_w8a8 (T %lld, rows %lld..%lld, n %lld)", k->name,
                      (long long)T, (long long)r0, (long long)r1, (long long)n);
            free(Y2);
        }
        free(q);
        free(xsum);
        return;
    }
    if (!ha_dtype_is_int(dt)) {
        k->matmul[dt](W, n, r0, r1, X, T, Y, ldy);
        return;
    }
    const int64_t width = ha_act_width(n);
    int16_t *q = xmalloc((size_t)(T * width) * sizeof *q);
    float *scale = xmalloc((size_t)T * sizeof *scale);
    for (int64_t t = 0; t < T; t++) k->quant_act(X + t * n, n, q + t * width, scale + t);
    k->matmul_int[dt](W, n, r0, r1, q, scale, T, Y, ldy);
    free(q);
    free(scale);
}

void *tiny_keep(tiny *t, void *p) {
    if (t->nbufs == (int)COUNT(t->bufs)) FAIL("tiny model: too many buffers");
    t->bufs[t->nbufs++] = p;
    return p;
}

ha_matrix tiny_matrix(tiny *t, rng *r, int64_t rows, int64_t cols, double scale) {
    void *p = tiny_keep(t, make_weights(t->dtype, rows, cols, r, scale, 0, NULL));
    return (ha_matrix){
        .data = p, .dtype = t->dtype, .rows = rows, .cols = cols, .nbytes = ha_matrix_bytes(t->dtype, rows, cols)
    };
}

ha_vector tiny_vector(tiny *t, rng *r, int64_t n, double center, double spread) {
    float *p = tiny_keep(t, make_floats((size_t)n, r, center - spread, center + spread));
    return (ha_vector){ .data = p, .n = n };
}

tiny *tiny_build_longrope(ha_dtype dtype, int bias, int tied, int64_t window, uint64_t seed, int64_t long_from) {
    tiny *t = xcalloc(1, sizeof *t);
    rng r = { seed };
    t->dtype = dtype;
    t->bias = bias;
    for (int j = 0; j < THD / 2; j++) {
        t->inv_freq[j] = pow(10000.0, -2.0 * j / THD);
        t->inv_freq_long[j] = t->inv_freq[j] / (1.0 + 5.0 * j / (THD / 2 - 1));
    }
    t->cfg = (ha_llama_config){ .vocab_size = TV,
                                .hidden_size = TD,
                                .intermediate_size = TF,
                                .n_layers = TL,
                                .n_heads = TNH,
                                .n_kv_heads = TNKV,
                                .head_dim = THD,
                                .norm_eps = 1e-5f,
                                .rope_inv_freq = long_from == TINY_LONG ? t->inv_freq_long : t->inv_freq };
    if (long_from != 0) t->cfg.rope_scale = 1.1f;
    if (long_from > 0) {
        t->cfg.rope_inv_freq_long = t->inv_freq_long;
        t->cfg.rope_long_from = long_from;
    }
    t->w.embed = tiny_matrix(t, &r, TV, TD, 1.0);
    t->w.final_norm = tiny_vector(t, &r, TD, 1.0, 0.2);
    t->w.lm_head = tied ? t->w.embed : tiny_matrix(t, &r, TV, TD, 1.0);
    for (int l = 0; l < TL; l++) {
        ha_llama_layer *L = &t->layers[l];
        L->window = window;
        L->attn_norm = tiny_vector(t, &r, TD, 1.0, 0.2);
        L->wq = tiny_matrix(t, &r, TQ, TD, 0.5);
        L->wk = tiny_matrix(t, &r, TKV, TD, 0.5);
        L->wv = tiny_matrix(t, &r, TKV, TD, 0.5);
        L->wo = tiny_matrix(t, &r, TD, TQ, 0.3);
        L->ffn_norm = tiny_vector(t, &r, TD, 1.0, 0.2);
        L->w_gate = tiny_matrix(t, &r, TF, TD, 0.4);
        L->w_up = tiny_matrix(t, &r, TF, TD, 0.4);
        L->w_down = tiny_matrix(t, &r, TD, TF, 0.3);
        if (bias) {
            L->bq = tiny_vector(t, &r, TQ, 0.0, 0.2);
            L->bk = tiny_vector(t, &r, TKV, 0.0, 0.2);
            L->bv = tiny_vector(t, &r, TKV, 0.0, 0.2);
            L->bo = tiny_vector(t, &r, TD, 0.0, 0.2);
            L->b_gate = tiny_vector(t, &r, TF, 0.0, 0.2);
            L->b_up = tiny_vector(t, &r, TF, 0.0, 0.2);
            L->b_down = tiny_vector(t, &r, TD, 0.0, 0.2);
        }
    }
    t->w.layers = t->layers;
    CHECK_OK(ha_llama_create(&t->cfg, &t->w, &t->m));
    CHECK(t->m != NULL, "ha_llama_create returned HA_OK with a NULL model");
    return t;
}

tiny *tiny_build(ha_dtype dtype, int bias, int tied, int64_t window, uint64_t seed) {
    return tiny_build_longrope(dtype, bias, tied, window, seed, 0);
}

void tiny_free(tiny *t) {
    ha_llama_free(t->m);
    for (int i = 0; i < t->nbufs; i++) free(t->bufs[i]);
    free(t);
}

ha_llama_context *ctx_new_blas(const ha_llama *m, int64_t n_seq, int64_t capacity, int blas_prefill) {
    ha_llama_context *c = NULL;
    CHECK_OK(ha_llama_context_create(m, n_seq, capacity, blas_prefill, &c));
    CHECK(c != NULL && ha_llama_context_lm(c) != NULL, "context created without an interface");
    ha_lm *lm = ha_llama_context_lm(c);
    CHECK(lm->vocab_size == TV && lm->n_seq == n_seq && lm->capacity == capacity,
          "ha_lm expected vocab %d, n_seq %lld, capacity %lld; got %lld, %lld, %lld", TV, (long long)n_seq,
          (long long)capacity, (long long)lm->vocab_size, (long long)lm->n_seq, (long long)lm->capacity);
    return c;
}

ha_llama_context *ctx_new(const ha_llama *m, int64_t n_seq, int64_t capacity) {
    return ctx_new_blas(m, n_seq, capacity, 0);
}

/* n tokens of sequence s in one append, logits (n, V) for each (logits may be NULL: no logits wanted). */
ha_status append_seq(ha_llama_context *c, int32_t s, int64_t n, const int32_t *tok, float *logits) {
    int32_t *seq = xmalloc((size_t)n * sizeof(int32_t));
    uint8_t *want = NULL;
    for (int64_t i = 0; i < n; i++) seq[i] = s;
    if (!logits) want = xcalloc((size_t)n, 1);
    ha_status st = LM(c)->append(LM(c)->self, n, seq, tok, want, logits);
    free(seq);
    free(want);
    return st;
}

void random_tokens(rng *r, int32_t *tok, int64_t n) {
    for (int64_t i = 0; i < n; i++) tok[i] = rng_int(r, TV);
}

/* The kernel variants by name, for forwards (which use the selected table). */
int forward_variants(const char **names) {
    const ha_kernels *ks[NVARIANTS];
    return kernel_variants(ks, names);
}

void select_kernels(const char *name) { CHECK_OK(ha_kernels_select(name)); }

/* Tests of many one-token forwards run on one thread: on a shared 2-core machine the pool's hand-offs
 * dominate their time. Thread counts have tests of their own (model_thread_count_..., threads_...). */
void one_thread(void) { CHECK_OK(ha_set_num_threads(1)); }
