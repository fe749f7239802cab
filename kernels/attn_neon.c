/* attn_neon.c - tiled attention, armv8.0-a Advanced SIMD (attn.h has the numerics,
 * attn_tiled.h the blocking). The tier's steps, each the operations of attn_avx2.c on pairs
 * of 4-lane registers, so that a row gets the avx2 tier's bits:
 *  - scores: 4 queries x 2 keys of fma chains over the head dim, each chain 8 lanes wide (dim
 *    e in lane e % 8, a pair of registers: 16 accumulators), folded by avx2's 8 -> 1 tree
 *    straight into [key][query] order;
 *  - probabilities: 2 keys x 4 queries at a time, range masks by integer compares;
 *  - values: 4 queries x 6 registers (24 dims; 4 or 2 for the rest) of o accumulators across
 *    the tile's keys, one load of the key's 4 probabilities and an fma by lane per query and
 *    register (31 of the 32 registers); the keys outside some row's range go row by row.
 * Head dims must be a multiple of 8 (others go to the scalar kernel). */
#include <arm_neon.h>

#include "attn_tiled.h"
#include "exp_neon.h"

/* ---- exp (exp_neon.h) ------------------------------------------------------------------ */

void ge_attn_exp_neon(const float *x, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, exp4(vld1q_f32(x + i)));
    if (i < n) {
        float in[4] = {0}, out[4];
        memcpy(in, x + i, (size_t)(n - i) * sizeof(float));
        vst1q_f32(out, exp4(vld1q_f32(in)));
        memcpy(y + i, out, (size_t)(n - i) * sizeof(float));
    }
}

/* ---- scores ---------------------------------------------------------------------------- */

/* [a0, a1, b0, b1] + [a2, a3, b2, b3] */
INLINE float32x4_t fold_halves(float32x4_t a, float32x4_t b)
{
    const float64x2_t a64 = vreinterpretq_f64_f32(a), b64 = vreinterpretq_f64_f32(b);
    return vaddq_f32(vreinterpretq_f32_f64(vzip1q_f64(a64, b64)),
                     vreinterpretq_f32_f64(vzip2q_f64(a64, b64)));
}

/* Lane q = the sum of the 8-lane chain (lo[q], hi[q]) by avx2's reduce8 tree
 * ((x0 + x4) + (x2 + x6)) + ((x1 + x5) + (x3 + x7)). */
INLINE float32x4_t reduce8x4(const float32x4_t *lo, const float32x4_t *hi)
{
    float32x4_t u[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++)
        u[q] = vaddq_f32(lo[q], hi[q]); /* x_l + x_(l+4) */
    const float32x4_t s01 = fold_halves(u[0], u[1]), s23 = fold_halves(u[2], u[3]);
    return vaddq_f32(vuzp1q_f32(s01, s23), vuzp2q_f32(s01, s23));
}

static void scores(const ctx *c, const block *b, int64_t j0, int64_t j1, float *S)
{
    const ge_attn_args *a = c->a;
    const int d = c->d;
    const float *qp[QB];
#pragma GCC unroll 4
    for (int q = 0; q < QB; q++)
        qp[q] = a->q + b->i[q < b->n ? q : 0] * a->ldq + c->head;
    const float32x4_t scale = vdupq_n_f32(a->scale);
    const int64_t jend = j0 + ((j1 - j0 + 3) & ~(int64_t)3); /* whole groups of 4 keys */
    for (int64_t jj = j0; jj < jend; jj += 2) {
        const float *k0 = a->k + (jj < j1 ? jj : j1 - 1) * a->ldkv + c->kvoff;
        const float *k1 = a->k + (jj + 1 < j1 ? jj + 1 : j1 - 1) * a->ldkv + c->kvoff;
        float32x4_t lo[2][QB], hi[2][QB]; /* [key][query], dims e % 8 < 4 and >= 4 */
#pragma GCC unroll 4
        for (int q = 0; q < QB; q++)
            lo[0][q] = hi[0][q] = lo[1][q] = hi[1][q] = vdupq_n_f32(0.0f);
        for (int e = 0; e < d; e += 8) {
            const float32x4_t k0l = vld1q_f32(k0 + e), k0h = vld1q_f32(k0 + e + 4);
            const float32x4_t k1l = vld1q_f32(k1 + e), k1h = vld1q_f32(k1 + e + 4);
#pragma GCC unroll 4
            for (int q = 0; q < QB; q++) {
                const float32x4_t ql = vld1q_f32(qp[q] + e), qh = vld1q_f32(qp[q] + e + 4);
                lo[0][q] = vfmaq_f32(lo[0][q], ql, k0l);
                hi[0][q] = vfmaq_f32(hi[0][q], qh, k0h);
                lo[1][q] = vfmaq_f32(lo[1][q], ql, k1l);
                hi[1][q] = vfmaq_f32(hi[1][q], qh, k1h);
            }
        }
        float *s = S + (jj - j0) * QB;
        vst1q_f32(s, vmulq_f32(reduce8x4(lo[0], hi[0]), scale));
        vst1q_f32(s + QB, vmulq_f32(reduce8x4(lo[1], hi[1]), scale));
    }
}

