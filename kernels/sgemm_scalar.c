/* sgemm_scalar.c - the SGEMM oracle: panel packing and the plain fma chain (sgemm.h). */
#include <math.h>
#include <string.h>

#include "dtype.h"
#include "sgemm.h"

size_t ge_sg_packed_size(int64_t rows, int64_t cols)
{
    return (size_t)((rows + GE_SG_PANEL - 1) / GE_SG_PANEL) * GE_SG_PANEL * (size_t)cols *
           sizeof(float);
}

/* Rows [r0, r1) (r0 a multiple of 16; r1 too, or rows) -> their panels. Rows are expanded in
 * chunks of 64 columns into a 16 x 64 block, then written out transposed, one 64-byte panel
 * row at a time. */
void ge_sg_pack_scalar(uint32_t type, const void *src, int64_t rows, int64_t cols, float *dst,
                       int64_t r0, int64_t r1)
{
    enum { KC = 64 };
    const size_t es = type == GE_T_F32 ? 4 : 2;
    const uint8_t *s = src;
    for (int64_t p = r0 / GE_SG_PANEL; p * GE_SG_PANEL < r1; p++) {
        float *pd = dst + (size_t)p * (size_t)cols * GE_SG_PANEL;
        int64_t nr = rows - p * GE_SG_PANEL;
        if (nr > GE_SG_PANEL)
            nr = GE_SG_PANEL;
        for (int64_t k0 = 0; k0 < cols; k0 += KC) {
            const int64_t kn = cols - k0 < KC ? cols - k0 : KC;
            float buf[GE_SG_PANEL][KC];
            for (int64_t j = 0; j < GE_SG_PANEL; j++) {
                if (j < nr)
                    ge_dequant_row(type,
                                   s + ((size_t)(p * GE_SG_PANEL + j) * (size_t)cols +
                                        (size_t)k0) * es,
                                   buf[j], (size_t)kn);
                else
                    memset(buf[j], 0, sizeof buf[j]);
            }
            for (int64_t k = 0; k < kn; k++)
                for (int j = 0; j < GE_SG_PANEL; j++)
                    pd[(size_t)(k0 + k) * GE_SG_PANEL + j] = buf[j][k];
        }
    }
}

void ge_sgemm_scalar(const float *packed, int64_t rows, int64_t cols, const float *x,
                     int64_t ldx, int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y,
                     int64_t ldy)
{
    if (r1 > rows)
        r1 = rows;
    for (int64_t o = r0; o < r1; o++) {
        const float *w = packed + (size_t)(o / GE_SG_PANEL) * (size_t)cols * GE_SG_PANEL +
                         o % GE_SG_PANEL;
        for (int64_t t = t0; t < t1; t++) {
            const float *xt = x + (size_t)t * (size_t)ldx;
            float acc = 0.0f;
            for (int64_t k = 0; k < cols; k++)
                acc = fmaf(w[(size_t)k * GE_SG_PANEL], xt[k], acc);
            y[(size_t)t * (size_t)ldy + (size_t)o] = acc;
        }
    }
}
