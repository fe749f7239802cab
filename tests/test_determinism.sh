#!/usr/bin/env bash
# A record's vector is byte-identical whatever the thread count, wave packing, or its
# position among other records (docs/product.md 4), for each weight type and kernel tier.
set -u
BIN=${BIN:-./gemmaembed}
PYTHON=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# 100 records of varied lengths (1 to ~300 tokens on the tiny vocabulary), the target in the
# middle, and the target alone
"$PYTHON" - "$T" <<'PY'
import json, random, sys
random.seed(11)
words = "the model reads every record and writes one vector per line so that a batch job never " \
        "loses work while the index grows across many machines 日本語 🚀".split()
recs = []
for i in range(100):
    n = random.choice([0, 1, 3, 8, 20, 40, 90, 200])
    recs.append({"id": i, "text": " ".join(random.choice(words) for _ in range(n))})
# long enough (> 192 tokens) that its full-attention rows take the dense kernel where the
# tier has one with key ranges (attention.h)
target = {"id": "target", "text": "a target record that must not change with its neighbours " * 30}
with open(sys.argv[1] + "/many.jsonl", "w") as f:
    for r in recs[:50] + [target] + recs[50:]:
        f.write(json.dumps(r, ensure_ascii=False) + "\n")
with open(sys.argv[1] + "/alone.jsonl", "w") as f:
    f.write(json.dumps(target) + "\n")
PY

. "$(dirname "$0")/lib.sh"
target_of() { grep '^{"id":"target"' "$1"; }

mapfile -t tiers < <(cpu_tiers)
[ ${#tiers[@]} -ge 1 ] || fail "tiers" "no tier runs"

# F32 (SGEMM) and Q8_0 (int8 GEMM) on every tier; BF16 shares the SGEMM path, best tier only
# (under the sanitizers the best tier only: the release suite covers the others)
best=${tiers[${#tiers[@]}-1]}
for model in testdata/tiny-f32.gguf testdata/tiny-q8_0.gguf testdata/tiny-bf16.gguf; do
    m=$(basename "$model" .gguf)
    run_tiers=("${tiers[@]}")
    { [ "$m" = tiny-bf16 ] || [ "$SAN" -eq 1 ]; } && run_tiers=("$best")
    for tier in "${run_tiers[@]}"; do
        base=""
        for cfg in "-t 1 --wave-tokens 0" "-t 2 --wave-tokens 2048" "-t 2 --wave-tokens 300" \
                   "-t 2 --thread-cap 1"; do
            "$BIN" -m "$model" --cpu-tier "$tier" $cfg --encoding base64 "$T/many.jsonl" \
                >"$T/out" 2>"$T/err" || { fail "$m $tier $cfg: run" "$(head -c 300 "$T/err")"; continue; }
            if [ -z "$base" ]; then
                cp "$T/out" "$T/base"
                base=1
                "$BIN" -m "$model" --cpu-tier "$tier" -t 1 --wave-tokens 0 --encoding base64 \
                    "$T/alone.jsonl" >"$T/alone" 2>>"$T/err"
                [ "$(target_of "$T/alone")" = "$(target_of "$T/out")" ] && [ -n "$(target_of "$T/out")" ] &&
                    pass "$m $tier: target alone == target among 100 others" ||
                    fail "$m $tier: target alone == target among 100 others" "differs"
            elif cmp -s "$T/base" "$T/out"; then
                pass "$m $tier: $cfg gives the same bytes"
            else
                fail "$m $tier: $cfg gives the same bytes" "$(cmp "$T/base" "$T/out" | head -1)"
            fi
        done
    done
done
finish
