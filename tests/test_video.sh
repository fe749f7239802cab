#!/usr/bin/env bash
# Video files made by ffmpeg from its lavfi test sources decode through engine/video_decode.c
# (tests/video_dump) as the reference sees them:
#   - MP4 (h264, mpeg4), MOV, MKV (h264), WebM (VP9, VP8), AVI (mpeg4); 3 s and 75 s; 4:3
#     (640x480) and 16:9 (1280x720; the 75 s one at 640x360, the same 384x720 target, to keep
#     the test near 40 s); 25 and 29.97 fps; BT.709-tagged and full-range streams;
#   - the metadata (frames, duration, fps) equals what tools/ref/video.py computes from
#     ffprobe's packet list as torchcodec's exact mode does, exactly;
#   - the sampled indices equal tools/ref/video.py's sample_frames (HF's), the timestamps
#     index / fps, the target size and soft tokens ge_image_plan's (4:3 -> 480x624, 130;
#     16:9 -> 384x720, 120);
#   - the frames at the source size equal the ffmpeg command's (select by frame number,
#     -pix_fmt rgb24) byte for byte, and the resized frames equal tools/ref/imageproc.py's
#     resize of those (3 s clips);
#   - seeking (auto, before every frame) and sequential decoding give the same bytes;
#   - ge_video_sample equals sample_frames on random inputs;
#   - a rotated stream is reported and not rotated; a 1-frame clip gives frame 0;
#   - bad inputs are clean errors (exit 1, "error: STATUS: ...", nothing on stderr): audio
#     only, text, zero length, a PNG, truncated MP4 and MKV, a damaged moov box, absurd
#     dimensions.
set -u
BUILD=${BUILD:-build/rel}
PYTHON=${PYTHON:-/usr/bin/python3}
OUT=${OUT:-build/test-out}
DUMP=$BUILD/tests/video_dump
[ -x "$DUMP" ] || { echo "FAIL: $DUMP not built (make tests)"; exit 1; }
for tool in ffmpeg ffprobe; do
    command -v $tool >/dev/null || { echo "FAIL: $tool not installed (tools/install-deps)"; exit 1; }
done
dir=$OUT/test_video_sh
rm -rf "$dir" && mkdir -p "$dir"
exec "$PYTHON" - "$DUMP" "$dir" <<'EOF'
import os, random, struct, subprocess, sys, time
import numpy as np
sys.path.insert(0, "tools/ref")
import imageproc
import video as ref

dump, d = sys.argv[1], sys.argv[2]
nfail = 0
def check(ok, name, detail=""):
    global nfail
    print(("PASS: %s" % name) if ok else ("FAIL: %s: %s" % (name, detail)))
    sys.stdout.flush()
    nfail += 0 if ok else 1

def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True)

def decode(path, *opts):
    """dict of the decode, or an error string"""
    out = path + ".rgb"
    r = run(dump, "decode", path, out, *opts)
    if r.returncode != 0 or r.stderr:
        return (r.stdout + r.stderr).strip()
    lines = r.stdout.split("\n")
    h = lines[0].split()
    v = dict(n=int(h[0]), th=int(h[1]), tw=int(h[2]), n_soft=int(h[3]), h=int(h[4]),
             w=int(h[5]), fps=float(h[6]), duration=float(h[7]), frames=int(h[8]),
             rotation=int(h[9]), format=h[10], codec=h[11])
    v["index"] = [int(x) for x in lines[1].split()]
    v["seconds"] = [float(x) for x in lines[2].split()]
    v["rgb"] = np.fromfile(out, np.uint8).reshape(v["n"], v["th"], v["tw"], 3)
    os.unlink(out)
    return v

def make(name, src, secs, size, rate, *enc):
    path = os.path.join(d, name)
    r = run("ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
            "%s=d=%s:s=%s:r=%s" % (src, secs, size, rate), *enc, path)
    if r.returncode != 0:
        check(False, "%s could be made" % name, r.stderr.strip())
        return None
    return path

