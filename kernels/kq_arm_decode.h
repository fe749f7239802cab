/* kq_arm_decode.h - kq_arm.h's decode in NEON (armv8.0-a, no SDOT: the neon tier includes it
 * too): per type, one block of one row unpacked straight from its bit fields into a row
 * buffer (the codes, the integer scales and mins, the raw fp16 factors), then the group's 4
 * rows interleaved into the `decoded` layout by ST4 (4-byte chunks, and the scales' 4 rows
 * side by side). The contents are exactly those of ge_block_decode's path: the codes and
 * scales are the same integers, and the fp16 factors are widened by FCVTL with the NaN lanes
 * rebuilt from their bits (FCVTL quiets a signalling NaN; ge_fp16_to_fp32 keeps it).
 *
 * Included by kq_arm.h after `decoded`, G and INLINE. Each blk_* takes the block p and fills
 * c (the block's values in order), s and m (per sub-block; left alone when the type has
 * none) and the raw fp16 fields hd, hm (hm left alone without a min). */

/* fp16 -> fp32 exactly as ge_fp16_to_fp32: FCVTL is exact for zeros, subnormals, normals and
 * infinities; lanes with an all-ones exponent take sign | 0x7f800000 | man << 13 */
INLINE float32x4_t kd_h2f(uint16x4_t h)
{
    const float32x4_t f = vcvt_f32_f16(vreinterpret_f16_u16(h));
    const uint32x4_t x = vmovl_u16(h), e = vdupq_n_u32(0x7c00);
    const uint32x4_t special = vceqq_u32(vandq_u32(x, e), e);
    const uint32x4_t bits =
        vorrq_u32(vandq_u32(vshlq_n_u32(x, 16), vdupq_n_u32(0x80000000u)),
                  vorrq_u32(vandq_u32(vshlq_n_u32(x, 13), vdupq_n_u32(0x0fffe000u)),
                            vdupq_n_u32(0x7f800000u)));
    return vbslq_f32(special, vreinterpretq_f32_u32(bits), f);
}

INLINE uint16_t kd_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* 16 int8 values widened into int32 s[0..15] */
INLINE void kd_widen16(int8x16_t v, int32_t *s)
{
    const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_high_s8(v);
    vst1q_s32(s, vmovl_s16(vget_low_s16(lo)));
    vst1q_s32(s + 4, vmovl_high_s16(lo));
    vst1q_s32(s + 8, vmovl_s16(vget_low_s16(hi)));
    vst1q_s32(s + 12, vmovl_high_s16(hi));
}

/* 8 uint8 values widened into int32 s[0..7] */
INLINE void kd_widen8(uint8x8_t v, int32_t *s)
{
    const uint16x8_t w = vmovl_u8(v);
    vst1q_s32(s, vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w))));
    vst1q_s32(s + 4, vreinterpretq_s32_u32(vmovl_high_u16(w)));
}

INLINE void kd_st(int8_t *c, uint8x16_t v) { vst1q_s8(c, vreinterpretq_s8_u8(v)); }

/* the 5th bits of a 32-block (bit i of the little-endian qh) as 0x10 in byte i */
INLINE void kd_high5(const uint8_t *qh, uint8x16_t *h0, uint8x16_t *h1)
{
    uint32_t h;
    memcpy(&h, qh, 4);
    const uint8x8_t hv = vcreate_u8(h);
    const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull));
    const uint8x16_t x10 = vdupq_n_u8(0x10);
    *h0 = vandq_u8(vtstq_u8(vcombine_u8(vdup_lane_u8(hv, 0), vdup_lane_u8(hv, 1)), bit), x10);
    *h1 = vandq_u8(vtstq_u8(vcombine_u8(vdup_lane_u8(hv, 2), vdup_lane_u8(hv, 3)), bit), x10);
}

/* --- the 32-value blocks: values j and j + 16 are byte j's low and high nibble --- */

INLINE void blk_q4_0(const uint8_t *p, int8_t *c, int32_t *s, int32_t *m, uint16_t *hd,
                     uint16_t *hm)
{
    const uint8x16_t q = vld1q_u8(p + 2), b = vdupq_n_u8(8);
    kd_st(c, vsubq_u8(vandq_u8(q, vdupq_n_u8(0xf)), b));
    kd_st(c + 16, vsubq_u8(vshrq_n_u8(q, 4), b));
    *hd = kd_u16(p);
}

