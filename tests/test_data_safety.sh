#!/usr/bin/env bash
# tests/test_data_safety.sh - nothing a careless user types destroys data or loses records
# (docs/threat-model.md): outputs that name inputs or each other, outputs that are open
# descriptors, special files, --resume against another configuration or a damaged state, a
# full disk, closed standard descriptors, a model file cut short while in use.
#
#   BIN=./gemmaembed PYTHON=/usr/bin/python3 bash tests/test_data_safety.sh
#
# Prints "PASS: name" or "FAIL: name: detail" per check and exits non-zero if any failed.
set -u
cd "$(dirname "$0")/.." || exit 1
BIN=${BIN:-./gemmaembed}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/test_data_safety.XXXXXX")
trap 'rm -rf "$T"' EXIT
unset GEMMAEMBED_MODEL GEMMAEMBED_MMPROJ
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
. tests/lib.sh
cp testdata/tiny-f32.gguf "$T/model.gguf"
cp testdata/tiny-q8_0.gguf "$T/other.gguf"
cp testdata/tiny-mmproj-q8_0.gguf "$T/mmproj.gguf"
cd "$T" || exit 1
M=(-m "$T/model.gguf" --dim 128)

# 300 records, every 50th invalid JSON (an error record)
"$PY" - <<'EOF'
import json
with open("in.jsonl", "w") as f:
    for i in range(300):
        if i % 50 == 7:
            f.write('{"id": "bad%d", "text": \n' % i)
        else:
            f.write(json.dumps({"id": "r%d" % i, "text": "record %d: %s" % (i, "word " * (i % 23))}) + "\n")
