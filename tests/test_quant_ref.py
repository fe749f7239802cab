#!/usr/bin/python3
"""Tests of the block types on the Python side (issue 15); needs no C code.

usage: tests/test_quant_ref.py

  - tools/ref/gguf.py's vectorised dequantisers against a second, loop-based
    transcription of ggml's dequantisation loops below, evaluated in fp32 in
    ggml's order of operations: on random blocks (every bit pattern of every
    field, fp16 fields finite) the loop's fp32 result equals float32(the
    float64 reference) bit for bit, for every type; and on hand-made blocks
    with known values;
  - tools/gguf_writer.py's quantisers: relative RMS error bounds on N(0, 1)
    rows for every type, every code field in range, every bit of every
    non-fp16 field used by some block of a test matrix (sub-block scales up to
    63, the Q3_K/Q5_K/Q6_K high bits, negative Q6_K scales, IQ4_XS scales_h...),
    determinism (same input -> same bytes, whatever the chunking of the rows),
    zero and constant rows;
  - tools/mkmodel: the type plan of the mixes (q4_k_m, q5_k_m, q3_k_m, q6_k)
    against llama-quantize's rules on the real preset (24 layers) and the
    small and tiny presets (row-width fallbacks), --type-map, the row-width
    error of a plain type, general.file_type, the small preset's row widths,
    and small files of every type that tools/ref/gguf.py reads back;
  - tools/ref/dequant_dump.py: its output equals gguf.dequantize in every
    format.

Prints "PASS: name" / "FAIL: name: detail" per check and a closing
"N passed, N failed"; exits 1 on any failure.
"""

import os
import shutil
import subprocess
import sys
import tempfile

from importlib.machinery import SourceFileLoader

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gguf as G  # noqa: E402
import gguf_writer as gw  # noqa: E402
from selfcheck import check, finish  # noqa: E402

PY = sys.executable or "/usr/bin/python3"
TMP = tempfile.mkdtemp(prefix="test_quant_ref.")
BLOCK_TYPES = [t for t, (blk, _, _) in G.GGML_TYPES.items() if blk > 1]
NEW_TYPES = [G.GGML_Q4_0, G.GGML_Q4_1, G.GGML_Q5_0, G.GGML_Q5_1, G.GGML_Q2_K,
             G.GGML_Q3_K, G.GGML_Q4_K, G.GGML_Q5_K, G.GGML_Q6_K, G.GGML_IQ4_NL,
             G.GGML_IQ4_XS]
NAME = {t: G.GGML_TYPES[t][2] for t in G.GGML_TYPES}
F = np.float32


# ============================================================ loop transcription
# One block at a time, element by element, in the order of ggml's
# dequantize_row_* loops and with its fp32 arithmetic (numpy float32 scalars:
# every operation rounds to fp32 as C does without contraction).

def h(b, at):
    return F(np.frombuffer(bytes(b[at:at + 2]), "<f2")[0])


def u32(b, at):
    return int.from_bytes(bytes(b[at:at + 4]), "little")


def loop_q4_0(b):
    d, y = h(b, 0), [None] * 32
    for j in range(16):
        y[j] = F(int(b[2 + j] & 15) - 8) * d
        y[j + 16] = F(int(b[2 + j] >> 4) - 8) * d
    return y


def loop_q4_1(b):
    d, m, y = h(b, 0), h(b, 2), [None] * 32
    for j in range(16):
        y[j] = F(int(b[4 + j] & 15)) * d + m
        y[j + 16] = F(int(b[4 + j] >> 4)) * d + m
    return y


def loop_q5(b, has_min):
    d = h(b, 0)
    m = h(b, 2) if has_min else F(0)
    qh = u32(b, 4 if has_min else 2)
    qs = 8 if has_min else 6
    y = [None] * 32
    for j in range(16):
        x0 = (int(b[qs + j] & 15) | (((qh >> j) << 4) & 0x10))
        x1 = (int(b[qs + j] >> 4) | ((qh >> (j + 12)) & 0x10))
        if has_min:
            y[j], y[j + 16] = F(x0) * d + m, F(x1) * d + m
        else:
            y[j], y[j + 16] = F(x0 - 16) * d, F(x1 - 16) * d
    return y


def loop_q8_0(b):
    d = h(b, 0)
    return [F(int(np.int8(np.uint8(b[2 + j])))) * d for j in range(32)]


def loop_q2_k(b):
    d, mn = h(b, 80), h(b, 82)
    y, q, isc = [], 16, 0
    for _n in range(2):
        shift = 0
        for _j in range(4):
            for half in range(2):
                sc = int(b[isc])
                isc += 1
                dl, ml = d * F(sc & 15), mn * F(sc >> 4)
                for l in range(16):
                    y.append(dl * F((int(b[q + 16 * half + l]) >> shift) & 3) - ml)
            shift += 2
        q += 32
    return y


