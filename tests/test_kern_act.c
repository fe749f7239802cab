/* test_kern_act.c - the activations (act_mul, every kind) against a double-precision oracle,
 * clamp exactly, the audio tower's local attention (attn_rel) against fp64, and the
 * per-row kernels (kern.h rmsnorm, rope) at every tier this CPU runs:
 * the scalar oracle follows kern.h's operation order exactly (a transcription of it here),
 * every other tier gives the oracle's bits over many row lengths (1..2049: full vectors,
 * partial last blocks, the engine's 16..2048), row counts (the four-row interleave and its
 * remainder), with and without a weight, over random data of several magnitudes, and writes
 * nothing outside its rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern.h"

#define RNG_SEED 0x6a09e667f3bcc909ull
#include "rng.h"

#define CANARY 12345.678f
#define GUARD 40

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* kern.h's rmsnorm, written from its comment (one row) */
static void spec_rmsnorm(float *x, int64_t n, const float *w, float eps)
{
    float s[8] = {0};
    for (int64_t i = 0; i < n; i++) {
        const float sq = x[i] * x[i];
        s[i % 8] = s[i % 8] + sq;
    }
    const float ss = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    const float q = ss / (float)n + eps, r = sqrtf(q), inv = 1.0f / r;
    for (int64_t i = 0; i < n; i++) {
        const float y = x[i] * inv;
        x[i] = w ? y * w[i] : y;
    }
}

/* kern.h's rope, written from its comment */
static void spec_rope(float *v, int64_t n_head, int64_t d, const float *cs, const float *sn)
{
    const int64_t half = d / 2;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t j = 0; j < half; j++) {
            float *a = v + h * d + j, *b = a + half;
            const float p = *a * cs[j], q = *b * sn[j], r = *b * cs[j], s = *a * sn[j];
            *a = p - q;
            *b = r + s;
        }
}

static int tiers[GE_TIER_COUNT], n_tiers;

static void find_tiers(void)
{
    ge_cpu_feats f;
    ge_cpu_detect(&f);
    for (int t = 0; t < GE_TIER_COUNT; t++)
        if (ge_tier_supported(&f, (ge_tier)t))
            tiers[n_tiers++] = t;
}

/* rows x n values (amplitude amp, some rows all zero or one spike) followed by GUARD canaries */
static float *make_rows(int64_t rows, int64_t n, float amp)
{
    float *x = xmalloc((size_t)(rows * n + GUARD) * sizeof *x);
    for (int64_t i = 0; i < rows * n; i++)
        x[i] = amp * frand();
    if (rows > 2) {
        memset(x + n, 0, (size_t)n * sizeof *x);
        x[2 * n + n / 2] = 3e4f;
    }
    for (int i = 0; i < GUARD; i++)
        x[rows * n + i] = CANARY;
    return x;
}

static const int64_t extra_n[] = {95, 96, 97, 127, 128, 129, 255, 256, 257, 511, 512, 513, 640,
                                  767, 768, 1023, 1024, 2047, 2048, 2049};
static const int64_t row_counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 13};
static const float amps[] = {1.0f, 1e-3f, 3e3f};

static int64_t nth_n(int i) { return i < 80 ? i + 1 : extra_n[i - 80]; }
#define N_LENGTHS (80 + (int)(sizeof extra_n / sizeof extra_n[0]))

