/* test_kern_kq.c - the GEMM of the quantised types other than Q8_0 (kernels/kq*.c) at every
 * tier this CPU can run, for every type:
 *   - the activation quantiser at span 8 (the 256-value super-blocks): every tier's bytes,
 *     scales and sums bit-identical to the scalar oracle, one scale per 256 values;
 *   - GEMM at the model's shapes and edge shapes against an fp64 truth computed from the same
 *     integer codes and activations (relative error < 1e-5 of sum |terms|), and against
 *     ge_dequant_row (the reference path's expansion of the same weights);
 *   - every tier bit-identical to the scalar oracle (kq.h), whatever the (t0, t1, r0, r1)
 *     split; nothing written outside the task's range;
 *   - random bytes in every code, scale and min field (fp16 fields kept finite), so every bit
 *     of each layout is exercised;
 *   - the integer extremes: every code, scale and min byte 0x00, 0xff, 0x55 or 0xaa (the
 *     largest and smallest codes and scales of each type) against activations of +-127 in
 *     runs of 4, 16, 32 and 256, where a kernel's int16 partial sums would overflow first.
 * argv[1] (an output folder) is not used. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dtype.h"
#include "kern.h"
#include "kq.h"
#include "rng.h"
#include "kq_data.h"

static const uint32_t types[] = {GE_T_Q4_0, GE_T_Q4_1, GE_T_Q5_0, GE_T_Q5_1, GE_T_IQ4_NL,
                                 GE_T_Q2_K, GE_T_Q3_K, GE_T_Q4_K, GE_T_Q5_K, GE_T_Q6_K,
                                 GE_T_IQ4_XS};
#define N_TYPES (sizeof types / sizeof types[0])

typedef struct {
    char name[32];
    const ge_kern *k;
} variant;
static variant vars[GE_TIER_COUNT];
static int n_vars;
static const ge_kern *oracle;

static void pick_variants(void)
{
    ge_cpu_feats f;
    ge_cpu_detect(&f);
    oracle = ge_kern_get(GE_TIER_SCALAR);
    for (int t = 0; t < GE_TIER_COUNT; t++)
        if (ge_tier_supported(&f, (ge_tier)t)) {
            snprintf(vars[n_vars].name, sizeof vars[n_vars].name, "%s",
                     ge_tier_name((ge_tier)t));
            vars[n_vars++].k = ge_kern_get((ge_tier)t);
        }
    for (int i = 0; i < n_vars; i++)
        check(vars[i].k->kq_gemm && vars[i].k->q8_quantize && vars[i].k->kq_packed_size &&
                  vars[i].k->kq_row_group >= 1,
              nm("kq %s: table filled", vars[i].name), "missing pointers");
}

/* ---- data ---------------------------------------------------------------------------- */

/* Extreme data for the 32-value blocks (0: off): every code byte of every block set to this
 * byte + 1's low 8 bits (so 0x00 and 0xff reach the largest codes of either sign) and every
 * activation of a token +-127 (the sign alternating per token), so the tiers' narrow integer
 * sums meet their bounds. */
static int extreme;

static float *make_x(int64_t n_tok, int64_t cols)
{
    float *x = xmalloc((size_t)(n_tok * cols) * sizeof *x);
    if (extreme) {
        for (int64_t k = 0; k < n_tok * cols; k++)
            x[k] = k / cols % 2 ? -1.0f : 1.0f;
        return x;
    }
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t b = 0; b < cols / 32; b++) {
            int kind = (int)(rnd() % 40);
            float mag = (float)ldexp(1.0, (int)(rnd() % 20) - 10);
            for (int k = 0; k < 32; k++)
                x[t * cols + b * 32 + k] = kind == 0 ? 0.0f : mag * frand();
        }
    return x;
}

static void act_alloc(ge_q8_act *a, int64_t n_tok, int64_t cols, int span)
{
    memset(a, 0, sizeof *a);
    a->n_tok = n_tok, a->cols = cols, a->span = span;
    a->qs = xmalloc((size_t)(n_tok * cols));
    a->d = xmalloc((size_t)(n_tok * (cols / 32)) * sizeof(float));
    a->sum = xmalloc((size_t)(n_tok * (cols / 32)) * sizeof(int32_t));
    if (span == GE_Q8_K_SPAN)
        a->sum16 = xmalloc((size_t)(n_tok * (cols / 16)) * sizeof(int32_t));
}
static void act_free(ge_q8_act *a) { free(a->qs), free(a->d), free(a->sum), free(a->sum16); }

