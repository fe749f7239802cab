#!/usr/bin/python3
"""Self-test of the video reference (tools/ref/videoref.py, the video path of
tools/ref/embed_media.py and tools/ref/mkvideo); needs no C code.

usage: tests/ref_video_selftest.py

- sampling (docs/model.md 7): 3 s at 25 fps -> [0, 25, 50]; 75 s -> 32 uniform indices (the list
  written out); 29.97 fps; n > max_frames (uniform and truncate); a 0.5 s clip -> 1 frame;
  fps 2 and 0.25; the last-frame clamp; bad arguments refused; and a seeded sweep against
  a numpy-free version in doubles (k * ((n-1)/(m-1)) for numpy.linspace, as the C side
  computes) and against exact rationals away from float ties, with a negative control (a
  variant that rounds instead of flooring must differ somewhere);
- soft tokens per frame at --video-tokens 140: 16:9 -> 384x720, 120; 4:3 -> 480x624, 130;
  square -> 528x528, 121; the maximum 32 x (140 + 2);
- "MM:SS" strings (0, 59.9, 60, 61.5, 3599, 3600 s) and the frame-block layout without and
  with timestamps (blocks joined by " ", "MM:SS " before each);
- ids from embed_media.py on the tiny vocabulary: a video is <|image> <|video|> x N <image|>
  per frame, the timestamp text tokenised with its neighbours (BPE may merge it with the
  text before), media in the given order with the prompt first; the too-long check happens
  before any tower runs;
- one clip made by tools/ref/mkvideo (0.5 s, 1280x720): twice the same bytes; the packet scan
  (13 frames, D = 0.52 s, F = 25); the ffmpeg command's frame 0 equals the same frame written
  as a PNG by a second ffmpeg route (-frames:v 1, image2) and read with PIL;
- against tools/ref/video.py (the engine side's reference for tests/test_video.sh, written
  separately): the same indices on a seeded sweep, the same metadata and frames.

Prints "PASS: name" / "FAIL: name: detail" per check, then "N passed, N failed"; exits 1 on
any failure (a missing ffmpeg/ffprobe is a failure).
"""

import hashlib
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
from fractions import Fraction

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import embed_media as EM  # noqa: E402
import imageproc  # noqa: E402
import videoref as V  # noqa: E402
from selfcheck import check, finish  # noqa: E402

PY = sys.executable or "/usr/bin/python3"
TMP = tempfile.mkdtemp(prefix="ref_video_selftest.")


def same(got, want):
    got = [int(x) for x in got]
    return (got == want, "got %s want %s" % (got, want))


@check("sample: 3 s at 25 fps -> [0, 25, 50]")
def _():
    return same(V.sample_frames(3.0, 25.0, 75), [0, 25, 50])


@check("sample: 75 s at 25 fps -> 32 uniform indices of the 75 one per second")
def _():
    want = [0, 50, 100, 175, 225, 275, 350, 400, 475, 525, 575, 650, 700, 775, 825, 875, 950,
            1000, 1050, 1125, 1175, 1250, 1300, 1350, 1425, 1475, 1550, 1600, 1650, 1725, 1775,
            1850]
    # floor(linspace(0, 74, 32)) picks seconds 0, 2, 4, 7, ... (74 / 31 = 2.387 apart)
    secs = [math.floor(k * 74 / 31) for k in range(32)]
    if [25 * s for s in secs] != want:
        return False, "the written-out list disagrees with floor(k*74/31)*25"
    return same(V.sample_frames(75.0, 25.0, 1875), want)


@check("sample: 29.97 fps (30000/1001), 4.004 s -> [0, 29, 59, 89]")
def _():
    f = 30000 / 1001
    return same(V.sample_frames(120 / f, 120 / (120 / f), 120), [0, 29, 59, 89])


@check("sample: n > max_frames: 10 s, max 4 -> seconds 0, 3, 6, 9; truncate -> 0..3")
def _():
    a = same(V.sample_frames(10.0, 10.0, 100, 1, 4), [0, 30, 60, 90])
    b = same(V.sample_frames(10.0, 10.0, 100, 1, 4, "truncate"), [0, 10, 20, 30])
    return (a[0] and b[0], a[1] + "; " + b[1])


