/* attn_dense_neon.c - dense attention over head-major planes, armv8.0-a Advanced SIMD (attn.h
 * has the numerics, kern.h the layout). The avx2 tier's sums in the same order (l in 8 lanes
 * as a register pair), so a row gets its bits. Per block of GE_ATTN_DENSE_ROWS = 12 rows:
 *  - scores: 12 rows x 8 keys (2 registers of a K^T panel row) of fma chains over the head
 *    dim: per dim e one load of 4 rows' q (a column of the transposed block) and an fma by
 *    lane per row and key register (24 accumulators, 29 registers); scaled, stored in the
 *    scratch rows and folded into each row's running max;
 *  - probabilities: p = exp(s - max) 8 keys at a time, l summed in 8 lanes (2 registers);
 *  - values: 4 rows x 4 registers (16 dims) of o accumulators across a chunk of KC keys,
 *    keys 4 at a time: one load of 4 probabilities per row, 4 loads of v per key and an fma
 *    by lane per row, register and key.
 * The rows of a partial block past q1 are padding (zero q, never stored). */
#include <arm_neon.h>
#include <string.h>

#include "attn.h"
#include "exp_neon.h"

#define KEYS GE_ATTN_DENSE_KEYS
#define ROWS GE_ATTN_DENSE_ROWS
#define QK_KEYS 8 /* keys per score tile */
#define PV_ROWS 4
#define KC 256 /* keys per chunk of the values pass */
#define INLINE static inline __attribute__((always_inline))

typedef struct {
    const float *kt, *v; /* this head's planes */
    int64_t n, np;
    int d, nr;           /* head dim; real rows in the block */
    float scale;
    float *S;            /* [ROWS][np]: scores, then probabilities */
    float *Qt;           /* [d][ROWS]: the block's q rows, transposed */
    float *O;            /* [ROWS][d]: output accumulators */
} blk;

/* all-ones in the lanes j + lane < n */
static inline uint32x4_t lanes(int64_t j, int64_t n)
{
    const int64_t left = n - j;
    const int32x4_t k = vdupq_n_s32(left >= 4 ? 4 : left <= 0 ? 0 : (int)left);
    static const int32_t idx[4] = {0, 1, 2, 3};
    return vcgtq_s32(k, vld1q_s32(idx));
}

/* x86's max(s, m) = s > m ? s : m: a NaN score leaves m as it is (FMAX would take the NaN) */
static inline float32x4_t max_keep(float32x4_t s, float32x4_t m)
{
    return vbslq_f32(vcgtq_f32(s, m), s, m);
}

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

/* ---- scores ---------------------------------------------------------------------------- */

/* S[r][j0 .. j0 + 8) for the rows r < 4 G; mx[4 r ..] folds them in (max per lane; in memory,
 * so that it takes no registers from the accumulators). pan points at key j0's column. */
INLINE void score_tile(const int G, const blk *b, const float *pan, int64_t j0, float *mx)
{
    const int d = b->d;
    float32x4_t acc[ROWS][2];
#pragma GCC unroll 12
    for (int r = 0; r < 4 * G; r++)
        acc[r][0] = acc[r][1] = vdupq_n_f32(0.0f);
    for (int e = 0; e < d; e++) {
        const float32x4_t k0 = vld1q_f32(pan + e * KEYS), k1 = vld1q_f32(pan + e * KEYS + 4);
        const float *qe = b->Qt + e * ROWS;
#pragma GCC unroll 3
        for (int g = 0; g < G; g++) {
            const float32x4_t qv = vld1q_f32(qe + 4 * g); /* rows 4g .. 4g + 3 at dim e */
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                acc[4 * g + r][0] = fma_lane(acc[4 * g + r][0], k0, qv, r);
                acc[4 * g + r][1] = fma_lane(acc[4 * g + r][1], k1, qv, r);
            }
        }
    }
    const float32x4_t scale = vdupq_n_f32(b->scale);
    const uint32x4_t m0 = lanes(j0, b->n), m1 = lanes(j0 + 4, b->n);
