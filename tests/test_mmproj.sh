#!/usr/bin/env bash
# tests/test_mmproj.sh - the mmproj files as published: one combined file (vision and audio
# towers), or a vision file and an audio file given in either order, or an audio-only file.
#   - a combined file gives byte-identical vectors to the vision-only file (f32 and Q8_0,
#     fast and reference towers): the audio tower's keys and tensors are left alone;
#   - --mmproj AUDIO --mmproj VISION in both orders (and with --prepack) finds the vision tower;
#   - an audio-only mmproj: every image record is an "unsupported" error record saying "no
#     vision encoder" and naming the file(s), text records are unaffected, exit 1 (also with
#     --prepack: no images, no failure at start);
#   - every tools/mkmodel --broken kind on an audio and on a combined file: one error record
#     naming the file (and the damaged tensor where the vision tower reads it), or with
#     --prepack exit 3 and one stderr line; never a crash or a second stderr line (under
#     SAN=1 a sanitizer report would add lines and change the status);
#   - the NumPy reference (tools/ref/vision.py) reads the vision tower of a combined file as
#     that of the vision file and refuses an audio-only file.
# The combined and audio Q8_0 files are committed (testdata/tiny-mmproj-{both,audio}-q8_0.gguf);
# the f32 combined file and the broken variants are generated here with tools/mkmodel.
set -u
cd "$(dirname "$0")/.." || exit 1
BIN=${BIN:-./gemmaembed}
PY=${PYTHON:-/usr/bin/python3}
TD=testdata
T=$(mktemp -d "${TMPDIR:-/tmp}/test_mmproj.XXXXXX")
trap 'rm -rf "$T"' EXIT
unset GEMMAEMBED_MODEL GEMMAEMBED_MMPROJ

. tests/lib.sh

VISION_Q8=$TD/tiny-mmproj-q8_0.gguf
VISION_F32=$TD/tiny-mmproj-f32.gguf
BOTH_Q8=$TD/tiny-mmproj-both-q8_0.gguf
AUDIO_Q8=$TD/tiny-mmproj-audio-q8_0.gguf
for need in "$BIN" "$VISION_Q8" "$VISION_F32" "$BOTH_Q8" "$AUDIO_Q8"; do
    [ -e "$need" ] || { echo "FAIL: setup: $need not found"; exit 1; }
done
"$PY" -c 'import PIL, numpy' 2>/dev/null || { echo "FAIL: setup: python3-pil and numpy needed"; exit 1; }

mk() { # mkmodel ARGS...: a generated mmproj (prints mkmodel's error on failure)
    tools/mkmodel "$@" 2>&1
}
if ! msg=$(mk --mmproj both --preset tiny --type f32 --seed 1 -o "$T/both-f32.gguf"); then
    echo "FAIL: setup: mkmodel --mmproj both: $msg"
    exit 1
fi

# two images, and records of every form: an image alone, with a caption, two images, text only
"$PY" - "$T" <<'EOF'
import json, sys
import numpy as np
from PIL import Image
d = sys.argv[1]
rng = np.random.default_rng(7)
y, x = np.mgrid[0:150, 0:260] / 260.0
img = np.stack([127 + 120 * np.sin(a * x + b * y) for a, b in rng.random((3, 2)) * 6], -1)
Image.fromarray(img.astype(np.uint8)).save(d + "/wide.png")
Image.fromarray(img[:, :120].astype(np.uint8)).save(d + "/small.png")
with open(d + "/in.jsonl", "w") as f:
    for r in ({"id": "image", "image": d + "/wide.png"},
              {"id": "caption", "image": d + "/small.png", "text": "a picture of waves"},
              {"id": "two", "image": [d + "/wide.png", d + "/small.png"], "text": "<|image|> or <|image|>"},
              {"id": "text", "text": "a record without images"}):
        f.write(json.dumps(r) + "\n")
EOF
IN=$T/in.jsonl

# run NAME MODEL ARGS...: stdout to $T/NAME.out, stderr to $T/NAME.err, status in $rc
run() {
    local name=$1 model=$2
    shift 2
    "$BIN" -m "$model" --image-tokens 70 "$@" "$IN" >"$T/$name.out" 2>"$T/$name.err"
    rc=$?
}
# ok_run NAME: the last run (NAME) exited 0, printed nothing on stderr and four vectors
ok_run() {
    [ "$rc" -eq 0 ] && [ ! -s "$T/$1.err" ] && [ "$(grep -c '"embedding"' "$T/$1.out")" -eq 4 ]
}
detail() { echo "exit $rc, $(wc -l <"$T/$1.out") rows: $(head -c 300 "$T/$1.err" | tr '\n' ' ')"; }

