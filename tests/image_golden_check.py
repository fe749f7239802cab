#!/usr/bin/python3
"""Compare gemmaembed's image records with the stored float64 goldens.

usage: tests/image_golden_check.py [--fast-only] [--budget N] BINARY [EXTRA_ARGS...]

The goldens golden/tiny-mmproj-f32.jsonl and golden/tiny-mmproj-q8_0.jsonl
(tools/ref/mkgolden; golden/README.md) hold image records on the committed
images of testdata/images/: each image alone at budgets 70 and 280, and
records mixing texts and images (captions, content arrays, manual
<|image|> placeholders, three images, a prompt, a title, inline base64).
For each model pair (tiny-<type>.gguf + tiny-mmproj-<type>.gguf):
  - the sha256 of the text model, the mmproj and every image must equal
    the manifest's, else nothing is compared (regenerate the goldens);
  - `--tokenize` per budget: the token ids equal the golden's exactly,
    soft-token placeholders included, and so each image block's soft-token
    count (the run of <|image|> ids between <|image> and <image|>, which
    is how the C side shows it) equals the golden's;
  - the embeddings, per run: every record's cosine with the golden reaches
    the gate (f32 weights 0.99999, Q8_0 0.999), the vector has the
    golden's width and unit norm; the runs (EXTRA_ARGS go to each):
      - the fast media path (the default), every record;
      - the reference towers (--no-media-fast): the budget-70 records on
        both models, and REF_280 on f32 weights;
      - --no-flash, --no-sgemm, --threads=1, --prepack, --no-yield and --no-media-q8-wide, budget
        70.
--fast-only keeps only the fast-path run and skips --tokenize (planning
and tokens do not depend on the kernels): tests/run adds one such run per
kernel tier, e.g. `--fast-only BINARY --cpu-tier avx2`. The reference towers
need no run per tier: they use scalar row dots, row-by-row attention and
the scalar kernel table whatever --cpu-tier says (only the text layers use
the tier, as in the fast runs). --budget N keeps the records of budget N.

Prints "PASS: name" or "FAIL: name: detail" (one FAIL per failing record)
and a closing "N passed, N failed"; exits 1 on any failure, including a
missing binary, golden, model or image, or zero records compared.
"""

import json
import math
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
GATES = {"tiny-mmproj-f32": 0.99999, "tiny-mmproj-q8_0": 0.999}
SWITCHES = ("--no-flash", "--no-sgemm", "--threads=1", "--prepack", "--no-yield",
            "--no-media-q8-wide")
REF_280 = {"caption@280"}  # one 280-token image: 3 s here, minutes under the sanitizers
NORM_TOL = 1e-4
TIMEOUT = 600

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from selfcheck import cosine, report as report_any, run_jsonl, sha256  # noqa: E402
from selfcheck import finish as finish_script  # noqa: E402


def report(name, ok, detail=""):
    report_any(name, ok, detail, quiet_pass=True)  # detail: why it failed


def finish():
    finish_script("image_golden_check")


def run(cmd):
    """The binary's records by id (run in ROOT: the records' image paths are relative)."""
    return run_jsonl(cmd, ROOT, TIMEOUT)

def soft_counts(ids, marks):
    """The soft-token count of each image block <|image> <|image|> x N <image|> in ids."""
    boi, img, eoi = marks["<|image>"], marks["<|image|>"], marks["<image|>"]
    counts, i = [], 0
    while i < len(ids):
        if ids[i] == boi:
            j = i + 1
            while j < len(ids) and ids[j] == img:
                j += 1
            counts.append(j - i - 1 if j < len(ids) and ids[j] == eoi else -1)
            i = j
        else:
            i += 1
    return counts


def verify_files(tag, m, records):
    """The manifest's sha256 of the models and images against the files; every image a
    record names must be listed. Returns (text model, mmproj) paths or None."""
    bad = []
    files = [(m["model"], m["model_sha256"]), (m["mmproj"], m["mmproj_sha256"])]
    files += sorted(m["images"].items())
    for rel, want in files:
        path = os.path.join(ROOT, rel)
        if not os.path.exists(path):
            bad.append("%s missing" % rel)
        elif sha256(path) != want:
            bad.append("%s has sha256 %s, the golden was made from %s" % (rel, sha256(path),
                                                                           want))
    unlisted = sorted({p for r in records for p in r["images"]} - set(m["images"]))
    if unlisted:
        bad.append("images not in the manifest: %s" % ", ".join(unlisted))
    report("%s: sha256 of the model, the mmproj and %d images equal the manifest's"
           % (tag, len(m["images"])), not bad,
           "; ".join(bad) + " (make them with: %s; or regenerate the goldens with "
           "tools/ref/mkgolden)" % "; ".join(m["mkmodel"] + [m["mkimages"]]))
    return None if bad else (os.path.join(ROOT, m["model"]), os.path.join(ROOT, m["mmproj"]))


