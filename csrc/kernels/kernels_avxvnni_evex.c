/* The AVX-VNNI kernels (kernels_avxvnni.c) built once more with the EVEX encoding of vpdpbusd ymm (AVX512_VNNI and
 * AVX512VL: the same operation on the same registers): the variant "avx-vnni-evex", which the tests select to run that
 * source on CPUs with AVX-512 VNNI but no AVX-VNNI; never chosen by itself. */
#define HA_AVXVNNI_EVEX 1
#include "kernels_avxvnni.c"
