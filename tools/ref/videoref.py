#!/usr/bin/python3
"""Reference video input (docs/model.md 7 and 2.3): metadata, frame sampling, frame extraction with
the ffmpeg command, per-video preprocessing, timestamps and the frame-block layout.

Written for the goldens (tools/ref/mkgolden --only video) from docs/model.md and the Hugging Face
code it cites, independently of engine/video_decode.c. tools/ref/video.py is the engine side's
reference (tests/test_video.sh); this file keeps the same names and semantics for the
functions they share (sample_frames, timestamps, timestamp_prefix, probe, extract_rgb) but is a
separate implementation, so the two check one another (tests/ref_video_selftest.py).

  sample_frames(duration, src_fps, total, fps=1, max_frames=32, overflow="uniform")
        docs/model.md 7 (HF EmbeddingGemma2VideoProcessor.sample_frames): numpy int64 indices.
        n = max(1, floor(duration * fps)); idx_i = min(total - 1, floor(i * (src_fps / fps)))
        for i < n; when n > max_frames, idx[floor(linspace(0, n - 1, max_frames))]
        ("truncate": the first max_frames).
  timestamps(indices, src_fps)   seconds of each sampled frame: index / src_fps
                                 (VideoMetadata.timestamps)
  timestamp_prefix(s)            "MM:SS" = f"{int(s//60):02d}:{int(s%60):02d}" (docs/model.md 2.3)
  probe(path)                    metadata as HF's default loader builds it (below)
  probe_header(path)             the stream/container header fields, for comparison only
  extract_rgb(path, indices)     uint8 [n, h, w, 3] frames at the source size, ffmpeg command
                                 (or, with GE_REF_FRAMES set, another architecture's, below)
  load_video(path, fps, max_frames, budget)
        -> {"meta", "indices", "seconds", "th", "tw", "n_soft", "frames": [(patches,
           positions)], "rgb" (resized uint8 [n, th, tw, 3])}: the target size is computed
           ONCE from the source frame size (imageproc.plan at `budget`, default 140), every
           frame resized to it (imageproc.resize_u8) and patchified (imageproc.patchify).
  frame_blocks(seconds, n_soft, with_timestamps, placeholder=...)
        the layout text of one video (docs/model.md 2.3): per frame "<|image>" +
        "<|video|>" x n_soft + "<image|>", concatenated; with timestamps each block is
        prefixed "MM:SS " and the blocks are joined by " ". placeholder=1 gives one
        "<|video|>" per frame (the form embed_media.py tokenizes, then expands each to n_soft
        ids: the same ids).

Metadata (probe). transformers' load_video uses torchcodec by default, VideoDecoder with
seek_mode="exact", which scans every packet of the first video stream. From ffprobe:
    ffprobe -v error -select_streams v:0 -show_entries
            stream=time_base,width,height:packet=pts,dts,duration,flags -of json FILE
  total  = the number of packets (packets flagged "D", discarded: before an MP4 edit list's
           start, are not frames);
  begin  = min(pts) * time_base, end = max(pts + duration) * time_base (dts where a packet
           has no pts), D = end - begin (seconds);
  F      = total / D.
The header fields (stream nb_frames, avg_frame_rate / r_frame_rate, stream or format
duration) are NOT used: nb_frames is absent in Matroska/WebM, the rates are guesses for
variable-rate streams and the format duration covers every stream. probe_header reports them
so the difference can be seen (`videoref.py probe FILE` prints both).

Frames (extract_rgb). `ffmpeg -noautorotate -i FILE -map 0:v:0 -vf select=eq(n\\,I1)+...
-fps_mode passthrough -pix_fmt rgb24 -f rawvideo -`: frame n = the n-th decoded frame in
presentation order; the RGB conversion is the auto-inserted scale filter's (swscale, the
frame's colour matrix and range, no scaling). The rotation of a display matrix is not applied
(the reference's loaders hand over the frames as stored).

CLI: `videoref.py sample D F TOTAL [FPS [MAX_FRAMES]]`, `videoref.py probe FILE`,
`videoref.py frames FILE [FPS [MAX_FRAMES [BUDGET]]]` (indices, seconds, size, tokens).
"""

import json
import math
import os
import subprocess
import sys
import tempfile
from fractions import Fraction

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import imageproc  # noqa: E402

FPS = 1.0
MAX_FRAMES = 32
BUDGET = 140
IMAGE_BEGIN, IMAGE_END, VIDEO_PLACEHOLDER = "<|image>", "<image|>", "<|video|>"


# ------------------------------------------------------------------------ sampling

