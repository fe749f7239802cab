#!/usr/bin/python3
"""Self-test of the NumPy reference (tools/ref); needs no C code.

usage: tests/ref_selftest.py [REAL_SHAPE_MODEL.gguf]

Checks the GGUF reader (round trip of every metadata and tensor type), the
tokenizer on hand-checkable vocabularies, RoPE / attention / mask / norm
invariants, the whole forward against a second, loop-based implementation
written differently, Matryoshka normalisation, that the goldens reproduce,
and the conditioning check (1e-6 relative input noise moves the output
cosine by < 1e-4) on a tiny model and, if present, on a real-shape model
(/tmp/real-q8_0.gguf or the path given as argv[1]).

Prints "PASS: name", "FAIL: name: detail" or "SKIP: name: reason" per
check, then "N passed, N failed, N skipped"; exits 1 on any failure.
"""

import json
import math
import os
import shutil
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gguf as G  # noqa: E402
import testgguf  # noqa: E402
from embed import PROMPTS, prompt_prefix  # noqa: E402
from model import (Model, attention, attention_mask, gelu_tanh,  # noqa: E402
                   l2_normalize, matryoshka, rms_norm, rope_neox)
from tokenizer import Tokenizer  # noqa: E402
from selfcheck import RESULTS, check, skip  # noqa: E402

TMP = tempfile.mkdtemp(prefix="ref_selftest.")


def cos(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# =================================================================== GGUF
@check("gguf: metadata of every value type round-trips")
def _():
    p = os.path.join(TMP, "meta.gguf")
    kvs = [
        ("u8", G.T_U8, 200), ("i8", G.T_I8, -100), ("u16", G.T_U16, 60000),
        ("i16", G.T_I16, -30000), ("u32", G.T_U32, 4000000000),
        ("i32", G.T_I32, -2000000000), ("f32", G.T_F32, 1.5),
        ("bool", G.T_BOOL, True), ("str", G.T_STR, "h\u00e9llo \u2581"),
        ("u64", G.T_U64, 2 ** 63 + 5), ("i64", G.T_I64, -(2 ** 62)),
        ("f64", G.T_F64, 0.1),
        ("general.alignment", G.T_U32, 64),
        ("a_i32", G.T_ARR, (G.T_I32, [1, -2, 3])),
        ("a_bool", G.T_ARR, (G.T_BOOL, [True, False, True])),
        ("a_str", G.T_ARR, (G.T_STR, ["a b", "", "\u4e2d"])),
        ("a_f64", G.T_ARR, (G.T_F64, [0.25, -1e300])),
        ("a_u8", G.T_ARR, (G.T_U8, [0, 255])),
        ("a_empty", G.T_ARR, (G.T_U32, [])),
        ("a_nested", G.T_ARR, (G.T_ARR, [(G.T_I16, [1, 2]),
                                         (G.T_STR, ["x"])])),
    ]
    tens = [("t", np.arange(6, dtype=np.float64).reshape(2, 3), G.GGML_F32)]
    testgguf.write_gguf(p, kvs, tens, alignment=64)
    g = G.GGUFFile(p)
    want = {k: (v[1] if t == G.T_ARR else v) for k, t, v in kvs}
    want["a_nested"] = [[1, 2], ["x"]]
    want["f32"] = 1.5
    bad = [k for k in want if g.metadata[k] != want[k]]
    if bad:
        return False, "mismatch in %s" % bad
    if g.alignment != 64 or g.data_offset % 64:
        return False, "alignment %d offset %d" % (g.alignment, g.data_offset)
    if g.tensor("t").tolist() != [[0, 1, 2], [3, 4, 5]]:
        return False, "tensor data"
    return True, ""


@check("gguf: F32/F16/BF16/Q8_0 tensors dequantise; shapes reversed")
def _():
    p = os.path.join(TMP, "types.gguf")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 64))
    tens = [("f32", x, G.GGML_F32), ("f16", x, G.GGML_F16),
            ("bf16", x, G.GGML_BF16), ("q8", x, G.GGML_Q8_0)]
    testgguf.write_gguf(p, [], tens)
    g = G.GGUFFile(p)
    errs = []
    if g.info("q8").dims != (64, 3) or g.tensor("q8").shape != (3, 64):
        errs.append("shape")
    if not np.array_equal(g.tensor("f32"), x.astype(np.float32)):
        errs.append("f32")
    if not np.array_equal(g.tensor("f16"), x.astype(np.float16)):
        errs.append("f16")
    b = g.tensor("bf16")
    if np.max(np.abs(b - x) / np.abs(x)) > 2 ** -8:
        errs.append("bf16 rel err")
    if not np.all((b.astype(np.float32).view(np.uint32) & 0xFFFF) == 0):
        errs.append("bf16 low bits")
    q = g.tensor("q8")
    blocks = x.reshape(3, 2, 32)
    d = np.max(np.abs(blocks), axis=2, keepdims=True) / 127
    if np.any(np.abs(q.reshape(3, 2, 32) - blocks) > d * 0.5 + 1e-3 * d):
        errs.append("q8 error > d/2")
    if not np.array_equal(g.rows("q8", [2, 0]), q[[2, 0]]):
        errs.append("rows() != tensor() rows")
    # exact hand-made block
    raw = np.zeros(34, dtype=np.uint8)
    raw[0:2] = np.array([0.5], dtype="<f2").view(np.uint8)
    raw[2:] = np.arange(-16, 16, dtype=np.int8).view(np.uint8)
    v = G.dequantize(raw, G.GGML_Q8_0, 32)
    if not np.array_equal(v, 0.5 * np.arange(-16, 16)):
        errs.append("hand Q8_0 block")
    raw = np.array([0x80, 0x3F, 0x49, 0x40], dtype=np.uint8)  # 1.0, 3.140625
    if G.dequantize(raw, G.GGML_BF16, 2).tolist() != [1.0, 3.140625]:
        errs.append("hand BF16")
    return (not errs), ", ".join(errs)


