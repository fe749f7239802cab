#!/usr/bin/python3
"""Float64 NumPy reference of the EmbeddingGemma 2 vision tower (docs/model.md
section 5.2), its 3x3 pooler (5.3) and embed_vision (4), reading the
llama.cpp mmproj GGUF layout (docs/gguf.md section 4).

    tower = VisionTower("mmproj.gguf")
    soft = tower.encode(patches, positions)   # [N_img, text hidden]

`patches` are the real patches of one image, [N, 3*16*16] with values in
[0, 1], each flattened as (y_in_patch, x_in_patch, channel); `positions`
are their (x = column, y = row) patch coordinates, [N, 2]. The patch order
does not matter (the result is ordered by pooled row-major index), but the
patches must cover a full ph x pw grid with ph and pw multiples of 3.

Every weight is dequantised to float64. Hyper-parameters come from the
clip.vision.* metadata; the RoPE base 100 and the 3x3 pool are fixed by
the architecture (clip.vision.projector.scale_factor overrides the pool
kernel, as in llama.cpp).
"""

import math

import numpy as np

from gguf import GGUFError, GGUFFile
from model import gelu_tanh, rms_norm, rope_neox

ROPE_THETA = 100.0
EMBED_EPS = 1e-6          # embed_vision's weightless RMSNorm (docs/model.md 4)
V = "clip.vision."


def quick_gelu(x):
    return x / (1.0 + np.exp(-1.702 * x))


def rope_2d(x, pos_xy, theta=ROPE_THETA):
    """2-D rotate-half RoPE: x [N, heads, d]; pos_xy [N, 2] as (x, y).
    Dims [0, d/2) rotate with the x position, [d/2, d) with y; inside each
    half the pairing is (j, j + d/4) with angle pos * theta^(-2j/(d/2))."""
    d = x.shape[-1]
    if d % 4:
        raise GGUFError("vision head dim %d is not a multiple of 4" % d)
    half = d // 2
    pos_xy = np.asarray(pos_xy)
    return np.concatenate([rope_neox(x[..., :half], pos_xy[:, 0], theta),
                           rope_neox(x[..., half:], pos_xy[:, 1], theta)],
                          axis=-1)