X264 = ["-c:v", "libx264", "-pix_fmt", "yuv420p"]
FAST = X264 + ["-preset", "ultrafast"]
# (file, source, seconds, size, rate, encoder args, container, codec, compare resized frames)
clips = [
    ("a43.mp4", "testsrc2", 3, "640x480", 25, X264 + ["-g", "12"], "mp4", "h264", True),
    ("a169.mp4", "testsrc2", 3, "1280x720", "30000/1001", FAST, "mp4", "h264", True),
    ("m4.mp4", "smptebars", 3, "640x480", 25, ["-c:v", "mpeg4", "-g", "10"], "mp4", "mpeg4", True),
    ("a169.mov", "testsrc2", 3, "1280x720", 25, FAST, "mov", "h264", True),
    ("a43.mkv", "testsrc2", 3, "640x480", "30000/1001", X264, "matroska", "h264", True),
    ("v9.webm", "testsrc2", 3, "1280x720", "30000/1001", ["-c:v", "libvpx-vp9", "-deadline",
     "realtime", "-cpu-used", "8", "-b:v", "1M", "-g", "20"], "webm", "vp9", True),
    ("v8.webm", "smptebars", 3, "640x480", 25, ["-c:v", "libvpx", "-b:v", "1M"], "webm", "vp8", True),
    ("m4.avi", "testsrc2", 3, "640x480", 25, ["-c:v", "mpeg4", "-g", "12"], "avi", "mpeg4", True),
    ("bt709.mp4", "testsrc2", 3, "1280x720", 25, FAST + ["-colorspace", "bt709", "-color_primaries",
     "bt709", "-color_trc", "bt709"], "mp4", "h264", True),
    ("full.mp4", "testsrc2", 3, "640x480", 25, ["-c:v", "libx264", "-preset", "ultrafast",
     "-pix_fmt", "yuvj420p"], "mp4", "h264", True),
    ("long169.mp4", "testsrc2", 75, "640x360", "30000/1001", FAST + ["-g", "60", "-crf", "35"],
     "mp4", "h264", False),
    ("long43.mkv", "testsrc2", 75, "640x480", 25, FAST + ["-crf", "35"], "matroska", "h264", False),
]
tokens = {(480, 640): (480, 624, 130), (720, 1280): (384, 720, 120), (360, 640): (384, 720, 120)}
t0 = time.time()
for name, src, secs, size, rate, enc, fmt, codec, resized in clips:
    path = make(name, src, secs, size, rate, *enc)
    if not path:
        continue
    v = decode(path)
    if isinstance(v, str):
        check(False, "%s decodes" % name, v)
        continue
    m = ref.probe(path)
    ok = (v["frames"], v["duration"], v["fps"]) == (m["frames"], m["duration"], m["fps"])
    check(ok and (v["format"], v["codec"]) == (fmt, codec),
          "%s (%s, %s): %d frames, %.4f s, %.4f fps as the packet scan says" % (
              name, fmt, codec, m["frames"], m["duration"], m["fps"]),
          "%s/%s, %s vs %s" % (v["format"], v["codec"], (v["frames"], v["duration"], v["fps"]),
                               (m["frames"], m["duration"], m["fps"])))
    want = ref.sample_frames(m["duration"], m["fps"], m["frames"])
    ts = ref.timestamps(want, m["fps"])
    check(v["index"] == list(want) and v["seconds"] == ts,
          "%s: indices %s (sample_frames), timestamps index / fps" % (
              name, list(want) if len(want) <= 4 else "%d of them: %s ..." % (len(want), list(want[:4]))),
          "%s vs %s; %s vs %s" % (v["index"], list(want), v["seconds"][:4], ts[:4]))
    th, tw, ns = tokens[(v["h"], v["w"])]
    plan = imageproc.plan(v["h"], v["w"], 140)
    check((v["th"], v["tw"], v["n_soft"]) == (th, tw, ns) and tuple(plan[:2]) == (th, tw),
          "%s: %dx%d frames -> %dx%d, %d soft tokens each" % (name, v["w"], v["h"], tw, th, ns),
          "%dx%d, %d tokens; reference plan %s" % (v["tw"], v["th"], v["n_soft"], plan))
    raw = decode(path, "raw")
    theirs = ref.extract_rgb(path, v["index"])
    same = not isinstance(raw, str) and raw["rgb"].shape == theirs.shape and \
        np.array_equal(raw["rgb"], theirs)
    check(same, "%s: the %d frames equal the ffmpeg command's RGB byte for byte" % (name, v["n"]),
          raw if isinstance(raw, str) else "max diff %d" % np.abs(
              raw["rgb"].astype(int) - theirs.astype(int)).max())
    if resized:
        rs = np.stack([imageproc.resize_u8(f, th, tw) for f in theirs])
        check(np.array_equal(rs, v["rgb"]),
              "%s: the resized frames equal the reference resize of ffmpeg's frames" % name,
              "max diff %d" % np.abs(rs.astype(int) - v["rgb"].astype(int)).max())
    if name.startswith("long") or name in ("v9.webm", "m4.avi", "m4.mp4"):
        modes = {}
        for s in ("never", "always"):
            modes[s] = decode(path, "raw", "seek=" + s)
        ok = all(not isinstance(x, str) and np.array_equal(x["rgb"], raw["rgb"]) and
                 x["index"] == raw["index"] for x in modes.values())
        check(ok, "%s: seeking and sequential decoding give the same frames" % name,
              str({k: (x if isinstance(x, str) else "differs") for k, x in modes.items()}))
print("clips: %.1f s" % (time.time() - t0))

