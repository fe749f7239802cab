/* kern.h - the kernel table: one set of compute kernels per CPU tier, chosen once at run time.
 *
 * Tiers are cumulative (scalar < avx2 < avxvnni < avx512 on x86-64; scalar < neon < dotprod <
 * i8mm on arm64): a tier's table
 * starts from the next lower tier's and overlays what it implements. Each tier lives in its
 * own files (kernels/<family>_<tier>.c) compiled with that tier's flags only, so the default
 * build runs on any x86-64. The scalar tier is the test oracle. Kernels never allocate,
 * print or spawn threads: the engine splits work into (token range, output-row range) tasks.
 *
 * Determinism contract: y[t][o] is computed by the same operations in the same order whatever
 * the task split (t0, t1, r0, r1) and whatever the other tokens in the call, so a record's
 * vector does not depend on thread count, wave packing or its position in the input. */
#ifndef GE_KERN_H
#define GE_KERN_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum {
    GE_TIER_SCALAR = 0,
    GE_TIER_AVX2,    /* AVX2 + FMA + F16C */
    GE_TIER_AVXVNNI, /* 256-bit VNNI (AVX-VNNI) on top of avx2, for CPUs without AVX-512 */
    GE_TIER_AVX512,  /* AVX-512 F/BW/VL/DQ + AVX-512 VNNI */
    GE_TIER_NEON,    /* arm64 (armv8.0-a Advanced SIMD): fp32 FMA, int8 by widening multiplies */
    GE_TIER_DOTPROD, /* neon + SDOT (armv8.2-a dotprod) */
    GE_TIER_I8MM,    /* dotprod + SMMLA (armv8.6-a i8mm) */
    GE_TIER_COUNT
} ge_tier;

/* The activation of act_mul: a GELU-gated MLP's (tanh form or quick-GELU), SiLU, or the
 * sigmoid gate of a GLU. */
typedef enum { GE_GELU_TANH, GE_GELU_QUICK, GE_SILU, GE_SIGMOID } ge_act;
#define GE_QUICK_GELU_K 1.702f /* quick-GELU: x * sigmoid(1.702 x) */

/* Q8_0 activations in the one format every tier reads and writes (bit-identical across
 * tiers): per token row, cols int8 values and cols/32 fp32 scales; value = d[b] * qs[k].
 * Quantisation: d = max|x| / 127 over the span's span * 32 values, q = round-half-even(x *
 * (1/d)), q = 0 when d = 0. span is 1 (Q8_0: a scale per block, what q8_gemm reads),
 * GE_Q8_WIDE for q8_gemm_wide, or GE_Q8_K_SPAN for the 256-value super-blocks of kq_gemm
 * (cols a multiple of 32 * span; d stays per block, the span's value repeated, so q8_gemm
 * reads such activations correctly too). */
#define GE_Q8_WIDE 4
#define GE_Q8_K_SPAN 8
#define GE_Q8_MAX_SPAN 8
typedef struct {
    int8_t *qs;   /* [n_tok][cols] */
    float *d;     /* [n_tok][cols / 32] */
    int32_t *sum; /* [n_tok][cols / 32]: sum of the block's qs (for the +128 bias trick) */
    int32_t *sum16; /* [n_tok][cols / 16]: sums of 16 qs, for span GE_Q8_K_SPAN when a kq
                     * kernel reads them (16-value sub-blocks: ge_kq_uses_sum16; ge_q8_sum16
                     * fills it), else NULL */
    int64_t n_tok, cols;
    int span;     /* blocks per scale: 1 or GE_Q8_WIDE (the quantiser reads it) */
    bool clip;    /* quantise clamp(x) to [lo, hi] (the clamp kernel's rule: NaN passes) */
    float lo, hi;
} ge_q8_act;

/* Attention over packed sequences: query token i sees keys j in [key_lo[i], key_hi[i]),
 * which expresses both sequence bounds and a symmetric sliding window. Scores are
 * scale * q.k, softmax in fp32, GQA: query head h reads KV head h / (n_head / n_kv). */
typedef struct {
    const float *q;     /* q[i * ldq + h * head_dim + e] */
    const float *k, *v; /* k[j * ldkv + kvh * head_dim + e] */
    float *o;           /* o[i * ldo + h * head_dim + e] */
    int64_t ldq, ldkv, ldo;
    int n_head, n_kv, head_dim;
    float scale;
    const int32_t *key_lo, *key_hi; /* [n_tokens] */
} ge_attn_args;

