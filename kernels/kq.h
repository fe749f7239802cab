/* kq.h - internals of the GEMM family for the quantised weight types other than Q8_0
 * (kernels/kq*.c): Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL (blocks of 32) and Q2_K, Q3_K, Q4_K, Q5_K,
 * Q6_K, IQ4_XS (super-blocks of 256), against int8 activations in the common ge_q8_act form.
 * Shared by its tier files, its test (tests/test_kern_kq.c) and the engine's choice of the
 * activation span (ge_kq_span). The engine uses kern.h only.
 *
 * Activations: quantised by the tier's q8_quantize with span ge_kq_span(type): one scale per
 * 32-value block for the 32-block types (exactly the Q8_0 activations), one per 256 values
 * (span 8, the scale repeated per block) for the 256-block types, as ggml's Q8_K; act->sum
 * holds each 32-block's sum of codes.
 *
 * Every tier computes y[t][o] by the same arithmetic (tier-neutral, bit-identical to the
 * scalar oracle in kq_scalar.c). Weight codes c (integers: the nibble/bit fields of the
 * block, minus their bias where ggml subtracts one; IQ4 codes are the table's values) and
 * integer sub-block scales s_j and mins m_j come from the block exactly; a = activation
 * codes, da = activation scale. Per row, acc starts at +0.0f and takes the blocks in order,
 * each fp32 operation rounded (no FMA):
 *   Q4_0, Q5_0, IQ4_NL: isum = sum c a (int32);  acc = acc + (float)isum * (d * da)
 *                       (the Q8_0 rule)
 *   Q4_1, Q5_1:         acc = acc + ((float)isum * (d * da) + (float)asum * (m * da)),
 *                       asum = the block's act->sum
 *   Q4_K, Q5_K:         isum = sum_j s_j * (sum over sub-block j of c a), msum = sum_j m_j *
 *                       asum_j (32-value sub-blocks); acc = acc + ((float)isum * (d * da) -
 *                       (float)msum * (dmin * da))
 *   Q2_K:               the same over 16-value sub-blocks (asum_j summed from the codes)
 *   Q3_K, Q6_K:         isum = sum_j s_j * (sum over 16-value sub-block j of c a);
 *                       acc = acc + (float)isum * (d * da)
 *   IQ4_XS:             the same over 32-value sub-blocks
 * The integer sums are exact in int32 for every code range (the largest, Q6_K: 16 x 128 x
 * 16 x 32 x 127 < 2^28), so a tier may add them in any order; d, dmin and m are the block's
 * fp16 fields widened exactly. */
/* Packed layout of Q4_K (the tiers with a kernel of their own for it; G = the tier's
 * kq_row_group): row group g (rows g*G .. g*G+G-1) starts at byte g * nsb * GE_KQ_Q4K_BYTES(G)
 * (nsb = cols / 256); inside it, super-block s is GE_KQ_Q4K_BYTES(G) bytes:
 *   G*128 code bytes: for 64-value unit p = 0..3 and 4-value chunk c = 0..7, G rows x 4
 *     bytes, byte ((p*8 + c)*G + r)*4 + j = the file's qs[32p + 4c + j] of row r: its low
 *     nibble is value 64p + 4c + j (sub-block 2p), its high nibble value 64p + 32 + 4c + j
 *     (sub-block 2p + 1);
 *   8*G scales (u8, sub-block j of row r at 128G + j*G + r), 8*G mins likewise;
 *   G fp32 d, G fp32 dmin (the fp16 fields widened exactly).
 * A last partial group is padded with zero codes, scales and factors. Nothing is lost: the
 * packed form is the file's block rearranged (152 bytes per row and super-block against the
 * file's 144). */
#define GE_KQ_Q4K_BYTES(G) ((int64_t)(G) * 152)
/* Packed layout of Q6_K: the same row groups; super-block s of group g at byte
 * (g * nsb + s) * GE_KQ_Q6K_BYTES(G), holding the unsigned codes u = c + 32 (0..63):
 *   G*128 low-nibble bytes as Q4_K's codes (value 64p + 4c + j's low 4 bits in the low
 *     nibble of byte ((p*8 + c)*G + r)*4 + j, value 64p + 32 + 4c + j's in the high one);
 *   G*64 high-bit bytes: byte 128G + ((p*4 + c/2)*G + r)*4 + j holds the top 2 bits of those
 *     two values at bits 4 (c % 2) (first value) and 4 (c % 2) + 2 (second), so one load
 *     serves two chunks in the lanes of their low nibbles;
 *   16*G int8 scales (16-value sub-block j of row r at 192G + j*G + r); G fp32 d.
 * 212 bytes per row and super-block against the file's 210. */