@check("gguf: bad magic / version / truncated data are rejected")
def _():
    p = os.path.join(TMP, "bad.gguf")
    testgguf.write_gguf(p, [], [("t", np.zeros((4, 32)), G.GGML_F32)])
    good = open(p, "rb").read()
    errs = []
    for name, blob in (("magic", b"GGUX" + good[4:]),
                       ("version", good[:4] + b"\x07\0\0\0" + good[8:]),
                       ("truncated", good[:-8])):
        open(p, "wb").write(blob)
        try:
            G.GGUFFile(p)
            errs.append(name)
        except G.GGUFError:
            pass
    return (not errs), ("accepted: %s" % errs) if errs else ""


# =============================================================== tokenizer
def toy_tokenizer(extra_tokens=(), merges=(), add_bos=True, add_eos=True):
    toks = ["<pad>", "<eos>", "<bos>", "<unk>", "<start>",
            "<start_of_turn>", "<u>"]
    types = [3, 3, 3, 2, 3, 3, 4]
    for b in range(256):
        toks.append("<0x%02X>" % b)
        types.append(6)
    for t in ["a", "b", "c", "\u2581", "\n", "x", "y"] + list(extra_tokens):
        toks.append(t)
        types.append(1)
    return Tokenizer(toks, types, list(merges), bos_id=2, eos_id=1,
                     unk_id=3, add_bos=add_bos, add_eos=add_eos)


def pieces(tok, text):
    return [tok.tokens[i] for i in tok.encode(text, add_special=False)]


@check("tokenizer: merges by rank, leftmost on ties, chained merges")
def _():
    t = toy_tokenizer(["ab", "bc", "abc", "aa", "aaaa"],
                      ["a b", "b c", "ab c", "a a", "aa aa"])
    cases = [("abc", ["abc"]),          # a b (r0) then ab c (r2)
             ("aaa", ["aa", "a"]),     # leftmost a a first
             ("aaaaa", ["aaaa", "a"]),
             ("cab", ["c", "ab"]),
             ("", [])]
    t2 = toy_tokenizer(["ab", "bc"], ["b c", "a b"])
    bad = ["%r->%r" % (s, pieces(t, s)) for s, w in cases
           if pieces(t, s) != w]
    if pieces(t2, "abc") != ["a", "bc"]:   # rank beats position
        bad.append("rank order: %r" % pieces(t2, "abc"))
    return (not bad), "; ".join(bad)


