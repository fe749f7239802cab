/* act.h - activation and per-row kernels per tier (kern.h act_mul, clamp, axpy, dwconv, rmsnorm, rope). */
#ifndef GE_ACT_H
#define GE_ACT_H

#include <stdint.h>

#include "kern.h"

/* The scalar oracles (act.c, attn_rel.c) write tanh through expf, in the vector tiers' forms:
 * the tanh GELU as x / (1 + expf(-2z)), a cap as sign(y) (1 - e) / (1 + e), e = expf(-2|y|).
 * glibc's tanhf gives other bits on arm64 than on x86-64 for some inputs (its expf does not),
 * so with expf the two architectures' scalar tiers write the same bytes. */

void ge_act_mul_scalar(float *g, const float *u, int64_t n, ge_act kind,
                       const float *clip);
void ge_act_mul_avx2(float *g, const float *u, int64_t n, ge_act kind,
                     const float *clip);
void ge_act_mul_avx512(float *g, const float *u, int64_t n, ge_act kind,
                       const float *clip);
void ge_act_mul_neon(float *g, const float *u, int64_t n, ge_act kind,
                     const float *clip);

void ge_clamp_scalar(float *dst, const float *src, int64_t n, float lo, float hi);
void ge_clamp_avx2(float *dst, const float *src, int64_t n, float lo, float hi);
void ge_clamp_avx512(float *dst, const float *src, int64_t n, float lo, float hi);
void ge_clamp_neon(float *dst, const float *src, int64_t n, float lo, float hi);

void ge_axpy_scalar(float *y, const float *x, int64_t n, float a);
void ge_axpy_avx2(float *y, const float *x, int64_t n, float a);
void ge_axpy_avx512(float *y, const float *x, int64_t n, float a);
void ge_axpy_neon(float *y, const float *x, int64_t n, float a);

void ge_dwconv_scalar(float *y, const float *x, int64_t t0, int64_t t1, const float *w, int k,
                      int64_t c);
void ge_dwconv_avx2(float *y, const float *x, int64_t t0, int64_t t1, const float *w, int k,
                    int64_t c);
void ge_dwconv_avx512(float *y, const float *x, int64_t t0, int64_t t1, const float *w, int k,
                      int64_t c);
void ge_dwconv_neon(float *y, const float *x, int64_t t0, int64_t t1, const float *w, int k,
                    int64_t c);

void ge_rmsnorm_scalar(float *x, int64_t rows, int64_t n, const float *w, float eps);
void ge_rmsnorm_avx2(float *x, int64_t rows, int64_t n, const float *w, float eps);
void ge_rmsnorm_avx512(float *x, int64_t rows, int64_t n, const float *w, float eps);
void ge_rmsnorm_neon(float *x, int64_t rows, int64_t n, const float *w, float eps);

void ge_rope_scalar(float *v, int64_t n_head, int64_t d, const float *cs, const float *sn);
void ge_rope_avx2(float *v, int64_t n_head, int64_t d, const float *cs, const float *sn);
void ge_rope_avx512(float *v, int64_t n_head, int64_t d, const float *cs, const float *sn);
void ge_rope_neon(float *v, int64_t n_head, int64_t d, const float *cs, const float *sn);

#endif
