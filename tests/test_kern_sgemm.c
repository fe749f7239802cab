/* test_kern_sgemm.c - the SGEMM family (kern.h, kernels/sgemm.h) at every tier this CPU runs:
 * exact panel packing (elements of the weight's type copied unchanged), results bit-identical
 * to the scalar oracle and within an fp32 accumulation bound of an fp64 truth, on the model's
 * shapes and odd ones, F16/BF16 panels bit-identical to fp32 panels of the expanded weight,
 * and the determinism contract (any task split, any neighbouring tokens: the same bits).
 *
 * Tolerance against fp64: the error is reported relative to sum_k |W[o][k] x[t][k]|. One fp32
 * FMA chain of length K is bounded by gamma_K = K u / (1 - K u) with u = 2^-24 (1.2e-4 at
 * K = 2048): far above the 1e-6 we gate on for zero-mean data, where partial sums grow like
 * sqrt(K) and the observed error stays within a few u. Same-sign data is the worst
 * realistic case: the error grows like u sqrt(K) (2e-6 observed at K = 2048, so 1e-6 cannot
 * hold there); it is gated on the probabilistic bound of Higham & Mary (2019), lambda sqrt(K) u
 * with lambda = 6 (1.6e-5 at K = 2048; exceeded with probability < 2 exp(-18) per output),
 * and its observed error is printed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dtype.h"
#include "kern.h"

#define RNG_SEED 0x2545f4914f6cdd1dull
#include "rng.h"

static int64_t irand(int64_t n) { return (int64_t)(rnd() % (uint64_t)n); }

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static const uint32_t types[] = {GE_T_F32, GE_T_F16, GE_T_BF16};
static const char *tname(uint32_t type) { return ge_dtype(type)->name; }

/* ---- test data ------------------------------------------------------------------------ */

/* A {cols, rows} weight in the given type (values in [-1, 1), or [0, 1) when positive) and
 * its exact fp32 expansion. */
typedef struct {
    uint32_t type;
    int64_t rows, cols;
    void *src;
    float *w; /* [rows][cols] */
} weight;

static size_t esize(uint32_t type) { return type == GE_T_F32 ? 4 : 2; }

/* W->w from W->src */
static void expand(weight *W)
{
    const size_t es = esize(W->type);
    for (int64_t r = 0; r < W->rows; r++)
        ge_dequant_row(W->type, (const uint8_t *)W->src + (size_t)(r * W->cols) * es,
                       W->w + (size_t)(r * W->cols), (size_t)W->cols);
}

static weight alloc_weight(uint32_t type, int64_t rows, int64_t cols)
{
    const size_t n = (size_t)(rows * cols);
    weight W = {type, rows, cols, xmalloc(n * esize(type)), xmalloc(n * sizeof(float))};
    return W;
}

static weight make_weight(uint32_t type, int64_t rows, int64_t cols, int positive)
{
    weight W = alloc_weight(type, rows, cols);
    const size_t n = (size_t)(rows * cols);
    for (size_t i = 0; i < n; i++) {
        float v = positive ? fabsf(frand()) : frand();
        if (type == GE_T_F32) {
            ((float *)W.src)[i] = v;
        } else if (type == GE_T_F16) {
            ((uint16_t *)W.src)[i] = ge_fp32_to_fp16(v);
        } else {
            ((uint16_t *)W.src)[i] = (uint16_t)(bits(v) >> 16);
        }
    }
    expand(&W);
    return W;
}

static void free_weight(weight *W)
{
    free(W->src);
    free(W->w);
}

static float *make_x(int64_t n_tok, int64_t ldx, int positive)
{
    float *x = xmalloc((size_t)(n_tok * ldx) * sizeof *x);
    for (int64_t i = 0; i < n_tok * ldx; i++)
        x[i] = positive ? fabsf(frand()) : frand();
    return x;
}

/* W's panels in its own type; as_f32: panels of its fp32 expansion instead (what every type
 * was packed into before 16-bit panels: the outputs must not change by a bit) */
