"""tests/vision_check.py BUILD OUT - the C vision tower (tests/vision_dump) against the float64
NumPy reference (tools/ref/vision.py) on the tiny mmproj files, on random patch grids of
several shapes: the reference path on f32 weights to 1 - cos < 1e-9 per soft token, and the
fast path on f32 (>= 0.99999 per token) and Q8_0 weights (>= 0.999 flattened, >= 0.95 per
token), with every kernel tier this CPU runs; --semantics llamacpp (quick-GELU) on both paths.
A grid past the position tables is an error."""
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
from vision import VisionTower  # noqa: E402

build, out = sys.argv[1], sys.argv[2]
dump = os.path.join(build, "tests", "vision_dump")
os.makedirs(out, exist_ok=True)
failed = 0


def check(ok, name, detail=""):
    global failed
    print("PASS: %s" % name if ok else "FAIL: %s: %s" % (name, detail))
    failed += not ok


def run(kind, pw, ph, path, patches, extra=()):
    pf, of = os.path.join(out, "vc-patches.f32"), os.path.join(out, "vc-out.f32")
    patches.astype(np.float32).tofile(pf)
    r = subprocess.run([dump, os.path.join(ROOT, "testdata", "tiny-%s.gguf" % kind),
                        os.path.join(ROOT, "testdata", "tiny-mmproj-%s.gguf" % kind), pf,
                        str(pw), str(ph), path, of] + list(extra),
                       capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip()
    return np.fromfile(of, dtype=np.float32).astype(np.float64), ""


def cosines(c, ref):
    c = c.reshape(ref.shape)
    tok = (c * ref).sum(1) / np.linalg.norm(c, axis=1) / np.linalg.norm(ref, axis=1)
    flat = (c * ref).sum() / np.linalg.norm(c) / np.linalg.norm(ref)
    return tok.min(), flat


tiers = [t for t in ("scalar", "avx2", "avx512")
         if subprocess.run([os.path.join(ROOT, "gemmaembed"), "--print-config", "--cpu-tier", t],
                           capture_output=True).returncode == 0]
rng = np.random.default_rng(7)
# 36x30 = 1080 patches: more than one MLP chunk of 1024 tokens
for pw, ph in ((3, 3), (9, 6), (6, 12), (15, 9), (36, 30)):
    patches = rng.random((pw * ph, 768))
    pos = np.array([(t % pw, t // pw) for t in range(pw * ph)])
    for kind in ("f32", "q8_0"):
        ref = VisionTower(os.path.join(ROOT, "testdata", "tiny-mmproj-%s.gguf" % kind)) \
            .encode(patches, pos)
        c, e = run(kind, pw, ph, "ref", patches)
        if c is None:
            check(False, "%s %dx%d reference path" % (kind, pw, ph), e)
            continue
        tok, flat = cosines(c, ref)
        check(1 - tok < 1e-9, "%s %dx%d reference path = NumPy (%d soft tokens, 1-cos %.1e)"
              % (kind, pw, ph, ref.shape[0], 1 - tok), "min token cos %.12f" % tok)
        for tier in tiers:
            c, e = run(kind, pw, ph, "fast", patches, ["cpu-tier=" + tier])
            if c is None:
                check(False, "%s %dx%d fast path (%s)" % (kind, pw, ph, tier), e)
                continue
            tok, flat = cosines(c, ref)
            ok = tok >= 0.99999 if kind == "f32" else (flat >= 0.999 and tok >= 0.95)
            check(ok, "%s %dx%d fast path on %s: min token cos %.6f, flattened %.7f"
                  % (kind, pw, ph, tier, tok, flat), "below the bound")

# --semantics llamacpp: quick-GELU in the MLP, both paths, against the reference doing the same
patches = rng.random((9 * 6, 768))
pos = np.array([(t % 9, t // 9) for t in range(9 * 6)])
path = os.path.join(ROOT, "testdata", "tiny-mmproj-f32.gguf")
ref = VisionTower(path, semantics="llamacpp").encode(patches, pos)
official = VisionTower(path).encode(patches, pos)
for kind in ("ref", "fast"):
    c, e = run("f32", 9, 6, kind, patches, ["semantics=llamacpp"])
    if c is None:
        check(False, "--semantics llamacpp, %s path" % kind, e)
        continue
    tok, _ = cosines(c, ref)
    tok_official, _ = cosines(c, official)
    # the tiny tower's MLP is a small part of its output: the two activations differ by ~1e-5
    check(tok >= (1 - 1e-9 if kind == "ref" else 0.99999) and 1 - tok_official > 10 * (1 - tok),
          "--semantics llamacpp, %s path: quick-GELU (1-cos %.1e; to tanh-GELU %.1e)"
          % (kind, 1 - tok, 1 - tok_official), "wrong activation")

# a grid wider than the tiny position tables
P = VisionTower(os.path.join(ROOT, "testdata", "tiny-mmproj-f32.gguf")).n_pos
pw = (P // 3 + 1) * 3
c, e = run("f32", pw, 3, "fast", rng.random((pw * 3, 768)))
check(c is None and "position tables" in e, "a grid past the position tables is an error",
      e or "no error")
sys.exit(1 if failed else 0)
