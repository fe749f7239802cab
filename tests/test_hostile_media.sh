#!/usr/bin/env bash
# tests/test_hostile_media.sh - careless and hostile media inputs (issue 14): every bad input is
# one clear error record (code and message naming the item, the file and what it is), every
# other record of the run is written, and the run ends. Files are made at test time (ffmpeg,
# sox, PIL, and hand-written ISO BMFF headers: the sniffing needs only those):
#   - misclassified media: AVIF/HEIC/HEIF still images (real and hand-made ftyp boxes, major or
#     compatible brand) and GIF, BMP, TIFF, ICO, SVG, JPEG XL, JPEG 2000 are named unsupported
#     images in --input files, as "image", "video" and "audio"; an unknown ISO BMFF brand is a
#     container whose streams decide; content wins over the extension (an audio-only MP4 or
#     WebM in --input files is audio, the same vector as given as "audio"); a video's sound
#     given as "audio" is embedded (as librosa reads it), a video without sound as audio and
#     sound alone as video are named; zero-byte files and headers cut inside their signature;
#   - hostile sizes: a video planned at 1,024 frames of 1,120 tokens is too_long before any
#     frame memory exists (under a 3 GB address-space limit on the release build; the peak RSS
#     stays small), --tokenize stops at the plan; a second long clip in a record stops
#     decoding past what can fit ("at least");
#   - --audio-max-seconds is bounded by the model's context (exit 2 naming 327.53);
#   - special files: a FIFO, a directory, /dev/zero and /dev/stdin as media paths (JSONL field,
#     "content" item, --input files line) are "io" records saying what they are, with a
#     timeout so a blocking open fails instead of hanging; SIGTERM still ends such a run;
#   - JSONL messages: "content" as an object, number or null, a content item that is not an
#     object, without or with an unknown "type", with two sources, "text" beside "content".
set -u
cd "$(dirname "$0")/.." || exit 1
BIN=${BIN:-./gemmaembed}
PYTHON=${PYTHON:-/usr/bin/python3}
OUT=${OUT:-build/test-out}
for tool in ffmpeg sox; do
    command -v $tool >/dev/null || { echo "FAIL: $tool not installed (tools/install-deps)"; exit 1; }
done
dir=$OUT/test_hostile_media
rm -rf "$dir" && mkdir -p "$dir"
unset GEMMAEMBED_MODEL GEMMAEMBED_MMPROJ
exec "$PYTHON" - "$BIN" "$dir" <<'EOF'
import json, os, resource, signal, struct, subprocess, sys, time
sys.path.insert(0, "tests")
from selfcheck import run_rows, write_jsonl

BIN, d = os.path.abspath(sys.argv[1]), sys.argv[2]
TEXT, BOTH = (os.path.abspath("testdata/tiny-%s.gguf" % k) for k in ("q8_0", "mmproj-both-q8_0"))
SAN = "san" in BIN or "san" in os.environ.get("BUILD", "")
nfail = 0

def check(ok, name, detail=""):
    global nfail
    print(("PASS: %s" % name) if ok else ("FAIL: %s: %s" % (name, str(detail)[:800])))
    nfail += 0 if ok else 1

def run(*args, timeout=60):
    try:
        return run_rows([BIN, "-m", TEXT, "--mmproj", BOTH, *args], d, timeout)
    except subprocess.TimeoutExpired:
        return None, [], "timed out after %d s (blocked?)" % timeout

def p(name):
    return os.path.join(d, name)

def ffmpeg(*args):
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", *args], check=True, cwd=d)

def err_of(row):
    e = row.get("error") or {}
    return e.get("code"), e.get("message", "")

def rows_by_id(rows):
    return {r.get("id"): r for r in rows}

# ---- the files -----------------------------------------------------------------------------
def box(kind, payload):
    return struct.pack(">I", 8 + len(payload)) + kind + payload

def ftyp(major, *compat):
    return box(b"ftyp", major + b"\0\0\0\0" + b"".join(compat))

