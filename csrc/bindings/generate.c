/* generate() and generate_assisted(): their options cross the binding by name, in a dict whose every key is
 * checked (an unknown one, or a missing one, is an error naming it: adding an option never shifts the others);
 * they are acquired and checked into the core's parameter structs (gen_args, binding.h), and the core's loop runs
 * without the GIL. The Sampler type (sampler.c) takes the sampling options alike. */
#include "binding.h"

/* ---- the options' names ------------------------------------------------------------------------------------
 * Buffers are numpy arrays; "| None" marks the optional ones. Every key is required (a default would hide a
 * misspelt or forgotten option); ha.h's ha_generate_params, ha_sampling_params and ha_assist_params say what each
 * means. */

/* Both generation functions': prompt int32 (B, W), left padded, row b's tokens from start[b]: start int64 (B,);
 * out int32 (B, max_new_tokens) written; scores float32 (max_new_tokens, B, V) | None, logits_out float32
 * (max_new_tokens, B, V) | None and sources uint8 (B, max_new_tokens) | None (ha_token_source) written; on_tokens
 * (row, tokens: list of int) | None; stop_fn (row, tokens: bytes of int32, scores: bytes of float32) -> bool | None;
 * pad_token_id, max_time (seconds, 0: none), no_cache; seconds float64 (HA_SECONDS,) | None written (ha_seconds:
 * where the call's time went). */
#define GENERATE_OPTIONS                                                                                   \
    "prompt", "start", "out", "scores", "logits_out", "sources", "on_tokens", "stop_fn", "max_new_tokens", \
        "pad_token_id", "max_time", "no_cache", "seconds"
/* The sampling options, the Sampler's too: eos_token_id int32 (k,); forced_bos_token_id, forced_eos_token_id,
 * suppress_tokens and begin_suppress_tokens int32 (k,) (empty: none); sequence_bias_tokens int32, _offsets int64
 * (n + 1,), _values float32 (n,) and bad_words_tokens, _offsets (ha_token_seqs; offsets (1,): none); logits_fn
 * (row, tokens: bytes of int32, scores: bytearray of float32) -> None | float32 scores (V,), or None. */
#define SAMPLING_OPTIONS                                                                                          \
    "min_new_tokens", "eos_token_id", "do_sample", "temperature", "top_k", "top_p", "repetition_penalty", "seed", \
        "sequence_bias_tokens", "sequence_bias_offsets", "sequence_bias_values", "no_repeat_ngram_size",          \
        "bad_words_tokens", "bad_words_offsets", "forced_bos_token_id", "forced_eos_token_id", "forced_eos_step", \
        "remove_invalid_values", "decay_factor", "decay_start", "suppress_tokens", "begin_suppress_tokens",       \
        "begin_suppress_step", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff", "renormalize_logits", "logits_fn"
/* generate_assisted()'s own: schedule an ha_schedule and acceptance an ha_acceptance, by name (SCHEDULES and
 * ACCEPTANCES below); draft_costs float64 (n,) | None
 * and target_costs float64 (m,) | None (the cost schedule's: a draft step for 1 .. n rows, a target append of
 * 1 .. m tokens), draft_first_costs float64 (n,) | None (a round's first draft step); proposed_at and accepted_at int64 (max_new_tokens,) written; cost_state float64 (HA_COST_STATE,)
 * | None, read and written; overlap (honoured only with a native draft, whose append may run on another thread);
 * tree_width (ha_assist_params.tree_width: 1, chains); tree_shape a tree shape by name (TREE_SHAPES below:
 * ha_assist_params.tree_dynamic); tree_counts int64 (B,), tree_rounds int64 (B, max_new_tokens, HA_TREE_FIELDS) and
 * tree_nodes int32 (B, max_new_tokens, 3, max_nodes), all three written, or all three None (ha_assist_params.tree_record:
 * the record of each round's tree, with tree_width > 1). */
#define ASSISTED_OPTIONS                                                                                      \
    "num_assistant_tokens", "schedule", "confidence_threshold", "acceptance", "prompt_lookup_num_tokens",     \
        "max_matching_ngram_size", "draft_costs", "target_costs", "proposed_at", "accepted_at", "cost_state", \
        "draft_first_costs", "overlap", "tree_width", "tree_shape", "tree_counts", "tree_rounds", "tree_nodes"

