#!/usr/bin/python3
"""hostile_gguf.py: hostile variants of a valid model file (issue 14: nothing a user
downloads can crash gemmaembed).

    tests/hostile_gguf.py KIND IN.gguf OUT.gguf
    tests/hostile_gguf.py --all [--small] TEXT.gguf MMPROJ.gguf DIR   every kind: DIR/KIND.gguf
    tests/hostile_gguf.py --list          the kinds, one a line: KIND BASE EXPECT

Reads IN (a tools/mkmodel file: BASE "text" is testdata/tiny-q8_0.gguf, "mmproj" the
combined testdata/tiny-mmproj-both-q8_0.gguf), applies KIND to its metadata or tensor
infos and writes OUT; the tensor data is copied as it is. EXPECT is a word the loader's
one-line error must hold (tests/test_hostile_models.sh checks it). Files with "sparse" in
their kind are sparse (holes written with seek): small on disk, large in apparent size.
With --small (fuzzing seeds, which the fuzzer reads whole, up to 1 MB) the sparse kinds
claim 4096 entries or 1000 tensors instead, conv-claim 64 channels and patch 8-pixel
patches. Standard library only.
"""

import struct
import sys

T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = \
    range(13)
SCALAR = {T_U8: 1, T_I8: 1, T_U16: 2, T_I16: 2, T_U32: 4, T_I32: 4, T_F32: 4, T_BOOL: 1,
          T_U64: 8, T_I64: 8, T_F64: 8}
GGML_F32 = 0
# (block elements, bytes) of the ggml types these files hold
TYPE_SIZE = {0: (1, 4), 1: (1, 2), 8: (32, 34), 30: (1, 2)}
A = "gemma-embedding2."
SMALL = False  # --small: the sparse kinds' counts for fuzzing seeds


class Hole:
    """n zero bytes written as a hole (seek) rather than as data."""

    def __init__(self, n):
        self.n = n


