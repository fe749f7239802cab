/* dtype.h - ggml tensor types: sizes, row dequantisers and scalar dots.
 *
 * The scalar functions here are the reference every faster kernel is tested against. A
 * "row" is n contiguous values along ne0 (n a multiple of the type's block size). */
#ifndef GE_DTYPE_H
#define GE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml type ids as stored in GGUF files */
enum {
    GE_T_F32 = 0, GE_T_F16 = 1, GE_T_Q4_0 = 2, GE_T_Q4_1 = 3, GE_T_Q5_0 = 6, GE_T_Q5_1 = 7,
    GE_T_Q8_0 = 8, GE_T_Q8_1 = 9, GE_T_Q2_K = 10, GE_T_Q3_K = 11, GE_T_Q4_K = 12,
    GE_T_Q5_K = 13, GE_T_Q6_K = 14, GE_T_Q8_K = 15, GE_T_IQ4_NL = 20, GE_T_IQ4_XS = 23,
    GE_T_I8 = 24, GE_T_I16 = 25, GE_T_I32 = 26, GE_T_I64 = 27, GE_T_F64 = 28, GE_T_BF16 = 30
};

/* Block layouts (ggml's; every multi-byte field little-endian, fp16 scales):
 *   Q4_0   32 values, 18 B: d; qs[16]            v = d * (nibble - 8)
 *   Q4_1   32 values, 20 B: d, m; qs[16]         v = d * nibble + m
 *   Q5_0   32 values, 22 B: d; qh[4]; qs[16]     v = d * ((nibble | high << 4) - 16)
 *   Q5_1   32 values, 24 B: d, m; qh[4]; qs[16]  v = d * (nibble | high << 4) + m
 *   IQ4_NL 32 values, 18 B: d; qs[16]            v = d * ge_iq4nl_values[nibble]
 * (values j and j + 16 of a 32-block share byte j: low nibble, high nibble; the fifth bit of
 * value j is bit j of the 32-bit qh)
 *   Q2_K  256, 84 B:  scales[16] (low nibble: scale, high: min); qs[64]; d, dmin
 *   Q3_K  256, 110 B: hmask[32]; qs[64]; scales[12] (16 6-bit scales, biased by 32); d
 *   Q4_K  256, 144 B: d, dmin; scales[12] (8 6-bit scales, 8 6-bit mins); qs[128]
 *   Q5_K  256, 176 B: d, dmin; scales[12]; qh[32]; qs[128]
 *   Q6_K  256, 210 B: ql[128]; qh[64]; scales[16] (int8); d
 *   IQ4_XS 256, 136 B: d; scales_h (u16); scales_l[4]; qs[128] (8 6-bit scales, biased by 32)
 * ge_dequant_row has the element order of each; kernels unpack with the helpers below. */
#define GE_QK_K 256
extern const int8_t ge_iq4nl_values[16];
/* One block of a quantised type (not Q8_0) as integers: value i is
 *   n == 32:  c[i] * d (+ dmin when has_min: Q4_1 / Q5_1 keep their m there)
 *   n == 256: (d * s[j]) * c[i] (- dmin * m[j] when has_min), j = i / sub
 * with codes c (the block's bit fields minus ggml's bias; IQ4 codes are table values), the
 * integer sub-block scales s and mins m, and the fp16 fields widened exactly. */
typedef struct {
    int8_t c[256];
    int s[16], m[16];
    float d, dmin;
    int n, sub;   /* values, values per sub-block (16 or 32; 32 for the 32-blocks) */
    bool has_min;
} ge_block_codes;
void ge_block_decode(uint32_t type, const uint8_t *block, ge_block_codes *out);

/* The 6-bit scale and min of 32-value sub-block j (0..7) of a Q4_K / Q5_K block. */
void ge_k4_scale_min(const uint8_t scales[12], int j, uint8_t *sc, uint8_t *mn);
/* The 16 6-bit scales of a Q3_K block, minus their bias 32 (-32 .. 31). */
void ge_q3k_scales(const uint8_t scales[12], int8_t out[16]);
/* The 6-bit scale of 32-value sub-block j (0..7) of an IQ4_XS block, minus its bias 32. */
int ge_iq4xs_scale(const uint8_t *block, int j);

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

/* The types a model file may use, for messages. */
#define GE_DTYPE_SUPPORTED \
    "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS"

/* Size/name info for a ggml type id, or NULL for an id this build does not know. */
const ge_dtype_info *ge_dtype(uint32_t type);

float ge_fp16_to_fp32(uint16_t h);
/* the little-endian fp16 field at p (a block's d, dmin...), widened exactly */
static inline float ge_fp16_at(const uint8_t *p)
{
    return ge_fp16_to_fp32((uint16_t)(p[0] | p[1] << 8));
}
uint16_t ge_fp32_to_fp16(float f);
float ge_bf16_to_fp32(uint16_t h);

/* Dequantise n values of a row of the given (supported) type into dst. */
void ge_dequant_row(uint32_t type, const void *row, float *dst, size_t n);
/* dot(row, x) over n values, accumulated in fp32 in the order of the reference path. */
float ge_dot_row(uint32_t type, const void *row, const float *x, size_t n);

#endif
