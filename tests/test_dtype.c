/* test_dtype.c - fp16/bf16 conversions and the scalar dequantisers and dots against fp64. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dtype.h"
#include "rng.h"

static void quantize_q8_0(const float *x, ge_block_q8_0 *b, size_t n)
{
    for (size_t k = 0; k < n / GE_QK8_0; k++) {
        float amax = 0;
        for (int i = 0; i < GE_QK8_0; i++)
            amax = fmaxf(amax, fabsf(x[k * GE_QK8_0 + i]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        b[k].d = ge_fp32_to_fp16(d);
        for (int i = 0; i < GE_QK8_0; i++)
            b[k].qs[i] = (int8_t)roundf(x[k * GE_QK8_0 + i] * id);
    }
}

/* Single elements of hand-made blocks, worked out from the layouts in dtype.h (the full
 * cross-check on random blocks against the NumPy reference is tests/test_quant_c.sh). */
static void expect(const char *what, uint32_t type, const uint8_t *blk, int i, float want)
{
    float y[256];
    ge_dequant_row(type, blk, y, ge_dtype(type)->block);
    check(y[i] == want, what, "element %d: %g, expected %g", i, (double)y[i], (double)want);
}

static void hand_blocks(void)
{
    uint8_t b[256] = {0};
    /* Q4_0: d = 2 (0x4000); byte 3 = 0xa5: value 3 = 2 * (5 - 8), value 19 = 2 * (10 - 8) */
    b[0] = 0x00, b[1] = 0x40, b[2 + 3] = 0xa5;
    expect("Q4_0 low nibble", GE_T_Q4_0, b, 3, -6.0f);
    expect("Q4_0 high nibble", GE_T_Q4_0, b, 19, 4.0f);
    /* Q5_1: d = 2, m = -1 (0xbc00); qh bit 19 set; qs byte 3 = 0xa5: value 19 = 2 * 26 - 1 */
    memset(b, 0, sizeof b);
    b[1] = 0x40, b[2] = 0x00, b[3] = 0xbc, b[4 + 2] = 0x08, b[8 + 3] = 0xa5;
    expect("Q5_1 fifth bit", GE_T_Q5_1, b, 19, 51.0f);
    expect("Q5_1 no fifth bit", GE_T_Q5_1, b, 3, 9.0f);
    /* IQ4_NL: d = 1 (0x3c00), byte 0 = 0xf0: value 0 = table[0], value 16 = table[15] */
    memset(b, 0, sizeof b);
    b[1] = 0x3c, b[2] = 0xf0;
    expect("IQ4_NL table", GE_T_IQ4_NL, b, 16, 113.0f);
    expect("IQ4_NL table 0", GE_T_IQ4_NL, b, 0, -127.0f);
    /* Q4_K: d = 1, dmin = 2 (0x4000); sub-block 5: scale low bits in byte 4+9's low nibble
     * (3), high bits in byte 4+1's top (1 -> +16): 19; min low bits 4+9's high nibble (2),
     * high bits byte 4+5's top (2 -> +32): 34. Value 5*32+7 = byte 16+64+7's high nibble. */
    memset(b, 0, sizeof b);
    b[1] = 0x3c, b[3] = 0x40, b[4 + 9] = 0x23, b[4 + 1] = 0x40, b[4 + 5] = 0x80;
    b[16 + 64 + 7] = 0xb0;
    expect("Q4_K sub-block 5", GE_T_Q4_K, b, 5 * 32 + 7, 19.0f * 11.0f - 2.0f * 34.0f);
    /* Q5_K: the same block shape with qh at 16 and qs at 48; qh[7] bit 5 adds 16 */
    memset(b, 0, sizeof b);
    b[1] = 0x3c, b[3] = 0x40, b[4 + 9] = 0x23, b[4 + 1] = 0x40, b[4 + 5] = 0x80;
    b[16 + 7] = 1 << 5, b[48 + 64 + 7] = 0xb0;
    expect("Q5_K sub-block 5", GE_T_Q5_K, b, 5 * 32 + 7, 19.0f * 27.0f - 2.0f * 34.0f);
    /* Q6_K: d = 1 at 208; value 128 + 64 + 3 (second half, quarter 2, l = 3): low nibble =
     * high nibble of ql[64 + 3], high bits = bits 4-5 of qh[32 + 3], scale sc[8 + 4 + 0] */
    memset(b, 0, sizeof b);
    b[209] = 0x3c, b[64 + 3] = 0x90, b[128 + 32 + 3] = 0x20, b[192 + 12] = 0xfe; /* sc = -2 */
    expect("Q6_K", GE_T_Q6_K, b, 128 + 64 + 3, -2.0f * (float)((9 | 2 << 4) - 32));
    /* Q3_K: d = 1 at 108; value 160 + 20 (second half, group 1, l = 20): 2-bit code bits 2-3
     * of qs[32 + 20], hmask bit 5 of hm[20] clear (-4); scale 11: low nibble = high nibble of
     * byte 3, high bits = bits 4-5 of byte 8 + 3 */
    memset(b, 0, sizeof b);
    b[109] = 0x3c, b[32 + 32 + 20] = 3 << 2, b[96 + 3] = 0x70, b[96 + 8 + 3] = 0x30;
    expect("Q3_K", GE_T_Q3_K, b, 160 + 20, (float)((7 | 3 << 4) - 32) * (3.0f - 4.0f));
    /* Q2_K: d = 1, dmin = 1 at 80, 82; value 128 + 96 + 17: code bits 6-7 of qs[32 + 17],
     * scales[15] = 0x53: 3 * code - 5 */
    memset(b, 0, sizeof b);
    b[81] = 0x3c, b[83] = 0x3c, b[16 + 32 + 17] = 2 << 6, b[15] = 0x53;
    expect("Q2_K", GE_T_Q2_K, b, 128 + 96 + 17, 3.0f * 2.0f - 5.0f);
    /* IQ4_XS: d = 1; sub-block 3 scale: low nibble = high nibble of scales_l[1] (9), high
     * bits = bits 6-7 of scales_h (2): 41 - 32 = 9; value 3*32 + 16 + 2 = high nibble of
     * qs[48 + 2] */
    memset(b, 0, sizeof b);
    b[1] = 0x3c, b[2] = 0x80, b[4 + 1] = 0x90, b[8 + 48 + 2] = 0xe0;
    expect("IQ4_XS", GE_T_IQ4_XS, b, 3 * 32 + 16 + 2, 9.0f * 89.0f);
}

