#!/usr/bin/python3
"""dequant_dump.py: dequantise raw ggml blocks with the float64 reference.

usage: tools/ref/dequant_dump.py TYPE IN.bin OUT
       tools/ref/dequant_dump.py --random TYPE NBLOCKS SEED OUT.bin

TYPE is a ggml type name, any case: q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k
q5_k q6_k iq4_nl iq4_xs (also f32 f16 bf16). IN.bin holds whole blocks of
that type, back to back, nothing else (its size must be a multiple of the
block size in bytes: 18 20 22 24 34 84 110 144 176 210 18 136). OUT gets the
dequantised values in block order, in the format its name ends with:
  .f64  raw little-endian float64 (8 bytes a value; the C side freads them)
  .f32  raw little-endian float32 of the same values (round to nearest even):
        what ggml's fp32 dequantiser gives bit for bit (tools/ref/gguf.py
        explains why), so a C decoder can memcmp, NaN payloads aside
  .npy  a NumPy float64 array
  anything else: text, one %.17g value a line

--random writes NBLOCKS random blocks of TYPE (numpy default_rng(SEED);
every fp16 field a random finite value, subnormals included, every other
byte uniform) to OUT.bin, for a C test that has no generator of its own.

The values are tools/ref/gguf.py's dequantize(): float64 of the fp16 fields
times the integer codes, exact. Exits 2 with a message on a usage error, an
unknown type or a size that is not whole blocks.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf as G  # noqa: E402

# byte offsets of the fp16 fields in each block type
F16_FIELDS = {
    G.GGML_Q4_0: (0,), G.GGML_Q4_1: (0, 2), G.GGML_Q5_0: (0,), G.GGML_Q5_1: (0, 2),
    G.GGML_Q8_0: (0,), G.GGML_Q2_K: (80, 82), G.GGML_Q3_K: (108,),
    G.GGML_Q4_K: (0, 2), G.GGML_Q5_K: (0, 2), G.GGML_Q6_K: (208,),
    G.GGML_IQ4_NL: (0,), G.GGML_IQ4_XS: (0,),
}


class Usage(Exception):
    pass


def type_id(name):
    t = G.GGML_TYPE_BY_NAME.get(name.upper())
    if t is None:
        raise Usage("unknown type %r (one of %s)" % (
            name, " ".join(n.lower() for n in G.GGML_TYPE_BY_NAME)))
    return t


def random_blocks(t, nb, seed):
    bb = G.GGML_TYPES[t][1]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)
    for at in F16_FIELDS.get(t, ()):
        v = raw[:, at:at + 2].copy().view("<u2")
        v &= np.uint16(0xFBFF)                 # exponent 31 -> 30: finite
        raw[:, at:at + 2] = v.view(np.uint8).reshape(nb, 2)
    return raw


def write(out, y):
    if out.endswith(".f64"):
        y.astype("<f8").tofile(out)
    elif out.endswith(".f32"):
        y.astype("<f4").tofile(out)
    elif out.endswith(".npy"):
        np.save(out, y)
    else:
        with open(out, "w") as f:
            f.write("".join("%.17g\n" % v for v in y.tolist()))


def main(argv):
    try:
        if argv[:1] == ["--random"]:
            if len(argv) != 5:
                raise Usage("--random TYPE NBLOCKS SEED OUT.bin")
            t = type_id(argv[1])
            if G.GGML_TYPES[t][0] == 1:
                raise Usage("--random is for the block types")
            try:
                nb, seed = int(argv[2]), int(argv[3])
            except ValueError:
                raise Usage("NBLOCKS and SEED must be integers")
            if nb < 0 or seed < 0:
                raise Usage("NBLOCKS and SEED must be >= 0")
            random_blocks(t, nb, seed).tofile(argv[4])
            return 0
        if len(argv) != 3:
            raise Usage("TYPE IN.bin OUT")
        t = type_id(argv[0])
        blk, bb, name = G.GGML_TYPES[t]
        raw = np.fromfile(argv[1], dtype=np.uint8)
        if raw.size % bb:
            raise Usage("%s: %d bytes is not a whole number of %d-byte %s blocks"
                        % (argv[1], raw.size, bb, name))
        with np.errstate(invalid="ignore", over="ignore"):
            y = G.dequantize(raw, t, raw.size // bb * blk)
        write(argv[2], y)
        return 0
    except Usage as e:
        sys.stderr.write("dequant_dump: %s\nusage: dequant_dump.py TYPE IN.bin OUT "
                         "| --random TYPE NBLOCKS SEED OUT.bin\n" % e)
        return 2
    except OSError as e:
        sys.stderr.write("dequant_dump: %s\n" % e)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