/* quantise with the oracle, then the sums of 16 where the span has them */
static void quantize(const float *x, int64_t ldx, ge_q8_act *a)
{
    oracle->q8_quantize(x, ldx, 0, a->n_tok, a);
    if (a->sum16)
        ge_q8_sum16(a, 0, a->n_tok);
}

/* ---- quantiser at span 8 ------------------------------------------------------------- */

static void test_quantize_span8(void)
{
    const int64_t n_tok = 23, cols = 768, nb = cols / 32, ldx = cols + 5;
    float *x = xmalloc((size_t)(n_tok * ldx) * sizeof *x);
    for (int64_t i = 0; i < n_tok * ldx; i++) {
        x[i] = (float)ldexp(frand(), (int)(rnd() % 40) - 20);
        if (rnd() % 500 == 0)
            x[i] = rnd() % 2 ? NAN : INFINITY;
    }
    ge_q8_act ref, got;
    act_alloc(&ref, n_tok, cols, GE_Q8_K_SPAN);
    act_alloc(&got, n_tok, cols, GE_Q8_K_SPAN);
    oracle->q8_quantize(x, ldx, 0, n_tok, &ref);
    int span_ok = 1;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t b = 0; b < nb; b++) {
            float amax = 0.0f;
            for (int64_t i = (b / 8) * 256; i < (b / 8 + 1) * 256; i++)
                amax = fabsf(x[t * ldx + i]) > amax ? fabsf(x[t * ldx + i]) : amax;
            span_ok &= ref.d[t * nb + b] == amax / 127.0f;
        }
    check(span_ok, "kq scalar quantise span 8: one scale, max |x| / 127, per 256 values",
          "mismatch");
    ge_q8_sum16(&ref, 0, n_tok);
    int sums_ok = 1;
    for (int64_t i = 0; i < n_tok * nb; i++)
        sums_ok &= ref.sum16[2 * i] + ref.sum16[2 * i + 1] == ref.sum[i];
    int32_t s5 = 0;
    for (int i = 0; i < 16; i++)
        s5 += ref.qs[5 * 16 + i];
    check(sums_ok && ref.sum16[5] == s5, "kq sums of 16: halves of the sums of 32", "mismatch");
    for (int i = 0; i < n_vars; i++) {
        memset(got.qs, 0x5a, (size_t)(n_tok * cols));
        vars[i].k->q8_quantize(x, ldx, 0, 9, &got);
        vars[i].k->q8_quantize(x, ldx, 9, n_tok, &got);
        int ok = memcmp(got.qs, ref.qs, (size_t)(n_tok * cols)) == 0 &&
                 memcmp(got.d, ref.d, (size_t)(n_tok * nb) * sizeof(float)) == 0 &&
                 memcmp(got.sum, ref.sum, (size_t)(n_tok * nb) * sizeof(int32_t)) == 0;
        check(ok, nm("kq %s quantise span 8: bit-identical to scalar", vars[i].name),
              "bytes differ");
    }
    act_free(&ref), act_free(&got), free(x);
}

/* ---- GEMM ---------------------------------------------------------------------------- */

/* fp64 truth from the codes: sum over values of (real weight) * a * da, and sum |terms| */
static void truth(uint32_t type, const uint8_t *row, const ge_q8_act *a, int64_t t,
                  double *y, double *mag)
{
    const ge_dtype_info *ti = ge_dtype(type);
    const int64_t cols = a->cols, nb = cols / ti->block;
    ge_block_codes k;
    *y = 0, *mag = 0;
    for (int64_t b = 0; b < nb; b++) {
        ge_block_decode(type, row + (size_t)b * ti->bytes, &k);
        for (int i = 0; i < k.n; i++) {
            const int64_t col = b * k.n + i;
            double wv = k.n == 32 ? (double)k.c[i] * k.d + (k.has_min ? k.dmin : 0.0)
                                  : (double)k.d * k.s[i / k.sub] * k.c[i] -
                                        (k.has_min ? (double)k.dmin * k.m[i / k.sub] : 0.0);
            double term = wv * a->qs[t * cols + col] * a->d[t * (cols / 32) + col / 32];
            *y += term, *mag += fabs(term);
        }
    }
}

