/* exp_neon.h - the attention family's polynomial exp, 4 lanes (attn.h has the numerics).
 * Included by the ARM tier files (attention, activations). The same operations as
 * exp_avx2.h's exp8 (fused multiply-adds where it fuses, round-to-nearest-even n), so the
 * lanes give the bits the x86 tiers give. */
#ifndef GE_EXP_NEON_H
#define GE_EXP_NEON_H

#include <arm_neon.h>

#include "attn.h"

static inline __attribute__((always_inline)) float32x4_t exp4(float32x4_t t)
{
    /* clamped so that 2^n is a normal float; the ends (and NaN, which FMAX/FMIN propagate)
     * are overridden below */
    const float32x4_t x = vminq_f32(vmaxq_f32(t, vdupq_n_f32(-87.5f)),
                                    vdupq_n_f32(GE_ATTN_EXP_MAX));
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(GE_ATTN_LOG2E)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(GE_ATTN_LN2_HI));
    r = vfmsq_f32(r, n, vdupq_n_f32(GE_ATTN_LN2_LO));
    float32x4_t p = vdupq_n_f32(GE_ATTN_EXP_C6);
    p = vfmaq_f32(vdupq_n_f32(GE_ATTN_EXP_C5), p, r);
    p = vfmaq_f32(vdupq_n_f32(GE_ATTN_EXP_C4), p, r);
    p = vfmaq_f32(vdupq_n_f32(GE_ATTN_EXP_C3), p, r);
    p = vfmaq_f32(vdupq_n_f32(GE_ATTN_EXP_C2), p, r);
    p = vfmaq_f32(vdupq_n_f32(GE_ATTN_EXP_C1), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
    y = vbslq_f32(vcltq_f32(t, vdupq_n_f32(GE_ATTN_EXP_FLUSH)), vdupq_n_f32(0.0f), y);
    y = vbslq_f32(vcgtq_f32(t, vdupq_n_f32(GE_ATTN_EXP_MAX)), vdupq_n_f32(__builtin_inff()), y);
    return vbslq_f32(vceqq_f32(t, t), y, t);
}

#endif