/* Dense attention over head-major planes (the vision tower: every query of a head sees every
 * key [0, n), no masks). K is packed per KV head as K^T panels of GE_ATTN_DENSE_KEYS keys,
 * V as its [n][head_dim] rows, so that scores are outer products of query broadcasts with
 * K^T rows and o accumulates p * v rows with several queries in registers. */
#define GE_ATTN_DENSE_KEYS 32 /* keys per K^T panel */
#define GE_ATTN_DENSE_ROWS 12 /* query rows per block (the scratch holds their scores) */
/* Keys rounded up to whole panels. */
#define GE_ATTN_DENSE_NP(n) \
    (((n) + GE_ATTN_DENSE_KEYS - 1) / GE_ATTN_DENSE_KEYS * GE_ATTN_DENSE_KEYS)
/* Blocks a kernel may keep at once (the avx512 kernel scores each K^T panel, and takes each
 * V chunk, for all of them while the panel or chunk is in L2): a call keeps up to
 * ge_attn_dense_args blocks, at most this many. */
#define GE_ATTN_DENSE_BLOCKS 16
/* Scratch floats one attn_dense call of up to `blocks` blocks needs: per block, its scores,
 * its q rows transposed and its output accumulators. */
#define GE_ATTN_DENSE_SCRATCH(n, head_dim, blocks)                                   \
    ((size_t)(blocks) * GE_ATTN_DENSE_ROWS *                                         \
     ((size_t)GE_ATTN_DENSE_NP(n) + 2 * (size_t)(head_dim)))
typedef struct {
    const float *q;  /* q[i * ldq + h * head_dim + e], token-major as the linears write it */
    const float *kt; /* KV head g, key j, dim e at kt[g * NP(n) * head_dim + (j / KEYS) *
                      * head_dim * KEYS + e * KEYS + j % KEYS]; keys n .. NP(n)-1 are 0;
                      * 64-byte aligned (panel rows are whole-vector loads) */
    const float *v;  /* v[(g * n + j) * head_dim + e] */
    float *o;        /* o[i * ldo + h * head_dim + e] */
    int64_t ldq, ldo, n;
    int n_head, n_kv, head_dim; /* query head h reads KV head h / (n_head / n_kv) */
    float scale;
    /* Query row i sees keys [key_lo[i], key_hi[i]) of the planes (a text wave's records and
     * sliding windows; key_lo == key_hi: o = 0; key_lo > key_hi: the row is skipped, o left
     * as it is); NULL: every key [0, n). Only tiers with attn_dense_ranges take them. */
    const int32_t *key_lo, *key_hi;
    int blocks; /* blocks kept at once, 1 .. GE_ATTN_DENSE_BLOCKS (the scratch holds them) */
    int chunk;  /* keys per chunk of the values pass, at most 256 (0: 256) */
} ge_attn_dense_args;

/* Local attention with relative-position keys (the audio conformer, docs/model.md 6.3): query i of
 * head h sees keys s = max(0, i - window + 1) .. i; with q' = q * q_scale (per head dim) and
 * k' = k * k_scale, logit = q'_i . k'_s + q'_i . r_(i-s), capped as cap * tanh(logit / cap),
 * softmax in fp32 over those keys, o_i = sum p_s v_s. attn_rel.h has the numerics. */
#define GE_ATTN_REL_MAX_WINDOW 16
#define GE_ATTN_REL_MAX_HEAD_DIM 1024
typedef struct {
    const float *q, *k, *v; /* [n][ld], head h at h * head_dim */
    const float *r;         /* [window][ld]: the relative key of each distance 0 .. window-1 */
    float *o;               /* [n][ld] */
    const float *q_scale;   /* [head_dim] */
    float k_scale;
    int64_t ld;
    int n_head, head_dim, window; /* window <= GE_ATTN_REL_MAX_WINDOW, head_dim <= ..._DIM */
    float cap;
} ge_attn_rel_args;

