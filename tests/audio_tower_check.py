"""tests/audio_tower_check.py BUILD OUT [REAL_TEXT REAL_MMPROJ] - the C audio tower (tests/audio_dump tower|clip)
against the float64 NumPy reference (tools/ref/audio_tower.py) on tiny audio mmproj files:
f32 (generated here) and the committed Q8_0. On log-mel features of several lengths (1 frame
to more than one 1024-token chunk): the reference path to per-token cos >= 0.99999, the fast
path on every kernel tier this CPU runs (f32: >= 0.99999 per token; Q8_0: >= 0.999 flattened
and >= 0.95 per token), soft-token counts exactly (L + 3) / 4; the fast path's bytes the same
on 1 and 2 threads; ge_model_encode_audio (front end + tower) under both --semantics against
the reference front end + tower; a clip too short for a frame is an error. With a real-shape
(generated) text model and audio mmproj: 82 frames (21 soft tokens) through both paths
against the reference (reference path 1 - cos < 1e-9 per token; fast path on Q8_0 as above,
with and without --media-q8-wide)."""
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
import audio  # noqa: E402
from audio_tower import AudioTower  # noqa: E402

build, out = sys.argv[1], sys.argv[2]
real = sys.argv[3:5]
dump = os.path.join(build, "tests", "audio_dump")
os.makedirs(out, exist_ok=True)
failed = 0
TEXT = os.path.join(ROOT, "testdata", "tiny-f32.gguf")
MMPROJ = {"q8_0": os.path.join(ROOT, "testdata", "tiny-mmproj-audio-q8_0.gguf"),
          "f32": os.path.join(out, "atc-mmproj-audio-f32.gguf")}
subprocess.run([sys.executable, os.path.join(ROOT, "tools", "mkmodel"), "--mmproj", "audio",
                "--preset", "tiny", "--type", "f32", "--seed", "3", "-o", MMPROJ["f32"]],
               check=True, capture_output=True)


def check(ok, name, detail=""):
    global failed
    print("PASS: %s" % name if ok else "FAIL: %s: %s" % (name, detail))
    failed += not ok


def run(args):
    of = os.path.join(out, "atc-out.f32")
    r = subprocess.run([dump] + args[:-1] + [of] + args[-1], capture_output=True, text=True)
    if r.returncode:
        return None, (r.stdout + r.stderr).strip()
    return np.fromfile(of, dtype=np.float32).astype(np.float64), r.stdout


def tower(kind, feat, valid, path, extra=()):
    ff = os.path.join(out, "atc-feat.f32")
    feat.astype(np.float32).tofile(ff)
    return run(["tower", TEXT, MMPROJ[kind], ff, str(valid), path, list(extra)])[0]


def cosines(c, ref):
    if c is None or c.size != ref.size:
        return -1.0, -1.0
    c = c.reshape(ref.shape)
    tok = (c * ref).sum(1) / np.linalg.norm(c, axis=1) / np.linalg.norm(ref, axis=1)
    flat = (c * ref).sum() / np.linalg.norm(c) / np.linalg.norm(ref)
    return tok.min(), flat


tiers = [t for t in ("scalar", "avx2", "avx512")
         if subprocess.run([os.path.join(ROOT, "gemmaembed"), "--print-config", "--cpu-tier", t],
                           capture_output=True).returncode == 0]