int main(void)
{
    /* every finite half round-trips through fp32 exactly */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            continue; /* NaN payloads */
        if (ge_fp32_to_fp16(ge_fp16_to_fp32((uint16_t)h)) != h)
            bad++;
    }
    check(bad == 0, "fp16 round trip of all 65536 halves", "%d mismatches", bad);

    /* rounding: ties to even, overflow to inf, subnormals */
    check(ge_fp32_to_fp16(1.0f + 1.0f / 2048) == 0x3c00, "fp16 tie rounds to even (down)", "mismatch");
    check(ge_fp32_to_fp16(1.0f + 3.0f / 2048) == 0x3c02, "fp16 tie rounds to even (up)", "mismatch");
    check(ge_fp32_to_fp16(65520.0f) == 0x7c00 && ge_fp32_to_fp16(65519.0f) == 0x7bff,
          "fp16 overflow threshold", "%04x %04x", ge_fp32_to_fp16(65520.0f),
          ge_fp32_to_fp16(65519.0f));
    check(ge_fp32_to_fp16(ldexpf(1.0f, -24)) == 1 && ge_fp32_to_fp16(ldexpf(1.0f, -26)) == 0,
          "fp16 subnormal rounding", "mismatch");
    check(ge_fp16_to_fp32(0xc000) == -2.0f && ge_bf16_to_fp32(0x3f80) == 1.0f,
          "fp16/bf16 decode", "mismatch");

    /* dots against fp64 truth on the model's row lengths and odd ones */
    const size_t lens[] = {32, 64, 96, 512, 2048, 12288};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t n = lens[li];
        float *w = malloc(n * 4), *x = malloc(n * 4), *deq = malloc(n * 4);
        uint16_t *h16 = malloc(n * 2), *b16 = malloc(n * 2);
        ge_block_q8_0 *q8 = malloc(n / 32 * sizeof *q8);
        for (size_t i = 0; i < n; i++) {
            w[i] = frand();
            x[i] = frand();
            h16[i] = ge_fp32_to_fp16(w[i]);
            uint32_t bits;
            memcpy(&bits, &w[i], 4);
            b16[i] = (uint16_t)(bits >> 16);
        }
        quantize_q8_0(w, q8, n);
        const struct {
            uint32_t type;
            const void *row;
            const char *name;
        } cases[] = {{GE_T_F32, w, "f32"}, {GE_T_F16, h16, "f16"}, {GE_T_BF16, b16, "bf16"},
                     {GE_T_Q8_0, q8, "q8_0"}};
        for (size_t c = 0; c < 4; c++) {
            ge_dequant_row(cases[c].type, cases[c].row, deq, n);
            double truth = 0, mag = 0;
            for (size_t i = 0; i < n; i++) {
                truth += (double)deq[i] * x[i];
                mag += fabs((double)deq[i] * x[i]);
            }
            double got = ge_dot_row(cases[c].type, cases[c].row, x, n);
            double rel = fabs(got - truth) / mag;
            char name[64];
            snprintf(name, sizeof name, "dot %s n=%zu vs fp64", cases[c].name, n);
            check(rel < 1e-6, name, "relative error %.3g", rel);
        }
        /* dequantised values match the encodings */
        ge_dequant_row(GE_T_Q8_0, q8, deq, n);
        double maxerr = 0;
        for (size_t i = 0; i < n; i++)
            maxerr = fmax(maxerr, fabs(deq[i] - w[i]));
        char name[64];
        snprintf(name, sizeof name, "q8_0 dequant error n=%zu", n);
        check(maxerr <= 1.0 / 254 + 1e-3, name, "max error %.3g", maxerr);
        free(w), free(x), free(deq), free(h16), free(b16), free(q8);
    }
    check(ge_dtype(GE_T_Q8_0)->bytes == 34 && ge_dtype(GE_T_Q6_K)->block == 256 &&
              ge_dtype(250) == NULL && ge_dtype(GE_T_Q4_K)->supported &&
              ge_dtype(GE_T_IQ4_XS)->bytes == 136 && !ge_dtype(16)->supported &&
              !ge_dtype(GE_T_Q8_K)->supported,
          "type table", "mismatch");
    hand_blocks();
    return check_done();
}
