#!/usr/bin/env bash
# tests/test_audio_cli.sh - audio records through the CLI (cli/pipeline.c), on the tiny text
# model and the committed audio / combined mmproj files, with clips made by sox, ffmpeg and
# Python's wave module at test time:
#   - bad audio (corrupt bytes, a truncated WAV, an empty file, random bytes, a text file, a
#     video-only MP4, sample rates of 1 Hz and 2 GHz, 0 and 1000 channels, a 5 ms clip, a
#     missing file): exactly one error record each, with the code and a message naming the
#     item and the file; good records in the same input still come out, in input order;
#     exit 1 with the count on stderr and nothing else there;
#   - without --mmproj: "audio needs an audio tower: give --mmproj", as for images;
#   - --audio-max-seconds: negative, zero, non-numbers and over 3600 are usage errors (exit 2);
#   - --tokenize counts: <bos> <|audio> + N x <|audio|> + <audio|> <eos>, N = (L + 3) // 4,
#     L = (n - 1) // 160 for n samples at 16 kHz (1 s: 25; 7.3 s at 44.1 kHz stereo: 183;
#     40 s cut to the default 30 s: 750, to --audio-max-seconds 2: 50), inline base64 and
#     data: URIs, several clips and texts in one record, --input files; manual <|audio|>
#     placeholders in the text place the clips, a count mismatch is a bad_record;
#   - [audio tower] checks, which need the audio tower (engine/audio_tower.c): vectors for the good clips among bad ones, the same
#     vector from a file, base64 and a data: URI, --audio-max-seconds 2 = the clip cut to 2 s
#     by sox, the same bytes alone or in a batch / with 1 thread / --no-yield, a vision-only
#     mmproj gives "no audio encoder" error records, and --bench's audio cases.
set -u
cd "$(dirname "$0")/.." || exit 1
BIN=${BIN:-./gemmaembed}
PYTHON=${PYTHON:-/usr/bin/python3}
OUT=${OUT:-build/test-out}
for tool in sox ffmpeg; do
    command -v $tool >/dev/null || { echo "FAIL: $tool not installed (tools/install-deps)"; exit 1; }
done
dir=$OUT/test_audio_cli
rm -rf "$dir" && mkdir -p "$dir"
unset GEMMAEMBED_MODEL GEMMAEMBED_MMPROJ
exec "$PYTHON" - "$BIN" "$dir" <<'EOF'
import base64, json, math, os, struct, subprocess, sys, wave
import numpy as np
sys.path.insert(0, "tools/ref")
sys.path.insert(0, "tests")
import gguf
from selfcheck import run_rows, write_jsonl

# the runs work in d (the records name their clips relative to it)
BIN, d = os.path.abspath(sys.argv[1]), sys.argv[2]
TEXT, AUDIO, BOTH, VISION = (os.path.abspath("testdata/tiny-%s.gguf" % k) for k in
                             ("q8_0", "mmproj-audio-q8_0", "mmproj-both-q8_0", "mmproj-q8_0"))
TOWER = "[audio tower] "  # checks that need the audio tower (engine/audio_tower.c)
nfail = 0

def check(ok, name, detail=""):
    global nfail
    print(("PASS: %s" % name) if ok else ("FAIL: %s: %s" % (name, str(detail)[:600])))
    nfail += 0 if ok else 1

def run(*args, model=TEXT):
    return run_rows([BIN, "-m", model, *args], d, 120)

def p(name):
    return os.path.join(d, name)

def put_jsonl(name, recs):
    write_jsonl(p(name), recs)

# ---- the clips --------------------------------------------------------------------------
rng = np.random.default_rng(3)
def wav(name, x, rate=16000, ch=1):
    with wave.open(p(name), "wb") as w:
        w.setnchannels(ch), w.setsampwidth(2), w.setframerate(rate)
        w.writeframes(np.clip(np.round(x * 32767), -32768, 32767).astype("<i2").tobytes())

def clip(secs, rate=16000, f=440.0):
    t = np.arange(int(round(secs * rate))) / rate
    return 0.3 * np.sin(2 * np.pi * f * t) + 0.05 * rng.standard_normal(len(t))

