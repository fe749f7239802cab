"""Minimal GGUF v3 writer and weight encoders used by tools/mkmodel.

Written for gemmaembed from the GGUF format description (little-endian, v3).
Only what the model generator needs: typed metadata, tensor infos with
aligned offsets, streamed tensor data, and the encoders of F32 / F16 / BF16 /
Q8_0 (Q8_0 and BF16 follow ggml's reference rounding rules) and of the block
types Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS ("block
quantisers" below; tools/ref/gguf.py holds their layouts and decoders).

Usage:
    w = GGUFWriter()
    w.add_u32("key", 3); w.add_str_array("names", ["a", "b"]); ...
    w.add_tensor("t.weight", ne=(64, 32), ggml_type=GGML_Q8_0, produce=fn)
    w.write("out.gguf")

`produce` is a callable returning an iterable of float32 numpy arrays of
shape (rows, ne0) whose rows, concatenated, are the tensor in ggml row
order (ne0 contiguous).  Rows are converted chunk by chunk, so a large
tensor never needs to exist in memory twice.
"""

import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32

# metadata value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32 = 0, 1, 2, 3, 4, 5
T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 6, 7, 8, 9
T_UINT64, T_INT64, T_FLOAT64 = 10, 11, 12

_SCALAR_FMT = {
    T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h",
    T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?",
    T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d",
}
_NP_DTYPE = {
    T_UINT8: "<u1", T_INT8: "<i1", T_UINT16: "<u2", T_INT16: "<i2",
    T_UINT32: "<u4", T_INT32: "<i4", T_FLOAT32: "<f4", T_BOOL: "<u1",
    T_UINT64: "<u8", T_INT64: "<i8", T_FLOAT64: "<f8",
}

# ggml tensor types used here
GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
QK8_0 = 32

# (block elements, bytes per block)
_TYPE_BLOCK = {
    GGML_F32: (1, 4),
    GGML_F16: (1, 2),
    GGML_BF16: (1, 2),
    GGML_Q8_0: (QK8_0, 2 + QK8_0),
}


def tensor_nbytes(ne, ggml_type):
    """Bytes of a tensor of ggml shape `ne` (ne[0] contiguous)."""
    blk, size = _TYPE_BLOCK[ggml_type]
    if ne[0] % blk:
        raise ValueError("ne0=%d is not a multiple of the block size %d" % (ne[0], blk))
    n = 1
    for d in ne:
        n *= int(d)
    return n // blk * size


def _gguf_str(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _align(n, a):
    return (n + a - 1) // a * a


# ---------------------------------------------------------------- encoders

def encode_f32(x):
    return np.ascontiguousarray(x, dtype="<f4").tobytes()


def encode_f16(x):
    # numpy's float32 -> float16 cast rounds to nearest even (like F16C)
    return np.ascontiguousarray(x, dtype=np.float32).astype("<f2").tobytes()


def f32_to_bf16_bits(x):
    """uint16 bf16 bits of float32 `x`, round to nearest even; NaN stays NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))))
         >> np.uint32(16)).astype(np.uint16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    if nan.any():
        r[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return r


def encode_bf16(x):
    return f32_to_bf16_bits(x).astype("<u2").tobytes()


def quantize_q8_0(x):
    """Q8_0 blocks of float32 rows `x` (shape (rows, ne0), ne0 % 32 == 0).

    Returns (d_f16 array of shape (rows, nb), q int8 array (rows, nb, 32)).
    Rounding as in ggml's quantize_row_q8_0_ref: d = amax/127 (fp32),
    id = 1/d (0 if d == 0), q = roundf(x*id) (half away from zero), d stored
    as fp16.
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    rows, ne0 = x.shape
    if ne0 % QK8_0:
        raise ValueError("Q8_0 needs ne0 to be a multiple of 32, got %d" % ne0)
    xb = x.reshape(rows, ne0 // QK8_0, QK8_0)
    amax = np.abs(xb).max(axis=2)                         # float32
    d = amax / np.float32(127.0)                          # float32 division
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1.0) / d, np.float32(0.0)).astype(np.float32)
    v = (xb * inv[:, :, None]).astype(np.float64)         # float32 product, exact in f64
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)
    return d.astype(np.float16), q


