/* dtype.c - scalar reference conversions, dequantisers and dots for every supported type.
 *
 * The dequantisers compute in fp32 in ggml's order of operations (a scale times an integer
 * code, minus a min), so a row expands to exactly the floats ggml's own dequantiser gives. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "dtype.h"

static const struct {
    uint32_t id;
    ge_dtype_info info;
} types[] = {
    {GE_T_F32, {"F32", 1, 4, 1}},       {GE_T_F16, {"F16", 1, 2, 1}},
    {GE_T_Q4_0, {"Q4_0", 32, 18, 1}},   {GE_T_Q4_1, {"Q4_1", 32, 20, 1}},
    {GE_T_Q5_0, {"Q5_0", 32, 22, 1}},   {GE_T_Q5_1, {"Q5_1", 32, 24, 1}},
    {GE_T_Q8_0, {"Q8_0", 32, 34, 1}},   {GE_T_Q8_1, {"Q8_1", 32, 36, 0}},
    {GE_T_Q2_K, {"Q2_K", 256, 84, 1}},  {GE_T_Q3_K, {"Q3_K", 256, 110, 1}},
    {GE_T_Q4_K, {"Q4_K", 256, 144, 1}}, {GE_T_Q5_K, {"Q5_K", 256, 176, 1}},
    {GE_T_Q6_K, {"Q6_K", 256, 210, 1}}, {GE_T_Q8_K, {"Q8_K", 256, 292, 0}},
    {GE_T_IQ4_NL, {"IQ4_NL", 32, 18, 1}}, {GE_T_IQ4_XS, {"IQ4_XS", 256, 136, 1}},
    /* known to ggml, not computed here: named in the error, sized so the reader can walk past */
    {16, {"IQ2_XXS", 256, 66, 0}},  {17, {"IQ2_XS", 256, 74, 0}}, {18, {"IQ3_XXS", 256, 98, 0}},
    {19, {"IQ1_S", 256, 50, 0}},    {21, {"IQ3_S", 256, 110, 0}}, {22, {"IQ2_S", 256, 82, 0}},
    {29, {"IQ1_M", 256, 56, 0}},    {34, {"TQ1_0", 256, 54, 0}},  {35, {"TQ2_0", 256, 66, 0}},
    {39, {"MXFP4", 32, 17, 0}},
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

const int8_t ge_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

void ge_k4_scale_min(const uint8_t q[12], int j, uint8_t *sc, uint8_t *mn)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else { /* low 4 bits in bytes 8..11, high 2 bits in the top of bytes 0..7 */
        *sc = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

void ge_q3k_scales(const uint8_t q[12], int8_t out[16])
{
    /* low 4 bits: scales 0..7 in the nibbles of bytes 0..7 (low nibble first for 0..7, then
     * high nibbles for 8..15); high 2 bits: bytes 8..11, 2 bits per scale */
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? q[j] & 0xf : q[j - 8] >> 4;
        int hi = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (int8_t)((lo | hi << 4) - 32);
    }
}

int ge_iq4xs_scale(const uint8_t *b, int j)
{
    int lo = (b[4 + j / 2] >> (4 * (j % 2))) & 0xf, hi = (load_u16(b + 2) >> (2 * j)) & 3;
    return (lo | hi << 4) - 32;
}

static int nibble(const uint8_t *qs, int i) /* value i of a 32-value nibble run */
{
    return i < 16 ? qs[i] & 0xf : qs[i - 16] >> 4;
}

