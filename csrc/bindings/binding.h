/* Shared by the binding's files (csrc/bindings/), the only C that includes Python.h; one file per Python type and
 * per concern, as python-zstandard's c-ext/: module.c (the module, its exceptions), args.c (buffers, dtypes, dict
 * keys), interrupts.c (Ctrl-C during core calls), callbacks.c (Python callables inside the loops), model.c,
 * context.c, external.c (the types Model and Context, and the external models' adapter), generate.c (the
 * generation functions' arguments), sampler.c, bpe.c (the types Sampler and BPE), functions.c (the module's
 * other functions). Every function has one cleanup exit that releases what it acquired. */
#ifndef HA_BINDING_H
#define HA_BINDING_H

#define _DEFAULT_SOURCE /* sigaction's SA_ flags */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../ha.h"

/* ---- held exceptions ------------------------------------------------------------------------------------ */

/* An exception taken off the thread where it was raised (in a callback, a signal handler, an external model's
 * forward) to be raised again when the core call returns: PyErr_GetRaisedException's one object where Python has
 * it (3.12 and later), PyErr_Fetch's three before (Debian 12's 3.11). Empty: zeroed. */
typedef struct held_error {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc;
#else
    PyObject *type, *value, *tb;
#endif
} held_error;

static inline int error_held(const held_error *e) {
#if PY_VERSION_HEX >= 0x030C0000
    return e->exc != NULL;
#else
    return e->type != NULL;
#endif
}

/* Drops what e holds; e is empty after. */
static inline void drop_error(held_error *e) {
#if PY_VERSION_HEX >= 0x030C0000
    Py_CLEAR(e->exc);
#else
    Py_CLEAR(e->type);
    Py_CLEAR(e->value);
    Py_CLEAR(e->tb);
#endif
}

/* Takes the exception raised on this thread (the GIL held) into e, dropping what e held. */
static inline void hold_error(held_error *e) {
    drop_error(e);
#if PY_VERSION_HEX >= 0x030C0000
    e->exc = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&e->type, &e->value, &e->tb);
#endif
}

/* Raises e's exception again (the GIL held; e must hold one); e is empty after. */
static inline void raise_held(held_error *e) {
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(e->exc);
    e->exc = NULL;
#else
    PyErr_Restore(e->type, e->value, e->tb);
    e->type = e->value = e->tb = NULL;
#endif
}

/* Moves from's exception into to (which must be empty); from is empty after. */
static inline void move_error(held_error *to, held_error *from) {
    *to = *from;
    *from = (held_error){ 0 };
}

/* tp_traverse's visit of what e holds. */
static inline int visit_error(held_error *e, visitproc visit, void *arg) {
#if PY_VERSION_HEX >= 0x030C0000
    Py_VISIT(e->exc);
#else
    Py_VISIT(e->type);
    Py_VISIT(e->value);
    Py_VISIT(e->tb);
#endif
    return 0;
}

/* ---- module.c ------------------------------------------------------------------------------------------ */

/* Exception classes from habana_assist.errors, looked up once at import. */
extern PyObject *InvalidInputError, *CacheCapacityError, *UnsupportedModelError, *OutOfMemoryError, *CoreError;
/* Sets the exception for core status st (the one place core status codes become Python exceptions), with the core's
 * message; returns NULL. */
PyObject *raise_status(ha_status st);

/* ---- args.c -------------------------------------------------------------------------------------------- */

/* Acquires a C-contiguous buffer of obj whose items have struct format `fmt` ("f", "e", "H", "i", "q",
 * "B", "d"); writable if asked. On failure sets an exception naming `what` and returns -1. */
int get_buffer(PyObject *obj, const char *fmt, int writable, const char *what, Py_buffer *view);
/* A weight dtype's name ("float32", "int8", "bfloat16-panels", ...) -> *out; -1 with an exception if unknown. */
int parse_dtype(PyObject *name, ha_dtype *out);
/* The buffer format of dtype t's arrays ("f", "e", "H", or "B" for int8 and int4 blocks). */
const char *dtype_format(ha_dtype t);
/* Fails naming the first key of d not in allowed (NULL-terminated), as "<what>: unknown <noun> 'key'": a misspelt
 * field is an error, not a default. */
int check_keys(PyObject *d, const char *const *allowed, const char *what, const char *noun);

/* ---- interrupts.c -------------------------------------------------------------------------------------- */

/* One core call's interrupt: begun with the GIL held before the call, ended with it held after. */
typedef struct interrupt_scope {
    ha_interrupt it;
    const ha_interrupt *prev;            /* the thread's interrupt before (a call inside a callback nests) */
    unsigned seen;                       /* sigint_count already looked at */
    int chained;                         /* this call joined the SIGINT chain */
    held_error err;                      /* what a signal handler raised */
} interrupt_scope;

void interrupt_begin(interrupt_scope *s);
/* Returns 1 with the handler's exception set if a signal handler raised during the call (whatever the call
 * returned: the exception is never dropped), else 0. */
int interrupt_end(interrupt_scope *s);
/* At import: notes the main thread, and has a child forked during a call start with no call in progress. -1 with
 * an exception on failure. */
int interrupts_init(void);

/* ---- callbacks.c --------------------------------------------------------------------------------------- */

/* Python callables called from inside a generation loop that runs without the GIL: the GIL is taken for each
 * call, and an exception one raises stops the loop and is re-raised when the loop returns (the three share that
 * slot: the loop stops at the first). fn(row, tokens: list of int) is told decided tokens; logits_fn(row,
 * tokens: bytes of int32, scores: bytearray of float32) processes scores and returns None (changed in place) or
 * an object with a float32 buffer of vocab items; stop_fn(row, tokens: bytes of int32, scores: bytes of float32)
 * returns true to end the row. Any may be NULL or None (then the loop is not given it). */