def encode_q8_0(x):
    d, q = quantize_q8_0(x)
    rows, nb = d.shape
    out = np.empty((rows, nb, 2 + QK8_0), dtype=np.uint8)
    out[:, :, 0:2] = d.astype("<f2").view(np.uint8).reshape(rows, nb, 2)
    out[:, :, 2:] = q.view(np.uint8)
    return out.tobytes()


ENCODERS = {
    GGML_F32: encode_f32,
    GGML_F16: encode_f16,
    GGML_BF16: encode_bf16,
    GGML_Q8_0: encode_q8_0,
}



# ------------------------------------------------------- block quantisers
#
# Q4_0 Q4_1 Q5_0 Q5_1 follow ggml's reference rounding (quantize_row_*_ref:
# llama-quantize uses it for these types without an importance matrix). The
# K-quants and the IQ4 types are fitted here by a small search (no importance
# matrix): a few candidate scales per sub-block, each refined by least squares,
# the best kept; then the sub-block scales are quantised against the
# super-block's fp16 d (and dmin) the way ggml packs them, and every value is
# re-rounded with its final, stored scale. Written from ggml's block layouts
# (tools/ref/gguf.py describes them); not a copy of ggml's code. Everything is
# NumPy over whole chunks of rows and deterministic (no randomness, fixed
# evaluation order), so the same input gives the same bytes.
#
# Every encoder takes float32 rows (rows, ne0) with ne0 a multiple of its
# block size and returns the packed bytes, rows after rows.

GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1 = 2, 3, 6, 7
GGML_Q2_K, GGML_Q3_K, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K = 10, 11, 12, 13, 14
GGML_IQ4_NL, GGML_IQ4_XS = 20, 23
QK_K = 256
IQ4_NL_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10,
                          1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float32)
# the midpoints between neighbouring levels are multiples of 1/2, so the nearest
# level of y (ties to the upper level) depends on floor(2y) only: a table over
# floor(2y) in -_IQ4_LUT_HALF.._IQ4_LUT_HALF (values beyond saturate to the end levels)
_IQ4_MID2 = IQ4_NL_VALUES[1:].astype(np.int32) + IQ4_NL_VALUES[:-1].astype(np.int32)
_IQ4_LUT_HALF = 512
_IQ4_LUT = np.searchsorted(_IQ4_MID2, np.arange(-_IQ4_LUT_HALF, _IQ4_LUT_HALF + 1),
                           side="right").astype(np.uint8)

_TYPE_BLOCK.update({
    GGML_Q4_0: (32, 18), GGML_Q4_1: (32, 20), GGML_Q5_0: (32, 22), GGML_Q5_1: (32, 24),
    GGML_Q2_K: (QK_K, 84), GGML_Q3_K: (QK_K, 110), GGML_Q4_K: (QK_K, 144),
    GGML_Q5_K: (QK_K, 176), GGML_Q6_K: (QK_K, 210),
    GGML_IQ4_NL: (32, 18), GGML_IQ4_XS: (QK_K, 136),
})
TYPE_NAMES = {GGML_F32: "F32", GGML_F16: "F16", GGML_BF16: "BF16", GGML_Q8_0: "Q8_0",
              GGML_Q4_0: "Q4_0", GGML_Q4_1: "Q4_1", GGML_Q5_0: "Q5_0", GGML_Q5_1: "Q5_1",
              GGML_Q2_K: "Q2_K", GGML_Q3_K: "Q3_K", GGML_Q4_K: "Q4_K", GGML_Q5_K: "Q5_K",
              GGML_Q6_K: "Q6_K", GGML_IQ4_NL: "IQ4_NL", GGML_IQ4_XS: "IQ4_XS"}


def block_size(ggml_type):
    return _TYPE_BLOCK[ggml_type][0]


