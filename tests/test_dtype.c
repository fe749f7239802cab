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
              ge_dtype(250) == NULL && !ge_dtype(GE_T_Q4_K)->supported,
          "type table", "mismatch");
    return check_done();
}
