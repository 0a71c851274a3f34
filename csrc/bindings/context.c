/* The type Context: a model interface (ha.h ha_lm) and its cache, native (ha_llama_context) or an external
 * model's (external.c); append, crop and length from Python. */
#include "binding.h"

/* The garbage collector's view: the model, an external model's adapter (whose owner may hold this context) and a
 * held exception (whose traceback may hold it). */
static int Context_traverse(ContextObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->model);
    Py_VISIT(self->adapter);
    return visit_error(&self->err, visit, arg);
}

/* Breaks a cycle: the core's cache goes first (it reads the model's weights), then the references. */
static int Context_clear(ContextObject *self) {
    ha_llama_context_free(self->c);
    self->c = NULL;
    Py_CLEAR(self->model);
    Py_CLEAR(self->adapter);
    drop_error(&self->err);
    return 0;
}

static void Context_dealloc(ContextObject *self) {
    PyObject_GC_UnTrack(self);
    Context_clear(self);
    PyMem_Free(self->ext_len);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

ha_lm *context_lm(ContextObject *self) {
    return self->c ? ha_llama_context_lm(self->c) : self->adapter ? &self->ext : NULL;
}

void adopt_external_error(ContextObject *self, py_callback *cb) {
    if (!self || !error_held(&self->err)) return;
    if (error_held(&cb->err)) drop_error(&self->err);
    else move_error(&cb->err, &self->err);
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

int context_enter(ContextObject *self) {
    if (!context_lm(self)) {
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
    int64_t V = context_lm(self) ? context_lm(self)->vocab_size : 0;
    if (wanted > 0 && (out_o == Py_None || out.len < (Py_ssize_t)(wanted * V * 4))) {
        PyErr_Format(InvalidInputError, "logits buffer holds %zd floats; %zd rows of %lld are needed", out.len / 4,
                     wanted, (long long)V);
        goto cleanup;
    }
    if (context_enter(self) != 0) goto cleanup;
    ha_lm *lm = context_lm(self);
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

/* record_hidden(out float32 (n_layers + 1, n, hidden_size) writable, n): the next append (of n tokens) writes its
 * hidden states into out (ha.h ha_llama_context_record_hidden); native contexts only. The caller keeps out
 * alive until that append returns (the model's forward does). */
static PyObject *Context_record_hidden(ContextObject *self, PyObject *args) {
    PyObject *out_o;
    long long n;
    if (!PyArg_ParseTuple(args, "OL", &out_o, &n)) return NULL;
    if (!self->c) {
        PyErr_SetString(InvalidInputError, "record_hidden: only a native model's cache records hidden states");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(InvalidInputError, "this cache is in use by another thread; give each thread its own");
        return NULL;
    }
    Py_buffer out = { 0 };
    if (get_buffer(out_o, "f", 1, "hidden", &out) != 0) return NULL;
    ha_status st = ha_llama_context_record_hidden(self->c, out.buf, (size_t)out.len / 4, (int64_t)n);
    PyBuffer_Release(&out); /* the caller's array outlives the append it is for */
    if (st != HA_OK) return raise_status(st);
    Py_RETURN_NONE;
}

/* The native context of self, entered (busy) for a call; NULL with an exception for an external model's. */
static ha_llama_context *native_enter(ContextObject *self, const char *what) {
    if (!self->c) {
        PyErr_Format(InvalidInputError, "%s: only a native model's cache holds its keys and values here", what);
        return NULL;
    }
    return context_enter(self) == 0 ? self->c : NULL;
}

/* copy_from(src Context): src's sequences into this cache (ha.h ha_llama_context_copy). */
static PyObject *Context_copy_from(ContextObject *self, PyObject *args) {
    PyObject *src_o;
    if (!PyArg_ParseTuple(args, "O!", &ContextType, &src_o)) return NULL;
    ContextObject *src = (ContextObject *)src_o;
    if (src == self || !src->c || src->busy) {
        PyErr_SetString(InvalidInputError, "copy_from: another native cache, not in use, is needed");
        return NULL;
    }
    ha_llama_context *c = native_enter(self, "copy_from");
    if (!c) return NULL;
    ha_status st = ha_llama_context_copy(c, src->c);
    self->busy = 0;
    if (st != HA_OK) return raise_status(st);
    Py_RETURN_NONE;
}

/* kv_first(layer, seq) -> the first position that layer of seq holds */
static PyObject *Context_kv_first(ContextObject *self, PyObject *args) {
    long long layer;
    int seq;
    if (!PyArg_ParseTuple(args, "Li", &layer, &seq)) return NULL;
    if (!self->c) return native_enter(self, "kv_first"), NULL;
    int64_t first = ha_llama_context_kv_first(self->c, layer, seq);
    if (first < 0) {
        PyErr_Format(InvalidInputError, "kv_first: layer %lld or sequence %d is out of range", layer, seq);
        return NULL;
    }
    return PyLong_FromLongLong(first);
}

/* read_kv(layer, seq, first, n, k, v) / write_kv(layer, seq, first, n, k, v): k and v float32 (n_kv_heads, n,
 * head_dim) (ha.h ha_llama_context_read_kv / write_kv, which check their size). */
static PyObject *kv_move(ContextObject *self, PyObject *args, int reading) {
    long long layer, first, n;
    int seq;
    PyObject *k_o, *v_o, *result = NULL;
    Py_buffer k = { 0 }, v = { 0 };
    int held = 0;
    const char *what = reading ? "read_kv" : "write_kv";
    if (!PyArg_ParseTuple(args, "LiLLOO", &layer, &seq, &first, &n, &k_o, &v_o)) return NULL;
    if (get_buffer(k_o, "f", reading, "k", &k) != 0) goto cleanup;
    held |= 1;
    if (get_buffer(v_o, "f", reading, "v", &v) != 0) goto cleanup;
    held |= 2;
    if (k.len != v.len) {
        PyErr_Format(InvalidInputError, "%s: k and v differ in size", what);
        goto cleanup;
    }
    ha_llama_context *c = native_enter(self, what);
    if (!c) goto cleanup;
    const size_t floats = (size_t)k.len / 4;
    ha_status st = reading ? ha_llama_context_read_kv(c, layer, seq, first, n, k.buf, v.buf, floats)
                           : ha_llama_context_write_kv(c, layer, seq, first, n, k.buf, v.buf, floats);
    self->busy = 0;
    result = st == HA_OK ? Py_NewRef(Py_None) : raise_status(st);
cleanup:
    if (held & 1) PyBuffer_Release(&k);
    if (held & 2) PyBuffer_Release(&v);
    return result;
}

static PyObject *Context_read_kv(ContextObject *self, PyObject *args) { return kv_move(self, args, 1); }
static PyObject *Context_write_kv(ContextObject *self, PyObject *args) { return kv_move(self, args, 0); }

/* set_length(seq, len) (ha.h ha_llama_context_set_length) */
static PyObject *Context_set_length(ContextObject *self, PyObject *args) {
    int seq;
    long long len;
    if (!PyArg_ParseTuple(args, "iL", &seq, &len)) return NULL;
    ha_llama_context *c = native_enter(self, "set_length");
    if (!c) return NULL;
    ha_status st = ha_llama_context_set_length(c, seq, len);
    self->busy = 0;
    if (st != HA_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *Context_crop(ContextObject *self, PyObject *args) {
    int seq;
    long long n;
    if (!PyArg_ParseTuple(args, "iL", &seq, &n) || context_enter(self) != 0) return NULL;
    ha_lm *lm = context_lm(self);
    ha_status st = lm->crop(lm->self, seq, n);
    self->busy = 0;
    py_callback cb = { 0 };
    adopt_external_error(self, &cb);
    if (error_held(&cb.err)) {
        raise_held(&cb.err);
        return NULL;
    }
    if (st != HA_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *Context_can_crop(ContextObject *self, PyObject *args) {
    int seq;
    long long n;
    if (!PyArg_ParseTuple(args, "iL", &seq, &n)) return NULL;
    if (!context_lm(self)) return PyErr_Format(InvalidInputError, "Context is not initialized");
    if (!self->c) /* external: any crop back */
        return PyBool_FromLong(seq >= 0 && seq < self->ext.n_seq && n >= 0 && n <= self->ext_len[seq]);
    return PyBool_FromLong(ha_llama_context_can_crop(self->c, seq, n));
}

static PyObject *Context_length(ContextObject *self, PyObject *args) {
    int seq;
    if (!PyArg_ParseTuple(args, "i", &seq)) return NULL;
    if (!context_lm(self)) return PyErr_Format(InvalidInputError, "Context is not initialized");
    if (self->busy)
        return PyErr_Format(InvalidInputError, "this cache is in use by another thread; give each thread its own");
    ha_lm *lm = context_lm(self);
    if (seq < 0 || seq >= lm->n_seq)
        return PyErr_Format(InvalidInputError, "sequence %d is out of range; the cache holds %lld", seq,
                            (long long)lm->n_seq);
    return PyLong_FromLongLong(lm->length(lm->self, seq));
}

static PyObject *Context_get(ContextObject *self, void *which) {
    if (!context_lm(self)) return PyErr_Format(InvalidInputError, "Context is not initialized");
    ha_lm *lm = context_lm(self);
    intptr_t w = (intptr_t)which;
    return PyLong_FromLongLong(w == 0   ? lm->n_seq
                               : w == 1 ? lm->capacity
                               : w == 2 ? lm->vocab_size
                               : w == 3 ? lm->max_rollback
                               : w == 4 ? lm->rope_switch
                                        : (lm->append_tree ? lm->max_tree : 0));
}


static PyMethodDef Context_methods[] = {
    { "append", (PyCFunction)Context_append, METH_VARARGS,
      "append(seq, tokens, want, logits): run tokens (int32) into sequences seq (int32); logits rows for want" },
    { "crop", (PyCFunction)Context_crop, METH_VARARGS, "crop(seq, n): keep the first n positions of sequence seq" },
    { "copy_from", (PyCFunction)Context_copy_from, METH_VARARGS,
      "copy_from(src): src's sequences (same model, same count) into this cache, whose capacity holds them" },
    { "kv_first", (PyCFunction)Context_kv_first, METH_VARARGS,
      "kv_first(layer, seq): the first position that layer of seq still holds (later in a sliding window's ring)" },
    { "read_kv", (PyCFunction)Context_read_kv, METH_VARARGS,
      "read_kv(layer, seq, first, n, k, v): positions first.. of one layer into k, v (n_kv_heads, n, head_dim)" },
    { "write_kv", (PyCFunction)Context_write_kv, METH_VARARGS,
      "write_kv(layer, seq, first, n, k, v): k, v (n_kv_heads, n, head_dim) into positions first.. of one layer" },
    { "set_length", (PyCFunction)Context_set_length, METH_VARARGS,
      "set_length(seq, n): the sequence holds positions [0, n), as written" },
    { "record_hidden", (PyCFunction)Context_record_hidden, METH_VARARGS,
      "record_hidden(out, n): the next append (of n tokens) writes its hidden states into out (n_layers + 1, n, d)" },
    { "length", (PyCFunction)Context_length, METH_VARARGS, "length(seq): positions held by sequence seq" },
    { "can_crop", (PyCFunction)Context_can_crop, METH_VARARGS,
      "can_crop(seq, n): whether crop(seq, n) would succeed now (sliding-window rings refuse going back too far)" },
    { NULL, NULL, 0, NULL },
};

static PyGetSetDef Context_getset[] = {
    { "n_seq", (getter)Context_get, NULL, "number of sequences", (void *)0 },
    { "capacity", (getter)Context_get, NULL, "positions per sequence", (void *)1 },
    { "vocab_size", (getter)Context_get, NULL, "logits per token", (void *)2 },
    { "max_rollback", (getter)Context_get, NULL, "positions a crop can always take back (ha.h: ha_lm.crop)",
      (void *)3 },
    { "rope_switch", (getter)Context_get, NULL,
      "0, or the length past which an append rotates with other factors (longrope; ha.h: ha_lm.rope_switch)",
      (void *)4 },
    { "max_tree", (getter)Context_get, NULL,
      "nodes per sequence one token-tree verification takes; 0 without tree attention (ha.h: ha_lm.max_tree)",
      (void *)5 },
    { NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject ContextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "habana_assist._core.Context",
    .tp_basicsize = sizeof(ContextObject),
    .tp_dealloc = (destructor)Context_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Context_traverse,
    .tp_clear = (inquiry)Context_clear,
    .tp_doc = "Context(model, n_seq, capacity, blas_prefill=False): a KV cache for n_seq sequences and the model "
              "interface over it (blas_prefill: see ha_llama_context_create).",
    .tp_init = (initproc)Context_init,
    .tp_new = PyType_GenericNew,
    .tp_methods = Context_methods,
    .tp_getset = Context_getset,
};