def _blocks(x, blk, name):
    x = np.ascontiguousarray(x, dtype=np.float32)
    rows, ne0 = x.shape
    if ne0 % blk:
        raise ValueError("%s needs ne0 to be a multiple of %d, got %d" % (name, blk, ne0))
    return x.reshape(rows * (ne0 // blk), blk)


def _f16_bytes(v):
    """(n,) or (n, 1) float -> (n, 2) uint8 of the fp16 value (round to nearest even)."""
    return np.asarray(v, dtype=np.float32).reshape(-1).astype("<f2").view(np.uint8) \
        .reshape(-1, 2)


def _f16(v):
    """float32 of the fp16 rounding of v (what a decoder will read back)."""
    return np.asarray(v, dtype=np.float32).astype(np.float16).astype(np.float32)


def _pack_nibbles(q):
    """(..., 2k) codes 0..15 -> (..., k) bytes: element i in the low nibble of
    byte i, element k + i in its high nibble."""
    k = q.shape[-1] // 2
    return (q[..., :k] | (q[..., k:] << 4)).astype(np.uint8)


def _pack_crumbs(L):
    """(nb, 256) 2-bit codes -> (nb, 64): byte 32c + i holds elements
    128c + 32j + i in bits 2j..2j+1 (the Q2_K / Q3_K order)."""
    nb = L.shape[0]
    q = L.reshape(nb, 2, 4, 32).astype(np.uint8)
    return (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)) \
        .reshape(nb, 64)


def _pack_bit_planes(bits, nplanes):
    """(nb, nplanes * k) 0/1 -> (nb, k): bit b of byte i is element b*k + i."""
    nb = bits.shape[0]
    b = bits.reshape(nb, nplanes, -1).astype(np.uint8)
    out = np.zeros((nb, b.shape[2]), dtype=np.uint8)
    for p in range(nplanes):
        out |= b[:, p] << p
    return out


def _rowsum(a, b=None):
    """Row sums of float32 a (or a*b) by a fixed pairwise tree of float32 element-wise
    adds, as float64: the same bits on every machine. (numpy's float reductions and
    einsum may add in an order that depends on the CPU's SIMD width, which could flip a
    near-tie between two candidate scales and so change the file. Sums of small
    integer codes are exact in any order and use plain np.sum.)"""
    a = a if b is None else a * b
    while a.shape[1] > 1:
        if a.shape[1] % 2:
            a = np.concatenate([a[:, :-1:2] + a[:, 1::2], a[:, -1:]], axis=1)
        else:
            a = a[:, 0::2] + a[:, 1::2]
    return a[:, 0].astype(np.float64)


def _rint(v):
    """Round half to even (ggml's nearest_int) as int32."""
    return np.rint(v).astype(np.int32)


def _safe_inv(d):
    d = np.asarray(d, dtype=np.float32)
    with np.errstate(divide="ignore"):
        return np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), np.float32(0)) \
            .astype(np.float32)


# ---- ggml's reference rounding for the 32-value legacy types

def _signed_extreme(xb):
    """The value of largest magnitude of each block (the first one on ties)."""
    i = np.argmax(np.abs(xb), axis=1)
    return xb[np.arange(xb.shape[0]), i]


def encode_q4_0(x):
    """d = max/-8 (max: the value of largest magnitude), q = min(15, (int)(x/d + 8.5))."""
    xb = _blocks(x, 32, "Q4_0")
    d = _signed_extreme(xb) / np.float32(-8)
    q = np.minimum(15, (xb * _safe_inv(d)[:, None] + np.float32(8.5)).astype(np.int8))
    out = np.empty((xb.shape[0], 18), dtype=np.uint8)
    out[:, 0:2] = _f16_bytes(d)
    out[:, 2:] = _pack_nibbles(q.astype(np.uint8))
    return out.tobytes()


def encode_q4_1(x):
    """d = (max - min)/15, m = min, q = min(15, (int)((x - min)/d + 0.5))."""
    xb = _blocks(x, 32, "Q4_1")
    mn, mx = xb.min(axis=1), xb.max(axis=1)
    d = (mx - mn) / np.float32(15)
    q = np.minimum(15, ((xb - mn[:, None]) * _safe_inv(d)[:, None] + np.float32(0.5))
                   .astype(np.int8))
    out = np.empty((xb.shape[0], 20), dtype=np.uint8)
    out[:, 0:2] = _f16_bytes(d)
    out[:, 2:4] = _f16_bytes(mn)
    out[:, 4:] = _pack_nibbles(q.astype(np.uint8))
    return out.tobytes()


