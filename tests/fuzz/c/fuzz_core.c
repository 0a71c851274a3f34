/* libFuzzer harness for the habana_assist C core's public entry points (csrc/ha.h), built with
 * -fsanitize=fuzzer,address,undefined by tests/fuzz/test_fuzz_core.py and tests/fuzz/c/run.sh.
 *
 * One input is decoded, byte by byte (missing bytes read as 0), into one of four scenarios:
 *   model:    an ha_llama_config (small dims, with zero, negative, huge and mismatched values mixed in), weight
 *             buffers whose dtype, shape, size, alignment or presence may disagree with it, ha_llama_create,
 *             ha_llama_context_create, then a run of appends, crops, ha_generate and ha_generate_assisted calls
 *             with fuzzed arguments;
 *   huge:     configs and contexts at or past the core's limits, whose weights are never read: creation must
 *             succeed or refuse, a context must be made or refused with HA_ERR_NOMEM, never crash;
 *   convert:  ha_quantize and ha_pack with fuzzed shapes, dtypes and buffer sizes;
 *   sampler:  ha_sampler_create/process/choose and ha_rng_uniform with fuzzed parameters and scores.
 * The harness is honest: every buffer it hands over is allocated with exactly the size it declares (or the size
 * the header's contract gives it), so AddressSanitizer catches any read or write beyond. Every call must succeed
 * or return a status other than HA_OK with a message; beyond that the harness checks what the contracts promise
 * (a failed append appends nothing, a crop keeps what it says, generated tokens are in the vocabulary, ...) and
 * aborts on a violation, which libFuzzer reports as a crash. HA_ERR_INTERNAL is a finding too. Allocations the
 * core attempts past MAX_ALLOC_MB fail (returning NULL) instead of being made, so huge-but-valid requests test
 * the HA_ERR_NOMEM paths without using the memory. */
#define _GNU_SOURCE
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../csrc/core/core.h"
#include "../../../csrc/kernels/kernels.h"

#define MAX_ALLOC_MB 256           /* the core's allocations above this fail (see __asan_default_options) */
#define BUF_CAP ((size_t)4 << 20)  /* the harness's own buffers: a declared size above this is not made */

const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "allocator_may_return_null=1:max_allocation_size_mb=256:detect_leaks=1:abort_on_error=0";
}
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "print_stacktrace=1:halt_on_error=1"; }

/* ---- the input ------------------------------------------------------------------------------------------ */

typedef struct fz {
    const uint8_t *p;
    size_t n;
} fz;

static uint8_t u8(fz *f) {
    if (!f->n) return 0;
    f->n--;
    return *f->p++;
}
static uint16_t u16(fz *f) { return (uint16_t)(u8(f) | (uint16_t)u8(f) << 8); }
static uint32_t u32(fz *f) { return (uint32_t)u16(f) | (uint32_t)u16(f) << 16; }
static uint64_t u64(fz *f) { return (uint64_t)u32(f) | (uint64_t)u32(f) << 32; }

#define COUNT(a) (sizeof(a) / sizeof *(a))

/* Mostly lo..hi; one byte in 10 or so picks an edge value instead: a field's own (`own`) or a generic one. */
static int64_t pick(fz *f, int64_t lo, int64_t hi, const int64_t *own, size_t n_own) {
    static const int64_t generic[] = { 0, -1, 1, INT32_MAX, (int64_t)INT32_MAX + 1, INT64_MAX, INT64_MIN, INT32_MIN };
    uint8_t b = u8(f);
    if (b < 230 || hi < lo) {
        uint64_t span = (uint64_t)(hi - lo) + 1;
        uint64_t v = b < 230 ? (uint64_t)b | (uint64_t)(b >= 200 ? u8(f) : 0) << 8 : 0;
        return hi < lo ? lo : lo + (int64_t)(v % span);
    }
    b -= 230;
    if (n_own && b % 2 == 0) return own[(b / 2) % n_own];
    return generic[(b / 2) % COUNT(generic)];
}
#define PICK(f, lo, hi, ...) pick((f), (lo), (hi), (const int64_t[]){ __VA_ARGS__ }, COUNT(((const int64_t[]){ __VA_ARGS__ })))

static float pick_float(fz *f, float lo, float hi) {
    static const float special[] = { 0.0f, -0.0f, NAN, INFINITY, -INFINITY, -1.0f, 1e-45f, FLT_MAX, 1.0f, 1e-30f, -FLT_MAX, 0.5f };
    uint8_t b = u8(f);
    if (b < 220) return lo + (hi - lo) * ((float)b / 219.0f);
    return special[(b - 220) % COUNT(special)];
}

/* ---- checks --------------------------------------------------------------------------------------------- */

static const char *current = "?";

__attribute__((noreturn, format(printf, 1, 2))) static void finding(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\nFUZZ FINDING in %s: ", current);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    abort();
}

/* Before each checked call: clear the message, so a failure that leaves none is seen. */
static void before(const char *what) {
    current = what;
    ha_fail(HA_OK, "%s", "");
}

/* A call's status: OK, or a failure with a message; never HA_ERR_INTERNAL (a bug by definition). */
static ha_status after(ha_status st) {
    if (st == HA_OK) return st;
    if ((int)st < 0 || (int)st > 31) finding("status %d is not an ha_status", (int)st);
    if (st == HA_ERR_INTERNAL) finding("HA_ERR_INTERNAL: %s", ha_last_error());
    if (!ha_last_error()[0]) finding("status %d with no message", (int)st);
    return st;
}
#define CALL(what, call) (before(what), after(call))

/* ---- buffers: every one freed at the end of the input ---------------------------------------------------- */

typedef struct arena {
    void *p[512];
    int n;
} arena;

static arena A;

/* n bytes (n may be 0: a real, empty allocation), kept for the end of the input. */
static void *keep(size_t n) {
    if (A.n == (int)COUNT(A.p)) return NULL;
    void *p = malloc(n ? n : 1);
    if (p) A.p[A.n++] = p;
    return p;
}

static void arena_free(void) {
    for (int i = 0; i < A.n; i++) free(A.p[i]);
    A.n = 0;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float rnd_float(uint64_t *s, float scale) { return scale * ((float)(splitmix(s) >> 40) / (float)(1 << 24) * 2.0f - 1.0f); }

static uint16_t to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)(u >> 16);
}

static uint16_t to_f16(float x) { /* moderate values only: sign, 5-bit exponent, 10-bit mantissa */
    if (x == 0.0f) return 0;
    uint16_t sign = x < 0 ? 0x8000 : 0;
    int e;
    float m = frexpf(fabsf(x), &e); /* x = m * 2^e, m in [0.5, 1) */
    int he = e - 1 + 15;
    if (he <= 0) return sign;
    if (he >= 31) return sign | 0x7bff;
    return (uint16_t)(sign | he << 10 | (uint16_t)((m * 2.0f - 1.0f) * 1024.0f));
}

/* Fills nbytes at p as dtype t: sane values of magnitude `scale`, or (wild) raw random bytes (NaN, inf and huge
 * scales included). */
