#!/usr/bin/python3
"""Reference image preprocessing (NumPy), docs/model.md 5.1 steps 2-5.

    preprocess(rgb_uint8_hwc, budget) -> (patches float64 [N, 768],
                                          positions int64 [N, 2] as (x, y), (th, tw))

Written from docs/model.md 5.1 and the description of torchvision's uint8 antialiased bicubic
resize (aten _upsample_bicubic2d_aa), independently of engine/image.c: the taps are built
per output index in plain Python and each pass is one integer matrix product.

  plan(h, w, budget)         step 2: (th, tw, n_tokens), ValueError on the error cases
  axis_taps(n_in, n_out)     per-axis int16 taps and their precision
  resize_u8(rgb, th, tw)     step 3: width pass, then height pass, each rounded to uint8
  patchify(rgb_u8)           steps 4-5: u8/255 (float64) in 16x16 patches, (x, y) positions

Against PIL: Debian's python3-pil (Pillow 9.4) Image.resize(..., Image.BICUBIC,
reducing_gap=None) is the same filter with 22-bit taps instead of torchvision's int16 ones.
`python3 tools/ref/imageproc.py --pil` measures the gap on seeded test images (smooth,
noisy, tiny and 1600x1200; budgets 70 and 280, so both up- and downscaling); observed with
Pillow 9.4.0: at most 2 levels apart, on 0.2-0.8% of the values per image (0.66% overall).
tests/test_image.sh gates the C resize (equal to this one) against PIL on these images and on
the committed images of the goldens: <= 2 levels and <= 2% of the values per case, <= 1%
overall (golden/README.md has the numbers). The reference (HF's fast image processor) is
torchvision's.
"""

import math
import sys

import numpy as np

BUDGETS = (70, 140, 280, 560, 1120)
PATCH = 16
POOL = 3
SIDE = PATCH * POOL  # 48


