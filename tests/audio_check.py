"""tests/audio_check.py BUILD OUT - the C audio front end (engine/audio_mel.c through
tests/audio_dump) against the float64 NumPy reference (tools/ref/audio.py), docs/model.md 6.1.

Clips (a seeded speech-like signal: a gliding pitch with harmonics, noise bands, a pause) of
0.005 s, 1 s, 7.3 s, 30 s and 45 s as 16-bit 16 kHz WAV files, decoded by the C side (the
45 s one cut to 30 s by the decoder, as Hugging Face's max_length does) and by the
reference's WAV loader; raw float32 clips of awkward lengths (1..481 samples around the
frame and padding boundaries, 1 s, 7.3 s) given to both as they are; and a 44.1 kHz stereo
WAV, resampled by the C decoder, whose 16 kHz samples the reference then takes (resampling
is not reimplemented in Python). Gates, for both --semantics (official, llamacpp): the
frame count and the number of valid frames exactly, every feature within 1e-5 (max abs),
the zeroed frames exactly zero; the front end on 2 threads byte-identical to 1 thread."""
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "ref"))
import audio as ref  # noqa: E402

BUILD, OUT = sys.argv[1], os.path.join(sys.argv[2], "audio_check")
DUMP = os.path.join(BUILD, "tests", "audio_dump")
TOL = 1e-5
os.makedirs(OUT, exist_ok=True)
failed = 0


def check(ok, name, detail=""):
    global failed
    print(("PASS: %s" % name) if ok else ("FAIL: %s: %s" % (name, detail)))
    failed += 0 if ok else 1


def speech(n, seed, rate=16000):
    rng = np.random.default_rng(seed)
    t = np.arange(n) / rate
    f0 = 120 + 50 * np.sin(2 * np.pi * 0.4 * t) + 20 * np.sin(2 * np.pi * 2.3 * t)
    ph = 2 * np.pi * np.cumsum(f0) / rate
    voice = sum(np.sin(k * ph) * (0.8 ** k) for k in range(1, 30))
    env = 0.5 + 0.5 * np.sin(2 * np.pi * 2.9 * t) ** 2
    noise = np.convolve(rng.standard_normal(n), [0.2, 0.5, 0.2])[1:n + 1] * 0.03
    x = 0.3 * voice * env + noise
    x[int(0.6 * n):int(0.65 * n)] *= 0.001  # a near-silent stretch: the mel floor matters
    return x


def c_mel(inp, sem, threads=1):
    out = os.path.join(OUT, "mel.f32")
    r = subprocess.run([DUMP, "mel", inp, out, sem, str(threads)], capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stdout + r.stderr).strip()
    frames, valid, n = map(int, r.stdout.split())
    return (np.fromfile(out, np.float32).reshape(-1, 128), frames, valid, n, open(out, "rb").read()), ""


def compare(name, inp, x, sem, threads_too=False):
    """C features of inp (a file or raw:PATH) against the reference's of samples x"""
    got, err = c_mel(inp, sem)
    if got is None:
        check(False, name, err)
        return
    feat, frames, valid, n = got[:4]
    want, want_valid = ref.features(x, sem)
    ok_shape = frames == len(want) == len(feat) and valid == want_valid and n == len(x)
    diff = float(np.abs(feat - want).max()) if ok_shape and len(want) else 0.0
    zeros_ok = not ok_shape or sem == "llamacpp" or (feat[valid:] == 0).all()
    check(ok_shape and diff <= TOL and zeros_ok,
          "%s, %s: %d samples -> %d frames (%d valid), max abs diff %.2g" % (name, sem, n, frames, valid, diff),
          "C %d frames (%d valid) of %d samples; reference %d (%d valid) of %d; diff %.3g; zeros ok %s"
          % (frames, valid, n, len(want), want_valid, len(x), diff, zeros_ok))
    if threads_too:
        got2, err = c_mel(inp, sem, threads=2)
        check(got2 is not None and got2[4] == got[4],
              "%s, %s: 2 threads give the same bytes as 1" % (name, sem), err)


