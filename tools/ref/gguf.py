#!/usr/bin/python3
"""Small independent GGUF v2/v3 reader for the NumPy reference.

Reads all metadata value types (including arrays), the tensor table and
general.alignment, and exposes tensor data through a numpy memmap.
Dequantises to float64: F32 (ggml type 0), F16 (1), Q4_0 (2), Q4_1 (3),
Q5_0 (6), Q5_1 (7), Q8_0 (8), Q2_K (10), Q3_K (11), Q4_K (12), Q5_K (13),
Q6_K (14), IQ4_NL (20), IQ4_XS (23) and BF16 (30).

Shape convention: ggml dims are {ne0, ne1, ...} with ne0 the fastest-varying
(the "in" dimension of a matrix). The numpy arrays returned here have the
reversed shape (..., ne1, ne0), i.e. (out, in) for a matrix.

What the dequantisers compute
-----------------------------
Written from ggml's block layouts (ggml-common.h) and the meaning of each
field, not from its code. Every value is computed in float64 from the
float64 value of each fp16 field (d, dmin, m) and the integer codes:

  Q4_0    y = d * (q - 8)                 q 4-bit
  Q4_1    y = d * q + m                   q 4-bit
  Q5_0    y = d * (q - 16)                q 5-bit (4 low bits + 1 bit of qh)
  Q5_1    y = d * q + m                   q 5-bit
  Q8_0    y = d * q                       q int8
  Q2_K    y = (d * sc) * q - (dmin * mn)  per 16: sc, mn 4-bit; q 2-bit
  Q3_K    y = (d * (sc - 32)) * q         per 16: sc 6-bit; q = 2 low bits
                                          - 4 unless the hmask bit is set
  Q4_K    y = (d * sc) * q - (dmin * mn)  per 32: sc, mn 6-bit; q 4-bit
  Q5_K    y = (d * sc) * q - (dmin * mn)  per 32: sc, mn 6-bit; q 5-bit
  Q6_K    y = (d * sc) * (q - 32)         per 16: sc int8; q 6-bit
  IQ4_NL  y = d * T[q]                    q 4-bit index into T below
  IQ4_XS  y = (d * (ls - 32)) * T[q]      per 32: ls 6-bit; q 4-bit index

with T = IQ4_NL_VALUES = (-127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53
69 89 113). The bit packing of each type is spelled out in its
_dq_* function below.

These float64 values are exact: every product above is of an fp16 value
(11 significant bits) and integers of at most 8 + 6 bits, and every sum
of two such exact products spans fewer than 53 bits (fp16 values are
multiples of 2^-24 below 2^16). ggml dequantises in fp32 (Q4_K: d1 = d*sc
and m1 = dmin*m are fp32 products, then y = d1*q - m1 in fp32; Q6_K:
y = d*sc*q). In fp32 each of those products is still exact (at most 24
significant bits: 11 + 5 + 7 for IQ4_XS and Q6_K, fewer elsewhere), so
ggml's only rounding is the final add/subtract of the types with a min
(Q4_1, Q5_1, Q2_K, Q4_K, Q5_K); the other types are exact in fp32 too.
Hence ggml's fp32 result is exactly float32(the value here), rounded to
nearest even, whatever the association or FMA contraction of the
products. The difference from fp32 ggml is that single final rounding
only. Infinite or NaN fp16 fields (random bytes) give inf/NaN in both.
tools/ref/dequant_dump.py writes these values for the C side to compare.
"""

import struct

import numpy as np

GGUF_MAGIC = b"GGUF"

# metadata value types
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, \
    T_U64, T_I64, T_F64 = range(13)

_SCALAR = {
    T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I",
    T_I32: "<i", T_F32: "<f", T_BOOL: "<?", T_U64: "<Q", T_I64: "<q",
    T_F64: "<d",
}
_NP_SCALAR = {
    T_U8: "<u1", T_I8: "<i1", T_U16: "<u2", T_I16: "<i2", T_U32: "<u4",
    T_I32: "<i4", T_F32: "<f4", T_BOOL: "<u1", T_U64: "<u8", T_I64: "<i8",
    T_F64: "<f8",
}

