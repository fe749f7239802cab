#!/usr/bin/python3
"""Compare gemmaembed's audio records with the stored float64 goldens.

usage: tests/audio_golden_check.py [--fast-only] BINARY [EXTRA_ARGS...]

The goldens golden/tiny-mmproj-audio-q8_0.jsonl and golden/tiny-mmproj-audio-f32.jsonl
(tools/ref/mkgolden; golden/README.md) hold audio records on the clips of tools/ref/mkaudio
(0.005, 1, 7.3, 30 and 45 s at 16 kHz mono, 7.3 s at 44.1 kHz stereo), which this check makes
in a temporary directory: each clip alone, cut by --audio-max-seconds 30 (the default) and 2,
and records mixing texts, clips and images (captions, content arrays, manual <|audio|>
placeholders, two clips, a prompt, inline base64 and data: URIs, text + image + audio
interleaved). The 5 ms clip, alone or in a record, is an error record ("too short").
Model setups: tiny-q8_0 + the combined tiny-mmproj-both-q8_0.gguf; tiny-f32 +
tiny-mmproj-f32.gguf (vision) + an f32 audio mmproj that tools/mkmodel makes here (seed 1).
For each:
  - the sha256 of the text model, every mmproj (the generated one too), every image and
    every clip must equal the manifest's, else nothing is compared (regenerate the goldens);
  - `--tokenize` per --audio-max-seconds: the token ids equal the golden's exactly, so each
    <|audio> / <|image> block's soft-token count too; the error records are error records;
  - the embeddings, per run: every record's cosine with the golden reaches the gate (f32
    weights 0.99999, Q8_0 0.999), the vector has the golden's width and unit norm; each
    error record is an error with code "input" saying "too short", and the run exits 1
    (0 for an input without them); the runs (EXTRA_ARGS go to each): the fast media path,
    the reference towers (--no-media-fast), --threads=1, --no-yield, --prepack, --no-flash,
    --no-sgemm, --no-media-q8-wide; on Q8_0 also the records without images on the audio-only
    tiny-mmproj-audio-q8_0.gguf (fast path);
  - codecs: the 7.3 s clip as FLAC and Ogg Vorbis (sox) and MP3 (ffmpeg, libmp3lame) made
    here; FLAC is lossless: its vector must be exactly the WAV's (same run); Ogg and MP3 are
    lossy: each is compared with the reference run on the C decoder's output for that file
    (BUILD/tests/audio_dump decode; BUILD defaults to build/rel), with the gate; its cosine to
    the WAV golden is printed.
--fast-only keeps only the fast-path runs (no --tokenize, no codecs): tests/run adds one
such run per kernel tier, e.g. `--fast-only BINARY --cpu-tier avx2`. The reference towers
need no run per tier (scalar code whatever --cpu-tier says).

Prints "PASS: name" or "FAIL: name: detail" (one FAIL per failing record) and a closing
"N passed, N failed"; exits 1 on any failure, including a missing binary, golden, model,
clip or tool, or zero records compared.
"""

import base64
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
GATES = {"tiny-mmproj-audio-f32": 0.99999, "tiny-mmproj-audio-q8_0": 0.999}
SWITCHES = ("--no-media-fast", "--threads=1", "--no-yield", "--prepack", "--no-flash",
            "--no-sgemm", "--no-media-q8-wide")
NORM_TOL = 1e-4
TIMEOUT = 600
CODEC_CLIP = "mid-7.3s.wav"
# (file, how it is made from CODEC_CLIP (in the clip directory), lossless)
CODECS = [("mid-7.3s.flac", ["sox", CODEC_CLIP, "mid-7.3s.flac"], True),
          ("mid-7.3s.ogg", ["sox", CODEC_CLIP, "-C", "3", "mid-7.3s.ogg"], False),
          ("mid-7.3s.mp3", ["ffmpeg", "-nostdin", "-loglevel", "error", "-i", CODEC_CLIP,
                            "-c:a", "libmp3lame", "-b:a", "64k", "mid-7.3s.mp3"], False)]

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from selfcheck import cosine, report as report_any, run_jsonl, sha256  # noqa: E402
from selfcheck import finish as finish_script  # noqa: E402


def report(name, ok, detail=""):
    report_any(name, ok, detail, quiet_pass=True)  # detail: why it failed


