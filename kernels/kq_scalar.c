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

bool ge_kq_uses_sum16(uint32_t type)
{
    return type == GE_T_Q2_K || type == GE_T_Q3_K || type == GE_T_Q6_K;
}

/* ---- packing (all tiers) ------------------------------------------------------------- */

/* bytes of one packed super-block of G rows, 0 for a type without a packed layout */
static int64_t sb_bytes(uint32_t type, int64_t G)
{
    switch (type) {
    case GE_T_Q4_K: return GE_KQ_Q4K_BYTES(G);
    case GE_T_Q5_K: return GE_KQ_Q5K_BYTES(G);
    case GE_T_Q6_K: return GE_KQ_Q6K_BYTES(G);
    case GE_T_IQ4_XS: return GE_KQ_IQ4XS_BYTES(G);
    case GE_T_Q3_K: return GE_KQ_Q3K_BYTES(G);
    case GE_T_Q2_K: return GE_KQ_Q2K_BYTES(G);
    default: return 0;
    }
}

size_t ge_kq_packed_size_g(uint32_t type, int64_t rows, int64_t cols, int group)
{
    if (ge_kq_span(type) == 1)
        return ge_kq32_packed_size_g(type, rows, cols, group);
    return (size_t)((rows + group - 1) / group * (cols / GE_QK_K) * sb_bytes(type, group));
}

size_t ge_kq_scalar_packed_size(uint32_t type, int64_t rows, int64_t cols)
{
    (void)type, (void)rows, (void)cols;
    return 0;
}

static void put_f32(uint8_t *p, float v) { memcpy(p, &v, 4); }

/* One row's super-block into its lanes of the group block bp (kq.h layouts), from the
 * decoded codes: the nibble plane of u = c (Q4_K, Q5_K), c + 32 (Q6_K) or the IQ4 table
 * index of c (IQ4_XS), then the type's high bits, scales, mins and factors. */
/* Q2_K and Q3_K: the 2-bit plane of u = c (Q2_K) or c + 4 (Q3_K), Q3_K's third-bit plane,
 * then the scales (and mins) and factors (kq.h layouts) */
static void pack_row2(uint32_t type, const ge_block_codes *k, uint8_t *bp, int64_t G, int64_t r)
{
    const int three = type == GE_T_Q3_K;
    for (int v = 0; v < 16; v++)
        for (int q = 0; q < 4; q++)
            for (int j = 0; j < 4; j++) {
                const int u = k->c[16 * v + 4 * q + j] + (three ? 4 : 0);
                bp[(v * G + r) * 4 + j] |= (uint8_t)((u & 3) << (2 * q));
                if (three)
                    bp[64 * G + ((v / 2) * G + r) * 4 + j] |=
                        (uint8_t)((u >> 2) << (4 * (v % 2) + q));
            }
    if (three) {
        for (int j = 0; j < 16; j++)
            bp[96 * G + j * G + r] = (uint8_t)(int8_t)k->s[j];
        put_f32(bp + 112 * G + 4 * r, k->d);
    } else {
        for (int j = 0; j < 16; j++)
            bp[64 * G + j * G + r] = (uint8_t)(k->s[j] | k->m[j] << 4);
        put_f32(bp + 80 * G + 4 * r, k->d);
        put_f32(bp + 84 * G + 4 * r, k->dmin);
    }
}

