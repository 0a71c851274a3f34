/* The module's other functions: weight conversion (quantize, pack, row_bytes), threads, kernels, the machine's
 * memory and rooflines, and the generator. */
#include "binding.h"

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

/* quantize(src (rows, cols) array, src dtype, dst uint8 (rows, row_bytes(to, cols)) writable, to "int8" | "int4",
 * or "w8a8" / "bfloat16-pairs" with rows rounded up to whole panels): integer weights, or bfloat16 pairs. */
PyObject *py_quantize(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *src_o, *dt, *dst_o, *to_o;
    ha_dtype t, to;
    if (!PyArg_ParseTuple(args, "OOOO", &src_o, &dt, &dst_o, &to_o) || parse_dtype(dt, &t) != 0 ||
        parse_dtype(to_o, &to) != 0)
        return NULL;
    if (t == HA_Q8 || t == HA_Q4 || t == HA_Q8P || t == HA_BF16X)
        return PyErr_Format(InvalidInputError, "quantize: the source is already int8, w8a8, int4 or bfloat16 pairs");
    return convert_weights("quantize", src_o, t, dst_o, "B", to);
}

/* pack(src (rows, cols) array, src dtype, dst writable (rows rounded up to whole panels, cols) of the same
 *      element type): float panels. */
PyObject *py_pack(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *src_o, *dt, *dst_o;
    ha_dtype t;
    if (!PyArg_ParseTuple(args, "OOO", &src_o, &dt, &dst_o) || parse_dtype(dt, &t) != 0) return NULL;
    return convert_weights("pack", src_o, t, dst_o, dtype_format(t), HA_NDTYPES);
}

PyObject *py_row_bytes(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *dt;
    long long cols;
    ha_dtype t;
    if (!PyArg_ParseTuple(args, "OL", &dt, &cols) || parse_dtype(dt, &t) != 0) return NULL;
    if (cols < 1 || cols > (1LL << 40)) return PyErr_Format(InvalidInputError, "row_bytes: cols must be in 1..2**40");
    return PyLong_FromSize_t(ha_matrix_bytes(t, 1, cols));
}

PyObject *py_set_num_threads(PyObject *mod, PyObject *arg) {
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

PyObject *py_get_num_threads(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyLong_FromLong(ha_get_num_threads());
}

PyObject *py_pool_stats(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    ha_pool_stats st;
    Py_BEGIN_ALLOW_THREADS
    ha_pool_get_stats(&st);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("{sLsLsLsLsLsLsi}", "jobs_pooled", (long long)st.jobs_pooled, "jobs_alone",
                         (long long)st.jobs_alone, "backoffs", (long long)st.backoffs, "caller_sleeps",
                         (long long)st.caller_sleeps, "jobs_waking", (long long)st.jobs_waking, "kinds_new",
                         (long long)st.kinds_new, "workers_asleep", st.workers_asleep);
}

PyObject *py_kernels_name(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyUnicode_FromString(ha_kernels_name());
}

PyObject *py_blas_core(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyUnicode_FromString(ha_blas_core());
}

PyObject *py_select_kernels(PyObject *mod, PyObject *arg) {
    (void)mod;
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!name) return PyErr_Format(InvalidInputError, "select_kernels takes a variant name");
    ha_status st = ha_kernels_select(name);
    if (st != HA_OK) return raise_status(st);
    Py_RETURN_NONE;
}

PyObject *py_available_memory(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyFloat_FromDouble(ha_available_memory());
}

PyObject *py_measure_read_bandwidth(PyObject *mod, PyObject *args) {
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

PyObject *py_measure_mac_rate(PyObject *mod, PyObject *args, PyObject *kwargs) {
    (void)mod;
    static char *kw[] = { "repeats", "int8", "w8a8", NULL };
    int repeats, int8 = 0, w8a8 = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i|pp", kw, &repeats, &int8, &w8a8)) return NULL;
    if (int8 && w8a8) {
        PyErr_SetString(PyExc_ValueError, "measure_mac_rate: int8=True and w8a8=True are two rates; ask for one");
        return NULL;
    }
    double rate = 0;
    ha_status st;
    Py_BEGIN_ALLOW_THREADS
    st = ha_measure_mac_rate(repeats, w8a8 ? 2 : int8, &rate);
    Py_END_ALLOW_THREADS
    if (st != HA_OK) return raise_status(st);
    return PyFloat_FromDouble(rate);
}

PyObject *py_rng_uniform(PyObject *mod, PyObject *args) {
    (void)mod;
    unsigned long long seed;
    unsigned int row, position, purpose, index;
    if (!PyArg_ParseTuple(args, "KIIII", &seed, &row, &position, &purpose, &index)) return NULL;
    return PyFloat_FromDouble(ha_rng_uniform(seed, row, position, purpose, index));
}
