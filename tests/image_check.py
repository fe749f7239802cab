"""tests/image_check.py BIN OUT - image records end to end, the live checks: the vectors
themselves are checked against the stored float64 goldens by tests/image_golden_check.py.

On the committed images of testdata/images/ (tools/ref/mkimages) and the tiny Q8_0 models:
--yield and --no-yield give the same bytes; `--input files` embeds each listed image as the record {"image": path}; SIGINT among image
records stops (exit 130) and --resume completes the output byte for byte; bad images (corrupt,
truncated, empty, not an image, a GIF, huge dimensions, a missing file, invalid base64) mixed
with good records give one error record each naming its line and cause, every good record as
when run alone, exit status 1."""
import base64
import json
import os
import signal
import subprocess
import sys
import time
import zlib

from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN, OUT = sys.argv[1], os.path.join(sys.argv[2], "images")
os.makedirs(OUT, exist_ok=True)
failed = 0


def check(ok, name, detail=""):
    global failed
    print("PASS: %s" % name if ok else "FAIL: %s: %s" % (name, detail))
    failed += not ok


def path(name):
    return os.path.join(OUT, name)


# under the sanitizers (tests/run exports SAN=1) the long runs take smaller budgets: the same
# code, a fraction of the work (the 560 run of 12 images took minutes there)
SAN = os.environ.get("SAN") == "1"
BIG, BIGGER = (70, 140) if SAN else (280, 560)

IMAGES = os.path.join(ROOT, "testdata", "images")
GOOD = [os.path.join(IMAGES, n) for n in
        ("landscape.jpg", "portrait.png", "square.webp", "tiny.png", "grey.png",
         "palette-alpha.png", "exif6.jpg", "exif8.webp", "rgb16.png", "banner.png")]
with open(path("records.jsonl"), "w") as f:
    for p in GOOD:
        f.write(json.dumps({"id": os.path.basename(p), "image": p}) + "\n")


def gemmaembed(kind, budget, *extra, src=None):
    args = [BIN, "-m", os.path.join(ROOT, "testdata", "tiny-%s.gguf" % kind), "--mmproj",
            os.path.join(ROOT, "testdata", "tiny-mmproj-%s.gguf" % kind),
            "--image-tokens", str(budget)] + list(extra) + [src or path("records.jsonl")]
    r = subprocess.run(args, capture_output=True, text=True)
    return r.returncode, [json.loads(l) for l in r.stdout.splitlines()], r.stderr


# ---- --yield: the text records before an image run between its tower's layers ---------------
YIELD = [p for p in GOOD if not p.endswith("banner.png")]  # banner at 280: a limit error
with open(path("yield.jsonl"), "w") as f:
    for i, p in enumerate(YIELD):
        for k in range(40):
            f.write(json.dumps({"id": "t%d.%d" % (i, k), "text": "caption %d of %s"
                                % (k, os.path.basename(p))}) + "\n")
        f.write(json.dumps({"id": os.path.basename(p), "image": p}) + "\n")
rc, on, err = gemmaembed("q8_0", BIG, "--yield", src=path("yield.jsonl"))
rc2, off, err2 = gemmaembed("q8_0", BIG, "--no-yield", src=path("yield.jsonl"))
check(rc == 0 and rc2 == 0 and len(on) == 41 * len(YIELD) and on == off,
      "--yield and --no-yield: the same %d records, byte for byte" % len(on),
      "rc %d/%d %s %s" % (rc, rc2, err[-200:], err2[-200:]))

# ---- --input files: a list of image paths, each embedded as that image alone ---------------
with open(path("list.txt"), "w") as f:
    f.write("\n".join(GOOD) + "\n")
rc, got, err = gemmaembed("q8_0", 70, "--input", "files", src=path("list.txt"))
rc2, want, _ = gemmaembed("q8_0", 70, src=path("records.jsonl"))
check(rc == 0 and rc2 == 0 and len(want) == len(GOOD)
      and [g["embedding"] for g in got] == [w["embedding"] for w in want]
      and [g["id"] for g in got] == GOOD,
      "--input files: each image as the record {\"image\": path}, id = the path",
      "rc %d: %s" % (rc, err[-200:]))

# ---- SIGINT while images are being encoded: exit 130, and --resume completes the output ----
# (how many rows are written first depends on how the decode stage's pace shaped the windows,
# so only the stop and the resume are checked here)
with open(path("many.jsonl"), "w") as f:
    for i in range(12):
        f.write(json.dumps({"id": i, "image": GOOD[i % 3]}) + "\n")