static void gemm_shape(uint32_t type, int64_t cols, int64_t rows, int64_t n_tok)
{
    const char *tn = ge_dtype(type)->name;
    const ge_dtype_info *ti = ge_dtype(type);
    const size_t row_bytes = (size_t)(cols / ti->block) * ti->bytes;
    uint8_t *w = kq_random_weights(type, rows, cols);
    if (!w) {
        printf("FAIL: out of memory\n");
        exit(1);
    }
    if (extreme && ti->block == 32) { /* the codes after the fp16 fields */
        int off[2];
        const int nf = fp16_fields(type, off);
        for (int64_t b = 0; b < rows * (cols / 32); b++)
            memset(w + (size_t)b * ti->bytes + 2 * nf, (extreme - 1) & 0xff,
                   ti->bytes - 2 * nf);
    }
    float *x = make_x(n_tok, cols);
    ge_q8_act a;
    act_alloc(&a, n_tok, cols, ge_kq_span(type));
    quantize(x, cols, &a);
    float *ref = xmalloc((size_t)(n_tok * rows) * sizeof *ref);
    float *y = xmalloc((size_t)(n_tok * rows) * sizeof *y);
    float *deq = xmalloc((size_t)cols * sizeof *deq);
    oracle->kq_gemm(type, w, rows, cols, &a, 0, n_tok, 0, rows, ref, rows);

    /* against fp64, and against the dequantised weights of the reference path */
    double worst = 0, worst_deq = 0;
    for (int64_t o = 0; o < rows; o++) {
        ge_dequant_row(type, w + (size_t)o * row_bytes, deq, (size_t)cols);
        for (int64_t t = 0; t < n_tok; t++) {
            double tv, mag, dv = 0;
            truth(type, w + (size_t)o * row_bytes, &a, t, &tv, &mag);
            for (int64_t c = 0; c < cols; c++)
                dv += (double)deq[c] * a.qs[t * cols + c] * a.d[t * (cols / 32) + c / 32];
            if (mag > 0) {
                worst = fmax(worst, fabs(ref[t * rows + o] - tv) / mag);
                worst_deq = fmax(worst_deq, fabs(dv - tv) / mag);
            }
        }
    }
    check(worst < 1e-5, nm("kq %s scalar %lldx%lld, %lld tokens: fp64 truth", tn,
                           (long long)cols, (long long)rows, (long long)n_tok),
          "relative error %.3g", worst);
    check(worst_deq < 1e-6, nm("kq %s %lldx%lld: dequantised rows agree with the codes", tn,
                               (long long)cols, (long long)rows),
          "relative error %.3g", worst_deq);

    /* every tier, packed in pieces where it packs, split into pieces: bit-identical to the
     * oracle; nothing outside the range written */
    for (int i = 0; i < n_vars; i++) {
        const ge_kern *kk = vars[i].k;
        const size_t psize = kk->kq_packed_size(type, rows, cols);
        const int64_t grp = psize ? kk->kq_row_group : 1;
        void *pmem = NULL;
        const void *wp = w;
        if (psize) {
            pmem = xmalloc(psize + 68);
            uint8_t *p = (uint8_t *)pmem + 4; /* off 64-byte alignment, as the engine may be */
            memset(p + psize, 0xa5, 64);
            const int64_t half = (rows / 2 + grp - 1) / grp * grp;
            kk->kq_pack(type, w, rows, cols, p, half < rows ? half : 0, rows);
            if (half < rows)
                kk->kq_pack(type, w, rows, cols, p, 0, half);
            int guard = 1;
            for (int g = 0; g < 64; g++)
                guard &= p[psize + g] == 0xa5;
            check(guard, nm("kq %s %s %lldx%lld: packing stays in its size", tn, vars[i].name,
                            (long long)cols, (long long)rows),
                  "bytes past the end written");
            wp = p;
        }
        for (int64_t k = 0; k < n_tok * rows; k++)
            y[k] = NAN;
        const int64_t tm = n_tok / 2, rm = (rows / 3 + grp - 1) / grp * grp;
        if (rm < rows) {
            kk->kq_gemm(type, wp, rows, cols, &a, 0, tm, 0, rm, y, rows);
            kk->kq_gemm(type, wp, rows, cols, &a, 0, tm, rm, rows, y, rows);
        } else {
            kk->kq_gemm(type, wp, rows, cols, &a, 0, tm, 0, rows, y, rows);
        }
        kk->kq_gemm(type, wp, rows, cols, &a, tm, n_tok, 0, rows, y, rows);
        int same = memcmp(y, ref, (size_t)(n_tok * rows) * sizeof *y) == 0;
        for (int64_t k = 0; k < n_tok * rows; k++)
            y[k] = NAN;
        const int64_t r1 = rows > grp ? grp : 0;
        kk->kq_gemm(type, wp, rows, cols, &a, 1, n_tok, r1, rows, y, rows);
        int stray = isnan(y[0]);
        for (int64_t t = 1; t < n_tok && same; t++)
            for (int64_t o = r1; o < rows; o++)
                same &= memcmp(&y[t * rows + o], &ref[t * rows + o], sizeof *y) == 0;
        check(same && stray, nm("kq %s %s %lldx%lld, %lld tokens: bit-identical to scalar, "
                                "any split", tn, vars[i].name, (long long)cols,
                                (long long)rows, (long long)n_tok),
              "same %d, untouched %d", same, stray);
        free(pmem);
    }
    free(w), free(x), free(ref), free(y), free(deq);
    act_free(&a);
}

