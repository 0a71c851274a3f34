/* External models: the model interface over adapter (habana_assist/integrations/external.py), n_seq sequences: append
 * checks what the core's own append checks (sequence ids, token ids, each sequence's capacity), then with the GIL calls
 * adapter.append(seq, tokens, want): seq and tokens bytes of int32 (n,), want bytes of uint8 (n,) or None (every
 * position), which returns the wanted positions' logits, in order, as an object with a C-contiguous buffer: float32 of
 * n_wanted * vocab items (external.py hands a CPU tensor's memory over DLPack, no copy), copied into the core's logits
 * (which the loop then processes in place: it never writes into the model's tensor), or float64 of n_wanted * 4 (each
 * position's top two: external_top_two). NaN logits, a wrong size, or an exception the adapter raised stop the call:
 * HA_ERR_CALLBACK, the exception kept on the context (the adapter puts its caches back as they were before the append).
 * crop(seq, len) calls adapter.crop(seq, len). */
#include "binding.h"

#include <math.h>
#include <string.h>

static ha_status external_fail(ContextObject *self) {
    hold_error(&self->err);
    return HA_ERR_CALLBACK;
}

static void external_nan_error(int64_t position, int64_t id) {
    PyErr_Format(InvalidInputError,
                 "an external model returned NaN logits (position %lld of this forward, token id "
                 "%lld): its forward overflowed or is broken; check it in float32, with the same inputs, outside "
                 "generate()",
                 (long long)position, (long long)id);
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
                PyErr_Format(InvalidInputError,
                             "an external model's top two name token id %g at position %lld, outside "
                             "the vocabulary of %lld",
                             t[k], (long long)r, (long long)V);
                return -1;
            }
        if (t[0] != t[0] || t[2] != t[2]) {
            external_nan_error(r, (int64_t)(t[0] != t[0] ? t[1] : t[3]));
            return -1;
        }
        if (t[2] > t[0] || (t[1] == t[3] && V > 1 && t[2] > -INFINITY)) {
            PyErr_Format(InvalidInputError,
                         "an external model's top two at position %lld are not the largest and the "
                         "next (%g at %g, %g at %g)",
                         (long long)r, t[0], t[1], t[2], t[3]);
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

static ha_status external_append(void *self_, int64_t n, const int32_t *seq, const int32_t *tokens, const uint8_t *want,
                                 float *logits) {
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
        PyErr_Format(InvalidInputError,
                     "an external model's append must return float32 logits (n_wanted, vocab) or "
                     "float64 top two (n_wanted, 4); got %s",
                     Py_TYPE(res)->tp_name);
        st = external_fail(self);
    } else {
        const char *f = view.format ? view.format : "B";
        if (*f == '<' || *f == '=' || *f == '@') f++;
        if (strcmp(f, "d") == 0 && view.itemsize == 8) {
            if (view.len != (Py_ssize_t)(wanted * 4 * 8)) {
                PyErr_Format(InvalidInputError,
                             "an external model's top two hold %zd numbers for %lld positions; "
                             "expected 4 per position (value, id, value, id)",
                             view.len / 8, (long long)wanted);
                st = external_fail(self);
            } else if (external_top_two(view.buf, wanted, V, logits) != 0) {
                st = external_fail(self);
            }
        } else if (strcmp(f, "f") != 0 || view.itemsize != 4) {
            PyErr_Format(InvalidInputError,
                         "an external model's append returned logits of format '%s'; expected "
                         "float32 ('f') rows or float64 ('d') top two",
                         f);
            st = external_fail(self);
        } else if (view.len != (Py_ssize_t)(wanted * V * 4)) {
            PyErr_Format(InvalidInputError,
                         "an external model returned %zd logits for %lld positions of a vocabulary "
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

PyObject *py_external_context(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *adapter;
    long long V, capacity, n_seq = 1, rope_switch = 0;
    if (!PyArg_ParseTuple(args, "OLL|LL", &adapter, &V, &capacity, &n_seq, &rope_switch)) return NULL;
    if (V < 1 || V > INT32_MAX || capacity < 1 || n_seq < 1 || n_seq > INT32_MAX)
        return PyErr_Format(InvalidInputError,
                            "external_context: vocab_size (%lld), capacity (%lld) and n_seq (%lld) must "
                            "be positive 32-bit counts",
                            V, capacity, n_seq);
    if (rope_switch < 0)
        return PyErr_Format(InvalidInputError, "external_context: rope_switch %lld must be >= 0", rope_switch);
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
    self->ext = (ha_lm){ .self = self,
                         .vocab_size = V,
                         .n_seq = n_seq,
                         .capacity = capacity,
                         .append = external_append,
                         .crop = external_crop,
                         .max_rollback = INT64_MAX,
                         .length = external_length,
                         .rope_switch = rope_switch };
    return (PyObject *)self;
}
