#!/usr/bin/python3
"""The C binary against the NumPy reference on real-shape (270M layout) generated models.

usage: tests/real_shape_check.py BINARY MODEL.gguf [MODEL.gguf ...]

The tiny goldens cannot exercise the real head widths (256/512), GQA 4:2 and MQA 4:1, the
262144-piece vocabulary or the BF16 per_layer_model_proj of a quantised file; this does, on
a few short texts (the scalar reference engine is slow on long ones). Gates: token ids equal;
cosine against the reference on the same dequantised weights >= 0.99999 for float weights,
>= 0.999 for quantised files (Q8_0, the K-quant mixes: the int8 kernels also quantise the
activations, docs/testing.md 2); for quantised files, --release-weights drops the repacked pages
and the peak resident set stays within 1.1 x the file (issue 15) on a batch that fills
whole waves (64 records of about 160 tokens, as the peer benchmark; release builds only:
the sanitizers' own memory would be counted).
Prints PASS/FAIL lines; exits 1 on any failure.
"""
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXTS = [
    {"id": 1, "text": "Short query about the weather"},
    {"id": 2, "text": "A line of code: for (int i = 0; i < n; i++) sum += x[i];",
     "prompt": "code"},
    {"id": 3, "text": "Grüße aus Köln 日本 🚀"},
]
failed = 0


def batch_texts(n=64):
    """n records of about 160 tokens each, the same every run."""
    words = ("the model reads every record once and writes one vector for it while the "
             "batch job keeps going through shards of a corpus with code 42 and Köln 日本").split()
    rng = np.random.default_rng(7)
    return "".join(json.dumps({"id": i, "text": " ".join(rng.choice(words, 70))}) + "\n"
                   for i in range(n))


def report(ok, name, detail=""):
    global failed
    print(("PASS: %s" % name) if ok else ("FAIL: %s: %s" % (name, detail)), flush=True)
    failed += 0 if ok else 1


def run(cmd, data):
    p = subprocess.run(cmd, input=data, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (cmd[0], p.returncode, p.stderr[-500:]))
    return [json.loads(line) for line in p.stdout.splitlines()]


def peak_rss_mb(cmd, data):
    """Run cmd with data on stdin; its peak resident memory in MB (wait4's rusage)."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    p.stdin.write(data.encode())
    p.stdin.close()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, ru.ru_maxrss / 1024.0


def release_check(binary, model, data):
    """--release-weights drops the file pages of repacked tensors: with --prepack every
    matrix is repacked, so the resident set must be smaller by a good part of the file."""
    name = os.path.basename(model)
    size = os.path.getsize(model) / 2**20
    rc1, kept = peak_rss_mb([binary, "-m", model, "--prepack", "--no-release-weights"], data)
    rc2, dropped = peak_rss_mb([binary, "-m", model, "--prepack"], data)
    report(rc1 == 0 and rc2 == 0 and kept - dropped > 0.25 * size,
           "%s: --release-weights drops repacked pages" % name,
           "peak RSS %.0f MB kept vs %.0f MB released (file %.0f MB)" % (kept, dropped, size))
    batch = data if os.environ.get("BUILD") == "build/san" else batch_texts()
    rc3, default = peak_rss_mb([binary, "-m", model], batch)
    report(rc3 == 0 and default <= 1.1 * size,
           "%s: peak RSS <= 1.1 x the file (%d records)" % (name, batch.count("\n")),
           "%.0f MB, file %.0f MB" % (default, size))
    print("info: %s peak RSS %.0f MB; with --prepack: %.0f MB, with --no-release-weights: "
          "%.0f MB; file %.0f MB" % (name, default, dropped, kept, size))


def main():
    if len(sys.argv) < 3:
        report(False, "arguments", __doc__)
        return
    binary, models = sys.argv[1], sys.argv[2:]
    data = "".join(json.dumps(t) + "\n" for t in TEXTS)
    for model in models:
        name = os.path.basename(model)
        try:
            ref = run([sys.executable, os.path.join(ROOT, "tools/ref/embed.py"), "-m", model], data)
            toks = run([binary, "-m", model, "--tokenize"], data)
            vecs = run([binary, "-m", model], data)
        except Exception as e:  # noqa: BLE001
            report(False, "%s: run" % name, str(e))
            continue
        report(len(ref) == len(TEXTS) == len(toks) == len(vecs), "%s: record count" % name,
               "%d/%d/%d" % (len(ref), len(toks), len(vecs)))
        quantised = not any(t in name for t in ("f32", "f16", "bf16"))
        gate = 0.999 if quantised else 0.99999
        for r, t, v in zip(ref, toks, vecs):
            report(r["tokens"] == t["tokens"], "%s: record %s token ids" % (name, r["id"]),
                   "%s vs %s" % (r["tokens"][:12], t["tokens"][:12]))
            a = np.array(r["embedding"]); b = np.array(v["embedding"], dtype=np.float64)
            cos = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
            report(cos >= gate, "%s: record %s cosine >= %g vs reference" % (name, r["id"], gate),
                   "cosine %.8f, max abs %.3g" % (cos, np.abs(a - b).max()))
            print("info: %s record %s: %d tokens, 1-cos %.3g, max abs %.3g"
                  % (name, r["id"], len(t["tokens"]), 1 - cos, np.abs(a - b).max()))
        if quantised:
            release_check(binary, model, data)


main()
sys.exit(1 if failed else 0)
