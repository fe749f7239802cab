#!/usr/bin/python3
"""Compare the gemmaembed binary with the NumPy reference goldens.

usage: tests/golden_check.py BINARY [EXTRA_ARGS...]
       tests/golden_check.py --quant DIR [--only TYPE,...] BINARY [EXTRA_ARGS...]

EXTRA_ARGS are passed to every run of BINARY (e.g. a CPU tier or thread
switch). For each tiny model (golden/manifest.json, models in testdata/):
  - the model file's sha256 must match the one the golden was made from;
  - `BINARY EXTRA -m MODEL --tokenize IN.jsonl`: token ids must equal the
    golden's exactly;
  - `BINARY EXTRA -m MODEL [--dim N] IN.jsonl` for the default width and
    N = 768, 512, 256, 128: cosine against normalize(golden[:N]) must reach
    the model's gate (f32 0.99999, q8_0 0.999), the vector must have N
    values and unit norm (|norm - 1| <= 1e-4); max-abs error is reported;
  - records with a prompt are also run with the global `--prompt NAME`
    switch instead of the per-record field.
Input records are {"id": name, "text": ..., "prompt": NAME (if any)}; the
records "cjk" and "emoji" are written with \\u escapes (surrogate pairs),
all others as raw UTF-8. The environment variable GOLDEN_MODELS_DIR, if
set, replaces testdata/ as the folder holding the model files.

--quant DIR checks the block-type goldens instead (issue 15: every
manifest entry with "set": "quant", made by tools/ref/mkgolden --only
quant): the small-preset models of each type and mix are generated into
DIR with the manifest's mkmodel commands (kept if their sha256 already
matches) and must have the manifest's sha256 (else generator drift: nothing
is compared); then per model one --tokenize run (ids exact) and one
embedding run (cosine >= 0.999 against the float64 reference on the same
dequantised weights, unit norm); small-mmproj-q4_k runs its image and audio
records (clip from tools/ref/mkaudio into DIR) with the small Q4_K mmproj at
--image-tokens 70. A model the binary cannot load is a FAIL naming it (with
the binary's stderr): nothing is skipped. --only q4_k,q6_k,mmproj keeps those
entries (small-q4_k, small-q6_k, small-mmproj-q4_k), for work on one type.

Prints "PASS: name" or "FAIL: name: detail" per check and a closing
"N passed, N failed"; exits 1 on any failure (including a missing binary,
missing goldens/models, or zero records compared).
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
GATES = {"tiny-f32": 0.99999, "tiny-q8_0": 0.999}
DIMS = [None, 768, 512, 256, 128]          # None = no --dim switch
ESCAPED = {"cjk", "emoji"}
NORM_TOL = 1e-4

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from selfcheck import TIMEOUT_SCALE, cosine, report as report_any, sha256  # noqa: E402
from selfcheck import finish as finish_script  # noqa: E402

TIMEOUT = 600 * TIMEOUT_SCALE


def report(name, ok, detail=""):
    report_any(name, ok, detail, quiet_pass=True)  # detail: why it failed


def finish():
    finish_script("golden_check")


def normalize(v):
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v] if n > 0 else list(v)


def write_input(path, records, with_prompt=True):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            o = {"id": r["name"], "text": r["text"]}
            if with_prompt and r["prompt"] is not None:
                o["prompt"] = r["prompt"]
            f.write(json.dumps(o, ensure_ascii=r["name"] in ESCAPED) + "\n")


def run(cmd, cwd=None):
    """Run the binary; returns (dict id -> record, error string or None)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT, stdin=subprocess.DEVNULL, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "%s: %s" % (type(e).__name__, e)
    if p.returncode != 0:
        return None, "exit %d; stderr: %s" % (
            p.returncode, p.stderr.decode("utf-8", "replace")[-400:].strip())
    out = {}
    for n, line in enumerate(p.stdout.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            o = json.loads(line)
        except ValueError as e:
            return None, "stdout line %d is not JSON (%s): %.80s" % (n, e,
                                                                    line)
        if not isinstance(o, dict) or "id" not in o:
            return None, "stdout line %d has no id: %.80s" % (n, line)
        if o["id"] in out:
            return None, "id %r printed twice" % (o["id"],)
        out[o["id"]] = o
    return out, None


def check_tokens(tag, records, out):
    compared = 0
    for r in records:
        name = "%s tokens %s" % (tag, r["name"])
        o = out.get(r["name"])
        if o is None:
            report(name, False, "no output record")
            continue
        got = o.get("tokens")
        if got != r["tokens"]:
            detail = "no tokens field: %.100s" % json.dumps(o) \
                if got is None else \
                "got %d ids, want %d; first difference at %s: got %s want %s" \
                % (len(got), len(r["tokens"]), first_diff(got, r["tokens"]),
                   got[:40], r["tokens"][:40])
            if r["name"] in ESCAPED:
                detail += " (input written with \\u escapes)"
            report(name, False, detail)
            continue
        report(name, True)
        compared += 1
    return compared


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def check_embeddings(tag, records, out, dim, gate):
    compared = 0
    for r in records:
        width = dim or len(r["embedding"])
        name = "%s dim=%s %s" % (tag, dim or "default", r["name"])
        o = out.get(r["name"])
        if o is None:
            report(name, False, "no output record")
            continue
        got = o.get("embedding")
        if not isinstance(got, list) or not got:
            report(name, False, "no embedding: %.100s" % json.dumps(o))
            continue
        if len(got) != width:
            report(name, False, "%d values, want %d" % (len(got), width))
            continue
        try:
            got = [float(x) for x in got]
        except (TypeError, ValueError):
            report(name, False, "non-numeric embedding values")
            continue
        want = normalize(r["embedding"][:width])
        c = cosine(got, want)
        maxabs = max(abs(x - y) for x, y in zip(got, want))
        norm = math.sqrt(sum(x * x for x in got))
        info = "cos=%.9f 1-cos=%.2e maxabs=%.3g norm=%.7f" % (
            c, 1 - c, maxabs, norm)
        if not (c >= gate):
            report(name, False, "%s < gate %g" % (info, gate))
        elif not (abs(norm - 1) <= NORM_TOL):
            report(name, False, "%s: not unit norm" % info)
        else:
            report("%s (%s)" % (name, info), True)
            compared += 1
    return compared


QUANT_GATE = 0.999


def quant_file(tag, dirpath, cmd, path, want):
    """Make `path` with mkmodel command `cmd` ("{QUANT}" = dirpath) unless it is there
    with the wanted sha256; report whether it has it. Returns the path or None."""
    if not (os.path.exists(path) and sha256(path) == want):
        argv = cmd.replace("{QUANT}", dirpath).split()
        try:
            p = subprocess.run([sys.executable, os.path.join(ROOT, argv[0])] + argv[1:],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=TIMEOUT)
            err = p.stderr.decode("utf-8", "replace").strip()[-300:] if p.returncode \
                else None
        except (OSError, subprocess.TimeoutExpired) as e:
            err = str(e)
        if err:
            report("%s: %s" % (tag, cmd), False, err)
            return None
    digest = sha256(path)
    import numpy
    report("%s: %s has the manifest's sha256" % (tag, os.path.basename(path)),
           digest == want, "%s, the golden was made from %s: the generator (tools/mkmodel, "
           "tools/gguf_writer.py) or numpy (%s here) changed; regenerate with "
           "tools/ref/mkgolden --only quant" % (digest, want, numpy.__version__))
    return path if digest == want else None


def quant_records(tag, m):
    gpath = os.path.join(GOLDEN, m["golden"])
    try:
        records = [json.loads(l) for l in open(gpath, encoding="utf-8") if l.strip()]
    except (OSError, ValueError) as e:
        report(tag + " golden file", False, str(e))
        return None
    if len(records) != m["records"] or not records:
        report(tag + " golden file", False, "%d records, manifest says %d"
               % (len(records), m["records"]))
        return None
    return records


def quant_text(tag, m, dirpath, base, tmp):
    records = quant_records(tag, m)
    path = quant_file(tag, dirpath, m["mkmodel"], m["model"].replace("{QUANT}", dirpath),
                      m["sha256"])
    if records is None or path is None:
        return 0
    inp = os.path.join(tmp, tag + ".jsonl")
    write_input(inp, records)
    total = 0
    out, err = run(base + ["-m", path, "--tokenize", inp])
    if err:
        report(tag + " --tokenize run", False, err)
    else:
        total += check_tokens(tag, records, out)
    out, err = run(base + ["-m", path, inp])
    if err:
        report(tag + " run (%s)" % " ".join(m.get("tensor_types", [])), False, err)
    else:
        total += check_embeddings(tag, records, out, None, QUANT_GATE)
    return total


def quant_media(tag, m, dirpath, base, tmp):
    records = quant_records(tag, m)
    text = quant_file(tag, dirpath, m["mkmodel"][0], m["model"].replace("{QUANT}", dirpath),
                      m["model_sha256"])
    mm = quant_file(tag, dirpath, m["mkmodel"][1], m["mmproj"].replace("{QUANT}", dirpath),
                    m["mmproj_sha256"])
    clip_dir = os.path.join(dirpath, "audio")
    os.makedirs(clip_dir, exist_ok=True)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "ref", "mkaudio"),
                        clip_dir] + sorted(m["clips"]), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    bad = [] if p.returncode == 0 else ["mkaudio: %s" % p.stderr.decode()[-200:]]
    for rel, want in sorted(m["images"].items()) + [
            (os.path.join(clip_dir, c), h) for c, h in sorted(m["clips"].items())]:
        path = os.path.join(ROOT, rel)
        if not os.path.exists(path) or sha256(path) != want:
            bad.append("%s missing or not the golden's (sha256 %s)" % (rel, want))
    report(tag + ": images and clips have the manifest's sha256", not bad, "; ".join(bad))
    if records is None or text is None or mm is None or bad:
        return 0
    inp = os.path.join(tmp, tag + ".jsonl")
    with open(inp, "w", encoding="utf-8") as f:
        for r in records:
            f.write(r["input"].replace("{AUDIO}/", clip_dir + "/") + "\n")
    cmd = base + ["-m", text, "--mmproj", mm, "--image-tokens", str(m["image_tokens"])]
    total = 0
    out, err = run(cmd + ["--tokenize", inp], cwd=ROOT)
    if err:
        report(tag + " --tokenize run", False, err)
    else:
        total += check_tokens(tag, records, out)
    out, err = run(cmd + [inp], cwd=ROOT)
    if err:
        report(tag + " run", False, err)
    else:
        total += check_embeddings(tag, records, out, None, QUANT_GATE)
    return total