@check("tokenizer: spaces become U+2581, no dummy prefix, no pre-split")
def _():
    t = toy_tokenizer(["\u2581a", "a\u2581", "\u2581\u2581", "\n\u2581"],
                      ["\u2581 a", "\u2581 \u2581", "\n \u2581"])
    cases = [(" a", ["\u2581a"]), ("a", ["a"]),
             ("b a", ["b", "\u2581a"]),
             ("a   ", ["a", "\u2581\u2581", "\u2581"]),
             ("x\n y", ["x", "\n\u2581", "y"])]
    bad = ["%r->%r" % (s, pieces(t, s)) for s, w in cases
           if pieces(t, s) != w]
    return (not bad), "; ".join(bad)


@check("tokenizer: byte fallback in uppercase <0xHH>, unk fused")
def _():
    t = toy_tokenizer(["\u00e9x"], ["\u00e9 x"])
    bad = []
    if pieces(t, "a\u00e9") != ["a", "<0xC3>", "<0xA9>"]:
        bad.append(repr(pieces(t, "a\u00e9")))
    if pieces(t, "\U0001F600") != ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]:
        bad.append("emoji %r" % pieces(t, "\U0001F600"))
    # no byte tokens at all -> unk, consecutive unknowns fused
    t2 = Tokenizer(["<eos>", "<bos>", "<unk>", "a"], [3, 3, 2, 1], [],
                   bos_id=1, eos_id=0, unk_id=2, add_bos=True, add_eos=True)
    if t2.encode("a\u00e9\u00e9a") != [1, 3, 2, 3, 0]:
        bad.append("unk %r" % t2.encode("a\u00e9\u00e9a"))
    if t.decode(t.encode("a\u00e9 \U0001F600", add_special=False)) != \
            "a\u00e9 \U0001F600":
        bad.append("decode round trip")
    return (not bad), "; ".join(bad)


@check("tokenizer: control/user tokens split by exact, longest match")
def _():
    t = toy_tokenizer(["ab"], ["a b"])
    sot = t.vocab["<start_of_turn>"]
    st = t.vocab["<start>"]
    u = t.vocab["<u>"]
    a, b, ab = t.vocab["a"], t.vocab["b"], t.vocab["ab"]
    cases = [("a<start_of_turn>b", [2, a, sot, b, 1]),
             ("a<start>b", [2, a, st, b, 1]),
             ("<start><start_of_turn>", [2, st, sot, 1]),
             ("a<u>b<u>", [2, a, u, b, u, 1]),
             ("ab", [2, ab, 1]),
             ("<start_of_turn", None),          # no match: plain chars
             ("", [2, 1])]
    bad = []
    for s, want in cases:
        got = t.encode(s)
        if want is None:
            if sot in got or st in got:
                bad.append(s)
        elif got != want:
            bad.append("%r->%r" % (s, got))
    t3 = toy_tokenizer(add_bos=False, add_eos=False)
    if t3.encode("a") != [t3.vocab["a"]]:
        bad.append("add_bos/eos false")
    return (not bad), "; ".join(bad)


@check("prompts: docs/model.md 2.2 table and aliases, case-insensitive")
def _():
    want = {
        "task: search result | query: ": ["query", "Retrieval-query",
                                          "Retrieval", "Reranking",
                                          "BitextMining", "SearchQuery"],
        "title: none | text: ": ["document", "Document",
                                 "Retrieval-document"],
        "task: classification | query: ": ["Classification",
                                           "MultilabelClassification",
                                           "classification"],
        "task: clustering | query: ": ["Clustering", "clustering"],
        "task: code retrieval | query: ": ["CodeRetrieval",
                                           "InstructionRetrieval", "code"],
        "task: fact checking | query: ": ["FactChecking", "fact"],
        "task: question answering | query: ": ["QuestionAnswering", "qa"],
        "task: sentence similarity | query: ": [
            "STS", "SentenceSimilarity", "PairClassification",
            "Summarization", "sts"],
    }
    bad = [n for p, ns in want.items() for n in ns + [x.upper() for x in ns]
           if prompt_prefix(n) != p]
    n_names = sum(len(set(x.lower() for x in v)) for v in want.values())
    if len(PROMPTS) != n_names:
        bad.append("table has %d names, expected %d" % (len(PROMPTS),
                                                        n_names))
    try:
        prompt_prefix("nosuch")
        bad.append("unknown name accepted")
    except KeyError:
        pass
    if prompt_prefix(None) != "":
        bad.append("None")
    return (not bad), "; ".join(bad)