static void *pack(const ge_kern *k, const weight *W, int as_f32)
{
    const uint32_t type = as_f32 ? GE_T_F32 : W->type;
    void *p = xmalloc(k->sg_packed_size(type, W->rows, W->cols));
    k->sg_pack(type, as_f32 ? (const void *)W->w : W->src, W->rows, W->cols, p, 0, W->rows);
    return p;
}

/* fp64 truth and sum_k |terms| of every output, [n_tok][rows] each */
static void truth(const weight *W, const float *x, int64_t ldx, int64_t n_tok, double *s,
                  double *a)
{
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t o = 0; o < W->rows; o++) {
            const float *wr = W->w + (size_t)(o * W->cols), *xt = x + (size_t)(t * ldx);
            double sum = 0, abs_sum = 0;
            for (int64_t k = 0; k < W->cols; k++) {
                double term = (double)wr[k] * (double)xt[k];
                sum += term;
                abs_sum += fabs(term);
            }
            s[t * W->rows + o] = sum;
            a[t * W->rows + o] = abs_sum;
        }
}

/* Worst |y - truth| / sum|terms| over all outputs (NaN counts as infinite). */
static double rel_err(const double *s, const double *a, int64_t n_tok, int64_t rows,
                      const float *y, int64_t ldy)
{
    double worst = 0;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t o = 0; o < rows; o++) {
            double e = fabs((double)y[t * ldy + o] - s[t * rows + o]), d = a[t * rows + o];
            e = d > 0 ? e / d : e > 0 ? INFINITY : 0;
            if (!(e <= worst))
                worst = isnan(e) ? INFINITY : e;
        }
    return worst;
}

/* Number of outputs whose bits differ (y vs ref, both [n_tok][ldy] over rows). */
static int64_t bit_diffs(const float *y, const float *ref, int64_t n_tok, int64_t rows,
                         int64_t ldy)
{
    int64_t n = 0;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t o = 0; o < rows; o++)
            n += bits(y[t * ldy + o]) != bits(ref[t * ldy + o]);
    return n;
}

/* ---- the checks ------------------------------------------------------------------------ */

static int tiers[GE_TIER_COUNT], n_tiers;
static const ge_kern *scalar;

static void check_table(void)
{
    for (int i = 0; i < n_tiers; i++) {
        const ge_kern *k = ge_kern_get((ge_tier)tiers[i]);
        char name[64];
        snprintf(name, sizeof name, "%s: sgemm table filled", k->name);
        check(k->sg_panel == 16 && k->sg_packed_size && k->sg_pack && k->sgemm, name,
              "panel %d, pointers %p %p %p", k->sg_panel, (void *)k->sg_packed_size,
              (void *)k->sg_pack, (void *)k->sgemm);
        for (size_t ti = 0; ti < 3; ti++) {
            const uint32_t ty = types[ti];
            const size_t es = esize(ty);
            snprintf(name, sizeof name, "%s: %s packed size = ceil(rows/16)*16*cols * %zu bytes",
                     k->name, tname(ty), es);
            check(k->sg_packed_size(ty, 17, 3) == 32 * 3 * es &&
                      k->sg_packed_size(ty, 16, 512) == 16 * 512 * es &&
                      k->sg_packed_size(ty, 1, 1) == 16 * es,
                  name, "%zu %zu %zu", k->sg_packed_size(ty, 17, 3),
                  k->sg_packed_size(ty, 16, 512), k->sg_packed_size(ty, 1, 1));
        }
    }
    /* fallbacks: avxvnni has no SGEMM of its own and runs avx2's */
    const ge_kern *a2 = ge_kern_get(GE_TIER_AVX2), *vn = ge_kern_get(GE_TIER_AVXVNNI);
    check(a2->sgemm == vn->sgemm && a2->sg_pack == vn->sg_pack, "avxvnni falls back to avx2",
          "different pointers");
}

/* Every 16-bit pattern (F16, BF16) and random 32-bit patterns (F32) through each tier's pack:
 * elements bit-exact copies of the source's, padding rows +0, and packing in pieces equal to
 * packing at once. */