def finish():
    finish_script("audio_golden_check")


def run(cmd, expect_errors):
    """The binary's records by id (run in ROOT: the records' image paths are relative)."""
    return run_jsonl(cmd, ROOT, TIMEOUT, expect_errors)

def expand(template, clip_dir):
    """The golden's input template with "{AUDIO}" the clip directory and "{B64:CLIP}" the
    clip's bytes in base64 (on the parsed JSON, so the path needs no escaping)."""
    def sub(v):
        if isinstance(v, str):
            v = v.replace("{AUDIO}", clip_dir)
            return re.sub(r"\{B64:([^}]+)\}", lambda m: base64.b64encode(open(
                os.path.join(clip_dir, m.group(1)), "rb").read()).decode("ascii"), v)
        if isinstance(v, list):
            return [sub(x) for x in v]
        if isinstance(v, dict):
            return {k: sub(x) for k, x in v.items()}
        return v
    return json.dumps(sub(json.loads(template)), ensure_ascii=False)


def make_clips(clip_dir):
    """The clips of tools/ref/mkaudio; None if that fails."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "ref", "mkaudio"),
                        clip_dir], capture_output=True, text=True)
    report("tools/ref/mkaudio makes the clips", r.returncode == 0, r.stderr.strip()[-400:])
    return r.returncode == 0


def verify_files(gname, m, tmp, clip_dir, records):
    """Make the generated mmproj, then compare every file's sha256 with the manifest's.
    Returns (text model, [mmproj paths], {audio-only mmproj path: sha}) or None."""
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
    files += [(g, os.path.join(ROOT, g), h) for g, h in m.get("audio_only_mmproj", {}).items()]
    files += [(p, os.path.join(ROOT, p), h) for p, h in sorted(m["images"].items())]
    files += [(c, os.path.join(clip_dir, c), h) for c, h in sorted(m["clips"].items())]
    for name, path, want in files:
        if not os.path.exists(path):
            bad.append("%s missing" % name)
        elif sha256(path) != want:
            bad.append("%s has sha256 %s, the golden was made from %s" % (name, sha256(path),
                                                                           want))
    unlisted = sorted({p for r in records for p in r["images"]} - set(m["images"]))
    unlisted += sorted({c for r in records for c in r["audio"]} - set(m["clips"]))
    if unlisted:
        bad.append("files not in the manifest: %s" % ", ".join(unlisted))
    report("%s: sha256 of the model, %d mmproj files, %d images and %d clips equal the "
           "manifest's" % (gname, len(mmprojs) + len(m.get("audio_only_mmproj", {})),
                           len(m["images"]), len(m["clips"])), not bad,
           "; ".join(bad) + " (make them with: %s; %s; %s; or regenerate the goldens with "
           "tools/ref/mkgolden --only audio)" % ("; ".join(m["mkmodel"]), m["mkimages"],
                                                 m["mkaudio"]))
    if bad:
        return None
    alone = {os.path.join(ROOT, g): h for g, h in m.get("audio_only_mmproj", {}).items()}
    return os.path.join(ROOT, m["model"]), [p for _, p, _ in mmprojs], alone


def check_error(name, o):
    """An error record with code "input" whose message says "too short"; None if so."""
    e = (o or {}).get("error")
    if not isinstance(e, dict) or e.get("code") != "input" or \
            "too short" not in str(e.get("message", "")):
        return "want an error record (code input, \"too short\"), got %.200s" % json.dumps(o)
    return None


def check_tokens(tag, records, out):
    for r in records:
        name = "%s --audio-max-seconds %d tokens %s" % (tag, r["max_seconds"], r["name"])
        o = out.get(r["name"])
        if "error" in r:
            err = check_error(r["name"], o)
            report(name + " is an error record", err is None, err)
            continue
        got = (o or {}).get("tokens")
        if got is None:
            report(name, False, "no tokens: %.200s" % json.dumps(o))
        elif got != r["tokens"]:
            i = next((i for i, (a, b) in enumerate(zip(got, r["tokens"])) if a != b),
                     min(len(got), len(r["tokens"])))
            report(name, False, "%d ids, want %d; first difference at %d: got %s want %s"
                   % (len(got), len(r["tokens"]), i, got[i:i + 8], r["tokens"][i:i + 8]))
        else:
            report("%s (soft tokens %s)" % (name, r["soft_tokens"]), True)


def check_embeddings(tag, records, out, gate, seconds):
    """One FAIL per failing record, else one PASS for the run. Returns records compared."""
    worst, bad, n_err = (2.0, None, 0.0), 0, 0
    for r in records:
        o = out.get(r["name"]) or {}
        if "error" in r:
            err = check_error(r["name"], o)
            if err:
                report("%s %s" % (tag, r["name"]), False, err)
                bad += 1
            n_err += 1
            continue
        got = o.get("embedding")
        if not isinstance(got, list) or len(got) != len(r["embedding"]):
            report("%s %s" % (tag, r["name"]), False, "no embedding of %d values: %.200s"
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
    if not bad:
        report("%s: %d records cosine >= %g (worst %.9f, 1-cos %.2e, %s, maxabs %.3g), %d "
               "error records (%.1f s)" % (tag, len(records) - n_err, gate, worst[0],
                                          1 - worst[0], worst[1], worst[2], n_err, seconds),
               True)
    return len(records) - bad


def reference_embedder(text_model, mmprojs):
    sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
    from embed_media import MediaEmbedder  # noqa: E402
    return MediaEmbedder(text_model, mmprojs)


def check_codecs(tag, base, clip_dir, wav_golden, gate, em_args):
    """FLAC exactly the WAV's vector; Ogg and MP3 against the reference on the C decoder's
    output. Returns records compared."""
    dump = os.path.join(ROOT, os.environ.get("BUILD", "build/rel"), "tests", "audio_dump")
    recs = [{"id": "wav", "audio": os.path.join(clip_dir, CODEC_CLIP)}]
    recs += [{"id": f, "audio": os.path.join(clip_dir, f)} for f, _, _ in CODECS]
    src = os.path.join(clip_dir, "codecs.jsonl")
    with open(src, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in recs))
    out, err = run(base + [src], False)
    if err:
        report("%s codecs run" % tag, False, err)
        return 0
    wav = (out.get("wav") or {}).get("embedding")
    if not isinstance(wav, list):
        report("%s codecs: the WAV record" % tag, False, json.dumps(out.get("wav"))[:200])
        return 0
    compared = 0
    em = None
    for f, _, lossless in CODECS:
        got = (out.get(f) or {}).get("embedding")
        name = "%s %s" % (tag, f)
        if not isinstance(got, list):
            report(name, False, "no embedding: %.200s" % json.dumps(out.get(f)))
            continue
        to_golden = cosine([float(x) for x in got], wav_golden)
        if lossless:
            report("%s: exactly the WAV's vector (cosine to the WAV golden %.9f)"
                   % (name, to_golden), got == wav, "differs from the WAV's: cosine %.12f, "
                   "maxabs %.3g" % (cosine(got, wav), max(abs(a - b) for a, b in zip(got, wav))))
            compared += got == wav
            continue
        raw = os.path.join(clip_dir, f + ".f32")
        # (a cross build's helper runs under tests/run's EXEC, as the binary does)
        r = subprocess.run(os.environ.get("EXEC", "").split() + [dump, "decode",
                                                                 os.path.join(clip_dir, f), raw],
                           capture_output=True, text=True)
        if r.returncode:
            report(name, False, "audio_dump decode: %s %s" % (r.stdout.strip(),
                                                               r.stderr.strip()[-200:]))
            continue
        import numpy as np
        sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
        import audio as audio_fe
        if em is None:
            em = reference_embedder(*em_args)
        x = audio_fe.truncate(audio_fe.load_raw(raw))
        feat, valid = audio_fe.features(x)
        ids, n_soft, emb = em.embed("", [("audio", "x")], [], [(feat, valid)])
        c = cosine([float(v) for v in got], [float(v) for v in np.asarray(emb)])
        ok = c >= gate
        report("%s: cosine %.9f (1-cos %.1e) >= %g with the reference on the C decoder's "
               "output (%d samples, %d soft tokens); cosine %.6f to the WAV golden"
               % (name, c, 1 - c, gate, len(x), n_soft[0], to_golden), ok,
               "cosine %.9f with the reference on the C decoder's output (%d samples), gate "
               "%g; cosine %.6f to the WAV golden" % (c, len(x), gate, to_golden))
        compared += ok
    return compared


def main(argv):
    args = argv[1:]
    fast_only = False
    if args and args[0] == "--fast-only":
        fast_only, args = True, args[1:]
    if not args or args[0].startswith("-"):
        report("arguments", False, "usage: audio_golden_check.py [--fast-only] BINARY "
               "[EXTRA_ARGS...]")
        finish()
    binary, extra = os.path.abspath(args[0]), args[1:]
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        report("binary", False, "%s missing or not executable" % binary)
        finish()
    if not fast_only:
        for tool in ("sox", "ffmpeg"):
            if shutil.which(tool) is None:
                report("%s installed" % tool, False, "not on PATH (tools/install-deps)")
                finish()
    try:
        with open(os.path.join(GOLDEN, "manifest.json")) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        report("golden manifest", False, str(e))
        finish()
    label = " ".join(extra)
    tmp = tempfile.mkdtemp(prefix="audio_golden_check.")
    clip_dir = os.path.join(tmp, "clips")
    compared = 0
    if not make_clips(clip_dir):
        finish()
    if not fast_only:
        for f, cmd, _ in CODECS:
            r = subprocess.run(cmd, cwd=clip_dir, capture_output=True, text=True)
            if r.returncode:
                report("make %s" % f, False, "%s: %s" % (" ".join(cmd), r.stderr.strip()[-300:]))
    matrix = [("fast", [])] + ([] if fast_only else [(sw, [sw]) for sw in SWITCHES])
    for gname, gate in GATES.items():
        tag = gname[len("tiny-mmproj-audio-"):]
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
        files = verify_files(gname, m, tmp, clip_dir, records)
        if files is None:
            continue
        text_model, mmprojs, alone = files
        base = [binary] + extra + ["-m", text_model, "--image-tokens", str(m["image_tokens"])]
        mm_args = [a for p in mmprojs for a in ("--mmproj", p)]
        groups = {}
        for r in records:
            groups.setdefault(r["max_seconds"], []).append(r)
        inputs = {}
        for secs, sub in sorted(groups.items()):
            inputs[secs] = os.path.join(tmp, "%s-%d.jsonl" % (gname, secs))
            with open(inputs[secs], "w", encoding="utf-8") as f:
                f.write("".join(expand(r["input"], clip_dir) + "\n" for r in sub))
        for secs, sub in sorted(groups.items()):
            errs = any("error" in r for r in sub)
            sec_args = ["--audio-max-seconds", str(secs)]
            if not fast_only:
                out, err = run(base + mm_args + sec_args + ["--tokenize", inputs[secs]], errs)
                if err:
                    report("%s --audio-max-seconds %d --tokenize" % (tag, secs), False, err)
                else:
                    check_tokens(tag, sub, out)
            for what, switches in matrix:
                run_tag = " ".join(x for x in (tag, label, what, "max %d s" % secs) if x)
                t0 = time.time()
                out, err = run(base + mm_args + switches + sec_args + [inputs[secs]], errs)
                if err:
                    report(run_tag, False, err)
                    continue
                compared += check_embeddings(run_tag, sub, out, gate, time.time() - t0)
        if alone:
            # the audio-only file (its audio tower is byte for byte the combined file's)
            sub = [r for r in groups.get(30, []) if not r["images"]]
            src = os.path.join(tmp, "%s-alone.jsonl" % gname)
            with open(src, "w", encoding="utf-8") as f:
                f.write("".join(expand(r["input"], clip_dir) + "\n" for r in sub))
            for path in alone:
                run_tag = " ".join(x for x in (tag, label, "fast", os.path.basename(path)) if x)
                t0 = time.time()
                out, err = run(base + ["--mmproj", path, src], any("error" in r for r in sub))
                if err:
                    report(run_tag, False, err)
                    continue
                compared += check_embeddings(run_tag, sub, out, gate, time.time() - t0)
        if not fast_only:
            wav_golden = next(r["embedding"] for r in records if r["name"] == CODEC_CLIP)
            compared += check_codecs(" ".join(x for x in (tag, label) if x), base + mm_args,
                                     clip_dir, wav_golden, gate, (text_model, mmprojs))
    shutil.rmtree(tmp, ignore_errors=True)
    report("records compared (%d)" % compared, compared > 0, "zero records compared")
    finish()


if __name__ == "__main__":
    main(sys.argv)