/* The core's enums by the names GenerationConfig gives them (num_assistant_tokens_schedule, assisted_sampling): the
 * one table of each. The module's SCHEDULES and ACCEPTANCES list the names in this order, and Python validates
 * against them (habana_assist/generation/configuration_utils.py). */
typedef struct named_value {
    const char *name;
    int value;
} named_value;

static const named_value SCHEDULES[] = {
    { "constant", HA_SCHEDULE_CONSTANT },
    { "heuristic", HA_SCHEDULE_HEURISTIC },
    { "heuristic_transient", HA_SCHEDULE_HEURISTIC_TRANSIENT },
    { "cost", HA_SCHEDULE_COST },
    { NULL, 0 },
};

static const named_value ACCEPTANCES[] = {
    { "rejection", HA_ACCEPT_REJECTION },
    { "coupled", HA_ACCEPT_COUPLED },
    { NULL, 0 },
};

/* GenerationConfig.assistant_tree_shape: ha_assist_params.tree_dynamic */
static const named_value TREE_SHAPES[] = {
    { "siblings", 0 },
    { "dynamic", 1 },
    { NULL, 0 },
};

static const char *const GENERATE_KEYS[] = { GENERATE_OPTIONS, SAMPLING_OPTIONS, NULL };
static const char *const ASSISTED_KEYS[] = { GENERATE_OPTIONS, SAMPLING_OPTIONS, ASSISTED_OPTIONS, NULL };
const char *const SAMPLER_KEYS[] = { SAMPLING_OPTIONS, "stop_fn", "logits_out", "no_cache", NULL };

int check_options(PyObject *opts, const char *const *allowed, const char *what) {
    if (!PyDict_Check(opts)) {
        PyErr_Format(InvalidInputError, "%s: the options must be a dict of named options, got %s", what,
                     Py_TYPE(opts)->tp_name);
        return -1;
    }
    return check_keys(opts, allowed, what, "option");
}

/* ---- reading one option ------------------------------------------------------------------------------------- */

/* A new reference to opts[key] (held while it is converted: a conversion may run Python code that changes opts);
 * NULL with InvalidInputError naming the key where opts has none. */
static PyObject *option(PyObject *opts, const char *what, const char *key) {
    PyObject *v = PyDict_GetItemString(opts, key);
    if (!v) PyErr_Format(InvalidInputError, "%s: option '%s' is required", what, key);
    return Py_XNewRef(v);
}

/* After a conversion of option key failed: a TypeError, ValueError or OverflowError (what the conversions raise)
 * again, its message prefixed with the key; anything else (raised by the value's own __index__ or __bool__) as
 * it is. */
static int option_error(const char *what, const char *key) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError) &&
        !PyErr_ExceptionMatches(PyExc_OverflowError))
        return -1;
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
    PyErr_Format((PyObject *)Py_TYPE(exc), "%s: option '%s': %S", what, key, exc);
    Py_DECREF(exc);
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyErr_Format(type ? type : PyExc_TypeError, "%s: option '%s': %S", what, key, value ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
#endif
    return -1;
}

/* option_SUF(opts, what, key, out): opts[key] converted as PyArg_Parse's format unit FMT converts an argument
 * (the conversions the positional arguments had) into *out; -1 with an exception naming the key on failure. */
#define DEFINE_OPTION(SUF, TYPE, FMT)                                                       \
    static int option_##SUF(PyObject *opts, const char *what, const char *key, TYPE *out) { \
        PyObject *v = option(opts, what, key);                                              \
        if (!v) return -1;                                                                  \
        const int ok = PyArg_Parse(v, FMT, out);                                            \
        Py_DECREF(v);                                                                       \
        return ok ? 0 : option_error(what, key);                                            \
    }
/* opts[key], a str naming an entry of table (a `noun`), into *out (its value); -1 with InvalidInputError naming
 * the key, what it got and the names it takes otherwise. */
static int option_named(PyObject *opts, const char *what, const char *key, const named_value *table, const char *noun,
                        int *out) {
    PyObject *v = option(opts, what, key);
    if (!v) return -1;
    int rc = -1;
    if (PyUnicode_Check(v)) {
        for (const named_value *e = table; e->name && rc != 0; e++)
            if (PyUnicode_CompareWithASCIIString(v, e->name) == 0) {
                *out = e->value;
                rc = 0;
            }
    }
    if (rc != 0) {
        PyObject *names = PyUnicode_FromString(""), *joined = NULL;
        for (const named_value *e = table; names && e->name; e++) {
            joined = PyUnicode_FromFormat("%U%s'%s'", names, e == table ? "" : ", ", e->name);
            Py_SETREF(names, joined);
        }
        if (names)
            PyErr_Format(InvalidInputError, "%s: option '%s': %R is not a %s; pass one of %U", what, key, v, noun,
                         names);
        Py_XDECREF(names);
    }
    Py_DECREF(v);
    return rc;
}

