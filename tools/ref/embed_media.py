#!/usr/bin/python3
"""Reference embedder for records with images (float64 NumPy).

usage: embed_media.py -m TEXT.gguf --mmproj MMPROJ.gguf [--prompt NAME]
                      [--prefix STR] [--budget N] [--dim N] [--all-dims]
                      [--base DIR] [FILE.jsonl]

Input: JSONL records (stdin if FILE is absent or "-"):
  {"id": ..., "image": IMG or [IMG, ...], "text": "...", "prompt": NAME}
      the images come first, then the text (SPEC.md 2.3), unless the text
      holds its own "<|image|>" placeholders: then no automatic ones are
      added and the images fill those, in order;
  {"id": ..., "content": [{"type": "text", "text": "..."},
                          {"type": "image", "image": IMG}, ...]}
      items in the given order, concatenated with no separator.
  "prompt" (a SPEC.md 2.2 name) or "prefix" (a literal string) go first;
  per record they override --prompt / --prefix. "budget" per record
  overrides --budget (only used when an image file is preprocessed).
IMG is a path (relative paths are joined to --base, default the current
directory):
  *.npz  arrays "patches" [N, 768] (values in [0, 1], each patch flattened
         as (y, x, channel)) and "positions" [N, 2] (x = column, y = row);
  *.npy  one [N, 770] array: the 768 patch values, then x, then y;
  else   an image file, decoded with PIL and preprocessed by
         tools/ref/imageproc.py (preprocess(rgb_uint8_hwc, budget) ->
         (patches, positions, (th, tw))), when that module exists.

The layout string is prefix + the items (an image as "<|image|>"); it is
tokenised with <bos>/<eos> and each "<|image|>" id is expanded to
<|image> + <|image|> x N + <image|>, N = the image's soft-token count
(SPEC.md 2.3). The soft tokens (vision.py) replace the <|image|> rows.

Output: one line per record, {"id", "tokens", "soft_tokens" (N per image),
"embedding" (full width, L2-normalised; floats as repr)}; --all-dims adds
"embedding_K" = normalize(embedding[:K]) for every Matryoshka width K
(512, 256, 128) below the full width; --dim K prints only that width as
"embedding". A record that fails prints {"id", "error"} and the exit
status is 1.
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from embed import fmt_float, record_prefix  # noqa: E402
from gguf import GGUFFile  # noqa: E402
from model import Model, matryoshka  # noqa: E402
from tokenizer import Tokenizer  # noqa: E402
from vision import VisionTower  # noqa: E402

MATRYOSHKA = (512, 256, 128)
BUDGETS = (70, 140, 280, 560, 1120)
DEFAULT_BUDGET = 280
IMAGE_PLACEHOLDER = "<|image|>"


class RecordError(Exception):
    pass


# ------------------------------------------------------------ image inputs

def load_patch_file(path):
    """(patches [N, 768] float64, positions [N, 2] int64) from .npz/.npy."""
    if path.endswith(".npz"):
        with np.load(path, allow_pickle=False) as z:
            if "patches" not in z or "positions" not in z:
                raise RecordError("%s: needs arrays 'patches' and 'positions'"
                                  % path)
            p, pos = z["patches"], z["positions"]
    else:
        a = np.load(path, allow_pickle=False)
        if a.ndim != 2 or a.shape[1] < 3:
            raise RecordError("%s: expected an [N, 770] array, got %s"
                              % (path, a.shape))
        p, pos = a[:, :-2], a[:, -2:]
    p = np.asarray(p, dtype=np.float64)
    posf = np.asarray(pos, dtype=np.float64)
    if posf.ndim != 2 or posf.shape[1] != 2 or np.any(posf != np.round(posf)):
        raise RecordError("%s: positions must be integer (x, y) pairs" % path)
    return p, posf.astype(np.int64)


def save_patch_file(path, patches, positions):
    """Write the .npz form that load_patch_file reads."""
    np.savez(path, patches=np.asarray(patches, dtype=np.float64),
             positions=np.asarray(positions, dtype=np.int64))


def _imageproc():
    if not os.path.exists(os.path.join(HERE, "imageproc.py")):
        return None
    import imageproc  # noqa: E402  (written separately; optional)
    return imageproc


def load_image(path, budget):
    """(patches, positions) of one image input (see the module doc)."""
    if path.endswith(".npz") or path.endswith(".npy"):
        return load_patch_file(path)
    ip = _imageproc()
    if ip is None:
        raise RecordError("%s: image files need tools/ref/imageproc.py; pass "
                          "an .npz/.npy of patches instead" % path)
    if budget not in BUDGETS:
        raise RecordError("budget %r is not one of %s" % (budget, BUDGETS))
    if hasattr(ip, "load_rgb"):
        rgb = ip.load_rgb(path)
    else:
        # as Hugging Face's load_image: EXIF orientation applied, then convert("RGB")
        from PIL import Image, ImageOps
        with Image.open(path) as im:
            rgb = np.asarray(ImageOps.exif_transpose(im).convert("RGB"), dtype=np.uint8)
    patches, positions, _ = ip.preprocess(rgb, budget)
    return (np.asarray(patches, dtype=np.float64),
            np.asarray(positions, dtype=np.int64))


# -------------------------------------------------------- sequence layout

def record_items(rec):
    """[("text", str) | ("image", IMG)] in layout order (SPEC.md 2.3)."""
    if "content" in rec:
        content = rec["content"]
        if not isinstance(content, list):
            raise RecordError("\"content\" must be an array")
        items = []
        for it in content:
            if not isinstance(it, dict):
                raise RecordError("content items must be objects")
            kind = it.get("type")
            if kind == "text" and isinstance(it.get("text"), str):
                items.append(("text", it["text"]))
            elif kind == "image" and isinstance(it.get("image", it.get("path")), str):
                items.append(("image", it.get("image", it.get("path"))))
            else:
                raise RecordError("unsupported content item %s"
                                  % json.dumps(it)[:80])
        return items
    imgs = rec.get("image", [])
    if isinstance(imgs, str):
        imgs = [imgs]
    if not isinstance(imgs, list) or not all(isinstance(x, str) for x in imgs):
        raise RecordError("\"image\" must be a path or an array of paths")
    text = rec.get("text", "")
    if not isinstance(text, str):
        raise RecordError("\"text\" must be a string")
    if IMAGE_PLACEHOLDER in text:
        # manual placeholders: the images fill them in order
        parts = text.split(IMAGE_PLACEHOLDER)
        if len(parts) - 1 != len(imgs):
            raise RecordError("%d <|image|> placeholders but %d images"
                              % (len(parts) - 1, len(imgs)))
        items = [("text", parts[0])]
        for img, t in zip(imgs, parts[1:]):
            items += [("image", img), ("text", t)]
        return [it for it in items if it != ("text", "")]
    items = [("image", x) for x in imgs]
    if text:
        items.append(("text", text))
    return items


def layout_string(prefix, items):
    return prefix + "".join(v if k == "text" else IMAGE_PLACEHOLDER
                            for k, v in items)


def assemble_ids(tok, layout, n_soft):
    """<bos> + tokens(layout) + <eos>, each <|image|> id expanded to
    <|image> + <|image|> x n_soft[k] + <image|> (k-th image)."""
    img = tok.vocab.get(IMAGE_PLACEHOLDER)
    boi = tok.vocab.get("<|image>")
    eoi = tok.vocab.get("<image|>")
    if img is None or boi is None or eoi is None:
        raise RecordError("the vocabulary lacks <|image>, <|image|> or <image|>")
    out = []
    k = 0
    for t in tok.encode(layout):
        if t != img:
            out.append(t)
            continue
        if k >= len(n_soft):
            raise RecordError("more <|image|> placeholders than images")
        out += [boi] + [img] * int(n_soft[k]) + [eoi]
        k += 1
    if k != len(n_soft):
        raise RecordError("%d images but %d <|image|> placeholders"
                          % (len(n_soft), k))
    return out


# ------------------------------------------------------------------ embed

class MediaEmbedder:
    def __init__(self, text_model, mmproj):
        g = text_model if isinstance(text_model, GGUFFile) \
            else GGUFFile(text_model)
        self.tok = Tokenizer.from_gguf(g)
        self.model = Model(g)
        self.vision = VisionTower(mmproj)
        if self.vision.n_proj != self.model.n_embd:
            raise ValueError("mmproj projection_dim %d != text hidden size %d"
                             % (self.vision.n_proj, self.model.n_embd))

    def embed(self, prefix, items, images):
        """items: layout items; images: [(patches, positions)] in the order
        of the image items. Returns (ids, soft-token counts, embedding)."""
        soft = [self.vision.encode(p, pos) for p, pos in images]
        n_soft = [s.shape[0] for s in soft]
        ids = assemble_ids(self.tok, layout_string(prefix, items), n_soft)
        rows = np.concatenate(soft, axis=0) if soft \
            else np.zeros((0, self.model.n_embd))
        emb = self.model.forward(ids, media={"image": rows})
        return ids, n_soft, emb


def dumps_record(rec_id, ids, n_soft, emb, dim=0, all_dims=False):
    def vec(v):
        return "[%s]" % ", ".join(fmt_float(x) for x in v)
    parts = ['"id": %s' % json.dumps(rec_id, ensure_ascii=False),
             '"tokens": [%s]' % ", ".join(str(t) for t in ids),
             '"soft_tokens": [%s]' % ", ".join(str(n) for n in n_soft)]
    if dim:
        parts.append('"embedding": ' + vec(matryoshka(emb, dim)))
    else:
        parts.append('"embedding": ' + vec(emb))
        if all_dims:
            for k in MATRYOSHKA:
                if k < len(emb):
                    parts.append('"embedding_%d": %s' % (k, vec(matryoshka(emb, k))))
    return "{" + ", ".join(parts) + "}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--mmproj", required=True)
    ap.add_argument("--prompt", default=None)
    ap.add_argument("--prefix", default=None)
    ap.add_argument("--budget", type=int, default=DEFAULT_BUDGET)
    ap.add_argument("--dim", type=int, default=0)
    ap.add_argument("--all-dims", action="store_true")
    ap.add_argument("--base", default="")
    ap.add_argument("file", nargs="?", default="-")
    a = ap.parse_args(argv)

    em = MediaEmbedder(a.model, a.mmproj)
    f = sys.stdin if a.file == "-" else open(a.file, encoding="utf-8")
    failed = 0
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        rec = json.loads(line)
        rec_id = rec.get("id", n)
        try:
            prefix = record_prefix(rec, a)
            budget = int(rec.get("budget", a.budget))
            items = record_items(rec)
            images = [load_image(os.path.join(a.base, v), budget)
                      for k, v in items if k == "image"]
            ids, n_soft, emb = em.embed(prefix, items, images)
        except (RecordError, ValueError, KeyError, OSError) as e:
            failed += 1
            print(json.dumps({"id": rec_id, "error": str(e)},
                             ensure_ascii=False), flush=True)
            continue
        print(dumps_record(rec_id, ids, n_soft, emb, a.dim, a.all_dims),
              flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
