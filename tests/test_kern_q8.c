/* test_kern_q8.c - the Q8_0 GEMM family (kernels/q8*.c) at every tier this CPU can run,
 * plus the EVEX build of the avxvnni algorithm when AVX-512 VNNI + VL are present:
 *   - quantiser: bytes, scales and sums bit-identical to the scalar oracle (ties, zeros,
 *     denormal scales, inf/NaN included);
 *   - packing: packed_size, packing in row-group pieces == packing at once, no stray writes;
 *   - GEMM at the model's shapes and odd edge shapes against the scalar tier and an fp64
 *     truth computed from the same quantised activations and weights (relative error
 *     < 1e-5 of sum |terms|; by design, q8.h, every tier is also bit-identical to scalar);
 *   - the determinism contract: y[t][o] bit-identical whatever the (t0, t1, r0, r1) split and
 *     whichever other tokens share the call; nothing written outside the task's range;
 *   - a tier the CPU cannot run is never run;
 *   - all of it again for the wide rule (q8.h: activations of span GE_Q8_WIDE, q8_gemm_wide)
 *     on the variants that have it, at shapes whose rows come in whole spans.
 * argv[1] (an output folder) is not used. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "dtype.h"
#include "kern.h"
#include "q8.h"
#include "rng.h"

/* ---- variants under test ------------------------------------------------------------- */

typedef struct {
    char name[32];
    ge_kern k;
} variant;

static variant vars[GE_TIER_COUNT + 1];
static int n_vars;
static const ge_kern *oracle;
static int wide; /* testing the wide rule: span GE_Q8_WIDE activations, q8_gemm_wide */

typedef void (*gemm_fn)(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                        int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy);
/* the GEMM under test of kernel k (NULL: k has no wide rule) */
static gemm_fn gemm_of(const ge_kern *k) { return wide ? k->q8_gemm_wide : k->q8_gemm; }
static const char *rule(void) { return wide ? " wide" : ""; }

static void pick_variants(void)
{
    ge_cpu_feats f;
    ge_cpu_detect(&f);
    oracle = ge_kern_get(GE_TIER_SCALAR);
    for (int t = 0; t < GE_TIER_COUNT; t++) {
        if (!ge_tier_supported(&f, (ge_tier)t)) {
            /* the tier above the CPU: listed, never executed */
            check(1,
                  nm("q8 tier %s: not supported by this CPU, never run", ge_tier_name((ge_tier)t)),
                  "-");
            continue;
        }
        variant *v = &vars[n_vars++];
        snprintf(v->name, sizeof v->name, "%s", ge_tier_name((ge_tier)t));
        v->k = *ge_kern_get((ge_tier)t);
    }
    if (ge_q8_evex256_supported(&f)) {
        variant *v = &vars[n_vars];
        v->k = *ge_kern_get(GE_TIER_AVXVNNI);
        if (ge_q8_fill_evex256(&v->k)) {
            snprintf(v->name, sizeof v->name, "avxvnni-evex256");
            n_vars++;
        }
    }
    int best_listed = 0;
    for (int i = 0; i < n_vars; i++)
        best_listed |= strcmp(vars[i].name, ge_tier_name(ge_tier_best(&f))) == 0;
    check(best_listed && n_vars >= 1, "q8 variants: the best tier of this CPU is tested", "-");
    for (int i = 0; i < n_vars; i++) {
        const ge_kern *k = &vars[i].k;
        int ok =
            k->q8_gemm && k->q8_pack && k->q8_quantize && k->q8_packed_size && k->q8_row_group >= 1;
        check(ok, nm("q8 %s: table filled", vars[i].name), "missing pointers");
        printf("  (testing %s, row group %d)\n", vars[i].name, k->q8_row_group);
    }
}

/* ---- data ---------------------------------------------------------------------------- */

/* ggml Q8_0 weights {cols, rows}: values in [-128, 127] (-128 and +-127 included),
 * fp16 scales of varied size, some all-zero blocks. */
