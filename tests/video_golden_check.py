#!/usr/bin/python3
"""Compare gemmaembed's video and interleaved records with the stored float64 goldens.

usage: tests/video_golden_check.py [--fast-only] [--quick | --full] [--golden DIR] BINARY
                                   [EXTRA_ARGS...]

The goldens golden/tiny-mmproj-video-q8_0.jsonl and golden/tiny-mmproj-video-f32.jsonl
(tools/ref/mkgolden --only video; golden/README.md) hold records on the clips of
tools/ref/mkvideo (3 s 640x480, 75 s 1280x720, 4 s at 29.97 fps, 0.5 s 1280x720 H.264 MP4s
and a 3 s 1280x720 VP9 WebM), which this check makes in a temporary directory with the
ffmpeg command, and on two tools/ref/mkaudio clips and committed images: each clip alone at
the defaults and with --video-timestamps, --video-frames 8, --video-fps 2 and 0.25,
--video-tokens 70 and 280 (the 75 s clip at 280 is 32 x 266 + 2 = 8514 tokens: a
"too_long" error record, refused before any tower runs), and records mixing every pair of
text, image, audio and video and all four (content arrays, record keys, manual <|video|>
placeholders, a prompt), with and without timestamps.
Model setups: tiny-q8_0 + the combined tiny-mmproj-both-q8_0.gguf; tiny-f32 +
tiny-mmproj-f32.gguf (vision) + an f32 audio mmproj that tools/mkmodel makes here (seed 1).
For each:
  - the sha256 of the text model, every mmproj (the generated one too), every image, audio
    clip and video clip must equal the manifest's, else nothing is compared (regenerate the
    goldens: a different x264/libvpx makes different clips);
  - `--tokenize` per set of switches ("args" of the records): the ids equal the golden's
    exactly, so the sampled frame count, the soft tokens per frame, the "MM:SS " text and
    the order of the media; too-long records are tokenized too (--tokenize does not refuse);
  - the embeddings per run: cosine with the golden >= 0.99999 (f32 weights) / 0.999 (Q8_0),
    the golden's width and unit norm; each too-long record an error with code "too_long"
    whose message holds both counts, and the run exits 1 (0 without such records). Runs:
    every set of switches on the fast media path; the defaults also with --no-media-fast,
    --threads=1, --no-yield, --prepack, --no-flash, --no-sgemm and --no-media-q8-wide;
  - `--input files` (defaults): the five clips as paths, each the golden of that clip alone.
--golden DIR reads the goldens and manifest there instead of golden/: tests/run makes an arm64
build's under qemu from its own frames (tools/ref/videoref.py, GE_REF_FRAMES; FFmpeg's YUV to
RGB conversion rounds differently per architecture).
--fast-only keeps only the fast-path runs of the defaults' records (no --tokenize, no
switches, no files mode): tests/run adds one per kernel tier. --quick leaves out the records
on the 75 s clip (32 frames each: most of the time; the scalar tier and the sanitizer build).
The reference and switch runs leave those records out too unless --full (make test-full):
the fast run on them checks their frames and layout, and the other runs check the towers'
paths and the switches on every other clip.

Before any of that, `BINARY --help` must list --video-fps, --video-frames, --video-tokens
and --video-timestamps: until the CLI's video support (issue 8) lands this check FAILs with
"the CLI has no video support yet" and compares nothing.

Prints "PASS: name" or "FAIL: name: detail" (one FAIL per failing record) and a closing
"N passed, N failed"; exits 1 on any failure, including a missing binary, golden, model,
clip or tool, or zero records compared.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
GATES = {"tiny-mmproj-video-f32": 0.99999, "tiny-mmproj-video-q8_0": 0.999}
SWITCHES = ("--threads=1", "--no-yield", "--prepack", "--no-flash", "--no-sgemm",
            "--no-media-q8-wide")
VIDEO_FLAGS = ("--video-fps", "--video-frames", "--video-tokens", "--video-timestamps")
NORM_TOL = 1e-4
TIMEOUT = 900

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from selfcheck import cosine, report as report_any, run_jsonl, sha256  # noqa: E402
from selfcheck import finish as finish_script  # noqa: E402


def report(name, ok, detail=""):
    report_any(name, ok, detail, quiet_pass=True)


def finish():
    finish_script("video_golden_check")


def run(cmd, expect_errors, cwd=ROOT):
    """The binary's records by id (image paths are relative to ROOT)."""
    return run_jsonl(cmd, cwd, TIMEOUT, expect_errors)