META = box(b"meta", b"\0\0\0\0" + box(b"hdlr", bytes(8) + b"pict" + bytes(13)))
heif = {"h-avif.avif": (ftyp(b"avif", b"avif", b"mif1", b"miaf"), "AVIF"),
        "h-mif1avif.bin": (ftyp(b"mif1", b"mif1", b"avif"), "AVIF"),  # major mif1, AVIF by compat
        "h-heic.heic": (ftyp(b"heic", b"mif1", b"heic"), "HEIC"),
        "h-heif.heif": (ftyp(b"mif1", b"mif1"), "HEIF"),
        "h-avis.avif": (ftyp(b"avis", b"avis", b"msf1"), "AVIF"),      # an AVIF image sequence
        "h-unkmajor.bin": (ftyp(b"zzzz", b"heic", b"mif1"), "HEIC")}   # unknown major, compat
for name, (head, _) in heif.items():
    open(p(name), "wb").write(head + META)
named = {k: v[1] for k, v in heif.items()}
try:  # a real AVIF, when this ffmpeg can write one
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=64x48", "-frames:v", "1", "-c:v", "libaom-av1",
           "-still-picture", "1", "real.avif")
    named["real.avif"] = "AVIF"
except subprocess.CalledProcessError:
    print("note: ffmpeg cannot write AVIF here; hand-made headers only")

from PIL import Image
im = Image.new("RGB", (32, 24), (200, 40, 40))
for fmt, name in (("GIF", "x.gif"), ("BMP", "x.bmp"), ("TIFF", "x.tiff"), ("ICO", "x.ico")):
    im.save(p(name), fmt)
    named[name] = fmt
im.save(p("good.png"), "PNG")
open(p("x.svg"), "w").write('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
                            'width="4" height="4"><rect width="4" height="4"/></svg>\n')
named["x.svg"] = "SVG"
open(p("x.jxl"), "wb").write(b"\xff\x0a" + bytes(30))                       # JPEG XL codestream
open(p("x-box.jxl"), "wb").write(b"\0\0\0\x0cJXL \r\n\x87\n" + bytes(30))  # JPEG XL container
open(p("x.jp2"), "wb").write(b"\0\0\0\x0cjP  \r\n\x87\n" + ftyp(b"jp2 ", b"jp2 ") + bytes(20))
named.update({"x.jxl": "JPEG XL", "x-box.jxl": "JPEG XL", "x.jp2": "JPEG 2000"})

ffmpeg("-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25", "-f", "lavfi", "-i",
       "sine=frequency=440:duration=2", "-t", "2", "-c:v", "mpeg4", "-c:a", "aac",
       "-shortest", "av.mp4")                                            # video with sound
ffmpeg("-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25", "-t", "2", "-c:v", "mpeg4",
       "vonly.mp4")                                                      # video without sound
ffmpeg("-f", "lavfi", "-i", "sine=frequency=330:duration=1", "-c:a", "aac", "aonly.mp4")
ffmpeg("-f", "lavfi", "-i", "sine=frequency=330:duration=1", "-c:a", "aac", "-f", "ipod",
       "aonly.m4a")                                                      # brand M4A
ffmpeg("-f", "lavfi", "-i", "sine=frequency=550:duration=1", "-c:a", "libopus", "aonly.webm")
try:  # Ogg holds video too (Theora): named, not taken for Ogg audio
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25", "-t", "1", "-c:v", "libtheora",
           "theora.ogv")
    theora = True
except subprocess.CalledProcessError:
    theora = False
    print("note: no libtheora encoder here; the Ogg video case is skipped")
subprocess.run(["sox", "-n", "-r", "16000", "-c", "1", "-b", "16", p("tone.wav"), "synth", "1",
                "sine", "440", "vol", "0.3"], check=True)
b = open(p("vonly.mp4"), "rb").read()
at = b.index(b"ftyp") + 4
open(p("zzzz.mp4"), "wb").write(b[:at] + b"zzzz" + b[at + 4:])           # unknown major brand
# content against the extension
for src, dst in (("good.png", "img.mp4"), ("tone.wav", "snd.jpg"), ("aonly.mp4", "song.mp4"),
                 ("aonly.webm", "song.webm"), ("av.mp4", "clip.m4a")):
    open(p(dst), "wb").write(open(p(src), "rb").read())
