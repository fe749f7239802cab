"""tests/corpus_gen.py DIR - the corpus of tests/test_corpus.sh: good JSONL records mixed with
every kind of bad one, at seeded random positions, with blank lines in between.

Writes into DIR:
  corpus.jsonl   the mixed corpus (three lines of 64 MiB: the line limit, one byte over it,
                 and a longer unterminated one; about 200 MB in all)
  good.jsonl     the good records only, byte for byte as in the corpus, one per line
  alone/NNNN.jsonl  each good record on its own
  expect.json    per corpus record, in order: its line, the id the output must echo, and
                 for a bad record the error code and a regex for the cause in its message

A good record is one the product must embed: docs/product.md section 2 and the man page
(INPUT FORMATS) say unknown fields are ignored, ids repeat freely (duplicate ids are not
errors), "content" stands for "text", a null prompt or title is absent, and blank lines are
not records (but still count as lines). CORPUS_SEED changes the draw."""
import json
import os
import random
import sys

W = sys.argv[1]
MAXLINE = 64 << 20  # GE_IN_MAX_LINE (cli/input.h)
LIMIT = 8192        # the model's context, in tokens
r = random.Random(int(os.environ.get("CORPUS_SEED", "20240")))

WORDS = ("the quick brown fox jumps over lazy dog embeddings map text to vectors rain Paris "
         "morning river stone light water city garden music winter summer bread table window "
         "paper market engine signal model batch record line token").split()
UNI = ["café", "naïve", "Größe", "日本語", "тест", "مرحبا", "🙂", "ñandú", "œuvre", "Ελλάδα",
       "a\tb", "x\ny", "back\\slash", "<bos>", "<|image>x<image|>"]


def words(n):
    return " ".join(r.choice(UNI) if r.random() < 0.08 else r.choice(WORDS) for _ in range(n))


def jstr(s):
    """A JSON string literal, \\u-escaped or raw UTF-8 at random."""
    return json.dumps(s, ensure_ascii=r.random() < 0.5)


serial = 0


def fresh_id():
    global serial
    serial += 1
    k = serial
    return r.choice([
        '"r%d"' % k, str(k * 7919), '"d\\u00e9j\\u00e0-%d"' % k, '"日本-%d"' % k,
        "98765432109876543210987654321%d" % k, "%d.50" % k, "-%d" % k,
        '"q\\"uote\\\\%d"' % k, '"tab\\t%d"' % k, '"\\ud83d\\ude42-%d"' % k,
    ])


UNKNOWN = [
    '{"id":"inner","text":"not this one","k":[1,2,{"id":3}]}', "0.25", '["a","b"]', "null",
    '"a cat"', '"upper-case key"', "[1,2]", "12345678901234567890", "[[[]]]",
    '"\\ud83d\\ude00"', "true", '{"image":"not a media field here"}',
]
UNKNOWN_KEYS = ["meta", "score", "tags", "lang", "image_caption", "TEXT", "ids", "n", "nested",
                "emoji", "flag", "source"]

used_ids = []
records = []  # dicts: raw (bytes), eol, good, id (str or None = line number), code, kw, ...


