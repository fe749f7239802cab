#!/usr/bin/env bash
# tests/test_cli.sh - end-to-end tests of the gemmaembed binary on the tiny model.
#
#   BIN=./gemmaembed MODEL=testdata/tiny-f32.gguf PYTHON=/usr/bin/python3 bash tests/test_cli.sh
#
# Prints "PASS: name" or "FAIL: name: detail" per check and exits non-zero if any failed.
# Needs /usr/bin/python3 with numpy (Debian's python3-numpy) for the numeric checks.
set -u
cd "$(dirname "$0")/.." || exit 1

BIN=${BIN:-./gemmaembed}
MODEL=${MODEL:-testdata/tiny-f32.gguf}
PY=${PYTHON:-/usr/bin/python3}
D=testdata/cli
T=$(mktemp -d "${TMPDIR:-/tmp}/test_cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
unset GEMMAEMBED_MODEL

. tests/lib.sh

for need in "$BIN" "$MODEL"; do
    if [ ! -e "$need" ]; then
        echo "FAIL: setup: $need not found"
        exit 1
    fi
done

# run NAME ARGS...: run the binary with stdout to $T/NAME.out, stderr to $T/NAME.err;
# the exit status is left in $rc.
run() {
    local name=$1
    shift
    "$BIN" "$@" >"$T/$name.out" 2>"$T/$name.err"
    rc=$?
}

# expect_rc NAME WANT [WHAT]: pass when the last run (NAME) exited with WANT.
expect_rc() {
    local what="exit $2: ${3:-$1}"
    if [ "$rc" -eq "$2" ]; then pass "$what"; else fail "$what" "exit $rc ($(head -c 300 "$T/$1.err" | tr '\n' ' '))"; fi
}

# py NAME ARGS...: a numeric/structural check in python (helpers below); pass when it
# exits 0, otherwise its stderr is the detail.
py() {
    local name=$1
    shift
    local msg
    if msg=$("$PY" "$T/h.py" "$@" 2>&1); then pass "$name"; else fail "$name" "$(echo "$msg" | tail -n 3 | tr '\n' ' ')"; fi
}

cat >"$T/h.py" <<'EOF'
import base64, json, sys
import numpy as np

def records(path):
    """(raw id text, parsed object) per output line; the raw id is the exact byte span."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            assert line.startswith('{"id":'), "bad line: " + line[:80]
            _, end = json.JSONDecoder().raw_decode(line, 6)
            out.append((line[6:end], json.loads(line)))
    return out

def vecs(path):
    return np.array([o["embedding"] for _, o in records(path) if "embedding" in o], dtype=np.float32)

def unit(m):
    n = np.linalg.norm(m.astype(np.float64), axis=1)
    assert np.all(np.abs(n - 1) < 1e-5), "norms %s" % n

def main(cmd, *a):
    if cmd == "rows":                       # rows FILE N: N vectors of one width, unit norm
        m = vecs(a[0])
        assert m.shape[0] == int(a[1]), "got %d rows, want %s" % (m.shape[0], a[1])
        unit(m)
    elif cmd == "dim":                      # dim FILE: print the vector width
        print(vecs(a[0]).shape[1])
    elif cmd == "b64":                      # b64 FLOATJSONL B64JSONL: same floats
        f = vecs(a[0])
        b = np.array([np.frombuffer(base64.b64decode(o["embedding"]), dtype="<f4")
                      for _, o in records(a[1])])
        assert f.shape == b.shape and np.array_equal(f, b), "base64 differs"
    elif cmd == "npy":                      # npy JSONL NPY IDS: shape, dtype, rows, sidecar
        j = vecs(a[0])
        with open(a[1], "rb") as f:
            head = f.read(10)
            hl = head[8] | head[9] << 8
            assert head[:8] == b"\x93NUMPY\x01\x00" and (10 + hl) % 64 == 0, "bad header"
        n = np.load(a[1])
        assert n.dtype == np.dtype("<f4"), "dtype %s" % n.dtype
        assert n.shape == j.shape, "shape %s want %s" % (n.shape, j.shape)
        assert np.array_equal(n, j), "rows differ from jsonl"
        ids = open(a[2]).read().splitlines()
        want = [r for r, o in records(a[0]) if "embedding" in o]
        assert ids == want, "sidecar %s want %s" % (ids, want)
    elif cmd == "f32":                      # f32 JSONL F32 IDS
        j = vecs(a[0])
        raw = np.fromfile(a[1], dtype="<f4")
        assert raw.size == j.size, "size %d want %d" % (raw.size, j.size)
        assert np.array_equal(raw.reshape(j.shape), j), "rows differ"
        ids = open(a[2]).read().splitlines()
        assert ids == [r for r, o in records(a[0]) if "embedding" in o], "sidecar"
    elif cmd == "matryoshka":               # matryoshka FULL CUT W
        full, cut, w = vecs(a[0]), vecs(a[1]), int(a[2])
        assert cut.shape == (full.shape[0], w), "shape %s" % (cut.shape,)
        unit(cut)
        ref = full[:, :w].astype(np.float64)
        ref /= np.linalg.norm(ref, axis=1, keepdims=True)
        err = np.abs(cut - ref).max()
        assert err < 1e-6, "max err %g" % err
    elif cmd == "ids":                      # ids OUT EXPECTED: raw ids byte for byte
        got = [r for r, _ in records(a[0])]
        want = open(a[1], encoding="utf-8").read().splitlines()
        assert got == want, "\n".join("%r != %r" % (g, w) for g, w in zip(got, want) if g != w) or "count %d want %d" % (len(got), len(want))
    elif cmd == "summary":                  # summary OUT: V:id / E:id:code per line
        print(" ".join("E:%s:%s" % (r, o["error"]["code"]) if "error" in o else
                       ("T:" if o.get("truncated") else "V:") + r for r, o in records(a[0])))
    elif cmd == "same":                     # same OUT I J: vectors of records I and J equal
        m = [o.get("embedding") for _, o in records(a[0])]
        assert m[int(a[1])] == m[int(a[2])], "vectors %s and %s differ" % (a[1], a[2])
    elif cmd == "differ":                   # differ OUT I J
        m = [o.get("embedding") for _, o in records(a[0])]
        assert m[int(a[1])] != m[int(a[2])], "vectors %s and %s are equal" % (a[1], a[2])
    elif cmd == "samevec":                  # samevec A I B J: record I of A == record J of B
        x = records(a[0])[int(a[1])][1]["embedding"]
        y = records(a[2])[int(a[3])][1]["embedding"]
        assert x == y, "differ"
    elif cmd == "tokens":                   # tokens OUT N: N records with int token lists
        r = records(a[0])
        assert len(r) == int(a[1]), "%d records" % len(r)
        for _, o in r:
            assert set(o) == {"id", "tokens"}, "keys %s" % sorted(o)
            assert len(o["tokens"]) >= 2 and all(isinstance(t, int) for t in o["tokens"])
    elif cmd == "ntok":                     # ntok OUT I: print the token count of record I
        print(len(records(a[0])[int(a[1])][1]["tokens"]))
    elif cmd == "longtext":                 # longtext N: N characters of seeded random words
        import random
        rnd, words, n = random.Random(1), [], 0
        while n < int(a[0]):
            w = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9)))
            words.append(w)
            n += len(w) + 1
        print(json.dumps({"id": "long", "text": " ".join(words)[: int(a[0])]}))
    else:
        raise SystemExit("unknown helper " + cmd)

main(*sys.argv[1:])
EOF

M=(-m "$MODEL")

# ---- formats ---------------------------------------------------------------------------

run fmt_jsonl "${M[@]}" $D/good.jsonl
expect_rc fmt_jsonl 0 "jsonl output"
py "jsonl: 10 unit vectors" rows "$T/fmt_jsonl.out" 10
DIM=$("$PY" "$T/h.py" dim "$T/fmt_jsonl.out" 2>/dev/null || echo 0)

# a named pipe whose writer writes once and closes: the input is opened once (a check that
# opened it too would take the writer's bytes and leave the real read waiting forever)
rm -f "$T/in.fifo" && mkfifo "$T/in.fifo"
timeout 60 sh -c "cat $D/good.jsonl >'$T/in.fifo'" &
timeout 60 "$BIN" "${M[@]}" "$T/in.fifo" >"$T/fifo.out" 2>/dev/null
rc=$?
wait
[ "$rc" -eq 0 ] && cmp -s "$T/fifo.out" "$T/fmt_jsonl.out" && pass "a named pipe as the input file" ||
    fail "a named pipe as the input file" "rc $rc"
run fmt_b64 "${M[@]}" --encoding base64 $D/good.jsonl
expect_rc fmt_b64 0 "--encoding base64"
py "jsonl base64 = float" b64 "$T/fmt_jsonl.out" "$T/fmt_b64.out"

run fmt_npy "${M[@]}" -o "$T/x.npy" $D/good.jsonl
expect_rc fmt_npy 0 "-o x.npy"
py "npy: header, shape, dtype, rows, ids sidecar" npy "$T/fmt_jsonl.out" "$T/x.npy" "$T/x.npy.ids.jsonl"

run fmt_f32 "${M[@]}" -o "$T/x.f32" $D/good.jsonl
expect_rc fmt_f32 0 "-o x.f32"
py "f32: rows and ids sidecar" f32 "$T/fmt_jsonl.out" "$T/x.f32" "$T/x.f32.ids.jsonl"

run fmt_force "${M[@]}" --format npy -o "$T/x.bin" --ids "$T/ids.txt" $D/good.jsonl
expect_rc fmt_force 0 "--format npy --ids"
py "--format npy with --ids" npy "$T/fmt_jsonl.out" "$T/x.bin" "$T/ids.txt"

run fmt_stdout_npy "${M[@]}" --format f32 $D/good.jsonl
if [ "$rc" -eq 0 ] && cmp -s "$T/fmt_stdout_npy.out" "$T/x.f32"; then pass "f32 to stdout"; else fail "f32 to stdout" "rc $rc or bytes differ"; fi

"$BIN" "${M[@]}" --format npy $D/good.jsonl 2>"$T/npy_pipe.err" | cat >/dev/null
rc=${PIPESTATUS[0]}
expect_rc npy_pipe 2 "npy to a pipe"
"$BIN" "${M[@]}" --format npy $D/good.jsonl >"$T/redir.npy" 2>/dev/null
"$PY" -c "import numpy as np,sys; a=np.load('$T/redir.npy'); b=np.load('$T/x.npy'); sys.exit(0 if np.array_equal(a,b) else 1)" &&
    pass "npy to a seekable stdout" || fail "npy to a seekable stdout" "differs from -o x.npy"

# ---- Matryoshka ------------------------------------------------------------------------

for w in 768 512 256 128; do
    run dim_$w "${M[@]}" --dim $w $D/good.jsonl
    if [ "$w" -le "$DIM" ]; then
        expect_rc dim_$w 0 "--dim $w"
        py "--dim $w: unit norm, = truncated+renormalised" matryoshka "$T/fmt_jsonl.out" "$T/dim_$w.out" $w
    else
        expect_rc dim_$w 2 "--dim $w, wider than the model"
    fi
done
run dim_bad "${M[@]}" --dim 100 $D/good.jsonl
expect_rc dim_bad 2 "--dim 100"

# ---- ids ---------------------------------------------------------------------------------

run ids "${M[@]}" $D/ids.jsonl
expect_rc ids 0 "ids.jsonl"
py "ids echoed byte for byte" ids "$T/ids.out" $D/ids.expected

# ---- inputs ------------------------------------------------------------------------------

run lines "${M[@]}" $D/lines.txt
expect_rc lines 0 "lines input"
printf '1\n2\n3\n4\n' >"$T/lines.ids"
py "lines: ids are line numbers, empty line is a record" ids "$T/lines.out" "$T/lines.ids"
printf '{"text":"beta"}\n{"text":""}\n' >"$T/beta.jsonl"
run beta "${M[@]}" "$T/beta.jsonl"
py "lines: CRLF stripped" samevec "$T/lines.out" 1 "$T/beta.out" 0
py "lines: empty line = empty text" samevec "$T/lines.out" 2 "$T/beta.out" 1

run lines2 "${M[@]}" $D/lines.txt $D/lines.txt
printf '1\n2\n3\n4\n5\n6\n7\n8\n' >"$T/lines2.ids"
py "multiple files: line numbers continue" ids "$T/lines2.out" "$T/lines2.ids"
py "multiple files: same text, same vector" same "$T/lines2.out" 0 4

run forced "${M[@]}" --input lines $D/good.jsonl
py "--input lines on a jsonl file" rows "$T/forced.out" 10

gzip -c $D/good.jsonl >"$T/good.jsonl.gz"
run gz "${M[@]}" "$T/good.jsonl.gz"
if [ "$rc" -eq 0 ] && cmp -s "$T/gz.out" "$T/fmt_jsonl.out"; then pass "gz input"; else fail "gz input" "rc $rc or output differs"; fi

"$BIN" "${M[@]}" <$D/good.jsonl >"$T/stdin.out" 2>/dev/null
cmp -s "$T/stdin.out" "$T/fmt_jsonl.out" && pass "stdin" || fail "stdin" "output differs"
"$BIN" "${M[@]}" - <$D/good.jsonl >"$T/dash.out" 2>/dev/null
cmp -s "$T/dash.out" "$T/fmt_jsonl.out" && pass "'-' is stdin" || fail "'-' is stdin" "output differs"
gzip -c <$D/good.jsonl | "$BIN" "${M[@]}" >"$T/gzstdin.out" 2>/dev/null
cmp -s "$T/gzstdin.out" "$T/fmt_jsonl.out" && pass "gzip on stdin" || fail "gzip on stdin" "output differs"
{ head -c $((1100 * 1024)) /dev/zero | tr '\0' '\n'; echo '{"id":"a","text":"hi"}'; } >"$T/lead.jsonl"
n=$("$BIN" "${M[@]}" --tokenize "$T/lead.jsonl" 2>/dev/null | grep -c '"id":"a"')
[ "$n" = 1 ] && pass "jsonl guessed after 1.1 MB of blank lines" ||
    fail "jsonl guessed after 1.1 MB of blank lines" "$n records with id a"

head -c 100 "$T/good.jsonl.gz" >"$T/trunc.gz"
run trunc_gz "${M[@]}" "$T/trunc.gz"
expect_rc trunc_gz 4 "truncated gzip input"

# ---- the acceptance case -----------------------------------------------------------------

"$PY" "$T/h.py" longtext 40000 >"$T/long.line"
{
    sed -n 1,4p $D/good.jsonl
    echo '{"id": "bad", "text": "unterminated}'
    sed -n 5,7p $D/good.jsonl
    echo '{"id":"notext","title":"no text here"}'
    sed -n 8p $D/good.jsonl
    cat "$T/long.line"
    echo
    sed -n 9,10p $D/good.jsonl
} >"$T/accept.jsonl"
run accept "${M[@]}" "$T/accept.jsonl"
expect_rc accept 1 "acceptance input (3 bad records)"
want="V:\"g1\" V:\"g2\" V:\"g3\" V:\"g4\" E:5:bad_json V:\"g5\" V:\"g6\" V:\"g7\" E:\"notext\":bad_record V:\"g8\" E:\"long\":too_long V:\"g9\" V:\"g10\""
got=$("$PY" "$T/h.py" summary "$T/accept.out" 2>&1)
[ "$got" = "$want" ] && pass "acceptance: 10 vectors, 3 errors in order" || fail "acceptance: 10 vectors, 3 errors in order" "$got"
grep -q "3 of 13 records failed" "$T/accept.err" && pass "acceptance: failure count on stderr" ||
    fail "acceptance: failure count on stderr" "$(cat "$T/accept.err")"
grep -q 'accept.jsonl:5: invalid JSON' "$T/accept.out" && pass "error message names file:line" ||
    fail "error message names file:line" "$(grep bad_json "$T/accept.out")"
py "acceptance: good vectors = plain run" same "$T/accept.out" 0 0

run trunc "${M[@]}" --truncate "$T/accept.jsonl"
expect_rc trunc 1 "--truncate on the acceptance input"
want="V:\"g1\" V:\"g2\" V:\"g3\" V:\"g4\" E:5:bad_json V:\"g5\" V:\"g6\" V:\"g7\" E:\"notext\":bad_record V:\"g8\" T:\"long\" V:\"g9\" V:\"g10\""
got=$("$PY" "$T/h.py" summary "$T/trunc.out" 2>&1)
[ "$got" = "$want" ] && pass "--truncate: long record embedded, marked" || fail "--truncate: long record embedded, marked" "$got"
"$PY" - "$T/trunc.out" "$T/accept.out" <<'EOF' && pass "--truncate: n_tokens over the limit" || fail "--truncate: n_tokens over the limit" "see output"
import json, re, sys
t = [json.loads(l) for l in open(sys.argv[1])][10]
lim = int(re.search(r"the limit is (\d+)", open(sys.argv[2]).read()).group(1))
assert t["truncated"] is True and t["n_tokens"] > lim, (t.get("n_tokens"), lim)
EOF

# (the 8192-token embedding above is the slow part of this script: it runs only once)
run accept_npy "${M[@]}" -o "$T/t.npy" "$T/accept.jsonl"
n_err=$(grep -c '"error"' "$T/accept_npy.err")
rows=$("$PY" -c "import numpy as np; print(np.load('$T/t.npy').shape[0])" 2>&1)
[ "$rc" -eq 1 ] && [ "$n_err" -eq 3 ] && [ "$rows" = 10 ] && [ "$(wc -l <"$T/t.npy.ids.jsonl")" -eq 10 ] &&
    pass "npy: 10 rows, 3 error lines on stderr" || fail "npy: 10 rows, 3 error lines on stderr" "rc $rc errors $n_err rows $rows"

run errfile "${M[@]}" -o "$T/e.f32" --errors "$T/errors.jsonl" "$T/accept.jsonl"
[ "$rc" -eq 1 ] && [ "$(wc -l <"$T/errors.jsonl")" -eq 3 ] && [ "$(wc -l <"$T/e.f32.ids.jsonl")" -eq 10 ] &&
    pass "--errors file" || fail "--errors file" "rc $rc"

run maxerr "${M[@]}" --max-errors 2 "$T/accept.jsonl"
expect_rc maxerr 1 "--max-errors 2"
got=$("$PY" "$T/h.py" summary "$T/maxerr.out" 2>&1)
want="V:\"g1\" V:\"g2\" V:\"g3\" V:\"g4\" E:5:bad_json V:\"g5\" V:\"g6\" V:\"g7\" E:\"notext\":bad_record"
[ "$got" = "$want" ] && pass "--max-errors 2 stops at the second failure" || fail "--max-errors 2 stops at the second failure" "$got"

# ---- tokenize, prompts, determinism --------------------------------------------------------

run tok "${M[@]}" --tokenize $D/good.jsonl
expect_rc tok 0 "--tokenize"
py "--tokenize: {id, tokens} per record" tokens "$T/tok.out" 10
run tokq "${M[@]}" --tokenize --prompt query $D/good.jsonl
a=$("$PY" "$T/h.py" ntok "$T/tok.out" 0) b=$("$PY" "$T/h.py" ntok "$T/tokq.out" 0)
[ "$b" -gt "$a" ] && pass "--tokenize: the prompt is in the sequence" || fail "--tokenize: the prompt is in the sequence" "$a vs $b"
run toklong "${M[@]}" --tokenize "$T/accept.jsonl"
[ "$rc" -eq 1 ] && grep -q '"id":"long","tokens"' "$T/toklong.out" && pass "--tokenize: long records not cut" || fail "--tokenize: long records not cut" "rc $rc"

run prompts "${M[@]}" $D/prompts.jsonl
expect_rc prompts 0 "prompts.jsonl"
py "record prompt changes the vector" differ "$T/prompts.out" 0 1
py "prompt name = its literal prefix" same "$T/prompts.out" 1 2
py "content = text" same "$T/prompts.out" 0 5
py "title changes the document vector" differ "$T/prompts.out" 3 4
run pq "${M[@]}" --prompt query $D/prompts.jsonl
py "--prompt query = record prompt query" samevec "$T/pq.out" 0 "$T/prompts.out" 1
py "record prompt overrides --prompt" samevec "$T/pq.out" 4 "$T/prompts.out" 4
run pt "${M[@]}" --prefix "title: Paris | text: " $D/prompts.jsonl
py "title form = title: {title} | text: " samevec "$T/pt.out" 3 "$T/prompts.out" 3
run pdoc "${M[@]}" --prompt DOCUMENT $D/prompts.jsonl
py "--prompt is case-insensitive" samevec "$T/pdoc.out" 4 "$T/prompts.out" 4

run again "${M[@]}" "$T/accept.jsonl"
cmp -s "$T/again.out" "$T/accept.out" && pass "same input twice: identical output" || fail "same input twice: identical output" "differs"
run again2 "${M[@]}" $D/good.jsonl $D/good.jsonl
py "a record's vector does not depend on its position" samevec "$T/again2.out" 12 "$T/fmt_jsonl.out" 2

# ---- invalid UTF-8 and media placeholders: error records, never a crash or a silent change ----

# lines: overlong, surrogate, cut inside a line, stray continuation, beyond U+10FFFF, 0xFF,
# cut at the end of the file; no byte is replaced or dropped to make a line valid
printf 'good one\nover\xc0\xaflong\nsurrogate \xed\xa0\x80\ncut \xe2\x82 here\nstray \x80\nbeyond \xf4\x90\x80\x80\nff \xff\ngood two\nends cut \xe2' >"$T/bad.txt"
run badutf "${M[@]}" "$T/bad.txt"
expect_rc badutf 1 "lines with invalid UTF-8"
want="V:1 E:2:bad_utf8 E:3:bad_utf8 E:4:bad_utf8 E:5:bad_utf8 E:6:bad_utf8 E:7:bad_utf8 V:8 E:9:bad_utf8"
got=$("$PY" "$T/h.py" summary "$T/badutf.out" 2>&1)
[ "$got" = "$want" ] && pass "invalid UTF-8 lines: one bad_utf8 record each, in order" || fail "invalid UTF-8 lines: one bad_utf8 record each, in order" "$got"
grep -q '"id":4,"error":{"code":"bad_utf8","message":"[^"]*bad.txt:4: invalid UTF-8 at byte 5"' "$T/badutf.out" &&
    pass "invalid UTF-8: the message names file, line and byte" || fail "invalid UTF-8: the message names file, line and byte" "$(grep '"id":4' "$T/badutf.out")"
printf 'good one\ngood two\n' >"$T/good2.txt"
run good2 "${M[@]}" "$T/good2.txt"
py "invalid UTF-8: the valid lines around are unchanged" samevec "$T/badutf.out" 7 "$T/good2.out" 1
run badutf_tok "${M[@]}" --tokenize "$T/bad.txt"
got=$("$PY" "$T/h.py" summary "$T/badutf_tok.out" 2>&1)
[ "$rc" -eq 1 ] && [ "$got" = "$want" ] && pass "invalid UTF-8 with --tokenize" || fail "invalid UTF-8 with --tokenize" "rc $rc: $got"
printf '{"id":"raw","text":"caf\xe9"}\n{"id":"esc","text":"x \\ud800 y"}\n{"id":"ok","text":"fine"}\n' >"$T/badj.jsonl"
run badj "${M[@]}" "$T/badj.jsonl"
got=$("$PY" "$T/h.py" summary "$T/badj.out" 2>&1)
[ "$rc" -eq 1 ] && [ "$got" = 'E:1:bad_utf8 E:2:bad_json V:"ok"' ] && pass "jsonl: raw invalid UTF-8 is bad_utf8, a lone surrogate escape bad_json" ||
    fail "jsonl: raw invalid UTF-8 is bad_utf8, a lone surrogate escape bad_json" "rc $rc: $got"

# media placeholders in a text-only record: error records naming the placeholder; the
# boundary tokens are ordinary control tokens
cat >"$T/media.jsonl" <<'EOF'
{"id":"img","text":"Describe <|image|> please"}
{"id":"aud","text":"<|audio|>"}
{"id":"vid","text":"clip: <|video|> and <|image|>"}
{"id":"pr","text":"fine text","prompt":"look at <|image|> "}
{"id":"ti","text":"fine text","title":"<|audio|>"}
{"id":"boundary","text":"<|image>a<image|> <|audio>b<audio|>"}
{"id":"partial","text":"<|image| <image|> |image|> <|vid"}
{"id":"ok","text":"plain text"}
EOF
want='E:"img":input E:"aud":input E:"vid":input E:"pr":input E:"ti":input V:"boundary" V:"partial" V:"ok"'
run media "${M[@]}" "$T/media.jsonl"
got=$("$PY" "$T/h.py" summary "$T/media.out" 2>&1)
[ "$rc" -eq 1 ] && [ "$got" = "$want" ] && pass "media placeholders: error records (code input), the rest embedded" ||
    fail "media placeholders: error records (code input), the rest embedded" "rc $rc: $got"
grep -qF 'media.jsonl:1: the text contains the media placeholder <|image|> (at byte 10)' "$T/media.out" &&
    grep -qF 'media.jsonl:3: the text contains the media placeholder <|video|> (at byte 7)' "$T/media.out" &&
    grep -qF 'media.jsonl:4: the prompt or title contains the media placeholder <|image|>' "$T/media.out" &&
    pass "media placeholders: the message names the record and the placeholder" ||
    fail "media placeholders: the message names the record and the placeholder" "$(grep -m3 error "$T/media.out" | tr '\n' ' ')"
run media_tok "${M[@]}" --tokenize "$T/media.jsonl"
got=$("$PY" "$T/h.py" summary "$T/media_tok.out" 2>&1)
[ "$rc" -eq 1 ] && [ "$got" = "$want" ] && pass "media placeholders with --tokenize" || fail "media placeholders with --tokenize" "rc $rc: $got"
printf 'an image: <|image|>\nno image\n' >"$T/media.txt"
run media_lines "${M[@]}" "$T/media.txt"
got=$("$PY" "$T/h.py" summary "$T/media_lines.out" 2>&1)
[ "$rc" -eq 1 ] && [ "$got" = "E:1:input V:2" ] && pass "media placeholders in lines input" || fail "media placeholders in lines input" "rc $rc: $got"

# ---- exit status ---------------------------------------------------------------------------

run u_prompt "${M[@]}" --prompt nosuch $D/good.jsonl
expect_rc u_prompt 2 "unknown --prompt"
grep -qi "query" "$T/u_prompt.err" && pass "unknown --prompt lists the names" || fail "unknown --prompt lists the names" "$(cat "$T/u_prompt.err")"
run u_flag "${M[@]}" --no-such-flag $D/good.jsonl
expect_rc u_flag 2 "unknown flag"
run u_nomodel $D/good.jsonl
expect_rc u_nomodel 2 "no model given"
run u_both "${M[@]}" --prompt query --prefix x $D/good.jsonl
expect_rc u_both 2 "--prompt with --prefix"
run u_tok "${M[@]}" --tokenize -o "$T/tok.npy" $D/good.jsonl
expect_rc u_tok 2 "--tokenize with npy output"
run u_maxerr "${M[@]}" --max-errors 0 $D/good.jsonl
expect_rc u_maxerr 2 "--max-errors 0"
cp $D/good.jsonl "$T/self.jsonl"
run u_self "${M[@]}" -o "$T/self.jsonl" "$T/self.jsonl"
expect_rc u_self 2 "output file = input file"
cmp -s $D/good.jsonl "$T/self.jsonl" && pass "the input is left intact" || fail "the input is left intact" "changed"
GEMMAEMBED_MODEL=$MODEL "$BIN" $D/good.jsonl >"$T/env.out" 2>/dev/null
cmp -s "$T/env.out" "$T/fmt_jsonl.out" && pass "GEMMAEMBED_MODEL" || fail "GEMMAEMBED_MODEL" "output differs"
GEMMAEMBED_MODEL=/nonexistent "$BIN" "${M[@]}" $D/good.jsonl >"$T/env2.out" 2>/dev/null
cmp -s "$T/env2.out" "$T/fmt_jsonl.out" && pass "-m wins over GEMMAEMBED_MODEL" || fail "-m wins over GEMMAEMBED_MODEL" "output differs"

: >"$T/empty.gguf"
run m_missing -m "$T/nonexistent.gguf" $D/good.jsonl
expect_rc m_missing 3 "missing model file"
[ "$(wc -l <"$T/m_missing.err")" -eq 1 ] && grep -q "^gemmaembed: .*nonexistent.gguf" "$T/m_missing.err" &&
    pass "model error: one line naming the file" || fail "model error: one line naming the file" "$(cat "$T/m_missing.err")"
run m_dir -m $D $D/good.jsonl
expect_rc m_dir 3 "directory as model"
run m_empty -m "$T/empty.gguf" $D/good.jsonl
expect_rc m_empty 3 "empty model file"
run m_notgguf -m $D/lines.txt $D/good.jsonl
expect_rc m_notgguf 3 "non-GGUF model file"

run io_missing "${M[@]}" $D/good.jsonl "$T/nonexistent.jsonl"
expect_rc io_missing 4 "unreadable input file"
run io_dir "${M[@]}" $D
expect_rc io_dir 4 "directory as input"
if [ -w /dev/full ]; then
    run io_full "${M[@]}" -o /dev/full $D/good.jsonl
    expect_rc io_full 4 "write error (jsonl to /dev/full)"
    run io_full_npy "${M[@]}" -o /dev/full --format npy $D/good.jsonl
    expect_rc io_full_npy 4 "write error (npy to /dev/full)"
fi

# --bench with --mmproj: the text cases, then one image per budget through the vision tower
"$BIN" "${M[@]}" --mmproj testdata/tiny-mmproj-f32.gguf --bench --bench-reps 2 \
    --bench-json "$T/bench.json" >"$T/bench.out" 2>"$T/bench.err"
rc=$?
"$PY" - "$T/bench.json" >"$T/bench.chk" 2>&1 <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["reps"] == 2 and len(d["cases"]) >= 5 and all(c["tokens_per_s_mean"] > 0 for c in d["cases"])
imgs = d["images"]
# a 1280x960 picture's soft tokens per budget (docs/model.md 5.1), each with time and GMAC/s
assert [(i["budget"], i["soft_tokens"]) for i in imgs] == [(70, 63), (140, 130), (280, 266), (560, 540), (1120, 1064)], imgs
assert all(i["seconds_mean"] > 0 and i["gmacs"] > 0 and i["patches"] == 9 * i["soft_tokens"] for i in imgs)
assert d["image_operations"]["attention"]["gmac"] > 0
EOF2
[ "$rc" -eq 0 ] && [ ! -s "$T/bench.out" ] && [ ! -s "$T/bench.chk" ] && grep -q "budget 1120" "$T/bench.err" &&
    pass "--bench --mmproj: text cases and an image per budget (s/image, GMAC/s) in the table and JSON" ||
    fail "--bench --mmproj: text cases and an image per budget" "rc $rc $(tail -c 300 "$T/bench.chk")"

# --print-config with -m: the weight types of the files and the kernel that runs each
"$PY" tools/mkmodel --preset tiny --type q4_0 --seed 1 -o "$T/q4_0.gguf"
run pc_q8 --print-config -m testdata/tiny-q8_0.gguf
run pc_q4_0 --print-config -m "$T/q4_0.gguf" --cpu-tier scalar
run pc_bad --print-config -m "$T/missing.gguf"
if grep -q "^weights  *tiny-q8_0.gguf: Q8_0 .* matrices .*q8_gemm" "$T/pc_q8.out" &&
    grep -q "^weights  *tiny-q8_0.gguf: BF16 .*sgemm" "$T/pc_q8.out" &&
    grep -q "^weights  *q4_0.gguf: Q4_0 .*kq_gemm scalar, in place" "$T/pc_q4_0.out" &&
    grep -q "^weights  *q4_0.gguf: F32 .* vectors" "$T/pc_q4_0.out" && [ "$rc" -eq 3 ]; then
    pass "--print-config -m: each weight type and its kernel; a missing file exits 3"
else
    fail "--print-config -m: each weight type and its kernel; a missing file exits 3" \
        "rc $rc: $(grep weights "$T/pc_q8.out" "$T/pc_q4_0.out" | head -c 400)"
fi

run help --help
[ "$rc" -eq 0 ] && grep -q -- "--max-errors" "$T/help.out" && grep -q "query" "$T/help.out" &&
    pass "--help: flags and prompt names" || fail "--help: flags and prompt names" "rc $rc"
run version --version
expect_rc version 0 "--version"

# every long flag in --help is documented in the man page, which renders without warnings
missing=""
for f in $(grep -o -- '--[a-z][a-z0-9-]*' "$T/help.out" | sort -u); do
    grep -q -- "Fl -${f#--}\b\|\\\\-\\\\-${f#--}" man/gemmaembed.1 || missing="$missing $f"
done
[ -z "$missing" ] && pass "man page lists every flag" || fail "man page lists every flag" "missing:$missing"
if command -v groff >/dev/null; then
    w=$(groff -mandoc -Tutf8 -ww -z man/gemmaembed.1 2>&1)
    [ -z "$w" ] && pass "man page renders without warnings" || fail "man page renders without warnings" "$w"
fi

finish