# ================================================================ numerics
@check("math: gelu_tanh, rms_norm known values")
def _():
    bad = []
    if abs(gelu_tanh(np.array(1.0)) - 0.8411919906082768) > 1e-15:
        bad.append("gelu(1)")
    if gelu_tanh(np.array(0.0)) != 0:
        bad.append("gelu(0)")
    x = np.array([3.0, -4.0])
    y = rms_norm(x, np.array([2.0, 1.0]), 0.0)
    if np.max(np.abs(y - np.array([3, -4]) / math.sqrt(12.5)
                     * np.array([2, 1]))) > 1e-15:
        bad.append("rms_norm")
    return (not bad), ", ".join(bad)


@check("rope: explicit pair formula, norm kept, scores depend on i-j only")
def _():
    rng = np.random.default_rng(3)
    d, theta = 8, 10000.0
    x = rng.standard_normal((5, 2, d))
    pos = np.array([0, 1, 2, 7, 100])
    y = rope_neox(x, pos, theta)
    bad = []
    for t in range(5):
        for h in range(2):
            for j in range(d // 2):
                a = pos[t] * theta ** (-2.0 * j / d)
                c, s = math.cos(a), math.sin(a)
                x0, x1 = x[t, h, j], x[t, h, j + d // 2]
                if abs(y[t, h, j] - (x0 * c - x1 * s)) > 1e-12 or \
                        abs(y[t, h, j + d // 2] - (x1 * c + x0 * s)) > 1e-12:
                    bad.append("pair formula")
    if np.max(np.abs(np.linalg.norm(y, axis=-1)
                     - np.linalg.norm(x, axis=-1))) > 1e-12:
        bad.append("norm")
    if np.max(np.abs(y[0] - x[0])) != 0:
        bad.append("pos 0 not identity")
    q = rng.standard_normal((1, 1, 64))
    k = rng.standard_normal((1, 1, 64))
    s1 = float(rope_neox(q, [3], 1e6)[0, 0] @ rope_neox(k, [10], 1e6)[0, 0])
    s2 = float(rope_neox(q, [503], 1e6)[0, 0]
               @ rope_neox(k, [510], 1e6)[0, 0])
    if abs(s1 - s2) > 1e-9:
        bad.append("relative %g vs %g" % (s1, s2))
    return (not bad), ", ".join(sorted(set(bad)))


def loop_attention(q, k, v, radius):
    T, nh, d = q.shape
    nkv = k.shape[1]
    out = np.zeros((T, nh * v.shape[2]))
    for i in range(T):
        for h in range(nh):
            kh = h * nkv // nh
            js = [j for j in range(T) if radius is None or abs(i - j) <= radius]
            sc = [sum(q[i, h, c] * k[j, kh, c] for c in range(d)) for j in js]
            m = max(sc)
            w = [math.exp(s - m) for s in sc]
            z = sum(w)
            for jj, j in enumerate(js):
                out[i, h * v.shape[2]:(h + 1) * v.shape[2]] += \
                    w[jj] / z * v[j, kh]
    return out


@check("attention: matches loop version (GQA, scale 1, window |i-j|<=r)")
def _():
    rng = np.random.default_rng(4)
    T = 9
    bad = []
    for nh, nkv, r in ((4, 2, 2), (4, 1, None), (4, 4, 0), (2, 1, 3)):
        q = rng.standard_normal((T, nh, 6))
        k = rng.standard_normal((T, nkv, 6))
        v = rng.standard_normal((T, nkv, 5))
        a = attention(q, k, v, attention_mask(T, r))
        b = loop_attention(q, k, v, r)
        if np.max(np.abs(a - b)) > 1e-12:
            bad.append("nh=%d nkv=%d r=%s" % (nh, nkv, r))
    # window edge: key at distance r matters, at r+1 does not
    q = rng.standard_normal((T, 1, 4))
    k = rng.standard_normal((T, 1, 4))
    v = rng.standard_normal((T, 1, 4))
    base = attention(q, k, v, attention_mask(T, 3))
    for j, should in ((3, True), (4, False)):
        v2 = v.copy()
        v2[j] += 1.0
        changed = np.any(attention(q, k, v2, attention_mask(T, 3))[0]
                         != base[0])
        if changed != should:
            bad.append("key at distance %d changed=%s" % (j, changed))
    return (not bad), ", ".join(bad)


@check("matryoshka: truncate then renormalise")
def _():
    rng = np.random.default_rng(6)
    e = l2_normalize(rng.standard_normal(768))
    bad = []
    for k in (768, 512, 256, 128):
        m = matryoshka(e, k)
        if abs(np.linalg.norm(m) - 1) > 1e-14 or len(m) != k:
            bad.append("norm/len %d" % k)
        if abs(cos(m, e[:k]) - 1) > 1e-14:
            bad.append("direction %d" % k)
    if np.max(np.abs(matryoshka(e, 768) - e)) > 1e-15:
        bad.append("768 changed")
    for k in (0, 769):
        try:
            matryoshka(e, k)
            bad.append("accepted %d" % k)
        except ValueError:
            pass
    return (not bad), ", ".join(bad)


# =========================================================== whole forward
def loop_forward(path, ids):
    """Second implementation, written per token with explicit loops over
    heads and RoPE pairs, to cross-check Model.forward."""
    g = G.GGUFFile(path)
    md = g.metadata
    A = md["general.architecture"] + "."
    H = md[A + "embedding_length"]
    nL = md[A + "block_count"]
    P = md[A + "embedding_length_per_layer_input"]
    eps = md[A + "attention.layer_norm_rms_epsilon"]
    nh = md[A + "attention.head_count"]
    kvs = md[A + "attention.head_count_kv"]
    swa = md[A + "attention.sliding_window_pattern"]
    W = g.tensor

    def rms(v, w):
        r = 1.0 / math.sqrt(sum(t * t for t in v) / len(v) + eps)
        return [v[c] * r * (1.0 if w is None else w[c]) for c in range(len(v))]

    def lin(v, M):          # M numpy (out, in)
        return [float(np.dot(M[o], v)) for o in range(M.shape[0])]

    def gelu(t):
        return 0.5 * t * (1 + math.tanh(math.sqrt(2 / math.pi)
                                        * (t + 0.044715 * t ** 3)))

    T = len(ids)
    emb = W("token_embd.weight")
    hs = [list(emb[i] * math.sqrt(H)) for i in ids]
    Wp = W("per_layer_model_proj.weight")
    wn = W("per_layer_proj_norm.weight")
    ple = []
    for t in range(T):
        z = [c / math.sqrt(H) for c in lin(hs[t], Wp)]
        ple.append([rms(z[li * P:(li + 1) * P], wn) for li in range(nL)])
    for li in range(nL):
        p = "blk.%d." % li
        d = md[A + ("attention.key_length_swa" if swa[li]
                    else "attention.key_length")]
        theta = md[A + ("rope.freq_base_swa" if swa[li] else "rope.freq_base")]
        radius = md[A + "attention.sliding_window"] // 2 if swa[li] else T
        nkv = kvs[li]
        qs, ks, vs = [], [], []
        for t in range(T):
            a = rms(hs[t], W(p + "attn_norm.weight"))
            qf, kf, vf = (lin(a, W(p + n + ".weight"))
                          for n in ("attn_q", "attn_k", "attn_v"))
            qh = [rms(qf[h * d:(h + 1) * d], W(p + "attn_q_norm.weight"))
                  for h in range(nh)]
            kh = [rms(kf[h * d:(h + 1) * d], W(p + "attn_k_norm.weight"))
                  for h in range(nkv)]
            vh = [rms(vf[h * d:(h + 1) * d], None) for h in range(nkv)]
            for vec in qh + kh:
                for j in range(d // 2):
                    ang = t / theta ** (2.0 * j / d)
                    x0, x1 = vec[j], vec[j + d // 2]
                    vec[j] = x0 * math.cos(ang) - x1 * math.sin(ang)
                    vec[j + d // 2] = x1 * math.cos(ang) + x0 * math.sin(ang)
            qs.append(qh)
            ks.append(kh)
            vs.append(vh)
        new = []
        for i in range(T):
            o = []
            for h in range(nh):
                g_ = h // (nh // nkv)
                js = [j for j in range(T) if abs(i - j) <= radius]
                sc = [sum(x * y for x, y in zip(qs[i][h], ks[j][g_]))
                      for j in js]
                m = max(sc)
                ws = [math.exp(s - m) for s in sc]
                z = sum(ws)
                acc = [0.0] * d
                for w_, j in zip(ws, js):
                    for c in range(d):
                        acc[c] += w_ / z * vs[j][g_][c]
                o += acc
            o = rms(lin(o, W(p + "attn_output.weight")),
                    W(p + "post_attention_norm.weight"))
            hh = [x + y for x, y in zip(hs[i], o)]
            m_ = rms(hh, W(p + "ffn_norm.weight"))
            gt = lin(m_, W(p + "ffn_gate.weight"))
            up = lin(m_, W(p + "ffn_up.weight"))
            m_ = lin([gelu(x) * y for x, y in zip(gt, up)],
                     W(p + "ffn_down.weight"))
            m_ = rms(m_, W(p + "post_ffw_norm.weight"))
            hh = [x + y for x, y in zip(hh, m_)]
            gg = [gelu(x) * y for x, y in
                  zip(lin(hh, W(p + "inp_gate.weight")), ple[i][li])]
            gg = rms(lin(gg, W(p + "proj.weight")), W(p + "post_norm.weight"))
            sc_ = float(W(p + "layer_output_scale.weight")[0])
            new.append([(x + y) * sc_ for x, y in zip(hh, gg)])
        hs = new
    out = W("output.weight")
    ys = [lin(rms(h, W("output_norm.weight")), out) for h in hs]
    s = [sum(y[c] for y in ys) / T for c in range(out.shape[0])]
    n = math.sqrt(sum(c * c for c in s))
    return np.array([c / n for c in s])


TINY = os.path.join(TMP, "tiny-ref-f32.gguf")
TINY_Q8 = os.path.join(TMP, "tiny-ref-q8_0.gguf")
testgguf.make_model(TINY, G.GGML_F32, seed=7)
testgguf.make_model(TINY_Q8, G.GGML_Q8_0, seed=7)


@check("forward: vectorised == loop implementation (f32 and q8_0 files)")
def _():
    bad = []
    for path in (TINY, TINY_Q8):
        m = Model(path)
        tok = Tokenizer.from_gguf(m.g)
        for text in ("the quick brown fox jumps over the lazy dog", "",
                     "a"):
            ids = tok.encode(text)
            a = m.forward(ids)
            b = loop_forward(path, ids)
            err = float(np.max(np.abs(a - b)))
            if err > 1e-12:
                bad.append("%s %r maxabs %g" % (os.path.basename(path),
                                                text[:10], err))
    return (not bad), "; ".join(bad)


@check("forward: unit norm, pooled mean of per-token outputs")
def _():
    m = Model(TINY)
    ids = Tokenizer.from_gguf(m.g).encode("title: none | text: café")
    e, y = m.forward(ids, return_tokens=True)
    bad = []
    if abs(np.linalg.norm(e) - 1) > 1e-14:
        bad.append("norm")
    if np.max(np.abs(e - l2_normalize(y.mean(axis=0)))) > 1e-15:
        bad.append("pool")
    if len(e) != m.n_out:
        bad.append("width")
    return (not bad), ", ".join(bad)


@check("forward: sliding radius = sliding_window/2 (1 layer, all sliding)")
def _():
    p = os.path.join(TMP, "swa1.gguf")
    testgguf.make_model(p, G.GGML_F32, seed=3, n_layer=1, pattern=(True,),
                        n_swa=6)
    m = Model(p)
    ids = [300 + (i % 40) for i in range(12)]
    _, y = m.forward(ids, return_tokens=True)
    bad = []
    for j, should in ((3, True), (4, False), (11, False)):
        ids2 = list(ids)
        ids2[j] = 299
        _, y2 = m.forward(ids2, return_tokens=True)
        changed = bool(np.any(y2[0] != y[0]))
        if changed != should:
            bad.append("token %d changed y[0]=%s" % (j, changed))
    return (not bad), ", ".join(bad)


@check("forward: q8_0 file close to f32 file (same seed)")
def _():
    a, b = Model(TINY), Model(TINY_Q8)
    ids = Tokenizer.from_gguf(a.g).encode("embedding models map text")
    c = cos(a.forward(ids), b.forward(ids))
    return c > 0.999, "cos %.6f" % c


@check("conditioning: tiny model, 1e-6 relative input noise")
def _():
    m = Model(TINY)
    ids = Tokenizer.from_gguf(m.g).encode(
        "the cat sat on the mat and the dog sat on the log " * 3)
    e = m.forward(ids)
    if np.max(np.abs(m.forward(ids, noise_rel=0.0) - e)) != 0:
        return False, "not deterministic"
    worst = max(1 - cos(e, m.forward(ids, noise_rel=1e-6, noise_seed=s))
                for s in range(3))
    return worst < 1e-4, "1-cos = %.3g" % worst


# ================================================================ goldens
def golden_check(model_name):
    gpath = os.path.join(ROOT, "golden", model_name + ".jsonl")
    mpath = os.path.join(ROOT, "testdata", model_name + ".gguf")
    name = "goldens reproduce: " + model_name
    if not os.path.exists(gpath) or not os.path.exists(mpath):
        skip(name, "missing %s" % (gpath if not os.path.exists(gpath)
                                   else mpath))
        return

    @check(name)
    def _():
        m = Model(mpath)
        tok = Tokenizer.from_gguf(m.g)
        recs = [json.loads(l) for l in open(gpath, encoding="utf-8")
                if l.strip()]
        bad = []
        for r in recs:
            ids = tok.encode(prompt_prefix(r["prompt"]) + r["text"])
            if ids != r["tokens"]:
                bad.append("%s tokens" % r["name"])
                continue
            e = m.forward(ids)
            err = float(np.max(np.abs(e - np.array(r["embedding"]))))
            if err > 1e-12:
                bad.append("%s maxabs %g" % (r["name"], err))
        if not recs:
            bad.append("no records")
        return (not bad), "; ".join(bad)


golden_check("tiny-f32")
golden_check("tiny-q8_0")


# ========================================================= real-shape model
def real_conditioning():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/real-q8_0.gguf"
    name = "conditioning: real-shape model, 1e-6 relative input noise"
    if not os.path.exists(path):
        skip(name, "%s not found (pass a real-shape GGUF as argv[1])" % path)
        return

    @check(name)
    def _():
        m = Model(path, cache_weights=False)
        rng = np.random.default_rng(11)
        ids = [2] + [int(x) for x in rng.integers(5, min(m.n_vocab, 250000),
                                                  62)] + [1]
        e = m.forward(ids)
        worst = max(1 - cos(e, m.forward(ids, noise_rel=1e-6, noise_seed=s))
                    for s in range(2))
        return worst < 1e-4, "1-cos = %.3g (T=%d, %s)" % (
            worst, len(ids), os.path.basename(path))


real_conditioning()

shutil.rmtree(TMP, ignore_errors=True)
print("%d passed, %d failed, %d skipped"
      % (RESULTS["pass"], RESULTS["fail"], RESULTS["skip"]))
sys.exit(1 if RESULTS["fail"] else 0)
