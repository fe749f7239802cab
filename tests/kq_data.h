/* kq_data.h - random weight rows of the quantised types for the kq tests and benchmark:
 * random bytes in every code, scale and min field (so every bit of a layout is exercised),
 * fp16 fields set to finite values of a trained model's size (some zero; Q4_1 / Q5_1 mins
 * of either sign). Include after rng.h. */
#ifndef GE_TEST_KQ_DATA_H
#define GE_TEST_KQ_DATA_H

#include <stdlib.h>
#include <string.h>

#include "dtype.h"

/* the byte offsets of a block's fp16 fields (kept finite and of sane size) */
static int fp16_fields(uint32_t type, int off[2])
{
    switch (type) {
    case GE_T_Q4_1: case GE_T_Q5_1: off[0] = 0, off[1] = 2; return 2;
    case GE_T_Q2_K: off[0] = 80, off[1] = 82; return 2;
    case GE_T_Q3_K: off[0] = 108; return 1;
    case GE_T_Q4_K: case GE_T_Q5_K: off[0] = 0, off[1] = 2; return 2;
    case GE_T_Q6_K: off[0] = 208; return 1;
    default: off[0] = 0; return 1; /* Q4_0, Q5_0, IQ4_NL, IQ4_XS */
    }
}

/* rows x cols values of the type (NULL: out of memory) */
static uint8_t *kq_random_weights(uint32_t type, int64_t rows, int64_t cols)
{
    const ge_dtype_info *ti = ge_dtype(type);
    const size_t nblk = (size_t)(rows * (cols / ti->block)), n = nblk * ti->bytes;
    uint8_t *w = malloc(n);
    if (!w)
        return NULL;
    for (size_t i = 0; i < n; i++)
        w[i] = (uint8_t)rnd();
    for (size_t b = 0; b < nblk; b++) {
        int off[2], nf = fp16_fields(type, off);
        for (int f = 0; f < nf; f++) {
            float v = (0.05f + (float)(rnd() % 1000) / 1000.0f) * 0.01f;
            if (f == 1 && (type == GE_T_Q4_1 || type == GE_T_Q5_1) && rnd() % 2)
                v = -v; /* Q4_1 / Q5_1 mins are signed */
            if (rnd() % 64 == 0)
                v = 0.0f;
            uint16_t h = ge_fp32_to_fp16(v);
            memcpy(w + b * ti->bytes + off[f], &h, 2);
        }
    }
    return w;
}

#endif