static void check_pack(const ge_kern *k)
{
    static const int64_t shapes[][2] = {{257, 256}, {35, 13}, {64, 100}, {16, 1}};
    for (size_t ti = 0; ti < 3; ti++) {
        const uint32_t type = types[ti];
        int64_t bad = 0, badpad = 0, badsplit = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int64_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
            const size_t es = esize(type);
            uint8_t *src = xmalloc((size_t)n * es);
            for (int64_t i = 0; i < n; i++) {
                if (type == GE_T_F32) {
                    uint32_t u = (uint32_t)(rnd() >> 32);
                    memcpy(src + 4 * i, &u, 4);
                } else {
                    uint16_t h = (uint16_t)(s == 0 ? i : (int64_t)(rnd() >> 48)); /* all 65536 */
                    memcpy(src + 2 * i, &h, 2);
                }
            }
            const size_t bytes = k->sg_packed_size(type, rows, cols);
            uint8_t *p = xmalloc(bytes), *q = xmalloc(bytes);
            memset(p, 0xa5, bytes);
            memset(q, 0x5a, bytes);
            k->sg_pack(type, src, rows, cols, p, 0, rows);
            for (int64_t r = 0; r < (rows + 15) / 16 * 16; r++)
                for (int64_t c = 0; c < cols; c++) {
                    const uint8_t *got = p + (size_t)((r / 16 * cols + c) * 16 + r % 16) * es;
                    if (r >= rows) {
                        static const uint8_t zero[4];
                        badpad += memcmp(got, zero, es) != 0;
                        continue;
                    }
                    bad += memcmp(got, src + (size_t)(r * cols + c) * es, es) != 0;
                }
            /* pieces: [0, a), [a, b), [b, rows), a and b multiples of 16 */
            int64_t a = rows > 16 ? 16 : rows, b = rows > 48 ? 48 : rows;
            k->sg_pack(type, src, rows, cols, q, b, rows);
            k->sg_pack(type, src, rows, cols, q, 0, a);
            k->sg_pack(type, src, rows, cols, q, a, b);
            badsplit += memcmp(p, q, bytes) != 0;
            free(src);
            free(p);
            free(q);
        }
        char name[96];
        snprintf(name, sizeof name, "%s: pack %s exact (all 16-bit patterns / random bits)",
                 k->name, tname(type));
        check(bad == 0, name, "%lld elements differ from the source's", (long long)bad);
        snprintf(name, sizeof name, "%s: pack %s pads the last panel with +0", k->name,
                 tname(type));
        check(badpad == 0, name, "%lld padding values not +0", (long long)badpad);
        snprintf(name, sizeof name, "%s: pack %s in row pieces = pack at once", k->name,
                 tname(type));
        check(badsplit == 0, name, "%lld shapes differ", (long long)badsplit);
    }
}

/* One case: every tier against the scalar oracle (bits) and the fp64 truth (rel_err), with
 * padded strides, and with y untouched outside [0, n_tok) x [0, rows); the tally keeps, per
 * tier, bit mismatches, clobbered values and the worst rel_err. */
typedef struct {
    int64_t diffs[GE_TIER_COUNT], clobbered[GE_TIER_COUNT];
    double err[GE_TIER_COUNT];
    int64_t cases;
} tally;

static void run_case(const weight *W, int64_t n_tok, int positive_x, tally *tl)
{
    /* y has a spare row and 32 spare values: a stray store lands in the sentinels */
    const int64_t ldx = W->cols + 3, ldy = W->rows + 5, ny = (n_tok + 1) * ldy + 32;
    float *x = make_x(n_tok, ldx, positive_x);
    float *ref = NULL;
    double *s = xmalloc((size_t)(n_tok * W->rows) * sizeof *s);
    double *a = xmalloc((size_t)(n_tok * W->rows) * sizeof *a);
    truth(W, x, ldx, n_tok, s, a);
    for (int i = 0; i < n_tiers; i++) {
        const ge_kern *k = ge_kern_get((ge_tier)tiers[i]);
        void *p = pack(k, W, 0);
        float *y = xmalloc((size_t)ny * sizeof *y);
        for (int64_t e = 0; e < ny; e++)
            y[e] = -7.0f; /* sentinel */
        k->sgemm(W->type, p, W->rows, W->cols, x, ldx, 0, n_tok, 0, W->rows, y, ldy);
        for (int64_t e = 0; e < ny; e++)
            if (e >= n_tok * ldy || e % ldy >= W->rows)
                tl->clobbered[tiers[i]] += y[e] != -7.0f;
        if (k == scalar) {
            ref = y;
        } else {
            tl->diffs[tiers[i]] += bit_diffs(y, ref, n_tok, W->rows, ldy);
        }
        double e = rel_err(s, a, n_tok, W->rows, y, ldy);
        if (!(e <= tl->err[tiers[i]]))
            tl->err[tiers[i]] = e;
        if (y != ref)
            free(y);
        free(p);
    }
    tl->cases++;
    free(ref);
    free(x);
    free(s);
    free(a);
}

