/* Chooses the kernel variant once: the best the CPU and the OS support (cpuid for the instructions,
 * xgetbv for the OS saving the wide registers), unless HA_KERNELS names another. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static int cpu_has_avx2_fma_f16c(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!(osxsave && avx && fma && f16c)) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0x6) != 0x6) return 0; /* XMM and YMM state saved by the OS */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 5) & 1;             /* AVX2 */
}
#else
static int cpu_has_avx2_fma_f16c(void) { return 0; }
#endif

static _Atomic(const ha_kernels *) chosen; /* read by forwards without the GIL, set by ha_kernels_select */

static const ha_kernels *variant(const char *name) {
    if (strcmp(name, "scalar") == 0) return &ha_kernels_scalar;
    if (strcmp(name, "avx2") == 0) return cpu_has_avx2_fma_f16c() ? &ha_kernels_avx2 : NULL;
    return NULL;
}

/* Called first from the binding's module init (single-threaded), so the lazy choice below never races. */
const ha_kernels *ha_kernels_get(void) {
    const ha_kernels *k = chosen;
    if (!k) {
        const char *env = getenv("HA_KERNELS");
        k = env && *env ? variant(env) : NULL;
        k = k ? k : cpu_has_avx2_fma_f16c() ? &ha_kernels_avx2 : &ha_kernels_scalar;
        chosen = k;
    }
    return k;
}

const char *ha_kernels_name(void) { return ha_kernels_get()->name; }

ha_status ha_kernels_select(const char *name) {
    const ha_kernels *k = name ? variant(name) : NULL;
    if (!k)
        return ha_fail(HA_ERR_UNSUPPORTED,
                       "kernel variant '%s' is not available on this CPU; choose one of: scalar%s",
                       name ? name : "(null)", cpu_has_avx2_fma_f16c() ? ", avx2" : "");
    chosen = k;
    return HA_OK;
}