def sample_frames(duration, src_fps, total, fps=FPS, max_frames=MAX_FRAMES, overflow="uniform"):
    """docs/model.md 7 frame sampling; numpy int64 indices (see the module doc)."""
    if not (total >= 1 and src_fps > 0 and fps > 0 and max_frames >= 1
            and math.isfinite(duration) and duration >= 0):
        raise ValueError("bad sampling arguments: duration %r, src_fps %r, total %r, fps %r, "
                         "max_frames %r" % (duration, src_fps, total, fps, max_frames))
    n = max(1, math.floor(duration * fps))
    step = src_fps / fps
    idx = np.array([min(int(total) - 1, math.floor(i * step)) for i in range(n)],
                   dtype=np.int64)
    if n <= max_frames:
        return idx
    if overflow == "truncate":
        return idx[:max_frames]
    if overflow != "uniform":
        raise ValueError("overflow must be uniform or truncate")
    # np.linspace(..., dtype=int) truncates toward zero (floor for these non-negative values)
    keep = np.floor(np.linspace(0, n - 1, max_frames)).astype(np.int64)
    return idx[keep]


def timestamps(indices, src_fps):
    return [int(i) / src_fps for i in indices]


def timestamp_prefix(s):
    return "%02d:%02d" % (int(s // 60), int(s % 60))


def frame_blocks(seconds, n_soft, with_timestamps=False, placeholder=None):
    """The layout text of one video's frames (docs/model.md 2.3). placeholder: how many
    "<|video|>" per block (default n_soft)."""
    k = n_soft if placeholder is None else placeholder
    block = IMAGE_BEGIN + VIDEO_PLACEHOLDER * k + IMAGE_END
    if not with_timestamps:
        return block * len(seconds)
    return " ".join("%s %s" % (timestamp_prefix(s), block) for s in seconds)


# ------------------------------------------------------------------------ metadata

def _ffprobe(args):
    r = subprocess.run(["ffprobe", "-v", "error"] + args, capture_output=True, text=True)
    if r.returncode:
        raise ValueError("ffprobe %s: %s" % (" ".join(args[-1:]), r.stderr.strip()[-300:]))
    return json.loads(r.stdout)


def probe(path):
    """{"frames", "begin", "end", "duration", "fps", "width", "height"} from the packet
    scan (see the module doc); ValueError for a file with no video stream or no packet."""
    j = _ffprobe(["-select_streams", "v:0", "-show_entries",
                  "stream=time_base,width,height:packet=pts,dts,duration,flags",
                  "-of", "json", path])
    if not j.get("streams"):
        raise ValueError("%s: no video stream" % path)
    st = j["streams"][0]
    tb = Fraction(st["time_base"])
    tb = tb.numerator / tb.denominator   # av_q2d: the double torchcodec multiplies by
    starts, ends = [], []
    for p in j.get("packets", []):
        if "D" in p.get("flags", ""):
            continue
        t = p.get("pts", "N/A")
        if t in (None, "N/A"):
            t = p.get("dts")
        t = int(t)
        d = p.get("duration", 0)
        d = int(d) if d not in (None, "N/A") else 0
        starts.append(t)
        ends.append(t + d)
    if not starts:
        raise ValueError("%s: no video packets" % path)
    begin, end = min(starts) * tb, max(ends) * tb
    duration = end - begin
    if not duration > 0:
        raise ValueError("%s: zero duration" % path)
    return {"frames": len(starts), "begin": begin, "end": end, "duration": duration,
            "fps": len(starts) / duration, "width": int(st["width"]),
            "height": int(st["height"])}


def probe_header(path):
    """The header fields the reference does not use (for comparison)."""
    j = _ffprobe(["-select_streams", "v:0", "-show_entries",
                  "stream=nb_frames,avg_frame_rate,r_frame_rate,duration,codec_name:"
                  "format=duration,format_name", "-of", "json", path])
    st = (j.get("streams") or [{}])[0]
    return {"codec": st.get("codec_name"), "format": j.get("format", {}).get("format_name"),
            "nb_frames": st.get("nb_frames"), "avg_frame_rate": st.get("avg_frame_rate"),
            "r_frame_rate": st.get("r_frame_rate"), "stream_duration": st.get("duration"),
            "format_duration": j.get("format", {}).get("duration")}


# ------------------------------------------------------------------------ frames

def extract_rgb(path, indices, size=None):
    """uint8 [len(indices), h, w, 3]: the frames at those presentation-order indices, RGB24
    at the source size, from the ffmpeg command (see the module doc). size = (w, h) from a
    probe already made (else probed here)."""
    if size is None:
        m = probe(path)
        size = (m["width"], m["height"])
    w, h = size
    want = sorted(set(int(i) for i in indices))
    sel = "select=" + "+".join("eq(n\\,%d)" % i for i in want)
    r = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-noautorotate", "-i", path,
                        "-map", "0:v:0", "-vf", sel, "-fps_mode", "passthrough",
                        "-pix_fmt", "rgb24", "-f", "rawvideo", "-"], capture_output=True)
    if r.returncode:
        raise ValueError("ffmpeg %s: %s" % (path, r.stderr.decode("utf-8", "replace")[-300:]))
    frame = h * w * 3
    if len(r.stdout) != frame * len(want):
        raise ValueError("ffmpeg gave %d bytes for %d frames of %dx%d from %s"
                         % (len(r.stdout), len(want), w, h, path))
    got = np.frombuffer(r.stdout, dtype=np.uint8).reshape(len(want), h, w, 3)
    pos = {i: k for k, i in enumerate(want)}
    return np.stack([got[pos[int(i)]] for i in indices])