def _qh_bytes(q):
    """(nb, 32) 5-bit codes -> (nb, 4) bytes of the little-endian uint32 whose
    bit i is bit 4 of element i."""
    bits = ((q >> 4) & 1).astype(np.uint32) << np.arange(32, dtype=np.uint32)[None, :]
    return np.bitwise_or.reduce(bits, axis=1).astype("<u4").view(np.uint8).reshape(-1, 4)


def encode_q5_0(x):
    """d = max/-16, q = min(31, (int)(x/d + 16.5))."""
    xb = _blocks(x, 32, "Q5_0")
    d = _signed_extreme(xb) / np.float32(-16)
    q = np.minimum(31, (xb * _safe_inv(d)[:, None] + np.float32(16.5)).astype(np.int8)) \
        .astype(np.uint8)
    out = np.empty((xb.shape[0], 22), dtype=np.uint8)
    out[:, 0:2] = _f16_bytes(d)
    out[:, 2:6] = _qh_bytes(q)
    out[:, 6:] = _pack_nibbles(q & 15)
    return out.tobytes()


def encode_q5_1(x):
    """d = (max - min)/31, m = min, q = (int)((x - min)/d + 0.5)."""
    xb = _blocks(x, 32, "Q5_1")
    mn, mx = xb.min(axis=1), xb.max(axis=1)
    d = (mx - mn) / np.float32(31)
    q = np.minimum(31, ((xb - mn[:, None]) * _safe_inv(d)[:, None] + np.float32(0.5))
                   .astype(np.int8)).astype(np.uint8)
    out = np.empty((xb.shape[0], 24), dtype=np.uint8)
    out[:, 0:2] = _f16_bytes(d)
    out[:, 2:4] = _f16_bytes(mn)
    out[:, 4:8] = _qh_bytes(q)
    out[:, 8:] = _pack_nibbles(q & 15)
    return out.tobytes()


# ---- fits shared by the K-quants and the IQ4 types

# candidate codes for the value of each sub-block's extreme, relative to nmax:
# (nmax + delta) / range, as ggml's searches do
_AFFINE_DELTAS = (0.0, -0.5, 0.5, -1.0, 1.0)
_SYM_DELTAS = (0.0, -0.5, 0.5, -1.0, 1.0, -1.5)


def _affine_fit(xs, nmax):
    """Fit x ~ s*L + m (L in 0..nmax, m <= 0) to each row of xs (n, bs):
    candidate scales (nmax + delta)/(max - min) with min = min(x, 0), each
    refined by the least-squares (s, m) for its codes (m clamped at 0);
    the smallest squared error wins. Returns float32 (s, -m): both >= 0."""
    n, bs = xs.shape
    xs = xs.astype(np.float32)
    lo = np.minimum(xs.min(axis=1), 0)
    rng = xs.max(axis=1) - lo
    sx = _rowsum(xs)
    sxx = _rowsum(xs, xs)
    best_s = (rng / nmax).astype(np.float64)
    best_m = lo.astype(np.float64)
    best_err = np.full(n, np.inf)
    xc = xs - lo[:, None]
    for delta in _AFFINE_DELTAS:
        with np.errstate(divide="ignore", invalid="ignore"):
            isc = np.where(rng > 0, np.float32(nmax + delta) / rng, 0).astype(np.float32)
        L = np.clip(np.rint(xc * isc[:, None]), 0, nmax)
        sl = L.sum(axis=1, dtype=np.float64)           # integers: exact
        sll = (L * L).sum(axis=1, dtype=np.float64)
        sxl = _rowsum(L, xs)
        D = bs * sll - sl * sl
        with np.errstate(divide="ignore", invalid="ignore"):
            s = (bs * sxl - sx * sl) / D
            m = (sll * sx - sl * sxl) / D
            pos = m > 0
            s = np.where(pos, sxl / sll, s)
            m = np.where(pos, 0.0, m)
            err = sxx - 2 * s * sxl - 2 * m * sx + s * s * sll + 2 * s * m * sl + bs * m * m
        ok = (D > 0) & (err < best_err)
        best_s = np.where(ok, s, best_s)
        best_m = np.where(ok, m, best_m)
        best_err = np.where(ok, err, best_err)
    return np.maximum(best_s, 0).astype(np.float32), (-best_m).astype(np.float32)