static void report(const char *what, const tally *tl, double tol)
{
    for (int i = 0; i < n_tiers; i++) {
        const int t = tiers[i];
        const char *tn = ge_tier_name((ge_tier)t);
        char name[160];
        if (t != GE_TIER_SCALAR) {
            snprintf(name, sizeof name, "%s: %s: bit-identical to scalar (%lld cases)", tn,
                     what, (long long)tl->cases);
            check(tl->diffs[t] == 0, name, "%lld outputs differ", (long long)tl->diffs[t]);
        }
        snprintf(name, sizeof name, "%s: %s: |y - fp64| / sum|terms| < %.3g", tn, what, tol);
        check(tl->err[t] < tol, name, "worst %.3g", tl->err[t]);
        printf("    %s %s: worst relative error %.3g\n", tn, what, tl->err[t]);
        snprintf(name, sizeof name, "%s: %s: nothing written outside the range", tn, what);
        check(tl->clobbered[t] == 0, name, "%lld values overwritten",
              (long long)tl->clobbered[t]);
    }
}

static void check_real_shapes(void)
{
    /* cols x rows of the text model's linears: q, k/v, o, gate/up, down, ple, projection */
    static const int64_t shapes[][2] = {{512, 1024}, {512, 512},  {1024, 512}, {512, 2048},
                                        {2048, 512}, {512, 12288}, {512, 768}};
    for (size_t ti = 0; ti < 3; ti++) {
        tally tl = {0};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            weight W = make_weight(types[ti], shapes[s][1], shapes[s][0], 0);
            run_case(&W, 7, 0, &tl); /* a full 6-token tile and a 1-token tail */
            if (s < 2) {
                run_case(&W, 2, 0, &tl); /* the few-token (wide) tiles */
                run_case(&W, 64, 0, &tl);
            }
            free_weight(&W);
        }
        char what[64];
        snprintf(what, sizeof what, "real shapes %s", tname(types[ti]));
        report(what, &tl, 1e-6);
    }
}

static void check_odd_shapes(void)
{
    static const int64_t rows[] = {1, 15, 16, 17, 33}, cols[] = {1, 3, 64, 100};
    for (size_t ti = 0; ti < 3; ti++) {
        tally tl = {0};
        for (size_t r = 0; r < 5; r++)
            for (size_t c = 0; c < 4; c++) {
                weight W = make_weight(types[ti], rows[r], cols[c], 0);
                for (int64_t n = 1; n <= 14; n++)
                    run_case(&W, n == 14 ? 64 : n, 0, &tl);
                free_weight(&W);
            }
        char what[64];
        snprintf(what, sizeof what, "odd shapes %s", tname(types[ti]));
        report(what, &tl, 1e-6);
    }
}

/* Same-sign data: the partial sums grow linearly, the worst case for the fp32 chain. */
static void check_same_sign(void)
{
    tally tl = {0};
    weight W = make_weight(GE_T_BF16, 64, 2048, 1);
    run_case(&W, 13, 1, &tl);
    free_weight(&W);
    const double u = ldexp(1.0, -24);
    report("K=2048 same-sign data", &tl, 6 * sqrt(2048.0) * u);
}

