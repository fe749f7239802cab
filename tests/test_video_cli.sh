#!/usr/bin/env bash
# tests/test_video_cli.sh - video records through the CLI (cli/pipeline.c), on the tiny text
# model and the committed vision / combined mmproj files, with clips made by ffmpeg from its
# lavfi test sources at test time:
#   - --tokenize: <bos> + per sampled frame <|image> + N x <|video|> + <image|> + <eos> (3 s
#     at 25 fps: 3 frames; 4:3 640x480: 130 tokens a frame, 16:9: 120), with
#     --video-timestamps (or EI_GEMMA2_VIDEO_TIMESTAMPS=1) "00:00 ", " 00:01 ", ... before
#     the blocks; --video-fps, --video-frames and --video-tokens change the counts;
#   - a record whose plan is over the context limit is a too_long error record naming the
#     counts, found before any tower runs;
#   - bad video (truncated, corrupt, empty, a text file, audio only, a missing file): one error
#     record each naming the item and the file, the other records go on, exit 1;
#   - option validation (exit 2), no --mmproj, --input files, and every modality in one record;
#   - vectors: finite and unit-norm, the same bytes alone, in a batch, on 1 thread and with
#     --no-yield.
set -u
cd "$(dirname "$0")/.." || exit 1
BIN=${BIN:-./gemmaembed}
PYTHON=${PYTHON:-/usr/bin/python3}
OUT=${OUT:-build/test-out}
command -v ffmpeg >/dev/null || { echo "FAIL: ffmpeg not installed (tools/install-deps)"; exit 1; }
dir=$OUT/test_video_cli
rm -rf "$dir" && mkdir -p "$dir"
unset GEMMAEMBED_MODEL GEMMAEMBED_MMPROJ EI_GEMMA2_VIDEO_TIMESTAMPS
exec "$PYTHON" - "$BIN" "$dir" <<'EOF'
import json, math, os, subprocess, sys, wave
import numpy as np
sys.path.insert(0, "tools/ref")
sys.path.insert(0, "tests")
import gguf
from selfcheck import run_rows, write_jsonl

BIN, d = os.path.abspath(sys.argv[1]), sys.argv[2]
TEXT, VISION, BOTH = (os.path.abspath("testdata/tiny-%s.gguf" % k) for k in
                      ("q8_0", "mmproj-q8_0", "mmproj-both-q8_0"))
nfail = 0

def check(ok, name, detail=""):
    global nfail
    print(("PASS: %s" % name) if ok else ("FAIL: %s: %s" % (name, str(detail)[:600])))
    nfail += 0 if ok else 1

def run(*args, env=None, mmproj=BOTH):
    cmd = [BIN, "-m", TEXT] + (["--mmproj", mmproj] if mmproj else []) + list(args)
    return run_rows(cmd, d, 300, env=dict(os.environ, **(env or {})))

def p(name):
    return os.path.join(d, name)

def put_jsonl(name, recs):
    write_jsonl(p(name), recs)

def ffmpeg(*args):
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", *args], check=True, cwd=d)

# ---- the clips ---------------------------------------------------------------------------
ffmpeg("-f", "lavfi", "-i", "testsrc2=size=640x480:rate=25", "-t", "3", "-c:v", "mpeg4",
       "-q:v", "8", "v43.mp4")                                   # 3 s, 4:3: 3 frames of 130
ffmpeg("-f", "lavfi", "-i", "smptebars=size=640x360:rate=30", "-t", "2", "-c:v", "libvpx",
       "-b:v", "200k", "v169.webm")                              # 2 s, 16:9: 2 frames of 120
