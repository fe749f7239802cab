#!/usr/bin/python3
"""Passages of a long text (--chunk, --late-chunk), restated from docs/model.md 2.6 apart
from the C code (engine/chunk.c), for the goldens and tests/chunk_ref_check.py.

token_ends(tok, text): the reference tokenizer's tokens of a text (no <bos>/<eos>) and, for
each, the byte of the UTF-8 text where it ends and whether that end falls inside a character
(a <0xHH> piece of a character written in bytes).

plan(data, ends, mid, budget, overlap): the passages as (tok_lo, tok_hi, lo, hi):
  - a window holds at most `budget` tokens;
  - a window that does not reach the last token is cut, among the token ends in its last
    tenth (budget // 10, at least one token) that are not inside a character, at the last
    one after a sentence end (. ! ? or U+3002 U+FF01 U+FF1F, followed by whitespace or the
    end of the text), else the last one at whitespace (before or after it), else the last
    one; never inside a character (then earlier, down to one token);
  - the next window starts `overlap` tokens before the cut, at least one token after the
    previous start: moved back to a whole character when it falls inside one (more overlap),
    and forward when it cannot move back (less).

windows(n, room, passages): --late-chunk's passes over a text of n tokens: one window of the
whole text when it fits in `room`; else windows of `room` tokens every room - L tokens (L the
longest passage), or, when that step is under a quarter of the room (or zero), one window per
passage centred on it (clamped to the text); each passage takes the window that holds it
with the most context on its shorter side (a side at the text's own end counts as
unlimited), the first on a tie.

passages(tok, prefix, text, n, overlap, late, max_tokens): a record's passages, as
(start, end) code points and the sequences and spans they are pooled from (docs/model.md 2.6).
"""

SPACE_MARK = "\u2581"
SENTENCE = (b".", b"!", b"?", "\u3002".encode(), "\uff01".encode(), "\uff1f".encode())
WHITE = b" \n\t\r"


def token_ends(tok, text):
    """(ids, ends, mid) of text's own tokens (bytes of its UTF-8)."""
    ids = tok.encode(text, add_special=False)
    data = text.encode("utf-8")
    chars = []  # (start byte, bytes as the pieces spell them) of each character
    at = 0
    for ch in text:
        b = ch.encode("utf-8")
        chars.append((at, SPACE_MARK.encode() if ch == " " else b, len(b)))
        at += len(b)
    ends, mid = [], []
    c, used = 0, 0  # the character and how many of its spelled bytes the tokens took
    specials = set(tok.specials)
    for i in ids:
        piece = tok.tokens[i]
        if used == 0 and piece in specials:  # a control or user token: its own bytes
            stop = chars[c][0] + len(piece.encode())
            while c < len(chars) and chars[c][0] < stop:
                c += 1
        elif i == tok.unk_id:
            c += 1                          # fused unknown characters
            while c < len(chars) and not known(tok, text_char(chars, data, c)):
                c += 1
        else:
            k = 1 if (len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">")) \
                else len(piece.encode())
            while k > 0 and c < len(chars):
                take = min(len(chars[c][1]) - used, k)
                used += take
                k -= take
                if used == len(chars[c][1]):
                    c, used = c + 1, 0
        ends.append(chars[c][0] if c < len(chars) else len(data))
        mid.append(used != 0)
    return ids, ends, mid


def text_char(chars, data, c):
    start = chars[c][0]
    return data[start:start + chars[c][2]].decode("utf-8")


def known(tok, ch):
    s = SPACE_MARK if ch == " " else ch
    if s in tok.vocab:
        return True
    return all("<0x%02X>" % b in tok.vocab for b in s.encode("utf-8"))