/* every weight byte b (fp16 fields kept at a small finite value), activations of +-127 with
 * the sign flipping every run values: every tier bit-identical to the oracle */
static void gemm_extremes(uint32_t type)
{
    const char *tn = ge_dtype(type)->name;
    const ge_dtype_info *ti = ge_dtype(type);
    const int64_t cols = 512, rows = 48, n_tok = 9, nblk = rows * (cols / ti->block);
    static const uint8_t bytes[] = {0x00, 0xff, 0x55, 0xaa};
    static const int runs[] = {4, 16, 32, 256};
    uint8_t *w = xmalloc((size_t)nblk * ti->bytes);
    float *x = xmalloc((size_t)(n_tok * cols) * sizeof *x);
    float *ref = xmalloc((size_t)(n_tok * rows) * sizeof *ref);
    float *y = xmalloc((size_t)(n_tok * rows) * sizeof *y);
    ge_q8_act a;
    act_alloc(&a, n_tok, cols, ge_kq_span(type));
    int ok[GE_TIER_COUNT];
    for (int i = 0; i < n_vars; i++)
        ok[i] = 1;
    for (size_t bi = 0; bi < sizeof bytes; bi++) {
        memset(w, bytes[bi], (size_t)nblk * ti->bytes);
        for (int64_t b = 0; b < nblk; b++) {
            int off[2], nf = fp16_fields(type, off);
            for (int f = 0; f < nf; f++) {
                uint16_t h = ge_fp32_to_fp16(0.01f * (float)(f + 1));
                memcpy(w + b * ti->bytes + off[f], &h, 2);
            }
        }
        for (int64_t t = 0; t < n_tok; t++) { /* token t: runs[t % 4], first sign by t / 4 */
            const int run = runs[t % 4];
            for (int64_t c = 0; c < cols; c++)
                x[t * cols + c] = ((c / run + t / 4) % 2) ? -1.0f : 1.0f;
        }
        quantize(x, cols, &a);
        oracle->kq_gemm(type, w, rows, cols, &a, 0, n_tok, 0, rows, ref, rows);
        for (int i = 0; i < n_vars; i++) {
            const ge_kern *kk = vars[i].k;
            const size_t psize = kk->kq_packed_size(type, rows, cols);
            void *pmem = psize ? xmalloc(psize) : NULL;
            if (psize)
                kk->kq_pack(type, w, rows, cols, pmem, 0, rows);
            kk->kq_gemm(type, psize ? pmem : w, rows, cols, &a, 0, n_tok, 0, rows, y, rows);
            ok[i] &= memcmp(y, ref, (size_t)(n_tok * rows) * sizeof *y) == 0;
            free(pmem);
        }
    }
    for (int i = 0; i < n_vars; i++)
        check(ok[i], nm("kq %s %s: extreme codes and activations bit-identical to scalar", tn,
                        vars[i].name),
              "differs");
    free(w), free(x), free(ref), free(y);
    act_free(&a);
}

int main(void)
{
    pick_variants();
    test_quantize_span8();
    for (size_t i = 0; i < N_TYPES; i++) {
        const uint32_t type = types[i];
        gemm_shape(type, 512, 64, 7);   /* the hidden width */
        gemm_shape(type, 2048, 33, 70); /* the FFN's down projection, two token blocks */
        gemm_shape(type, 768, 5, 1);
        gemm_shape(type, 256, 3, 300); /* past a 256-token chunk (kq_arm.h's decode share) */
        gemm_extremes(type);
        if (ge_dtype(type)->block == 32) {
            gemm_shape(type, 96, 3, 2);     /* rows of three blocks */
            gemm_shape(type, 2304, 40, 19); /* more than one K chunk (64 blocks) */
            for (int e = 0; e < 2; e++) {   /* codes at their extremes, |a| = 127 */
                extreme = e ? 0x100 : 0x01;
                gemm_shape(type, 512, 24, 4);
                extreme = 0;
            }
        }
    }
    return check_done();
}