typedef struct ge_kern {
    const char *name; /* tier name: "scalar", "avx2", ..., "neon", "dotprod", "i8mm" */
    ge_tier tier;

    /* ---- Q8_0 weight x Q8_0 activation GEMM: y[t][o] = sum_k W[o][k] * x[t][k] ---------- */
    int q8_row_group; /* packed rows come in groups of this many; row ranges split on them */
    /* Bytes of the packed form of a ggml Q8_0 tensor {cols, rows} (cols % 32 == 0). */
    size_t (*q8_packed_size)(int64_t rows, int64_t cols);
    /* Pack row groups holding rows [r0, r1) of src (ggml Q8_0 rows) into dst; r0 is a
     * multiple of q8_row_group; r1 too, or r1 == rows. Threads may pack disjoint ranges. */
    void (*q8_pack)(const void *src, int64_t rows, int64_t cols, void *dst, int64_t r0,
                    int64_t r1);
    /* Quantise token rows [t0, t1) of x (fp32, row stride ldx) into act (allocated by the
     * caller for act->n_tok x act->cols). */
    void (*q8_quantize)(const float *x, int64_t ldx, int64_t t0, int64_t t1, ge_q8_act *act);
    /* y[t * ldy + o] for t in [t0, t1), o in [r0, r1) (r0, r1 as for q8_pack). */
    void (*q8_gemm)(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                    int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y, int64_t ldy);
    /* The same over activations of span GE_Q8_WIDE, by the wide rule (q8.h): one fp32
     * multiply per block instead of two. NULL on tiers without it (their quantiser takes
     * span 1 only). */
    void (*q8_gemm_wide)(const void *packed, int64_t rows, int64_t cols, const ge_q8_act *act,
                         int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y,
                         int64_t ldy);

    /* ---- the other quantised weight types (Q4_0 .. IQ4_XS) x int8 activations (kq.h has
     * the arithmetic): activations from q8_quantize with span ge_kq_span(type) -------------- */
    int kq_row_group; /* rows of a packed group; row ranges of packed types split on them */
    /* Bytes of the tier's packed form of a {cols, rows} weight of that type, or 0 when the
     * tier reads that type's file rows in place (kq_gemm then takes the file's data). */
    size_t (*kq_packed_size)(uint32_t type, int64_t rows, int64_t cols);
    /* Pack row groups holding rows [r0, r1) (as q8_pack). */
    void (*kq_pack)(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                    int64_t r0, int64_t r1);
    /* y[t * ldy + o] for t in [t0, t1), o in [r0, r1), from w: the packed form, or the
     * file's rows for a type read in place. */
    void (*kq_gemm)(uint32_t type, const void *w, int64_t rows, int64_t cols,
                    const ge_q8_act *act, int64_t t0, int64_t t1, int64_t r0, int64_t r1,
                    float *y, int64_t ldy);

    /* ---- SGEMM on panels of F32/F16/BF16 weights, kept in the weight's type and widened
     * (exactly) to fp32 in registers: every type is the fp32 math of its expansion --------- */
    int sg_panel; /* outputs per panel; row ranges split on multiples of it */
    /* Bytes of the packed panels of a {cols, rows} weight of ggml type GE_T_F32/F16/BF16. */
    size_t (*sg_packed_size)(uint32_t type, int64_t rows, int64_t cols);
    /* Copy rows [r0, r1) of src (that type) into panels of that type. */
    void (*sg_pack)(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst,
                    int64_t r0, int64_t r1);
    /* y[t * ldy + o] = sum_k W[o][k] * x[t * ldx + k] for t in [t0, t1), o in [r0, r1);
     * type is the one the panels were packed from. */
    void (*sgemm)(uint32_t type, const void *packed, int64_t rows, int64_t cols, const float *x,
                  int64_t ldx, int64_t t0, int64_t t1, int64_t r0, int64_t r1, float *y,
                  int64_t ldy);

    /* ---- activations -------------------------------------------------------------------- */
    /* g[i] = act(g[i]) * u[i] for i < n (u NULL: act(g[i])); with clip (else NULL), g[i] is
     * first clamped to [clip[0], clip[1]] (and written back so) and the result to [clip[2],
     * clip[3]] (the audio tower's clipped linears around an activation). tanh GELU written
     * as x * sigmoid(2z) (scalar: expf, act.h; vector tiers: the polynomial exp, within a
     * few ulp), quick-GELU x * sigmoid(1.702 x), SiLU x * sigmoid(x), sigmoid(x) (scalar:
     * expf; vector tiers: the polynomial exp). */
    void (*act_mul)(float *g, const float *u, int64_t n, ge_act kind, const float *clip);

    /* ---- per-row operations: bit-identical on every tier (the goldens do not move) ------ */
    /* RMSNorm in place of rows x[r * n + i], r < rows, i < n: x = x * inv * w (w[n], NULL:
     * no weight; the products in that order), inv = 1 / sqrtf(ss / n + eps), ss the fp32 sum
     * of squares in eight partial sums s[i % 8] (each in increasing i, from +0), combined as
     * ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)). No fused multiply-adds. */
    void (*rmsnorm)(float *x, int64_t rows, int64_t n, const float *w, float eps);
    /* NEOX rotate-half RoPE in place of n_head heads of d values at v (head h at v + h * d),
     * with one position's tables cs, sn [d / 2]: for j < d / 2, (a, b) = (v[j], v[j + d/2])
     * becomes (a cs[j] - b sn[j], b cs[j] + a sn[j]), each product rounded (no FMA). */
    void (*rope)(float *v, int64_t n_head, int64_t d, const float *cs, const float *sn);

    /* ---- machine peak (for --bench): one thread's GMAC/s on a register-only loop ---------- */
    double (*peak_int8)(double seconds); /* the tier's int8 dot instruction (0 when none) */
    double (*peak_fp32)(double seconds); /* the tier's widest fp32 FMA */

    /* ---- attention ---------------------------------------------------------------------- */
    /* Query rows [q0, q1) of one query head (flash form: tiled, one pass over the keys with
     * a per-row reference max fixed from its own first keys; kernels/attn.h has the rules). */
    void (*attn)(const ge_attn_args *a, int head, int64_t q0, int64_t q1);
    /* Dense attention, query rows [q0, q1) of one head (kernels/attn.h has the numerics);
     * scratch: GE_ATTN_DENSE_SCRATCH(n, head_dim, a->blocks) floats, 64-byte aligned, the
     * caller's (one per thread). NULL on tiers without one; head dims must be a multiple of 16
     * (others: attn). */
    void (*attn_dense)(const ge_attn_dense_args *a, int head, int64_t q0, int64_t q1,
                       float *scratch);
    /* attn_dense takes key ranges (ge_attn_dense_args key_lo, key_hi): the text encoder's
     * attention runs on it then. */
    bool attn_dense_ranges;
    /* Local relative-position attention of every head, query rows [q0, q1). */
    void (*attn_rel)(const ge_attn_rel_args *a, int64_t q0, int64_t q1);

    /* dst[i] = src[i] clamped to [lo, hi] for i < n (dst may be src): exact on every tier; a
     * NaN stays NaN (torch.clamp). */
    void (*clamp)(float *dst, const float *src, int64_t n, float lo, float hi);
    /* y[i] = y[i] + a * x[i] for i < n, the product rounded (no FMA): bit-identical on every
     * tier (a residual add when a = 1). */
    void (*axpy)(float *y, const float *x, int64_t n, float a);
    /* Causal depthwise convolution over rows of c channels: y[t][i] = sum over q < k of
     * w[q][i] x[t - (k - 1) + q][i] for t in [t0, t1), taps before row 0 left out (zero
     * padding); each product rounded, then added in increasing q from +0 (no FMA):
     * bit-identical on every tier. */
    void (*dwconv)(float *y, const float *x, int64_t t0, int64_t t1, const float *w, int k,
                   int64_t c);
} ge_kern;