class Gguf:
    def __init__(self, path):
        b = open(path, "rb").read()
        assert b[:4] == b"GGUF", path
        self.version, nt, nkv = struct.unpack_from("<IQQ", b, 4)
        p = 24
        self.kv = []  # [key, type, value bytes (or a list of bytes and Holes)]
        for _ in range(nkv):
            n, = struct.unpack_from("<Q", b, p)
            key = b[p + 8:p + 8 + n].decode()
            p += 8 + n
            t, = struct.unpack_from("<I", b, p)
            p += 4
            q = self._skip(b, p, t)
            self.kv.append([key, t, b[p:q]])
            p = q
        self.tensors = []  # dicts: name, ne, type, offset
        for _ in range(nt):
            n, = struct.unpack_from("<Q", b, p)
            name = b[p + 8:p + 8 + n].decode()
            p += 8 + n
            nd, = struct.unpack_from("<I", b, p)
            ne = list(struct.unpack_from("<%dQ" % nd, b, p + 4))
            p += 4 + 8 * nd
            t, off = struct.unpack_from("<IQ", b, p)
            p += 12
            self.tensors.append(dict(name=name, ne=ne, type=t, offset=off))
        self.alignment = self.get("general.alignment", 32)
        start = (p + self.alignment - 1) // self.alignment * self.alignment
        self.data = [b[start:]]  # bytes and Holes, after the header
        self.size = len(self.data[0])

    @staticmethod
    def _skip(b, p, t):
        if t == T_STR:
            n, = struct.unpack_from("<Q", b, p)
            return p + 8 + n
        if t == T_ARR:
            et, n = struct.unpack_from("<IQ", b, p)
            p += 12
            if et == T_STR:
                for _ in range(n):
                    p = Gguf._skip(b, p, T_STR)
                return p
            return p + n * SCALAR[et]
        return p + SCALAR[t]

    # ---- metadata
    def find(self, key):
        for kv in self.kv:
            if kv[0] == key:
                return kv
        raise KeyError(key)

    def get(self, key, dflt=None):
        try:
            _, t, v = self.find(key)
        except KeyError:
            return dflt
        return struct.unpack_from({T_U32: "<I", T_I32: "<i", T_F32: "<f"}[t], v)[0]

    def set(self, key, t, value):
        """Set (or add) key to a scalar value of type t."""
        v = struct.pack({T_U32: "<I", T_I32: "<i", T_F32: "<f", T_F64: "<d"}[t], value)
        try:
            kv = self.find(key)
            kv[1], kv[2] = t, v
        except KeyError:
            self.kv.append([key, t, v])

    def set_str(self, key, value):
        v = value.encode()
        self.find(key)[1:] = [T_STR, struct.pack("<Q", len(v)) + v]

    def set_array(self, key, et, values):
        fmt = {T_I32: "i", T_I64: "q", T_U8: "B", T_BOOL: "B", T_F32: "f"}[et]
        v = struct.pack("<IQ%d%s" % (len(values), fmt), et, len(values), *values)
        try:
            kv = self.find(key)
            kv[1], kv[2] = T_ARR, v
        except KeyError:
            self.kv.append([key, T_ARR, v])

    def remove(self, key):
        self.kv.remove(self.find(key))

    # ---- tensors
    def tensor(self, name):
        for t in self.tensors:
            if t["name"] == name:
                return t
        raise KeyError(name)

    def nbytes(self, t):
        blk, size = TYPE_SIZE[t["type"]]
        n = 1
        for d in t["ne"]:
            n *= d
        return n // blk * size

    def poke_f32(self, name, value):
        """Set the first value of F32 tensor name (in the original data)."""
        t = self.tensor(name)
        assert t["type"] == GGML_F32
        b = bytearray(self.data[0])
        struct.pack_into("<f", b, t["offset"], value)
        self.data[0] = bytes(b)

    def append_data(self, nbytes, hole=False):
        """Room for nbytes more tensor data (aligned, zeros); returns its offset."""
        off = (self.size + self.alignment - 1) // self.alignment * self.alignment
        n = off + nbytes - self.size
        self.data.append(Hole(n) if hole else b"\0" * n)
        self.size += n
        return off

    # ---- output
    def write(self, path):
        parts = [b"GGUF", struct.pack("<IQQ", self.version, len(self.tensors), len(self.kv))]
        for key, t, v in self.kv:
            k = key.encode()
            parts += [struct.pack("<Q", len(k)), k, struct.pack("<I", t)]
            parts += v if isinstance(v, list) else [v]
        for t in self.tensors:
            n = t["name"].encode()
            parts += [struct.pack("<Q", len(n)), n, struct.pack("<I", len(t["ne"])),
                      struct.pack("<%dQ" % len(t["ne"]), *t["ne"]),
                      struct.pack("<IQ", t["type"], t["offset"])]
        size = 0
        with open(path, "wb") as f:
            def put(x):
                nonlocal size
                if isinstance(x, Hole):
                    f.seek(x.n, 1)
                    size += x.n
                else:
                    f.write(x)
                    size += len(x)
            for x in parts:
                put(x)
            put(b"\0" * (-size % self.alignment))
            for x in self.data:
                put(x)
            f.truncate(size)  # a trailing hole still counts


# ---------------------------------------------------------------- the kinds

def alias(g):
    """blk.0.attn_output (64 x 64) on blk.0.attn_k's data (64 x 32): the smaller one is
    repacked first and its buffer was handed to the bigger one."""
    g.tensor("blk.0.attn_output.weight")["offset"] = g.tensor("blk.0.attn_k.weight")["offset"]


def overlap(g):
    """blk.0.attn_output starts 64 bytes into blk.0.attn_k (partial overlap)."""
    g.tensor("blk.0.attn_output.weight")["offset"] = g.tensor("blk.0.attn_k.weight")["offset"] + 64


def overlap_mmproj(g):
    """v.blk.0.attn_out starts inside v.blk.0.attn_q's data."""
    g.tensor("v.blk.0.attn_out.weight")["offset"] = g.tensor("v.blk.0.attn_q.weight")["offset"] + 32


def dupkey(g):
    """gemma-embedding2.block_count twice (the second says 2)."""
    g.kv.append([A + "block_count", T_U32, struct.pack("<I", 2)])


def dupkey_mmproj(g):
    g.kv.append(["clip.vision.block_count", T_U32, struct.pack("<I", 1)])


def emptykey(g):
    """A metadata key of length 0."""
    g.kv.insert(0, ["", T_U32, struct.pack("<I", 1)])


def newline_arch(g):
    """general.architecture with a line break: the error quoting it was two lines."""
    g.set_str("general.architecture", "gemma\nsecond line")


def newline_tensor(g):
    """A tensor name with a line break, and an unknown type to be named in the error."""
    t = g.tensor("blk.0.attn_k.weight")
    t["name"], t["type"] = "blk.0.attn_k\nsecond line", 250


def boolarr(g):
    """sliding_window_pattern is a bool array: an element of 2 is not a bool."""
    g.set_array(A + "attention.sliding_window_pattern", T_BOOL, [2, 0, 1, 0])


