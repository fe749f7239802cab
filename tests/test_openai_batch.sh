#!/usr/bin/env bash
# tests/test_openai_batch.sh - OpenAI Batch API files (issue 19): request lines with string and
# list inputs, "dimensions" and "encoding_format" are answered by --format openai-batch in the
# API's output shape, each vector the one a plain record of that text gives; bad lines are
# error lines in the API's error shape; other formats give a row per input; a stopped run
# resumes to the same bytes; shards and the cache work per request.
#
#   BIN=./gemmaembed MODEL=testdata/tiny-f32.gguf PYTHON=/usr/bin/python3 bash tests/test_openai_batch.sh
#
# Prints "PASS: name" or "FAIL: name: detail" per check and exits non-zero if any failed.
set -u
cd "$(dirname "$0")/.." || exit 1

BIN=${BIN:-./gemmaembed}
MODEL=${MODEL:-testdata/tiny-f32.gguf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/test_openai_batch.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
unset GEMMAEMBED_MODEL
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
case $MODEL in /*) ;; *) MODEL=$PWD/$MODEL ;; esac
. tests/lib.sh

for need in "$BIN" "$MODEL"; do
    [ -e "$need" ] || { echo "FAIL: setup: $need not found"; exit 1; }
done
cd "$T" || exit 1
M=(-m "$MODEL" -q)

# 300 requests: strings and lists (1-5 inputs), dimensions and encodings mixed, a model
# named or not; then bad lines; the plain records of every input text, for the reference
"$PY" - <<'EOF'
import json, random
r = random.Random(4)
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
text = lambda: " ".join(r.choice(words) for _ in range(r.randint(1, 25)))
reqs, plain = [], set()
for i in range(300):
    body = {"input": text() if i % 3 == 0 else [text() for _ in range(r.randint(1, 5))]}
    if i % 4 == 1:
        body["dimensions"] = r.choice([768, 512, 256, 128, 100])
    if i % 5 == 2:
        body["encoding_format"] = r.choice(["float", "base64"])
    if i % 7 == 0:
        body["model"] = "text-embedding-3-small"
    reqs.append({"custom_id": "req-%d" % i, "method": "POST", "url": "/v1/embeddings", "body": body})
bad = [
    '{"custom_id": "bad-json", "body": ',
    json.dumps({"custom_id": "bad-url", "method": "POST", "url": "/v1/chat/completions", "body": {"input": "x"}}),
    json.dumps({"custom_id": "bad-tokens", "method": "POST", "url": "/v1/embeddings", "body": {"input": [[1, 2, 3]]}}),
    json.dumps({"custom_id": "bad-dims", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x", "dimensions": 4096}}),
    json.dumps({"custom_id": "bad-enc", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x", "encoding_format": "int8"}}),
    json.dumps({"custom_id": "bad-empty", "method": "POST", "url": "/v1/embeddings", "body": {"input": []}}),
    json.dumps({"custom_id": 7, "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}}),
    json.dumps({"custom_id": "too-long", "method": "POST", "url": "/v1/embeddings", "body": {"input": ["ok", " ".join(["alpha"] * 9000)]}}),
]
with open("batch.jsonl", "w") as f:
    for i, q in enumerate(reqs):
        f.write(json.dumps(q) + "\n")
        if i % 40 == 20:
            f.write(bad[(i // 40) % len(bad)] + "\n")
    for b in bad:
        f.write(b + "\n")
texts = sorted({t for q in reqs for t in ([q["body"]["input"]] if isinstance(q["body"]["input"], str) else q["body"]["input"])})
with open("texts.jsonl", "w") as f:
    for i, t in enumerate(texts):
        f.write(json.dumps({"id": i, "text": t}) + "\n")
EOF
"$BIN" "${M[@]}" --format openai-batch batch.jsonl -o out.jsonl
rc=$?
[ $rc -eq 1 ] && pass "a batch with bad lines: exit 1" || fail "batch exit status" "$rc"
"$BIN" "${M[@]}" texts.jsonl -o full.jsonl
"$BIN" "${M[@]}" --tokenize texts.jsonl -o tokens.jsonl
"$BIN" "${M[@]}" --format openai-batch --encoding base64 batch.jsonl -o out64.jsonl

py "$MODEL" <<'EOF'
import base64, json, os, sys
import numpy as np
def pr(ok, name, detail=""):
    print("PASS: " + name if ok else "FAIL: %s: %s" % (name, detail))
lines = [l for l in open("batch.jsonl")]
out = [json.loads(l) for l in open("out.jsonl")]
pr(len(out) == len(lines), "one output line per request line", "%d vs %d" % (len(out), len(lines)))
vec = {}
texts = [json.loads(l)["text"] for l in open("texts.jsonl")]
for t, row in zip(texts, (json.loads(l) for l in open("full.jsonl"))):
    vec[t] = np.array(row["embedding"], dtype=np.float32)
tok = {t: len(json.loads(l)["tokens"]) for t, l in zip(texts, open("tokens.jsonl"))}
def want(t, d):  # Matryoshka: the first d values, normalised again (float64 to compare)
    v = vec[t][:d].astype(np.float64)
    return v / np.linalg.norm(v)
ok_lines = bad_lines = 0
problems = []
for k, (line, o) in enumerate(zip(lines, out)):
    try:
        q = json.loads(line)
    except ValueError:
        q = None
    if set(o) != {"id", "custom_id", "response", "error"} or o["error"] is not None:
        problems.append("line %d: keys %s" % (k + 1, sorted(o)))
        continue
    resp = o["response"]
    if q is None or not str(q.get("custom_id", "")).startswith("req-"):
        b = resp["body"].get("error", {})
        if resp["status_code"] != 400 or set(b) != {"message", "type", "param", "code"} or \
                b["type"] != "invalid_request_error" or not b["message"]:
            problems.append("line %d: error shape %s" % (k + 1, o))
        if q is not None and isinstance(q.get("custom_id"), str) and o["custom_id"] != q["custom_id"]:
            problems.append("line %d: custom_id" % (k + 1))
        bad_lines += 1
        continue
    body = q["body"]
    inputs = [body["input"]] if isinstance(body["input"], str) else body["input"]
    d = body.get("dimensions", 768)
    b = resp["body"]
    if o["custom_id"] != q["custom_id"] or resp["status_code"] != 200 or b["object"] != "list" \
            or len(b["data"]) != len(inputs) or b["model"] != body.get("model", os.path.basename(sys.argv[1])) \
            or b["usage"] != {"prompt_tokens": sum(tok[t] for t in inputs), "total_tokens": sum(tok[t] for t in inputs)}:
        problems.append("line %d: response %s" % (k + 1, json.dumps(o)[:300]))
        continue
    for i, (t, e) in enumerate(zip(inputs, b["data"])):
        got = e["embedding"]
        if body.get("encoding_format") == "base64":
            got = np.frombuffer(base64.b64decode(got), dtype="<f4")
        got = np.array(got, dtype=np.float64)
        if e["object"] != "embedding" or e["index"] != i or len(got) != d or \
                np.abs(got - want(t, d)).max() > 2e-7:
            problems.append("line %d input %d: vector (%d values)" % (k + 1, i, len(got)))
    ok_lines += 1
pr(not problems and ok_lines == 300 and bad_lines == 15,
   "300 requests = plain records of their texts at their dimensions, 15 bad lines in the error shape",
   "%d ok, %d bad; %s" % (ok_lines, bad_lines, problems[:3]))
o64 = [json.loads(l) for l in open("out64.jsonl")]
kinds = set()
for line, o in zip(lines, o64):
    if o["response"]["status_code"] != 200:
        continue
    enc = json.loads(line)["body"].get("encoding_format", "base64")  # the flag's default
    for e in o["response"]["body"]["data"]:
        kinds.add((enc, isinstance(e["embedding"], str)))
pr(kinds == {("base64", True), ("float", False)},
   "--encoding base64: the encoding of requests that name none", str(kinds))
codes = {o["custom_id"]: o["response"]["body"]["error"]["code"] for o in out if o["response"]["status_code"] != 200}
pr(codes.get("too-long") == "too_long" and codes.get("bad-dims") == "bad_request" and
   codes.get(7) == "bad_request" and codes.get("bad-tokens") == "bad_request",
   "error codes: a too long input fails its whole request; dimensions, token arrays, custom_id",
   str(codes))
EOF

# other formats: a row per input, ids [custom_id, index] for lists
"$BIN" "${M[@]}" batch.jsonl -o rows.jsonl 2>/dev/null
py <<'EOF'
import json
def pr(ok, name, detail=""):
    print("PASS: " + name if ok else "FAIL: %s: %s" % (name, detail))
rows = [json.loads(l) for l in open("rows.jsonl")]
want = []  # each request's rows: its inputs, or one error row
for line in open("batch.jsonl"):
    try:
        q = json.loads(line)
        body, cid = q["body"], q["custom_id"]
        inp = body["input"]
        ok = isinstance(cid, str) and q["url"] == "/v1/embeddings" and body.get("dimensions", 768) == 768 \
            and body.get("encoding_format", "float") in ("float", "base64") and \
            (isinstance(inp, str) or (inp and all(isinstance(t, str) for t in inp)))
    except (ValueError, KeyError):
        want.append(None)  # a line number
        continue
    if not ok or isinstance(inp, str):
        want.append(cid)
    else:
        want += [[cid, j] for j in range(len(inp))]
got = [r["id"] for r in rows]
same = len(got) == len(want) and all(w is None or w == g for w, g in zip(want, got))
dims = [r for r in rows if r.get("error", {}).get("code") == "bad_request" and
        "openai-batch" in r["error"]["message"]]
pr(same and dims, "jsonl: a row per input, ids [custom_id, i] for lists; other dimensions fail there",
   "%d rows, %d wanted" % (len(got), len(want)))
EOF

# a stopped run resumes to the bytes of one run; shards and the cache per request
mkdir fed && mkfifo fed/batch.jsonl # the same name as the file the resumed run reads
( head -n 150 batch.jsonl; exec sleep 30 ) >fed/batch.jsonl &
feeder=$!
(cd fed && exec "$BIN" "${M[@]}" --format openai-batch batch.jsonl -o ../stop.jsonl 2>/dev/null) &
pid=$!
for _ in $(seq 100); do [ -s stop.jsonl.meta.json ] && break; sleep 0.1; done
sleep 0.5
kill -TERM $pid
wait $pid
kill $feeder 2>/dev/null
wait $feeder 2>/dev/null
"$BIN" "${M[@]}" --format openai-batch --resume batch.jsonl -o stop.jsonl 2>/dev/null
cmp -s stop.jsonl out.jsonl && pass "SIGTERM then --resume: the bytes of one run" ||
    fail "resume of openai-batch" "$(cmp stop.jsonl out.jsonl 2>&1)"
for i in 0 1 2; do "$BIN" "${M[@]}" --format openai-batch --shard $i/3 batch.jsonl -o s$i.jsonl 2>/dev/null; done
"$PY" -c "
import itertools
parts = [open('s%d.jsonl' % i).read().splitlines(True) for i in range(3)]
merged = [l for t in itertools.zip_longest(*parts) for l in t if l]
open('merged.jsonl', 'w').writelines(merged)"
cmp -s merged.jsonl out.jsonl && pass "three shards interleave to one run's lines" || fail "shards" "differ"
"$BIN" "${M[@]}" --format openai-batch --cache c batch.jsonl -o c1.jsonl 2>/dev/null
"$BIN" -m "$MODEL" --format openai-batch --cache c batch.jsonl -o c2.jsonl 2>c2.log
cmp -s c1.jsonl out.jsonl && cmp -s c2.jsonl out.jsonl && grep -q 'records from the cache' c2.log &&
    pass "--cache: the same lines, the second run from the cache" || fail "cache" "$(tail -1 c2.log)"

# usage
"$BIN" "${M[@]}" --format openai-batch --precision int8 batch.jsonl >/dev/null 2>u.err
[ $? -eq 2 ] && grep -q openai-batch u.err && pass "openai-batch with --precision: usage error" ||
    fail "openai-batch --precision" "$(cat u.err)"

finish
