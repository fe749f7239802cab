"""tests/selfcheck.py - the check harness of the Python self-tests (ref_selftest.py,
ref_vision_selftest.py): "PASS: name" / "FAIL: name: detail" / "SKIP: name: why" lines, as
tests/run counts them, and the totals for the script's exit status."""
import traceback

RESULTS = {"pass": 0, "fail": 0, "skip": 0}


def report(name, ok, detail=""):
    RESULTS["pass" if ok else "fail"] += 1
    if ok:
        print("PASS: %s%s" % (name, " (%s)" % detail if detail else ""), flush=True)
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
