/* Ctrl-C while the core runs without the GIL. During a core call made on the main thread, SIGINT's C handler is
 * ours, chained to the one that was there (Python's, which trips its own flag as before): it counts the signal,
 * so the core's interrupt poll (ha.h) notices it with one atomic load and only then takes the GIL to run
 * Python's signal handlers (PyErr_CheckSignals). If one raised (KeyboardInterrupt), the core stops at that poll
 * and the exception is raised when the call returns; if none did (a handler that only logs), the work goes on.
 * Calls on other threads are not interrupted: Python delivers signals to the main thread only. A callback that
 * replaces SIGINT's handler (signal.signal) during a call takes the chain away until that call returns. */
#include "binding.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

static atomic_uint sigint_count;   /* SIGINTs seen by on_sigint */
static struct sigaction chained;   /* the action on_sigint forwards to, saved when it was installed */
static int chain_depth;            /* main-thread calls in progress that installed or joined it (GIL held) */
static unsigned long main_thread;  /* threading.main_thread().ident */

static void on_sigint(int sig, siginfo_t *info, void *uctx) {
    atomic_fetch_add_explicit(&sigint_count, 1, memory_order_relaxed);
    if (chained.sa_flags & SA_SIGINFO) chained.sa_sigaction(sig, info, uctx);
    else if (chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN) chained.sa_handler(sig);
}

static int sigint_is_ours(const struct sigaction *a) {
    return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == on_sigint;
}

/* Installs on_sigint in front of the current SIGINT action; 0 if there is nothing to chain to (SIGINT ignored,
 * or left to its default, which ends the process anyway). */
static int chain_sigint(void) {
    struct sigaction cur, ours;
    if (sigaction(SIGINT, NULL, &cur) != 0) return 0;
    if (sigint_is_ours(&cur)) return 1; /* left in place by a fork inside a call */
    if (!(cur.sa_flags & SA_SIGINFO) && (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN)) return 0;
    chained = cur;
    ours = cur;
    ours.sa_sigaction = on_sigint;
    ours.sa_flags = cur.sa_flags | SA_SIGINFO;
    return sigaction(SIGINT, &ours, NULL) == 0;
}

/* Puts the chained action back, unless someone replaced ours meanwhile (signal.signal in a callback). */
static void unchain_sigint(void) {
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) == 0 && sigint_is_ours(&cur)) (void)sigaction(SIGINT, &chained, NULL);
}

/* One core call's interrupt: begun with the GIL held before the call, ended with it held after. */

static int poll_signals(void *user) {
    interrupt_scope *s = user;
    unsigned n = atomic_load_explicit(&sigint_count, memory_order_relaxed);
    if (n == s->seen) return 0;
    s->seen = n;
    PyGILState_STATE g = PyGILState_Ensure();
    int stop = PyErr_CheckSignals() != 0;
    if (stop) hold_error(&s->err);
    PyGILState_Release(g);
    return stop;
}

void interrupt_begin(interrupt_scope *s) {
    /* seen is read first: a SIGINT that comes while the chain is installed is then polled, not missed */
    *s = (interrupt_scope){ .it = { poll_signals, s },
                            .seen = atomic_load_explicit(&sigint_count, memory_order_relaxed) };
    if (PyThread_get_thread_ident() == main_thread && (chain_depth > 0 || chain_sigint())) {
        chain_depth++;
        s->chained = 1;
    }
    s->prev = ha_set_interrupt(s->chained ? &s->it : NULL);
}

/* In a child forked during a call (by a callback, on any thread), the forking thread is the only one and Python
 * makes it the main thread; no call of the parent's is in progress there. */
static void interrupt_after_fork(void) {
    main_thread = PyThread_get_thread_ident();
    chain_depth = 0;
    unchain_sigint();
}

int interrupt_end(interrupt_scope *s) {
    ha_set_interrupt(s->prev);
    if (s->chained && --chain_depth == 0) unchain_sigint();
    if (!error_held(&s->err)) return 0;
    raise_held(&s->err);
    return 1;
}

int interrupts_init(void) {
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *main = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
    PyObject *ident = main ? PyObject_GetAttrString(main, "ident") : NULL;
    main_thread = ident ? PyLong_AsUnsignedLong(ident) : 0;
    Py_XDECREF(threading);
    Py_XDECREF(main);
    Py_XDECREF(ident);
    if (PyErr_Occurred()) return -1;
    (void)pthread_atfork(NULL, NULL, interrupt_after_fork);
    return 0;
}