def bidirectional_attention(q, k, v, chunk=1024):
    """q, k, v: [N, heads, d]; scale 1.0, every key visible.
    Returns [N, heads * d] (head-major concat). Queries go in chunks so a
    1120-token image (9900 patches) needs no [heads, N, N] array."""
    N, nh, d = q.shape
    out = np.empty((N, nh, d))
    for h in range(nh):
        kh = np.ascontiguousarray(k[:, h, :].T)
        vh = np.ascontiguousarray(v[:, h, :])
        for i0 in range(0, N, chunk):
            s = q[i0:i0 + chunk, h, :] @ kh
            s -= np.max(s, axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= np.sum(s, axis=-1, keepdims=True)
            out[i0:i0 + chunk, h, :] = s @ vh
    return out.reshape(N, nh * d)


def grid_of(positions, k):
    """(ph, pw) of a full patch grid, checked: every (x, y) of the grid
    exactly once and both sides multiples of the pool kernel k."""
    pos = np.asarray(positions)
    if pos.ndim != 2 or pos.shape[1] != 2 or pos.shape[0] == 0:
        raise ValueError("positions must be a non-empty [N, 2] array")
    if np.any(pos < 0):
        raise ValueError("negative patch position")
    pw = int(pos[:, 0].max()) + 1
    ph = int(pos[:, 1].max()) + 1
    if ph % k or pw % k:
        raise ValueError("patch grid %dx%d (rows x cols) is not a multiple of "
                         "the %dx%d pool" % (ph, pw, k, k))
    if pos.shape[0] != ph * pw or \
            len(set(int(y) * pw + int(x) for x, y in pos)) != ph * pw:
        raise ValueError("positions do not cover the %dx%d grid exactly once"
                         % (ph, pw))
    return ph, pw


def pool_index(positions, pw, k):
    """Pooled row-major index (y//k)*(pw/k) + (x//k) of every patch."""
    pos = np.asarray(positions)
    return (pos[:, 1] // k) * (pw // k) + pos[:, 0] // k


class VisionTower:
    def __init__(self, path_or_gguf, cache_weights=None, semantics="official"):
        # semantics "llamacpp": llama.cpp's quick-GELU in the MLP (docs/model.md 8), else tanh-GELU
        self.act = quick_gelu if semantics == "llamacpp" else gelu_tanh
        g = path_or_gguf if isinstance(path_or_gguf, GGUFFile) \
            else GGUFFile(path_or_gguf)
        self.g = g
        if g.require("general.architecture") != "clip":
            raise GGUFError("general.architecture is %r, expected \"clip\""
                            % g.get("general.architecture"))
        if not g.get("clip.has_vision_encoder", False):
            raise GGUFError("clip.has_vision_encoder is not true")
        ptype = g.get(V + "projector_type", g.get("clip.projector_type"))
        if ptype != "gemma4v":
            raise GGUFError("vision projector_type %r, expected \"gemma4v\""
                            % ptype)
        self.n_embd = int(g.require(V + "embedding_length"))
        self.n_layer = int(g.require(V + "block_count"))
        self.n_head = int(g.require(V + "attention.head_count"))
        self.n_ff = int(g.require(V + "feed_forward_length"))
        self.n_proj = int(g.require(V + "projection_dim"))
        self.patch = int(g.require(V + "patch_size"))
        self.eps = float(g.get(V + "attention.layer_norm_epsilon", 1e-6))
        self.pool = int(g.get(V + "projector.scale_factor", 3))
        if self.n_head <= 0 or self.n_embd % self.n_head:
            raise GGUFError("embedding_length %d not a multiple of head_count %d"
                            % (self.n_embd, self.n_head))
        self.head_dim = self.n_embd // self.n_head
        if self.head_dim % 4:
            raise GGUFError("vision head dim %d is not a multiple of 4"
                            % self.head_dim)
        D, F, ps = self.n_embd, self.n_ff, self.patch
        self.n_in = 3 * ps * ps

        want = {"v.patch_embd.weight": (ps, ps, 3, D),
                "mm.input_projection.weight": (D, self.n_proj)}
        for i in range(self.n_layer):
            b = "v.blk.%d." % i
            for n, sh in (("ln1", (D,)), ("attn_q", (D, D)), ("attn_k", (D, D)),
                          ("attn_v", (D, D)), ("attn_q_norm", (self.head_dim,)),
                          ("attn_k_norm", (self.head_dim,)), ("attn_out", (D, D)),
                          ("attn_post_norm", (D,)), ("ln2", (D,)),
                          ("ffn_gate", (D, F)), ("ffn_up", (D, F)),
                          ("ffn_down", (F, D)), ("ffn_post_norm", (D,))):
                want[b + n + ".weight"] = sh
        for name, sh in want.items():
            if tuple(g.info(name).dims) != sh:
                raise GGUFError("%s dims %s, expected %s"
                                % (name, list(g.info(name).dims), list(sh)))
        pi = g.info("v.position_embd.weight")
        if len(pi.dims) != 3 or pi.dims[0] != D or pi.dims[2] != 2:
            raise GGUFError("v.position_embd.weight dims %s, expected [%d, P, 2]"
                            % (list(pi.dims), D))
        self.n_pos = pi.dims[1]

        total = sum(t.n_elements for t in g.tensors.values())
        self.cache_weights = total <= 30_000_000 if cache_weights is None \
            else cache_weights
        self._cache = {}

    # ---- weights ----
    def w(self, name):
        if name in self._cache:
            return self._cache[name]
        t = self.g.tensor(name)
        if self.cache_weights:
            self._cache[name] = t
        return t

    def patch_matrix(self):
        """The patch embedding as HF's Linear weight [D, 768] whose input
        index is (yy*16 + xx)*3 + c. The GGUF conv kernel {16, 16, 3, D}
        is numpy [D, c, yy, xx]."""
        K = self.w("v.patch_embd.weight")
        return K.transpose(0, 2, 3, 1).reshape(self.n_embd, self.n_in)

    # ---- forward ----
    def embed_patches(self, patches, positions):
        p = np.asarray(patches, dtype=np.float64)
        pos = np.asarray(positions)
        if p.ndim != 2 or p.shape[1] != self.n_in:
            raise ValueError("patches must be [N, %d], got %s"
                             % (self.n_in, p.shape))
        if pos.shape != (p.shape[0], 2):
            raise ValueError("positions must be [%d, 2], got %s"
                             % (p.shape[0], pos.shape))
        if not np.all(np.isfinite(p)):
            raise ValueError("non-finite patch values")
        if np.any(pos < 0) or np.any(pos >= self.n_pos):
            raise ValueError("patch position outside the %d-row position table"
                             % self.n_pos)
        tab = self.w("v.position_embd.weight")          # [2, P, D]
        x = (2.0 * (p - 0.5)) @ self.patch_matrix().T
        return x + tab[0][pos[:, 0]] + tab[1][pos[:, 1]]

    def layer(self, i, h, pos):
        b = "v.blk.%d." % i
        W = lambda n: self.w(b + n + ".weight")          # noqa: E731
        eps, N, nh, hd = self.eps, h.shape[0], self.n_head, self.head_dim
        a = rms_norm(h, W("ln1"), eps)
        q = (a @ W("attn_q").T).reshape(N, nh, hd)
        k = (a @ W("attn_k").T).reshape(N, nh, hd)
        v = (a @ W("attn_v").T).reshape(N, nh, hd)
        q = rope_2d(rms_norm(q, W("attn_q_norm"), eps), pos)
        k = rope_2d(rms_norm(k, W("attn_k_norm"), eps), pos)
        v = rms_norm(v, None, eps)
        o = bidirectional_attention(q, k, v) @ W("attn_out").T
        h = h + rms_norm(o, W("attn_post_norm"), eps)
        m = rms_norm(h, W("ln2"), eps)
        m = (self.act(m @ W("ffn_gate").T) * (m @ W("ffn_up").T)) @ W("ffn_down").T
        return h + rms_norm(m, W("ffn_post_norm"), eps)

    def tower(self, patches, positions):
        """Encoder output [N, D], rows in the order of the input patches."""
        pos = np.asarray(positions, dtype=np.int64)
        h = self.embed_patches(patches, pos)
        for i in range(self.n_layer):
            h = self.layer(i, h, pos)
        return h

    def pool_states(self, h, positions):
        """3x3 average pool in pooled row-major order, times sqrt(D):
        [(ph/3)*(pw/3), D]."""
        k = self.pool
        ph, pw = grid_of(positions, k)
        idx = pool_index(positions, pw, k)
        n_out = (ph // k) * (pw // k)
        out = np.zeros((n_out, h.shape[1]))
        np.add.at(out, idx, h)
        return out / (k * k) * math.sqrt(self.n_embd)

    def embed_vision(self, v):
        """RMSNorm without weight, then mm.input_projection: [n, n_proj]."""
        return rms_norm(v, None, EMBED_EPS) @ self.w("mm.input_projection.weight").T

    def encode(self, patches, positions):
        """Soft tokens of one image: [N_img, projection_dim]."""
        grid_of(positions, self.pool)           # fail before the heavy work
        h = self.tower(patches, positions)
        return self.embed_vision(self.pool_states(h, positions))

    def n_soft_tokens(self, positions):
        ph, pw = grid_of(positions, self.pool)
        return (ph // self.pool) * (pw // self.pool)


def grid_positions(ph, pw):
    """(x, y) of a ph x pw patch grid in row-major order (as patchified)."""
    y, x = np.divmod(np.arange(ph * pw), pw)
    return np.stack([x, y], axis=1)