def wav_header(rate, ch, frames=1600):  # a PCM16 WAV with any rate and channel count
    ba = ch * 2
    data = bytes(frames * ba)
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " +
            struct.pack("<IHHIIHH", 16, 1, ch, rate, rate * ba & 0xFFFFFFFF, ba & 0xFFFF, 16) +
            b"data" + struct.pack("<I", len(data)) + data)

def sh(cmd):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, cwd=d)
    if r.returncode:
        print("FAIL: setup: %s: %s" % (cmd, r.stderr.strip()))
        sys.exit(1)

wav("one.wav", clip(1))                                     # 16000 samples: 25 tokens
wav("src73.wav", np.stack([clip(7.3, 44100), clip(7.3, 44100, 330)], 1), 44100, 2)
sh("sox src73.wav s73.flac")                                # 116800 samples: 183 tokens
sh("sox -n -r 16000 -c 1 -b 16 long.wav synth 40 sine 300 gain -6")  # 40 s
sh("sox long.wav long2.wav trim 0 2")                       # what --audio-max-seconds 2 keeps
sh("sox -n -r 22050 -c 1 tone.ogg synth 3 sine 500")        # Ogg Vorbis: 3 s -> 75 tokens
wav("short.wav", clip(0.005))                               # 80 samples: no frame
sh("ffmpeg -nostdin -loglevel error -f lavfi -i testsrc=size=64x64:rate=5 -t 1 -c:v mpeg4 "
   "video.mp4")
open(p("corrupt.wav"), "wb").write(b"RIFF" + struct.pack("<I", 4000) + b"WAVE" + rng.bytes(4000))
open(p("noise.wav"), "wb").write(rng.bytes(5000))
open(p("truncated.wav"), "wb").write(open(p("one.wav"), "rb").read()[:1044])
open(p("empty.wav"), "wb").close()
open(p("notes.txt"), "w").write("just some text\n" * 20)
open(p("rate1.wav"), "wb").write(wav_header(1, 1))
open(p("rate2g.wav"), "wb").write(wav_header(2000000000, 1))
open(p("ch0.wav"), "wb").write(wav_header(16000, 0))
open(p("ch1000.wav"), "wb").write(wav_header(16000, 1000, 16))

g = gguf.open_gguf(TEXT).metadata
vocab = g["tokenizer.ggml.tokens"]
BOS, EOS = g["tokenizer.ggml.bos_token_id"], g["tokenizer.ggml.eos_token_id"]
A_OPEN, A_PH, A_CLOSE = (vocab.index(t) for t in ("<|audio>", "<|audio|>", "<audio|>"))

def n_tokens(n):  # soft tokens of n samples at 16 kHz (docs/model.md 6.1)
    L = (n - 1) // 160 if n >= 161 else 0
    return (L + 3) // 4

def block(n):
    return [A_OPEN] + [A_PH] * n_tokens(n) + [A_CLOSE]

check([n_tokens(16000), n_tokens(116800), n_tokens(480000), n_tokens(32000)] == [25, 183, 750, 50],
      "the expected counts: 1 s 25, 7.3 s 183, 30 s 750, 2 s 50 tokens")

# ---- bad audio among good records ---------------------------------------------------------
BAD = [  # file, code, the cause in the message
    ("corrupt.wav", "format", "corrupt or truncated header"),
    ("noise.wav", "unsupported", "unsupported format"),
    ("truncated.wav", "format", "wav: truncated"),
    ("empty.wav", "format", "empty file"),
    ("notes.txt", "unsupported", "unsupported format"),
    ("video.mp4", "unsupported", "no audio stream"),
    ("rate1.wav", "unsupported", "sample rate 1 Hz is outside"),
    ("rate2g.wav", "unsupported", "sample rate 2000000000 Hz is outside"),
    ("ch0.wav", "format", "Channel count is zero"),
    ("ch1000.wav", "limit", "1000 channels"),
    ("short.wav", "input", "too short: 80 samples (5 ms) gives no complete 10 ms frame (needs at "
                           "least 161 samples at 16 kHz)"),
    ("missing.wav", "io", "cannot open: No such file or directory"),
]
recs = [{"id": "text0", "text": "a text before the clips"}]
for i, (f, _, _) in enumerate(BAD):
    recs.append({"id": f, "audio": f})
    if i % 3 == 0:
        recs.append({"id": "good%d" % i, "audio": "one.wav"})
    if i % 4 == 1:
        recs.append({"id": "text%d" % i, "text": "a text record between the clips"})
