/* habana_assist._core: the only C that includes Python.h.
 *
 * Buffers in (through the buffer protocol, checked for format, contiguity and size), exceptions out
 * (raise_status, the one place core status codes become Python exceptions), the GIL released around every
 * core call. Every function has one cleanup exit that releases what it acquired. */
#define _DEFAULT_SOURCE /* sigaction's SA_ flags */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "../ha.h"

/* Exception classes from habana_assist.errors, looked up once at import. */
static PyObject *InvalidInputError, *CacheCapacityError, *UnsupportedModelError, *OutOfMemoryError, *CoreError;

static PyObject *raise_status(ha_status st) {
    PyObject *cls;
    switch (st) {
    case HA_ERR_INVALID: cls = InvalidInputError; break;
    case HA_ERR_CAPACITY: cls = CacheCapacityError; break;
    case HA_ERR_UNSUPPORTED: cls = UnsupportedModelError; break;
    case HA_ERR_NOMEM: cls = OutOfMemoryError; break;
    case HA_ERR_INTERRUPTED: cls = PyExc_KeyboardInterrupt; break; /* interrupt_end raises the handler's own first */
    default: cls = CoreError; break;
    }
    PyErr_SetString(cls, ha_last_error());
    return NULL;
}

/* ---- interrupts -----------------------------------------------------------------------------------------
 * Ctrl-C while the core runs without the GIL. During a core call made on the main thread, SIGINT's C handler is
 * ours, chained to the one that was there (Python's, which trips its own flag as before): it counts the signal,
 * so the core's interrupt poll (ha.h) notices it with one atomic load and only then takes the GIL to run
 * Python's signal handlers (PyErr_CheckSignals). If one raised (KeyboardInterrupt), the core stops at that poll
 * and the exception is raised when the call returns; if none did (a handler that only logs), the work goes on.
 * Calls on other threads are not interrupted: Python delivers signals to the main thread only. A callback that
 * replaces SIGINT's handler (signal.signal) during a call takes the chain away until that call returns. */
static atomic_uint sigint_count;   /* SIGINTs seen by on_sigint */
static struct sigaction chained;   /* the action on_sigint forwards to, saved when it was installed */
static int chain_depth;            /* main-thread calls in progress that installed or joined it (GIL held) */
static unsigned long main_thread;  /* threading.main_thread().ident */

static void on_sigint(int sig, siginfo_t *info, void *uctx) {
    atomic_fetch_add_explicit(&sigint_count, 1, memory_order_relaxed);
    if (chained.sa_flags & SA_SIGINFO) chained.sa_sigaction(sig, info, uctx);
    else if (chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN) chained.sa_handler(sig);
}

static int sigint_is_ours(const struct sigaction *a) { return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == on_sigint; }

/* Installs on_sigint in front of the current SIGINT action; 0 if there is nothing to chain to (SIGINT ignored,
 * or left to its default, which ends the process anyway). */
static int chain_sigint(void) {
    struct sigaction cur, ours;
    if (sigaction(SIGINT, NULL, &cur) != 0) return 0;
    if (sigint_is_ours(&cur)) return 1; /* left in place by a fork inside a call */
    if (!(cur.sa_flags & SA_SIGINFO) && (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN)) return 0;
    chained = cur;
    ours = cur;
    ours.sa_sigaction = on_sigint;
    ours.sa_flags = cur.sa_flags | SA_SIGINFO;
    return sigaction(SIGINT, &ours, NULL) == 0;
}

/* Puts the chained action back, unless someone replaced ours meanwhile (signal.signal in a callback). */
static void unchain_sigint(void) {
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) == 0 && sigint_is_ours(&cur)) (void)sigaction(SIGINT, &chained, NULL);
}

/* One core call's interrupt: begun with the GIL held before the call, ended with it held after. */
typedef struct interrupt_scope {
    ha_interrupt it;
    const ha_interrupt *prev;            /* the thread's interrupt before (a call inside a callback nests) */
    unsigned seen;                       /* sigint_count already looked at */
    int chained;                         /* this call joined the SIGINT chain */
    PyObject *exc_type, *exc_value, *exc_tb; /* what a signal handler raised */
} interrupt_scope;

static int poll_signals(void *user) {
    interrupt_scope *s = user;
    unsigned n = atomic_load_explicit(&sigint_count, memory_order_relaxed);
    if (n == s->seen) return 0;
    s->seen = n;
    PyGILState_STATE g = PyGILState_Ensure();
    int stop = PyErr_CheckSignals() != 0;
    if (stop) PyErr_Fetch(&s->exc_type, &s->exc_value, &s->exc_tb);
    PyGILState_Release(g);
    return stop;
}

static void interrupt_begin(interrupt_scope *s) {
    /* seen is read first: a SIGINT that comes while the chain is installed is then polled, not missed */
    *s = (interrupt_scope){ .it = { poll_signals, s }, .seen = atomic_load_explicit(&sigint_count, memory_order_relaxed) };
    if (PyThread_get_thread_ident() == main_thread && (chain_depth > 0 || chain_sigint())) {
        chain_depth++;
        s->chained = 1;
    }
    s->prev = ha_set_interrupt(s->chained ? &s->it : NULL);
}

/* In a child forked during a call (by a callback, on any thread), the forking thread is the only one and Python
 * makes it the main thread; no call of the parent's is in progress there. */
static void interrupt_after_fork(void) {
    main_thread = PyThread_get_thread_ident();
    chain_depth = 0;
    unchain_sigint();
}

/* Returns 1 with the handler's exception set if a signal handler raised during the call (whatever the call
 * returned: the exception is never dropped), else 0. */
static int interrupt_end(interrupt_scope *s) {
    ha_set_interrupt(s->prev);
    if (s->chained && --chain_depth == 0) unchain_sigint();
    if (!s->exc_type) return 0;
    PyErr_Restore(s->exc_type, s->exc_value, s->exc_tb);
    s->exc_type = s->exc_value = s->exc_tb = NULL;
    return 1;
}

static int get_buffer(PyObject *obj, const char *fmt, int writable, const char *what, Py_buffer *view);

/* Python callables called from inside a generation loop that runs without the GIL: the GIL is taken for each
 * call, and an exception one raises stops the loop and is re-raised when the loop returns (the three share that
 * slot: the loop stops at the first). fn(row, tokens: list of int) is told decided tokens; logits_fn(row,
 * tokens: bytes of int32, scores: bytearray of float32) processes scores and returns None (changed in place) or
 * an object with a float32 buffer of vocab items; stop_fn(row, tokens: bytes of int32, scores: bytes of float32)
 * returns true to end the row. Any may be NULL. */
typedef struct py_callback {
    PyObject *fn, *logits_fn, *stop_fn;
    PyObject *exc_type, *exc_value, *exc_tb;
} py_callback;

static int call_python(void *user, int64_t row, const int32_t *tokens, int64_t n) {
    py_callback *cb = user;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = 0;
    PyObject *list = PyList_New((Py_ssize_t)n), *res = NULL;
    for (int64_t i = 0; list && i < n; i++) PyList_SET_ITEM(list, i, PyLong_FromLong(tokens[i]));
    if (list) res = PyObject_CallFunction(cb->fn, "LO", (long long)row, list);
    if (!res) {
        PyErr_Fetch(&cb->exc_type, &cb->exc_value, &cb->exc_tb);
        rc = 1;
    }
    Py_XDECREF(res);
    Py_XDECREF(list);
    PyGILState_Release(g);
    return rc;
}

static int call_logits(void *user, int64_t row, const int32_t *tokens, int64_t n, float *scores, int64_t vocab) {
    py_callback *cb = user;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = 1;
    Py_buffer view = { 0 };
    PyObject *ids = PyBytes_FromStringAndSize((const char *)tokens, (Py_ssize_t)(n * 4));
    PyObject *buf = PyByteArray_FromStringAndSize((const char *)scores, (Py_ssize_t)(vocab * 4)), *res = NULL;
    if (ids && buf) res = PyObject_CallFunction(cb->logits_fn, "LOO", (long long)row, ids, buf);
    if (res == Py_None) {
        memcpy(scores, PyByteArray_AS_STRING(buf), (size_t)vocab * 4);
        rc = 0;
    } else if (res && get_buffer(res, "f", 0, "the scores a logits processor returned", &view) == 0) {
        if (view.len == vocab * 4) {
            memcpy(scores, view.buf, (size_t)vocab * 4);
            rc = 0;
        } else {
            PyErr_Format(InvalidInputError, "a logits processor returned %zd scores for a vocabulary of %lld; return "
                         "scores of the shape it was given", view.len / 4, (long long)vocab);
        }
        PyBuffer_Release(&view);
    }
    if (rc) PyErr_Fetch(&cb->exc_type, &cb->exc_value, &cb->exc_tb);
    Py_XDECREF(res);
    Py_XDECREF(buf);
    Py_XDECREF(ids);
    PyGILState_Release(g);
    return rc;
}

