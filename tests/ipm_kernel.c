/* ipm_kernel.c - one call of a GEMM kernel on random data, for counting the instructions it
 * executes (tools/arm-ipm runs it under qemu and counts inside the kernel's functions; not
 * part of make test).
 *
 *   ipm_kernel TIER TYPE COLS ROWS TOKENS
 *
 * TYPE: q8_0, a kq type (q4_k, q6_k, q4_0, ...) or f32 / f16 / bf16 (the SGEMM panels).
 * Prints the MACs of the call (COLS x ROWS x TOKENS). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dtype.h"
#include "kern.h"
#include "kq.h"
#include "q8.h"
#include "sgemm.h"

#define RNG_SEED 88172645463325252ull
#include "rng.h"
#include "kq_data.h"

static uint32_t type_of(const char *s)
{
    for (uint32_t t = 0; t < 40; t++) {
        const ge_dtype_info *ti = ge_dtype(t);
        if (ti && strcasecmp(ti->name, s) == 0)
            return t;
    }
    fprintf(stderr, "ipm_kernel: unknown type %s\n", s);
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: ipm_kernel TIER TYPE COLS ROWS TOKENS\n");
        return 2;
    }
    const int tier = ge_tier_from_name(argv[1]);
    const uint32_t type = type_of(argv[2]);
    const int64_t cols = atoll(argv[3]), rows = atoll(argv[4]), n_tok = atoll(argv[5]);
    ge_cpu_feats f;
    ge_cpu_detect(&f);
    if (tier < 0 || !ge_tier_supported(&f, (ge_tier)tier)) {
        fprintf(stderr, "ipm_kernel: tier %s not runnable here\n", argv[1]);
        return 2;
    }
    const ge_kern *k = ge_kern_get((ge_tier)tier);
    float *x = malloc((size_t)(n_tok * cols) * sizeof *x);
    float *y = malloc((size_t)(n_tok * rows) * sizeof *y);
    for (int64_t i = 0; i < n_tok * cols; i++)
        x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    if (type == GE_T_F32 || type == GE_T_F16 || type == GE_T_BF16) {
        const size_t es = ge_sg_elem_size(type);
        uint8_t *w = malloc((size_t)(rows * cols) * es);
        for (int64_t i = 0; i < rows * cols; i++) {
            const float v = frand() - 0.5f;
            if (type == GE_T_F32) {
                memcpy(w + 4 * i, &v, 4);
            } else {
                uint32_t b;
                memcpy(&b, &v, 4);
                const uint16_t h = type == GE_T_F16 ? ge_fp32_to_fp16(v) : (uint16_t)(b >> 16);
                memcpy(w + 2 * i, &h, 2);
            }
        }
        void *pk = malloc(k->sg_packed_size(type, rows, cols));
        k->sg_pack(type, w, rows, cols, pk, 0, rows);
        k->sgemm(type, pk, rows, cols, x, cols, 0, n_tok, 0, rows, y, rows);
    } else {
        const int64_t nb = cols / 32;
        const int span = type == GE_T_Q8_0 ? 1 : ge_kq_span(type);
        ge_q8_act a = {.qs = malloc((size_t)(n_tok * cols)),
                       .d = malloc((size_t)(n_tok * nb) * 4),
                       .sum = malloc((size_t)(n_tok * nb) * 4),
                       .sum16 = malloc((size_t)(n_tok * nb) * 8),
                       .n_tok = n_tok,
                       .cols = cols,
                       .span = span};
        k->q8_quantize(x, cols, 0, n_tok, &a);
        ge_q8_sum16(&a, 0, n_tok);
        if (type == GE_T_Q8_0) {
            ge_block_q8_0 *w = malloc((size_t)(rows * nb) * sizeof *w);
            for (int64_t i = 0; i < rows * nb; i++) {
                const uint16_t h = ge_fp32_to_fp16(0.001f + (float)(rnd() % 100) * 1e-5f);
                memcpy(&w[i].d, &h, 2);
                for (int j = 0; j < 32; j++)
                    w[i].qs[j] = (int8_t)((int)(rnd() % 255) - 127);
            }
            void *pk = malloc(k->q8_packed_size(rows, cols));
            k->q8_pack(w, rows, cols, pk, 0, rows);
            k->q8_gemm(pk, rows, cols, &a, 0, n_tok, 0, rows, y, rows);
        } else {
            uint8_t *kw = kq_random_weights(type, rows, cols);
            const size_t n = k->kq_packed_size(type, rows, cols);
            void *pk = n ? malloc(n) : kw;
            if (n)
                k->kq_pack(type, kw, rows, cols, pk, 0, rows);
            k->kq_gemm(type, pk, rows, cols, &a, 0, n_tok, 0, rows, y, rows);
        }
    }
    printf("%lld\n", (long long)(cols * rows * n_tok));
    return 0;
}
