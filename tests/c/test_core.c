/* C-level tests of the habana_assist core, run under AddressSanitizer and UndefinedBehaviorSanitizer by
 * tests/core/test_c_core.py. Links every C file of csrc/'s core folders (not csrc/bindings).
 *
 *   ./test_core --list     the test names, one per line
 *   ./test_core NAME       runs one test: exit 0 on pass; on failure a message on stderr saying what was
 *                          expected and what came, and exit 1
 *
 * Each test is named for the promise it holds. A failed check prints and leaves with _Exit(1) (so a
 * failure is not buried under the leak report of the buffers it abandoned); a passing test frees
 * everything, so LeakSanitizer checks the core's own allocations. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../../csrc/core/core.h"
#include "../../csrc/kernels/kernels.h"
#include "../../csrc/model/model.h"

/* ---- checking ------------------------------------------------------------------------------------ */

static const char *current_test = "?";

__attribute__((format(printf, 3, 4), noreturn)) static void fail_at(const char *file, int line, const char *fmt, ...) {
    fprintf(stderr, "%s:%d: test %s failed: ", file, line, current_test);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    _Exit(1);
}

#define FAIL(...) fail_at(__FILE__, __LINE__, __VA_ARGS__)
/* CHECK(cond, "expected ..., got ...", args) */
#define CHECK(cond, ...)                                                                                  \
    do {                                                                                                  \
        if (!(cond)) FAIL("check `" #cond "` is false: " __VA_ARGS__);                                    \
    } while (0)

static const char *status_name(ha_status s) {
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

/* The call returns `want`; on a mismatch shows both statuses and ha_last_error(). */
#define CHECK_STATUS(call, want)                                                                          \
    do {                                                                                                  \
        ha_status st_ = (call);                                                                           \
        if (st_ != (want))                                                                                \
            FAIL("%s: expected %s, got %s (last error: \"%s\")", #call, status_name(want), status_name(st_), \
                 ha_last_error());                                                                        \
    } while (0)
#define CHECK_OK(call) CHECK_STATUS(call, HA_OK)

/* ha_last_error() contains `needle`. */
#define CHECK_MSG(needle)                                                                                 \
    do {                                                                                                  \
        if (!strstr(ha_last_error(), (needle)))                                                           \
            FAIL("expected the error message to mention \"%s\", got \"%s\"", (needle), ha_last_error());   \
    } while (0)

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* got (n,) is bitwise equal to want (n,). */
#define CHECK_SAME_FLOATS(want, got, n, ...) check_same_floats(__FILE__, __LINE__, (want), (got), (n), __VA_ARGS__)
__attribute__((format(printf, 6, 7))) static void check_same_floats(const char *file, int line, const float *want,
                                                                    const float *got, size_t n, const char *fmt, ...) {
    if (memcmp(want, got, n * sizeof(float)) == 0) return;
    size_t i = 0;
    while (fbits(want[i]) == fbits(got[i])) i++;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fail_at(file, line, "%s: expected bitwise equal floats; first difference at index %zu of %zu: expected %.9g (0x%08x), got %.9g (0x%08x)",
            what, i, n, (double)want[i], fbits(want[i]), (double)got[i], fbits(got[i]));
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) FAIL("out of memory allocating %zu bytes for the test itself", n);
    return p;
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) FAIL("out of memory allocating %zu x %zu bytes for the test itself", n, size);
    return p;
}

/* ---- test data: a small deterministic generator (splitmix64) ---------------------------------------- */

typedef struct rng { uint64_t s; } rng;

static uint64_t rng_next(rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi) */
static double rng_uniform(rng *r, double lo, double hi) { return lo + (hi - lo) * (double)(rng_next(r) >> 11) * 0x1p-53; }
static int32_t rng_int(rng *r, int32_t n) { return (int32_t)(rng_next(r) % (uint64_t)n); }

/* ---- independent decoders: the definition the kernels are checked against ----------------------- */

static double half_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double bf16_value(uint16_t b) { return (double)bits_f((uint32_t)b << 16); }

/* float -> half by truncation, for making test weights (|f| < 65504) */
static uint16_t half_from_float(float f) {
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

static const char *dname(ha_dtype t) {
    static const char *names[HA_NDTYPES] = { [HA_F32] = "f32", [HA_BF16] = "bf16", [HA_F16] = "f16", [HA_Q8] = "q8",
                                             [HA_Q4] = "q4", [HA_F32P] = "f32 panels", [HA_BF16P] = "bf16 panels",
                                             [HA_F16P] = "f16 panels", [HA_Q8P] = "w8a8",
                                             [HA_BF16X] = "bf16 pairs" };
    return (unsigned)t < HA_NDTYPES ? names[t] : "?";
}
/* The row-major dtype whose values a panel dtype holds (t itself for the others). */
static ha_dtype element_dtype(ha_dtype t) {
    return t == HA_F32P ? HA_F32 : t == HA_BF16P ? HA_BF16 : t == HA_F16P ? HA_F16 : t;
}

static void *make_row_major_weights(ha_dtype dt, int64_t rows, int64_t cols, rng *r, double scale, int wide, double *vals);

/* A weight matrix (rows, cols) of dtype dt from values uniform in (-scale, scale); if wide, each value is
 * also scaled by 2^-k, k in 0..20, so f16 subnormals and tiny bf16 values appear. HA_Q8 and HA_Q4 weights are
 * those values quantized by ha_quantize, panel dtypes those of their element type repacked by ha_pack. vals
 * (rows * cols,) receives the exact stored values (may be NULL). */
static void *make_weights(ha_dtype dt, int64_t rows, int64_t cols, rng *r, double scale, int wide, double *vals) {
    if (dt == HA_BF16X) { /* float32 values rounded by ha_quantize: each element ha_bf16_round's, padding zero */
        float *src = make_row_major_weights(HA_F32, rows, cols, r, scale, wide, NULL);
        ha_matrix m = { .data = src, .dtype = HA_F32, .rows = rows, .cols = cols, .nbytes = ha_matrix_bytes(HA_F32, rows, cols) };
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
        ha_matrix m = { .data = src, .dtype = HA_F32, .rows = rows, .cols = cols, .nbytes = ha_matrix_bytes(HA_F32, rows, cols) };
        const size_t bytes = ha_matrix_bytes(HA_Q8P, rows, cols), rbytes = ha_matrix_bytes(HA_Q8, rows, cols);
        char *buf = xmalloc(bytes), *q8 = xmalloc(rbytes);
        memset(buf, 0xff, bytes); /* ha_quantize must write every byte, the padding rows' too */
        CHECK_OK(ha_quantize(&m, HA_Q8P, buf, bytes));
        CHECK_OK(ha_quantize(&m, HA_Q8, q8, rbytes));
        const int64_t prow = (rows + HA_PANEL_ROWS - 1) / HA_PANEL_ROWS * HA_PANEL_ROWS;
        const int64_t pcol = (cols + HA_Q8_GROUP - 1) / HA_Q8_GROUP * HA_Q8_GROUP;
        for (int64_t i = 0; i < prow; i++)
            for (int64_t k = 0; k < pcol; k++) {
                const float want = i < rows && k < cols ? ha_q8_at(q8 + (size_t)i * ha_row_bytes(HA_Q8, cols), k) : 0.0f;
                const float got = ha_panel_at(buf, HA_Q8P, cols, i, k);
                CHECK(fbits(got) == fbits(want), "quantize w8a8 (%lld, %lld): element (%lld, %lld) expected int8's %g, got %g",
                      (long long)rows, (long long)cols, (long long)i, (long long)k, (double)want, (double)got);
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
            const size_t at = ((size_t)(i / HA_PANEL_ROWS) * (size_t)cols + (size_t)k) * HA_PANEL_ROWS + (size_t)ha_panel_pos(dt, i % HA_PANEL_ROWS);
            CHECK(memcmp((char *)buf + at * es, (char *)src + ((size_t)i * (size_t)cols + (size_t)k) * es, es) == 0,
                  "pack %s (%lld, %lld): element (%lld, %lld) not where ha_panel_pos puts it", dname(dt), (long long)rows,
                  (long long)cols, (long long)i, (long long)k);
        }
    for (int64_t i = rows; i < (rows + HA_PANEL_ROWS - 1) / HA_PANEL_ROWS * HA_PANEL_ROWS; i++)
        for (int64_t k = 0; k < cols; k++)
            CHECK(ha_panel_at(buf, dt, cols, i, k) == 0.0f, "pack %s (%lld, %lld): padding row %lld not zero", dname(dt),
                  (long long)rows, (long long)cols, (long long)i);
    free(src);
    return buf;
}

static void *make_row_major_weights(ha_dtype dt, int64_t rows, int64_t cols, rng *r, double scale, int wide, double *vals) {
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

static float *make_floats(size_t n, rng *r, double lo, double hi) {
    float *x = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)rng_uniform(r, lo, hi);
    return x;
}

/* The kernel variants this CPU runs: scalar always, the others where ha_kernels_find has them (avx512-emulated
 * wherever avx2 runs and the build found libsimde-dev). */
static const char *const VARIANTS[] = { "scalar", "avx2", "avx512", "avx512-emulated" };
#define NVARIANTS 4
static int kernel_variants(const ha_kernels **out, const char **names) {
    int n = 0;
    for (int i = 0; i < NVARIANTS; i++) {
        const ha_kernels *k = ha_kernels_find(VARIANTS[i]);
        if (!k) {
            printf("%s unavailable\n", VARIANTS[i]);
            continue;
        }
        CHECK(strcmp(k->name, VARIANTS[i]) == 0, "variant %s: expected that name in its table, got %s", VARIANTS[i], k->name);
        out[n] = k;
        names[n++] = VARIANTS[i];
    }
    return n;
}

/* k's matmul for weights of dtype dt, as model/forward.c runs it: integer weights first quantize each token's row of
 * X with k's quant_act (into (T, ha_act_width(n)) int16 and T scales) and go through matmul_int. */
static void run_matmul(const ha_kernels *k, ha_dtype dt, const void *W, int64_t n, int64_t r0, int64_t r1, const float *X,
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
        for (int64_t t = 0; t < T; t++) ha_quant_act8(k->quant_q8, X + t * n, n, q + t * xb, xsum + t * groups);
        k->matmul_w8a8(W, n, r0, r1, q, xsum, T, Y, ldy);
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

static const int64_t KN[] = { 1, 7, 8, 15, 16, 17, 33, 100, 257, 523 };
static const int64_t KR[] = { 1, 3, 4, 5, 9 };
#define COUNT(a) (sizeof(a) / sizeof *(a))
#define SENTINEL 0x7fc0deadu

/* ---- 1. kernels against double precision ------------------------------------------------------------ */

static void test_kernels_matmul_matches_double(void) {
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
                        if (dt == HA_Q8P) ha_quant_act8(ha_quant_q8_ref, X + t * n, n, q8, xsum);
                        for (int64_t i = 0; i < n; i++)
                            xv[t * n + i] = dt == HA_BF16X ? bf16_value(ha_bf16_round(X[t * n + i]))
                                          : dt == HA_Q8P ? ha_q8_at(q8, i)
                                          : ha_dtype_is_int((ha_dtype)dt) ? (double)q[i] * qs : (double)X[t * n + i];
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
                                CHECK(fbits(y) == SENTINEL, "%s matmul %s n=%lld rows [%lld,%lld): expected Y[%lld, %lld] "
                                      "(outside the row range) untouched, got %g", kn[v], dname((ha_dtype)dt), (long long)n,
                                      (long long)r0, (long long)r1, (long long)t, (long long)c, (double)y);
                                continue;
                            }
                            double ref = 0.0, mag = 0.0;
                            for (int64_t i = 0; i < n; i++) {
                                ref += wv[c * n + i] * xv[t * n + i];
                                mag += fabs(wv[c * n + i] * xv[t * n + i]);
                            }
                            CHECK(fabs((double)y - ref) <= 1e-5 * mag,
                                  "%s matmul %s n=%lld R=%lld: Y[%lld, %lld] expected %.10g (double) within %.3g, got %.10g",
                                  kn[v], dname((ha_dtype)dt), (long long)n, (long long)R, (long long)t, (long long)c, ref,
                                  1e-5 * mag, (double)y);
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
            CHECK(isnan(got[i]) && signbit(got[i]) == signbit(want), "%s: half 0x%04x expected a NaN of sign %d, got %g (0x%08x)",
                  what, src[i], signbit(want) != 0, (double)got[i], fbits(got[i]));
            continue;
        }
        CHECK(fbits(got[i]) == fbits(want), "%s: 0x%04x expected %.9g (0x%08x), got %.9g (0x%08x)", what, src[i],
              (double)want, fbits(want), (double)got[i], fbits(got[i]));
    }
}

