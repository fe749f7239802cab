#!/usr/bin/python3
"""Float64 NumPy reference of the EmbeddingGemma 2 audio tower (the Gemma 4 conformer,
docs/model.md 6.2-6.4) and embed_audio (docs/model.md 4), reading the llama.cpp mmproj
GGUF layout (docs/gguf.md section 4.3). Written from docs/model.md alone, independently of
engine/audio*.c. The front end (log-mel, docs/model.md 6.1) is tools/ref/audio.py.

    t = AudioTower("mmproj.gguf")                      # or a GGUFFile
    soft = t.encode(feat, n_valid)                     # [(L+3)//4, projection_dim] float64
    tr = t.trace(feat, n_valid)                        # the intermediates (see trace())
    soft = tower("mmproj.gguf", feat, n_valid, semantics="official")

feat is the front end's [frames, 128] (float32 or float64) and n_valid = L its number of
valid frames. semantics "official" (Hugging Face) encodes only the first L frames;
"llamacpp" treats every frame as valid (L = frames; llama.cpp has no frame mask). The tower
itself is the same under both. L = 0 is an error (ValueError "too short").

CLI (the C tests call it; rows are written as little-endian float32):
    tools/ref/audio_tower.py MMPROJ FEAT.f32 FRAMES VALID OUT.f32 [official|llamacpp]
                             [--trace DIR]
or the same through tools/ref/audio.py tower .... FEAT.f32 holds FRAMES x 128 float32 (as
tests/audio_dump mel writes it); OUT.f32 gets (L+3)//4 rows of projection_dim floats; the
line "N_TOKENS PROJ_DIM" is printed. --trace DIR also writes the intermediates as float32
files DIR/<name>.f32 (conv0 [T2, M/2 * C0] post-ReLU, conv1 [N, M/4 * C1] post-ReLU,
subsample [N, D] after a.input_projection, blk<i>.ffn1 / .attn / .lconv / .ffn2 / .out
[N, D] after each residual sub-block (.out after ln2), pre_encode [N, E] with its bias,
soft [N, projection_dim]) and prints one "name rows cols" line per file.

Conventions read from the file (docs/gguf.md 4.3; tools/mkmodel writes the same):
- conv weights ggml {kw, kh, in, out} = numpy [out][in][kh][kw], kh along time, kw along
  the mel axis; PyTorch cross-correlation, stride 2, one zero row/column of padding.
- a.input_projection {C1 * M/4, D}: input index f * C1 + c (freq-major, channel-minor).
- conv_dw {K, D} = numpy [D][K]: h[t, c] = sum_j W[c, j] h[t - (K-1) + j, c].
- per_dim_scale is stored after softplus (multiplied in directly); accepted with or
  without the ".weight" suffix.
- every clipped linear has its own F32 [1] input_min/input_max/output_min/output_max.
- norm eps is 1e-6 everywhere (docs/model.md 6.3; clip.cpp overrides the file's key, 1e-5).
- a.pre_encode.out.bias is applied when present. Other a.* tensors this reference does not
  know (per-linear biases, per_dim_k_scale, mm.a.soft_emb_norm) are refused rather than
  ignored.
"""

import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from gguf import GGUFError, GGUFFile  # noqa: E402

A = "clip.audio."
EPS = 1e-6                 # every audio norm (docs/model.md 6.2, 6.3), embed_audio (4)
GRAD_CLIP = 1e10           # docs/model.md 6.3 grad_clip: min(1e10, dtype max)
CHUNK = 12                 # attention: query t sees keys t-11 .. t (docs/model.md 6.3)
MAX_PAST = 12              # HF's max_past_horizon: relative positions d = 0..12 are built
LOGIT_CAP = 50.0
MASKED = -1e9
POS_MAX_TIMESCALE = 1e4
Q_SCALE_LN2 = 1.0 / math.log(2.0)            # q: hd^-0.5 / ln 2
K_SCALE = math.log(1.0 + math.e) / math.log(2.0)
CLIPPED = ("ffn_up", "ffn_down", "attn_q", "attn_k", "attn_v", "attn_out", "conv_pw1",
           "conv_pw2", "ffn_up_1", "ffn_down_1")
BOUNDS = ("input_min", "input_max", "output_min", "output_max")