#define GE_KQ_Q6K_BYTES(G) ((int64_t)(G) * 212)
/* Packed layout of Q5_K: the same row groups; super-block s of group g at byte
 * (g * nsb + s) * GE_KQ_Q5K_BYTES(G), holding the codes u = c (0..31):
 *   G*128 nibble bytes: the low 4 bits of the codes, as Q4_K's;
 *   G*32 fifth-bit bytes: byte 128G + ((p*2 + c/4)*G + r)*4 + j holds at bit h*4 + c%4 the
 *     fifth bit of value 64p + 32h + 4c + j (h = 0, 1), so one load serves four chunks;
 *   8*G scales (u8) at 160G + j*G + r, 8*G mins likewise at 168G; G fp32 d at 176G, G fp32
 *     dmin at 180G.
 * 184 bytes per row and super-block against the file's 176. */
#define GE_KQ_Q5K_BYTES(G) ((int64_t)(G) * 184)
/* Packed layout of IQ4_XS: the same row groups; super-block s of group g at byte
 * (g * nsb + s) * GE_KQ_IQ4XS_BYTES(G):
 *   G*128 nibble bytes as Q4_K's codes, holding the 4-bit table indices (c =
 *     ge_iq4nl_values[index]);
 *   8*G int8 scales (32-value sub-block j of row r at 128G + j*G + r, -32..31); G fp32 d at
 *     136G.
 * 140 bytes per row and super-block against the file's 136. */
#define GE_KQ_IQ4XS_BYTES(G) ((int64_t)(G) * 140)
/* Packed layout of Q3_K: the same row groups; super-block s of group g at byte
 * (g * nsb + s) * GE_KQ_Q3K_BYTES(G), holding the unsigned codes u = c + 4 (0..7):
 *   G*64 2-bit bytes: for 16-value sub-block v = 0..15, G rows x 4 bytes; byte (v*G + r)*4
 *     + j holds at bits 2q, 2q + 1 the low 2 bits of value 16v + 4q + j (q = 0..3), so one
 *     load serves a sub-block's four 4-value chunks;
 *   G*32 third-bit bytes: byte 64G + ((v/2)*G + r)*4 + j holds at bit 4 (v % 2) + q the third
 *     bit of value 16v + 4q + j (one load serves two sub-blocks);
 *   16*G int8 scales (sub-block v of row r at 96G + v*G + r, -32..31); G fp32 d at 112G.
 * 116 bytes per row and super-block against the file's 110. */
#define GE_KQ_Q3K_BYTES(G) ((int64_t)(G) * 116)
/* Packed layout of Q2_K: the same row groups, GE_KQ_Q2K_BYTES(G) per super-block:
 *   G*64 2-bit bytes of the codes c (0..3) as Q3_K's;
 *   16*G bytes, the file's scale | min << 4 of sub-block v of row r at 64G + v*G + r;
 *   G fp32 d at 80G, G fp32 dmin at 84G.
 * 88 bytes per row and super-block against the file's 84. */
#define GE_KQ_Q2K_BYTES(G) ((int64_t)(G) * 88)
/* Packed layout of the 32-value block family (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; every tier that
 * packs them, G = its kq_row_group; kq32.c's one packer): row group g (rows g*G .. g*G+G-1)
 * starts at byte g * nb * GE_KQ32_BYTES(G, five, min) (nb = cols / 32, five: Q5_0 / Q5_1,
 * min: Q4_1 / Q5_1); inside it, block b (columns 32b .. 32b+31) is:
 *   G*16 code bytes: for 4-value chunk c = 0..3, G rows x 4 bytes: byte (c*G + r)*4 + j is
 *     the file's qs[4c + j] of row r: its low nibble holds (the low 4 bits of) value 4c + j,
 *     its high nibble value 16 + 4c + j. One G*4-byte load gives, per nibble, the G rows of
 *     a 4-value chunk, a vpdpbusd / maddubs operand after one mask (and shift);
 *   five: G*4 high-bit bytes at 16G: byte 16G + r*4 + j holds at bit k (k = 0..7) the fifth
 *     bit of value 4k + j of row r (k < 4: chunk k's low nibble, k >= 4: chunk k - 4's high
 *     nibble), the lanes of the code loads, so one load serves the block;
 *   G fp32 d at GE_KQ32_D_OFF(G, five), the fp16 field widened exactly (ge_fp16_to_fp32);
 *   min: G fp32 m (the fp16 min, widened) at GE_KQ32_D_OFF(G, five) + 4G.
 * The nibbles are stored as they are in the file (u = c + 8 for Q4_0, c + 16 for Q5_0 with
 * the fifth bit, c for Q4_1 / Q5_1, the table index for IQ4_NL); kernels remove the bias
 * exactly (kq32_*.c). A last partial group is padded with zero bytes (codes, d and m 0).
 * Bytes per row and block: Q4_0 / IQ4_NL 20 (file 18), Q4_1 24 (20), Q5_0 24 (22), Q5_1 28
 * (24). */