args = [BIN, "-m", os.path.join(ROOT, "testdata", "tiny-q8_0.gguf"), "--mmproj",
        os.path.join(ROOT, "testdata", "tiny-mmproj-q8_0.gguf"), "--image-tokens", str(BIGGER),
        path("many.jsonl"), "-o"]
subprocess.run(args + [path("many-full.jsonl")], capture_output=True)
p = subprocess.Popen(args + [path("many-cut.jsonl")], stderr=subprocess.PIPE)
time.sleep(1.0)
p.send_signal(signal.SIGINT)
p.wait(timeout=600)
rows = sum(1 for _ in open(path("many-cut.jsonl")))
subprocess.run(args + [path("many-cut.jsonl"), "--resume"], capture_output=True)
same = open(path("many-cut.jsonl"), "rb").read() == open(path("many-full.jsonl"), "rb").read()
check(p.returncode == 130 and rows < 12 and same,
      "SIGINT among image records: exit 130 after %d of 12 rows; --resume completes the output "
      "byte for byte" % rows, "rc %s, rows %d, same %s" % (p.returncode, rows, same))

# ---- bad images among good records -----------------------------------------------------------
with open(os.path.join(IMAGES, "portrait.png"), "rb") as f:
    png = f.read()
with open(os.path.join(IMAGES, "landscape.jpg"), "rb") as f:
    jpg = f.read()
open(path("truncated.jpg"), "wb").write(jpg[:len(jpg) // 2])
open(path("truncated.png"), "wb").write(png[:len(png) // 3])
corrupt = bytearray(png)
corrupt[100:200] = bytes(100)
open(path("corrupt.png"), "wb").write(bytes(corrupt))
open(path("empty.jpg"), "wb").close()
open(path("text.png"), "w").write("this is not an image\n")
Image.new("RGB", (8, 8)).save(path("image.gif"))
huge = bytearray(png[:33])  # a PNG header claiming 100000 x 100000 pixels (CRC fixed up)
huge[16:24] = (100000).to_bytes(4, "big") * 2
huge[29:33] = zlib.crc32(bytes(huge[12:29])).to_bytes(4, "big")
open(path("huge.png"), "wb").write(bytes(huge) + png[33:])
BAD = [("truncated.jpg", "io|format"), ("truncated.png", "io|format"), ("corrupt.png", "format"),
       ("empty.jpg", "format|io"), ("text.png", "unsupported|format"),
       ("image.gif", "unsupported"), ("huge.png", "limit"), ("missing.png", "io")]
mixed, expect = [], []
for i, name in enumerate(GOOD[:6]):
    mixed.append({"id": "good-%d" % i, "image": name, "text": "caption %d" % i})
    expect.append(None)
    if i < len(BAD):
        mixed.append({"id": "bad-" + BAD[i][0], "image": path(BAD[i][0])})
        expect.append(BAD[i][1])
for name, codes in BAD[6:]:
    mixed.append({"id": "bad-" + name, "image": path(name)})
    expect.append(codes)
mixed.append({"id": "bad-base64", "image_b64": "not base64!"})
expect.append("bad_record")
mixed.append({"id": "good-inline", "image_b64": base64.b64encode(png).decode()})
expect.append(None)
with open(path("mixed.jsonl"), "w") as f:
    for r in mixed:
        f.write(json.dumps(r) + "\n")
rc, got, err = gemmaembed("q8_0", 70, src=path("mixed.jsonl"))
check(rc == 1 and len(got) == len(mixed), "bad images: exit 1, one record out per record in",
      "rc %d, %d of %d: %s" % (rc, len(got), len(mixed), err[-300:]))
for line, (g, want, r) in enumerate(zip(got, expect, mixed), 1):
    if want is None:
        continue
    e = g.get("error", {})
    ok = e.get("code") in want.split("|") and (":%d: " % line) in e.get("message", "")
    check(ok, "bad image %s: one error record, code %s, naming line %d" % (r["id"], want, line),
          json.dumps(g)[:300])
alone = []
for r in mixed:
    if r["id"].startswith("good"):
        with open(path("alone.jsonl"), "w") as f:
            f.write(json.dumps(r) + "\n")
        alone.append(gemmaembed("q8_0", 70, src=path("alone.jsonl"))[1][0])
good = [g for g in got if str(g["id"]).startswith("good")]
check(len(good) == len(alone) and all(a == b for a, b in zip(good, alone)),
      "bad images: every good record equals its vector alone (%d)" % len(alone),
      "differs")
sys.exit(1 if failed else 0)
