"""tests/selfcheck.py - the check harness of the Python checks (ref_selftest.py,
ref_vision_selftest.py, ref_audio_selftest.py, golden_check.py, the image, audio and video
golden checks): "PASS: name" / "FAIL: name: detail" / "SKIP: name: why" lines, as tests/run
counts them, and the totals for the script's exit status; and what the golden checks share:
cosine() and run_jsonl(), the binary's JSONL records by id; and what the CLI scripts
(test_audio_cli.sh, test_video_cli.sh) share: run_rows() and write_jsonl()."""
import hashlib
import json
import math
import os
import subprocess
import sys
import traceback

RESULTS = {"pass": 0, "fail": 0, "skip": 0}
# tests/run sets 4 under qemu (make ARCH=aarch64): every command's timeout grows by it
TIMEOUT_SCALE = int(os.environ.get("GE_TIMEOUT_SCALE", "1"))


def report(name, ok, detail="", quiet_pass=False):
    """detail is printed with a failure, and with a pass unless quiet_pass."""
    RESULTS["pass" if ok else "fail"] += 1
    if ok:
        print("PASS: %s%s" % (name, " (%s)" % detail if detail and not quiet_pass else ""),
              flush=True)
    else:
        print("FAIL: %s: %s" % (name, detail), flush=True)


def skip(name, why):
    RESULTS["skip"] += 1
    print("SKIP: %s: %s" % (name, why), flush=True)


def check(name):
    """Decorator: run fn() now; it returns None (pass), "skip" (it reported a skip itself) or
    (ok, detail), or raises (a failure naming the exception and the line)."""
    def deco(fn):
        try:
            r = fn()
            if r is None:
                report(name, True)
            elif r != "skip":
                report(name, r[0], r[1])
        except Exception as e:   # noqa: BLE001
            report(name, False, "%s: %s | %s" % (type(e).__name__, e,
                                                 traceback.format_exc().splitlines()[-3].strip()))
        return fn
    return deco


def finish(script):
    """Print the totals and exit: non-zero on a failure, or when no check ran at all."""
    if RESULTS["pass"] + RESULTS["fail"] == 0:
        report("%s ran checks" % script, False, "no checks ran")
    print("%d passed, %d failed" % (RESULTS["pass"], RESULTS["fail"]), flush=True)
    sys.exit(1 if RESULTS["fail"] else 0)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cosine(a, b):
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    if na == 0 or nb == 0:
        return float("nan")
    return sum(x * y for x, y in zip(a, b)) / (na * nb)


def run_jsonl(cmd, cwd, timeout, expect_errors=False):
    """Run cmd in cwd; exit 0 wanted, or 1 when the input holds error records. Returns
    (dict id -> output record, error string or None)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                           timeout=timeout * TIMEOUT_SCALE, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "%s: %s" % (type(e).__name__, e)
    out = {}
    for n, line in enumerate(p.stdout.decode("utf-8", "replace").splitlines(), 1):
        try:
            o = json.loads(line)
        except ValueError as e:
            return None, "stdout line %d is not JSON (%s): %.80s" % (n, e, line)
        if not isinstance(o, dict) or "id" not in o or o["id"] in out:
            return None, "stdout line %d: no id or a repeated id: %.80s" % (n, line)
        out[o["id"]] = o
    if p.returncode != (1 if expect_errors else 0):
        errs = [o for o in out.values() if isinstance(o.get("error"), dict)]
        return None, "exit %d (want %d); first error record: %.300s; stderr: %s" % (
            p.returncode, 1 if expect_errors else 0, json.dumps(errs[0]) if errs else "none",
            p.stderr.decode("utf-8", "replace")[-300:].strip())
    return out, None


def run_rows(cmd, cwd, timeout, env=None):
    """Run cmd in cwd: (exit status, its stdout lines as JSON values, {"bad line": line} for
    a line that is not JSON, its stderr)."""
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd,
                       timeout=timeout * TIMEOUT_SCALE, env=env)
    rows = []
    for line in r.stdout.splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            rows.append({"bad line": line})
    return r.returncode, rows, r.stderr


def write_jsonl(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