def rms_norm(x, w, eps=EPS):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def layer_norm(x, w, eps=EPS):
    """LayerNorm over the last axis: mean, biased variance, weight, no bias."""
    mu = np.mean(x, axis=-1, keepdims=True)
    d = x - mu
    var = np.mean(d * d, axis=-1, keepdims=True)
    return d / np.sqrt(var + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def grad_clip(x):
    return np.clip(x, -GRAD_CLIP, GRAD_CLIP)


def conv2d_s2(x, w):
    """x [C_in, T, F], w [C_out, C_in, 3, 3]: stride 2, one zero of padding on every side,
    cross-correlation. Returns [C_out, (T-1)//2 + 1, (F-1)//2 + 1]."""
    cin, T, F = x.shape
    To, Fo = (T - 1) // 2 + 1, (F - 1) // 2 + 1
    xp = np.zeros((cin, 2 * To + 1, 2 * Fo + 1))
    xp[:, 1:T + 1, 1:F + 1] = x
    out = np.zeros((w.shape[0], To, Fo))
    for a in range(3):
        for b in range(3):
            patch = xp[:, a:a + 2 * To:2, b:b + 2 * Fo:2]            # [C_in, To, Fo]
            out += np.einsum("oi,itf->otf", w[:, :, a, b], patch)
    return out


def sinusoid_pe(n_pos, D):
    """PE[d] = concat(sin(d tau), cos(d tau)), tau_i = exp(-i ln(1e4) / (D/2 - 1))."""
    half = D // 2
    tau = np.exp(-np.arange(half) * math.log(POS_MAX_TIMESCALE) / max(half - 1, 1))
    ang = np.arange(n_pos)[:, None] * tau[None, :]
    return np.concatenate([np.sin(ang), np.cos(ang)], axis=1)


def local_attention(q, k, v, R, window=CHUNK, cap=LOGIT_CAP):
    """The unblocked form of docs/model.md 6.3. q, k, v [T, nh, hd] (already scaled); R [>=window,
    nh, hd] the projected relative embeddings by distance d = t - s. Query t sees keys
    s = t - d for 0 <= d < window, s >= 0. Returns [T, nh * hd]."""
    T, nh, hd = q.shape
    logits = np.full((T, nh, window), -np.inf)
    for d in range(min(window, T)):
        kd = k[:T - d] + R[d][None]                                   # keys s = t - d
        logits[d:, :, d] = np.einsum("thj,thj->th", q[d:], kd)
    ok = np.isfinite(logits)
    logits = np.where(ok, cap * np.tanh(np.where(ok, logits, 0.0) / cap), -np.inf)
    logits -= logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=-1, keepdims=True)
    o = np.zeros((T, nh, hd))
    for d in range(min(window, T)):
        o[d:] += p[d:, :, d, None] * v[:T - d]
    return o.reshape(T, nh * hd)