def quant_main(dirpath, binary, extra, only=None):
    """--quant DIR: the block-type goldens (see the module docstring); only: the
    --only list of types ("mmproj" for the multimodal entry) or None."""
    if os.sep not in binary:
        binary = os.path.join(".", binary)
    binary = os.path.abspath(binary)
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        report("binary", False, "%s missing or not executable" % binary)
        finish()
    try:
        manifest = json.load(open(os.path.join(GOLDEN, "manifest.json")))
    except (OSError, ValueError) as e:
        report("golden manifest", False, str(e))
        finish()
    entries = sorted((n for n, m in manifest.items() if m.get("set") == "quant"),
                     key=lambda n: ("mmproj" in manifest[n], n))
    if only is not None:
        want = {"small-" + t for t in only}
        unknown = {t for t in only if "small-" + t not in entries} - {"mmproj"}
        if unknown:
            report("--only", False, "no quant golden for %s (have: %s)" % (
                ", ".join(sorted(unknown)), " ".join(e[len("small-"):] for e in entries)))
        entries = [e for e in entries if e in want or ("mmproj" in only and
                                                       "mmproj" in manifest[e])]
    report("quant goldens in the manifest (%d)" % len(entries), len(entries) > 0, "none")
    dirpath = os.path.abspath(dirpath)
    os.makedirs(dirpath, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="golden_check_quant.")
    total = 0
    base = [binary] + extra
    for name in entries:
        m = manifest[name]
        total += (quant_media if "mmproj" in m else quant_text)(name, m, dirpath, base, tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    report("records compared", total > 0, "zero records compared")
    finish()


def main(argv):
    if len(argv) > 1 and argv[1] == "--quant":
        rest, only = argv[3:], None
        if rest[:1] == ["--only"] and len(rest) > 1:
            only, rest = [t for t in rest[1].split(",") if t], rest[2:]
        if len(argv) < 4 or not rest:
            report("arguments", False, "usage: golden_check.py --quant DIR [--only TYPE,...] "
                   "BINARY [EXTRA...]")
            finish()
        quant_main(argv[2], rest[0], rest[1:], only)
    if len(argv) < 2:
        print("usage: golden_check.py BINARY [EXTRA_ARGS...]",
              file=sys.stderr)
        report("arguments", False, "no binary given")
        finish()
    binary, extra = argv[1], argv[2:]
    if os.sep not in binary:
        binary = os.path.join(".", binary)
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        report("binary", False, "%s missing or not executable" % binary)
        finish()
    try:
        manifest = json.load(open(os.path.join(GOLDEN, "manifest.json")))
    except (OSError, ValueError) as e:
        report("golden manifest", False, str(e))
        finish()
    tmp = tempfile.mkdtemp(prefix="golden_check.")
    total = 0
    for model_name, gate in GATES.items():
        tag = model_name
        m = manifest.get(model_name)
        gpath = os.path.join(GOLDEN, model_name + ".jsonl")
        if m is None:
            report(tag + " manifest entry", False, "missing")
            continue
        mdir = os.environ.get("GOLDEN_MODELS_DIR")
        mpath = os.path.join(mdir, os.path.basename(m["model"])) if mdir \
            else os.path.join(ROOT, m["model"])
        if not os.path.exists(mpath):
            report(tag + " model file", False,
                   "%s missing; make it with: %s" % (mpath, m["mkmodel"]))
            continue
        digest = sha256(mpath)
        if digest != m["sha256"]:
            report(tag + " model sha256", False,
                   "%s has %s, the golden was made from %s: regenerate "
                   "with tools/ref/mkgolden" % (m["model"], digest,
                                                m["sha256"]))
            continue
        report(tag + " model sha256", True)
        try:
            records = [json.loads(l) for l in open(gpath, encoding="utf-8")
                       if l.strip()]
        except (OSError, ValueError) as e:
            report(tag + " golden file", False, str(e))
            continue
        if len(records) != m["records"] or not records:
            report(tag + " golden file", False, "%d records, manifest says %d"
                   % (len(records), m["records"]))
            continue
        inp = os.path.join(tmp, model_name + ".jsonl")
        write_input(inp, records)
        base = [binary] + extra + ["-m", mpath]

        out, err = run(base + ["--tokenize", inp])
        if err:
            report(tag + " --tokenize run", False, err)
        else:
            extra_ids = set(out) - {r["name"] for r in records}
            report(tag + " --tokenize output ids", not extra_ids,
                   "unexpected ids %s" % sorted(map(str, extra_ids)))
            total += check_tokens(tag, records, out)

        for dim in DIMS:
            args = [] if dim is None else ["--dim", str(dim)]
            out, err = run(base + args + [inp])
            if err:
                report("%s dim=%s run" % (tag, dim or "default"), False, err)
                continue
            extra_ids = set(out) - {r["name"] for r in records}
            report("%s dim=%s output ids" % (tag, dim or "default"),
                   not extra_ids, "unexpected ids %s"
                   % sorted(map(str, extra_ids)))
            total += check_embeddings(tag, records, out, dim, gate)

        # the global --prompt switch, one run per prompt name
        prompts = sorted({r["prompt"] for r in records if r["prompt"]})
        if not prompts:
            report(tag + " --prompt records", False, "golden has none")
        for pname in prompts:
            sub = [r for r in records if r["prompt"] == pname]
            pin = os.path.join(tmp, "%s.prompt-%s.jsonl" % (model_name,
                                                            pname))
            write_input(pin, sub, with_prompt=False)
            ptag = "%s --prompt %s" % (tag, pname)
            out, err = run(base + ["--prompt", pname, "--tokenize", pin])
            if err:
                report(ptag + " --tokenize run", False, err)
            else:
                total += check_tokens(ptag, sub, out)
            out, err = run(base + ["--prompt", pname, pin])
            if err:
                report(ptag + " run", False, err)
            else:
                total += check_embeddings(ptag, sub, out, None, gate)
    shutil.rmtree(tmp, ignore_errors=True)
    report("records compared", total > 0, "zero records compared")
    finish()


if __name__ == "__main__":
    main(sys.argv)
