/* attn_scalar.c - the attention oracle: row by row, exact softmax in fp32.
 *
 * For each query row: pass 1 finds the exact max score over the row's keys, pass 2 recomputes
 * each score (same operations, same bits), p = expf(s - max), l += p, o += p v in key order,
 * then o /= l. Recomputing the scores costs half a pass more than storing them but needs no
 * buffer (kernels never allocate). A row with no keys gets zeros. */
#include <math.h>
#include <string.h>

#include "attn.h"

/* Eight partial sums (lane e % 8), added pairwise at the end: no less exact than one chain,
 * and several times faster. */
static float dot(const float *x, const float *y, int n)
{
    float s[8] = {0};
    int e = 0;
    for (; e + 8 <= n; e += 8)
        for (int u = 0; u < 8; u++)
            s[u] += x[e + u] * y[e + u];
    for (; e < n; e++)
        s[e % 8] += x[e] * y[e];
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

void ge_attn_scalar(const ge_attn_args *a, int head, int64_t q0, int64_t q1)
{
    const int d = a->head_dim;
    const int64_t kvoff = (int64_t)(head / (a->n_head / a->n_kv)) * d;
    for (int64_t i = q0; i < q1; i++) {
        const float *q = a->q + i * a->ldq + (int64_t)head * d;
        float *o = a->o + i * a->ldo + (int64_t)head * d;
        const int64_t lo = a->key_lo[i], hi = a->key_hi[i];
        memset(o, 0, (size_t)d * sizeof *o);
        if (lo >= hi)
            continue;
        float mx = -INFINITY;
        for (int64_t j = lo; j < hi; j++) {
            const float s = a->scale * dot(q, a->k + j * a->ldkv + kvoff, d);
            mx = s > mx ? s : mx;
        }
        float l = 0.0f;
        for (int64_t j = lo; j < hi; j++) {
            const float p = expf(a->scale * dot(q, a->k + j * a->ldkv + kvoff, d) - mx);
            const float *v = a->v + j * a->ldkv + kvoff;
            l += p;
            for (int e = 0; e < d; e++)
                o[e] += p * v[e];
        }
        for (int e = 0; e < d; e++)
            o[e] /= l;
    }
}
