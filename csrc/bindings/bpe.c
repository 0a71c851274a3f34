/* The type BPE: tokenizer.json's BPE merges in C (csrc/tokenizer/bpe.c). */
#include "binding.h"

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

PyTypeObject BPEType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "habana_assist._core.BPE",
    .tp_basicsize = sizeof(BPEObject),
    .tp_dealloc = (destructor)BPE_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "BPE merges of a tokenizer.json BPE model (see csrc/ha.h ha_bpe_create).",
    .tp_init = (initproc)BPE_init,
    .tp_new = PyType_GenericNew,
    .tp_methods = BPE_methods,
};
