"""tests/corpus_check.py DIR CMD ARGS... - the checks of tests/test_corpus.sh on the outputs of
gemmaembed for the corpus of tests/corpus_gen.py (DIR/expect.json). Prints "PASS: name" or
"FAIL: name: detail" per check; exits 1 when one failed.

  refs GOOD_OUT GOOD_OUT2 STEP       the good-only runs and DIR/alone/*.out agree (the alone
                                     runs of every STEP-th good record); writes DIR/refs.json
                                     (each good record's vector, as text)
  jsonl NAME OUT ERR RC SOURCE [K]   a jsonl run over the corpus (K: --max-errors K)
  binary NAME FMT OUT IDS ERRS ERR RC JSONL
                                     an npy/f32 run with --errors ERRS; JSONL is the checked
                                     jsonl run whose error lines ERRS must repeat"""
import json
import re
import sys

import numpy as np

W, CMD, A = sys.argv[1], sys.argv[2], sys.argv[3:]
EXP = json.load(open(W + "/expect.json"))
RECS = EXP["records"]
GOOD = [e for e in RECS if e["good"]]
BAD = [e for e in RECS if not e["good"]]
failed = 0


def check(name, cond, detail=""):
    global failed
    if cond:
        print("PASS: " + name)
    else:
        failed += 1
        print("FAIL: %s: %s" % (name, detail))


def parse(path):
    """[(raw id, rest of the line, parsed object)] per output line."""
    data = open(path, "rb").read()
    if data and not data.endswith(b"\n"):
        raise ValueError("%s does not end with a newline" % path)
    out = []
    for n, ln in enumerate(data.split(b"\n")[:-1], 1):
        s = ln.decode("utf-8")
        if not s.startswith('{"id":'):
            raise ValueError("%s:%d: not a record: %r" % (path, n, s[:80]))
        _, end = json.JSONDecoder().raw_decode(s, 6)
        out.append((s[6:end], s[end:], json.loads(s)))
    return out


def vec_text(rest):
    """The embedding part of a good output line, after the id: ,"embedding":[...]}."""
    return rest if rest.startswith(',"embedding":[') else None


def first_diff(got, want, what):
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return "%s %d: got %r, want %r" % (what, i, g[:120], w[:120])
    return "%d %ss, want %d" % (len(got), what, len(want))


def refs():
    good = parse(A[0])
    good2 = parse(A[1])
    check("good-only run: one vector per good record (%d)" % len(GOOD),
          len(good) == len(GOOD) and all(vec_text(r) for _, r, _ in good), "%d lines" % len(good))
    step = int(A[2])
    alone = {}
    for e in GOOD[::step]:
        p = parse(W + "/alone/%04d.out" % e["gi"])
        alone[e["gi"]] = p[0][1] if len(p) == 1 else "(%d lines)" % len(p)
    bad = [i for i, a in alone.items() if i >= len(good) or a != good[i][1]]
    check("each good record run alone = the same record in the good-only run (%d runs)"
          % len(alone), not bad and len(good) == len(GOOD),
          "records (line in the corpus) %s" % [GOOD[i]["line"] for i in bad[:10]])
    check("good-only run: --threads 1 --wave-tokens 0 = the defaults",
          [r for _, r, _ in good2] == [r for _, r, _ in good],
          first_diff([r for _, r, _ in good2], [r for _, r, _ in good], "vector"))
    json.dump([r for _, r, _ in good], open(W + "/refs.json", "w"))


def expected(k):
    """The records a run with --max-errors k must write: up to the k-th bad one."""
    if not k:
        return RECS
    seen = 0
    for i, e in enumerate(RECS):
        seen += not e["good"]
        if seen == k:
            return RECS[: i + 1]
    return RECS