/* y (ny floats, -7 sentinels around the [n_tok][rows] outputs at stride ldy) from W's panels
 * in its own type, or (as_f32) from fp32 panels of its expansion */
static float *gemm_out(const ge_kern *k, const weight *W, int as_f32, const float *x,
                       int64_t ldx, int64_t n_tok, int64_t ldy, int64_t ny)
{
    void *p = pack(k, W, as_f32);
    float *y = xmalloc((size_t)ny * sizeof *y);
    for (int64_t e = 0; e < ny; e++)
        y[e] = -7.0f;
    k->sgemm(as_f32 ? GE_T_F32 : W->type, p, W->rows, W->cols, x, ldx, 0, n_tok, 0, W->rows, y,
             ldy);
    free(p);
    return y;
}

/* The panel type never changes a bit: at each tier, the whole y buffer (sentinels included)
 * from panels in the weight's type equals that from fp32 panels of its expansion (the layout
 * every type was packed into before), on random weights and inputs of odd shapes and token
 * counts and on the vision tower's shapes; then on every 16-bit pattern as a weight, the
 * non-finite ones grouped into the last rows, whose outputs only need to be NaN in both. */
static void check_panel_types(const ge_kern *k)
{
    /* token counts: the wide 1- and 2-token tiles, and every remainder of avx2's 3-token and
     * avx512's 6-token tiles */
    static const int64_t rows[] = {1, 5, 17, 33, 63, 70, 129}, cols[] = {1, 3, 7, 31, 100, 257},
                         toks[] = {1, 2, 3, 5, 7, 11, 13, 28, 29, 37};
    static const int64_t big[][3] = {{768, 768, 67}, {3072, 768, 7}, {768, 3072, 13}};
    for (size_t ti = 0; ti < 3; ti++) {
        int64_t cases = 0, bad = 0;
        for (int c = 0; c < 40 + 3; c++) {
            const int64_t r = c < 40 ? rows[irand(7)] : big[c - 40][0],
                          kk = c < 40 ? cols[irand(6)] : big[c - 40][1],
                          n = c < 40 ? toks[irand(10)] : big[c - 40][2];
            weight W = make_weight(types[ti], r, kk, 0);
            const int64_t ldx = kk + 3, ldy = r + 5, ny = (n + 1) * ldy + 32;
            float *x = make_x(n, ldx, 0);
            float *a = gemm_out(k, &W, 0, x, ldx, n, ldy, ny);
            float *b = gemm_out(k, &W, 1, x, ldx, n, ldy, ny);
            bad += memcmp(a, b, (size_t)ny * sizeof *a) != 0;
            cases++;
            free(a);
            free(b);
            free(x);
            free_weight(&W);
        }
        char name[128];
        snprintf(name, sizeof name, "%s: %s panels = fp32 panels of the expansion, memcmp "
                 "(%lld cases)", k->name, tname(types[ti]), (long long)cases);
        check(bad == 0, name, "%lld cases differ", (long long)bad);
    }
    for (size_t ti = 1; ti < 3; ti++) { /* every 16-bit pattern */
        const uint32_t type = types[ti];
        const uint16_t inf = type == GE_T_F16 ? 0x7c00 : 0x7f80; /* the exponent field */
        const int64_t r = 65, kk = 1024, n = 7, ldx = kk, ldy = r, ny = (n + 1) * ldy + 32;
        weight W = alloc_weight(type, r, kk);
        uint16_t *h = W.src;
        int64_t at = 0;
        for (int pass = 0; pass < 2; pass++) /* finite patterns first */
            for (uint32_t v = 0; v < 65536; v++)
                if (((v & inf) == inf) == pass)
                    h[at++] = (uint16_t)v;
        for (; at < r * kk; at++)
            h[at] = (uint16_t)(bits(frand()) >> 16) & 0xbfff; /* finite: |v| < 2 */
        expand(&W);
        float *x = make_x(n, ldx, 0);
        float *a = gemm_out(k, &W, 0, x, ldx, n, ldy, ny);
        float *b = gemm_out(k, &W, 1, x, ldx, n, ldy, ny);
        int64_t bad = 0;
        for (int64_t e = 0; e < ny; e++)
            bad += bits(a[e]) != bits(b[e]) && !(isnan(a[e]) && isnan(b[e]));
        char name[128];
        snprintf(name, sizeof name, "%s: %s panels widen all 65536 patterns as the expansion",
                 k->name, tname(type));
        check(bad == 0, name, "%lld outputs differ", (long long)bad);
        free(a);
        free(b);
        free(x);
        free_weight(&W);
    }
}