def good(text, idraw="fresh", fields=True, eol=None, key=None):
    if idraw == "fresh":
        x = r.random()
        if x < 0.08:
            idraw = None                    # no id: the line number
        elif x < 0.16 and used_ids:
            idraw = r.choice(used_ids)      # a repeated id: both records are embedded
        else:
            idraw = fresh_id()
    if idraw is not None:
        used_ids.append(idraw)
    m = {}
    if idraw is not None:
        m["id"] = idraw
    m[key or ("content" if r.random() < 0.06 else "text")] = jstr(text)
    if fields:
        if r.random() < 0.12:
            m["prompt"] = jstr(r.choice(["query", "document", "STS", "Retrieval-query",
                                         "task: search result | query: ", "", "CODE"]))
        if r.random() < 0.08:
            m["title"] = jstr(words(r.randint(1, 4)))
        if r.random() < 0.04:
            m[r.choice(["prompt", "title"])] = "null"
        for _ in range(r.choice([0, 0, 0, 1, 2])):
            i = r.randrange(len(UNKNOWN_KEYS))
            m[UNKNOWN_KEYS[i]] = UNKNOWN[i]
    keys = list(m)
    r.shuffle(keys)
    colon = r.choice([":", ": ", " : "])
    sep = r.choice([",", ", "])
    line = "{" + sep.join('"%s"%s%s' % (k, colon, m[k]) for k in keys) + "}"
    if r.random() < 0.03:
        line = r.choice([" ", "\t", "  "]) + line
    records.append(dict(raw=line.encode(), eol=eol or (b"\r\n" if r.random() < 0.05 else b"\n"),
                        good=True, id=idraw, kind="good"))


def bad(kind, raw, code, kw, idraw=None, **extra):
    if isinstance(raw, str):
        raw = raw.encode()
    records.append(dict(raw=raw, eol=b"\n", good=False, id=idraw, kind=kind, code=code, kw=kw,
                        **extra))


def bid():
    """An id for a bad record that has one: a fresh one, or now and then a good record's."""
    return r.choice(used_ids) if used_ids and r.random() < 0.25 else '"bad-%d"' % r.randrange(10**6)


# ---- good records ------------------------------------------------------------------------

good("the first record is good, so the format is guessed as JSONL", idraw='"first"')
for _ in range(3):
    good(words(8), idraw='"dup"', fields=False)          # the same id three times
good("same text, same id", idraw='"twin"')
good("same text, same id", idraw='"twin"')
good("", idraw='"empty-text"')
good("nul \x00 inside", idraw='"nul"')
good(words(5), idraw=None, key="content")
for _ in range(240):
    good(words(r.randint(1, 25)))
for _ in range(12):
    good(words(r.randint(60, 200)))
good(words(6), idraw='"huge-unused-number"', fields=False)
records[-1]["raw"] = records[-1]["raw"][:-1] + b',"score":1e400,"n":-123456789e999}'
good(words(700), idraw='"long-1"')   # more tokens than a default wave (2048): runs alone
good(words(250), idraw='"long-2"')
head = '{"id":"edge-64MiB","text":"a line of exactly the limit is read"'
good_edge = head + " " * (MAXLINE - len(head) - 1) + "}"
# a carriage return before the newline does not count toward the limit
records.append(dict(raw=good_edge.encode(), eol=b"\r\n", good=True, id='"edge-64MiB"', kind="good"))
ngood = len(records)

# ---- bad records -------------------------------------------------------------------------

J = r"^invalid JSON: "
for s in ['{"id":"m1","text":"unterminated}', '{"id":"m2","text":"trailing comma",}',
          '{"id":"m3" "text":"no comma"}', "{'id':'m4','text':'single quotes'}",
          '{"id":"m5","text":"x"} trailing garbage', '{"id":"m6","text":"x"}{"id":"m7","text":"y"}',
          '{"id":"m8","text":NaN}', '{"id":"m9","text":"raw\ttab"}', '{"id":"m10","text":"x"',
          '{"id":"m11","text":"x"}}', '{"id":m12,"text":"bare word id"}', "not json at all",
          "}", "{", "\x00", '\ufeff{"id":"bom-mid-file","text":"x"}', '\x0b{"id":"vt","text":"x"}',
          '{"id":"m13","text":"bad escape \\x41"}', '{"id":"m14","text":"x",,"a":1}']:
    bad("malformed", s, "bad_json", J)
for _ in range(3):
    bad("malformed", '{"id":%s,"text":"a","text":"the same key twice"}' % bid(), "bad_json",
        r"^invalid JSON: duplicate")

for v in ["42", "[\"a\"]", "{\"t\":1}", "true", "-1.5e3"]:
    bad("wrong_type", '{"id":%s,"text":%s}' % (bid(), v), "bad_record", r'"text" must be a string',
        idraw="keep")