def loop_q3_k(b):
    d_all = h(b, 108)
    raw = [int(v) for v in b[96:108]]
    scales = []
    for s in range(16):
        lo = (raw[s % 8] >> (0 if s < 8 else 4)) & 15
        hi = (raw[8 + s % 4] >> (2 * (s // 4))) & 3
        scales.append(lo | (hi << 4))
    y, q, m, isc = [], 32, 1, 0
    for _n in range(2):
        shift = 0
        for _j in range(4):
            for half in range(2):
                dl = d_all * F(scales[isc] - 32)
                isc += 1
                for l in range(16):
                    qq = (int(b[q + 16 * half + l]) >> shift) & 3
                    qq -= 0 if (int(b[16 * half + l]) & m) else 4
                    y.append(dl * F(qq))
            shift += 2
            m <<= 1
        q += 32
    return y


def scale_min_k4(j, q):
    q = [int(v) for v in q]
    if j < 4:
        return q[j] & 63, q[j + 4] & 63
    return (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)


def loop_q45_k(b, five):
    d, mn = h(b, 0), h(b, 2)
    ql = 48 if five else 16
    y, u1, u2 = [], 1, 2
    for c in range(4):
        sc, m = scale_min_k4(2 * c, b[4:16])
        d1, m1 = d * F(sc), mn * F(m)
        sc, m = scale_min_k4(2 * c + 1, b[4:16])
        d2, m2 = d * F(sc), mn * F(m)
        for l in range(32):
            v = int(b[ql + 32 * c + l]) & 15
            if five and int(b[16 + l]) & u1:
                v += 16
            y.append(d1 * F(v) - m1)
        for l in range(32):
            v = int(b[ql + 32 * c + l]) >> 4
            if five and int(b[16 + l]) & u2:
                v += 16
            y.append(d2 * F(v) - m2)
        u1 <<= 2
        u2 <<= 2
    return y


def loop_q6_k(b):
    d = h(b, 208)
    y = [None] * 256
    for n in range(2):
        ql, qh, sc = 64 * n, 128 + 32 * n, 192 + 8 * n
        for l in range(32):
            isc = l // 16
            L0, L32, H = int(b[ql + l]), int(b[ql + l + 32]), int(b[qh + l])
            q1 = ((L0 & 15) | (((H >> 0) & 3) << 4)) - 32
            q2 = ((L32 & 15) | (((H >> 2) & 3) << 4)) - 32
            q3 = ((L0 >> 4) | (((H >> 4) & 3) << 4)) - 32
            q4 = ((L32 >> 4) | (((H >> 6) & 3) << 4)) - 32
            s = [F(int(np.int8(np.uint8(b[sc + isc + k])))) for k in (0, 2, 4, 6)]
            y[128 * n + l] = d * s[0] * F(q1)
            y[128 * n + l + 32] = d * s[1] * F(q2)
            y[128 * n + l + 64] = d * s[2] * F(q3)
            y[128 * n + l + 96] = d * s[3] * F(q4)
    return y


KV = [F(v) for v in G.IQ4_NL_VALUES]


def loop_iq4_nl(b):
    d, y = h(b, 0), [None] * 32
    for j in range(16):
        y[j] = d * KV[int(b[2 + j]) & 15]
        y[j + 16] = d * KV[int(b[2 + j]) >> 4]
    return y


def loop_iq4_xs(b):
    d = h(b, 0)
    sh = int(b[2]) | (int(b[3]) << 8)
    y = []
    for ib in range(8):
        ls = ((int(b[4 + ib // 2]) >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4)
        dl = d * F(ls - 32)
        blk = [None] * 32
        for j in range(16):
            qb = int(b[8 + 16 * ib + j])
            blk[j], blk[j + 16] = dl * KV[qb & 15], dl * KV[qb >> 4]
        y += blk
    return y


LOOPS = {
    G.GGML_Q4_0: loop_q4_0, G.GGML_Q4_1: loop_q4_1,
    G.GGML_Q5_0: lambda b: loop_q5(b, False), G.GGML_Q5_1: lambda b: loop_q5(b, True),
    G.GGML_Q8_0: loop_q8_0, G.GGML_Q2_K: loop_q2_k, G.GGML_Q3_K: loop_q3_k,
    G.GGML_Q4_K: lambda b: loop_q45_k(b, False), G.GGML_Q5_K: lambda b: loop_q45_k(b, True),
    G.GGML_Q6_K: loop_q6_k, G.GGML_IQ4_NL: loop_iq4_nl, G.GGML_IQ4_XS: loop_iq4_xs,
}
# byte offsets of the fp16 fields of each block
F16_FIELDS = {
    G.GGML_Q4_0: (0,), G.GGML_Q4_1: (0, 2), G.GGML_Q5_0: (0,), G.GGML_Q5_1: (0, 2),
    G.GGML_Q8_0: (0,), G.GGML_Q2_K: (80, 82), G.GGML_Q3_K: (108,),
    G.GGML_Q4_K: (0, 2), G.GGML_Q5_K: (0, 2), G.GGML_Q6_K: (208,),
    G.GGML_IQ4_NL: (0,), G.GGML_IQ4_XS: (0,),
}


def random_blocks(t, nb, seed, finite=True):
    """nb random blocks; with finite, every fp16 field a random finite value of
    any exponent (subnormals included)."""
    rng = np.random.default_rng([seed, t])
    bb = G.GGML_TYPES[t][1]
    raw = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)
    if finite:
        for at in F16_FIELDS[t]:
            v = raw[:, at:at + 2].copy().view("<u2")
            v &= np.uint16(0xFBFF)           # exponent 31 -> 30: no inf/NaN
            raw[:, at:at + 2] = v.view(np.uint8).reshape(nb, 2)
    return raw


def same_f32(a, b):
    """Bit equality of float32 arrays, NaN equal to NaN."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    both_nan = np.isnan(a) & np.isnan(b)
    return np.all((a.view(np.uint32) == b.view(np.uint32)) | both_nan)


for _t in BLOCK_TYPES:
    @check("dequant %s: vectorised float64 == loop fp32 in ggml's order, bit for bit "
           "(random blocks)" % NAME[_t])
    def _(t=_t):
        blk, bb, _ = G.GGML_TYPES[t]
        nb = 24 if blk == 256 else 200
        raw = random_blocks(t, nb, 1)
        ref = G.dequantize(raw.reshape(-1), t, nb * blk)
        loop = np.array([v for i in range(nb) for v in LOOPS[t](raw[i])], dtype=np.float32)
        if not np.all(np.isfinite(ref)):
            return False, "non-finite values from finite fields"
        if not same_f32(ref.astype(np.float32), loop):
            k = int(np.argmax(ref.astype(np.float32) != loop))
            return False, "first difference at %d: ref %r loop %r" % (k, ref[k], loop[k])
        # the float64 value is exact: it differs from its fp32 rounding by at most
        # half an fp32 ulp, and equals it for the types without a min
        err = np.abs(ref - loop.astype(np.float64))
        ulp = np.spacing(np.abs(loop)).astype(np.float64)
        if np.any(err > ulp / 2):
            return False, "float64 value more than half an fp32 ulp from ggml's"
        if t not in (G.GGML_Q4_1, G.GGML_Q5_1, G.GGML_Q2_K, G.GGML_Q4_K, G.GGML_Q5_K) \
                and np.any(err != 0):
            return False, "a type without a min is not exact in fp32"
        return None

    @check("dequant %s: any bytes (inf/NaN fp16 fields too) give the loop's fp32 values"
           % NAME[_t])
    def _(t=_t):
        blk, bb, _ = G.GGML_TYPES[t]
        nb = 16 if blk == 256 else 128
        raw = random_blocks(t, nb, 2, finite=False)
        for at in F16_FIELDS[t]:                 # make some fields inf and NaN
            raw[0:nb // 4, at:at + 2] = [0x00, 0x7C]
            raw[nb // 4:nb // 2, at:at + 2] = [0x01, 0xFE]
        with np.errstate(invalid="ignore", over="ignore"):
            ref = G.dequantize(raw.reshape(-1), t, nb * blk).astype(np.float32)
            loop = np.array([v for i in range(nb) for v in LOOPS[t](raw[i])],
                            dtype=np.float32)
        if not same_f32(ref, loop):
            return False, "differs"
        return None


def block_bytes(t, fields):
    """One block of type t from {offset: bytes} (the rest zero)."""
    b = bytearray(G.GGML_TYPES[t][1])
    for at, v in fields.items():
        b[at:at + len(v)] = v
    return np.frombuffer(bytes(b), np.uint8)


def f16b(v):
    return np.float16(v).tobytes()


@check("dequant: hand-made blocks with known values")
def _():
    bad = []
    # Q4_K: d = 0.5, dmin = 0.25; sub-block 0: scale 63, min 1; sub-block 5:
    # scale (b[9] & 15) | (b[1] >> 6) << 4 = 5 | 2<<4 = 37, min (b[9] >> 4) | (b[5] >> 6) << 4
    # = 3 | 1<<4 = 19; qs byte 0 = 0x2F: element 0 code 15, element 32 code 2
    sc = bytearray(12)
    sc[0] = 63
    sc[4] = 1
    sc[1] = 2 << 6
    sc[5] = 1 << 6
    sc[9] = 5 | (3 << 4)
    qs = bytearray(128)
    qs[0] = 0x2F
    qs[64 + 3] = 0x70                       # chunk 2 (128..191), byte 3, high nibble: 163
    b = block_bytes(G.GGML_Q4_K, {0: f16b(0.5), 2: f16b(0.25), 4: bytes(sc), 16: bytes(qs)})
    y = G.dequantize(b, G.GGML_Q4_K, 256)
    # element 0: 0.5*63*15 - 0.25*1; element 32: sub-block 1 (scale b[1]&63 = 0, min
    # b[5]&63 = 0) -> 0; element 64*2+32+3 = 163 (sub-block 5, high nibble 7)
    for k, want in ((0, 0.5 * 63 * 15 - 0.25), (32, 0.0), (163, 0.5 * 37 * 7 - 0.25 * 19),
                    (162, -0.25 * 19)):
        if y[k] != want:
            bad.append("Q4_K[%d] = %r want %r" % (k, y[k], want))
    # Q6_K: d = 2, scale[3] = -5 (elements 48..63); element 50 = 128*0 + 32*1 + 18:
    # low from ql[32 + 18] & 15, high bits 2..3 of qh[18]; code 0b10_0111 = 39 -> 7
    ql = bytearray(128)
    qh = bytearray(64)
    ql[50] = 0x07
    qh[18] = 2 << 2
    scl = bytearray(16)
    scl[3] = (-5) & 255
    b = block_bytes(G.GGML_Q6_K, {0: bytes(ql), 128: bytes(qh), 192: bytes(scl),
                                  208: f16b(2.0)})
    y = G.dequantize(b, G.GGML_Q6_K, 256)
    if y[50] != 2 * -5 * 7 or y[51] != 2 * -5 * -32:
        bad.append("Q6_K %r %r" % (y[50], y[51]))
    # Q3_K: d = 1; scale 9 (elements 144..159) = low (b[1] >> 4) | high
    # ((b[9] >> 4) & 3) << 4: 0xA | 1<<4 = 26 -> -6; element 150 = 128 + 16 + 6:
    # qs[32 + 16 + 6] bits 0..1 = 3, hmask[16 + 6] bit 4 set -> q = 3
    scb = bytearray(12)
    scb[1] = 0xA0
    scb[9] = 1 << 4
    qs = bytearray(64)
    qs[54] = 3
    hm = bytearray(32)
    hm[22] = 1 << 4
    b = block_bytes(G.GGML_Q3_K, {0: bytes(hm), 32: bytes(qs), 96: bytes(scb),
                                  108: f16b(1.0)})
    y = G.dequantize(b, G.GGML_Q3_K, 256)
    if y[150] != -6 * 3 or y[151] != -6 * -4:
        bad.append("Q3_K %r %r" % (y[150], y[151]))
    # IQ4_XS: d = 0.5, sub-block 3: ls = (b[5] >> 4) | ((sh >> 6) & 3) << 4 = 1 | 3 << 4 = 49
    # -> 17; element 3*32 + 20 = high nibble of qs[16*3 + 4] = 15 -> 113
    qs = bytearray(128)
    qs[52] = 0xF0
    b = block_bytes(G.GGML_IQ4_XS, {0: f16b(0.5), 2: (3 << 6).to_bytes(2, "little"),
                                    4: bytes([0, 0x10, 0, 0]), 8: bytes(qs)})
    y = G.dequantize(b, G.GGML_IQ4_XS, 256)
    if y[116] != 0.5 * 17 * 113 or y[96] != 0.5 * 17 * -127:
        bad.append("IQ4_XS %r %r" % (y[116], y[96]))
    # Q5_0: d = 1, qh bit 20 set: element 20 = (high nibble of qs[4]) | 16 -> 31 - 16
    b = block_bytes(G.GGML_Q5_0, {0: f16b(1.0), 2: (1 << 20).to_bytes(4, "little"),
                                  6 + 4: bytes([0xF0])})
    y = G.dequantize(b, G.GGML_Q5_0, 32)
    if y[20] != 15 or y[4] != -16 or y[19] != -16:
        bad.append("Q5_0 %r %r" % (y[20], y[4]))
    # Q2_K: d = 1, dmin = 0.5, scale byte 13 = 0x37 (elements 208..223 = 128 + 64 + 16..31:
    # bits 4..5 of qs[32 + 16 + l]) -> 7*q - 0.5*3
    qs = bytearray(64)
    qs[32 + 16 + 2] = 2 << 4
    scb = bytearray(16)
    scb[13] = 0x37
    b = block_bytes(G.GGML_Q2_K, {0: bytes(scb), 16: bytes(qs), 80: f16b(1.0),
                                  82: f16b(0.5)})
    y = G.dequantize(b, G.GGML_Q2_K, 256)
    if y[210] != 7 * 2 - 1.5 or y[209] != -1.5:
        bad.append("Q2_K %r %r" % (y[210], y[209]))
    return (False, "; ".join(bad)) if bad else None


@check("dequant: IQ4_NL table is ggml's kvalues_iq4nl")
def _():
    want = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]
    b = block_bytes(G.GGML_IQ4_NL, {0: f16b(1.0), 2: bytes(i | ((15 - i) << 4)
                                                          for i in range(16))})
    y = G.dequantize(b, G.GGML_IQ4_NL, 32)
    ok = list(G.IQ4_NL_VALUES) == want and list(gw.IQ4_NL_VALUES) == want
    ok = ok and list(y[:16]) == want and list(y[16:]) == want[::-1]
    return None if ok else (False, str(y))


# ================================================================== quantisers
# relative RMS error bounds on N(0, 1) rows (measured: Q4_0 0.086, Q4_1 0.078,
# Q5_0 0.043, Q5_1 0.038, Q2_K 0.275, Q3_K 0.144, Q4_K 0.072, Q5_K 0.036,
# Q6_K 0.017, IQ4_NL 0.074, IQ4_XS 0.074, Q8_0 0.0053)
RMS_BOUND = {
    G.GGML_Q4_0: 0.095, G.GGML_Q4_1: 0.085, G.GGML_Q5_0: 0.047, G.GGML_Q5_1: 0.042,
    G.GGML_Q2_K: 0.30, G.GGML_Q3_K: 0.16, G.GGML_Q4_K: 0.078, G.GGML_Q5_K: 0.04,
    G.GGML_Q6_K: 0.019, G.GGML_IQ4_NL: 0.08, G.GGML_IQ4_XS: 0.08, G.GGML_Q8_0: 0.006,
}


def roundtrip(t, x):
    raw = np.frombuffer(gw.ENCODERS[t](x), np.uint8)
    return raw, G.dequantize(raw, t, x.size).reshape(x.shape)


def rel_rms(x, y):
    x = x.astype(np.float64)
    return float(np.sqrt(np.mean((y - x) ** 2) / np.mean(x ** 2)))


X = np.random.default_rng(7).standard_normal((48, 1024), dtype=np.float32)
# every 32-value block with its own magnitude (a factor e^U(-4, 4)) and some
# blocks shifted off zero: exercises every scale and min code
_rng = np.random.default_rng(8)
XV = (X.reshape(-1, 32) * np.exp(_rng.uniform(-4, 4, (X.size // 32, 1)))
      + _rng.choice([0.0, 0.0, 1.0, -2.0], (X.size // 32, 1))).astype(np.float32) \
    .reshape(X.shape)


for _t in NEW_TYPES + [G.GGML_Q8_0]:
    @check("quant %s: relative RMS error on N(0,1) rows < %g, scale-free"
           % (NAME[_t], RMS_BOUND[_t]))
    def _(t=_t):
        _, y = roundtrip(t, X)
        e = rel_rms(X, y)
        _, y2 = roundtrip(t, X * np.float32(1e-3))
        e2 = rel_rms(X * np.float32(1e-3), y2)
        if not e < RMS_BOUND[t]:
            return False, "rel RMS %.4f" % e
        if not e2 < RMS_BOUND[t] * 1.1:
            return False, "rel RMS %.4f at scale 1e-3" % e2
        return True, "rel RMS %.4f, %.4f at 1e-3" % (e, e2)


def fields(t, raw):
    """{field name: (values, bits)} of every non-fp16 code field of the blocks
    (values as integers; bits = the field's width)."""
    blk, bb, _ = G.GGML_TYPES[t]
    b = raw.reshape(-1, bb).astype(np.int64)
    out = {}
    if t in (G.GGML_Q4_0, G.GGML_IQ4_NL):
        out["qs"] = (b[:, 2:18], 8)
    elif t == G.GGML_Q4_1:
        out["qs"] = (b[:, 4:20], 8)
    elif t == G.GGML_Q5_0:
        out["qh"], out["qs"] = (b[:, 2:6], 8), (b[:, 6:22], 8)
    elif t == G.GGML_Q5_1:
        out["qh"], out["qs"] = (b[:, 4:8], 8), (b[:, 8:24], 8)
    elif t == G.GGML_Q8_0:
        out["qs"] = (b[:, 2:34], 8)
    elif t == G.GGML_Q2_K:
        out["scales"], out["qs"] = (b[:, 0:16], 8), (b[:, 16:80], 8)
    elif t == G.GGML_Q3_K:
        out["hmask"], out["qs"] = (b[:, 0:32], 8), (b[:, 32:96], 8)
        out["scales"] = (b[:, 96:108], 8)
        out["scale codes"] = (G._q3k_scales(b[:, 96:108]), 6)
    elif t in (G.GGML_Q4_K, G.GGML_Q5_K):
        out["scales"] = (b[:, 4:16], 8)
        sc, mn = G._scale_min_k4(b[:, 4:16])
        out["scale codes"], out["min codes"] = (sc, 6), (mn, 6)
        if t == G.GGML_Q5_K:
            out["qh"], out["qs"] = (b[:, 16:48], 8), (b[:, 48:176], 8)
        else:
            out["qs"] = (b[:, 16:144], 8)
    elif t == G.GGML_Q6_K:
        out["ql"], out["qh"] = (b[:, 0:128], 8), (b[:, 128:192], 8)
        out["scales"] = (b[:, 192:208], 8)
    elif t == G.GGML_IQ4_XS:
        out["scales_h"] = (b[:, 2:4], 8)
        out["scales_l"], out["qs"] = (b[:, 4:8], 8), (b[:, 8:136], 8)
    return out


for _t in NEW_TYPES + [G.GGML_Q8_0]:
    @check("quant %s: every bit of every code field is used (varied-magnitude blocks), "
           "fields in range" % NAME[_t])
    def _(t=_t):
        raw, y = roundtrip(t, XV)
        missing = []
        for name, (v, nbits) in fields(t, raw).items():
            for bit in range(nbits):
                col = (v >> bit) & 1
                if col.min() != 0 or col.max() != 1:
                    missing.append("%s bit %d always %d" % (name, bit, col.min()))
        # ranges that the byte layout alone does not bound
        b = raw.reshape(-1, G.GGML_TYPES[t][1])
        if t == G.GGML_Q2_K and not (b[:, 0:16] >> 4).max() <= 15:
            missing.append("Q2_K min code > 15")
        if t == G.GGML_Q6_K:
            sc = b[:, 192:208].view(np.int8)
            if sc.min() != -128 or sc.max() < 100:
                missing.append("Q6_K scales span %d..%d" % (sc.min(), sc.max()))
        if not np.all(np.isfinite(y)):
            missing.append("non-finite values")
        e = rel_rms(XV, y)
        if e > RMS_BOUND[t] * 1.5:
            missing.append("rel RMS %.4f" % e)
        return (False, "; ".join(missing)) if missing else None


for _t in NEW_TYPES:
    @check("quant %s: deterministic, rows independent of the chunking, zero and "
           "constant rows" % NAME[_t])
    def _(t=_t):
        a = gw.ENCODERS[t](X)
        if a != gw.ENCODERS[t](X.copy()):
            return False, "two runs differ"
        if a != gw.ENCODERS[t](X[:20]) + gw.ENCODERS[t](X[20:]):
            return False, "rows depend on the chunk"
        z = np.zeros((2, 512), np.float32)
        z[1] = -0.75
        raw, y = roundtrip(t, z)
        if not np.all(y[0] == 0):
            return False, "zero row -> %r" % y[0][:4]
        if not np.allclose(y[1], -0.75, rtol=0.02):
            return False, "constant row -> %r" % y[1][:4]
        return None


# ================================================================= dequant_dump
DUMP = os.path.join(ROOT, "tools", "ref", "dequant_dump.py")


@check("dequant_dump.py: .f32 of every type, .f64 / .npy / text of two, equal "
       "gguf.dequantize")
def _():
    bad = []
    for t in BLOCK_TYPES:
        blk, bb, name = G.GGML_TYPES[t]
        raw = random_blocks(t, 3, 5)
        src = os.path.join(TMP, "in-%s.bin" % name)
        raw.tofile(src)
        ref = G.dequantize(raw.reshape(-1), t, 3 * blk)
        for ext in ("f64", "f32", "npy", "txt") if t in (G.GGML_Q4_K, G.GGML_IQ4_XS) \
                else ("f32",):
            out = os.path.join(TMP, "out-%s.%s" % (name, ext))
            p = subprocess.run([PY, DUMP, name.lower(), src, out], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
            if p.returncode != 0:
                bad.append("%s %s: exit %d %s" % (name, ext, p.returncode, p.stderr[-200:]))
                continue
            if ext == "f64":
                got = np.fromfile(out, "<f8")
            elif ext == "f32":
                got = np.fromfile(out, "<f4").astype(np.float64)
                if not same_f32(got, ref.astype(np.float32)):
                    bad.append("%s f32" % name)
                continue
            elif ext == "npy":
                got = np.load(out)
            else:
                got = np.array([float(v) for v in open(out).read().split()])
            if got.shape != ref.shape or not np.array_equal(got, ref):
                bad.append("%s %s" % (name, ext))
    # a size that is not whole blocks is an error (exit 2)
    p = subprocess.run([PY, DUMP, "q4_k", src, os.path.join(TMP, "x.f64")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 2:
        bad.append("partial block: exit %d" % p.returncode)
    return (False, "; ".join(bad)) if bad else None


# ================================================================== tools/mkmodel
MK = os.path.join(ROOT, "tools", "mkmodel")
FTYPE = {"q4_0": 2, "q4_1": 3, "q5_0": 8, "q5_1": 9, "q2_k": 10, "q3_k": 11, "q4_k": 14,
         "q5_k": 16, "q6_k": 18, "iq4_nl": 25, "iq4_xs": 30, "q3_k_m": 12, "q4_k_m": 15,
         "q5_k_m": 17, "f32": 0, "q8_0": 7}
PLAIN = {"q4_0": "Q4_0", "q4_1": "Q4_1", "q5_0": "Q5_0", "q5_1": "Q5_1", "q2_k": "Q2_K",
         "q3_k": "Q3_K", "q4_k": "Q4_K", "q5_k": "Q5_K", "q6_k": "Q6_K",
         "iq4_nl": "IQ4_NL", "iq4_xs": "IQ4_XS"}


def mk(*args):
    p = subprocess.run([PY, MK] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


MKMOD = SourceFileLoader("mkmodel", MK).load_module()


def plan(*args, cli=False):
    """{name: (type name, ggml shape)} of mkmodel ARGS: in this process (token_embd with
    1000 rows: no vocabulary is built), or with cli through `tools/mkmodel ... --plan`."""
    if not cli:
        a = MKMOD.parse_args(list(args) + ["--seed", "1", "--plan"])
        _, p = MKMOD.build_plan(a, vocab_size=1000)
        return {name: (gw.TYPE_NAMES[t], list(ne)) for name, ne, t, _ in p}
    rc, out, err = mk(*(list(args) + ["--seed", "1", "--plan"]))
    if rc != 0:
        raise RuntimeError("mkmodel %s: exit %d: %s" % (" ".join(args), rc, err[-300:]))
    rows = {}
    for line in out.splitlines():
        name, t, ne = line.split()
        rows[name] = (t, [int(v) for v in ne.split("x")])
    return rows


def layer(name):
    return int(name.split(".")[1]) if name.startswith("blk.") else -1


def expected_mix(mix, name, ne, n_layer):
    """The rule list of issue 15 / llama-quantize, written out independently of mkmodel."""
    if len(ne) == 1:
        return "F32"
    if name == "per_layer_model_proj.weight":
        return "BF16"
    base = {"q4_k_m": "Q4_K", "q5_k_m": "Q5_K", "q3_k_m": "Q3_K", "q6_k": "Q6_K"}[mix]
    if name == "output.weight":
        return "Q6_K"
    i = layer(name)
    more = i < n_layer // 8 or i >= 7 * n_layer // 8 or (i - n_layer // 8) % 3 == 2
    kind = name.split(".")[2] if i >= 0 else ""
    if mix in ("q4_k_m", "q5_k_m") and kind in ("attn_v", "ffn_down"):
        return "Q6_K" if more else base
    if mix == "q3_k_m":
        if kind == "attn_v":
            return "Q5_K" if i < 2 else "Q4_K"
        if kind == "ffn_down":
            return "Q5_K" if i < n_layer // 16 else "Q4_K"
        if kind == "attn_output":
            return "Q4_K"
    return base


@check("mkmodel mixes: the real preset's 24 layers get llama-quantize's types")
def _():
    bad = []
    plans = {}
    for mix in ("q4_k_m", "q5_k_m", "q3_k_m", "q6_k"):
        rows = plans[mix] = plan("--preset", "real", "--type", mix, cli=mix == "q4_k_m")
        if len(rows) != 3 + 17 * 24 + 2:
            bad.append("%s: %d tensors" % (mix, len(rows)))
        for name, (t, ne) in rows.items():
            want = expected_mix(mix, name, ne, 24)
            if t != want:
                bad.append("%s %s: %s, want %s" % (mix, name, t, want))
    more = [i for i in range(24) if plans["q4_k_m"]["blk.%d.attn_v.weight" % i][0] == "Q6_K"]
    if more != [0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23]:
        bad.append("q4_k_m Q6_K attn_v layers %s" % more)
    return (False, "; ".join(bad[:8])) if bad else None


@check("mkmodel mixes: small preset (2 layers) and tiny preset (llama-quantize's fallbacks)")
def _():
    bad = []
    for mix in ("q4_k_m", "q5_k_m", "q3_k_m", "q6_k"):
        for name, (t, ne) in plan("--preset", "small", "--type", mix).items():
            if t != expected_mix(mix, name, ne, 2):
                bad.append("small %s %s: %s" % (mix, name, t))
    # tiny: rows 64 (32 for ffn_down) wide: Q4_K -> Q5_0, Q5_K -> Q5_1, Q3_K -> Q4_0,
    # Q6_K -> Q8_0; output.weight straight to Q8_0
    fb = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q3_K": "Q4_0", "Q6_K": "Q8_0"}
    for mix in ("q4_k_m", "q5_k_m", "q3_k_m", "q6_k"):
        for name, (t, ne) in plan("--preset", "tiny", "--type", mix).items():
            want = expected_mix(mix, name, ne, 4)
            want = "Q8_0" if name == "output.weight" else fb.get(want, want)
            if t != want:
                bad.append("tiny %s %s: %s want %s" % (mix, name, t, want))
    # mmproj: the mix's default type on every matrix, with the fallback
    rows = plan("--mmproj", "both", "--preset", "tiny", "--type", "q4_k_m")
    types = {t for t, ne in rows.values() if len(ne) >= 2}
    if types != {"Q5_0", "F32"}:
        bad.append("tiny mmproj q4_k_m types %s" % sorted(types))
    rows = plan("--mmproj", "both", "--preset", "small", "--type", "q3_k_m")
    if {t for t, ne in rows.values() if len(ne) >= 2} != {"Q3_K", "F32"}:
        bad.append("small mmproj q3_k_m")
    return (False, "; ".join(bad[:8])) if bad else None


@check("mkmodel: small and real presets: every quantised row (text, vision, audio) a "
       "multiple of 256")
def _():
    bad = []
    for args in (["--preset", "small"], ["--mmproj", "both", "--preset", "small"],
                 ["--preset", "real"], ["--mmproj", "both", "--preset", "real"]):
        rows = plan(*(args + ["--type", "q4_k"]))
        for name, (t, ne) in rows.items():
            if t == "Q4_K" and ne[0] % 256:
                bad.append("%s %s" % (name, ne))
            if len(ne) >= 2 and t not in ("Q4_K", "F32", "BF16"):
                bad.append("%s %s" % (name, t))
        n = sum(t == "Q4_K" for t, _ in rows.values())
        if n < 10:
            bad.append("%s: only %d Q4_K tensors" % (" ".join(args), n))
    small = plan("--preset", "small", "--type", "f32")
    if small["blk.1.attn_output.weight"][1] != [512, 256] or \
            small["blk.0.attn_k.weight"][1] != [256, 128]:
        bad.append("small attention shapes")
    return (False, "; ".join(bad[:8])) if bad else None


@check("mkmodel: a plain block type on rows it cannot hold is exit 2 naming the tensor "
       "and --preset small")
def _():
    bad = []
    for args in (["--preset", "tiny", "--type", "q4_k"],
                 ["--mmproj", "vision", "--preset", "tiny", "--type", "iq4_xs"],
                 ["--preset", "tiny", "--type", "q8_0", "--type-map", "output.weight=q4_k"]):
        out = os.path.join(TMP, "bad.gguf")
        rc, so, err = mk(*(args + ["--seed", "1", "-o", out]))
        if rc != 2 or "--preset small" not in err or "weight" not in err or \
                os.path.exists(out):
            bad.append("%s: exit %d, %r" % (" ".join(args), rc, err[-200:]))
    # small rows take every type (and a 1-D match is ignored)
    rc, so, err = mk("--preset", "small", "--type", "q8_0", "--type-map",
                     "token_embd.weight=q3_k,blk.0.attn_q_norm.weight=q8_0", "--type-map",
                     "output.weight=q2_k,per_layer_model_proj.weight=q5_k", "--seed", "1",
                     "--plan")
    if rc != 0:
        bad.append("small type-map: exit %d %s" % (rc, err[-200:]))
    return (False, "; ".join(bad)) if bad else None


@check("mkmodel --type-map: fnmatch and re: patterns, last match wins, 1-D tensors stay "
       "F32, mixes fall back, bad maps are usage errors")
def _():
    bad = []
    rows = plan("--preset", "small", "--type", "q4_k", "--type-map",
                "blk.*.attn_v.weight=q8_0,re:ffn_(up|gate)=q5_k", "--type-map",
                "blk.1.attn_v.weight=f16,blk.0.*=q6_k")
    want = {"blk.0.attn_v.weight": "Q6_K", "blk.1.attn_v.weight": "F16",
            "blk.1.ffn_up.weight": "Q5_K", "blk.1.ffn_gate.weight": "Q5_K",
            "blk.0.ffn_up.weight": "Q6_K", "blk.1.ffn_down.weight": "Q4_K",
            "blk.0.attn_norm.weight": "F32", "blk.0.layer_output_scale.weight": "F32",
            "token_embd.weight": "Q4_K", "per_layer_model_proj.weight": "BF16"}
    for name, t in want.items():
        if rows[name][0] != t:
            bad.append("%s: %s want %s" % (name, rows[name][0], t))
    rows = plan("--preset", "tiny", "--type", "q4_k_m", "--type-map",
                "token_embd.weight=q6_k,output.weight=iq4_xs,blk.0.proj.weight=bf16")
    for name, t in (("token_embd.weight", "Q8_0"), ("output.weight", "IQ4_NL"),
                    ("blk.0.proj.weight", "BF16")):
        if rows[name][0] != t:
            bad.append("tiny mix %s: %s want %s" % (name, rows[name][0], t))
    for m in ("nonsense", "=q4_k", "x=q9_9", "re:(=q4_k", "a=q4_k_m"):
        rc, _, err = mk("--preset", "small", "--type", "q4_k", "--type-map", m,
                        "--seed", "1", "--plan")
        if rc != 2 or "type-map" not in err:
            bad.append("%r: exit %d %s" % (m, rc, err[-100:]))
    return (False, "; ".join(bad)) if bad else None


SMALL = {}


def small_file(typ):
    if typ not in SMALL:
        out = os.path.join(TMP, "small-%s.gguf" % typ)
        rc, so, err = mk("--preset", "small", "--type", typ, "--seed", "1", "-o", out)
        if rc != 0 or so or err:
            raise RuntimeError("mkmodel small %s: exit %d %s" % (typ, rc, err[-300:]))
        SMALL[typ] = out
    return SMALL[typ]


@check("mkmodel small files of every type and mix: general.file_type, the planned tensor "
       "types, matrices read back by gguf.py close to the f32 file's, deterministic")
def _():
    bad = []
    ref = G.GGUFFile(small_file("f32"))
    names = ["token_embd.weight", "blk.1.attn_v.weight", "blk.1.attn_output.weight",
             "blk.0.ffn_down.weight", "output.weight"]
    w32 = {n: ref.tensor(n) for n in names}
    for typ in list(PLAIN) + ["q4_k_m", "q5_k_m", "q3_k_m", "q8_0"]:
        g = G.GGUFFile(small_file(typ))
        if g.get("general.file_type") != FTYPE[typ]:
            bad.append("%s: file_type %r" % (typ, g.get("general.file_type")))
        rows = plan("--preset", "small", "--type", typ)
        got = {n: g.tensors[n].type_name for n in g.tensor_order}
        if got != {n: t for n, (t, _) in rows.items()}:
            bad.append("%s: tensor types differ from --plan" % typ)
        for n in names:
            t = g.tensors[n].type
            e = rel_rms(w32[n], g.tensor(n))
            if e > RMS_BOUND.get(t, 0.01) * 1.25:
                bad.append("%s %s (%s): rel RMS %.4f" % (typ, n, NAME[t], e))
        if typ in PLAIN and {NAME[g.tensors[n].type] for n in g.tensor_order
                             if len(g.tensors[n].dims) >= 2} != {PLAIN[typ], "BF16"}:
            bad.append("%s: matrix types" % typ)
    again = os.path.join(TMP, "again.gguf")
    mk("--preset", "small", "--type", "q4_k_m", "--seed", "1", "-o", again)
    with open(again, "rb") as f1, open(small_file("q4_k_m"), "rb") as f2:
        if f1.read() != f2.read():
            bad.append("q4_k_m: two runs differ")
    return (False, "; ".join(bad[:8])) if bad else None


@check("mkmodel --mmproj both --preset small --type q4_k: the vision and audio references "
       "read it")
def _():
    sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
    from vision import VisionTower
    from audio_tower import AudioTower
    out = os.path.join(TMP, "small-mm.gguf")
    rc, so, err = mk("--mmproj", "both", "--preset", "small", "--type", "q4_k", "--seed", "1",
                     "-o", out)
    if rc != 0:
        return False, err[-300:]
    g = G.GGUFFile(out)
    v, a = VisionTower(g), AudioTower(g)
    types = {g.tensors[n].type_name for n in g.tensor_order}
    if types != {"Q4_K", "F32"} or v.n_embd != 256 or a.n_embd != 256:
        return False, "types %s, widths %d %d" % (sorted(types), v.n_embd, a.n_embd)
    w = g.tensor("a.blk.1.conv_pw1.weight")
    return None if w.shape == (512, 256) and np.isfinite(w).all() else (False, str(w.shape))


if __name__ == "__main__":
    shutil.rmtree(TMP, ignore_errors=True)
    finish("test_quant_ref")