recs.append({"id": "mixed", "content": [{"type": "text", "text": "a clip:"},
                                        {"type": "audio", "path": "s73.flac"},
                                        {"type": "audio", "path": "empty.wav"}]})
put_jsonl("bad.jsonl", recs)
ids = [r["id"] for r in recs]
n_bad = len(BAD) + 1

def check_bad(rows, name):
    """the error records of a bad.jsonl run: (ok, detail)"""
    by = {r.get("id"): r for r in rows}
    for f, code, cause in BAD:
        e = by.get(f, {}).get("error")
        if not e or e["code"] != code or \
                ("audio item 1 (%s): " % f) not in e["message"] or cause not in e["message"]:
            return False, "%s: %s" % (f, by.get(f))
    e = by.get("mixed", {}).get("error")
    if not e or e["code"] != "format" or "audio item 3 (empty.wav): audio: empty file" not in e["message"]:
        return False, "mixed: %s" % by.get("mixed")
    return True, ""

rc, rows, err = run("--tokenize", "--mmproj", AUDIO, "bad.jsonl")
ok, why = check_bad(rows, "tokenize")
check(ok and [r.get("id") for r in rows] == ids,
      "bad audio (--tokenize): one error record each, code and message name the item, file, cause",
      why or [r.get("id") for r in rows])
good = [r for r in rows if "error" not in r]
check(len(good) == len(ids) - n_bad and
      all(r["tokens"] == [BOS] + block(16000) + [EOS] for r in good if r["id"].startswith("good")),
      "bad audio (--tokenize): the good records are counted", good)
check(rc == 1 and err == "gemmaembed: %d of %d records failed\n" % (n_bad, len(ids)),
      "bad audio (--tokenize): exit 1, the count and nothing else on stderr", (rc, err))

rc, rows, err = run("--mmproj", AUDIO, "bad.jsonl")
ok, why = check_bad(rows, "embed")
check(ok and [r.get("id") for r in rows] == ids and
      all("embedding" in r for r in rows if r["id"].startswith("text")),
      "bad audio (embedding): one error record each, text records embedded, input order", why or rows)
vecs = [r for r in rows if r["id"].startswith("good")]
check(all(len(r.get("embedding", [])) == 768 and abs(np.linalg.norm(r["embedding"]) - 1) < 1e-5
          for r in vecs) and rc == 1 and
      err == "gemmaembed: %d of %d records failed\n" % (n_bad, len(ids)),
      TOWER + "bad audio: the good clips among them get unit vectors, exit 1, one stderr line",
      (rc, err, vecs[:1]))

# ---- no --mmproj; a vision-only mmproj --------------------------------------------------
put_jsonl("one.jsonl", [{"id": 1, "audio": "one.wav"}, {"id": 2, "text": "text"}])
rc, rows, err = run("one.jsonl")
check(rc == 1 and rows[0].get("error", {}).get("code") == "unsupported" and
      rows[0]["error"]["message"] == "one.jsonl:1: audio item 1 (one.wav): audio needs an audio "
      "tower: give --mmproj" and "embedding" in rows[1],
      "no --mmproj: the audio record says to give --mmproj, the text is embedded", (rc, rows))
rc, rows, err = run("--mmproj", VISION, "one.jsonl")
check(rc == 1 and rows[0].get("error", {}).get("code") == "unsupported" and
      "audio item 1: " in rows[0]["error"]["message"] and
      "no audio encoder" in rows[0]["error"]["message"] and "embedding" in rows[1],
      TOWER + "a vision-only mmproj: the audio record is an error saying \"no audio encoder\"",
      (rc, rows))

# ---- --audio-max-seconds ------------------------------------------------------------------
for bad in ("-1", "0", "abc", "", "3601", "1e9", "nan", "inf", "5s"):
    rc, rows, err = run("--mmproj", AUDIO, "--tokenize", "--audio-max-seconds", bad, "one.jsonl")
    check(rc == 2 and not rows and err.startswith("gemmaembed: --audio-max-seconds: '%s'" % bad),
          "--audio-max-seconds %r: usage error, exit 2" % bad, (rc, err))