static void fill(void *p, size_t nbytes, ha_dtype t, uint64_t seed, float scale, int wild) {
    uint8_t *b = p;
    uint64_t s = seed;
    if (wild || (unsigned)t >= HA_NDTYPES) {
        for (size_t i = 0; i < nbytes; i++) b[i] = (uint8_t)splitmix(&s);
        return;
    }
    switch (t) {
    case HA_F32: case HA_F32P:
        for (size_t i = 0; i + 4 <= nbytes; i += 4) {
            float x = rnd_float(&s, scale);
            memcpy(b + i, &x, 4);
        }
        break;
    case HA_BF16: case HA_BF16P: case HA_F16: case HA_F16P:
        for (size_t i = 0; i + 2 <= nbytes; i += 2) {
            float x = rnd_float(&s, scale);
            uint16_t h = t == HA_BF16 || t == HA_BF16P ? to_bf16(x) : to_f16(x);
            memcpy(b + i, &h, 2);
        }
        break;
    case HA_Q8: case HA_Q4: {
        const size_t blk = t == HA_Q8 ? HA_Q8_BLOCK_BYTES : HA_Q4_BLOCK_BYTES;
        for (size_t i = 0; i < nbytes; i++) b[i] = (uint8_t)splitmix(&s);
        for (size_t i = 0; i + blk <= nbytes; i += blk) {
            float sc = scale / (t == HA_Q8 ? 127.0f : 7.0f);
            memcpy(b + i, &sc, 4);
        }
        break;
    }
    default: break;
    }
}

/* ---- weights ---------------------------------------------------------------------------------------------- */

static int64_t inc(int64_t a) { return a < INT64_MAX ? a + 1 : a; }
static int64_t dec(int64_t a) { return a > INT64_MIN ? a - 1 : a; }

static int64_t mul_or(int64_t a, int64_t b, int64_t fallback) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? fallback : r;
}

static int64_t add_or(int64_t a, int64_t b, int64_t fallback) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? fallback : r;
}

typedef struct wctx {
    fz *f;
    ha_dtype dtype; /* the model's dtype; a matrix may differ */
    uint64_t seed;
    int wild;       /* fill weights with raw random bytes */
    int lying;      /* huge mode: declare the contract's size over a small buffer (never read: no forward runs) */
} wctx;

static void *lie_buffer(void) {
    static _Alignas(64) uint8_t small[64];
    return small;
}

/* A (rows, cols) matrix as the config asks, or one of a dozen ways wrong. */
static ha_matrix make_matrix(wctx *w, int64_t rows, int64_t cols, float scale) {
    ha_dtype t = w->dtype;
    int64_t nb_dtype = -1; /* size computed for another dtype */
    int64_t dn = 0;        /* nbytes delta */
    int null = 0, misalign = 0;
    uint8_t m = u8(w->f);
    if (m >= 200) {
        switch (m - 200) {
        case 0: rows = inc(rows); break;
        case 1: rows = dec(rows); break;
        case 2: cols = inc(cols); break;
        case 3: cols = dec(cols); break;
        case 4: rows = 0; break;
        case 5: t = (ha_dtype)(int8_t)u8(w->f); break;
        case 6: dn = 1; break;
        case 7: dn = -1; break;
        case 8: dn = INT64_MIN; break; /* nbytes 0 */
        case 9: null = 1; break;
        case 10: misalign = 1; break;
        case 11: misalign = 2; break;
        case 12: t = (ha_dtype)(u8(w->f) % HA_NDTYPES); break;
        case 13: nb_dtype = u8(w->f) % HA_NDTYPES; break;
        case 14: { int64_t x = rows; rows = cols; cols = x; break; }
        case 15: cols = 0; break;
        default: break;
        }
    }
    size_t nbytes = ha_matrix_bytes(nb_dtype >= 0 ? (ha_dtype)nb_dtype : t, rows, cols);
    if (dn == INT64_MIN) nbytes = 0;
    else nbytes += (size_t)dn;
    if (w->lying) {
        return (ha_matrix){ .data = null ? NULL : (const char *)lie_buffer() + misalign, .dtype = t, .rows = rows,
                            .cols = cols, .nbytes = nbytes };
    }
    if (nbytes > BUF_CAP) nbytes = 1; /* not made: declared as what it is */
    char *p = null ? NULL : keep(nbytes + (size_t)misalign);
    if (!p && !null) nbytes = 0;
    if (p) fill(p + misalign, nbytes, t, splitmix(&w->seed), scale, w->wild);
    return (ha_matrix){ .data = p ? p + misalign : NULL, .dtype = t, .rows = rows, .cols = cols, .nbytes = nbytes };
}

/* A float32 vector (n,) around center, or absent (optional), or wrong. */
static ha_vector make_vector(wctx *w, int64_t n, float center, float spread, int optional) {
    if (optional && u8(w->f) < 160) return (ha_vector){ NULL, 0 };
    uint8_t m = u8(w->f);
    int misalign = 0;
    if (m >= 220) {
        switch (m - 220) {
        case 0: return (ha_vector){ NULL, n };
        case 1: n = inc(n); break;
        case 2: n = dec(n); break;
        case 3: misalign = 1; break;
        case 4: n = 0; break;
        default: break;
        }
    }
    if (w->lying) return (ha_vector){ (const float *)((const char *)lie_buffer() + misalign), n };
    size_t bytes = n > 0 && (size_t)n <= BUF_CAP / 4 ? (size_t)n * 4 : 0;
    char *p = keep(bytes + (size_t)misalign);
    if (!p) return (ha_vector){ NULL, n };
    uint64_t s = splitmix(&w->seed);
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
        float x = center + rnd_float(&s, spread);
        if (w->wild && i == 0) x = NAN;
        memcpy(p + misalign + i, &x, 4);
    }
    if (bytes == 0 && n != 0) n = 0; /* not made: declared as what it is */
    return (ha_vector){ (const float *)(p + misalign), n };
}

static const ha_dtype DTYPES[] = { HA_F32, HA_BF16, HA_F16, HA_Q8, HA_Q4, HA_F32P, HA_BF16P, HA_F16P };

typedef struct model {
    ha_llama_config cfg;
    ha_llama *m;
} model;

/* Decodes a config and weights and calls ha_llama_create; m->m is NULL if it refused. huge: dims up to the
 * core's limits, weights declared but never made (lying). */
