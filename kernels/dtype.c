/* dtype.c - scalar reference conversions, dequantisers and dots for F32/F16/BF16/Q8_0. */
#include <math.h>
#include <string.h>

#include "dtype.h"

static const struct {
    uint32_t id;
    ge_dtype_info info;
} types[] = {
    {GE_T_F32, {"F32", 1, 4, 1}},      {GE_T_F16, {"F16", 1, 2, 1}},
    {GE_T_Q4_0, {"Q4_0", 32, 18, 0}},  {GE_T_Q4_1, {"Q4_1", 32, 20, 0}},
    {GE_T_Q5_0, {"Q5_0", 32, 22, 0}},  {GE_T_Q5_1, {"Q5_1", 32, 24, 0}},
    {GE_T_Q8_0, {"Q8_0", 32, 34, 1}},  {GE_T_Q8_1, {"Q8_1", 32, 36, 0}},
    {GE_T_Q2_K, {"Q2_K", 256, 84, 0}}, {GE_T_Q3_K, {"Q3_K", 256, 110, 0}},
    {GE_T_Q4_K, {"Q4_K", 256, 144, 0}}, {GE_T_Q5_K, {"Q5_K", 256, 176, 0}},
    {GE_T_Q6_K, {"Q6_K", 256, 210, 0}}, {GE_T_Q8_K, {"Q8_K", 256, 292, 0}},
    {GE_T_I8, {"I8", 1, 1, 0}},        {GE_T_I16, {"I16", 1, 2, 0}},
    {GE_T_I32, {"I32", 1, 4, 0}},      {GE_T_I64, {"I64", 1, 8, 0}},
    {GE_T_F64, {"F64", 1, 8, 0}},      {GE_T_BF16, {"BF16", 1, 2, 1}},
};

const ge_dtype_info *ge_dtype(uint32_t type)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].id == type)
            return &types[i].info;
    return NULL;
}

float ge_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13); /* inf / nan */
    } else if (exp == 0) {
        float f = ldexpf((float)man, -24); /* zero or subnormal: exact */
        return sign ? -f : f;
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Round to nearest even; overflow to inf, like a hardware conversion. */
uint16_t ge_fp32_to_fp16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)
        return sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0);
    if (ax >= 0x477ff000u) /* rounds to >= 65520: inf */
        return sign | 0x7c00;
    if (ax < 0x38800000u) { /* subnormal half (or zero) */
        float a;
        memcpy(&a, &ax, 4);
        return sign | (uint16_t)lrintf(a * 16777216.0f); /* a / 2^-24, ties to even */
    }
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);
    return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

float ge_bf16_to_fp32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t load_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

void ge_dequant_row(uint32_t type, const void *row, float *dst, size_t n)
{
    const uint8_t *p = row;
    switch (type) {
    case GE_T_F32:
        memcpy(dst, row, n * sizeof(float));
        break;
    case GE_T_F16:
        for (size_t i = 0; i < n; i++)
            dst[i] = ge_fp16_to_fp32(load_u16(p + 2 * i));
        break;
    case GE_T_BF16:
        for (size_t i = 0; i < n; i++)
            dst[i] = ge_bf16_to_fp32(load_u16(p + 2 * i));
        break;
    case GE_T_Q8_0:
        for (size_t b = 0; b < n / GE_QK8_0; b++, p += sizeof(ge_block_q8_0)) {
            float d = ge_fp16_to_fp32(load_u16(p));
            const int8_t *q = (const int8_t *)(p + 2);
            for (int i = 0; i < GE_QK8_0; i++)
                dst[b * GE_QK8_0 + i] = d * (float)q[i];
        }
        break;
    default:
        memset(dst, 0, n * sizeof(float)); /* unreachable: callers bind supported types only */
    }
}

/* Eight interleaved partial sums: a fixed, documented order that the compiler may keep in
 * vector lanes without changing the result. */
static float dot_f32(const float *a, const float *x, size_t n)
{
    float s[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += a[i + k] * x[i + k];
    for (; i < n; i++)
        s[i & 7] += a[i] * x[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

float ge_dot_row(uint32_t type, const void *row, const float *x, size_t n)
{
    if (type == GE_T_F32)
        return dot_f32(row, x, n);
    if (type == GE_T_Q8_0) {
        /* per block: integer-valued products summed exactly in fp32, then scaled */
        const uint8_t *p = row;
        float sum = 0.0f;
        for (size_t b = 0; b < n / GE_QK8_0; b++, p += sizeof(ge_block_q8_0)) {
            const int8_t *q = (const int8_t *)(p + 2);
            float s[8] = {0};
            for (int i = 0; i < GE_QK8_0; i++)
                s[i & 7] += (float)q[i] * x[b * GE_QK8_0 + i];
            float bs = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
            sum += ge_fp16_to_fp32(load_u16(p)) * bs;
        }
        return sum;
    }
    /* F16 / BF16: expand in chunks, then the f32 dot */
    float buf[256], sum = 0.0f;
    const uint8_t *p = row;
    for (size_t i = 0; i < n; i += 256) {
        size_t m = n - i < 256 ? n - i : 256;
        ge_dequant_row(type, p + 2 * i, buf, m);
        sum += dot_f32(buf, x + i, m);
    }
    return sum;
}
