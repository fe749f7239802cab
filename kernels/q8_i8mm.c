/* q8_i8mm.c - Q8_0 GEMM, i8mm tier (armv8.6-a SMMLA) on 8-row groups in the K = 8 layout
 * (q8.h): a 16-byte weight load is rows 2p and 2p + 1 x 8 bytes of a chunk, the 2 x 8 left
 * operand of SMMLA; the right one is the same 8 bytes of two tokens (their activation loads
 * zipped by 64-bit halves). One SMMLA adds 32 exact products into the 2 x 2 int32 block
 * [row 2p: token 0, token 1; row 2p + 1: token 0, token 1], so 16 of them give 8 rows x 2
 * tokens of a 32-value block. Then the common fp32 rule (q8.h) lane by lane, with the scales
 * arranged as the block: bit-identical to the scalar tier. An odd last token is paired with
 * itself (the extra lanes are dropped). */
#include "q8_arm.h"

#define NP (NT / 2) /* token pairs per tile */

INLINE void tile(const int n, const uint8_t *gp, int64_t nb, const int8_t *a, int64_t lda,
                 const float *da, float *y, int64_t ldy, int nrow)
{
    const int np = (n + 1) / 2;
    float32x4_t f[NP][4]; /* pair q, row pair p: [2p t0, 2p t1, 2p+1 t0, 2p+1 t1] */
#pragma GCC unroll 2
    for (int q = 0; q < NP; q++)
        f[q][0] = f[q][1] = f[q][2] = f[q][3] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *bp = (const int8_t *)(gp + b * BLK);
        int8x16_t x[NP][4]; /* chunk c of the pair's two tokens */
        int32x4_t s[NP][4];
        float32x4_t dd[NP];
#pragma GCC unroll 2
        for (int q = 0; q < NP; q++) {
            if (q >= np)
                break;
            const int i0 = 2 * q, i1 = 2 * q + 1 < n ? 2 * q + 1 : 2 * q;
            const int8_t *a0 = a + i0 * lda + b * 32, *a1 = a + i1 * lda + b * 32;
            const int64x2_t u0 = vreinterpretq_s64_s8(vld1q_s8(a0));
            const int64x2_t u1 = vreinterpretq_s64_s8(vld1q_s8(a0 + 16));
            const int64x2_t v0 = vreinterpretq_s64_s8(vld1q_s8(a1));
            const int64x2_t v1 = vreinterpretq_s64_s8(vld1q_s8(a1 + 16));
            x[q][0] = vreinterpretq_s8_s64(vzip1q_s64(u0, v0));
            x[q][1] = vreinterpretq_s8_s64(vzip2q_s64(u0, v0));
            x[q][2] = vreinterpretq_s8_s64(vzip1q_s64(u1, v1));
            x[q][3] = vreinterpretq_s8_s64(vzip2q_s64(u1, v1));
            const float32x2_t d2 = {da[i0 * nb + b], da[i1 * nb + b]};
            dd[q] = vcombine_f32(d2, d2); /* [t0, t1, t0, t1] */
            s[q][0] = s[q][1] = s[q][2] = s[q][3] = vdupq_n_s32(0);
        }
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                const int8x16_t w = vld1q_s8(bp + (c * G + 2 * p) * 8);
#pragma GCC unroll 2
                for (int q = 0; q < NP; q++) {
                    if (q >= np)
                        break;
                    s[q][p] = vmmlaq_s32(s[q][p], w, x[q][c]);
                }
            }
        const float32x4_t dwl = vld1q_f32((const float *)(bp + 32 * G));
        const float32x4_t dwh = vld1q_f32((const float *)(bp + 32 * G) + 4);
        const float32x4_t dw[4] = {vzip1q_f32(dwl, dwl), vzip2q_f32(dwl, dwl),
                                   vzip1q_f32(dwh, dwh), vzip2q_f32(dwh, dwh)};
#pragma GCC unroll 2
        for (int q = 0; q < NP; q++) {
            if (q >= np)
                break;
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++)
                f[q][p] = vaddq_f32(f[q][p], vmulq_f32(vcvtq_f32_s32(s[q][p]),
                                                       vmulq_f32(dw[p], dd[q])));
        }
    }
    /* back to token rows: token 0 of pair q is lanes 0 and 2 of each row pair */
#pragma GCC unroll 2
    for (int q = 0; q < NP; q++) {
        if (q >= np)
            break;
        const float32x4_t t0l = vuzp1q_f32(f[q][0], f[q][1]), t1l = vuzp2q_f32(f[q][0], f[q][1]);
        const float32x4_t t0h = vuzp1q_f32(f[q][2], f[q][3]), t1h = vuzp2q_f32(f[q][2], f[q][3]);
        store8(y + 2 * q * ldy, t0l, t0h, nrow);
        if (2 * q + 1 < n)
            store8(y + (2 * q + 1) * ldy, t1l, t1h, nrow);
    }
}

#define Q8_ARM_GEMM ge_q8_i8mm_gemm
#include "q8_arm.h"