static void build_model(fz *f, model *out, int huge) {
    ha_llama_config c = { 0 };
    if (!huge) {
        c.vocab_size = PICK(f, 1, 64, 0, -1, INT32_MAX, (int64_t)INT32_MAX + 1);
        c.hidden_size = PICK(f, 1, 48, 0, -1, 1 << 20, (1 << 20) + 1);
        c.intermediate_size = PICK(f, 1, 64, 0, 1 << 22, (1 << 22) + 1);
        c.n_layers = PICK(f, 1, 3, 0, -1, 4097);
        c.n_heads = PICK(f, 1, 6, 0, -1, 4097);
    } else {
        c.vocab_size = PICK(f, 1, INT32_MAX, INT32_MAX, (int64_t)INT32_MAX + 1, 1 << 17);
        c.hidden_size = PICK(f, 1, 1 << 20, 1 << 20, 4096, (1 << 20) + 1);
        c.intermediate_size = PICK(f, 1, 1 << 22, 1 << 22, 11008, (1 << 22) + 1);
        c.n_layers = PICK(f, 1, 4096, 4096, 4097, 80);
        c.n_heads = PICK(f, 1, 4096, 4096, 4097, 64);
    }
    int64_t nh = c.n_heads > 0 && c.n_heads <= 4096 ? c.n_heads : 1;
    c.n_kv_heads = PICK(f, 1, nh, 0, -1, nh + 1, 2 * nh, 3);
    const int64_t half = huge ? PICK(f, 1, HA_MAX_HEAD_DIM / 2, HA_MAX_HEAD_DIM / 2, HA_MAX_HEAD_DIM / 2 + 1)
                              : PICK(f, 1, 8, 0, -1, HA_MAX_HEAD_DIM / 2, HA_MAX_HEAD_DIM / 2 + 1);
    c.head_dim = mul_or(half, 2, half);
    if (u8(f) >= 245 && c.head_dim < INT64_MAX) c.head_dim += 1; /* odd */
    const int64_t window = u8(f) < 128 ? 0 : PICK(f, 1, 8, -1, 0, INT64_MAX);
    c.norm_eps = u8(f) < 200 ? 1e-5f : pick_float(f, 1e-6f, 1e-1f);
    /* the family switches: norm kind, activation, gating, scales and caps (out-of-range codes mixed in) */
    const uint8_t fam = u8(f);
    c.norm = (ha_norm)(fam % 4);      /* 3: unknown */
    c.act = (ha_act)((fam >> 2) % 5); /* 4: unknown */
    c.ungated_mlp = (fam >> 5) & 1;
    const uint8_t caps = u8(f);
    c.embed_scale = caps & 1 ? 0.0f : pick_float(f, 0.0f, 40.0f);
    c.attn_softcap = caps & 2 ? pick_float(f, -1.0f, 8.0f) : 0.0f;
    c.final_softcap = caps & 4 ? pick_float(f, 0.0f, 8.0f) : 0.0f;
    c.rope_scale = caps & 8 ? pick_float(f, 0.0f, 2.0f) : 0.0f;
    int64_t h2 = c.head_dim > 1 && c.head_dim <= 2 * HA_MAX_HEAD_DIM ? c.head_dim / 2 : 1;
    double *inv = keep((size_t)h2 * sizeof(double));
    for (int64_t j = 0; inv && j < h2; j++) inv[j] = pow(10000.0, -2.0 * (double)j / (double)(2 * h2));
    uint8_t rm = u8(f);
    if (inv && rm >= 240) inv[rm % h2] = rm % 3 == 0 ? NAN : rm % 3 == 1 ? -1.0 : INFINITY;
    c.rope_inv_freq = rm == 239 ? NULL : inv;
    const uint8_t rope = u8(f); /* partial rotary, a long table from some position, a local table */
    if (rope & 1) c.rope_dim = PICK(f, 1, 2 * h2, 0, 2, 2 * h2 - 1, 2 * h2 + 2);
    if (rope & 2) {
        c.rope_inv_freq_long = inv;
        c.rope_long_from = PICK(f, 1, 8, 0, -1);
    }
    if (rope & 4) c.rope_inv_freq_local = inv;
    out->cfg = c;
    out->m = NULL;

    uint8_t wb = u8(f);
    wctx w = { .f = f, .dtype = DTYPES[wb % COUNT(DTYPES)], .seed = u64(f), .wild = (wb >> 3) % 16 == 15, .lying = huge };
    const int64_t d = c.hidden_size, ff = c.intermediate_size, V = c.vocab_size;
    const int64_t qd = mul_or(c.n_heads, c.head_dim, -1), kvd = mul_or(c.n_kv_heads, c.head_dim, -1);
    ha_llama_weights W = { 0 };
    W.embed = make_matrix(&w, V, d, 1.0f);
    W.final_norm = make_vector(&w, d, 1.0f, 0.2f, 0);
    W.lm_head = (wb & 0x80) ? W.embed : make_matrix(&w, V, d, 1.0f); /* tied */
    const uint8_t extra = u8(f);
    if (extra & 1) W.pos_embed = make_matrix(&w, PICK(f, 1, 64, 0, 1), d, 1.0f); /* learned positions */
    if (extra & 2) W.final_norm_b = make_vector(&w, d, 0.0f, 0.2f, 1);
    const int64_t nl = c.n_layers >= 1 && c.n_layers <= 4096 ? c.n_layers : 1;
    ha_llama_layer *L = keep((size_t)nl * sizeof *L);
    if (!L) return;
    memset(L, 0, (size_t)nl * sizeof *L);
    const int64_t distinct = nl < 3 ? nl : 3; /* later layers share these layers' buffers (allowed: borrowed) */
    for (int64_t l = 0; l < distinct; l++) {
        const uint8_t lb = u8(f);
        int bias = lb & 1, fused = (lb >> 1) & 3, qk_norm = (lb >> 3) & 1, post = (lb >> 4) & 1;
        L[l].window = window;
        L[l].rope = (ha_rope)((lb >> 5) % 4); /* 3: unknown */
        L[l].attn_scale = (lb >> 7) ? pick_float(f, -1.0f, 2.0f) : 0.0f;
        L[l].attn_norm = make_vector(&w, d, 1.0f, 0.2f, 0);
        if (fused & 1) {
            L[l].wqkv = make_matrix(&w, add_or(mul_or(2, kvd, -1), qd, -1), d, 0.5f); /* fused: q | k | v */
        } else {
            L[l].wq = make_matrix(&w, qd, d, 0.5f);
            L[l].wk = make_matrix(&w, kvd, d, 0.5f);
            L[l].wv = make_matrix(&w, kvd, d, 0.5f);
        }
        L[l].wo = make_matrix(&w, d, qd, 0.3f);
        if (qk_norm) {
            L[l].q_norm = make_vector(&w, c.head_dim, 1.0f, 0.2f, 0);
            L[l].k_norm = make_vector(&w, c.head_dim, 1.0f, 0.2f, 0);
        }
        L[l].ffn_norm = make_vector(&w, d, 1.0f, 0.2f, 0);
        if (post) {
            L[l].post_attn_norm = make_vector(&w, d, 1.0f, 0.2f, 0);
            L[l].post_ffn_norm = make_vector(&w, d, 1.0f, 0.2f, 0);
        }
        if (fused & 2) {
            L[l].w_gate_up = make_matrix(&w, mul_or(2, ff, -1), d, 0.4f); /* fused: gate | up */
        } else {
            if (!c.ungated_mlp || u8(f) == 0) L[l].w_gate = make_matrix(&w, ff, d, 0.4f);
            L[l].w_up = make_matrix(&w, ff, d, 0.4f);
        }
        L[l].w_down = make_matrix(&w, d, ff, 0.3f);
        if (bias) {
            L[l].bq = make_vector(&w, qd, 0.0f, 0.2f, 1);
            L[l].bk = make_vector(&w, kvd, 0.0f, 0.2f, 1);
            L[l].bv = make_vector(&w, kvd, 0.0f, 0.2f, 1);
            L[l].bo = make_vector(&w, d, 0.0f, 0.2f, 1);
            L[l].b_gate = make_vector(&w, ff, 0.0f, 0.2f, 1);
            L[l].b_up = make_vector(&w, ff, 0.0f, 0.2f, 1);
            L[l].b_down = make_vector(&w, d, 0.0f, 0.2f, 1);
        }
    }
    for (int64_t l = distinct; l < nl; l++) L[l] = L[l % distinct];
    W.layers = u8(f) == 255 ? NULL : L;

    ha_llama *m = NULL;
    uint8_t nullarg = u8(f);
    ha_status st = CALL("ha_llama_create", ha_llama_create(nullarg == 251 ? NULL : &c, nullarg == 252 ? NULL : &W,
                                                           nullarg == 253 ? NULL : &m));
    if (st == HA_OK) {
        if (!m) finding("HA_OK with no model");
        if (ha_llama_weight_bytes(m) <= 0) finding("weight bytes %lld", (long long)ha_llama_weight_bytes(m));
        out->m = m;
    } else if (m) {
        finding("a failed create left *out set");
    }
}

/* ---- the model through its interface --------------------------------------------------------------------- */

#define MAX_SEQ_CHECKED 64 /* lengths compared before and after each call for this many sequences */

typedef struct lens {
    int64_t n;
    int64_t v[MAX_SEQ_CHECKED];
} lens;

static lens get_lens(ha_lm *lm) {
    lens l = { .n = lm->n_seq < MAX_SEQ_CHECKED ? lm->n_seq : MAX_SEQ_CHECKED };
    for (int64_t s = 0; s < l.n; s++) l.v[s] = lm->length(lm->self, (int32_t)s);
    return l;
}

static void same_lens(ha_lm *lm, const lens *before_call, const char *what) {
    lens now = get_lens(lm);
    for (int64_t s = 0; s < now.n; s++)
        if (now.v[s] != before_call->v[s])
            finding("%s failed (%s) but changed sequence %lld's length %lld -> %lld", what, ha_last_error(), (long long)s,
                    (long long)before_call->v[s], (long long)now.v[s]);
}