EOF
sha() { sha256sum "$@" | cut -c1-64 | tr '\n' ' '; }
mkdir pristine && cp model.gguf other.gguf mmproj.gguf in.jsonl pristine/
intact="$(sha model.gguf other.gguf mmproj.gguf in.jsonl)"
untouched() { [ "$(sha model.gguf other.gguf mmproj.gguf in.jsonl)" = "$intact" ]; }
# expect NAME RC COMMAND...: the exit status is RC and the model, mmproj and input are intact
# (restored after a failure, so that one case cannot fail the next)
expect() {
    local name=$1 want=$2
    shift 2
    timeout -k 5 60 "$@" >out.txt 2>err.txt
    local rc=$?
    if [ "$rc" -eq "$want" ] && untouched; then pass "$name"
    else fail "$name" "exit $rc (want $want), inputs intact: $(untouched && echo yes || echo NO); $(head -c 300 err.txt | tr '\n' ' ')"; fi
    untouched || { rm -f model.gguf other.gguf mmproj.gguf in.jsonl && cp pristine/* .; }
}
says() { # NAME PATTERN: the last command's stderr matches
    grep -qiE "$2" err.txt && pass "$1" || fail "$1" "stderr: $(head -c 300 err.txt | tr '\n' ' ')"
}

"$BIN" "${M[@]}" -o ref.jsonl in.jsonl 2>/dev/null
"$BIN" "${M[@]}" -o ref.npy --errors ref.err in.jsonl 2>/dev/null
"$BIN" "${M[@]}" -o ref.f32 --errors ref.f32err in.jsonl 2>/dev/null
[ -s ref.jsonl ] && [ -s ref.npy ] && [ -s ref.f32 ] && pass "reference runs" || fail "reference runs" "no output"

# ---- 1. an output never overwrites what the run reads, nor another output ------------------
expect "-o the model: exit 2" 2 "$BIN" "${M[@]}" -o model.gguf in.jsonl
says "-o the model: the message names both" "output.*model.gguf.*same file.*model"
expect "-o the input: exit 2" 2 "$BIN" "${M[@]}" -o in.jsonl in.jsonl
mkdir sub
expect "-o the input through ./sub/..: exit 2" 2 "$BIN" "${M[@]}" -o "./sub/../in.jsonl" in.jsonl
ln in.jsonl hard.jsonl
expect "-o a hard link to the input: exit 2" 2 "$BIN" "${M[@]}" -o hard.jsonl in.jsonl
ln -s model.gguf link.gguf
expect "--errors a symlink to the model: exit 2" 2 "$BIN" "${M[@]}" -o x.npy --errors link.gguf in.jsonl
expect "--ids the mmproj: exit 2" 2 "$BIN" "${M[@]}" --mmproj mmproj.gguf -o x.npy --ids mmproj.gguf in.jsonl
expect "--errors the input: exit 2" 2 "$BIN" "${M[@]}" --errors in.jsonl in.jsonl
expect "--errors = -o: exit 2" 2 "$BIN" "${M[@]}" -o x.npy --errors x.npy in.jsonl
expect "--ids = -o (neither exists yet): exit 2" 2 "$BIN" "${M[@]}" -o new.npy --ids ./new.npy in.jsonl
expect "--ids = the resume state: exit 2" 2 "$BIN" "${M[@]}" -o x.npy --ids x.npy.resume in.jsonl
expect "--bench-json the model: exit 2" 2 "$BIN" "${M[@]}" --bench --bench-reps 1 --bench-json model.gguf in.jsonl
expect "stdout appended to the input: exit 2" 2 sh -c '"$0" -m model.gguf --dim 128 in.jsonl >>in.jsonl' "$BIN"
expect "stdin and -o the same file: exit 2" 2 sh -c '"$0" -m model.gguf --dim 128 -o in.jsonl <in.jsonl' "$BIN"
[ ! -e new.npy ] && [ ! -e x.npy ] && pass "refused runs create no output" || fail "refused runs create no output" "$(ls)"
expect "stdout and stderr one file (>log 2>&1) is fine (exit 1: error records)" 1 sh -c '"$0" -m model.gguf --dim 128 -o o.npy in.jsonl >log 2>&1' "$BIN"

# ---- 2. outputs that are open descriptors are written where they point, never truncated -----
echo '{"previous": "line"}' >all.jsonl
expect "-o /dev/stdout >> file: exit 1 (error records)" 1 sh -c '"$0" -m model.gguf --dim 128 -o /dev/stdout in.jsonl >>all.jsonl' "$BIN"
{ echo '{"previous": "line"}'; cat ref.jsonl; } | cmp -s - all.jsonl && pass "-o /dev/stdout >> file: appended, the old line kept" ||
    fail "-o /dev/stdout >> file: appended, the old line kept" "$(head -c 200 all.jsonl)"
echo "job started" >job.log
expect "--errors /dev/stderr 2>> log: exit 1" 1 sh -c '"$0" -m model.gguf --dim 128 -q -o e.npy --errors /dev/stderr in.jsonl 2>>job.log' "$BIN"
{ echo "job started"; cat ref.err; } | cmp -s - job.log && pass "--errors /dev/stderr 2>> log: appended, the log kept" ||
    fail "--errors /dev/stderr 2>> log: appended, the log kept" "$(head -c 200 job.log)"
echo "first" >fd3.jsonl
expect "-o /dev/fd/3 3>> file: exit 1" 1 sh -c '"$0" -m model.gguf --dim 128 -o /dev/fd/3 in.jsonl 3>>fd3.jsonl' "$BIN"
[ "$(head -n1 fd3.jsonl)" = first ] && [ "$(wc -l <fd3.jsonl)" -eq 301 ] && pass "-o /dev/fd/3: appended" || fail "-o /dev/fd/3: appended" "$(wc -l <fd3.jsonl) lines"
ln -s /dev/stdout tostdout
echo "kept" >viasym.jsonl
expect "-o a symlink to /dev/stdout: exit 1" 1 sh -c '"$0" -m model.gguf --dim 128 -o tostdout in.jsonl >>viasym.jsonl' "$BIN"
[ "$(head -n1 viasym.jsonl)" = kept ] && pass "-o a symlink to /dev/stdout: appended" || fail "-o a symlink to /dev/stdout: appended" "$(head -c 100 viasym.jsonl)"
cp ref.npy keep.npy
expect "npy to /dev/stdout in append mode: exit 2" 2 sh -c '"$0" -m model.gguf --dim 128 -o /dev/stdout --format npy in.jsonl >>keep.npy' "$BIN"
cmp -s keep.npy ref.npy && pass "npy to /dev/stdout in append mode: the file untouched" || fail "npy to /dev/stdout in append mode: the file untouched" "changed"

# ---- 3. special files: nothing blocks, nothing reads its own output -----------------------
mkfifo fifo
expect "-m a FIFO: exit 3 at once" 3 "$BIN" -m fifo in.jsonl
says "-m a FIFO: says so" "fifo.*FIFO"
echo '{"id": "img", "image": "'"$OLDPWD"'/testdata/images/tiny.png"}' >img.jsonl
expect "--mmproj a FIFO, loaded for the first image: exit 1 at once" 1 "$BIN" "${M[@]}" --mmproj fifo img.jsonl
grep -q '"code":"io".*fifo: a FIFO' out.txt && pass "--mmproj a FIFO: the image's error record says so" || fail "--mmproj a FIFO: the image's error record says so" "$(head -c 300 out.txt)"
expect "--mmproj a FIFO with --prepack: exit 3 at once" 3 "$BIN" "${M[@]}" --mmproj fifo --prepack img.jsonl
expect "-o a FIFO --resume: exit 2 at once" 2 "$BIN" "${M[@]}" -o fifo --resume in.jsonl
rm -f s.npy*
mkfifo s.npy.resume
expect "the resume state a FIFO: exit 2 at once" 2 "$BIN" "${M[@]}" -o s.npy in.jsonl
rm -f s.npy*
term_after() { # SECONDS PID: SIGTERM to PID after SECONDS; its exit status (10 s to end)
    sleep "$1"
    kill -TERM "$2"
    timeout 10 tail --pid="$2" -f /dev/null
    wait "$2"
}
# SIGTERM while the reader is blocked on a pipe that has delivered 3 records
mkfifo slow
(head -n 3 in.jsonl; sleep 30) >slow &
feeder=$!
"$BIN" "${M[@]}" -o slow.jsonl <slow 2>term.err &
term_after 1.5 $!
rc=$?
kill "$feeder" 2>/dev/null
[ "$rc" -eq 143 ] && [ "$(wc -l <slow.jsonl)" -eq 3 ] && pass "SIGTERM while blocked on stdin: exit 143, the 3 records read are written" ||
    fail "SIGTERM while blocked on stdin: exit 143, the 3 records read are written" "exit $rc, $(wc -l <slow.jsonl) rows"
# SIGTERM while opening a FIFO operand nobody writes to
"$BIN" "${M[@]}" -o nowriter.jsonl fifo 2>/dev/null &
term_after 1 $!
rc=$?
[ "$rc" -eq 143 ] && pass "SIGTERM while opening a FIFO input: exit 143" || fail "SIGTERM while opening a FIFO input: exit 143" "exit $rc"

# ---- 4. --resume refuses another configuration, a damaged state, a missing file -------------
# a half-done job: the first 150 records, run from a directory where they are "in.jsonl"
mkdir half && head -n 150 in.jsonl >half/in.jsonl
half() { # OUT ARGS...: OUT (in .) as a half-done job of "$BIN" ARGS
    local out=$1
    shift
    rm -f "$out" "$out".*
    (cd half && "$BIN" "$@" -o "../$out" in.jsonl 2>/dev/null)
}
refuse() { # NAME OUT ARGS...: --resume exits 2 and leaves every file of OUT's set as it was
    local name=$1 out=$2
    shift 2
    local before
    before=$(sha "$out"*)
    expect "$name" 2 "$BIN" "$@" -o "$out" --resume in.jsonl
    echo "refused: $(head -c 400 err.txt)"
    [ "$(sha "$out"*)" = "$before" ] && pass "$name: the output is untouched" || fail "$name: the output is untouched" "changed"
}
half h.npy "${M[@]}" --errors "$T/h.err"
refuse "--resume with another model: exit 2" h.npy -m "$T/other.gguf" --dim 128 --errors h.err
says "--resume with another model: names the model" "model \(was"
refuse "--resume with another --dim: exit 2" h.npy -m "$T/model.gguf" --dim 256 --errors h.err
refuse "--resume with a prompt: exit 2" h.npy "${M[@]}" --prompt query --errors h.err
says "--resume with a prompt: names the prompt" "prompt \(was none"
refuse "--resume with another --semantics: exit 2" h.npy "${M[@]}" --semantics llamacpp --errors h.err
refuse "--resume with --mmproj added: exit 2" h.npy "${M[@]}" --mmproj mmproj.gguf --errors h.err
refuse "--resume with --image-tokens: exit 2" h.npy "${M[@]}" --image-tokens 70 --errors h.err
refuse "--resume with --truncate: exit 2" h.npy "${M[@]}" --truncate --errors h.err
refuse "--resume without --errors: exit 2" h.npy "${M[@]}"
refuse "--resume with two differences: exit 2" h.npy -m "$T/model.gguf" --dim 256 --prompt query --errors h.err
grep -q "dim (was" err.txt && grep -q "prompt (was" err.txt && pass "--resume with two differences: both named" || fail "--resume with two differences: both named" "$(head -c 300 err.txt)"
half h.jsonl "${M[@]}"
refuse "--resume jsonl with another --dim: exit 2" h.jsonl -m "$T/model.gguf" --dim 256
refuse "--resume jsonl with --encoding base64: exit 2" h.jsonl "${M[@]}" --encoding base64
refuse "--resume jsonl with --tokenize: exit 2" h.jsonl "${M[@]}" --tokenize
expect "--resume with other threads and wave size: allowed" 1 "$BIN" "${M[@]}" -t 1 --wave-tokens 64 -o h.jsonl --resume in.jsonl
cmp -s h.jsonl ref.jsonl && pass "--resume with other threads: the output completes byte-identical" || fail "--resume with other threads: the output completes byte-identical" "differs"

# the files of the set
half h.npy "${M[@]}" --errors "$T/h.err"
rm h.err
printf 'bytes past the checkpoint' >>h.npy # a killed run's tail: not cut by a refusal either
refuse "--resume with the errors file deleted: exit 2" h.npy "${M[@]}" --errors h.err
says "--resume with the errors file deleted: names it" "h.err.*missing"
half h.npy "${M[@]}" --errors "$T/h.err"
rm h.npy.ids.jsonl
printf 'bytes past the checkpoint' >>h.npy
refuse "--resume with the ids sidecar deleted: exit 2" h.npy "${M[@]}" --errors h.err
half h.npy "${M[@]}" --errors "$T/h.err"
: >h.npy.resume
refuse "--resume with an emptied state: exit 2" h.npy "${M[@]}" --errors h.err
says "--resume with an emptied state: says it is damaged" "damaged"
half h.npy "${M[@]}" --errors "$T/h.err"
head -c 700 h.npy.resume >t && mv t h.npy.resume
refuse "--resume with a truncated state: exit 2" h.npy "${M[@]}" --errors h.err
half h.npy "${M[@]}" --errors "$T/h.err"
"$PY" -c "
b = bytearray(open('h.npy.resume', 'rb').read()); b[600] ^= 1; open('h.npy.resume', 'wb').write(b)"
refuse "--resume with a damaged state: exit 2" h.npy "${M[@]}" --errors h.err
half h.npy "${M[@]}" --errors "$T/h.err"
rm h.npy.resume
refuse "--resume with the state deleted: exit 2" h.npy "${M[@]}" --errors h.err
printf 'gemmaembed-resume 1 seq=3 records=150 rows=147 out=75392 ids=1017 errors=0 format=npy dim=128 shard=0/0 crc=00000000\n' >h.npy.resume
refuse "--resume with an old state file: exit 2" h.npy "${M[@]}" --errors h.err
half h.npy "${M[@]}" --errors "$T/h.err"
head -c 3000 h.npy >t && mv t h.npy
refuse "--resume with the output cut short: exit 2" h.npy "${M[@]}" --errors h.err
half h.npy "${M[@]}" --errors "$T/h.err"
rm h.npy
expect "--resume with the output deleted: a fresh run (exit 1: error records)" 1 "$BIN" "${M[@]}" -o h.npy --errors h.err --resume in.jsonl
says "--resume with the output deleted: says it starts again" "missing: starting again"
cmp -s h.npy ref.npy && cmp -s h.err ref.err && pass "--resume with the output deleted: the result is complete" || fail "--resume with the output deleted: the result is complete" "differs"
half h.npy "${M[@]}" --errors "$T/h.err"
expect "--resume of a half-done job: exit 1" 1 "$BIN" "${M[@]}" -o h.npy --errors h.err --resume in.jsonl
cmp -s h.npy ref.npy && cmp -s h.err ref.err && cmp -s h.npy.ids.jsonl ref.npy.ids.jsonl && pass "--resume of a half-done job: byte-identical" || fail "--resume of a half-done job: byte-identical" "differs"

# ---- 5. a full disk: the outputs stay at their last checkpoint, loadable and resumable -------
for fmt in npy f32 jsonl; do
    rm -f full.$fmt*
    bash -c 'ulimit -f 120; exec "$0" -m model.gguf --dim 128 -o full.'$fmt' --errors full.'$fmt'.err in.jsonl' "$BIN" 2>err.txt
    rc=$?
    [ "$rc" -eq 4 ] && pass "full disk ($fmt): exit 4" || fail "full disk ($fmt): exit 4" "exit $rc: $(head -c 200 err.txt)"
    says "full disk ($fmt): says the output was cut back" "cut back to its last checkpoint"
    if [ $fmt = npy ]; then
        "$PY" -c "
import numpy as np
a = np.load('full.npy')
ids = open('full.npy.ids.jsonl').read().splitlines()
assert a.shape[0] == len(ids) and a.shape[0] * 128 * 4 + 128 == len(open('full.npy', 'rb').read()), (a.shape, len(ids))
" 2>err.txt && pass "full disk (npy): loads, one id per row, no bytes past the rows" || fail "full disk (npy): loads, one id per row" "$(tail -1 err.txt)"
    fi
    "$BIN" "${M[@]}" -o full.$fmt --errors full.$fmt.err --resume in.jsonl 2>/dev/null
    ref=ref.$fmt; [ $fmt = f32 ] && refe=ref.f32err || refe=ref.err
    if [ $fmt = jsonl ]; then
        "$BIN" "${M[@]}" -o refe.jsonl --errors refe.jsonl.err in.jsonl 2>/dev/null
        ref=refe.jsonl refe=refe.jsonl.err
    fi
    cmp -s full.$fmt $ref && cmp -s full.$fmt.err $refe && pass "full disk ($fmt): --resume completes it byte-identical" ||
        fail "full disk ($fmt): --resume completes it byte-identical" "differs"
done
rm -f full.npz
bash -c 'ulimit -f 60; exec "$0" -m model.gguf --dim 128 -o full.npz in.jsonl' "$BIN" 2>err.txt
rc=$?
[ "$rc" -eq 4 ] && [ ! -e full.npz ] && pass "full disk (npz): exit 4, no half archive left" || fail "full disk (npz): exit 4, no half archive left" "exit $rc, $(ls full.npz 2>&1)"

# ---- 6. closed standard descriptors ------------------------------------------------------------
rm -f c.npy*
expect "stdin closed: the state file is not read as input (exit 1)" 1 sh -c '"$0" -m model.gguf --dim 128 -o c.npy --errors c.err in.jsonl 0<&-' "$BIN"
cmp -s c.npy ref.npy && cmp -s c.err ref.err && pass "stdin closed: byte-identical outputs" || fail "stdin closed: byte-identical outputs" "differs"
rm -f c.npy*
expect "stderr closed: error records do not land in the output files (exit 1)" 1 sh -c '"$0" -m model.gguf --dim 128 -o c.npy in.jsonl 2>&-' "$BIN"
cmp -s c.npy ref.npy && cmp -s c.npy.ids.jsonl ref.npy.ids.jsonl && pass "stderr closed: byte-identical npy and ids" || fail "stderr closed: byte-identical npy and ids" "differs"
grep -q '"error"' c.npy.resume && fail "stderr closed: no error record in the state file" "found" ||
    pass "stderr closed: no error record in the state file"
expect "stderr closed: the state file still resumes" 0 sh -c '"$0" -m model.gguf --dim 128 -o c.npy --resume in.jsonl 2>&-' "$BIN"
expect "stdout closed, output to stdout: exit 4" 4 sh -c '"$0" -m model.gguf --dim 128 in.jsonl >&-' "$BIN"
says "stdout closed: says so" "standard output is closed"
expect "stdin closed, input from stdin: exit 4" 4 sh -c '"$0" -m model.gguf --dim 128 -o c2.npy 0<&-' "$BIN"
says "stdin closed, input from stdin: says so" "standard input is closed"

# ---- 7. smaller ones ----------------------------------------------------------------------------
case $(uname -m) in x86_64) absent=neon ;; *) absent=avx2 ;; esac
expect "--cpu-tier $absent (not on this CPU): exit 2" 2 "$BIN" "${M[@]}" --cpu-tier $absent in.jsonl

# a model file cut short while the run uses it: exit 3, the output loads and resumes
"$PY" -c "
import json
with open('many.jsonl', 'w') as f:
    for i in range(5000):
        f.write(json.dumps({'id': i, 'text': 'record number %d of a long job' % i}) + '\n')"
cp model.gguf cut.gguf
"$BIN" -m cut.gguf --dim 128 -o cut.npy many.jsonl 2>err.txt &
pid=$!
for i in $(seq 100); do [ -s cut.npy.ids.jsonl ] && break; sleep 0.05; done
truncate -s 4096 cut.gguf
timeout 60 tail --pid="$pid" -f /dev/null
wait "$pid"
rc=$?
[ "$rc" -eq 3 ] && pass "model file cut short mid-run: exit 3" || fail "model file cut short mid-run: exit 3" "exit $rc: $(head -c 300 err.txt)"
says "model file cut short mid-run: says which file" "cut.gguf: the file was cut short"
"$PY" -c "
import numpy as np
a = np.load('cut.npy'); ids = open('cut.npy.ids.jsonl').read().splitlines()
assert a.shape[0] == len(ids) < 5000, (a.shape, len(ids))" 2>err.txt && pass "model file cut short: the npy loads, one id per row" || fail "model file cut short: the npy loads" "$(tail -1 err.txt)"
cp model.gguf cut.gguf
"$BIN" -m cut.gguf --dim 128 -o cut.npy --resume many.jsonl 2>/dev/null
"$BIN" -m model.gguf --dim 128 -o many.npy many.jsonl 2>/dev/null
cmp -s cut.npy many.npy && pass "model file restored: --resume completes it byte-identical" || fail "model file restored: --resume completes it byte-identical" "differs"

untouched && pass "the model, mmproj and input files are byte-identical at the end" || fail "the model, mmproj and input files are byte-identical at the end" "changed"
finish
