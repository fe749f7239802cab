#!/usr/bin/python3
"""Self-test of the NumPy audio tower reference (tools/ref/audio_tower.py) and of the audio
path of embed_media.py; needs no C code.

usage: tests/ref_audio_selftest.py

Runs on a tiny f32 audio mmproj that tools/mkmodel generates in a temp dir (seed 1; the
committed tiny-mmproj-audio-q8_0.gguf / tiny-mmproj-both-q8_0.gguf are the same weights
quantised). Each check compares the reference with a second computation written
differently (explicit convolution loops, Hugging Face's blocked attention with its
Transformer-XL rel-shift, the full-length masked pass Hugging Face runs, per-query loops)
or tests a property that can fail (token count, causality with the exact receptive field,
clamps that bite, the bias); most carry a negative control: the same comparison on a
deliberately wrong variant must fail, so a check that cannot fail is reported as a failure.

Prints "PASS: name" or "FAIL: name: detail" per check, then "N passed, N failed"; exits 1
on any failure.
"""

import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import redirect_stdout

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import audio as FE  # noqa: E402
import audio_tower as AT  # noqa: E402
import embed_media as EM  # noqa: E402
from gguf import GGUFError, GGUFFile  # noqa: E402
from selfcheck import check, finish  # noqa: E402

PY = sys.executable or "/usr/bin/python3"
TD = os.path.join(ROOT, "testdata")
TXT = os.path.join(TD, "tiny-f32.gguf")
MM_Q8 = os.path.join(TD, "tiny-mmproj-audio-q8_0.gguf")
MM_BOTH_Q8 = os.path.join(TD, "tiny-mmproj-both-q8_0.gguf")
TMP = tempfile.mkdtemp(prefix="ref_audio_selftest.")
MM = os.path.join(TMP, "tiny-mmproj-audio-f32.gguf")
subprocess.run([os.path.join(ROOT, "tools", "mkmodel"), "--mmproj", "audio", "--preset", "tiny",
                "--type", "f32", "--seed", "1", "-o", MM], check=True)

T = AT.AudioTower(MM)
D, NH, HD = T.n_embd, T.n_head, T.head_dim
RNG = np.random.default_rng(20261130)