open(p("empty.dat"), "wb").close()
open(p("empty.png"), "wb").close()
open(p("cut.png"), "wb").write(b"\x89PNG\r")                            # ends in the signature
open(p("cut.mp4"), "wb").write(b"\0\0\0\x20ftyp" + b"is")                 # ... in the brands
os.mkfifo(p("fifo"))
os.mkdir(p("adir"))

# ---- 1. misclassified media ----------------------------------------------------------------
names = sorted(named)
open(p("imgs.txt"), "w").write("\n".join(names + ["good.png"]) + "\n")
rc, rows, err = run("--input", "files", "imgs.txt")
bad = [(n, r) for n, r in zip(names, rows) if err_of(r) != ("unsupported", "imgs.txt:%d: %s: %s "
       "image: not supported (JPEG, PNG, WebP are)" % (names.index(n) + 1, n, named[n]))]
check(rc == 1 and len(rows) == len(names) + 1 and not bad and "embedding" in rows[-1],
      "--input files: AVIF/HEIC/HEIF, GIF, BMP, TIFF, ICO, SVG, JPEG XL, JPEG 2000 are named "
      "unsupported images; the PNG after them is embedded", (rc, bad[:3], rows[-1:], err))

recs = []
for n in names:
    recs += [{"id": "i:" + n, "image": n}, {"id": "v:" + n, "video": n},
             {"id": "a:" + n, "audio": n}]
recs.append({"id": "ok", "content": [{"type": "text", "text": "a red card "},
                                     {"type": "image", "path": "good.png"}]})
write_jsonl(p("imgs.jsonl"), recs)
rc, rows, err = run("imgs.jsonl")
got = rows_by_id(rows)
wrong = []
for n in names:
    kind = named[n]
    want = {"i:": "%s image: not supported (JPEG, PNG, WebP are)" % kind,
            "v:": ", not a video (and %s images are not supported" % kind,
            "a:": ", not audio"}
    for pre, frag in want.items():
        c, m = err_of(got.get(pre + n, {}))
        if c != "unsupported" or frag not in m or "(%s)" % n not in m or "moov" in m:
            wrong.append((pre + n, c, m))
check(rc == 1 and [r.get("id") for r in rows] == [r["id"] for r in recs] and not wrong
      and "embedding" in got["ok"],
      "as \"image\", \"video\" and \"audio\": each named (never FFmpeg's \"moov atom not found\"); "
      "the good record is embedded", (rc, wrong[:4], err))

# what the reference does with the wrong kind of sound/video file, and unknown brands
write_jsonl(p("mix.jsonl"), [
    {"id": "sound-as-video", "video": "aonly.mp4"}, {"id": "webm-as-video", "video": "aonly.webm"},
    {"id": "m4a-as-video", "video": "aonly.m4a"}, {"id": "silent-as-audio", "audio": "vonly.mp4"},
    {"id": "wav-as-video", "video": "tone.wav"}, {"id": "av-as-audio", "audio": "av.mp4"},
    {"id": "av-sound", "audio": "aonly.mp4"}, {"id": "zzzz", "video": "zzzz.mp4"},
    {"id": "vonly", "video": "vonly.mp4"}] +
    ([{"id": "theora-as-video", "video": "theora.ogv"},
      {"id": "theora-as-audio", "audio": "theora.ogv"}] if theora else []))
rc, rows, err = run("mix.jsonl")
g = rows_by_id(rows)
want = {"sound-as-video": "no video stream (audio only", "webm-as-video": "no video stream (audio only",
        "m4a-as-video": "no video stream (audio only", "silent-as-audio": "no audio stream (a video "
        "without sound", "wav-as-video": "video: WAV audio, not a video"}
if theora:
    want.update({"theora-as-video": "unsupported format: an Ogg video (Theora)",
                 "theora-as-audio": "no audio stream (a video without sound"})