def kvheads(g):
    """head_count_kv as INT64 values 2^32 + n: truncated to int they read 2 and 1."""
    g.set_array(A + "attention.head_count_kv", T_I64, [(1 << 32) + 2, (1 << 32) + 1] * 2)


def tokentype(g):
    """A token type outside llama.cpp's 0..6."""
    v = g.find("tokenizer.ggml.token_type")[2]
    n = struct.unpack_from("<Q", v, 4)[0]
    g.set_array("tokenizer.ggml.token_type", T_I32, [99] + [1] * (n - 1))


def scores(g):
    """The scores array one entry short of the vocabulary."""
    n = struct.unpack_from("<Q", g.find("tokenizer.ggml.tokens")[2], 4)[0]
    g.set_array("tokenizer.ggml.scores", T_F32, [0.0] * (n - 1))


def vocabrows(g):
    """token_embd has one row fewer than the vocabulary (843): an id past its end."""
    t = g.tensor("token_embd.weight")
    t["ne"][1] -= 1


def sparse_vocab(g):
    """64 Mi empty tokens (8 zero bytes each: a 512 MiB hole), no token types or scores."""
    n = 4096 if SMALL else 64 << 20
    g.find("tokenizer.ggml.tokens")[2] = [struct.pack("<IQ", T_STR, n), Hole(8 * n)]
    g.remove("tokenizer.ggml.token_type")
    g.remove("tokenizer.ggml.scores")


def sparse_merges(g):
    """64 Mi empty merges (a 512 MiB hole)."""
    n = 4096 if SMALL else 64 << 20
    g.find("tokenizer.ggml.merges")[2] = [struct.pack("<IQ", T_STR, n), Hole(8 * n)]


def sparse_tensors(g):
    """100,000 extra one-value tensors, their data a hole; blk.3.ffn_up is missing (so the
    file is refused): the reader's duplicate check was quadratic in the tensor count."""
    g.tensors.remove(g.tensor("blk.3.ffn_up.weight"))
    for i in range(1000 if SMALL else 100000):
        off = g.append_data(4, hole=True)
        g.tensors.append(dict(name="extra.%d" % i, ne=[1], type=GGML_F32, offset=off))


def text_float(key, value):
    def f(g):
        g.set(A + key, T_F32, value)
    f.__doc__ = "%s = %r" % (key, value)
    return f


def mm_float(key, value):
    def f(g):
        g.set(key, T_F32, value)
    f.__doc__ = "%s = %r" % (key, value)
    return f


def softcap(g):
    """final_logit_softcapping = NaN (not read by the engine, but no softcap)."""
    g.set(A + "final_logit_softcapping", T_F32, NAN)


def image_std(g):
    """clip.vision.image_std = [1, 0, 1] (not read: the graph scales pixels itself)."""
    g.set_array("clip.vision.image_std", T_F32, [1.0, 0.0, 1.0])


def image_mean(g):
    """clip.vision.image_mean = [0, inf, 0]."""
    g.set_array("clip.vision.image_mean", T_F32, [0.0, INF, 0.0])


def patch(g):
    """clip.vision.patch_size 32 and a matching v.patch_embd {32, 32, 3, D}: the image
    path cuts 16-pixel patches (768 values each), the tower read 3072 per patch."""
    p = 8 if SMALL else 32  # (a fuzzing seed stays under libFuzzer's 1 MB)
    g.set("clip.vision.patch_size", T_U32, p)
    t = g.tensor("v.patch_embd.weight")
    t["ne"] = [p, p, 3, t["ne"][3]]
    t["offset"] = g.append_data(g.nbytes(t))


def conv_claim(g):
    """a.conv1d.0 claims 4096 channels (its data is there, a hole) but a.conv1d.1 still
    takes 16: the loader sized a 600 MB buffer from the claim before checking the shapes."""
    c = 64 if SMALL else 4096
    t = g.tensor("a.conv1d.0.weight")
    t["ne"] = [3, 3, 1, c]
    t["offset"] = g.append_data(g.nbytes(t), hole=True)
    t = g.tensor("a.conv1d.1.weight")
    t["ne"] = [3, 3, 16, c]
    t["offset"] = g.append_data(g.nbytes(t), hole=True)


def clamp_inf(g):
    """a.blk.0.attn_q's input bounds [+inf, +inf]: ordered, but every input becomes inf."""
    g.poke_f32("a.blk.0.attn_q.input_min", INF)
    g.poke_f32("a.blk.0.attn_q.input_max", INF)


