/* AVX-VNNI kernels: the avx2 variant's table (kernels_avx2.c) with the w8a8 class's integer sums taken by vpdpbusd
 * on 256-bit registers (kernels_w8a8_avx2.h with W8_VNNI 1): one instruction a step of four products per lane, where
 * AVX2 spends vpmaddubsw, vpmaddwd and vpaddd (and the sign trick's vpsignb). Its every other entry is AVX2's own
 * function. Every output is bitwise AVX2's and the scalar reference's (the same exact integer sums, the same float
 * chain), so choosing this variant changes no output.
 *
 * Built twice. Here, as "avx-vnni": the VEX instruction (_mm256_dpbusd_avx_epi32, target avxvnni), which dispatch.c
 * picks on a CPU with AVX2, FMA, F16C and AVX-VNNI but no AVX-512 (Intel's cores since Alder Lake that lack AVX-512:
 * Alder Lake to Arrow Lake and Lunar Lake, the E-core Xeons; AMD's with AVX-VNNI, Zen 5 on, also have AVX-512 and run
 * "avx512"). And by kernels_avxvnni_evex.c as "avx-vnni-evex": the same source with the EVEX encoding of the same
 * instruction on the same ymm registers (_mm256_dpbusd_epi32, AVX512_VNNI with AVX512VL), which the tests select to
 * run this source on CPUs with AVX-512 VNNI but no AVX-VNNI (Ice Lake server, Zen 4); it is never chosen by itself.
 * NULL where the compiler predates AVX-VNNI (GCC 11, clang 12) or the target is not x86. */
#ifndef HA_AVXVNNI_EVEX
#define HA_AVXVNNI_EVEX 0
#endif

#include "kernels.h"

#if HA_AVXVNNI_EVEX
#define VARIANT_NAME "avx-vnni-evex"
#define VARIANT_FN ha_kernels_avxvnni_evex
#else
#define VARIANT_NAME "avx-vnni"
#define VARIANT_FN ha_kernels_avxvnni
#endif

#if (defined(__x86_64__) || defined(__i386__)) && \
    (defined(__clang__) ? __clang_major__ >= 12 : defined(__GNUC__) && __GNUC__ >= 11)

#include <immintrin.h>
#include <pthread.h>

#if HA_AVXVNNI_EVEX
#define W8_FN __attribute__((target("avx2,fma,f16c,avx512vnni,avx512vl")))
#define W8_DPBUSD(a, u, s) _mm256_dpbusd_epi32((a), (u), (s))
#else
#define W8_FN __attribute__((target("avx2,fma,f16c,avxvnni")))
#define W8_DPBUSD(a, u, s) _mm256_dpbusd_avx_epi32((a), (u), (s))
#endif
#define W8_VNNI 1
#include "kernels_w8a8_avx2.h"

/* 12 chains of vpdpbusd ymm (32 uint8 x int8 products into 8 int32), matmul_w8a8's multiply-adds; each chain
 * multiplies its own result, so GCC cannot share the products between chains. */
W8_FN static double mac_burst_w8a8_vnni(int64_t n) {
    __m256i c[12];
    const __m256i w = _mm256_set1_epi8(3);
    for (int i = 0; i < 12; i++) c[i] = _mm256_set1_epi32(i);
    for (int64_t r = 0; r < n; r++)
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) c[i] = W8_DPBUSD(c[i], c[i], w);
    __m256i t = c[0];
    for (int i = 1; i < 12; i++) t = _mm256_xor_si256(t, c[i]);
    return (double)n * 12.0 * 32.0 + 0.0 * (double)_mm256_extract_epi32(t, 0);
}

static ha_kernels table;

static void fill_table(void) {
    table = ha_kernels_avx2;
    table.name = VARIANT_NAME;
    table.matmul_w8a8 = matmul_w8a8;
    table.mac_burst_w8a8 = mac_burst_w8a8_vnni;
}

const ha_kernels *VARIANT_FN(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill_table);
    return &table;
}

#else /* not x86, or a compiler without AVX-VNNI: the variant is absent */
const ha_kernels *VARIANT_FN(void) { return NULL; }
#endif
