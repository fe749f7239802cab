/* attn_rel.h - the local relative-position attention family (kern.h attn_rel): the audio
 * conformer's attention (docs/model.md 6.3).
 *
 * Numerics. The scalar tier is the oracle: for query i and head h, with q' = q * q_scale and
 * k' = k * k_scale (each product rounded), each logit is the fp32 sum q' . k'_s +
 * q' . r_(i-s), two dot products in order over the head dim; capped as
 * cap * tanh(l / cap) = cap * sign(y) (1 - e) / (1 + e), e = expf(-2 |y|), y = l / cap
 * (kernels/act.h: glibc's tanhf differs across architectures); the exact max;
 * p = expf(l - max); o = sum_s p_s v_s / sum_s p_s in key order. The vector tiers compute
 * each logit with one fma chain per lane over q' . fma(k, k_scale, r)
 * and a fixed lane reduction, the cap as cap * sign(y) (1 - e) / (1 + e) with e = exp(-2 |y|),
 * y = l / cap, and the softmax with the exact max and the polynomial exp (attn.h); p . v
 * accumulates in key order with one fma per element per key. Each row depends only on its own
 * q row and its keys, whatever the task split. Head dims that are not a multiple of the
 * tier's width fall back to the scalar tier. */
#ifndef GE_ATTN_REL_H
#define GE_ATTN_REL_H

#include "kern.h"

void ge_attn_rel_scalar(const ge_attn_rel_args *a, int64_t q0, int64_t q1);
void ge_attn_rel_avx2(const ge_attn_rel_args *a, int64_t q0, int64_t q1);
void ge_attn_rel_avx512(const ge_attn_rel_args *a, int64_t q0, int64_t q1);

#endif
