/* linear.h - y = x W^T through the fastest enabled path (linear.c). */
#ifndef GE_LINEAR_H
#define GE_LINEAR_H

#include <stddef.h>

#include "compute.h"
#include "tensor.h"

typedef struct {
    const ge_tensor *w;
    float *y; /* [n_tok, w->ne1] */
} ge_linear_out;

/* y_i = x W_i^T for several weights sharing the input x [n_tok, ne0] (quantised once). */
ge_status ge_linear_many(ge_compute *cx, const float *x, int n_tok, const ge_linear_out *outs,
                         int n_outs, ge_err *err);
/* The media towers' fast path: as ge_linear_many, with Q8_0 weights by the wide rule
 * (kern.h q8_gemm_wide) when --media-q8-wide is on and the tier has it. clip: NULL, or
 * [lo, hi] to clamp x to first (a clipped linear's input bounds; Q8 GEMMs take it in the
 * quantiser, other paths from a clamped copy). */
ge_status ge_linear_many_media(ge_compute *cx, const float *x, int n_tok, const float *clip,
                               const ge_linear_out *outs, int n_outs, ge_err *err);
/* The same through the reference path only (fp32 row dots): the media towers' reference. */
ge_status ge_linear_many_ref(ge_compute *cx, const float *x, int n_tok, const float *clip,
                             const ge_linear_out *outs, int n_outs, ge_err *err);
/* Repack weights ts[0..n) for the fast paths now rather than on first use (--prepack). */
ge_status ge_linear_prepack(ge_compute *cx, const ge_tensor *const *ts, size_t n, ge_err *err);
/* Free the repacked weights and the activation scratch (cx->packed). */
void ge_linear_cache_free(ge_compute *cx);
/* Which kernel multiplies by a matrix of this ggml type on cx's tier and switches, e.g.
 * "kq_gemm avx512, packed" or "reference rows" (--print-config, --bench). */
void ge_linear_kernel(const ge_compute *cx, uint32_t type, char *buf, size_t n);

#endif
