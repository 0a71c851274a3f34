/* Per-thread error messages for ha_last_error(). */
#include <stdarg.h>
#include <stdio.h>

#include "core.h"

static _Thread_local char last_error[1024];

const char *ha_last_error(void) { return last_error; }

ha_status ha_fail(ha_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return st;
}