static void do_append(fz *f, ha_lm *lm) {
    const int64_t V = lm->vocab_size, S = lm->n_seq;
    int64_t n = PICK(f, 0, 40, -1, 128, 129, 256, 300, INT64_MIN);
    if (n > 300) n = 300; /* the arrays are made with n entries: a larger n would be the harness lying */
    const int64_t made = n >= 0 && n <= 300 ? n : 0;
    int32_t *seq = keep((size_t)made * 4), *tok = keep((size_t)made * 4);
    uint8_t *want = keep((size_t)made);
    if (!seq || !tok || !want) return;
    uint8_t mode = u8(f);
    int32_t s0 = (int32_t)(u8(f) % (S < 256 ? S : 256));
    uint64_t ts = u8(f);
    for (int64_t i = 0; i < made; i++) {
        /* mode 0-127: one sequence (whole blocks for blas_prefill); else round-robin or from the input */
        seq[i] = mode < 128 ? s0 : mode < 192 ? (int32_t)(i % S) : (int32_t)(u8(f) % (S < 256 ? S : 256));
        tok[i] = (int32_t)(splitmix(&ts) % (uint64_t)V);
    }
    uint8_t bad = u8(f);
    if (made > 0 && bad >= 230) { /* one sequence id or token id out of range */
        const int64_t at = u8(f) % made, k = (bad >> 1) % 4;
        if (bad & 1) seq[at] = k == 0 ? -1 : k == 1 ? (int32_t)(S < INT32_MAX ? S : INT32_MAX) : k == 2 ? INT32_MAX : INT32_MIN;
        else tok[at] = k == 0 ? -1 : k == 1 ? (int32_t)(V < INT32_MAX ? V : INT32_MAX) : k == 2 ? INT32_MAX : INT32_MIN;
    }
    uint8_t wm = u8(f);
    int64_t wanted = 0;
    for (int64_t i = 0; i < made; i++) {
        want[i] = wm < 64 ? 1 : wm < 128 ? (uint8_t)(i == made - 1) : wm < 192 ? 0 : (uint8_t)(splitmix(&ts) & 1);
        wanted += want[i] != 0;
    }
    const int want_null = wm >= 250;
    if (want_null) wanted = made;
    const int no_logits = u8(f) >= 250;
    float *logits = wanted > 0 && !no_logits ? keep((size_t)(wanted * V) * sizeof(float)) : NULL;
    if (wanted > 0 && !no_logits && !logits) return;
    uint8_t np = u8(f);
    lens l0 = get_lens(lm);
    ha_status st = CALL("append", lm->append(lm->self, n, np == 254 ? NULL : seq, np == 255 ? NULL : tok,
                                             want_null ? NULL : want, logits));
    if (st != HA_OK) {
        same_lens(lm, &l0, "append");
        return;
    }
    if (n != made || (n > 0 && np >= 254) || (wanted > 0 && !logits))
        finding("append accepted n=%lld, NULL arrays (%d) or no logits for %lld wanted rows", (long long)n, np,
                (long long)wanted);
    lens l1 = get_lens(lm);
    for (int64_t s = 0; s < l1.n; s++) {
        int64_t add = 0;
        for (int64_t i = 0; i < made; i++) add += seq[i] == s;
        if (l1.v[s] != l0.v[s] + add)
            finding("append of %lld tokens to sequence %lld: length %lld -> %lld", (long long)add, (long long)s,
                    (long long)l0.v[s], (long long)l1.v[s]);
        if (l1.v[s] > lm->capacity) finding("sequence %lld holds %lld > capacity %lld", (long long)s, (long long)l1.v[s],
                                            (long long)lm->capacity);
    }
}

/* append_tree of up to 70 nodes (sequences together or not, parents a chain, random earlier nodes, or anything),
 * then perhaps keep_path of one node's path (or of anything): refused calls change no length, accepted ones add
 * each sequence's nodes, and a kept path leaves base + its length. */
static void do_tree(fz *f, ha_lm *lm) {
    if (!lm->append_tree) return;
    const int64_t V = lm->vocab_size, S = lm->n_seq;
    int64_t n = PICK(f, 0, 40, -1, 65, 70, INT64_MIN);
    if (n > 70) n = 70; /* the arrays are made with n entries: a larger n would be the harness lying */
    const int64_t made = n >= 0 ? n : 0;
    int32_t *seq = keep((size_t)made * 4), *tok = keep((size_t)made * 4), *par = keep((size_t)made * 4);
    uint8_t *want = keep((size_t)made);
    if (!seq || !tok || !par || !want) return;
    const uint8_t mode = u8(f), pm = u8(f);
    const int32_t s0 = (int32_t)(u8(f) % (S < 256 ? S : 256)), s1 = (int32_t)(u8(f) % (S < 256 ? S : 256));
    uint64_t ts = u8(f);
    for (int64_t i = 0; i < made; i++) {
        /* one sequence, two in halves (the same one twice is one group), or each node's own (rarely together) */
        seq[i] = mode < 128 ? s0 : mode < 224 ? (i < made / 2 ? s0 : s1) : (int32_t)(splitmix(&ts) % (uint64_t)S);
        tok[i] = (int32_t)(splitmix(&ts) % (uint64_t)V);
        const int first = i == 0 || seq[i - 1] != seq[i];
        par[i] = pm < 96 ? (first ? -1 : (int32_t)(i - 1)) /* a chain */
               : pm < 224 ? (first || splitmix(&ts) % 4 == 0 ? -1 : (int32_t)(i - 1 - (int64_t)(splitmix(&ts) % 3)))
               : (int32_t)(splitmix(&ts) % 9) - 2; /* anything: refused where not an earlier node of the sequence */
        if (par[i] >= 0 && par[i] < i && seq[par[i]] != seq[i]) par[i] = -1; /* (later ones stay: refused) */
        if (pm >= 224 && i > 0 && splitmix(&ts) % 8 == 0) par[i] = (int32_t)i; /* itself: refused */
        want[i] = (uint8_t)(splitmix(&ts) & 1);
    }
    int64_t wanted = 0;
    for (int64_t i = 0; i < made; i++) wanted += want[i];
    float *logits = wanted > 0 ? keep((size_t)(wanted * V) * sizeof(float)) : NULL;
    if (wanted > 0 && !logits) return;
    lens l0 = get_lens(lm);
    ha_status st = CALL("append_tree", lm->append_tree(lm->self, n, seq, tok, par, want, logits));
    if (st != HA_OK) {
        same_lens(lm, &l0, "append_tree");
        return;
    }
    lens l1 = get_lens(lm);
    for (int64_t s = 0; s < l1.n; s++) {
        int64_t add = 0;
        for (int64_t i = 0; i < made; i++) add += seq[i] == s;
        if (l1.v[s] != l0.v[s] + add)
            finding("append_tree of %lld nodes to sequence %lld: length %lld -> %lld", (long long)add, (long long)s,
                    (long long)l0.v[s], (long long)l1.v[s]);
    }
    if (made == 0 || u8(f) < 64) return;
    /* keep the path of a node (the first node of its sequence's group at index 0 of the group), or anything */
    const int64_t at = u8(f) % made;
    const int32_t s = seq[at];
    int64_t g0 = at;
    while (g0 > 0 && seq[g0 - 1] == s) g0--;
    int32_t path[70];
    int64_t len = 0;
    for (int64_t a = at; a >= 0; a = par[a]) len++;
    for (int64_t a = at, j = len - 1; a >= 0; a = par[a], j--) path[j] = (int32_t)(a - g0);
    const uint8_t bad = u8(f);
    if (bad >= 230 && len > 0) path[u8(f) % len] = (int32_t)PICK(f, -1, 80, INT32_MAX, INT32_MIN);
    if (s >= MAX_SEQ_CHECKED) return;
    const int64_t base = l0.v[s], had = lm->length(lm->self, s);
    st = CALL("keep_path", lm->keep_path(lm->self, s, base, path, len));
    const int64_t has = lm->length(lm->self, s);
    if (st != HA_OK ? has != had : has != base + len)
        finding("keep_path of %lld nodes from %lld (%s): length %lld -> %lld", (long long)len, (long long)base,
                st == HA_OK ? "accepted" : "refused", (long long)had, (long long)has);
}