INLINE void blk_q4_1(const uint8_t *p, int8_t *c, int32_t *s, int32_t *m, uint16_t *hd,
                     uint16_t *hm)
{
    const uint8x16_t q = vld1q_u8(p + 4);
    kd_st(c, vandq_u8(q, vdupq_n_u8(0xf)));
    kd_st(c + 16, vshrq_n_u8(q, 4));
    *hd = kd_u16(p), *hm = kd_u16(p + 2);
}

INLINE void blk_q5_0(const uint8_t *p, int8_t *c, int32_t *s, int32_t *m, uint16_t *hd,
                     uint16_t *hm)
{
    uint8x16_t h0, h1;
    kd_high5(p + 2, &h0, &h1);
    const uint8x16_t q = vld1q_u8(p + 6), b = vdupq_n_u8(16);
    kd_st(c, vsubq_u8(vorrq_u8(vandq_u8(q, vdupq_n_u8(0xf)), h0), b));
    kd_st(c + 16, vsubq_u8(vorrq_u8(vshrq_n_u8(q, 4), h1), b));
    *hd = kd_u16(p);
}

INLINE void blk_q5_1(const uint8_t *p, int8_t *c, int32_t *s, int32_t *m, uint16_t *hd,
                     uint16_t *hm)
{
    uint8x16_t h0, h1;
    kd_high5(p + 4, &h0, &h1);
    const uint8x16_t q = vld1q_u8(p + 8);
    kd_st(c, vorrq_u8(vandq_u8(q, vdupq_n_u8(0xf)), h0));
    kd_st(c + 16, vorrq_u8(vshrq_n_u8(q, 4), h1));
    *hd = kd_u16(p), *hm = kd_u16(p + 2);
}

INLINE void blk_iq4_nl(const uint8_t *p, int8_t *c, int32_t *s, int32_t *m, uint16_t *hd,
                       uint16_t *hm)
{
    const int8x16_t tab = vld1q_s8(ge_iq4nl_values);
    const uint8x16_t q = vld1q_u8(p + 2);
    vst1q_s8(c, vqtbl1q_s8(tab, vandq_u8(q, vdupq_n_u8(0xf))));
    vst1q_s8(c + 16, vqtbl1q_s8(tab, vshrq_n_u8(q, 4)));
    *hd = kd_u16(p);
}

/* --- the 256-value super-blocks --- */

/* Q4_K / Q5_K's 6-bit scales and mins (ge_k4_scale_min) by 32-bit words: bytes 0..3 of the
 * words q[0..3], q[4..7], q[8..11] are sub-blocks 0..3's or 4..7's fields */
INLINE void kd_k4_scales(const uint8_t *q, int32_t *s, int32_t *m)
{
    uint32_t w0, w1, w2;
    memcpy(&w0, q, 4), memcpy(&w1, q + 4, 4), memcpy(&w2, q + 8, 4);
    const uint32_t s_lo = w0 & 0x3f3f3f3fu, m_lo = w1 & 0x3f3f3f3fu;
    const uint32_t s_hi = (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u);
    const uint32_t m_hi = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u);
    kd_widen8(vcreate_u8(s_lo | (uint64_t)s_hi << 32), s);
    kd_widen8(vcreate_u8(m_lo | (uint64_t)m_hi << 32), m);
}

INLINE void blk_q4_k(const uint8_t *p, int8_t *c, int32_t *s, int32_t *m, uint16_t *hd,
                     uint16_t *hm)
{
    const uint8x16_t lo = vdupq_n_u8(0xf);
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) { /* sub-blocks 2k (low nibbles) and 2k + 1 (high) */
        const uint8x16_t q0 = vld1q_u8(p + 16 + 32 * k), q1 = vld1q_u8(p + 32 + 32 * k);
        kd_st(c + 64 * k, vandq_u8(q0, lo));
        kd_st(c + 64 * k + 16, vandq_u8(q1, lo));
        kd_st(c + 64 * k + 32, vshrq_n_u8(q0, 4));
        kd_st(c + 64 * k + 48, vshrq_n_u8(q1, 4));
    }
    kd_k4_scales(p + 4, s, m);
    *hd = kd_u16(p), *hm = kd_u16(p + 2);
}

