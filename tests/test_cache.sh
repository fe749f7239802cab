#!/usr/bin/env bash
# tests/test_cache.sh - the content cache (--cache DIR, issue 19): a second run gives the same
# bytes from the cache, --dim and --precision are applied after it, duplicates inside a run
# are computed once, a changed text or image pixel misses, four shard processes share one
# cache at once, and a damaged entry, a damaged database page, a killed writer and a lock held
# by another process lose or change nothing.
#
#   BIN=./gemmaembed MODEL=testdata/tiny-q8_0.gguf PYTHON=/usr/bin/python3 bash tests/test_cache.sh
#
# Prints "PASS: name" or "FAIL: name: detail" per check and exits non-zero if any failed.
set -u
cd "$(dirname "$0")/.." || exit 1

BIN=${BIN:-./gemmaembed}
MODEL=${MODEL:-testdata/tiny-q8_0.gguf}
MMPROJ=${MMPROJ:-testdata/tiny-mmproj-both-q8_0.gguf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/test_cache.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
unset GEMMAEMBED_MODEL
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
case $MODEL in /*) ;; *) MODEL=$PWD/$MODEL ;; esac
case $MMPROJ in /*) ;; *) MMPROJ=$PWD/$MMPROJ ;; esac
IMAGES=$PWD/testdata/images
. tests/lib.sh

for need in "$BIN" "$MODEL" "$MMPROJ"; do
    [ -e "$need" ] || { echo "FAIL: setup: $need not found"; exit 1; }
done
command -v sqlite3 >/dev/null || { echo "FAIL: setup: sqlite3 (tools/install-deps) not found"; exit 1; }
cd "$T" || exit 1
M=(-m "$MODEL" --mmproj "$MMPROJ")

same() { # NAME FILE FILE [STDERR_FILE WANT]: byte-identical, and the summary says WANT
    if ! cmp -s "$2" "$3"; then
        fail "$1" "$(cmp "$2" "$3" 2>&1 | head -c 200)"
    elif [ $# -ge 5 ] && ! grep -q -- "$5" "$4"; then
        fail "$1" "summary: $(tail -c 300 "$4")"
    else
        pass "$1"
    fi
}

# 400 records: texts with repeats (every 7th repeats an earlier one), two images (one twice),
# a bad record; a record over the context cut by --truncate is checked apart (an 8192-token
# pass is slow under the sanitizers)
cp "$IMAGES/landscape.jpg" a.jpg
cp "$IMAGES/square.webp" b.webp
"$PY" - <<'EOF'
import json, random
r = random.Random(1000)
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron".split()
texts, seen, repeats = [], set(), 0
with open("in.jsonl", "w") as f:
    for i in range(400):
        if i == 200:
            rec = {"id": i, "image": "a.jpg"}
        elif i in (250, 350):
            rec = {"id": i, "content": [{"type": "text", "text": "see"}, {"type": "image", "image": "b.webp"}]}
        elif i == 300:
            f.write('{"id": "broken", "text": \n')
            continue
        elif i % 7 == 3 and texts:
            rec = {"id": i, "text": r.choice(texts)}
        else:
            t = " ".join(r.choice(words) for _ in range(r.randint(1, 40)))
            texts.append(t)
            rec = {"id": i, "text": t}
        content = json.dumps({k: v for k, v in rec.items() if k != "id"}, sort_keys=True)
        repeats += content in seen
        seen.add(content)
        f.write(json.dumps(rec) + "\n")
open("repeats", "w").write("%d\n" % repeats)
with open("long.jsonl", "w") as f:
    f.write(json.dumps({"id": "long", "text": " ".join(r.choice(words) for _ in range(2400))}) + "\n")
    f.write(json.dumps({"id": "short", "text": "alpha"}) + "\n")
with open("unique.jsonl", "w") as f:  # for the killed writer: long enough to be killed
    for i in range(20000):
        f.write(json.dumps({"id": i, "text": "%d %s" % (i, " ".join(r.choice(words) for _ in range(40)))}) + "\n")
EOF
run() { "$BIN" "${M[@]}" --truncate "$@"; }

run in.jsonl -o fresh.npy --errors fresh.err -q
run in.jsonl -o fresh.jsonl -q
run in.jsonl -o one.npy --errors one.err --cache c 2>one.log
same "first run with --cache = without" fresh.npy one.npy
# a repeat is either still in flight (computed once for both) or already stored by this run
read -r cached deduped stored < <(sed -n 's/.*: \([0-9]*\) of 400 records from the cache, \([0-9]*\) repeating an earlier record, \([0-9]*\) computed.*/\1 \2 \3/p' one.log)
[ "$((cached + deduped))" = "$(cat repeats)" ] && [ "$stored" = "$((399 - $(cat repeats)))" ] &&
    pass "first run: each repeat computed once ($deduped in flight, $cached stored by then)" ||
    fail "first run: repeats" "$(cat repeats) repeats; summary: $(tail -1 one.log)"
cmp -s fresh.err one.err && pass "first run: the same error records" || fail "first run: error records" "differ"
run in.jsonl -o two.npy --errors two.err --cache c 2>two.log
same "second run: every vector from the cache, the same bytes" fresh.npy two.npy two.log "399 of 400 records from the cache, 0 repeating an earlier record, 0 computed"
run in.jsonl -o two.jsonl --cache c 2>/dev/null
same "second run, jsonl" fresh.jsonl two.jsonl
run long.jsonl -o long1.jsonl -q
run long.jsonl -o long2.jsonl --cache c -q
run long.jsonl -o long3.jsonl --cache c 2>long3.log
same "a record cut by --truncate: marked and counted from the cache as fresh" long1.jsonl long3.jsonl long3.log "2 of 2 records from the cache"
grep -q '"truncated":true,"n_tokens":[0-9]' long3.jsonl && pass "the truncated record is marked" || fail "truncated mark" "missing"
for a in "--dim 128" "--dim 256 --precision binary" "--precision float16"; do
    run $a in.jsonl -o f.jsonl -q
    run $a in.jsonl -o c.jsonl --cache c 2>c.log
    same "from the cache with $a = fresh" f.jsonl c.jsonl c.log "399 of 400 records from the cache"
done

# a changed text and a changed pixel miss; the rest hit
"$PY" - <<'EOF'
from PIL import Image
im = Image.open("a.jpg").convert("RGB")
px = im.load()
r, g, b = px[5, 5]
px[5, 5] = ((r + 128) % 256, g, b)
im.save("a2.png")
lines = open("in.jsonl").read().splitlines()
lines[10] = lines[10].replace("a", "b", 1) if "a" in lines[10] else lines[10].replace('"text": "', '"text": "x')
open("changed.jsonl", "w").write("\n".join(lines) + "\n")
EOF
sed -i 's/"image": "a.jpg"/"image": "a2.png"/' changed.jsonl
run changed.jsonl -o ch.npy --errors /dev/null -q
run changed.jsonl -o chc.npy --errors /dev/null --cache c 2>chc.log
same "a changed text and a changed pixel miss, the rest hit" ch.npy chc.npy chc.log "397 of 400 records from the cache"

# four shard processes share a new cache at once; then every vector is there
for i in 0 1 2 3; do
    run --shard $i/4 in.jsonl -o s$i.npy --errors /dev/null -q
    run --shard $i/4 in.jsonl -o sc$i.npy --errors /dev/null --cache shared -q &
done
wait
bad=""
for i in 0 1 2 3; do cmp -s s$i.npy sc$i.npy || bad="$bad $i"; done
[ -z "$bad" ] && pass "four shards at once on one cache: each = its fresh run" || fail "shards on one cache" "differ:$bad"
run in.jsonl -o all.npy --errors /dev/null --cache shared 2>all.log
same "after the shards, the whole input from their cache" fresh.npy all.npy all.log "399 of 400 records from the cache"

# a damaged entry (its vector changed behind the check) is found, recomputed and replaced
sqlite3 c/cache.sqlite "UPDATE vectors SET vec = zeroblob(length(vec)) WHERE key = (SELECT key FROM vectors LIMIT 1);"
run in.jsonl -o dmg.npy --errors /dev/null --cache c 2>dmg.log
same "a damaged entry: reported, recomputed, the same bytes" fresh.npy dmg.npy dmg.log "1 damaged entries recomputed"
[ "$(grep -c 'damaged entry' dmg.log)" = 1 ] && pass "the damaged entry is reported once" || fail "damage report" "$(cat dmg.log)"
run in.jsonl -o dmg2.npy --errors /dev/null --cache c 2>dmg2.log
same "the damaged entry was replaced" fresh.npy dmg2.npy dmg2.log "399 of 400 records from the cache"

# a damaged database page: the run goes on without the cache, nothing lost
cp -r c broken
sqlite3 broken/cache.sqlite "PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
size=$(stat -c %s broken/cache.sqlite)
"$PY" - "$size" <<'EOF'
import sys
size = int(sys.argv[1])
with open("broken/cache.sqlite", "r+b") as f:
    for at in range(4096, size, 4096 * 3):  # every third page after the first: garbage
        f.seek(at + 100)
        f.write(b"\xa5" * 3000)
EOF
run in.jsonl -o brk.npy --errors /dev/null --cache broken 2>brk.log
rc=$?
same "a damaged database: every record still right" fresh.npy brk.npy
[ $rc -eq 1 ] && [ "$(grep -c 'going on without the cache' brk.log)" -le 1 ] && grep -q 'cache' brk.log &&
    pass "a damaged database is reported (once), exit 1 only for the bad record" ||
    fail "damaged database report" "exit $rc: $(head -c 400 brk.log)"
printf 'this is not a database at all, just text that fills a page........\n%.0s' $(seq 80) >notdb.sqlite
mkdir notdb && mv notdb.sqlite notdb/cache.sqlite
run in.jsonl -o nd.npy --errors /dev/null --cache notdb 2>nd.log
same "a file that is not a database: every record still right" fresh.npy nd.npy
grep -q 'going on without the cache' nd.log && pass "not a database: said" || fail "not a database" "$(head -c 300 nd.log)"

# a writer killed mid-run: the next run opens the cache (the log replayed) and is right
"$BIN" "${M[@]}" --truncate unique.jsonl in.jsonl -o killed.npy --errors /dev/null --cache k -q &
pid=$!
for _ in $(seq 200); do
    [ -s k/cache.sqlite-wal ] && [ "$(sqlite3 k/cache.sqlite 'select count(*) from vectors' 2>/dev/null || echo 0)" -gt 100 ] && break
    sleep 0.05
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
krc=$?
[ $krc -eq 137 ] && pass "the writer was killed mid-run" || fail "kill -9 mid-run" "exit $krc: it ended first"
run in.jsonl -o afterkill.npy --errors /dev/null --cache k 2>ak.log
same "after kill -9 of a writer: the same bytes, the cache in use" fresh.npy afterkill.npy ak.log "records from the cache"
grep -q 'going on without' ak.log && fail "after kill -9: cache intact" "$(cat ak.log)" || pass "after kill -9: cache intact"

# a lock held by another process for a while: waited for, nothing lost
( sqlite3 c/cache.sqlite "BEGIN EXCLUSIVE; SELECT count(*) FROM vectors;" ".shell sleep 2" "COMMIT;" >/dev/null ) &
sleep 0.5
run changed.jsonl -o lk.npy --errors /dev/null --cache c 2>lk.log
wait
same "a lock held by another process: waited for, the same bytes" ch.npy lk.npy lk.log "records from the cache"

# usage
"$BIN" "${M[@]}" --tokenize --cache c in.jsonl >/dev/null 2>u.err
[ $? -eq 2 ] && grep -q 'tokenize' u.err && pass "--cache with --tokenize: usage error" || fail "--cache --tokenize" "$(cat u.err)"
touch afile
"$BIN" "${M[@]}" --cache afile in.jsonl >/dev/null 2>u.err
[ $? -eq 2 ] && grep -q 'not a directory' u.err && pass "--cache naming a file: usage error" || fail "--cache file" "$(cat u.err)"

finish
