/* Arguments in: buffers checked for format and contiguity, weight dtypes by name, dicts checked key by key. */
#include "binding.h"

#include <string.h>

int get_buffer(PyObject *obj, const char *fmt, int writable, const char *what, Py_buffer *view) {
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

int parse_dtype(PyObject *name, ha_dtype *out) {
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (s && strcmp(s, "float32") == 0) *out = HA_F32;
    else if (s && strcmp(s, "bfloat16") == 0) *out = HA_BF16;
    else if (s && strcmp(s, "float16") == 0) *out = HA_F16;
    else if (s && strcmp(s, "int8") == 0) *out = HA_Q8;
    else if (s && strcmp(s, "int4") == 0) *out = HA_Q4;
    else if (s && strcmp(s, "w8a8") == 0) *out = HA_Q8P;
    else if (s && strcmp(s, "bfloat16-pairs") == 0) *out = HA_BF16X;
    else if (s && strcmp(s, "float32-panels") == 0) *out = HA_F32P;
    else if (s && strcmp(s, "bfloat16-panels") == 0) *out = HA_BF16P;
    else if (s && strcmp(s, "float16-panels") == 0) *out = HA_F16P;
    else {
        PyErr_SetString(InvalidInputError,
                        "weight dtype must be 'float32', 'bfloat16', 'float16', 'int8', 'w8a8', "
                        "'int4' or 'bfloat16-pairs', or a float one with '-panels' (repacked by pack())");
        return -1;
    }
    return 0;
}

const char *dtype_format(ha_dtype t) {
    if (t == HA_F32 || t == HA_F32P) return "f";
    if (t == HA_Q8 || t == HA_Q4 || t == HA_Q8P || t == HA_BF16X) return "B";
    return t == HA_F16 || t == HA_F16P ? "e" : "H";
}

int check_keys(PyObject *d, const char *const *allowed, const char *what, const char *noun) {
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
            PyErr_Format(InvalidInputError, "%s: unknown %s %R", what, noun, key);
            return -1;
        }
    }
    return 0;
}
