/* q8_dotprod.c - Q8_0 GEMM, dotprod tier (armv8.2-a SDOT) on 8-row groups (q8.h: G = 8,
 * K = 4, bias 0). Per block and token the two activation halves sit in two registers; each
 * 4-value chunk is one lane of them, so SDOT-by-lane multiplies a 16-byte weight load (4 rows
 * x 4 bytes) with that chunk in every row: 16 SDOTs give the 8 rows' exact int32 dots of a
 * 32-value block, then the common fp32 rule (q8.h), bit-identical to the scalar tier. */
#include "q8_arm.h"

INLINE void tile(const int n, const uint8_t *gp, int64_t nb, const int8_t *a, int64_t lda,
                 const float *da, float *y, int64_t ldy, int nrow)
{
    float32x4_t f[NT][2];
#pragma GCC unroll 4
    for (int i = 0; i < NT; i++)
        f[i][0] = f[i][1] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *bp = (const int8_t *)(gp + b * BLK);
        int32x4_t s[NT][2];
        int8x16_t x0[NT], x1[NT];
#pragma GCC unroll 4
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            s[i][0] = s[i][1] = vdupq_n_s32(0);
            x0[i] = vld1q_s8(a + i * lda + b * 32);
            x1[i] = vld1q_s8(a + i * lda + b * 32 + 16);
        }
        /* chunk c: rows 0-3 at bp + 32c, rows 4-7 at bp + 32c + 16 */
#define CHUNK(c, x, lane)                                                                   \
    do {                                                                                    \
        const int8x16_t wl = vld1q_s8(bp + 32 * (c)), wh = vld1q_s8(bp + 32 * (c) + 16);    \
        _Pragma("GCC unroll 4") for (int i = 0; i < NT; i++)                                \
        {                                                                                   \
            if (i >= n)                                                                     \
                break;                                                                      \
            s[i][0] = vdotq_laneq_s32(s[i][0], wl, x[i], lane);                             \
            s[i][1] = vdotq_laneq_s32(s[i][1], wh, x[i], lane);                             \
        }                                                                                   \
    } while (0)
        CHUNK(0, x0, 0);
        CHUNK(1, x0, 1);
        CHUNK(2, x0, 2);
        CHUNK(3, x0, 3);
        CHUNK(4, x1, 0);
        CHUNK(5, x1, 1);
        CHUNK(6, x1, 2);
        CHUNK(7, x1, 3);
#undef CHUNK
        const float32x4_t dwl = vld1q_f32((const float *)(bp + 32 * G));
        const float32x4_t dwh = vld1q_f32((const float *)(bp + 32 * G) + 4);
#pragma GCC unroll 4
        for (int i = 0; i < NT; i++) {
            if (i >= n)
                break;
            f[i][0] = q8_rule(f[i][0], s[i][0], dwl, da[i * nb + b]);
            f[i][1] = q8_rule(f[i][1], s[i][1], dwh, da[i * nb + b]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NT; i++) {
        if (i >= n)
            break;
        store8(y + i * ldy, f[i][0], f[i][1], nrow);
    }
}

#define Q8_ARM_GEMM ge_q8_dotprod_gemm
#include "q8_arm.h"
