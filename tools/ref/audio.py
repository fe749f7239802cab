#!/usr/bin/python3
"""Reference audio front end (NumPy, float64), docs/model.md 6.1, and a WAV loader for the tests.

    features(x, semantics="official") -> (feat float32 [frames, 128], n_valid)

x is a mono waveform at 16 kHz (any float dtype; it is taken as float32, as Hugging Face's
feature extractor receives it after SequenceFeatureExtractor.pad). Written from docs/model.md 6.1,
independently of engine/audio_mel.c: numpy's rfft and a dense filterbank matrix.

  frame_counts(n, semantics)  (frames, valid) for n samples
  hann()                       periodic Hann of 320 as float32
  mel_filterbank()             M [257, 128], float64 (docs/model.md 6.1 step 6)
  features(x, semantics)       steps 1-8 (the truncation to 30 s is the caller's: see
                               truncate(); the C decoder does it)
  load_wav(path)               (float32 mono at the file's rate, rate) with Python's wave
                               module: 8-bit unsigned, 16/24/32-bit integer PCM, scaled as
                               libsndfile does, channels averaged in float32 as librosa does
  load_raw(path)               float32 samples from a raw little-endian file

The tower (conformer + embed_audio, docs/model.md 6.2-6.4 and 4) is tools/ref/audio_tower.py;
`audio.py tower MMPROJ FEAT.f32 FRAMES VALID OUT.f32 [official|llamacpp] [--trace DIR]`
runs its CLI (documented there).

Semantics (docs/model.md 8): "official" is Hugging Face's ln(mel + 0.001), the waveform padded to a
multiple of 128 samples and frames past the real audio zeroed; "llamacpp" is llama.cpp's
ln(max(mel, 0.001)) with no padding to 128 and no mask; its frame count is that of
mtmd_audio_preprocessor_gemma4a (one frame for 2..160 samples, none for 0 or 1).
Resampling is not reimplemented here: the tests feed this the C decoder's 16 kHz output.
"""

import sys
import wave

import numpy as np

RATE = 16000
FRAME = 320
HOP = 160
NFFT = 512
NMEL = 128
MAX_SAMPLES = 30 * RATE


def frame_counts(n, semantics="official"):
    """(frames, valid) for n samples (docs/model.md 6.1 steps 1-3 and 8)."""
    if semantics == "llamacpp":
        if n < 2:
            return 0, 0
        k = (n - 1) // HOP if n > HOP else 1
        return k, k
    if n <= 0:
        return 0, 0
    padded = -(-n // 128) * 128 + HOP  # right pad to a multiple of 128, then 160 in front
    frames = (padded - (FRAME + 1)) // HOP + 1 if padded >= FRAME + 1 else 0
    valid = (n - 1) // HOP if n >= HOP + 1 else 0
    return frames, valid


def hann():
    n = np.arange(FRAME, dtype=np.float64)
    return (0.5 - 0.5 * np.cos(2.0 * np.pi * n / FRAME)).astype(np.float32)


def mel_filterbank():
    """HTK triangles without area normalisation, 130 edges equally spaced in mel over
    0..8000 Hz, on the 257 bins of linspace(0, 8000, 257)."""
    def to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def to_hz(m):
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)

    edges = to_hz(np.linspace(0.0, to_mel(8000.0), NMEL + 2))
    bins = np.linspace(0.0, 8000.0, NFFT // 2 + 1)
    lo, mid, hi = edges[:-2], edges[1:-1], edges[2:]
    rise = (bins[:, None] - lo[None, :]) / (mid - lo)[None, :]
    fall = (hi[None, :] - bins[:, None]) / (hi - mid)[None, :]
    return np.maximum(0.0, np.minimum(rise, fall))


def truncate(x, max_samples=MAX_SAMPLES):
    return np.asarray(x)[:max_samples]


def features(x, semantics="official"):
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    n = len(x)
    frames, valid = frame_counts(n, semantics)
    out = np.zeros((frames, NMEL), dtype=np.float32)
    if frames == 0:
        return out, valid
    # the padded waveform: 160 zeros in front, zeros after the end (covering HF's padding to
    # a multiple of 128 and llama.cpp's own); a frame reads 320 samples from 160 i
    total = (frames - 1) * HOP + FRAME
    xp = np.zeros(max(total, HOP + n), dtype=np.float32)
    xp[HOP:HOP + n] = x
    idx = np.arange(frames)[:, None] * HOP + np.arange(FRAME)[None, :]
    windowed = (xp[idx] * hann()).astype(np.float64)  # float32 product, as HF's
    mag = np.abs(np.fft.rfft(windowed, n=NFFT, axis=-1))
    mel = mag @ mel_filterbank()
    if semantics == "llamacpp":
        logmel = np.log(np.maximum(mel, 0.001))
    else:
        logmel = np.log(mel + 0.001)
    out[:] = logmel.astype(np.float32)
    if semantics != "llamacpp":
        out[valid:] = 0.0
    return out, valid


def load_wav(path):
    """(float32 mono, rate) of an integer-PCM WAV, as soundfile + librosa.to_mono give it."""
    with wave.open(path, "rb") as w:
        ch, width, rate, n = w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()
        raw = w.readframes(n)
    if width == 1:
        a = (np.frombuffer(raw, np.uint8).astype(np.float32) - 128) / np.float32(128)
    elif width == 2:
        a = np.frombuffer(raw, "<i2").astype(np.float32) / np.float32(32768)
    elif width == 3:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        v = (b[:, 0] | b[:, 1] << 8 | b[:, 2] << 16) << 8  # sign in bit 31, as libsndfile
        a = v.astype(np.float32) / np.float32(2.0 ** 31)
    elif width == 4:
        a = np.frombuffer(raw, "<i4").astype(np.float32) / np.float32(2.0 ** 31)
    else:
        raise ValueError("%s: %d-byte samples" % (path, width))
    a = a.reshape(-1, ch)
    return (a.mean(axis=1, dtype=np.float32) if ch > 1 else a[:, 0]), rate


def write_wav(path, x, rate=RATE, width=2):
    """mono int16 (width 2) WAV of float samples in [-1, 1), rounded"""
    q = np.clip(np.round(np.asarray(x, np.float64) * 32768), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(q.tobytes())


def load_raw(path):
    return np.fromfile(path, dtype="<f4")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "tower":
        import audio_tower
        sys.exit(audio_tower.main(sys.argv[2:]))
    # tools/ref/audio.py FILE.wav [official|llamacpp]: frame counts and a feature summary
    x, rate = load_wav(sys.argv[1])
    if rate != RATE:
        sys.exit("%s: %d Hz; resample it to 16 kHz first (the C decoder does)" % (sys.argv[1], rate))
    f, valid = features(truncate(x), sys.argv[2] if len(sys.argv) > 2 else "official")
    print("%d samples -> %d frames (%d valid); mean %.6f, min %.6f, max %.6f"
          % (len(x), len(f), valid, f.mean() if f.size else 0, f.min() if f.size else 0,
             f.max() if f.size else 0))
