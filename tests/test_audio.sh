#!/usr/bin/env bash
# Audio files made by sox and ffmpeg decode through engine/audio_decode.c (tests/audio_dump)
# and agree with the WAV they were made from (both at 16 kHz after decoding):
#   - lossless (FLAC, AIFF, WAV streamed through pipes by sox and ffmpeg, WAV at 44.1 kHz and
#     its FLAC copy): the same samples bit for bit;
#   - lossy: aligned (the cross-correlation peaks at lag 0: encoder delay and priming are
#     removed by the decoders) and within a relative RMS error of the waveform (8-13% on this
#     noisy speech-like signal at 64-128 kbit/s; the table gates about twice the measured
#     value: a misaligned or wrong decode is over 100%);
#   - MP3 through our libmpg123 reader equals libsndfile's own MPEG reader (what soundfile
#     and so Hugging Face use) bit for bit;
#   - the decoded lengths are librosa's ceil(frames * 16000 / rate) (lossless) and the format
#     and codec names are right;
#   - a video-only MP4, a text file and a truncated M4A are clean errors.
set -u
BUILD=${BUILD:-build/rel}
PYTHON=${PYTHON:-/usr/bin/python3}
OUT=${OUT:-build/test-out}
DUMP=$BUILD/tests/audio_dump
[ -x "$DUMP" ] || { echo "FAIL: $DUMP not built (make tests)"; exit 1; }
for tool in sox ffmpeg; do
    command -v $tool >/dev/null || { echo "FAIL: $tool not installed (tools/install-deps)"; exit 1; }
done
dir=$OUT/test_audio_sh
rm -rf "$dir" && mkdir -p "$dir"
exec "$PYTHON" - "$DUMP" "$dir" <<'EOF'
import os, subprocess, sys, wave
import numpy as np

dump, d = sys.argv[1], sys.argv[2]
nfail = 0
def check(ok, name, detail=""):
    global nfail
    print(("PASS: %s" % name) if ok else ("FAIL: %s: %s" % (name, detail)))
    nfail += 0 if ok else 1

def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True)

def decode(path):
    """(samples, rate, channels, format, codec) or an error string"""
    r = run(dump, "decode", path, path + ".f32")
    if r.returncode != 0:
        return (r.stdout + r.stderr).strip()
    n, rate, ch, fmt, codec, trunc = r.stdout.split()
    x = np.fromfile(path + ".f32", np.float32)
    assert len(x) == int(n)
    return x, int(rate), int(ch), fmt, codec

# a 2.5 s speech-like source at 44.1 kHz stereo: harmonics of a gliding pitch, formant-like
# bands of noise, a pause; 16-bit
rng = np.random.default_rng(7)
rate, secs = 44100, 2.5
t = np.arange(int(rate * secs)) / rate
f0 = 140 + 40 * np.sin(2 * np.pi * 0.7 * t)
ph = 2 * np.pi * np.cumsum(f0) / rate
voice = sum(np.sin(k * ph) / k for k in range(1, 20)) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
noise = np.convolve(rng.standard_normal(len(t)), np.hanning(9), "same") * 0.05
sig = 0.25 * voice + noise
sig[int(1.2 * rate):int(1.5 * rate)] *= 0.01
stereo = np.stack([sig, np.roll(sig, 7) * 0.8], 1)
src = os.path.join(d, "src.wav")
with wave.open(src, "wb") as w:
    w.setnchannels(2), w.setsampwidth(2), w.setframerate(rate)
    w.writeframes(np.clip(np.round(stereo * 32767), -32768, 32767).astype("<i2").tobytes())
src16 = os.path.join(d, "src16.wav")
run("sox", src, "-r", "16000", "-c", "1", "-b", "16", src16)

ref = decode(src)
ref16 = decode(src16)
if isinstance(ref, str) or isinstance(ref16, str):
    check(False, "the source WAVs decode", "%s | %s" % (ref, ref16))
    sys.exit(1)
want_n = int(np.ceil(int(rate * secs) * (16000.0 / rate)))
check(len(ref[0]) == want_n and ref[1:] == (44100, 2, "wav", "pcm_s16"),
      "44.1 kHz stereo WAV -> %d samples at 16 kHz (librosa's length)" % want_n,
      "%d samples, %s" % (len(ref[0]), ref[1:]))