static void do_crop(fz *f, ha_lm *lm) {
    int32_t s = (int32_t)PICK(f, 0, lm->n_seq - 1, -1, lm->n_seq, INT32_MAX, INT32_MIN);
    int64_t have = lm->length(lm->self, s);
    int64_t len = PICK(f, 0, have + 1, -1, have, INT64_MAX, INT64_MIN);
    lens l0 = get_lens(lm);
    ha_status st = CALL("crop", lm->crop(lm->self, s, len));
    if (st != HA_OK) {
        same_lens(lm, &l0, "crop");
        return;
    }
    if (s < 0 || s >= lm->n_seq || len < 0 || len > have)
        finding("crop(%d, %lld) of a sequence holding %lld accepted", s, (long long)len, (long long)have);
    if (lm->length(lm->self, s) != len) finding("crop(%d, %lld) left %lld", s, (long long)len, (long long)lm->length(lm->self, s));
}

static void reset(ha_lm *lm) {
    for (int64_t s = 0; s < lm->n_seq && s < MAX_SEQ_CHECKED; s++)
        if (CALL("crop to 0", lm->crop(lm->self, (int32_t)s, 0)) != HA_OK) finding("crop to 0 refused: %s", ha_last_error());
}

typedef struct stopper {
    int64_t calls, stop_at;
    int64_t V;
    int scribble;      /* rewrite the call's own inputs from the callback, as a caller's streamer may */
    int64_t *start, n_rows;
    int32_t *prompt, *eos;
    int64_t n_prompt, n_eos;
} stopper;

static int on_tokens(void *user, int64_t row, const int32_t *tokens, int64_t n) {
    stopper *s = user;
    (void)row;
    if (n < 1) finding("callback told of %lld tokens", (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->V) finding("callback told of token %d, vocab %lld", tokens[i], (long long)s->V);
    if (s->scribble) {
        const int64_t k = s->calls;
        s->start[k % s->n_rows] = k % 3 == 0 ? INT64_MIN : k % 3 == 1 ? INT64_MAX : -1;
        s->prompt[k % s->n_prompt] = k % 2 ? -1 : INT32_MAX;
        if (s->n_eos > 0) s->eos[k % s->n_eos] = tokens[0];
    }
    return ++s->calls == s->stop_at;
}

/* The generation arguments both loops take, decoded from the input; the buffers honest for the n_seq rows. */
typedef struct gen_case {
    ha_generate_params p;
    int32_t *prompt;
    int64_t width;
    int64_t *start;
    int32_t *out;
    float *scores;
    stopper stop;
    int ok; /* the buffers could be made */
} gen_case;

static gen_case decode_gen(fz *f, ha_lm *lm) {
    gen_case g = { .ok = 0 };
    const int64_t B = lm->n_seq, V = lm->vocab_size;
    if (u8(f) < 230) reset(lm);
    int64_t N = PICK(f, 1, lm->capacity < 24 ? lm->capacity : 24, 0, -1, lm->capacity, lm->capacity + 1, INT64_MAX);
    int64_t n_eos = PICK(f, 0, 3, -1, INT64_MIN);
    if (n_eos > 3) n_eos = 3; /* the list is made with at most 3 entries */
    int32_t *eos = keep(n_eos > 0 && n_eos <= 3 ? (size_t)n_eos * 4 : 0);
    if (!eos) return g;
    for (int64_t i = 0; i < n_eos && i < 3; i++) eos[i] = (int32_t)PICK(f, 0, V - 1, -1, V, INT32_MIN);
    uint8_t pb = u8(f);
    g.p = (ha_generate_params){
        .max_new_tokens = N,
        .eos = pb == 255 ? NULL : eos,
        .n_eos = n_eos,
        .pad_token_id = (int32_t)PICK(f, 0, V - 1, -1, INT32_MIN, V),
        .sampling = { .do_sample = u8(f) & 1,
                      .temperature = u8(f) < 128 ? 1.0f : pick_float(f, 0.05f, 3.0f),
                      .top_k = u8(f) < 160 ? 0 : PICK(f, 1, V + 1, -1, INT64_MAX, INT64_MIN),
                      .top_p = u8(f) < 160 ? 1.0f : pick_float(f, 0.01f, 1.0f),
                      .repetition_penalty = u8(f) < 160 ? 1.0f : pick_float(f, 0.3f, 3.0f),
                      .seed = u64(f),
                      .min_new_tokens = PICK(f, 0, 3, -1, INT64_MAX, N) },
    };
    g.p.sampling.eos = g.p.eos; /* min_new_tokens suppresses the stop tokens */
    g.p.sampling.n_eos = g.p.n_eos;
    const uint8_t mt = u8(f); /* max_time: mostly off; else tiny (stops after the first step), or invalid */
    if (mt >= 240) g.p.max_time = (const double[]){ 1e-9, 1e-4, -1.0, NAN, INFINITY, -0.0, 1e300, 0.5 }[mt % 8];
    const uint8_t cb = u8(f);
    if (cb >= 200) {
        g.stop = (stopper){ .stop_at = PICK(f, 1, 8), .V = V, .scribble = cb >= 240 };
        g.p.on_tokens = on_tokens; /* user: &g.stop, set by the caller (g is returned by value) */
    }
    g.width = PICK(f, 1, 12, 0, -1, (int64_t)INT32_MAX + 1, INT64_MIN);
    if (g.width > 12 && g.width <= INT32_MAX) g.width = 12; /* a width the core accepts is made whole */
    const int64_t w = g.width >= 1 && g.width <= 12 ? g.width : 1;
    const int64_t n_out = N >= 1 && N <= lm->capacity ? N : 1;
    g.prompt = keep((size_t)(B * w) * 4);
    g.start = keep((size_t)B * 8);
    g.out = keep((size_t)(B * n_out) * 4);
    if (!g.prompt || !g.start || !g.out) return g;
    uint64_t ts = u8(f);
    uint8_t rep = u8(f); /* repetitive prompts give prompt lookup matches */
    for (int64_t i = 0; i < B * w; i++)
        g.prompt[i] = (int32_t)(rep < 128 ? (uint64_t)(i % (rep % 5 + 1)) % (uint64_t)V : splitmix(&ts) % (uint64_t)V);
    for (int64_t b = 0; b < B; b++) g.start[b] = u8(f) < 240 ? (int64_t)(splitmix(&ts) % (uint64_t)w) : PICK(f, 0, 0, -1, w, INT64_MIN);
    uint8_t bad = u8(f);
    if (bad >= 240) g.prompt[u8(f) % (B * w)] = bad & 1 ? -1 : (int32_t)V;
    if (u8(f) >= 128) {
        size_t bytes = (size_t)(n_out * B * V) * sizeof(float);
        if (bytes <= BUF_CAP) g.scores = keep(bytes);
    }
    g.stop.start = g.start;
    g.stop.n_rows = B;
    g.stop.prompt = g.prompt;
    g.stop.n_prompt = B * w;
    g.stop.eos = eos;
    g.stop.n_eos = g.p.eos && n_eos > 0 ? n_eos : 0;
    g.ok = 1;
    return g;
}

/* What a successful generation promises about out and n_steps. */
static void check_generated(const gen_case *g, ha_lm *lm, int64_t n_steps, const char *what) {
    const int64_t N = g->p.max_new_tokens, B = lm->n_seq;
    if (n_steps < 1 || n_steps > N) finding("%s: n_steps %lld for max_new_tokens %lld", what, (long long)n_steps, (long long)N);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < N; j++) {
            int32_t t = g->out[b * N + j];
            if ((t < 0 || t >= lm->vocab_size) && t != g->p.pad_token_id)
                finding("%s: out[%lld, %lld] = %d is neither a token nor pad", what, (long long)b, (long long)j, t);
        }
    if (g->p.on_tokens && g->stop.stop_at >= 1 && g->stop.calls >= g->stop.stop_at) finding("%s: the callback asked to stop, yet HA_OK", what);
}