static void test_kernels_to_f32_exact(void) {
    /* the scalar half decoder against an independent ldexp decoder, on every bit pattern */
    for (uint32_t h = 0; h < 65536; h++) {
        float got = ha_f16_to_f32((uint16_t)h);
        double want = half_value((uint16_t)h);
        if (isnan(want)) {
            CHECK(isnan(got) && (signbit(got) != 0) == ((h & 0x8000) != 0), "ha_f16_to_f32(0x%04x): expected NaN, got %g", h,
                  (double)got);
        } else {
            CHECK(fbits(got) == fbits((float)want), "ha_f16_to_f32(0x%04x): expected %.9g (0x%08x), got %.9g (0x%08x)", h, want,
                  fbits((float)want), (double)got, fbits(got));
        }
    }
    CHECK(fbits(ha_f16_to_f32(0x8000)) == 0x80000000u, "ha_f16_to_f32(-0) expected -0.0, got 0x%08x", fbits(ha_f16_to_f32(0x8000)));
    CHECK(ha_f16_to_f32(0x0001) == 0x1p-24f, "smallest subnormal half expected 2^-24, got %g", (double)ha_f16_to_f32(1));
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
                    snprintf(what, sizeof what, "%s to_f32 %s, n=%lld from 0x%04llx", kn[v], dname(dt), (long long)n, (long long)off);
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

static void test_kernels_dot_axpy_scale_match_double(void) {
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
            CHECK(fabs((double)d - ref) <= 1e-5 * mag, "%s dot n=%lld: expected %.10g within %.3g, got %.10g", kn[v], (long long)n,
                  ref, 1e-5 * mag, (double)d);

            float *y = make_floats((size_t)n, &r, -2.0, 2.0), *y0 = xmalloc((size_t)n * sizeof(float));
            memcpy(y0, y, (size_t)n * sizeof(float));
            const float alpha = 0.7371f;
            ks[v]->axpy(alpha, a, y, n);
            for (int64_t i = 0; i < n; i++) {
                double ax = (double)alpha * a[i], want = (double)y0[i] + ax;
                CHECK(fabs((double)y[i] - want) <= 0x1p-23 * (fabs(want) + 2.0 * fabs(ax)),
                      "%s axpy n=%lld: y[%lld] expected %.10g, got %.10g", kn[v], (long long)n, (long long)i, want, (double)y[i]);
            }
            memcpy(y, y0, (size_t)n * sizeof(float));
            const float beta = -1.3125e-3f;
            ks[v]->scale(beta, y, n);
            for (int64_t i = 0; i < n; i++) {
                float want = (float)((double)beta * y0[i]); /* the exact product, rounded once */
                CHECK(fbits(y[i]) == fbits(want), "%s scale n=%lld: y[%lld] expected %.9g, got %.9g", kn[v], (long long)n,
                      (long long)i, (double)want, (double)y[i]);
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
static void test_kernels_float_sums_bitwise_their_definition(void) {
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
            CHECK(fbits(d) == fbits(dw), "%s dot n=%lld: expected the 8-lane definition's %.9g, got %.9g", kn[v], (long long)n,
                  (double)dw, (double)d);
            memcpy(got, y, (size_t)n * sizeof(float));
            ks[v]->axpy(alpha, x, got, n);
            CHECK_SAME_FLOATS(want, got, (size_t)n, "%s axpy n=%lld against the axpy update's definition", kn[v], (long long)n);
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
                float *want = xmalloc((size_t)(T * ldy) * sizeof(float)), *got = xmalloc((size_t)(T * ldy) * sizeof(float));
                for (int64_t t = 0; t < T; t++)
                    for (int64_t c = 0; c < ldy; c++)
                        want[t * ldy + c] = c >= r0 && c < r1 ? dot8_definition(wf + c * n, X + t * n, n) : bits_f(SENTINEL);
                for (int v = 0; v < nk; v++)
                    for (size_t c = 0; c < COUNT(FT); c++) {
                        const int64_t Tc = FT[c];
                        for (int64_t i = 0; i < T * ldy; i++) got[i] = bits_f(SENTINEL);
                        ks[v]->matmul[dt](W, n, r0, r1, X, Tc, got, ldy);
                        CHECK_SAME_FLOATS(want, got, (size_t)(Tc * ldy),
                                          "%s %s n=%lld T=%lld rows [%lld, %lld) of %lld against the 8-lane definition", kn[v],
                                          dname((ha_dtype)dt), (long long)n, (long long)Tc, (long long)r0, (long long)r1,
                                          (long long)rows);
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
 * several queries at once (the heads of a kv group; AVX-512's values take heads four at a time, 5 and 8 give a
 * remainder and two full tiles), key counts around the four (AVX2) and sixteen (AVX-512) keys scored together,
 * head sizes with and without a tail past the last 8 or 16 (and 128 and 136: two tiles of 64 columns), and
 * blocks that wrap around the end of a ring of slots. */
static void test_kernels_attention_blocks_equal_dot_axpy(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk_ = kernel_variants(ks, kn);
    rng r = { 11 };
    const int64_t NS[] = { 8, 12, 16, 40, 64, 72, 128, 136 }, NQ[] = { 1, 2, 3, 5, 8 },
                  NKEYS[] = { 1, 3, 4, 7, 13, 16, 17, 33 }, S = 37, lds = 40;
    for (int v = 0; v < nk_; v++)
        for (size_t a = 0; a < COUNT(NS); a++)
            for (size_t b = 0; b < COUNT(NQ); b++)
                for (size_t c = 0; c < COUNT(NKEYS); c++) {
                    const int64_t n = NS[a], nq = NQ[b], nk = NKEYS[c], ld = n + 3, qs = n + 1;
                    const int64_t slot0 = c % 2 ? 30 : 21; /* 21: the 16th key at the ring's last slot */
                    const float scale = 0.125f;
                    float *q = make_floats((size_t)(nq * qs), &r, -2.0, 2.0), *K = make_floats((size_t)(S * ld), &r, -2.0, 2.0);
                    float *sc = make_floats((size_t)(nq * lds), &r, -1.0, 1.0);
                    ks[v]->attn_scores(q, nq, qs, K, ld, slot0, S, nk, n, scale, sc, lds);
                    for (int64_t i = 0; i < nq; i++)
                        for (int64_t t = 0; t < nk; t++) {
                            const float want = ks[v]->dot(q + i * qs, K + (slot0 + t) % S * ld, n) * scale;
                            CHECK(fbits(sc[i * lds + t]) == fbits(want),
                                  "%s attn_scores n=%lld nq=%lld nk=%lld: s[%lld][%lld] expected %.9g (dot), got %.9g", kn[v],
                                  (long long)n, (long long)nq, (long long)nk, (long long)i, (long long)t, (double)want,
                                  (double)sc[i * lds + t]);
                        }
                    /* values: the nq heads' weights nk + 2 apart, their accumulators n + 5 apart (the gaps must
                     * stay as they were) */
                    const int64_t ldw = nk + 2, lda = n + 5;
                    float *w = make_floats((size_t)(nq * ldw), &r, 0.0, 1.0), *acc = make_floats((size_t)(nq * lda), &r, -1.0, 1.0);
                    float *want = xmalloc((size_t)(nq * lda) * sizeof(float));
                    memcpy(want, acc, (size_t)(nq * lda) * sizeof(float));
                    for (int64_t h = 0; h < nq; h++)
                        for (int64_t t = 0; t < nk; t++) ks[v]->axpy(w[h * ldw + t], K + (slot0 + t) % S * ld, want + h * lda, n);
                    ks[v]->attn_values(w, ldw, nq, K, ld, slot0, S, nk, n, acc, lda);
                    for (int64_t i = 0; i < nq * lda; i++)
                        CHECK(fbits(acc[i]) == fbits(want[i]),
                              "%s attn_values n=%lld nq=%lld nk=%lld: acc[%lld] expected %.9g (axpy), got %.9g", kn[v],
                              (long long)n, (long long)nq, (long long)nk, (long long)i, (double)want[i], (double)acc[i]);
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
static void test_kernels_exp_bitwise_ha_expf(void) {
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
            CHECK(fbits(a) == fbits(e) || (isnan(a) && isnan(e)), "ha_expf(%a) = %a, glibc's expf gives %a", (double)x[i],
                  (double)a, (double)e);
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
                CHECK(fbits(s[i]) == fbits(want) || (isnan(s[i]) && isnan(want)), "%s exp_shift(%a - %g) = %a, ha_expf gives %a",
                      kn[v], (double)x[i], (double)M[mi], (double)s[i], (double)want);
            }
        }
        for (int gated = 0; gated < 2; gated++) {
            memcpy(g, x, n * sizeof(float));
            for (size_t at = 0, len = n_hard; at < n; at += len, len = len < 19 ? len + 1 : n - at)
                ks[v]->silu(g + at, gated ? up + at : NULL, (int64_t)len);
            for (size_t i = 0; i < n; i++) {
                const float a = x[i] / (1.0f + ha_expf(-x[i])), want = gated ? a * up[i] : a;
                CHECK(fbits(g[i]) == fbits(want) || (isnan(g[i]) && isnan(want)), "%s silu(%a)%s = %a, expected %a", kn[v],
                      (double)x[i], gated ? " * up" : "", (double)g[i], (double)want);
            }
        }
    }
    free(x);
    free(s);
    free(up);
    free(g);
}

/* ---- 2. batch invariance of the kernels -------------------------------------------------------------- */

static void test_kernels_matmul_batch_invariant(void) {
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
                float *full = xcalloc((size_t)(T * ldy), sizeof(float)), *part = xcalloc((size_t)(T * ldy), sizeof(float));
                run_matmul(ks[v], (ha_dtype)dt, W, n, r0, r1, X, T, full, ldy);
                for (int64_t t = 0; t < T; t++) /* rows outside [r0, r1) untouched (still calloc's zeros) */
                    CHECK(fbits(full[t * ldy]) == 0 && fbits(full[t * ldy + ldy - 1]) == 0,
                          "%s %s n=%lld T=%lld: token %lld wrote outside rows [%lld, %lld)", kn[v], dname((ha_dtype)dt),
                          (long long)n, (long long)T, (long long)t, (long long)r0, (long long)r1);
                /* one token at a time */
                for (int64_t t = 0; t < T; t++) {
                    float one[12];
                    run_matmul(ks[v], (ha_dtype)dt, W, n, r0, r1, X + t * n, 1, one, ldy);
                    CHECK_SAME_FLOATS(full + t * ldy + r0, one + r0, (size_t)(r1 - r0), "%s %s n=%lld: token %lld alone vs in a chunk of %lld",
                                      kn[v], dname((ha_dtype)dt), (long long)n, (long long)t, (long long)T);
                }
                /* one row at a time */
                for (int64_t rr = r0; rr < r1; rr++) {
                    run_matmul(ks[v], (ha_dtype)dt, W, n, rr, rr + 1, X, T, part, ldy);
                    for (int64_t t = 0; t < T; t++)
                        CHECK_SAME_FLOATS(full + t * ldy + rr, part + t * ldy + rr, 1, "%s %s n=%lld: row %lld alone, token %lld",
                                          kn[v], dname((ha_dtype)dt), (long long)n, (long long)rr, (long long)t);
                }
                /* [r0, mid) + [mid, r1) at every split */
                for (int64_t mid = r0; mid <= r1; mid++) {
                    memset(part, 0, (size_t)(T * ldy) * sizeof(float));
                    run_matmul(ks[v], (ha_dtype)dt, W, n, r0, mid, X, T, part, ldy);
                    run_matmul(ks[v], (ha_dtype)dt, W, n, mid, r1, X, T, part, ldy);
                    for (int64_t t = 0; t < T; t++)
                        CHECK_SAME_FLOATS(full + t * ldy + r0, part + t * ldy + r0, (size_t)(r1 - r0),
                                          "%s %s n=%lld: rows split at %lld, token %lld", kn[v], dname((ha_dtype)dt), (long long)n,
                                          (long long)mid, (long long)t);
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
static void test_kernels_bf16x_bitwise_across_variants(void) {
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
                case 4: if (T > 2 && i / n == 1) X[i] = NAN; break;
                default: if (T > 2 && i / n == 2) X[i] = -INFINITY; break;
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
                                          "bf16 pairs %s vs scalar n=%lld T=%lld rows [%lld, %lld) token %lld", name, (long long)n,
                                          (long long)T, (long long)R0[c], (long long)R1[c], (long long)t);
                        CHECK(R0[c] == 0 || fbits(got[t * ldy + R0[c] - 1]) == 0, "bf16 pairs %s: wrote below row %lld", name,
                              (long long)R0[c]);
                        CHECK(R1[c] == rows || fbits(got[t * ldy + R1[c]]) == 0, "bf16 pairs %s: wrote at row %lld", name,
                              (long long)R1[c]);
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
__attribute__((target("avx512f,avx512bf16"))) static void native_lanes(const float *acc, const uint32_t *a, const uint32_t *b,
                                                                        float *out) {
    _mm512_storeu_ps(out, _mm512_dpbf16_ps(_mm512_loadu_ps(acc), (__m512bh)_mm512_loadu_si512(a), (__m512bh)_mm512_loadu_si512(b)));
}
__attribute__((target("avx512f,avx512bf16"))) static void native_round(const float *x, uint16_t *out) {
    _mm256_storeu_si256((__m256i *)out, (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x)));
}
#endif

/* formats.h's lane (ha_bf16x_lane) and rounding (ha_bf16_round) against the instructions, where the CPU has them:
 * random bit patterns weighted toward subnormals, infinities, NaN payloads, cancellations and sums at FLT_MIN. */
static void test_bf16x_reference_is_the_instruction(void) {
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
            acc[i] = k == 0 ? bits_f((uint32_t)(0x00800000 + rng_int(&r, 64) - 32) | (uint32_t)rng_int(&r, 2) << 31)
                   : k == 1 ? -bf16_value((uint16_t)h[1]) * bf16_value((uint16_t)h[3])
                   : bits_f((uint32_t)rng_int(&r, 1 << 16) << 16 | (uint32_t)rng_int(&r, 1 << 16));
            x[i] = bits_f((uint32_t)rng_int(&r, 1 << 16) << 16 | (uint32_t)rng_int(&r, 1 << 16));
        }
        native_lanes(acc, a, b, out);
        native_round(x, rb);
        for (int i = 0; i < 16; i++) {
            const float want = ha_bf16x_lane(acc[i], a[i], b[i]);
            CHECK(fbits(want) == fbits(out[i]), "lane acc 0x%08x a 0x%08x b 0x%08x: vdpbf16ps gave 0x%08x, the reference 0x%08x",
                  fbits(acc[i]), a[i], b[i], fbits(out[i]), fbits(want));
            CHECK(ha_bf16_round(x[i]) == rb[i], "round 0x%08x: vcvtneps2bf16 gave 0x%04x, the reference 0x%04x", fbits(x[i]), rb[i],
                  ha_bf16_round(x[i]));
        }
    }
#endif
}

/* The w8a8 class (formats.h): integer sums per group, then one float chain over the groups, so every variant gives
 * the scalar reference's bits, for every chunk size and row range (panels cut by the range's ends); a row of
 * activations holding NaN makes that token's outputs NaN and leaves the others' bits alone. */
static void test_kernels_w8a8_bitwise_across_variants(void) {
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
                              "scalar w8a8 n=%lld T=%lld: output (%lld, %lld) expected NaN only for the token holding one, got %g",
                              (long long)n, (long long)T, (long long)t, (long long)i, (double)ref[t * ldy + i]);
                for (int v = 1; v < nk; v++) {
                    memset(got, 0, (size_t)(T * ldy) * sizeof(float));
                    run_matmul(ks[v], HA_Q8P, W, n, R0[c], R1[c], X, T, got, ldy);
                    for (int64_t t = 0; t < T; t++) {
                        if (T > 2 && t == 1) continue; /* NaN's payload may differ */
                        CHECK_SAME_FLOATS(ref + t * ldy + R0[c], got + t * ldy + R0[c], (size_t)(R1[c] - R0[c]),
                                          "w8a8 %s vs scalar n=%lld T=%lld rows [%lld, %lld) token %lld", kn[v], (long long)n,
                                          (long long)T, (long long)R0[c], (long long)R1[c], (long long)t);
                        CHECK(R0[c] == 0 || fbits(got[t * ldy + R0[c] - 1]) == 0, "w8a8 %s: wrote below row %lld", kn[v],
                              (long long)R0[c]);
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

static void test_kernels_select_by_name(void) {
    CHECK_OK(ha_kernels_select("scalar"));
    CHECK(strcmp(ha_kernels_name(), "scalar") == 0, "after selecting scalar expected ha_kernels_name() \"scalar\", got \"%s\"",
          ha_kernels_name());
    CHECK_STATUS(ha_kernels_select("avx9000"), HA_ERR_UNSUPPORTED);
    CHECK_MSG("avx9000");
    CHECK_STATUS(ha_kernels_select(NULL), HA_ERR_UNSUPPORTED);
    CHECK(strcmp(ha_kernels_name(), "scalar") == 0, "a rejected selection expected to keep \"scalar\", got \"%s\"",
          ha_kernels_name());
    if (ha_kernels_select("avx2") == HA_OK)
        CHECK(strcmp(ha_kernels_name(), "avx2") == 0, "after selecting avx2 expected \"avx2\", got \"%s\"", ha_kernels_name());
    else
        printf("avx2 unavailable\n");
}

/* ---- the tiny model ------------------------------------------------------------------------------------ */

enum { TV = 50, TD = 32, TL = 2, TNH = 4, TNKV = 2, THD = 8, TF = 48, TQ = TNH * THD, TKV = TNKV * THD };

typedef struct tiny {
    ha_llama_config cfg;
    double inv_freq[THD / 2];
    double inv_freq_long[THD / 2]; /* longrope's long table, where tiny_build_longrope gives one */
    ha_llama_layer layers[TL];
    ha_llama_weights w;
    void *bufs[64];
    int nbufs;
    ha_dtype dtype;
    int bias;
    ha_llama *m;
} tiny;

static void *tiny_keep(tiny *t, void *p) {
    if (t->nbufs == (int)COUNT(t->bufs)) FAIL("tiny model: too many buffers");
    t->bufs[t->nbufs++] = p;
    return p;
}

static ha_matrix tiny_matrix(tiny *t, rng *r, int64_t rows, int64_t cols, double scale) {
    void *p = tiny_keep(t, make_weights(t->dtype, rows, cols, r, scale, 0, NULL));
    return (ha_matrix){ .data = p, .dtype = t->dtype, .rows = rows, .cols = cols, .nbytes = ha_matrix_bytes(t->dtype, rows, cols) };
}

static ha_vector tiny_vector(tiny *t, rng *r, int64_t n, double center, double spread) {
    float *p = tiny_keep(t, make_floats((size_t)n, r, center - spread, center + spread));
    return (ha_vector){ .data = p, .n = n };
}

/* vocab 50, hidden 32, 2 layers, 4 heads, 2 kv heads, head_dim 8, intermediate 48; weights of dtype in
 * malloc'd buffers; biases on every projection when bias; tied: lm_head is the embedding buffer. */
/* long_from > 0: longrope, the long table (the low frequencies stretched up to 6x) for an append that takes a
 * sequence past long_from positions (ha_llama_config.rope_long_from), cos and sin scaled by 1.1. TINY_LONG
 * (TINY_SHORT): no long table, every position rotated by the long (short) one with that scale: the model a longrope
 * one is while its appends take the long (short) table. 0: the plain rope. */
enum { TINY_LONG = -1, TINY_SHORT = -2 };
static tiny *tiny_build_longrope(ha_dtype dtype, int bias, int tied, int64_t window, uint64_t seed, int64_t long_from) {
    tiny *t = xcalloc(1, sizeof *t);
    rng r = { seed };
    t->dtype = dtype;
    t->bias = bias;
    for (int j = 0; j < THD / 2; j++) {
        t->inv_freq[j] = pow(10000.0, -2.0 * j / THD);
        t->inv_freq_long[j] = t->inv_freq[j] / (1.0 + 5.0 * j / (THD / 2 - 1));
    }
    t->cfg = (ha_llama_config){ .vocab_size = TV, .hidden_size = TD, .intermediate_size = TF, .n_layers = TL, .n_heads = TNH,
                                .n_kv_heads = TNKV, .head_dim = THD, .norm_eps = 1e-5f,
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

static tiny *tiny_build(ha_dtype dtype, int bias, int tied, int64_t window, uint64_t seed) {
    return tiny_build_longrope(dtype, bias, tied, window, seed, 0);
}

static void tiny_free(tiny *t) {
    ha_llama_free(t->m);
    for (int i = 0; i < t->nbufs; i++) free(t->bufs[i]);
    free(t);
}

static ha_llama_context *ctx_new_blas(const ha_llama *m, int64_t n_seq, int64_t capacity, int blas_prefill) {
    ha_llama_context *c = NULL;
    CHECK_OK(ha_llama_context_create(m, n_seq, capacity, blas_prefill, &c));
    CHECK(c != NULL && ha_llama_context_lm(c) != NULL, "context created without an interface");
    ha_lm *lm = ha_llama_context_lm(c);
    CHECK(lm->vocab_size == TV && lm->n_seq == n_seq && lm->capacity == capacity,
          "ha_lm expected vocab %d, n_seq %lld, capacity %lld; got %lld, %lld, %lld", TV, (long long)n_seq, (long long)capacity,
          (long long)lm->vocab_size, (long long)lm->n_seq, (long long)lm->capacity);
    return c;
}

static ha_llama_context *ctx_new(const ha_llama *m, int64_t n_seq, int64_t capacity) {
    return ctx_new_blas(m, n_seq, capacity, 0);
}

#define LM(c) ha_llama_context_lm(c)
#define LEN(c, s) (LM(c)->length(LM(c)->self, (s)))

/* n tokens of sequence s in one append, logits (n, V) for each (logits may be NULL: no logits wanted). */
static ha_status append_seq(ha_llama_context *c, int32_t s, int64_t n, const int32_t *tok, float *logits) {
    int32_t *seq = xmalloc((size_t)n * sizeof(int32_t));
    uint8_t *want = NULL;
    for (int64_t i = 0; i < n; i++) seq[i] = s;
    if (!logits) want = xcalloc((size_t)n, 1);
    ha_status st = LM(c)->append(LM(c)->self, n, seq, tok, want, logits);
    free(seq);
    free(want);
    return st;
}

static void random_tokens(rng *r, int32_t *tok, int64_t n) {
    for (int64_t i = 0; i < n; i++) tok[i] = rng_int(r, TV);
}

/* Every model configuration the model tests run: dtype x biases. */
typedef struct model_case { ha_dtype dtype; int bias; } model_case;
static const model_case MODEL_CASES[] = { { HA_F32, 0 }, { HA_F32, 1 }, { HA_BF16, 0 }, { HA_BF16, 1 }, { HA_F16, 1 },
                                           { HA_Q8, 1 }, { HA_Q4, 0 }, { HA_F32P, 1 }, { HA_BF16P, 0 }, { HA_F16P, 1 } };

/* The kernel variants by name, for forwards (which use the selected table). */
static int forward_variants(const char **names) {
    const ha_kernels *ks[NVARIANTS];
    return kernel_variants(ks, names);
}

static void select_kernels(const char *name) { CHECK_OK(ha_kernels_select(name)); }

/* Tests of many one-token forwards run on one thread: on a shared 2-core machine the pool's hand-offs
 * dominate their time. Thread counts have tests of their own (model_thread_count_..., threads_...). */
static void one_thread(void) { CHECK_OK(ha_set_num_threads(1)); }

#define FOR_EACH_MODEL(t, vname)                                                                           \
    const char *vnames_[NVARIANTS];                                                                             \
    int nv_ = forward_variants(vnames_);                                                                  \
    for (int vi_ = 0; vi_ < nv_; vi_++)                                                                   \
        for (size_t mc_ = 0; mc_ < COUNT(MODEL_CASES); mc_++)                                             \
            for (tiny *t = (select_kernels(vnames_[vi_]),                                                  \
                            tiny_build(MODEL_CASES[mc_].dtype, MODEL_CASES[mc_].bias, 0, 0, 100 + mc_));   \
                 t; tiny_free(t), t = NULL)                                                                \
                for (const char *vname = vnames_[vi_]; vname; vname = NULL)

#define CASE_FMT "[%s kernels, %s weights, %s] "
#define CASE_ARGS(t, vname) (vname), dname((t)->dtype), (t)->bias ? "biases" : "no biases"

/* ---- 3. the model through the public API ---------------------------------------------------------------- */

static void test_model_chunk_equals_token_by_token(void) {
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
        CHECK(memcmp(la, la + TV, TV * sizeof(float)) != 0, CASE_FMT "expected positions 0 and 1 to give different logits",
              CASE_ARGS(t, vname));
        CHECK_SAME_FLOATS(la, lb, 5 * TV, CASE_FMT "a 5-token append vs 5 one-token appends", CASE_ARGS(t, vname));
        ha_llama_context_free(a);
        ha_llama_context_free(b);
    }
}

/* Appends longer than the forward's internal chunk (64 tokens), two sequences interleaved. */
static void test_model_long_append_equals_token_by_token(void) {
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
static void test_model_blas_prefill_blocks(void) {
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
static void test_model_blas_prefill_wide_attention_output(void) {
    one_thread();
    enum { V = 20, D = 8, F = 8, NH = 4, HD = 128, Q = NH * HD, N = 128 };
    static const ha_dtype dtypes[] = { HA_BF16, HA_F16, HA_Q8, HA_Q4, HA_BF16P, HA_F32P };
    for (size_t di = 0; di < COUNT(dtypes); di++) {
        const ha_dtype dt = dtypes[di];
        rng r = { 40 + di };
        double inv[HD / 2];
        for (int j = 0; j < HD / 2; j++) inv[j] = pow(10000.0, -2.0 * j / HD);
        ha_llama_config cfg = { .vocab_size = V, .hidden_size = D, .intermediate_size = F, .n_layers = 1, .n_heads = NH,
                                .n_kv_heads = NH, .head_dim = HD, .norm_eps = 1e-5f, .rope_inv_freq = inv };
        void *bufs[9];
        ha_matrix mats[7];
        const int64_t shapes[7][2] = { { V, D }, { Q, D }, { Q, D }, { Q, D }, { D, Q }, { F, D }, { F, D } };
        for (int i = 0; i < 7; i++) {
            bufs[i] = make_weights(dt, shapes[i][0], shapes[i][1], &r, 0.5, 0, NULL);
            mats[i] = (ha_matrix){ .data = bufs[i], .dtype = dt, .rows = shapes[i][0], .cols = shapes[i][1],
                                   .nbytes = ha_matrix_bytes(dt, shapes[i][0], shapes[i][1]) };
        }
        void *down = make_weights(dt, D, F, &r, 0.5, 0, NULL);
        float *norm = make_floats(D, &r, 0.8, 1.2);
        bufs[7] = down;
        bufs[8] = norm;
        ha_llama_layer L = { .attn_norm = { norm, D }, .wq = mats[1], .wk = mats[2], .wv = mats[3], .wo = mats[4],
                             .ffn_norm = { norm, D }, .w_gate = mats[5], .w_up = mats[6],
                             .w_down = { .data = down, .dtype = dt, .rows = D, .cols = F, .nbytes = ha_matrix_bytes(dt, D, F) } };
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
        CHECK(worst <= tol * scale, "[%s weights] OpenBLAS prefill vs the kernels: max |diff| %g > %g x %g", dname(dt), worst,
              tol, scale);
        ha_llama_context_free(blas);
        ha_llama_context_free(kern);
        ha_llama_free(m);
        for (int i = 0; i < 9; i++) free(bufs[i]);
        free(a);
        free(b);
    }
}

static void test_model_crop_then_append_equals_fresh(void) {
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
        CHECK_SAME_FLOATS(lb, la, 4 * TV, CASE_FMT "crop(3) + 4 tokens vs a fresh cache with the same 7", CASE_ARGS(t, vname));
        CHECK_OK(append_seq(c, 0, 7, joined, lc));
        CHECK_SAME_FLOATS(lc + 3 * TV, la, 4 * TV, CASE_FMT "crop(3) + 4 tokens vs one 7-token append", CASE_ARGS(t, vname));
        ha_llama_context_free(a);
        ha_llama_context_free(b);
        ha_llama_context_free(c);
    }
}

static void test_model_interleaved_sequences_equal_alone(void) {
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
                              CASE_FMT "token %d (sequence %d, position %d) interleaved vs its sequence alone", CASE_ARGS(t, vname), i,
                              s, k[s]);
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

static void test_model_want_mask_packs_rows(void) {
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
        CHECK_SAME_FLOATS(all + 3 * TV, packed + 1 * TV, TV, CASE_FMT "wanted row 3, packed second", CASE_ARGS(t, vname));
        CHECK_SAME_FLOATS(all + 4 * TV, packed + 2 * TV, TV, CASE_FMT "wanted row 4, packed third", CASE_ARGS(t, vname));
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
static void workload(const ha_llama *m, ha_llama_context *reuse, float *logits) {
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

static void test_model_thread_count_gives_identical_logits(void) {
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
static void test_model_kernel_variants_give_the_same_bits(void) {
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
static void test_model_sliding_window_limits_attention(void) {
    const char *vn[NVARIANTS];
    int nv = forward_variants(vn);
    for (int v = 0; v < nv; v++) {
        CHECK_OK(ha_kernels_select(vn[v]));
        tiny *full = tiny_build(HA_BF16, 1, 0, 0, 5), *w1 = tiny_build(HA_BF16, 1, 0, 1, 5), *w16 = tiny_build(HA_BF16, 1, 0, 16, 5);
        const int32_t p1[3] = { 4, 9, 30 }, p2[3] = { 40, 2, 30 };
        float a[3 * TV], b[3 * TV], c[3 * TV], d[3 * TV];
        ha_llama_context *ca = ctx_new(w1->m, 2, 16);
        CHECK_OK(append_seq(ca, 0, 3, p1, a));
        CHECK_OK(append_seq(ca, 1, 3, p2, b));
        CHECK_SAME_FLOATS(a + 2 * TV, b + 2 * TV, TV, "[%s] window 1: token 30 at position 2 after different tokens", vn[v]);
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
static void test_model_ring_cache_keeps_the_window(void) {
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
    CHECK(LM(c)->max_rollback == INT64_MAX, "capacity 260 expected no ring, max_rollback %lld", (long long)LM(c)->max_rollback);
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
static void test_model_cache_copy_of_a_cropped_ring_is_a_clone(void) {
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
        CHECK(LEN(dst, 1) == L && LEN(dst, 0) == 0, "[grow %d] copy: lengths %lld, %lld", grow,
              (long long)LEN(dst, 1), (long long)LEN(dst, 0));
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
static void test_model_cache_copy_kv_and_hidden_states(void) {
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
        float *k = xmalloc((size_t)TNKV * N * THD * sizeof(float)), *v = xmalloc((size_t)TNKV * N * THD * sizeof(float));
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
        float *a = xmalloc((size_t)(TL + 1) * 5 * TD * sizeof(float)), *b = xmalloc((size_t)(TL + 1) * 7 * TD * sizeof(float));
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
            CHECK_SAME_FLOATS(one + (size_t)e * H * TD, a + (size_t)e * 5 * TD, 5 * TD, "hidden entry %d, tokens 0..4", e);
            CHECK_SAME_FLOATS(one + ((size_t)e * H + 5) * TD, b + (size_t)e * 7 * TD, 7 * TD, "hidden entry %d, 5..11", e);
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
static void test_model_fused_projections_equal_split(void) {
    for (size_t mc = 0; mc < COUNT(MODEL_CASES); mc++) {
        tiny *t = tiny_build(MODEL_CASES[mc].dtype, 1, 0, 0, 40 + mc), *u = tiny_build(MODEL_CASES[mc].dtype, 1, 0, 0, 40 + mc);
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

static void test_kv_capacity_error_appends_nothing(void) {
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
static void test_streamed_buffers_hold_their_size_at_huge_page_boundaries(void) {
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

static void test_kv_invalid_token_appends_nothing(void) {
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

static void test_kv_bad_sequence_and_crop_rejected(void) {
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
    CHECK(LEN(a, 0) == 5 && LEN(a, 1) == 0, "rejected crops expected to leave lengths 5, 0; got %lld, %lld", (long long)LEN(a, 0),
          (long long)LEN(a, 1));
    CHECK(LEN(a, 2) == 0 && LEN(a, -1) == 0, "length of an out-of-range sequence expected 0, got %lld, %lld", (long long)LEN(a, 2),
          (long long)LEN(a, -1));
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

static void test_kv_crop_to_zero_equals_fresh(void) {
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

static int sentinel_model;

#define EXPECT_CREATE_FAILS(t, needle1, needle2)                                                           \
    do {                                                                                                  \
        ha_llama *m_ = (ha_llama *)(void *)&sentinel_model;                                               \
        ha_status st_ = ha_llama_create(&(t)->cfg, &(t)->w, &m_);                                         \
        if (st_ != HA_ERR_INVALID)                                                                        \
            FAIL("expected HA_ERR_INVALID mentioning \"%s\", got %s (\"%s\")", needle1, status_name(st_), ha_last_error()); \
        if (m_ != NULL) FAIL("a rejected ha_llama_create expected *out == NULL, got %p", (void *)m_);      \
        CHECK_MSG(needle1);                                                                               \
        CHECK_MSG(needle2);                                                                               \
    } while (0)

static void test_create_rejects_bad_weights(void) {
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

static void test_create_rejects_bad_config(void) {
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

static void test_create_accepts_tied_and_counts_bytes(void) {
    for (int dt = 0; dt < HA_NDTYPES; dt++)
        for (int bias = 0; bias < 2; bias++) {
            tiny *t = tiny_build((ha_dtype)dt, bias, 1, 0, 33);
#define MB(rows, cols) ((int64_t)ha_matrix_bytes((ha_dtype)dt, (rows), (cols)))
            int64_t per_layer = MB(TQ, TD) + MB(TD, TQ) + 2 * MB(TKV, TD) + 2 * MB(TF, TD) + MB(TD, TF) + 2 * TD * 4;
#undef MB
            if (bias) per_layer += (TQ + 2 * TKV + TD + 2 * TF + TD) * 4;
            int64_t want = (int64_t)ha_matrix_bytes((ha_dtype)dt, TV, TD) + TD * 4 + TL * per_layer;
            CHECK(ha_llama_weight_bytes(t->m) == want, "[%s, bias %d] weight bytes expected %lld, got %lld", dname((ha_dtype)dt), bias,
                  (long long)want, (long long)ha_llama_weight_bytes(t->m));
            float l[3 * TV];
            const int32_t tok[3] = { 0, 49, 25 };
            ha_llama_context *c = ctx_new(t->m, 1, 4);
            CHECK_OK(append_seq(c, 0, 3, tok, l));
            for (int i = 0; i < 3 * TV; i++) CHECK(isfinite(l[i]), "tied model: logit %d expected finite, got %g", i, (double)l[i]);
            ha_llama_context_free(c);
            tiny_free(t);
        }
}

/* ---- 6. sampler ------------------------------------------------------------------------------------ */

static ha_sampling_params greedy_params(void) {
    return (ha_sampling_params){ .do_sample = 0, .temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .repetition_penalty = 1.0f, .seed = 0 };
}

static ha_sampling_params sample_params(float temperature, int64_t top_k, float top_p) {
    return (ha_sampling_params){ .do_sample = 1, .temperature = temperature, .top_k = top_k, .top_p = top_p,
                                 .repetition_penalty = 1.0f, .seed = 42 };
}

static ha_sampler *sampler_new(ha_sampling_params p, int64_t V) {
    ha_sampler *s = NULL;
    CHECK_OK(ha_sampler_create(&p, V, &s));
    return s;
}

static void test_rng_uniform_properties(void) {
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
    CHECK(fabs(mean - 0.5) < 4 * sqrt(1.0 / 12 / N), "mean of %d uniforms expected 0.5 +- %.4f, got %.5f", N, 4 * sqrt(1.0 / 12 / N), mean);
    double var_sd = sqrt((1.0 / 80 - 1.0 / 144) / N);
    CHECK(fabs(var - 1.0 / 12) < 4 * var_sd, "variance expected %.5f +- %.5f, got %.5f", 1.0 / 12, 4 * var_sd, var);
    CHECK(fabs(lag / N) < 4 * (1.0 / 12) / sqrt(N), "lag-1 covariance expected 0 +- %.5f, got %.5f", 4 * (1.0 / 12) / sqrt(N), lag / N);
    double chi2 = 0.0;
    for (int b = 0; b < 10; b++) chi2 += (bins[b] - N / 10.0) * (bins[b] - N / 10.0) / (N / 10.0);
    CHECK(chi2 < 33.7, "chi-square of 10 bins (9 dof) expected < 33.7 (p = 1e-4), got %.2f", chi2);
    /* the extremes map inside (0, 1) */
    CHECK(ha_rng_uniform(0, 0, 0, 0, 0) > 0.0 && ha_rng_uniform(UINT64_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX) < 1.0,
          "draws at extreme keys expected in (0, 1)");
}

/* The generator is Philox4x32-10 (Random123's known-answer vectors: counter and key all zeros, all ones, and
 * pi's digits), and every variant's rng_bits gives its bits for blocks of any length, at any index (wrapping
 * past 2^32 - 1 as the scalar generator's uint32 index does). */
static void test_rng_bits_philox_and_variants_bitwise(void) {
    static const struct { uint64_t seed; uint32_t row, position, purpose, index; uint64_t first64; } KAT[] = {
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

static void test_sampler_greedy_first_argmax(void) {
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

static void check_kept(const char *what, const float *orig, const float *got, const int *keep, int n) {
    for (int i = 0; i < n; i++) {
        if (keep[i])
            CHECK(fbits(got[i]) == fbits(orig[i]), "%s: token %d expected kept with score %g, got %g", what, i, (double)orig[i],
                  (double)got[i]);
        else
            CHECK(got[i] == -INFINITY, "%s: token %d (score %g) expected removed (-inf), got %g", what, i, (double)orig[i], (double)got[i]);
    }
}

static void test_sampler_top_k_keeps_ties(void) {
    const float in[7] = { 1.0f, 5.0f, 3.0f, 5.0f, 2.0f, 3.0f, 0.0f };
    struct { int64_t k; int keep[7]; } cases[] = {
        { 1, { 0, 1, 0, 1, 0, 0, 0 } }, /* the top score is tied: both stay */
        { 2, { 0, 1, 0, 1, 0, 0, 0 } },
        { 3, { 0, 1, 1, 1, 0, 1, 0 } }, /* the 3rd largest is 3, tied: 4 stay */
        { 5, { 0, 1, 1, 1, 1, 1, 0 } },
        { 6, { 1, 1, 1, 1, 1, 1, 0 } },
        { 7, { 1, 1, 1, 1, 1, 1, 1 } },
        { 100, { 1, 1, 1, 1, 1, 1, 1 } },
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
static void test_sampler_shortcuts_equal_full_passes(void) {
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
            CHECK(y[i] == want || (isinf(want) && isinf(y[i])), "trial %d, V=%lld, top_k=%lld: token %lld kept %g, "
                  "expected %g", trial, (long long)V, (long long)k, (long long)i, (double)y[i], (double)want);
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
            const double g = (double)x[i] - log(-log(ha_rng_uniform(sp.seed, row, position, HA_RNG_SAMPLE, (uint32_t)i)));
            if (g > bv) {
                bv = g;
                best = (int32_t)i;
            }
        }
        const int32_t got = ha_sampler_choose(s, x, row, position);
        CHECK(got == best, "trial %d, V=%lld, scale %g: chose %d, the full pass %d", trial, (long long)V, scale, got, best);
        ha_sampler_free(s);
    }
}

/* Transformers' TopPLogitsWarper: sort ascending, cumulative softmax, remove where cum <= 1 - top_p,
 * the most likely token always kept. Probabilities 0.15 0.5 0.05 0.3 (ascending: 0.05, 0.15, 0.3, 0.5;
 * cumulative 0.05, 0.2, 0.5, 1.0). Thresholds are chosen away from the cumulative values. */
static void test_sampler_top_p_transformers_semantics(void) {
    const float in[4] = { logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f) };
    struct { float top_p; int keep[4]; } cases[] = {
        { 0.99f, { 1, 1, 1, 1 } }, /* 1 - p = 0.01 < 0.05: nothing removed */
        { 0.9f, { 1, 1, 0, 1 } },  /* 0.1: the 0.05 goes */
        { 0.75f, { 0, 1, 0, 1 } }, /* 0.25: 0.05 and 0.15 go (cum 0.2) */
        { 0.4f, { 0, 1, 0, 0 } },  /* 0.6: cum 0.5 <= 0.6, only the top stays */
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

static void test_sampler_repetition_penalty_and_temperature(void) {
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
    CHECK(y[1] == 2.0f && y[4] == 2.0f, "second history {4}: expected token 1 unpenalized (2) and token 4 halved (2), got %g, %g",
          (double)y[1], (double)y[4]);
    ha_sampler_free(s);

    /* penalty, then temperature; each score divided by the temperature in float */
    ha_sampling_params q = sample_params(0.7f, 0, 1.0f);
    q.repetition_penalty = 1.5f;
    ha_sampler *t = sampler_new(q, 6);
    float z[6] = { -1.0f, 2.0f, 0.5f, -3.0f, 4.0f, 0.0f };
    const int32_t h3[2] = { 0, 4 };
    CHECK_OK(ha_sampler_process(t, z, 0, h3, 2, 0));
    const float wz[6] = { (-1.0f * 1.5f) / 0.7f, 2.0f / 0.7f, 0.5f / 0.7f, -3.0f / 0.7f, (4.0f / 1.5f) / 0.7f, 0.0f / 0.7f };
    CHECK_SAME_FLOATS(wz, z, 6, "repetition_penalty 1.5 then temperature 0.7");
    ha_sampler_free(t);
}

static void test_sampler_frequencies_match_softmax(void) {
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
            CHECK(c >= 0 && c < V - 1, "temperature %g: expected a token in 0..%d (the -inf one never), got %d", (double)temperature, V - 2, c);
            count[c]++;
            CHECK(c == ha_sampler_choose(s, x, 3, (uint32_t)pos), "choose expected deterministic at position %d", pos);
        }
        for (int i = 0; i < V - 1; i++) {
            double pi = p[i] / z, sd = sqrt(N * pi * (1 - pi));
            CHECK(fabs(count[i] - N * pi) <= 4 * sd, "temperature %g: token %d expected %.0f +- %.0f draws of %d, got %d",
                  (double)temperature, i, N * pi, 4 * sd, N, count[i]);
        }
        ha_sampler_free(s);
    }
    /* the row is part of the key: two rows at the same positions do not draw the same tokens */
    ha_sampler *s = sampler_new(sample_params(1.0f, 0, 1.0f), V);
    int same = 0;
    for (int pos = 0; pos < 200; pos++) same += ha_sampler_choose(s, logits, 0, (uint32_t)pos) == ha_sampler_choose(s, logits, 1, (uint32_t)pos);
    CHECK(same < 150, "rows 0 and 1 expected independent draws (about 50 of 200 equal), got %d equal", same);
    ha_sampler_free(s);
}

static void test_sampler_all_removed_returns_minus_one(void) {
    const float none[4] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY }, nans[4] = { NAN, NAN, -INFINITY, NAN };
    ha_sampler *g = sampler_new(greedy_params(), 4), *s = sampler_new(sample_params(1.0f, 2, 0.9f), 4);
    CHECK(ha_sampler_choose(g, none, 0, 0) == -1, "greedy over all -inf expected -1, got %d", ha_sampler_choose(g, none, 0, 0));
    CHECK(ha_sampler_choose(g, nans, 0, 0) == -1, "greedy over NaN/-inf expected -1, got %d", ha_sampler_choose(g, nans, 0, 0));
    CHECK(ha_sampler_choose(s, none, 0, 0) == -1, "sampling over all -inf expected -1, got %d", ha_sampler_choose(s, none, 0, 0));
    CHECK(ha_sampler_choose(s, nans, 0, 0) == -1, "sampling over NaN/-inf expected -1, got %d", ha_sampler_choose(s, nans, 0, 0));
    float x[4];
    memcpy(x, none, sizeof x);
    CHECK_OK(ha_sampler_process(s, x, 0, NULL, 0, 0));
    CHECK_SAME_FLOATS(none, x, 4, "processing all -inf scores");
    ha_sampler_free(g);
    ha_sampler_free(s);
}

static void test_sampler_create_rejects_bad_params(void) {
    struct { ha_sampling_params p; const char *needle; } cases[] = {
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
        CHECK(st == HA_ERR_INVALID, "case %zu (%s): expected HA_ERR_INVALID, got %s", i, cases[i].needle, status_name(st));
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
static void manual_generate(const ha_llama *m, const ha_sampling_params *sp, int b, int64_t N, int32_t *tokens, float *scores) {
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

static void test_generate_greedy_equals_manual_loop(void) {
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
                    CHECK(out[b * N + i] == want[b][i], "[%s, %s] row %d step %lld: expected %d (manual loop), got %d", vn[v],
                          dname(t->dtype), b, (long long)i, want[b][i], out[b * N + i]);
                    CHECK_SAME_FLOATS(want_scores[b] + i * TV, scores + (i * 2 + b) * TV, TV, "[%s] row %d step %lld scores", vn[v], b,
                                      (long long)i);
                }
            free(out);
            free(scores);
            ha_llama_context_free(c);
            tiny_free(t);
        }
}

static void test_generate_sampled_equals_manual_loop(void) {
    one_thread();
    tiny *t = tiny_build(HA_BF16, 1, 0, 0, 42);
    ha_sampling_params sp = { .do_sample = 1, .temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .repetition_penalty = 1.3f, .seed = 1234 };
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
            CHECK(out[b * N + i] == want[b][i], "sampled row %d step %lld: expected %d (manual loop keyed by row and position), got %d",
                  b, (long long)i, want[b][i], out[b * N + i]);
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

static void test_generate_eos_stops_row_and_pads(void) {
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
    CHECK(eos >= 0, "test setup: no token of row 0 stops it before row 1 (rows %d %d %d... and %d %d %d...)", man[0][0], man[0][1],
          man[0][2], man[1][0], man[1][1], man[1][2]);
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
    CHECK(steps == want_steps, "eos %d (row stops at %lld, %lld): expected %lld steps, got %lld", eos, (long long)e[0], (long long)e[1],
          (long long)want_steps, (long long)steps);
    CHECK(e[0] + 1 < steps, "test setup: row 0 expected to stop before the last step");
    for (int b = 0; b < 2; b++)
        for (int64_t i = 0; i < steps; i++) {
            int stopped = e[b] >= 0 && i > e[b];
            int32_t w = stopped ? p.pad_token_id : man[b][i];
            CHECK(out[b * N + i] == w, "row %d step %lld (eos at %lld): expected %d, got %d", b, (long long)i, (long long)e[b], w,
                  out[b * N + i]);
            if (stopped) {
                for (int v = 0; v < TV; v++)
                    CHECK(scores[(i * 2 + b) * TV + v] == -INFINITY, "row %d stopped, step %lld: expected -inf scores, got %g at %d", b,
                          (long long)i, (double)scores[(i * 2 + b) * TV + v], v);
            } else {
                CHECK_SAME_FLOATS(ms[b] + i * TV, scores + (i * 2 + b) * TV, TV, "row %d step %lld scores", b, (long long)i);
            }
        }
    free(scores);
    ha_llama_context_free(c);
    tiny_free(t);
}

static void test_generate_max_new_tokens_exact(void) {
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
        CHECK(steps == N, "max_new_tokens=%lld: expected %lld steps, got %lld", (long long)N, (long long)N, (long long)steps);
        for (int b = 0; b < 2; b++)
            for (int64_t i = 0; i < N; i++)
                CHECK(out[b * N + i] == man[b][i], "max_new_tokens=%lld row %d step %lld: expected %d, got %d", (long long)N, b,
                      (long long)i, man[b][i], out[b * N + i]);
        for (int b = 0; b < 2; b++) {
            int64_t plen = GW - GSTART[b];
            CHECK(LEN(c, b) <= plen + N, "max_new_tokens=%lld: row %d's cache expected at most %lld positions, got %lld", (long long)N, b,
                  (long long)(plen + N), (long long)LEN(c, b));
        }
        ha_llama_context_free(c);
        free(out);
        free(scores);
    }
    tiny_free(t);
}

static void test_generate_min_new_tokens_suppresses_eos(void) {
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
    CHECK(steps >= MIN, "min_new_tokens=%lld: expected at least %lld steps, got %lld", (long long)MIN, (long long)MIN, (long long)steps);
    float s0[TV];
    memcpy(s0, ms[0], sizeof s0);
    s0[eos] = -INFINITY;
    CHECK(out[0] == argmax_first(s0, TV), "row 0 step 0 with eos %d suppressed: expected the runner-up %d, got %d", eos,
          argmax_first(s0, TV), out[0]);
    for (int b = 0; b < 2; b++)
        for (int64_t i = 0; i < MIN; i++) {
            CHECK(out[b * N + i] != eos, "row %d step %lld < min_new_tokens: expected no eos %d", b, (long long)i, eos);
            CHECK(scores[(i * 2 + b) * TV + eos] == -INFINITY, "row %d step %lld: expected the eos score -inf, got %g", b, (long long)i,
                  (double)scores[(i * 2 + b) * TV + eos]);
        }
    ha_llama_context_free(c);
    /* without min_new_tokens, row 0 stops at once */
    c = ctx_new(t->m, 2, 16);
    p.sampling.min_new_tokens = 0;
    CHECK_OK(ha_generate(LM(c), &p, GPROMPT, GW, GSTART, out, scores, &steps));
    CHECK(out[0] == eos && (steps == 1 || out[1] == p.pad_token_id), "min_new_tokens=0: expected row 0 to end with eos %d at once, got %d %d",
          eos, out[0], out[1]);
    ha_llama_context_free(c);
    free(scores);
    tiny_free(t);
}

static void test_generate_rejects_bad_input(void) {
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
        ha_sampling_params sp = sampled ? (ha_sampling_params){ .do_sample = 1, .temperature = 0.9f, .top_k = 0, .top_p = 0.95f,
                                                                .repetition_penalty = 1.2f, .seed = 77 }
                                        : greedy_params();
        ha_generate_params gp = gen_params(N, sp);
        int32_t eos = -1;
        for (int with_eos = 0; with_eos < 2; with_eos++) {
            gp.eos = with_eos ? &eos : NULL;
            gp.n_eos = with_eos;
            int64_t plain_steps = plain_generate(target->m, &gp, plain, ps);
            if (!with_eos) eos = plain[3]; /* in the second round, row 0 stops at its first such token */
            for (int d = 0; d < 3; d++)           /* another model, the same model, prompt lookup */
                for (int64_t K = 1; K <= 5; K += 2)
                    for (int sched = 0; sched < 3; sched++) {
                        const tiny *dm = d == 0 ? other : d == 1 ? target : NULL;
                        static const double draft_costs[] = { 0.05, 0.06 }, target_costs[] = { 1.0, 1.1, 1.2, 1.3 };
                        ha_assist_params ap = { .gen = gp, .num_assistant_tokens = K,
                                                .schedule = sched == 2 ? HA_SCHEDULE_COST : sched ? HA_SCHEDULE_HEURISTIC
                                                                                              : HA_SCHEDULE_CONSTANT,
                                                .confidence_threshold = 0.0f, .acceptance = HA_ACCEPT_COUPLED,
                                                .prompt_lookup_num_tokens = K, .max_matching_ngram_size = 2,
                                                .draft_costs = draft_costs, .n_draft_costs = 2,
                                                .target_costs = target_costs, .n_target_costs = 4 };
                        ha_llama_context *tc = ctx_new(target->m, 2, 16), *dc = dm ? ctx_new(dm->m, 2, 16) : NULL;
                        int64_t steps = -1;
                        for (int i = 0; i < 2 * 10; i++) got[i] = -999;
                        ha_assist_stats stats = { 0 };
                        CHECK_OK(ha_generate_assisted(LM(tc), dc ? LM(dc) : NULL, &ap, GPROMPT, GW, GSTART, got, gs, &steps, &stats));
                        const char *dn = d == 0 ? "another model" : d == 1 ? "the same model" : "prompt lookup";
                        CHECK(steps == plain_steps, "%s, draft %s, K=%lld, schedule %d, eos %d: expected %lld steps, got %lld",
                              sampled ? "coupled sampling" : "greedy", dn, (long long)K, sched, with_eos ? eos : -1,
                              (long long)plain_steps, (long long)steps);
                        for (int b = 0; b < 2; b++)
                            for (int64_t i = 0; i < steps; i++) {
                                CHECK(got[b * N + i] == plain[b * N + i], "%s, draft %s, K=%lld, schedule %d: row %d step %lld "
                                      "expected %d (plain), got %d", sampled ? "coupled sampling" : "greedy", dn, (long long)K, sched,
                                      b, (long long)i, plain[b * N + i], got[b * N + i]);
                                CHECK_SAME_FLOATS(ps + (i * 2 + b) * TV, gs + (i * 2 + b) * TV, TV, "%s, draft %s, K=%lld: row %d "
                                                  "step %lld scores", sampled ? "coupled" : "greedy", dn, (long long)K, b, (long long)i);
                            }
                        CHECK(stats.num_accepted_tokens <= stats.num_draft_tokens, "accepted %lld of %lld drafts",
                              (long long)stats.num_accepted_tokens, (long long)stats.num_draft_tokens);
                        CHECK(stats.num_rounds >= 1 && stats.num_rounds <= stats.num_target_passes,
                              "%lld rounds for %lld target passes over the rows", (long long)stats.num_rounds,
                              (long long)stats.num_target_passes);
                        if (d == 1 && !sampled)
                            CHECK(stats.num_accepted_tokens == stats.num_draft_tokens && stats.num_draft_tokens > 0,
                                  "greedy, the target as its own draft, K=%lld: expected every draft accepted, got %lld of %lld",
                                  (long long)K, (long long)stats.num_accepted_tokens, (long long)stats.num_draft_tokens);
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

static void test_assisted_equals_plain(void) { assisted_equals_plain(0); }

/* The same where target and draft are longrope models switching at 7 positions (rows of 4 and 2 prompt tokens, 10
 * new: every K lands rounds on both sides of it): ha_assist_candidate_cap keeps each round's scores on one side, and
 * the round past it runs the row again whole, as plain generation's step there does. */
static void test_assisted_equals_plain_across_a_rope_switch(void) { assisted_equals_plain(7); }

/* longrope as Transformers chooses it: an append rotates all the tokens it adds to a sequence with the long table iff
 * the sequence then holds more than rope_long_from positions, whatever chunks the append is cut into and whatever
 * the other sequences in it do; cached keys keep their rotation. Compared bitwise with the model always short and the
 * model always long (the same weights, one table each). */
static void test_longrope_an_append_takes_the_long_table_iff_it_ends_past_the_switch(void) {
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
    const struct { tiny *m; int n; tiny *as; } cases[] = { { lr7, 7, sh }, { lr7, 8, lo }, { lr7, 12, lo },
                                                           { lr66, 66, sh }, { lr66, 67, lo }, { lr66, N, lo } };
    for (size_t i = 0; i < COUNT(cases); i++) {
        ha_llama_context *c = ctx_new(cases[i].m->m, 1, N), *e = ctx_new(cases[i].as->m, 1, N);
        CHECK(LM(c)->rope_switch == cases[i].m->cfg.rope_long_from && LM(e)->rope_switch == 0,
              "rope_switch expected %lld and 0, got %lld and %lld", (long long)cases[i].m->cfg.rope_long_from,
              (long long)LM(c)->rope_switch, (long long)LM(e)->rope_switch);
        CHECK_OK(append_seq(c, 0, cases[i].n, tok, got));
        CHECK_OK(append_seq(e, 0, cases[i].n, tok, want));
        CHECK_SAME_FLOATS(want, got, (size_t)cases[i].n * TV, "switch %lld, one append of %d tokens vs the model "
                          "always %s", (long long)cases[i].m->cfg.rope_long_from, cases[i].n,
                          cases[i].as == sh ? "short" : "long");
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
static void test_generate_runs_a_row_again_whole_past_a_rope_switch(void) {
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
static void test_assisted_cost_schedule_edges(void) {
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
            ha_assist_params ap = { .gen = gen_params(n_new, greedy_params()), .num_assistant_tokens = 20,
                                    .schedule = HA_SCHEDULE_COST, .draft_costs = c ? free_drafts : dear,
                                    .n_draft_costs = 1, .target_costs = flat, .n_target_costs = c ? 3 : 2 };
            ap.gen.sources = sources;
            ha_assist_stats stats = { .proposed_at = proposed, .accepted_at = accepted };
            ha_llama_context *tc = ctx_new(target->m, 2, 16), *dc = ctx_new(target->m, 2, 16);
            CHECK_OK(ha_generate_assisted(LM(tc), LM(dc), &ap, GPROMPT, GW, GSTART, got, NULL, &steps, &stats));
            CHECK(steps == (n_new < plain_steps ? n_new : plain_steps), "max_new_tokens=%lld: %lld steps", (long long)n_new,
                  (long long)steps);
            for (int b = 0; b < 2; b++)
                for (int64_t i = 0; i < steps; i++)
                    CHECK(got[b * n_new + i] == plain[b * N + i], "costs %d, max_new_tokens=%lld: row %d step %lld expected "
                          "%d, got %d", c, (long long)n_new, b, (long long)i, plain[b * N + i], got[b * n_new + i]);
            /* how each token was decided: dear drafts, plain decoding; free ones, every draft accepted and the
             * target's bonus token last (nothing to draft when one token is left: plain) */
            for (int b = 0; b < 2 && steps == n_new; b++)
                for (int64_t i = 0; i < n_new; i++) {
                    const int want = !c || n_new == 1 ? HA_SOURCE_PLAIN : i < n_new - 1 ? HA_SOURCE_ACCEPTED : HA_SOURCE_BONUS;
                    CHECK(sources[b * n_new + i] == want, "costs %d, max_new_tokens=%lld: row %d token %lld: source %d, "
                          "expected %d", c, (long long)n_new, b, (long long)i, sources[b * n_new + i], want);
                }
            if (!c) {
                CHECK(stats.num_draft_tokens == 0 && stats.num_draft_passes == 0 && stats.num_target_passes == 2 * n_new,
                      "drafts dearer than they gain: expected plain decoding (0 drafts, %lld passes), got %lld drafts in "
                      "%lld draft passes, %lld target passes", (long long)(2 * n_new), (long long)stats.num_draft_tokens,
                      (long long)stats.num_draft_passes, (long long)stats.num_target_passes);
            } else {
                /* the target drafting for itself, for free: every round drafts all the room there is */
                CHECK(stats.num_draft_tokens == 2 * (n_new - 1) && proposed[n_new - 1] == 0,
                      "free drafts, max_new_tokens=%lld: expected %lld drafts over the 2 rows, none at position %lld; got "
                      "%lld", (long long)n_new, (long long)(2 * (n_new - 1)), (long long)(n_new - 1),
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
    const double *bad_d[] = { ok_d, neg_d, ok_d, ok_d, NULL, ok_d }, *bad_t[] = { nan_t, flat, zero_t, flat, flat, many };
    const int64_t n_bad_d[] = { 1, 1, 1, 1, 1, 1 }, n_bad_t[] = { 2, 1, 2, 0, 1, 65 };
    for (int i = 0; i < 6; i++) {
        ha_assist_params ap = { .gen = gp, .num_assistant_tokens = 4, .schedule = HA_SCHEDULE_COST,
                                .draft_costs = bad_d[i], .n_draft_costs = n_bad_d[i], .target_costs = bad_t[i],
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

static void test_assisted_reads_start_once(void) {
    one_thread();
    tiny *t = tiny_build(HA_F32, 0, 0, 0, 63);
    const int64_t N = 6;
    int32_t want[2 * 6], got[2 * 6];
    ha_generate_params gp = gen_params(N, greedy_params());
    ha_assist_params ap = { .gen = gp, .num_assistant_tokens = 2, .prompt_lookup_num_tokens = 2, .max_matching_ngram_size = 2 };
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
    int wait;               /* the target: wait for the draft as above (only when it drafts ahead) */
    int calls;              /* the target's appends so far */
    pthread_t owner;
    atomic_long off_owner;  /* the draft's appends made on another thread */
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
        ha_sampling_params sp = mode ? (ha_sampling_params){ .do_sample = 1, .temperature = 0.9f, .top_p = 0.95f,
                                                             .repetition_penalty = 1.2f, .seed = 78 }
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
                            ha_assist_params ap = { .gen = gen_params(N, sp), .num_assistant_tokens = K,
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
                            CHECK(overlap ? stats[1].num_ahead_passes >= off && (off > 0) == (stats[1].num_ahead_passes > 0)
                                          : stats[0].num_ahead_passes == 0 && off == 0,
                                  "overlap %d: %lld passes made ahead, %ld draft appends off the caller's thread",
                                  overlap, (long long)stats[overlap].num_ahead_passes, off);
                            ha_llama_context_free(tc);
                            ha_llama_context_free(dc);
                        }
                        char what[160];
                        snprintf(what, sizeof what, "mode %d, draft %s, K=%lld, schedule %d, eos %d, rope switch %lld",
                                 mode, d == 0 ? "another model" : d == 1 ? "the target in int4" : "the target",
                                 (long long)K, sched, with_eos, (long long)long_from);
                        CHECK(steps[0] == steps[1], "%s: %lld steps without drafting ahead, %lld with", what,
                              (long long)steps[0], (long long)steps[1]);
                        for (int i = 0; i < 2 * N; i++)
                            CHECK(out[0][i] == out[1][i] && sources[0][i] == sources[1][i], "%s: token %d: %d (source %d) "
                                  "without drafting ahead, %d (source %d) with", what, i, out[0][i], sources[0][i],
                                  out[1][i], sources[1][i]);
                        CHECK_SAME_FLOATS(scores[0], scores[1], steps[0] * 2 * V, "%s: scores", what);
                        const ha_assist_stats *a = &stats[0], *b = &stats[1];
                        CHECK(a->num_draft_tokens == b->num_draft_tokens && a->num_accepted_tokens == b->num_accepted_tokens &&
                              a->num_target_passes == b->num_target_passes && a->num_draft_passes == b->num_draft_passes &&
                              a->num_rounds == b->num_rounds && a->num_assistant_tokens == b->num_assistant_tokens,
                              "%s: statistics without drafting ahead (drafts %lld, accepted %lld, target passes %lld, draft "
                              "passes %lld, rounds %lld, K %lld) and with (%lld, %lld, %lld, %lld, %lld, %lld)", what,
                              (long long)a->num_draft_tokens, (long long)a->num_accepted_tokens,
                              (long long)a->num_target_passes, (long long)a->num_draft_passes, (long long)a->num_rounds,
                              (long long)a->num_assistant_tokens, (long long)b->num_draft_tokens,
                              (long long)b->num_accepted_tokens, (long long)b->num_target_passes,
                              (long long)b->num_draft_passes, (long long)b->num_rounds, (long long)b->num_assistant_tokens);
                        for (int j = 0; j < N; j++)
                            CHECK(proposed[0][j] == proposed[1][j] && accepted[0][j] == accepted[1][j],
                                  "%s: draft position %d: %lld of %lld accepted without drafting ahead, %lld of %lld with",
                                  what, j, (long long)accepted[0][j], (long long)proposed[0][j], (long long)accepted[1][j],
                                  (long long)proposed[1][j]);
                        CHECK(b->num_ahead_used <= b->num_draft_passes, "%s: %lld of %lld draft passes read what was "
                              "drafted ahead", what, (long long)b->num_ahead_used, (long long)b->num_draft_passes);
                        ahead_passes += b->num_ahead_passes;
                        if (d == 2 && mode == 0) used_when_right += b->num_ahead_used; /* every guess right */
                    }
    }
    /* how far the thread gets in a round depends on the machine; over all these rounds it must have got somewhere */
    CHECK(ahead_passes > 0 && used_when_right > 0, "%lld passes made ahead; %lld draft passes read them where every "
          "guess was right", (long long)ahead_passes, (long long)used_when_right);
    free(scores[0]);
    free(scores[1]);
    tiny_free(target);
    tiny_free(other);
    tiny_free(near);
}

static void test_assisted_drafting_ahead_changes_nothing(void) { drafting_ahead_changes_nothing(0); }

/* The same with target and drafts longrope models switching at 7 positions, which both rows pass (prompts of 4 and 2
 * tokens, 10 new): drafting ahead stops short of the draft's switch, where draft_round runs the row again whole. */
static void test_assisted_drafting_ahead_changes_nothing_across_a_rope_switch(void) {
    drafting_ahead_changes_nothing(7);
}

/* Rejection sampling runs clean (tokens in range, stats consistent) and rejects bad arguments. */
static void test_assisted_rejection_runs_and_rejects_bad_args(void) {
    one_thread();
    tiny *target = tiny_build(HA_BF16, 1, 0, 0, 63), *draft = tiny_build(HA_F16, 0, 0, 0, 64);
    const int64_t N = 12;
    ha_sampling_params sp = { .do_sample = 1, .temperature = 1.0f, .top_k = 10, .top_p = 0.9f, .repetition_penalty = 1.0f, .seed = 5 };
    ha_assist_params ap = { .gen = gen_params(N, sp), .num_assistant_tokens = 4, .schedule = HA_SCHEDULE_HEURISTIC,
                            .confidence_threshold = 0.3f, .acceptance = HA_ACCEPT_REJECTION, .prompt_lookup_num_tokens = 3,
                            .max_matching_ngram_size = 2 };
    int64_t proposed[12] = { 0 }, accepted[12] = { 0 };
    ha_assist_stats stats = { .proposed_at = proposed, .accepted_at = accepted };
    int32_t out[2 * 12];
    int64_t steps = -1;
    ha_llama_context *tc = ctx_new(target->m, 2, 16), *dc = ctx_new(draft->m, 2, 16);
    CHECK_OK(ha_generate_assisted(LM(tc), LM(dc), &ap, GPROMPT, GW, GSTART, out, NULL, &steps, &stats));
    CHECK(steps == N, "rejection sampling without eos: expected %lld steps, got %lld", (long long)N, (long long)steps);
    for (int i = 0; i < 2 * 12; i++) CHECK(out[i] >= 0 && out[i] < TV, "token %d expected in [0, %d), got %d", i, TV, out[i]);
    int64_t sum_p = 0, sum_a = 0;
    for (int j = 0; j < 12; j++) {
        CHECK(accepted[j] <= proposed[j], "position %d: accepted %lld of %lld", j, (long long)accepted[j], (long long)proposed[j]);
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
    CHECK_STATUS(ha_generate_assisted(LM(tc), LM(dc), &bad, GPROMPT, GW, GSTART, out, NULL, &steps, NULL), HA_ERR_INVALID);
    CHECK_MSG("num_assistant_tokens");
    bad = ap;
    bad.confidence_threshold = 1.0f;
    CHECK_STATUS(ha_generate_assisted(LM(tc), LM(dc), &bad, GPROMPT, GW, GSTART, out, NULL, &steps, NULL), HA_ERR_INVALID);
    bad = ap;
    bad.prompt_lookup_num_tokens = 0;
    CHECK_STATUS(ha_generate_assisted(LM(tc), NULL, &bad, GPROMPT, GW, GSTART, out, NULL, &steps, NULL), HA_ERR_INVALID);
    CHECK_MSG("prompt_lookup_num_tokens");
    ha_llama_context *one = ctx_new(draft->m, 1, 16);
    CHECK_STATUS(ha_generate_assisted(LM(tc), LM(one), &ap, GPROMPT, GW, GSTART, out, NULL, &steps, NULL), HA_ERR_INVALID);
    const int32_t t1 = 1;
    CHECK_OK(append_seq(dc, 0, 1, &t1, NULL));
    CHECK_STATUS(ha_generate_assisted(LM(tc), LM(dc), &ap, GPROMPT, GW, GSTART, out, NULL, &steps, NULL), HA_ERR_INVALID);
    CHECK_MSG("empty");
    CHECK(LEN(tc, 0) == 0 && LEN(tc, 1) == 0, "rejected assisted calls expected to leave the target's caches empty");
    ha_llama_context_free(one);
    ha_llama_context_free(tc);
    ha_llama_context_free(dc);
    tiny_free(target);
    tiny_free(draft);
}

/* ---- 8. thread pool ------------------------------------------------------------------------------------- */

static void test_threads_set_get_and_reject(void) {
    CHECK_STATUS(ha_set_num_threads(0), HA_ERR_INVALID);
    CHECK_MSG("num_threads=0");
    CHECK_STATUS(ha_set_num_threads(100000), HA_ERR_INVALID);
    CHECK_MSG("100000");
    CHECK_STATUS(ha_set_num_threads(-3), HA_ERR_INVALID);
    CHECK(ha_get_num_threads() >= 1, "default thread count expected >= 1, got %d", ha_get_num_threads());
    CHECK_OK(ha_set_num_threads(3));
    CHECK(ha_get_num_threads() == 3, "after setting 3 expected 3 threads, got %d", ha_get_num_threads());
    CHECK_STATUS(ha_set_num_threads(0), HA_ERR_INVALID);
    CHECK(ha_get_num_threads() == 3, "a rejected setting expected to keep 3 threads, got %d", ha_get_num_threads());
    CHECK_OK(ha_set_num_threads(3));
    CHECK_OK(ha_set_num_threads(1));
    CHECK(ha_get_num_threads() == 1, "after setting 1 expected 1 thread, got %d", ha_get_num_threads());
}

static void test_threads_switching_keeps_results(void) {
    const char *vn[NVARIANTS];
    int nv = forward_variants(vn);
    CHECK_OK(ha_kernels_select(vn[nv - 1]));
    tiny *t = tiny_build(HA_BF16, 1, 0, 0, 51);
    float ref[12 * TV], got[12 * TV];
    CHECK_OK(ha_set_num_threads(1));
    workload(t->m, NULL, ref);
    ha_llama_context *kept = ctx_new(t->m, 2, 16); /* created under 1 thread, used under all */
    const int counts[] = { 2, 3, 1, 3, 2, 1, 2, 3, 3, 1 };
    for (size_t i = 0; i < COUNT(counts); i++) {
        CHECK_OK(ha_set_num_threads(counts[i]));
        CHECK(ha_get_num_threads() == counts[i], "expected %d threads, got %d", counts[i], ha_get_num_threads());
        workload(t->m, NULL, got);
        CHECK_SAME_FLOATS(ref, got, 12 * TV, "switch %zu to %d threads, new context", i, counts[i]);
        workload(t->m, kept, got);
        CHECK_SAME_FLOATS(ref, got, 12 * TV, "switch %zu to %d threads, reused context", i, counts[i]);
    }
    ha_llama_context_free(kept);
    CHECK_OK(ha_set_num_threads(1));
    tiny_free(t);
}

typedef struct cover_job {
    int64_t n;
    int *hits;              /* (n,) */
    atomic_int calls;
    int64_t begins[64], ends[64];
} cover_job;

static void cover_range(void *ctx, int64_t b, int64_t e) {
    cover_job *j = ctx;
    int k = atomic_fetch_add(&j->calls, 1);
    if (k < 64) {
        j->begins[k] = b;
        j->ends[k] = e;
    }
    for (int64_t i = b; i < e; i++) j->hits[i]++;
}

static void test_threads_parallel_for_covers_range(void) {
    const int64_t ns[] = { 0, 1, 2, 3, 5, 17, 100, 1000 };
    for (int nt = 1; nt <= 4; nt++) {
        CHECK_OK(ha_set_num_threads(nt));
        for (size_t a = 0; a < COUNT(ns); a++) {
            const int64_t n = ns[a];
            cover_job j = { .n = n, .hits = xcalloc((size_t)n + 1, sizeof(int)) };
            atomic_init(&j.calls, 0);
            ha_parallel_for(cover_range, &j, n);
            for (int64_t i = 0; i < n; i++)
                CHECK(j.hits[i] == 1, "%d threads, n=%lld: index %lld expected once, got %d times", nt, (long long)n, (long long)i, j.hits[i]);
            int calls = atomic_load(&j.calls);
            /* threads take pieces of ceil(n / (8 nt)) indices as they finish the last; or the caller runs
             * [0, n) alone in one call */
            const int64_t grain = (n + 8 * nt - 1) / (8 * nt);
            CHECK(n == 0 ? calls == 0 : calls >= 1 && calls <= 8 * nt,
                  "%d threads, n=%lld: expected 1..%d calls (0 for n=0), got %d", nt, (long long)n, 8 * nt, calls);
            for (int k = 0; k < calls && k < 64; k++) {
                const int64_t b = j.begins[k], e = j.ends[k];
                const int whole = calls == 1 && b == 0 && e == n;
                const int piece = whole || (b / grain * grain == b && e == (b + grain < n ? b + grain : n));
                CHECK(piece, "%d threads, n=%lld: range [%lld, %lld) is neither [0, n) whole nor a piece "
                      "[k*%lld, min((k+1)*%lld, n))", nt, (long long)n, (long long)b, (long long)e,
                      (long long)grain, (long long)grain);
            }
            free(j.hits);
        }
    }
    ha_parallel_for(cover_range, NULL, -5); /* nothing to do: fn is never called */
    CHECK_OK(ha_set_num_threads(1));
}

typedef struct caller_arg {
    const ha_llama *m;
    const float *ref;
    int rounds;
    int mismatches;
    atomic_int *stop;
    int toggler;
    int bad_status;
} caller_arg;

static void *caller_main(void *p) {
    caller_arg *a = p;
    if (a->toggler) {
        for (int i = 0; !atomic_load(a->stop); i++)
            if (ha_set_num_threads(1 + i % 3) != HA_OK) a->bad_status++;
        return NULL;
    }
    float got[12 * TV];
    for (int r = 0; r < a->rounds; r++) {
        workload(a->m, NULL, got);
        if (memcmp(got, a->ref, sizeof got) != 0) a->mismatches++;
    }
    return NULL;
}

/* Forwards from several threads at once (each with its own context on one shared model) are serialized
 * by the pool and give the single-threaded results; so they do while another thread keeps changing the
 * thread count. */
static void test_threads_concurrent_callers(void) {
    const char *vn[NVARIANTS];
    int nv = forward_variants(vn);
    CHECK_OK(ha_kernels_select(vn[nv - 1]));
    tiny *t = tiny_build(HA_F32, 1, 0, 0, 52);
    float ref[12 * TV];
    CHECK_OK(ha_set_num_threads(1));
    workload(t->m, NULL, ref);
    CHECK_OK(ha_set_num_threads(2));
    for (int with_toggler = 0; with_toggler < 2; with_toggler++) {
        atomic_int stop;
        atomic_init(&stop, 0);
        caller_arg args[3];
        pthread_t th[3];
        for (int i = 0; i < 3; i++)
            args[i] = (caller_arg){ .m = t->m, .ref = ref, .rounds = 8, .stop = &stop, .toggler = i == 2 };
        int n = with_toggler ? 3 : 2;
        for (int i = 0; i < n; i++) CHECK(pthread_create(&th[i], NULL, caller_main, &args[i]) == 0, "pthread_create failed");
        pthread_join(th[0], NULL);
        pthread_join(th[1], NULL);
        atomic_store(&stop, 1);
        if (with_toggler) pthread_join(th[2], NULL);
        for (int i = 0; i < 2; i++)
            CHECK(args[i].mismatches == 0, "%s: caller %d expected the single-threaded logits in all %d rounds, %d differed",
                  with_toggler ? "with a thread toggling the count" : "two callers", i, args[i].rounds, args[i].mismatches);
        CHECK(args[2].bad_status == 0, "ha_set_num_threads failed %d times while forwards ran", args[2].bad_status);
    }
    CHECK_OK(ha_set_num_threads(1));
    tiny_free(t);
}

/* Runs cover_range over [0, n) and checks every index was computed exactly once. */
static void check_covers(int64_t n, const char *when) {
    cover_job j = { .n = n, .hits = xcalloc((size_t)n + 1, sizeof(int)) };
    atomic_init(&j.calls, 0);
    ha_parallel_for(cover_range, &j, n);
    for (int64_t i = 0; i < n; i++)
        CHECK(j.hits[i] == 1, "%s, n=%lld: index %lld expected once, got %d times", when, (long long)n, (long long)i, j.hits[i]);
    free(j.hits);
}

/* Polls the pool until all its workers sleep, up to 20 s (they spin only briefly after a job). */
static void wait_workers_asleep(int workers, const char *when) {
    ha_pool_stats st = { 0 };
    for (int i = 0; i < 2000; i++) {
        ha_pool_get_stats(&st);
        if (st.workers_asleep == workers) return;
        nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
    }
    FAIL("%s: expected all %d workers asleep within 20 s of the last job, %d were", when, workers, st.workers_asleep);
}

/* Idle workers leave their cores (they sleep), and a sleeping pool wakes for the next job, again and again;
 * every job is computed whole. */
static void test_threads_idle_workers_sleep_and_wake_for_the_next_job(void) {
    for (int nt = 2; nt <= 3; nt++) {
        CHECK_OK(ha_set_num_threads(nt));
        check_covers(1000, "first job");
        for (int round = 0; round < 4; round++) {
            wait_workers_asleep(nt - 1, "after a job");
            check_covers(1000, "a job for sleeping workers");
            check_covers(77, "the job right after");
        }
    }
    CHECK_OK(ha_set_num_threads(1));
}

typedef struct stall_job {
    pthread_t caller;
    atomic_int worker_pieces; /* pieces a worker (not the caller) took */
    int *hits;                /* (n,) */
} stall_job;

/* The caller's pieces take a moment, so that a worker surely takes one; a worker's first piece holds it up
 * far longer than the whole job would take the caller alone (a thread descheduled by another process). */
static void stall_range(void *ctx, int64_t b, int64_t e) {
    stall_job *j = ctx;
    if (pthread_equal(pthread_self(), j->caller))
        nanosleep(&(struct timespec){ .tv_nsec = 1000 * 1000 }, NULL);
    else if (atomic_fetch_add(&j->worker_pieces, 1) == 0)
        nanosleep(&(struct timespec){ .tv_nsec = 200 * 1000 * 1000 }, NULL);
    for (int64_t i = b; i < e; i++) j->hits[i]++;
}

/* A worker that holds up a job (here: sleeps in its piece) makes the caller stop handing jobs to the pool for
 * a while; the stalled job, and the ones after, are still computed whole, in the same pieces. */
static void test_threads_a_stalled_worker_turns_jobs_to_the_caller(void) {
    CHECK_OK(ha_set_num_threads(2));
    ha_pool_stats before, after;
    ha_pool_get_stats(&before);
    const int64_t n = 64;
    int stalled = 0;
    for (int tries = 0; tries < 50 && !stalled; tries++) {
        stall_job j = { .caller = pthread_self(), .hits = xcalloc((size_t)n, sizeof(int)) };
        atomic_init(&j.worker_pieces, 0);
        ha_parallel_for(stall_range, &j, n);
        for (int64_t i = 0; i < n; i++)
            CHECK(j.hits[i] == 1, "try %d: index %lld expected once, got %d times", tries, (long long)i, j.hits[i]);
        stalled = atomic_load(&j.worker_pieces) > 0;
        free(j.hits);
    }
    CHECK(stalled, "in 50 jobs of 16 pieces taking 1 ms each on the caller, no worker took a piece");
    ha_pool_get_stats(&after);
    CHECK(after.backoffs > before.backoffs, "a worker held a job up 200 ms, expected the caller to stop offering jobs "
          "to the pool (backoffs %lld -> %lld)", (long long)before.backoffs, (long long)after.backoffs);
    CHECK(after.caller_sleeps > before.caller_sleeps, "expected the caller to sleep rather than spin through a 200 ms "
          "wait (caller sleeps %lld -> %lld)", (long long)before.caller_sleeps, (long long)after.caller_sleeps);
    test_threads_parallel_for_covers_range(); /* the pieces' contract holds whether or not jobs go to the pool */
    CHECK_OK(ha_set_num_threads(1));
}

/* A child forked while the pool's workers sleep (its copy of the pool has no threads) starts a pool of its own. */
static void test_threads_forked_child_runs_jobs(void) {
    CHECK_OK(ha_set_num_threads(2));
    check_covers(1000, "parent, before the fork");
    wait_workers_asleep(1, "parent, before the fork");
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
        cover_job j = { .n = 1000, .hits = calloc(1001, sizeof(int)) };
        atomic_init(&j.calls, 0);
        ha_parallel_for(cover_range, &j, 1000);
        int ok = 1;
        for (int i = 0; i < 1000; i++) ok &= j.hits[i] == 1;
        free(j.hits);
        _exit(ok && ha_get_num_threads() == 2 ? 0 : 3);
    }
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 6000 && got == 0; i++) { /* 60 s: a hang is a failure */
        got = waitpid(pid, &status, WNOHANG);
        if (got == 0) nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        FAIL("the forked child hung for 60 s running a job");
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child expected exit 0 (every index once, 2 threads), "
          "got status %d", status);
    check_covers(1000, "parent, after the fork");
    CHECK_OK(ha_set_num_threads(1));
}

/* Writes text to dir/name (dir/sub made if need be). */
static void write_text(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    mkdir(path, 0700);
    *slash = '/';
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "could not write %s", path);
    fputs(text, f);
    fclose(f);
}

static void remove_text(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    remove(path);
}

/* The default thread count is the affinity mask's CPUs lowered to the cgroup quota (v2 cpu.max, v1 cfs files),
 * read under HA_CGROUP_ROOT. */
static void test_cpus_cgroup_quota_lowers_the_default(void) {
    char root[] = "/tmp/ha_cgroup_XXXXXX";
    CHECK(mkdtemp(root) != NULL, "mkdtemp failed");
    cpu_set_t set;
    CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity failed");
    const int affinity = CPU_COUNT(&set);
    setenv("HA_CGROUP_ROOT", root, 1);
    CHECK(ha_cgroup_cpu_limit() == 0, "no cgroup files: expected no limit (0), got %d", ha_cgroup_cpu_limit());
    CHECK(ha_cpus_available() == affinity, "no cgroup files: expected the %d CPUs of the affinity mask, got %d",
          affinity, ha_cpus_available());
    const struct { const char *file, *text; int want; } v2[] = {
        { "cpu.max", "max 100000\n", 0 },
        { "cpu.max", "100000 100000\n", 1 },
        { "cpu.max", "50000 100000\n", 1 },   /* half a CPU's time: still one thread */
        { "cpu.max", "150000 100000\n", 2 },  /* rounded up */
        { "cpu.max", "400000 100000\n", 4 },
        { "cpu.max", "garbage\n", 0 },
    };
    for (size_t i = 0; i < COUNT(v2); i++) {
        write_text(root, v2[i].file, v2[i].text);
        const int want_cpus = v2[i].want && v2[i].want < affinity ? v2[i].want : affinity;
        CHECK(ha_cgroup_cpu_limit() == v2[i].want, "cpu.max \"%s\": expected a limit of %d CPUs, got %d", v2[i].text,
              v2[i].want, ha_cgroup_cpu_limit());
        CHECK(ha_cpus_available() == want_cpus, "cpu.max \"%s\" with %d CPUs in the affinity mask: expected %d, got %d",
              v2[i].text, affinity, want_cpus, ha_cpus_available());
    }
    remove_text(root, "cpu.max");
    write_text(root, "cpu/cpu.cfs_period_us", "100000\n");
    write_text(root, "cpu/cpu.cfs_quota_us", "-1\n");
    CHECK(ha_cgroup_cpu_limit() == 0, "v1 quota -1: expected no limit, got %d", ha_cgroup_cpu_limit());
    write_text(root, "cpu/cpu.cfs_quota_us", "100000\n");
    /* The v1 files are read only where /proc/self/cgroup names a cpu controller (or cannot be read). */
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[4096];
    int v1 = f == NULL;
    while (f && fgets(line, sizeof line, f)) v1 |= strstr(line, ":cpu:") != NULL || strstr(line, ":cpu,") != NULL;
    if (f) fclose(f);
    if (v1) CHECK(ha_cgroup_cpu_limit() == 1, "v1 quota 100000 / period 100000: expected 1 CPU, got %d", ha_cgroup_cpu_limit());
    write_text(root, "cpu.max", "300000 100000\n"); /* both: the lesser binds */
    CHECK(ha_cgroup_cpu_limit() == (v1 ? 1 : 3), "v2 3 CPUs and v1 1 CPU: expected %d, got %d", v1 ? 1 : 3, ha_cgroup_cpu_limit());
    remove_text(root, "cpu.max");
    remove_text(root, "cpu/cpu.cfs_quota_us");
    remove_text(root, "cpu/cpu.cfs_period_us");
    remove_text(root, "cpu");
    remove(root);
    unsetenv("HA_CGROUP_ROOT");
}

/* ---- 9. bandwidth probe ------------------------------------------------------------------------------ */

static void test_membw_measures_and_rejects(void) {
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
        CHECK(isfinite(one) && one > 1e7 && one < 1e13, "1 thread, int8=%d: expected a plausible multiply-add rate, "
              "got %g/s", int8, one);
    }
    CHECK_STATUS(ha_measure_mac_rate(0, 0, &rate), HA_ERR_INVALID);
    CHECK_MSG("repeats");
    CHECK_STATUS(ha_measure_mac_rate(1, 0, NULL), HA_ERR_INVALID);
}

/* ---- the list ------------------------------------------------------------------------------------------ */

typedef struct test_case { const char *name; void (*fn)(void); } test_case;

#define T(name) { #name, test_##name }
/* ---- int8 and int4 quantization ----------------------------------------------------------------------- */

/* Group size, block bytes and element accessor of an integer dtype. */
static int64_t int_group(ha_dtype dt) { return dt == HA_Q8 ? HA_Q8_GROUP : HA_Q4_GROUP; }
static size_t int_block(ha_dtype dt) { return dt == HA_Q8 ? HA_Q8_BLOCK_BYTES : HA_Q4_BLOCK_BYTES; }
static float int_at(ha_dtype dt, const void *row, int64_t j) { return dt == HA_Q8 ? ha_q8_at(row, j) : ha_q4_at(row, j); }

static void test_quantize_error_within_half_a_step(void) {
    rng r = { 77 };
    const int64_t shapes[][2] = { { 3, 64 }, { 2, 100 }, { 5, 1 }, { 1, 257 } };
    for (int dt = HA_Q8; dt <= HA_Q4; dt++)
        for (size_t s = 0; s < COUNT(shapes); s++) {
            const int64_t rows = shapes[s][0], cols = shapes[s][1], group = int_group((ha_dtype)dt);
            float *w = make_floats((size_t)(rows * cols), &r, -3.0, 3.0);
            if (cols >= 64)
                for (int64_t j = 0; j < 64; j++) w[j] = 0.0f; /* an all-zero group: scale 0, every q 0 */
            ha_matrix src = { .data = w, .dtype = HA_F32, .rows = rows, .cols = cols, .nbytes = (size_t)(rows * cols) * 4 };
            size_t nb = ha_matrix_bytes((ha_dtype)dt, rows, cols);
            char *q = xmalloc(nb);
            CHECK_OK(ha_quantize(&src, (ha_dtype)dt, q, nb));
            for (int64_t i = 0; i < rows; i++) {
                const char *row = q + (size_t)i * ha_row_bytes((ha_dtype)dt, cols);
                for (int64_t j = 0; j < cols; j++) {
                    float scale;
                    memcpy(&scale, row + (size_t)(j / group) * int_block((ha_dtype)dt), 4);
                    double err = fabs((double)int_at((ha_dtype)dt, row, j) - (double)w[i * cols + j]);
                    CHECK(err <= 0.5 * scale * (1 + 1e-6) + 1e-12, "%s (%lld, %lld) of a (%lld, %lld) matrix: expected |error| "
                          "<= scale/2 = %g, got %g", dname((ha_dtype)dt), (long long)i, (long long)j, (long long)rows,
                          (long long)cols, 0.5 * scale, err);
                }
                for (int64_t j = cols; j % group; j++) /* the padding of the last group */
                    CHECK(int_at((ha_dtype)dt, row, j) == 0.0f, "%s padding element %lld expected 0, got %g", dname((ha_dtype)dt),
                          (long long)j, (double)int_at((ha_dtype)dt, row, j));
            }
            if (cols >= 64)
                CHECK(int_at((ha_dtype)dt, q, 0) == 0.0f && int_at((ha_dtype)dt, q, 63) == 0.0f, "an all-zero group expected to stay zero");
            free(q);
            free(w);
        }
}

/* Every variant's quant_q8 and quant_q4 give bitwise the reference's block (and flag), on groups built to hit
 * their corners: products exactly halfway between integers (the factor 1 or 1/2), zeros and -0, subnormals,
 * a maximum below 127 / FLT_MAX (subnormal or not: the factor overflows to inf), magnitudes from 1e-30 to
 * 1e30, partial groups, NaN and inf. */
static void test_quantize_variants_match_the_reference(void) {
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
                case 6: x[i] = (float)(2 * u - 1); if (i == (int64_t)(c % len)) x[i] = (c & 8) ? NAN : -INFINITY; break;
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
                    CHECK(memcmp(got, want, nb) == 0, "%s quant %s case %d (kind %d, len %lld): block differs from the "
                          "reference", kn[v], dname((ha_dtype)dt), c, kind, (long long)len);
            }
            CHECK(kind != 6 || !want_ok, "case %d: a group with NaN or inf expected to be flagged", c);
        }
    }
}

/* Every variant's to_f32 of integer rows (OpenBLAS's widening, a tied embedding's row) gives bitwise
 * ha_q8_at / ha_q4_at, on raw random blocks (int8 -128, int4 nibble 0, any scale) of every length up to
 * three groups, and writes nothing past n. */
static void test_kernels_to_f32_integer_rows_exact(void) {
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
                CHECK(fbits(out[n]) == SENTINEL, "%s to_f32 %s n=%lld wrote past n", kn[v], dname((ha_dtype)dt), (long long)n);
            }
            free(row);
            free(out);
        }
}

static void test_quantize_rejects_bad_input(void) {
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
    CHECK(ha_q4_at(q, 7) == 8.0f && ha_q4_at(q, 0) == 8.0f / 7.0f, "int4: the largest weight expected exact (8), got %g; "
          "1 expected 8/7, got %g", (double)ha_q4_at(q, 7), (double)ha_q4_at(q, 0));
}

/* A shape whose byte count does not fit in size_t counts 0 bytes (it wrapped: (2^44, 2^20) float32 counted 0),
 * and ha_pack and ha_quantize refuse it whatever buffers they are given (they took a 0-byte source and
 * destination for it and wrote far past them; found by tests/fuzz/c). */
static void test_convert_rejects_shapes_too_large_to_address(void) {
    const int64_t big_rows = (int64_t)1 << 44, big_cols = (int64_t)1 << 20;
    CHECK(ha_matrix_bytes(HA_F32, big_rows, big_cols) == 0 && ha_matrix_bytes(HA_F32P, big_rows, big_cols) == 0 &&
          ha_matrix_bytes(HA_Q8, (int64_t)1 << 60, 64) == 0 && ha_matrix_bytes(HA_BF16, 1, INT64_MAX) == 0,
          "sizes past size_t expected to count 0 bytes, got %zu, %zu, %zu, %zu", ha_matrix_bytes(HA_F32, big_rows, big_cols),
          ha_matrix_bytes(HA_F32P, big_rows, big_cols), ha_matrix_bytes(HA_Q8, (int64_t)1 << 60, 64),
          ha_matrix_bytes(HA_BF16, 1, INT64_MAX));
    CHECK(ha_matrix_bytes(HA_F32, (int64_t)1 << 40, 4) == (size_t)1 << 44, "a (2^40, 4) float32 matrix expected 2^44 bytes");
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
static void test_quant_act_variants_match_the_reference(void) {
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
            case 5: x[i] = (float)(2 * u - 1); if (i == c % n) x[i] = (c & 8) ? NAN : -INFINITY; break;
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
            CHECK(memcmp(got, want, (size_t)width * sizeof *got) == 0 && (fbits(got_s) == fbits(want_s) || (isnan(got_s) && isnan(want_s))),
                  "%s quant_act case %d (kind %d, n %lld): row or scale (%g, reference %g) differs from the reference", kn[v], c,
                  kind, (long long)n, (double)got_s, (double)want_s);
        }
        CHECK(kind != 5 || isnan(want_s), "case %d: a row with NaN or inf expected a NaN scale, got %g", c, (double)want_s);
        for (int64_t i = n; i < width; i++) CHECK(want[i] == 0, "case %d: padding element %lld expected 0, got %d", c, (long long)i, want[i]);
        if (isnan(want_s)) continue;
        double amax = 0.0;
        for (int64_t i = 0; i < n; i++) amax = fmax(amax, fabs((double)x[i]));
        for (int64_t i = 0; i < n && kind != 3; i++)
            CHECK(fabs((double)want[i] * want_s - x[i]) <= 0.505 * amax / 32767.0, /* half a step, and the factor's rounding (32767 * 2^-23) */
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
static void test_kernels_matmul_int_variants_bitwise(void) {
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
                    float *want = xcalloc((size_t)(T * rows), sizeof(float)), *got = xcalloc((size_t)(T * rows), sizeof(float));
                    run_matmul(&ha_kernels_scalar, (ha_dtype)dt, W, n, r0, r1, X, T, want, rows);
                    for (int v = 1; v < nk; v++) {
                        run_matmul(ks[v], (ha_dtype)dt, W, n, r0, r1, X, T, got, rows);
                        const int64_t nan_rows = extreme && T > 1 ? 1 : 0;
                        for (int64_t c = r0; c < r1 && nan_rows; c++)
                            CHECK(isnan(want[c]) && isnan(got[c]), "%s matmul %s n=%lld: a token holding NaN expected NaN "
                                  "outputs, got %g (scalar %g)", kn[v], dname((ha_dtype)dt), (long long)n, (double)got[c],
                                  (double)want[c]);
                        CHECK_SAME_FLOATS(want + nan_rows * rows, got + nan_rows * rows, (size_t)((T - nan_rows) * rows),
                                          "%s matmul %s n=%lld T=%lld%s vs scalar", kn[v], dname((ha_dtype)dt), (long long)n,
                                          (long long)T, extreme ? " (extremes)" : "");
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
static void test_kernels_matmul_panels_bitwise(void) {
    const ha_kernels *ks[NVARIANTS];
    const char *kn[NVARIANTS];
    int nk = kernel_variants(ks, kn);
    rng r = { 21 };
    static const int64_t PT[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 20, 24, 25 };
    static const int64_t PR[][3] = { /* rows, r0, r1 */ { 1, 0, 1 }, { 16, 0, 16 }, { 17, 0, 17 }, { 40, 3, 37 },
                                     { 70, 16, 70 }, { 100, 5, 99 }, { 300, 7, 290 } };
    for (int dt = HA_F32P; dt <= HA_F16P; dt++)
        for (size_t a = 0; a < COUNT(KN); a++)
            for (size_t b = 0; b < COUNT(PR); b++) {
                const int64_t n = KN[a], rows = PR[b][0], r0 = PR[b][1], r1 = PR[b][2], ldy = rows + 2;
                void *W = make_weights((ha_dtype)dt, rows, n, &r, 1.0, 1, NULL);
                float *X = make_floats((size_t)(25 * n), &r, -1.0, 1.0);
                float *want = xmalloc((size_t)(25 * ldy) * sizeof(float)), *got = xmalloc((size_t)(25 * ldy) * sizeof(float));
                for (int v = 0; v < nk; v++) { /* T = 0 and an empty row range: nothing to do, nothing written */
                    for (int64_t i = 0; i < 25 * ldy; i++) got[i] = bits_f(SENTINEL);
                    ks[v]->matmul[dt](W, n, r0, r1, X, 0, got, ldy);
                    ks[v]->matmul[dt](W, n, r1 - 1, r1 - 1, X, 5, got, ldy);
                    for (int64_t i = 0; i < 25 * ldy; i++)
                        CHECK(fbits(got[i]) == SENTINEL, "%s %s: T = 0 or an empty range wrote Y[%lld]", kn[v], dname((ha_dtype)dt),
                              (long long)i);
                }
                for (size_t c = 0; c < COUNT(PT); c++) {
                    const int64_t T = PT[c];
                    for (int64_t i = 0; i < T * ldy; i++) want[i] = got[i] = bits_f(SENTINEL);
                    ha_kernels_scalar.matmul[dt](W, n, r0, r1, X, T, want, ldy);
                    for (int64_t t = 0; t < T; t++) /* the reference's own contract, spelled out */
                        for (int64_t row = r0; row < r1; row++) {
                            float sum = 0.0f;
                            for (int64_t k = 0; k < n; k++) sum = fmaf(ha_panel_at(W, (ha_dtype)dt, n, row, k), X[t * n + k], sum);
                            CHECK(fbits(want[t * ldy + row]) == fbits(sum), "scalar %s n=%lld: Y[%lld, %lld] expected the fmaf chain's %.9g, got %.9g",
                                  dname((ha_dtype)dt), (long long)n, (long long)t, (long long)row, (double)sum,
                                  (double)want[t * ldy + row]);
                        }
                    for (int v = 1; v < nk; v++) {
                        ks[v]->matmul[dt](W, n, r0, r1, X, T, got, ldy);
                        CHECK_SAME_FLOATS(want, got, (size_t)(T * ldy), "%s %s n=%lld T=%lld rows [%lld, %lld) of %lld against scalar",
                                          kn[v], dname((ha_dtype)dt), (long long)n, (long long)T, (long long)r0, (long long)r1,
                                          (long long)rows);
                    }
                }
                free(W);
                free(X);
                free(want);
                free(got);
            }
}

/* The kernels' software prefetch covers its region [base, base + end) in whole lines, shared out over the
 * steps, and never goes past it, also when end is not whole lines (it once wrapped around there and went on
 * prefetching a share beyond the region at every later step). */
static void test_prefetcher_stays_in_its_region(void) {
    static const size_t ENDS[] = { 0, 1, 63, 64, 65, 100, 4096, 4100, 65536 + 36 };
    static const int64_t STEPS[] = { 0, 1, 3, 7, 64 };
    for (size_t a = 0; a < COUNT(ENDS); a++)
        for (size_t b = 0; b < COUNT(STEPS); b++) {
            const size_t end = ENDS[a], whole = (end + 63) / 64 * 64;
            ha_prefetcher pf = ha_prefetcher_over((const char *)&pf, end, STEPS[b]); /* a valid base; never read */
            const int64_t steps = STEPS[b] < 1 ? 1 : STEPS[b];
            for (int64_t i = 0; i < steps + 5; i++) {
                ha_prefetch_step(&pf);
                CHECK(pf.off <= whole, "region of %zu bytes, %lld steps: after step %lld prefetched %zu bytes, past its "
                      "%zu in whole lines", end, (long long)STEPS[b], (long long)i, pf.off, whole);
                if (i == steps - 1)
                    CHECK(pf.off == whole, "region of %zu bytes: after all %lld steps expected %zu bytes prefetched, got %zu",
                          end, (long long)steps, whole, pf.off);
            }
        }
    ha_prefetch_step(NULL); /* no prefetcher: nothing to do */
}

/* panel_to_f32: every bfloat16 and float16 bit pattern (and random float32 bits) in panels, exactly. */
static void test_kernels_panel_to_f32_exact(void) {
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
                        CHECK(fbits(y) == SENTINEL, "%s panel_to_f32 %s wrote column %lld past its 16 rows", kn[v], dname((ha_dtype)dt),
                              (long long)k);
                        continue;
                    }
                    const float want = ha_panel_at(bits, (ha_dtype)dt, n, i, k);
                    CHECK(fbits(y) == fbits(want) || (isnan(want) && isnan(y) && signbit(want) == signbit(y)),
                          "%s panel_to_f32 %s: row %lld column %lld expected 0x%08x, got 0x%08x", kn[v], dname((ha_dtype)dt),
                          (long long)i, (long long)k, fbits(want), fbits(y));
                }
        }
    }
    free(bits);
    free(out);
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
static void test_interrupt_stops_append_and_keeps_the_cache(void) {
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
        CHECK(cp.foreign == 0, "the poll expected on the calling thread only; %d calls came from pool workers", cp.foreign);
        if (st == HA_OK) {
            ha_set_interrupt(NULL);
            ha_llama_context_free(c);
            break;
        }
        CHECK(st == HA_ERR_INTERRUPTED, "poll firing at call %lld: expected HA_ERR_INTERRUPTED, got %s", (long long)fire,
              status_name(st));
        CHECK_MSG("interrupted");
        CHECK(cp.calls == fire + 1, "after asking to stop, the poll expected no more calls: %lld calls for fire=%lld",
              (long long)cp.calls, (long long)fire);
        CHECK(LEN(c, 0) == 5, "an interrupted append expected to leave length 5, got %lld", (long long)LEN(c, 0));
        CHECK_STATUS(append_seq(c, 0, 1, more, got), HA_ERR_INTERRUPTED); /* still stopped until set again */
        ha_set_interrupt(NULL);
        CHECK_OK(append_seq(c, 0, 80, more, got));
        CHECK_SAME_FLOATS(want, got, 80 * TV, "append after an interrupt at poll %lld vs a cache that never saw it", (long long)fire);
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
static void test_interrupt_stops_generation(void) {
    CHECK_OK(ha_set_num_threads(2));
    tiny *target = tiny_build(HA_F32P, 1, 0, 0, 72), *draft = tiny_build(HA_BF16, 0, 0, 0, 73);
    const int64_t N = 10;
    ha_assist_params ap = { .gen = gen_params(N, greedy_params()), .num_assistant_tokens = 3, .schedule = HA_SCHEDULE_CONSTANT,
                            .acceptance = HA_ACCEPT_REJECTION, .prompt_lookup_num_tokens = 3, .max_matching_ngram_size = 2 };
    int32_t want[2 * 10], got[2 * 10];
    int64_t steps;
    counting_poll cp;
    ha_interrupt it;
    for (int mode = 0; mode < 3; mode++) { /* plain, assisted by a draft, prompt lookup */
        int64_t polls = -1;
        for (int64_t fire = -1;; fire++) {
            ha_llama_context *tc = ctx_new(target->m, 2, 16), *dc = ctx_new(draft->m, 2, 16);
            set_poll(&cp, &it, fire);
            ha_status st = mode == 0 ? ha_generate(LM(tc), &ap.gen, GPROMPT, GW, GSTART, fire < 0 ? want : got, NULL, &steps)
                                     : ha_generate_assisted(LM(tc), mode == 1 ? LM(dc) : NULL, &ap, GPROMPT, GW, GSTART,
                                                            fire < 0 ? want : got, NULL, &steps, NULL);
            ha_set_interrupt(NULL);
            ha_llama_context_free(tc);
            ha_llama_context_free(dc);
            CHECK(cp.foreign == 0, "mode %d: the poll expected on the calling thread only; %d foreign calls", mode, cp.foreign);
            if (fire < 0) { /* the reference run: counts the polls */
                CHECK(st == HA_OK, "mode %d: a poll that never asks expected HA_OK, got %s", mode, status_name(st));
                polls = cp.calls;
                CHECK(polls > N, "mode %d: expected more than %lld polls over %lld tokens, got %lld", mode, (long long)N,
                      (long long)N, (long long)polls);
                continue;
            }
            if (st == HA_OK) {
                CHECK(fire == polls, "mode %d: expected every one of the %lld polls to stop the generation, but firing at "
                      "call %lld did not", mode, (long long)polls, (long long)fire);
                CHECK(memcmp(want, got, sizeof want) == 0, "mode %d: tokens differ once the poll no longer fires", mode);
                break;
            }
            CHECK(st == HA_ERR_INTERRUPTED, "mode %d, poll firing at call %lld: expected HA_ERR_INTERRUPTED, got %s", mode,
                  (long long)fire, status_name(st));
            CHECK(cp.calls == fire + 1, "mode %d: the poll expected no calls after asking to stop (%lld for fire=%lld)", mode,
                  (long long)cp.calls, (long long)fire);
        }
    }
    tiny_free(target);
    tiny_free(draft);
}

/* max_time: no step starts once it has passed; the tokens so far come back with HA_OK (a prefix of the full
 * output, each row with at least its first token); negative or NaN is refused. */
static void test_generate_max_time_returns_the_tokens_so_far(void) {
    one_thread();
    tiny *target = tiny_build(HA_F32, 1, 0, 0, 74), *draft = tiny_build(HA_F16, 0, 0, 0, 75);
    const int64_t N = 10;
    ha_assist_params ap = { .gen = gen_params(N, greedy_params()), .num_assistant_tokens = 2, .schedule = HA_SCHEDULE_CONSTANT,
                            .acceptance = HA_ACCEPT_REJECTION, .prompt_lookup_num_tokens = 3, .max_matching_ngram_size = 2 };
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
        CHECK(steps >= 1 && steps <= (mode == 0 ? 1 : 3), "mode %d: max_time passed at once: expected 1..%d steps, got %lld",
              mode, mode == 0 ? 1 : 3, (long long)steps);
        for (int b = 0; b < 2; b++) {
            CHECK(got[b * N] == full[b * N], "mode %d row %d: the first token expected %d, got %d", mode, b, full[b * N], got[b * N]);
            int64_t j = 0;
            while (j < N && got[b * N + j] == full[b * N + j]) j++;
            for (; j < N; j++)
                CHECK(got[b * N + j] == -7, "mode %d row %d: after the prefix expected padding at %lld, got %d", mode, b,
                      (long long)j, got[b * N + j]);
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

/* ---- BPE merges ------------------------------------------------------------------------------------------- */

/* The merge rule written the slow way: find the lowest-rank adjacent pair (leftmost on ties), merge it, repeat. */
static int64_t bpe_naive(const int32_t *merges, int64_t n_merges, int32_t *sym, int64_t m) {
    for (;;) {
        int64_t best = -1, best_rank = INT64_MAX;
        int32_t result = -1;
        for (int64_t i = 0; i + 1 < m; i++) {
            int64_t rank = -1;
            for (int64_t r = 0; r < n_merges; r++) /* the last row of a pair wins */
                if (merges[3 * r] == sym[i] && merges[3 * r + 1] == sym[i + 1]) rank = r;
            if (rank >= 0 && rank < best_rank) {
                best_rank = rank;
                best = i;
                result = merges[3 * rank + 2];
            }
        }
        if (best < 0) return m;
        sym[best] = result;
        memmove(sym + best + 1, sym + best + 2, (size_t)(m - best - 2) * sizeof *sym);
        m--;
    }
}

static void test_bpe_merges_lowest_rank_leftmost_first(void) {
    /* ids: a=0 b=1 c=2 ab=3 bc=4 abc=5 aa=6 aaa=7 */
    const uint32_t chars[] = { 'a', 'b', 'c' };
    const int32_t char_ids[] = { 0, 1, 2 };
    const int32_t merges[] = { 1, 2, 4, /* b c  (rank 0) */ 0, 1, 3, /* a b */ 0, 4, 5, /* a bc */ 0, 0, 6, /* a a */
                               6, 0, 7 /* aa a */ };
    ha_bpe *b = NULL;
    CHECK(ha_bpe_create(merges, 5, chars, char_ids, 3, NULL, -1, 0, 8, &b) == HA_OK, "%s", ha_last_error());
    const uint32_t abc[] = { 'a', 'b', 'c' }, aaaa[] = { 'a', 'a', 'a', 'a' }, aaa[] = { 'a', 'a', 'a' };
    int32_t ids[64];
    int64_t n = -1;
    CHECK(ha_bpe_encode(b, abc, 3, ids, 12, &n) == HA_OK && n == 1 && ids[0] == 5, "abc -> bc first, then a+bc");
    CHECK(ha_bpe_encode(b, aaaa, 4, ids, 16, &n) == HA_OK && n == 2 && ids[0] == 6 && ids[1] == 6,
          "aaaa -> aa aa (leftmost first on ties), got %lld ids", (long long)n);
    CHECK(ha_bpe_encode(b, aaa, 3, ids, 12, &n) == HA_OK && n == 1 && ids[0] == 7, "aaa -> aa a -> aaa");
    CHECK(ha_bpe_encode(b, aaa, 0, ids, 0, &n) == HA_OK && n == 0, "an empty word has no ids");
    CHECK(ha_bpe_encode(b, aaa, 3, ids, 11, &n) == HA_ERR_INVALID, "cap below 4 n is refused");
    const uint32_t bad[] = { 'a', 0x110000 }, unknown[] = { 'a', 'z' };
    CHECK(ha_bpe_encode(b, bad, 2, ids, 8, &n) == HA_ERR_INVALID, "a value above U+10FFFF is refused");
    CHECK(ha_bpe_encode(b, unknown, 2, ids, 8, &n) == HA_ERR_INVALID && strstr(ha_last_error(), "U+007A"),
          "no unk and no byte fallback: the unknown character is named (%s)", ha_last_error());
    ha_bpe_free(b);
}

static void test_bpe_byte_fallback_and_fused_unk(void) {
    const uint32_t chars[] = { 'a' };
    const int32_t char_ids[] = { 1 };
    int32_t byte_ids[256];
    for (int i = 0; i < 256; i++) byte_ids[i] = -1;
    byte_ids[0xC3] = 2; /* "é" is C3 A9: both bytes known */
    byte_ids[0xA9] = 3;
    const int32_t merges[] = { 2, 3, 4 }; /* <0xC3> <0xA9> merge like any symbols */
    ha_bpe *b = NULL;
    CHECK(ha_bpe_create(merges, 1, chars, char_ids, 1, byte_ids, 0, 1, 5, &b) == HA_OK, "%s", ha_last_error());
    const uint32_t word[] = { 'a', 0xE9, 0x4E2D, 0x6587, 'a', 0x4E2D };
    int32_t ids[24];
    int64_t n = -1;
    CHECK(ha_bpe_encode(b, word, 6, ids, 24, &n) == HA_OK, "%s", ha_last_error());
    const int32_t want[] = { 1, 4, 0, 1, 0 }; /* a, é merged, two unknown CJK fused into one unk, a, unk */
    CHECK(n == 5 && memcmp(ids, want, sizeof want) == 0, "byte fallback then fused unk: got %lld ids", (long long)n);
    ha_bpe_free(b);
    CHECK(ha_bpe_create(merges, 1, chars, char_ids, 1, byte_ids, 0, 0, 5, &b) == HA_OK, "%s", ha_last_error());
    CHECK(ha_bpe_encode(b, word, 6, ids, 24, &n) == HA_OK && n == 6 && ids[2] == 0 && ids[3] == 0,
          "without fuse_unk each unknown character is its own unk");
    ha_bpe_free(b);
}

static void test_bpe_equals_naive_rule_on_random_merges(void) {
    /* 4 letters, random merges over every id made so far (duplicated pairs included), long random words. */
    rng s = { 12345 };
    enum { LETTERS = 4, MERGES = 60, VOCAB = LETTERS + MERGES };
    int32_t merges[3 * MERGES];
    for (int r = 0; r < MERGES; r++) {
        merges[3 * r] = (int32_t)(rng_next(&s) % (uint64_t)(LETTERS + r));
        merges[3 * r + 1] = (int32_t)(rng_next(&s) % (uint64_t)(LETTERS + r));
        merges[3 * r + 2] = LETTERS + r;
    }
    const uint32_t chars[LETTERS] = { 'a', 'b', 'c', 'd' };
    const int32_t char_ids[LETTERS] = { 0, 1, 2, 3 };
    ha_bpe *b = NULL;
    CHECK(ha_bpe_create(merges, MERGES, chars, char_ids, LETTERS, NULL, -1, 0, VOCAB, &b) == HA_OK, "%s",
          ha_last_error());
    for (int trial = 0; trial < 200; trial++) {
        int64_t len = 1 + (int64_t)(rng_next(&s) % 300);
        uint32_t word[300];
        int32_t got[1200], want[300];
        for (int64_t i = 0; i < len; i++) {
            word[i] = chars[rng_next(&s) % LETTERS];
            want[i] = (int32_t)(word[i] - 'a');
        }
        int64_t n = -1, m = bpe_naive(merges, MERGES, want, len);
        CHECK(ha_bpe_encode(b, word, len, got, 4 * len, &n) == HA_OK, "%s", ha_last_error());
        CHECK(n == m && memcmp(got, want, (size_t)m * sizeof *got) == 0, "trial %d (length %lld): %lld ids, naive "
              "%lld", trial, (long long)len, (long long)n, (long long)m);
    }
    ha_bpe_free(b);
}

static void test_bpe_create_rejects_bad_tables(void) {
    const uint32_t chars[] = { 'a' };
    const int32_t char_ids[] = { 0 }, bad_ids[] = { 9 };
    const int32_t merges[] = { 0, 0, 1 }, bad_merges[] = { 0, 0, 7 };
    int32_t byte_ids[256];
    for (int i = 0; i < 256; i++) byte_ids[i] = -2;
    ha_bpe *b = (ha_bpe *)&b;
    CHECK(ha_bpe_create(bad_merges, 1, chars, char_ids, 1, NULL, -1, 0, 2, &b) == HA_ERR_INVALID && !b,
          "a merge naming an id outside the vocabulary is refused and nothing is made");
    CHECK(ha_bpe_create(merges, 1, chars, bad_ids, 1, NULL, -1, 0, 2, &b) == HA_ERR_INVALID, "bad character id");
    CHECK(ha_bpe_create(merges, 1, chars, char_ids, 1, byte_ids, -1, 0, 2, &b) == HA_ERR_INVALID, "bad byte id");
    CHECK(ha_bpe_create(merges, 1, chars, char_ids, 1, NULL, 2, 0, 2, &b) == HA_ERR_INVALID, "unk outside");
    CHECK(ha_bpe_create(merges, -1, chars, char_ids, 1, NULL, -1, 0, 2, &b) == HA_ERR_INVALID, "negative count");
    CHECK(ha_bpe_create(NULL, 1, chars, char_ids, 1, NULL, -1, 0, 2, &b) == HA_ERR_INVALID, "NULL merges");
    CHECK(ha_bpe_create(merges, 1, chars, char_ids, 1, NULL, -1, 0, 2, NULL) == HA_ERR_INVALID, "NULL out");
    ha_bpe_free(NULL);
}

static const test_case TESTS[] = {
    T(kernels_matmul_matches_double),
    T(rng_bits_philox_and_variants_bitwise),
    T(quantize_error_within_half_a_step),
    T(quantize_variants_match_the_reference),
    T(quantize_rejects_bad_input),
    T(convert_rejects_shapes_too_large_to_address),
    T(kernels_to_f32_integer_rows_exact),
    T(quant_act_variants_match_the_reference),
    T(kernels_matmul_int_variants_bitwise),
    T(kernels_to_f32_exact),
    T(kernels_dot_axpy_scale_match_double),
    T(kernels_float_sums_bitwise_their_definition),
    T(kernels_attention_blocks_equal_dot_axpy),
    T(kernels_exp_bitwise_ha_expf),
    T(kernels_matmul_batch_invariant),
    T(kernels_w8a8_bitwise_across_variants),
    T(kernels_bf16x_bitwise_across_variants),
    T(bf16x_reference_is_the_instruction),
    T(kernels_matmul_panels_bitwise),
    T(kernels_panel_to_f32_exact),
    T(prefetcher_stays_in_its_region),
    T(kernels_select_by_name),
    T(model_chunk_equals_token_by_token),
    T(model_long_append_equals_token_by_token),
    T(model_blas_prefill_blocks),
    T(model_blas_prefill_wide_attention_output),
    T(model_crop_then_append_equals_fresh),
    T(model_interleaved_sequences_equal_alone),
    T(model_want_mask_packs_rows),
    T(model_thread_count_gives_identical_logits),
    T(model_kernel_variants_give_the_same_bits),
    T(model_sliding_window_limits_attention),
    T(model_ring_cache_keeps_the_window),
    T(model_cache_copy_kv_and_hidden_states),
    T(model_cache_copy_of_a_cropped_ring_is_a_clone),
    T(model_fused_projections_equal_split),
    T(kv_capacity_error_appends_nothing),
    T(streamed_buffers_hold_their_size_at_huge_page_boundaries),
    T(kv_invalid_token_appends_nothing),
    T(kv_bad_sequence_and_crop_rejected),
    T(kv_crop_to_zero_equals_fresh),
    T(create_rejects_bad_weights),
    T(create_rejects_bad_config),
    T(create_accepts_tied_and_counts_bytes),
    T(rng_uniform_properties),
    T(sampler_greedy_first_argmax),
    T(sampler_top_k_keeps_ties),
    T(sampler_shortcuts_equal_full_passes),
    T(sampler_top_p_transformers_semantics),
    T(sampler_repetition_penalty_and_temperature),
    T(sampler_frequencies_match_softmax),
    T(sampler_all_removed_returns_minus_one),
    T(sampler_create_rejects_bad_params),
    T(generate_greedy_equals_manual_loop),
    T(generate_sampled_equals_manual_loop),
    T(generate_eos_stops_row_and_pads),
    T(generate_max_new_tokens_exact),
    T(generate_min_new_tokens_suppresses_eos),
    T(generate_rejects_bad_input),
    T(assisted_equals_plain),
    T(assisted_equals_plain_across_a_rope_switch),
    T(longrope_an_append_takes_the_long_table_iff_it_ends_past_the_switch),
    T(generate_runs_a_row_again_whole_past_a_rope_switch),
    T(assisted_reads_start_once),
    T(assisted_cost_schedule_edges),
    T(assisted_rejection_runs_and_rejects_bad_args),
    T(assisted_drafting_ahead_changes_nothing),
    T(assisted_drafting_ahead_changes_nothing_across_a_rope_switch),
    T(threads_set_get_and_reject),
    T(threads_switching_keeps_results),
    T(threads_parallel_for_covers_range),
    T(threads_concurrent_callers),
    T(threads_idle_workers_sleep_and_wake_for_the_next_job),
    T(threads_a_stalled_worker_turns_jobs_to_the_caller),
    T(threads_forked_child_runs_jobs),
    T(cpus_cgroup_quota_lowers_the_default),
    T(membw_measures_and_rejects),
    T(interrupt_stops_append_and_keeps_the_cache),
    T(interrupt_stops_generation),
    T(generate_max_time_returns_the_tokens_so_far),
    T(bpe_merges_lowest_rank_leftmost_first),
    T(bpe_byte_fallback_and_fused_unk),
    T(bpe_equals_naive_rule_on_random_merges),
    T(bpe_create_rejects_bad_tables),
};
#undef T

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s --list | TEST_NAME\n", argv[0]);
        return 2;
    }
    if (strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < COUNT(TESTS); i++) printf("%s\n", TESTS[i].name);
        return 0;
    }
    for (size_t i = 0; i < COUNT(TESTS); i++)
        if (strcmp(argv[1], TESTS[i].name) == 0) {
            current_test = TESTS[i].name;
            TESTS[i].fn();
            printf("ok %s\n", TESTS[i].name);
            return 0;
        }
    fprintf(stderr, "unknown test '%s'; run with --list for the names\n", argv[1]);
    return 2;
}
