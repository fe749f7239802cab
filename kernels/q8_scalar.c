/* q8_scalar.c - the Q8_0 GEMM family in plain C: the packer every tier shares, and the
 * scalar tier (the test oracle): activation quantiser and per-block integer-dot GEMM.
 * Layout and arithmetic rules: kernels/q8.h. Built with the project's -std=c11, so the
 * compiler does not contract a*b+c into an FMA; the fp32 rounding sequence is the one the
 * SIMD tiers reproduce. */
#include <string.h>

#include "dtype.h"
#include "q8.h"

/* ---- packing (all tiers) ------------------------------------------------------------- */

size_t ge_q8_packed_size_g(int64_t rows, int64_t cols, int group)
{
    int64_t groups = (rows + group - 1) / group;
    return (size_t)(groups * (cols / GE_QK8_0) * GE_Q8_BLOCK_BYTES(group));
}

/* width bytes of codes (width 4 or 8: every packer below), each xor bias, a 4-byte word at a
 * time: the packer's inner step (byte by byte, with the row test inside, the first-use repack
 * was 28% of a one-record run's CPU time) */
static inline void put_codes(uint8_t *o, const int8_t *qs, int width, uint8_t bias)
{
    for (int j = 0; j < width; j += 4) {
        uint32_t v;
        memcpy(&v, qs + j, 4);
        v ^= 0x01010101u * bias;
        memcpy(o + j, &v, 4);
    }
}

void ge_q8_pack_g(const void *src, int64_t rows, int64_t cols, void *dst, int64_t r0,
                  int64_t r1, int group, int width, uint8_t bias)
{
    const int64_t nb = cols / GE_QK8_0;
    const int nc = GE_QK8_0 / width;
    const ge_block_q8_0 *w = src;
    uint8_t *out = dst;
    for (int64_t g = r0 / group; g * group < r1; g++) {
        uint8_t *gp = out + g * nb * GE_Q8_BLOCK_BYTES(group);
        /* row by row: the source is read in file order (block by block across the rows was
         * latency-bound on the file pages), the group's packed bytes stay in cache */
        for (int r = 0; r < group; r++) {
            const int64_t row = g * group + r;
            for (int64_t b = 0; b < nb; b++) {
                uint8_t *bp = gp + b * GE_Q8_BLOCK_BYTES(group);
                float d = 0.0f;
                if (row < rows) {
                    const ge_block_q8_0 *blk = &w[row * nb + b];
                    for (int c = 0; c < nc; c++)
                        put_codes(bp + (c * group + r) * width, blk->qs + width * c, width,
                                  bias);
                    uint16_t h;
                    memcpy(&h, &blk->d, 2);
                    d = ge_fp16_to_fp32(h);
                } else { /* the group's padding rows: code 0 */
                    for (int c = 0; c < nc; c++)
                        memset(bp + (c * group + r) * width, bias, (size_t)width);
                }
                memcpy(bp + group * 32 + r * 4, &d, 4);
            }
        }
    }
}

size_t ge_q8_scalar_packed_size(int64_t rows, int64_t cols)
{
    return ge_q8_packed_size_g(rows, cols, 1);
}
size_t ge_q8_g8_packed_size(int64_t rows, int64_t cols)
{
    return ge_q8_packed_size_g(rows, cols, 8);
}
size_t ge_q8_g16_packed_size(int64_t rows, int64_t cols)
{
    return ge_q8_packed_size_g(rows, cols, 16);
}

void ge_q8_scalar_pack(const void *src, int64_t rows, int64_t cols, void *dst, int64_t r0,
                       int64_t r1)
{
    ge_q8_pack_g(src, rows, cols, dst, r0, r1, 1, 4, 0);
}
void ge_q8_g8_pack(const void *src, int64_t rows, int64_t cols, void *dst, int64_t r0,
                   int64_t r1)
{
    ge_q8_pack_g(src, rows, cols, dst, r0, r1, 8, 4, 0);
}
void ge_q8_g8b_pack(const void *src, int64_t rows, int64_t cols, void *dst, int64_t r0,
                    int64_t r1)
{
    ge_q8_pack_g(src, rows, cols, dst, r0, r1, 8, 4, 0x80);
}
void ge_q8_g8w8_pack(const void *src, int64_t rows, int64_t cols, void *dst, int64_t r0,
                     int64_t r1)
{
    ge_q8_pack_g(src, rows, cols, dst, r0, r1, 8, 8, 0);
}
void ge_q8_g16b_pack(const void *src, int64_t rows, int64_t cols, void *dst, int64_t r0,
                     int64_t r1)
{
    ge_q8_pack_g(src, rows, cols, dst, r0, r1, 16, 4, 0x80);
}

