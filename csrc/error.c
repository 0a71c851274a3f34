/* Per-thread error messages for ha_last_error(). */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char last_error[1024];

const char *ha_last_error(void) { return last_error; }

ha_status ha_fail(ha_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return st;
}

const char *ha_dtype_name(ha_dtype t) {
    switch (t) {
    case HA_F32: return "float32";
    case HA_BF16: return "bfloat16";
    case HA_F16: return "float16";
    default: return "unknown";
    }
}