r = subprocess.run([BIN, "--help"], capture_output=True, text=True)
check("--audio-max-seconds S" in r.stdout and "(default: 30)" in r.stdout.split("--audio-max-seconds")[1][:200],
      "--help: --audio-max-seconds and its default")

# ---- --tokenize counts ---------------------------------------------------------------------
b64 = base64.b64encode(open(p("one.wav"), "rb").read()).decode()
put_jsonl("tok.jsonl", [
    {"id": "1s", "audio": "one.wav"},
    {"id": "7.3s", "audio": "s73.flac"},
    {"id": "40s", "audio": "long.wav"},
    {"id": "ogg", "audio": "tone.ogg"},
    {"id": "b64", "audio_b64": b64},
    {"id": "uri", "content": [{"type": "audio", "data": b64}]},
    {"id": "datauri", "content": [{"type": "audio", "audio": "data:audio/wav;base64," + b64}]},
    {"id": "two", "content": [{"type": "text", "text": "first"}, {"type": "audio", "path": "one.wav"},
                              {"type": "text", "text": "then"}, {"type": "audio", "path": "s73.flac"}]},
])
def tok_check(args, cap, name):  # cap: the samples --audio-max-seconds keeps
    rc, rows, err = run("--tokenize", *args, "tok.jsonl")
    by = {r["id"]: r.get("tokens") for r in rows}
    t = by.get("two") or []
    b1, b2 = block(min(16000, cap)), block(min(116800, cap))
    want = {"1s": [BOS] + b1 + [EOS], "7.3s": [BOS] + b2 + [EOS],
            "40s": [BOS] + block(min(640000, cap)) + [EOS],
            "ogg": [BOS] + block(min(48000, cap)) + [EOS]}
    for k in ("b64", "uri", "datauri"):
        want[k] = want["1s"]
    bad = [k for k, v in want.items() if by.get(k) != v]
    # two clips: their blocks in order between the texts' tokens
    i = next((j for j in range(len(t)) if t[j:j + len(b1)] == b1), -1)
    k = next((j for j in range(i + len(b1) + 1, len(t)) if t[j:j + len(b2)] == b2), -1)
    if not (t and t[0] == BOS and t[-1] == EOS and 1 < i and i + len(b1) < k and
            k + len(b2) == len(t) - 1):
        bad.append("two")
    check(rc == 0 and not bad and not err, name, (rc, bad, err[:300]))
tok_check(["--mmproj", AUDIO], 480000, "--tokenize: 1 s 25, 7.3 s 183, 40 s cut to 30 s 750 "
          "tokens; Ogg, base64 and data: URIs; two clips between texts")
tok_check(["--mmproj", BOTH, "--audio-max-seconds", "2"], 32000,
          "--tokenize --audio-max-seconds 2 (combined mmproj): clips over 2 s give 50 tokens")
tok_check(["--mmproj", AUDIO, "--audio-max-seconds", "2.5"], 40000,
          "--tokenize --audio-max-seconds 2.5: clips over 2.5 s give 63 tokens (40000 samples)")
with open(p("list.txt"), "w") as f:
    f.write("one.wav\ns73.flac\nshort.wav\n")
rc, rows, err = run("--tokenize", "--mmproj", AUDIO, "--input", "files", "list.txt")
check(rc == 1 and [r.get("tokens") for r in rows[:2]] == [[BOS] + block(16000) + [EOS],
                                                         [BOS] + block(116800) + [EOS]] and
      "too short" in rows[2].get("error", {}).get("message", ""),
      "--input files: audio paths are audio records", (rc, rows[2:], err))