INLINE void blk_q5_k(const uint8_t *p, int8_t *c, int32_t *s, int32_t *m, uint16_t *hd,
                     uint16_t *hm)
{
    const uint8x16_t lo = vdupq_n_u8(0xf), x10 = vdupq_n_u8(0x10);
    uint8x16_t h0 = vld1q_u8(p + 16), h1 = vld1q_u8(p + 32); /* bit j: sub-block j's 5th */
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const uint8x16_t q0 = vld1q_u8(p + 48 + 32 * k), q1 = vld1q_u8(p + 64 + 32 * k);
        kd_st(c + 64 * k, vorrq_u8(vandq_u8(q0, lo), vandq_u8(vshlq_n_u8(h0, 4), x10)));
        kd_st(c + 64 * k + 16, vorrq_u8(vandq_u8(q1, lo), vandq_u8(vshlq_n_u8(h1, 4), x10)));
        kd_st(c + 64 * k + 32, vorrq_u8(vshrq_n_u8(q0, 4), vandq_u8(vshlq_n_u8(h0, 3), x10)));
        kd_st(c + 64 * k + 48, vorrq_u8(vshrq_n_u8(q1, 4), vandq_u8(vshlq_n_u8(h1, 3), x10)));
        h0 = vshrq_n_u8(h0, 2), h1 = vshrq_n_u8(h1, 2);
    }
    kd_k4_scales(p + 4, s, m);
    *hd = kd_u16(p), *hm = kd_u16(p + 2);
}

/* Q6_K: per half of 128, ql's 64 bytes L0..L3 and qh's 32 bytes H0, H1; quarter q's low
 * nibbles come from L(2 (q % 2)), L(2 (q % 2) + 1) (nibble q / 2), its high 2 bits from
 * bits 2q of H0, H1 */
INLINE void blk_q6_k(const uint8_t *p, int8_t *c, int32_t *s, int32_t *m, uint16_t *hd,
                     uint16_t *hm)
{
    const uint8x16_t lo = vdupq_n_u8(0xf), x30 = vdupq_n_u8(0x30), b = vdupq_n_u8(32);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = p + 64 * h, *qh = p + 128 + 32 * h;
        const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16);
        const uint8x16_t l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
        const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
        int8_t *o = c + 128 * h;
#define KD_Q6(off, l, hb) kd_st(o + (off), vsubq_u8(vorrq_u8(l, vandq_u8(hb, x30)), b))
        KD_Q6(0, vandq_u8(l0, lo), vshlq_n_u8(h0, 4));
        KD_Q6(16, vandq_u8(l1, lo), vshlq_n_u8(h1, 4));
        KD_Q6(32, vandq_u8(l2, lo), vshlq_n_u8(h0, 2));
        KD_Q6(48, vandq_u8(l3, lo), vshlq_n_u8(h1, 2));
        KD_Q6(64, vshrq_n_u8(l0, 4), h0);
        KD_Q6(80, vshrq_n_u8(l1, 4), h1);
        KD_Q6(96, vshrq_n_u8(l2, 4), vshrq_n_u8(h0, 2));
        KD_Q6(112, vshrq_n_u8(l3, 4), vshrq_n_u8(h1, 2));
#undef KD_Q6
    }
    kd_widen16(vld1q_s8((const int8_t *)p + 192), s);
    *hd = kd_u16(p + 208);
}

/* Q2_K / Q3_K's 2-bit codes: half h, quarter q from bits 2q of qs[32h .. 32h + 31] */
INLINE uint8x16_t kd_2bit(uint8x16_t q, int sh)
{
    return vandq_u8(sh ? vshlq_u8(q, vdupq_n_s8((int8_t)-sh)) : q, vdupq_n_u8(3));
}

INLINE void blk_q2_k(const uint8_t *p, int8_t *c, int32_t *s, int32_t *m, uint16_t *hd,
                     uint16_t *hm)
{
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const uint8x16_t q0 = vld1q_u8(p + 16 + 32 * h), q1 = vld1q_u8(p + 32 + 32 * h);
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            kd_st(c + 128 * h + 32 * q, kd_2bit(q0, 2 * q));
            kd_st(c + 128 * h + 32 * q + 16, kd_2bit(q1, 2 * q));
        }
    }
    const uint8x16_t sm = vld1q_u8(p);
    kd_widen16(vreinterpretq_s8_u8(vandq_u8(sm, vdupq_n_u8(0xf))), s);
    kd_widen16(vreinterpretq_s8_u8(vshrq_n_u8(sm, 4)), m);
    *hd = kd_u16(p + 80), *hm = kd_u16(p + 82);
}

