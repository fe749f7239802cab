/* kq_scalar.c - the quantised-type GEMM in plain C: the test oracle every tier of kq.h
 * reproduces bit for bit. Reads the file's rows in place; each weight block is decoded once
 * (ge_block_decode) and applied to every token of the task. Built with -std=c11, so the
 * compiler does not contract a*b+c into an FMA. */
#include <string.h>

#include "dtype.h"
#include "kq.h"

int ge_kq_span(uint32_t type)
{
    switch (type) {
    case GE_T_Q4_0: case GE_T_Q4_1: case GE_T_Q5_0: case GE_T_Q5_1: case GE_T_IQ4_NL:
        return 1;
    case GE_T_Q2_K: case GE_T_Q3_K: case GE_T_Q4_K: case GE_T_Q5_K: case GE_T_Q6_K:
    case GE_T_IQ4_XS:
        return GE_QK_K / 32;
    default:
        return 0;
    }
}

/* ---- packing (all tiers) ------------------------------------------------------------- */

size_t ge_kq_packed_size_g(uint32_t type, int64_t rows, int64_t cols, int group)
{
    if (type != GE_T_Q4_K)
        return 0;
    return (size_t)((rows + group - 1) / group * (cols / GE_QK_K) * GE_KQ_Q4K_BYTES(group));
}

size_t ge_kq_scalar_packed_size(uint32_t type, int64_t rows, int64_t cols)
{
    (void)type, (void)rows, (void)cols;
    return 0;
}

static void put_f32(uint8_t *p, float v) { memcpy(p, &v, 4); }

void ge_kq_pack_g(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                  int64_t r0, int64_t r1, int group)
{
    const ge_dtype_info *ti = ge_dtype(type);
    const int64_t nsb = cols / GE_QK_K, G = group;
    const size_t row_bytes = (size_t)nsb * ti->bytes;
    for (int64_t g = r0 / G; g * G < r1; g++) {
        uint8_t *gp = (uint8_t *)dst + g * nsb * GE_KQ_Q4K_BYTES(G);
        for (int64_t s = 0; s < nsb; s++) {
            uint8_t *bp = gp + s * GE_KQ_Q4K_BYTES(G);
            for (int64_t r = 0; r < G; r++) {
                const int64_t row = g * G + r;
                const uint8_t *blk =
                    row < rows ? (const uint8_t *)src + (size_t)row * row_bytes + s * ti->bytes
                               : NULL;
                ge_block_codes k = {0};
                if (blk)
                    ge_block_decode(type, blk, &k);
                for (int p = 0; p < 4; p++)
                    for (int c = 0; c < 8; c++)
                        for (int j = 0; j < 4; j++)
                            bp[((p * 8 + c) * G + r) * 4 + j] =
                                blk ? blk[16 + 32 * p + 4 * c + j] : 0;
                for (int j = 0; j < 8; j++) {
                    bp[128 * G + j * G + r] = (uint8_t)k.s[j];
                    bp[136 * G + j * G + r] = (uint8_t)k.m[j];
                }
                put_f32(bp + 144 * G + 4 * r, k.d);
                put_f32(bp + 148 * G + 4 * r, k.dmin);
            }
        }
    }
}

/* ---- GEMM ---------------------------------------------------------------------------- */

#define TOKENS 64 /* accumulators kept per pass over a row */

/* acc[t - t0] += block b's contribution for tokens [t0, t1), by kq.h's rule for its type */
static void block_tokens(const ge_block_codes *k, int64_t b, const ge_q8_act *act, int64_t t0,
                         int64_t t1, float *acc)
{
    const int64_t cols = act->cols, nb32 = cols / 32, first = b * k->n / 32;
    for (int64_t t = t0; t < t1; t++) {
        const int8_t *a = act->qs + t * cols + b * k->n;
        const float da = act->d[t * nb32 + first];
        float *y = acc + (t - t0);
        if (k->n == 32) {
            int32_t isum = 0;
            for (int i = 0; i < 32; i++)
                isum += k->c[i] * a[i];
            if (k->has_min)
                *y = *y + ((float)isum * (k->d * da) +
                           (float)act->sum[t * nb32 + first] * (k->dmin * da));
            else
                *y = *y + (float)isum * (k->d * da);
            continue;
        }
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 256 / k->sub; j++) {
            int32_t dot = 0, asum = 0;
            for (int i = j * k->sub; i < (j + 1) * k->sub; i++)
                dot += k->c[i] * a[i], asum += a[i];
            isum += k->s[j] * dot;
            msum += k->m[j] * asum;
        }
        if (k->has_min)
            *y = *y + ((float)isum * (k->d * da) - (float)msum * (k->dmin * da));
        else
            *y = *y + (float)isum * (k->d * da);
    }
}

void ge_kq_scalar_gemm(uint32_t type, const void *w, int64_t rows, int64_t cols,
                       const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                       float *y, int64_t ldy)
{
    const ge_dtype_info *ti = ge_dtype(type);
    const int64_t nb = cols / ti->block;
    const size_t row_bytes = (size_t)nb * ti->bytes;
    ge_block_codes k;
    float acc[TOKENS];
    for (int64_t tc = t0; tc < t1; tc += TOKENS) {
        const int64_t tn = t1 - tc < TOKENS ? t1 - tc : TOKENS;
        for (int64_t o = r0; o < r1; o++) {
            const uint8_t *row = (const uint8_t *)w + (size_t)o * row_bytes;
            for (int64_t t = 0; t < tn; t++)
                acc[t] = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                ge_block_decode(type, row + (size_t)b * ti->bytes, &k);
                block_tokens(&k, b, act, tc, tc + tn, acc);
            }
            for (int64_t t = 0; t < tn; t++)
                y[(tc + t) * ldy + o] = acc[t];
        }
    }
}
