/* attn_rel.c - the local relative-position attention: the scalar oracle (attn_rel.h has the
 * numerics) and the table. */
#include <math.h>
#include <string.h>

#include "attn.h"
#include "attn_rel.h"

void ge_attn_rel_scalar(const ge_attn_rel_args *a, int64_t q0, int64_t q1)
{
    const int hd = a->head_dim;
    for (int64_t i = q0; i < q1; i++) {
        const int64_t s0 = i - (a->window - 1) > 0 ? i - (a->window - 1) : 0;
        for (int h = 0; h < a->n_head; h++) {
            const float *qrow = a->q + i * a->ld + (int64_t)h * hd;
            float q[GE_ATTN_REL_MAX_HEAD_DIM], p[GE_ATTN_REL_MAX_WINDOW], mx = -INFINITY;
            for (int e = 0; e < hd; e++)
                q[e] = qrow[e] * a->q_scale[e];
            for (int64_t s = s0; s <= i; s++) {
                const float *k = a->k + s * a->ld + (int64_t)h * hd;
                const float *r = a->r + (i - s) * a->ld + (int64_t)h * hd;
                float dk = 0.0f, dr = 0.0f;
                for (int e = 0; e < hd; e++)
                    dk += q[e] * (k[e] * a->k_scale);
                for (int e = 0; e < hd; e++)
                    dr += q[e] * r[e];
                const float y = (dk + dr) / a->cap, e = expf(-2.0f * fabsf(y));
                const float c = a->cap * ((1.0f - e) / (1.0f + e)); /* cap tanh y (act.h) */
                const float l = y < 0.0f ? -c : c;
                p[s - s0] = l;
                mx = l > mx ? l : mx;
            }
            float sum = 0.0f;
            for (int64_t s = s0; s <= i; s++)
                sum += p[s - s0] = expf(p[s - s0] - mx);
            float *o = a->o + i * a->ld + (int64_t)h * hd;
            memset(o, 0, (size_t)hd * sizeof *o);
            for (int64_t s = s0; s <= i; s++) {
                const float *v = a->v + s * a->ld + (int64_t)h * hd;
                for (int e = 0; e < hd; e++)
                    o[e] += p[s - s0] * v[e];
            }
            for (int e = 0; e < hd; e++)
                o[e] /= sum;
        }
    }
}

void ge_attn_rel_fill(ge_kern *k, ge_tier tier)
{
    k->attn_rel = ge_attn_rel_scalar;
#if defined(__x86_64__)
    if (tier == GE_TIER_AVX2 || tier == GE_TIER_AVXVNNI)
        k->attn_rel = ge_attn_rel_avx2;
    if (tier == GE_TIER_AVX512)
        k->attn_rel = ge_attn_rel_avx512;
#elif defined(__aarch64__)
    if (tier == GE_TIER_NEON || tier == GE_TIER_DOTPROD || tier == GE_TIER_I8MM)
        k->attn_rel = ge_attn_rel_neon;
#else
    (void)tier;
#endif
}