DEFINE_OPTION(ll, long long, "L")
DEFINE_OPTION(int, int, "i")
DEFINE_OPTION(bool, int, "p")
DEFINE_OPTION(double, double, "d")
DEFINE_OPTION(u64, unsigned long long, "K")

/* Buffer i of g from option key (None allowed where optional); -1 with an exception on failure. */
static int take_buf(gen_args *g, int i, PyObject *opts, const char *what, const char *key, const char *fmt,
                    int writable, int optional) {
    PyObject *v = option(opts, what, key);
    if (!v) return -1;
    int rc = 0;
    if (v != Py_None || !optional) {
        rc = get_buffer(v, fmt, writable, key, &g->buf[i]);
        if (rc == 0) g->held |= 1 << i;
    }
    Py_DECREF(v);
    return rc;
}

/* A new reference to option key, a callable or None, into *out (owned by g: release_gen drops it); checked here,
 * else the prefill would run before the first call fails. */
static int take_callable(PyObject *opts, const char *what, const char *key, PyObject **out) {
    PyObject *v = option(opts, what, key);
    if (!v) return -1;
    if (v != Py_None && !PyCallable_Check(v)) {
        PyErr_Format(InvalidInputError, "%s: option '%s' must be callable or None, got %s", what, key,
                     Py_TYPE(v)->tp_name);
        Py_DECREF(v);
        return -1;
    }
    *out = v;
    return 0;
}

/* ---- the parameter structs ---------------------------------------------------------------------------------- */

void release_gen(gen_args *g) {
    for (int i = 0; i < G_NBUF; i++)
        if (g->held & (1 << i)) PyBuffer_Release(&g->buf[i]);
    g->held = 0;
    Py_CLEAR(g->cb.fn);
    Py_CLEAR(g->cb.logits_fn);
    Py_CLEAR(g->cb.stop_fn);
}

/* A token list (k,) as pointer and count (NULL, 0 when empty). */
static const int32_t *tokens_of(const gen_args *g, int i, int64_t *n) {
    *n = g->buf[i].len / 4;
    return *n ? g->buf[i].buf : NULL;
}

/* Sequences from tokens buffer t and offsets buffer o (n + 1,), values v (n,) or -1; checks their sizes. */
static int take_seqs(gen_args *g, int t, int o, int v, ha_token_seqs *q, const char *what, const char *name) {
    const int64_t n_off = g->buf[o].len / 8;
    *q = (ha_token_seqs){ 0 };
    if (n_off <= 1) return 0;
    if (g->buf[o].ndim != 1 || ((const int64_t *)g->buf[o].buf)[n_off - 1] != g->buf[t].len / 4 ||
        (v >= 0 && g->buf[v].len / 4 != n_off - 1)) {
        PyErr_Format(InvalidInputError, "%s: options %s_tokens, %s_offsets%s disagree in size", what, name, name,
                     v >= 0 ? " and the values" : "");
        return -1;
    }
    *q = (ha_token_seqs){
        .tokens = g->buf[t].buf, .offsets = g->buf[o].buf, .values = v >= 0 ? g->buf[v].buf : NULL, .n = n_off - 1
    };
    return 0;
}