typedef struct py_callback {
    PyObject *fn, *logits_fn, *stop_fn;
    held_error err;
} py_callback;

int call_python(void *user, int64_t row, const int32_t *tokens, int64_t n);
int call_logits(void *user, int64_t row, const int32_t *tokens, int64_t n, float *scores, int64_t vocab);
int call_stop(void *user, int64_t row, const int32_t *tokens, int64_t n, const float *scores, int64_t vocab);
/* After a core call that returned st: ends its interrupt scope and sets the exception to raise, if any: a
 * signal handler's first, else the callback's (cb may be NULL), else the core's. Returns 0 if there is none. */
int end_call(ha_status st, interrupt_scope *s, py_callback *cb);

/* ---- model.c ------------------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    ha_llama *m;
    Py_buffer *views; /* every weight buffer, held (and so kept alive) for the model's life */
    Py_ssize_t n_views;
    int64_t vocab_size;
} ModelObject;

extern PyTypeObject ModelType;

/* ---- context.c, external.c ----------------------------------------------------------------------------- */

/* A model interface (ha.h ha_lm) and its cache: a native context (c), or an external model's (adapter, made by
 * external_context: habana_assist/integrations/external.py drives a model of another framework through it). */
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
    held_error err;
} ContextObject;

extern PyTypeObject ContextType;
/* The context's model interface, NULL if it is neither initialized nor external. */
ha_lm *context_lm(ContextObject *self);
/* Marks the context busy for a call made without the GIL; two threads may not drive one cache at once. -1 with an
 * exception if it is not initialized or busy. */
int context_enter(ContextObject *self);
/* Moves an exception an external model's callback raised during a core call into cb's slot (where end_call
 * raises it), unless cb holds one already (the loop stopped at the first). */
void adopt_external_error(ContextObject *self, py_callback *cb);
/* external_context(adapter, vocab_size, capacity, n_seq=1) -> a Context of n_seq sequences whose model is
 * adapter's. */
PyObject *py_external_context(PyObject *mod, PyObject *args);

/* ---- generate.c ---------------------------------------------------------------------------------------- */

/* What the generation functions take, from a dict of named options (generate.c lists them): the buffers (held
 * until release_gen), the parameters, and the Python callables (owned until release_gen). */
enum {
    G_PROMPT,
    G_START,
    G_EOS,
    G_OUT,
    G_SCORES,
    G_BIAS_TOK,
    G_BIAS_OFF,
    G_BIAS_VAL,
    G_BAD_TOK,
    G_BAD_OFF,
    G_BOS,
    G_FEOS,
    G_SUPPRESS,
    G_BEGIN,
    G_LOGITS,
    G_SOURCES,
    G_PROPOSED,
    G_ACCEPTED,
    G_DCOSTS,
    G_TCOSTS,
    G_D1COSTS,
    G_STATE,
    G_TREE_COUNTS,
    G_TREE_ROUNDS,
    G_TREE_NODES,
    G_SECONDS,
    G_NBUF
};

typedef struct gen_args {
    Py_buffer buf[G_NBUF];
    int held; /* bit per buffer above */
    ha_generate_params p;
    py_callback cb;
} gen_args;

/* Fails naming the first key of opts that is not an option of allowed (NULL-terminated), or if opts is not a
 * dict: -1 with InvalidInputError. */
int check_options(PyObject *opts, const char *const *allowed, const char *what);
/* The Sampler's options: generate()'s sampling options, and stop_fn, logits_out and no_cache (allowed so that one
 * dict serves both; not read). */
extern const char *const SAMPLER_KEYS[];
/* Releases every buffer and callable g holds. */
void release_gen(gen_args *g);
/* The sampling options of opts (every one required) -> g's buffers, g->cb.logits_fn and *sp. -1 with an
 * exception naming the option on failure (the caller releases what was taken). `what` names the caller in
 * messages. Shared by generation and the Sampler type. */
int take_sampling(gen_args *g, PyObject *opts, const char *what, ha_sampling_params *sp);
PyObject *py_generate(PyObject *mod, PyObject *args);
PyObject *py_generate_assisted(PyObject *mod, PyObject *args);
/* At import: adds AssistedStats (generate_assisted's result, a named structure) and the names the core's enums
 * cross the binding by (SCHEDULES, ACCEPTANCES) to module m. -1 with an exception on failure. */
int generate_init(PyObject *m);

/* ---- sampler.c, bpe.c ---------------------------------------------------------------------------------- */

extern PyTypeObject SamplerType, BPEType;

/* ---- functions.c: the module's other functions ---------------------------------------------------------- */

PyObject *py_quantize(PyObject *mod, PyObject *args);
PyObject *py_pack(PyObject *mod, PyObject *args);
PyObject *py_row_bytes(PyObject *mod, PyObject *args);
PyObject *py_set_num_threads(PyObject *mod, PyObject *arg);
PyObject *py_get_num_threads(PyObject *mod, PyObject *unused);
PyObject *py_kernels_name(PyObject *mod, PyObject *unused);
PyObject *py_pool_stats(PyObject *mod, PyObject *unused);
PyObject *py_blas_core(PyObject *mod, PyObject *unused);
PyObject *py_select_kernels(PyObject *mod, PyObject *arg);
PyObject *py_available_memory(PyObject *mod, PyObject *unused);
PyObject *py_measure_read_bandwidth(PyObject *mod, PyObject *args);
PyObject *py_measure_mac_rate(PyObject *mod, PyObject *args, PyObject *kwargs);
PyObject *py_rng_uniform(PyObject *mod, PyObject *args);

#endif /* HA_BINDING_H */
