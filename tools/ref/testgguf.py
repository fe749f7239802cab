#!/usr/bin/python3
"""Throwaway GGUF writer for testing the reference on its own.

Writes a random-weight "gemma-embedding2" text model in the docs/gguf.md 3 layout,
with a small vocabulary (specials, byte tokens, characters) and BPE merges
learned from a small built-in corpus. This is NOT the project's generator
(tools/mkmodel); it exists so the reference and its self-test do not depend
on it.

usage: testgguf.py OUT.gguf [--type f32|f16|bf16|q8_0] [--seed N]
"""

import argparse
import struct
import sys

import numpy as np

import gguf as G

SPACE = "\u2581"


# ---------------------------------------------------------------- writer
def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(vtype, v):
    if vtype == G.T_STR:
        return _str(v)
    if vtype == G.T_ARR:
        etype, items = v
        out = struct.pack("<IQ", etype, len(items))
        return out + b"".join(_value(etype, x) for x in items)
    return struct.pack(G._SCALAR[vtype], v)


def quantize(x, ggml_type):
    """float array (numpy order) -> packed bytes."""
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    if ggml_type == G.GGML_F32:
        return x.astype("<f4").tobytes()
    if ggml_type == G.GGML_F16:
        return x.astype("<f2").tobytes()
    if ggml_type == G.GGML_BF16:
        u = x.astype("<f4").view("<u4").astype(np.uint64)
        r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16       # round to nearest even
        return r.astype("<u2").tobytes()
    if ggml_type == G.GGML_Q8_0:
        b = x.reshape(-1, 32)
        amax = np.max(np.abs(b), axis=1)
        d = (amax / 127.0).astype("<f2")
        d64 = d.astype(np.float64)
        inv = np.where(d64 > 0, 1.0 / np.where(d64 > 0, d64, 1.0), 0.0)
        q = np.clip(np.rint(b * inv[:, None]), -127, 127).astype(np.int8)
        out = np.empty((b.shape[0], 34), dtype=np.uint8)
        out[:, 0:2] = d.reshape(-1, 1).view(np.uint8)
        out[:, 2:] = q.view(np.uint8)
        return out.tobytes()
    raise ValueError("type %d" % ggml_type)


def write_gguf(path, kvs, tensors, alignment=32):
    """kvs: list of (key, vtype, value) (arrays: value = (etype, list));
    tensors: list of (name, numpy array, ggml_type)."""
    head = bytearray(b"GGUF")
    head += struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, vtype, val in kvs:
        head += _str(key) + struct.pack("<I", vtype) + _value(vtype, val)
    blobs = []
    off = 0
    for name, arr, ttype in tensors:
        dims = list(reversed(arr.shape))
        head += _str(name) + struct.pack("<I", len(dims))
        head += b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", ttype, off)
        blob = quantize(arr, ttype)
        pad = (-len(blob)) % alignment
        blobs.append(blob + b"\0" * pad)
        off += len(blob) + pad
    head += b"\0" * ((-len(head)) % alignment)
    with open(path, "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)


# ---------------------------------------------------------------- vocab
CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "The cat sat on the mat and the dog sat on the log",
    "task: search result | query: what is the capital of France",
    "title: none | text: Paris is the capital and largest city of France",
    "def main():\n    return 0\n\nint x = 1;\tfor (i = 0; i < n; i++)",
    "café naïve résumé über straße",
    "embedding models map text to vectors in a shared space",
    "retrieval classification clustering question answering",
]

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>",
            "<start_of_turn>", "<end_of_turn>", "<|image>", "<image|>",
            "<|image|>"]
EXTRA_CHARS = "éèêëàâäçîïôöùûüñßÉÀ中文字日本語漢€£"


def build_vocab(n_merges=150):
    tokens = list(SPECIALS)
    types = [3] * len(SPECIALS)
    types[3] = 2
    tokens.append("<user_tok>")
    types.append(4)
    for b in range(256):
        tokens.append("<0x%02X>" % b)
        types.append(6)
    chars = set()
    for c in range(33, 127):
        chars.add(chr(c))
    chars.update([SPACE, "\n", "\t"])
    chars.update(EXTRA_CHARS)
    for c in sorted(chars):
        tokens.append(c)
        types.append(1)
    # learn merges on the corpus (plain greedy BPE over whole strings)
    words = [list(t.replace(" ", SPACE)) for t in CORPUS]
    merges = []
    have = set(tokens)
    for _ in range(n_merges):
        counts = {}
        for w in words:
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        if not counts:
            break
        (a, b), c = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        if c < 2:
            break
        merges.append(a + " " + b)
        if a + b not in have:
            tokens.append(a + b)
            types.append(1)
            have.add(a + b)
        for w in words:
            i = 0
            while i < len(w) - 1:
                if w[i] == a and w[i + 1] == b:
                    w[i:i + 2] = [a + b]
                i += 1
    return tokens, types, merges


