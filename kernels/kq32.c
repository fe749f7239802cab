/* kq32.c - the 32-value block family (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) of the kq GEMM: the
 * packed size and the one packer every tier shares (plain C, parameterised by the row group
 * G; layout in kq.h). The GEMMs are per tier: kq32_avx2.c, kq32_avxvnni.c, kq32_avx512.c. The
 * scalar tier reads the file's rows in place (kq_scalar.c, the oracle).
 *
 * The packer copies the file's bytes (no decode): the code bytes as they are, the fifth bits
 * regrouped, the fp16 fields widened exactly, so packing a real model's weights costs about
 * a memory copy. */
#include <string.h>

#include "dtype.h"
#include "kq.h"

size_t ge_kq32_packed_size_g(uint32_t type, int64_t rows, int64_t cols, int group)
{
    const int five = type == GE_T_Q5_0 || type == GE_T_Q5_1;
    const int min = type == GE_T_Q4_1 || type == GE_T_Q5_1;
    if (ge_kq_span(type) != 1)
        return 0;
    return (size_t)((rows + group - 1) / group * (cols / 32) * GE_KQ32_BYTES(group, five, min));
}

void ge_kq32_pack_g(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                    int64_t r0, int64_t r1, int group)
{
    if (ge_kq_span(type) != 1)
        return;
    const int five = type == GE_T_Q5_0 || type == GE_T_Q5_1;
    const int min = type == GE_T_Q4_1 || type == GE_T_Q5_1;
    const int64_t G = group, nb = cols / 32, bb = GE_KQ32_BYTES(G, five, min);
    const int64_t doff = GE_KQ32_D_OFF(G, five);
    const size_t fb = ge_dtype(type)->bytes; /* file block bytes */
    const int qs_off = (min ? 4 : 2) + (five ? 4 : 0), qh_off = min ? 4 : 2;
    for (int64_t g = r0 / G; g * G < r1; g++) {
        uint8_t *gp = (uint8_t *)dst + g * nb * bb;
        memset(gp, 0, (size_t)(nb * bb)); /* padding rows: zero codes and factors */
        for (int64_t r = 0; r < G && g * G + r < rows; r++) {
            const uint8_t *row = (const uint8_t *)src + (size_t)(g * G + r) * nb * fb;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *p = row + b * fb;
                uint8_t *bp = gp + b * bb;
                for (int c = 0; c < 4; c++)
                    memcpy(bp + (c * G + r) * 4, p + qs_off + 4 * c, 4);
                if (five) { /* bit k of lane j: the fifth bit of value 4k + j */
                    const uint32_t h = (uint32_t)p[qh_off] | (uint32_t)p[qh_off + 1] << 8 |
                                       (uint32_t)p[qh_off + 2] << 16 |
                                       (uint32_t)p[qh_off + 3] << 24;
                    for (int j = 0; j < 4; j++) {
                        unsigned v = 0;
                        for (int k = 0; k < 8; k++)
                            v |= ((h >> (4 * k + j)) & 1u) << k;
                        bp[16 * G + r * 4 + j] = (uint8_t)v;
                    }
                }
                const float d = ge_fp16_at(p);
                memcpy(bp + doff + 4 * r, &d, 4);
                if (min) {
                    const float m = ge_fp16_at(p + 2);
                    memcpy(bp + doff + 4 * G + 4 * r, &m, 4);
                }
            }
        }
    }
}