static void check_rmsnorm(void)
{
    const ge_kern *oracle = ge_kern_get(GE_TIER_SCALAR);
    /* the oracle against the transcription, row by row */
    int64_t bad = 0, cases = 0;
    for (int li = 0; li < N_LENGTHS; li++) {
        const int64_t n = nth_n(li), rows = 5;
        float *x = make_rows(rows, n, 1.0f), *y = xmalloc((size_t)(rows * n) * sizeof *y);
        float *w = xmalloc((size_t)n * sizeof *w);
        for (int64_t i = 0; i < n; i++)
            w[i] = 1.0f + frand();
        memcpy(y, x, (size_t)(rows * n) * sizeof *y);
        oracle->rmsnorm(x, rows, n, li % 2 ? w : NULL, 1e-6f);
        for (int64_t r = 0; r < rows; r++)
            spec_rmsnorm(y + r * n, n, li % 2 ? w : NULL, 1e-6f);
        for (int64_t i = 0; i < rows * n; i++)
            bad += bits(x[i]) != bits(y[i]);
        cases++;
        free(x), free(y), free(w);
    }
    check(bad == 0, "rmsnorm: scalar oracle follows kern.h's order", "%lld values differ",
          (long long)bad);

    for (int ti = 0; ti < n_tiers; ti++) {
        const ge_kern *k = ge_kern_get((ge_tier)tiers[ti]);
        if (k->rmsnorm == oracle->rmsnorm)
            continue;
        int64_t diff = 0, spill = 0, runs = 0;
        for (int li = 0; li < N_LENGTHS; li++)
            for (size_t ri = 0; ri < sizeof row_counts / sizeof row_counts[0]; ri++)
                for (int wi = 0; wi < 2; wi++) {
                    const int64_t n = nth_n(li), rows = row_counts[ri];
                    const float amp = amps[(li + ri + wi) % 3];
                    const float eps = wi ? 1e-6f : 1e-5f;
                    float *x = make_rows(rows, n, amp);
                    float *y = xmalloc((size_t)(rows * n + GUARD) * sizeof *y);
                    float *w = xmalloc((size_t)n * sizeof *w);
                    for (int64_t i = 0; i < n; i++)
                        w[i] = 1.0f + frand();
                    memcpy(y, x, (size_t)(rows * n + GUARD) * sizeof *y);
                    k->rmsnorm(x, rows, n, wi ? w : NULL, eps);
                    oracle->rmsnorm(y, rows, n, wi ? w : NULL, eps);
                    for (int64_t i = 0; i < rows * n; i++)
                        diff += bits(x[i]) != bits(y[i]);
                    for (int i = 0; i < GUARD; i++)
                        spill += x[rows * n + i] != CANARY;
                    runs++;
                    free(x), free(y), free(w);
                }
        char name[96];
        snprintf(name, sizeof name, "rmsnorm %s: bit-identical to scalar (%lld runs, n 1..2049)",
                 k->name, (long long)runs);
        check(diff == 0, name, "%lld values differ", (long long)diff);
        snprintf(name, sizeof name, "rmsnorm %s: nothing written past the rows", k->name);
        check(spill == 0, name, "%lld guard values changed", (long long)spill);
    }
}

/* accuracy of the oracle: within 1e-5 relative of an fp64 RMSNorm (unit weight) */
static void check_rmsnorm_fp64(void)
{
    const ge_kern *oracle = ge_kern_get(GE_TIER_SCALAR);
    double worst = 0;
    for (int li = 0; li < N_LENGTHS; li++) {
        const int64_t n = nth_n(li);
        float *x = make_rows(1, n, 1.0f);
        double ss = 0, *x64 = xmalloc((size_t)n * sizeof *x64);
        for (int64_t i = 0; i < n; i++)
            x64[i] = x[i], ss += x64[i] * x64[i];
        const double inv = 1.0 / sqrt(ss / (double)n + 1e-6);
        oracle->rmsnorm(x, 1, n, NULL, 1e-6f);
        for (int64_t i = 0; i < n; i++) {
            double e = fabs(x[i] - x64[i] * inv) / (fabs(x64[i] * inv) + 1e-30);
            worst = e > worst ? e : worst;
        }
        free(x), free(x64);
    }
    check(worst < 1e-5, "rmsnorm: scalar within 1e-5 relative of fp64", "worst %.3g", worst);
}

static void check_rope(void)
{
    const ge_kern *oracle = ge_kern_get(GE_TIER_SCALAR);
    static const int64_t extra_d[] = {126, 128, 130, 254, 256, 258, 510, 512, 514, 1024};
    const int n_d = 60 + (int)(sizeof extra_d / sizeof extra_d[0]);
    for (int ti = 0; ti < n_tiers; ti++) {
        const ge_kern *k = ge_kern_get((ge_tier)tiers[ti]);
        int64_t diff = 0, spill = 0, runs = 0;
        for (int di = 0; di < n_d; di++)
            for (int64_t nh = 1; nh <= 5; nh++) {
                const int64_t d = di < 60 ? 2 * (di + 1) : extra_d[di - 60], half = d / 2;
                const float amp = amps[(di + nh) % 3];
                float *x = make_rows(nh, d, amp);
                float *y = xmalloc((size_t)(nh * d + GUARD) * sizeof *y);
                float *cs = xmalloc((size_t)half * sizeof *cs);
                float *sn = xmalloc((size_t)half * sizeof *sn);
                for (int64_t j = 0; j < half; j++) {
                    const double a = 1000.0 * frand();
                    cs[j] = (float)cos(a), sn[j] = (float)sin(a);
                }
                memcpy(y, x, (size_t)(nh * d + GUARD) * sizeof *y);
                if (k == oracle) {
                    k->rope(x, nh, d, cs, sn);
                    spec_rope(y, nh, d, cs, sn);
                } else {
                    k->rope(x, nh, d, cs, sn);
                    oracle->rope(y, nh, d, cs, sn);
                }
                for (int64_t i = 0; i < nh * d; i++)
                    diff += bits(x[i]) != bits(y[i]);
                for (int i = 0; i < GUARD; i++)
                    spill += x[nh * d + i] != CANARY;
                runs++;
                free(x), free(y), free(cs), free(sn);
            }
        char name[96];
        if (k == oracle)
            snprintf(name, sizeof name, "rope scalar: follows kern.h's order (%lld runs)",
                     (long long)runs);
        else
            snprintf(name, sizeof name, "rope %s: bit-identical to scalar (%lld runs, d 2..1024)",
                     k->name, (long long)runs);
        check(diff == 0, name, "%lld values differ", (long long)diff);
        snprintf(name, sizeof name, "rope %s: nothing written past the heads", k->name);
        check(spill == 0, name, "%lld guard values changed", (long long)spill);
    }
}