bad("wrong_type", '{"id":%s,"content":3.5}' % bid(), "bad_record", r'"content" must be a string',
    idraw="keep")
for v in ['{"a":1}', "[1]", "true", "false", "null", "[]"]:
    bad("wrong_type", '{"id":%s,"text":"x"}' % v, "bad_record", r"id must be a string or number")
for k, v in [("prompt", "7"), ("title", '["a"]'), ("prompt", '"a\\u0000b"'), ("title", "{}")]:
    bad("wrong_type", '{"id":%s,"text":"x","%s":%s}' % (bid(), k, v), "bad_record",
        r'"%s" must be a string' % k, idraw="keep")
for s in ["[1,2,3]", '"just a string"', "42", "null", "true", "[]"]:
    bad("not_object", s, "bad_record", r"not a JSON object")

for fmt in ['{"id":%s}', '{"id":%s,"title":"only a title"}', '{"id":%s,"txt":"typo"}',
            '{"id":%s,"text":null}', '{"id":%s,"Text":"wrong case"}', '{"id":%s,"prompt":"query"}']:
    bad("missing_text", fmt % bid(), "bad_record", r'no "text"', idraw="keep")
bad("missing_text", "{}", "bad_record", r'no "text"')
bad("missing_text", '{"meta":{"text":"nested is not the text"}}', "bad_record", r'no "text"')

U = r"(?i)utf-?8|decode byte 0x[0-9a-f]{2}"
for b in [b'{"id":"u1","text":"x\xffy"}', b'{"id":"u2","text":"over\xc0\xaflong"}',
          b'{"id":"u3","text":"surrogate \xed\xa0\x80"}', b'{"id":"u4","text":"cut \xe2\x82"}',
          b'{"id":"u5","text":"stray \x80"}', b'{"id":"u6","text":"beyond \xf4\x90\x80\x80"}',
          b'{"id":"\xfe-in-id","text":"x"}', b'{"id":"u7","text":"x","meta":"\xc3"}',
          b'{"id":"u8","te\xe9xt":"in a key"}', b'{"id":"u9","text":"latin-1 caf\xe9"}']:
    bad("bad_utf8", b, "bad_utf8", U)
for e in ["\\ud800", "x \\udc00 y", "\\ud800\\u0041", "end \\udbff"]:
    bad("surrogate", '{"id":%s,"text":"%s"}' % (bid(), e), "bad_json",
        r"(?i)invalid unicode|surrogate")
bad("surrogate", '{"id":"\\ud800","text":"x"}', "bad_json", r"(?i)invalid unicode|surrogate")

P = r"media placeholder <\|(image|audio|video)\|>"
bad("placeholder", '{"id":%s,"text":"look at <|image|> here"}' % bid(), "input", P, idraw="keep")
bad("placeholder", '{"id":%s,"text":"x","title":"<|audio|>"}' % bid(), "input", P, idraw="keep")
bad("placeholder", '{"id":%s,"text":"x","prompt":"see <|video|> "}' % bid(), "input", P,
    idraw="keep")

MEDIA = r"image|audio|video|content"
for s in ['{"id":%s,"image":"/nonexistent/dir/cat.png"}', '{"id":%s,"audio":"missing-a1.wav"}',
          '{"id":%s,"video":"./no/such/clip.mp4","text":"a caption as well"}',
          '{"id":%s,"image":"no-such-photo.jpg","text":"both"}',
          '{"id":%s,"content":[{"type":"text","text":"Product photo:"},'
          '{"type":"image","path":"/nonexistent/shoe.jpg"}]}',
          '{"id":%s,"content":[{"type":"audio","path":"nope.wav"}]}',
          '{"id":%s,"image_b64":"AAAA"}', '{"id":%s,"audio_b64":"data:audio/wav;base64,UklGRg=="}']:
    bad("media", s % bid(), ["unsupported", "io"], MEDIA, idraw="keep")