static ge_block_q8_0 *make_weights(int64_t rows, int64_t cols)
{
    const int64_t nb = cols / 32;
    ge_block_q8_0 *w = xmalloc((size_t)(rows * nb) * sizeof *w);
    for (int64_t i = 0; i < rows * nb; i++) {
        float d = (0.05f + (float)(rnd() % 1000) / 1000.0f) * 0.01f;
        uint16_t h = ge_fp32_to_fp16(d);
        memcpy(&w[i].d, &h, 2);
        int kind = (int)(rnd() % 50);
        for (int k = 0; k < 32; k++) {
            int v = (int)(rnd() % 255) - 127;
            if (kind == 0)
                v = 0;
            else if (kind == 1)
                v = (k & 1) ? -128 : 127;
            else if (kind == 2)
                v = -128;
            w[i].qs[k] = (int8_t)v;
        }
    }
    return w;
}

/* activations: blocks of varied magnitude, some zero blocks */
static float *make_x(int64_t n_tok, int64_t cols)
{
    float *x = xmalloc((size_t)(n_tok * cols) * sizeof *x);
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t b = 0; b < cols / 32; b++) {
            int kind = (int)(rnd() % 40);
            float mag = (float)ldexp(1.0, (int)(rnd() % 20) - 10);
            for (int k = 0; k < 32; k++)
                x[t * cols + b * 32 + k] = kind == 0 ? 0.0f : mag * frand();
        }
    return x;
}

static void act_alloc(ge_q8_act *a, int64_t n_tok, int64_t cols)
{
    a->n_tok = n_tok;
    a->cols = cols;
    a->span = wide ? GE_Q8_WIDE : 1;
    a->clip = false;
    a->qs = xmalloc((size_t)(n_tok * cols));
    a->d = xmalloc((size_t)(n_tok * (cols / 32)) * sizeof(float));
    a->sum = xmalloc((size_t)(n_tok * (cols / 32)) * sizeof(int32_t));
}
static void act_free(ge_q8_act *a) { free(a->qs), free(a->d), free(a->sum); }

/* packed weights for kernel k: a few bytes off 64-byte alignment (the engine promises none) */
typedef struct {
    void *mem, *p;
} packed;
static packed pack(const ge_kern *k, const ge_block_q8_0 *w, int64_t rows, int64_t cols)
{
    packed pk;
    size_t n = k->q8_packed_size(rows, cols);
    pk.mem = xmalloc(n + 64);
    pk.p = (char *)pk.mem + 4;
    k->q8_pack(w, rows, cols, pk.p, 0, rows);
    return pk;
}

/* ---- quantiser ----------------------------------------------------------------------- */

