#!/usr/bin/env bash
# cross_arch_check.sh X86_BIN ARM_BIN: the arm64 build (ARM_BIN, run under qemu) against the
# x86-64 one on a fixed mixed run (texts on Q8_0, F32 and Q4_K_M models; images, audio and
# a mixed record through the tiny Q8_0 towers; a video):
#  - at the scalar tier the two architectures write the same bytes (the same C, no FMA
#    contraction under -std=c11, the same libm results), except for video: FFmpeg's
#    YUV -> RGB conversion (libswscale) has per-architecture code that rounds differently,
#    and the frames are meant to equal the ffmpeg command's on the same machine
#    (engine/video_decode.c), so the video runs at the vector tiers only (its scalar run,
#    the slowest under qemu, could show only that the bytes differ);
#  - neon, dotprod and i8mm write the same bytes as each other: their integer GEMMs are
#    bit-identical to the oracle and they share every fp32 kernel (activations, SGEMM,
#    attention: the neon tier's).
# Also shown, not gated: whether the ARM vector tiers wrote the x86-64 avx2 tier's bytes (the
# tiled and dense attention and the activations use avx2's lane operations; the audio
# tower's relative attention reduces 4 lanes where avx2 reduces 8). The goldens bound every
# tier against the reference.
set -u
X86=$1 ARM=$2
OUT=${OUT:-build/test-out}/cross-arch
mkdir -p "$OUT"
if ! { tools/ref/mkaudio "$OUT" one-1s.wav && tools/ref/mkvideo "$OUT" tsrc-3s-4x3.mp4 &&
    tools/mkmodel --preset small --type q4_k_m --seed 1 -o "$OUT/small-q4_k_m.gguf"; } >/dev/null
then
    echo "FAIL: cross-arch: making the inputs"
    exit 1
fi
root=$PWD
{
    cat testdata/demo.jsonl
    # ~520 tokens: several attention tiles (1,500 tokens took 12-17 s a run under qemu)
    printf '{"id": "long", "text": "%s"}\n' \
        "$(head -c 1000 /usr/share/common-licenses/GPL-3 | tr -d '\\"\n\t' | tr -c '[:print:]' ' ')"
} >"$OUT/texts.jsonl"
{
    for f in square.webp palette-alpha.png; do
        printf '{"id": "%s", "image": "%s/testdata/images/%s"}\n' "$f" "$root" "$f"
    done
    printf '{"id": "wav", "audio": "%s/%s/one-1s.wav"}\n' "$root" "$OUT"
    printf '{"id": "mix", "content": [{"type": "text", "text": "a picture"}, %s, %s]}\n' \
        "$(printf '{"type": "image", "image": "%s/testdata/images/square.webp"}' "$root")" \
        "$(printf '{"type": "audio", "audio": "%s/%s/one-1s.wav"}' "$root" "$OUT")"
} >"$OUT/media.jsonl"
printf '{"id": "mp4", "video": "%s/%s/tsrc-3s-4x3.mp4"}\n' "$root" "$OUT" >"$OUT/video.jsonl"

towers="-m testdata/tiny-q8_0.gguf --mmproj testdata/tiny-mmproj-both-q8_0.gguf"
cases=(
    "text-q8_0|-m testdata/tiny-q8_0.gguf $OUT/texts.jsonl"
    "text-f32|-m testdata/tiny-f32.gguf $OUT/texts.jsonl"
    "text-q4_k_m|-m $OUT/small-q4_k_m.gguf $OUT/texts.jsonl"
    "media-q8_0|$towers --image-tokens 70 $OUT/media.jsonl"
    "video-q8_0|$towers --video-tokens 70 $OUT/video.jsonl"
)
hash_of() { # BIN TIER ARGS...: the output's hash (an exit status is part of it)
    local bin=$1 tier=$2
    shift 2
    { "$bin" -q -t 2 --format jsonl --cpu-tier "$tier" "$@" 2>"$OUT/last.err" || echo "exit $?"; } |
        sha256sum | cut -c1-16
}
for c in "${cases[@]}"; do
    name=${c%%|*}
    read -r -a args <<<"${c#*|}"
    arm_tiers=(scalar neon dotprod i8mm)
    [ "$name" = video-q8_0 ] && arm_tiers=(neon dotprod i8mm)
    x2=$(hash_of "$X86" avx2 "${args[@]}")
    declare -A h=()
    for t in "${arm_tiers[@]}"; do
        h[$t]=$(hash_of "$ARM" "$t" "${args[@]}")
    done
    same() { [ "$1" = "$2" ] && echo writes || echo differs from; }
    if [ -n "${h[scalar]:-}" ]; then
        x=$(hash_of "$X86" scalar "${args[@]}")
        if [ "${h[scalar]}" = "$x" ]; then
            echo "PASS: cross-arch $name: arm64 scalar writes the x86-64 scalar tier's bytes ($x)"
        else
            echo "FAIL: cross-arch $name: arm64 scalar ${h[scalar]}, x86-64 scalar $x"
        fi
    fi
    if [ "${h[neon]}" = "${h[dotprod]}" ] && [ "${h[neon]}" = "${h[i8mm]}" ]; then
        echo "PASS: cross-arch $name: neon, dotprod and i8mm write the same bytes (${h[neon]})"
    else
        echo "FAIL: cross-arch $name: neon ${h[neon]}, dotprod ${h[dotprod]}, i8mm ${h[i8mm]}"
    fi
    echo "  ($name: neon $(same "${h[neon]}" "$x2") the x86-64 avx2 tier's bytes)"
done