@check("sample: a 0.5 s clip -> 1 frame [0]; 0 s -> [0]")
def _():
    a = same(V.sample_frames(0.52, 25.0, 13), [0])
    b = same(V.sample_frames(0.0, 25.0, 1), [0])
    return (a[0] and b[0], a[1] + "; " + b[1])


@check("sample: fps 2 on 3 s at 25 fps -> [0, 12, 25, 37, 50, 62]; fps 0.25 on 75 s -> 18")
def _():
    a = same(V.sample_frames(3.0, 25.0, 75, 2), [0, 12, 25, 37, 50, 62])
    b = same(V.sample_frames(75.0, 25.0, 1875, 0.25), [100 * i for i in range(18)])
    return (a[0] and b[0], a[1] + "; " + b[1])


@check("sample: the last index clamps to total - 1 (container longer than its frames)")
def _():
    return same(V.sample_frames(5.0, 10.0, 35), [0, 10, 20, 30, 34])


@check("sample: bad arguments are refused (total 0, fps 0, src_fps 0, NaN, max 0)")
def _():
    bad = [(1.0, 25.0, 0), (1.0, 25.0, 25, 0), (1.0, 0.0, 25), (float("nan"), 25.0, 25),
           (1.0, 25.0, 25, 1, 0), (-1.0, 25.0, 25)]
    taken = []
    for a in bad:
        try:
            V.sample_frames(*a)
            taken.append(a)
        except ValueError:
            pass
    return (not taken, "accepted %s" % taken)


def exact_sample(dur, src_fps, total, fps, max_frames, rounding=math.floor):
    """A second implementation in exact rationals (the doubles given are exact rationals):
    n = floor(dur * fps), idx_i = floor(i * F / fps), kept k*(n-1)/(m-1) floored."""
    d, F, r = Fraction(dur), Fraction(src_fps), Fraction(fps)
    n = max(1, math.floor(d * r))
    idx = [min(total - 1, rounding(i * (F / r))) for i in range(n)]
    if n <= max_frames:
        return idx
    if max_frames == 1:
        return idx[:1]  # numpy.linspace(0, n - 1, 1) == [0]
    return [idx[math.floor(Fraction(k * (n - 1), max_frames - 1))] for k in range(max_frames)]


def double_sample(dur, src_fps, total, fps, max_frames):
    """A third, in doubles without numpy, as the engine's header describes the arithmetic
    (numpy.linspace = k * ((n - 1) / (m - 1)), the last point exactly n - 1)."""
    n = max(1, math.floor(dur * fps))
    step = src_fps / fps
    idx = [min(total - 1, math.floor(i * step)) for i in range(n)]
    if n <= max_frames:
        return idx
    m = max_frames
    ls = (n - 1) / (m - 1) if m > 1 else 0.0
    return [idx[n - 1 if (k == m - 1 and m > 1) else math.floor(k * ls)] for k in range(m)]


def near_tie(x):
    """x (exact) lies within 1e-9 (relative) of an integer without being one: there the
    double products may round onto the integer (e.g. 25 * (23.976 / 0.3) is 1998.0 in
    doubles, 1997.99999999999989... exactly)."""
    return x != round(x) and abs(x - round(x)) < Fraction(1, 10 ** 9) * max(1, abs(x))


@check("sample: 1500 seeded cases equal a numpy-free double version (always) and exact "
       "rationals (away from float ties); a rounding variant differs (negative control)")
