#!/usr/bin/python3
"""Reference embedder for records with images, audio and video (float64 NumPy).

usage: embed_media.py -m TEXT.gguf --mmproj MMPROJ.gguf [--prompt NAME]
                      [--prefix STR] [--budget N] [--dim N] [--all-dims]
                      [--semantics official|llamacpp] [--base DIR]
                      [--video-fps F] [--video-frames N] [--video-tokens N]
                      [--video-timestamps] [FILE.jsonl]

Input: JSONL records (stdin if FILE is absent or "-"):
  {"id": ..., "image": IMG or [IMG, ...], "text": "...", "prompt": NAME}
      the images come first, then the text (docs/model.md 2.3), unless the text
      holds its own "<|image|>" placeholders: then no automatic ones are
      added and the images fill those, in order;
  {"id": ..., "audio": AUD or [AUD, ...], "text": "..."}
      the same for audio clips ("<|audio|>" placeholders); with both "image"
      and "audio": the images, then the clips, then the text;
  {"id": ..., "video": VID or [VID, ...], "text": "..."}
      the same for videos ("<|video|>" placeholders); with several of
      "image", "video", "audio": the images, then the videos, then the
      clips, then the text (the order of docs/model.md 2.4's scatter);
  {"id": ..., "content": [{"type": "text", "text": "..."},
                          {"type": "image", "image": IMG},
                          {"type": "audio", "audio": AUD},
                          {"type": "video", "video": VID}, ...]}
      items in the given order, concatenated with no separator ("path"
      also names an image, audio or video file).
  "prompt" (a docs/model.md 2.2 name) or "prefix" (a literal string) go first;
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
AUD is a path (joined to --base likewise):
  *.wav        integer PCM read by audio.load_wav; 16 kHz only (resampling
               is the C decoder's job: feed its output as raw samples);
  *.f32, *.raw, or "raw:PATH"
               raw little-endian float32 samples at 16 kHz (what
               tests/audio_dump decode writes).
VID is a video file (joined to --base likewise), read by tools/ref/videoref.py:
metadata from ffprobe's packet list, frames sampled per docs/model.md 7 (--video-fps,
default 1; at most --video-frames, default 32, chosen uniformly), extracted
with the ffmpeg command as RGB24 and resized as images at --video-tokens
(default 140) with the size computed once per video; each frame goes
through the vision tower alone. In the layout a video is, per sampled frame,
<|image> + <|video|> x N + <image|> (no separator); with --video-timestamps
(or "video_timestamps": true in a record) each block is prefixed "MM:SS "
and the blocks are joined by " " (docs/model.md 2.3), as one string with the
texts around it, so BPE may merge a timestamp with an adjacent text.
The samples are cut to 30 s, run through the front end (audio.features,
--semantics) and the tower (audio_tower.py): N = (L+3)//4 soft tokens for
L valid mel frames; L = 0 (under 161 samples, officially) is an error
("too short").

The layout string is prefix + the items (an image as "<|image|>", a clip
as "<|audio|>", a video as its frame blocks with one "<|video|>" each); it
is tokenised with <bos>/<eos> and each "<|image|>" id
is expanded to <|image> + <|image|> x N + <image|>, each "<|audio|>" to
<|audio> + <|audio|> x N + <audio|>, each "<|video|>" id to N of them
(the frame's <|image> and <image|> are in the string), N = the item's
soft-token count (docs/model.md 2.3). The soft tokens (vision.py, audio_tower.py) replace the
placeholder rows.

Output: one line per record, {"id", "tokens", "soft_tokens" (N per media
item, in layout order; for a video N per frame), "frames" (per video:
{"indices", "seconds", "size": [w, h] after the resize}, only when the
record has a video),
"embedding" (full width, L2-normalised; floats as repr)}; --all-dims adds
"embedding_K" = normalize(embedding[:K]) for every Matryoshka width K
(512, 256, 128) below the full width; --dim K prints only that width as
"embedding". A record that fails prints {"id", "error"} and the exit
status is 1.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from embed import fmt_float, record_prefix  # noqa: E402
from gguf import GGUFFile  # noqa: E402
from model import Model, matryoshka  # noqa: E402
from tokenizer import Tokenizer  # noqa: E402
from vision import VisionTower  # noqa: E402
import audio as audio_fe  # noqa: E402
from audio_tower import AudioTower  # noqa: E402
import videoref  # noqa: E402

MATRYOSHKA = (512, 256, 128)
BUDGETS = (70, 140, 280, 560, 1120)
DEFAULT_BUDGET = 280
IMAGE_PLACEHOLDER = "<|image|>"
AUDIO_PLACEHOLDER = "<|audio|>"
VIDEO_PLACEHOLDER = "<|video|>"
PLACEHOLDER = {"image": IMAGE_PLACEHOLDER, "audio": AUDIO_PLACEHOLDER,
               "video": VIDEO_PLACEHOLDER}
BOUNDARY = {"image": ("<|image>", "<image|>"), "audio": ("<|audio>", "<audio|>")}


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


# ------------------------------------------------------------ audio inputs

def load_audio_samples(path):
    """16 kHz float32 samples of an AUD (see the module doc)."""
    if path.startswith("raw:"):
        return audio_fe.load_raw(path[4:])
    low = path.lower()
    if low.endswith(".f32") or low.endswith(".raw"):
        return audio_fe.load_raw(path)
    if low.endswith(".wav"):
        x, rate = audio_fe.load_wav(path)
        if rate != audio_fe.RATE:
            raise RecordError("%s: %d Hz; the reference takes 16 kHz only (give it the C "
                              "decoder's raw output)" % (path, rate))
        return x
    raise RecordError("%s: audio must be .wav, or raw float32 (.f32, .raw, raw:PATH)" % path)


def load_audio(path, semantics="official"):
    """(feat [frames, 128] float32, L valid frames) of one AUD, cut to 30 s;
    a clip with no valid frame is a RecordError ("too short")."""
    x = audio_fe.truncate(load_audio_samples(path))
    feat, valid = audio_fe.features(x, semantics)
    if semantics == "llamacpp":
        valid = len(feat)
    if valid == 0:
        raise RecordError("%s: audio too short (%d samples, no complete mel frame)"
                          % (path, len(x)))
    return feat, valid


def _path_of(it, kind):
    v = it.get(kind, it.get("path"))
    return v if isinstance(v, str) else None


def _paths(rec, kind):
    v = rec.get(kind, [])
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise RecordError("\"%s\" must be a path or an array of paths" % kind)
    return v


# ------------------------------------------------------------ video inputs

def load_video(path, fps=videoref.FPS, max_frames=videoref.MAX_FRAMES,
               budget=videoref.BUDGET):
    """videoref.load_video: {"frames": [(patches, positions)], "seconds",
    "indices", "th", "tw", "n_soft", ...}; failures are RecordErrors."""
    if budget not in BUDGETS:
        raise RecordError("video budget %r is not one of %s" % (budget, BUDGETS))
    try:
        return videoref.load_video(path, fps, max_frames, budget)
    except (ValueError, subprocess.SubprocessError, OSError) as e:
        raise RecordError("%s: %s" % (path, e))


# -------------------------------------------------------- sequence layout

def record_items(rec):
    """[("text", str) | ("image", IMG) | ("audio", AUD)] in layout order
    (docs/model.md 2.3)."""
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
            elif kind in PLACEHOLDER and _path_of(it, kind) is not None:
                items.append((kind, _path_of(it, kind)))
            else:
                raise RecordError("unsupported content item %s"
                                  % json.dumps(it)[:80])
        return items
    media = {k: _paths(rec, k) for k in PLACEHOLDER}
    text = rec.get("text", "")
    if not isinstance(text, str):
        raise RecordError("\"text\" must be a string")
    if any(PLACEHOLDER[k] in text for k in PLACEHOLDER):
        # manual placeholders: each kind's files fill its placeholders in order
        items, rest, nxt = [], text, {k: 0 for k in PLACEHOLDER}
        while rest:
            hits = [(rest.find(PLACEHOLDER[k]), k) for k in PLACEHOLDER
                    if PLACEHOLDER[k] in rest]
            if not hits:
                items.append(("text", rest))
                break
            at, kind = min(hits)
            items.append(("text", rest[:at]))
            if nxt[kind] >= len(media[kind]):
                raise RecordError("more %s placeholders than %s files"
                                  % (PLACEHOLDER[kind], kind))
            items.append((kind, media[kind][nxt[kind]]))
            nxt[kind] += 1
            rest = rest[at + len(PLACEHOLDER[kind]):]
        for kind in PLACEHOLDER:
            if nxt[kind] != len(media[kind]):
                raise RecordError("%d %s placeholders but %d %s files"
                                  % (nxt[kind], PLACEHOLDER[kind], len(media[kind]), kind))
        return [it for it in items if it != ("text", "")]
    items = [(k, x) for k in ("image", "video", "audio") for x in media[k]]
    if text:
        items.append(("text", text))
    return items


def layout_string(prefix, items, videos=(), timestamps=False):
    """prefix + the items; videos: one (seconds per frame) list per video item,
    in order: each video becomes its frame blocks, one "<|video|>" per frame
    (videoref.frame_blocks), with "MM:SS " prefixes when timestamps."""
    vids = iter(videos)
    out = [prefix]
    for k, v in items:
        if k == "text":
            out.append(v)
        elif k == "video":
            secs = next(vids, None)
            if secs is None:
                raise RecordError("a video item without its frames")
            out.append(videoref.frame_blocks(secs, 1, timestamps, placeholder=1))
        else:
            out.append(PLACEHOLDER[k])
    return "".join(out)


def assemble_ids(tok, layout, n_soft, n_audio=(), n_video=()):
    """<bos> + tokens(layout) + <eos>, each <|image|> id expanded to
    <|image> + <|image|> x n_soft[k] + <image|> (k-th image), each <|audio|>
    id to <|audio> + <|audio|> x n_audio[k] + <audio|> (k-th clip), each
    <|video|> id to <|video|> x n_video[k] (k-th video frame: its <|image>
    and <image|> are in the layout)."""
    counts = {"image": list(n_soft), "audio": list(n_audio), "video": list(n_video)}
    ids = {}
    for kind, (b, e) in BOUNDARY.items():
        ph = PLACEHOLDER[kind]
        if counts[kind] or kind == "image":
            if any(tok.vocab.get(x) is None for x in (b, ph, e)):
                raise RecordError("the vocabulary lacks %s, %s or %s" % (b, ph, e))
        if tok.vocab.get(ph) is not None:
            ids[tok.vocab[ph]] = (kind, tok.vocab.get(b), tok.vocab.get(e))
    if counts["video"]:
        vid = tok.vocab.get(VIDEO_PLACEHOLDER)
        if vid is None or any(tok.vocab.get(x) is None for x in BOUNDARY["image"]):
            raise RecordError("the vocabulary lacks <|video|>, <|image> or <image|>")
        ids[vid] = ("video", None, None)
    out = []
    used = {"image": 0, "audio": 0, "video": 0}
    for t in tok.encode(layout):
        if t not in ids:
            out.append(t)
            continue
        kind, b, e = ids[t]
        k = used[kind]
        if k >= len(counts[kind]):
            raise RecordError("more %s placeholders than %s items"
                              % (PLACEHOLDER[kind], kind))
        if kind == "video":
            out += [t] * int(counts[kind][k])
        else:
            out += [b] + [t] * int(counts[kind][k]) + [e]
        used[kind] += 1
    for kind in ("image", "audio", "video"):
        if used[kind] != len(counts[kind]):
            raise RecordError("%d %s items but %d %s placeholders"
                              % (len(counts[kind]), kind, used[kind], PLACEHOLDER[kind]))
    return out


# ------------------------------------------------------------------ embed

class MediaEmbedder:
    def __init__(self, text_model, mmproj, semantics="official"):
        """mmproj: one path (or GGUFFile), or a list of them; each tower is
        taken from the first file that holds it."""
        g = text_model if isinstance(text_model, GGUFFile) \
            else GGUFFile(text_model)
        self.tok = Tokenizer.from_gguf(g)
        self.model = Model(g)
        self.semantics = semantics
        self.vision = self.audio = None
        for m in (mmproj if isinstance(mmproj, (list, tuple)) else [mmproj]):
            mg = m if isinstance(m, GGUFFile) else GGUFFile(m)
            if self.vision is None and mg.get("clip.has_vision_encoder", False):
                self.vision = VisionTower(mg, semantics=semantics)
            if self.audio is None and mg.get("clip.has_audio_encoder", False):
                self.audio = AudioTower(mg)
        if self.vision is None and self.audio is None:
            raise ValueError("the mmproj holds neither a vision nor an audio tower")
        for name, t in (("vision", self.vision), ("audio", self.audio)):
            if t is not None and t.n_proj != self.model.n_embd:
                raise ValueError("mmproj %s projection_dim %d != text hidden size %d"
                                 % (name, t.n_proj, self.model.n_embd))

    def plan_ids(self, prefix, items, n_img, n_aud, videos=(), timestamps=False):
        """The ids of a record from its soft-token counts alone (nothing runs
        through a tower): videos as in embed."""
        n_vid = [v["n_soft"] for v in videos for _ in v["seconds"]]
        layout = layout_string(prefix, items, [v["seconds"] for v in videos], timestamps)
        return assemble_ids(self.tok, layout, n_img, n_aud, n_vid)

    def embed(self, prefix, items, images, audios=(), videos=(), timestamps=False,
              max_tokens=None):
        """items: layout items; images: [(patches, positions)] in the order
        of the image items; audios: [(feat, n_valid)] (load_audio) in the
        order of the audio items; videos: [load_video(...)] in the order of
        the video items; timestamps: the "MM:SS " layout. max_tokens: a
        RecordError "too long" when the ids are more (checked before any
        tower runs). Returns (ids, soft-token counts of the media items in
        layout order (a video: per frame), embedding)."""
        if (images or videos) and self.vision is None:
            raise RecordError("an image or video item but the mmproj has no vision tower")
        if max_tokens is not None:
            # the counts the towers will give: an image's pooled 3x3 patches, a clip's
            # (L + 3) // 4 (official semantics)
            n_img = [len(p) // 9 if len(p) % 9 == 0 else None for p, _ in images]
            n_aud = [(n + 3) // 4 for _, n in audios]
            if self.semantics == "official" and None not in n_img:
                ids = self.plan_ids(prefix, items, n_img, n_aud, videos, timestamps)
                if len(ids) > max_tokens:
                    raise RecordError("too long: %d tokens with the media, the limit is %d"
                                      % (len(ids), max_tokens))
        if audios and self.audio is None:
            raise RecordError("an audio item but the mmproj has no audio tower")
        soft = [self.vision.encode(p, pos) for p, pos in images]
        asoft = [self.audio.encode(f, n, self.semantics) for f, n in audios]
        vsoft = [self.vision.encode(p, pos) for v in videos for p, pos in v["frames"]]
        n_img = [s.shape[0] for s in soft]
        n_aud = [s.shape[0] for s in asoft]
        for v in videos:
            if any(len(p) != v["n_soft"] * 9 for p, _ in v["frames"]):
                raise RecordError("video frames of different sizes")
        ids = self.plan_ids(prefix, items, n_img, n_aud, videos, timestamps)
        H = self.model.n_embd
        media = {"image": np.concatenate(soft, axis=0) if soft else np.zeros((0, H))}
        if asoft:
            media["audio"] = np.concatenate(asoft, axis=0)
        if vsoft:
            media["video"] = np.concatenate(vsoft, axis=0)
        emb = self.model.forward(ids, media=media)
        it = {"image": iter(n_img), "audio": iter(n_aud),
              "video": iter([v["n_soft"] for v in videos])}
        n_soft = [next(it[k]) for k, _ in items if k in it]
        return ids, n_soft, emb


def dumps_record(rec_id, ids, n_soft, emb, dim=0, all_dims=False, videos=()):
    def vec(v):
        return "[%s]" % ", ".join(fmt_float(x) for x in v)
    parts = ['"id": %s' % json.dumps(rec_id, ensure_ascii=False),
             '"tokens": [%s]' % ", ".join(str(t) for t in ids),
             '"soft_tokens": [%s]' % ", ".join(str(n) for n in n_soft)]
    if videos:
        parts.append('"frames": ' + json.dumps([
            {"indices": v["indices"], "seconds": v["seconds"], "size": [v["tw"], v["th"]]}
            for v in videos]))
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
    ap.add_argument("--semantics", choices=("official", "llamacpp"), default="official")
    ap.add_argument("--base", default="")
    ap.add_argument("--video-fps", type=float, default=videoref.FPS)
    ap.add_argument("--video-frames", type=int, default=videoref.MAX_FRAMES)
    ap.add_argument("--video-tokens", type=int, default=videoref.BUDGET)
    ap.add_argument("--video-timestamps", action="store_true")
    ap.add_argument("--max-tokens", type=int, default=8192)
    ap.add_argument("file", nargs="?", default="-")
    a = ap.parse_args(argv)

    em = MediaEmbedder(a.model, a.mmproj, a.semantics)
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
            audios = [load_audio("raw:" + os.path.join(a.base, v[4:]) if v.startswith("raw:")
                                 else os.path.join(a.base, v), a.semantics)
                      for k, v in items if k == "audio"]
            videos = [load_video(os.path.join(a.base, v), a.video_fps, a.video_frames,
                                 a.video_tokens) for k, v in items if k == "video"]
            ts = bool(rec.get("video_timestamps", a.video_timestamps))
            ids, n_soft, emb = em.embed(prefix, items, images, audios, videos, ts,
                                        a.max_tokens)
        except (RecordError, ValueError, KeyError, OSError) as e:
            failed += 1
            print(json.dumps({"id": rec_id, "error": str(e)},
                             ensure_ascii=False), flush=True)
            continue
        print(dumps_record(rec_id, ids, n_soft, emb, a.dim, a.all_dims, videos),
              flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