# ---------------------------------------------------------------- model
def make_model(path, ggml_type=G.GGML_F32, seed=1, n_embd=32, n_layer=3,
               pattern=(True, False, True), n_head=4, kv_swa=2, kv_full=1,
               hd_swa=8, hd_full=16, n_ff=64, n_ple=32, n_out=24, n_swa=6,
               vocab=None):
    rng = np.random.default_rng(seed)
    tokens, types, merges = vocab if vocab is not None else build_vocab()
    V = len(tokens)
    A = "gemma-embedding2."
    kvs = [
        ("general.architecture", G.T_STR, "gemma-embedding2"),
        ("general.name", G.T_STR, "ref-selftest"),
        ("general.alignment", G.T_U32, 32),
        (A + "context_length", G.T_U32, 8192),
        (A + "embedding_length", G.T_U32, n_embd),
        (A + "embedding_length_out", G.T_U32, n_out),
        (A + "embedding_length_per_layer_input", G.T_U32, n_ple),
        (A + "block_count", G.T_U32, n_layer),
        (A + "feed_forward_length", G.T_U32, n_ff),
        (A + "attention.head_count", G.T_U32, n_head),
        (A + "attention.head_count_kv", G.T_ARR,
         (G.T_I32, [kv_swa if s else kv_full for s in pattern])),
        (A + "attention.key_length", G.T_U32, hd_full),
        (A + "attention.value_length", G.T_U32, hd_full),
        (A + "attention.key_length_swa", G.T_U32, hd_swa),
        (A + "attention.value_length_swa", G.T_U32, hd_swa),
        (A + "attention.sliding_window", G.T_U32, n_swa),
        (A + "attention.sliding_window_pattern", G.T_ARR,
         (G.T_BOOL, list(pattern))),
        (A + "attention.shared_kv_layers", G.T_U32, 0),
        (A + "attention.layer_norm_rms_epsilon", G.T_F32, 1e-6),
        (A + "attention.causal", G.T_BOOL, False),
        (A + "rope.freq_base", G.T_F32, 1e6),
        (A + "rope.freq_base_swa", G.T_F32, 1e4),
        (A + "rope.dimension_count", G.T_U32, hd_full),
        (A + "rope.dimension_count_swa", G.T_U32, hd_swa),
        (A + "pooling_type", G.T_U32, 1),
        ("tokenizer.ggml.model", G.T_STR, "gemma4"),
        ("tokenizer.ggml.tokens", G.T_ARR, (G.T_STR, tokens)),
        ("tokenizer.ggml.scores", G.T_ARR, (G.T_F32, [0.0] * V)),
        ("tokenizer.ggml.token_type", G.T_ARR, (G.T_I32, types)),
        ("tokenizer.ggml.merges", G.T_ARR, (G.T_STR, merges)),
        ("tokenizer.ggml.bos_token_id", G.T_U32, 2),
        ("tokenizer.ggml.eos_token_id", G.T_U32, 1),
        ("tokenizer.ggml.unknown_token_id", G.T_U32, 3),
        ("tokenizer.ggml.padding_token_id", G.T_U32, 0),
        ("tokenizer.ggml.add_bos_token", G.T_BOOL, True),
        ("tokenizer.ggml.add_eos_token", G.T_BOOL, True),
        ("tokenizer.ggml.add_space_prefix", G.T_BOOL, False),
    ]

    def mat(out, inp):
        return rng.standard_normal((out, inp)) / np.sqrt(inp)

    def norm(n):
        return 1.0 + 0.1 * rng.standard_normal(n)

    ten = []
    qt = ggml_type

    def add(name, arr, t=None):
        if t is None:
            t = qt if arr.ndim >= 2 else G.GGML_F32
        ten.append((name, arr, t))

    add("token_embd.weight", rng.standard_normal((V, n_embd)) * 0.05)
    add("per_layer_model_proj.weight", mat(n_layer * n_ple, n_embd),
        G.GGML_BF16 if qt == G.GGML_Q8_0 else qt)
    add("per_layer_proj_norm.weight", norm(n_ple))
    for i, s in enumerate(pattern):
        hd = hd_swa if s else hd_full
        kv = kv_swa if s else kv_full
        p = "blk.%d." % i
        add(p + "attn_norm.weight", norm(n_embd))
        add(p + "attn_q.weight", mat(n_head * hd, n_embd))
        add(p + "attn_k.weight", mat(kv * hd, n_embd))
        add(p + "attn_v.weight", mat(kv * hd, n_embd))
        add(p + "attn_q_norm.weight", norm(hd))
        add(p + "attn_k_norm.weight", norm(hd))
        add(p + "attn_output.weight", mat(n_embd, n_head * hd))
        add(p + "post_attention_norm.weight", norm(n_embd))
        add(p + "ffn_norm.weight", norm(n_embd))
        add(p + "ffn_gate.weight", mat(n_ff, n_embd))
        add(p + "ffn_up.weight", mat(n_ff, n_embd))
        add(p + "ffn_down.weight", mat(n_embd, n_ff))
        add(p + "post_ffw_norm.weight", norm(n_embd))
        add(p + "inp_gate.weight", mat(n_ple, n_embd))
        add(p + "proj.weight", mat(n_embd, n_ple))
        add(p + "post_norm.weight", norm(n_embd))
        add(p + "layer_output_scale.weight",
            np.array([0.5 + rng.random()]))
    add("output_norm.weight", norm(n_embd))
    add("output.weight", mat(n_out, n_embd))
    write_gguf(path, kvs, ten)


TYPES = {"f32": G.GGML_F32, "f16": G.GGML_F16, "bf16": G.GGML_BF16,
         "q8_0": G.GGML_Q8_0}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--type", default="f32", choices=sorted(TYPES))
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    make_model(a.out, TYPES[a.type], a.seed)
    sys.exit(0)