def k_rowwidth(g):
    """blk.0.attn_q (rows of 64) claims Q4_K, whose blocks hold 256 values."""
    g.tensor("blk.0.attn_q.weight")["type"] = 12


def k_unsupported(g):
    """blk.0.attn_q claims MXFP4 (a ggml type this build does not compute; rows of 64 split
    into its 32-value blocks, and its 17-byte blocks fit in the Q8_0 data)."""
    g.tensor("blk.0.attn_q.weight")["type"] = 39


def k_big_mmproj(g):
    """v.blk.0.attn_q claims Q6_K on rows of 64."""
    g.tensor("v.blk.0.attn_q.weight")["type"] = 14


NAN, INF = float("nan"), float("inf")
EPS = "attention.layer_norm_rms_epsilon"
VEPS = "clip.vision.attention.layer_norm_epsilon"
AEPS = "clip.audio.attention.layer_norm_epsilon"

# kind -> (base, function, a word the error message must hold)
KINDS = {
    "alias": ("text", alias, "attn_output"),
    "k-rowwidth": ("text", k_rowwidth, "block size"),
    "k-unsupported": ("text", k_unsupported, "MXFP4 is not supported"),
    "k-rowwidth-mmproj": ("mmproj", k_big_mmproj, "block size"),
    "overlap": ("text", overlap, "overlap"),
    "overlap-mmproj": ("mmproj", overlap_mmproj, "overlap"),
    "dupkey": ("text", dupkey, "block_count"),
    "dupkey-mmproj": ("mmproj", dupkey_mmproj, "clip.vision.block_count"),
    "emptykey": ("text", emptykey, "key"),
    "newline-arch": ("text", newline_arch, "architecture"),
    "newline-tensor": ("text", newline_tensor, "unknown tensor type"),
    "boolarr": ("text", boolarr, "sliding_window_pattern"),
    "kvheads": ("text", kvheads, "head_count_kv"),
    "tokentype": ("text", tokentype, "token_type"),
    "scores": ("text", scores, "scores"),
    "vocabrows": ("text", vocabrows, "token_embd"),
    "sparse-vocab": ("text", sparse_vocab, "tokens"),
    "sparse-merges": ("text", sparse_merges, "merge"),
    "sparse-tensors": ("text", sparse_tensors, "blk.3.ffn_up"),
    "eps-nan": ("text", text_float(EPS, NAN), EPS),
    "eps-inf": ("text", text_float(EPS, INF), EPS),
    "eps-0": ("text", text_float(EPS, 0.0), EPS),
    "rope-inf": ("text", text_float("rope.freq_base", INF), "rope.freq_base"),
    "rope-nan": ("text", text_float("rope.freq_base_swa", NAN), "rope.freq_base_swa"),
    "softcap": ("text", softcap, "final_logit_softcapping"),
    "image-std": ("mmproj", image_std, "image_std"),
    "image-mean": ("mmproj", image_mean, "image_mean"),
    "patch": ("mmproj", patch, "patch_size"),
    "conv-claim": ("mmproj", conv_claim, "a.conv1d.1.weight"),
    "clamp-inf": ("mmproj", clamp_inf, "a.blk.0.attn_q"),
}
for name, v in (("nan", NAN), ("0", 0.0), ("-1", -1.0), ("inf", INF)):
    KINDS["vision-eps-" + name] = ("mmproj", mm_float(VEPS, v), VEPS)
    KINDS["audio-eps-" + name] = ("mmproj", mm_float(AEPS, v), AEPS)


def main(argv):
    if argv == ["--list"]:
        for k, (base, _, expect) in KINDS.items():
            print(k, base, expect)
        return 0
    if argv[:2] == ["--all", "--small"]:
        global SMALL
        SMALL = True
        argv = argv[:1] + argv[2:]
    if len(argv) == 4 and argv[0] == "--all":
        for k, (base, fn, _) in KINDS.items():
            g = Gguf(argv[1] if base == "text" else argv[2])
            fn(g)
            g.write("%s/%s.gguf" % (argv[3], k))
        return 0
    if len(argv) != 3 or argv[0] not in KINDS:
        sys.stderr.write("usage: hostile_gguf.py KIND IN.gguf OUT.gguf (KIND: %s)\n"
                         % " ".join(KINDS))
        return 2
    g = Gguf(argv[1])
    KINDS[argv[0]][1](g)
    g.write(argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