T = r"too long: (\d+) tokens, the limit is %d" % LIMIT
for n in [12000, 20000, 30000]:
    t = "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))
    bad("too_many_tokens", '{"id":%s,"text":"%s"}' % (bid(), t), "too_long", T, idraw="keep")
bad("too_many_tokens", '{"id":"bos-8191","text":"%s"}' % ("<bos>" * (LIMIT - 1)), "too_long", T,
    idraw="keep", ntok=LIMIT + 1)   # <bos> + 8191 x <bos> + <eos>: one token over
bad("too_many_tokens", '{"id":"prompt-over","text":"%s","prompt":"query"}' % ("<bos>" * (LIMIT - 2)),
    "too_long", T, idraw="keep")    # 8192 tokens of text and a prompt on top
# a line of a few MB: good JSON, far too many tokens
bad("too_many_tokens", json.dumps({"id": "mb-line", "text": words(400000)}, separators=(",", ":")),
    "too_long", T, idraw="keep")
L = r"line longer than %d bytes" % MAXLINE
head = '{"id":"over-64MiB","text":"one byte over the line limit"'
bad("huge_line", head + " " * (MAXLINE - len(head)) + "}", "too_long", L)
bad("huge_line", '{"id":"huge","text":"' + "a" * (MAXLINE + (1 << 20)), "too_long", L)

for rec in records:  # "keep": the record's own id, the JSON value right after {"id":
    if rec["id"] == "keep":
        s = rec["raw"].decode()
        assert s.startswith('{"id":'), s[:40]
        rec["id"] = s[6:json.JSONDecoder().raw_decode(s, 6)[1]]

# ---- mix ---------------------------------------------------------------------------------

goods, bads = records[1:ngood], records[ngood:]
order = goods[:]
for b in bads:
    order.insert(r.randint(0, len(order)), b)
order.insert(0, records[0])
BLANKS = [b"", b"   ", b"\t", b"\r", b" \t \r"]
lines = [b"", b"  \t"]   # blank lines before the first record too
for rec in order:
    while r.random() < 0.06:
        lines.append(r.choice(BLANKS) + b"\n")
    lines.append(rec)
lines.append(b"\n")
lines.append(b" " * (MAXLINE + 100) + b"\n")  # a blank line over the limit is still blank
lines.append(b"\r\n")
last = dict(raw=b'{"id":"last","text":"the final line has no newline"}', eol=b"", good=True,
            id='"last"', kind="good")
lines.append(last)

os.makedirs(W + "/alone", exist_ok=True)
expect, lineno, gi = [], 0, 0
with open(W + "/corpus.jsonl", "wb") as f, open(W + "/good.jsonl", "wb") as g:
    for x in lines:
        lineno += 1
        if isinstance(x, bytes):
            f.write(x if x.endswith(b"\n") else x + b"\n")
            continue
        f.write(x["raw"] + x["eol"])
        e = {"line": lineno, "id": x["id"] if x["id"] is not None else str(lineno),
             "good": x["good"], "kind": x["kind"]}
        if x["good"]:
            e["gi"] = gi
            g.write(x["raw"] + (x["eol"] or b"\n"))
            with open(W + "/alone/%04d.jsonl" % gi, "wb") as a:
                a.write(x["raw"] + (x["eol"] or b"\n"))
            gi += 1
        else:
            e["code"] = x["code"] if isinstance(x["code"], list) else [x["code"]]
            e["kw"] = x["kw"]
            if "ntok" in x:
                e["ntok"] = x["ntok"]
        expect.append(e)
json.dump({"records": expect, "ngood": gi, "lines": lineno}, open(W + "/expect.json", "w"),
          indent=0)
kinds = {}
for e in expect:
    kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
print("%d lines, %d records: %s" % (lineno, len(expect),
                                    ", ".join("%s %d" % kv for kv in sorted(kinds.items()))))