static void test_quantize(void)
{
    /* the oracle's own rules: ties to even, clamp, zero block, sums */
    if (!wide) {
        const int64_t cols = 64;
        float x[64] = {0};
        x[0] = 127.0f; /* d = 1, id = 1 */
        x[1] = 2.5f, x[2] = 3.5f, x[3] = -2.5f, x[4] = -0.5f, x[5] = 0.5f, x[6] = 1.5f;
        x[7] = -127.0f;
        ge_q8_act a;
        act_alloc(&a, 1, cols);
        oracle->q8_quantize(x, cols, 0, 1, &a);
        int8_t want[8] = {127, 2, 4, -2, 0, 0, 2, -127};
        int32_t sum = 0;
        for (int i = 0; i < 32; i++)
            sum += a.qs[i];
        check(memcmp(a.qs, want, 8) == 0 && a.d[0] == 1.0f && a.d[1] == 0.0f && a.sum[0] == sum &&
                  a.sum[1] == 0 && a.qs[40] == 0,
              "q8 scalar quantise: d = max/127, ties to even, zero block",
              "got %d %d %d %d %d %d %d %d d %g %g", a.qs[0], a.qs[1], a.qs[2], a.qs[3], a.qs[4],
              a.qs[5], a.qs[6], a.qs[7], a.d[0], a.d[1]);
        act_free(&a);
    }

    /* every tier against the oracle on awkward inputs */
    const int64_t n_tok = 41, cols = 256, nb = cols / 32, ldx = cols + 7;
    float *x = xmalloc((size_t)(n_tok * ldx) * sizeof *x);
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t b = 0; b < nb; b++) {
            float *xb = x + t * ldx + b * 32;
            int kind = (int)((t * nb + b) % 12);
            float mag = (float)ldexp(1.0, (int)(rnd() % 60) - 30);
            for (int k = 0; k < 32; k++) {
                float v = mag * frand();
                switch (kind) {
                case 0: v = 0.0f; break;
                case 1: v = (k == 5) ? 127.0f : (float)((int)(rnd() % 255) - 127) + 0.5f; break;
                case 2: v = (float)ldexp(frand(), -140); break; /* denormal x and d */
                case 3: v = (float)ldexp(frand(), 120); break;
                case 4: v = k == 3 ? INFINITY : v; break;
                case 5: v = k == 9 ? NAN : v; break;
                case 6: v = k == 0 ? -INFINITY : k == 1 ? NAN : v; break;
                case 7: v = -0.0f; break;
                case 8: v = (k == 0) ? -3e-39f : 1e-45f * (float)(k % 3); break;
                default: break;
                }
                xb[k] = v;
            }
        }
    ge_q8_act ref, got;
    act_alloc(&ref, n_tok, cols);
    act_alloc(&got, n_tok, cols);
    oracle->q8_quantize(x, ldx, 0, n_tok, &ref);
    for (int i = 0; i < n_vars; i++) {
        if (!gemm_of(&vars[i].k))
            continue;
        memset(got.qs, 0x5a, (size_t)(n_tok * cols));
        memset(got.d, 0x5a, (size_t)(n_tok * nb) * sizeof(float));
        memset(got.sum, 0x5a, (size_t)(n_tok * nb) * sizeof(int32_t));
        vars[i].k.q8_quantize(x, ldx, 3, 17, &got); /* a sub-range first */
        int untouched = (uint8_t)got.qs[0] == 0x5a && (uint8_t)got.qs[17 * cols] == 0x5a;
        vars[i].k.q8_quantize(x, ldx, 0, 3, &got);
        vars[i].k.q8_quantize(x, ldx, 17, n_tok, &got);
        int ok = untouched && memcmp(got.qs, ref.qs, (size_t)(n_tok * cols)) == 0 &&
                 memcmp(got.d, ref.d, (size_t)(n_tok * nb) * sizeof(float)) == 0 &&
                 memcmp(got.sum, ref.sum, (size_t)(n_tok * nb) * sizeof(int32_t)) == 0;
        int64_t bad = -1;
        for (int64_t j = 0; j < n_tok * cols && bad < 0; j++)
            if (got.qs[j] != ref.qs[j])
                bad = j;
        check(ok, nm("q8 %s%s quantise: bit-identical to scalar", vars[i].name, rule()),
              "untouched %d, first differing byte %lld (%d vs %d)", untouched, (long long)bad,
              bad >= 0 ? got.qs[bad] : 0, bad >= 0 ? ref.qs[bad] : 0);
    }
    /* the quantiser's clip: the bytes of the clamp kernel, then quantising (every tier) */
    float *xc = xmalloc((size_t)(n_tok * ldx) * sizeof *xc);
    static const float bounds[][2] = {{-0.75f, 2.5e-9f}, {-INFINITY, 1e30f}, {3.0f, 3.0f}};
    for (int i = 0; i < n_vars; i++) {
        if (!gemm_of(&vars[i].k))
            continue;
        int ok = 1;
        for (size_t c = 0; c < sizeof bounds / sizeof bounds[0]; c++) {
            vars[i].k.clamp(xc, x, n_tok * ldx, bounds[c][0], bounds[c][1]);
            vars[i].k.q8_quantize(xc, ldx, 0, n_tok, &ref);
            got.clip = true, got.lo = bounds[c][0], got.hi = bounds[c][1];
            vars[i].k.q8_quantize(x, ldx, 0, n_tok, &got);
            got.clip = false;
            ok &= memcmp(got.qs, ref.qs, (size_t)(n_tok * cols)) == 0 &&
                  memcmp(got.d, ref.d, (size_t)(n_tok * nb) * sizeof(float)) == 0 &&
                  memcmp(got.sum, ref.sum, (size_t)(n_tok * nb) * sizeof(int32_t)) == 0;
        }
        check(ok, nm("q8 %s%s quantise with clip = clamp, then quantise", vars[i].name, rule()),
              "bytes differ");
    }
    free(xc);
    oracle->q8_quantize(x, ldx, 0, n_tok, &ref);

    /* sums and ranges of the oracle itself; one scale per span: max |x| / 127 over it */
    int ok = 1, span_ok = 1;
    const int64_t span = wide ? GE_Q8_WIDE : 1;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t b = 0; b < nb; b++) {
            int32_t s = 0;
            for (int k = 0; k < 32; k++) {
                int8_t q = ref.qs[t * cols + b * 32 + k];
                s += q;
                ok &= q >= -127;
            }
            ok &= s == ref.sum[t * nb + b];
            const int64_t s0 = b / span * span;
            float amax = 0.0f;
            for (int64_t k = s0 * 32; k < (s0 + span) * 32; k++) {
                const float v = fabsf(x[t * ldx + k]);
                amax = v > amax ? v : amax;
            }
            span_ok &= memcmp(&ref.d[t * nb + b], &ref.d[t * nb + s0], sizeof(float)) == 0;
            span_ok &= !(amax <= FLT_MAX) || ref.d[t * nb + b] == amax / 127.0f;
        }
    check(ok, nm("q8%s quantise: sum is the block's sum of qs, q in [-127, 127]", rule()), "-");
    check(span_ok, nm("q8%s quantise: one d per span of %lld blocks, max|x| / 127", rule(),
                      (long long)span),
          "-");
    act_free(&ref);
    act_free(&got);
    free(x);
}