static void do_generate(fz *f, ha_lm *lm) {
    if (lm->n_seq > 8) return; /* the harness's buffers (n_seq, ...) stay small */
    gen_case g = decode_gen(f, lm);
    if (!g.ok) return;
    g.p.user = &g.stop;
    int64_t n_steps = -7;
    uint8_t np = u8(f);
    ha_status st = CALL("ha_generate", ha_generate(lm, np == 255 ? NULL : &g.p, g.prompt, g.width, g.start, g.out, g.scores,
                                                   np == 254 ? NULL : &n_steps));
    if (st == HA_OK) check_generated(&g, lm, n_steps, "ha_generate");
    else if (st == HA_ERR_CALLBACK && !(g.p.on_tokens && g.stop.calls == g.stop.stop_at))
        finding("HA_ERR_CALLBACK but the callback never asked to stop");
}

static void do_assisted(fz *f, ha_lm *lm, ha_lm *draft) {
    if (lm->n_seq > 8) return;
    gen_case g = decode_gen(f, lm);
    if (!g.ok) return;
    g.p.user = &g.stop;
    if (draft && u8(f) < 230) reset(draft);
    /* the cost schedule's costs (draft, target): none, sensible ones, a free draft with a flat verify, a draft
     * dearer than any gain, malformed ones */
    static const double d_ok[] = { 0.05, 0.07 }, d_free[] = { 0.0 }, d_dear[] = { 1e9 }, d_bad[] = { -1.0, NAN },
                        t_ok[] = { 1.0, 1.2, 1.4, 1.6 }, t_flat[] = { 1.0, 1.0 }, t_bad[] = { NAN, 0.0, INFINITY };
    static const double *const d_sets[] = { NULL, d_ok, d_free, d_dear, d_bad, d_ok };
    static const double *const t_sets[] = { NULL, t_ok, t_flat, t_ok, t_ok, t_bad };
    static const int64_t d_n[] = { 0, 2, 1, 1, 2, 2 }, t_n[] = { 0, 4, 2, 4, 4, 3 };
    const int cs = u8(f) % 6;
    ha_assist_params p = {
        .gen = g.p,
        .num_assistant_tokens = PICK(f, 1, 6, 0, -1, INT64_MAX),
        .schedule = (ha_schedule)PICK(f, 0, 3, 4, -1),
        .confidence_threshold = u8(f) < 160 ? 0.0f : pick_float(f, 0.0f, 0.99f),
        .acceptance = (ha_acceptance)PICK(f, 0, 1, 2, -1),
        .prompt_lookup_num_tokens = PICK(f, 1, 6, 0, -1, INT64_MAX),
        .max_matching_ngram_size = PICK(f, 1, 3, 0, -1, INT64_MAX),
        .draft_costs = d_sets[cs],
        .n_draft_costs = u8(f) < 240 ? d_n[cs] : PICK(f, 0, d_n[cs], -1, INT64_MIN), /* never past the array */
        .target_costs = t_sets[cs],
        .n_target_costs = u8(f) < 240 ? t_n[cs] : PICK(f, 0, t_n[cs], -1, INT64_MIN),
    };
    const uint8_t tw = u8(f); /* token trees now and then, of every width, bad ones included */
    if (tw >= 160) p.tree_width = PICK(f, 2, 5, 0, 1, 63, 64, -1, INT64_MAX);
    if (tw >= 160) p.tree_dynamic = tw == 255 ? 2 : tw & 1; /* either shape (and a bad value), from the same byte */
    /* the cost schedule's carried counts: none, the counts earlier inputs left (the core must leave them valid), or a
     * copy with one entry spoiled (refused) */
    static double carried[HA_COST_STATE], spoiled[HA_COST_STATE];
    const uint8_t ks = u8(f);
    if (ks >= 128 && ks < 224) p.cost_state = carried;
    if (ks >= 224) {
        memcpy(spoiled, carried, sizeof spoiled);
        spoiled[u8(f) % HA_COST_STATE] = (double[]){ NAN, -1.0, INFINITY, 1e300 }[u8(f) % 4];
        p.cost_state = spoiled;
    }
    const int64_t N = g.p.max_new_tokens, n_stats = N >= 1 && N <= lm->capacity ? N : 1;
    ha_assist_stats stats = { 0 };
    uint8_t sm = u8(f);
    if (sm & 1) {
        stats.proposed_at = keep((size_t)n_stats * 8);
        stats.accepted_at = keep((size_t)n_stats * 8);
        if (!stats.proposed_at || !stats.accepted_at) return;
        memset(stats.proposed_at, 0, (size_t)n_stats * 8);
        memset(stats.accepted_at, 0, (size_t)n_stats * 8);
    }
    int64_t n_steps = -7;
    ha_status st = CALL("ha_generate_assisted", ha_generate_assisted(lm, draft, &p, g.prompt, g.width, g.start, g.out, g.scores,
                                                                     &n_steps, (sm & 2) ? NULL : &stats));
    if (st == HA_OK) {
        check_generated(&g, lm, n_steps, "ha_generate_assisted");
        if (!(sm & 2) && (stats.num_accepted_tokens < 0 || stats.num_accepted_tokens > stats.num_draft_tokens))
            finding("assisted stats: %lld accepted of %lld proposed", (long long)stats.num_accepted_tokens,
                    (long long)stats.num_draft_tokens);
    } else if (st == HA_ERR_CALLBACK && !(g.p.on_tokens && g.stop.calls == g.stop.stop_at)) {
        finding("HA_ERR_CALLBACK but the callback never asked to stop");
    }
    for (int i = 0; i < HA_COST_STATE; i++) /* acc (32), tested (32), then acc (10), tested (10) by probability */
        if (!isfinite(carried[i]) || carried[i] < 0.0 ||
            (i < 32 && carried[i] > carried[32 + i]) || (i >= 64 && i < 74 && carried[i] > carried[i + 10]))
            finding("the cost schedule's carried counts were left invalid at %d: %g", i, carried[i]);
}

static ha_llama_context *make_context(fz *f, const ha_llama *m, int huge) {
    int64_t n_seq = huge ? PICK(f, 1, 1 << 20, 1 << 20, (1 << 20) + 1, 4096)
                         : PICK(f, 1, 4, 0, -1, 1 << 20, (1 << 20) + 1, 300);
    int64_t cap = huge ? PICK(f, 1, INT32_MAX, INT32_MAX, (int64_t)INT32_MAX + 1, 1 << 16)
                       : PICK(f, 1, 64, 0, -1, 200, 400, INT32_MAX, (int64_t)INT32_MAX + 1);
    int blas = u8(f) >= 192;
    ha_llama_context *c = NULL;
    uint8_t np = u8(f);
    ha_status st = CALL("ha_llama_context_create", ha_llama_context_create(np == 255 ? NULL : m, n_seq, cap, blas,
                                                                           np == 254 ? NULL : &c));
    if (st != HA_OK) {
        if (c) finding("a failed context create left *out set");
        return NULL;
    }
    ha_lm *lm = ha_llama_context_lm(c);
    if (!lm || lm->n_seq != n_seq || lm->capacity != cap) finding("context interface disagrees with its creation");
    for (int64_t s = 0; s < n_seq && s < MAX_SEQ_CHECKED; s++)
        if (lm->length(lm->self, (int32_t)s) != 0) finding("a new context's sequence %lld is not empty", (long long)s);
    return c;
}