rng = np.random.default_rng(11)
towers = {k: AudioTower(p) for k, p in MMPROJ.items()}
# 4200 frames: 1050 tokens, more than one FFN / GLU chunk of 1024
for L in (1, 2, 5, 37, 729, 4200):
    # log-mel-like values: ln(0.001) floor to a few, with the frames past L garbage (they
    # must not matter: the tower reads only the first L)
    feat = np.log(0.001 + rng.gamma(0.5, 2.0, size=(L + 3, 128)))
    for kind in ("f32", "q8_0"):
        ref = towers[kind].encode(feat, L)
        c = tower(kind, feat, L, "ref")
        tok, flat = cosines(c, ref)
        check(c is not None and c.size == ((L + 3) // 4) * ref.shape[1] and tok >= 0.99999,
              "%s L=%d reference path = NumPy (%d soft tokens, 1-cos %.1e)"
              % (kind, L, ref.shape[0], 1 - tok), "min token cos %.9f" % tok)
        for tier in tiers:
            c = tower(kind, feat, L, "fast", ["cpu-tier=" + tier])
            tok, flat = cosines(c, ref)
            ok = tok >= 0.99999 if kind == "f32" else (flat >= 0.999 and tok >= 0.95)
            check(ok, "%s L=%d fast path on %s: min token cos %.6f, flattened %.7f"
                  % (kind, L, tier, tok, flat), "below the bound")

# the fast path's bytes do not depend on the thread count
feat = np.log(0.001 + rng.gamma(0.5, 2.0, size=(301, 128)))
one = tower("q8_0", feat, 301, "fast", ["threads=1"])
two = tower("q8_0", feat, 301, "fast", ["threads=2"])
check(one is not None and two is not None and np.array_equal(one, two),
      "fast path: the same bytes on 1 and 2 threads")

# ge_model_encode_audio: the C front end + tower against the NumPy front end + tower, both
# semantics (llamacpp: every frame valid, no padding to 128, ln(max(mel, 0.001)))
n = 16000 * 3 + 1234
t = np.arange(n) / 16000.0
pcm = (0.3 * np.sin(2 * np.pi * 330 * t) + 0.05 * rng.standard_normal(n)).astype(np.float32)
pf = os.path.join(out, "atc-pcm.f32")
pcm.tofile(pf)
refs = {}
for sem in ("official", "llamacpp"):
    feat, valid = audio.features(pcm, sem)
    refs[sem] = towers["f32"].encode(feat.astype(np.float64), valid)
for sem, other in (("official", "llamacpp"), ("llamacpp", "official")):
    ref = refs[sem]
    for path in ("false", "true"):
        c, info = run(["clip", TEXT, MMPROJ["f32"], "raw:" + pf,
                       ["semantics=" + sem, "media-fast=" + path]])
        tok, _ = cosines(c, ref)
        tok_other, _ = cosines(c, refs[other])
        check(tok >= 0.99999 and info.split()[:1] == [str(ref.shape[0])]
              and 1 - tok_other > 10 * (1 - tok),
              "front end + tower, --semantics %s, media-fast=%s: %d tokens, 1-cos %.1e (to "
              "the other semantics %.1e)" % (sem, path, ref.shape[0], 1 - tok, 1 - tok_other),
              info)

# too short for one valid frame: an error naming the cause, under the official semantics
short = os.path.join(out, "atc-short.f32")
pcm[:80].tofile(short)
c, info = run(["clip", TEXT, MMPROJ["f32"], "raw:" + short, []])
check(c is None and "too short" in info, "a 5 ms clip is an error (too short)", info)

if real:
    feat = np.log(0.001 + rng.gamma(0.5, 2.0, size=(82, 128)))
    ref = AudioTower(real[1]).encode(feat, 82)
    ff = os.path.join(out, "atc-feat.f32")
    feat.astype(np.float32).tofile(ff)
    for path, extra in (("ref", []), ("fast", []), ("fast", ["media-q8-wide=false"])):
        c = run(["tower", real[0], real[1], ff, "82", path, extra])[0]
        tok, flat = cosines(c, ref)
        ok = 1 - tok < 1e-9 if path == "ref" else (flat >= 0.999 and tok >= 0.95)
        check(ok, "real-shape Q8_0 tower, 82 frames, %s path%s: min token cos %.9f, flattened "
              "%.9f" % (path, "".join(" " + e for e in extra), tok, flat), "below the bound")
sys.exit(1 if failed else 0)