def check_tokens(tag, budget, records, out, marks):
    for r in records:
        name = "%s budget %d tokens %s" % (tag, budget, r["name"])
        got = (out.get(r["name"]) or {}).get("tokens")
        if got is None:
            report(name, False, "no tokens: %.200s" % json.dumps(out.get(r["name"])))
            continue
        counts = soft_counts(got, marks)
        if counts != r["soft_tokens"]:
            report(name, False, "soft-token counts %s, want %s" % (counts, r["soft_tokens"]))
        elif got != r["tokens"]:
            i = next((i for i, (a, b) in enumerate(zip(got, r["tokens"])) if a != b),
                     min(len(got), len(r["tokens"])))
            report(name, False, "%d ids, want %d; first difference at %d: got %s want %s"
                   % (len(got), len(r["tokens"]), i, got[i:i + 8], r["tokens"][i:i + 8]))
        else:
            report("%s (soft tokens %s)" % (name, r["soft_tokens"]), True)


def check_embeddings(tag, records, out, gate, seconds):
    """One FAIL per failing record, else one PASS for the run. Returns records compared."""
    worst, bad = (2.0, None, 0.0), 0
    for r in records:
        o = out.get(r["name"]) or {}
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
        report("%s: %d records cosine >= %g (worst %.9f, 1-cos %.2e, %s, maxabs %.3g; %.1f s)"
               % (tag, len(records), gate, worst[0], 1 - worst[0], worst[1], worst[2],
                  seconds), True)
    return len(records) - bad


def main(argv):
    args = argv[1:]
    fast_only = budget_only = None
    while args and args[0] in ("--fast-only", "--budget"):
        if args[0] == "--fast-only":
            fast_only, args = True, args[1:]
        elif len(args) > 1 and args[1].isdigit():
            budget_only, args = int(args[1]), args[2:]
        else:
            break
    if not args or args[0].startswith("-"):
        report("arguments", False, "usage: image_golden_check.py [--fast-only] [--budget N] "
               "BINARY [EXTRA_ARGS...]")
        finish()
    binary, extra = os.path.abspath(args[0]), args[1:]
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        report("binary", False, "%s missing or not executable" % binary)
        finish()
    try:
        with open(os.path.join(GOLDEN, "manifest.json")) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        report("golden manifest", False, str(e))
        finish()
    # (what, switches, {budget: record filter}, golden it applies to)
    every = {70: lambda r: True, 280: lambda r: True}
    matrix = [("fast", [], every, "both")]
    if not fast_only:
        matrix.append(("reference towers", ["--no-media-fast"], {70: lambda r: True}, "both"))
        matrix.append(("reference towers", ["--no-media-fast"],
                       {280: lambda r: r["name"] in REF_280}, "tiny-mmproj-f32"))
        matrix += [(sw, [sw], {70: lambda r: True}, "both") for sw in SWITCHES]
    label = " ".join(extra)

    tmp = tempfile.mkdtemp(prefix="image_golden_check.")
    compared = 0
    for gname, gate in GATES.items():
        tag = gname[len("tiny-mmproj-"):]
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
        models = verify_files(gname, m, records)
        if models is None:
            continue
        base = [binary] + extra + ["-m", models[0], "--mmproj", models[1]]
        inputs = {}
        if budget_only is not None:
            records = [r for r in records if r["budget"] == budget_only]
        for budget in sorted({r["budget"] for r in records}):
            inputs[budget] = os.path.join(tmp, "%s-%d.jsonl" % (gname, budget))
            with open(inputs[budget], "w", encoding="utf-8") as f:
                for r in records:
                    if r["budget"] == budget:
                        f.write(r["input"] + "\n")
            sub = [r for r in records if r["budget"] == budget]
            if fast_only:
                continue
            out, err = run(base + ["--image-tokens", str(budget), "--tokenize",
                                   inputs[budget]])
            if err:
                report("%s budget %d --tokenize" % (tag, budget), False, err)
            else:
                check_tokens(tag, budget, sub, out, m["image_token_ids"])
        for what, switches, budgets, which in matrix:
            if which not in ("both", gname):
                continue
            for budget, keep in budgets.items():
                if budget not in inputs:
                    continue
                sub = [r for r in records if r["budget"] == budget and keep(r)]
                run_tag = " ".join(x for x in (tag, label, what, "budget %d" % budget) if x)
                if not sub:
                    report(run_tag, False, "no records")
                    continue
                src = inputs[budget]
                if len(sub) != sum(r["budget"] == budget for r in records):
                    src = os.path.join(tmp, "%s-%d-sub.jsonl" % (gname, budget))
                    with open(src, "w", encoding="utf-8") as f:
                        f.write("".join(r["input"] + "\n" for r in sub))
                t0 = time.time()
                out, err = run(base + switches + ["--image-tokens", str(budget), src])
                if err:
                    report(run_tag, False, err)
                    continue
                compared += check_embeddings(run_tag, sub, out, gate, time.time() - t0)
    shutil.rmtree(tmp, ignore_errors=True)
    report("records compared (%d)" % compared, compared > 0, "zero records compared")
    finish()


if __name__ == "__main__":
    main(sys.argv)
