#!/usr/bin/python3
"""Small independent GGUF v2/v3 reader for the NumPy reference.

Reads all metadata value types (including arrays), the tensor table and
general.alignment, and exposes tensor data through a numpy memmap. Dequantises
F32 (ggml type 0), F16 (1), Q8_0 (8) and BF16 (30) to float64.

Shape convention: ggml dims are {ne0, ne1, ...} with ne0 the fastest-varying
(the "in" dimension of a matrix). The numpy arrays returned here have the
reversed shape (..., ne1, ne0), i.e. (out, in) for a matrix.
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
GGML_TYPES = {
    GGML_F32: (1, 4, "F32"),
    GGML_F16: (1, 2, "F16"),
    GGML_Q8_0: (32, 34, "Q8_0"),
    GGML_BF16: (1, 2, "BF16"),
}


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


def dequantize(raw, ggml_type, n):
    """raw: uint8 array of the packed data; returns float64 flat array."""
    raw = np.asarray(raw, dtype=np.uint8)
    if ggml_type == GGML_F32:
        return raw.view("<f4").astype(np.float64)[:n]
    if ggml_type == GGML_F16:
        return raw.view("<f2").astype(np.float64)[:n]
    if ggml_type == GGML_BF16:
        u16 = raw.view("<u2").astype(np.uint32)
        return (u16 << 16).view("<f4").astype(np.float64)[:n]
    if ggml_type == GGML_Q8_0:
        nb = n // 32
        blocks = raw[:nb * 34].reshape(nb, 34)
        d = blocks[:, 0:2].copy().view("<f2").astype(np.float64)  # (nb, 1)
        q = blocks[:, 2:34].copy().view(np.int8).astype(np.float64)
        return (d * q).reshape(-1)
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
