/* Chooses the kernel variant once: the best the CPU and the OS support (cpuid for the instructions,
 * xgetbv for the OS saving the wide registers), unless HA_KERNELS names another. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core.h"
#include "kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned xcr0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return lo;
}

static int cpu_has_avx2_fma_f16c(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!(osxsave && avx && fma && f16c)) return 0;
    if ((xcr0() & 0x6) != 0x6) return 0; /* XMM and YMM state saved by the OS */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 5) & 1;             /* AVX2 */
}

/* AVX-512 F and BW (ebx bits 16, 30), VNNI (ecx bit 11), and the OS saving the opmask and ZMM state
 * (XCR0 bits 5-7) besides AVX2's. */
static int cpu_has_avx512(void) {
    unsigned a, b, c, d;
    if (!cpu_has_avx2_fma_f16c() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return ((b >> 16) & 1) && ((b >> 30) & 1) && ((c >> 11) & 1) && (xcr0() & 0xe6) == 0xe6;
}

/* AVX-VNNI (cpuid leaf 7 subleaf 1, eax bit 4: VEX vpdpbusd on ymm) besides AVX2's features; its registers are
 * AVX2's, whose state cpu_has_avx2_fma_f16c checked the OS saves. */
static int cpu_has_avx_vnni(void) {
    unsigned a, b, c, d;
    if (!cpu_has_avx2_fma_f16c() || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1) return 0; /* a: last subleaf */
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    return (a >> 4) & 1;
}

/* AVX512_VNNI (leaf 7 ecx bit 11) with AVX512F and AVX512VL (ebx bits 16, 31) besides AVX2's features, and the OS
 * saving the opmask and ZMM state (XCR0 bits 5-7), without which EVEX instructions fault even on ymm: the
 * avx-vnni-evex variant's EVEX vpdpbusd ymm. */
static int cpu_has_avx512_vnni_vl(void) {
    unsigned a, b, c, d;
    if (!cpu_has_avx2_fma_f16c() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return ((b >> 16) & 1) && ((b >> 31) & 1) && ((c >> 11) & 1) && (xcr0() & 0xe6) == 0xe6;
}

/* AVX512_BF16 (cpuid leaf 7 subleaf 1, eax bit 5) besides the avx512 variant's features. */
int ha_cpu_has_avx512_bf16(void) {
    unsigned a, b, c, d;
    if (!cpu_has_avx512() || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    return (a >> 5) & 1;
}

/* cpuid traps to the hypervisor in a VM (microseconds), and kernels ask per matmul: looked up once, by whichever
 * thread comes first (the same answer). */
int ha_cpu_is_intel(void) {
    static atomic_int known = -1;
    int v = atomic_load_explicit(&known, memory_order_relaxed);
    if (v < 0) {
        unsigned a = 0, b = 0, c = 0, d = 0; /* set by __get_cpuid where it returns 1 (GCC -O1 cannot tell) */
        v = __get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547u && d == 0x49656e69u &&
            c == 0x6c65746eu; /* "Genu" "ineI" "ntel" */
        atomic_store_explicit(&known, v, memory_order_relaxed);
    }
    return v;
}
#else
static int cpu_has_avx2_fma_f16c(void) { return 0; }
static int cpu_has_avx512(void) { return 0; }
static int cpu_has_avx_vnni(void) { return 0; }
static int cpu_has_avx512_vnni_vl(void) { return 0; }
int ha_cpu_has_avx512_bf16(void) { return 0; }
int ha_cpu_is_intel(void) { return 0; }
#endif

static _Atomic(const ha_kernels *) chosen; /* read by forwards without the GIL, set by ha_kernels_select */

/* Each variant's table where this CPU runs it, else NULL. */
static const ha_kernels *scalar_if_runs(void) { return &ha_kernels_scalar; }
static const ha_kernels *avx2_if_runs(void) { return cpu_has_avx2_fma_f16c() ? &ha_kernels_avx2 : NULL; }
static const ha_kernels *avx512_if_runs(void) { return cpu_has_avx512() ? ha_kernels_avx512() : NULL; }
static const ha_kernels *avx_vnni_if_runs(void) { return cpu_has_avx_vnni() ? ha_kernels_avxvnni() : NULL; }
static const ha_kernels *avx_vnni_evex_if_runs(void) {
    return cpu_has_avx512_vnni_vl() ? ha_kernels_avxvnni_evex() : NULL;
}
/* kernels_avx512_emulated.c is linked only into builds that ask for it (setup.py's HA_AVX512_EMULATED=1: the longest
 * compile of all, for a variant only the tests use); elsewhere this weak reference is NULL. */
#pragma weak ha_kernels_avx512_emulated
static const ha_kernels *avx512_emulated_if_runs(void) {
    return ha_kernels_avx512_emulated && cpu_has_avx2_fma_f16c() ? ha_kernels_avx512_emulated() : NULL;
}
/* needs: what a CPU lacking the variant lacks, for the refusal's message. */
static const struct {
    const char *name;
    const ha_kernels *(*if_runs)(void);
    const char *needs;
} VARIANTS[] = {
    { "scalar", scalar_if_runs, "" },
    { "avx2", avx2_if_runs, "AVX2, FMA and F16C" },
    { "avx-vnni", avx_vnni_if_runs, "AVX-VNNI (cpuid leaf 7 subleaf 1, eax bit 4) besides AVX2, FMA and F16C" },
    { "avx512", avx512_if_runs, "AVX-512 F, BW and VNNI" },
    { "avx512-emulated", avx512_emulated_if_runs, "AVX2, FMA and F16C" },
    { "avx-vnni-evex", avx_vnni_evex_if_runs, "AVX-512 VNNI and VL besides AVX2, FMA and F16C" },
};
#define N_VARIANTS (sizeof VARIANTS / sizeof *VARIANTS)

const ha_kernels *ha_kernels_find(const char *name) {
    for (size_t i = 0; name && i < N_VARIANTS; i++)
        if (strcmp(name, VARIANTS[i].name) == 0) return VARIANTS[i].if_runs();
    return NULL;
}

/* Called first from the binding's module init (single-threaded), so the lazy choice below never races.
 * The emulation is never chosen by itself: it is for tests, and slower than AVX2; nor is avx-vnni-evex, for tests
 * too (a CPU with AVX-512 VNNI runs avx512). */
const ha_kernels *ha_kernels_get(void) {
    const ha_kernels *k = chosen;
    if (!k) {
        const char *env = getenv("HA_KERNELS");
        k = env && *env ? ha_kernels_find(env) : NULL;
        if (!k) k = avx512_if_runs();
        if (!k) k = avx_vnni_if_runs();
        if (!k) k = avx2_if_runs();
        chosen = k = k ? k : &ha_kernels_scalar;
    }
    return k;
}

const char *ha_kernels_name(void) { return ha_kernels_get()->name; }

ha_status ha_kernels_select(const char *name) {
    const ha_kernels *k = ha_kernels_find(name);
    if (!k && name && strcmp(name, "avx512-emulated") == 0 && !ha_kernels_avx512_emulated)
        return ha_fail(HA_ERR_UNSUPPORTED,
                       "kernel variant 'avx512-emulated' is not in this build (it is built for the "
                       "tests, on libsimde-dev): rebuild with HA_AVX512_EMULATED=1 bash scripts/setup.sh (bash "
                       "scripts/test.sh does), or HA_AVX512_EMULATED=1 pip install .");
    if (!k) {
        char avail[128] = ""; /* every name, ", " between them: 63 bytes with the NUL */
        const char *needs = NULL;
        for (size_t i = 0; i < N_VARIANTS; i++) {
            if (VARIANTS[i].if_runs()) {
                if (*avail) strcat(avail, ", ");
                strcat(avail, VARIANTS[i].name);
            }
            if (name && strcmp(name, VARIANTS[i].name) == 0) needs = VARIANTS[i].needs;
        }
        if (needs)
            return ha_fail(HA_ERR_UNSUPPORTED,
                           "kernel variant '%s' is not available on this CPU: it needs %s, which this CPU (or its OS) "
                           "lacks; choose one of: %s",
                           name, needs, avail);
        return ha_fail(HA_ERR_UNSUPPORTED, "kernel variant '%s' is not available on this CPU; choose one of: %s",
                       name ? name : "(null)", avail);
    }
    chosen = k;
    return HA_OK;
}
