#!/usr/bin/python3
"""Reference embedder CLI (float64 NumPy).

usage: embed.py -m MODEL.gguf [--dim N] [--prompt NAME] [--prefix STR]
                [--noise REL] [--noise-seed N] [--chunk|--late-chunk N[:OVERLAP]]
                [FILE.jsonl]

Input: JSONL records {"id": ..., "text": "...", optional "prompt": NAME or
"prefix": STR} (stdin if FILE is absent or "-"). A per-record prompt/prefix
overrides --prompt/--prefix. The prompt string is prepended to the text
before tokenisation (docs/model.md 2.2/2.3).
Output: JSONL {"id": ..., "tokens": [...], "embedding": [...]} with floats
printed with repr (17 significant digits round-trip).
--chunk / --late-chunk (docs/model.md 2.6, the passages restated in chunk.py): a row per
passage, {"id", "chunk", "chunks", "start", "end", "tokens", "embedding"}, the tokens being
the sequence it is pooled from; --late-chunk pools the per-token outputs over its span.
Records may give "title" (the document prompt's title).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import chunk  # noqa: E402
from gguf import GGUFFile  # noqa: E402
from model import Model, l2_normalize, matryoshka  # noqa: E402
from tokenizer import Tokenizer  # noqa: E402

_Q = "task: search result | query: "
_D = "title: none | text: "
_CLS = "task: classification | query: "
_CLU = "task: clustering | query: "
_CODE = "task: code retrieval | query: "
_FACT = "task: fact checking | query: "
_QA = "task: question answering | query: "
_STS = "task: sentence similarity | query: "

# docs/model.md 2.2 plus short lowercase aliases; looked up case-insensitively.
PROMPTS = {
    "query": _Q, "retrieval-query": _Q, "retrieval": _Q, "reranking": _Q,
    "bitextmining": _Q, "searchquery": _Q,
    "document": _D, "retrieval-document": _D,
    "classification": _CLS, "multilabelclassification": _CLS,
    "clustering": _CLU,
    "coderetrieval": _CODE, "instructionretrieval": _CODE, "code": _CODE,
    "factchecking": _FACT, "fact": _FACT,
    "questionanswering": _QA, "qa": _QA,
    "sts": _STS, "sentencesimilarity": _STS, "pairclassification": _STS,
    "summarization": _STS,
}


def prompt_prefix(name):
    if name is None:
        return ""
    key = name.lower()
    if key not in PROMPTS:
        raise KeyError("unknown prompt name %r" % name)
    return PROMPTS[key]


def record_prefix(rec, args):
    """The record's own "prefix" or "prompt", else --prefix, else --prompt."""
    if "prefix" in rec:
        return rec["prefix"]
    if rec.get("title") is not None and rec.get("prompt") in (None, "document"):
        return "title: %s | text: " % rec["title"]
    if rec.get("prompt") is not None:
        return prompt_prefix(rec["prompt"])
    if args.prefix is not None:
        return args.prefix
    return prompt_prefix(args.prompt)


def fmt_float(x):
    return repr(float(x))


def dumps_record(rec_id, tokens, emb):
    return ('{"id": %s, "tokens": [%s], "embedding": [%s]}'
            % (json.dumps(rec_id, ensure_ascii=False),
               ", ".join(str(t) for t in tokens),
               ", ".join(fmt_float(x) for x in emb)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--dim", type=int, default=0,
                    help="Matryoshka width (default: full)")
    ap.add_argument("--prompt", default=None)
    ap.add_argument("--prefix", default=None)
    ap.add_argument("--noise", type=float, default=0.0,
                    help="relative noise on the input embeddings")
    ap.add_argument("--noise-seed", type=int, default=0)
    ap.add_argument("--chunk", default=None, help="N[:OVERLAP] passages, each alone")
    ap.add_argument("--late-chunk", default=None, help="N[:OVERLAP] passages of one pass")
    ap.add_argument("file", nargs="?", default="-")
    a = ap.parse_args(argv)
    spec = a.chunk or a.late_chunk
    if spec:
        n_chunk, _, ov = spec.partition(":")
        n_chunk, ov = int(n_chunk), int(ov or 0)

    g = GGUFFile(a.model)
    tok = Tokenizer.from_gguf(g)
    model = Model(g)
    f = sys.stdin if a.file == "-" else open(a.file, encoding="utf-8")
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        rec = json.loads(line)
        text = rec.get("text")
        if not isinstance(text, str):
            sys.exit("line %d: no text" % n)
        if spec:
            ps = chunk.passages(tok, record_prefix(rec, a), text, n_chunk, ov,
                                a.late_chunk is not None, g.require(
                                    "%s.context_length" % g.metadata["general.architecture"]))
            for k, (start, end, seq, lo, hi) in enumerate(ps):
                _, y = model.forward(seq, return_tokens=True)
                emb = l2_normalize(y[lo:hi].mean(axis=0))
                if a.dim:
                    emb = matryoshka(emb, a.dim)
                row = dumps_record(rec.get("id", n), seq, emb)
                print(row.replace(", \"tokens\"", ', "chunk": %d, "chunks": %d, "start": %d, '
                                  '"end": %d, "tokens"' % (k, len(ps), start, end), 1),
                      flush=True)
            continue
        ids = tok.encode(record_prefix(rec, a) + text)
        emb = model.forward(ids, noise_rel=a.noise, noise_seed=a.noise_seed)
        if a.dim:
            emb = matryoshka(emb, a.dim)
        print(dumps_record(rec.get("id", n), ids, emb), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
