"""tests/selfcheck.py - the check harness of the Python checks (ref_selftest.py,
ref_vision_selftest.py, ref_audio_selftest.py, golden_check.py, image_golden_check.py):
"PASS: name" / "FAIL: name: detail" / "SKIP: name: why" lines, as tests/run counts them, and
the totals for the script's exit status."""
import hashlib
import sys
import traceback

RESULTS = {"pass": 0, "fail": 0, "skip": 0}


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