class AudioTower:
    def __init__(self, path_or_gguf, cache_weights=None, overrides=None):
        """overrides: {tensor name: array} replacing (or adding) weights, in numpy shape;
        the self-test uses it for negative controls. cache_weights (default: when the
        audio tensors hold at most 30 M values) keeps the dequantised float64 weights."""
        g = path_or_gguf if isinstance(path_or_gguf, GGUFFile) else GGUFFile(path_or_gguf)
        self.g = g
        if g.require("general.architecture") != "clip":
            raise GGUFError("general.architecture is %r, expected \"clip\""
                            % g.get("general.architecture"))
        if not g.get("clip.has_audio_encoder", False):
            raise GGUFError("clip.has_audio_encoder is not true")
        ptype = g.get(A + "projector_type", g.get("clip.projector_type"))
        if ptype != "gemma4a":
            raise GGUFError("audio projector_type %r, expected \"gemma4a\"" % ptype)
        self.n_embd = int(g.require(A + "embedding_length"))
        self.n_layer = int(g.require(A + "block_count"))
        self.n_head = int(g.require(A + "attention.head_count"))
        self.n_ff = int(g.require(A + "feed_forward_length"))
        self.n_proj = int(g.require(A + "projection_dim"))
        self.n_mel = int(g.get(A + "num_mel_bins", 128))
        D, nh = self.n_embd, self.n_head
        if nh <= 0 or D % nh or D % 2:
            raise GGUFError("audio embedding_length %d vs head_count %d" % (D, nh))
        self.head_dim = D // nh
        self.overrides = dict(overrides or {})
        total = sum(t.n_elements for n, t in g.tensors.items()
                    if n.startswith("a.") or n.startswith("mm.a."))
        self.cache_weights = total <= 30_000_000 if cache_weights is None else cache_weights
        self._cache = {}

        c0 = g.info("a.conv1d.0.weight").dims
        c1 = g.info("a.conv1d.1.weight").dims
        if c0[:3] != (3, 3, 1) or c1[:2] != (3, 3) or c1[2] != c0[3]:
            raise GGUFError("conv dims %s / %s" % (list(c0), list(c1)))
        self.C0, self.C1 = c0[3], c1[3]
        self.M2 = (self.n_mel - 1) // 2 + 1
        self.M4 = (self.M2 - 1) // 2 + 1
        self.E = g.info("a.pre_encode.out.weight").dims[1]
        self.K = g.info("a.blk.0.conv_dw.weight").dims[0]
        self.pds_name = []
        want = {"a.conv1d.0.norm.weight": (self.C0,), "a.conv1d.1.norm.weight": (self.C1,),
                "a.input_projection.weight": (self.C1 * self.M4, D),
                "a.pre_encode.out.weight": (D, self.E),
                "mm.a.input_projection.weight": (self.E, self.n_proj)}
        F, hd = self.n_ff, self.head_dim
        for i in range(self.n_layer):
            b = "a.blk.%d." % i
            for n, sh in (("ffn_norm", (D,)), ("ffn_up", (D, F)), ("ffn_down", (F, D)),
                          ("ffn_post_norm", (D,)), ("attn_pre_norm", (D,)),
                          ("attn_q", (D, D)), ("attn_k", (D, D)), ("attn_v", (D, D)),
                          ("attn_k_rel", (D, D)), ("attn_out", (D, D)),
                          ("attn_post_norm", (D,)), ("conv_norm", (D,)),
                          ("conv_pw1", (D, 2 * D)), ("conv_dw", (self.K, D)),
                          ("norm_conv", (D,)), ("conv_pw2", (D, D)), ("ffn_norm_1", (D,)),
                          ("ffn_up_1", (D, F)), ("ffn_down_1", (F, D)),
                          ("ffn_post_norm_1", (D,)), ("ln2", (D,))):
                want[b + n + ".weight"] = sh
            for n in CLIPPED:
                for k in BOUNDS:
                    want[b + n + "." + k] = (1,)
            pds = b + "per_dim_scale.weight"
            if pds not in g.tensors and (b + "per_dim_scale") in g.tensors:
                pds = b + "per_dim_scale"
            want[pds] = (hd,)
            self.pds_name.append(pds)
        if "a.pre_encode.out.bias" in g.tensors:
            want["a.pre_encode.out.bias"] = (self.E,)
        for name, sh in want.items():
            if tuple(g.info(name).dims) != sh:
                raise GGUFError("%s dims %s, expected %s"
                                % (name, list(g.info(name).dims), list(sh)))
        known = set(want) | {"a.conv1d.0.weight", "a.conv1d.1.weight"}
        extra = sorted(n for n in g.tensors
                       if (n.startswith("a.") or n.startswith("mm.a.")) and n not in known)
        if extra:
            raise GGUFError("audio tensors this reference does not implement: %s"
                            % ", ".join(extra[:5]))
        self.has_bias = "a.pre_encode.out.bias" in g.tensors

    # ---- weights ----
    def w(self, name):
        if name in self.overrides:
            return np.asarray(self.overrides[name], dtype=np.float64)
        if name in self._cache:
            return self._cache[name]
        t = self.g.tensor(name)
        if self.cache_weights:
            self._cache[name] = t
        return t

    def bounds(self, base):
        return tuple(float(self.w(base + "." + k).reshape(-1)[0]) for k in BOUNDS)

    def clip_linear(self, x, base, stats=None):
        """clamp(clamp(x, in_min, in_max) W^T, out_min, out_max) (docs/model.md 6.3).
        stats: a dict collecting per-linear clip counts."""
        lo, hi, olo, ohi = self.bounds(base)
        xc = np.clip(x, lo, hi)
        y = xc @ self.w(base + ".weight").T
        yc = np.clip(y, olo, ohi)
        if stats is not None:
            s = stats.setdefault(base, np.zeros(6, dtype=np.int64))
            s += (np.sum(x < lo), np.sum(x > hi), x.size,
                  np.sum(y < olo), np.sum(y > ohi), y.size)
        return yc

    # ---- sub-sampling (docs/model.md 6.2) ----
    def subsample(self, feat, trace=None):
        """feat [L, M] (only valid frames) -> [(L+3)//4, D]"""
        x = np.asarray(feat, dtype=np.float64)[None]                   # [1, L, M]
        for j in (0, 1):
            x = conv2d_s2(x, self.w("a.conv1d.%d.weight" % j))
            x = layer_norm(x.transpose(1, 2, 0), self.w("a.conv1d.%d.norm.weight" % j))
            x = np.maximum(x, 0.0)                                       # [T, F, C]
            if trace is not None:
                trace["conv%d" % j] = x.reshape(x.shape[0], -1)
            x = x.transpose(2, 0, 1)                                     # [C, T, F]
        C, N, M4 = x.shape
        flat = x.transpose(1, 2, 0).reshape(N, M4 * C)                   # index f*C1 + c
        return flat @ self.w("a.input_projection.weight").T

    # ---- conformer layer (docs/model.md 6.3) ----
    def ffn(self, x, b, sfx, stats=None):
        h = rms_norm(grad_clip(x), self.w(b + "ffn_norm" + sfx + ".weight"))
        h = silu(self.clip_linear(h, b + "ffn_up" + sfx, stats))
        h = self.clip_linear(h, b + "ffn_down" + sfx, stats)
        h = rms_norm(grad_clip(h), self.w(b + "ffn_post_norm" + sfx + ".weight"))
        return x + 0.5 * h

    def rel_embeddings(self, i):
        """R [13, nh, hd]: PE[d] (d = 0..12) through attn_k_rel, no clamp, no scale."""
        pe = sinusoid_pe(MAX_PAST + 1, self.n_embd)
        R = pe @ self.w("a.blk.%d.attn_k_rel.weight" % i).T
        return R.reshape(MAX_PAST + 1, self.n_head, self.head_dim)

    def qkv(self, i, a, stats=None):
        b = "a.blk.%d." % i
        N, nh, hd = a.shape[0], self.n_head, self.head_dim
        q = self.clip_linear(a, b + "attn_q", stats).reshape(N, nh, hd)
        k = self.clip_linear(a, b + "attn_k", stats).reshape(N, nh, hd)
        v = self.clip_linear(a, b + "attn_v", stats).reshape(N, nh, hd)
        q = q * (hd ** -0.5 * Q_SCALE_LN2) * self.w(self.pds_name[i]).reshape(-1)
        k = k * K_SCALE
        return q, k, v

    def attention(self, i, x, stats=None, attn_fn=None):
        b = "a.blk.%d." % i
        a = rms_norm(grad_clip(x), self.w(b + "attn_pre_norm.weight"))
        q, k, v = self.qkv(i, a, stats)
        o = (attn_fn or local_attention)(q, k, v, self.rel_embeddings(i))
        o = self.clip_linear(o, b + "attn_out", stats)
        o = rms_norm(grad_clip(o), self.w(b + "attn_post_norm.weight"))
        return x + o

    def lightconv(self, i, x, stats=None):
        b = "a.blk.%d." % i
        D, K = self.n_embd, self.K
        h = rms_norm(x, self.w(b + "conv_norm.weight"))
        h = self.clip_linear(h, b + "conv_pw1", stats)
        h = h[:, :D] * sigmoid(h[:, D:])
        W = self.w(b + "conv_dw.weight")                                  # [D, K]
        hp = np.concatenate([np.zeros((K - 1, D)), h], axis=0)
        N = h.shape[0]
        h = sum(W[:, j][None, :] * hp[j:j + N] for j in range(K))
        h = rms_norm(grad_clip(h), self.w(b + "norm_conv.weight"))
        h = silu(h)
        h = self.clip_linear(h, b + "conv_pw2", stats)
        return x + h

    def layer(self, i, x, stats=None, trace=None, attn_fn=None):
        b = "a.blk.%d." % i
        steps = (("ffn1", lambda x: self.ffn(x, b, "", stats)),
                 ("attn", lambda x: self.attention(i, x, stats, attn_fn)),
                 ("lconv", lambda x: self.lightconv(i, x, stats)),
                 ("ffn2", lambda x: self.ffn(x, b, "_1", stats)),
                 ("out", lambda x: rms_norm(grad_clip(x), self.w(b + "ln2.weight"))))
        for name, fn in steps:
            x = fn(x)
            if trace is not None:
                trace["blk%d.%s" % (i, name)] = x
        return x

    # ---- output (docs/model.md 6.4, 4) ----
    def output(self, x):
        y = x @ self.w("a.pre_encode.out.weight").T
        if self.has_bias or "a.pre_encode.out.bias" in self.overrides:
            y = y + self.w("a.pre_encode.out.bias").reshape(-1)
        return y

    def embed_audio(self, y):
        return rms_norm(y, None, EPS) @ self.w("mm.a.input_projection.weight").T

    @staticmethod
    def n_tokens(n_valid):
        return (int(n_valid) + 3) // 4

    def valid_frames(self, feat, n_valid, semantics="official"):
        f = np.asarray(feat, dtype=np.float64)
        if f.ndim != 2 or f.shape[1] != self.n_mel:
            raise ValueError("features must be [frames, %d], got %s" % (self.n_mel, f.shape))
        if semantics == "llamacpp":
            L = f.shape[0]
        elif semantics == "official":
            L = int(n_valid)
            if L < 0 or L > f.shape[0]:
                raise ValueError("%d valid frames of %d" % (L, f.shape[0]))
        else:
            raise ValueError("semantics %r (official or llamacpp)" % semantics)
        if L == 0:
            raise ValueError("audio too short: no valid mel frame")
        if not np.all(np.isfinite(f[:L])):
            raise ValueError("non-finite features")
        return f[:L]

    def trace(self, feat, n_valid, semantics="official", stats=None, attn_fn=None):
        """Every intermediate, as a dict of float64 arrays: conv0 [T2, M2*C0] and conv1
        [N, M4*C1] (after LayerNorm + ReLU, rows f*C + c), subsample [N, D], blk<i>.ffn1,
        .attn, .lconv, .ffn2, .out [N, D], pre_encode [N, E], soft [N, projection_dim]."""
        f = self.valid_frames(feat, n_valid, semantics)
        tr = {}
        x = self.subsample(f, tr)
        tr["subsample"] = x
        for i in range(self.n_layer):
            x = self.layer(i, x, stats, tr, attn_fn)
        y = self.output(x)
        tr["pre_encode"] = y
        tr["soft"] = self.embed_audio(y)
        if tr["soft"].shape[0] != self.n_tokens(f.shape[0]):
            raise AssertionError("token count")
        return tr

    def encode(self, feat, n_valid, semantics="official", stats=None):
        return self.trace(feat, n_valid, semantics, stats)["soft"]