int take_sampling(gen_args *g, PyObject *opts, const char *what, ha_sampling_params *sp) {
    long long min_new, top_k, no_repeat, feos_step, decay_start, begin_step;
    int do_sample, remove_invalid, renormalize;
    double temperature, top_p, rep, decay_factor, min_p, typical_p, eps, eta;
    unsigned long long seed;
    if (option_ll(opts, what, "min_new_tokens", &min_new) || option_bool(opts, what, "do_sample", &do_sample) ||
        option_double(opts, what, "temperature", &temperature) || option_ll(opts, what, "top_k", &top_k) ||
        option_double(opts, what, "top_p", &top_p) || option_double(opts, what, "repetition_penalty", &rep) ||
        option_u64(opts, what, "seed", &seed) || option_ll(opts, what, "no_repeat_ngram_size", &no_repeat) ||
        option_ll(opts, what, "forced_eos_step", &feos_step) ||
        option_bool(opts, what, "remove_invalid_values", &remove_invalid) ||
        option_double(opts, what, "decay_factor", &decay_factor) ||
        option_ll(opts, what, "decay_start", &decay_start) ||
        option_ll(opts, what, "begin_suppress_step", &begin_step) || option_double(opts, what, "min_p", &min_p) ||
        option_double(opts, what, "typical_p", &typical_p) || option_double(opts, what, "epsilon_cutoff", &eps) ||
        option_double(opts, what, "eta_cutoff", &eta) || option_bool(opts, what, "renormalize_logits", &renormalize) ||
        take_callable(opts, what, "logits_fn", &g->cb.logits_fn))
        return -1;
    if (take_buf(g, G_EOS, opts, what, "eos_token_id", "i", 0, 0) ||
        take_buf(g, G_BIAS_TOK, opts, what, "sequence_bias_tokens", "i", 0, 0) ||
        take_buf(g, G_BIAS_OFF, opts, what, "sequence_bias_offsets", "q", 0, 0) ||
        take_buf(g, G_BIAS_VAL, opts, what, "sequence_bias_values", "f", 0, 0) ||
        take_buf(g, G_BAD_TOK, opts, what, "bad_words_tokens", "i", 0, 0) ||
        take_buf(g, G_BAD_OFF, opts, what, "bad_words_offsets", "q", 0, 0) ||
        take_buf(g, G_BOS, opts, what, "forced_bos_token_id", "i", 0, 0) ||
        take_buf(g, G_FEOS, opts, what, "forced_eos_token_id", "i", 0, 0) ||
        take_buf(g, G_SUPPRESS, opts, what, "suppress_tokens", "i", 0, 0) ||
        take_buf(g, G_BEGIN, opts, what, "begin_suppress_tokens", "i", 0, 0))
        return -1;
    *sp = (ha_sampling_params){
        .do_sample = do_sample,
        .temperature = (float)temperature,
        .top_k = top_k,
        .top_p = (float)top_p,
        .repetition_penalty = (float)rep,
        .seed = seed,
        .no_repeat_ngram_size = no_repeat,
        .min_new_tokens = min_new,
        .forced_eos_step = feos_step,
        .remove_invalid_values = remove_invalid,
        .decay_factor = (float)decay_factor,
        .decay_start = decay_start,
        .begin_suppress_step = begin_step,
        .min_p = (float)min_p,
        .typical_p = (float)typical_p,
        .epsilon_cutoff = (float)eps,
        .eta_cutoff = (float)eta,
        .renormalize = renormalize,
        .on_logits = g->cb.logits_fn != Py_None ? call_logits : NULL,
        .logits_user = &g->cb,
    };
    sp->eos = tokens_of(g, G_EOS, &sp->n_eos);
    sp->forced_bos = tokens_of(g, G_BOS, &sp->n_forced_bos);
    sp->forced_eos = tokens_of(g, G_FEOS, &sp->n_forced_eos);
    sp->suppress = tokens_of(g, G_SUPPRESS, &sp->n_suppress);
    sp->begin_suppress = tokens_of(g, G_BEGIN, &sp->n_begin_suppress);
    if (take_seqs(g, G_BIAS_TOK, G_BIAS_OFF, G_BIAS_VAL, &sp->sequence_bias, what, "sequence_bias") ||
        take_seqs(g, G_BAD_TOK, G_BAD_OFF, -1, &sp->bad_words, what, "bad_words"))
        return -1;
    return 0;
}

/* The options both generation functions take (GENERATE_OPTIONS, SAMPLING_OPTIONS) into g, the buffers checked
 * against batch B and vocabulary V dimension by dimension (no product that could wrap); -1 with an exception on
 * failure (the caller releases what was taken). */
