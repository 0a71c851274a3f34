/* The AVX-512 kernels (kernels_avx512.c) built once more on SIMDe's AVX-512 intrinsics, which run on AVX2:
 * the variant "avx512-emulated", which the tests select to run that source on CPUs without AVX-512. Built
 * where Debian's libsimde-dev is installed (scripts/setup.sh installs it); elsewhere the variant is absent. */
#if defined(__x86_64__) && defined(__has_include) && !defined(__clang__) /* clang ignores #pragma GCC target */
#if __has_include(<simde/x86/avx512.h>)
#define HA_AVX512_EMULATED 1
#include "kernels_avx512.c"
#endif
#endif

#ifndef HA_AVX512_EMULATED
#include "kernels.h"
const ha_kernels *ha_kernels_avx512_emulated(void) { return NULL; }
#endif