wrong = [(k, err_of(g.get(k, {}))) for k, m in want.items()
         if err_of(g.get(k, {}))[0] != "unsupported" or m not in err_of(g.get(k, {}))[1]]
check(rc == 1 and not wrong and all("embedding" in g.get(k, {}) for k in ("av-as-audio", "zzzz")),
      "sound alone as video, a silent video or Ogg Theora as audio, a WAV or Ogg Theora as "
      "video: named; a video's sound as "
      "audio is embedded (as librosa reads it), an unknown ISO BMFF brand is read as a container",
      (rc, wrong, {k: err_of(g.get(k, {})) for k in ("av-as-audio", "zzzz")}))

# content wins over the extension and the container's label: the same vector as given rightly
open(p("wins.txt"), "w").write("img.mp4\nsnd.jpg\nsong.mp4\nsong.webm\nclip.m4a\nzzzz.mp4\n")
rc, rows, err = run("--input", "files", "wins.txt")
write_jsonl(p("wins.jsonl"), [{"id": "img.mp4", "image": "good.png"},
                              {"id": "snd.jpg", "audio": "tone.wav"},
                              {"id": "song.mp4", "audio": "aonly.mp4"},
                              {"id": "song.webm", "audio": "aonly.webm"},
                              {"id": "clip.m4a", "video": "av.mp4"},
                              {"id": "zzzz.mp4", "video": "vonly.mp4"}])
rc2, ref, err2 = run("wins.jsonl")
check(rc == 0 and rc2 == 0 and len(rows) == 6 and
      [r.get("embedding") for r in rows] == [r.get("embedding") for r in ref],
      "--input files: content wins (a PNG named .mp4, a WAV named .jpg, audio-only MP4 and WebM, "
      "a video named .m4a, an unknown brand): the vectors of the right kinds",
      (rc, [err_of(r) for r in rows], err, rc2, err2))

# zero bytes, and headers that end inside their signature
open(p("short.txt"), "w").write("empty.dat\nempty.png\ncut.png\ncut.mp4\ngood.png\n")
rc, rows, err = run("--input", "files", "short.txt")
write_jsonl(p("short.jsonl"), [{"id": 1, "image": "empty.png"}, {"id": 2, "audio": "empty.dat"},
                               {"id": 3, "video": "empty.dat"}, {"id": 4, "image": "cut.png"},
                               {"id": 5, "video": "cut.mp4"}, {"id": 6, "audio": "cut.png"},
                               {"id": 7, "image": "good.png"}])
rc2, rows2, err2 = run("short.jsonl")
e1 = [err_of(r) for r in rows[:4]]
e2 = [err_of(r) for r in rows2[:6]]
check(rc == 1 and rc2 == 1 and len(rows) == 5 and len(rows2) == 7 and
      all(c == "format" and "empty file" in m for c, m in e1[:2] + e2[:3]) and
      all(c == "format" and "truncated: the file ends after" in m for c, m in e1[2:] + e2[3:]) and
      "embedding" in rows[4] and "embedding" in rows2[6],
      "zero-byte files and headers cut inside their signature: format errors saying so "
      "(--input files and JSONL), whatever the extension", (e1, e2, err, err2))

# ---- 2. hostile sizes ----------------------------------------------------------------------
ffmpeg("-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25", "-t", "41", "-c:v", "mpeg4",
       "-q:v", "8", "long.mp4")  # 1,025 frames at 25 fps
write_jsonl(p("plan.jsonl"), [{"id": "big", "video": "long.mp4"}, {"id": "t", "text": "fine"}])

def limited():  # the release build: 7.5 GB of frames would fail here, not eat the machine
    if not SAN:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

