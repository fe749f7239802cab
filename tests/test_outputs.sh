#!/usr/bin/env bash
# tests/test_outputs.sh - what the output files say beside the vectors (issue 19):
# --precision against a NumPy restatement of sentence-transformers' quantize_embeddings on
# the float vectors of the same run (npy, jsonl numbers, jsonl base64, f32, npz), the
# calibration file's round trip and checks, and the run description PATH.meta.json (inside
# an npz: meta.json), complete or not.
#
#   BIN=./gemmaembed MODEL=testdata/tiny-f32.gguf PYTHON=/usr/bin/python3 bash tests/test_outputs.sh
#
# Prints "PASS: name" or "FAIL: name: detail" per check and exits non-zero if any failed.
set -u
cd "$(dirname "$0")/.." || exit 1

BIN=${BIN:-./gemmaembed}
MODEL=${MODEL:-testdata/tiny-f32.gguf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/test_outputs.XXXXXX")
trap 'rm -rf "$T"' EXIT
unset GEMMAEMBED_MODEL
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
case $MODEL in /*) ;; *) MODEL=$PWD/$MODEL ;; esac
. tests/lib.sh

for need in "$BIN" "$MODEL"; do
    [ -e "$need" ] || { echo "FAIL: setup: $need not found"; exit 1; }
done
cd "$T" || exit 1
M=(-m "$MODEL" -q)

# 60 texts, a bad record among them (no row: ids must still line up)
"$PY" - <<'EOF'
import json, random
r = random.Random(19)
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi".split()
with open("in.jsonl", "w") as f:
    for i in range(60):
        if i == 17:
            f.write('{"id": "bad", "image": "missing.png"}\n')
            continue
        f.write(json.dumps({"id": i, "text": " ".join(r.choice(words) for _ in range(r.randint(1, 30)))}) + "\n")
EOF

usage() { # NAME WANT_IN_MESSAGE ARGS...: exit 2 and the message names the cause
    local name=$1 want=$2
    shift 2
    "$BIN" "${M[@]}" "$@" in.jsonl >u.out 2>u.err
    local rc=$?
    if [ $rc -eq 2 ] && grep -q -- "$want" u.err; then pass "$name"; else
        fail "$name" "exit $rc: $(head -c 300 u.err)"; fi
}

# ---- the float vectors, and a calibration file from them -------------------------------------
for d in 768 128; do
    "$BIN" "${M[@]}" --dim $d in.jsonl -o f$d.npy --errors f$d.err --write-calibration cal$d.npy
done
# a calibration narrower than the data (values outside clamp), and a float64 one
"$PY" - <<'EOF'
import numpy as np
c = np.load("cal768.npy")
mid = (c[0] + c[1]) / 2
np.save("narrow768.npy", np.vstack([c[0] + 0.25 * (mid - c[0]), c[1] - 0.25 * (c[1] - mid)]).astype(np.float32))
np.save("cal768f8.npy", c.astype(np.float64) * np.float64(1.0000001))
EOF

# every precision in every format
for p in float32 float16 int8 uint8 binary ubinary; do
    for d in 768 128; do
        cal=()
        case $p in int8 | uint8) cal=(--calibration cal$d.npy) ;; esac
        a=(--dim $d --precision $p "${cal[@]}")
        "$BIN" "${M[@]}" "${a[@]}" in.jsonl -o $p.$d.npy --errors /dev/null
        "$BIN" "${M[@]}" "${a[@]}" in.jsonl -o $p.$d.jsonl
        "$BIN" "${M[@]}" "${a[@]}" --encoding base64 in.jsonl -o $p.$d.b64.jsonl
        "$BIN" "${M[@]}" "${a[@]}" in.jsonl -o $p.$d.f32 --errors /dev/null
        "$BIN" "${M[@]}" "${a[@]}" in.jsonl -o $p.$d.npz --errors /dev/null
    done
done
for p in int8 uint8; do
    "$BIN" "${M[@]}" --precision $p --calibration narrow768.npy in.jsonl -o $p.narrow.npy --errors /dev/null
    "$BIN" "${M[@]}" --precision $p --calibration cal768f8.npy in.jsonl -o $p.f8.npy --errors /dev/null
done

py <<'EOF'
import base64, json, numpy as np

def pr(ok, name, detail=""):
    print("PASS: " + name if ok else "FAIL: %s: %s" % (name, detail))

# sentence-transformers' quantize_embeddings, restated (float32 arithmetic for '<f4' ranges;
# values outside the ranges clamp to the ends)
def reference(x, p, ranges=None):
    if p == "float32":
        return x
    if p == "float16":
        return x.astype(np.float16)
    if p in ("int8", "uint8"):
        starts = ranges[0, :]
        steps = (ranges[1, :] - ranges[0, :]) / 255
        q = (x - starts) / steps
        if p == "uint8":
            return np.clip(q, 0, 255).astype(np.uint8)
        return np.clip(q - 128, -128, 127).astype(np.int8)
    packed = np.packbits(x > 0).reshape(x.shape[0], -1)
    return packed if p == "ubinary" else (packed - 128).astype(np.int8)

dtypes = {"float32": "<f4", "float16": "<f2", "int8": "|i1", "uint8": "|u1", "binary": "|i1",
          "ubinary": "|u1"}
for d in (768, 128):
    x = np.load("f%d.npy" % d)
    cal = np.load("cal%d.npy" % d)
    pr(cal.dtype == np.float32 and cal.shape == (2, d) and np.array_equal(cal[0], x.min(axis=0))
       and np.array_equal(cal[1], x.max(axis=0)),
       "write-calibration %d: min and max of the run's vectors, (2, %d) float32" % (d, d))
    for p in dtypes:
        want = reference(x, p, cal)
        dt = np.dtype(dtypes[p])
        a = np.load("%s.%d.npy" % (p, d))
        pr(a.dtype == dt and np.array_equal(a, want), "npy %s dim %d = numpy" % (p, d),
           "dtype %s shape %s, %d values differ" % (a.dtype, a.shape,
           int((a != want).sum()) if a.shape == want.shape else -1))
        raw = np.fromfile("%s.%d.f32" % (p, d), dtype=dt).reshape(want.shape)
        pr(np.array_equal(raw, want), "raw rows %s dim %d = numpy" % (p, d))
        z = np.load("%s.%d.npz" % (p, d))
        meta = json.loads(z["meta.json"])
        pr(np.array_equal(z["embeddings"], want) and z["embeddings"].dtype == dt and
           meta["precision"] == p and meta["rows"] == len(want) and meta["complete"],
           "npz %s dim %d = numpy, meta.json inside" % (p, d))
        rows = [json.loads(l) for l in open("%s.%d.jsonl" % (p, d))]
        good = [r for r in rows if "embedding" in r]
        # the printed decimals read back to the same float32 / float16 values
        got = np.array([r["embedding"] for r in good], dtype=np.float64).astype(dt)
        ok = len(good) == len(want) and np.array_equal(got, want)
        if p in ("int8", "uint8", "binary", "ubinary"):
            ok &= all(type(v) is int for r in good for v in r["embedding"])
        pr(ok and any("error" in r for r in rows), "jsonl %s dim %d = numpy (error record inline)" % (p, d))
        b = [np.frombuffer(base64.b64decode(json.loads(l)["embedding"]), dtype=dt)
             for l in open("%s.%d.b64.jsonl" % (p, d)) if "embedding" in l]
        pr(np.array_equal(np.array(b), want), "jsonl base64 %s dim %d = numpy" % (p, d))

x = np.load("f768.npy")
narrow = np.load("narrow768.npy")
for p in ("int8", "uint8"):
    a = np.load("%s.narrow.npy" % p)
    lo, hi = (-128, 127) if p == "int8" else (0, 255)
    pr(np.array_equal(a, reference(x, p, narrow)) and (a == lo).any() and (a == hi).any(),
       "%s: values outside the calibration clamp to the ends" % p)
    f8 = np.load("cal768f8.npy")
    a = np.load("%s.f8.npy" % p)
    want = reference(x.astype(np.float64), p, f8)  # numpy promotes: float64 arithmetic
    pr(np.array_equal(a, want), "%s: a float64 calibration file computes in float64" % p)
EOF

# ---- the run description ---------------------------------------------------------------------
"$BIN" "${M[@]}" --shard 1/3 --prompt query in.jsonl -o s.jsonl
"$BIN" "${M[@]}" --shard 2/3 --prompt query --errors s2.err in.jsonl -o s2.jsonl
py "$MODEL" <<'EOF'
import json, os, sys
def pr(ok, name, detail=""):
    print("PASS: " + name if ok else "FAIL: %s: %s" % (name, detail))
m = json.load(open("int8.128.npy.meta.json"))
want = {"format": "npy", "precision": "int8", "dtype": "|i1", "dim": 128, "width": 128,
        "rows": 59, "input_records": 60, "shard": None, "complete": True, "mode": "embed",
        "model_file": os.path.basename(sys.argv[1])}
bad = {k: m.get(k) for k in want if m.get(k) != want[k]}
ident = m.get("identity", {})
pr(not bad and ident.get("dim") == "128" and ident.get("precision") == "int8" and
   ident.get("model", "").startswith("%d bytes, xxh3 " % os.path.getsize(sys.argv[1])) and
   ident.get("calibration", "").startswith("%d bytes" % os.path.getsize("cal128.npy")) and
   m.get("kernel_tier") and m.get("gemmaembed") == ident.get("version"),
   "npy.meta.json: format, precision, dims, counts, model, calibration, tier", "%s %s" % (bad, ident))
b = json.load(open("ubinary.128.jsonl.meta.json"))
pr(b["width"] == 16 and b["dtype"] == "|u1" and b["format"] == "jsonl" and
   json.load(open("float16.768.f32.meta.json"))["dtype"] == "<f2",
   "meta.json of jsonl and raw outputs: packed width, dtype")
s, s2 = json.load(open("s.jsonl.meta.json")), json.load(open("s2.jsonl.meta.json"))
pr(s["shard"] == [1, 3] and s2["shard"] == [2, 3] and s["identity"] == s2["identity"] and
   "shard" not in s["identity"] and s["identity"]["prompt"] != "none" and
   s["rows"] == 20 == sum(1 for l in open("s.jsonl")) and s2["rows"] == 19 and
   s["input_records"] == 60,
   "shards: their own shard field, one identity (where errors go is not part of it)",
   "%s %s" % (s, s2))
EOF

# a run stopped by SIGTERM says it is not complete; its resumed run says it is
mkfifo fifo
( head -n 30 in.jsonl; exec sleep 30 ) >fifo &
feeder=$!
"$BIN" "${M[@]}" fifo -o stop.npy --precision uint8 --calibration cal768.npy --errors /dev/null 2>stop.err &
pid=$!
for _ in $(seq 100); do [ -s stop.npy.meta.json ] && break; sleep 0.1; done
sleep 0.5
kill -TERM $pid
wait $pid
rc=$?
kill $feeder 2>/dev/null
wait $feeder 2>/dev/null
"$PY" -c "import json,sys; m=json.load(open('stop.npy.meta.json')); sys.exit(0 if not m['complete'] and m['rows'] == 29 and m['input_records'] == 30 else 1)" &&
    [ $rc -eq 143 ] && pass "SIGTERM: meta.json says incomplete, 29 rows of 30 records" ||
    fail "SIGTERM: meta.json" "exit $rc, $(cat stop.npy.meta.json 2>/dev/null | tr -d '\n' | head -c 300)"
"$BIN" "${M[@]}" --resume in.jsonl -o stop.npy --precision uint8 --calibration cal768.npy --errors /dev/null
cmp -s stop.npy uint8.768.npy &&
    "$PY" -c "import json,sys; m=json.load(open('stop.npy.meta.json')); sys.exit(0 if m['complete'] and m['rows'] == 59 else 1)" &&
    pass "resume of a uint8 npy: the same bytes as one run, meta.json complete" ||
    fail "resume of a uint8 npy" "$(cmp stop.npy uint8.768.npy 2>&1) $(tr -d '\n' <stop.npy.meta.json | head -c 200)"
usage "resume with another precision is refused" "precision (was uint8, now int8)" \
    --resume -o stop.npy --precision int8 --calibration cal768.npy
"$BIN" "${M[@]}" in.jsonl -o /dev/null
[ $? -eq 1 ] && [ ! -e /dev/null.meta.json ] && pass "no meta.json beside /dev/null" ||
    fail "no meta.json beside /dev/null" "it was written, or the exit was not 1"

# ---- options from the environment (RDD.pipe), --failed-exit, many inputs ---------------------
GEMMAEMBED_PRECISION=int8 GEMMAEMBED_CALIBRATION=cal128.npy GEMMAEMBED_DIM=128 \
    "$BIN" "${M[@]}" in.jsonl -o env.npy --errors /dev/null
cmp -s env.npy int8.128.npy && pass "GEMMAEMBED_PRECISION, _CALIBRATION, _DIM = the flags" ||
    fail "options from the environment" "differ"
GEMMAEMBED_DIM=256 "$BIN" "${M[@]}" --dim 128 --precision int8 --calibration cal128.npy in.jsonl \
    -o env2.npy --errors /dev/null
cmp -s env2.npy int8.128.npy && pass "a flag wins over its variable" || fail "flag over variable" "differ"
GEMMAEMBED_DIM=100 "$BIN" "${M[@]}" in.jsonl >/dev/null 2>u.err
[ $? -eq 2 ] && grep -q 'GEMMAEMBED_DIM' u.err && pass "a bad variable: usage error naming it" ||
    fail "bad variable" "$(cat u.err)"
GEMMAEMBED_FAILED_EXIT=0 "$BIN" "${M[@]}" in.jsonl >fx.jsonl
rc=$?
[ $rc -eq 0 ] && grep -q '"error"' fx.jsonl && pass "GEMMAEMBED_FAILED_EXIT=0: exit 0, the error record inline" ||
    fail "failed-exit" "exit $rc"
"$BIN" "${M[@]}" --failed-exit 3 in.jsonl >/dev/null
[ $? -eq 3 ] && pass "--failed-exit 3" || fail "--failed-exit 3" "another status"
split -l 3 in.jsonl piece.
"$BIN" "${M[@]}" piece.* -o pieces.npy --errors /dev/null
[ "$(ls piece.* | wc -l)" -eq 20 ] && cmp -s pieces.npy float32.768.npy &&
    pass "20 input files (the path check once held 16 uses)" || fail "20 input files" "differ"

# ---- usage errors ----------------------------------------------------------------------------
"$PY" - <<'EOF'
import numpy as np
c = np.load("cal768.npy")
np.save("wide.npy", np.zeros((2, 512), np.float32))
np.save("ints.npy", c.astype(np.int32))
bad = c.copy(); bad[0, 5] = np.nan; np.save("nan.npy", bad)
swap = c.copy(); swap[:, 9] = swap[::-1, 9]; np.save("swap.npy", swap)
open("junk.npy", "wb").write(b"not numpy")
EOF
usage "int8 without a calibration file" "needs --calibration" --precision int8
usage "calibration of another width" "(2, 512)" --precision uint8 --calibration wide.npy
usage "calibration of integers" "dtype" --precision int8 --calibration ints.npy
usage "calibration with a NaN" "not finite" --precision int8 --calibration nan.npy
usage "calibration with min > max" "dimension 9" --precision int8 --calibration swap.npy
usage "calibration that is not npy" "not an npy file" --precision int8 --calibration junk.npy
usage "calibration that is missing" "No such file" --precision int8 --calibration none.npy
usage "calibration for float16" "int8 and uint8 only" --precision float16 --calibration cal768.npy
usage "tokenize with a precision" "do not apply" --tokenize --precision binary
usage "write-calibration with resume" "cannot be combined" --resume -o r.npy --write-calibration c.npy
usage "unknown precision" "precision" --precision int4
usage "write-calibration over the input" "same" --write-calibration in.jsonl -o w.npy

finish