ffmpeg("-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-c:a", "aac", "sound.mp4")
data = open(p("v43.mp4"), "rb").read()
open(p("cut.mp4"), "wb").write(data[:len(data) // 3])
open(p("empty.mp4"), "wb").close()
open(p("notes.mkv"), "w").write("not a video at all\n" * 20)
rng = np.random.default_rng(5)
open(p("noise.webm"), "wb").write(b"\x1a\x45\xdf\xa3" + rng.bytes(4000))
with wave.open(p("one.wav"), "wb") as w:
    t = np.arange(16000) / 16000
    w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
    w.writeframes((0.3 * np.sin(2 * np.pi * 440 * t) * 32767).astype("<i2").tobytes())
IMAGE = os.path.abspath("testdata/images/landscape.jpg")
if not os.path.exists(IMAGE):
    IMAGE = os.path.abspath(sorted(os.path.join("testdata/images", f)
                                   for f in os.listdir("testdata/images"))[0])

g = gguf.open_gguf(TEXT).metadata
vocab = g["tokenizer.ggml.tokens"]
BOS, EOS = vocab.index("<bos>"), vocab.index("<eos>")
OPEN, VID, CLOSE = vocab.index("<|image>"), vocab.index("<|video|>"), vocab.index("<image|>")

def frames(ids, n_soft):
    """The frame blocks of ids as (n_soft per block), the texts between them as id lists."""
    blocks, texts, cur, i = [], [[]], None, 0
    while i < len(ids):
        if ids[i] == OPEN:
            j = ids.index(CLOSE, i)
            blocks.append(j - i - 1)
            check_ids = all(x == VID for x in ids[i + 1:j])
            if not check_ids:
                return None, None
            texts.append([])
            i = j + 1
        else:
            texts[-1].append(ids[i])
            i += 1
    return blocks, texts

# ---- --tokenize --------------------------------------------------------------------------
put_jsonl("tok.jsonl", [{"id": "a", "video": "v43.mp4"}, {"id": "b", "video": "v169.webm"}])
rc, rows, err = run("--tokenize", "tok.jsonl")
ok = rc == 0 and len(rows) == 2
b43, t43 = frames(rows[0]["tokens"], 130) if ok else (None, None)
b169, _ = frames(rows[1]["tokens"], 120) if ok else (None, None)
check(ok and b43 == [130] * 3 and b169 == [120] * 2
      and rows[0]["tokens"][0] == BOS and rows[0]["tokens"][-1] == EOS
      and t43 == [[BOS], [], [], [EOS]],
      "--tokenize: 3 s 4:3 = 3 blocks of 130 <|video|>, 2 s 16:9 = 2 of 120, no text between",
      (rc, err, b43, b169, t43))

def detok(ids):
    return "".join(vocab[i] for i in ids).replace("\u2581", " ")

for how, args, env in (("--video-timestamps", ["--video-timestamps"], None),
                       ("EI_GEMMA2_VIDEO_TIMESTAMPS=1", [], {"EI_GEMMA2_VIDEO_TIMESTAMPS": "1"})):
    rc, rows, err = run("--tokenize", *args, "tok.jsonl", env=env)
    b, t = frames(rows[0]["tokens"], 130) if rc == 0 and rows else (None, None)
    check(b == [130] * 3 and t is not None and [detok(x) for x in t[:3]] ==
          ["<bos>00:00 ", " 00:01 ", " 00:02 "],
          "%s: \"MM:SS \" before each frame block, blocks joined by a space" % how,
          (rc, err, t and [detok(x) for x in t]))

rc, rows, err = run("--tokenize", "--video-fps", "2", "--video-frames", "4", "--video-tokens",
                    "70", "tok.jsonl")
b, _ = frames(rows[0]["tokens"], 0) if rc == 0 and rows else (None, None)
b2, _ = frames(rows[1]["tokens"], 0) if rc == 0 and len(rows) > 1 else (None, None)
check(b is not None and len(b) == 4 and len(set(b)) == 1 and b[0] < 130 and len(b2) == 4,
      "--video-fps 2 --video-frames 4 --video-tokens 70: 4 frames each, fewer tokens a frame",
      (rc, err, b, b2))

# over the context limit: planned before any tower runs
put_jsonl("long.jsonl", [{"id": "long", "video": "v43.mp4"}, {"id": "t", "text": "fine"}])
rc, rows, err = run("--video-fps", "10", "--video-tokens", "1120", "long.jsonl")
e = rows[0].get("error", {}) if rows else {}
check(rc == 1 and e.get("code") == "too_long" and "tokens" in e.get("message", "")
      and "embedding" in rows[1], "a video over the context limit: too_long with the counts",
      (rc, rows[:1], err))

# ---- bad videos among good records -------------------------------------------------------
bad = [("cut", "cut.mp4"), ("empty", "empty.mp4"), ("text", "notes.mkv"),
       ("noise", "noise.webm"), ("sound", "sound.mp4"), ("missing", "nope.mp4")]
recs = [{"id": "good1", "video": "v43.mp4"}]
recs += [{"id": k, "video": f} for k, f in bad]
recs += [{"id": "good2", "content": [{"type": "text", "text": "bars "},
                                      {"type": "video", "path": "v169.webm"}]}]
put_jsonl("bad.jsonl", recs)
rc, rows, err = run("bad.jsonl")
ids = [r.get("id") for r in rows]
check(rc == 1 and ids == [r["id"] for r in recs], "bad videos: one row per record, in order",
      (rc, ids, err))
for r, (k, f) in zip(rows[1:-1], bad):
    m = r.get("error", {}).get("message", "")
    check("error" in r and "video item 1" in m and f in m,
          "bad video %s: an error record naming the item and %s" % (k, f), r)
good = [r for r in rows if r.get("id", "").startswith("good")]
check(len(good) == 2 and all("embedding" in r and
                            abs(math.sqrt(sum(x * x for x in r["embedding"])) - 1) < 1e-4
                            for r in good),
      "the good video records among them: unit-norm vectors", good)
check(err.strip().splitlines() == ["gemmaembed: 6 of 8 records failed"],
      "stderr holds only the count", err)

# ---- options -----------------------------------------------------------------------------
for opt, val in (("--video-fps", "0"), ("--video-fps", "-1"), ("--video-fps", "x"),
                 ("--video-fps", "1001"), ("--video-frames", "0"), ("--video-frames", "2000"),
                 ("--video-frames", "3.5"), ("--video-tokens", "100")):
    rc, rows, err = run(opt, val, "tok.jsonl")
    check(rc == 2 and opt in err, "%s %s: usage error (exit 2)" % (opt, val), (rc, err))
rc, rows, err = run("tok.jsonl", mmproj=None)
check(rc == 1 and all("video needs a vision tower" in r.get("error", {}).get("message", "")
                      for r in rows), "no --mmproj: video records say what they need", rows)
rc, rows, err = run("--print-config")
check(rc == 0 and "video-timestamps" in (err + "".join(json.dumps(r) for r in rows)),
      "--print-config lists video-timestamps", err)

# ---- files mode, every modality, determinism ---------------------------------------------
open(p("list.txt"), "w").write("v43.mp4\nv169.webm\n")
rc, rows, err = run("--input", "files", "list.txt")
check(rc == 0 and [r.get("id") for r in rows] == ["v43.mp4", "v169.webm"]
      and all("embedding" in r for r in rows), "--input files: video paths are records",
      (rc, rows, err))
files_vecs = [r.get("embedding") for r in rows]

allfour = {"id": "all", "content": [{"type": "text", "text": "a scene "},
                                     {"type": "image", "path": IMAGE},
                                     {"type": "audio", "path": "one.wav"},
                                     {"type": "video", "path": "v169.webm"},
                                     {"type": "text", "text": " the end"}]}
put_jsonl("all.jsonl", [allfour])
rc, rows, err = run("--tokenize", "all.jsonl")
toks = rows[0].get("tokens", []) if rows else []
order = [t for t in toks if t in (vocab.index("<|image>"), vocab.index("<|audio>"))]
n_vid = toks.count(VID)
check(rc == 0 and n_vid == 240 and toks.count(vocab.index("<|audio|>")) == 25
      and toks.count(vocab.index("<|image|>")) > 0 and len(order) == 4,
      "text, image, audio and video in one record: all four blocks in order", (rc, err))
rc, rows, err = run("all.jsonl")
check(rc == 0 and "embedding" in rows[0], "text, image, audio and video in one record: a vector",
      (rc, rows, err))

put_jsonl("one.jsonl", [{"id": "v", "video": "v169.webm"}])
put_jsonl("batch.jsonl", [{"id": "t1", "text": "before"}, {"id": "v", "video": "v169.webm"},
                          {"id": "i", "image": IMAGE}, {"id": "t2", "text": "after"}])
_, alone, _ = run("one.jsonl")
_, batch, _ = run("batch.jsonl")
_, one_thread, _ = run("--threads", "1", "one.jsonl")
_, no_yield, _ = run("--no-yield", "batch.jsonl")
v = alone[0].get("embedding")
check(v is not None and batch[1].get("embedding") == v and one_thread[0].get("embedding") == v
      and no_yield[1].get("embedding") == v and files_vecs[1] == v,
      "the same bytes alone, in a batch, on 1 thread, with --no-yield and from --input files")

# ---- --bench FILE: the given records, media included, profiled per stage ------------------
recs = [{"id": "t", "text": "a text"}, {"id": "i", "image": IMAGE}, {"id": "a", "audio": "one.wav"},
        {"id": "v", "video": "v43.mp4"}, {"id": "bad", "image": "nope.jpg"}]
put_jsonl("bench.jsonl", recs)
_, tok_rows, _ = run("--tokenize", "bench.jsonl")
want_tokens = sum(len(r["tokens"]) for r in tok_rows if "tokens" in r)
r = subprocess.run([BIN, "-m", TEXT, "--mmproj", BOTH, "--bench", "--bench-reps", "2",
                    "--bench-json", os.path.abspath(p("bench.json")), "bench.jsonl"], cwd=d,
                   capture_output=True, text=True, timeout=300)
try:
    b = json.load(open(p("bench.json")))
    st = {k: v["seconds_mean"] for k, v in b["stages"].items()}
    ok = (r.returncode == 0 and b["input"]["records"] == 5 and b["input"]["failed"] == 1
          and (b["input"]["images"], b["input"]["clips"], b["input"]["videos"]) == (1, 1, 1)
          and b["input"]["tokens"] == want_tokens and b["cases"][0]["tokens"] == want_tokens
          and all(st[k] > 0 for k in ("decode_image", "decode_audio", "decode_video",
                                      "tokenize", "vision_tower", "audio_tower",
                                      "text_encoder", "pooling", "write", "wall"))
          and st["pooling"] < st["text_encoder"] < st["wall"]
          and b["image_operations"]["attention"]["gmac"] > 0
          and b["audio_operations"]["q8_gemm"]["gmac"] > 0
          and b["operations"]["q8_gemm"]["gmac"] > 0
          and all(s in r.stderr for s in ("decode video", "vision tower:", "audio tower:",
                                          "text encoder:", "5 records (1 failed)")))
except (OSError, ValueError, KeyError, IndexError) as e:
    ok, b = False, e
check(ok, "--bench FILE: images, audio and video records profiled per stage (decode, "
      "tokenize, each tower, the encoder, pooling, write) with per-kernel tables",
      (r.returncode, want_tokens, b, r.stderr[-800:]))
r = subprocess.run([BIN, "-m", TEXT, "--bench", "-"], cwd=d, capture_output=True, text=True,
                   input="{\"text\": \"x\"}\n", timeout=60)
check(r.returncode == 2 and "standard input" in r.stderr, "--bench on stdin: a usage error",
      (r.returncode, r.stderr))

print("test_video_cli: %d failed" % nfail)
sys.exit(1 if nfail else 0)
EOF