#define GE_KQ32_D_OFF(G, five) ((int64_t)(G) * ((five) ? 20 : 16))
#define GE_KQ32_BYTES(G, five, min) ((int64_t)(G) * (20 + ((five) ? 4 : 0) + ((min) ? 4 : 0)))

#ifndef GE_KQ_H
#define GE_KQ_H

#include "kern.h"

/* 1 for the 32-block types, 8 (256 values) for the 256-block ones; 0 for types this family
 * does not compute. */
int ge_kq_span(uint32_t type);
/* whether the type's kernels read act->sum16 (Q2_K, Q3_K, Q6_K: 16-value sub-blocks); the
 * quantiser fills it only then (it cost 1.3% of a Q4_K_M run when always filled) */
bool ge_kq_uses_sum16(uint32_t type);

/* Shared by all tiers (plain C, kq_scalar.c): the packed size (0 for a type the tier reads
 * in place) and packer of rows [r0, r1) (r0 a multiple of G; r1 too, or rows) for group G. */
size_t ge_kq_packed_size_g(uint32_t type, int64_t rows, int64_t cols, int group);
void ge_kq_pack_g(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                  int64_t r0, int64_t r1, int group);

/* The scalar tier (kq_scalar.c): reads the file's rows in place (no packing). */
size_t ge_kq_scalar_packed_size(uint32_t type, int64_t rows, int64_t cols);
void ge_kq_scalar_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                       const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                       float *y, int64_t ldy);

/* The 32-value block family (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL: ge_kq_span 1) has its own home,
 * kernels/kq32*.c: its packed size and packer for row group G (kq32.c, plain C; the layout
 * above; ge_kq_packed_size_g / ge_kq_pack_g route these types here), and per tier its GEMM
 * on that packed form (kq32_avx2.c, G = 8; kq32_avxvnni.c, G = 8; kq32_avx512.c, G = 16),
 * which the tier's kq_gemm calls for those types. The scalar tier reads the file's rows. */
size_t ge_kq32_packed_size_g(uint32_t type, int64_t rows, int64_t cols, int group);
void ge_kq32_pack_g(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                    int64_t r0, int64_t r1, int group);

#if defined(__aarch64__)
/* kq_neon.c, kq_dotprod.c (kq_arm.h): the file's rows in place, every type */
void ge_kq_neon_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                     const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                     float *y, int64_t ldy);
void ge_kq_dotprod_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                        const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                        float *y, int64_t ldy);
#endif

#if defined(__x86_64__)
void ge_kq32_avx2_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                       const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                       float *y, int64_t ldy);
void ge_kq32_avxvnni_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                          const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                          float *y, int64_t ldy);
void ge_kq32_avx512_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                         const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                         float *y, int64_t ldy);
/* kq_avxvnni.c (G = 8, the avx2 layouts): 256-bit vpdpbusd */
void ge_kq_avxvnni_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                        const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                        float *y, int64_t ldy);
/* kq_avx2.c (G = 8): the types with a packed layout above; the others through the scalar
 * oracle in place */
size_t ge_kq_avx2_packed_size(uint32_t type, int64_t rows, int64_t cols);
void ge_kq_avx2_pack(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                     int64_t r0, int64_t r1);
void ge_kq_avx2_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                     const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                     float *y, int64_t ldy);
/* kq_avx512.c (G = 16) */
size_t ge_kq_avx512_packed_size(uint32_t type, int64_t rows, int64_t cols);
void ge_kq_avx512_pack(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                       int64_t r0, int64_t r1);
void ge_kq_avx512_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                       const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                       float *y, int64_t ldy);
#endif

#endif
