#!/usr/bin/python3
"""Reference BPE tokenizer built from a GGUF vocabulary (docs/model.md section 2.1).

Deliberately simple and slow. Hugging Face semantics:
  1. split the text on control (type 3) and user-defined (type 4) token
     strings by exact match (at each position the longest matching string;
     the leftmost occurrence wins); each match becomes its id;
  2. in every other segment replace " " with U+2581;
  3. one symbol per Unicode character; a character that is not a vocab piece
     becomes its UTF-8 bytes as "<0xHH>" pieces (unk if those are missing);
  4. repeatedly merge the adjacent pair with the lowest merge rank (leftmost
     on ties); the whole segment is one word (no pre-splitting);
  5. prepend bos / append eos according to add_bos_token / add_eos_token.
"""

TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER, TOKEN_UNUSED, \
    TOKEN_BYTE = 1, 2, 3, 4, 5, 6

SPACE_MARK = "\u2581"


class Tokenizer:
    def __init__(self, tokens, token_types, merges, bos_id=None, eos_id=None,
                 unk_id=None, add_bos=False, add_eos=False):
        self.tokens = list(tokens)
        self.vocab = {}
        for i, t in enumerate(self.tokens):
            # first occurrence wins if a piece is duplicated
            self.vocab.setdefault(t, i)
        types = list(token_types) if token_types is not None else \
            [TOKEN_NORMAL] * len(self.tokens)
        self.specials = sorted(
            {t for t, ty in zip(self.tokens, types)
             if ty in (TOKEN_CONTROL, TOKEN_USER) and t != ""},
            key=lambda s: (-len(s), s))
        self.specials_by_first = {}
        for s in self.specials:              # keeps longest-first order
            self.specials_by_first.setdefault(s[0], []).append(s)
        self.ranks = {}
        for rank, m in enumerate(merges):
            parts = m.split(" ")
            if len(parts) != 2 or not parts[0] or not parts[1]:
                raise ValueError("bad merge %r at rank %d" % (m, rank))
            left, right = parts
            if left + right not in self.vocab:
                raise ValueError("merge %r: result %r not in vocab"
                                 % (m, left + right))
            self.ranks.setdefault((left, right), rank)
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.unk_id = unk_id
        self.add_bos = add_bos
        self.add_eos = add_eos

    @classmethod
    def from_gguf(cls, g):
        md = g.metadata
        return cls(md["tokenizer.ggml.tokens"],
                   md.get("tokenizer.ggml.token_type"),
                   md.get("tokenizer.ggml.merges", []),
                   bos_id=md.get("tokenizer.ggml.bos_token_id"),
                   eos_id=md.get("tokenizer.ggml.eos_token_id"),
                   unk_id=md.get("tokenizer.ggml.unknown_token_id"),
                   add_bos=bool(md.get("tokenizer.ggml.add_bos_token",
                                       False)),
                   add_eos=bool(md.get("tokenizer.ggml.add_eos_token",
                                       False)))

    # ---- step 1: split on special strings ----
    def split_specials(self, text):
        """List of (is_special, string) segments."""
        out = []
        buf = []
        i = 0
        n = len(text)
        while i < n:
            hit = None
            for s in self.specials_by_first.get(text[i], ()):  # longest 1st
                if text.startswith(s, i):
                    hit = s
                    break
            if hit is not None:
                if buf:
                    out.append((False, "".join(buf)))
                    buf = []
                out.append((True, hit))
                i += len(hit)
            else:
                buf.append(text[i])
                i += 1
        if buf:
            out.append((False, "".join(buf)))
        return out

    # ---- steps 2-4: BPE of one plain segment ----
    def bpe_pieces(self, segment):
        segment = segment.replace(" ", SPACE_MARK)
        syms = []
        for ch in segment:
            if ch in self.vocab:
                syms.append(ch)
                continue
            bts = ["<0x%02X>" % b for b in ch.encode("utf-8")]
            if all(b in self.vocab for b in bts):
                syms.extend(bts)
            else:
                syms.append(None)            # unknown character
        while True:
            best = None
            best_pos = -1
            for p in range(len(syms) - 1):
                a, b = syms[p], syms[p + 1]
                if a is None or b is None:
                    continue
                r = self.ranks.get((a, b))
                if r is not None and (best is None or r < best):
                    best = r
                    best_pos = p
            if best is None:
                break
            syms[best_pos:best_pos + 2] = [syms[best_pos] + syms[best_pos + 1]]
        return syms

    def encode(self, text, add_special=True):
        ids = []
        if add_special and self.add_bos:
            ids.append(self.bos_id)
        for is_special, seg in self.split_specials(text):
            if is_special:
                ids.append(self.vocab[seg])
                continue
            prev_unk = False
            for piece in self.bpe_pieces(seg):
                if piece is None:
                    if self.unk_id is None:
                        raise ValueError("unknown character and no unk id")
                    if not prev_unk:             # fuse_unk
                        ids.append(self.unk_id)
                    prev_unk = True
                    continue
                prev_unk = False
                ids.append(self.vocab[piece])
        if add_special and self.add_eos:
            ids.append(self.eos_id)
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            if len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                try:
                    out.append(int(t[3:5], 16))
                    continue
                except ValueError:
                    pass
            out.extend(t.replace(SPACE_MARK, " ").encode("utf-8"))
        return out.decode("utf-8", errors="replace")
