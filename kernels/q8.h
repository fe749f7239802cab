/* q8.h - internals of the Q8_0 GEMM family (kernels/q8*.c), shared by its tier files, its
 * test (tests/test_kern_q8.c) and its benchmark (tests/bench_q8.c). The engine uses kern.h only.
 *
 * Packed weight layout (every tier; G = the tier's q8_row_group, nb = cols / 32):
 *   row group g (rows g*G .. g*G+G-1) starts at byte g * nb * G * 36; inside it, block b
 *   (columns 32b .. 32b+31) is G*36 bytes:
 *     G*32 weight bytes: byte (c*G + r)*K + j holds W[g*G + r][32b + K c + j] ^ bias, for
 *       chunk c = 0..32/K-1, row r = 0..G-1, j = 0..K-1 (rows interleaved by K = 4 bytes,
 *       so one G*4-byte load feeds G output rows of a vpdpbusd or SDOT; the i8mm tier
 *       takes K = 8, so that one 16-byte load is the 2 x 8 row operand of an SMMLA);
 *     G fp32 row scales dw[r] (the fp16 d of the ggml block, widened exactly).
 *   A last partial group is padded with zero weights (stored as 0 ^ bias) and dw = 0.
 * Tiers: scalar G = 1, bias 0 (that is: per row, per block 32 qs + fp32 d); avx2 G = 8,
 * bias 0; avxvnni G = 8, bias 0x80; avx512 G = 16, bias 0x80; neon and dotprod G = 8, bias
 * 0; i8mm G = 8, K = 8, bias 0. K = 4 where not said.
 *
 * With bias 0x80 the stored byte is w + 128 (u8), the unsigned operand of vpdpbusd, and the
 * activation stays the signed operand, so AVX-512 can feed it straight from the common
 * ge_q8_act buffer as an embedded {1to16} broadcast. The bias is cancelled exactly by seeding
 * each block's int32 sum with -128 * act->sum (sum(w+128)a = sum(wa) + 128 sum(a)).
 *
 * Every tier computes y[t][o] by the same arithmetic: per block an exact int32 dot isum,
 * then acc = acc + (float)isum * (dw * da) in fp32 (no FMA), blocks in order, acc starting at
 * +0.0f. So all x86 tiers are bit-identical to the scalar oracle, and the task split cannot
 * matter.
 *
 * The wide rule (q8_gemm_wide, activations of span GE_Q8_WIDE = 4 blocks sharing one da):
 * per span p = +0.0f, p = p + (float)isum * dw for its 4 blocks in order, then acc = acc +
 * p * da; spans in order. One multiply per block where the Q8_0 rule needs two (dw * da
 * differs per block and token): on AMD Zen 4 a zmm multiply takes a vpdpbusd's pipe slot, so
 * the cap goes from 8 / 10 to 8 / 9.25 of the VNNI peak. Implemented by every x86 tier and
 * the scalar oracle (the ARM tiers keep the Q8_0 rule: the media towers fall back to it). */
#ifndef GE_Q8_H
#define GE_Q8_H

#include "kern.h"

/* bytes of one packed block of G rows */
#define GE_Q8_BLOCK_BYTES(G) ((int64_t)(G) * 36)

/* Shared by all tiers (plain C, q8_scalar.c). */
size_t ge_q8_packed_size_g(int64_t rows, int64_t cols, int group);
void ge_q8_pack_g(const void *src, int64_t rows, int64_t cols, void *dst, int64_t r0,
                  int64_t r1, int group, int width, uint8_t bias);

size_t ge_q8_scalar_packed_size(int64_t rows, int64_t cols);
void ge_q8_scalar_pack(const void *src, int64_t rows, int64_t cols, void *dst, int64_t r0,
                       int64_t r1);
void ge_q8_scalar_quantize(const float *x, int64_t ldx, int64_t t0, int64_t t1, ge_q8_act *act);
void ge_q8_scalar_gemm(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                       int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy);
void ge_q8_scalar_gemm_wide(const void *packed, int64_t rows, int64_t cols,
                            const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0,
                            int64_t r1, float *y, int64_t ldy);

size_t ge_q8_g8_packed_size(int64_t rows, int64_t cols);
void ge_q8_g8_pack(const void *src, int64_t rows, int64_t cols, void *dst, int64_t r0,
                   int64_t r1);
void ge_q8_g8b_pack(const void *src, int64_t rows, int64_t cols, void *dst, int64_t r0,
                    int64_t r1);
void ge_q8_g8w8_pack(const void *src, int64_t rows, int64_t cols, void *dst, int64_t r0,
                     int64_t r1);
size_t ge_q8_g16_packed_size(int64_t rows, int64_t cols);
void ge_q8_g16b_pack(const void *src, int64_t rows, int64_t cols, void *dst, int64_t r0,
                     int64_t r1);

#if defined(__x86_64__)
/* q8_avx2.c (also the avxvnni tier's quantiser) */
void ge_q8_avx2_quantize(const float *x, int64_t ldx, int64_t t0, int64_t t1, ge_q8_act *act);
void ge_q8_avx2_gemm(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                     int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy);
void ge_q8_avx2_gemm_wide(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                          int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y,
                          int64_t ldy);
/* q8_avxvnni.c */
void ge_q8_avxvnni_gemm(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                        int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy);
void ge_q8_avxvnni_gemm_wide(const void *packed, int64_t rows, int64_t cols,
                             const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0,
                             int64_t r1, float *y, int64_t ldy);
/* q8_evex256.c: the avxvnni algorithm compiled with EVEX (AVX-512 VNNI + VL) encodings */
void ge_q8_evex256_gemm(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                        int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy);
void ge_q8_evex256_gemm_wide(const void *packed, int64_t rows, int64_t cols,
                             const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0,
                             int64_t r1, float *y, int64_t ldy);
/* q8_avx512.c */
void ge_q8_avx512_quantize(const float *x, int64_t ldx, int64_t t0, int64_t t1, ge_q8_act *act);
void ge_q8_avx512_gemm(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                       int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy);
void ge_q8_avx512_gemm_wide(const void *packed, int64_t rows, int64_t cols,
                            const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0,
                            int64_t r1, float *y, int64_t ldy);
#endif

#if defined(__aarch64__)
/* q8_neon.c (the quantiser of every ARM tier; the GEMM by widening multiplies) */
void ge_q8_neon_quantize(const float *x, int64_t ldx, int64_t t0, int64_t t1, ge_q8_act *act);
void ge_q8_neon_gemm(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                     int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy);
/* q8_dotprod.c (SDOT) and q8_i8mm.c (SMMLA, the K = 8 layout) */
void ge_q8_dotprod_gemm(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                        int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy);
void ge_q8_i8mm_gemm(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                     int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy);
#endif

/* Test-only entry: the avxvnni tier's table (same layout, quantiser and algorithm) with the
 * GEMM built in EVEX encoding, so machines with AVX-512 VNNI + VL but no AVX-VNNI (such as
 * the AMD Zen 4 development machine) can run and test the 256-bit VNNI algorithm. Runnable
 * when ge_q8_evex256_supported(f). Never selected by dispatch. Leaves k unchanged (returns 0)
 * on non-x86 builds. */
int ge_q8_fill_evex256(ge_kern *k);
int ge_q8_evex256_supported(const ge_cpu_feats *f);

#endif
