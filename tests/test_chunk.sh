#!/usr/bin/env bash
# tests/test_chunk.sh - long texts as passages (issue 20): --chunk rows equal, byte for byte,
# each passage's text embedded as a record of its own (and its --tokenize ids); --chunk and
# --late-chunk agree with the NumPy reference (tools/ref/embed.py, which restates the planner
# and the windows) on offsets exactly and on vectors at the gates, across windows of a short
# context; texts just under and over N, prompts and titles, media records, usage errors; a
# 100,000-token text in bounded memory; kill -9 inside a text's passages, then --resume;
# shards + merge and the cache per record.
#
#   BIN=./gemmaembed MODEL=testdata/tiny-f32.gguf PYTHON=/usr/bin/python3 bash tests/test_chunk.sh
#
# Prints "PASS: name" or "FAIL: name: detail" per check and exits non-zero if any failed.
set -u
cd "$(dirname "$0")/.." || exit 1

BIN=${BIN:-./gemmaembed}
MODEL=${MODEL:-testdata/tiny-f32.gguf}
MMPROJ=${MMPROJ:-testdata/tiny-mmproj-q8_0.gguf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/test_chunk.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
unset GEMMAEMBED_MODEL
ROOT=$PWD
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
case $MODEL in /*) ;; *) MODEL=$PWD/$MODEL ;; esac
case $MMPROJ in /*) ;; *) MMPROJ=$PWD/$MMPROJ ;; esac
. tests/lib.sh

for need in "$BIN" "$MODEL" "$MMPROJ"; do
    [ -e "$need" ] || { echo "FAIL: setup: $need not found"; exit 1; }
done
cd "$T" || exit 1
M=(-m "$MODEL" -q)
same() { # NAME FILE FILE...: pairs byte-identical
    local name=$1 a b
    shift
    while [ $# -ge 2 ]; do
        a=$1 b=$2
        shift 2
        cmp -s "$a" "$b" || { fail "$name" "$(cmp "$a" "$b" 2>&1 | head -1)"; return; }
    done
    pass "$name"
}
usage() { # NAME WANT ARGS...: exit 2 with WANT in the message
    local name=$1 want=$2
    shift 2
    "$BIN" "${M[@]}" "$@" docs.jsonl >/dev/null 2>u.err
    local rc=$?
    [ $rc = 2 ] && grep -q -- "$want" u.err && pass "usage error: $name" ||
        fail "usage error: $name" "exit $rc: $(head -c 300 u.err)"
}

# documents: prose, CJK, emoji (ZWJ and skin tones), combining marks, code, a title, an empty
# and a short text; sentences end inside windows, some words are long byte pieces
"$PY" - <<'EOF'
import json, random
r = random.Random(20)
words = ("alpha beta gamma delta the quick brown fox jumps over lazy dog retrieval "
         "embedding passage window").split()
exotic = ["日本語のテキスト", "中文句子", "😀", "👩‍👩‍👧", "👍🏽", "e\u0301", "n\u0303o",
          "Ünïcödé", "ℵ₀", "\u0915\u094d\u0937"]
def text(n):
    out = []
    for i in range(n):
        w = r.choice(exotic) if r.random() < 0.15 else r.choice(words)
        end = r.choice([". ", "。", "! ", "? ", "\n\n"]) if r.random() < 0.1 else " "
        out.append(w + end)
    return "".join(out).strip()
code = "\n".join("def f%d(x):\n    return x * %d  # step %d" % (i, i, i) for i in range(40))
docs = [{"id": 1, "text": text(400)}, {"id": "cjk", "text": "".join(r.choice(exotic) for _ in range(200))},
        {"id": 3, "text": code}, {"id": 4, "title": "A title", "text": text(150)},
        {"id": 5, "text": ""}, {"id": 6, "text": "short"}, {"id": 7, "prompt": "query", "text": text(120)}]
with open("docs.jsonl", "w") as f:
    for d in docs:
        f.write(json.dumps(d, ensure_ascii=False) + "\n")
EOF

# ---- --chunk: each passage is a record of its own ---------------------------------------------
"$BIN" "${M[@]}" --prompt document --chunk 40:6 -o c.npy docs.jsonl
"$BIN" "${M[@]}" --prompt document --chunk 40:6 --tokenize docs.jsonl >c.tok
"$PY" - <<'EOF'
import json
docs = {json.dumps(d["id"]): d for d in map(json.loads, open("docs.jsonl"))}
with open("slices.jsonl", "w") as f:
    for line in open("c.npy.ids.jsonl"):
        row = json.loads(line)
        d = dict(docs[json.dumps(row["id"])])
        d["text"] = d["text"][row["start"]:row["end"]]  # Python string slicing
        f.write(json.dumps(d, ensure_ascii=False) + "\n")
EOF
"$BIN" "${M[@]}" --prompt document -o s.npy slices.jsonl
"$BIN" "${M[@]}" --prompt document --tokenize slices.jsonl >s.tok
rows=$(wc -l <c.npy.ids.jsonl)
[ "$rows" -gt 30 ] && cmp -s <(tail -c +129 c.npy) <(tail -c +129 s.npy) &&
    pass "--chunk: $rows passages = their texts (sliced by the offsets) embedded alone, byte for byte" ||
    fail "--chunk byte identity" "$rows rows; $(cmp <(tail -c +129 c.npy) <(tail -c +129 s.npy) 2>&1)"
py <<'EOF'
import json
c = [json.loads(l) for l in open("c.tok")]
s = [json.loads(l) for l in open("s.tok")]
ok = len(c) == len(s) and all(a["tokens"] == b["tokens"] for a, b in zip(c, s))
print("PASS: --tokenize round trip: each passage's ids are its text's own" if ok else
      "FAIL: --tokenize round trip: differs")
big = max(len(a["tokens"]) for a in c)
print("PASS: no passage over 40 tokens (longest %d)" % big if big <= 40 else
      "FAIL: passage size: %d tokens" % big)
by = {}
for a in c:
    by.setdefault(json.dumps(a["id"]), []).append(a)
good = all([p["chunk"] for p in v] == list(range(len(v))) and
           all(p["chunks"] == len(v) for p in v) and v[0]["start"] == 0 and
           all(q["start"] <= p["end"] and q["start"] > p["start"] for p, q in zip(v, v[1:]))
           for v in by.values())
print("PASS: passages in order, numbered, overlapping, from offset 0" if good else
      "FAIL: passage order: %s" % by)
one = [by[k][0] for k in ('5', '6')]
print("PASS: an empty and a short text: chunk 0 of 1" if all(p["chunks"] == 1 and p["end"] ==
      (0 if p["id"] == 5 else 5) for p in one) else "FAIL: short texts: %s" % one)
EOF

# ---- against the NumPy reference, across windows of a 160-token context ----------------------
"$PY" "$ROOT/tools/mkmodel" --preset tiny --type f32 --seed 3 --ctx 160 -o ctx160.gguf
"$PY" "$ROOT/tools/mkmodel" --preset tiny --type q8_0 --seed 3 --ctx 160 -o ctx160-q8.gguf
# every kernel tier this CPU runs, and the reference paths (--no-flash --no-sgemm ...); under
# the sanitizers the best tier only (the release suite runs the others)
mapfile -t tiers < <(cpu_tiers)
[ "$SAN" -eq 1 ] && tiers=("${tiers[@]: -1}")
for mode in chunk late-chunk; do
    for m in ctx160 ctx160-q8; do
        "$PY" "$ROOT/tools/ref/embed.py" -m $m.gguf --$mode 48:8 docs.jsonl >$m-$mode.ref
        for tier in "${tiers[@]}" ref; do
            sw=(--cpu-tier "$tier")
            [ $tier = ref ] && sw=(--no-flash --no-sgemm --no-vnni256 --no-prepack)
            "$BIN" -m $m.gguf -q "${sw[@]}" --$mode 48:8 docs.jsonl >$m-$mode-$tier.jsonl
        done
    done
done
py "${tiers[@]}" ref <<'EOF'
import json, sys, numpy as np
for mode in ("chunk", "late-chunk"):
  for tier in sys.argv[1:]:
    for m, gate in (("ctx160", 1e-5), ("ctx160-q8", 1e-3)):
        c = [json.loads(l) for l in open("%s-%s-%s.jsonl" % (m, mode, tier))]
        r = [json.loads(l) for l in open("%s-%s.ref" % (m, mode))]
        key = lambda x: (json.dumps(x["id"]), x["chunk"], x["chunks"], x["start"], x["end"])
        if len(c) != len(r) or [key(x) for x in c] != [key(x) for x in r]:
            print("FAIL: %s %s %s: passages differ from the reference's" % (mode, m, tier))
            continue
        worst = max(1 - np.dot(a["embedding"], b["embedding"]) /
                    np.linalg.norm(a["embedding"]) / np.linalg.norm(b["embedding"])
                    for a, b in zip(c, r))
        long_ = sum(len(x["tokens"]) == 160 for x in r)
        print(("PASS" if worst <= gate else "FAIL") +
              ": --%s on %s, %s: %d passages, offsets = the reference's, 1-cos %.2g (gate %g)%s"
              % (mode, m, tier, len(c), worst, gate,
                 ", %d pooled from full 160-token windows" % long_ if mode == "late-chunk" else ""))
EOF

# ---- just under and just over N; prompts count ------------------------------------------------
"$PY" - <<'EOF'
import json
with open("grow.jsonl", "w") as f:
    for k in range(1, 60):
        f.write(json.dumps({"id": k, "text": " ".join(["word"] * k)}) + "\n")
EOF
"$BIN" "${M[@]}" --prompt query --tokenize grow.jsonl >grow.tok
"$BIN" "${M[@]}" --prompt query --chunk 24 grow.jsonl >grow.c
"$BIN" "${M[@]}" --prompt query --late-chunk 24 grow.jsonl >grow.l
py <<'EOF'
import json
n = {json.loads(l)["id"]: len(json.loads(l)["tokens"]) for l in open("grow.tok")}
for f in ("grow.c", "grow.l"):
    rows = [json.loads(l) for l in open(f)]
    chunks = {r["id"]: r["chunks"] for r in rows}
    at = [k for k in n if n[k] == 24][0]
    ok = all(chunks[k] == 1 for k in n if n[k] <= 24) and all(chunks[k] >= 2 for k in n if n[k] > 24)
    print(("PASS" if ok else "FAIL") + ": %s: a text of 24 tokens with its prompt is one passage, of 25 two (record %d: %d, %d: %d)"
          % (f, at, chunks[at], at + 1, chunks[at + 1]))
EOF

# ---- records with media: one passage, never split ----------------------------------------------
cp "$ROOT/testdata/images/tiny.png" img.png
"$PY" - <<'EOF'
import json
with open("media.jsonl", "w") as f:
    f.write(json.dumps({"id": "m1", "image": "img.png", "text": "a small picture"}) + "\n")
    f.write(json.dumps({"id": "m2", "image": "img.png", "text": "long " * 400}) + "\n")
EOF
"$BIN" "${M[@]}" --mmproj "$MMPROJ" --image-tokens 70 --chunk 128 media.jsonl >media.c
"$BIN" "${M[@]}" --mmproj "$MMPROJ" --image-tokens 70 media.jsonl >media.plain
py <<'EOF'
import json
c = [json.loads(l) for l in open("media.c")]
p = [json.loads(l) for l in open("media.plain")]
ok = c[0].get("chunk") == 0 and c[0].get("chunks") == 1 and c[0]["end"] == 15 and \
     c[0]["embedding"] == p[0]["embedding"]
print("PASS: a record with media that fits: chunk 0 of 1, the plain vector" if ok else
      "FAIL: media record: %s" % str(c[0])[:200])
e = c[1].get("error", {})
ok = e.get("code") == "too_long" and "not split" in e.get("message", "") and "over the passage size 128" in e["message"]
print("PASS: a record with media over N: too_long naming the counts (%s)" % e.get("message") if ok else
      "FAIL: long media record: %s" % c[1])
EOF

# ---- usage errors ----------------------------------------------------------------------------------
usage "overlap = N" "must be less than N" --chunk 16:16
usage "overlap > N" "must be less than N" --late-chunk 16:20
usage "--truncate with --chunk" "cannot be used with --chunk" --chunk 64 --truncate
usage "--truncate with --late-chunk" "cannot be used with --late-chunk" --late-chunk 64 --truncate
usage "both modes" "cannot be used together" --chunk 64 --late-chunk 64
usage "N = 0" "is not N or N:OVERLAP" --chunk 0
usage "not a number" "is not N or N:OVERLAP" --chunk 12x
usage "N over the context" "at most the model's context of 8192" --chunk 9000
usage "openai-batch output" "cannot hold passages" --chunk 64 --format openai-batch
GEMMAEMBED_CHUNK=64 "$BIN" "${M[@]}" --late-chunk 64 docs.jsonl >env.l 2>u.err &&
    "$BIN" "${M[@]}" --late-chunk 64 docs.jsonl | cmp -s - env.l &&
    pass "--late-chunk replaces GEMMAEMBED_CHUNK (a flag wins)" || fail "flag over env" "$(cat u.err)"
GEMMAEMBED_CHUNK=16:16 "$BIN" "${M[@]}" docs.jsonl >/dev/null 2>u.err
[ $? = 2 ] && grep -q "GEMMAEMBED_CHUNK" u.err && pass "usage error: from GEMMAEMBED_CHUNK, named" ||
    fail "GEMMAEMBED_CHUNK" "$(cat u.err)"

# ---- a 100,000-token text: bounded memory, one pass per window ----------------------------------
# (10,000 tokens under the sanitizers: the 100,000 took minutes there)
words=29500
[ "$SAN" -eq 1 ] && words=2950
"$PY" - "$words" <<'EOF'
import json, random, sys
r = random.Random(1)
w = "alpha beta gamma delta epsilon zeta the quick brown fox jumps".split()
def doc(n):
    return " ".join(r.choice(w) + ("." if r.random() < 0.08 else "") for _ in range(n))
n = int(sys.argv[1])
json.dump({"id": "big", "text": doc(n)}, open("big.jsonl", "w"))  # ~3.4 tokens a word
json.dump({"id": "mid", "text": doc(n // 10)}, open("mid.jsonl", "w"))
EOF
for f in mid big; do
    for mode in chunk late-chunk; do
        /usr/bin/time -f "%M %e" -o $f-$mode.time "$BIN" "${M[@]}" --$mode 512:32 -o $f-$mode.npy $f.jsonl
    done
done
"$BIN" "${M[@]}" --tokenize big.jsonl | "$PY" -c 'import json,sys; print(len(json.loads(sys.stdin.read())["tokens"]))' >big.n
read -r rss_c t_c <big-chunk.time
read -r rss_l t_l <big-late-chunk.time
read -r rss_mc _ <mid-chunk.time
read -r rss_ml _ <mid-late-chunk.time
py "$(cat big.n)" "$rss_c" "$rss_l" "$rss_mc" "$rss_ml" "$t_c" "$t_l" "$words" <<'EOF'
import json, sys, numpy as np
n, rc, rl, mc, ml = map(int, sys.argv[1:6])
tc, tl = map(float, sys.argv[6:8])
want = int(sys.argv[8]) * 100000 // 29500  # tokens the text should have (100,000, or 10,000 under SAN)
text = json.load(open("big.jsonl"))["text"]
for mode in ("chunk", "late-chunk"):
    ids = [json.loads(l) for l in open("big-%s.npy.ids.jsonl" % mode)]
    v = np.load("big-%s.npy" % mode)
    ok = ids[-1]["end"] == len(text) and ids[0]["start"] == 0 and len(ids) == v.shape[0] > want / 520
    print(("PASS" if ok else "FAIL") + ": %d-token text, --%s 512:32: %d passages cover it" % (n, mode, len(ids)))
grow = max(rc - mc, rl - ml)
print(("PASS" if n >= want and grow < 64 * 1024 else "FAIL") +
      ": memory bounded: peak RSS %d / %d kB (--chunk / --late-chunk) for %d tokens against %d / %d kB for a tenth of it"
      % (rc, rl, n, mc, ml))
print("time: --chunk %.2f s, --late-chunk %.2f s (tiny model)" % (tc, tl))
EOF

# ---- kill -9 inside a text's passages, then --resume ---------------------------------------------
cat docs.jsonl docs.jsonl docs.jsonl >kill.jsonl
"$BIN" "${M[@]}" --chunk 40:6 -o ref.jsonl kill.jsonl
"$BIN" "${M[@]}" --chunk 40:6 -o ref.npy kill.jsonl
if command -v strace >/dev/null; then
    for out in k.jsonl k.npy; do
        killed=0 inside=0
        for when in 3 9 17 30; do
            rm -f $out $out.*
            (strace -f -o /dev/null -e trace=write -e inject=write:signal=KILL:when=$when \
                "$BIN" "${M[@]}" --chunk 40:6 -o $out kill.jsonl >/dev/null 2>&1
             exit $?) 2>/dev/null # (a subshell of its own, so that its "Killed" is not shown)
            [ $? -ge 128 ] && killed=$((killed + 1))
            # the rows on disk at the kill: a text's passages written in part?
            inside=$((inside + $("$PY" - "$out" <<'EOF'
import json, struct, sys
p = sys.argv[1]
ref = [json.loads(l) for l in open("ref.npy.ids.jsonl")]
data = open(p, "rb").read()
if p.endswith(".npy"):
    head = 10 + struct.unpack("<H", data[8:10])[0] if len(data) >= 10 else len(data)
    rows = max(len(data) - head, 0) // (4 * 768)
else:
    rows = data.count(b"\n")
print(int(0 < rows < len(ref) and ref[rows]["chunk"] > 0))
EOF
            )))
            "$BIN" "${M[@]}" --chunk 40:6 --resume -o $out kill.jsonl 2>/dev/null
            cmp -s $out ref.${out#k.} || break
        done
        [ $killed = 4 ] && [ $inside -ge 1 ] && cmp -s $out ref.${out#k.} &&
            { [ $out = k.jsonl ] || cmp -s k.npy.ids.jsonl ref.npy.ids.jsonl; } &&
            pass "$out: kill -9 at 4 writes ($inside inside a text's passages), --resume: the bytes of one run" ||
            fail "$out kill -9 resume" "killed $killed, inside $inside, $(cmp $out ref.${out#k.} 2>&1)"
    done
else
    skip "kill -9 inside a text's passages" "strace is not installed"
fi

# ---- shards + merge, the cache -------------------------------------------------------------------
for i in 0 1 2; do
    "$BIN" "${M[@]}" --chunk 40:6 --shard $i/3 -o part$i.npy kill.jsonl
done
"$BIN" merge -o merged.npy part0.npy part1.npy part2.npy 2>m.err
same "--shard x3 + merge: the passages of one run (npy, ids sidecar)" merged.npy ref.npy \
    merged.npy.ids.jsonl ref.npy.ids.jsonl
"$BIN" "${M[@]}" --late-chunk 40:6 -o lref.jsonl kill.jsonl
"$BIN" -m "$MODEL" --late-chunk 40:6 --cache cache -o l1.jsonl kill.jsonl 2>l1.err
"$BIN" -m "$MODEL" --late-chunk 40:6 --cache cache -o l2.jsonl kill.jsonl 2>l2.err
grep -q "21 of 21 records from the cache" l2.err && cmp -s l1.jsonl lref.jsonl && cmp -s l2.jsonl lref.jsonl &&
    pass "--late-chunk --cache: the second run from the cache, both the bytes of a run without it" ||
    fail "late-chunk cache" "$(tail -1 l2.err; cmp l2.jsonl lref.jsonl 2>&1)"
# --chunk passages share the cache with records of the same text
"$BIN" -m "$MODEL" --prompt document --cache cache2 -o /dev/null slices.jsonl 2>/dev/null
"$BIN" -m "$MODEL" --prompt document --chunk 40:6 --cache cache2 -o c2.npy docs.jsonl 2>c2.err
grep -q "7 of 7 records from the cache" c2.err && cmp -s c2.npy c.npy &&
    pass "--chunk passages come from the cache entries of their texts as records" ||
    fail "chunk cache shared" "$(tail -1 c2.err)"

finish