def expand(template, video_dir, audio_dir):
    """The golden's input template with "{VIDEO}" and "{AUDIO}" the clip directories (on the
    parsed JSON, so the paths need no escaping)."""
    def sub(v):
        if isinstance(v, str):
            return v.replace("{VIDEO}", video_dir).replace("{AUDIO}", audio_dir)
        if isinstance(v, list):
            return [sub(x) for x in v]
        if isinstance(v, dict):
            return {k: sub(x) for k, x in v.items()}
        return v
    return json.dumps(sub(json.loads(template)), ensure_ascii=False)


def make_clips(video_dir, audio_dir, audio_clips):
    ok = True
    for tool, out, names in (("mkvideo", video_dir, []), ("mkaudio", audio_dir, audio_clips)):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "ref", tool), out] +
                           names, capture_output=True, text=True)
        report("tools/ref/%s makes the clips" % tool, r.returncode == 0,
               r.stderr.strip()[-400:])
        ok = ok and r.returncode == 0
    return ok


def verify_files(gname, m, tmp, video_dir, audio_dir, records):
    """Make the generated mmproj, then compare every file's sha256 with the manifest's.
    Returns (text model, [mmproj paths]) or None."""
    bad = []
    mmprojs = []
    for given in m["mmproj"]:
        path = given.replace("{TMP}", tmp) if "{TMP}" in given else os.path.join(ROOT, given)
        if "{TMP}" in given:
            cmd = next(c for c in m["mkmodel"] if given in c).replace("{TMP}", tmp).split()
            r = subprocess.run([os.path.join(ROOT, cmd[0])] + cmd[1:], cwd=ROOT,
                               capture_output=True, text=True)
            if r.returncode:
                bad.append("%s failed: %s" % (" ".join(cmd), r.stderr.strip()[-200:]))
        mmprojs.append((given, path, m["mmproj_sha256"][given]))
    files = [(m["model"], os.path.join(ROOT, m["model"]), m["model_sha256"])] + mmprojs
    files += [(p, os.path.join(ROOT, p), h) for p, h in sorted(m["images"].items())]
    files += [(c, os.path.join(audio_dir, c), h) for c, h in sorted(m["clips"].items())]
    files += [(c, os.path.join(video_dir, c), h) for c, h in sorted(m["videos"].items())]
    for name, path, want in files:
        if not os.path.exists(path):
            bad.append("%s missing" % name)
        elif sha256(path) != want:
            bad.append("%s has sha256 %s, the golden was made from %s" % (name, sha256(path),
                                                                           want))
    unlisted = sorted({p for r in records for p in r["images"]} - set(m["images"]))
    unlisted += sorted({c for r in records for c in r["audio"]} - set(m["clips"]))
    unlisted += sorted({c for r in records for c in r["videos"]} - set(m["videos"]))
    if unlisted:
        bad.append("files not in the manifest: %s" % ", ".join(unlisted))
    report("%s: sha256 of the model, %d mmproj files, %d images, %d audio clips and %d video "
           "clips equal the manifest's" % (gname, len(mmprojs), len(m["images"]),
                                            len(m["clips"]), len(m["videos"])), not bad,
           "; ".join(bad) + " (make them with: %s; %s; %s; %s; or regenerate the goldens "
           "with tools/ref/mkgolden --only video)" % ("; ".join(m["mkmodel"]), m["mkimages"],
                                                      m["mkaudio"], m["mkvideo"]))
    if bad:
        return None
    return os.path.join(ROOT, m["model"]), [p for _, p, _ in mmprojs]


def check_error(r, o):
    """A too-long error record: code "too_long", the message holding both counts."""
    e = (o or {}).get("error")
    want = r["error"]
    if not isinstance(e, dict) or e.get("code") != want["code"] or \
            not all(s in str(e.get("message", "")) for s in want["message_has"]):
        return "want an error record (code %s, message with %s), got %.300s" % (
            want["code"], " and ".join(want["message_has"]), json.dumps(o))
    return None