static int take_gen(gen_args *g, PyObject *opts, const char *what, int64_t B, int64_t V) {
    long long max_new;
    int pad, no_cache;
    double max_time;
    ha_sampling_params sp;
    if (take_sampling(g, opts, what, &sp) || option_ll(opts, what, "max_new_tokens", &max_new) ||
        option_int(opts, what, "pad_token_id", &pad) || option_double(opts, what, "max_time", &max_time) ||
        option_bool(opts, what, "no_cache", &no_cache) || take_callable(opts, what, "stop_fn", &g->cb.stop_fn) ||
        take_callable(opts, what, "on_tokens", &g->cb.fn) || take_buf(g, G_PROMPT, opts, what, "prompt", "i", 0, 0) ||
        take_buf(g, G_START, opts, what, "start", "q", 0, 0) || take_buf(g, G_OUT, opts, what, "out", "i", 1, 0) ||
        take_buf(g, G_SCORES, opts, what, "scores", "f", 1, 1) ||
        take_buf(g, G_LOGITS, opts, what, "logits_out", "f", 1, 1) ||
        take_buf(g, G_SOURCES, opts, what, "sources", "B", 1, 1) ||
        take_buf(g, G_SECONDS, opts, what, "seconds", "d", 1, 1))
        return -1;
    const Py_buffer *pr = &g->buf[G_PROMPT], *st = &g->buf[G_START], *out = &g->buf[G_OUT];
    const Py_buffer *sc = (g->held & (1 << G_SCORES)) ? &g->buf[G_SCORES] : NULL;
    const Py_buffer *lo = (g->held & (1 << G_LOGITS)) ? &g->buf[G_LOGITS] : NULL;
    const Py_buffer *so = (g->held & (1 << G_SOURCES)) ? &g->buf[G_SOURCES] : NULL;
    const Py_buffer *secs = (g->held & (1 << G_SECONDS)) ? &g->buf[G_SECONDS] : NULL;
    if (max_new < 1 || pr->ndim != 2 || pr->shape[0] != B || st->ndim != 1 || st->shape[0] != B || out->ndim != 2 ||
        out->shape[0] != B || out->shape[1] != max_new ||
        (sc && (sc->ndim != 3 || sc->shape[0] != max_new || sc->shape[1] != B || sc->shape[2] != V)) ||
        (lo && (lo->ndim != 3 || lo->shape[0] != max_new || lo->shape[1] != B || lo->shape[2] != V)) ||
        (so && (so->ndim != 2 || so->shape[0] != B || so->shape[1] != max_new)) ||
        (secs && (secs->ndim != 1 || secs->shape[0] != HA_SECONDS))) {
        PyErr_Format(InvalidInputError,
                     "%s: buffer shapes disagree with batch %lld, max_new_tokens %lld (and seconds with (%d,))", what,
                     (long long)B, max_new, (int)HA_SECONDS);
        return -1;
    }
    g->p = (ha_generate_params){
        .max_new_tokens = max_new,
        .eos = sp.eos,
        .n_eos = sp.n_eos,
        .pad_token_id = pad,
        .max_time = max_time,
        .sampling = sp,
        .on_tokens = g->cb.fn != Py_None ? call_python : NULL,
        .user = &g->cb,
        .should_stop = g->cb.stop_fn != Py_None ? call_stop : NULL,
        .stop_user = &g->cb,
        .logits_out = lo ? lo->buf : NULL,
        .sources = so ? so->buf : NULL,
        .no_cache = no_cache,
        .seconds = secs ? secs->buf : NULL,
    };
    return 0;
}

/* ---- the functions ------------------------------------------------------------------------------------------ */

/* generate(ctx, options: dict of GENERATE_OPTIONS and SAMPLING_OPTIONS) -> steps taken. */
PyObject *py_generate(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *ctx_o, *opts, *result = NULL;
    gen_args g = { .held = 0 };
    if (!PyArg_ParseTuple(args, "O!O:generate", &ContextType, &ctx_o, &opts)) return NULL;
    ContextObject *ctx = (ContextObject *)ctx_o;
    if (!context_lm(ctx)) return PyErr_Format(InvalidInputError, "Context is not initialized");
    ha_lm *lm = context_lm(ctx);
    if (check_options(opts, GENERATE_KEYS, "generate") || take_gen(&g, opts, "generate", lm->n_seq, lm->vocab_size) ||
        context_enter(ctx) != 0)
        goto cleanup;
    ha_status st;
    int64_t steps = 0;
    interrupt_scope intr;
    interrupt_begin(&intr);
    Py_BEGIN_ALLOW_THREADS
    st = ha_generate(lm, &g.p, g.buf[G_PROMPT].buf, g.buf[G_PROMPT].shape[1], g.buf[G_START].buf, g.buf[G_OUT].buf,
                     (g.held & (1 << G_SCORES)) ? g.buf[G_SCORES].buf : NULL, &steps);
    Py_END_ALLOW_THREADS
    ctx->busy = 0;
    adopt_external_error(ctx, &g.cb);
    if (!end_call(st, &intr, &g.cb)) result = PyLong_FromLongLong(steps);
cleanup:
    release_gen(&g);
    return result;
}