def tower(mmproj, feat, n_valid, semantics="official"):
    """[(L+3)//4, projection_dim] float64 soft tokens of one clip's features."""
    t = mmproj if isinstance(mmproj, AudioTower) else AudioTower(mmproj)
    return t.encode(feat, n_valid, semantics)


def tower_trace(mmproj, feat, n_valid, semantics="official"):
    t = mmproj if isinstance(mmproj, AudioTower) else AudioTower(mmproj)
    return t.trace(feat, n_valid, semantics)


def main(argv):
    args = [a for a in argv if a != "--trace"]
    trace_dir = None
    if "--trace" in argv:
        k = argv.index("--trace")
        trace_dir = argv[k + 1]
        args = argv[:k] + argv[k + 2:]
    if len(args) not in (5, 6):
        sys.exit("usage: audio_tower.py MMPROJ FEAT.f32 FRAMES VALID OUT.f32 "
                 "[official|llamacpp] [--trace DIR]")
    mm, featf, frames, valid, out = args[:5]
    sem = args[5] if len(args) == 6 else "official"
    frames, valid = int(frames), int(valid)
    feat = np.fromfile(featf, dtype="<f4")
    if feat.size != frames * 128:
        sys.exit("%s: %d floats, expected %d x 128" % (featf, feat.size, frames))
    t = AudioTower(mm)
    try:
        tr = t.trace(feat.reshape(frames, 128), valid, sem)
    except ValueError as e:
        sys.exit("error: %s" % e)
    tr["soft"].astype("<f4").tofile(out)
    print("%d %d" % tr["soft"].shape)
    if trace_dir:
        os.makedirs(trace_dir, exist_ok=True)
        for name, a in tr.items():
            a.astype("<f4").tofile(os.path.join(trace_dir, name + ".f32"))
            print("%s %d %d" % (name, a.shape[0], a.shape[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