static void run_model(fz *f, int huge) {
    model M;
    build_model(f, &M, huge);
    if (!M.m) return;
    ha_llama_context *c = make_context(f, M.m, huge);
    if (c && huge) { /* its lengths are all that may be looked at: the weights were never made */
        ha_lm *lm = ha_llama_context_lm(c);
        (void)lm->length(lm->self, (int32_t)u32(f));
    }
    if (c && !huge) {
        ha_lm *lm = ha_llama_context_lm(c);
        ha_llama_context *dc = NULL;
        model D = { .m = NULL };
        for (int op = 0; op < 10 && f->n; op++) {
            uint8_t o = u8(f);
            switch (o % 8) {
            case 0: do_append(f, lm); break;
            case 1: /* mostly an append, now and then a tree */
                if (o & 0x80) do_tree(f, lm);
                else do_append(f, lm);
                break;
            case 2: do_crop(f, lm); break;
            case 3: do_generate(f, lm); break;
            case 4: do_assisted(f, lm, NULL); break; /* prompt lookup */
            case 5:
                if ((o & 0xc0) == 0x40) { /* the target as its own draft */
                    do_assisted(f, lm, lm);
                    break;
                }
                if (!dc) { /* a draft: another context of this model, or of a second model */
                    if (o & 0x80) {
                        if (!D.m) build_model(f, &D, 0);
                        if (D.m) dc = make_context(f, D.m, 0);
                    } else {
                        dc = make_context(f, M.m, 0);
                    }
                }
                do_assisted(f, lm, dc ? ha_llama_context_lm(dc) : NULL);
                break;
            case 6: { /* the length of any sequence id */
                int32_t s = (int32_t)u32(f);
                int64_t n = lm->length(lm->self, s);
                if (n < 0 || n > lm->capacity || ((s < 0 || s >= lm->n_seq) && n != 0))
                    finding("length(%d) = %lld", s, (long long)n);
                break;
            }
            default: {
                static const char *const names[] = { "scalar", "avx2", "avx-vnni", "avx512", "avx512-emulated",
                                                     "avx-vnni-evex" };
                uint8_t k = u8(f);
                if (k < 200) (void)CALL("ha_kernels_select", ha_kernels_select(names[k % 6]));
                else reset(lm);
                break;
            }
            }
        }
        ha_llama_context_free(dc);
        ha_llama_free(D.m);
    }
    ha_llama_context_free(c);
    ha_llama_free(M.m);
}

/* ---- weight conversion ------------------------------------------------------------------------------------ */

static void run_convert(fz *f) {
    static const int64_t dt_codes[] = { HA_F32, HA_BF16, HA_F16, HA_F32, HA_BF16, HA_F16, HA_Q8, HA_Q4, HA_F32P, HA_BF16P,
                                        HA_F16P, HA_NDTYPES, -1, 255 };
    ha_dtype t = (ha_dtype)dt_codes[u8(f) % COUNT(dt_codes)];
    int64_t rows = PICK(f, 0, 40, -1, (int64_t)1 << 40, (int64_t)1 << 44, (int64_t)1 << 58, (int64_t)1 << 62, 17, 33);
    int64_t cols = PICK(f, 1, 200, 0, -1, 1 << 20, (int64_t)1 << 40, (int64_t)1 << 61, (int64_t)1 << 62, 64, 65, 31, 33);
    size_t nbytes = ha_matrix_bytes(t, rows, cols);
    uint8_t m = u8(f);
    if (m >= 240) nbytes += m & 1 ? 1 : (size_t)-1;
    if (nbytes > BUF_CAP) nbytes = 1; /* not made: declared as what it is */
    int misalign = u8(f) >= 245;
    char *src = keep(nbytes + (size_t)misalign);
    if (!src) return;
    fill(src + misalign, nbytes, t, u64(f), 1.0f, u8(f) >= 230);
    const int quant = u8(f) & 1;
    static const int64_t to_codes[] = { HA_Q8, HA_Q4, HA_Q8, HA_Q4, HA_F32, HA_F32P, HA_NDTYPES, -3 };
    ha_dtype to = quant ? (ha_dtype)to_codes[u8(f) % COUNT(to_codes)] : ha_panel_dtype(t);
    size_t dst_bytes = ha_matrix_bytes(to == HA_NDTYPES ? HA_F32P : to, rows, cols);
    uint8_t dm = u8(f);
    if (dm >= 240) dst_bytes += dm & 1 ? 1 : (size_t)-1;
    if (dst_bytes > BUF_CAP) dst_bytes = 1;
    int dmis = u8(f) >= 245;
    char *dst = keep(dst_bytes + (size_t)dmis);
    if (!dst) return;
    ha_matrix M = { .data = u8(f) == 255 ? NULL : src + misalign, .dtype = t, .rows = rows, .cols = cols, .nbytes = nbytes };
    if (quant) (void)CALL("ha_quantize", ha_quantize(&M, to, dst + dmis, dst_bytes));
    else (void)CALL("ha_pack", ha_pack(&M, dst + dmis, dst_bytes));
}

/* ---- sampling ---------------------------------------------------------------------------------------------- */

static int64_t clamp_count(int64_t n, int64_t max) { return n > max ? max : n; }