def maxabs(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def cos(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def rand_feat(n, rng=RNG):
    """log-mel-like features: around ln(mel) of speech, [n, 128]"""
    return rng.normal(-2.0, 2.0, (n, 128))


def speech(n, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 16000.0
    ph = 2 * np.pi * np.cumsum(130 + 40 * np.sin(2 * np.pi * 0.5 * t)) / 16000.0
    x = 0.3 * sum(np.sin(k * ph) * 0.7 ** k for k in range(1, 20)) \
        + 0.02 * rng.standard_normal(n)
    return x.astype(np.float32)


# ============================================================ file layout
@check("mmproj: tiny preset hyper-parameters (D 64, 2 layers, 4x16 heads, F 128, C (16,4), "
       "E 96, K 5), the committed q8_0 files load")
def _():
    got = (D, T.n_layer, NH, HD, T.n_ff, T.C0, T.C1, T.E, T.K, T.n_mel, T.M4, T.has_bias)
    want = (64, 2, 4, 16, 128, 16, 4, 96, 5, 128, 32, True)
    if got != want:
        return False, "got %r want %r" % (got, want)
    for p in (MM_Q8, MM_BOTH_Q8):
        t = AT.AudioTower(p)
        if (t.n_embd, t.n_layer, t.n_proj) != (D, T.n_layer, T.n_proj):
            return False, os.path.basename(p)
    return None


@check("mmproj: a text model, a vision-only mmproj, a missing tensor, a wrong shape and an "
       "unknown a.* tensor are rejected")
def _():
    bad = []
    for p, what in ((TXT, "text model"), (os.path.join(TD, "tiny-mmproj-f32.gguf"), "vision")):
        try:
            AT.AudioTower(p)
            bad.append(what + " accepted")
        except GGUFError:
            pass
    g = GGUFFile(MM)
    del g.tensors["a.blk.1.attn_k.output_max"]
    g2 = GGUFFile(MM)
    g2.tensors["a.input_projection.weight"].dims = (64, 128)
    g3 = GGUFFile(MM)
    g3.tensors["a.blk.0.attn_q.bias"] = g3.tensors["a.blk.0.ffn_norm.weight"]
    for gg, what in ((g, "missing clamp scalar"), (g2, "transposed input_projection"),
                     (g3, "unknown bias")):
        try:
            AT.AudioTower(gg)
            bad.append(what + " accepted")
        except GGUFError:
            pass
    return (not bad), "; ".join(bad)


# ============================================================ token count
@check("tower: (L+3)//4 rows of projection_dim for L in 1, 2, 3, 4, 5, 99, 729; finite")
def _():
    bad = []
    for L in (1, 2, 3, 4, 5, 99, 729):
        f = rand_feat(L + 3)
        out = AT.tower(T, f, L)
        if out.shape != ((L + 3) // 4, T.n_proj) or not np.all(np.isfinite(out)):
            bad.append("L=%d: %s" % (L, out.shape))
        if L == 99 and AT.tower(T, f[:L], L, "llamacpp").shape[0] != 25:
            bad.append("llamacpp L=99")
    # the docs/model.md 6.1 examples (479 / 350 / 199 mel frames -> 120 / 88 / 50)
    for L, n in ((479, 120), (350, 88), (199, 50), (750 * 4, 750)):
        if AT.AudioTower.n_tokens(L) != n:
            bad.append("n_tokens(%d)" % L)
    return (not bad), "; ".join(bad)


@check("tower: L = 0 is an error (too short), officially and under llamacpp")
def _():
    bad = []
    for f, L, sem in ((rand_feat(3), 0, "official"), (np.zeros((0, 128)), 0, "llamacpp")):
        try:
            AT.tower(T, f, L, sem)
            bad.append(sem + " accepted")
        except ValueError as e:
            if "too short" not in str(e):
                bad.append(str(e))
    return (not bad), "; ".join(bad)


@check("tower: official semantics reads only the first L frames; llamacpp reads all")
def _():
    f = rand_feat(40)
    g = f.copy()
    g[33:] = rand_feat(7)
    a, b = AT.tower(T, f, 33), AT.tower(T, g, 33)
    c, d = AT.tower(T, f, 33, "llamacpp"), AT.tower(T, g, 33, "llamacpp")
    same = maxabs(a, b)
    return same == 0 and c.shape[0] == 10 and maxabs(c, d) > 1e-3, \
        "official diff %g, llamacpp rows %d diff %.3g" % (same, c.shape[0], maxabs(c, d))


# ============================================================ sub-sampling
def conv_loops(x, w):
    """x [Cin, T, F], w [Cout, Cin, 3, 3]: PyTorch Conv2d(stride 2, padding 1), by loops."""
    cin, Tn, Fn = x.shape
    To, Fo = (Tn + 2 - 3) // 2 + 1, (Fn + 2 - 3) // 2 + 1
    out = np.zeros((w.shape[0], To, Fo))
    for t in range(To):
        for f in range(Fo):
            acc = np.zeros(w.shape[0])
            for a in range(3):
                for b in range(3):
                    r, c = 2 * t + a - 1, 2 * f + b - 1
                    if 0 <= r < Tn and 0 <= c < Fn:
                        acc += w[:, :, a, b] @ x[:, r, c]
            out[:, t, f] = acc
    return out


def subsample_loops(t, feat):
    """docs/model.md 6.2 written out per (time, freq) point, reading the GGUF tensors directly."""
    g = GGUFFile(MM)
    x = np.asarray(feat, np.float64)[None]
    for j in (0, 1):
        y = conv_loops(x, g.tensor("a.conv1d.%d.weight" % j))
        w = g.tensor("a.conv1d.%d.norm.weight" % j)
        for tt in range(y.shape[1]):
            for ff in range(y.shape[2]):
                v = y[:, tt, ff]
                m = v.mean()
                s = ((v - m) ** 2).mean()
                y[:, tt, ff] = np.maximum((v - m) / math.sqrt(s + 1e-6) * w, 0)
        x = y
    C1, N, M4 = x.shape
    Wp = g.tensor("a.input_projection.weight")                    # [D, M4*C1]
    out = np.zeros((N, Wp.shape[0]))
    for n in range(N):
        for f in range(M4):
            for c in range(C1):
                out[n] += Wp[:, f * C1 + c] * x[c, n, f]
    return out


@check("sub-sampling: equals explicit Conv2d/LayerNorm/ReLU loops and the f*C1+c flatten; "
       "a kernel with time and mel swapped, or a channel-major flatten, differ")
def _():
    f = rand_feat(13)
    got = T.subsample(f)
    want = subsample_loops(T, f)
    err = maxabs(got, want)
    # controls: the conv kernels read [out][in][kw][kh], the flatten read c*M4 + f
    sw = AT.AudioTower(MM, overrides={
        "a.conv1d.%d.weight" % j: GGUFFile(MM).tensor("a.conv1d.%d.weight" % j)
        .transpose(0, 1, 3, 2) for j in (0, 1)})
    c1 = maxabs(sw.subsample(f), want)
    Wp = GGUFFile(MM).tensor("a.input_projection.weight")
    Wc = Wp.reshape(D, T.M4, T.C1).transpose(0, 2, 1).reshape(D, -1)
    c2 = maxabs(AT.AudioTower(MM, overrides={"a.input_projection.weight": Wc}).subsample(f),
                want)
    return err < 1e-12 and c1 > 1e-3 and c2 > 1e-3, \
        "maxabs %.3g (%d rows), controls %.3g %.3g" % (err, got.shape[0], c1, c2)


# ============================================================ attention
def blocked_attention(q, k, v, R, valid=None, chunk=12, max_past=12, max_future=0,
                      window=12, cap=50.0):
    """Hugging Face's blocked local attention (docs/model.md 6.3): queries in blocks of `chunk`,
    keys gathered in context windows of chunk + max_past + max_future (24), the relative
    term over positions max_past .. -max_future (13: d = 12 .. 0) aligned with the
    Transformer-XL rel-shift (pad the last axis to C+1, flatten, drop the tail, reshape), the
    softcap, then the mask 0 <= q - kv < window and key validity (masked logits -1e9), fp64.
    R: [>= 13, nh, hd] indexed by distance d. valid: [T] key validity (default all)."""
    Tn, nh, hd = q.shape
    valid = np.ones(Tn, bool) if valid is None else np.asarray(valid, bool)
    U = -(-Tn // chunk)
    C = chunk + max_past + max_future
    qb = np.zeros((U * chunk, nh, hd))
    qb[:Tn] = q
    qb = qb.reshape(U, chunk, nh, hd)
    pad_l, pad_r = max_past, max_future + chunk - 1
    kp = np.concatenate([np.zeros((pad_l, nh, hd)), k, np.zeros((pad_r, nh, hd))])
    vp = np.concatenate([np.zeros((pad_l, nh, hd)), v, np.zeros((pad_r, nh, hd))])
    okp = np.concatenate([np.zeros(pad_l, bool), valid, np.zeros(pad_r, bool)])
    kb = np.stack([kp[u * chunk:u * chunk + C] for u in range(U)])      # [U, C, nh, hd]
    vb = np.stack([vp[u * chunk:u * chunk + C] for u in range(U)])
    okb = np.stack([okp[u * chunk:u * chunk + C] for u in range(U)])    # [U, C]
    pos = np.arange(max_past, -max_future - 1, -1)                     # 12 .. 0
    Fn = len(pos)
    sin_emb = R[pos]                                                   # [F, nh, hd]
    ac = np.einsum("uwhd,uchd->huwc", qb, kb)                          # [nh, U, W, C]
    bd = np.einsum("uwhd,fhd->huwf", qb, sin_emb)                      # [nh, U, W, F]
    bd = np.concatenate([bd, np.zeros((nh, U, chunk, C + 1 - Fn))], axis=-1)
    bd = bd.reshape(nh, U, chunk * (C + 1))[..., :chunk * C].reshape(nh, U, chunk, C)
    logits = cap * np.tanh((ac + bd) / cap)
    qpos = np.arange(U)[:, None] * chunk + np.arange(chunk)[None, :]   # [U, W]
    kpos = np.arange(U)[:, None] * chunk - max_past + np.arange(C)[None, :]  # [U, C]
    dist = qpos[:, :, None] - kpos[:, None, :]
    mask = (dist >= 0) & (dist < window) & okb[:, None, :]
    logits = np.where(mask[None], logits, -1e9)
    logits -= logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=-1, keepdims=True)
    o = np.einsum("huwc,uchd->uwhd", p, vb).reshape(U * chunk, nh * hd)
    return o[:Tn]


def loop_attention(q, k, v, R, window=12, cap=50.0):
    """per query and head, straight from docs/model.md 6.3"""
    Tn, nh, hd = q.shape
    out = np.zeros((Tn, nh, hd))
    for t in range(Tn):
        for h in range(nh):
            ss = [s for s in range(Tn) if 0 <= t - s < window]
            lg = np.array([q[t, h] @ k[s, h] + q[t, h] @ R[t - s, h] for s in ss])
            lg = cap * np.tanh(lg / cap)
            p = np.exp(lg - lg.max())
            p /= p.sum()
            out[t, h] = sum(pi * v[s, h] for pi, s in zip(p, ss))
    return out.reshape(Tn, nh * hd)


def rand_qkvr(n, rng, scale=3.0):
    return (rng.standard_normal((n, NH, HD)) * scale, rng.standard_normal((n, NH, HD)) * scale,
            rng.standard_normal((n, NH, HD)), rng.standard_normal((13, NH, HD)) * scale)


@check("attention: HF's blocked form (chunk 12, context 24, rel-shift) equals the unblocked "
       "form to 1e-12 for T in 1..100; the 13-key (Gemma 3n) window differs")
def _():
    rng = np.random.default_rng(7)
    worst, ctrl = 0.0, np.inf
    for n in (1, 2, 5, 11, 12, 13, 23, 24, 25, 36, 37, 100):
        q, k, v, R = rand_qkvr(n, rng)
        a = AT.local_attention(q, k, v, R)
        worst = max(worst, maxabs(a, blocked_attention(q, k, v, R)))
        if n > 13:
            ctrl = min(ctrl, maxabs(a, blocked_attention(q, k, v, R, window=13)))
    return worst < 1e-12 and ctrl > 1e-3, "maxabs %.3g, control %.3g" % (worst, ctrl)


@check("attention: the unblocked form equals per-query loops; the rel term uses R[t-s] "
       "(R[t-s+1] or no rel term differ) and the softcap bites")
def _():
    rng = np.random.default_rng(8)
    q, k, v, R = rand_qkvr(30, rng, scale=6.0)
    a = AT.local_attention(q, k, v, R)
    err = maxabs(a, loop_attention(q, k, v, R))
    c_none = maxabs(a, AT.local_attention(q, k, v, np.zeros_like(R)))
    c_cap = maxabs(a, AT.local_attention(q, k, v, R, cap=1e9))
    # a rel-shift off by one: R[d+1] in place of R[d]
    c_shift = maxabs(a, AT.local_attention(q, k, v, R[1:]))
    return err < 1e-12 and min(c_none, c_cap, c_shift) > 1e-3, \
        "maxabs %.3g, controls: no rel %.3g, no cap %.3g, shifted %.3g" \
        % (err, c_none, c_cap, c_shift)


@check("attention: the whole tower with the blocked attention equals the unblocked one "
       "(1e-12)")
def _():
    f = rand_feat(150)
    a = T.trace(f, 150)["soft"]
    b = T.trace(f, 150, attn_fn=lambda q, k, v, R: blocked_attention(q, k, v, R))["soft"]
    return maxabs(a, b) < 1e-12, "maxabs %.3g" % maxabs(a, b)


@check("relative positions: PE[0] = (0.., 1..), tau from 1 down to 1e-4, 13 rows through "
       "attn_k_rel unclamped")
def _():
    pe = AT.sinusoid_pe(13, D)
    half = D // 2
    ok = np.all(pe[0, :half] == 0) and np.all(pe[0, half:] == 1)
    tau_last = math.atan2(pe[1, half - 1], pe[1, D - 1])
    ok = ok and abs(pe[1, 0] - math.sin(1.0)) < 1e-15 and abs(tau_last - 1e-4) < 1e-15
    R = T.rel_embeddings(0)
    want = (pe @ GGUFFile(MM).tensor("a.blk.0.attn_k_rel.weight").T).reshape(13, NH, HD)
    return ok and R.shape == (13, NH, HD) and maxabs(R, want) < 1e-12, \
        "tau_last %.6g, R err %.3g" % (tau_last, maxabs(R, want))


# ============================================================ full-length HF pass
def hf_style(t, feat, L):
    """The tower as Hugging Face runs it over all T frames of the batch: invalid frames
    zeroed, the masks subsampled with [::2], invalid rows zeroed before conv1, invalid keys
    masked in the blocked attention; the valid rows are kept at the end."""
    f = np.array(feat, np.float64)
    mask = np.arange(len(f)) < L
    f[~mask] = 0.0
    x = f[None]
    for j in (0, 1):
        x[:, ~mask[:x.shape[1]]] = 0.0
        x = AT.conv2d_s2(x, t.w("a.conv1d.%d.weight" % j))
        x = np.maximum(AT.layer_norm(x.transpose(1, 2, 0),
                                     t.w("a.conv1d.%d.norm.weight" % j)), 0.0)
        x = x.transpose(2, 0, 1)
        mask = mask[::2]
    C, N, M4 = x.shape
    h = x.transpose(1, 2, 0).reshape(N, M4 * C) @ t.w("a.input_projection.weight").T
    att = lambda q, k, v, R: blocked_attention(q, k, v, R, valid=mask)  # noqa: E731
    for i in range(t.n_layer):
        h = t.layer(i, h, attn_fn=att)
    return t.embed_audio(t.output(h)[mask])


@check("valid frames only: equals the full-length masked pass (frames past L hold garbage) "
       "for L = 1, 7, 37, 50 of 61 frames")
def _():
    worst = 0.0
    for L in (1, 7, 37, 50):
        f = rand_feat(61)
        f[L:] += 5.0
        a = AT.tower(T, f, L)
        b = hf_style(T, f, L)
        if a.shape != b.shape:
            return False, "L=%d shapes %s %s" % (L, a.shape, b.shape)
        worst = max(worst, maxabs(a, b))
    return worst < 1e-12, "maxabs %.3g" % worst


# ============================================================ causality
@check("causality: output row n depends on frames <= 4n+3 only: changing frames >= f0 "
       "keeps rows with 4n+3 < f0, and changes the first row past that")
def _():
    bad = []
    L = 97
    base = rand_feat(L)
    ref = AT.tower(T, base, L)
    for f0 in (4, 17, 40, 41, 42, 43, 80):
        g = base.copy()
        g[f0:] = rand_feat(L - f0)
        out = AT.tower(T, g, L)
        keep = sum(1 for n in range(len(ref)) if 4 * n + 3 < f0)
        d_keep = maxabs(out[:keep], ref[:keep]) if keep else 0.0
        d_next = maxabs(out[keep], ref[keep])
        if d_keep > 1e-12 or d_next < 1e-6:
            bad.append("f0=%d keep %d: kept rows diff %.3g, row %d diff %.3g"
                       % (f0, keep, d_keep, keep, d_next))
    # a prefix of the clip gives the same first rows (no look-ahead through the length)
    p = AT.tower(T, base[:50], 50)
    if maxabs(p[:12], ref[:12]) > 1e-12:
        bad.append("prefix of 50 frames: rows 0..11 differ by %.3g" % maxabs(p[:12], ref[:12]))
    return (not bad), "; ".join(bad)


# ============================================================ clamps, scales, bias
@check("clamps: input and output clamps bite on the tiny model; every linear has its own "
       "bounds (q/k/v differ); widening them all changes the output")
def _():
    stats = {}
    f = rand_feat(200)
    out = T.encode(f, 200, stats=stats)
    n_in = sum(int(s[0] + s[1]) for s in stats.values())
    n_out = sum(int(s[3] + s[4]) for s in stats.values())
    total_in = sum(int(s[2]) for s in stats.values())
    lines = ["%s in %d/%d out %d/%d" % (k.replace("a.blk.", ""), s[0] + s[1], s[2],
                                         s[3] + s[4], s[5]) for k, s in sorted(stats.items())]
    print("\n".join("    " + x for x in lines))
    distinct = True
    for i in range(T.n_layer):
        b = "a.blk.%d." % i
        bq, bk, bv = (T.bounds(b + n) for n in ("attn_q", "attn_k", "attn_v"))
        distinct = distinct and bq != bk and bk != bv and bq != bv
        distinct = distinct and all(x != y for x, y in zip(bq, bk))
    ov = {}
    for i in range(T.n_layer):
        for n in AT.CLIPPED:
            for k in AT.BOUNDS:
                ov["a.blk.%d.%s.%s" % (i, n, k)] = [-1e30 if "min" in k else 1e30]
    wide = AT.AudioTower(MM, overrides=ov).encode(f, 200)
    c = maxabs(out, wide)
    return n_in > 0 and n_out > 0 and distinct and c > 1e-3, \
        "%d of %d inputs clipped, %d outputs clipped, q/k/v bounds distinct %s, " \
        "unclamped diff %.3g" % (n_in, total_in, n_out, distinct, c)


@check("clip linear: clamp(clamp(x, in) W^T, out) on a hand example")
def _():
    t = AT.AudioTower(MM, overrides={
        "a.blk.0.attn_v.weight": np.eye(D) * 2.0, "a.blk.0.attn_v.input_min": [-1.0],
        "a.blk.0.attn_v.input_max": [0.5], "a.blk.0.attn_v.output_min": [-1.5],
        "a.blk.0.attn_v.output_max": [3.0]})
    x = np.linspace(-3, 3, D)[None]
    got = t.clip_linear(x, "a.blk.0.attn_v")
    want = np.clip(np.clip(x, -1.0, 0.5) * 2.0, -1.5, 3.0)
    return maxabs(got, want) == 0 and got.max() == 1.0 and got.min() == -1.5, \
        "maxabs %.3g" % maxabs(got, want)


@check("q/k scales: q = ClipLinear * hd^-0.5/ln2 * per_dim_scale (stored post-softplus), "
       "k = ClipLinear * ln(1+e)/ln2; softplus applied again changes the output")
def _():
    a = RNG.standard_normal((9, D))
    q, k, v = T.qkv(0, a)
    b = "a.blk.0."
    g = GGUFFile(MM)
    qw = T.clip_linear(a, b + "attn_q").reshape(9, NH, HD)
    kw = T.clip_linear(a, b + "attn_k").reshape(9, NH, HD)
    pds = g.tensor(b + "per_dim_scale.weight")
    e1 = maxabs(q, qw * 0.25 / math.log(2) * pds)          # hd = 16: hd^-0.5 = 0.25
    e2 = maxabs(k, kw * 1.8946361239720115)
    f = rand_feat(60)
    base = T.encode(f, 60)
    ov = {n: np.logaddexp(0, g.tensor(n)) for n in T.pds_name}
    c = maxabs(base, AT.AudioTower(MM, overrides=ov).encode(f, 60))
    return e1 < 1e-12 and e2 < 1e-12 and c > 1e-4, \
        "q err %.3g, k err %.3g, softplus-twice diff %.3g" % (e1, e2, c)


@check("output: a.pre_encode.out.bias is non-zero and applied; embed_audio is a weightless "
       "RMSNorm (eps 1e-6) then mm.a.input_projection")
def _():
    g = GGUFFile(MM)
    bias = g.tensor("a.pre_encode.out.bias")
    f = rand_feat(30)
    tr = T.trace(f, 30)
    nob = AT.AudioTower(MM, overrides={"a.pre_encode.out.bias": np.zeros_like(bias)})
    c = maxabs(tr["soft"], nob.encode(f, 30))
    y = tr["blk%d.out" % (T.n_layer - 1)] @ g.tensor("a.pre_encode.out.weight").T + bias
    e1 = maxabs(tr["pre_encode"], y)
    z = y / np.sqrt((y * y).mean(axis=1, keepdims=True) + 1e-6)
    e2 = maxabs(tr["soft"], z @ g.tensor("mm.a.input_projection.weight").T)
    return float(np.abs(bias).max()) > 0 and c > 1e-4 and e1 < 1e-12 and e2 < 1e-12, \
        "max |bias| %.3g, no-bias diff %.3g, errs %.3g %.3g" \
        % (float(np.abs(bias).max()), c, e1, e2)


X_LAYER = RNG.standard_normal((17, D)) * 1.5


def layer_loops(x, conv_left=4, ffn_weight=0.5, glu_swap=False):
    """docs/model.md 6.3 layer 0, per time step; conv_left = how many past frames the depthwise
    kernel reaches (the rest are future frames)"""
    g = GGUFFile(MM)
    W = lambda n: g.tensor("a.blk.0." + n)  # noqa: E731
    N = len(x)

    def rms(v, w):
        return v / math.sqrt(float(np.mean(v * v)) + 1e-6) * w

    def cl(v, n):
        lo, hi, olo, ohi = (float(W(n + "." + k)[0]) for k in AT.BOUNDS)
        return np.clip(W(n + ".weight") @ np.clip(v, lo, hi), olo, ohi)

    def sil(v):
        return v / (1 + np.exp(-v))

    def ffn(h, s):
        out = np.zeros_like(h)
        for t in range(N):
            u = sil(cl(rms(h[t], W("ffn_norm%s.weight" % s)), "ffn_up" + s))
            u = rms(cl(u, "ffn_down" + s), W("ffn_post_norm%s.weight" % s))
            out[t] = h[t] + ffn_weight * u
        return out

    h = ffn(x, "")
    h = T.attention(0, h)           # the attention itself is checked above
    glu = np.zeros((N, D))
    for t in range(N):
        u = cl(rms(h[t], W("conv_norm.weight")), "conv_pw1")
        a, b = (u[D:], u[:D]) if glu_swap else (u[:D], u[D:])
        glu[t] = a / (1 + np.exp(-b))
    dw = W("conv_dw.weight")        # [D, 5]
    conv = np.zeros((N, D))
    for t in range(N):
        for j in range(5):
            s = t - conv_left + j
            if 0 <= s < N:
                conv[t] += dw[:, j] * glu[s]
    for t in range(N):
        u = sil(rms(conv[t], W("norm_conv.weight")))
        h[t] = h[t] + cl(u, "conv_pw2")
    h = ffn(h, "_1")
    return np.stack([rms(h[t], W("ln2.weight")) for t in range(N)])


@check("layer: one conformer layer written out per time step matches (FFN half-steps, "
       "GLU, causal depthwise conv left-padded by 4, norms); a centred conv, a full-step "
       "FFN or a GLU gating the wrong half differ")
def _():
    got = T.layer(0, X_LAYER)
    want = layer_loops(X_LAYER)
    err = maxabs(got, want)
    ctrl = min(maxabs(got, layer_loops(X_LAYER, conv_left=2)),
               maxabs(got, layer_loops(X_LAYER, ffn_weight=1.0)),
               maxabs(got, layer_loops(X_LAYER, glu_swap=True)))
    return err < 1e-12 and ctrl > 1e-3, "maxabs %.3g, controls >= %.3g" % (err, ctrl)



# ============================================================ files and CLI
@check("q8_0: the committed audio and both mmproj files (same seed) give cos >= 0.999 with "
       "the f32 tower, and the same rows as each other")
def _():
    f = FE.features(speech(24000, 3))[0]
    L = FE.frame_counts(24000)[1]
    a = AT.tower(T, f, L)
    b = AT.tower(MM_Q8, f, L)
    c = AT.tower(MM_BOTH_Q8, f, L)
    cs = min(cos(a[i], b[i]) for i in range(len(a)))
    return cs >= 0.999 and maxabs(b, c) == 0, "min row cos %.6f, audio vs both %.3g" \
        % (cs, maxabs(b, c))


@check("CLI: audio_tower.py and audio.py tower write the float32 rows and the trace; "
       "L = 0 exits non-zero")
def _():
    L, frames = 45, 48
    f = rand_feat(frames).astype("<f4")
    fp, op = os.path.join(TMP, "feat.f32"), os.path.join(TMP, "out.f32")
    f.tofile(fp)
    bad = []
    for cmd in ([os.path.join(ROOT, "tools", "ref", "audio_tower.py")],
                [os.path.join(ROOT, "tools", "ref", "audio.py"), "tower"]):
        r = subprocess.run([PY] + cmd + [MM, fp, str(frames), str(L), op, "official",
                                         "--trace", os.path.join(TMP, "tr")],
                           capture_output=True, text=True)
        if r.returncode != 0 or not r.stdout.startswith("12 64\n"):
            bad.append("%s: rc %d %r" % (cmd[-1], r.returncode, r.stdout[:40] + r.stderr[-200:]))
            continue
        got = np.fromfile(op, "<f4").reshape(-1, 64)
        want = AT.tower(T, f.astype(np.float64), L)
        if maxabs(got, want.astype(np.float32)) != 0:
            bad.append("rows differ")
        sub = np.fromfile(os.path.join(TMP, "tr", "subsample.f32"), "<f4")
        if sub.size != 12 * D:
            bad.append("trace subsample %d floats" % sub.size)
    r = subprocess.run([PY, os.path.join(ROOT, "tools", "ref", "audio_tower.py"), MM, fp,
                        str(frames), "0", op], capture_output=True, text=True)
    if r.returncode == 0 or "too short" not in r.stderr:
        bad.append("L=0: rc %d %r" % (r.returncode, r.stderr))
    return (not bad), "; ".join(bad)


@check("embed_media: audio records give <bos> <|audio> <|audio|>xN <audio|> ... <eos> with "
       "N = (L+3)//4; WAV and raw f32 of the same samples agree; a short clip is an error "
       "record; the clip changes the vector")
def _():
    x = speech(16000, 5)
    FE.write_wav(os.path.join(TMP, "a.wav"), x)
    xw, rate = FE.load_wav(os.path.join(TMP, "a.wav"))
    xw.astype("<f4").tofile(os.path.join(TMP, "a.f32"))
    speech(8000, 6).tofile(os.path.join(TMP, "b.f32"))
    speech(160, 7).tofile(os.path.join(TMP, "short.f32"))
    recs = [{"id": "w", "audio": "a.wav", "text": "a dog"},
            {"id": "r", "content": [{"type": "audio", "path": "raw:a.f32"},
                                    {"type": "text", "text": "a dog"}]},
            {"id": "b", "audio": "b.f32", "text": "a dog"},
            {"id": "two", "audio": ["b.f32", "a.wav"], "text": "x<|audio|>y <|audio|>"},
            {"id": "s", "audio": "short.f32"}]
    jp = os.path.join(TMP, "r.jsonl")
    with open(jp, "w") as fh:
        fh.write("\n".join(json.dumps(r) for r in recs) + "\n")
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = EM.main(["-m", TXT, "--mmproj", MM, "--base", TMP, jp])
    out = [json.loads(line) for line in buf.getvalue().splitlines()]
    em = EM.MediaEmbedder(TXT, MM)
    v = em.tok.vocab
    boa, aud, eoa = v["<|audio>"], v["<|audio|>"], v["<audio|>"]
    bad = []
    w, r, b, two, s = out
    if w["soft_tokens"] != [25] or b["soft_tokens"] != [(49 + 3) // 4]:
        bad.append("soft tokens %s %s" % (w["soft_tokens"], b["soft_tokens"]))
    want = [2, boa] + [aud] * 25 + [eoa]
    if w["tokens"][:28] != want or w["tokens"][-1] != 1 or w["tokens"].count(aud) != 25:
        bad.append("layout %s" % w["tokens"][:30])
    if w["tokens"] != r["tokens"] or maxabs(w["embedding"], r["embedding"]) != 0:
        bad.append("wav and raw differ")
    if cos(w["embedding"], b["embedding"]) > 0.99999:
        bad.append("the clip does not change the vector")
    if two["soft_tokens"] != [13, 25] or two["tokens"].count(boa) != 2:
        bad.append("two clips: %s" % two["soft_tokens"])
    if "error" not in s or "too short" not in s["error"] or rc != 1:
        bad.append("short clip: %s rc %d" % (s, rc))
    # the library path: soft rows land in the placeholders (the model's own check)
    feat, L = EM.load_audio(os.path.join(TMP, "a.wav"))
    ids, n, emb = em.embed("", EM.record_items(recs[0]), [], [(feat, L)])
    if ids != w["tokens"] or maxabs(emb, w["embedding"]) != 0:
        bad.append("library != driver")
    return (not bad), "; ".join(bad)


@check("embed_media: the committed both mmproj serves image and audio items in one record")
def _():
    em = EM.MediaEmbedder(os.path.join(TD, "tiny-q8_0.gguf"), MM_BOTH_Q8)
    rng = np.random.default_rng(9)
    from vision import grid_positions
    p, pos = rng.uniform(0, 1, (36, 768)), grid_positions(6, 6)
    feat, L = FE.features(speech(4000, 8))
    items = EM.record_items({"content": [{"type": "audio", "path": "x"},
                                         {"type": "image", "path": "y"},
                                         {"type": "text", "text": "both"}]})
    ids, n, emb = em.embed("", items, [(p, pos)], [(feat, L)])
    v = em.tok.vocab
    first = [ids[1], ids[2 + n[0] + 1]]
    return n == [(L + 3) // 4, 4] and first == [v["<|audio>"], v["<|image>"]] and \
        np.all(np.isfinite(emb)), "soft tokens %s, blocks %s" % (n, first)


shutil.rmtree(TMP, ignore_errors=True)
finish("ref_audio_selftest")
