/* generate() and generate_assisted(): their arguments acquired and checked (gen_args, binding.h), the core's loop
 * run without the GIL. */
#include "binding.h"

void release_gen(gen_args *g) {
    for (int i = 0; i < G_NBUF; i++)
        if (g->held & (1 << i)) PyBuffer_Release(&g->buf[i]);
    g->held = 0;
}

/* Takes buffer i of obj (None allowed where optional) into g; -1 with an exception on failure. */
static int take_buf(gen_args *g, int i, PyObject *obj, const char *fmt, int writable, int optional, const char *what) {
    if (obj == Py_None && optional) return 0;
    if (get_buffer(obj, fmt, writable, what, &g->buf[i]) != 0) return -1;
    g->held |= 1 << i;
    return 0;
}

/* A token list (k,) as pointer and count (NULL, 0 when empty). */
static const int32_t *tokens_of(const gen_args *g, int i, int64_t *n) {
    *n = g->buf[i].len / 4;
    return *n ? g->buf[i].buf : NULL;
}

/* Sequences from tokens buffer t and offsets buffer o (n + 1,), values v (n,) or -1; checks their sizes. */
static int take_seqs(gen_args *g, int t, int o, int v, ha_token_seqs *q, const char *what) {
    const int64_t n_off = g->buf[o].len / 8;
    *q = (ha_token_seqs){ 0 };
    if (n_off <= 1) return 0;
    if (g->buf[o].ndim != 1 || ((const int64_t *)g->buf[o].buf)[n_off - 1] != g->buf[t].len / 4 ||
        (v >= 0 && g->buf[v].len / 4 != n_off - 1)) {
        PyErr_Format(InvalidInputError, "generate: %s's tokens, offsets and values disagree in size", what);
        return -1;
    }
    *q = (ha_token_seqs){ .tokens = g->buf[t].buf, .offsets = g->buf[o].buf, .values = v >= 0 ? g->buf[v].buf : NULL,
                          .n = n_off - 1 };
    return 0;
}

int take_sampling(gen_args *g, long long min_new, PyObject *eos_o, int do_sample, double temperature,
                  long long top_k, double top_p, double rep, unsigned long long seed, PyObject *procs_o,
                  ha_sampling_params *sp, PyObject **stop_fn_o, PyObject **lout_o, int *no_cache) {
    PyObject *bias_t, *bias_o, *bias_v, *bad_t, *bad_o, *bos_o, *feos_o, *sup_o, *begin_o, *logits_fn;
    long long no_repeat, feos_step, decay_start, begin_step;
    int remove_invalid, renormalize;
    double decay_factor, min_p, typical_p, eps, eta;
    if (!PyTuple_Check(procs_o)) {
        PyErr_SetString(InvalidInputError, "generate: procs must be a tuple");
        return -1;
    }
    if (!PyArg_ParseTuple(procs_o, "OOOLOOOOLpdLOOLddddpOOOp:procs", &bias_t, &bias_o, &bias_v, &no_repeat, &bad_t,
                          &bad_o, &bos_o, &feos_o, &feos_step, &remove_invalid, &decay_factor, &decay_start, &sup_o,
                          &begin_o, &begin_step, &min_p, &typical_p, &eps, &eta, &renormalize, &logits_fn, stop_fn_o,
                          lout_o, no_cache))
        return -1;
    if (take_buf(g, G_EOS, eos_o, "i", 0, 0, "eos") ||
        take_buf(g, G_BIAS_TOK, bias_t, "i", 0, 0, "sequence_bias tokens") ||
        take_buf(g, G_BIAS_OFF, bias_o, "q", 0, 0, "sequence_bias offsets") ||
        take_buf(g, G_BIAS_VAL, bias_v, "f", 0, 0, "sequence_bias values") ||
        take_buf(g, G_BAD_TOK, bad_t, "i", 0, 0, "bad_words_ids tokens") ||
        take_buf(g, G_BAD_OFF, bad_o, "q", 0, 0, "bad_words_ids offsets") ||
        take_buf(g, G_BOS, bos_o, "i", 0, 0, "forced_bos_token_id") ||
        take_buf(g, G_FEOS, feos_o, "i", 0, 0, "forced_eos_token_id") ||
        take_buf(g, G_SUPPRESS, sup_o, "i", 0, 0, "suppress_tokens") ||
        take_buf(g, G_BEGIN, begin_o, "i", 0, 0, "begin_suppress_tokens"))
        return -1;
    PyObject *fns[] = { logits_fn, *stop_fn_o };
    for (int i = 0; i < 2; i++)
        if (fns[i] != Py_None && !PyCallable_Check(fns[i])) { /* else the prefill would run before the first call fails */
            PyErr_SetString(InvalidInputError, "generate: the token, logits and stop callbacks must be callable or None");
            return -1;
        }
    g->cb.logits_fn = logits_fn;
    g->cb.stop_fn = *stop_fn_o;
    *sp = (ha_sampling_params){
        .do_sample = do_sample, .temperature = (float)temperature, .top_k = top_k, .top_p = (float)top_p,
        .repetition_penalty = (float)rep, .seed = seed, .no_repeat_ngram_size = no_repeat, .min_new_tokens = min_new,
        .forced_eos_step = feos_step, .remove_invalid_values = remove_invalid, .decay_factor = (float)decay_factor,
        .decay_start = decay_start, .begin_suppress_step = begin_step, .min_p = (float)min_p,
        .typical_p = (float)typical_p, .epsilon_cutoff = (float)eps, .eta_cutoff = (float)eta, .renormalize = renormalize,
        .on_logits = logits_fn != Py_None ? call_logits : NULL, .logits_user = &g->cb,
    };
    sp->eos = tokens_of(g, G_EOS, &sp->n_eos);
    sp->forced_bos = tokens_of(g, G_BOS, &sp->n_forced_bos);
    sp->forced_eos = tokens_of(g, G_FEOS, &sp->n_forced_eos);
    sp->suppress = tokens_of(g, G_SUPPRESS, &sp->n_suppress);
    sp->begin_suppress = tokens_of(g, G_BEGIN, &sp->n_begin_suppress);
    if (take_seqs(g, G_BIAS_TOK, G_BIAS_OFF, G_BIAS_VAL, &sp->sequence_bias, "sequence_bias") ||
        take_seqs(g, G_BAD_TOK, G_BAD_OFF, -1, &sp->bad_words, "bad_words_ids"))
        return -1;
    return 0;
}