# ggml tensor types understood here: type -> (block elements, block bytes, name)
GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1 = 2, 3, 6, 7
GGML_Q2_K, GGML_Q3_K, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K = 10, 11, 12, 13, 14
GGML_IQ4_NL, GGML_IQ4_XS = 20, 23
QK_K = 256
GGML_TYPES = {
    GGML_F32: (1, 4, "F32"),
    GGML_F16: (1, 2, "F16"),
    GGML_Q4_0: (32, 18, "Q4_0"),
    GGML_Q4_1: (32, 20, "Q4_1"),
    GGML_Q5_0: (32, 22, "Q5_0"),
    GGML_Q5_1: (32, 24, "Q5_1"),
    GGML_Q8_0: (32, 34, "Q8_0"),
    GGML_Q2_K: (QK_K, 84, "Q2_K"),
    GGML_Q3_K: (QK_K, 110, "Q3_K"),
    GGML_Q4_K: (QK_K, 144, "Q4_K"),
    GGML_Q5_K: (QK_K, 176, "Q5_K"),
    GGML_Q6_K: (QK_K, 210, "Q6_K"),
    GGML_IQ4_NL: (32, 18, "IQ4_NL"),
    GGML_IQ4_XS: (QK_K, 136, "IQ4_XS"),
    GGML_BF16: (1, 2, "BF16"),
}
GGML_TYPE_BY_NAME = {v[2]: k for k, v in GGML_TYPES.items()}

# the 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl), ascending
IQ4_NL_VALUES = (-127, -104, -83, -65, -49, -35, -22, -10,
                 1, 13, 25, 38, 53, 69, 89, 113)


class GGUFError(Exception):
    pass


class TensorInfo:
    def __init__(self, name, dims, ggml_type, offset):
        self.name = name
        self.dims = tuple(dims)          # ggml order: (ne0, ne1, ...)
        self.type = ggml_type
        self.offset = offset             # relative to the data section
        self.n_elements = 1
        for d in self.dims:
            self.n_elements *= d

    @property
    def shape(self):
        """numpy shape (reversed ggml dims)."""
        return tuple(reversed(self.dims))

    @property
    def type_name(self):
        t = GGML_TYPES.get(self.type)
        return t[2] if t else "type%d" % self.type

    def nbytes(self):
        if self.type not in GGML_TYPES:
            raise GGUFError("tensor %s: unsupported ggml type %d"
                            % (self.name, self.type))
        blk, bb, _ = GGML_TYPES[self.type]
        if self.dims and self.dims[0] % blk != 0:
            raise GGUFError("tensor %s: ne0=%d not a multiple of block %d"
                            % (self.name, self.dims[0], blk))
        return self.n_elements // blk * bb


class _Cursor:
    def __init__(self, buf):
        self.buf = buf
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.buf):
            raise GGUFError("unexpected end of file at offset %d" % self.pos)
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def scalar(self, fmt):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]

    def string(self):
        n = self.scalar("<Q")
        return bytes(self.take(n)).decode("utf-8")


def _read_value(cur, vtype):
    if vtype in _SCALAR:
        return cur.scalar(_SCALAR[vtype])
    if vtype == T_STR:
        return cur.string()
    if vtype == T_ARR:
        etype = cur.scalar("<I")
        count = cur.scalar("<Q")
        if etype in _NP_SCALAR:
            dt = np.dtype(_NP_SCALAR[etype])
            raw = cur.take(count * dt.itemsize)
            arr = np.frombuffer(raw, dtype=dt, count=count)
            if etype == T_BOOL:
                return [bool(x) for x in arr]
            return arr.tolist()
        return [_read_value(cur, etype) for _ in range(count)]
    raise GGUFError("unknown metadata value type %d" % vtype)