#pragma GCC unroll 12
    for (int r = 0; r < 4 * G; r++) {
        const float32x4_t s0 = vmulq_f32(acc[r][0], scale), s1 = vmulq_f32(acc[r][1], scale);
        vst1q_f32(b->S + r * b->np + j0, s0);
        vst1q_f32(b->S + r * b->np + j0 + 4, s1);
        float32x4_t m = vld1q_f32(mx + 4 * r);
        m = vbslq_f32(m0, max_keep(s0, m), m);
        vst1q_f32(mx + 4 * r, vbslq_f32(m1, max_keep(s1, m), m));
    }
}

__attribute__((noinline)) static void scores(const blk *b, float *mx)
{
    const int G = (b->nr + 3) / 4; /* groups of 4 rows holding the real ones */
    for (int64_t j0 = 0; j0 < b->np; j0 += KEYS) {
        const float *pan = b->kt + j0 * b->d;
        for (int t = 0; t < KEYS; t += QK_KEYS) {
            switch (G) {
            case 1: score_tile(1, b, pan + t, j0 + t, mx); break;
            case 2: score_tile(2, b, pan + t, j0 + t, mx); break;
            default: score_tile(3, b, pan + t, j0 + t, mx); break;
            }
        }
    }
}

/* ---- probabilities --------------------------------------------------------------------- */

/* the eight lanes lo[0..3], hi[0..3]'s sum as avx2's sum8: (x0 + x4) + (x2 + x6) + ... */
static inline float sum8(float32x4_t lo, float32x4_t hi)
{
    const float32x4_t t = vaddq_f32(lo, hi);
    const float32x2_t u = vadd_f32(vget_low_f32(t), vget_high_f32(t));
    return vget_lane_f32(u, 0) + vget_lane_f32(u, 1);
}

static inline float max4(float32x4_t x)
{
    float m = vgetq_lane_f32(x, 0);
    const float x1 = vgetq_lane_f32(x, 1), x2 = vgetq_lane_f32(x, 2), x3 = vgetq_lane_f32(x, 3);
    m = x1 > m ? x1 : m;
    m = x2 > m ? x2 : m;
    return x3 > m ? x3 : m;
}

/* Row r of S (keys [0, n)) -> exp(s - m); returns l = their sum. */
static float probs(const blk *b, int r, float m)
{
    float *s = b->S + r * b->np;
    const float32x4_t mv = vdupq_n_f32(m);
    float32x4_t llo = vdupq_n_f32(0.0f), lhi = vdupq_n_f32(0.0f); /* lanes j % 8 */
    for (int64_t j = 0; j < b->n; j += 8) {
        const float32x4_t plo = vreinterpretq_f32_u32(vandq_u32(
            lanes(j, b->n), vreinterpretq_u32_f32(exp4(vsubq_f32(vld1q_f32(s + j), mv)))));
        const float32x4_t phi = vreinterpretq_f32_u32(vandq_u32(
            lanes(j + 4, b->n), vreinterpretq_u32_f32(exp4(vsubq_f32(vld1q_f32(s + j + 4), mv)))));
        vst1q_f32(s + j, plo);
        vst1q_f32(s + j + 4, phi);
        llo = vaddq_f32(llo, plo);
        lhi = vaddq_f32(lhi, phi);
    }
    return sum8(llo, lhi);
}

/* ---- values ---------------------------------------------------------------------------- */

/* O[r0 + r][e .. e + 16) (+)= sum_j p[r0 + r][j] v_j over keys [j0, j1), r < PV_ROWS; from
 * zero when j0 == 0. Keys 4 at a time (never past j1: v has n rows). */