def plan(h, w, budget):
    """docs/model.md 5.1 step 2 (get_aspect_ratio_preserving_size) -> (th, tw, n_tokens)."""
    if budget not in BUDGETS:
        raise ValueError("budget %r not in %r" % (budget, BUDGETS))
    if h < 1 or w < 1:
        raise ValueError("empty image")
    max_patches = budget * POOL * POOL
    target_px = max_patches * PATCH * PATCH
    f = math.sqrt(target_px / (h * w))
    th = int(math.floor(f * h / SIDE)) * SIDE
    tw = int(math.floor(f * w / SIDE)) * SIDE
    if th == 0 and tw == 0:
        raise ValueError("0x0 target")
    max_side = (max_patches // (POOL * POOL)) * SIDE
    if th == 0:
        th = SIDE
        tw = min(int(math.floor(w / h)) * SIDE, max_side)
    elif tw == 0:
        tw = SIDE
        th = min(int(math.floor(h / w)) * SIDE, max_side)
    if th * tw > target_px:
        raise ValueError("target %dx%d over the budget" % (th, tw))
    return th, tw, (th // SIDE) * (tw // SIDE)


def keys(x, a=-0.5):
    """Keys' cubic convolution kernel (a = -0.5), Horner form."""
    x = abs(x)
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    if x < 2.0:
        return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return 0.0


def axis_taps(n_in, n_out):
    """One axis of torchvision's antialiased uint8 bicubic: (first [out], weights int64
    [out, kmax] (zero past each output's taps), precision bits)."""
    scale = n_in / n_out
    support = 2.0 * scale if scale >= 1.0 else 2.0  # radius 2, stretched when shrinking
    inv = 1.0 / scale if scale >= 1.0 else 1.0
    kmax = int(math.ceil(support)) * 2 + 1
    first = np.zeros(n_out, dtype=np.int64)
    wf = np.zeros((n_out, kmax))
    for i in range(n_out):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)  # int() truncates toward zero, as C
        n = min(int(center + support + 0.5), n_in) - lo
        n = min(max(n, 0), kmax)
        ws = [keys((lo + j - center + 0.5) * inv) for j in range(n)]
        total = 0.0
        for v in ws:  # sequential sum (np.sum would pair them up)
            total += v
        if total != 0.0:
            ws = [v / total for v in ws]
        wf[i, :n] = ws
        first[i] = lo
    wmax = float(wf.max()) if wf.size else 0.0
    prec = 0
    while prec < 22 and int(0.5 + wmax * 2.0 ** (prec + 1)) < (1 << 15):
        prec += 1
    v = wf * float(1 << prec)
    wi = np.where(v < 0, np.trunc(v - 0.5), np.trunc(v + 0.5)).astype(np.int64)
    return first, wi, prec


def _pass(x, n_out, axis):
    """Resample uint8 array x along axis to n_out samples (int64 exact, then round/clamp)."""
    n_in = x.shape[axis]
    if n_in == n_out:
        return x
    first, wi, prec = axis_taps(n_in, n_out)
    xm = np.moveaxis(x.astype(np.int64), axis, 0)  # [n_in, ...]
    extra = (1,) * (xm.ndim - 1)
    acc = np.full((n_out,) + xm.shape[1:], (1 << (prec - 1)) if prec else 0, dtype=np.int64)
    for k in range(wi.shape[1]):  # tap k of every output; past its taps the weight is 0
        idx = np.minimum(first + k, n_in - 1)
        acc += wi[:, k].reshape((n_out,) + extra) * xm[idx]
    y = np.clip(acc >> prec, 0, 255).astype(np.uint8)
    return np.moveaxis(y, 0, axis)


def resize_u8(rgb, th, tw):
    """[h, w, 3] uint8 -> [th, tw, 3] uint8: width first, then height."""
    return _pass(_pass(rgb, tw, 1), th, 0)


def patchify(rgb):
    """[h, w, 3] uint8 (h, w multiples of 16) -> (patches float64 [N, 768], pos [N, 2])."""
    h, w, _ = rgb.shape
    ph, pw = h // PATCH, w // PATCH
    p = rgb.astype(np.float64) / 255.0
    patches = p.reshape(ph, PATCH, pw, PATCH, 3).transpose(0, 2, 1, 3, 4).reshape(ph * pw, -1)
    xs, ys = np.meshgrid(np.arange(pw), np.arange(ph), indexing="xy")
    pos = np.stack([xs.reshape(-1), ys.reshape(-1)], axis=1)
    return patches, pos


def preprocess(rgb, budget):
    rgb = np.asarray(rgb, dtype=np.uint8)
    th, tw, _ = plan(rgb.shape[0], rgb.shape[1], budget)
    patches, pos = patchify(resize_u8(rgb, th, tw))
    return patches, pos, (th, tw)


def test_images(rng):
    """Seeded images for the PIL comparison: smooth, noisy, and a small one (upscaled)."""
    y, x = np.mgrid[0:300, 0:400]
    smooth = np.stack([x * 255 // 399, y * 255 // 299, (x + y) % 256], -1).astype(np.uint8)
    noisy = rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)
    small = rng.integers(0, 256, (37, 23, 3), dtype=np.uint8)
    y, x = np.mgrid[0:1200, 0:1600]
    big = np.stack([x * 255 // 1599, (x * y) % 256, y * 255 // 1199], -1).astype(np.int16)
    big = np.clip(big + rng.integers(-30, 31, big.shape), 0, 255).astype(np.uint8)
    return {"smooth 400x300": smooth, "noisy 320x240": noisy, "small 23x37": small,
            "big 1600x1200": big}


def compare_pil(verbose=True):
    """Max level difference and share of differing values, ref vs PIL, over test_images."""
    from PIL import Image
    worst, diff_n, total_n = 0, 0, 0
    for name, img in test_images(np.random.default_rng(7)).items():
        for budget in (70, 280):
            th, tw, _ = plan(img.shape[0], img.shape[1], budget)
            ours = resize_u8(img, th, tw).astype(int)
            pil = np.asarray(Image.fromarray(img).resize((tw, th), Image.BICUBIC,
                                                         reducing_gap=None)).astype(int)
            d = np.abs(ours - pil)
            worst = max(worst, int(d.max()))
            diff_n += int((d > 0).sum())
            total_n += d.size
            if verbose:
                print("%s budget %d -> %dx%d: max %d, %.2f%% differ"
                      % (name, budget, tw, th, d.max(), 100.0 * (d > 0).mean()))
    return worst, diff_n / total_n


if __name__ == "__main__":
    if sys.argv[1:] == ["--pil"]:
        worst, share = compare_pil()
        print("overall: max %d level(s), %.2f%% of values differ" % (worst, 100 * share))
    else:
        print(__doc__)
