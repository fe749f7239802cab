#!/usr/bin/python3
"""Compare the gemmaembed binary with the NumPy reference goldens.

usage: tests/golden_check.py BINARY [EXTRA_ARGS...]

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
TIMEOUT = 600

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from selfcheck import cosine, report as report_any, sha256  # noqa: E402
from selfcheck import finish as finish_script  # noqa: E402


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


def run(cmd):
    """Run the binary; returns (dict id -> record, error string or None)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT, stdin=subprocess.DEVNULL)
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


def main(argv):
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