/* ---- probabilities --------------------------------------------------------------------- */

static void probs(block *b, int64_t j0, int64_t j1, float *S)
{
    int32_t lo[QB], hi[QB];
    float m[QB];
#pragma GCC unroll 4
    for (int q = 0; q < QB; q++) { /* padding rows: j >= 0 && j < 0, never */
        lo[q] = q < b->n ? b->lo[q] : 0;
        hi[q] = q < b->n ? (int32_t)min64(b->hi[q], j1) : 0;
        m[q] = q < b->n ? b->m[q] : 0.0f;
    }
    const float32x4_t mv = vld1q_f32(m), room = vdupq_n_f32(GE_ATTN_HEADROOM);
    const int32x4_t lov = vld1q_s32(lo), hiv = vld1q_s32(hi);
    float32x4_t l = vld1q_f32(b->l);
    uint32x4_t over = vdupq_n_u32(0);
    for (int64_t jj = j0; jj < j1; jj += 2) { /* keys jj, jj + 1 (j1 masks a key past it) */
        float *s = S + (jj - j0) * QB;
        const int32x4_t ja = vdupq_n_s32((int32_t)jj), jb = vdupq_n_s32((int32_t)jj + 1);
        const uint32x4_t ina = vandq_u32(vcgeq_s32(ja, lov), vcltq_s32(ja, hiv));
        const uint32x4_t inb = vandq_u32(vcgeq_s32(jb, lov), vcltq_s32(jb, hiv));
        const float32x4_t ta = vsubq_f32(vld1q_f32(s), mv), tb = vsubq_f32(vld1q_f32(s + QB), mv);
        over = vorrq_u32(over, vandq_u32(ina, vcgtq_f32(ta, room)));
        over = vorrq_u32(over, vandq_u32(inb, vcgtq_f32(tb, room)));
        /* masked by selection: a NaN or inf score outside the range gives 0 */
        const float32x4_t pa = vreinterpretq_f32_u32(
            vandq_u32(ina, vreinterpretq_u32_f32(exp4(ta))));
        const float32x4_t pb = vreinterpretq_f32_u32(
            vandq_u32(inb, vreinterpretq_u32_f32(exp4(tb))));
        vst1q_f32(s, pa);
        vst1q_f32(s + QB, pb);
        l = vaddq_f32(vaddq_f32(l, pa), pb); /* key by key */
    }
    vst1q_f32(b->l, l);
    uint32_t ov[QB];
    vst1q_u32(ov, over);
    for (int q = 0; q < b->n; q++)
        b->redo[q] |= ov[q] != 0;
}

/* ---- values ---------------------------------------------------------------------------- */

/* acc + v * p[lane] (the lane a constant once unrolled) */
INLINE float32x4_t fma_lane(float32x4_t acc, float32x4_t v, float32x4_t p, const int lane)
{
    switch (lane) {
    case 0: return vfmaq_laneq_f32(acc, v, p, 0);
    case 1: return vfmaq_laneq_f32(acc, v, p, 1);
    case 2: return vfmaq_laneq_f32(acc, v, p, 2);
    default: return vfmaq_laneq_f32(acc, v, p, 3);
    }
}