class GGUFFile:
    def __init__(self, path):
        self.path = path
        self.mm = np.memmap(path, dtype=np.uint8, mode="r")
        cur = _Cursor(self.mm)
        if bytes(cur.take(4)) != GGUF_MAGIC:
            raise GGUFError("%s: bad magic" % path)
        self.version = cur.scalar("<I")
        if self.version not in (2, 3):
            raise GGUFError("%s: unsupported GGUF version %d"
                            % (path, self.version))
        n_tensors = cur.scalar("<Q")
        n_kv = cur.scalar("<Q")
        self.metadata = {}
        self.metadata_types = {}
        for _ in range(n_kv):
            key = cur.string()
            vtype = cur.scalar("<I")
            self.metadata[key] = _read_value(cur, vtype)
            self.metadata_types[key] = vtype
        self.tensors = {}
        self.tensor_order = []
        for _ in range(n_tensors):
            name = cur.string()
            nd = cur.scalar("<I")
            dims = [cur.scalar("<Q") for _ in range(nd)]
            ttype = cur.scalar("<I")
            off = cur.scalar("<Q")
            if name in self.tensors:
                raise GGUFError("duplicate tensor %s" % name)
            self.tensors[name] = TensorInfo(name, dims, ttype, off)
            self.tensor_order.append(name)
        self.alignment = int(self.metadata.get("general.alignment", 32))
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise GGUFError("bad general.alignment %d" % self.alignment)
        pos = cur.pos
        self.data_offset = (pos + self.alignment - 1) // self.alignment \
            * self.alignment
        for ti in self.tensors.values():
            if ti.type not in GGML_TYPES:
                continue  # only fails if that tensor is actually read
            end = self.data_offset + ti.offset + ti.nbytes()
            if end > len(self.mm):
                raise GGUFError("tensor %s runs past end of file" % ti.name)

    # ---- metadata helpers ----
    def get(self, key, default=None):
        return self.metadata.get(key, default)

    def require(self, key):
        if key not in self.metadata:
            raise GGUFError("missing metadata key %s" % key)
        return self.metadata[key]

    # ---- tensor data ----
    def info(self, name):
        if name not in self.tensors:
            raise GGUFError("missing tensor %s" % name)
        return self.tensors[name]

    def raw(self, name):
        ti = self.info(name)
        start = self.data_offset + ti.offset
        return self.mm[start:start + ti.nbytes()]

    def tensor(self, name):
        """Whole tensor dequantised to float64, numpy shape (reversed)."""
        ti = self.info(name)
        flat = dequantize(self.raw(name), ti.type, ti.n_elements)
        return flat.reshape(ti.shape)

    def rows(self, name, idx):
        """Selected rows (indices along ne1) of a 2-D tensor as float64,
        shape (len(idx), ne0), without touching the other rows."""
        ti = self.info(name)
        if len(ti.dims) != 2:
            raise GGUFError("rows(): %s is not 2-D" % name)
        ne0, ne1 = ti.dims
        blk, bb, _ = GGML_TYPES[ti.type]
        row_bytes = ne0 // blk * bb
        raw = self.raw(name)
        out = np.empty((len(idx), ne0), dtype=np.float64)
        for k, r in enumerate(idx):
            r = int(r)
            if r < 0 or r >= ne1:
                raise GGUFError("row %d out of range for %s" % (r, name))
            out[k] = dequantize(raw[r * row_bytes:(r + 1) * row_bytes],
                                ti.type, ne0)
        return out


# ---- dequantisers: raw bytes (nb blocks) -> float64 (nb, block elements) ----------

def _f16(b, at):
    """float64 (nb, 1) of the fp16 field at byte `at` of each block row of b."""
    return b[:, at:at + 2].copy().view("<f2").astype(np.float64)


