"""tests/image_check.py BIN OUT - image records end to end against the float64 NumPy reference
(tools/ref/embed_media.py with tools/ref/vision.py and tools/ref/imageproc.py).

Images written with python3-pil (landscape, portrait, square, a tiny 10x10, grey, a palette
PNG with alpha, EXIF-rotated JPEGs, lossy and lossless WebP) in records of every form (an
image alone, an image and its caption, content arrays mixing texts and images, manual
<|image|> placeholders, several images, a prompt), at budgets 70 and 280, on the tiny f32
and Q8_0 models: per record cosine >= 0.99999 (f32 weights, fast and reference towers) and
>= 0.999 (Q8_0), the image blocks' soft-token counts exactly the reference's. Then bad images
(corrupt, truncated, empty, not an image, huge dimensions, a missing file, invalid base64)
mixed with good records: one error record each naming its line and cause, every good record
as when run alone, exit status 1."""
import base64
import json
import os
import signal
import subprocess
import sys
import time
import zlib

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN, OUT = sys.argv[1], os.path.join(sys.argv[2], "images")
os.makedirs(OUT, exist_ok=True)
PY = sys.executable
failed = 0


def check(ok, name, detail=""):
    global failed
    print("PASS: %s" % name if ok else "FAIL: %s: %s" % (name, detail))
    failed += not ok


def path(name):
    return os.path.join(OUT, name)


# ---- images --------------------------------------------------------------------------------
rng = np.random.default_rng(11)


def smooth(h, w, c=3):
    """A smooth random picture (resizing noise would test nothing but rounding)."""
    y, x = np.mgrid[0:h, 0:w] / max(h, w)
    out = np.zeros((h, w, c))
    for k in range(c):
        a, b, p = rng.random(3) * 6
        out[..., k] = 127.5 + 120 * np.sin(a * x + b * y + p) * np.cos(b * x - a * y)
    return np.clip(out, 0, 255).astype(np.uint8)


Image.fromarray(smooth(300, 500)).save(path("landscape.png"))
Image.fromarray(smooth(640, 360)).save(path("portrait.jpg"), quality=92)
Image.fromarray(smooth(256, 256)).save(path("square.webp"), quality=90)
Image.fromarray(smooth(256, 256)).save(path("square-lossless.webp"), lossless=True)
Image.fromarray(smooth(10, 10)).save(path("tiny.png"))
Image.fromarray(smooth(200, 150, 1)[..., 0], "L").save(path("grey.png"))
rgba = np.concatenate([smooth(120, 180), smooth(120, 180, 1)], axis=2)
Image.fromarray(rgba, "RGBA").quantize(64).save(path("palette-alpha.png"))
for o in (3, 6, 8):
    exif = Image.Exif()
    exif[0x0112] = o
    Image.fromarray(smooth(180, 320)).save(path("exif-%d.jpg" % o), quality=90, exif=exif)
GOOD = ["landscape.png", "portrait.jpg", "square.webp", "square-lossless.webp", "tiny.png",
        "grey.png", "palette-alpha.png", "exif-3.jpg", "exif-6.jpg", "exif-8.jpg"]

records = []
for name in GOOD:
    records.append({"id": name, "image": path(name)})
records += [
    {"id": "caption", "image": path("portrait.jpg"), "text": "a photo of the river"},
    {"id": "content", "content": [{"type": "text", "text": "Product photo:"},
                                  {"type": "image", "path": path("square.webp")},
                                  {"type": "text", "text": " next to "},
                                  {"type": "image", "image": path("grey.png")}]},
    {"id": "manual", "image": [path("tiny.png"), path("exif-6.jpg")],
     "text": "first <|image|> and then <|image|> at the end"},
    {"id": "two", "image": [path("landscape.png"), path("palette-alpha.png")],
     "text": "two pictures"},
    {"id": "prompt", "image": path("landscape.png"), "prompt": "query"},
    {"id": "text-only", "text": "a record without images between them"},
]
with open(path("records.jsonl"), "w") as f:
    for r in records:
        f.write(json.dumps(r) + "\n")


def gemmaembed(kind, budget, *extra, src=None):
    args = [BIN, "-m", os.path.join(ROOT, "testdata", "tiny-%s.gguf" % kind), "--mmproj",
            os.path.join(ROOT, "testdata", "tiny-mmproj-%s.gguf" % kind),
            "--image-tokens", str(budget)] + list(extra) + [src or path("records.jsonl")]
    r = subprocess.run(args, capture_output=True, text=True)
    return r.returncode, [json.loads(l) for l in r.stdout.splitlines()], r.stderr