/* Acquires the buffers and checks them against batch B and vocabulary V dimension by dimension (no product
 * that could wrap); on failure sets an exception, releases what it took and returns -1. */
static int take_gen(gen_args *g, PyObject *prompt_o, PyObject *start_o, long long max_new, long long min_new,
                    PyObject *eos_o, int pad, int do_sample, double temperature, long long top_k, double top_p,
                    double rep, unsigned long long seed, double max_time, PyObject *procs_o, PyObject *out_o,
                    PyObject *scores_o, PyObject *src_o, PyObject *cb_o, int64_t B, int64_t V) {
    PyObject *stop_fn, *lout_o;
    int no_cache;
    ha_sampling_params sp;
    if (take_sampling(g, min_new, eos_o, do_sample, temperature, top_k, top_p, rep, seed, procs_o, &sp, &stop_fn,
                      &lout_o, &no_cache) ||
        take_buf(g, G_PROMPT, prompt_o, "i", 0, 0, "prompt") || take_buf(g, G_START, start_o, "q", 0, 0, "start") ||
        take_buf(g, G_OUT, out_o, "i", 1, 0, "out") || take_buf(g, G_SCORES, scores_o, "f", 1, 1, "scores") ||
        take_buf(g, G_LOGITS, lout_o, "f", 1, 1, "logits_out") || take_buf(g, G_SOURCES, src_o, "B", 1, 1, "sources"))
        goto fail;
    const Py_buffer *pr = &g->buf[G_PROMPT], *st = &g->buf[G_START], *out = &g->buf[G_OUT];
    const Py_buffer *sc = (g->held & (1 << G_SCORES)) ? &g->buf[G_SCORES] : NULL;
    const Py_buffer *lo = (g->held & (1 << G_LOGITS)) ? &g->buf[G_LOGITS] : NULL;
    const Py_buffer *so = (g->held & (1 << G_SOURCES)) ? &g->buf[G_SOURCES] : NULL;
    if (max_new < 1 || pr->ndim != 2 || pr->shape[0] != B || st->ndim != 1 || st->shape[0] != B || out->ndim != 2 ||
        out->shape[0] != B || out->shape[1] != max_new ||
        (sc && (sc->ndim != 3 || sc->shape[0] != max_new || sc->shape[1] != B || sc->shape[2] != V)) ||
        (lo && (lo->ndim != 3 || lo->shape[0] != max_new || lo->shape[1] != B || lo->shape[2] != V)) ||
        (so && (so->ndim != 2 || so->shape[0] != B || so->shape[1] != max_new))) {
        PyErr_Format(InvalidInputError, "generate: buffer shapes disagree with batch %lld, max_new_tokens %lld", (long long)B,
                     max_new);
        goto fail;
    }
    if (cb_o != Py_None && !PyCallable_Check(cb_o)) {
        PyErr_SetString(InvalidInputError, "generate: the token, logits and stop callbacks must be callable or None");
        goto fail;
    }
    g->cb.fn = cb_o;
    g->p = (ha_generate_params){
        .max_new_tokens = max_new, .eos = sp.eos, .n_eos = sp.n_eos, .pad_token_id = pad, .max_time = max_time,
        .sampling = sp, .on_tokens = cb_o != Py_None ? call_python : NULL, .user = &g->cb,
        .should_stop = stop_fn != Py_None ? call_stop : NULL, .stop_user = &g->cb,
        .logits_out = lo ? lo->buf : NULL, .sources = so ? so->buf : NULL, .no_cache = no_cache,
    };
    return 0;
fail:
    release_gen(g);
    return -1;
}