static int call_stop(void *user, int64_t row, const int32_t *tokens, int64_t n, const float *scores, int64_t vocab) {
    py_callback *cb = user;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = 2;
    PyObject *ids = PyBytes_FromStringAndSize((const char *)tokens, (Py_ssize_t)(n * 4));
    PyObject *sc = PyBytes_FromStringAndSize((const char *)scores, (Py_ssize_t)(vocab * 4)), *res = NULL;
    if (ids && sc) res = PyObject_CallFunction(cb->stop_fn, "LOO", (long long)row, ids, sc);
    int truth = res ? PyObject_IsTrue(res) : -1;
    if (truth >= 0) rc = truth;
    else PyErr_Fetch(&cb->exc_type, &cb->exc_value, &cb->exc_tb);
    Py_XDECREF(res);
    Py_XDECREF(sc);
    Py_XDECREF(ids);
    PyGILState_Release(g);
    return rc;
}

/* After a core call that returned st: ends its interrupt scope and sets the exception to raise, if any: a
 * signal handler's first, else the callback's (cb may be NULL), else the core's. Returns 0 if there is none. */
static int end_call(ha_status st, interrupt_scope *s, py_callback *cb) {
    int raised = interrupt_end(s);
    if (cb && cb->exc_type) {
        if (raised) {
            Py_DECREF(cb->exc_type);
            Py_XDECREF(cb->exc_value);
            Py_XDECREF(cb->exc_tb);
        } else {
            PyErr_Restore(cb->exc_type, cb->exc_value, cb->exc_tb);
            raised = 1;
        }
        cb->exc_type = cb->exc_value = cb->exc_tb = NULL;
    }
    if (!raised && st != HA_OK) {
        raise_status(st);
        raised = 1;
    }
    return raised;
}

/* Acquires a C-contiguous buffer of obj whose items have struct format `fmt` ("f", "e", "H", "i", "q",
 * "B", "d"); writable if asked. On failure sets an exception naming `what` and returns -1. */
static int get_buffer(PyObject *obj, const char *fmt, int writable, const char *what, Py_buffer *view) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) != 0) {
        PyErr_Clear();
        PyErr_Format(InvalidInputError, "%s must be a C-contiguous%s numpy array of format '%s'", what,
                     writable ? " writable" : "", fmt);
        return -1;
    }
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    int same = strcmp(f, fmt) == 0 || (strcmp(fmt, "q") == 0 && strcmp(f, "l") == 0 && view->itemsize == 8) ||
               (strcmp(fmt, "i") == 0 && strcmp(f, "l") == 0 && view->itemsize == 4);
    if (!same) {
        PyErr_Format(InvalidInputError, "%s has item format '%s'; expected '%s'", what, f, fmt);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int parse_dtype(PyObject *name, ha_dtype *out) {
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (s && strcmp(s, "float32") == 0) *out = HA_F32;
    else if (s && strcmp(s, "bfloat16") == 0) *out = HA_BF16;
    else if (s && strcmp(s, "float16") == 0) *out = HA_F16;
    else if (s && strcmp(s, "int8") == 0) *out = HA_Q8;
    else if (s && strcmp(s, "int4") == 0) *out = HA_Q4;
    else if (s && strcmp(s, "float32-panels") == 0) *out = HA_F32P;
    else if (s && strcmp(s, "bfloat16-panels") == 0) *out = HA_BF16P;
    else if (s && strcmp(s, "float16-panels") == 0) *out = HA_F16P;
    else {
        PyErr_SetString(InvalidInputError, "weight dtype must be 'float32', 'bfloat16', 'float16', 'int8' or 'int4', "
                                           "or a float one with '-panels' (repacked by pack())");
        return -1;
    }
    return 0;
}

/* ---- Model ------------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    ha_llama *m;
    Py_buffer *views; /* every weight buffer, held (and so kept alive) for the model's life */
    Py_ssize_t n_views;
    int64_t vocab_size;
} ModelObject;

static const char *dtype_format(ha_dtype t) {
    return t == HA_F32 || t == HA_F32P ? "f" : t == HA_Q8 || t == HA_Q4 ? "B" : t == HA_F16 || t == HA_F16P ? "e" : "H";
}

/* Holds a buffer in self->views. A matrix is (array, dtype, cols[, rows]): the array 2-D (rows, bytes or
 * elements of a row; panels: rows rounded up to whole panels) in the dtype's buffer format (uint8 blocks for
 * int8 and int4, uint16 bits for bfloat16); rows defaults to the array's first dimension. */
static int take_matrix(ModelObject *self, PyObject *spec, const char *what, ha_matrix *out) {
    PyObject *arr, *dt;
    long long cols, rows = -1;
    if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "OOL|L", &arr, &dt, &cols, &rows)) {
        PyErr_Format(InvalidInputError, "%s must be an (array, dtype, cols[, rows]) tuple", what);
        return -1;
    }
    ha_dtype t;
    if (parse_dtype(dt, &t) != 0) return -1;
    Py_buffer *v = &self->views[self->n_views];
    if (get_buffer(arr, dtype_format(t), 0, what, v) != 0) return -1;
    self->n_views++;
    if (v->ndim != 2) {
        PyErr_Format(InvalidInputError, "%s must be 2-D, got %d dimensions", what, v->ndim);
        return -1;
    }
    if (rows < -1) {
        PyErr_Format(InvalidInputError, "%s: rows=%lld must be >= 0", what, rows);
        return -1;
    }
    *out = (ha_matrix){ v->buf, t, rows >= 0 ? rows : v->shape[0], cols, (size_t)v->len };
    return 0;
}

/* A float32 vector, or None for an absent bias. */
static int take_vector(ModelObject *self, PyObject *arr, const char *what, ha_vector *out) {
    *out = (ha_vector){ NULL, 0 };
    if (arr == Py_None) return 0;
    Py_buffer *v = &self->views[self->n_views];
    if (get_buffer(arr, "f", 0, what, v) != 0) return -1;
    self->n_views++;
    if (v->ndim != 1) {
        PyErr_Format(InvalidInputError, "%s must be 1-D, got %d dimensions", what, v->ndim);
        return -1;
    }
    *out = (ha_vector){ v->buf, v->shape[0] };
    return 0;
}

static void Model_dealloc(ModelObject *self) {
    ha_llama_free(self->m);
    for (Py_ssize_t i = 0; i < self->n_views; i++) PyBuffer_Release(&self->views[i]);
    PyMem_Free(self->views);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ---- Model(config, weights, layers): dicts of named fields (ha.h's ha_llama_config, _weights, _layer) ---- */

/* Fails naming the first key of d not in allowed (NULL-terminated): a misspelt field is an error, not a default. */
static int check_keys(PyObject *d, const char *const *allowed, const char *what) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (!name) {
            PyErr_Clear();
            PyErr_Format(InvalidInputError, "%s: keys must be strings", what);
            return -1;
        }
        int known = 0;
        for (const char *const *a = allowed; *a && !known; a++) known = strcmp(*a, name) == 0;
        if (!known) {
            PyErr_Format(InvalidInputError, "%s: unknown field %R", what, key);
            return -1;
        }
    }
    return 0;
}

/* d[key] or NULL (borrowed) when absent or None. */
static PyObject *field(PyObject *d, const char *key) {
    PyObject *v = PyDict_GetItemString(d, key);
    return v == Py_None ? NULL : v;
}

/* d[key] like field(); *err = -1 with the error set when it is absent but required, else 0. */
static PyObject *scalar_field(PyObject *d, const char *key, int required, int *err) {
    PyObject *v = field(d, key);
    *err = 0;
    if (!v && required) {
        PyErr_Format(InvalidInputError, "model config: field %s is required", key);
        *err = -1;
    }
    return v;
}

static int int_field(PyObject *d, const char *key, int required, long long dflt, int64_t *out) {
    int err;
    PyObject *v = scalar_field(d, key, required, &err);
    if (!v) {
        *out = dflt;
        return err;
    }
    if (!PyLong_Check(v)) {
        PyErr_Format(InvalidInputError, "model config: %s must be an int, got %R", key, v);
        return -1;
    }
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    *out = x;
    return 0;
}

static int float_field(PyObject *d, const char *key, int required, double dflt, float *out) {
    int err;
    PyObject *v = scalar_field(d, key, required, &err);
    if (!v) {
        *out = (float)dflt;
        return err;
    }
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) return -1;
    *out = (float)x;
    return 0;
}