/* ---- packing ------------------------------------------------------------------------- */

static void test_pack(void)
{
    const int64_t rows = 53, cols = 96;
    ge_block_q8_0 *w = make_weights(rows, cols);
    for (int i = 0; i < n_vars; i++) {
        const ge_kern *k = &vars[i].k;
        const int g = k->q8_row_group;
        size_t n = k->q8_packed_size(rows, cols);
        int64_t groups = (rows + g - 1) / g;
        int ok = n == (size_t)(groups * (cols / 32) * g * 36);
        uint8_t *a = xmalloc(n + 16), *b = xmalloc(n + 16);
        memset(a, 0xa5, n + 16);
        memset(b, 0xc3, n + 16);
        k->q8_pack(w, rows, cols, a, 0, rows);
        /* pieces, out of order: [2g, rows), [0, g), [g, 2g) */
        k->q8_pack(w, rows, cols, b, 2 * g, rows);
        k->q8_pack(w, rows, cols, b, 0, g);
        k->q8_pack(w, rows, cols, b, g, 2 * g);
        ok &= memcmp(a, b, n) == 0;
        for (int j = 0; j < 16; j++)
            ok &= a[n + j] == 0xa5 && b[n + j] == 0xc3;
        check(ok, nm("q8 %s pack: size, pieces == whole, no stray writes", vars[i].name),
              "size %zu", n);
        free(a), free(b);
    }
    free(w);
}

/* ---- GEMM against scalar and fp64 ---------------------------------------------------- */

/* truth[t][o] and mag[t][o] = sum |terms| from the ggml weights and the quantised act */
static void truth(const ge_block_q8_0 *w, int64_t rows, int64_t cols, const ge_q8_act *a,
                  double *tr, double *mag)
{
    const int64_t nb = cols / 32;
    for (int64_t t = 0; t < a->n_tok; t++)
        for (int64_t o = 0; o < rows; o++) {
            double s = 0, m = 0;
            for (int64_t b = 0; b < nb; b++) {
                const ge_block_q8_0 *blk = &w[o * nb + b];
                const int8_t *q = a->qs + t * cols + b * 32;
                int64_t is = 0, ia = 0;
                for (int k = 0; k < 32; k++) {
                    is += blk->qs[k] * q[k];
                    ia += abs(blk->qs[k] * q[k]);
                }
                uint16_t h;
                memcpy(&h, &blk->d, 2);
                double sc = (double)ge_fp16_to_fp32(h) * a->d[t * nb + b];
                s += sc * (double)is;
                m += fabs(sc) * (double)ia;
            }
            tr[t * rows + o] = s;
            mag[t * rows + o] = m;
        }
}

