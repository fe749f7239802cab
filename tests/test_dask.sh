#!/usr/bin/env bash
# tests/test_dask.sh - the README's Dask example (issue 19): dask.bag partitions each piped
# through gemmaembed on a LocalCluster of two worker processes (Debian's python3-distributed);
# the lines it writes must equal one run's, byte for byte. Skipped, saying why, only where
# the package is missing.
#
#   BIN=./gemmaembed MODEL=testdata/tiny-f32.gguf PYTHON=/usr/bin/python3 bash tests/test_dask.sh
set -u
cd "$(dirname "$0")/.." || exit 1

BIN=${BIN:-./gemmaembed}
MODEL=${MODEL:-testdata/tiny-f32.gguf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/test_dask.XXXXXX")
trap 'rm -rf "$T"' EXIT
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
case $MODEL in /*) ;; *) MODEL=$PWD/$MODEL ;; esac
ROOT=$PWD
. tests/lib.sh

"$PY" -c "import dask.bag, dask.distributed" 2>/dev/null || {
    skip "dask" "python3-distributed is not installed (tools/install-deps)"
    finish
    exit 0
}
cd "$T" || exit 1
awk '/^Dask: each partition of a/ {want = 1} want && /^```python$/ {on = 1; next}
     on && /^```$/ {exit} on {print}' "$ROOT/README.md" >dask_embed.py
grep -q 'map_partitions(embed)' dask_embed.py && pass "the README's Dask example found" ||
    fail "Dask example" "$(cat dask_embed.py)"
# 800 records (about 190 kB: three partitions of 64 kB) with their own ids (each partition is its
# own stdin, so line numbers and the messages that name them restart: the records that fail
# are left for the other tests)
"$PY" - <<'EOF'
import json, random
r = random.Random(11)
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
with open("corpus.jsonl", "w") as f:
    for i in range(800):
        f.write(json.dumps({"id": "d%d" % i, "text": " ".join(r.choice(words) for _ in range(r.randint(20, 80)))}) + "\n")
EOF
mkdir bin && ln -s "$BIN" bin/gemmaembed
export PATH=$T/bin:$PATH GEMMAEMBED_MODEL=$MODEL
gemmaembed -q corpus.jsonl -o one.jsonl
timeout 300 "$PY" dask_embed.py corpus.jsonl vectors.jsonl 64kB >dask.log 2>&1
rc=$?
parts=$("$PY" -c "import dask.bag as db; print(db.read_text('corpus.jsonl', blocksize='64kB').npartitions)")
[ $rc -eq 0 ] && [ "$parts" -gt 1 ] && cmp -s vectors.jsonl one.jsonl &&
    pass "dask: $parts partitions on a LocalCluster = one run, byte for byte" ||
    fail "dask" "exit $rc, $parts partitions: $(tail -c 400 dask.log; cmp vectors.jsonl one.jsonl 2>&1)"

finish
