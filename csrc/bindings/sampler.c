/* The type Sampler: one generation's processors and token choice, for loops that run in Python. */
#include "binding.h"

/* One generation's token choice, for loops that run in Python (universal assisted generation): the processors
 * and the choice of csrc/generation/sampling.c, so a token chosen here is the one generate() would choose. */
typedef struct {
    PyObject_HEAD
    ha_sampler *s;
    int64_t vocab;
    py_callback cb;  /* logits_fn (a reference of its own) and the exception it raised */
} SamplerObject;

/* The garbage collector's view: logits_fn (a closure may hold this Sampler) and a held exception (its traceback
 * the frames that held it). */
static int Sampler_traverse(SamplerObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->cb.logits_fn);
    return visit_error(&self->cb.err, visit, arg);
}

/* Breaks a cycle: the core's sampler (which calls logits_fn) goes first, then the references. */
static int Sampler_clear(SamplerObject *self) {
    ha_sampler_free(self->s);
    self->s = NULL;
    drop_error(&self->cb.err);
    Py_CLEAR(self->cb.logits_fn);
    return 0;
}

static void Sampler_dealloc(SamplerObject *self) {
    PyObject_GC_UnTrack(self);
    Sampler_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Sampler(vocab, options: dict of generate()'s sampling options, by name as generate() takes them; stop_fn,
 * logits_out and no_cache may be there too and are not read). The sampler copies every list at create, so no
 * buffer is held after. */
static int Sampler_init(SamplerObject *self, PyObject *args, PyObject *kwds) {
    (void)kwds;
    long long vocab;
    PyObject *opts;
    if (self->s) {
        PyErr_SetString(InvalidInputError, "Sampler is already initialized");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "LO:Sampler", &vocab, &opts)) return -1;
    gen_args g = { .held = 0 };
    ha_sampling_params sp;
    int rc = -1;
    if (check_options(opts, SAMPLER_KEYS, "Sampler") == 0 && take_sampling(&g, opts, "Sampler", &sp) == 0) {
        sp.logits_user = &self->cb;
        ha_status st = ha_sampler_create(&sp, vocab, &self->s);
        if (st != HA_OK) {
            raise_status(st);
        } else {
            self->vocab = vocab;
            self->cb.logits_fn = Py_NewRef(g.cb.logits_fn);
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
    if (error_held(&self->cb.err)) {
        raise_held(&self->cb.err);
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

PyTypeObject SamplerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "habana_assist._core.Sampler",
    .tp_basicsize = sizeof(SamplerObject),
    .tp_dealloc = (destructor)Sampler_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Sampler_traverse,
    .tp_clear = (inquiry)Sampler_clear,
    .tp_doc = "One generation's token choice: csrc/generation/sampling.c's processors and choice.",
    .tp_init = (initproc)Sampler_init,
    .tp_new = PyType_GenericNew,
    .tp_methods = Sampler_methods,
};