# --- WAV clips at 16 kHz, decoded by both sides (the C decoder cuts at 30 s) ---
for i, secs in enumerate((0.005, 1.0, 7.3, 30.0, 45.0)):
    n = int(round(secs * 16000))
    path = os.path.join(OUT, "clip_%gs.wav" % secs)
    ref.write_wav(path, speech(n, 100 + i))
    x, rate = ref.load_wav(path)
    x = ref.truncate(x)
    for sem in ("official", "llamacpp"):
        compare("wav %g s" % secs, path, x, sem, threads_too=secs == 30.0)

# --- the frame counts, step by step as the two implementations do it (not from the formulas
# in tools/ref/audio.py and engine/audio_mel.c) ---
def hf_counts(n):
    """Gemma4AudioFeatureExtractor: pad to a multiple of 128 with mask 0, prepend 160 zeros
    (mask 0), unfold 321-sample windows at hop 160 (none when too short), a frame is valid
    when the mask at its window's last sample is 1"""
    mask = np.zeros(-(-n // 128) * 128, bool)
    mask[:n] = True
    mask = np.concatenate([np.zeros(160, bool), mask])
    frames = (len(mask) - 321) // 160 + 1
    if frames <= 0:
        return 0, 0
    return frames, int(mask[np.arange(frames) * 160 + 320].sum())


def llama_counts(n):
    """mtmd_audio_preprocessor_gemma4a (C integer division truncates toward zero); n == 0
    and a padded buffer shorter than the 512-point FFT are errors there (0 frames here)"""
    if n == 0:
        return 0, 0
    pt = int((n + 160 - 321) / 160) + 1
    need = (pt - 1) * 160 + 512
    size = max(need - n, 160) + n
    n_len = int((size - 512) / 160) + 1
    if size < 512 or n_len <= 0:
        return 0, 0
    return min(n_len, pt), min(n_len, pt)


bad = []
for n in list(range(0, 1300)) + [16000, 116800, 479999, 480000]:
    if ref.frame_counts(n, "official") != hf_counts(n) or ref.frame_counts(n, "llamacpp") != llama_counts(n):
        bad.append(n)
check(not bad, "the reference's frame counts equal HF's and llama.cpp's procedures (0..1299 samples, 1 s, 7.3 s, 30 s)",
      "differ at n = %s" % bad[:10])

# --- raw float32 clips of awkward lengths, used as they are ---
lengths = [1, 2, 80, 127, 128, 129, 160, 161, 255, 256, 257, 320, 321, 480, 481, 16000, 116800]
for n in lengths:
    x = speech(n, n).astype(np.float32)
    path = os.path.join(OUT, "raw_%d.f32" % n)
    x.tofile(path)
    for sem in ("official", "llamacpp"):
        compare("raw %d samples" % n, "raw:" + path, x, sem)

# --- resampled by the C decoder: 44.1 kHz stereo, 7.3 s ---
import wave  # noqa: E402
n44 = int(7.3 * 44100)
st = np.stack([speech(n44, 5, 44100), speech(n44, 6, 44100) * 0.5], 1)
path = os.path.join(OUT, "clip44.wav")
with wave.open(path, "wb") as w:
    w.setnchannels(2), w.setsampwidth(2), w.setframerate(44100)
    w.writeframes(np.clip(np.round(st * 32767), -32768, 32767).astype("<i2").tobytes())
r = subprocess.run([DUMP, "decode", path, path + ".f32"], capture_output=True, text=True)
if r.returncode != 0:
    check(False, "44.1 kHz stereo WAV decodes", r.stdout + r.stderr)
else:
    x16 = np.fromfile(path + ".f32", np.float32)
    check(len(x16) == int(np.ceil(n44 * 16000 / 44100)), "44.1 kHz stereo 7.3 s -> %d samples at 16 kHz" % len(x16))
    for sem in ("official", "llamacpp"):
        compare("wav 44.1 kHz stereo 7.3 s (C-resampled)", path, x16, sem)

print("audio_check: %s" % ("all passed" if not failed else "%d failed" % failed))
sys.exit(1 if failed else 0)
