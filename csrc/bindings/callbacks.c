/* Python callables called from inside a generation loop that runs without the GIL (binding.h, py_callback): the
 * GIL taken for each call, the exception one raises kept for end_call to raise when the loop returns. */
#include "binding.h"

#include <string.h>

int call_python(void *user, int64_t row, const int32_t *tokens, int64_t n) {
    py_callback *cb = user;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = 0;
    PyObject *list = PyList_New((Py_ssize_t)n), *res = NULL;
    for (int64_t i = 0; list && i < n; i++) PyList_SET_ITEM(list, i, PyLong_FromLong(tokens[i]));
    if (list) res = PyObject_CallFunction(cb->fn, "LO", (long long)row, list);
    if (!res) {
        hold_error(&cb->err);
        rc = 1;
    }
    Py_XDECREF(res);
    Py_XDECREF(list);
    PyGILState_Release(g);
    return rc;
}

int call_logits(void *user, int64_t row, const int32_t *tokens, int64_t n, float *scores, int64_t vocab) {
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
            PyErr_Format(InvalidInputError,
                         "a logits processor returned %zd scores for a vocabulary of %lld; return "
                         "scores of the shape it was given",
                         view.len / 4, (long long)vocab);
        }
        PyBuffer_Release(&view);
    }
    if (rc) hold_error(&cb->err);
    Py_XDECREF(res);
    Py_XDECREF(buf);
    Py_XDECREF(ids);
    PyGILState_Release(g);
    return rc;
}

int call_stop(void *user, int64_t row, const int32_t *tokens, int64_t n, const float *scores, int64_t vocab) {
    py_callback *cb = user;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = 2;
    PyObject *ids = PyBytes_FromStringAndSize((const char *)tokens, (Py_ssize_t)(n * 4));
    PyObject *sc = PyBytes_FromStringAndSize((const char *)scores, (Py_ssize_t)(vocab * 4)), *res = NULL;
    if (ids && sc) res = PyObject_CallFunction(cb->stop_fn, "LOO", (long long)row, ids, sc);
    int truth = res ? PyObject_IsTrue(res) : -1;
    if (truth >= 0) rc = truth;
    else hold_error(&cb->err);
    Py_XDECREF(res);
    Py_XDECREF(sc);
    Py_XDECREF(ids);
    PyGILState_Release(g);
    return rc;
}

int end_call(ha_status st, interrupt_scope *s, py_callback *cb) {
    int raised = interrupt_end(s);
    if (cb && error_held(&cb->err)) {
        if (raised) {
            drop_error(&cb->err);
        } else {
            raise_held(&cb->err);
            raised = 1;
        }
    }
    if (!raised && st != HA_OK) {
        raise_status(st);
        raised = 1;
    }
    return raised;
}