# the sampling on random metadata against sample_frames
rnd = random.Random(5)
bad = []
for t in range(150):
    F = rnd.choice([25.0, 30000 / 1001, 24000 / 1001, 60.0, 12.5, rnd.uniform(1, 120)])
    D = rnd.choice([rnd.uniform(0, 4000), rnd.randint(1, 300) / F * rnd.randint(1, 30),
                    rnd.uniform(0, 3)])
    N = max(1, int(round(D * F)) + rnd.choice([0, 0, -3, 2]))
    fps = rnd.choice([1, 1, 2, 0.5, 0.25, 3.3, 60])
    mx = rnd.choice([32, 32, 8, 1, 2, 100])
    r = run(dump, "sample", repr(D), repr(F), str(N), repr(fps), str(mx))
    want = " ".join(str(int(i)) for i in ref.sample_frames(D, F, N, fps, mx))
    if r.stdout.strip() != want:
        bad.append("%r %r %d %r %d: %s vs %s" % (D, F, N, fps, mx, r.stdout.strip()[:80], want[:80]))
check(not bad, "ge_video_sample equals sample_frames on 150 random inputs",
      "%d differ, first %s" % (len(bad), bad[:1]))

# a rotated stream: reported, not applied (ffmpeg -noautorotate's frames)
rot0 = make("rot0.mp4", "testsrc2", 1, "320x240", 25, *FAST)
rot = os.path.join(d, "rot.mp4")
if rot0 and run("ffmpeg", "-nostdin", "-loglevel", "error", "-i", rot0, "-c", "copy",
                "-metadata:s:v:0", "rotate=270", rot).returncode == 0:
    pr = run("ffprobe", "-v", "error", "-show_entries", "stream_side_data=rotation", "-of",
             "csv=p=0", rot).stdout.split()
    v = decode(rot, "raw")
    want = int(pr[0]) % 360 if pr else None
    ok = not isinstance(v, str) and want == 270 and v["rotation"] == want and \
        (v["h"], v["w"]) == (240, 320) and np.array_equal(v["rgb"], ref.extract_rgb(rot, v["index"]))
    check(ok, "a rotated stream: the rotation ffprobe reports (-90: 270), the frames as stored",
          v if isinstance(v, str) else "rotation %d (ffprobe %s), %dx%d" % (
              v["rotation"], pr, v["w"], v["h"]))
one = make("one.mp4", "testsrc2", 0.04, "640x480", 25, *X264)
if one:
    v = decode(one)
    check(not isinstance(v, str) and v["index"] == [0] and v["frames"] == 1 and v["n_soft"] == 130,
          "a 1-frame clip: frame 0", str(v)[:200])

# errors
def expect(path, want, name):
    r = run(dump, "decode", path, path + ".rgb")
    check(r.returncode == 1 and r.stdout.startswith("error: " + want) and r.stderr == "",
          "%s: a clean error (%s)" % (name, want),
          "rc %d: %s%s" % (r.returncode, r.stdout.strip(), r.stderr.strip()))

aud = os.path.join(d, "audio.m4a")
run("ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "sine=d=1", "-c:a", "aac", aud)
expect(aud, "unsupported: mp4: no video stream", "an audio-only M4A")
txt = os.path.join(d, "notes.mp4")
open(txt, "w").write("just text\n" * 20)
expect(txt, "unsupported: video: unsupported format", "a text file")
empty = os.path.join(d, "empty.mp4")
open(empty, "wb").close()
expect(empty, "format: video: empty file", "a zero-length file")
png = os.path.join(d, "still.png")
run("ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=s=64x48", "-frames:v", "1", png)
expect(png, "unsupported: video: a PNG image, not a video", "a PNG image")
fs = make("faststart.mp4", "testsrc2", 2, "320x240", 25, *(FAST + ["-movflags", "+faststart"]))
if fs:
    b = open(fs, "rb").read()
    cut = os.path.join(d, "cut.mp4")
    open(cut, "wb").write(b[:len(b) * 2 // 3])
    expect(cut, "format: mp4: truncated", "an MP4 cut at 2/3")
    bad_moov = bytearray(b)
    at = b.find(b"moov")
    bad_moov[at + 8:at + 200] = bytes(random.Random(1).randrange(256) for _ in range(192))
    p = os.path.join(d, "badmoov.mp4")
    open(p, "wb").write(bad_moov)
    expect(p, "format: mp4: no streams", "an MP4 with a damaged moov box")
mk = make("cut.mkv", "testsrc2", 2, "320x240", 25, *FAST)
if mk:
    b = open(mk, "rb").read()
    open(mk, "wb").write(b[:len(b) * 2 // 3])
    expect(mk, "format: matroska: truncated", "a Matroska file cut at 2/3")
# absurd dimensions: raw video in AVI with its BITMAPINFOHEADER size patched (sides over
# 16384; the pixel limit is the images' 64 Mpx)
for (w, h, what) in ((20000, 64, "20000x64"), (64, 16385, "64x16385")):
    big = make("big%d.avi" % w, "color", 0.2, "64x48", 5, "-c:v", "rawvideo", "-pix_fmt", "yuv420p")
    if big:
        b = bytearray(open(big, "rb").read())
        at = b.find(b"strf")
        b[at + 12:at + 20] = struct.pack("<ii", w, h)
        open(big, "wb").write(b)
        expect(big, "limit: avi: frames of %dx%d are too large" % (w, h), "an AVI of %s frames" % what)
sys.exit(1 if nfail else 0)
EOF