typedef struct {
    double err_truth, err_scalar;
    int64_t bit_diff;
} gemm_result;

/* Runs every variant on one shape for each n_tok; returns the worst errors per variant. */
static void gemm_shape(int64_t cols, int64_t rows, const int *ntoks, int n_ntok,
                       gemm_result *res /* [n_vars] */)
{
    for (int i = 0; i < n_vars; i++)
        res[i] = (gemm_result){0, 0, 0};
    ge_block_q8_0 *w = make_weights(rows, cols);
    packed pk[GE_TIER_COUNT + 1];
    for (int i = 0; i < n_vars; i++)
        pk[i] = pack(&vars[i].k, w, rows, cols);
    packed pko = pack(oracle, w, rows, cols);
    for (int j = 0; j < n_ntok; j++) {
        const int64_t n_tok = ntoks[j];
        float *x = make_x(n_tok, cols);
        ge_q8_act a;
        act_alloc(&a, n_tok, cols);
        oracle->q8_quantize(x, cols, 0, n_tok, &a);
        double *tr = xmalloc((size_t)(n_tok * rows) * sizeof(double));
        double *mag = xmalloc((size_t)(n_tok * rows) * sizeof(double));
        truth(w, rows, cols, &a, tr, mag);
        float *ys = xmalloc((size_t)(n_tok * rows) * sizeof(float));
        float *y = xmalloc((size_t)(n_tok * rows) * sizeof(float));
            gemm_of(oracle)(pko.p, rows, cols, &a, 0, n_tok, 0, rows, ys, rows);
        for (int i = 0; i < n_vars; i++) {
            if (!gemm_of(&vars[i].k))
                continue;
            gemm_of(&vars[i].k)(pk[i].p, rows, cols, &a, 0, n_tok, 0, rows, y, rows);
            for (int64_t e = 0; e < n_tok * rows; e++) {
                double m = mag[e] > 0 ? mag[e] : 1e-300;
                double et = fabs(y[e] - tr[e]) / m, es = fabs((double)y[e] - ys[e]) / m;
                if (mag[e] == 0 && y[e] != 0)
                    et = es = 1;
                if (!(et <= res[i].err_truth))
                    res[i].err_truth = et;
                if (!(es <= res[i].err_scalar))
                    res[i].err_scalar = es;
                res[i].bit_diff += memcmp(&y[e], &ys[e], 4) != 0;
            }
        }
        free(x), free(tr), free(mag), free(ys), free(y);
        act_free(&a);
    }
    for (int i = 0; i < n_vars; i++)
        free(pk[i].mem);
    free(pko.mem);
    free(w);
}

static void report(const char *what, int64_t cols, int64_t rows, const gemm_result *res)
{
    for (int i = 0; i < n_vars; i++) {
        if (!gemm_of(&vars[i].k))
            continue;
        check(res[i].err_truth < 1e-5 && res[i].err_scalar < 1e-5,
              nm("q8 %s%s gemm %s %lldx%lld: rel err < 1e-5 vs fp64 and scalar", vars[i].name,
                 rule(), what, (long long)cols, (long long)rows),
              "err vs fp64 %.3g, vs scalar %.3g", res[i].err_truth, res[i].err_scalar);
        check(res[i].bit_diff == 0,
              nm("q8 %s%s gemm %s %lldx%lld: bit-identical to scalar", vars[i].name, rule(), what,
                 (long long)cols, (long long)rows),
              "%lld values differ", (long long)res[i].bit_diff);
    }
}