def jsonl():
    name, out, err, rc, source = A[:5]
    k = int(A[5]) if len(A) > 5 else 0
    ref = json.load(open(W + "/refs.json"))
    want = expected(k)
    nbad = sum(not e["good"] for e in want)
    check(name + ": exit 1", rc == "1", "exit " + rc)
    try:
        got = parse(out)
    except ValueError as e:
        check(name + ": output is jsonl", False, str(e))
        return
    ids, wids = [g[0] for g in got], [e["id"] for e in want]
    check("%s: one record per input record (%d), in input order, ids byte for byte"
          % (name, len(want)), ids == wids, first_diff(ids, wids, "id"))
    n = min(len(got), len(want))

    bad = []
    for (_, rest, obj), e in zip(got[:n], want[:n]):
        if e["good"] and rest != (ref[e["gi"]] if e["gi"] < len(ref) else None):
            bad.append("line %d: %s" % (e["line"], rest[:100] if "error" in obj else "vector differs"))
    ng = sum(e["good"] for e in want)
    check("%s: each good record's vector = its vector alone (%d)" % (name, ng),
          not bad and n == len(want), "; ".join(bad[:5]) or "records missing")

    bad = []
    for (_, rest, obj), e in zip(got[:n], want[:n]):
        if e["good"]:
            continue
        err_ = obj.get("error")
        if set(obj) != {"id", "error"} or not isinstance(err_, dict):
            bad.append("line %d: not an error record: %s" % (e["line"], rest[:100]))
            continue
        msg, code = err_.get("message", ""), err_.get("code")
        where = "%s:%d: " % (source, e["line"])
        if code not in e["code"]:
            bad.append("line %d (%s): code %s, want %s" % (e["line"], e["kind"], code, e["code"]))
        elif not msg.startswith(where):
            bad.append("line %d: message does not start with %r: %r" % (e["line"], where, msg[:100]))
        elif not re.search(e["kw"], msg[len(where):]):
            bad.append("line %d (%s): %r does not match %r" % (e["line"], e["kind"], msg[:120], e["kw"]))
        elif "ntok" in e and not re.search(r"\b%d tokens" % e["ntok"], msg):
            bad.append("line %d: %r: want %d tokens" % (e["line"], msg[:100], e["ntok"]))
        elif code == "too_long" and "tokens" in msg and int(re.search(e["kw"], msg).group(1)) <= 8192:
            bad.append("line %d: %r is not over the limit" % (e["line"], msg[:100]))
    check("%s: each bad record -> one error record: its code, %s:LINE and cause (%d)"
          % (name, source, nbad), not bad and n == len(want), "; ".join(bad[:4]) or "records missing")

    err = open(err, encoding="utf-8", errors="replace").read()
    summary = "%d of %d records failed" % (nbad, len(want))
    ok = summary in err and '"error"' not in err and (not k or "stopping after %d failed records" % k in err)
    check("%s: stderr says %r%s" % (name, summary, " and stops at --max-errors" if k else ""), ok,
          err[-300:])

    if name == "default":  # the same run, seen by the properties it covers
        noid = [e for e in want if e["good"] and e["id"] == str(e["line"])]
        check("records without an id get their line number, blank lines counted (%d)" % len(noid),
              len(noid) >= 5 and all(ids[want.index(e)] == str(e["line"]) for e in noid), str(noid[:3]))
        seen = {}
        for e in want:
            if e["good"]:
                seen.setdefault(e["id"], []).append(e)
        dups = [v for v in seen.values() if len(v) > 1]
        ndup = sum(len(v) for v in dups)
        missing = [e["line"] for (_, _, obj), e in zip(got, want)
                   if e["good"] and len(seen[e["id"]]) > 1 and "embedding" not in obj]
        check("duplicate ids: all %d records sharing %d ids embedded, in order" % (ndup, len(dups)),
              len(dups) >= 3 and not missing, "no vector for the records on lines %s" % missing[:10])
        kinds = sorted({e["kind"] for e in BAD})
        check("every kind of bad record is in the corpus, several times: " + " ".join(kinds),
              all(sum(e["kind"] == kd for e in BAD) >= 2 for kd in kinds) and len(kinds) >= 10,
              str({kd: sum(e["kind"] == kd for e in BAD) for kd in kinds}))


def binary():
    name, fmt, out, ids, errs, err, rc, jl = A
    ref = json.load(open(W + "/refs.json"))
    check(name + ": exit 1", rc == "1", "exit " + rc)
    want = np.array([json.loads("{" + r[1:])["embedding"] for r in ref], dtype="<f4")
    if fmt == "npy":
        m = np.load(out)
        ok = m.dtype == np.dtype("<f4") and m.shape == want.shape
    else:
        m = np.fromfile(out, dtype="<f4")
        ok = m.size == want.size
        m = m.reshape(-1, want.shape[1]) if m.size % want.shape[1] == 0 else m.reshape(1, -1)
    rows = [i for i in range(min(len(m), len(want))) if m[i].tobytes() != want[i].tobytes()]
    check("%s: one row per good record (%d), each = its vector alone, byte for byte"
          % (name, len(want)), ok and not rows,
          "shape %s want %s, rows differ at %s" % (m.shape, want.shape, rows[:5]))
    got_ids = open(ids, encoding="utf-8").read().splitlines()
    wids = [e["id"] for e in GOOD]
    check("%s: ids sidecar = the good records' ids byte for byte" % name, got_ids == wids,
          first_diff(got_ids, wids, "id"))
    want_err = [('{"id":%s%s\n' % (i, r)).encode() for i, r, _ in parse(jl)
                if r.startswith(',"error":')]
    got_err = open(errs, "rb").read().splitlines(keepends=True)
    check("%s: --errors file = the %d error records of the jsonl run, byte for byte"
          % (name, len(BAD)), got_err == want_err and len(got_err) == len(BAD),
          first_diff(got_err, want_err, "error line"))
    e = open(err, encoding="utf-8", errors="replace").read()
    summary = "%d of %d records failed" % (len(BAD), len(RECS))
    check("%s: stderr has the count, no error records" % name,
          summary in e and '"error"' not in e, e[-300:])


try:
    {"refs": refs, "jsonl": jsonl, "binary": binary}[CMD]()
except Exception as ex:  # a crash in a check is a failure of that check, not silence
    import traceback
    traceback.print_exc()
    check("corpus_check %s %s" % (CMD, A[0] if A else ""), False, repr(ex)[:300])
sys.exit(1 if failed else 0)