/* One of names (NULL-terminated) -> its index; absent: dflt. */
static int choice_field(PyObject *d, const char *key, const char *const *names, int dflt, int *out) {
    PyObject *v = field(d, key);
    *out = dflt;
    if (!v) return 0;
    const char *s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
    for (int i = 0; s && names[i]; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    PyErr_Clear();
    PyErr_Format(InvalidInputError, "%s=%R is not one of the supported values", key, v);
    return -1;
}

/* A float64 rotary table held in views, or NULL when absent. */
static int table_field(ModelObject *self, PyObject *d, const char *key, int64_t n, const double **out) {
    PyObject *v = field(d, key);
    *out = NULL;
    if (!v) return 0;
    Py_buffer *b = &self->views[self->n_views];
    if (get_buffer(v, "d", 0, key, b) != 0) return -1;
    self->n_views++;
    if (b->ndim != 1 || b->shape[0] != n) {
        PyErr_Format(InvalidInputError, "%s must be a 1-D float64 array of rope_dim/2 = %lld elements", key, (long long)n);
        return -1;
    }
    *out = b->buf;
    return 0;
}

static int matrix_field(ModelObject *self, PyObject *d, const char *key, ha_matrix *out) {
    PyObject *v = field(d, key);
    *out = (ha_matrix){ 0 };
    return v ? take_matrix(self, v, key, out) : 0;
}

static int vector_field(ModelObject *self, PyObject *d, const char *key, ha_vector *out) {
    PyObject *v = field(d, key);
    return take_vector(self, v ? v : Py_None, key, out);
}

static const char *const CONFIG_KEYS[] = {
    "vocab_size", "hidden_size", "intermediate_size", "n_layers", "n_heads", "n_kv_heads", "head_dim", "norm_eps",
    "norm", "act", "gated_mlp", "embed_scale", "attn_softcap", "final_softcap", "rope_dim", "rope_inv_freq",
    "rope_inv_freq_long", "rope_long_from", "rope_inv_freq_local", "rope_scale", NULL };
static const char *const WEIGHT_KEYS[] = { "embed", "pos_embed", "final_norm", "final_norm_bias", "lm_head", NULL };
#define LAYER_MATRIX_KEYS "wq", "wk", "wv", "wqkv", "wo", "w_gate", "w_up", "w_gate_up", "w_down"
#define LAYER_VECTOR_KEYS "attn_norm", "attn_norm_bias", "bq", "bk", "bv", "bqkv", "bo", "q_norm", "k_norm", \
    "post_attn_norm", "ffn_norm", "ffn_norm_bias", "b_gate", "b_up", "b_down", "post_ffn_norm"
static const char *const LAYER_MATRICES_[] = { LAYER_MATRIX_KEYS, NULL };
static const char *const LAYER_VECTORS_[] = { LAYER_VECTOR_KEYS, NULL };
static const char *const LAYER_KEYS[] = { LAYER_MATRIX_KEYS, LAYER_VECTOR_KEYS, "window", "rope", "attn_scale", NULL };
#define LAYER_BUFFERS 25 /* matrices and vectors a layer may hold */

static int take_config(ModelObject *self, PyObject *d, ha_llama_config *c) {
    static const char *const norms[] = { "rms", "rms_one_plus", "layer", NULL };
    static const char *const acts[] = { "silu", "gelu_tanh", "gelu", "relu", NULL };
    int norm, act, gated = 1;
    int64_t rope_dim;
    if (check_keys(d, CONFIG_KEYS, "model config") || int_field(d, "vocab_size", 1, 0, &c->vocab_size) ||
        int_field(d, "hidden_size", 1, 0, &c->hidden_size) || int_field(d, "intermediate_size", 1, 0, &c->intermediate_size) ||
        int_field(d, "n_layers", 1, 0, &c->n_layers) || int_field(d, "n_heads", 1, 0, &c->n_heads) ||
        int_field(d, "n_kv_heads", 1, 0, &c->n_kv_heads) || int_field(d, "head_dim", 1, 0, &c->head_dim) ||
        float_field(d, "norm_eps", 1, 0.0, &c->norm_eps) || choice_field(d, "norm", norms, 0, &norm) ||
        choice_field(d, "act", acts, 0, &act) || float_field(d, "embed_scale", 0, 1.0, &c->embed_scale) ||
        float_field(d, "attn_softcap", 0, 0.0, &c->attn_softcap) ||
        float_field(d, "final_softcap", 0, 0.0, &c->final_softcap) ||
        int_field(d, "rope_dim", 0, c->head_dim, &rope_dim) || int_field(d, "rope_long_from", 0, 0, &c->rope_long_from) ||
        float_field(d, "rope_scale", 0, 1.0, &c->rope_scale))
        return -1;
    PyObject *g = field(d, "gated_mlp");
    if (g && (gated = PyObject_IsTrue(g)) < 0) return -1;
    c->norm = (ha_norm)norm;
    c->act = (ha_act)act;
    c->ungated_mlp = !gated;
    c->rope_dim = rope_dim;
    const int64_t n = rope_dim > 0 && rope_dim <= 2 * HA_MAX_HEAD_DIM ? rope_dim / 2 : 0;
    if (rope_dim > 0 && !field(d, "rope_inv_freq")) {
        PyErr_Format(InvalidInputError, "model config: rope_dim=%lld needs rope_inv_freq", (long long)rope_dim);
        return -1;
    }
    if (rope_dim == 0 && (field(d, "rope_inv_freq") || field(d, "rope_inv_freq_long") || field(d, "rope_inv_freq_local"))) {
        PyErr_SetString(InvalidInputError, "model config: rope_dim=0 (no rotary) with a rotary table");
        return -1;
    }
    if (rope_dim < 0 || (rope_dim > 0 && !n)) {
        PyErr_Format(InvalidInputError, "model config: rope_dim=%lld is out of range", (long long)rope_dim);
        return -1;
    }
    return table_field(self, d, "rope_inv_freq", n, &c->rope_inv_freq) ||
           table_field(self, d, "rope_inv_freq_long", n, &c->rope_inv_freq_long) ||
           table_field(self, d, "rope_inv_freq_local", n, &c->rope_inv_freq_local) ? -1 : 0;
}

static int take_layer(ModelObject *self, PyObject *d, Py_ssize_t l, ha_llama_layer *L) {
    static const char *const ropes[] = { "global", "local", "none", NULL };
    char what[48];
    snprintf(what, sizeof what, "layer %zd", l);
    if (!PyDict_Check(d)) {
        PyErr_Format(InvalidInputError, "%s must be a dict", what);
        return -1;
    }
    ha_matrix *mats[] = { &L->wq, &L->wk, &L->wv, &L->wqkv, &L->wo, &L->w_gate, &L->w_up, &L->w_gate_up, &L->w_down };
    ha_vector *vecs[] = { &L->attn_norm, &L->attn_norm_b, &L->bq, &L->bk, &L->bv, &L->bqkv, &L->bo, &L->q_norm,
                          &L->k_norm, &L->post_attn_norm, &L->ffn_norm, &L->ffn_norm_b, &L->b_gate, &L->b_up,
                          &L->b_down, &L->post_ffn_norm };
    _Static_assert(sizeof mats / sizeof *mats + sizeof vecs / sizeof *vecs == LAYER_BUFFERS, "a view per buffer");
    if (check_keys(d, LAYER_KEYS, what)) return -1;
    for (size_t i = 0; i < sizeof mats / sizeof *mats; i++)
        if (matrix_field(self, d, LAYER_MATRICES_[i], mats[i])) return -1;
    for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++)
        if (vector_field(self, d, LAYER_VECTORS_[i], vecs[i])) return -1;
    int rope;
    if (int_field(d, "window", 0, 0, &L->window) || choice_field(d, "rope", ropes, 0, &rope) ||
        float_field(d, "attn_scale", 0, 0.0, &L->attn_scale))
        return -1;
    L->rope = (ha_rope)rope;
    return 0;
}

/* Model(config: dict, weights: dict, layers: sequence of dicts); see ha.h for each field and
 * habana_assist/modeling.py for how a checkpoint fills them. Matrices are (array, dtype, cols[, rows]),
 * vectors float32 1-D arrays, absent ones None or left out; rotary tables float64 arrays (rope_dim/2,). */