/* The determinism contract: any (t0, t1, r0, r1) split and any neighbours give the same bits. */
static void check_splits(const ge_kern *k)
{
    const int64_t rows = 70, cols = 100, n_tok = 37, ldx = cols, ldy = rows;
    weight W = make_weight(GE_T_BF16, rows, cols, 0);
    void *p = pack(k, &W, 0);
    float *x = make_x(n_tok, ldx, 0);
    float *y = xmalloc((size_t)(n_tok * ldy) * sizeof *y);
    float *y2 = xmalloc((size_t)(n_tok * ldy) * sizeof *y2);
    k->sgemm(W.type, p, rows, cols, x, ldx, 0, n_tok, 0, rows, y, ldy);

    int64_t diffs = 0;
    for (int trial = 0; trial < 40; trial++) {
        for (int64_t e = 0; e < n_tok * ldy; e++)
            y2[e] = NAN;
        for (int64_t t0 = 0; t0 < n_tok;) {
            int64_t t1 = t0 + 1 + irand(trial % 2 ? 8 : 20);
            if (t1 > n_tok)
                t1 = n_tok;
            for (int64_t r0 = 0; r0 < rows;) {
                int64_t r1 = r0 + 16 * (1 + irand(3));
                if (r1 > rows)
                    r1 = rows;
                k->sgemm(W.type, p, rows, cols, x, ldx, t0, t1, r0, r1, y2, ldy);
                r0 = r1;
            }
            t0 = t1;
        }
        diffs += bit_diffs(y2, y, n_tok, rows, ldy);
    }
    char name[96];
    snprintf(name, sizeof name, "%s: 40 random (t0,t1,r0,r1) splits bit-identical", k->name);
    check(diffs == 0, name, "%lld outputs differ", (long long)diffs);

    /* token 5 of x, placed at every position of calls of 1..13 tokens with other neighbours */
    diffs = 0;
    for (int64_t n = 1; n <= 13; n++)
        for (int64_t pos = 0; pos < n; pos++) {
            float *xb = make_x(n, ldx, 0);
            memcpy(xb + pos * ldx, x + 5 * ldx, (size_t)cols * sizeof(float));
            k->sgemm(W.type, p, rows, cols, xb, ldx, 0, n, 0, rows, y2, ldy);
            for (int64_t o = 0; o < rows; o++)
                diffs += bits(y2[pos * ldy + o]) != bits(y[5 * ldy + o]);
            free(xb);
        }
    snprintf(name, sizeof name, "%s: a token's outputs independent of its position and neighbours",
             k->name);
    check(diffs == 0, name, "%lld outputs differ", (long long)diffs);
    free(x);
    free(y);
    free(y2);
    free(p);
    free_weight(&W);
}

int main(int argc, char **argv)
{
    (void)argc, (void)argv;
    ge_cpu_feats f;
    ge_cpu_detect(&f);
    for (int t = 0; t < GE_TIER_COUNT; t++) {
        if (ge_tier_supported(&f, (ge_tier)t))
            tiers[n_tiers++] = t;
        else
            printf("    tier %s: not runnable here, skipped\n", ge_tier_name((ge_tier)t));
    }
    scalar = ge_kern_get(GE_TIER_SCALAR);
    check_table();
    for (int i = 0; i < n_tiers; i++)
        check_pack(ge_kern_get((ge_tier)tiers[i]));
    check_real_shapes();
    check_odd_shapes();
    check_same_sign();
    for (int i = 0; i < n_tiers; i++) {
        check_panel_types(ge_kern_get((ge_tier)tiers[i]));
        check_splits(ge_kern_get((ge_tier)tiers[i]));
    }
    return check_done();
}