static void pv_chunk(const blk *b, int r0, int e, int64_t j0, int64_t j1)
{
    const int d = b->d;
    float *o[PV_ROWS];
    const float *p[PV_ROWS];
#pragma GCC unroll 4
    for (int r = 0; r < PV_ROWS; r++)
        o[r] = b->O + (r0 + r) * d + e, p[r] = b->S + (r0 + r) * b->np;
    float32x4_t acc[PV_ROWS][4];
#pragma GCC unroll 4
    for (int r = 0; r < PV_ROWS; r++)
#pragma GCC unroll 4
        for (int w = 0; w < 4; w++)
            acc[r][w] = j0 ? vld1q_f32(o[r] + 4 * w) : vdupq_n_f32(0.0f);
    const float *vj = b->v + j0 * d + e;
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) {
        float32x4_t pr[PV_ROWS];
#pragma GCC unroll 4
        for (int r = 0; r < PV_ROWS; r++)
            pr[r] = vld1q_f32(p[r] + j);
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++, vj += d) {
            float32x4_t vv[4];
#pragma GCC unroll 4
            for (int w = 0; w < 4; w++)
                vv[w] = vld1q_f32(vj + 4 * w);
#pragma GCC unroll 4
            for (int r = 0; r < PV_ROWS; r++)
#pragma GCC unroll 4
                for (int w = 0; w < 4; w++)
                    acc[r][w] = fma_lane(acc[r][w], vv[w], pr[r], t);
        }
    }
    for (; j < j1; j++, vj += d) {
#pragma GCC unroll 4
        for (int r = 0; r < PV_ROWS; r++) {
            const float32x4_t pj = vld1q_dup_f32(p[r] + j);
#pragma GCC unroll 4
            for (int w = 0; w < 4; w++)
                acc[r][w] = vfmaq_f32(acc[r][w], pj, vld1q_f32(vj + 4 * w));
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < PV_ROWS; r++)
#pragma GCC unroll 4
        for (int w = 0; w < 4; w++)
            vst1q_f32(o[r] + 4 * w, acc[r][w]);
}

static void values(const blk *b)
{
    for (int64_t j0 = 0; j0 < b->n; j0 += KC) {
        const int64_t j1 = j0 + KC < b->n ? j0 + KC : b->n;
        for (int r0 = 0; r0 < b->nr; r0 += PV_ROWS)
            for (int e = 0; e < b->d; e += 16)
                pv_chunk(b, r0, e, j0, j1);
    }
}

/* ---- driver ---------------------------------------------------------------------------- */

void ge_attn_dense_neon(const ge_attn_dense_args *a, int head, int64_t q0, int64_t q1,
                        float *scratch)
{
    const int d = a->head_dim;
    const int64_t np = GE_ATTN_DENSE_NP(a->n), g = head / (a->n_head / a->n_kv);
    blk b = {a->kt + g * np * d, a->v + g * a->n * d, a->n, np, d, 0, a->scale,
             scratch, scratch + ROWS * np, scratch + ROWS * (np + d)};
    for (int64_t i0 = q0; i0 < q1; i0 += ROWS) {
        b.nr = q1 - i0 < ROWS ? (int)(q1 - i0) : ROWS;
        for (int e = 0; e < d; e++)
            for (int r = 0; r < ROWS; r++)
                b.Qt[e * ROWS + r] = r < b.nr ? a->q[(i0 + r) * a->ldq + (int64_t)head * d + e]
                                              : 0.0f;
        float mx[ROWS * 4] __attribute__((aligned(16)));
        for (int r = 0; r < ROWS * 4; r++)
            mx[r] = -__builtin_inff();
        scores(&b, mx);
        float l[ROWS];
        for (int r = 0; r < b.nr; r++)
            l[r] = probs(&b, r, max4(vld1q_f32(mx + 4 * r)));
        values(&b);
        for (int r = 0; r < b.nr; r++) {
            float *o = a->o + (i0 + r) * a->ldo + (int64_t)head * d;
            const float32x4_t lv = vdupq_n_f32(l[r]);
            for (int e = 0; e < d; e += 4)
                vst1q_f32(o + e, vdivq_f32(vld1q_f32(b.O + r * d + e), lv));
        }
    }
}