/* o[q][e .. e + 4W) += sum_j S[j][q] v_j for keys [j0, j1) that every row sees. */
INLINE void pv_chunk(const int NQ, const int W, float *const *o, const float *v, int64_t ldv,
                     const float *S, int64_t sj0, int64_t j0, int64_t j1, int e)
{
    float32x4_t acc[QB][6];
#pragma GCC unroll 4
    for (int q = 0; q < NQ; q++)
#pragma GCC unroll 6
        for (int w = 0; w < W; w++)
            acc[q][w] = vld1q_f32(o[q] + e + 4 * w);
    for (int64_t j = j0; j < j1; j++) {
        const float *vj = v + j * ldv + e;
        const float32x4_t p = vld1q_f32(S + (j - sj0) * QB); /* the key's 4 rows */
        float32x4_t vv[6];
#pragma GCC unroll 6
        for (int w = 0; w < W; w++)
            vv[w] = vld1q_f32(vj + 4 * w);
#pragma GCC unroll 4
        for (int q = 0; q < NQ; q++)
#pragma GCC unroll 6
            for (int w = 0; w < W; w++)
                acc[q][w] = fma_lane(acc[q][w], vv[w], p, q);
    }
#pragma GCC unroll 4
    for (int q = 0; q < NQ; q++)
#pragma GCC unroll 6
        for (int w = 0; w < W; w++)
            vst1q_f32(o[q] + e + 4 * w, acc[q][w]);
}

INLINE void pv_rows(const int NQ, const ctx *c, float *const *o, const float *v,
                    const float *S, int64_t sj0, int64_t j0, int64_t j1)
{
    const int64_t ldv = c->a->ldkv;
    int e = 0;
    for (; e + 24 <= c->d; e += 24)
        pv_chunk(NQ, 6, o, v, ldv, S, sj0, j0, j1, e);
    if (c->d - e == 16)
        pv_chunk(NQ, 4, o, v, ldv, S, sj0, j0, j1, e);
    else if (c->d - e == 8)
        pv_chunk(NQ, 2, o, v, ldv, S, sj0, j0, j1, e);
}

/* One row, keys [j0, j1) of its range. */
static void pv_one(const ctx *c, float *o, const float *v, const float *S, int64_t sj0, int q,
                   int64_t j0, int64_t j1)
{
    const int64_t ldv = c->a->ldkv;
    for (int64_t j = j0; j < j1; j++) {
        const float32x4_t p = vld1q_dup_f32(S + (j - sj0) * QB + q);
        const float *vj = v + j * ldv;
        for (int e = 0; e < c->d; e += 4)
            vst1q_f32(o + e, vfmaq_f32(vld1q_f32(o + e), p, vld1q_f32(vj + e)));
    }
}

/* The block kernel for rows 0..n-1 of a block (o += p_j v_j for keys [j0, j1)). */
static void pv_block(const ctx *c, int n, float *const *o, const float *v, const float *S,
                     int64_t sj0, int64_t j0, int64_t j1)
{
    switch (n) {
    case 1: pv_rows(1, c, o, v, S, sj0, j0, j1); break;
    case 2: pv_rows(2, c, o, v, S, sj0, j0, j1); break;
    case 3: pv_rows(3, c, o, v, S, sj0, j0, j1); break;
    default: pv_rows(4, c, o, v, S, sj0, j0, j1); break;
    }
}

/* ---- the rest -------------------------------------------------------------------------- */

static void finish(const ctx *c, const block *b)
{
    const ge_attn_args *a = c->a;
    for (int q = 0; q < b->n; q++) {
        if (b->redo[q])
            continue;
        float *o = a->o + b->i[q] * a->ldo + c->head;
        const float32x4_t l = vdupq_n_f32(b->l[q]);
        for (int e = 0; e < c->d; e += 4)
            vst1q_f32(o + e, vdivq_f32(vld1q_f32(o + e), l));
    }
}

void ge_attn_neon(const ge_attn_args *a, int head, int64_t q0, int64_t q1)
{
    if (a->head_dim % 8)
        ge_attn_scalar(a, head, q0, q1);
    else
        tiled(a, head, q0, q1);
}
