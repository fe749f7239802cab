/* attn_rel_neon.c - attn_rel, 4 lanes (attn_rel_tier.h). */
#include <arm_neon.h>

/* the four lanes' sum in a fixed order: (x0 + x2) + (x1 + x3) */
static inline float sum4(float32x4_t x)
{
    const float32x2_t s = vadd_f32(vget_low_f32(x), vget_high_f32(x));
    return vget_lane_f32(s, 0) + vget_lane_f32(s, 1);
}

#define VW 4
typedef float32x4_t vf;
#define V_ZERO() vdupq_n_f32(0.0f)
#define V_LOAD(p) vld1q_f32(p)
#define V_STORE(p, x) vst1q_f32(p, x)
#define V_SET1(x) vdupq_n_f32(x)
#define V_ADD(a, b) vaddq_f32(a, b)
#define V_MUL(a, b) vmulq_f32(a, b)
#define V_FMA(a, b, c) vfmaq_f32(c, a, b)
#define V_SUM(x) sum4(x)
#define ATTN_REL_EXP ge_attn_exp_neon
#define ATTN_REL_NAME ge_attn_rel_neon
#include "attn_rel_tier.h"