static void test_gemm_shapes(void)
{
    gemm_result res[GE_TIER_COUNT + 1];
    /* the model's linears (cols x rows) and the embedding-sized 512 x 12288 */
    static const int64_t model[][2] = {{512, 1024}, {512, 512}, {1024, 512}, {512, 2048},
                                       {2048, 512}, {512, 768}, {512, 12288}};
    static const int nt_model[] = {13};
    for (size_t s = 0; s < sizeof model / sizeof model[0]; s++) {
        gemm_shape(model[s][0], model[s][1], nt_model, 1, res);
        report("model", model[s][0], model[s][1], res);
    }
    /* full layer: a 200-token wave through the MLP shapes (several token blocks) */
    static const int nt_layer[] = {200};
    gemm_shape(512, 2048, nt_layer, 1, res);
    report("layer(200 tok)", 512, 2048, res);
    gemm_shape(2048, 512, nt_layer, 1, res);
    report("layer(200 tok)", 2048, 512, res);
    /* long rows: several K chunks (fp32 sums carried through y) */
    static const int nt_long[] = {1, 9};
    gemm_shape(4192, 37, nt_long, 2, res);
    report("long-k", 4192, 37, res);
    /* edge shapes */
    static const int64_t erows[] = {1, 7, 8, 15, 17, 33}, ecols[] = {32, 64, 96};
    static const int nt_edge[] = {1, 2, 5, 6, 7, 13, 64};
    for (size_t c = 0; c < 3; c++)
        for (size_t r = 0; r < 6; r++) {
            gemm_shape(ecols[c], erows[r], nt_edge, 7, res);
            report("edge", ecols[c], erows[r], res);
        }
}

/* ---- determinism contract ------------------------------------------------------------ */

static void test_determinism(int64_t cols, int64_t rows, int64_t n_tok)
{
    ge_block_q8_0 *w = make_weights(rows, cols);
    float *x = make_x(n_tok, cols);
    ge_q8_act a;
    act_alloc(&a, n_tok, cols);
    oracle->q8_quantize(x, cols, 0, n_tok, &a);
    const int64_t ldy = rows + 5;
    float *ref = xmalloc((size_t)(n_tok * ldy) * sizeof(float));
    float *y = xmalloc((size_t)(n_tok * ldy) * sizeof(float));
    const float canary = -12345.5f;
    for (int i = 0; i < n_vars; i++) {
        const ge_kern *k = &vars[i].k;
        const gemm_fn gemm = gemm_of(k);
        if (!gemm)
            continue;
        const int64_t g = k->q8_row_group;
        packed pk = pack(k, w, rows, cols);
        for (int64_t e = 0; e < n_tok * ldy; e++)
            ref[e] = canary;
        gemm(pk.p, rows, cols, &a, 0, n_tok, 0, rows, ref, ldy);
        int pad_ok = 1;
        for (int64_t t = 0; t < n_tok; t++)
            for (int64_t o = rows; o < ldy; o++)
                pad_ok &= ref[t * ldy + o] == canary;

        /* 1. random task grids: token ranges x row-group-aligned row ranges */
        int grid_ok = 1, stray_ok = 1;
        for (int rep = 0; rep < 6; rep++) {
            for (int64_t e = 0; e < n_tok * ldy; e++)
                y[e] = canary;
            for (int64_t t0 = 0; t0 < n_tok;) {
                int64_t t1 = t0 + 1 + (int64_t)(rnd() % (uint64_t)(rep < 2 ? 3 : 20));
                if (t1 > n_tok)
                    t1 = n_tok;
                for (int64_t r0 = 0; r0 < rows;) {
                    int64_t r1 = r0 + g * (1 + (int64_t)(rnd() % 5));
                    if (r1 > rows)
                        r1 = rows;
                    gemm(pk.p, rows, cols, &a, t0, t1, r0, r1, y, ldy);
                    /* nothing outside this task (or earlier tasks) was written */
                    if (rep == 5)
                        for (int64_t t = t0; t < t1; t++)
                            for (int64_t o = r1; o < ldy && o < r1 + 2 * g; o++)
                                stray_ok &= y[t * ldy + o] == canary;
                    r0 = r1;
                }
                t0 = t1;
            }
            grid_ok &= memcmp(y, ref, (size_t)(n_tok * ldy) * sizeof(float)) == 0;
        }

        /* 2. each token of the batch placed among other tokens, at another position */
        int mix_ok = 1;
        const int64_t m_tok = 11;
        ge_q8_act b;
        act_alloc(&b, m_tok, cols);
        float *xb = make_x(m_tok, cols);
        oracle->q8_quantize(xb, cols, 0, m_tok, &b);
        float *yb = xmalloc((size_t)(m_tok * rows) * sizeof(float));
        const int64_t nb = cols / 32;
        for (int64_t t = 0; t < n_tok; t += 3) {
            int64_t p = (t * 7) % m_tok;
            memcpy(b.qs + p * cols, a.qs + t * cols, (size_t)cols);
            memcpy(b.d + p * nb, a.d + t * nb, (size_t)nb * sizeof(float));
            memcpy(b.sum + p * nb, a.sum + t * nb, (size_t)nb * sizeof(int32_t));
            int64_t lo = p - (int64_t)(rnd() % 3), hi = p + 1 + (int64_t)(rnd() % 9);
            lo = lo < 0 ? 0 : lo;
            hi = hi > m_tok ? m_tok : hi;
            gemm(pk.p, rows, cols, &b, lo, hi, 0, rows, yb, rows);
            mix_ok &= memcmp(yb + p * rows, ref + t * ldy, (size_t)rows * sizeof(float)) == 0;
        }
        free(yb), free(xb);
        act_free(&b);
        check(grid_ok,
              nm("q8 %s%s determinism %lldx%lld x%lld: any task split", vars[i].name, rule(),
                 (long long)cols, (long long)rows, (long long)n_tok),
              "split results differ");
        check(mix_ok,
              nm("q8 %s%s determinism %lldx%lld x%lld: other tokens", vars[i].name, rule(),
                 (long long)cols, (long long)rows, (long long)n_tok),
              "a token's row depends on the others in the call");
        check(pad_ok && stray_ok,
              nm("q8 %s%s %lldx%lld: no writes outside [t0,t1)x[r0,r1)", vars[i].name, rule(),
                 (long long)cols, (long long)rows),
              "pad %d, stray %d", pad_ok, stray_ok);
        free(pk.mem);
    }
    free(ref), free(y), free(x), free(w);
    act_free(&a);
}