# ---- a combined file = the vision file, byte for byte ------------------------------------
for kind in q8_0 f32; do
    if [ "$kind" = q8_0 ]; then vis=$VISION_Q8 both=$BOTH_Q8; else vis=$VISION_F32 both=$T/both-f32.gguf; fi
    for path in fast reference; do
        extra=()
        [ "$path" = reference ] && extra=(--no-media-fast)
        run "vis-$kind-$path" "$TD/tiny-$kind.gguf" --mmproj "$vis" "${extra[@]}"
        run "both-$kind-$path" "$TD/tiny-$kind.gguf" --mmproj "$both" "${extra[@]}"
        name="combined $kind mmproj, $path tower: the vision file's vectors byte for byte"
        if ! ok_run "vis-$kind-$path"; then fail "$name" "vision file: $(detail "vis-$kind-$path")"
        elif ! ok_run "both-$kind-$path"; then fail "$name" "combined file: $(detail "both-$kind-$path")"
        elif cmp -s "$T/vis-$kind-$path.out" "$T/both-$kind-$path.out"; then pass "$name"
        else fail "$name" "the outputs differ"; fi
    done
done
WANT=$T/vis-q8_0-fast.out

# ---- a vision file and an audio file, in either order ------------------------------------
for order in "audio vision" "vision audio" "audio both" "both audio" "audio vision --prepack"; do
    args=()
    for f in $order; do
        case $f in
            audio) args+=(--mmproj "$AUDIO_Q8") ;;
            vision) args+=(--mmproj "$VISION_Q8") ;;
            both) args+=(--mmproj "$BOTH_Q8") ;;
            *) args+=("$f") ;;
        esac
    done
    run pair "$TD/tiny-q8_0.gguf" "${args[@]}"
    name="--mmproj ${order// / --mmproj }: the vision tower is found"
    name=${name/--mmproj --prepack/--prepack}
    if ! ok_run pair; then fail "$name" "$(detail pair)"
    elif cmp -s "$WANT" "$T/pair.out"; then pass "$name"
    else fail "$name" "vectors differ from the vision file's"; fi
done

# ---- an audio-only mmproj: image records are error records -------------------------------
# check_no_vision NAME FILE...: the image records of run NAME are "unsupported"
# error records naming every FILE and saying "no vision encoder"; the text record equals the
# vision run's; one stderr line
check_no_vision() {
    local name=$1
    shift
    "$PY" - "$T/$name.out" "$WANT" "$T/$name.err" "$@" <<'EOF'
import json, sys
out, want, err, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
got = [json.loads(l) for l in open(out)]
ref = [json.loads(l) for l in open(want)]
assert [g["id"] for g in got] == ["image", "caption", "two", "text"], [g.get("id") for g in got]
for g in got[:3]:
    e = g.get("error") or {}
    assert e.get("code") == "unsupported", g
    m = e.get("message", "")
    assert "no vision encoder" in m and all(f in m for f in files), m
assert got[3] == ref[3], "the text record differs"
lines = open(err).read().splitlines()
assert lines == ["gemmaembed: 3 of 4 records failed"], lines
EOF
}
for case in "one" "one --prepack" "two"; do
    args=(--mmproj "$AUDIO_Q8")
    files=("$AUDIO_Q8")
    case $case in
        *--prepack) args+=(--prepack) ;;
        two) cp "$AUDIO_Q8" "$T/audio2.gguf"; args+=(--mmproj "$T/audio2.gguf"); files+=("$T/audio2.gguf") ;;
    esac
    run audio "$TD/tiny-q8_0.gguf" "${args[@]}"
    name="audio-only mmproj ($case): exit 1, image records say \"no vision encoder\" naming the file(s)"
    if [ "$rc" -ne 1 ]; then fail "$name" "$(detail audio)"
    elif msg=$(check_no_vision audio "${files[@]}" 2>&1); then pass "$name"
    else fail "$name" "$(echo "$msg" | tail -n 2 | tr '\n' ' ')"; fi
done