def plan(data, ends, mid, budget, overlap):
    if budget <= 0 or overlap >= budget:
        raise ValueError("the overlap must be below the budget")
    n = len(ends)
    whole = lambda k: k == 0 or not mid[k - 1]  # noqa: E731
    out, s = [], 0
    while True:
        e = min(s + budget, n)
        if e < n:
            tenth = max(budget // 10, 1)
            lo = max(e - tenth, s + 1)
            cand = [k for k in range(lo, e + 1) if whole(k)]
            def at(k):
                return ends[k - 1]
            sent = [k for k in cand if data[:at(k)].endswith(SENTENCE) and
                    (at(k) == len(data) or data[at(k):at(k) + 1] in
                     [bytes([w]) for w in WHITE])]
            ws = [k for k in cand if at(k) == len(data) or data[at(k)] in WHITE or
                  (at(k) > 0 and data[at(k) - 1] in WHITE)]
            e = sent[-1] if sent else ws[-1] if ws else cand[-1] if cand else e
            while e > s + 1 and not whole(e):
                e -= 1
        out.append((s, e, ends[s - 1] if s else 0, ends[e - 1] if e else 0))
        if e >= n:
            return out
        nxt = e - overlap if e > s + overlap else s + 1
        nxt = max(nxt, s + 1)
        while nxt > s + 1 and not whole(nxt):
            nxt -= 1
        while not whole(nxt) and nxt < e:
            nxt += 1
        s = nxt


def windows(n, room, passages):
    longest = max(hi - lo for lo, hi, _, _ in passages)
    if longest > room:
        raise ValueError("a passage is longer than a window")
    step = room - longest
    if n <= room:
        wins = [(0, n)]
    elif step > 0 and step >= room // 4:
        wins, a = [], 0
        while True:
            wins.append((a, min(a + room, n)))
            if a + room >= n:
                break
            a += step
    else:
        wins = []
        for lo, hi, _, _ in passages:
            a = max((lo + hi) // 2 - room // 2, 0)
            a = min(a, n - room)
            wins.append((a, a + room))
    inf = float("inf")
    chosen = []
    for lo, hi, _, _ in passages:
        best, best_ctx = None, -1
        for j, (a, b) in enumerate(wins):
            if a <= lo and hi <= b:
                ctx = min(inf if a == 0 else lo - a, inf if b == n else b - hi)
                if ctx > best_ctx:
                    best, best_ctx = j, ctx
        chosen.append(best)
    return wins, chosen


def passages(tok, prefix, text, n, overlap, late, max_tokens):
    """[(start, end, ids, lo, hi)]: each passage's code points and the sequence it is pooled
    from with its span; --chunk: the passage's own record (prefix + its text), whole."""
    whole = tok.encode(prefix + text)
    if len(whole) <= n:
        if not late:
            return [(0, len(text), whole, 0, len(whole))]
    # the text's own tokens: where each ends in prefix + text; those ending past the prefix
    ids, ends, mid = token_ends(tok, prefix + text)
    plen = len(prefix.encode("utf-8"))
    head = 0
    while head < len(ids) and ends[head] <= plen:
        head += 1
    bos = [tok.bos_id] if tok.add_bos else []
    eos = [tok.eos_id] if tok.add_eos else []
    pre = bos + ids[:head]
    frame = len(pre) + len(eos)
    tids, tends, tmid = ids[head:], [e - plen for e in ends[head:]], mid[head:]
    data = text.encode("utf-8")
    cp = lambda b: len(data[:b].decode("utf-8"))  # noqa: E731
    if len(whole) <= n:
        plan_ = [(0, len(tids), 0, len(data))]
    else:
        if frame >= n:
            raise ValueError("too_long")
        room = n - frame
        while True:
            plan_ = plan(data, tends, tmid, room, min(overlap, room - 1))
            if late:
                break
            seqs = [tok.encode(prefix + data[lo:hi].decode("utf-8")) for _, _, lo, hi in plan_]
            if all(len(q) <= n for q in seqs):
                return [(cp(lo), cp(hi), q, 0, len(q))
                        for (_, _, lo, hi), q in zip(plan_, seqs)]
            room -= 1
    wins, chosen = windows(len(tids), max_tokens - frame, plan_)
    out = []
    for (tlo, thi, lo, hi), j in zip(plan_, chosen):
        a, b = wins[j]
        seq = pre + tids[a:b] + eos
        s0, s1 = len(pre) + tlo - a, len(pre) + thi - a
        if s0 == s1:
            s0, s1 = 0, len(seq)
        out.append((cp(lo), cp(hi), seq, s0, s1))
    return out
