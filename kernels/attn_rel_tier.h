/* attn_rel_tier.h - the vector tiers' attn_rel (attn_rel.h has the numerics), written once
 * over a tier's vector type. The including tier file defines VW (lanes), vf (the vector
 * type), V_ZERO(), V_LOAD(p), V_STORE(p, x), V_SET1(x), V_ADD, V_MUL, V_FMA(a, b, c) = a b + c,
 * V_SUM(x) (the fixed lane reduction), ATTN_REL_EXP (the tier's ge_attn_exp_*) and
 * ATTN_REL_NAME, then includes this file. */
#include <math.h>

#include "attn.h"
#include "attn_rel.h"

void ATTN_REL_NAME(const ge_attn_rel_args *a, int64_t q0, int64_t q1)
{
    const int hd = a->head_dim, nh = a->n_head, W = a->window;
    if (hd % VW || hd > GE_ATTN_REL_MAX_HEAD_DIM || nh * W > GE_ATTN_REL_MAX_WINDOW * 64) {
        ge_attn_rel_scalar(a, q0, q1);
        return;
    }
    /* one row's logits (then probabilities) of every head: [nh][W] */
    float l[GE_ATTN_REL_MAX_WINDOW * 64], t[GE_ATTN_REL_MAX_WINDOW * 64];
    float qs[GE_ATTN_REL_MAX_HEAD_DIM];
    const float inv_cap = 1.0f / a->cap;
    const vf ks = V_SET1(a->k_scale);
    for (int64_t i = q0; i < q1; i++) {
        const int64_t s0 = i - (W - 1) > 0 ? i - (W - 1) : 0;
        const int nk = (int)(i - s0 + 1);
        for (int h = 0; h < nh; h++) {
            const float *q = a->q + i * a->ld + (int64_t)h * hd;
            for (int e = 0; e < hd; e += VW)
                V_STORE(qs + e, V_MUL(V_LOAD(q + e), V_LOAD(a->q_scale + e)));
            for (int j = 0; j < nk; j++) {
                const int64_t s = s0 + j;
                const float *k = a->k + s * a->ld + (int64_t)h * hd;
                const float *r = a->r + (i - s) * a->ld + (int64_t)h * hd;
                vf acc = V_ZERO();
                for (int e = 0; e < hd; e += VW)
                    acc = V_FMA(V_LOAD(qs + e), V_FMA(V_LOAD(k + e), ks, V_LOAD(r + e)), acc);
                l[h * W + j] = V_SUM(acc);
            }
        }
        /* the cap: e = exp(-2 |y|) for every head's logits at once */
        const int n = nh * W;
        for (int h = 0; h < nh; h++)
            for (int j = 0; j < W; j++)
                t[h * W + j] = j < nk ? -2.0f * fabsf(l[h * W + j] * inv_cap) : 0.0f;
        ATTN_REL_EXP(t, t, n);
        for (int h = 0; h < nh; h++) {
            float mx = -INFINITY;
            for (int j = 0; j < nk; j++) {
                const float y = l[h * W + j], e = t[h * W + j];
                const float c = a->cap * ((1.0f - e) / (1.0f + e));
                l[h * W + j] = y < 0.0f ? -c : c;
                mx = l[h * W + j] > mx ? l[h * W + j] : mx;
            }
            for (int j = 0; j < W; j++)
                t[h * W + j] = j < nk ? l[h * W + j] - mx : -INFINITY; /* exp gives 0 */
        }
        ATTN_REL_EXP(t, t, n);
        for (int h = 0; h < nh; h++) {
            float sum = 0.0f;
            for (int j = 0; j < nk; j++)
                sum += t[h * W + j];
            const vf inv = V_SET1(1.0f / sum);
            float *o = a->o + i * a->ld + (int64_t)h * hd;
            for (int e = 0; e < hd; e += VW) {
                vf acc = V_ZERO();
                for (int j = 0; j < nk; j++)
                    acc = V_FMA(V_SET1(t[h * W + j]),
                                V_LOAD(a->v + (s0 + j) * a->ld + (int64_t)h * hd + e), acc);
                V_STORE(o + e, V_MUL(acc, inv));
            }
        }
    }
}