/* act(x) in double: tanh GELU, quick-GELU x * sigmoid(1.702 x), SiLU, sigmoid */
static double act_fp64(double x, ge_act kind)
{
    switch (kind) {
    case GE_GELU_QUICK: return x / (1.0 + exp(-(double)GE_QUICK_GELU_K * x));
    case GE_SILU: return x / (1.0 + exp(-x));
    case GE_SIGMOID: return 1.0 / (1.0 + exp(-x));
    default: return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    }
}

/* Every tier, every kind, with a gate u and without (u NULL), n over the vector widths'
 * remainders and the chunking: within 4e-6 relative of the oracle plus 2e-7 |x u| (where
 * 1 + tanh cancels), saturation at +-90, NaN kept, and nothing written past n. */
static void check_act(void)
{
    static const char *const kind_name[] = {"tanh", "quick", "silu", "sigmoid"};
    static const int64_t ns[] = {1, 7, 8, 9, 15, 16, 17, 255, 256, 257, 1000, 3072};
    for (int ti = 0; ti < n_tiers; ti++) {
        const ge_kern *k = ge_kern_get((ge_tier)tiers[ti]);
        for (int kind = GE_GELU_TANH; kind <= GE_SIGMOID; kind++)
        for (int gated = 0; gated < 2; gated++) {
            double worst = 0;
            int bad = 0;
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                const int64_t n = ns[ni];
                float *g = make_rows(1, n, 8.0f), *u = make_rows(1, n, 2.0f);
                float *g0 = xmalloc((size_t)n * sizeof *g0);
                if (n > 4)
                    g[0] = 90.0f, g[1] = -90.0f, g[2] = 0.0f, g[3] = NAN;
                memcpy(g0, g, (size_t)n * sizeof *g0);
                if (!gated)
                    for (int64_t i = 0; i < n; i++)
                        u[i] = 1.0f;
                k->act_mul(g, gated ? u : NULL, n, (ge_act)kind, NULL);
                for (int64_t i = 0; i < n; i++) {
                    const double want = act_fp64(g0[i], (ge_act)kind) * u[i];
                    if (isnan(g0[i])) {
                        bad += !isnan(g[i]);
                        continue;
                    }
                    /* 1 + tanh(z) cancels for negative x: a few ulp of 1, times x u */
                    const double tol = 4e-6 * fabs(want) + 2e-7 * fabs((double)g0[i] * u[i]);
                    const double e = fabs(g[i] - want) / (tol + 1e-30);
                    worst = e > worst ? e : worst;
                    bad += !(fabs(g[i] - want) <= tol + 1e-30);
                }
                for (int i = 0; i < GUARD; i++)
                    bad += g[n + i] != CANARY;
                free(g), free(u), free(g0);
            }
            char name[96];
            snprintf(name, sizeof name, "%s: act_mul %s%s within tolerance of the fp64 oracle",
                     k->name, kind_name[kind], gated ? " times a gate" : "");
            check(!bad, name, "%d bad values, worst error %.3g x the tolerance", bad, worst);
        }
    }
}

