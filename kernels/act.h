/* act.h - activation kernels per tier (kern.h gelu_mul). */
#ifndef GE_ACT_H
#define GE_ACT_H

#include <stdint.h>

void ge_gelu_mul_scalar(float *g, const float *u, int64_t n);
void ge_gelu_mul_avx2(float *g, const float *u, int64_t n);
void ge_gelu_mul_avx512(float *g, const float *u, int64_t n);

#endif