def _nibbles(qs):
    """(nb, ..., k) bytes -> (nb, ..., 2k): the k low nibbles, then the k high."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.int64)


def _bit_planes(h, nbits):
    """(nb, k) bytes -> (nb, nbits * k): element b*k + i is bit b of byte i
    (the Q3_K hmask / Q5_K qh order: byte i % k, bit i // k)."""
    sh = np.arange(nbits, dtype=np.uint8)[None, :, None]
    return ((h[:, None, :] >> sh) & 1).reshape(h.shape[0], -1).astype(np.int64)


def _crumbs(qs):
    """Q2_K / Q3_K 2-bit codes: qs (nb, 64) -> (nb, 256). Element
    128*c + 32*j + i is bits 2j..2j+1 of byte 32*c + i (c in 0..1, j in 0..3,
    i in 0..31)."""
    nb = qs.shape[0]
    q = qs.reshape(nb, 2, 1, 32)
    sh = np.array([0, 2, 4, 6], dtype=np.uint8)[None, None, :, None]
    return ((q >> sh) & 3).reshape(nb, 256).astype(np.int64)


def _scale_min_k4(sb):
    """Q4_K / Q5_K 6-bit scales and mins of the 8 sub-blocks from the 12
    scale bytes (nb, 12). Sub-block j < 4: scale = b[j] & 63, min = b[j+4] & 63;
    j >= 4: scale = (b[j+4] & 15) | (b[j-4] >> 6) << 4,
            min   = (b[j+4] >> 4) | (b[j] >> 6) << 4."""
    b = sb.astype(np.int64)
    sc = np.empty((b.shape[0], 8), dtype=np.int64)
    mn = np.empty_like(sc)
    sc[:, :4] = b[:, 0:4] & 63
    mn[:, :4] = b[:, 4:8] & 63
    sc[:, 4:] = (b[:, 8:12] & 15) | ((b[:, 0:4] >> 6) << 4)
    mn[:, 4:] = (b[:, 8:12] >> 4) | ((b[:, 4:8] >> 6) << 4)
    return sc, mn


def _q3k_scales(sb):
    """Q3_K 6-bit scales of the 16 sub-blocks from the 12 scale bytes (nb, 12):
    sub-block s has low 4 bits (b[s % 8] >> 4*(s // 8)) & 15 and high 2 bits
    (b[8 + s % 4] >> 2*(s // 4)) & 3."""
    b = sb.astype(np.int64)
    s = np.arange(16)
    low = (b[:, s % 8] >> (4 * (s // 8))) & 15
    high = (b[:, 8 + s % 4] >> (2 * (s // 4))) & 3
    return low | (high << 4)


def _dq_q4_0(b):                      # d f16 | qs[16]
    return _f16(b, 0) * (_nibbles(b[:, 2:18]) - 8)


def _dq_q4_1(b):                      # d f16 | m f16 | qs[16]
    return _f16(b, 0) * _nibbles(b[:, 4:20]) + _f16(b, 2)


def _qh32(b, at):
    """Q5_0 / Q5_1: bit i of the little-endian uint32 qh is bit 4 of element i."""
    qh = b[:, at:at + 4].copy().view("<u4").astype(np.int64)       # (nb, 1)
    return ((qh >> np.arange(32)[None, :]) & 1) << 4


def _dq_q5_0(b):                      # d f16 | qh[4] | qs[16]
    return _f16(b, 0) * ((_nibbles(b[:, 6:22]) | _qh32(b, 2)) - 16)


def _dq_q5_1(b):                      # d f16 | m f16 | qh[4] | qs[16]
    return _f16(b, 0) * (_nibbles(b[:, 8:24]) | _qh32(b, 4)) + _f16(b, 2)


def _dq_q8_0(b):                      # d f16 | qs[32] int8
    return _f16(b, 0) * b[:, 2:34].copy().view(np.int8).astype(np.float64)


def _dq_q2_k(b):                      # scales[16] | qs[64] | d f16 | dmin f16
    sc = b[:, 0:16].astype(np.int64)
    dl = np.repeat(_f16(b, 80) * (sc & 15), 16, axis=1)
    ml = np.repeat(_f16(b, 82) * (sc >> 4), 16, axis=1)
    return dl * _crumbs(b[:, 16:80]) - ml


def _dq_q3_k(b):                      # hmask[32] | qs[64] | scales[12] | d f16
    q = _crumbs(b[:, 32:96]) - 4 * (1 - _bit_planes(b[:, 0:32], 8))
    dl = np.repeat(_f16(b, 108) * (_q3k_scales(b[:, 96:108]) - 32), 16, axis=1)
    return dl * q


def _dq_q4_k(b):                      # d f16 | dmin f16 | scales[12] | qs[128]
    nb = b.shape[0]
    sc, mn = _scale_min_k4(b[:, 4:16])
    # 64-element chunk c: low nibbles of qs[32c..32c+31], then their high nibbles
    q = _nibbles(b[:, 16:144].reshape(nb, 4, 32)).reshape(nb, 256)
    d1 = np.repeat(_f16(b, 0) * sc, 32, axis=1)
    m1 = np.repeat(_f16(b, 2) * mn, 32, axis=1)
    return d1 * q - m1


def _dq_q5_k(b):                      # d | dmin | scales[12] | qh[32] | qs[128]
    nb = b.shape[0]
    sc, mn = _scale_min_k4(b[:, 4:16])
    q = _nibbles(b[:, 48:176].reshape(nb, 4, 32)).reshape(nb, 256) \
        + 16 * _bit_planes(b[:, 16:48], 8)
    d1 = np.repeat(_f16(b, 0) * sc, 32, axis=1)
    m1 = np.repeat(_f16(b, 2) * mn, 32, axis=1)
    return d1 * q - m1


def _dq_q6_k(b):                      # ql[128] | qh[64] | scales[16] int8 | d f16
    nb = b.shape[0]
    # 128-element half h: low 4 bits from ql[64h..64h+63] (low nibbles give
    # elements 0..63, high nibbles 64..127); high 2 bits of element 32*k + i
    # are bits 2k..2k+1 of qh[32h + i]
    low = _nibbles(b[:, 0:128].reshape(nb, 2, 64))                  # (nb, 2, 128)
    qh = b[:, 128:192].reshape(nb, 2, 1, 32)
    sh = np.array([0, 2, 4, 6], dtype=np.uint8)[None, None, :, None]
    high = ((qh >> sh) & 3).reshape(nb, 2, 128).astype(np.int64)
    q = (low | (high << 4)).reshape(nb, 256) - 32
    sc = b[:, 192:208].copy().view(np.int8).astype(np.int64)
    return np.repeat(_f16(b, 208) * sc, 16, axis=1) * q


_IQ4 = np.array(IQ4_NL_VALUES, dtype=np.int64)


def _dq_iq4_nl(b):                    # d f16 | qs[16]
    return _f16(b, 0) * _IQ4[_nibbles(b[:, 2:18])]


def _dq_iq4_xs(b):                    # d f16 | scales_h u16 | scales_l[4] | qs[128]
    nb = b.shape[0]
    sh = b[:, 2:4].copy().view("<u2").astype(np.int64)             # (nb, 1)
    sl = b[:, 4:8].astype(np.int64)
    ib = np.arange(8)
    ls = ((sl[:, ib // 2] >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4)
    q = _IQ4[_nibbles(b[:, 8:136].reshape(nb, 8, 16))].reshape(nb, 256)
    return np.repeat(_f16(b, 0) * (ls - 32), 32, axis=1) * q


_DEQUANT = {
    GGML_Q4_0: _dq_q4_0, GGML_Q4_1: _dq_q4_1, GGML_Q5_0: _dq_q5_0,
    GGML_Q5_1: _dq_q5_1, GGML_Q8_0: _dq_q8_0, GGML_Q2_K: _dq_q2_k,
    GGML_Q3_K: _dq_q3_k, GGML_Q4_K: _dq_q4_k, GGML_Q5_K: _dq_q5_k,
    GGML_Q6_K: _dq_q6_k, GGML_IQ4_NL: _dq_iq4_nl, GGML_IQ4_XS: _dq_iq4_xs,
}


def dequantize(raw, ggml_type, n):
    """raw: uint8 array of the packed data; returns float64 flat array of n
    values (n a multiple of the type's block size for the block types)."""
    raw = np.asarray(raw, dtype=np.uint8)
    if ggml_type == GGML_F32:
        return raw.view("<f4").astype(np.float64)[:n]
    if ggml_type == GGML_F16:
        return raw.view("<f2").astype(np.float64)[:n]
    if ggml_type == GGML_BF16:
        u16 = raw.view("<u2").astype(np.uint32)
        return (u16 << 16).view("<f4").astype(np.float64)[:n]
    if ggml_type in _DEQUANT:
        blk, bb, name = GGML_TYPES[ggml_type]
        if n % blk:
            raise GGUFError("%s: %d values is not a whole number of %d-value blocks"
                            % (name, n, blk))
        nb = n // blk
        if raw.size < nb * bb:
            raise GGUFError("%s: %d bytes for %d blocks of %d" % (name, raw.size, nb, bb))
        out = np.empty(n, dtype=np.float64)
        step = 1 << 14                      # blocks per slice: bounded temporaries
        for b0 in range(0, nb, step):
            b1 = min(nb, b0 + step)
            blocks = raw[b0 * bb:b1 * bb].reshape(b1 - b0, bb)
            with np.errstate(invalid="ignore", over="ignore"):
                out[b0 * blk:b1 * blk] = _DEQUANT[ggml_type](blocks).reshape(-1)
        return out
    raise GGUFError("unsupported ggml type %d" % ggml_type)


def open_gguf(path):
    return GGUFFile(path)


if __name__ == "__main__":
    import sys
    g = GGUFFile(sys.argv[1])
    print("version", g.version, "alignment", g.alignment,
          "data_offset", g.data_offset)
    for k, v in g.metadata.items():
        if isinstance(v, list) and len(v) > 8:
            v = "[%d items: %r ...]" % (len(v), v[:4])
        print("%s = %r" % (k, v))
    for name in g.tensor_order:
        ti = g.tensors[name]
        print("%-40s %-6s %s" % (name, ti.type_name, list(ti.dims)))
