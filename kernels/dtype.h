/* dtype.h - ggml tensor types: sizes, row dequantisers and scalar dots.
 *
 * The scalar functions here are the reference every faster kernel is tested against. A
 * "row" is n contiguous values along ne0 (n a multiple of the type's block size). */
#ifndef GE_DTYPE_H
#define GE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

/* ggml type ids as stored in GGUF files */
enum {
    GE_T_F32 = 0, GE_T_F16 = 1, GE_T_Q4_0 = 2, GE_T_Q4_1 = 3, GE_T_Q5_0 = 6, GE_T_Q5_1 = 7,
    GE_T_Q8_0 = 8, GE_T_Q8_1 = 9, GE_T_Q2_K = 10, GE_T_Q3_K = 11, GE_T_Q4_K = 12,
    GE_T_Q5_K = 13, GE_T_Q6_K = 14, GE_T_Q8_K = 15, GE_T_I8 = 24, GE_T_I16 = 25,
    GE_T_I32 = 26, GE_T_I64 = 27, GE_T_F64 = 28, GE_T_BF16 = 30
};

#define GE_QK8_0 32
typedef struct {
    uint16_t d;          /* fp16 scale */
    int8_t qs[GE_QK8_0]; /* value = d * qs[i] */
} ge_block_q8_0;

typedef struct {
    const char *name;
    uint32_t block;   /* values per block */
    uint32_t bytes;   /* bytes per block */
    int supported;    /* this build can compute with it */
} ge_dtype_info;

/* Size/name info for a ggml type id, or NULL for an id this build does not know. */
const ge_dtype_info *ge_dtype(uint32_t type);

float ge_fp16_to_fp32(uint16_t h);
uint16_t ge_fp32_to_fp16(float f);
float ge_bf16_to_fp32(uint16_t h);

/* Dequantise n values of a row of the given (supported) type into dst. */
void ge_dequant_row(uint32_t type, const void *row, float *dst, size_t n);
/* dot(row, x) over n values, accumulated in fp32 in the order of the reference path. */
float ge_dot_row(uint32_t type, const void *row, const float *x, size_t n);

#endif