def _():
    rng = random.Random(20261130)
    bad_d, bad_x, ties, lin_ties, control = [], [], 0, 0, 0
    for _ in range(1500):
        F = rng.choice([23.976, 24.0, 25.0, 29.97, 30000 / 1001, 30.0, 50.0, 59.94, 60.0,
                        12.5, 7.0])
        total = rng.randint(1, 6000)
        dur = total / F
        fps = rng.choice([1.0, 1.0, 2.0, 0.5, 0.25, 3.0, 0.3])
        mf = rng.choice([1, 2, 8, 10, 32, 64])
        got = [int(x) for x in V.sample_frames(dur, F, total, fps, mf)]
        if got != double_sample(dur, F, total, fps, mf):
            bad_d.append((dur, F, total, fps, mf))
        n = max(1, math.floor(dur * fps))
        fd, fF, fr = Fraction(dur), Fraction(F), Fraction(fps)
        lin_below = n > mf > 1 and any(
            Fraction(k * (n - 1), mf - 1).denominator == 1 and
            k * ((n - 1) / (mf - 1)) < k * (n - 1) // (mf - 1) for k in range(mf - 1))
        lin_ties += lin_below
        if lin_below or near_tie(fd * fr) or any(near_tie(i * (fF / fr)) for i in range(n)):
            ties += 1  # float and exact may floor differently here; HF computes in float
            continue
        if got != exact_sample(dur, F, total, fps, mf):
            bad_x.append((dur, F, total, fps, mf))
        if exact_sample(dur, F, total, fps, mf, lambda x: int(round(x))) != got:
            control += 1
    return (not bad_d and not bad_x and control > 0,
            "%d mismatches with the double version (first %s), %d with exact rationals "
            "(first %s), %d near-tie cases skipped (%d where numpy.linspace's k * ((n-1)/(m-1)) "
            "falls just under an exact integer); negative control differed %d times"
            % (len(bad_d), bad_d[:1], len(bad_x), bad_x[:1], ties, lin_ties, control))


@check("tokens per frame at 140: 16:9 -> 384x720 (120), 4:3 -> 480x624 (130), square -> "
       "528x528 (121); max 32 x 142 = 4544")
def _():
    got = [imageproc.plan(720, 1280, 140), imageproc.plan(480, 640, 140),
           imageproc.plan(1080, 1920, 140), imageproc.plan(1000, 1000, 140)]
    want = [(384, 720, 120), (480, 624, 130), (384, 720, 120), (528, 528, 121)]
    worst = max(imageproc.plan(h, w, 140)[2] for h in range(48, 2000, 37)
                for w in range(48, 2000, 41))
    return (got == want and worst <= 140 and 32 * (worst + 2) <= 4544,
            "got %s want %s; largest count %d" % (got, want, worst))


@check("timestamps: MM:SS of 0, 59.9, 60, 61.5, 599, 3599, 3600 s; index / fps")
def _():
    got = [V.timestamp_prefix(s) for s in (0, 59.9, 60, 61.5, 599, 3599, 3600)]
    want = ["00:00", "00:59", "01:00", "01:01", "09:59", "59:59", "60:00"]
    t = V.timestamps([0, 29, 59], 30000 / 1001)
    return (got == want and t[1] == 29 / (30000 / 1001),
            "got %s want %s; %s" % (got, want, t))


@check("layout: frame blocks without timestamps (no separator) and with ('MM:SS ' + block, "
       "joined by ' ')")
def _():
    a = V.frame_blocks([0.0, 1.0], 2)
    b = V.frame_blocks([0.0, 61.0], 2, True)
    c = V.frame_blocks([0.0, 1.0, 2.0], 3, True, placeholder=1)
    wa = "<|image><|video|><|video|><image|><|image><|video|><|video|><image|>"
    wb = "00:00 <|image><|video|><|video|><image|> 01:01 <|image><|video|><|video|><image|>"
    wc = ("00:00 <|image><|video|><image|> 00:01 <|image><|video|><image|> "
          "00:02 <|image><|video|><image|>")
    return (a == wa and b == wb and c == wc, "%r / %r / %r" % (a, b, c))


TOK = EM.Tokenizer.from_gguf(EM.GGUFFile(os.path.join(ROOT, "testdata", "tiny-f32.gguf")))
VOC = TOK.vocab
BI, EI, VP, IP, BA, EA, AP = (VOC[x] for x in ("<|image>", "<image|>", "<|video|>",
                                                "<|image|>", "<|audio>", "<audio|>",
                                                "<|audio|>"))


def fake_video(secs, n_soft):
    return {"seconds": secs, "n_soft": n_soft}


@check("ids: a video of 3 frames x 4 soft tokens = <bos> (<|image> <|video|>x4 <image|>)x3 "
       "<eos>")
def _():
    items = [("video", "v")]
    lay = EM.layout_string("", items, [[0.0, 1.0, 2.0]])
    ids = EM.assemble_ids(TOK, lay, [], [], [4, 4, 4])
    want = [TOK.bos_id] + [BI] + [VP] * 4 + [EI] + [BI] + [VP] * 4 + [EI] + [BI] + \
        [VP] * 4 + [EI] + [TOK.eos_id]
    return (ids == want, "got %s" % ids)


@check("ids: timestamps are text tokenised with the adjacent texts (prompt first, media in "
       "order); equal to tokenising HF's expanded string")
def _():
    items = [("text", "clip:"), ("video", "v"), ("text", "after"), ("image", "i"),
             ("audio", "a")]
    lay = EM.layout_string("task: search result | query: ", items, [[0.0, 1.0]], True)
    ids = EM.assemble_ids(TOK, lay, [2], [3], [2, 2])
    # HF: replace_video_token writes every soft token into the string, then tokenises once
    full = ("task: search result | query: clip:" + V.frame_blocks([0.0, 1.0], 2, True) +
            "after<|image><|image|><|image|><image|><|audio><|audio|><|audio|><|audio|>"
            "<audio|>")
    want = TOK.encode(full)
    # the timestamp merges with "clip:" (the pieces differ from tokenising "clip:" alone)
    sep = TOK.encode("clip:", add_special=False) + TOK.encode("00:00 ", add_special=False)
    merged = ids[ids.index(BI) - len(sep):ids.index(BI)] != sep
    return (ids == want, "ids %s want %s (merged across the join: %s)" % (ids, want, merged))


@check("ids: without timestamps a video adds only special tokens (no text between blocks)")
def _():
    items = [("text", "a"), ("video", "v"), ("text", "b")]
    ids = EM.assemble_ids(TOK, EM.layout_string("", items, [[0.0, 1.0]]), [], [], [1, 1])
    want = TOK.encode("a", add_special=True)[:-1] + [BI, VP, EI, BI, VP, EI] + \
        TOK.encode("b", add_special=True)[1:]
    return (ids == want, "got %s want %s" % (ids, want))


@check("records: video keys and content items; images, videos, clips, then the text; manual "
       "<|video|> placeholders")
def _():
    a = EM.record_items({"text": "t", "audio": "a.wav", "video": "v.mp4", "image": "i.png"})
    b = EM.record_items({"content": [{"type": "video", "video": "v.mp4"},
                                     {"type": "text", "text": "x"},
                                     {"type": "video", "path": "w.webm"}]})
    c = EM.record_items({"video": ["v1", "v2"], "text": "A <|video|> B <|video|>"})
    ok = (a == [("image", "i.png"), ("video", "v.mp4"), ("audio", "a.wav"), ("text", "t")]
          and b == [("video", "v.mp4"), ("text", "x"), ("video", "w.webm")]
          and c == [("text", "A "), ("video", "v1"), ("text", " B "), ("video", "v2")])
    try:
        EM.record_items({"video": ["v1"], "text": "<|video|><|video|>"})
        ok = False
    except EM.RecordError:
        pass
    return (ok, "%s / %s / %s" % (a, b, c))


@check("too long: refused from the plan, before any tower runs (a tower that raises is "
       "never called)")
def _():
    class NoTower:
        def encode(self, *a):
            raise AssertionError("a tower ran")

    class Fake(EM.MediaEmbedder):
        def __init__(self):
            self.tok, self.semantics, self.vision, self.audio = TOK, "official", NoTower(), None
    em = Fake()
    v = {"seconds": [float(i) for i in range(32)], "n_soft": 264,
         "frames": [(np.zeros((264 * 9, 768)), None)] * 32}  # 32 x (264 + 2) + 2 = 8514
    try:
        em.embed("", [("video", "v")], [], [], [v], False, 8192)
    except EM.RecordError as e:
        return ("too long: 8514 tokens" in str(e) and "8192" in str(e), str(e))
    return False, "no error"


CLIP = "tsrc-0.5s-16x9.mp4"


def make_clip(path):
    return subprocess.run([PY, os.path.join(ROOT, "tools", "ref", "mkvideo"),
                           os.path.dirname(path), os.path.basename(path)],
                          capture_output=True, text=True)


HAVE_FF = shutil.which("ffmpeg") is not None and shutil.which("ffprobe") is not None


@check("mkvideo: the 0.5 s 720p clip twice -> the same bytes")
def _():
    if not HAVE_FF:
        return False, "ffmpeg/ffprobe not on PATH (tools/install-deps)"
    hs = []
    for d in ("a", "b"):
        p = os.path.join(TMP, d, CLIP)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        r = make_clip(p)
        if r.returncode:
            return False, r.stderr[-300:]
        with open(p, "rb") as f:
            hs.append(hashlib.sha256(f.read()).hexdigest())
    return (hs[0] == hs[1], "sha256 %s vs %s" % tuple(hs))


@check("probe: the packet scan of the 0.5 s clip: 13 frames, D 0.52 s, F 25, 1280x720; "
       "sampled [0]; 120 soft tokens at 384x720")
def _():
    p = os.path.join(TMP, "a", CLIP)
    m = V.probe(p)
    idx = [int(i) for i in V.sample_frames(m["duration"], m["fps"], m["frames"])]
    ok = (m["frames"] == 13 and abs(m["duration"] - 0.52) < 1e-12 and
          abs(m["fps"] - 25) < 1e-9 and (m["width"], m["height"]) == (1280, 720)
          and idx == [0] and imageproc.plan(720, 1280, 140) == (384, 720, 120))
    return ok, "%s idx %s" % (m, idx)


@check("frames: the ffmpeg command's frames 0 and 12 equal a second route (one PNG per "
       "frame, read with PIL); frame 0 != frame 12")
def _():
    from PIL import Image
    p = os.path.join(TMP, "a", CLIP)
    got = V.extract_rgb(p, [12, 0])
    outs = []
    for i in (12, 0):
        png = os.path.join(TMP, "f%d.png" % i)
        r = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", p, "-vf",
                            "select=eq(n\\,%d)" % i, "-frames:v", "1", png],
                           capture_output=True, text=True)
        if r.returncode:
            return False, r.stderr[-300:]
        with Image.open(png) as im:
            outs.append(np.asarray(im.convert("RGB")))
    d = [int(np.abs(got[k].astype(int) - outs[k]).max()) for k in range(2)]
    return (d == [0, 0] and not np.array_equal(got[0], got[1]),
            "max differences %s" % d)


