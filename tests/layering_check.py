#!/usr/bin/python3
"""The layers of the tree (tests/test_layering.sh runs this).

usage: tests/layering_check.py ROOT BUILD          check the tree at ROOT, objects under BUILD
       tests/layering_check.py --selftest ROOT BUILD  plant one violation of each rule in a
                                                    copy and check that each is caught

Rules:
  - cli/ includes no engine header but engine/ge.h (the engine's whole public face);
  - kernels/ includes nothing from engine/ (the kernels know no model);
  - no circle among the engine's files, in two graphs where a file pair X.c/X.h is one
    node: who includes whose header (source), and who calls whose functions (the global
    symbols each BUILD/engine/*.o needs from another, read with nm).
Prints PASS/FAIL lines and "N passed, N failed"; exits 1 on a failure.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from selfcheck import finish, report  # noqa: E402

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return INCLUDE.findall(f.read())


def sources(root, layer):
    return sorted(glob.glob(os.path.join(root, layer, "*.[ch]")))


def node(path):
    return os.path.splitext(os.path.basename(path))[0]


def cycles(edges):
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def describe(comp, edges, why):
    inside = set(comp)
    return "; ".join("%s -> %s (%s)" % (a, b, why.get((a, b), "")) for a in comp
                     for b in sorted(edges.get(a, ())) if b in inside)


def include_rules(root):
    """(name, ok, detail) for the include rules of cli/ and kernels/."""
    out = []
    engine = {os.path.basename(p) for p in sources(root, "engine")}
    kernels = {os.path.basename(p) for p in sources(root, "kernels")}
    cli = {os.path.basename(p) for p in sources(root, "cli")}
    bad = ["%s includes %s" % (os.path.relpath(p, root), h) for p in sources(root, "cli")
           for h in includes(p) if h not in cli and (h in engine or h in kernels) and h != "ge.h"]
    bad += ["%s includes %s (not in cli/)" % (os.path.relpath(p, root), h)
            for p in sources(root, "cli") for h in includes(p)
            if h not in cli and h not in engine and h not in kernels]
    out.append(("cli/ includes only engine/ge.h from the engine", not bad, ", ".join(bad)))
    bad = ["%s includes %s" % (os.path.relpath(p, root), h) for p in sources(root, "kernels")
           for h in includes(p) if h not in kernels]
    out.append(("kernels/ include nothing from engine/", not bad, ", ".join(bad)))
    return out


def include_graph(root):
    engine = {os.path.basename(p) for p in sources(root, "engine")}
    edges, why = {}, {}
    for p in sources(root, "engine"):
        a = node(p)
        edges.setdefault(a, set())
        for h in includes(p):
            if h in engine and node(h) != a:
                edges[a].add(node(h))
                why.setdefault((a, node(h)), "%s includes %s" % (os.path.basename(p), h))
    return edges, why


def call_graph(objdir):
    defined, needed = {}, {}
    for o in sorted(glob.glob(os.path.join(objdir, "*.o"))):
        n = node(o)
        text = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
        d, u = set(), set()
        for line in text.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in "TDBRVW":
                d.add(f[2])
            elif len(f) == 2 and f[0] == "U":
                u.add(f[1])
        defined[n], needed[n] = d, u
    owner = {s: n for n, d in defined.items() for s in d}
    edges, why = {n: set() for n in defined}, {}
    for n, u in needed.items():
        for s in sorted(u):
            t = owner.get(s)
            if t and t != n:
                edges[n].add(t)
                why.setdefault((n, t), s)
    return edges, why


def check_tree(root, objdir):
    """Every rule on one tree: a list of (name, ok, detail)."""
    out = include_rules(root)
    edges, why = include_graph(root)
    loops = cycles(edges)
    out.append(("no include circle among engine files (%d files)" % len(edges), not loops,
                " | ".join(describe(c, edges, why) for c in loops)))
    edges, why = call_graph(objdir)
    loops = cycles(edges)
    ok = bool(edges) and not loops
    detail = (" | ".join(describe(c, edges, why) for c in loops) if edges
              else "no objects under %s" % objdir)
    out.append(("no call circle among engine objects (%d objects, nm)" % len(edges), ok,
                detail))
    return out


def plant(root, objdir, tmp, what):
    """A copy of the tree (and of the engine objects) with one violation planted."""
    copy = os.path.join(tmp, what)
    for layer in ("cli", "engine", "kernels"):
        shutil.copytree(os.path.join(root, layer), os.path.join(copy, layer))
    objs = os.path.join(copy, "obj")
    shutil.copytree(objdir, objs)

    def append(rel, text):
        with open(os.path.join(copy, rel), "a", encoding="utf-8") as f:
            f.write(text)

    if what == "cli":
        append("cli/main.c", '\n#include "model.h"\n')
    elif what == "kernels":
        append("kernels/kern.h", '\n#include "compute.h"\n')
    elif what == "include":
        append("engine/compute.h", '\n#include "model.h"\n')
    elif what == "call":
        # compute.c calling up into linear.c, which runs on compute.c's pool: compile the
        # planted copy into the objects
        append("engine/compute.c", '\n#include "linear.h"\nvoid ge_layering_planted('
               'const ge_compute *cx, char *b) { ge_linear_kernel(cx, 0, b, 8); }\n')
        subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-I" + os.path.join(root, "engine"),
                        "-I" + os.path.join(root, "kernels"), "-c", "-o",
                        os.path.join(objs, "compute.o"),
                        os.path.join(copy, "engine", "compute.c")], check=True)
    return copy, objs


def main(argv):
    selftest = argv[:1] == ["--selftest"]
    if selftest:
        argv = argv[1:]
    if len(argv) != 2:
        sys.exit(__doc__)
    root, build = argv
    objdir = os.path.join(build, "engine")
    results = check_tree(root, objdir)
    for name, ok, detail in results:
        report(name, ok, detail)
    if selftest:
        catches = {"cli": 0, "kernels": 1, "include": 2, "call": 3}
        with tempfile.TemporaryDirectory() as tmp:
            for what, rule in catches.items():
                copy, objs = plant(root, objdir, tmp, what)
                name, ok, detail = check_tree(copy, objs)[rule]
                report("a planted %s violation fails \"%s\"" % (what, name), not ok,
                       detail or "the rule passed")
    finish("layering_check")


if __name__ == "__main__":
    main(sys.argv[1:])
