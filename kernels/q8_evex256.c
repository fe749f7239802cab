/* q8_evex256.c - the avxvnni tier's Q8_0 GEMM (kernels/q8_avxvnni.c) compiled with EVEX
 * encodings: _mm256_dpbusd_epi32 (AVX-512 VNNI + VL) instead of _mm256_dpbusd_avx_epi32
 * (AVX-VNNI, VEX). Test-only: the development machine (AMD Zen 4) has AVX-512 VNNI but not
 * AVX-VNNI, so the avxvnni tier cannot run there; this build lets tests/test_kern_q8.c and
 * tests/bench_q8.c check and time the 256-bit algorithm (same layout, same arithmetic, same
 * results). Dispatch never selects it: see ge_q8_fill_evex256 in q8.c. */
#define Q8V_EVEX 1
#include "q8_avxvnni.c"
