#!/usr/bin/env bash
# The libFuzzer targets (tests/fuzz/fuzz_*.c) build with clang and each runs FUZZ_SMOKE_TIME
# seconds (default 10) from its seeds without a crash, leak, sanitizer report or broken
# invariant. One PASS/FAIL line per target. clang and its fuzzer runtime come from
# tools/install-deps (clang, libclang-rt-14-dev): missing, they are a failure, not a skip.
# Longer runs: make fuzz FUZZ_TIME=300 (see the Makefile).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-build/test-out}
T=${FUZZ_SMOKE_TIME:-10}
MAKE=${MAKE:-make}
mkdir -p "$OUT"

cc=${FUZZ_CC:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "FAIL: fuzz: $cc not found (tools/install-deps installs clang and libclang-rt-14-dev)"
    exit 1
fi
log="$OUT/fuzz-build.log"
if ! $MAKE -j2 --no-print-directory fuzz-build FUZZ_CC="$cc" >"$log" 2>&1; then
    echo "FAIL: fuzz: building the targets with $cc failed (libclang-rt-14-dev missing?):" \
        "$(grep -m1 -iE 'error|cannot find' "$log")"
    exit 1
fi
echo "PASS: fuzz: targets build with $cc -fsanitize=fuzzer,address,undefined"

targets=(gguf jsonl json_span tok audio video resume)
# the tokenizer again on the real 262k-piece vocabulary when its fixture is there (make bench)
vocab=build/bench/gemma4-vocab.gguf
[ -f "$vocab" ] && targets+=(tok-real)
for name in "${targets[@]}"; do
    bin=build/fuzz/fuzz_${name%-real}
    seeds=build/fuzz/seeds/${name%-real}
    rm -rf "$seeds" && mkdir -p "$seeds"
    cp tests/fuzz/corpus/"${name%-real}"/* "$seeds"/
    if [ "$name" = gguf ]; then # as the Makefile's seeds rule
        cp testdata/tiny-q8_0.gguf testdata/tiny-mmproj-both-q8_0.gguf \
            testdata/tiny-mmproj-audio-q8_0.gguf "$seeds"/
        head -c 30300 testdata/tiny-f32.gguf >"$seeds"/tiny-f32-header.gguf
        ${PYTHON:-/usr/bin/python3} tests/hostile_gguf.py --all --small testdata/tiny-q8_0.gguf \
            testdata/tiny-mmproj-both-q8_0.gguf "$seeds"
    fi
    corpus="$OUT/fuzz-corpus-$name"
    rm -rf "$corpus" && mkdir -p "$corpus"
    rm -f "$OUT/fuzz-crash-$name-"*
    flog="$OUT/fuzz-$name.log"
    env=()
    [ "$name" = tok-real ] && env=(GE_FUZZ_MODEL="$vocab")
    # an input slower than -timeout is libFuzzer's own finding (an ALARM and an artifact); a
    # run that outlives its time by a minute without one hung outside any input (once in CI,
    # 2026-12-05, not reproduced in 30 runs): it is stopped and run once more, and said so
    note=
    for attempt in 1 2; do
        env "${env[@]}" timeout -s INT $((T + 60)) "$bin" -max_total_time="$T" -timeout=20 \
            -rss_limit_mb=4096 -artifact_prefix="$OUT/fuzz-crash-$name-" "$corpus" "$seeds" \
            >"$flog" 2>&1
        rc=$?
        [ $rc -eq 124 ] && ! grep -q 'ALARM' "$flog" && [ $attempt = 1 ] &&
            [ -z "$(ls "$OUT/fuzz-crash-$name-"* 2>/dev/null)" ] || break
        note=" (the first run hung outside any input and was stopped after $((T + 60)) s)"
        cp "$flog" "$flog.hung"
    done
    runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$flog")
    cov=$(grep -E '^#[0-9]+' "$flog" | tail -1 | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
    crash=$(ls "$OUT/fuzz-crash-$name-"* 2>/dev/null | head -1)
    if [ "$rc" -eq 0 ] && [ -z "$crash" ] && [ -n "$runs" ]; then
        echo "PASS: fuzz $name: $runs runs in ${T}s, cov $cov, no crash$note"
    else
        why=$(grep -m1 -E 'ERROR: |runtime error|invariant|fuzz_[a-z_]*: ' "$flog")
        echo "FAIL: fuzz $name: exit $rc${crash:+, input $crash}: ${why:-see $flog}"
    fi
done
