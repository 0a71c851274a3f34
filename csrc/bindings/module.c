/* habana_assist._core: the module, its functions' table and its exceptions.
 *
 * Buffers in (through the buffer protocol, checked for format, contiguity and size), exceptions out
 * (raise_status, the one place core status codes become Python exceptions), the GIL released around every
 * core call. Each Python type and concern has a file of its own in csrc/bindings/ (binding.h lists them). */
#include "binding.h"

PyObject *InvalidInputError, *CacheCapacityError, *UnsupportedModelError, *OutOfMemoryError, *CoreError;

PyObject *raise_status(ha_status st) {
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

static PyMethodDef module_methods[] = {
    { "generate", py_generate, METH_VARARGS,
      "generate(ctx, options): plain generation over a Context, its options a dict by name (csrc/bindings/generate.c; "
      "csrc/ha.h ha_generate)" },
    { "external_context", py_external_context, METH_VARARGS,
      "external_context(adapter, vocab_size, capacity, n_seq=1, rope_switch=0): a Context of n_seq sequences over an "
      "external model's adapter.append(seq, tokens, want) and adapter.crop(seq, length) "
      "(habana_assist/integrations/external.py); rope_switch: csrc/ha.h ha_lm.rope_switch" },
    { "generate_assisted", py_generate_assisted, METH_VARARGS,
      "generate_assisted(target_ctx, draft_ctx, options): assisted generation over a target Context and a draft "
      "Context "
      "or None, its options a dict by name (csrc/bindings/generate.c; ha_generate_assisted)" },
    { "quantize", py_quantize, METH_VARARGS, "quantize(src, dtype, dst, to): int8 or int4 weights, a scale per group" },
    { "pack", py_pack, METH_VARARGS, "pack(src, dtype, dst): float weights repacked into panels" },
    { "row_bytes", py_row_bytes, METH_VARARGS, "row_bytes(dtype, cols): bytes of one row of cols weights" },
    { "set_num_threads", py_set_num_threads, METH_O, "set_num_threads(n): threads used by every core call" },
    { "get_num_threads", py_get_num_threads, METH_NOARGS, "threads used by every core call" },
    { "kernels_name", py_kernels_name, METH_NOARGS, "the kernel variant in use" },
    { "pool_stats", py_pool_stats, METH_NOARGS,
      "pool_stats() -> dict: what the thread pool has done since it started (jobs pooled, alone, ...)" },
    { "select_kernels", py_select_kernels, METH_O, "select_kernels(name): force a kernel variant" },
    { "blas_core", py_blas_core, METH_NOARGS, "the kernels OpenBLAS (blas_prefill) chose for this CPU" },
    { "available_memory", py_available_memory, METH_NOARGS,
      "bytes of memory this process can still take (MemAvailable, or its memory cgroup's room); -1 if unknown" },
    { "measure_read_bandwidth", py_measure_read_bandwidth, METH_VARARGS,
      "measure_read_bandwidth(nbytes, repeats) -> bytes/s streamed by all threads" },
    { "measure_mac_rate", (PyCFunction)(void (*)(void))py_measure_mac_rate, METH_VARARGS | METH_KEYWORDS,
      "measure_mac_rate(repeats, int8=False, w8a8=False) -> peak multiply-adds/s of the kernels in use, all threads "
      "(int8: of the int16 products the int8 and int4 weights' kernels run; w8a8: of the int8 products of the w8a8 "
      "kernel)" },
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
    if (!InvalidInputError || !CacheCapacityError || !UnsupportedModelError || !OutOfMemoryError || !CoreError)
        return NULL;
    const char *forced = getenv("HA_KERNELS");
    if (forced && *forced && ha_kernels_select(forced) != HA_OK) {
        PyErr_Format(PyExc_ImportError, "HA_KERNELS=%s: %s", forced, ha_last_error());
        return NULL;
    }
    (void)ha_kernels_name();
    if (interrupts_init() != 0) return NULL;
    if (PyType_Ready(&ModelType) < 0 || PyType_Ready(&ContextType) < 0 || PyType_Ready(&BPEType) < 0 ||
        PyType_Ready(&SamplerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Model", (PyObject *)&ModelType) < 0 ||
        PyModule_AddObjectRef(m, "Context", (PyObject *)&ContextType) < 0 ||
        PyModule_AddObjectRef(m, "BPE", (PyObject *)&BPEType) < 0 ||
        PyModule_AddObjectRef(m, "Sampler", (PyObject *)&SamplerType) < 0 ||
        PyModule_AddIntConstant(m, "COST_STATE", HA_COST_STATE) < 0 || generate_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
