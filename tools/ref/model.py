#!/usr/bin/python3
"""Float64 NumPy reference of the EmbeddingGemma 2 text encoder (docs/model.md
section 3), reading the llama.cpp GGUF layout (docs/gguf.md section 3).

token ids in -> 768-d (embedding_length_out) L2-normalised vector out.
Every hyper-parameter comes from the GGUF metadata. Quantised weights are
simply dequantised to float64.

Media (docs/model.md 2.4, 3.3, 4): forward(ids, media={"image": rows, ...})
takes the soft-token vectors of each modality ([n, H], already through
embed_vision / embed_audio). Every placeholder id (<|image|>, <|audio|>,
<|video|>) is looked up as <pad> and its row overwritten, in sequence
order, by that modality's next vector, unscaled; text rows are scaled by
sqrt(H). The PLE is computed from these merged rows.
"""

import math

import numpy as np

from gguf import GGUFError, GGUFFile

MEDIA_KINDS = ("image", "audio", "video")


def rms_norm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w over the last axis (w may be None)."""
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi)
                                    * (x + 0.044715 * x * x * x)))


def rope_neox(x, pos, theta):
    """Rotate-half RoPE over the whole last axis.
    x: [T, heads, d]; pos: [T] integer positions."""
    d = x.shape[-1]
    half = d // 2
    j = np.arange(half, dtype=np.float64)
    inv_freq = theta ** (-2.0 * j / d)
    ang = np.asarray(pos, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos = np.cos(ang)[:, None, :]
    sin = np.sin(ang)[:, None, :]
    x1 = x[..., :half]
    x2 = x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def attention_mask(T, radius):
    """Boolean [T, T] 'allowed' mask; radius None = full bidirectional,
    else keys j with |i - j| <= radius."""
    if radius is None:
        return np.ones((T, T), dtype=bool)
    i = np.arange(T)
    return np.abs(i[:, None] - i[None, :]) <= radius


def attention(q, k, v, allowed):
    """q: [T, nh, d], k/v: [T, nkv, d]; scale 1.0; GQA kv = h // (nh/nkv).
    Returns [T, nh * dv] (head-major concat)."""
    T, nh, _ = q.shape
    nkv = k.shape[1]
    if nh % nkv != 0:
        raise GGUFError("head_count %d not a multiple of head_count_kv %d"
                        % (nh, nkv))
    group = nh // nkv
    outs = []
    for h in range(nh):
        kh = h // group
        s = q[:, h, :] @ k[:, kh, :].T                    # [T, T]
        s = np.where(allowed, s, -np.inf)
        s = s - np.max(s, axis=-1, keepdims=True)
        p = np.exp(s)
        p = p / np.sum(p, axis=-1, keepdims=True)
        outs.append(p @ v[:, kh, :])
    return np.concatenate(outs, axis=-1)


def l2_normalize(v):
    n = math.sqrt(float(np.dot(v, v)))
    return v / max(n, 1e-12)


def matryoshka(emb, k):
    """Truncate a (normalised) embedding to its first k dims and
    L2-normalise again."""
    if k <= 0 or k > len(emb):
        raise ValueError("bad Matryoshka width %d for a %d-d vector"
                         % (k, len(emb)))
    return l2_normalize(np.asarray(emb, dtype=np.float64)[:k])


def _per_layer(value, n_layer, what):
    if isinstance(value, list):
        if len(value) != n_layer:
            raise GGUFError("%s has %d entries, expected %d"
                            % (what, len(value), n_layer))
        return [int(x) for x in value]
    return [int(value)] * n_layer


class Model:
    def __init__(self, path_or_gguf, cache_weights=None):
        g = path_or_gguf if isinstance(path_or_gguf, GGUFFile) \
            else GGUFFile(path_or_gguf)
        self.g = g
        arch = g.require("general.architecture")
        self.arch = arch
        A = arch + "."

        def req(key):
            return g.require(A + key)

        self.n_embd = int(req("embedding_length"))
        self.n_layer = int(req("block_count"))
        self.n_ple = int(req("embedding_length_per_layer_input"))
        self.n_out = int(req("embedding_length_out"))
        self.eps = float(req("attention.layer_norm_rms_epsilon"))
        self.n_head = _per_layer(req("attention.head_count"), self.n_layer,
                                 "head_count")
        self.n_head_kv = _per_layer(req("attention.head_count_kv"),
                                    self.n_layer, "head_count_kv")
        pattern = req("attention.sliding_window_pattern")
        if not isinstance(pattern, list) or len(pattern) != self.n_layer:
            raise GGUFError("sliding_window_pattern must be a bool[%d]"
                            % self.n_layer)
        self.is_swa = [bool(x) for x in pattern]
        self.n_swa = int(req("attention.sliding_window"))
        # llama.cpp stores 2x the HF inclusive radius (symmetric SWA)
        self.swa_radius = self.n_swa // 2
        self.hd_k = int(req("attention.key_length"))
        self.hd_v = int(g.get(A + "attention.value_length", self.hd_k))
        self.hd_k_swa = int(req("attention.key_length_swa"))
        self.hd_v_swa = int(g.get(A + "attention.value_length_swa",
                                  self.hd_k_swa))
        self.theta = float(req("rope.freq_base"))
        self.theta_swa = float(req("rope.freq_base_swa"))
        for key, hd in (("rope.dimension_count", self.hd_k),
                        ("rope.dimension_count_swa", self.hd_k_swa)):
            nrot = g.get(A + key)
            if nrot is not None and int(nrot) != hd:
                raise GGUFError("%s%s = %d but head dim is %d: partial "
                                "rotation is not part of the spec"
                                % (A, key, nrot, hd))
        if g.get(A + "attention.causal", False):
            raise GGUFError("attention.causal is true; the encoder is "
                            "bidirectional")

        ti = g.info("token_embd.weight")
        if ti.dims[0] != self.n_embd:
            raise GGUFError("token_embd ne0 %d != embedding_length %d"
                            % (ti.dims[0], self.n_embd))
        self.n_vocab = ti.dims[1]
        ti = g.info("output.weight")
        if tuple(ti.dims) != (self.n_embd, self.n_out):
            raise GGUFError("output.weight dims %s, expected %s"
                            % (ti.dims, (self.n_embd, self.n_out)))

        # media placeholders (docs/model.md 2.4), found by piece in the vocabulary
        toks = g.get("tokenizer.ggml.tokens") or []
        self.placeholder_ids = {}
        for kind in MEDIA_KINDS:
            piece = "<|%s|>" % kind
            if piece in toks:
                self.placeholder_ids[kind] = toks.index(piece)
        self.pad_id = int(g.get("tokenizer.ggml.padding_token_id", 0))

        total = sum(t.n_elements for n, t in g.tensors.items()
                    if n != "token_embd.weight")
        if cache_weights is None:
            cache_weights = total <= 30_000_000
        self.cache_weights = cache_weights
        self._cache = {}

    # ---- weights ----
    def w(self, name):
        if name in self._cache:
            return self._cache[name]
        t = self.g.tensor(name)
        if self.cache_weights:
            self._cache[name] = t
        return t

    def layer_weights(self, i):
        p = "blk.%d." % i
        names = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_q_norm",
                 "attn_k_norm", "attn_output", "post_attention_norm",
                 "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "post_ffw_norm",
                 "inp_gate", "proj", "post_norm", "layer_output_scale"]
        return {n: self.w(p + n + ".weight") for n in names}

    # ---- forward ----
    def embed_input(self, ids, noise_rel=0.0, noise_seed=0, media=None):
        """e = token_embd[ids] * sqrt(H); optional relative noise
        e * (1 + noise_rel * N(0,1)) for conditioning tests.

        media=None: text only, every id is looked up as it is. media = a
        dict {kind: [n, H] rows} (kind "image", "audio" or "video"): every
        placeholder id becomes <pad> for the lookup and its row is replaced
        by the next vector of its kind (unscaled); the counts must match
        and a placeholder of a kind without vectors is an error."""
        for t in ids:
            if t < 0 or t >= self.n_vocab:
                raise ValueError("token id %d out of range" % t)
        if media is None:
            e = self.g.rows("token_embd.weight", ids) * math.sqrt(self.n_embd)
        else:
            unknown = set(media) - set(MEDIA_KINDS)
            if unknown:
                raise ValueError("unknown media kind %s" % sorted(unknown))
            slots = {kind: [t for t, i in enumerate(ids) if i == pid]
                     for kind, pid in self.placeholder_ids.items()}
            lookup = list(ids)
            for kind, where in slots.items():
                for t in where:
                    lookup[t] = self.pad_id
            e = self.g.rows("token_embd.weight", lookup) * math.sqrt(self.n_embd)
            for kind in MEDIA_KINDS:
                where = slots.get(kind, [])
                rows = media.get(kind)
                rows = np.zeros((0, self.n_embd)) if rows is None \
                    else np.asarray(rows, dtype=np.float64)
                if rows.ndim != 2 or rows.shape[1] != self.n_embd:
                    raise ValueError("%s vectors must be [n, %d], got %s"
                                     % (kind, self.n_embd, rows.shape))
                if rows.shape[0] != len(where):
                    raise ValueError("%d %s placeholders but %d %s vectors"
                                     % (len(where), kind, rows.shape[0], kind))
                if where:
                    e[where] = rows
        if noise_rel:
            rng = np.random.default_rng(noise_seed)
            e = e * (1.0 + noise_rel * rng.standard_normal(e.shape))
        return e

    def per_layer_inputs(self, e):
        """PLE: [T, L, P] from the input embeddings."""
        T = e.shape[0]
        W = self.w("per_layer_model_proj.weight")     # [L*P, H]
        if W.shape != (self.n_layer * self.n_ple, self.n_embd):
            raise GGUFError("per_layer_model_proj shape %s" % (W.shape,))
        z = (e @ W.T) * (self.n_embd ** -0.5)
        z = z.reshape(T, self.n_layer, self.n_ple)
        return rms_norm(z, self.w("per_layer_proj_norm.weight"), self.eps)

    def layer(self, i, h, ple_i, pos):
        W = self.layer_weights(i)
        eps = self.eps
        T = h.shape[0]
        swa = self.is_swa[i]
        nh, nkv = self.n_head[i], self.n_head_kv[i]
        dk = self.hd_k_swa if swa else self.hd_k
        dv = self.hd_v_swa if swa else self.hd_v
        theta = self.theta_swa if swa else self.theta

        # attention sub-block
        a = rms_norm(h, W["attn_norm"], eps)
        q = (a @ W["attn_q"].T).reshape(T, nh, dk)
        k = (a @ W["attn_k"].T).reshape(T, nkv, dk)
        v = (a @ W["attn_v"].T).reshape(T, nkv, dv)
        q = rms_norm(q, W["attn_q_norm"], eps)
        k = rms_norm(k, W["attn_k_norm"], eps)
        v = rms_norm(v, None, eps)
        q = rope_neox(q, pos, theta)
        k = rope_neox(k, pos, theta)
        allowed = attention_mask(T, self.swa_radius if swa else None)
        o = attention(q, k, v, allowed)
        o = o @ W["attn_output"].T
        h = h + rms_norm(o, W["post_attention_norm"], eps)

        # MLP sub-block
        m = rms_norm(h, W["ffn_norm"], eps)
        m = gelu_tanh(m @ W["ffn_gate"].T) * (m @ W["ffn_up"].T)
        m = m @ W["ffn_down"].T
        h = h + rms_norm(m, W["post_ffw_norm"], eps)

        # PLE sub-block
        gte = gelu_tanh(h @ W["inp_gate"].T) * ple_i
        gte = gte @ W["proj"].T
        h = h + rms_norm(gte, W["post_norm"], eps)

        scale = W["layer_output_scale"].reshape(-1)
        if scale.size != 1:
            raise GGUFError("layer_output_scale of layer %d has %d elements"
                            % (i, scale.size))
        return h * scale[0]

    def forward(self, ids, noise_rel=0.0, noise_seed=0, return_tokens=False,
                media=None, inputs_embeds=None):
        """Returns the L2-normalised mean-pooled embedding (float64).
        With return_tokens also the per-token outputs y [T, n_out].
        media: see embed_input. inputs_embeds [T, H] replaces the whole
        input embedding (ids then only give T)."""
        ids = [int(t) for t in ids]
        T = len(ids)
        if T == 0:
            z = np.zeros(self.n_out)
            return (z, np.zeros((0, self.n_out))) if return_tokens else z
        if inputs_embeds is not None:
            e = np.array(inputs_embeds, dtype=np.float64)
            if e.shape != (T, self.n_embd):
                raise ValueError("inputs_embeds must be [%d, %d]"
                                 % (T, self.n_embd))
        else:
            e = self.embed_input(ids, noise_rel, noise_seed, media)
        ple = self.per_layer_inputs(e)
        pos = np.arange(T)
        h = e
        for i in range(self.n_layer):
            h = self.layer(i, h, ple[:, i, :], pos)
        h = rms_norm(h, self.w("output_norm.weight"), self.eps)
        y = h @ self.w("output.weight").T                 # [T, n_out]
        s = y.mean(axis=0)
        emb = l2_normalize(s)
        return (emb, y) if return_tokens else emb