/* act_mul's clip: the bytes of clamp, act_mul without clip, clamp on the same tier */
static void check_act_clip(void)
{
    static const float clip[4] = {-2.5f, 3.0f, -0.75f, 1.5f};
    for (int ti = 0; ti < n_tiers; ti++) {
        const ge_kern *k = ge_kern_get((ge_tier)tiers[ti]);
        int bad = 0;
        for (int kind = GE_GELU_TANH; kind <= GE_SIGMOID; kind++)
            for (int64_t n = 1; n <= 300; n += 37) {
                float *g = make_rows(1, n, 6.0f), *u = make_rows(1, n, 2.0f);
                float *h = xmalloc((size_t)n * sizeof *h);
                k->clamp(h, g, n, clip[0], clip[1]);
                k->act_mul(h, u, n, (ge_act)kind, NULL);
                k->clamp(h, h, n, clip[2], clip[3]);
                k->act_mul(g, u, n, (ge_act)kind, clip);
                bad += memcmp(g, h, (size_t)n * sizeof *g) != 0;
                free(g), free(u), free(h);
            }
        char name[80];
        snprintf(name, sizeof name, "%s: act_mul's clip = clamp, act_mul, clamp", k->name);
        check(!bad, name, "%d differing runs", bad);
    }
}

/* clamp: the scalar tier's comparisons exactly (NaN, +-inf, -0 included), in place and not,
 * and nothing written past n */
static void check_clamp(void)
{
    for (int ti = 0; ti < n_tiers; ti++) {
        const ge_kern *k = ge_kern_get((ge_tier)tiers[ti]);
        int bad = 0;
        for (int n = 1; n <= 70; n++) {
            float *x = make_rows(1, n, 5.0f), *y = xmalloc((size_t)(n + GUARD) * sizeof *y);
            if (n > 5)
                x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = -0.0f, x[4] = 2.5f;
            for (int i = 0; i < GUARD; i++)
                y[n + i] = CANARY;
            const float lo = n % 3 ? -2.5f : 0.0f, hi = n % 2 ? 2.5f : INFINITY;
            k->clamp(y, x, n, lo, hi);
            for (int i = 0; i < n; i++) {
                const float want = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
                bad += isnan(want) ? !isnan(y[i]) : bits(y[i]) != bits(want);
            }
            for (int i = 0; i < GUARD; i++)
                bad += y[n + i] != CANARY;
            k->clamp(x, x, n, lo, hi); /* in place */
            for (int i = 0; i < n; i++)
                bad += isnan(y[i]) ? !isnan(x[i]) : bits(x[i]) != bits(y[i]);
            free(x), free(y);
        }
        char name[64];
        snprintf(name, sizeof name, "%s: clamp is exact (NaN kept, -0, inf)", k->name);
        check(!bad, name, "%d wrong values", bad);
    }
}

/* axpy: y + a x with the product rounded, the bits of the scalar expression on every tier */
static void check_axpy(void)
{
    for (int ti = 0; ti < n_tiers; ti++) {
        const ge_kern *k = ge_kern_get((ge_tier)tiers[ti]);
        int bad = 0;
        for (int64_t n = 1; n <= 70; n++) {
            float *x = make_rows(1, n, 3.0f), *y = make_rows(1, n, 3.0f);
            float *want = xmalloc((size_t)n * sizeof *want);
            const float a = n % 2 ? 0.5f : -1.7f;
            for (int64_t i = 0; i < n; i++) {
                const float p = a * x[i];
                want[i] = y[i] + p;
            }
            k->axpy(y, x, n, a);
            for (int64_t i = 0; i < n; i++)
                bad += bits(y[i]) != bits(want[i]);
            for (int i = 0; i < GUARD; i++)
                bad += y[n + i] != CANARY;
            free(x), free(y), free(want);
        }
        char name[64];
        snprintf(name, sizeof name, "%s: axpy is the scalar expression bit for bit", k->name);
        check(!bad, name, "%d wrong values", bad);
    }
}

/* dwconv: kern.h's order transcribed here; every tier gives its bits (rows near 0 with their
 * left-out taps, channel counts over the vector remainders), in pieces or in one call */
static void check_dwconv(void)
{
    for (int ti = 0; ti < n_tiers; ti++) {
        const ge_kern *k = ge_kern_get((ge_tier)tiers[ti]);
        int bad = 0;
        for (int64_t c = 1; c <= 70; c += 3)
            for (int kw = 1; kw <= 5; kw += 2) {
                const int64_t n = 9;
                float *x = make_rows(n, c, 2.0f), *w = make_rows(kw, c, 1.0f);
                float *y = make_rows(n, c, 0.0f), *y2 = make_rows(n, c, 0.0f);
                k->dwconv(y, x, 0, n, w, kw, c);
                k->dwconv(y2, x, 0, 4, w, kw, c);
                k->dwconv(y2, x, 4, n, w, kw, c);
                for (int64_t t = 0; t < n; t++)
                    for (int64_t i = 0; i < c; i++) {
                        float sum = 0.0f;
                        for (int q = 0; q < kw; q++)
                            if (t - (kw - 1) + q >= 0) {
                                const float p = w[q * c + i] * x[(t - (kw - 1) + q) * c + i];
                                sum = sum + p;
                            }
                        bad += bits(y[t * c + i]) != bits(sum) || bits(y2[t * c + i]) != bits(sum);
                    }
                for (int i = 0; i < GUARD; i++)
                    bad += y[n * c + i] != CANARY;
                free(x), free(w), free(y), free(y2);
            }
        char name[64];
        snprintf(name, sizeof name, "%s: dwconv follows kern.h's order bit for bit", k->name);
        check(!bad, name, "%d wrong values", bad);
    }
}