/* Q3_K: minus 4 where bit 4h + q of hmask[l] is clear; the 16 6-bit scales as ge_q3k_scales */
INLINE void blk_q3_k(const uint8_t *p, int8_t *c, int32_t *s, int32_t *m, uint16_t *hd,
                     uint16_t *hm)
{
    const uint8x16_t m0 = vld1q_u8(p), m1 = vld1q_u8(p + 16), four = vdupq_n_u8(4);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const uint8x16_t q0 = vld1q_u8(p + 32 + 32 * h), q1 = vld1q_u8(p + 48 + 32 * h);
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * h + q)));
            kd_st(c + 128 * h + 32 * q,
                  vsubq_u8(kd_2bit(q0, 2 * q), vbicq_u8(four, vtstq_u8(m0, bit))));
            kd_st(c + 128 * h + 32 * q + 16,
                  vsubq_u8(kd_2bit(q1, 2 * q), vbicq_u8(four, vtstq_u8(m1, bit))));
        }
    }
    /* low 4 bits: nibbles of bytes 0..7 (low ones for scales 0..7); high 2: bits 2 (j / 4) of
     * byte 8 + j % 4, moved to bits 4..5 */
    const uint8x8_t a = vld1_u8(p + 96);
    const uint8x16_t low = vcombine_u8(vand_u8(a, vdup_n_u8(0xf)), vshr_n_u8(a, 4));
    uint32_t w;
    memcpy(&w, p + 104, 4);
    const int8x16_t sh = {4, 4, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0, -2, -2, -2, -2};
    const uint8x16_t high =
        vandq_u8(vshlq_u8(vreinterpretq_u8_u32(vdupq_n_u32(w)), sh), vdupq_n_u8(0x30));
    kd_widen16(vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(low, high)), vdupq_n_s8(32)), s);
    *hd = kd_u16(p + 108);
}

/* IQ4_XS: sub-block j's 16 bytes at 8 + 16j, low nibbles first; scale j: nibble j % 2 of
 * byte 4 + j / 2, high 2 bits from bits 2j of the u16 at 2, minus 32 */
INLINE void blk_iq4_xs(const uint8_t *p, int8_t *c, int32_t *s, int32_t *m, uint16_t *hd,
                       uint16_t *hm)
{
    const int8x16_t tab = vld1q_s8(ge_iq4nl_values);
    const uint8x16_t lo = vdupq_n_u8(0xf);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        const uint8x16_t q = vld1q_u8(p + 8 + 16 * j);
        vst1q_s8(c + 32 * j, vqtbl1q_s8(tab, vandq_u8(q, lo)));
        vst1q_s8(c + 32 * j + 16, vqtbl1q_s8(tab, vshrq_n_u8(q, 4)));
    }
    uint32_t sl;
    memcpy(&sl, p + 4, 4);
    const uint8x8_t a = vcreate_u8(sl);
    const uint8x8_t low = vzip1_u8(vand_u8(a, vdup_n_u8(0xf)), vshr_n_u8(a, 4));
    const int16x8_t sh = {4, 2, 0, -2, -4, -6, -8, -10};
    const uint16x8_t high = vandq_u16(vshlq_u16(vdupq_n_u16(kd_u16(p + 2)), sh),
                                      vdupq_n_u16(0x30));
    const int16x8_t v =
        vsubq_s16(vreinterpretq_s16_u16(vorrq_u16(vmovl_u8(low), high)), vdupq_n_s16(32));
    vst1q_s32(s, vmovl_s16(vget_low_s16(v)));
    vst1q_s32(s + 4, vmovl_high_s16(v));
    *hd = kd_u16(p);
}

/* A group's K chunk by blk: each block's rows decoded into row buffers, then their 16-value
 * pieces interleaved by ST4 of 4-byte lanes (chunk i / 4 of rows 0..3), the scales and mins
 * by ST4 of int32 lanes, the factors widened 4 rows at a time. Absent rows stay zero. */