def reference(kind, budget):
    r = subprocess.run([PY, os.path.join(ROOT, "tools", "ref", "embed_media.py"), "-m",
                        os.path.join(ROOT, "testdata", "tiny-%s.gguf" % kind), "--mmproj",
                        os.path.join(ROOT, "testdata", "tiny-mmproj-%s.gguf" % kind),
                        "--budget", str(budget), path("records.jsonl")],
                       capture_output=True, text=True)
    return [json.loads(l) for l in r.stdout.splitlines()], r.stderr


def cos(a, b):
    a, b = np.array(a), np.array(b)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


for budget in (70, 280):
    for kind in ("f32", "q8_0"):
        ref, err = reference(kind, budget)
        if len(ref) != len(records) or any("embedding" not in r for r in ref):
            check(False, "reference %s budget %d" % (kind, budget), err[-300:])
            continue
        # the ids, image blocks included, equal the reference's: so do the soft-token counts
        rc, toks, err = gemmaembed(kind, budget, "--tokenize")
        counts_ok, bad = rc == 0, []
        for t, r in zip(toks, ref):
            if t.get("tokens") != r["tokens"]:
                counts_ok, bad = False, bad + [r["id"]]
        check(counts_ok, "%s budget %d: token ids and soft-token counts equal the reference's "
              "(%s)" % (kind, budget, ", ".join(str(sum(r["soft_tokens"])) for r in ref[:10])),
              "rc %d, differ: %s %s" % (rc, bad, err[-200:]))
        paths = [("fast", ())] + ([("reference", ("--no-media-fast",))] if budget == 70 else [])
        for name, extra in paths:
            rc, got, err = gemmaembed(kind, budget, *extra)
            if rc != 0 or len(got) != len(records):
                check(False, "%s budget %d %s tower" % (kind, budget, name),
                      "rc %d: %s" % (rc, err[-300:]))
                continue
            worst = min((cos(g["embedding"], r["embedding"]), g["id"]) for g, r in zip(got, ref))
            bound = 0.99999 if kind == "f32" else 0.999
            check(worst[0] >= bound, "%s budget %d %s tower: every record cosine >= %s "
                  "(worst %.8f, %s)" % (kind, budget, name, bound, worst[0], worst[1]),
                  "below the bound")

# ---- --yield: the text records before an image run between its tower's layers ---------------
with open(path("yield.jsonl"), "w") as f:
    for i, name in enumerate(GOOD):
        for k in range(40):
            f.write(json.dumps({"id": "t%d.%d" % (i, k), "text": "caption %d of %s" % (k, name)})
                    + "\n")
        f.write(json.dumps({"id": name, "image": path(name)}) + "\n")
rc, on, err = gemmaembed("q8_0", 280, "--yield", src=path("yield.jsonl"))
rc2, off, err2 = gemmaembed("q8_0", 280, "--no-yield", src=path("yield.jsonl"))
check(rc == 0 and rc2 == 0 and len(on) == 41 * len(GOOD) and on == off,
      "--yield and --no-yield: the same %d records, byte for byte" % len(on),
      "rc %d/%d %s %s" % (rc, rc2, err[-200:], err2[-200:]))

# ---- --input files: a list of image paths, each embedded as that image alone ---------------
with open(path("list.txt"), "w") as f:
    f.write("\n".join(path(n) for n in GOOD) + "\n")
rc, got, err = gemmaembed("q8_0", 70, "--input", "files", src=path("list.txt"))
rc2, want, _ = gemmaembed("q8_0", 70, src=path("records.jsonl"))
check(rc == 0 and [g["embedding"] for g in got] == [w["embedding"] for w in want[:len(GOOD)]]
      and [g["id"] for g in got] == [path(n) for n in GOOD],
      "--input files: each image as the record {\"image\": path}, id = the path",
      "rc %d: %s" % (rc, err[-200:]))

# ---- SIGINT while images are being encoded: exit 130, and --resume completes the output ----
# (how many rows are written first depends on how the decode stage's pace shaped the windows,
# so only the stop and the resume are checked here)
with open(path("many.jsonl"), "w") as f:
    for i in range(12):
        f.write(json.dumps({"id": i, "image": path(GOOD[i % 3])}) + "\n")
args = [BIN, "-m", os.path.join(ROOT, "testdata", "tiny-q8_0.gguf"), "--mmproj",
        os.path.join(ROOT, "testdata", "tiny-mmproj-q8_0.gguf"), "--image-tokens", "560",
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
with open(path("landscape.png"), "rb") as f:
    png = f.read()
with open(path("portrait.jpg"), "rb") as f:
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
    mixed.append({"id": "good-%d" % i, "image": path(name), "text": "caption %d" % i})
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
