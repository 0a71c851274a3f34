/* The calling thread's interrupt (ha_set_interrupt) and the monotonic clock that max_time is measured on. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <time.h>

#include "core.h"

static _Thread_local const ha_interrupt *current; /* NULL: none */
static _Thread_local int stopped;                 /* poll returned nonzero since current was set */

const ha_interrupt *ha_set_interrupt(const ha_interrupt *it) {
    const ha_interrupt *prev = current;
    current = it;
    stopped = 0;
    return prev;
}

int ha_interrupted(void) {
    if (!stopped && current && current->poll && current->poll(current->user)) stopped = 1;
    return stopped;
}

double ha_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