#define GEN_FORMAT "OOLLOipdLddKdO"
#define GEN_ARGS(g) &g##prompt_o, &g##start_o, &g##max_new, &g##min_new, &g##eos_o, &g##pad, &g##do_sample, \
    &g##temperature, &g##top_k, &g##top_p, &g##rep, &g##seed, &g##max_time, &g##procs_o
#define GEN_VALUES g_prompt_o, g_start_o, g_max_new, g_min_new, g_eos_o, g_pad, g_do_sample, g_temperature, g_top_k, \
    g_top_p, g_rep, g_seed, g_max_time, g_procs_o
#define GEN_DECLARE                                                                                            \
    PyObject *g_prompt_o, *g_start_o, *g_eos_o, *g_procs_o;                                                    \
    long long g_max_new, g_min_new, g_top_k;                                                                   \
    int g_pad, g_do_sample;                                                                                    \
    double g_temperature, g_top_p, g_rep, g_max_time;                                                          \
    unsigned long long g_seed

/* generate(ctx, <generation arguments>, out, scores, sources, callback) -> steps taken; see gen_args. */
PyObject *py_generate(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *ctx_o, *out_o, *scores_o, *src_o, *cb_o;
    GEN_DECLARE;
    gen_args g = { .held = 0 };
    if (!PyArg_ParseTuple(args, "O!" GEN_FORMAT "OOOO", &ContextType, &ctx_o, GEN_ARGS(g_), &out_o, &scores_o, &src_o, &cb_o))
        return NULL;
    ContextObject *ctx = (ContextObject *)ctx_o;
    if (!context_lm(ctx)) return PyErr_Format(InvalidInputError, "Context is not initialized");
    ha_lm *lm = context_lm(ctx);
    if (take_gen(&g, GEN_VALUES, out_o, scores_o, src_o, cb_o, lm->n_seq, lm->vocab_size) != 0) return NULL;
    PyObject *result = NULL;
    if (context_enter(ctx) == 0) {
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
    }
    release_gen(&g);
    return result;
}

/* generate_assisted(target_ctx, draft_ctx | None, <generation arguments>, num_assistant_tokens, schedule,
 *                   confidence_threshold, acceptance, prompt_lookup_num_tokens, max_matching_ngram_size,
 *                   draft_costs float64 (n,) | None, target_costs float64 (m,) | None (the cost schedule's: a draft
 *                   step for 1 .. n rows, a target append of 1 .. m tokens), out, scores,
 *                   proposed_at int64 (N,), accepted_at int64 (N,), sources, callback, overlap,
 *                   cost_state float64 (HA_COST_STATE,) | None (ha_assist_params.cost_state: read and written))
 * -> (steps, num_draft_tokens, num_accepted_tokens, num_target_passes, num_draft_passes, num_assistant_tokens,
 *     num_rounds, num_ahead_passes, num_ahead_used)
 * overlap (ha_assist_params.overlap) is honoured only with a native draft, whose append may run on another thread. */