/* Per-family fill functions (kernels/<family>.c): set the family's pointers for a tier,
 * falling back to the best lower tier the family implements. */
void ge_q8_fill(ge_kern *k, ge_tier tier);
void ge_kq_fill(ge_kern *k, ge_tier tier);
/* act->sum16 of token rows [t0, t1) from act->qs (after q8_quantize; plain C, exact). */
void ge_q8_sum16(ge_q8_act *act, int64_t t0, int64_t t1);
void ge_sgemm_fill(ge_kern *k, ge_tier tier);
void ge_attn_fill(ge_kern *k, ge_tier tier);
void ge_peak_fill(ge_kern *k, ge_tier tier);
void ge_act_fill(ge_kern *k, ge_tier tier);
void ge_attn_rel_fill(ge_kern *k, ge_tier tier);

/* ---- CPU features and tier selection (cpu.c, dispatch.c) ------------------------------- */

typedef struct {
    int x86;                        /* 1 on x86-64 */
    int sse2, avx, avx2, fma, f16c; /* CPUID bits */
    int avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avxvnni;
    int os_avx, os_avx512;          /* XCR0: the OS saves YMM / ZMM+opmask state */
    int arm64, neon, dotprod, i8mm, bf16; /* hwcaps (Linux) or FEAT_* sysctls (macOS) */
} ge_cpu_feats;

/* Features of the running CPU (CPUID + XGETBV on x86, hwcaps on arm64). */
void ge_cpu_detect(ge_cpu_feats *f);
/* Can this CPU (with its OS state) run tier t? Pure function of f. */
int ge_tier_supported(const ge_cpu_feats *f, ge_tier t);
/* The best tier f supports. */
ge_tier ge_tier_best(const ge_cpu_feats *f);
/* Tier from its name ("auto" = -1), or -2 when the name is unknown. */
int ge_tier_from_name(const char *name);
const char *ge_tier_name(ge_tier t);

/* The kernel table of tier t (filled once, then shared; thread-safe). */
const ge_kern *ge_kern_get(ge_tier t);

#endif