#define KD_DRIVER(name, blk, BN, NSUB, MIN)                                                 \
    static void name(const uint8_t *w, size_t row_bytes, int64_t o, int nrow, int64_t b0,   \
                     int64_t nbk, size_t bb, decoded *dec)                                  \
    {                                                                                       \
        int8_t c[G][BN] __attribute__((aligned(16)));                                       \
        int32_t s[G][16], m[G][16];                                                         \
        uint16_t hd[G] = {0}, hm[G] = {0};                                                  \
        memset(c, 0, sizeof c), memset(s, 0, sizeof s), memset(m, 0, sizeof m);             \
        const uint8_t *row[G];                                                              \
        for (int r = 0; r < nrow; r++)                                                      \
            row[r] = w + (size_t)(o + r) * row_bytes + (size_t)b0 * bb;                     \
        for (int64_t b = 0; b < nbk; b++) {                                                 \
            for (int r = 0; r < nrow; r++)                                                  \
                blk(row[r] + (size_t)b * bb, c[r], s[r], m[r], &hd[r], &hm[r]);             \
            int8_t *cd = dec->codes + b * BN * G;                                           \
            for (int i = 0; i < BN / 16; i++) {                                             \
                const uint32x4x4_t v = {{vreinterpretq_u32_s8(vld1q_s8(c[0] + 16 * i)),     \
                                         vreinterpretq_u32_s8(vld1q_s8(c[1] + 16 * i)),     \
                                         vreinterpretq_u32_s8(vld1q_s8(c[2] + 16 * i)),     \
                                         vreinterpretq_u32_s8(vld1q_s8(c[3] + 16 * i))}};   \
                vst4q_u32((uint32_t *)(void *)(cd + 64 * i), v);                            \
            }                                                                               \
            if (NSUB == 1) {                                                                \
                vst1q_s32(dec->sc + b * G, vdupq_n_s32(1));                                 \
                vst1q_s32(dec->mn + b * G, vdupq_n_s32(0));                                 \
            } else {                                                                        \
                for (int j = 0; j < NSUB; j += 4) {                                         \
                    const int32x4x4_t sv = {{vld1q_s32(s[0] + j), vld1q_s32(s[1] + j),      \
                                             vld1q_s32(s[2] + j), vld1q_s32(s[3] + j)}};    \
                    vst4q_s32(dec->sc + (b * NSUB + j) * G, sv);                            \
                    const int32x4x4_t mv = {{vld1q_s32(m[0] + j), vld1q_s32(m[1] + j),      \
                                             vld1q_s32(m[2] + j), vld1q_s32(m[3] + j)}};    \
                    vst4q_s32(dec->mn + (b * NSUB + j) * G, mv);                            \
                }                                                                           \
            }                                                                               \
            vst1q_f32(dec->d + b * G, kd_h2f(vld1_u16(hd)));                                \
            vst1q_f32(dec->dm + b * G, MIN ? kd_h2f(vld1_u16(hm)) : vdupq_n_f32(0.0f));     \
        }                                                                                   \
    }

KD_DRIVER(kd_q4_0, blk_q4_0, 32, 1, 0)
KD_DRIVER(kd_q4_1, blk_q4_1, 32, 1, 1)
KD_DRIVER(kd_q5_0, blk_q5_0, 32, 1, 0)
KD_DRIVER(kd_q5_1, blk_q5_1, 32, 1, 1)
KD_DRIVER(kd_iq4_nl, blk_iq4_nl, 32, 1, 0)
KD_DRIVER(kd_q2_k, blk_q2_k, 256, 16, 1)
KD_DRIVER(kd_q3_k, blk_q3_k, 256, 16, 0)
KD_DRIVER(kd_q4_k, blk_q4_k, 256, 8, 1)
KD_DRIVER(kd_q5_k, blk_q5_k, 256, 8, 1)
KD_DRIVER(kd_q6_k, blk_q6_k, 256, 16, 0)
KD_DRIVER(kd_iq4_xs, blk_iq4_xs, 256, 8, 0)

/* the fast decode of type, or 0 when it has none */
static int kd_decode(uint32_t type, const uint8_t *w, size_t row_bytes, int64_t o, int nrow,
                     int64_t b0, int64_t nbk, size_t bb, decoded *dec)
{
    switch (type) {
    case GE_T_Q4_0: kd_q4_0(w, row_bytes, o, nrow, b0, nbk, bb, dec); return 1;
    case GE_T_Q4_1: kd_q4_1(w, row_bytes, o, nrow, b0, nbk, bb, dec); return 1;
    case GE_T_Q5_0: kd_q5_0(w, row_bytes, o, nrow, b0, nbk, bb, dec); return 1;
    case GE_T_Q5_1: kd_q5_1(w, row_bytes, o, nrow, b0, nbk, bb, dec); return 1;
    case GE_T_IQ4_NL: kd_iq4_nl(w, row_bytes, o, nrow, b0, nbk, bb, dec); return 1;
    case GE_T_Q2_K: kd_q2_k(w, row_bytes, o, nrow, b0, nbk, bb, dec); return 1;
    case GE_T_Q3_K: kd_q3_k(w, row_bytes, o, nrow, b0, nbk, bb, dec); return 1;
    case GE_T_Q4_K: kd_q4_k(w, row_bytes, o, nrow, b0, nbk, bb, dec); return 1;
    case GE_T_Q5_K: kd_q5_k(w, row_bytes, o, nrow, b0, nbk, bb, dec); return 1;
    case GE_T_Q6_K: kd_q6_k(w, row_bytes, o, nrow, b0, nbk, bb, dec); return 1;
    case GE_T_IQ4_XS: kd_iq4_xs(w, row_bytes, o, nrow, b0, nbk, bb, dec); return 1;
    default: return 0;
    }
}
