#!/usr/bin/env bash
# Every damaged model file is a one-line error and exit status 3 (and, under SAN=1, no
# sanitizer report: that would add lines and change the status).
set -u
BIN=${BIN:-./gemmaembed}
OUT=${OUT:-build/test-out}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
: >"$dir/empty.gguf"
printf 'this is not a model\n%.0s' {1..10} >"$dir/text.gguf"
head -c 3 testdata/tiny-f32.gguf >"$dir/short.gguf"
mkdir "$dir/adir"
echo '{"id": 1, "text": "hello"}' >"$dir/in.jsonl"

# a K-quant mix cut in the middle of its blocks (issue 15)
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" tools/mkmodel --preset small --type q4_k_m --seed 1 --broken truncated \
    -o "$dir/truncated-q4_k_m.gguf"

cases=()
for k in truncated magic missing shape type counts; do cases+=("$OUT/broken-$k.gguf"); done
cases+=("$dir/truncated-q4_k_m.gguf")
cases+=("$dir/empty.gguf" "$dir/text.gguf" "$dir/short.gguf" "$dir/adir" "$dir/nonexistent.gguf")
for model in "${cases[@]}"; do
    name=$(basename "$model")
    "$BIN" -m "$model" "$dir/in.jsonl" >"$dir/out" 2>"$dir/err"
    rc=$?
    lines=$(wc -l <"$dir/err")
    if [ "$rc" -eq 3 ] && [ "$lines" -eq 1 ] && grep -q "^gemmaembed: .*$model" "$dir/err" &&
        [ ! -s "$dir/out" ]; then
        echo "PASS: model $name: exit 3, one line"
    else
        echo "FAIL: model $name: exit $rc, $lines stderr lines: $(head -c 300 "$dir/err")"
    fi
done
