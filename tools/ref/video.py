#!/usr/bin/python3
"""Reference video frame sampling (docs/model.md 7) and frame extraction with the ffmpeg command,
written from the Hugging Face code independently of engine/video_decode.c.

  sample_frames(duration, src_fps, total, fps=1, max_frames=32, overflow="uniform")
        EmbeddingGemma2VideoProcessor.sample_frames: the frame indices (numpy int64)
  timestamps(indices, src_fps)      VideoMetadata.timestamps: index / fps, in seconds
  timestamp_prefix(seconds)         "MM:SS" as replace_video_token writes it (docs/model.md 2.3)
  probe(path)                       the metadata HF's default loader (torchcodec,
                                    seek_mode="exact") builds, from ffprobe's packet list:
                                    {"frames", "begin", "end", "duration", "fps"}
  extract_rgb(path, indices)        the frames at those indices (i-th frame in presentation
                                    order), RGB24 at the source size, from the ffmpeg command:
                                    uint8 [len(indices), h, w, 3]

torchcodec's exact mode scans every packet of the stream: frames = packet count, begin =
min(pts) * time_base, end = max(pts + duration) * time_base (dts when a packet has no pts),
duration = end - begin, fps = frames / duration. Packets the demuxer flags as discarded (before
an MP4 edit list's start) are not frames. The frames' resize is the image one
(tools/ref/imageproc.py) at the per-frame budget (140 by default), size computed once.

`video.py sample DURATION SRC_FPS TOTAL [FPS [MAX_FRAMES]]` prints the indices;
`video.py probe FILE` prints the metadata as JSON.
"""
import json
import math
import subprocess
import sys
from fractions import Fraction

import numpy as np


def sample_frames(duration, src_fps, total, fps=1, max_frames=32, overflow="uniform"):
    step = src_fps / fps  # native frames per sampled frame
    n = max(1, int(duration * fps))
    sec = [min(total - 1, int(i * step)) for i in range(n)]
    if len(sec) <= max_frames:
        return np.array(sec, dtype=np.int64)
    if overflow == "truncate":
        return np.array(sec[:max_frames], dtype=np.int64)
    pick = np.linspace(0, len(sec) - 1, max_frames, dtype=int)
    return np.array([sec[i] for i in pick], dtype=np.int64)


def timestamps(indices, src_fps):
    return [int(i) / src_fps for i in indices]


def timestamp_prefix(s):
    return f"{int(s // 60):02d}:{int(s % 60):02d}"


def probe(path):
    r = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                        "stream=time_base,width,height:packet=pts,dts,duration,flags",
                        "-of", "json", path], capture_output=True, text=True, check=True)
    j = json.loads(r.stdout)
    tb = Fraction(j["streams"][0]["time_base"])
    tbf = tb.numerator / tb.denominator  # av_q2d
    lo, hi, n = None, None, 0
    for p in j.get("packets", []):
        if "D" in p.get("flags", ""):
            continue
        pts = p.get("pts", p.get("dts"))
        pts = int(pts) if pts not in (None, "N/A") else int(p["dts"])
        dur = int(p.get("duration", 0) or 0)
        lo = pts if lo is None else min(lo, pts)
        hi = pts + dur if hi is None else max(hi, pts + dur)
        n += 1
    begin, end = lo * tbf, hi * tbf
    return {"frames": n, "begin": begin, "end": end, "duration": end - begin,
            "fps": n / (end - begin), "width": j["streams"][0]["width"],
            "height": j["streams"][0]["height"]}


def extract_rgb(path, indices):
    """frames by index via ffmpeg's select filter (n = the frame's number in presentation
    order), no rotation, every decoded frame passed through (no rate conversion)"""
    meta = probe(path)
    w, h = meta["width"], meta["height"]
    want = sorted(set(int(i) for i in indices))
    expr = "+".join("eq(n\\,%d)" % i for i in want)
    r = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-noautorotate", "-i", path,
                        "-map", "0:v:0", "-vf", "select=" + expr, "-fps_mode", "passthrough",
                        "-pix_fmt", "rgb24", "-f", "rawvideo", "-"],
                       capture_output=True, check=True)
    got = np.frombuffer(r.stdout, np.uint8).reshape(-1, h, w, 3)
    if len(got) != len(want):
        raise RuntimeError("ffmpeg gave %d of %d frames" % (len(got), len(want)))
    at = {i: k for k, i in enumerate(want)}
    return np.stack([got[at[int(i)]] for i in indices])


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) >= 4 and a[0] == "sample":
        args = [float(a[1]), float(a[2]), int(a[3])]
        if len(a) > 4:
            args.append(float(a[4]))
        if len(a) > 5:
            args.append(int(a[5]))
        print(" ".join(str(int(i)) for i in sample_frames(*args)))
    elif len(a) == 2 and a[0] == "probe":
        print(json.dumps(probe(a[1])))
    else:
        sys.exit(__doc__)
