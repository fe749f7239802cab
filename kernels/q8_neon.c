/* q8_neon.c - Q8_0 GEMM family, neon tier (armv8.0-a Advanced SIMD, no dot product): the
 * activation quantiser of every ARM tier and a widening-multiply GEMM on 8-row groups (q8.h:
 * G = 8, K = 4, bias 0).
 *
 * GEMM: a 16-byte weight load holds 4 rows x 4 bytes of a chunk; the token's 4 chunk bytes,
 * repeated, multiply each half by SMULL (8 int16 products), SMLAL adds the next chunk's
 * products in int16 (two products are at most 2 x 128 x 127 = 32512: exact), SADALP widens
 * the pairs into int32 lanes (two per row), and one pairwise add per block gives the rows'
 * exact int32 dots. Then the common fp32 rule (q8.h): bit-identical to the scalar tier. */
#include "q8_arm.h"

/* ---- quantiser (bit-identical to ge_q8_scalar_quantize) ------------------------------- */

/* The scalar loop's selections (the first operand when the comparison holds): a NaN value
 * never becomes the max, and clamps to -127 when quantised, as there. */
INLINE float32x4_t sel_gt(float32x4_t a, float32x4_t b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
INLINE float32x4_t sel_lt(float32x4_t a, float32x4_t b) { return vbslq_f32(vcltq_f32(a, b), a, b); }

INLINE float32x4_t clip4(float32x4_t v, float32x4_t lo, float32x4_t hi)
{
    v = vbslq_f32(vcltq_f32(v, lo), lo, v); /* x < lo ? lo : x (a NaN comes through) */
    return vbslq_f32(vcgtq_f32(v, hi), hi, v);
}

void ge_q8_neon_quantize(const float *x, int64_t ldx, int64_t t0, int64_t t1, ge_q8_act *act)
{
    const int64_t cols = act->cols, nb = cols / 32, span = act->span > 1 ? act->span : 1;
    const int clip = act->clip;
    const float32x4_t clo = vdupq_n_f32(clip ? act->lo : 0.0f);
    const float32x4_t chi = vdupq_n_f32(clip ? act->hi : 0.0f);
    const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
    for (int64_t t = t0; t < t1; t++) {
        for (int64_t s0 = 0; s0 < nb; s0 += span) { /* a scale per span */
            float32x4_t m = vdupq_n_f32(0.0f);
            for (int64_t i = 0; i < 32 * span; i += 4) {
                float32x4_t v = vld1q_f32(x + t * ldx + s0 * 32 + i);
                if (clip)
                    v = clip4(v, clo, chi);
                m = sel_gt(vabsq_f32(v), m);
            }
            const float amax = vmaxvq_f32(m); /* no NaN lane: the order cannot matter */
            const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int64_t b = s0; b < s0 + span; b++) {
                const float *xb = x + t * ldx + b * 32;
                int32x4_t q[8], sum = vdupq_n_s32(0);
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++) {
                    float32x4_t v = vld1q_f32(xb + 4 * k);
                    if (clip)
                        v = clip4(v, clo, chi);
                    v = sel_lt(sel_gt(vmulq_n_f32(v, id), lo), hi);
                    q[k] = vcvtnq_s32_f32(v); /* round half to even, as the 1.5 * 2^23 trick */
                    sum = vaddq_s32(sum, q[k]);
                }
                int16x8_t h[4];
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++)
                    h[k] = vcombine_s16(vmovn_s32(q[2 * k]), vmovn_s32(q[2 * k + 1]));
                int8_t *qs = act->qs + t * cols + b * 32;
                vst1q_s8(qs, vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])));
                vst1q_s8(qs + 16, vcombine_s8(vmovn_s16(h[2]), vmovn_s16(h[3])));
                act->d[t * nb + b] = d;
                act->sum[t * nb + b] = vaddvq_s32(sum);
            }
        }
    }
}

/* ---- GEMM ---------------------------------------------------------------------------- */

INLINE int8x16_t bcast4(const int8_t *p) /* 4 bytes, four times (LD1R) */
{
    int32_t v;
    memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vld1q_dup_s32(&v));
}

INLINE void tile(const int n, const uint8_t *gp, int64_t nb, const int8_t *a, int64_t lda,
                 const float *da, float *y, int64_t ldy, int nrow)
{
    float32x4_t f[NT][2];
#pragma GCC unroll 4
    for (int i = 0; i < NT; i++)
        f[i][0] = f[i][1] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *bp = (const int8_t *)(gp + b * BLK);
        int32x4_t s[NT][4]; /* rows (0,1), (2,3), (4,5), (6,7): two lanes each */
#pragma GCC unroll 4
        for (int i = 0; i < NT; i++)
            s[i][0] = s[i][1] = s[i][2] = s[i][3] = vdupq_n_s32(0);
#pragma GCC unroll 4
        for (int c = 0; c < 8; c += 2) {
            const int8x16_t w0 = vld1q_s8(bp + 32 * c), w1 = vld1q_s8(bp + 32 * c + 16);
            const int8x16_t w2 = vld1q_s8(bp + 32 * c + 32), w3 = vld1q_s8(bp + 32 * c + 48);
#pragma GCC unroll 4
            for (int i = 0; i < NT; i++) {
                if (i >= n)
                    break;
                const int8_t *ab = a + i * lda + b * 32 + 4 * c;
                const int8x16_t a0 = bcast4(ab), a1 = bcast4(ab + 4);
                const int8x8_t a0l = vget_low_s8(a0), a1l = vget_low_s8(a1);
                s[i][0] = vpadalq_s16(s[i][0], vmlal_s8(vmull_s8(vget_low_s8(w0), a0l),
                                                        vget_low_s8(w2), a1l));
                s[i][1] = vpadalq_s16(s[i][1], vmlal_high_s8(vmull_high_s8(w0, a0), w2, a1));
                s[i][2] = vpadalq_s16(s[i][2], vmlal_s8(vmull_s8(vget_low_s8(w1), a0l),
                                                        vget_low_s8(w3), a1l));
                s[i][3] = vpadalq_s16(s[i][3], vmlal_high_s8(vmull_high_s8(w1, a0), w3, a1));
            }
        }
        const float32x4_t dwl = vld1q_f32((const float *)(bp + 32 * G));
        const float32x4_t dwh = vld1q_f32((const float *)(bp + 32 * G) + 4);
#pragma GCC unroll 4
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            f[i][0] = q8_rule(f[i][0], vpaddq_s32(s[i][0], s[i][1]), dwl, da[i * nb + b]);
            f[i][1] = q8_rule(f[i][1], vpaddq_s32(s[i][2], s[i][3]), dwh, da[i * nb + b]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        store8(y + i * ldy, f[i][0], f[i][1], nrow);
    }
}

#define Q8_ARM_GEMM ge_q8_neon_gemm
#include "q8_arm.h"