static int Model_init(ModelObject *self, PyObject *args, PyObject *kwds) {
    (void)kwds;
    PyObject *cfg_obj, *weights, *layers, *seq = NULL;
    ha_llama_config cfg = { 0 };
    ha_llama_layer *L = NULL;
    int rc = -1;
    if (self->m || self->views) { /* also while another thread is initializing it */
        PyErr_SetString(InvalidInputError, "Model is already initialized");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!O!O", &PyDict_Type, &cfg_obj, &PyDict_Type, &weights, &layers)) return -1;
    seq = PySequence_Fast(layers, "layers must be a sequence");
    if (!seq) return -1;
    Py_ssize_t nl = PySequence_Fast_GET_SIZE(seq);
    self->views = PyMem_Calloc((size_t)(8 + nl * LAYER_BUFFERS), sizeof(Py_buffer));
    L = PyMem_Calloc((size_t)(nl ? nl : 1), sizeof *L);
    if (!self->views || !L) {
        PyErr_NoMemory();
        goto cleanup;
    }
    if (take_config(self, cfg_obj, &cfg)) goto cleanup;
    if (nl != cfg.n_layers) {
        PyErr_Format(InvalidInputError, "got %zd layers but the config says n_layers=%lld", nl, (long long)cfg.n_layers);
        goto cleanup;
    }
    ha_llama_weights w = { .layers = L };
    if (check_keys(weights, WEIGHT_KEYS, "model weights") || matrix_field(self, weights, "embed", &w.embed) ||
        matrix_field(self, weights, "pos_embed", &w.pos_embed) || vector_field(self, weights, "final_norm", &w.final_norm) ||
        vector_field(self, weights, "final_norm_bias", &w.final_norm_b) || matrix_field(self, weights, "lm_head", &w.lm_head))
        goto cleanup;
    for (Py_ssize_t l = 0; l < nl; l++)
        if (take_layer(self, PySequence_Fast_GET_ITEM(seq, l), l, &L[l])) goto cleanup;
    ha_status st = ha_llama_create(&cfg, &w, &self->m); /* checks only, cheap: the GIL stays held */
    if (st != HA_OK) {
        raise_status(st);
        goto cleanup;
    }
    self->vocab_size = cfg.vocab_size;
    rc = 0;
cleanup:
    if (rc != 0) { /* leave no half-built model: release every buffer taken so far */
        for (Py_ssize_t i = 0; i < self->n_views; i++) PyBuffer_Release(&self->views[i]);
        self->n_views = 0;
        PyMem_Free(self->views);
        self->views = NULL;
    }
    PyMem_Free(L);
    Py_XDECREF(seq);
    return rc;
}

static PyObject *Model_weight_bytes(ModelObject *self, void *closure) {
    (void)closure;
    if (!self->m) return PyErr_Format(InvalidInputError, "Model is not initialized");
    return PyLong_FromLongLong(ha_llama_weight_bytes(self->m));
}

static PyGetSetDef Model_getset[] = {
    { "weight_bytes", (getter)Model_weight_bytes, NULL, "bytes of weights one decode step reads", NULL },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "habana_assist._core.Model",
    .tp_basicsize = sizeof(ModelObject),
    .tp_dealloc = (destructor)Model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A native decoder of any supported family: weights (borrowed buffers) checked against their config.",
    .tp_init = (initproc)Model_init,
    .tp_new = PyType_GenericNew,
    .tp_getset = Model_getset,
};

/* ---- Context ----------------------------------------------------------------------------------------- */

/* A model interface (ha.h ha_lm) and its cache: a native context (c), or an external model's (adapter, made by
 * external_context: habana_assist/external.py drives a model of another framework through it). */
typedef struct {
    PyObject_HEAD
    ha_llama_context *c;
    PyObject *model; /* keeps the weights alive */
    int busy;        /* set (under the GIL) while a call, or the initialization, runs without it */
    /* external: adapter.append(tokens, want) and adapter.crop(length) (external_append says how), the interface
     * over them (ext, self = this object), the positions held, and the exception a callback raised (to re-raise
     * when the core call returns) */
    PyObject *adapter;
    ha_lm ext;
    int64_t *ext_len; /* (ext.n_seq,) */
    PyObject *exc_type, *exc_value, *exc_tb;
} ContextObject;

static void Context_dealloc(ContextObject *self) {
    ha_llama_context_free(self->c);
    Py_XDECREF(self->model);
    Py_XDECREF(self->adapter);
    PyMem_Free(self->ext_len);
    Py_XDECREF(self->exc_type);
    Py_XDECREF(self->exc_value);
    Py_XDECREF(self->exc_tb);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The context's model interface, NULL if it is neither initialized nor external. */
static ha_lm *ctx_lm(ContextObject *self) {
    return self->c ? ha_llama_context_lm(self->c) : self->adapter ? &self->ext : NULL;
}

/* Moves an exception an external model's callback raised during a core call into cb's slot (where end_call
 * raises it), unless cb holds one already (the loop stopped at the first). */
static void adopt_external_error(ContextObject *self, py_callback *cb) {
    if (!self || !self->exc_type) return;
    if (cb->exc_type) {
        Py_CLEAR(self->exc_type);
        Py_CLEAR(self->exc_value);
        Py_CLEAR(self->exc_tb);
        return;
    }
    cb->exc_type = self->exc_type;
    cb->exc_value = self->exc_value;
    cb->exc_tb = self->exc_tb;
    self->exc_type = self->exc_value = self->exc_tb = NULL;
}

static int Context_init(ContextObject *self, PyObject *args, PyObject *kwds) {
    (void)kwds;
    PyObject *model;
    long long n_seq, capacity;
    int blas_prefill = 0;
    if (self->c || self->busy || self->adapter) {
        PyErr_SetString(InvalidInputError, "Context is already initialized");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!LL|p", &ModelType, &model, &n_seq, &capacity, &blas_prefill)) return -1;
    ModelObject *m = (ModelObject *)model;
    if (!m->m) {
        PyErr_SetString(InvalidInputError, "Context needs an initialized Model");
        return -1;
    }
    ha_status st;
    ha_llama_context *c = NULL;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = ha_llama_context_create(m->m, n_seq, capacity, blas_prefill, &c);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st != HA_OK) {
        raise_status(st);
        return -1;
    }
    self->c = c;
    Py_INCREF(model);
    self->model = model;
    return 0;
}

/* Marks the context busy for a call made without the GIL; two threads may not drive one cache at once. */
static int enter(ContextObject *self) {
    if (!ctx_lm(self)) {
        PyErr_SetString(InvalidInputError, "Context is not initialized");
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(InvalidInputError, "this cache is in use by another thread; give each thread its own");
        return -1;
    }
    self->busy = 1;
    return 0;
}

/* append(seq int32 (n,), tokens int32 (n,), want uint8 (n,) | None, logits float32 (n_wanted, V) | None) */
static PyObject *Context_append(ContextObject *self, PyObject *args) {
    PyObject *seq_o, *tok_o, *want_o, *out_o, *result = NULL;
    Py_buffer seq = { 0 }, tok = { 0 }, want = { 0 }, out = { 0 };
    int held = 0; /* bit per buffer */
    if (!PyArg_ParseTuple(args, "OOOO", &seq_o, &tok_o, &want_o, &out_o)) return NULL;
    if (get_buffer(seq_o, "i", 0, "seq", &seq) != 0) goto cleanup;
    held |= 1;
    if (get_buffer(tok_o, "i", 0, "tokens", &tok) != 0) goto cleanup;
    held |= 2;
    Py_ssize_t n = seq.len / 4, wanted = n;
    if (tok.len != seq.len) {
        PyErr_Format(InvalidInputError, "seq and tokens differ in length (%zd, %zd)", n, tok.len / 4);
        goto cleanup;
    }
    if (want_o != Py_None) {
        if (get_buffer(want_o, "B", 0, "want", &want) != 0) goto cleanup;
        held |= 4;
        if (want.len != n) {
            PyErr_Format(InvalidInputError, "want has %zd entries for %zd tokens", want.len, n);
            goto cleanup;
        }
        wanted = 0;
        for (Py_ssize_t i = 0; i < n; i++) wanted += ((const uint8_t *)want.buf)[i] != 0;
    }
    if (out_o != Py_None) {
        if (get_buffer(out_o, "f", 1, "logits", &out) != 0) goto cleanup;
        held |= 8;
    }
    int64_t V = ctx_lm(self) ? ctx_lm(self)->vocab_size : 0;
    if (wanted > 0 && (out_o == Py_None || out.len < (Py_ssize_t)(wanted * V * 4))) {
        PyErr_Format(InvalidInputError, "logits buffer holds %zd floats; %zd rows of %lld are needed", out.len / 4, wanted,
                     (long long)V);
        goto cleanup;
    }
    if (enter(self) != 0) goto cleanup;
    ha_lm *lm = ctx_lm(self);
    ha_status st;
    interrupt_scope intr;
    py_callback cb = { 0 };
    interrupt_begin(&intr);
    Py_BEGIN_ALLOW_THREADS
    st = lm->append(lm->self, n, seq.buf, tok.buf, (held & 4) ? want.buf : NULL, (held & 8) ? out.buf : NULL);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    adopt_external_error(self, &cb);
    if (end_call(st, &intr, &cb)) goto cleanup;
    result = Py_NewRef(Py_None);
cleanup:
    if (held & 1) PyBuffer_Release(&seq);
    if (held & 2) PyBuffer_Release(&tok);
    if (held & 4) PyBuffer_Release(&want);
    if (held & 8) PyBuffer_Release(&out);
    return result;
}

static PyObject *Context_crop(ContextObject *self, PyObject *args) {
    int seq;
    long long n;
    if (!PyArg_ParseTuple(args, "iL", &seq, &n) || enter(self) != 0) return NULL;
    ha_lm *lm = ctx_lm(self);
    ha_status st = lm->crop(lm->self, seq, n);
    self->busy = 0;
    py_callback cb = { 0 };
    adopt_external_error(self, &cb);
    if (cb.exc_type) {
        PyErr_Restore(cb.exc_type, cb.exc_value, cb.exc_tb);
        return NULL;
    }
    if (st != HA_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *Context_can_crop(ContextObject *self, PyObject *args) {
    int seq;
    long long n;
    if (!PyArg_ParseTuple(args, "iL", &seq, &n)) return NULL;
    if (!ctx_lm(self)) return PyErr_Format(InvalidInputError, "Context is not initialized");
    if (!self->c) /* external: any crop back */
        return PyBool_FromLong(seq >= 0 && seq < self->ext.n_seq && n >= 0 && n <= self->ext_len[seq]);
    return PyBool_FromLong(ha_llama_context_can_crop(self->c, seq, n));
}

static PyObject *Context_length(ContextObject *self, PyObject *args) {
    int seq;
    if (!PyArg_ParseTuple(args, "i", &seq)) return NULL;
    if (!ctx_lm(self)) return PyErr_Format(InvalidInputError, "Context is not initialized");
    if (self->busy) return PyErr_Format(InvalidInputError, "this cache is in use by another thread; give each thread its own");
    ha_lm *lm = ctx_lm(self);
    if (seq < 0 || seq >= lm->n_seq)
        return PyErr_Format(InvalidInputError, "sequence %d is out of range; the cache holds %lld", seq, (long long)lm->n_seq);
    return PyLong_FromLongLong(lm->length(lm->self, seq));
}

static PyObject *Context_get(ContextObject *self, void *which) {
    if (!ctx_lm(self)) return PyErr_Format(InvalidInputError, "Context is not initialized");
    ha_lm *lm = ctx_lm(self);
    intptr_t w = (intptr_t)which;
    return PyLong_FromLongLong(w == 0 ? lm->n_seq : w == 1 ? lm->capacity : w == 2 ? lm->vocab_size : lm->max_rollback);
}

/* ---- external models --------------------------------------------------------------------------------------
 * The model interface over adapter (habana_assist/external.py), n_seq sequences: append checks what the core's
 * own append checks (sequence ids, token ids, each sequence's capacity), then with the GIL calls
 * adapter.append(seq, tokens, want): seq and tokens bytes of int32 (n,), want bytes of uint8 (n,) or None (every
 * position), which returns the wanted positions' logits, in order, as an object with a C-contiguous buffer: float32
 * of n_wanted * vocab items (external.py hands a CPU tensor's memory over DLPack, no copy), copied into the core's
 * logits (which the loop then processes in place: it never writes into the model's tensor), or float64 of
 * n_wanted * 4 (each position's top two: external_top_two). NaN logits, a wrong size, or an exception the adapter
 * raised stop the call: HA_ERR_CALLBACK, the exception kept on the context (the adapter puts its caches back as
 * they were before the append). crop(seq, len) calls adapter.crop(seq, len). */
static PyTypeObject ContextType;

static ha_status external_fail(ContextObject *self) {
    Py_XDECREF(self->exc_type);
    Py_XDECREF(self->exc_value);
    Py_XDECREF(self->exc_tb);
    PyErr_Fetch(&self->exc_type, &self->exc_value, &self->exc_tb);
    return HA_ERR_CALLBACK;
}

static void external_nan_error(int64_t position, int64_t id) {
    PyErr_Format(InvalidInputError, "an external model returned NaN logits (position %lld of this forward, token id "
                 "%lld): its forward overflowed or is broken; check it in float32, with the same inputs, outside "
                 "generate()", (long long)position, (long long)id);
}

/* Rows of logits (wanted, V) from each position's two largest logits, top (wanted, 4) float64: value, id of the
 * largest (the first of equals), value, id of the largest of the others (V == 1: the same again); every other
 * entry -inf, so that argmax and the top-two margin read the same as on the full row. logits may be NULL (the
 * rows are only checked). 0, or -1 with the Python exception set. */
static int external_top_two(const double *top, int64_t wanted, int64_t V, float *logits) {
    for (int64_t r = 0; r < wanted; r++) {
        const double *t = top + 4 * r;
        for (int k = 1; k < 4; k += 2)
            if (!(t[k] >= 0.0 && t[k] < (double)V && t[k] == floor(t[k]))) {
                PyErr_Format(InvalidInputError, "an external model's top two name token id %g at position %lld, outside "
                             "the vocabulary of %lld", t[k], (long long)r, (long long)V);
                return -1;
            }
        if (t[0] != t[0] || t[2] != t[2]) {
            external_nan_error(r, (int64_t)(t[0] != t[0] ? t[1] : t[3]));
            return -1;
        }
        if (t[2] > t[0] || (t[1] == t[3] && V > 1 && t[2] > -INFINITY)) {
            PyErr_Format(InvalidInputError, "an external model's top two at position %lld are not the largest and the "
                         "next (%g at %g, %g at %g)", (long long)r, t[0], t[1], t[2], t[3]);
            return -1;
        }
        if (!logits) continue;
        float *row = logits + r * V;
        for (int64_t i = 0; i < V; i++) row[i] = -INFINITY;
        row[(int64_t)t[3]] = (float)t[2];
        row[(int64_t)t[1]] = (float)t[0];
    }
    return 0;
}

static ha_status external_append(void *self_, int64_t n, const int32_t *seq, const int32_t *tokens,
                                 const uint8_t *want, float *logits) {
    ContextObject *self = self_;
    const int64_t V = self->ext.vocab_size;
    int64_t wanted = 0;
    for (int64_t i = 0; i < n; i++) {
        if (seq[i] < 0 || seq[i] >= self->ext.n_seq || tokens[i] < 0 || tokens[i] >= V) return HA_ERR_INVALID;
        wanted += !want || want[i];
    }
    if (n <= 0) return n == 0 ? HA_OK : HA_ERR_INVALID;
    for (int64_t b = 0; b < self->ext.n_seq; b++) {
        int64_t more = 0;
        for (int64_t i = 0; i < n; i++) more += seq[i] == b;
        if (self->ext_len[b] + more > self->ext.capacity) return HA_ERR_CAPACITY;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    ha_status st = HA_OK;
    Py_buffer view = { 0 };
    PyObject *rows = PyBytes_FromStringAndSize((const char *)seq, (Py_ssize_t)(n * 4));
    PyObject *ids = PyBytes_FromStringAndSize((const char *)tokens, (Py_ssize_t)(n * 4));
    PyObject *w = want ? PyBytes_FromStringAndSize((const char *)want, (Py_ssize_t)n) : Py_NewRef(Py_None);
    PyObject *res = rows && ids && w ? PyObject_CallMethod(self->adapter, "append", "OOO", rows, ids, w) : NULL;
    if (!res) {
        st = external_fail(self);
    } else if (PyObject_GetBuffer(res, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
        PyErr_Clear();
        PyErr_Format(InvalidInputError, "an external model's append must return float32 logits (n_wanted, vocab) or "
                     "float64 top two (n_wanted, 4); got %s", Py_TYPE(res)->tp_name);
        st = external_fail(self);
    } else {
        const char *f = view.format ? view.format : "B";
        if (*f == '<' || *f == '=' || *f == '@') f++;
        if (strcmp(f, "d") == 0 && view.itemsize == 8) {
            if (view.len != (Py_ssize_t)(wanted * 4 * 8)) {
                PyErr_Format(InvalidInputError, "an external model's top two hold %zd numbers for %lld positions; "
                             "expected 4 per position (value, id, value, id)", view.len / 8, (long long)wanted);
                st = external_fail(self);
            } else if (external_top_two(view.buf, wanted, V, logits) != 0) {
                st = external_fail(self);
            }
        } else if (strcmp(f, "f") != 0 || view.itemsize != 4) {
            PyErr_Format(InvalidInputError, "an external model's append returned logits of format '%s'; expected "
                         "float32 ('f') rows or float64 ('d') top two", f);
            st = external_fail(self);
        } else if (view.len != (Py_ssize_t)(wanted * V * 4)) {
            PyErr_Format(InvalidInputError, "an external model returned %zd logits for %lld positions of a vocabulary "
                         "of %lld; its forward must give logits of shape (batch, positions, vocab_size)",
                         view.len / 4, (long long)wanted, (long long)V);
            st = external_fail(self);
        } else {
            const float *src = view.buf;
            int64_t bad = -1;
            for (int64_t i = 0; i < wanted * V && bad < 0; i++)
                if (src[i] != src[i]) bad = i;
            if (bad >= 0) {
                external_nan_error(bad / V, bad % V);
                st = external_fail(self);
            } else if (logits && wanted) {
                memcpy(logits, src, (size_t)(wanted * V) * sizeof(float));
            }
        }
        PyBuffer_Release(&view);
    }
    for (int64_t i = 0; st == HA_OK && i < n; i++) self->ext_len[seq[i]]++;
    Py_XDECREF(res);
    Py_XDECREF(w);
    Py_XDECREF(ids);
    Py_XDECREF(rows);
    PyGILState_Release(g);
    return st;
}

static ha_status external_crop(void *self_, int32_t seq, int64_t len) {
    ContextObject *self = self_;
    if (seq < 0 || seq >= self->ext.n_seq || len < 0 || len > self->ext_len[seq]) return HA_ERR_INVALID;
    if (len == self->ext_len[seq]) return HA_OK;
    PyGILState_STATE g = PyGILState_Ensure();
    ha_status st = HA_OK;
    PyObject *res = PyObject_CallMethod(self->adapter, "crop", "iL", (int)seq, (long long)len);
    if (!res) st = external_fail(self);
    else self->ext_len[seq] = len;
    Py_XDECREF(res);
    PyGILState_Release(g);
    return st;
}

static int64_t external_length(const void *self_, int32_t seq) {
    const ContextObject *self = self_;
    return seq >= 0 && seq < self->ext.n_seq ? self->ext_len[seq] : 0;
}

/* external_context(adapter, vocab_size, capacity, n_seq=1) -> a Context of n_seq sequences whose model is
 * adapter's. */
static PyObject *py_external_context(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *adapter;
    long long V, capacity, n_seq = 1;
    if (!PyArg_ParseTuple(args, "OLL|L", &adapter, &V, &capacity, &n_seq)) return NULL;
    if (V < 1 || V > INT32_MAX || capacity < 1 || n_seq < 1 || n_seq > INT32_MAX)
        return PyErr_Format(InvalidInputError, "external_context: vocab_size (%lld), capacity (%lld) and n_seq (%lld) must "
                            "be positive 32-bit counts", V, capacity, n_seq);
    if (!PyObject_HasAttrString(adapter, "append") || !PyObject_HasAttrString(adapter, "crop"))
        return PyErr_Format(InvalidInputError, "external_context: the adapter needs append(seq, tokens, want) and "
                            "crop(seq, length)");
    int64_t *len = PyMem_Calloc((size_t)n_seq, sizeof(int64_t));
    if (!len) return PyErr_NoMemory();
    ContextObject *self = (ContextObject *)PyType_GenericNew(&ContextType, NULL, NULL);
    if (!self) {
        PyMem_Free(len);
        return NULL;
    }
    self->adapter = Py_NewRef(adapter);
    self->ext_len = len;
    self->ext = (ha_lm){ .self = self, .vocab_size = V, .n_seq = n_seq, .capacity = capacity, .append = external_append,
                         .crop = external_crop, .max_rollback = INT64_MAX, .length = external_length };
    return (PyObject *)self;
}

static PyMethodDef Context_methods[] = {
    { "append", (PyCFunction)Context_append, METH_VARARGS,
      "append(seq, tokens, want, logits): run tokens (int32) into sequences seq (int32); logits rows for want" },
    { "crop", (PyCFunction)Context_crop, METH_VARARGS, "crop(seq, n): keep the first n positions of sequence seq" },
    { "length", (PyCFunction)Context_length, METH_VARARGS, "length(seq): positions held by sequence seq" },
    { "can_crop", (PyCFunction)Context_can_crop, METH_VARARGS,
      "can_crop(seq, n): whether crop(seq, n) would succeed now (sliding-window rings refuse going back too far)" },
    { NULL, NULL, 0, NULL },
};

static PyGetSetDef Context_getset[] = {
    { "n_seq", (getter)Context_get, NULL, "number of sequences", (void *)0 },
    { "capacity", (getter)Context_get, NULL, "positions per sequence", (void *)1 },
    { "vocab_size", (getter)Context_get, NULL, "logits per token", (void *)2 },
    { "max_rollback", (getter)Context_get, NULL, "positions a crop can always take back (ha.h: ha_lm.crop)", (void *)3 },
    { NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject ContextType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "habana_assist._core.Context",
    .tp_basicsize = sizeof(ContextObject),
    .tp_dealloc = (destructor)Context_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Context(model, n_seq, capacity, blas_prefill=False): a KV cache for n_seq sequences and the model "
              "interface over it (blas_prefill: see ha_llama_context_create).",
    .tp_init = (initproc)Context_init,
    .tp_new = PyType_GenericNew,
    .tp_methods = Context_methods,
    .tp_getset = Context_getset,
};

/* ---- functions ----------------------------------------------------------------------------------------- */

/* What both generation functions take: the buffers (held until release_gen) and the parameters, parsed from
 * the leading arguments prompt int32 (B, W), start int64 (B,), max_new_tokens, min_new_tokens, eos int32 (k,),
 * pad_token_id, do_sample, temperature, top_k, top_p, repetition_penalty, seed, max_time (seconds, 0: none),
 * procs (a tuple, below), then (at the end) out int32 (B, N), scores float32 (N, B, V) | None, sources uint8
 * (B, N) | None (how each new token was decided: ha_token_source) and callback(row, tokens) | None.
 * procs = (sequence_bias (tokens int32, offsets int64, values float32), no_repeat_ngram_size,
 *          bad_words (tokens int32, offsets int64), forced_bos int32 (k,), forced_eos int32 (k,), forced_eos_step,
 *          remove_invalid_values, decay_factor, decay_start, suppress int32 (k,), begin_suppress int32 (k,),
 *          begin_suppress_step, min_p, typical_p, epsilon_cutoff, eta_cutoff, renormalize,
 *          logits_fn | None, stop_fn | None, logits_out float32 (N, B, V) | None, no_cache)
 * (ha.h's ha_sampling_params and ha_generate_params say what each means; empty arrays mean none.) */
enum { G_PROMPT, G_START, G_EOS, G_OUT, G_SCORES, G_BIAS_TOK, G_BIAS_OFF, G_BIAS_VAL, G_BAD_TOK, G_BAD_OFF, G_BOS,
       G_FEOS, G_SUPPRESS, G_BEGIN, G_LOGITS, G_SOURCES, G_NBUF };

typedef struct gen_args {
    Py_buffer buf[G_NBUF];
    int held; /* bit per buffer above */
    ha_generate_params p;
    py_callback cb;
} gen_args;

static void release_gen(gen_args *g) {
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

/* Acquires the buffers and checks them against batch B and vocabulary V dimension by dimension (no product
 * that could wrap); on failure sets an exception, releases what it took and returns -1. */
/* The sampling part of the generation arguments (min_new_tokens, eos, do_sample .. seed, procs) -> g's buffers,
 * g->cb's logits_fn and stop_fn, and *sp; *stop_fn_o, *lout_o, *no_cache the rest of procs. -1 with an
 * exception on failure (the caller releases what was taken). Shared by generation and the Sampler type. */
static int take_sampling(gen_args *g, long long min_new, PyObject *eos_o, int do_sample, double temperature,
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
static PyObject *py_generate(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *ctx_o, *out_o, *scores_o, *src_o, *cb_o;
    GEN_DECLARE;
    gen_args g = { .held = 0 };
    if (!PyArg_ParseTuple(args, "O!" GEN_FORMAT "OOOO", &ContextType, &ctx_o, GEN_ARGS(g_), &out_o, &scores_o, &src_o, &cb_o))
        return NULL;
    ContextObject *ctx = (ContextObject *)ctx_o;
    if (!ctx_lm(ctx)) return PyErr_Format(InvalidInputError, "Context is not initialized");
    ha_lm *lm = ctx_lm(ctx);
    if (take_gen(&g, GEN_VALUES, out_o, scores_o, src_o, cb_o, lm->n_seq, lm->vocab_size) != 0) return NULL;
    PyObject *result = NULL;
    if (enter(ctx) == 0) {
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
static PyObject *py_generate_assisted(PyObject *mod, PyObject *args) {
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
    if (!ctx_lm(tctx) || (dctx && !ctx_lm(dctx))) return PyErr_Format(InvalidInputError, "Context is not initialized");
    ha_lm *lm = ctx_lm(tctx), *dlm = dctx ? ctx_lm(dctx) : NULL;
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
    if (enter(tctx) != 0) goto cleanup;
    entered = 1;
    if (dctx && enter(dctx) != 0) goto cleanup;
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

/* The body of quantize() and pack(): src (rows, cols) of dtype t into dst (buffer format dst_fmt, writable) by
 * ha_quantize to `to` (HA_Q8, HA_Q4) or, for to == HA_NDTYPES, by ha_pack. */
static PyObject *convert_weights(const char *what, PyObject *src_o, ha_dtype t, PyObject *dst_o, const char *dst_fmt,
                                 ha_dtype to) {
    PyObject *result = NULL;
    Py_buffer src = { 0 }, dst = { 0 };
    int held = 0;
    if (get_buffer(src_o, dtype_format(t), 0, "src", &src) != 0) goto cleanup;
    held |= 1;
    if (get_buffer(dst_o, dst_fmt, 1, "dst", &dst) != 0) goto cleanup;
    held |= 2;
    if (src.ndim != 2) {
        PyErr_Format(InvalidInputError, "%s: the source must be 2-D, got %d dimensions", what, src.ndim);
        goto cleanup;
    }
    ha_matrix m = { src.buf, t, src.shape[0], src.shape[1], (size_t)src.len };
    ha_status st;
    Py_BEGIN_ALLOW_THREADS
    st = to == HA_NDTYPES ? ha_pack(&m, dst.buf, (size_t)dst.len) : ha_quantize(&m, to, dst.buf, (size_t)dst.len);
    Py_END_ALLOW_THREADS
    if (st != HA_OK) {
        raise_status(st);
        goto cleanup;
    }
    result = Py_NewRef(Py_None);
cleanup:
    if (held & 1) PyBuffer_Release(&src);
    if (held & 2) PyBuffer_Release(&dst);
    return result;
}

/* quantize(src (rows, cols) array, src dtype, dst uint8 (rows, row_bytes(to, cols)) writable, to "int8" | "int4"):
 * integer weights. */
static PyObject *py_quantize(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *src_o, *dt, *dst_o, *to_o;
    ha_dtype t, to;
    if (!PyArg_ParseTuple(args, "OOOO", &src_o, &dt, &dst_o, &to_o) || parse_dtype(dt, &t) != 0 ||
        parse_dtype(to_o, &to) != 0)
        return NULL;
    if (t == HA_Q8 || t == HA_Q4) return PyErr_Format(InvalidInputError, "quantize: the source is already int8 or int4");
    return convert_weights("quantize", src_o, t, dst_o, "B", to);
}

/* pack(src (rows, cols) array, src dtype, dst writable (rows rounded up to whole panels, cols) of the same
 *      element type): float panels. */
static PyObject *py_pack(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *src_o, *dt, *dst_o;
    ha_dtype t;
    if (!PyArg_ParseTuple(args, "OOO", &src_o, &dt, &dst_o) || parse_dtype(dt, &t) != 0) return NULL;
    return convert_weights("pack", src_o, t, dst_o, dtype_format(t), HA_NDTYPES);
}

static PyObject *py_row_bytes(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *dt;
    long long cols;
    ha_dtype t;
    if (!PyArg_ParseTuple(args, "OL", &dt, &cols) || parse_dtype(dt, &t) != 0) return NULL;
    if (cols < 1 || cols > (1LL << 40)) return PyErr_Format(InvalidInputError, "row_bytes: cols must be in 1..2**40");
    return PyLong_FromSize_t(ha_matrix_bytes(t, 1, cols));
}

static PyObject *py_set_num_threads(PyObject *mod, PyObject *arg) {
    (void)mod;
    long v = PyLong_Check(arg) ? PyLong_AsLong(arg) : -1;
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        v = -1;
    }
    int n = v >= 1 && v <= 1 << 20 ? (int)v : -1; /* out of range: the core names the valid range */
    ha_status st;
    Py_BEGIN_ALLOW_THREADS
    st = ha_set_num_threads(n);
    Py_END_ALLOW_THREADS
    if (st != HA_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *py_get_num_threads(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyLong_FromLong(ha_get_num_threads());
}

static PyObject *py_kernels_name(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyUnicode_FromString(ha_kernels_name());
}

static PyObject *py_blas_core(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyUnicode_FromString(ha_blas_core());
}

static PyObject *py_select_kernels(PyObject *mod, PyObject *arg) {
    (void)mod;
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!name) return PyErr_Format(InvalidInputError, "select_kernels takes a variant name");
    ha_status st = ha_kernels_select(name);
    if (st != HA_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *py_available_memory(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyFloat_FromDouble(ha_available_memory());
}

static PyObject *py_measure_read_bandwidth(PyObject *mod, PyObject *args) {
    (void)mod;
    unsigned long long nbytes;
    int repeats;
    double bw = 0;
    if (!PyArg_ParseTuple(args, "Ki", &nbytes, &repeats)) return NULL;
    ha_status st;
    Py_BEGIN_ALLOW_THREADS
    st = ha_measure_read_bandwidth((size_t)nbytes, repeats, &bw);
    Py_END_ALLOW_THREADS
    if (st != HA_OK) return raise_status(st);
    return PyFloat_FromDouble(bw);
}

static PyObject *py_measure_mac_rate(PyObject *mod, PyObject *args, PyObject *kwargs) {
    (void)mod;
    static char *kw[] = { "repeats", "int8", NULL };
    int repeats, int8 = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i|p", kw, &repeats, &int8)) return NULL;
    double rate = 0;
    ha_status st;
    Py_BEGIN_ALLOW_THREADS
    st = ha_measure_mac_rate(repeats, int8, &rate);
    Py_END_ALLOW_THREADS
    if (st != HA_OK) return raise_status(st);
    return PyFloat_FromDouble(rate);
}

static PyObject *py_rng_uniform(PyObject *mod, PyObject *args) {
    (void)mod;
    unsigned long long seed;
    unsigned int row, position, purpose, index;
    if (!PyArg_ParseTuple(args, "KIIII", &seed, &row, &position, &purpose, &index)) return NULL;
    return PyFloat_FromDouble(ha_rng_uniform(seed, row, position, purpose, index));
}

/* ---- Sampler ------------------------------------------------------------------------------------------- */

/* One generation's token choice, for loops that run in Python (universal assisted generation): the processors
 * and the choice of csrc/sampling.c, so a token chosen here is the one generate() would choose. */
typedef struct {
    PyObject_HEAD
    ha_sampler *s;
    int64_t vocab;
    py_callback cb;  /* logits_fn (kept alive by procs) and the exception it raised */
    PyObject *procs; /* holds logits_fn */
} SamplerObject;

static void Sampler_dealloc(SamplerObject *self) {
    ha_sampler_free(self->s);
    Py_XDECREF(self->cb.exc_type);
    Py_XDECREF(self->cb.exc_value);
    Py_XDECREF(self->cb.exc_tb);
    Py_XDECREF(self->procs);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Sampler(vocab, min_new_tokens, eos, do_sample, temperature, top_k, top_p, repetition_penalty, seed, procs):
 * generate()'s sampling arguments (see gen_args); the stop callback, logits_out and no_cache of procs are not
 * used. The sampler copies every list at create, so no buffer is held after. */
static int Sampler_init(SamplerObject *self, PyObject *args, PyObject *kwds) {
    (void)kwds;
    long long vocab, min_new, top_k;
    PyObject *eos_o, *procs_o, *stop_fn, *lout_o;
    int do_sample, no_cache;
    double temperature, top_p, rep;
    unsigned long long seed;
    if (self->s) {
        PyErr_SetString(InvalidInputError, "Sampler is already initialized");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "LLOpdLddKO", &vocab, &min_new, &eos_o, &do_sample, &temperature, &top_k, &top_p, &rep,
                          &seed, &procs_o))
        return -1;
    gen_args g = { .held = 0 };
    ha_sampling_params sp;
    int rc = -1;
    if (take_sampling(&g, min_new, eos_o, do_sample, temperature, top_k, top_p, rep, seed, procs_o, &sp, &stop_fn,
                      &lout_o, &no_cache) == 0) {
        sp.logits_user = &self->cb;
        ha_status st = ha_sampler_create(&sp, vocab, &self->s);
        if (st != HA_OK) {
            raise_status(st);
        } else {
            self->vocab = vocab;
            self->cb.logits_fn = g.cb.logits_fn;
            Py_INCREF(procs_o);
            self->procs = procs_o;
            rc = 0;
        }
    }
    release_gen(&g);
    return rc;
}

/* process(scores float32 (V,) writable, row, history int32 (n,), step): ha_sampler_process in place; raises
 * what the logits callback raised. */
static PyObject *Sampler_process(SamplerObject *self, PyObject *args) {
    PyObject *scores_o, *hist_o, *result = NULL;
    long long row, step;
    Py_buffer scores = { 0 }, hist = { 0 };
    if (!self->s) return PyErr_Format(InvalidInputError, "Sampler is not initialized");
    if (!PyArg_ParseTuple(args, "OLOL", &scores_o, &row, &hist_o, &step)) return NULL;
    if (get_buffer(scores_o, "f", 1, "scores", &scores) != 0) return NULL;
    if (get_buffer(hist_o, "i", 0, "history", &hist) != 0) goto cleanup;
    if (scores.len != self->vocab * 4 || row < 0 || step < 0) {
        PyErr_Format(InvalidInputError, "Sampler.process: scores must hold %lld floats; row and step >= 0",
                     (long long)self->vocab);
        goto cleanup;
    }
    ha_status st = ha_sampler_process(self->s, scores.buf, row, hist.buf, hist.len / 4, step);
    if (self->cb.exc_type) {
        PyErr_Restore(self->cb.exc_type, self->cb.exc_value, self->cb.exc_tb);
        self->cb.exc_type = self->cb.exc_value = self->cb.exc_tb = NULL;
    } else if (st != HA_OK) {
        raise_status(st);
    } else {
        result = Py_NewRef(Py_None);
    }
cleanup:
    if (hist.obj) PyBuffer_Release(&hist);
    PyBuffer_Release(&scores);
    return result;
}

/* choose(scores float32 (V,), row, position) -> the token ha_sampler_choose picks, or -1. */
static PyObject *Sampler_choose(SamplerObject *self, PyObject *args) {
    PyObject *scores_o;
    unsigned int row, position;
    Py_buffer scores = { 0 };
    if (!self->s) return PyErr_Format(InvalidInputError, "Sampler is not initialized");
    if (!PyArg_ParseTuple(args, "OII", &scores_o, &row, &position)) return NULL;
    if (get_buffer(scores_o, "f", 0, "scores", &scores) != 0) return NULL;
    if (scores.len != self->vocab * 4) {
        PyBuffer_Release(&scores);
        return PyErr_Format(InvalidInputError, "Sampler.choose: scores must hold %lld floats", (long long)self->vocab);
    }
    int32_t t = ha_sampler_choose(self->s, scores.buf, row, position);
    PyBuffer_Release(&scores);
    return PyLong_FromLong(t);
}

static PyMethodDef Sampler_methods[] = {
    { "process", (PyCFunction)Sampler_process, METH_VARARGS,
      "process(scores, row, history, step): the processors, in place (see ha_sampler_process)" },
    { "choose", (PyCFunction)Sampler_choose, METH_VARARGS,
      "choose(scores, row, position) -> token or -1 (see ha_sampler_choose)" },
    { NULL, NULL, 0, NULL },
};

static PyTypeObject SamplerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "habana_assist._core.Sampler",
    .tp_basicsize = sizeof(SamplerObject),
    .tp_dealloc = (destructor)Sampler_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One generation's token choice: csrc/sampling.c's processors and choice.",
    .tp_init = (initproc)Sampler_init,
    .tp_new = PyType_GenericNew,
    .tp_methods = Sampler_methods,
};

/* ---- BPE ------------------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    ha_bpe *b;
} BPEObject;

static void BPE_dealloc(BPEObject *self) {
    ha_bpe_free(self->b);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* BPE(merges int32 (n, 3), chars uint32 (c,), char_ids int32 (c,), byte_ids int32 (256,) | None, unk_id,
 * fuse_unk, vocab_size): see ha_bpe_create. Nothing is borrowed: the tables are built at init. */
static int BPE_init(BPEObject *self, PyObject *args, PyObject *kwds) {
    (void)kwds;
    PyObject *merges_o, *chars_o, *ids_o, *bytes_o;
    int unk_id, fuse_unk;
    long long vocab;
    Py_buffer merges = { 0 }, chars = { 0 }, ids = { 0 }, bytes = { 0 };
    int rc = -1;
    if (self->b) {
        PyErr_SetString(InvalidInputError, "BPE is already initialized");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOOOipL", &merges_o, &chars_o, &ids_o, &bytes_o, &unk_id, &fuse_unk, &vocab))
        return -1;
    if (get_buffer(merges_o, "i", 0, "merges", &merges) != 0) goto cleanup;
    if (get_buffer(chars_o, "I", 0, "chars", &chars) != 0) goto cleanup;
    if (get_buffer(ids_o, "i", 0, "char_ids", &ids) != 0) goto cleanup;
    if (bytes_o != Py_None && get_buffer(bytes_o, "i", 0, "byte_ids", &bytes) != 0) goto cleanup;
    if (merges.len % 12 || chars.len != ids.len || (bytes.obj && bytes.len != 256 * 4)) {
        PyErr_SetString(InvalidInputError, "BPE: merges must be (n, 3), chars and char_ids of one length, byte_ids "
                                           "(256,) or None");
        goto cleanup;
    }
    ha_status st = ha_bpe_create(merges.buf, merges.len / 12, chars.buf, ids.buf, chars.len / 4,
                                 bytes.obj ? bytes.buf : NULL, unk_id, fuse_unk, vocab, &self->b);
    if (st != HA_OK) raise_status(st);
    else rc = 0;
cleanup:
    if (merges.obj) PyBuffer_Release(&merges);
    if (chars.obj) PyBuffer_Release(&chars);
    if (ids.obj) PyBuffer_Release(&ids);
    if (bytes.obj) PyBuffer_Release(&bytes);
    return rc;
}

/* encode(word: str) -> tuple of ids. The GIL stays held: a word costs microseconds, and the str is read in
 * place where Python stores it as UCS-4 (else copied into one). */
static PyObject *BPE_encode(BPEObject *self, PyObject *word) {
    if (!self->b) return PyErr_Format(InvalidInputError, "BPE is not initialized");
    if (!PyUnicode_Check(word)) return PyErr_Format(InvalidInputError, "BPE.encode takes a str");
    Py_ssize_t n = PyUnicode_GET_LENGTH(word);
    Py_UCS4 *cps = PyUnicode_AsUCS4Copy(word);
    int32_t *ids = cps ? PyMem_Malloc((size_t)(4 * n + 1) * sizeof *ids) : NULL;
    PyObject *result = NULL;
    if (!cps || !ids) {
        if (cps) PyErr_NoMemory();
        goto cleanup;
    }
    int64_t n_ids = 0;
    ha_status st = ha_bpe_encode(self->b, (const uint32_t *)cps, n, ids, 4 * (int64_t)n, &n_ids);
    if (st != HA_OK) {
        raise_status(st);
        goto cleanup;
    }
    result = PyTuple_New((Py_ssize_t)n_ids);
    for (int64_t i = 0; result && i < n_ids; i++) {
        PyObject *v = PyLong_FromLong(ids[i]);
        if (!v) {
            Py_CLEAR(result);
            break;
        }
        PyTuple_SET_ITEM(result, (Py_ssize_t)i, v);
    }
cleanup:
    PyMem_Free(cps);
    PyMem_Free(ids);
    return result;
}

static PyMethodDef BPE_methods[] = {
    { "encode", (PyCFunction)BPE_encode, METH_O, "encode(word: str) -> tuple of ids (see ha_bpe_encode)" },
    { NULL, NULL, 0, NULL },
};

static PyTypeObject BPEType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "habana_assist._core.BPE",
    .tp_basicsize = sizeof(BPEObject),
    .tp_dealloc = (destructor)BPE_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "BPE merges of a tokenizer.json BPE model (see csrc/ha.h ha_bpe_create).",
    .tp_init = (initproc)BPE_init,
    .tp_new = PyType_GenericNew,
    .tp_methods = BPE_methods,
};

static PyMethodDef module_methods[] = {
    { "generate", py_generate, METH_VARARGS, "plain generation over a Context (see csrc/ha.h ha_generate)" },
    { "external_context", py_external_context, METH_VARARGS,
      "external_context(adapter, vocab_size, capacity, n_seq=1): a Context of n_seq sequences over an external model's "
      "adapter.append(seq, tokens, want) and adapter.crop(seq, length) (habana_assist/external.py)" },
    { "generate_assisted", py_generate_assisted, METH_VARARGS,
      "assisted generation over a target Context and a draft Context or None (see ha_generate_assisted)" },
    { "quantize", py_quantize, METH_VARARGS,
      "quantize(src, dtype, dst, to): int8 or int4 weights, a scale per group" },
    { "pack", py_pack, METH_VARARGS, "pack(src, dtype, dst): float weights repacked into panels" },
    { "row_bytes", py_row_bytes, METH_VARARGS, "row_bytes(dtype, cols): bytes of one row of cols weights" },
    { "set_num_threads", py_set_num_threads, METH_O, "set_num_threads(n): threads used by every core call" },
    { "get_num_threads", py_get_num_threads, METH_NOARGS, "threads used by every core call" },
    { "kernels_name", py_kernels_name, METH_NOARGS, "the kernel variant in use" },
    { "select_kernels", py_select_kernels, METH_O, "select_kernels(name): force a kernel variant" },
    { "blas_core", py_blas_core, METH_NOARGS, "the kernels OpenBLAS (blas_prefill) chose for this CPU" },
    { "available_memory", py_available_memory, METH_NOARGS,
      "bytes of memory this process can still take (MemAvailable, or its memory cgroup's room); -1 if unknown" },
    { "measure_read_bandwidth", py_measure_read_bandwidth, METH_VARARGS,
      "measure_read_bandwidth(nbytes, repeats) -> bytes/s streamed by all threads" },
    { "measure_mac_rate", (PyCFunction)(void (*)(void))py_measure_mac_rate, METH_VARARGS | METH_KEYWORDS,
      "measure_mac_rate(repeats, int8=False) -> peak multiply-adds/s of the kernels in use, all threads (int8: "
      "of the int16 products the int8 and int4 weights' kernels run)" },
    { "rng_uniform", py_rng_uniform, METH_VARARGS, "rng_uniform(seed, row, position, purpose, index) -> (0, 1)" },
    { NULL, NULL, 0, NULL },
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_core", "habana_assist's C core.", -1, module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void) {
    PyObject *errors = PyImport_ImportModule("habana_assist.errors");
    if (!errors) return NULL;
    InvalidInputError = PyObject_GetAttrString(errors, "InvalidInputError");
    CacheCapacityError = PyObject_GetAttrString(errors, "CacheCapacityError");
    UnsupportedModelError = PyObject_GetAttrString(errors, "UnsupportedModelError");
    OutOfMemoryError = PyObject_GetAttrString(errors, "OutOfMemoryError");
    CoreError = PyObject_GetAttrString(errors, "CoreError");
    Py_DECREF(errors);
    if (!InvalidInputError || !CacheCapacityError || !UnsupportedModelError || !OutOfMemoryError || !CoreError) return NULL;
    const char *forced = getenv("HA_KERNELS");
    if (forced && *forced && ha_kernels_select(forced) != HA_OK) {
        PyErr_Format(PyExc_ImportError, "HA_KERNELS=%s: %s", forced, ha_last_error());
        return NULL;
    }
    (void)ha_kernels_name();
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *main = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
    PyObject *ident = main ? PyObject_GetAttrString(main, "ident") : NULL;
    main_thread = ident ? PyLong_AsUnsignedLong(ident) : 0;
    Py_XDECREF(threading);
    Py_XDECREF(main);
    Py_XDECREF(ident);
    if (PyErr_Occurred()) return NULL;
    (void)pthread_atfork(NULL, NULL, interrupt_after_fork);
    if (PyType_Ready(&ModelType) < 0 || PyType_Ready(&ContextType) < 0 || PyType_Ready(&BPEType) < 0 ||
        PyType_Ready(&SamplerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Model", (PyObject *)&ModelType) < 0 ||
        PyModule_AddObjectRef(m, "Context", (PyObject *)&ContextType) < 0 ||
        PyModule_AddObjectRef(m, "BPE", (PyObject *)&BPEType) < 0 ||
        PyModule_AddObjectRef(m, "Sampler", (PyObject *)&SamplerType) < 0 ||
        PyModule_AddIntConstant(m, "COST_STATE", HA_COST_STATE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
