/* The type Model: a native decoder from dicts of named fields (ha.h's ha_llama_config, _weights, _layer), its weight
 * buffers held for its life. */
#include "binding.h"

#include <string.h>

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

/* The garbage collector's view: the objects whose buffers the model holds. */
static int Model_traverse(ModelObject *self, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < self->n_views; i++) Py_VISIT(self->views[i].obj);
    return 0;
}

/* Breaks a cycle: the core's model (which reads the buffers) goes first, then the buffers. */
static int Model_clear(ModelObject *self) {
    ha_llama_free(self->m);
    self->m = NULL;
    for (Py_ssize_t i = 0; i < self->n_views; i++) PyBuffer_Release(&self->views[i]);
    PyMem_Free(self->views);
    self->views = NULL;
    self->n_views = 0;
    return 0;
}

static void Model_dealloc(ModelObject *self) {
    PyObject_GC_UnTrack(self);
    Model_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ---- Model(config, weights, layers): dicts of named fields (ha.h's ha_llama_config, _weights, _layer) ---- */

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
        PyErr_Format(InvalidInputError, "%s must be a 1-D float64 array of rope_dim/2 = %lld elements", key,
                     (long long)n);
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

static const char *const CONFIG_KEYS[] = { "vocab_size",
                                           "hidden_size",
                                           "intermediate_size",
                                           "n_layers",
                                           "n_heads",
                                           "n_kv_heads",
                                           "head_dim",
                                           "norm_eps",
                                           "norm",
                                           "act",
                                           "gated_mlp",
                                           "embed_scale",
                                           "attn_softcap",
                                           "final_softcap",
                                           "rope_dim",
                                           "rope_inv_freq",
                                           "rope_inv_freq_long",
                                           "rope_long_from",
                                           "rope_inv_freq_local",
                                           "rope_scale",
                                           NULL };
static const char *const WEIGHT_KEYS[] = { "embed", "pos_embed", "final_norm", "final_norm_bias", "lm_head", NULL };
#define LAYER_MATRIX_KEYS "wq", "wk", "wv", "wqkv", "wo", "w_gate", "w_up", "w_gate_up", "w_down"
#define LAYER_VECTOR_KEYS                                                                                            \
    "attn_norm", "attn_norm_bias", "bq", "bk", "bv", "bqkv", "bo", "q_norm", "k_norm", "post_attn_norm", "ffn_norm", \
        "ffn_norm_bias", "b_gate", "b_up", "b_down", "post_ffn_norm"
static const char *const LAYER_MATRICES_[] = { LAYER_MATRIX_KEYS, NULL };
static const char *const LAYER_VECTORS_[] = { LAYER_VECTOR_KEYS, NULL };
static const char *const LAYER_KEYS[] = { LAYER_MATRIX_KEYS, LAYER_VECTOR_KEYS, "window", "rope", "attn_scale", NULL };
#define LAYER_BUFFERS 25 /* matrices and vectors a layer may hold */

static int take_config(ModelObject *self, PyObject *d, ha_llama_config *c) {
    static const char *const norms[] = { "rms", "rms_one_plus", "layer", NULL };
    static const char *const acts[] = { "silu", "gelu_tanh", "gelu", "relu", NULL };
    int norm, act, gated = 1;
    int64_t rope_dim;
    if (check_keys(d, CONFIG_KEYS, "model config", "field") || int_field(d, "vocab_size", 1, 0, &c->vocab_size) ||
        int_field(d, "hidden_size", 1, 0, &c->hidden_size) ||
        int_field(d, "intermediate_size", 1, 0, &c->intermediate_size) ||
        int_field(d, "n_layers", 1, 0, &c->n_layers) || int_field(d, "n_heads", 1, 0, &c->n_heads) ||
        int_field(d, "n_kv_heads", 1, 0, &c->n_kv_heads) || int_field(d, "head_dim", 1, 0, &c->head_dim) ||
        float_field(d, "norm_eps", 1, 0.0, &c->norm_eps) || choice_field(d, "norm", norms, 0, &norm) ||
        choice_field(d, "act", acts, 0, &act) || float_field(d, "embed_scale", 0, 1.0, &c->embed_scale) ||
        float_field(d, "attn_softcap", 0, 0.0, &c->attn_softcap) ||
        float_field(d, "final_softcap", 0, 0.0, &c->final_softcap) ||
        int_field(d, "rope_dim", 0, c->head_dim, &rope_dim) ||
        int_field(d, "rope_long_from", 0, 0, &c->rope_long_from) ||
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
    if (rope_dim == 0 &&
        (field(d, "rope_inv_freq") || field(d, "rope_inv_freq_long") || field(d, "rope_inv_freq_local"))) {
        PyErr_SetString(InvalidInputError, "model config: rope_dim=0 (no rotary) with a rotary table");
        return -1;
    }
    if (rope_dim < 0 || (rope_dim > 0 && !n)) {
        PyErr_Format(InvalidInputError, "model config: rope_dim=%lld is out of range", (long long)rope_dim);
        return -1;
    }
    return table_field(self, d, "rope_inv_freq", n, &c->rope_inv_freq) ||
                   table_field(self, d, "rope_inv_freq_long", n, &c->rope_inv_freq_long) ||
                   table_field(self, d, "rope_inv_freq_local", n, &c->rope_inv_freq_local)
               ? -1
               : 0;
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
    ha_vector *vecs[] = { &L->attn_norm, &L->attn_norm_b,    &L->bq,       &L->bk,
                          &L->bv,        &L->bqkv,           &L->bo,       &L->q_norm,
                          &L->k_norm,    &L->post_attn_norm, &L->ffn_norm, &L->ffn_norm_b,
                          &L->b_gate,    &L->b_up,           &L->b_down,   &L->post_ffn_norm };
    _Static_assert(sizeof mats / sizeof *mats + sizeof vecs / sizeof *vecs == LAYER_BUFFERS, "a view per buffer");
    if (check_keys(d, LAYER_KEYS, what, "field")) return -1;
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
 * habana_assist/modeling_utils.py for how a checkpoint fills them. Matrices are (array, dtype, cols[, rows]),
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
        PyErr_Format(InvalidInputError, "got %zd layers but the config says n_layers=%lld", nl,
                     (long long)cfg.n_layers);
        goto cleanup;
    }
    ha_llama_weights w = { .layers = L };
    if (check_keys(weights, WEIGHT_KEYS, "model weights", "field") || matrix_field(self, weights, "embed", &w.embed) ||
        matrix_field(self, weights, "pos_embed", &w.pos_embed) ||
        vector_field(self, weights, "final_norm", &w.final_norm) ||
        vector_field(self, weights, "final_norm_bias", &w.final_norm_b) ||
        matrix_field(self, weights, "lm_head", &w.lm_head))
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

PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "habana_assist._core.Model",
    .tp_basicsize = sizeof(ModelObject),
    .tp_dealloc = (destructor)Model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Model_traverse,
    .tp_clear = (inquiry)Model_clear,
    .tp_doc = "A native decoder of any supported family: weights (borrowed buffers) checked against their config.",
    .tp_init = (initproc)Model_init,
    .tp_new = PyType_GenericNew,
    .tp_getset = Model_getset,
};