/* generate_assisted()'s result: the steps taken and the call's statistics (ha.h ha_assist_stats), read by name
 * (a tuple too, in this order). */
static PyStructSequence_Field ASSISTED_STATS_FIELDS[] = {
    { "steps", "new tokens decided per row (the columns of out written)" },
    { "num_draft_tokens", "draft tokens proposed, over the rows" },
    { "num_accepted_tokens", "draft tokens the target accepted, over the rows" },
    { "num_target_passes", "the target's verifying appends, one per round and row" },
    { "num_draft_passes", "the draft's appends" },
    { "num_assistant_tokens", "K at the end of the call (the heuristic schedules carry it to the next call)" },
    { "num_rounds", "rounds of the call" },
    { "num_ahead_passes", "draft passes made ahead, beside the target's forward" },
    { "num_ahead_used", "of those, the ones a later round used" },
    { "num_sibling_tokens", "token trees: siblings proposed beside the draft's chain, over the rows" },
    { "num_sibling_accepted", "token trees: siblings the target accepted, over the rows" },
    { NULL, NULL },
};

static PyStructSequence_Desc ASSISTED_STATS_DESC = {
    "habana_assist._core.AssistedStats",
    "generate_assisted()'s result: steps and the call's statistics, by name.",
    ASSISTED_STATS_FIELDS,
    11,
};

static PyTypeObject *AssistedStatsType;

/* A new AssistedStats of the values (in ASSISTED_STATS_FIELDS' order), or NULL with an exception. */
static PyObject *assisted_stats(const long long *values) {
    PyObject *r = PyStructSequence_New(AssistedStatsType);
    for (Py_ssize_t i = 0; r && i < ASSISTED_STATS_DESC.n_in_sequence; i++) {
        PyObject *v = PyLong_FromLongLong(values[i]);
        if (!v) Py_CLEAR(r);
        else PyStructSequence_SetItem(r, i, v);
    }
    return r;
}