def dumped_rgb(cmd, path, fps, max_frames, idx, size):
    """The sampled frames as another build's libswscale converts them: GE_REF_FRAMES is a
    command prefix running tests/video_dump of that build (e.g. "qemu-aarch64-static -cpu max
    build/aarch64/video_dump"). FFmpeg converts YUV to RGB with per-architecture SIMD code
    whose rounding differs (an arm64 machine's torchcodec sees the arm64 pixels), so the
    goldens for an arm64 build come from its frames; the dump's frame choice must still be
    this module's."""
    w, h = size
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "frames.rgb")
        r = subprocess.run(cmd.split() + ["decode", path, out, "raw", "fps=%r" % fps,
                                          "frames=%d" % max_frames], capture_output=True,
                           text=True)
        if r.returncode:
            raise ValueError("%s %s: %s" % (cmd, path, (r.stdout + r.stderr)[-300:]))
        lines = r.stdout.splitlines()
        got = [int(v) for v in lines[1].split()]
        if got != [int(i) for i in idx]:
            raise ValueError("%s sampled frames %s of %s, the reference %s"
                             % (cmd, got, path, list(idx)))
        data = np.fromfile(out, dtype=np.uint8)
    if data.size != len(idx) * h * w * 3:
        raise ValueError("%s gave %d bytes for %d frames of %dx%d" % (cmd, data.size, len(idx),
                                                                     w, h))
    return data.reshape(len(idx), h, w, 3)


def load_video(path, fps=FPS, max_frames=MAX_FRAMES, budget=BUDGET, timestamps_on=False):
    """Everything the embedder needs of one video (see the module doc)."""
    meta = probe(path)
    idx = sample_frames(meta["duration"], meta["fps"], meta["frames"], fps, max_frames)
    secs = timestamps(idx, meta["fps"])
    th, tw, n_soft = imageproc.plan(meta["height"], meta["width"], budget)  # once per video
    size = (meta["width"], meta["height"])
    cmd = os.environ.get("GE_REF_FRAMES")
    rgb = dumped_rgb(cmd, path, fps, max_frames, idx, size) if cmd else \
        extract_rgb(path, idx, size)
    frames, resized = [], []
    for f in rgb:
        r = imageproc.resize_u8(f, th, tw) if (th, tw) != f.shape[:2] else f
        resized.append(r)
        patches, positions = imageproc.patchify(r)
        frames.append((np.asarray(patches, dtype=np.float64),
                       np.asarray(positions, dtype=np.int64)))
    return {"meta": meta, "indices": [int(i) for i in idx], "seconds": secs, "th": th,
            "tw": tw, "n_soft": n_soft, "frames": frames, "rgb": np.stack(resized)}


def main(a):
    if len(a) >= 4 and a[0] == "sample":
        args = [float(a[1]), float(a[2]), int(a[3])]
        if len(a) > 4:
            args.append(float(a[4]))
        if len(a) > 5:
            args.append(int(a[5]))
        print(" ".join(str(int(i)) for i in sample_frames(*args)))
    elif len(a) == 2 and a[0] == "probe":
        print(json.dumps({"probe": probe(a[1]), "header": probe_header(a[1])}))
    elif len(a) >= 2 and a[0] == "frames":
        v = load_video(a[1], float(a[2]) if len(a) > 2 else FPS,
                       int(a[3]) if len(a) > 3 else MAX_FRAMES,
                       int(a[4]) if len(a) > 4 else BUDGET)
        print(json.dumps({"meta": v["meta"], "indices": v["indices"], "seconds": v["seconds"],
                          "th": v["th"], "tw": v["tw"], "n_soft": v["n_soft"]}))
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