def check_tokens(tag, records, out):
    for r in records:
        name = "%s tokens %s" % (tag, r["name"])
        o = out.get(r["name"])
        got = (o or {}).get("tokens")
        if got is None:
            report(name, False, "no tokens: %.300s" % json.dumps(o))
        elif got != r["tokens"]:
            i = next((i for i, (a, b) in enumerate(zip(got, r["tokens"])) if a != b),
                     min(len(got), len(r["tokens"])))
            frames = "; ".join("%d frames %s at %dx%d" % (len(f["indices"]), f["indices"],
                                                         f["size"][0], f["size"][1])
                               for f in r["frames"])
            report(name, False, "%d ids, want %d (%s); first difference at %d: got %s want %s"
                   % (len(got), len(r["tokens"]), frames or "no video", i, got[i:i + 8],
                      r["tokens"][i:i + 8]))
        else:
            report("%s (%s)" % (name, "error record's plan" if "error" in r else
                                "soft tokens %s" % r["soft_tokens"]), True)


def check_embeddings(tag, records, out, gate, seconds):
    """One FAIL per failing record, else one PASS for the run. Returns records compared."""
    worst, bad, n_err = (2.0, None, 0.0), 0, 0
    for r in records:
        o = out.get(r["name"]) or {}
        if "error" in r:
            err = check_error(r, o)
            if err:
                report("%s %s" % (tag, r["name"]), False, err)
                bad += 1
            n_err += 1
            continue
        got = o.get("embedding")
        if not isinstance(got, list) or len(got) != len(r["embedding"]):
            report("%s %s" % (tag, r["name"]), False, "no embedding of %d values: %.300s"
                   % (len(r["embedding"]), json.dumps(o)))
            bad += 1
            continue
        got = [float(x) for x in got]
        c = cosine(got, r["embedding"])
        maxabs = max(abs(x - y) for x, y in zip(got, r["embedding"]))
        norm = math.sqrt(sum(x * x for x in got))
        if not (c >= gate) or not (abs(norm - 1) <= NORM_TOL):
            report("%s %s" % (tag, r["name"]), False, "cos=%.9f maxabs=%.3g norm=%.7f, gate "
                   "%g" % (c, maxabs, norm, gate))
            bad += 1
        elif c < worst[0]:
            worst = (c, r["name"], maxabs)
    if not bad and len(records) > n_err:
        report("%s: %d records cosine >= %g (worst %.9f, 1-cos %.2e, %s, maxabs %.3g), %d "
               "error records (%.1f s)" % (tag, len(records) - n_err, gate, worst[0],
                                          1 - worst[0], worst[1], worst[2], n_err, seconds),
               True)
    elif not bad:
        report("%s: %d error records (%.1f s)" % (tag, n_err, seconds), True)
    return len(records) - bad


def has_video_flags(binary):
    try:
        p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    text = p.stdout + p.stderr
    missing = [f for f in VIDEO_FLAGS if f not in text]
    return not missing, "--help lists no %s" % ", ".join(missing)


