#!/usr/bin/env bash
# tests/test_merge.sh - gemmaembed merge (issue 19): the four --shard i/4 outputs of one input,
# in every format, merge to the bytes of one unsharded run (output, ids sidecar, run
# description), a shard killed and resumed included; merge refuses missing, repeated,
# unfinished and foreign parts and a damaged records map.
#
#   BIN=./gemmaembed MODEL=testdata/tiny-f32.gguf PYTHON=/usr/bin/python3 bash tests/test_merge.sh
#
# Prints "PASS: name" or "FAIL: name: detail" per check and exits non-zero if any failed.
set -u
cd "$(dirname "$0")/.." || exit 1

BIN=${BIN:-./gemmaembed}
MODEL=${MODEL:-testdata/tiny-f32.gguf}
OTHER=${OTHER:-testdata/tiny-q8_0.gguf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/test_merge.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
unset GEMMAEMBED_MODEL
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
case $MODEL in /*) ;; *) MODEL=$PWD/$MODEL ;; esac
case $OTHER in /*) ;; *) OTHER=$PWD/$OTHER ;; esac
. tests/lib.sh

for need in "$BIN" "$MODEL" "$OTHER"; do
    [ -e "$need" ] || { echo "FAIL: setup: $need not found"; exit 1; }
done
cd "$T" || exit 1
M=(-m "$MODEL" -q)

# 300 records: texts, bad lines, OpenAI requests (lists: several rows for one record)
"$PY" - <<'EOF'
import json, random
r = random.Random(5)
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
t = lambda: " ".join(r.choice(words) for _ in range(r.randint(1, 20)))
with open("in.jsonl", "w") as f:
    for i in range(300):
        if i % 37 == 5:
            f.write('{"id": "broken%d", "text": \n' % i)
        elif i % 11 == 3:
            f.write(json.dumps({"custom_id": "q%d" % i, "method": "POST", "url": "/v1/embeddings",
                                "body": {"input": [t() for _ in range(r.randint(1, 4))]}}) + "\n")
        else:
            f.write(json.dumps({"id": "r%d" % i, "text": t()}) + "\n")
EOF

declare -A EXT=([jsonl]=jsonl [npy]=npy [f32]=f32 [npz]=npz [openai-batch]=oa.jsonl)
for f in jsonl npy f32 npz openai-batch; do
    e=${EXT[$f]}
    errs() { [ "$f" = openai-batch ] || echo "--errors $1.err"; } # openai-batch: errors inline
    "$BIN" "${M[@]}" --format "$f" in.jsonl -o one.$e $(errs one.$e)
    for i in 0 1 2 3; do
        "$BIN" "${M[@]}" --format "$f" --shard $i/4 in.jsonl -o part$i.$e $(errs part$i.$e)
    done
    "$BIN" merge -o merged.$e part0.$e part2.$e part1.$e part3.$e 2>merge.err
    rc=$?
    bad=""
    cmp -s merged.$e one.$e || bad="$bad output"
    cmp -s merged.$e.meta.json one.$e.meta.json || bad="$bad meta.json"
    [ -e one.$e.ids.jsonl ] && { cmp -s merged.$e.ids.jsonl one.$e.ids.jsonl || bad="$bad ids"; }
    [ $rc -eq 0 ] && [ -z "$bad" ] && pass "$f: four shards merge to one run's bytes (parts in any order)" ||
        fail "$f merge" "exit $rc,$bad differ: $(head -c 300 merge.err)"
done

# a shard stopped by SIGTERM and resumed: its records map is cut back with the rest
mkdir fed && mkfifo fed/in.jsonl # the name the resumed run reads
( head -n 150 in.jsonl; exec sleep 30 ) >fed/in.jsonl &
feeder=$!
(cd fed && exec "$BIN" "${M[@]}" --shard 1/4 in.jsonl -o ../res1.npy --errors /dev/null 2>/dev/null) &
pid=$!
for _ in $(seq 100); do [ -s res1.npy.records ] && break; sleep 0.1; done
sleep 0.3
kill -TERM $pid
wait $pid
src=$?
kill $feeder 2>/dev/null
wait $feeder 2>/dev/null
"$PY" -c "import json,sys; sys.exit(json.load(open('res1.npy.meta.json'))['complete'])" &&
    "$BIN" merge -o stopped.npy part0.npy res1.npy part2.npy part3.npy 2>stop.err
[ $? -eq 2 ] && grep -q 'did not finish' stop.err && pass "an unfinished shard is refused, naming it" ||
    fail "unfinished shard" "stop exit $src; $(cat stop.err)"
"$BIN" "${M[@]}" --shard 1/4 --resume in.jsonl -o res1.npy --errors /dev/null
"$BIN" merge -o resumed.npy part0.npy res1.npy part2.npy part3.npy &&
    cmp -s resumed.npy one.npy && cmp -s res1.npy.records part1.npy.records &&
    pass "a shard stopped and resumed merges to the same bytes" ||
    fail "resumed shard" "$(cmp resumed.npy one.npy 2>&1; cmp res1.npy.records part1.npy.records 2>&1)"

# refusals
refuse() { # NAME WANT ARGS...: merge exits 2 naming the cause
    local name=$1 want=$2
    shift 2
    "$BIN" merge -o refused.npy "$@" 2>r.err
    local rc=$?
    [ $rc -eq 2 ] && grep -q -- "$want" r.err && pass "$name" || fail "$name" "exit $rc: $(cat r.err)"
}
refuse "a missing shard is named" "missing: 2/4" part0.npy part1.npy part3.npy
refuse "a shard given twice" "given twice" part0.npy part1.npy part1.npy part3.npy
"$BIN" -m "$OTHER" -q --shard 2/4 in.jsonl -o other2.npy --errors /dev/null
refuse "a shard of another model" "model differs" part0.npy part1.npy other2.npy part3.npy
"$BIN" "${M[@]}" --dim 128 --shard 2/4 in.jsonl -o dim2.npy --errors /dev/null
refuse "a shard of another width" "differ in dim" part0.npy part1.npy dim2.npy part3.npy
"$BIN" "${M[@]}" --shard 2/3 in.jsonl -o three2.npy --errors /dev/null
refuse "a shard of another split" "shard of 3" part0.npy part1.npy three2.npy part3.npy
refuse "an unsharded output" "not the output of a --shard run" one.npy part1.npy part2.npy part3.npy
cp part2.npy cut2.npy && cp part2.npy.ids.jsonl cut2.npy.ids.jsonl && cp part2.npy.meta.json cut2.npy.meta.json
head -n 20 part2.npy.records >cut2.npy.records
refuse "a records map cut short" "ends early" part0.npy part1.npy cut2.npy part3.npy
cp part3.npy p3.bak
"$BIN" merge -o part3.npy part0.npy part1.npy part2.npy part3.npy 2>r.err
[ $? -eq 2 ] && grep -q 'same file' r.err && cmp -s part3.npy p3.bak &&
    pass "the output may not be a part" || fail "the output over a part" "$(cat r.err)"
"$BIN" merge -o x.npy 2>u.err
[ $? -eq 2 ] && pass "merge without parts: usage error" || fail "merge usage" "$(cat u.err)"

finish