@check("videoref.py against the engine side's tools/ref/video.py (written separately): "
       "the same indices on 1500 seeded cases, the same metadata and frames of the clip")
def _():
    path = os.path.join(ROOT, "tools", "ref", "video.py")
    if not os.path.exists(path):
        return False, "tools/ref/video.py missing"
    from importlib.machinery import SourceFileLoader
    other = SourceFileLoader("engine_side_video", path).load_module()
    rng = random.Random(7)
    bad = []
    for _ in range(1500):
        F = rng.choice([23.976, 25.0, 29.97, 30000 / 1001, 59.94, 12.5])
        total = rng.randint(1, 6000)
        a = (total / F, F, total, rng.choice([1.0, 2.0, 0.25, 0.3]), rng.choice([1, 8, 32, 64]))
        if [int(x) for x in V.sample_frames(*a)] != [int(x) for x in other.sample_frames(*a)]:
            bad.append(a)
    p = os.path.join(TMP, "a", CLIP)
    m1, m2 = V.probe(p), other.probe(p)
    keys = ("frames", "duration", "fps", "width", "height")
    meta_ok = all(m1[k] == m2[k] for k in keys)
    frames_ok = np.array_equal(V.extract_rgb(p, [0, 7]), other.extract_rgb(p, [0, 7]))
    return (not bad and meta_ok and frames_ok, "%d index mismatches (first %s); metadata %s "
            "vs %s; frames equal: %s" % (len(bad), bad[:1], m1, m2, frames_ok))


shutil.rmtree(TMP, ignore_errors=True)
finish("ref_video_selftest")