def _sym_fit_int(xs, nmax):
    """Fit x ~ s*L (L integer in -nmax..nmax-1) to each row of xs (n, bs):
    candidate scales mapping the value of largest magnitude to -(nmax + delta),
    each refined by least squares. Returns float32 s (any sign)."""
    xs = xs.astype(np.float32)
    ext = _signed_extreme(xs)
    best_s = np.zeros(xs.shape[0])
    best_score = np.full(xs.shape[0], -1.0)
    for delta in _SYM_DELTAS:
        isc = (np.float32(-(nmax + delta)) * _safe_inv(ext)).astype(np.float32)
        L = np.clip(np.rint(xs * isc[:, None]), -nmax, nmax - 1)
        sll = (L * L).sum(axis=1, dtype=np.float64)     # integers: exact
        sxl = _rowsum(L, xs)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(sll > 0, sxl * sxl / sll, 0.0)
            s = np.where(sll > 0, sxl / sll, 0.0)
        ok = score > best_score
        best_s = np.where(ok, s, best_s)
        best_score = np.where(ok, score, best_score)
    return best_s.astype(np.float32)


def _iq4_nearest(y):
    """Index of the nearest IQ4_NL level to each value of y (ties: the upper one)."""
    k = np.floor(np.float32(2) * y)
    np.clip(k, -_IQ4_LUT_HALF, _IQ4_LUT_HALF, out=k)
    return _IQ4_LUT[k.astype(np.int32) + _IQ4_LUT_HALF]


def _sym_fit_iq4(xs):
    """Fit x ~ s*T[i] (T the 16 IQ4_NL levels) to each row of xs (n, 32): the
    value of largest magnitude mapped to about -127 or +113, refined by least
    squares. Returns float32 s."""
    xs = xs.astype(np.float32)
    inv_ext = _safe_inv(_signed_extreme(xs))
    best_s = np.zeros(xs.shape[0])
    best_score = np.full(xs.shape[0], -1.0)
    for target in (-127.0, -123.0, -119.0, -131.0, 113.0, 117.0):
        isc = (np.float32(target) * inv_ext).astype(np.float32)
        v = IQ4_NL_VALUES[_iq4_nearest(xs * isc[:, None])]
        svv = (v * v).sum(axis=1, dtype=np.float64)     # integers: exact
        sxv = _rowsum(v, xs)
        score = sxv * sxv / svv
        ok = score > best_score
        best_s = np.where(ok, sxv / svv, best_s)
        best_score = np.where(ok, score, best_score)
    return best_s.astype(np.float32)


def _sub_codes(scales, d16, lo, hi):
    """Integer codes of sub-block scales against the stored super-block scale."""
    inv = _safe_inv(d16)
    return np.clip(_rint(scales * inv[:, None]), lo, hi)


# ---- K-quants

def _affine_k(x, name, sub, nmax, sbits):
    """Q2_K / Q4_K / Q5_K values: sub-blocks of `sub` values fitted as
    x ~ d*sc*q - dmin*mn with sc, mn codes of `sbits` bits (0..2^sbits-1).
    Returns (d16, dmin16 (nb,), sc, mn (nb, 256/sub) int, L (nb, 256) int)."""
    xb = _blocks(x, QK_K, name)
    nb = xb.shape[0]
    ns = QK_K // sub
    s, m = _affine_fit(xb.reshape(nb * ns, sub), nmax)
    s, m = s.reshape(nb, ns), m.reshape(nb, ns)
    top = (1 << sbits) - 1
    d16 = _f16(s.max(axis=1) / np.float32(top))
    dmin16 = _f16(m.max(axis=1) / np.float32(top))
    sc = _sub_codes(s, d16, 0, top)
    mn = _sub_codes(m, dmin16, 0, top)
    dl = np.repeat(d16[:, None] * sc.astype(np.float32), sub, axis=1)
    ml = np.repeat(dmin16[:, None] * mn.astype(np.float32), sub, axis=1)
    L = np.clip(_rint((xb + ml) * _safe_inv(dl)), 0, nmax)
    return d16, dmin16, sc, mn, L


