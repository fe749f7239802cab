"""Minimal GGUF v3 writer and weight encoders used by tools/mkmodel.

Written for gemmaembed from the GGUF format description (little-endian, v3).
Only what the model generator needs: typed metadata, tensor infos with
aligned offsets, streamed tensor data, and the F32 / F16 / BF16 / Q8_0
encoders (Q8_0 and BF16 follow ggml's reference rounding rules).

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