# manual <|audio|> placeholders in the text place the clips (docs/model.md 2.3), in order; with any
# manual placeholder no media goes first, and the counts of each kind must match
put_jsonl("manual.jsonl", [
    {"id": "two", "audio": ["s73.flac", "one.wav"], "text": "a <|audio|> b<|audio|>"},
    {"id": "extra-ph", "audio": "one.wav", "text": "a <|audio|> b <|audio|>"},
    {"id": "extra-clip", "audio": ["one.wav", "one.wav"], "text": "a <|audio|> b"},
])
rc, rows, err = run("--tokenize", "--mmproj", AUDIO, "manual.jsonl")
by = {r.get("id"): r for r in rows}
tt = by.get("two", {}).get("tokens") or []
i = next((j for j in range(len(tt)) if tt[j:j + len(block(116800))] == block(116800)), -1)
check(rc == 1 and tt[:1] == [BOS] and tt[-len(block(16000)) - 1:] == block(16000) + [EOS] and
      i > 1 and tt.count(A_OPEN) == 2 and
      "more <|audio|> placeholders in the text than audio clips" in
      by.get("extra-ph", {}).get("error", {}).get("message", "") and
      "more audio clips than <|audio|> placeholders in the text" in
      by.get("extra-clip", {}).get("error", {}).get("message", ""),
      "manual <|audio|> placeholders: the clips in their places, in order; a count mismatch "
      "is a bad_record", (rc, rows, err[:200]))

# ---- [audio tower] vectors ---------------------------------------------------------------------
put_jsonl("same.jsonl", [
    {"id": "file", "audio": "one.wav"},
    {"id": "b64", "audio_b64": b64},
    {"id": "uri", "content": [{"type": "audio", "audio": "data:audio/wav;base64," + b64}]},
    {"id": "cut", "audio": "long.wav"},
    {"id": "long2", "audio": "long2.wav"},
    {"id": "text", "text": "a text among the clips"},
    {"id": "both", "content": [{"type": "text", "text": "hear"}, {"type": "audio", "path": "s73.flac"},
                               {"type": "audio", "path": "one.wav"}]},
])
rc, rows, err = run("--mmproj", AUDIO, "--audio-max-seconds", "2", "same.jsonl")
by = {r["id"]: r for r in rows}
emb = lambda k: by.get(k, {}).get("embedding")
check(rc == 0 and emb("file") and emb("file") == emb("b64") == emb("uri") and
      emb("cut") and emb("cut") == emb("long2") and emb("both") and emb("both") != emb("file"),
      TOWER + "a file, base64 and a data: URI give one vector; --audio-max-seconds 2 = the clip "
      "cut to 2 s by sox", (rc, err[:300], [(k, str(v)[:120]) for k, v in by.items()]))
want = rows
outs = {}
for name, args in (("alone", None), ("1 thread", ["-t", "1"]), ("--no-yield", ["--no-yield"]),
                   ("no packing", ["--wave-tokens", "0"])):
    if args is None:  # every record on its own
        got = []
        for r in open(p("same.jsonl")):
            open(p("single.jsonl"), "w").write(r)
            got += run("--mmproj", AUDIO, "--audio-max-seconds", "2", "single.jsonl")[1]
    else:
        got = run("--mmproj", AUDIO, "--audio-max-seconds", "2", *args, "same.jsonl")[1]
    check(rc == 0 and got == want, TOWER + "the same vectors %s" % name,
          "differs" if rc == 0 else "no vectors")
rc, rows, err = run("--mmproj", BOTH, "--audio-max-seconds", "2", "same.jsonl")
check(rc == 0 and rows == want, TOWER + "the combined mmproj gives the audio file's vectors",
      (rc, err[:300]))

# ---- [audio tower] --bench -------------------------------------------------------------------
r = subprocess.run([BIN, "-m", TEXT, "--mmproj", BOTH, "--bench", "--bench-reps", "1",
                    "--bench-json", p("bench.json")], capture_output=True, text=True, timeout=120)
try:
    a = json.load(open(p("bench.json")))
    ok = r.returncode == 0 and \
        [(c["audio_seconds"], c["soft_tokens"]) for c in a["audio"]] == [(1, 25), (10, 250), (30, 750)] and \
        all(c["seconds_mean"] > 0 and c["audio_seconds_per_s"] > 0 and c["gmacs"] > 0 for c in a["audio"]) and \
        sum(o["gmac"] for o in a["audio_operations"].values()) > 0 and "30 s clip" in r.stderr
except (OSError, ValueError, KeyError) as e:
    ok = False
check(ok, TOWER + "--bench with an audio tower: 1, 10 and 30 s clips (s/clip, audio s/s, GMAC/s) "
      "in the table and the JSON", (r.returncode, r.stderr[-400:]))

print("test_audio_cli: %d failed" % nfail)
sys.exit(1 if nfail else 0)
EOF