/* attn_rel: every tier against an fp64 transcription of kern.h (tolerance for the vector
 * tiers' polynomial exp, fused dot products and tanh through exp), over head dims, head
 * counts, windows and lengths; rows computed in pieces give the bytes of one call. */
static void check_attn_rel(void)
{
    static const int hds[] = {16, 32, 128, 24};
    for (int ti = 0; ti < n_tiers; ti++) {
        const ge_kern *k = ge_kern_get((ge_tier)tiers[ti]);
        double worst = 0;
        int bad = 0;
        for (int c = 0; c < 12; c++) {
            const int hd = hds[c % 4], nh = 1 + c % 5, W = c % 3 ? 12 : 5;
            const int64_t n = 1 + (c * 7) % 40, ld = (int64_t)nh * hd;
            float *q = make_rows(n, ld, 0.6f), *kk = make_rows(n, ld, 0.6f);
            float *v = make_rows(n, ld, 1.0f), *r = make_rows(W, ld, 0.6f);
            float *o = xmalloc((size_t)(n * ld) * sizeof *o);
            float *o2 = xmalloc((size_t)(n * ld) * sizeof *o2);
            if (c == 5) /* logits far past the cap */
                for (int64_t i = 0; i < n * ld; i++)
                    q[i] *= 40.0f;
            float *qs = make_rows(1, hd, 1.0f);
            ge_attn_rel_args a = {q, kk, v, r, o, qs, 1.9f, ld, nh, hd, W, 50.0f};
            k->attn_rel(&a, 0, n);
            a.o = o2;
            for (int64_t i0 = 0; i0 < n; i0 += 3)
                k->attn_rel(&a, i0, i0 + 3 < n ? i0 + 3 : n);
            bad += memcmp(o, o2, (size_t)(n * ld) * sizeof *o) != 0;
            for (int64_t i = 0; i < n; i++)
                for (int h = 0; h < nh; h++) {
                    const int64_t s0 = i - (W - 1) > 0 ? i - (W - 1) : 0;
                    double p[16], mx = -1e300, sum = 0;
                    const float *qi = q + i * ld + h * hd;
                    for (int64_t s = s0; s <= i; s++) {
                        double d = 0;
                        for (int e = 0; e < hd; e++)
                            d += (double)qi[e] * qs[e] * (1.9 * kk[s * ld + h * hd + e] +
                                                          (double)r[(i - s) * ld + h * hd + e]);
                        p[s - s0] = 50.0 * tanh(d / 50.0);
                        mx = p[s - s0] > mx ? p[s - s0] : mx;
                    }
                    for (int64_t s = s0; s <= i; s++)
                        sum += p[s - s0] = exp(p[s - s0] - mx);
                    for (int e = 0; e < hd; e++) {
                        double want = 0;
                        for (int64_t s = s0; s <= i; s++)
                            want += p[s - s0] / sum * v[s * ld + h * hd + e];
                        const double err = fabs(o[i * ld + h * hd + e] - want);
                        worst = err > worst ? err : worst;
                        bad += !(err <= 2e-4 + 2e-4 * fabs(want));
                    }
                }
            free(q), free(kk), free(v), free(r), free(o), free(o2), free(qs);
        }
        char name[96];
        snprintf(name, sizeof name, "%s: attn_rel within tolerance of fp64, pieces = one call",
                 k->name);
        check(!bad, name, "%d bad values, worst error %.3g", bad, worst);
    }
}

int main(void)
{
    find_tiers();
    for (int ti = 0; ti < n_tiers; ti++) {
        const ge_kern *k = ge_kern_get((ge_tier)tiers[ti]);
        char name[64];
        snprintf(name, sizeof name, "%s: rmsnorm and rope in the table", k->name);
        check(k->rmsnorm && k->rope, name, "missing pointer");
    }
    check_act();
    check_clamp();
    check_act_clip();
    check_axpy();
    check_dwconv();
    check_attn_rel();
    check_rmsnorm();
    check_rmsnorm_fp64();
    check_rope();
    return check_done();
}