def run_limited(*args):
    r = subprocess.run([BIN, "-m", TEXT, "--mmproj", BOTH, *args], cwd=d, capture_output=True,
                       text=True, timeout=120, preexec_fn=limited)
    return r.returncode, [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")], r.stderr

PLAN = ["--video-fps", "25", "--video-frames", "1024", "--video-tokens", "1120"]
before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
t0 = time.time()
rc, rows, err = run_limited(*PLAN, "plan.jsonl")
secs = time.time() - t0
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KB, the largest child so far
c, m = err_of(rows[0]) if rows else (None, "")
check(rc == 1 and c == "too_long" and "1024 frames x" in m and len(rows) == 2
      and "embedding" in rows[1] and (SAN or peak < 1 << 20),
      "a video planned at 1,024 frames x 1,120 tokens: too_long before any frame memory "
      "(%.1f s, peak RSS %d MB), the text after it embedded" % (secs, peak >> 10),
      (rc, rows[:1], err[-300:], peak))
rc, rows, err = run_limited(*PLAN, "--tokenize", "plan.jsonl")
toks = rows[0].get("tokens", []) if rows else []
check(rc == 0 and len(rows) == 2 and len(toks) > 1024 * 1000,
      "--tokenize: the same plan is counted without decoding its frames", (rc, len(toks), err[-300:]))

subprocess.run(["sox", "-n", "-r", "16000", "-c", "1", "-b", "16", p("five.wav"), "synth", "300",
                "sine", "440", "vol", "0.3"], check=True)  # 300 s: 7,500 tokens
write_jsonl(p("two.jsonl"), [{"id": "two", "content": [{"type": "audio", "path": "five.wav"},
                                                       {"type": "audio", "path": "five.wav"}]},
                             {"id": "t", "text": "fine"}])
rc, rows, err = run("--audio-max-seconds", "320", "two.jsonl")
c, m = err_of(rows[0]) if rows else (None, "")
check(rc == 1 and c == "too_long" and "at least" in m and "audio item 1: 7502" in m
      and len(rows) == 2 and "embedding" in rows[1],
      "two 300 s clips in one record: the second is decoded only past what fits, too_long "
      "\"at least\"", (rc, rows[:1], err))

# ---- 3. --audio-max-seconds ----------------------------------------------------------------
outs = []
for v in ("3600", "400", "327.54"):
    r = subprocess.run([BIN, "-m", TEXT, "--audio-max-seconds", v], input="hello\n",
                       capture_output=True, text=True, timeout=30)
    outs.append((v, r.returncode, r.stderr.strip()))
r = subprocess.run([BIN, "-m", TEXT, "--audio-max-seconds", "327.53"], input="hello\n",
                   capture_output=True, text=True, timeout=30)
check(all(rc == 2 and "--audio-max-seconds" in e and "at most 327.53" in e for _, rc, e in outs)
      and r.returncode == 0 and r.stdout.startswith("{"),
      "--audio-max-seconds over what fits 8192 tokens: exit 2 naming 327.53; 327.53 is accepted",
      (outs, r.returncode, r.stderr))

# ---- 4. special files ----------------------------------------------------------------------
SPECIAL = [("fifo", "a FIFO"), ("adir", "a directory"), ("/dev/zero", "a character device")]
recs = []
for path, _ in SPECIAL:
    recs += [{"id": "i" + path, "image": path}, {"id": "a" + path, "audio": path},
             {"id": "v" + path, "video": path},
             {"id": "c" + path, "content": [{"type": "text", "text": "x"},
                                            {"type": "image", "path": path}]}]
recs.append({"id": "ok", "image": "good.png"})
write_jsonl(p("special.jsonl"), recs)
rc, rows, err = run("special.jsonl", timeout=30)
g = rows_by_id(rows)
wrong = [(r["id"], err_of(g.get(r["id"], {}))) for r in recs[:-1]
         if err_of(g.get(r["id"], {}))[0] != "io" or
         not any(w + " (only regular files are read)" in err_of(g.get(r["id"], {}))[1]
                 and "(%s)" % path in err_of(g.get(r["id"], {}))[1] for path, w in SPECIAL)]
check(rc == 1 and len(rows) == len(recs) and not wrong and "embedding" in g.get("ok", {}),
      "a FIFO, a directory and /dev/zero as image, audio, video and content item: io records "
      "saying what they are, the run ends, the good record is written", (rc, wrong[:3], err))

open(p("special.txt"), "w").write("fifo\nadir\n/dev/zero\n/dev/stdin\ngood.png\n")
try:
    r = subprocess.run([BIN, "-m", TEXT, "--mmproj", BOTH, "--input", "files", "special.txt"],
                       cwd=d, capture_output=True, text=True, timeout=30, input="")
    rows = [json.loads(l) for l in r.stdout.splitlines()]
    rc = r.returncode
except subprocess.TimeoutExpired:
    rc, rows = None, []
es = [err_of(x) for x in rows[:4]]
check(rc == 1 and len(rows) == 5 and all(c == "io" for c, _ in es) and "a FIFO" in es[0][1]
      and "a directory" in es[1][1] and "a character device" in es[2][1] and "a FIFO" in es[3][1]
      and "embedding" in rows[4],
      "--input files: a FIFO, a directory, /dev/zero, /dev/stdin (a pipe) are io records; the "
      "run ends", (rc, es))

# SIGTERM while the input is still open and a FIFO record was read: the run stops
proc = subprocess.Popen([BIN, "-m", TEXT, "--mmproj", BOTH], cwd=d, stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
proc.stdin.write(b'{"id": 1, "image": "fifo"}\n{"id": 2, "text": "after"}\n')
proc.stdin.flush()
time.sleep(1.5)
proc.send_signal(signal.SIGTERM)
try:
    out, e = proc.communicate(timeout=15)
    rc = proc.returncode
except subprocess.TimeoutExpired:
    proc.kill()
    out, e = proc.communicate()
    rc = None
lines = out.decode().splitlines()
check(rc == 128 + signal.SIGTERM and len(lines) == 2 and '"io"' in lines[0]
      and "embedding" in lines[1],
      "SIGTERM after a FIFO record: both records written, exit 143", (rc, lines, e[-300:]))

# ---- 5. JSONL messages ---------------------------------------------------------------------
cases = [
    ({"content": {"type": "text", "text": "hi"}}, '"content" must be a string (the text) or an array of items', "not an object"),
    ({"content": 3}, '"content" must be a string', "not a number"),
    ({"content": None}, 'record has no "text" (nor "content")', ""),
    ({"image": "good.png", "content": {"a": 1}}, '"content" must be a string', "not an object"),
    ({"content": ["hello"]}, "content item 1 must be an object", "not a string"),
    ({"content": [{"text": "x"}]}, 'content item 1 needs a "type"', ""),
    ({"content": [{"type": 7}]}, 'content item 1 needs a "type"', "not a number"),
    ({"content": [{"type": "gif", "path": "x"}]}, 'content item 1: unknown "type" "gif"', ""),
    ({"content": [{"type": "image", "path": "good.png", "data": "AAAA"}]},
     'content item 1 (image) has both "path" and "data"', ""),
    ({"content": [{"type": "text", "text": "a"}, {"type": "audio", "url": "a.wav", "audio": "b"}]},
     'content item 2 (audio) has both "url" and "audio"', ""),
    ({"text": "a", "content": "b"}, 'either "text" or "content", not both', ""),
    ({"image": "good.png", "content": [{"type": "text", "text": "x"}]},
     'either a "content" array or "image", not both', ""),
]
recs = [dict(c, id=k) for k, (c, _, _) in enumerate(cases)] + [{"id": "ok", "content": "fine"}]
write_jsonl(p("msgs.jsonl"), recs)
rc, rows, err = run("msgs.jsonl")
wrong = [(r.get("id"), err_of(r)) for r, (_, a, b) in zip(rows, cases)
         if err_of(r)[0] != "bad_record" or a not in err_of(r)[1] or b not in err_of(r)[1]]
check(rc == 1 and len(rows) == len(recs) and not wrong and "embedding" in rows[-1],
      "JSONL: \"content\" as an object/number/null, items that are not objects, without or with "
      "an unknown type, with two sources, \"text\" beside \"content\": the right messages",
      (rc, wrong, err))

print("test_hostile_media: %d failed" % nfail)
sys.exit(1 if nfail else 0)
EOF
