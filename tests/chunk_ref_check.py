#!/usr/bin/python3
"""The passage planner of engine/chunk.c against its restatement in tools/ref/chunk.py
(issue 20): on the cases tests/test_chunk.c writes (random texts with CJK and emoji, random
budgets and overlaps), the reference tokenizer's token ends equal the C ones and
tools/ref/chunk.plan gives the same passages.

usage: tests/chunk_ref_check.py MODEL.gguf CASES.jsonl
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "ref"))
from chunk import plan, token_ends  # noqa: E402
from gguf import GGUFFile  # noqa: E402
from tokenizer import Tokenizer  # noqa: E402


def main():
    tok = Tokenizer.from_gguf(GGUFFile(sys.argv[1]))
    cases = [json.loads(line) for line in open(sys.argv[2], encoding="utf-8")]
    bad_ends = bad_plan = 0
    first = ""
    for c in cases:
        _, ends, mid = token_ends(tok, c["text"])
        if ends != c["ends"] or [int(m) for m in mid] != c["mid"]:
            bad_ends += 1
            first = first or "ends of %r" % c["text"][:60]
            continue
        got = [list(p) for p in plan(c["text"].encode(), ends, mid, c["budget"], c["overlap"])]
        if got != c["passages"]:
            bad_plan += 1
            first = first or "plan of %r (budget %d, overlap %d)" % (c["text"][:60], c["budget"],
                                                                   c["overlap"])
    ok = len(cases) >= 100 and not bad_ends and not bad_plan
    print(("PASS: %d cases: token ends and passages = tools/ref/chunk.py" % len(cases)) if ok else
          "FAIL: chunk reference: %d cases, %d token ends and %d plans differ; first: %s"
          % (len(cases), bad_ends, bad_plan, first))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