# (file, how it is made, the WAV it is compared with, format, codec, tolerance: None = the
# same samples bit for bit, else the relative RMS error bound; measured values in comments)
cases = [
    ("a.flac", ["sox", src, "{out}"], ref, "flac", "pcm_s16", None),
    ("a.aiff", ["sox", src, "{out}"], ref, "aiff", "pcm_s16", None),
    ("a16.flac", ["sox", src16, "{out}"], ref16, "flac", "pcm_s16", None),
    ("pipe_sox.wav", ["sh", "-c", "sox %s -t wav - 2>/dev/null > {out}" % src], ref, "wav", "pcm_s16", None),
    ("pipe_ffmpeg.wav", ["sh", "-c", "ffmpeg -nostdin -loglevel error -i %s -f wav - > {out}" % src], ref, "wav", "pcm_s16", None),
    ("a.ogg", ["sox", src, "-C", "6", "{out}"], ref, "ogg", "vorbis", 0.2),            # 0.083
    ("a.mp3", ["ffmpeg", "-nostdin", "-loglevel", "error", "-i", src, "-c:a", "libmp3lame", "-b:a", "128k", "{out}"],
     ref, "mp3", "mp3", 0.25),                                                          # 0.106
    ("a16.mp3", ["ffmpeg", "-nostdin", "-loglevel", "error", "-i", src16, "-c:a", "libmp3lame", "-b:a", "64k", "{out}"],
     ref16, "mp3", "mp3", 0.2),                                                         # 0.073
    ("a.opus", ["ffmpeg", "-nostdin", "-loglevel", "error", "-i", src, "-c:a", "libopus", "-b:a", "96k", "{out}"],
     ref, "ogg", "opus", 0.3),                                                          # 0.133
    ("a.m4a", ["ffmpeg", "-nostdin", "-loglevel", "error", "-i", src, "-c:a", "aac", "-b:a", "128k", "{out}"],
     ref, "mp4", "aac", 0.2),                                                           # 0.081
    ("a.webm", ["ffmpeg", "-nostdin", "-loglevel", "error", "-i", src, "-c:a", "libopus", "-b:a", "96k", "{out}"],
     ref, "matroska", "opus", 0.3),                                                     # 0.133
    ("a.mka", ["ffmpeg", "-nostdin", "-loglevel", "error", "-i", src, "-c:a", "libvorbis", "-q:a", "5", "{out}"],
     ref, "matroska", "vorbis", 0.25),                                                  # 0.104
]
measured = []
for name, cmd, base, fmt, codec, tol in cases:
    out = os.path.join(d, name)
    r = run(*[c.replace("{out}", out) for c in cmd])
    got = decode(out) if r.returncode == 0 else "could not be made: " + r.stderr.strip()
    if isinstance(got, str):
        check(False, "%s decodes" % name, got)
        continue
    x, y = base[0], got[0]
    names_ok = got[3:] == (fmt, codec)
    if tol is None:
        check(names_ok and len(x) == len(y) and np.array_equal(x, y),
              "%s (%s, %s): the same %d samples as the WAV" % (name, fmt, codec, len(x)),
              "%s/%s, %d vs %d samples, max diff %s" % (got[3], got[4], len(y), len(x),
              np.abs(x[:len(y)] - y[:len(x)]).max() if min(len(x), len(y)) else "-"))
        continue
    n = min(len(x), len(y))
    a, b = x[800:n - 800].astype(np.float64), y[800:n - 800].astype(np.float64)
    lags = range(-64, 65)
    corr = [np.dot(a[64:-64], b[64 + k:len(b) - 64 + k]) for k in lags]
    lag = lags[int(np.argmax(corr))]
    rel = np.sqrt(np.mean((a - b) ** 2) / np.mean(a ** 2))
    measured.append("%s %.3f" % (name, rel))
    check(names_ok and lag == 0 and rel <= tol and abs(len(y) - len(x)) <= 1200,
          "%s (%s, %s): aligned (lag 0), relative RMS error %.3f <= %.2f, %d vs %d samples"
          % (name, fmt, codec, rel, tol, len(y), len(x)),
          "%s/%s, lag %d, error %.3f" % (got[3], got[4], lag, rel))
print("measured relative RMS errors: " + ", ".join(measured))

# our MP3 reader against libsndfile's (through soundfile's sf_readf_float; at 16 kHz, so no
# resampling is involved): audio_dump sfdecode
for name in ("a16.mp3",):
    p = os.path.join(d, name)
    r = run(dump, "sfdecode", p, p + ".sf.f32")
    ours = np.fromfile(p + ".f32", np.float32) if os.path.exists(p + ".f32") else None
    theirs = np.fromfile(p + ".sf.f32", np.float32) if r.returncode == 0 else None
    check(ours is not None and theirs is not None and np.array_equal(ours, theirs),
          "%s: our libmpg123 reader gives libsndfile's samples bit for bit (%s)"
          % (name, "%d samples" % len(theirs) if theirs is not None else "-"),
          (r.stdout + r.stderr).strip() or "%s vs %s samples" % (
              None if ours is None else len(ours), None if theirs is None else len(theirs)))

# errors
vid = os.path.join(d, "video.mp4")
run("ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=d=0.5:s=64x48",
    "-c:v", "mpeg4", vid)
txt = os.path.join(d, "notes.wav")
open(txt, "w").write("just text\n" * 20)
cut = os.path.join(d, "cut.m4a")
run("ffmpeg", "-nostdin", "-loglevel", "error", "-i", src, "-c:a", "aac", "-movflags", "+faststart", cut)
data = open(cut, "rb").read()
open(cut, "wb").write(data[:len(data) * 2 // 3])
for p, want in ((vid, "unsupported: mp4: no audio stream"), (txt, "unsupported: audio: unsupported format"),
                (cut, "format: mp4: truncated")):
    r = run(dump, "decode", p, p + ".f32")
    check(r.returncode == 1 and r.stdout.startswith("error: " + want) and r.stderr == "",
          "%s: a clean error (%s)" % (os.path.basename(p), want),
          "rc %d: %s%s" % (r.returncode, r.stdout.strip(), r.stderr.strip()))
sys.exit(1 if nfail else 0)
EOF
