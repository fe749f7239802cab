#!/usr/bin/env bash
# tests/test_corpus.sh - a corpus of bad inputs mixed with good records (tests/corpus_gen.py):
# malformed JSON, wrong types, missing text, invalid UTF-8 (raw bytes and \ud800 escapes),
# blank lines, lines over 64 MiB, a few-MB line of too many tokens, texts over 8192 tokens,
# media fields naming files that do not exist, media placeholders, unknown fields and
# repeated ids. Every good record's vector must equal its vector when run alone, every bad
# record must give exactly one error record naming its line and cause, the exit status is 1;
# with several --threads / --wave-tokens settings, jsonl (file and stdin), npy and f32 with
# --errors FILE, and --max-errors.
#
#   BIN=./gemmaembed MODEL=testdata/tiny-q8_0.gguf PYTHON=/usr/bin/python3 OUT=/tmp/x \
#       bash tests/test_corpus.sh
#
# The corpus goes to $OUT/corpus (about 340 MB while the test runs: three lines of 64 MiB in
# the corpus, one in the good-only file and one in its alone file); the inputs are removed at
# the end, the outputs stay for inspection. Release build ~11 s, ASan+UBSan ~50 s (2 cores). Prints "PASS: name" or "FAIL: name: detail" per check and exits non-zero
# if any failed.
set -u
cd "$(dirname "$0")/.." || exit 1

BIN=${BIN:-./gemmaembed}
MODEL=${MODEL:-testdata/tiny-q8_0.gguf}
PY=${PYTHON:-/usr/bin/python3}
OUT=${OUT:-build/test-out}
unset GEMMAEMBED_MODEL
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
case $MODEL in /*) ;; *) MODEL=$PWD/$MODEL ;; esac
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac
TESTS=$PWD/tests
W=$OUT/corpus

. tests/lib.sh

for need in "$BIN" "$MODEL"; do
    [ -e "$need" ] || { echo "FAIL: setup: $need not found"; exit 1; }
done
rm -rf "$W" && mkdir -p "$W" || { echo "FAIL: setup: cannot create $W"; exit 1; }
trap 'rm -f "$W"/corpus.jsonl "$W"/good.jsonl "$W"/alone/*.jsonl' EXIT
cd "$W" || exit 1

# pycheck ARGS...: tests/corpus_check.py; its PASS/FAIL lines count as this script's
pycheck() {
    local out p f
    out=$("$PY" "$TESTS/corpus_check.py" "$W" "$@" 2>&1)
    echo "$out" | grep -E '^(PASS|FAIL): '
    p=$(echo "$out" | grep -c '^PASS: ')
    f=$(echo "$out" | grep -c '^FAIL: ')
    npass=$((npass + p)) nfail=$((nfail + f))
    if [ "$f" -gt 0 ]; then echo "$out" | grep -v -E '^(PASS|FAIL): ' | tail -n 5; fi
}

M=(-m "$MODEL" --quiet)
# --quiet: no summary on stderr; the runs that check it leave it out
MQ=(-m "$MODEL")

if "$PY" "$TESTS/corpus_gen.py" "$W" >gen.log 2>&1; then
    pass "corpus: $(tail -n 1 gen.log)"
else
    fail "corpus" "$(tail -n 3 gen.log | tr '\n' ' ')"
    exit 1
fi

# ---- references: the good records only, and each good record alone ------------------------

"$BIN" "${M[@]}" good.jsonl >good.out 2>good.err
rc=$?
[ "$rc" -eq 0 ] && pass "good-only run: exit 0" || fail "good-only run: exit 0" "exit $rc: $(head -c 300 good.err)"
"$BIN" "${M[@]}" --threads 1 --wave-tokens 0 good.jsonl >good2.out 2>/dev/null
# each good record alone (every 4th under the sanitizers: a process each, 250 of them)
step=1
[ "$SAN" -eq 1 ] && step=4
: >alone.failed
files=(alone/*.jsonl)
for ((i = 0; i < ${#files[@]}; i += step)); do
    f=${files[i]}
    "$BIN" "${M[@]}" "$f" >"${f%.jsonl}.out" 2>/dev/null || echo "$f: exit $?" >>alone.failed
done
[ ! -s alone.failed ] && pass "each good record alone: exit 0" ||
    fail "each good record alone: exit 0" "$(head -n 3 alone.failed | tr '\n' ' ')"
pycheck refs good.out good2.out "$step"

# ---- the corpus -----------------------------------------------------------------------------

# corpus NAME SOURCE [K] -- ARGS...: a jsonl run to NAME.out, checked
corpus() {
    local name=$1 source=$2 k=${3:-}
    shift 3
    "$BIN" "${MQ[@]}" "$@" >"$name.out" 2>"$name.err"
    local rc=$?
    pycheck jsonl "$name" "$name.out" "$name.err" "$rc" "$source" ${k:+"$k"}
}
corpus default corpus.jsonl "" corpus.jsonl
corpus threads1-wave0 corpus.jsonl "" --threads 1 --wave-tokens 0 corpus.jsonl
corpus stdin-threads2-wave300 "<stdin>" "" --threads 2 --wave-tokens 300 - <corpus.jsonl

"$BIN" "${MQ[@]}" --threads 2 --wave-tokens 4096 -o c.npy --errors c.npy.err corpus.jsonl \
    >npy.stdout 2>npy.err
rc=$?
pycheck binary "npy --errors FILE" npy c.npy c.npy.ids.jsonl c.npy.err npy.err "$rc" default.out
"$BIN" "${MQ[@]}" --threads 1 --wave-tokens 700 -o c.f32 --errors c.f32.err corpus.jsonl \
    >f32.stdout 2>f32.err
rc=$?
pycheck binary "f32 --errors FILE" f32 c.f32 c.f32.ids.jsonl c.f32.err f32.err "$rc" default.out

# --max-errors K: the records up to the K-th failed one, then a clean stop
nbad=$("$PY" -c "import json; print(sum(not e['good'] for e in json.load(open('expect.json'))['records']))")
for k in 1 $((nbad / 2)) "$nbad"; do
    corpus "max-errors-$k" corpus.jsonl "$k" --max-errors "$k" corpus.jsonl
done

# ---- the token limit exactly: 8192 tokens are embedded, 8193 are too many ---------------------

# (cheap with --tokenize --truncate: only the over-long record is marked; an 8192-token
# embedding costs seconds, much more under the sanitizers, and test_cli embeds one already)
"$PY" - <<'EOF'
import json
with open("limit.jsonl", "w") as f:
    for n in (8190, 8191):
        f.write(json.dumps({"id": n + 2, "text": "<bos>" * n}) + "\n")
EOF
"$BIN" "${M[@]}" --tokenize --truncate limit.jsonl >limit.out 2>limit.err
rc=$?
"$PY" - <<'EOF' >limit.check 2>&1 && lim=ok || lim=bad
import json
a, b = [json.loads(l) for l in open("limit.out")]
assert a["id"] == 8192 and len(a["tokens"]) == 8192 and "truncated" not in a, {k: v for k, v in a.items() if k != "tokens"}
assert b["id"] == 8193 and len(b["tokens"]) == 8192 and b["truncated"] is True and b["n_tokens"] == 8193, {k: v for k, v in b.items() if k != "tokens"}
EOF
[ "$lim" = ok ] && [ "$rc" -eq 0 ] && pass "token limit: 8192 tokens fit, 8193 do not (corpus: bos-8191 is too_long)" ||
    fail "token limit: 8192 tokens fit, 8193 do not" "exit $rc: $(tail -n 2 limit.check | tr '\n' ' ')"

finish