static void run_sampler(fz *f) {
    ha_sampling_params p = {
        .do_sample = u8(f) & 1,
        .temperature = pick_float(f, 0.05f, 3.0f),
        .top_k = PICK(f, 0, 20, -1, INT64_MAX),
        .top_p = u8(f) < 100 ? 1.0f : pick_float(f, 0.0f, 1.0f),
        .repetition_penalty = u8(f) < 100 ? 1.0f : pick_float(f, 0.2f, 3.0f),
        .seed = u64(f),
    };
    int64_t V = PICK(f, 1, 300, 0, -1, INT32_MAX, (int64_t)INT32_MAX + 1, 1 << 26);
    /* the processors added for Transformers' other flags: mostly off, else in range, else invalid */
    const float cuts[] = { 0.0f, 0.0f, 0.05f, 0.5f, 0.999f, 1.0f, -0.1f, NAN };
    p.min_p = cuts[u8(f) % 8];
    p.typical_p = cuts[u8(f) % 8];
    p.epsilon_cutoff = cuts[u8(f) % 8];
    p.eta_cutoff = cuts[u8(f) % 8];
    p.no_repeat_ngram_size = PICK(f, 0, 4, -1);
    p.renormalize = u8(f) & 1;
    p.remove_invalid_values = u8(f) & 1;
    p.decay_factor = cuts[u8(f) % 8] * 3.0f;
    p.decay_start = PICK(f, 0, 3, -1);
    int32_t *lists = keep(6 * 4);
    int64_t *offs = keep(4 * 8);
    float *vals = keep(3 * 4);
    if (!lists || !offs || !vals) return;
    for (int i = 0; i < 6; i++) lists[i] = (int32_t)PICK(f, 0, 8, -1, V, INT32_MAX);
    offs[0] = PICK(f, 0, 1, 0);
    offs[1] = clamp_count(PICK(f, 1, 2, 0), 6); /* never past the 6 tokens: that would break the buffer contract */
    offs[2] = clamp_count(PICK(f, 2, 4, 1), 6);
    offs[3] = clamp_count(PICK(f, 3, 6, 2), 6);
    for (int i = 0; i < 3; i++) vals[i] = cuts[u8(f) % 8] * 10.0f - 2.0f;
    /* counts never past the arrays made here (-1 and 0 are fair; more would break the buffer contract itself) */
#define COUNT_UP_TO(max) clamp_count(PICK(f, 0, (max), -1), (max))
    const int64_t n_seqs = COUNT_UP_TO(3);
    const uint8_t which = u8(f);
    if (which & 1) p.sequence_bias = (ha_token_seqs){ .tokens = lists, .offsets = offs, .values = vals, .n = n_seqs };
    if (which & 2) p.bad_words = (ha_token_seqs){ .tokens = lists, .offsets = offs, .n = n_seqs };
    if (which & 4) p.suppress = lists, p.n_suppress = COUNT_UP_TO(6);
    if (which & 8) p.begin_suppress = lists + 1, p.n_begin_suppress = COUNT_UP_TO(5), p.begin_suppress_step = PICK(f, 0, 2, -1);
    if (which & 16) p.forced_bos = lists + 2, p.n_forced_bos = COUNT_UP_TO(4);
    if (which & 32) p.forced_eos = lists + 3, p.n_forced_eos = COUNT_UP_TO(3), p.forced_eos_step = PICK(f, 0, 2, -1);
    if (which & 64) p.eos = lists + 4, p.n_eos = COUNT_UP_TO(2), p.min_new_tokens = PICK(f, 0, 3, -1);
#undef COUNT_UP_TO
    ha_sampler *s = NULL;
    ha_status st = CALL("ha_sampler_create", ha_sampler_create(u8(f) == 255 ? NULL : &p, V, &s));
    if (st != HA_OK) {
        if (s) finding("a failed sampler create left *out set");
        return;
    }
    if (V > 4096) { /* made (within MAX_ALLOC_MB) but too big to drive here */
        ha_sampler_free(s);
        return;
    }
    float *scores = keep((size_t)V * sizeof(float));
    int64_t nh = PICK(f, 0, 16, 0);
    if (nh > 16) nh = 16;
    int32_t *hist = keep((size_t)nh * 4);
    if (!scores || !hist) {
        ha_sampler_free(s);
        return;
    }
    uint64_t seed = u8(f);
    uint8_t sm = u8(f);
    for (int64_t i = 0; i < V; i++)
        scores[i] = sm < 200 ? rnd_float(&seed, 5.0f) : pick_float(f, -20.0f, 20.0f);
    for (int64_t i = 0; i < nh; i++) hist[i] = (int32_t)PICK(f, 0, V - 1, -1, V, INT32_MIN, INT32_MAX);
    current = "ha_sampler_process";
    ha_sampler_process(s, scores, 0, u8(f) == 255 ? NULL : hist, nh, u8(f));
    int any = 0;
    for (int64_t i = 0; i < V; i++) any |= scores[i] > -INFINITY;
    uint32_t row = u32(f), pos = u32(f);
    current = "ha_sampler_choose";
    int32_t t = ha_sampler_choose(s, scores, row, pos);
    if (t < -1 || t >= V) finding("chose %d of %lld", t, (long long)V);
    if ((t == -1) != !any) finding("chose %d though %s score is above -inf", t, any ? "some" : "no");
    if (t >= 0 && !(scores[t] > -INFINITY)) finding("chose %d, whose score is %g", t, (double)scores[t]);
    ha_sampler_free(s);
    double u = ha_rng_uniform(u64(f), u32(f), u32(f), u32(f), u32(f));
    if (!(u > 0.0 && u < 1.0)) finding("ha_rng_uniform gave %.17g", u);
}

/* BPE: random merge tables (ids in range, out of range, duplicated pairs), characters, byte fallback and unk, then
 * words of random code points (some above U+10FFFF) with capacities around the 4 n contract. */
static void run_bpe(fz *f) {
    int64_t vocab = PICK(f, 1, 64, 0, -1, INT32_MAX, (int64_t)INT32_MAX + 1);
    int64_t n_merges = clamp_count(PICK(f, 0, 40, -1), 40), n_chars = clamp_count(PICK(f, 0, 8, -1), 8);
    int32_t *merges = keep(40 * 3 * 4), *char_ids = keep(8 * 4), *byte_ids = keep(256 * 4);
    uint32_t *chars = keep(8 * 4);
    if (!merges || !char_ids || !byte_ids || !chars) return;
    int64_t span = vocab > 0 && vocab < 64 ? vocab : 64;
    for (int i = 0; i < 40 * 3; i++) merges[i] = u8(f) < 250 ? (int32_t)(u8(f) % span) : (int32_t)PICK(f, 0, 0, -1, 64);
    for (int i = 0; i < 8; i++) {
        chars[i] = u8(f) < 250 ? (uint32_t)('a' + u8(f) % 6) : u32(f);
        char_ids[i] = u8(f) < 250 ? (int32_t)(u8(f) % span) : (int32_t)PICK(f, 0, 0, -1, 64);
    }
    for (int i = 0; i < 256; i++) byte_ids[i] = (int32_t)(i % 7 == 0 ? -1 : i % span);
    int use_bytes = u8(f) & 1;
    int32_t unk = (int32_t)PICK(f, -1, span - 1, -2, 64);
    ha_bpe *b = NULL;
    ha_status st = CALL("ha_bpe_create", ha_bpe_create(merges, n_merges < 0 ? 0 : n_merges, chars, char_ids,
                                                       n_chars < 0 ? 0 : n_chars, use_bytes ? byte_ids : NULL, unk,
                                                       u8(f) & 1, vocab, &b));
    if (st != HA_OK) {
        if (b) finding("ha_bpe_create failed but handed out a handle");
        return;
    }
    for (int w = 0; w < 4; w++) {
        int64_t n = clamp_count(PICK(f, 0, 200, -1), 200);
        if (n < 0) n = 0;
        uint32_t *word = keep((size_t)n * 4 + 4);
        int64_t extra = PICK(f, 0, 2, -1); /* the buffer is made for cap: never more than it holds */
        int64_t cap = 4 * n + (extra < -1 ? -1 : extra > 2 ? 2 : extra);
        int32_t *ids = keep((size_t)(cap > 0 ? cap : 0) * 4 + 4);
        if (!word || !ids) break;
        for (int64_t i = 0; i < n; i++) word[i] = u8(f) < 240 ? (uint32_t)('a' + u8(f) % 8) : u8(f) < 128 ? u32(f) : 0xE9;
        int64_t n_ids = -1;
        st = CALL("ha_bpe_encode", ha_bpe_encode(b, word, n, ids, cap, &n_ids));
        if (st == HA_OK) {
            if (n_ids < 0 || n_ids > cap) finding("ha_bpe_encode gave %lld ids for capacity %lld", (long long)n_ids,
                                                  (long long)cap);
            for (int64_t i = 0; i < n_ids; i++)
                if (ids[i] < 0 || ids[i] >= vocab) finding("ha_bpe_encode gave id %d outside the vocabulary", ids[i]);
        }
    }
    ha_bpe_free(b);
}

/* ---- the entry point ---------------------------------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz f = { data, size };
    uint8_t head = u8(&f);
    /* threads: mostly 1 (the pool's hand-offs dominate tiny forwards), sometimes 2, sometimes out of range */
    uint8_t th = u8(&f);
    int threads = th < 200 ? 1 : th < 245 ? 2 : (int)PICK(&f, 3, 4, 0, -1, 257, INT32_MIN);
    (void)CALL("ha_set_num_threads", ha_set_num_threads(threads));
    if (head >= 0xF8) { /* BPE merges: the top eight heads, so that the older corpus keeps its meaning */
        run_bpe(&f);
        arena_free();
        return 0;
    }
    switch (head % 8) {
    case 0: case 1: case 2: case 3: run_model(&f, 0); break;
    case 4: run_model(&f, 1); break;
    case 5: case 6: run_convert(&f); break;
    default: run_sampler(&f); break;
    }
    arena_free();
    return 0;
}