PyObject *py_generate_assisted(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *tctx_o, *dctx_o, *dcosts_o, *tcosts_o, *out_o, *scores_o, *prop_o, *acc_o, *src_o, *cb_o, *state_o,
        *result = NULL;
    GEN_DECLARE;
    long long K, pl_num, pl_ngram;
    int schedule, acceptance, overlap, entered = 0;
    double threshold;
    gen_args g = { .held = 0 };
    Py_buffer prop = { 0 }, acc = { 0 }, dcosts = { 0 }, tcosts = { 0 }, state = { 0 };
    int stats_held = 0;
    if (!PyArg_ParseTuple(args, "O!O" GEN_FORMAT "LidiLLOOOOOOOOpO", &ContextType, &tctx_o, &dctx_o, GEN_ARGS(g_), &K,
                          &schedule, &threshold, &acceptance, &pl_num, &pl_ngram, &dcosts_o, &tcosts_o, &out_o, &scores_o,
                          &prop_o, &acc_o, &src_o, &cb_o, &overlap, &state_o))
        return NULL;
    ContextObject *tctx = (ContextObject *)tctx_o, *dctx = NULL;
    if (dctx_o != Py_None) {
        if (!PyObject_TypeCheck(dctx_o, &ContextType) || dctx_o == tctx_o)
            return PyErr_Format(InvalidInputError, "the draft needs a Context of its own (not the target's)");
        dctx = (ContextObject *)dctx_o;
    }
    if (!context_lm(tctx) || (dctx && !context_lm(dctx))) return PyErr_Format(InvalidInputError, "Context is not initialized");
    ha_lm *lm = context_lm(tctx), *dlm = dctx ? context_lm(dctx) : NULL;
    if (take_gen(&g, GEN_VALUES, out_o, scores_o, src_o, cb_o, lm->n_seq, lm->vocab_size) != 0) return NULL;
    if (get_buffer(prop_o, "q", 1, "proposed_at", &prop) != 0) goto cleanup;
    stats_held |= 1;
    if (get_buffer(acc_o, "q", 1, "accepted_at", &acc) != 0) goto cleanup;
    stats_held |= 2;
    if (dcosts_o != Py_None) {
        if (get_buffer(dcosts_o, "d", 0, "draft_costs", &dcosts) != 0) goto cleanup;
        stats_held |= 4;
    }
    if (tcosts_o != Py_None) {
        if (get_buffer(tcosts_o, "d", 0, "target_costs", &tcosts) != 0) goto cleanup;
        stats_held |= 8;
    }
    if (state_o != Py_None) {
        if (get_buffer(state_o, "d", 1, "cost_state", &state) != 0) goto cleanup;
        stats_held |= 16;
        if (state.ndim != 1 || state.shape[0] != HA_COST_STATE) {
            PyErr_Format(InvalidInputError, "generate_assisted: cost_state must be 1-D float64 of %d", HA_COST_STATE);
            goto cleanup;
        }
    }
    if (((stats_held & 4) && dcosts.ndim != 1) || ((stats_held & 8) && tcosts.ndim != 1)) {
        PyErr_Format(InvalidInputError, "generate_assisted: draft_costs and target_costs must be 1-D float64");
        goto cleanup;
    }
    if (prop.ndim != 1 || prop.shape[0] != g_max_new || acc.ndim != 1 || acc.shape[0] != g_max_new) {
        PyErr_Format(InvalidInputError, "generate_assisted: proposed_at and accepted_at need max_new_tokens=%lld entries",
                     g_max_new);
        goto cleanup;
    }
    ha_assist_params p = {
        .gen = g.p, .num_assistant_tokens = K, .schedule = (ha_schedule)schedule, .confidence_threshold = (float)threshold,
        .acceptance = (ha_acceptance)acceptance, .prompt_lookup_num_tokens = pl_num, .max_matching_ngram_size = pl_ngram,
        .draft_costs = (stats_held & 4) ? dcosts.buf : NULL, .n_draft_costs = (stats_held & 4) ? dcosts.shape[0] : 0,
        .target_costs = (stats_held & 8) ? tcosts.buf : NULL, .n_target_costs = (stats_held & 8) ? tcosts.shape[0] : 0,
        .overlap = overlap && dctx && dctx->c, /* an external draft's append needs the GIL, held by the target's */
        .cost_state = (stats_held & 16) ? state.buf : NULL,
    };
    ha_assist_stats stats = { .proposed_at = prop.buf, .accepted_at = acc.buf };
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
                              g.buf[G_OUT].buf, (g.held & (1 << G_SCORES)) ? g.buf[G_SCORES].buf : NULL, &steps, &stats);
    Py_END_ALLOW_THREADS
    adopt_external_error(tctx, &g.cb);
    adopt_external_error(dctx, &g.cb);
    if (end_call(st, &intr, &g.cb)) goto cleanup;
    result = Py_BuildValue("LLLLLLLLL", (long long)steps, (long long)stats.num_draft_tokens,
                           (long long)stats.num_accepted_tokens, (long long)stats.num_target_passes,
                           (long long)stats.num_draft_passes, (long long)stats.num_assistant_tokens,
                           (long long)stats.num_rounds, (long long)stats.num_ahead_passes,
                           (long long)stats.num_ahead_used);
cleanup:
    if (entered & 1) tctx->busy = 0;
    if (entered & 2) dctx->busy = 0;
    if (stats_held & 1) PyBuffer_Release(&prop);
    if (stats_held & 2) PyBuffer_Release(&acc);
    if (stats_held & 4) PyBuffer_Release(&dcosts);
    if (stats_held & 8) PyBuffer_Release(&tcosts);
    if (stats_held & 16) PyBuffer_Release(&state);
    release_gen(&g);
    return result;
}