int main(void)
{
    pick_variants();
    test_quantize();
    test_pack();
    test_gemm_shapes();
    test_determinism(512, 1000, 37); /* rows not a multiple of any group */
    test_determinism(2048, 72, 70);  /* several token blocks */
    test_determinism(4160, 40, 19);  /* several K chunks */
    test_determinism(96, 17, 64);

    /* the wide rule, where a tier has it: the media towers' widths (1024 in, 4096 in, 1152
     * in), several K chunks, edge row and token counts */
    wide = 1;
    int n_wide = 0;
    for (int i = 0; i < n_vars; i++)
        n_wide += vars[i].k.q8_gemm_wide != NULL;
    check(oracle->q8_gemm_wide && n_wide >= 1, "q8 wide: the oracle has it", "-");
    printf("  (wide rule: %d of %d variants)\n", n_wide, n_vars);
    test_quantize();
    gemm_result res[GE_TIER_COUNT + 1];
    static const int64_t shapes[][2] = {{1024, 1024}, {4096, 40}, {1152, 33}, {128, 1},
                                        {128, 17},    {256, 7},   {384, 16}};
    static const int nt[] = {1, 2, 7, 13, 64};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        gemm_shape(shapes[s][0], shapes[s][1], nt, 5, res);
        report("media", shapes[s][0], shapes[s][1], res);
    }
    static const int nt_long[] = {200};
    gemm_shape(1024, 4096 / 16, nt_long, 1, res);
    report("media(200 tok)", 1024, 4096 / 16, res);
    test_determinism(1024, 100, 37);
    test_determinism(4224, 40, 19); /* several K chunks, not a whole number of them */
    return check_done();
}
