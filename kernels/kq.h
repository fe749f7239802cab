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
#ifndef GE_KQ_H
#define GE_KQ_H

#include "kern.h"

/* 1 for the 32-block types, 8 (256 values) for the 256-block ones; 0 for types this family
 * does not compute. */
int ge_kq_span(uint32_t type);

/* The scalar tier (kq_scalar.c): reads the file's rows in place (no packing). */
void ge_kq_scalar_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                       const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                       float *y, int64_t ldy);

#endif