def main(argv):
    args = argv[1:]
    global GOLDEN
    fast_only = quick = full = False
    while args and args[0] in ("--fast-only", "--quick", "--full", "--golden"):
        fast_only |= args[0] == "--fast-only"
        quick |= args[0] == "--quick"
        full |= args[0] == "--full"
        if args[0] == "--golden" and len(args) > 1:
            GOLDEN = os.path.abspath(args[1])
            args = args[1:]
        args = args[1:]
    if not args or args[0].startswith("-"):
        report("arguments", False, "usage: video_golden_check.py [--fast-only] [--quick | --full] "
               "[--golden DIR] BINARY [EXTRA_ARGS...]")
        finish()
    binary, extra = os.path.abspath(args[0]), args[1:]
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        report("binary", False, "%s missing or not executable" % binary)
        finish()
    ok, why = has_video_flags(binary)
    report("the CLI has video support (--video-fps, --video-frames, --video-tokens, "
           "--video-timestamps)", ok, "the CLI has no video support yet (issue 8): %s; "
           "nothing compared" % why)
    if not ok:
        finish()
    for tool in ("ffmpeg", "ffprobe"):
        if shutil.which(tool) is None:
            report("%s installed" % tool, False, "not on PATH (tools/install-deps): the "
                   "clips are made with it")
            finish()
    try:
        with open(os.path.join(GOLDEN, "manifest.json")) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        report("golden manifest", False, str(e))
        finish()
    label = " ".join(extra)
    tmp = tempfile.mkdtemp(prefix="video_golden_check.")
    video_dir, audio_dir = os.path.join(tmp, "video"), os.path.join(tmp, "audio")
    audio_clips = sorted({c for g in GATES for c in manifest.get(g, {}).get("clips", {})})
    if not make_clips(video_dir, audio_dir, audio_clips):
        finish()
    compared = 0
    for gname, gate in GATES.items():
        tag = gname[len("tiny-mmproj-video-"):]
        m = manifest.get(gname)
        if m is None:
            report("%s manifest entry" % gname, False, "missing from golden/manifest.json")
            continue
        try:
            with open(os.path.join(GOLDEN, m["golden"]), encoding="utf-8") as f:
                records = [json.loads(line) for line in f if line.strip()]
        except (OSError, ValueError) as e:
            report("%s golden file" % gname, False, str(e))
            continue
        ids_ok = all(json.loads(r["input"]).get("id") == r["name"] for r in records)
        if len(records) != m["records"] or not records or not ids_ok:
            report("%s golden file" % gname, False, "%d records (manifest: %d), input ids %s"
                   % (len(records), m["records"], "ok" if ids_ok else "differ from names"))
            continue
        files = verify_files(gname, m, tmp, video_dir, audio_dir, records)
        if files is None:
            continue
        text_model, mmprojs = files
        base = [binary] + extra + ["-m", text_model, "--image-tokens", str(m["image_tokens"])]
        base += [a for p in mmprojs for a in ("--mmproj", p)]
        groups = {}
        for r in records:
            if not (quick and "tsrc-75s" in r["input"]):
                groups.setdefault(tuple(r["args"]), []).append(r)
        for args, sub in sorted(groups.items()):
            src = os.path.join(tmp, "%s-%s.jsonl" % (gname, "_".join(args).replace("-", "")
                                                     or "defaults"))
            with open(src, "w", encoding="utf-8") as f:
                f.write("".join(expand(r["input"], video_dir, audio_dir) + "\n" for r in sub))
            what_args = " ".join(args) or "defaults"
            if not fast_only:
                out, err = run(base + list(args) + ["--tokenize", src], False)
                if err:
                    report("%s %s --tokenize" % (tag, what_args), False, err)
                else:
                    check_tokens("%s %s" % (tag, what_args), sub, out)
            if fast_only and args:
                continue  # the other tiers: the defaults' records (the rest is layout)
            matrix = [("fast", [])]
            if not fast_only and not args:
                # the reference towers and the switches on the defaults' records: the other
                # switch sets change the frames and layout, not the towers' paths
                matrix.append(("--no-media-fast", ["--no-media-fast"]))
                matrix += [(sw, [sw]) for sw in SWITCHES]
            # (the reference and switch runs skip the 75 s clip unless --full)
            short, src_short = sub, src
            if len(matrix) > 1 and not full:
                short = [r for r in sub if "tsrc-75s" not in r["input"]]
                src_short = src[:-len(".jsonl")] + "-short.jsonl"
                with open(src_short, "w", encoding="utf-8") as f:
                    f.write("".join(expand(r["input"], video_dir, audio_dir) + "\n"
                                    for r in short))
            for what, switches in matrix:
                rs, path = (sub, src) if what == "fast" else (short, src_short)
                run_tag = " ".join(x for x in (tag, label, what, what_args) if x)
                t0 = time.time()
                out, err = run(base + switches + list(args) + [path],
                               any("error" in r for r in rs))
                if err:
                    report(run_tag, False, err)
                    continue
                compared += check_embeddings(run_tag, rs, out, gate, time.time() - t0)
        if not fast_only:
            # --input files: each clip path alone is a video record, its id the path
            alone = {r["name"]: r for r in groups.get((), []) if r["name"] in m["videos"]}
            lst = os.path.join(video_dir, "list.txt")
            with open(lst, "w") as f:
                f.write("".join(c + "\n" for c in sorted(alone)))
            run_tag = " ".join(x for x in (tag, label, "--input files") if x)
            t0 = time.time()
            out, err = run(base + ["--input", "files", lst], False, cwd=video_dir)
            if err:
                report(run_tag, False, err)
            else:
                compared += check_embeddings(run_tag, list(alone.values()), out, gate,
                                             time.time() - t0)
    shutil.rmtree(tmp, ignore_errors=True)
    report("records compared (%d)" % compared, compared > 0, "zero records compared")
    finish()


if __name__ == "__main__":
    main(sys.argv)