/* The names of table's entries, in order, as a tuple of str. */
static PyObject *names_of(const named_value *table) {
    Py_ssize_t n = 0;
    while (table[n].name) n++;
    PyObject *t = PyTuple_New(n);
    for (Py_ssize_t i = 0; t && i < n; i++) {
        PyObject *s = PyUnicode_FromString(table[i].name);
        if (!s) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

/* The columns of tree_rounds (ha.h's HA_TREE_* fields), by name in their order: the module's TREE_FIELDS. */
static const named_value TREE_FIELDS[] = {
    { "start", HA_TREE_START },
    { "catch_up", HA_TREE_CATCH_UP },
    { "nodes", HA_TREE_NODES },
    { "path", HA_TREE_PATH },
    { NULL, 0 },
};
_Static_assert(sizeof TREE_FIELDS / sizeof *TREE_FIELDS == HA_TREE_FIELDS + 1, "a name for each tree_rounds column");

int generate_init(PyObject *m) {
    AssistedStatsType = PyStructSequence_NewType(&ASSISTED_STATS_DESC);
    if (!AssistedStatsType || PyModule_AddObjectRef(m, "AssistedStats", (PyObject *)AssistedStatsType) < 0) return -1;
    PyObject *tree_fields = names_of(TREE_FIELDS);
    if (!tree_fields || PyModule_AddObjectRef(m, "TREE_FIELDS", tree_fields) < 0) {
        Py_XDECREF(tree_fields);
        return -1;
    }
    Py_DECREF(tree_fields);
    PyObject *schedules = names_of(SCHEDULES), *acceptances = names_of(ACCEPTANCES), *shapes = names_of(TREE_SHAPES);
    int rc = -1;
    if (schedules && acceptances && shapes && PyModule_AddObjectRef(m, "SCHEDULES", schedules) == 0 &&
        PyModule_AddObjectRef(m, "ACCEPTANCES", acceptances) == 0 &&
        PyModule_AddObjectRef(m, "TREE_SHAPES", shapes) == 0)
        rc = 0;
    Py_XDECREF(schedules);
    Py_XDECREF(acceptances);
    Py_XDECREF(shapes);
    return rc;
}

/* generate_assisted(target_ctx, draft_ctx | None, options: dict of GENERATE_OPTIONS, SAMPLING_OPTIONS and
 * ASSISTED_OPTIONS) -> AssistedStats */
PyObject *py_generate_assisted(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *tctx_o, *dctx_o, *opts, *result = NULL;
    long long K, pl_num, pl_ngram, tree_width;
    int schedule, acceptance, overlap, tree_shape, entered = 0;
    double threshold;
    gen_args g = { .held = 0 };
    if (!PyArg_ParseTuple(args, "O!OO:generate_assisted", &ContextType, &tctx_o, &dctx_o, &opts)) return NULL;
    ContextObject *tctx = (ContextObject *)tctx_o, *dctx = NULL;
    if (dctx_o != Py_None) {
        if (!PyObject_TypeCheck(dctx_o, &ContextType) || dctx_o == tctx_o)
            return PyErr_Format(InvalidInputError, "the draft needs a Context of its own (not the target's)");
        dctx = (ContextObject *)dctx_o;
    }
    if (!context_lm(tctx) || (dctx && !context_lm(dctx)))
        return PyErr_Format(InvalidInputError, "Context is not initialized");
    ha_lm *lm = context_lm(tctx), *dlm = dctx ? context_lm(dctx) : NULL;
    const char *what = "generate_assisted";
    if (check_options(opts, ASSISTED_KEYS, what) || take_gen(&g, opts, what, lm->n_seq, lm->vocab_size) ||
        option_ll(opts, what, "num_assistant_tokens", &K) ||
        option_named(opts, what, "schedule", SCHEDULES, "schedule", &schedule) ||
        option_double(opts, what, "confidence_threshold", &threshold) ||
        option_named(opts, what, "acceptance", ACCEPTANCES, "acceptance mode", &acceptance) ||
        option_ll(opts, what, "prompt_lookup_num_tokens", &pl_num) ||
        option_ll(opts, what, "max_matching_ngram_size", &pl_ngram) || option_bool(opts, what, "overlap", &overlap) ||
        option_ll(opts, what, "tree_width", &tree_width) ||
        option_named(opts, what, "tree_shape", TREE_SHAPES, "tree shape", &tree_shape) ||
        take_buf(&g, G_PROPOSED, opts, what, "proposed_at", "q", 1, 0) ||
        take_buf(&g, G_ACCEPTED, opts, what, "accepted_at", "q", 1, 0) ||
        take_buf(&g, G_DCOSTS, opts, what, "draft_costs", "d", 0, 1) ||
        take_buf(&g, G_TCOSTS, opts, what, "target_costs", "d", 0, 1) ||
        take_buf(&g, G_D1COSTS, opts, what, "draft_first_costs", "d", 0, 1) ||
        take_buf(&g, G_STATE, opts, what, "cost_state", "d", 1, 1) ||
        take_buf(&g, G_TREE_COUNTS, opts, what, "tree_counts", "q", 1, 1) ||
        take_buf(&g, G_TREE_ROUNDS, opts, what, "tree_rounds", "q", 1, 1) ||
        take_buf(&g, G_TREE_NODES, opts, what, "tree_nodes", "i", 1, 1))
        goto cleanup;
    const Py_buffer *prop = &g.buf[G_PROPOSED], *acc = &g.buf[G_ACCEPTED];
    const Py_buffer *dcosts = (g.held & (1 << G_DCOSTS)) ? &g.buf[G_DCOSTS] : NULL;
    const Py_buffer *tcosts = (g.held & (1 << G_TCOSTS)) ? &g.buf[G_TCOSTS] : NULL;
    const Py_buffer *d1costs = (g.held & (1 << G_D1COSTS)) ? &g.buf[G_D1COSTS] : NULL;
    const Py_buffer *state = (g.held & (1 << G_STATE)) ? &g.buf[G_STATE] : NULL;
    if (state && (state->ndim != 1 || state->shape[0] != HA_COST_STATE)) {
        PyErr_Format(InvalidInputError, "generate_assisted: cost_state must be 1-D float64 of %d", HA_COST_STATE);
        goto cleanup;
    }
    if ((dcosts && dcosts->ndim != 1) || (tcosts && tcosts->ndim != 1) || (d1costs && d1costs->ndim != 1)) {
        PyErr_Format(InvalidInputError,
                     "generate_assisted: draft_costs, target_costs and draft_first_costs must be 1-D float64");
        goto cleanup;
    }
    const long long max_new = g.p.max_new_tokens;
    if (prop->ndim != 1 || prop->shape[0] != max_new || acc->ndim != 1 || acc->shape[0] != max_new) {
        PyErr_Format(InvalidInputError,
                     "generate_assisted: proposed_at and accepted_at need max_new_tokens=%lld entries", max_new);
        goto cleanup;
    }
    const int tree_bufs = !!(g.held & (1 << G_TREE_COUNTS)) + !!(g.held & (1 << G_TREE_ROUNDS)) +
                          !!(g.held & (1 << G_TREE_NODES));
    const Py_buffer *tc = &g.buf[G_TREE_COUNTS], *tr = &g.buf[G_TREE_ROUNDS], *tn = &g.buf[G_TREE_NODES];
    if (tree_bufs != 0 &&
        (tree_bufs != 3 || tc->ndim != 1 || tc->shape[0] != lm->n_seq || tr->ndim != 3 || tr->shape[0] != lm->n_seq ||
         tr->shape[1] != max_new || tr->shape[2] != HA_TREE_FIELDS || tn->ndim != 4 || tn->shape[0] != lm->n_seq ||
         tn->shape[1] != max_new || tn->shape[2] != 3)) {
        PyErr_Format(InvalidInputError,
                     "generate_assisted: tree_counts (%lld,), tree_rounds (%lld, %lld, %d) and tree_nodes (%lld, %lld, "
                     "3, nodes) go together, or all three None",
                     (long long)lm->n_seq, (long long)lm->n_seq, max_new, HA_TREE_FIELDS, (long long)lm->n_seq,
                     max_new);
        goto cleanup;
    }
    ha_tree_record record = { 0 };
    if (tree_bufs)
        record = (ha_tree_record){
            .max_nodes = tn->shape[3], .n_rounds = tc->buf, .rounds = tr->buf, .nodes = tn->buf
        };
    ha_assist_params p = {
        .gen = g.p,
        .num_assistant_tokens = K,
        .schedule = (ha_schedule)schedule,
        .confidence_threshold = (float)threshold,
        .acceptance = (ha_acceptance)acceptance,
        .prompt_lookup_num_tokens = pl_num,
        .max_matching_ngram_size = pl_ngram,
        .draft_costs = dcosts ? dcosts->buf : NULL,
        .n_draft_costs = dcosts ? dcosts->shape[0] : 0,
        .target_costs = tcosts ? tcosts->buf : NULL,
        .n_target_costs = tcosts ? tcosts->shape[0] : 0,
        .draft_first_costs = d1costs ? d1costs->buf : NULL,
        .n_draft_first_costs = d1costs ? d1costs->shape[0] : 0,
        .overlap = overlap && dctx && dctx->c, /* an external draft's append needs the GIL, held by the target's */
        .cost_state = state ? state->buf : NULL,
        .tree_width = tree_width,
        .tree_dynamic = tree_shape,
        .tree_record = tree_bufs ? &record : NULL,
    };
    ha_assist_stats stats = { .proposed_at = prop->buf, .accepted_at = acc->buf };
    if (context_enter(tctx) != 0) goto cleanup;
    entered = 1;
    if (dctx && context_enter(dctx) != 0) goto cleanup;
    entered |= dctx ? 2 : 0;
    ha_status st;
    int64_t steps = 0;
    interrupt_scope intr;
    interrupt_begin(&intr);
    Py_BEGIN_ALLOW_THREADS
    st = ha_generate_assisted(lm, dlm, &p, g.buf[G_PROMPT].buf, g.buf[G_PROMPT].shape[1], g.buf[G_START].buf,
                              g.buf[G_OUT].buf, (g.held & (1 << G_SCORES)) ? g.buf[G_SCORES].buf : NULL, &steps,
                              &stats);
    Py_END_ALLOW_THREADS
    adopt_external_error(tctx, &g.cb);
    adopt_external_error(dctx, &g.cb);
    if (end_call(st, &intr, &g.cb)) goto cleanup;
    const long long values[] = { (long long)steps,
                                 (long long)stats.num_draft_tokens,
                                 (long long)stats.num_accepted_tokens,
                                 (long long)stats.num_target_passes,
                                 (long long)stats.num_draft_passes,
                                 (long long)stats.num_assistant_tokens,
                                 (long long)stats.num_rounds,
                                 (long long)stats.num_ahead_passes,
                                 (long long)stats.num_ahead_used,
                                 (long long)stats.num_sibling_tokens,
                                 (long long)stats.num_sibling_accepted };
    result = assisted_stats(values);
cleanup:
    if (entered & 1) tctx->busy = 0;
    if (entered & 2) dctx->busy = 0;
    release_gen(&g);
    return result;
}