# ---- damaged audio and combined files -----------------------------------------------------
# expected: the tensor named in the message (vision tower reads it), or "" (file-level damage),
# or "novision" (the damage is in the audio tower, which image records do not read; --prepack
# opens both towers and names the audio tensor, pre)
KINDS="truncated magic missing shape type counts counts-tensors counts-kv"
for tower in audio both; do
    for k in $KINDS; do
        f=$T/broken-$tower-$k.gguf
        if ! msg=$(mk --mmproj $tower --preset tiny --type q8_0 --seed 1 --broken "$k" -o "$f"); then
            fail "broken $tower $k: generate" "$msg"
            continue
        fi
        pre=
        case $tower:$k in
            audio:missing) expect=novision pre=a.blk.1.ffn_up.weight ;;
            audio:shape) expect=novision pre=a.blk.0.attn_q.weight ;;
            audio:type) expect=a.blk.0.attn_k.weight ;;
            both:missing) expect=v.blk.1.ffn_up.weight ;;
            both:shape) expect=v.blk.0.attn_q.weight ;;
            both:type) expect=v.blk.0.attn_k.weight ;;
            both:truncated) expect=v. ;;   # the cut falls in the vision tower's data
            *) expect="" ;;
        esac
        # lazily: error records, the text record fine, exit 1, one stderr line
        run broken "$TD/tiny-q8_0.gguf" --mmproj "$f"
        case $expect in
            novision) says='and says "no vision encoder"' ;;
            "") says="" ;;
            *) says="and $expect" ;;
        esac
        name="broken $tower mmproj ($k): exit 1, each image record names the file${says:+ $says}"
        if [ "$rc" -ne 1 ]; then
            fail "$name" "$(detail broken)"
        elif msg=$("$PY" - "$T/broken.out" "$WANT" "$T/broken.err" "$f" "$expect" 2>&1 <<'EOF'
import json, sys
out, want, err, path, expect = sys.argv[1:]
got = [json.loads(l) for l in open(out)]
ref = [json.loads(l) for l in open(want)]
assert len(got) == 4 and got[3] == ref[3], "text record: %r" % got[3:]
for g in got[:3]:
    m = (g.get("error") or {}).get("message", "")
    assert path in m, m
    if expect == "novision":
        assert "no vision encoder" in m, m
    else:
        assert expect in m and "no vision encoder" not in m, m
assert open(err).read().splitlines() == ["gemmaembed: 3 of 4 records failed"], open(err).read()
EOF
        ); then
            pass "$name"
        else
            fail "$name" "$(echo "$msg" | tail -n 2 | tr '\n' ' ')"
        fi
        # --prepack opens the towers at start: exit 3 and one line naming the file
        run broken-pre "$TD/tiny-q8_0.gguf" --mmproj "$f" --prepack
        name="broken $tower mmproj ($k) --prepack:"
        [ "$expect" = novision ] && expect=$pre
        if [ "$rc" -eq 3 ] && [ "$(wc -l <"$T/broken-pre.err")" -eq 1 ] &&
            grep -q "^gemmaembed: $f: .*$expect" "$T/broken-pre.err" && [ ! -s "$T/broken-pre.out" ]; then
            pass "$name exit 3, one line naming the file"
        else
            fail "$name exit 3, one line naming the file" "$(detail broken-pre)"
        fi
    done
done

# ---- the NumPy reference reads a combined file's vision tower ------------------------------
if msg=$("$PY" - "$VISION_Q8" "$BOTH_Q8" "$AUDIO_Q8" 2>&1 <<'EOF'
import sys
import numpy as np
sys.path.insert(0, "tools/ref")
from gguf import GGUFError
from vision import VisionTower
vis, both, audio = sys.argv[1:]
rng = np.random.default_rng(3)
ph, pw = 6, 9
pos = np.array([(x, y) for y in range(ph) for x in range(pw)])
patches = rng.random((ph * pw, 3 * 16 * 16))
a = VisionTower(vis).encode(patches, pos)
b = VisionTower(both).encode(patches, pos)
assert a.shape == (6, 64) and np.array_equal(a, b), "soft tokens differ"
try:
    VisionTower(audio)
except GGUFError as e:
    assert "has_vision_encoder" in str(e), e
else:
    raise AssertionError("an audio-only mmproj was accepted")
EOF
); then
    pass "tools/ref/vision.py: the combined file's soft tokens equal the vision file's; audio-only refused"
else
    fail "tools/ref/vision.py: the combined file's soft tokens equal the vision file's; audio-only refused" \
        "$(echo "$msg" | tail -n 2 | tr '\n' ' ')"
fi

finish
