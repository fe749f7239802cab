#!/usr/bin/env bash
# tests/test_hostile_models.sh - hostile model files (issue 14): every kind that
# tests/hostile_gguf.py writes from the tiny text model or the tiny combined mmproj is refused
# at load with exit 3 and one stderr line naming the file and the cause (the kind's word),
# nothing on stdout, and (under SAN=1) no sanitizer report. Kinds: tensors sharing or
# overlapping data, duplicate and empty keys, control characters in quoted names, out-of-range
# ids and per-layer values, counts that disagree, non-finite or out-of-range floats in the
# text model and both towers, a vision patch size the image path does not cut. The sparse
# files (a 512 MiB hole of empty tokens or merges, 100,000 tensors) are refused within
# HOSTILE_SECONDS (default 2; they took 20-33 s), and the two holes cost under 4 MB more
# peak RSS than a file refused at its first key.
set -u
cd "$(dirname "$0")/.." || exit 1
BIN=${BIN:-./gemmaembed}
PY=${PYTHON:-/usr/bin/python3}
LIMIT=${HOSTILE_SECONDS:-2}
T=$(mktemp -d "${TMPDIR:-/tmp}/test_hostile.XXXXXX")
trap 'rm -rf "$T"' EXIT
unset GEMMAEMBED_MODEL GEMMAEMBED_MMPROJ

. tests/lib.sh

TEXT=testdata/tiny-q8_0.gguf
MMPROJ=testdata/tiny-mmproj-both-q8_0.gguf
for need in "$BIN" "$TEXT" "$MMPROJ"; do
    [ -e "$need" ] || { echo "FAIL: setup: $need not found"; exit 1; }
done
if ! msg=$("$PY" tests/hostile_gguf.py --all "$TEXT" "$MMPROJ" "$T" 2>&1); then
    echo "FAIL: setup: hostile_gguf.py: $msg"
    exit 1
fi
echo '{"id": 1, "text": "hello world"}' >"$T/in.jsonl"
# the mmproj files get an image and a clip too: a file that loads (before the fixes) runs them
"$PY" - "$T" <<'EOF2'
import math, struct, sys, wave
w = wave.open(sys.argv[1] + "/a.wav", "wb")
w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(0.05 * i))) for i in range(8000)))
w.close()
EOF2
{
    cat "$T/in.jsonl"
    echo '{"id": 2, "image": "testdata/images/exif6.jpg"}'
    echo "{\"id\": 3, \"audio\": \"$T/a.wav\"}"
} >"$T/media.jsonl"

# run KIND INPUT ARGS...: the binary under /usr/bin/time (seconds, peak RSS in KB to
# $T/KIND.time)
run() {
    local kind=$1 input=$2
    shift 2
    timeout -k 5 60 /usr/bin/time -f "%e %M %U %S" -o "$T/$kind.time" "$BIN" "$@" "$input" \
        >"$T/$kind.out" 2>"$T/$kind.err"
    rc=$?
}

while read -r kind base expect; do
    f=$T/$kind.gguf
    if [ "$base" = text ]; then
        run "$kind" "$T/in.jsonl" -m "$f"
    else
        run "$kind" "$T/media.jsonl" -m "$TEXT" --mmproj "$f" --prepack
    fi
    name="$kind: exit 3, one line naming the file and \"$expect\""
    if [ "$rc" -eq 3 ] && [ "$(wc -l <"$T/$kind.err")" -eq 1 ] && [ ! -s "$T/$kind.out" ] &&
        grep -q "^gemmaembed: $f: " "$T/$kind.err" && grep -qF -- "$expect" "$T/$kind.err"; then
        pass "$name"
    else
        fail "$name" "exit $rc: $(head -c 400 "$T/$kind.err" | tr '\n' '|')"
    fi
done < <("$PY" tests/hostile_gguf.py --list)

# time and memory of the sparse files, against a file refused at its first key
read -r _ ref_kb _ < <(tail -n 1 "$T/emptykey.time")
for kind in sparse-vocab sparse-merges sparse-tensors; do
    secs=- kb=0 usr=- sys=-
    read -r secs kb usr sys < <(tail -n 1 "$T/$kind.time") # nothing when timeout ended it
    # CPU seconds, not wall: a loaded machine stretches the wall time of a cheap refusal
    cpu=$(awk -v u="$usr" -v s="$sys" 'BEGIN { print u + s }')
    if [[ $secs =~ ^[0-9.]+$ && $kb =~ ^[0-9]+$ && $usr =~ ^[0-9.]+$ ]] &&
        awk -v s="$cpu" -v l="$LIMIT" 'BEGIN { exit !(s < l) }'; then
        pass "$kind: refused in $cpu s of CPU (< $LIMIT s; $secs s wall)"
    else
        fail "$kind: refused in < $LIMIT s of CPU" "${cpu:-?} s of CPU, ${secs:-not within 60} s wall"
    fi
    [ "$kind" = sparse-tensors ] && continue # its 4 MB header is real data
    [[ $kb =~ ^[0-9]+$ ]] || kb=999999999 # no measure: a failure
    extra=$((kb - ${ref_kb:-0}))
    if [ "$extra" -lt 4096 ]; then
        pass "$kind: peak RSS $kb KB, $extra KB over a file refused at its first key"
    else
        fail "$kind: under 4 MB of extra peak RSS" "$kb KB, $extra KB over $ref_kb KB"
    fi
    apparent=$(stat -c %s "$T/$kind.gguf") disk=$(($(stat -c %b "$T/$kind.gguf") * 512))
    echo "    ($kind.gguf: $apparent bytes, $disk on disk)"
done
finish
