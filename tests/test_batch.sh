#!/usr/bin/env bash
# tests/test_batch.sh - the batch-job behaviour of gemmaembed on the tiny model: --resume
# after kill -9 (byte-identical results), --shard and GNU parallel recombination, SIGTERM,
# SIGPIPE, the progress line, npz output and --input files.
#
#   BIN=./gemmaembed MODEL=testdata/tiny-f32.gguf PYTHON=/usr/bin/python3 bash tests/test_batch.sh
#
# Prints "PASS: name" or "FAIL: name: detail" per check and exits non-zero if any failed.
set -u
cd "$(dirname "$0")/.." || exit 1

BIN=${BIN:-./gemmaembed}
MODEL=${MODEL:-testdata/tiny-f32.gguf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/test_batch.XXXXXX")
trap 'rm -rf "$T"' EXIT
unset GEMMAEMBED_MODEL
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
case $MODEL in /*) ;; *) MODEL=$PWD/$MODEL ;; esac

. tests/lib.sh
check() { # NAME COMMAND...: pass when the command succeeds
    local name=$1
    shift
    if "$@" >"$T/check.out" 2>&1; then pass "$name"; else fail "$name" "$(head -c 300 "$T/check.out" | tr '\n' ' ')"; fi
}
same() { # NAME FILE FILE...: pairs of files byte for byte
    local name=$1 a b bad=""
    shift
    while [ $# -ge 2 ]; do
        a=$1 b=$2
        shift 2
        cmp -s "$a" "$b" || bad="$bad $(basename "$a")"
    done
    [ -z "$bad" ] && pass "$name" || fail "$name" "differs:$bad"
}

for need in "$BIN" "$MODEL"; do
    [ -e "$need" ] || { echo "FAIL: setup: $need not found"; exit 1; }
done
M=(-m "$MODEL")
cd "$T" || exit 1

# N records: texts of 1-40 words, every 97th line invalid JSON (under the sanitizers a
# quarter as many: each of the ~25 runs over them took 11x the release build's time there)
N=2000
[ "$SAN" -eq 1 ] && N=500
"$PY" - "$N" <<'EOF'
import json, random, sys
r = random.Random(7)
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
with open("in.jsonl", "w") as f, open("good.jsonl", "w") as g:
    for i in range(int(sys.argv[1])):
        if i % 97 == 5:
            f.write('{"id": "broken%d", "text": \n' % i)
            continue
        line = json.dumps({"id": "r%d" % i, "text": " ".join(r.choice(words) for _ in range(r.randint(1, 40)))})
        f.write(line + "\n")
        g.write(line + "\n")
EOF

# ---- reference runs ----------------------------------------------------------------------

start=$(date +%s%N)
"$BIN" "${M[@]}" -o ref.jsonl in.jsonl 2>/dev/null
ms=$((($(date +%s%N) - start) / 1000000))
"$BIN" "${M[@]}" -o ref.npy --errors ref.npy.err in.jsonl 2>/dev/null
"$BIN" "${M[@]}" -o ref.f32 in.jsonl 2>/dev/null
[ -s ref.jsonl ] && [ -s ref.npy ] && [ -s ref.f32 ] && pass "reference runs" || fail "reference runs" "no output"

# ---- kill -9 at 20 random points, then --resume until done -----------------------------

# each run is killed after a random 10..(2 * run time / 20) ms, so the 20 kills land all
# over the job; the kill points come from a fixed seed
RANDOM=4242
span=$((2 * ms / 20 + 10))
killed_run() { # FORMAT ARGS...: 20 kill -9 cycles, then one run to the end
    local out=$1 k
    shift
    rm -f "$out" "$out".*
    for k in $(seq 20); do
        "$BIN" "${M[@]}" --resume -o "$out" "$@" in.jsonl >/dev/null 2>&1 &
        local pid=$!
        sleep "$(printf '0.%03d' $((RANDOM % span + 10)))"
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    "$BIN" "${M[@]}" --resume -o "$out" "$@" in.jsonl >/dev/null 2>&1
}
killed_run k.jsonl
same "kill -9 x20 + --resume: jsonl byte-identical" k.jsonl ref.jsonl
killed_run k.npy --errors k.npy.err
same "kill -9 x20 + --resume: npy, ids sidecar and --errors file byte-identical" \
    k.npy ref.npy k.npy.ids.jsonl ref.npy.ids.jsonl k.npy.err ref.npy.err
killed_run k.f32
same "kill -9 x20 + --resume: f32 and ids sidecar byte-identical" k.f32 ref.f32 \
    k.f32.ids.jsonl ref.f32.ids.jsonl

# a kill while a run writes its resume state (strace kills it at its first pwrite, the state's
# first block): the state is replaced whole or not at all, so --resume still works
if command -v strace >/dev/null; then
    "$BIN" "${M[@]}" -o sk.jsonl in.jsonl 2>/dev/null
    (strace -f -o /dev/null -e trace=pwrite64 -e inject=pwrite64:signal=KILL:when=1 \
        "$BIN" "${M[@]}" -o sk.jsonl in.jsonl >/dev/null 2>&1) 2>/dev/null
    "$BIN" "${M[@]}" --resume -o sk.jsonl in.jsonl >/dev/null 2>sk.err
    rc=$?
    name="kill -9 while the resume state is written, then --resume: byte-identical"
    if [ $rc -eq 0 ] && cmp -s sk.jsonl ref.jsonl; then pass "$name"
    else fail "$name" "exit $rc: $(head -c 200 sk.err)"; fi
else
    fail "kill -9 while the resume state is written" "strace not found (tools/install-deps)"
fi

# ---- resume details ----------------------------------------------------------------------

# a run that got 40% of the records to its checkpoint, then half a line more before it died
# (those records as in.jsonl elsewhere: error records name their input)
mkdir part && head -n $((N * 2 / 5)) in.jsonl >part/in.jsonl
(cd part && "$BIN" "${M[@]}" -o ../torn.jsonl in.jsonl 2>/dev/null)
head -c 1234 ref.jsonl >>torn.jsonl
"$BIN" "${M[@]}" --resume -o torn.jsonl in.jsonl 2>/dev/null
same "jsonl: a torn last line is cut and redone" torn.jsonl ref.jsonl

cp ref.npy done.npy && cp ref.npy.ids.jsonl done.npy.ids.jsonl && cp ref.npy.resume done.npy.resume
cp ref.npy.err done.npy.err
"$BIN" "${M[@]}" --resume -o done.npy --errors done.npy.err in.jsonl 2>/dev/null
same "--resume on a finished output changes nothing" done.npy ref.npy done.npy.ids.jsonl ref.npy.ids.jsonl

# a cron job over a growing input: the second run only embeds the appended records
head -n $((N * 2 / 5)) in.jsonl >grow.jsonl
"$BIN" "${M[@]}" --resume -o grow.f32 grow.jsonl 2>/dev/null
cat in.jsonl >grow.jsonl
"$BIN" "${M[@]}" --resume -o grow.f32 grow.jsonl 2>/dev/null
same "--resume after records were appended to the input" grow.f32 ref.f32 grow.f32.ids.jsonl ref.f32.ids.jsonl

rm -f fresh.jsonl
"$BIN" "${M[@]}" --resume -o fresh.jsonl in.jsonl 2>/dev/null
same "--resume without an output starts a fresh run" fresh.jsonl ref.jsonl

"$BIN" "${M[@]}" --resume --dim 128 -o done.npy in.jsonl >/dev/null 2>&1
[ $? -eq 2 ] && pass "--resume with another --dim is a usage error" || fail "--resume with another --dim is a usage error" "exit $?"
"$BIN" "${M[@]}" --resume in.jsonl >/dev/null 2>&1
[ $? -eq 2 ] && pass "--resume to stdout is a usage error" || fail "--resume to stdout is a usage error" "exit $?"
"$BIN" "${M[@]}" --resume -o x.npz in.jsonl >/dev/null 2>&1
[ $? -eq 2 ] && pass "--resume with npz is a usage error" || fail "--resume with npz is a usage error" "exit $?"

# ---- SIGTERM: a valid npy, the resume command, and the command completes the job --------

# The input comes through a fifo that holds only the first half of the records until the
# signal, so the stop lands mid-job however loaded the machine is (no timing involved).
rm -f term.npy* term.fifo && mkfifo term.fifo
total=$(wc -l <in.jsonl)
half=$((total / 2))
want=$(head -n "$half" in.jsonl | grep -c '"text": "') # the npy rows of its good records
exec 7<>term.fifo
"$BIN" "${M[@]}" -o term.npy term.fifo >/dev/null 2>term.err &
pid=$!
head -n "$half" in.jsonl >&7
for _ in $(seq 600); do # the writer flushes once it has caught up with the input
    [ "$(wc -l <term.npy.ids.jsonl 2>/dev/null || echo 0)" -ge "$want" ] && break
    sleep 0.1
done
kill -TERM "$pid"
wait "$pid"
rc=$?
exec 7>&-
cmd=$(grep -A1 'stopped by SIGTERM' term.err | tail -n 1)
rows=$("$PY" -c "import numpy as np; a = np.load('term.npy'); print(a.shape[0])" 2>&1)
ids=$(wc -l <term.npy.ids.jsonl)
[ "$rc" -eq 143 ] && [ "$rows" = "$ids" ] && [ "$rows" -eq "$want" ] &&
    pass "SIGTERM: exit 143, a valid npy with as many rows as ids ($rows)" ||
    fail "SIGTERM: exit 143, a valid npy with as many rows as ids ($rows)" "rc $rc rows $rows ids $ids"
case $cmd in *" --resume") pass "SIGTERM: the resume command is printed" ;;
    *) fail "SIGTERM: the resume command is printed" "$(tr '\n' ' ' <term.err | tail -c 300)" ;; esac
# (the writer gives up after 60 s should the command not open the fifo)
timeout 60 sh -c 'cat in.jsonl >term.fifo' &
eval "$cmd" >/dev/null 2>&1
wait
same "SIGTERM: the printed command completes the job byte for byte" term.npy ref.npy \
    term.npy.ids.jsonl ref.npy.ids.jsonl

# ---- SIGPIPE -------------------------------------------------------------------------------

"$BIN" "${M[@]}" in.jsonl 2>pipe.err | head -n 1 >pipe.out
rc=${PIPESTATUS[0]}
[ ! -s pipe.err ] && [ "$(wc -l <pipe.out)" -eq 1 ] && { [ "$rc" -eq 141 ] || [ "$rc" -eq 0 ]; } &&
    pass "SIGPIPE (| head -1): quiet, exit $rc" || fail "SIGPIPE (| head -1): quiet" "rc $rc: $(head -c 200 pipe.err)"

# ---- shards ----------------------------------------------------------------------------------

for i in 0 1 2; do
    "$BIN" "${M[@]}" --shard $i/3 -o shard$i.jsonl in.jsonl 2>/dev/null
    "$BIN" "${M[@]}" --shard $i/3 -o shard$i.npy in.jsonl 2>/dev/null
done
check "--shard i/3: three shards interleaved = the unsharded jsonl" "$PY" - <<'EOF'
s = [open("shard%d.jsonl" % i).read().splitlines() for i in range(3)]
ref = open("ref.jsonl").read().splitlines()
assert [len(x) for x in s] == [len(ref[i::3]) for i in range(3)], [len(x) for x in s]
assert all(s[i] == ref[i::3] for i in range(3)), "lines differ"
EOF
check "--shard i/3: npy shards and ids recombine to the unsharded npy" "$PY" - <<'EOF'
import numpy as np
rows = {}
for i in range(3):
    ids = open("shard%d.npy.ids.jsonl" % i).read().splitlines()
    for k, v in zip(ids, np.load("shard%d.npy" % i)):
        rows[k] = v
ref = np.load("ref.npy")
ids = open("ref.npy.ids.jsonl").read().splitlines()
assert sorted(rows) == sorted(ids), "ids differ"
assert all(np.array_equal(rows[k], ref[j]) for j, k in enumerate(ids)), "rows differ"
EOF
"$BIN" "${M[@]}" --shard 1/3 -o rs.jsonl in.jsonl 2>/dev/null
(cd part && "$BIN" "${M[@]}" --shard 1/3 -o ../rs2.jsonl in.jsonl 2>/dev/null)
head -c 2001 rs.jsonl >>rs2.jsonl
"$BIN" "${M[@]}" --shard 1/3 --resume -o rs2.jsonl in.jsonl 2>/dev/null
same "--shard with --resume" rs2.jsonl rs.jsonl
"$BIN" "${M[@]}" --shard 3/3 in.jsonl >/dev/null 2>&1
[ $? -eq 2 ] && pass "--shard 3/3 is a usage error" || fail "--shard 3/3 is a usage error" "exit $?"

# the README's GNU parallel example (records carry their ids: line numbers are per block)
"$BIN" "${M[@]}" good.jsonl >good.ref 2>/dev/null
if command -v parallel >/dev/null; then
    parallel --pipepart -a good.jsonl --block $((N / 20))k -k "$BIN" -m "$MODEL" >par.jsonl 2>par.err
    same "GNU parallel --pipepart -k: 3+ blocks recombined = one run" par.jsonl good.ref
else
    fail "GNU parallel" "parallel is not installed (Debian package parallel)"
fi

head -n $((N * 3 / 20)) good.jsonl >small.jsonl
# ---- progress --------------------------------------------------------------------------------

"$BIN" "${M[@]}" --progress -o prog.jsonl good.jsonl 2>prog.err # ~1 s: a few updates
grep -q 'records/s' prog.err && grep -q 'tokens/s' prog.err && [ "$(tail -c 1 prog.err | od -An -c | tr -d ' ')" = '\n' ] &&
    pass "--progress: records/s and tokens/s on stderr, ends with a newline" ||
    fail "--progress: records/s and tokens/s on stderr" "$(head -c 200 prog.err)"
grep -q '%' prog.err && pass "--progress: percentage of a regular input file" || fail "--progress: percentage" "$(head -c 200 prog.err)"
"$BIN" "${M[@]}" -o prog2.jsonl small.jsonl 2>prog2.err
[ ! -s prog2.err ] && pass "no progress when stderr is a file" || fail "no progress when stderr is a file" "$(head -c 200 prog2.err)"
"$BIN" "${M[@]}" --progress --quiet -o prog3.jsonl small.jsonl 2>prog3.err
grep -q 'records/s' prog3.err && pass "--progress wins over --quiet" || fail "--progress wins over --quiet" "no progress"

# ---- npz -------------------------------------------------------------------------------------

"$BIN" "${M[@]}" -o z.npz in.jsonl 2>/dev/null
"$BIN" "${M[@]}" -o zfile.npz small.jsonl 2>/dev/null
"$BIN" "${M[@]}" --format npz small.jsonl 2>/dev/null | cat >zpipe.npz
check "npz: numpy.load (no pickle) = the npy output and its ids" "$PY" - <<'EOF'
import json, numpy as np
z = np.load("z.npz", allow_pickle=False)
assert sorted(z.files) == ["embeddings", "ids", "meta.json"], z.files
e, ids = z["embeddings"], z["ids"]
assert e.dtype == np.dtype("<f4") and np.array_equal(e, np.load("ref.npy")), "embeddings differ"
assert ids.dtype.kind == "U" and list(ids) == open("ref.npy.ids.jsonl").read().splitlines(), "ids differ"
assert json.loads(ids[0]) == "r0"
EOF
same "npz: written to a pipe = written to a file" zpipe.npz zfile.npz
if command -v unzip >/dev/null; then check "npz: unzip -t (crc32)" unzip -tq z.npz; fi
printf '{"id":"\\u00e9t\\u00e9 \xe2\x82\xac","text":"x"}\n{"id":12345678901234567890123,"text":"y"}\n' >u.jsonl
"$BIN" "${M[@]}" -o u.npz u.jsonl 2>/dev/null
check "npz: unicode and huge ids survive as raw JSON" "$PY" - <<'EOF'
import numpy as np
ids = list(np.load("u.npz")["ids"])
assert ids == ['"\\u00e9t\\u00e9 \u20ac"', "12345678901234567890123"], ids
EOF

# ---- --input files ---------------------------------------------------------------------------

printf '\x89PNG\r\n\x1a\n\0\0\0\rIHDR' >img.png
printf '\xff\xd8\xff\xe0\0\x10JFIF' >photo.dat
printf 'RIFF\x24\0\0\0WAVEfmt ' >sound.wav
printf 'fLaC\0\0\0\x22' >song.flac
printf '\0\0\0\x20ftypisom' >clip.mp4
echo "just some text" >notes.txt
printf 'img.png\nphoto.dat\nsound.wav\n\nsong.flac\nclip.mp4\nnotes.txt\nmissing.png\n' >list.txt
"$BIN" "${M[@]}" --input files list.txt >files.out 2>files.err
rc=$?
check "--input files: one error record per path, the right codes and messages" "$PY" - <<'EOF'
import json
got = [json.loads(l) for l in open("files.out")]
want = [("img.png", "unsupported", "(img.png): images need a vision tower: give --mmproj"),
        ("photo.dat", "unsupported", "(photo.dat): images need a vision tower: give --mmproj"),
        ("sound.wav", "unsupported", "(sound.wav): audio needs an audio tower: give --mmproj"),
        ("song.flac", "unsupported", "(song.flac): audio needs an audio tower: give --mmproj"),
        ("clip.mp4", "unsupported", "(clip.mp4): video needs a vision tower: give --mmproj"),
        ("notes.txt", "bad_record", "notes.txt: not a media file"),
        ("missing.png", "io", "missing.png: cannot open: No such file or directory")]
assert len(got) == len(want), len(got)
for g, (i, c, m) in zip(got, want):
    assert g["id"] == i and g["error"]["code"] == c and g["error"]["message"].endswith(m), g
EOF
[ "$rc" -eq 1 ] && grep -q "7 of 7 records failed" files.err && pass "--input files: exit 1, count on stderr" ||
    fail "--input files: exit 1, count on stderr" "rc $rc"

finish