/* ---- activation quantiser ------------------------------------------------------------ */

/* d = max|x| / 127 and q = round-half-even(x * (1/d)), with the value clamped to [-127, 127]
 * first: written as the SIMD tiers' max/min instructions behave (the first operand when the
 * comparison holds, else the second), so NaN, inf and a denormal d give the same bytes on
 * every tier. The 1.5 * 2^23 addition rounds |v| <= 127 to an integer, ties to even, under
 * the default rounding mode, like cvtps2dq. */
void ge_q8_scalar_quantize(const float *x, int64_t ldx, int64_t t0, int64_t t1, ge_q8_act *act)
{
    const int64_t cols = act->cols, nb = cols / GE_QK8_0, span = act->span > 1 ? act->span : 1;
    float buf[GE_QK8_0 * GE_Q8_MAX_SPAN]; /* one span, clipped */
    for (int64_t t = t0; t < t1; t++) {
        for (int64_t s = 0; s < nb; s += span) { /* a scale per span (cols holds whole spans) */
            const float *xs = x + t * ldx + s * GE_QK8_0;
            if (act->clip) { /* the clamp kernel's comparisons (a NaN comes through) */
                for (int i = 0; i < GE_QK8_0 * span; i++) {
                    const float v = xs[i] < act->lo ? act->lo : xs[i];
                    buf[i] = v > act->hi ? act->hi : v;
                }
                xs = buf;
            }
            float amax = 0.0f;
            for (int i = 0; i < GE_QK8_0 * span; i++) {
                float a = xs[i] < 0 ? -xs[i] : xs[i];
                amax = a > amax ? a : amax;
            }
            const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int64_t b = s; b < s + span; b++) {
                const float *xb = xs + (b - s) * GE_QK8_0;
                int8_t *q = act->qs + t * cols + b * GE_QK8_0;
                int32_t sum = 0;
                for (int i = 0; i < GE_QK8_0; i++) {
                    float v = xb[i] * id;
                    v = v > -127.0f ? v : -127.0f;
                    v = v < 127.0f ? v : 127.0f;
                    float r = v + 12582912.0f; /* exact ints from here: (r - 1.5*2^23) is q */
                    q[i] = (int8_t)(int)(r - 12582912.0f);
                    sum += q[i];
                }
                act->d[t * nb + b] = d;
                act->sum[t * nb + b] = sum;
            }
        }
    }
}

/* ---- GEMM ---------------------------------------------------------------------------- */

/* One packed block (G = 1) at wp against 32 activation bytes: the exact int32 dot; its row
 * scale in *dw. */
static int32_t block_dot(const uint8_t *wp, const int8_t *ab, float *dw)
{
    const int8_t *w = (const int8_t *)wp;
    int32_t isum = 0;
    for (int i = 0; i < GE_QK8_0; i++)
        isum += w[i] * ab[i];
    memcpy(dw, wp + GE_QK8_0, 4);
    return isum;
}

/* y[t][o] for the task's range, by the Q8_0 rule or (wide) the wide rule (q8.h) */
static void gemm(int wide, const void *packed, int64_t cols, const ge_q8_act *act, int64_t t0,
                 int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy)
{
    const int64_t nb = cols / GE_QK8_0, step = wide ? GE_Q8_WIDE : 1;
    const uint8_t *pk = packed;
    for (int64_t t = t0; t < t1; t++) {
        const int8_t *a = act->qs + t * cols;
        const float *da = act->d + t * nb;
        for (int64_t o = r0; o < r1; o++) {
            const uint8_t *wp = pk + o * nb * GE_Q8_BLOCK_BYTES(1);
            float acc = 0.0f;
            for (int64_t s = 0; s < nb; s += step) {
                float p = 0.0f; /* wide: the span's sum of isum * dw */
                for (int64_t b = s; b < s + step; b++, wp += GE_Q8_BLOCK_BYTES(1)) {
                    float dw;
                    const int32_t isum = block_dot(wp, a + b * GE_QK8_0, &dw);
                    if (wide)
                        p = p + (float)isum * dw;
                    else
                        acc = acc + (float)isum * (dw * da[b]);
                }
                if (wide)
                    acc = acc + p * da[s];
            }
            y[t * ldy + o] = acc;
        }
    }
}

void ge_q8_scalar_gemm(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                       int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy)
{
    gemm(0, packed, cols, act, t0, t1, r0, r1, y, ldy);
}

void ge_q8_scalar_gemm_wide(const void *packed, int64_t rows, int64_t cols,
                            const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0,
                            int64_t r1, float *y, int64_t ldy)
{
    gemm(1, packed, cols, act, t0, t1, r0, r1, y, ldy);
}