void ge_block_decode(uint32_t type, const uint8_t *p, ge_block_codes *k)
{
    memset(k, 0, sizeof *k);
    switch (type) {
    case GE_T_Q4_0: case GE_T_Q4_1: case GE_T_Q5_0: case GE_T_Q5_1: case GE_T_IQ4_NL: {
        const bool has_min = type == GE_T_Q4_1 || type == GE_T_Q5_1;
        const bool five = type == GE_T_Q5_0 || type == GE_T_Q5_1;
        const uint8_t *qh = p + (has_min ? 4 : 2), *qs = qh + (five ? 4 : 0);
        const uint32_t h = five ? (uint32_t)qh[0] | (uint32_t)qh[1] << 8 |
                                      (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24
                                : 0;
        const int bias = type == GE_T_Q4_0 ? 8 : type == GE_T_Q5_0 ? 16 : 0;
        k->n = 32, k->sub = 32, k->has_min = has_min, k->s[0] = 1;
        k->d = ge_fp16_at(p);
        k->dmin = has_min ? ge_fp16_at(p + 2) : 0.0f;
        for (int i = 0; i < 32; i++) {
            int c = nibble(qs, i) | (int)((h >> i) & 1) << 4;
            k->c[i] = (int8_t)(type == GE_T_IQ4_NL ? ge_iq4nl_values[c] : c - bias);
        }
        break;
    }
    case GE_T_Q2_K: /* 2-bit code i: byte 32 (i / 128) + i % 32 of qs, bits 2 ((i % 128) / 32) */
        k->n = 256, k->sub = 16, k->has_min = true;
        k->d = ge_fp16_at(p + 80), k->dmin = ge_fp16_at(p + 82);
        for (int j = 0; j < 16; j++)
            k->s[j] = p[j] & 0xf, k->m[j] = p[j] >> 4;
        for (int i = 0; i < 256; i++)
            k->c[i] = (int8_t)((p[16 + 32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3);
        break;
    case GE_T_Q3_K: { /* the same 2-bit order; bit i / 32 of hmask[i % 32] clear: minus 4 */
        int8_t sc[16];
        ge_q3k_scales(p + 96, sc);
        k->n = 256, k->sub = 16, k->d = ge_fp16_at(p + 108);
        for (int j = 0; j < 16; j++)
            k->s[j] = sc[j];
        for (int i = 0; i < 256; i++) {
            int lo = (p[32 + 32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
            k->c[i] = (int8_t)(lo - ((p[i % 32] >> (i / 32)) & 1 ? 0 : 4));
        }
        break;
    }
    case GE_T_Q4_K:
    case GE_T_Q5_K: { /* sub-block j: nibbles j % 2 of qs bytes 32 (j / 2) ..; Q5_K: bit j of
                       * qh[l] is the fifth bit */
        const bool five = type == GE_T_Q5_K;
        const uint8_t *qh = p + 16, *qs = p + (five ? 48 : 16);
        k->n = 256, k->sub = 32, k->has_min = true;
        k->d = ge_fp16_at(p), k->dmin = ge_fp16_at(p + 2);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, mn;
            ge_k4_scale_min(p + 4, j, &sc, &mn);
            k->s[j] = sc, k->m[j] = mn;
            for (int l = 0; l < 32; l++)
                k->c[32 * j + l] = (int8_t)(((qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xf) +
                                            (five ? ((qh[l] >> j) & 1) << 4 : 0));
        }
        break;
    }
    case GE_T_Q6_K: /* halves of 128; quarter q = (i % 128) / 32 of a half: low nibble from
                     * ql[64 h + 32 (q % 2) + l] (nibble q / 2), high 2 bits from qh[32 h + l] */
        k->n = 256, k->sub = 16, k->d = ge_fp16_at(p + 208);
        for (int j = 0; j < 16; j++)
            k->s[j] = (int8_t)p[192 + j];
        for (int i = 0; i < 256; i++) {
            int h = i / 128, q = (i % 128) / 32, l = i % 32;
            int lo = (p[64 * h + 32 * (q % 2) + l] >> (4 * (q / 2))) & 0xf;
            int hi = (p[128 + 32 * h + l] >> (2 * q)) & 3;
            k->c[i] = (int8_t)((lo | hi << 4) - 32);
        }
        break;
    case GE_T_IQ4_XS:
        k->n = 256, k->sub = 32, k->d = ge_fp16_at(p);
        for (int j = 0; j < 8; j++) {
            k->s[j] = ge_iq4xs_scale(p, j);
            for (int l = 0; l < 32; l++)
                k->c[32 * j + l] = ge_iq4nl_values[nibble(p + 8 + 16 * j, l)];
        }
        break;
    }
}

/* ggml's fp32 expression for each type: d * code (+ m) for the 32-blocks; (d * s) * code
 * (- dmin * m) for the super-blocks */
static void dequant_block(uint32_t type, const uint8_t *p, float *y)
{
    ge_block_codes k;
    ge_block_decode(type, p, &k);
    if (k.n == 32) {
        for (int i = 0; i < 32; i++)
            y[i] = k.has_min ? (float)k.c[i] * k.d + k.dmin : (float)k.c[i] * k.d;
        return;
    }
    for (int i = 0; i < 256; i++) {
        const int j = i / k.sub;
        const float dl = k.d * (float)k.s[j];
        y[i] = k.has_min ? dl * (float)k.c[i] - k.dmin * (float)k.m[j] : dl * (float)k.c[i];
    }
}

void ge_dequant_row(uint32_t type, const void *row, float *dst, size_t n)
{
    const uint8_t *p = row;
    switch (type) {
    case GE_T_F32:
        memcpy(dst, row, n * sizeof(float));
        break;
    case GE_T_F16:
        for (size_t i = 0; i < n; i++)
            dst[i] = ge_fp16_at(p + 2 * i);
        break;
    case GE_T_BF16:
        for (size_t i = 0; i < n; i++)
            dst[i] = ge_bf16_to_fp32(load_u16(p + 2 * i));
        break;
    case GE_T_Q8_0:
        for (size_t b = 0; b < n / GE_QK8_0; b++, p += sizeof(ge_block_q8_0)) {
            float d = ge_fp16_at(p);
            const int8_t *q = (const int8_t *)(p + 2);
            for (int i = 0; i < GE_QK8_0; i++)
                dst[b * GE_QK8_0 + i] = d * (float)q[i];
        }
        break;
    case GE_T_Q4_0: case GE_T_Q4_1: case GE_T_Q5_0: case GE_T_Q5_1: case GE_T_IQ4_NL:
    case GE_T_Q2_K: case GE_T_Q3_K: case GE_T_Q4_K: case GE_T_Q5_K: case GE_T_Q6_K:
    case GE_T_IQ4_XS: {
        const ge_dtype_info *ti = ge_dtype(type);
        for (size_t b = 0; b < n / ti->block; b++)
            dequant_block(type, p + b * ti->bytes, dst + ti->block * b);
        break;
    }
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
            sum += ge_fp16_at(p) * bs;
        }
        return sum;
    }
    /* other types: expand in chunks of whole blocks, then the f32 dot */
    const ge_dtype_info *ti = ge_dtype(type);
    float buf[256], sum = 0.0f;
    const uint8_t *p = row;
    for (size_t i = 0; i < n; i += 256) {
        size_t m = n - i < 256 ? n - i : 256;
        ge_dequant_row(type, p + i / ti->block * ti->bytes, buf, m);
        sum += dot_f32(buf, x + i, m);
    }
    return sum;
}