static void pack_row(uint32_t type, const ge_block_codes *k, uint8_t *bp, int64_t G, int64_t r)
{
    if (type == GE_T_Q2_K || type == GE_T_Q3_K) {
        pack_row2(type, k, bp, G, r);
        return;
    }
    int idx[256];
    for (int i = 0; i < 256; i++) {
        idx[i] = k->c[i] + (type == GE_T_Q6_K ? 32 : 0);
        if (type == GE_T_IQ4_XS) /* the table's values are distinct */
            for (int v = 0; v < 16; v++)
                if (ge_iq4nl_values[v] == k->c[i])
                    idx[i] = v;
    }
    for (int p = 0; p < 4; p++)
        for (int c = 0; c < 8; c++)
            for (int j = 0; j < 4; j++) {
                const int ua = idx[64 * p + 4 * c + j], ub = idx[64 * p + 32 + 4 * c + j];
                bp[((p * 8 + c) * G + r) * 4 + j] = (uint8_t)((ua & 15) | (ub & 15) << 4);
                if (type == GE_T_Q6_K) /* the high 2 bits: bits 4 (c % 2) .. of a byte */
                    bp[128 * G + ((p * 4 + c / 2) * G + r) * 4 + j] |=
                        (uint8_t)(((ua >> 4) | (ub >> 4) << 2) << (4 * (c % 2)));
                if (type == GE_T_Q5_K) /* the fifth bits: bits c % 4 and 4 + c % 4 */
                    bp[128 * G + ((p * 2 + c / 4) * G + r) * 4 + j] |=
                        (uint8_t)(((ua >> 4) | (ub >> 4) << 4) << (c % 4));
            }
    switch (type) {
    case GE_T_Q4_K:
    case GE_T_Q5_K: {
        const int64_t o = type == GE_T_Q5_K ? 160 : 128;
        for (int j = 0; j < 8; j++) {
            bp[o * G + j * G + r] = (uint8_t)k->s[j];
            bp[(o + 8) * G + j * G + r] = (uint8_t)k->m[j];
        }
        put_f32(bp + (o + 16) * G + 4 * r, k->d);
        put_f32(bp + (o + 20) * G + 4 * r, k->dmin);
        break;
    }
    case GE_T_Q6_K:
        for (int j = 0; j < 16; j++)
            bp[192 * G + j * G + r] = (uint8_t)(int8_t)k->s[j];
        put_f32(bp + 208 * G + 4 * r, k->d);
        break;
    case GE_T_IQ4_XS:
        for (int j = 0; j < 8; j++)
            bp[128 * G + j * G + r] = (uint8_t)(int8_t)k->s[j];
        put_f32(bp + 136 * G + 4 * r, k->d);
        break;
    }
}

/* Q4_K straight from the file's block p (144 bytes: d, dmin, 12 scale bytes, 128 code
 * bytes): the packed code words are its qs words in another order, so nothing is decoded
 * (packing is part of every run's start: the generic path took 9% of a 64-text run). */
static void pack_q4k_row(const uint8_t *p, uint8_t *bp, int64_t G, int64_t r)
{
    for (int w = 0; w < 32; w++) /* word w = 8p + c: the file's qs[4w .. 4w + 3] */
        memcpy(bp + (w * G + r) * 4, p + 16 + 4 * w, 4);
    for (int j = 0; j < 8; j++)
        ge_k4_scale_min(p + 4, j, &bp[128 * G + j * G + r], &bp[136 * G + j * G + r]);
    put_f32(bp + 144 * G + 4 * r, ge_fp16_at(p));
    put_f32(bp + 148 * G + 4 * r, ge_fp16_at(p + 2));
}

void ge_kq_pack_g(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                  int64_t r0, int64_t r1, int group)
{
    if (ge_kq_span(type) == 1) {
        ge_kq32_pack_g(type, src, rows, cols, dst, r0, r1, group);
        return;
    }
    const ge_dtype_info *ti = ge_dtype(type);
    const int64_t nsb = cols / GE_QK_K, G = group, sbb = sb_bytes(type, G);
    const size_t row_bytes = (size_t)nsb * ti->bytes;
    for (int64_t g = r0 / G; g * G < r1; g++) {
        uint8_t *gp = (uint8_t *)dst + g * nsb * sbb;
        /* padding rows stay zero; the generic packer ors its high bits in */
        if (type != GE_T_Q4_K || (g + 1) * G > rows)
            memset(gp, 0, (size_t)(nsb * sbb));
        for (int64_t s = 0; s < nsb; s++)
            for (int64_t r = 0; r < G && g * G + r < rows; r++) {
                const uint8_t *p =
                    (const uint8_t *)src + (size_t)(g * G + r) * row_bytes + (size_t)s * ti->bytes;
                if (type == GE_T_Q4_K) {
                    pack_q4k_row(p, gp + s * sbb, G, r);
                    continue;
                }
                ge_block_codes k;
                ge_block_decode(type, p, &k);
                pack_row(type, &k, gp + s * sbb, G, r);
            }
    }
}

void ge_q8_sum16(ge_q8_act *act, int64_t t0, int64_t t1)
{
    for (int64_t t = t0; t < t1; t++)
        for (int64_t b = 0; b < act->cols / 16; b++) {
            const int8_t *q = act->qs + t * act->cols + 16 * b;
            int32_t s = 0;
            for (int i = 0; i < 16; i++)
                s += q[i];
            act->sum16[t * (act->cols / 16) + b] = s;
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