def encode_q2_k(x):
    d, dmin, sc, mn, L = _affine_k(x, "Q2_K", 16, 3, 4)
    out = np.empty((L.shape[0], 84), dtype=np.uint8)
    out[:, 0:16] = (sc | (mn << 4)).astype(np.uint8)
    out[:, 16:80] = _pack_crumbs(L)
    out[:, 80:82] = _f16_bytes(d)
    out[:, 82:84] = _f16_bytes(dmin)
    return out.tobytes()


def _pack_scale_min_k4(sc, mn):
    """8 six-bit scales and mins -> the 12 Q4_K / Q5_K scale bytes (see gguf.py)."""
    sc, mn = sc.astype(np.uint8), mn.astype(np.uint8)
    b = np.empty((sc.shape[0], 12), dtype=np.uint8)
    b[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    b[:, 4:8] = mn[:, 0:4] | ((mn[:, 4:8] >> 4) << 6)
    b[:, 8:12] = (sc[:, 4:8] & 15) | ((mn[:, 4:8] & 15) << 4)
    return b


def encode_q4_k(x):
    d, dmin, sc, mn, L = _affine_k(x, "Q4_K", 32, 15, 6)
    nb = L.shape[0]
    out = np.empty((nb, 144), dtype=np.uint8)
    out[:, 0:2] = _f16_bytes(d)
    out[:, 2:4] = _f16_bytes(dmin)
    out[:, 4:16] = _pack_scale_min_k4(sc, mn)
    out[:, 16:144] = _pack_nibbles(L.reshape(nb, 4, 64)).reshape(nb, 128)
    return out.tobytes()


def encode_q5_k(x):
    d, dmin, sc, mn, L = _affine_k(x, "Q5_K", 32, 31, 6)
    nb = L.shape[0]
    out = np.empty((nb, 176), dtype=np.uint8)
    out[:, 0:2] = _f16_bytes(d)
    out[:, 2:4] = _f16_bytes(dmin)
    out[:, 4:16] = _pack_scale_min_k4(sc, mn)
    out[:, 16:48] = _pack_bit_planes(L >> 4, 8)
    out[:, 48:176] = _pack_nibbles((L & 15).reshape(nb, 4, 64)).reshape(nb, 128)
    return out.tobytes()


def _sym_k(x, name, nmax, slo, shi):
    """Q3_K / Q6_K values: 16 sub-blocks of 16 fitted as x ~ d*sc*q with q in
    -nmax..nmax-1 and sc in slo..shi; d maps the sub-block scale of largest
    magnitude to slo (so sc takes both signs). Returns (d16, sc, q)."""
    xb = _blocks(x, QK_K, name)
    nb = xb.shape[0]
    s = _sym_fit_int(xb.reshape(nb * 16, 16), nmax).reshape(nb, 16)
    d16 = _f16(_signed_extreme(s) / np.float32(slo))
    sc = _sub_codes(s, d16, slo, shi)
    dl = np.repeat(d16[:, None] * sc.astype(np.float32), 16, axis=1)
    q = np.clip(_rint(xb * _safe_inv(dl)), -nmax, nmax - 1)
    return d16, sc, q


def _pack_q3k_scales(sc):
    """16 six-bit codes (0..63) -> the 12 Q3_K scale bytes (see gguf.py)."""
    l = sc.astype(np.uint8)
    b = np.zeros((l.shape[0], 12), dtype=np.uint8)
    b[:, 0:8] = (l[:, 0:8] & 15) | ((l[:, 8:16] & 15) << 4)
    for k in range(4):
        b[:, 8:12] |= (l[:, 4 * k:4 * k + 4] >> 4) << (2 * k)
    return b


def encode_q3_k(x):
    d, sc, q = _sym_k(x, "Q3_K", 4, -32, 31)
    L = q + 4                                            # 0..7
    out = np.empty((L.shape[0], 110), dtype=np.uint8)
    out[:, 0:32] = _pack_bit_planes(L >> 2, 8)           # hmask: set = no -4
    out[:, 32:96] = _pack_crumbs(L & 3)
    out[:, 96:108] = _pack_q3k_scales(sc + 32)
    out[:, 108:110] = _f16_bytes(d)
    return out.tobytes()


def encode_q6_k(x):
    d, sc, q = _sym_k(x, "Q6_K", 32, -128, 127)
    nb = q.shape[0]
    L = (q + 32).astype(np.uint8).reshape(nb, 2, 4, 32)  # half, quarter k, i
    out = np.empty((nb, 210), dtype=np.uint8)
    ql = np.concatenate([(L[:, :, 0] & 15) | ((L[:, :, 2] & 15) << 4),
                         (L[:, :, 1] & 15) | ((L[:, :, 3] & 15) << 4)], axis=2)
    out[:, 0:128] = ql.reshape(nb, 128)
    qh = (L[:, :, 0] >> 4) | ((L[:, :, 1] >> 4) << 2) | ((L[:, :, 2] >> 4) << 4) \
        | ((L[:, :, 3] >> 4) << 6)
    out[:, 128:192] = qh.reshape(nb, 64)
    out[:, 192:208] = sc.astype(np.int8).view(np.uint8)
    out[:, 208:210] = _f16_bytes(d)
    return out.tobytes()


# ---- IQ4 (non-linear levels)

def _iq4_codes(xb, dl):
    """Nearest level index of each value for the (nonzero or zero) scales dl."""
    idx = _iq4_nearest(xb * _safe_inv(dl))
    return np.where(dl != 0, idx, np.uint8(8))


def encode_iq4_nl(x):
    xb = _blocks(x, 32, "IQ4_NL")
    d16 = _f16(_sym_fit_iq4(xb))
    idx = _iq4_codes(xb, d16[:, None])
    out = np.empty((xb.shape[0], 18), dtype=np.uint8)
    out[:, 0:2] = _f16_bytes(d16)
    out[:, 2:18] = _pack_nibbles(idx)
    return out.tobytes()


def encode_iq4_xs(x):
    xb = _blocks(x, QK_K, "IQ4_XS")
    nb = xb.shape[0]
    s = _sym_fit_iq4(xb.reshape(nb * 8, 32)).reshape(nb, 8)
    d16 = _f16(_signed_extreme(s) / np.float32(-32))
    ls = _sub_codes(s, d16, -32, 31) + 32                # 0..63
    dl = np.repeat(d16[:, None] * (ls - 32).astype(np.float32), 32, axis=1)
    idx = _iq4_codes(xb, dl)
    out = np.empty((nb, 136), dtype=np.uint8)
    out[:, 0:2] = _f16_bytes(d16)
    sh = np.zeros(nb, dtype=np.uint16)
    for ib in range(8):
        sh |= ((ls[:, ib] >> 4).astype(np.uint16) << (2 * ib)).astype(np.uint16)
    out[:, 2:4] = sh.astype("<u2").view(np.uint8).reshape(nb, 2)
    lo = (ls & 15).astype(np.uint8)
    out[:, 4:8] = lo[:, 0::2] | (lo[:, 1::2] << 4)
    out[:, 8:136] = _pack_nibbles(idx.reshape(nb, 8, 32)).reshape(nb, 128)
    return out.tobytes()


ENCODERS.update({
    GGML_Q4_0: encode_q4_0, GGML_Q4_1: encode_q4_1, GGML_Q5_0: encode_q5_0,
    GGML_Q5_1: encode_q5_1, GGML_Q2_K: encode_q2_k, GGML_Q3_K: encode_q3_k,
    GGML_Q4_K: encode_q4_k, GGML_Q5_K: encode_q5_k, GGML_Q6_K: encode_q6_k,
    GGML_IQ4_NL: encode_iq4_nl, GGML_IQ4_XS: encode_iq4_xs,
})

# ------------------------------------------------------------------ writer

class GGUFWriter:
    def __init__(self, alignment=DEFAULT_ALIGNMENT):
        self.alignment = alignment
        self.kv = []          # list of encoded (key, type, value) byte strings
        self.tensors = []     # dicts: name, ne, type, nbytes, produce

    # --- metadata
    def _add(self, key, vtype, payload):
        self.kv.append(_gguf_str(key) + struct.pack("<I", vtype) + payload)

    def add_scalar(self, key, vtype, value):
        if vtype == T_STRING:
            self._add(key, vtype, _gguf_str(value))
        else:
            self._add(key, vtype, struct.pack(_SCALAR_FMT[vtype], value))

    def add_u32(self, key, v): self.add_scalar(key, T_UINT32, v)
    def add_i32(self, key, v): self.add_scalar(key, T_INT32, v)
    def add_f32(self, key, v): self.add_scalar(key, T_FLOAT32, v)
    def add_bool(self, key, v): self.add_scalar(key, T_BOOL, bool(v))
    def add_str(self, key, v): self.add_scalar(key, T_STRING, v)

    def add_array(self, key, elem_type, values):
        if elem_type == T_STRING:
            body = b"".join(_gguf_str(s) for s in values)
            n = len(values)
        else:
            arr = np.asarray(values)
            if elem_type == T_BOOL:
                arr = arr.astype(bool)
            arr = np.ascontiguousarray(arr, dtype=_NP_DTYPE[elem_type])
            body = arr.tobytes()
            n = arr.size
        self._add(key, T_ARRAY, struct.pack("<IQ", elem_type, n) + body)

    # --- tensors
    def add_tensor(self, name, ne, ggml_type, produce, ggml_type_in_header=None,
                   nbytes=None):
        """Register a tensor.

        ggml_type selects the encoder; ggml_type_in_header (default: the
        same) is the id written in the tensor info, so broken files can
        carry an unknown id over well-formed data.
        """
        ne = tuple(int(d) for d in ne)
        self.tensors.append({
            "name": name, "ne": ne, "type": ggml_type,
            "htype": ggml_type if ggml_type_in_header is None else ggml_type_in_header,
            "nbytes": tensor_nbytes(ne, ggml_type) if nbytes is None else nbytes,
            "produce": produce,
        })

    def header_bytes(self, magic=GGUF_MAGIC, n_tensors=None, n_kv=None):
        """Header, kv pairs and tensor infos, padded to the alignment.

        Also fills each tensor's "offset" (relative to the data start)."""
        parts = [magic, struct.pack("<I", GGUF_VERSION),
                 struct.pack("<Q", len(self.tensors) if n_tensors is None else n_tensors),
                 struct.pack("<Q", len(self.kv) if n_kv is None else n_kv)]
        parts.extend(self.kv)
        off = 0
        for t in self.tensors:
            t["offset"] = off
            parts.append(_gguf_str(t["name"]))
            parts.append(struct.pack("<I", len(t["ne"])))
            parts.append(struct.pack("<%dQ" % len(t["ne"]), *t["ne"]))
            parts.append(struct.pack("<IQ", t["htype"], off))
            off = _align(off + t["nbytes"], self.alignment)
        head = b"".join(parts)
        return head + b"\0" * (_align(len(head), self.alignment) - len(head))

    def write(self, path, magic=GGUF_MAGIC, n_tensors=None, n_kv=None):
        """Write the whole file; returns (data_start, file_size)."""
        head = self.header_bytes(magic, n_tensors, n_kv)
        with open(path, "wb") as f:
            f.write(head)
            pos = 0
            for t in self.tensors:
                if pos != t["offset"]:
                    f.write(b"\0" * (t["offset"] - pos))
                    pos = t["offset"]
                enc = ENCODERS[t["type"]]
                written = 0
                for chunk in t["produce"]():
                    b = enc(chunk)
                    f.write(b)
                    written += len(b)
                if written != t["nbytes"]:
                    raise RuntimeError("tensor %s: wrote %d bytes, expected %d"
                                       % (t["name"], written, t["nbytes"]))
                pos += written
            pad = _align(pos, self.alignment) - pos
            if pad:
                f.write(b"\0" * pad)
                pos += pad
        return len(head), len(head) + pos
