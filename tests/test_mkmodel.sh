#!/bin/sh
# Tests for tools/mkmodel, the synthetic EmbeddingGemma 2 GGUF generator.
#   (a) regenerating each committed testdata/tiny-*.gguf reproduces it byte for byte;
#   (b) every --broken kind gives a file that differs from the good one and that an
#       independent GGUF reader (below, not sharing code with tools/gguf_writer.py)
#       rejects for the intended reason;
#   (c) --vocab tokenizer.json works (string and pair merges, id gaps, added tokens);
#   (d) --mmproj vision|audio|both: testdata/tiny-mmproj-*.gguf regenerate byte for byte,
#       the clip.* keys, tensor names, ggml shapes and per-tensor types of docs/gguf.md 4 in
#       every --type (audio: F32 convs, input_projection and conv_dw, clamp scalars,
#       per_dim_scale after softplus), a combined file = the vision file's tensors + the
#       audio file's, byte for byte, the real preset's shapes (docs/model.md 9 parameter counts),
#       seeds, broken variants;
#   plus a full structural check of the good files and of the weight encodings.
# Prints "PASS: name" / "FAIL: name: detail" per check; exits 1 if any failed.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
MK="$ROOT/tools/mkmodel"
TD="$ROOT/testdata"
T=$(mktemp -d "${TMPDIR:-/tmp}/test_mkmodel.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM

npass=0
nfail=0
pass() { echo "PASS: $1"; npass=$((npass + 1)); }
fail() { echo "FAIL: $1: $2"; nfail=$((nfail + 1)); }

# run mkmodel; succeed only if it exits 0 and prints nothing
mk() {
    "$MK" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -ne 0 ]; then echo "exit $rc: $(head -c 300 "$T/err")"; return 1; fi
    if [ -s "$T/out" ] || [ -s "$T/err" ]; then echo "printed output"; return 1; fi
    return 0
}

# ---------------------------------------------------------------- (a)
for t in f32 q8_0 bf16 f16; do
    if ! msg=$(mk --preset tiny --type $t --seed 1 -o "$T/tiny-$t.gguf"); then
        fail "regen-tiny-$t" "$msg"
    elif [ ! -f "$TD/tiny-$t.gguf" ]; then
        fail "regen-tiny-$t" "testdata/tiny-$t.gguf missing"
    elif cmp -s "$T/tiny-$t.gguf" "$TD/tiny-$t.gguf"; then
        pass "regen-tiny-$t"
    else
        fail "regen-tiny-$t" "differs from testdata/tiny-$t.gguf"
    fi
done

for t in f32 q8_0; do
    sz=$(wc -c <"$TD/tiny-$t.gguf" 2>/dev/null || echo 0)
    if [ "$sz" -gt 0 ] && [ "$sz" -lt 1000000 ]; then pass "size-tiny-$t"
    else fail "size-tiny-$t" "$sz bytes (want < 1 MB)"; fi
done

if msg=$(mk --preset tiny --type q8_0 --seed 2 -o "$T/s2a.gguf") &&
   msg=$(mk --preset tiny --type q8_0 --seed 2 -o "$T/s2b.gguf"); then
    if ! cmp -s "$T/s2a.gguf" "$T/s2b.gguf"; then fail "seed" "seed 2 not deterministic"
    elif cmp -s "$T/s2a.gguf" "$T/tiny-q8_0.gguf"; then fail "seed" "seed 2 equals seed 1"
    else pass "seed"; fi
else
    fail "seed" "$msg"
fi

# ---------------------------------------------------------------- (b)
KINDS="truncated magic missing shape type counts counts-tensors counts-kv"
for k in $KINDS; do
    if ! msg=$(mk --preset tiny --type q8_0 --seed 1 --broken "$k" -o "$T/broken-$k.gguf"); then
        fail "broken-$k-differs" "$msg"
    elif cmp -s "$T/broken-$k.gguf" "$T/tiny-q8_0.gguf"; then
        fail "broken-$k-differs" "identical to the good file"
    else
        pass "broken-$k-differs"
    fi
done

# ---------------------------------------------------------------- (d) mmproj
for t in f32 q8_0 bf16 f16; do
    if ! msg=$(mk --mmproj vision --preset tiny --type $t --seed 1 -o "$T/mm-tiny-$t.gguf"); then
        fail "mmproj-generate-$t" "$msg"
    elif [ "$t" = f32 ] || [ "$t" = q8_0 ]; then
        if [ ! -f "$TD/tiny-mmproj-$t.gguf" ]; then
            fail "regen-tiny-mmproj-$t" "testdata/tiny-mmproj-$t.gguf missing"
        elif cmp -s "$T/mm-tiny-$t.gguf" "$TD/tiny-mmproj-$t.gguf"; then
            pass "regen-tiny-mmproj-$t"
        else
            fail "regen-tiny-mmproj-$t" "differs from testdata/tiny-mmproj-$t.gguf"
        fi
        sz=$(wc -c <"$TD/tiny-mmproj-$t.gguf" 2>/dev/null || echo 0)
        if [ "$sz" -gt 0 ] && [ "$sz" -lt 1000000 ]; then pass "size-tiny-mmproj-$t"
        else fail "size-tiny-mmproj-$t" "$sz bytes (want < 1 MB)"; fi
    else
        pass "mmproj-generate-$t"
    fi
done

# audio and combined files in every type; the committed ones regenerate byte for byte
for m in audio both; do
    for t in f32 q8_0 bf16 f16; do
        if ! msg=$(mk --mmproj $m --preset tiny --type $t --seed 1 -o "$T/mm-$m-tiny-$t.gguf"); then
            fail "mmproj-$m-generate-$t" "$msg"
        elif [ "$t" = q8_0 ]; then
            if [ ! -f "$TD/tiny-mmproj-$m-$t.gguf" ]; then
                fail "regen-tiny-mmproj-$m-$t" "testdata/tiny-mmproj-$m-$t.gguf missing"
            elif cmp -s "$T/mm-$m-tiny-$t.gguf" "$TD/tiny-mmproj-$m-$t.gguf"; then
                pass "regen-tiny-mmproj-$m-$t"
            else
                fail "regen-tiny-mmproj-$m-$t" "differs from testdata/tiny-mmproj-$m-$t.gguf"
            fi
            sz=$(wc -c <"$TD/tiny-mmproj-$m-$t.gguf" 2>/dev/null || echo 0)
            if [ "$sz" -gt 0 ] && [ "$sz" -lt 1000000 ]; then pass "size-tiny-mmproj-$m-$t"
            else fail "size-tiny-mmproj-$m-$t" "$sz bytes (want < 1 MB)"; fi
        else
            pass "mmproj-$m-generate-$t"
        fi
    done
done

for m in vision audio both; do
    good=$T/mm-tiny-q8_0.gguf
    [ $m = vision ] || good=$T/mm-$m-tiny-q8_0.gguf
    if msg=$(mk --mmproj $m --preset tiny --type q8_0 --seed 2 -o "$T/mm-$m-s2a.gguf") &&
       msg=$(mk --mmproj $m --preset tiny --type q8_0 --seed 2 -o "$T/mm-$m-s2b.gguf"); then
        if ! cmp -s "$T/mm-$m-s2a.gguf" "$T/mm-$m-s2b.gguf"; then fail "mmproj-$m-seed" "seed 2 not deterministic"
        elif cmp -s "$T/mm-$m-s2a.gguf" "$good"; then fail "mmproj-$m-seed" "seed 2 equals seed 1"
        else pass "mmproj-$m-seed"; fi
    else
        fail "mmproj-$m-seed" "$msg"
    fi

    for k in $KINDS; do
        out=$T/mm-broken-$k.gguf
        [ $m = vision ] || out=$T/mm-$m-broken-$k.gguf
        if ! msg=$(mk --mmproj $m --preset tiny --type q8_0 --seed 1 --broken "$k" -o "$out"); then
            fail "mmproj-$m-broken-$k-differs" "$msg"
        elif cmp -s "$out" "$good"; then
            fail "mmproj-$m-broken-$k-differs" "identical to the good file"
        else
            pass "mmproj-$m-broken-$k-differs"
        fi
    done
done

# usage errors: a tower that does not exist, a vocabulary for an mmproj
for label in video vocab; do
    case $label in
        vocab) args="--mmproj vision --vocab $T/tok1.json" ;;
        *) args="--mmproj $label" ;;
    esac
    # shellcheck disable=SC2086
    "$MK" $args --preset tiny --type f32 --seed 1 -o "$T/x.gguf" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc -eq 2 ] && [ -s "$T/err" ] && [ ! -s "$T/out" ] && [ ! -e "$T/x.gguf" ]; then
        pass "mmproj-usage-error-$label"
    else
        fail "mmproj-usage-error-$label" "exit $rc"
    fi
done

# ---------------------------------------------------------------- (c) inputs
# A small BPE tokenizer.json: ids 269..271 are a gap, added tokens are both
# special and not, merges as "a b" strings (tok1) or [a, b] pairs (tok2).
"$PY" - "$T" <<'EOF'
import json, sys
d = sys.argv[1]
vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<mask>": 4}
for b in range(256):
    vocab["<0x%02X>" % b] = 5 + b
for i, p in enumerate(["\u2581", "a", "b", "c", "ab", "\u2581a", "abc", "\u2581ab"]):
    vocab[p] = 261 + i
added = [{"id": i, "content": p, "special": True} for p, i in list(vocab.items())[:5]]
added += [{"id": 272, "content": "<|image>", "special": True},
          {"id": 273, "content": "<custom>", "special": False}]
pairs = [["a", "b"], ["\u2581", "a"], ["ab", "c"], ["\u2581", "ab"]]
for name, merges in (("tok1.json", [" ".join(p) for p in pairs]), ("tok2.json", pairs)):
    tj = {"version": "1.0", "added_tokens": added,
          "model": {"type": "BPE", "byte_fallback": True, "unk_token": "<unk>",
                    "vocab": vocab, "merges": merges}}
    with open("%s/%s" % (d, name), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
with open("%s/bad.json" % d, "w") as f:
    json.dump({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}, f)
EOF
for j in tok1 tok2; do
    if ! msg=$(mk --preset tiny --type q8_0 --seed 3 --vocab "$T/$j.json" -o "$T/$j.gguf"); then
        fail "vocab-$j-generate" "$msg"
    else
        pass "vocab-$j-generate"
    fi
done

"$MK" --preset tiny --type f32 --seed 1 --vocab "$T/bad.json" -o "$T/bad.gguf" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -eq 2 ] && [ -s "$T/err" ] && [ ! -s "$T/out" ]; then pass "vocab-bad-json"
else fail "vocab-bad-json" "exit $rc"; fi

# an unknown type (every block type and mix of issue 15 is tested in tests/test_quant_ref.py)
"$MK" --preset tiny --type q9_9 --seed 1 -o "$T/x.gguf" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -eq 2 ] && [ -s "$T/err" ] && [ ! -s "$T/out" ]; then pass "usage-error"
else fail "usage-error" "exit $rc"; fi

# ------------------------------------------- independent reader and layout checks
"$PY" - "$T" "$MK" >"$T/py.out" 2>&1 <<'EOF'
import struct, sys, traceback
import numpy as np

D = sys.argv[1]
MKMODEL = sys.argv[2]
A = "gemma-embedding2."


class Bad(Exception):
    pass


def read(path):
    """Parse a GGUF v3 file; raise Bad on any structural problem."""
    buf = open(path, "rb").read()
    p = [0]

    def take(n):
        if n < 0 or p[0] + n > len(buf):
            raise Bad("short read at %d" % p[0])
        b = buf[p[0]:p[0] + n]
        p[0] += n
        return b

    def u32():
        return struct.unpack("<I", take(4))[0]

    def u64():
        return struct.unpack("<Q", take(8))[0]

    def s():
        return take(u64()).decode("utf-8")

    fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?",
           10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return s()
        if t == 9:
            et, n = u32(), u64()
            if n > len(buf):
                raise Bad("array count %d" % n)
            if et == 8:
                return [s() for _ in range(n)]
            if et not in fmt:
                raise Bad("array elem type %d" % et)
            sz = struct.calcsize("<" + fmt[et])
            return ("arr", et, np.frombuffer(take(n * sz), "<" + fmt[et]))
        if t not in fmt:
            raise Bad("kv type %d" % t)
        return struct.unpack("<" + fmt[t], take(struct.calcsize("<" + fmt[t])))[0]

    if take(4) != b"GGUF":
        raise Bad("bad magic")
    if u32() != 3:
        raise Bad("version")
    nt, nkv = u64(), u64()
    if nt > len(buf) // 8 or nkv > len(buf) // 8:
        raise Bad("absurd counts %d %d" % (nt, nkv))
    kv, kt = {}, {}
    for _ in range(nkv):
        k = s()
        t = u32()
        if k in kv:
            raise Bad("duplicate key %s" % k)
        kt[k] = t if t != 9 else None
        v = value(t)
        if t == 9:
            if isinstance(v, list):
                kt[k] = (9, 8)
            else:
                kt[k] = (9, v[1])
                v = v[2]
        kv[k] = v
    align = kv.get("general.alignment", 32)
    info = []
    for _ in range(nt):
        name = s()
        nd = u32()
        if nd < 1 or nd > 4:
            raise Bad("n_dims %d" % nd)
        ne = tuple(u64() for _ in range(nd))
        info.append((name, ne, u32(), u64()))
    start = -(-p[0] // align) * align
    bsz = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34)}
    tens = {}
    end = 0
    for name, ne, t, off in sorted(info, key=lambda x: x[3]):
        if name in tens:
            raise Bad("duplicate tensor %s" % name)
        if t not in bsz:
            raise Bad("unknown ggml type %d (%s)" % (t, name))
        blk, sz = bsz[t]
        n = int(np.prod(ne))
        if ne[0] % blk:
            raise Bad("ne0 %% block (%s)" % name)
        nb = n // blk * sz
        if off % align or off < end:
            raise Bad("bad offset (%s)" % name)
        if start + off + nb > len(buf):
            raise Bad("tensor data past end of file (%s)" % name)
        end = off + nb
        tens[name] = dict(ne=ne, type=t, raw=buf[start + off:start + off + nb])
    want = start + -(-end // align) * align
    if len(buf) != want:
        raise Bad("file size %d, expected %d" % (len(buf), want))
    return dict(kv=kv, kt=kt, t=tens, order=[i[0] for i in info])


def values(t):
    raw, ty, ne = t["raw"], t["type"], t["ne"]
    if ty == 0:
        a = np.frombuffer(raw, "<f4").astype(np.float64)
    elif ty == 1:
        a = np.frombuffer(raw, "<f2").astype(np.float64)
    elif ty == 30:
        a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    else:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 34)
        a = (b[:, :2].copy().view("<f2").astype(np.float64) *
             b[:, 2:].copy().view(np.int8).astype(np.float64)).reshape(-1)
    return a.reshape(tuple(reversed(ne)))


U32, I32, F32T, BOOL, STR = 4, 5, 6, 7, 8
REQ = {
    "general.architecture": STR, "general.name": STR, "general.file_type": U32,
    "general.quantization_version": U32, "general.alignment": U32,
    A + "context_length": U32, A + "embedding_length": U32,
    A + "embedding_length_out": U32, A + "embedding_length_per_layer_input": U32,
    A + "block_count": U32, A + "feed_forward_length": U32,
    A + "attention.head_count": U32, A + "attention.head_count_kv": (9, I32),
    A + "attention.key_length": U32, A + "attention.value_length": U32,
    A + "attention.key_length_swa": U32, A + "attention.value_length_swa": U32,
    A + "attention.sliding_window": U32, A + "attention.sliding_window_pattern": (9, BOOL),
    A + "attention.shared_kv_layers": U32, A + "attention.layer_norm_rms_epsilon": F32T,
    A + "attention.causal": BOOL, A + "rope.freq_base": F32T, A + "rope.freq_base_swa": F32T,
    A + "rope.dimension_count": U32, A + "rope.dimension_count_swa": U32,
    A + "pooling_type": U32,
    "tokenizer.ggml.model": STR, "tokenizer.ggml.tokens": (9, STR),
    "tokenizer.ggml.scores": (9, F32T), "tokenizer.ggml.token_type": (9, I32),
    "tokenizer.ggml.merges": (9, STR), "tokenizer.ggml.bos_token_id": U32,
    "tokenizer.ggml.eos_token_id": U32, "tokenizer.ggml.unknown_token_id": U32,
    "tokenizer.ggml.padding_token_id": U32, "tokenizer.ggml.mask_token_id": U32,
    "tokenizer.ggml.add_bos_token": BOOL, "tokenizer.ggml.add_eos_token": BOOL,
    "tokenizer.ggml.add_space_prefix": BOOL, "tokenizer.ggml.add_sep_token": BOOL,
}
FT = {"f32": (0, 0), "f16": (1, 1), "bf16": (32, 30), "q8_0": (7, 8)}


def check_layout(m, ftype, tiny_dims=True):
    """Raise Bad unless m has the docs/gguf.md 3 layout."""
    kv, kt = m["kv"], m["kt"]
    for k, t in REQ.items():
        if k not in kv:
            raise Bad("missing key %s" % k)
        if kt[k] != t:
            raise Bad("key %s has type %r, want %r" % (k, kt[k], t))
    if kv["general.architecture"] != "gemma-embedding2" or kv["tokenizer.ggml.model"] != "gemma4":
        raise Bad("architecture / tokenizer model")
    file_type, mat = FT[ftype]
    if kv["general.file_type"] != file_type:
        raise Bad("file_type %d" % kv["general.file_type"])
    H, L = kv[A + "embedding_length"], kv[A + "block_count"]
    P, F = kv[A + "embedding_length_per_layer_input"], kv[A + "feed_forward_length"]
    E, nh = kv[A + "embedding_length_out"], kv[A + "attention.head_count"]
    hdf, hds = kv[A + "attention.key_length"], kv[A + "attention.key_length_swa"]
    nkv = list(kv[A + "attention.head_count_kv"])
    swa = [bool(x) for x in kv[A + "attention.sliding_window_pattern"]]
    if len(nkv) != L or len(swa) != L or swa[-1]:
        raise Bad("per-layer arrays / last layer not full")
    if kv[A + "rope.dimension_count"] != hdf or kv[A + "rope.dimension_count_swa"] != hds:
        raise Bad("rope dims")
    if kv[A + "attention.causal"] or kv[A + "pooling_type"] != 1:
        raise Bad("causal / pooling")
    if tiny_dims:
        got = (H, L, nh, hds, hdf, F, P, E, swa, nkv, kv[A + "attention.sliding_window"],
               kv[A + "context_length"])
        want = (64, 4, 4, 16, 32, 32, 32, 768, [True, False, True, False], [2, 1, 2, 1], 16, 8192)
        if got != want:
            raise Bad("tiny hyperparameters %r" % (got,))
    toks = kv["tokenizer.ggml.tokens"]
    V = len(toks)
    if len(kv["tokenizer.ggml.scores"]) != V or len(kv["tokenizer.ggml.token_type"]) != V:
        raise Bad("vocab array lengths")
    exp = {"token_embd.weight": ((H, V), mat),
           "per_layer_model_proj.weight": ((H, L * P), 30 if mat == 8 else mat),
           "per_layer_proj_norm.weight": ((P,), 0),
           "output_norm.weight": ((H,), 0), "output.weight": ((H, E), mat)}
    for i in range(L):
        hd = hds if swa[i] else hdf
        b = "blk.%d." % i
        for n, sh in (("attn_norm", (H,)), ("attn_q", (H, nh * hd)), ("attn_k", (H, nkv[i] * hd)),
                      ("attn_v", (H, nkv[i] * hd)), ("attn_q_norm", (hd,)), ("attn_k_norm", (hd,)),
                      ("attn_output", (nh * hd, H)), ("post_attention_norm", (H,)),
                      ("ffn_norm", (H,)), ("ffn_gate", (H, F)), ("ffn_up", (H, F)),
                      ("ffn_down", (F, H)), ("post_ffw_norm", (H,)), ("inp_gate", (H, P)),
                      ("proj", (P, H)), ("post_norm", (H,)), ("layer_output_scale", (1,))):
            exp[b + n + ".weight"] = (sh, mat if len(sh) == 2 else 0)
    for name, (sh, ty) in exp.items():
        if name not in m["t"]:
            raise Bad("missing tensor %s" % name)
        t = m["t"][name]
        if t["ne"] != sh:
            raise Bad("shape of %s is %r, want %r" % (name, t["ne"], sh))
        if t["type"] != ty:
            raise Bad("type of %s is %d, want %d" % (name, t["type"], ty))
    extra = set(m["t"]) - set(exp)
    if extra:
        raise Bad("unexpected tensors %s" % sorted(extra)[:3])
    for name in m["t"]:
        if not np.all(np.isfinite(values(m["t"][name]))):
            raise Bad("non-finite values in %s" % name)
    return kv


def check_vocab(kv, generated=True):
    toks = kv["tokenizer.ggml.tokens"]
    ty = list(kv["tokenizer.ggml.token_type"])
    idx = {p: i for i, p in enumerate(toks)}
    if len(idx) != len(toks):
        raise Bad("duplicate tokens")
    for key, piece, want in (("bos", "<bos>", 2), ("eos", "<eos>", 1), ("unknown", "<unk>", 3),
                             ("padding", "<pad>", 0), ("mask", "<mask>", 4)):
        i = kv["tokenizer.ggml.%s_token_id" % key]
        if i != want or toks[i] != piece:
            raise Bad("%s id %d" % (key, i))
    flags = [kv["tokenizer.ggml." + k] for k in
             ("add_bos_token", "add_eos_token", "add_space_prefix", "add_sep_token")]
    if flags != [True, True, False, False]:
        raise Bad("add_* flags %r" % flags)
    if ty[3] != 2 or any(ty[i] != 3 for i in (0, 1, 2, 4)):
        raise Bad("special token types")
    for mg in kv["tokenizer.ggml.merges"]:
        parts = mg.split(" ")
        if len(parts) != 2 or parts[0] not in idx or parts[1] not in idx or \
                parts[0] + parts[1] not in idx:
            raise Bad("bad merge %r" % mg)
    if not generated:
        return idx, ty
    for b in range(256):
        if ty[idx.get("<0x%02X>" % b, 0)] != 6:
            raise Bad("byte token %02X" % b)
    for p in ("<|image>", "<|audio>", "<|image|>", "<|audio|>", "<image|>", "<audio|>",
              "<|video|>", "<start_of_turn>", "<end_of_turn>"):
        if p not in idx or ty[idx[p]] != 3:
            raise Bad("control token %s" % p)
    if ty[idx.get("<unused0>", 0)] != 4:
        raise Bad("<unused0> not user-defined")
    for p in ["\u2581", "\n", "\t", "\u00e9", "\u65e5", "\u2581the", "ing", "\u2581a"] + \
            list("azAZ09!~"):
        if p not in idx or ty[idx[p]] != 1:
            raise Bad("missing normal piece %r" % p)
    if any(ord(c) >= 0x1F000 for p in toks for c in p):
        raise Bad("emoji in vocab")
    mg = kv["tokenizer.ggml.merges"]
    if not any("\n" in x for x in mg) or not any("\u2581\u2581" in x for x in mg):
        raise Bad("no merges with newline / double space")
    if not (800 <= len(toks) <= 1000 and 350 <= len(mg) <= 600):
        raise Bad("vocab %d / merges %d out of range" % (len(toks), len(mg)))
    return idx, ty


results = []


def check(name, fn):
    try:
        fn()
        results.append("PASS: " + name)
    except Bad as e:
        results.append("FAIL: %s: %s" % (name, e))
    except Exception as e:
        results.append("FAIL: %s: %s" % (name, traceback.format_exc().strip().splitlines()[-1]))


M = {}


def load_good(t):
    def f():
        M[t] = read("%s/tiny-%s.gguf" % (D, t))
        check_layout(M[t], t)
    return f


for t in ("f32", "q8_0", "bf16", "f16"):
    check("layout-tiny-%s" % t, load_good(t))


def vocab_tiny():
    if "f32" not in M:
        raise Bad("f32 file unreadable")
    kv = M["f32"]["kv"]
    check_vocab(kv)
    for t in M:
        for k in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges"):
            if M[t]["kv"][k] != kv[k]:
                raise Bad("vocab differs between types")


check("vocab-tiny", vocab_tiny)


def same_vectors():
    # 1-D tensors are F32 in every type and must be identical across types
    for t in M:
        for n, x in M[t]["t"].items():
            if len(x["ne"]) == 1 and x["raw"] != M["f32"]["t"][n]["raw"]:
                raise Bad("%s differs in %s" % (n, t))


check("values-1d-identical", same_vectors)


def q8_values():
    nq = 0
    for n, x in M["q8_0"]["t"].items():
        ref = values(M["f32"]["t"][n]).astype(np.float32)
        if x["type"] == 30:       # per_layer_model_proj stays BF16
            got = values(x)
            if np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-30)) > 2 ** -8:
                raise Bad("bf16 %s too far from f32" % n)
            continue
        if x["type"] != 8:
            continue
        nq += 1
        blocks = ref.reshape(-1, 32)
        b = np.frombuffer(x["raw"], np.uint8).reshape(-1, 34)
        d = b[:, :2].copy().view("<f2").reshape(-1)
        q = b[:, 2:].copy().view(np.int8).astype(np.int32)
        amax = np.abs(blocks).max(1)
        dref = (amax / np.float32(127)).astype(np.float32)
        if not np.array_equal(d, dref.astype(np.float16)):
            raise Bad("Q8_0 scales of %s" % n)
        # q must be the nearest integer to x/d (within fp32 rounding of 1/d)
        ratio = blocks.astype(np.float64) / np.where(dref == 0, 1, dref)[:, None]
        if np.max(np.abs(q - ratio)) > 0.5 + 1e-4 or np.max(np.abs(q)) > 127:
            raise Bad("Q8_0 quants of %s" % n)
    if nq == 0:
        raise Bad("no Q8_0 tensors")


check("values-q8_0-vs-f32", q8_values)


def bf16_values():
    for n, x in M["bf16"]["t"].items():
        if x["type"] != 30:
            continue
        u = np.frombuffer(M["f32"]["t"][n]["raw"], "<u4").astype(np.uint64)
        got = np.frombuffer(x["raw"], "<u2").astype(np.uint64)
        lo = u >> 16                      # truncation and the next bf16 up
        rem = u & 0xFFFF
        want = np.where((rem > 0x8000) | ((rem == 0x8000) & ((lo & 1) == 1)), lo + 1, lo)
        if not np.array_equal(got, want):
            raise Bad("BF16 rounding of %s" % n)


check("values-bf16-rounding", bf16_values)


def f16_values():
    for n, x in M["f16"]["t"].items():
        if x["type"] != 1:
            continue
        ref = values(M["f32"]["t"][n])
        got = values(x)
        ulp = np.spacing(np.abs(got).astype(np.float16)).astype(np.float64)
        if np.any(np.abs(got - ref) > 0.5 * ulp * (1 + 1e-9) + 2 ** -25):
            raise Bad("F16 rounding of %s" % n)


check("values-f16-rounding", f16_values)

# each broken kind must be rejected, for the intended reason
EXPECT = {"truncated": "past end of file", "magic": "bad magic",
          "missing": "missing tensor blk.1.ffn_up.weight",
          "shape": "shape of blk.0.attn_q.weight", "type": "unknown ggml type 250",
          "counts": "absurd counts", "counts-tensors": "absurd counts",
          "counts-kv": "absurd counts"}


def broken(path, layout, expect):
    """A check: the file at path must fail layout() with a message holding expect."""
    def f():
        try:
            layout(read(path), "q8_0")
        except Bad as e:
            if expect not in str(e):
                raise Bad("rejected for another reason: %s" % e)
            return
        raise Bad("accepted")
    return f


for k in EXPECT:
    check("broken-%s-rejected" % k, broken("%s/broken-%s.gguf" % (D, k), check_layout, EXPECT[k]))


# ------------------------------------------------------------ mmproj (docs/gguf.md 4)
V = "clip.vision."
AU = "clip.audio."
FLT_ARR = (9, F32T)
MM_REQ = {
    "general.architecture": STR, "general.type": STR, "general.name": STR,
    "general.file_type": U32, "general.quantization_version": U32, "general.alignment": U32,
    "clip.has_vision_encoder": BOOL, "clip.has_audio_encoder": BOOL,
}
MM_REQ_VISION = {
    V + "projector_type": STR, V + "projection_dim": U32, V + "image_size": U32,
    V + "patch_size": U32, V + "embedding_length": U32, V + "feed_forward_length": U32,
    V + "block_count": U32, V + "attention.head_count": U32,
    V + "attention.layer_norm_epsilon": F32T, V + "image_mean": FLT_ARR,
    V + "image_std": FLT_ARR,
}
# what Gemma4VisionAudioModel (llama.cpp convert_hf_to_gguf.py) writes for the audio tower
MM_REQ_AUDIO = {
    AU + "projector_type": STR, AU + "projection_dim": U32, AU + "embedding_length": U32,
    AU + "feed_forward_length": U32, AU + "block_count": U32, AU + "attention.head_count": U32,
    AU + "num_mel_bins": U32, AU + "attention.layer_norm_epsilon": F32T,
}
# 1-D: F32; matrices: --type; patch_embd F16 only for f16; position table F32
MM_PATCH_TYPE = {"f32": 0, "f16": 1, "bf16": 0, "q8_0": 0}
# the audio tower's clipped linears (each with .input_min/.input_max/.output_min/.output_max)
AUDIO_CLIPPED = ("ffn_up", "ffn_down", "ffn_up_1", "ffn_down_1", "attn_q", "attn_k", "attn_v",
                 "attn_out", "conv_pw1", "conv_pw2")
CLAMPS = ("input_min", "input_max", "output_min", "output_max")


def mm_expected(Dv, L, F, hd, P, proj, ftype):
    mat = FT[ftype][1]
    exp = {"v.patch_embd.weight": ((16, 16, 3, Dv), MM_PATCH_TYPE[ftype]),
           "v.position_embd.weight": ((Dv, P, 2), 0),
           "mm.input_projection.weight": ((Dv, proj), mat)}
    for i in range(L):
        b = "v.blk.%d." % i
        for n, sh in (("ln1", (Dv,)), ("attn_q", (Dv, Dv)), ("attn_k", (Dv, Dv)),
                      ("attn_v", (Dv, Dv)), ("attn_q_norm", (hd,)), ("attn_k_norm", (hd,)),
                      ("attn_out", (Dv, Dv)), ("attn_post_norm", (Dv,)), ("ln2", (Dv,)),
                      ("ffn_gate", (Dv, F)), ("ffn_up", (Dv, F)), ("ffn_down", (F, Dv)),
                      ("ffn_post_norm", (Dv,))):
            exp[b + n + ".weight"] = (sh, mat if len(sh) == 2 else 0)
    return exp


def mm_audio_expected(Da, L, F, nh, C0, C1, E, K, M, proj, ftype):
    """docs/gguf.md 4.3: the sub-sampling convs, a.input_projection and conv_dw
    are F32 in every type (the converter forces "conv" tensors to F32), 1-D tensors F32."""
    mat = FT[ftype][1]
    exp = {"a.conv1d.0.weight": ((3, 3, 1, C0), 0), "a.conv1d.0.norm.weight": ((C0,), 0),
           "a.conv1d.1.weight": ((3, 3, C0, C1), 0), "a.conv1d.1.norm.weight": ((C1,), 0),
           "a.input_projection.weight": ((C1 * (M // 4), Da), 0),
           "a.pre_encode.out.weight": ((Da, E), mat), "a.pre_encode.out.bias": ((E,), 0),
           "mm.a.input_projection.weight": ((E, proj), mat)}
    for i in range(L):
        b = "a.blk.%d." % i
        for n in ("ffn_norm", "ffn_post_norm", "ffn_norm_1", "ffn_post_norm_1", "attn_pre_norm",
                  "attn_post_norm", "conv_norm", "norm_conv", "ln2"):
            exp[b + n + ".weight"] = ((Da,), 0)
        exp[b + "per_dim_scale.weight"] = ((Da // nh,), 0)
        exp[b + "attn_k_rel.weight"] = ((Da, Da), mat)
        exp[b + "conv_dw.weight"] = ((K, Da), 0)
        for n, sh in (("ffn_up", (Da, F)), ("ffn_down", (F, Da)), ("ffn_up_1", (Da, F)),
                      ("ffn_down_1", (F, Da)), ("attn_q", (Da, Da)), ("attn_k", (Da, Da)),
                      ("attn_v", (Da, Da)), ("attn_out", (Da, Da)), ("conv_pw1", (Da, 2 * Da)),
                      ("conv_pw2", (Da, Da))):
            exp[b + n + ".weight"] = (sh, mat)
            for c in CLAMPS:
                exp[b + n + "." + c] = ((1,), 0)
    assert set(n.split(".")[3] for n in exp if n.endswith(".input_min")) == set(AUDIO_CLIPPED)
    return exp


def shape_or(m, name, axis, default=0):
    return m["t"][name]["ne"][axis] if name in m["t"] else default


def check_mm_layout(m, ftype):
    """Raise Bad unless m is a tiny mmproj with the docs/gguf.md 4 layout of the towers its
    clip.has_*_encoder keys announce."""
    kv, kt = m["kv"], m["kt"]
    for k, t in MM_REQ.items():
        if k not in kv:
            raise Bad("missing key %s" % k)
        if kt[k] != t:
            raise Bad("key %s has type %r, want %r" % (k, kt[k], t))
    vis, aud = kv["clip.has_vision_encoder"], kv["clip.has_audio_encoder"]
    if not (vis or aud):
        raise Bad("neither tower")
    req = dict(MM_REQ)
    req.update(MM_REQ_VISION if vis else {})
    req.update(MM_REQ_AUDIO if aud else {})
    for k, t in req.items():
        if k not in kv:
            raise Bad("missing key %s" % k)
        if kt[k] != t:
            raise Bad("key %s has type %r, want %r" % (k, kt[k], t))
    extra = sorted(k for k in kv if k not in req and k != "general.basename"
                   and k != "general.size_label")
    if extra:
        raise Bad("unexpected keys %s" % extra[:3])
    got = (kv["general.architecture"], kv["general.type"], kv["general.file_type"])
    if got != ("clip", "mmproj", FT[ftype][0]):
        raise Bad("general keys %r" % (got,))
    exp = {}
    if vis:
        if kv[V + "projector_type"] != "gemma4v":
            raise Bad("vision projector %r" % kv[V + "projector_type"])
        if list(kv[V + "image_mean"]) != [0, 0, 0] or list(kv[V + "image_std"]) != [1, 1, 1]:
            raise Bad("image_mean / image_std")
        Dv, L, F = kv[V + "embedding_length"], kv[V + "block_count"], kv[V + "feed_forward_length"]
        nh, proj = kv[V + "attention.head_count"], kv[V + "projection_dim"]
        if Dv % nh:
            raise Bad("width %d not a multiple of %d heads" % (Dv, nh))
        P = shape_or(m, "v.position_embd.weight", 1)
        tiny = (Dv, L, nh, F, proj, P, kv[V + "patch_size"], kv[V + "image_size"],
                abs(kv[V + "attention.layer_norm_epsilon"] - 1e-6) < 1e-12)
        if tiny != (64, 3, 4, 128, 64, 256, 16, 224, True):
            raise Bad("tiny hyperparameters %r" % (tiny,))
        exp.update(mm_expected(Dv, L, F, Dv // nh, P, proj, ftype))
    if aud:
        if kv[AU + "projector_type"] != "gemma4a":
            raise Bad("audio projector %r" % kv[AU + "projector_type"])
        Da, L, F = kv[AU + "embedding_length"], kv[AU + "block_count"], kv[AU + "feed_forward_length"]
        nh, proj, M = kv[AU + "attention.head_count"], kv[AU + "projection_dim"], kv[AU + "num_mel_bins"]
        if Da % nh:
            raise Bad("audio width %d not a multiple of %d heads" % (Da, nh))
        C0 = shape_or(m, "a.conv1d.0.weight", 3)
        C1 = shape_or(m, "a.conv1d.1.weight", 3)
        E = shape_or(m, "a.pre_encode.out.weight", 1)
        K = shape_or(m, "a.blk.0.conv_dw.weight", 0)
        tiny = (Da, L, nh, F, proj, M, C0, C1, E, K,
                abs(kv[AU + "attention.layer_norm_epsilon"] - 1e-5) < 1e-12)
        if tiny != (64, 2, 4, 128, 64, 128, 16, 4, 96, 5, True):
            raise Bad("tiny audio hyperparameters %r" % (tiny,))
        exp.update(mm_audio_expected(Da, L, F, nh, C0, C1, E, K, M, proj, ftype))
    for name, (sh, ty) in exp.items():
        if name not in m["t"]:
            raise Bad("missing tensor %s" % name)
        t = m["t"][name]
        if t["ne"] != sh:
            raise Bad("shape of %s is %r, want %r" % (name, t["ne"], sh))
        if t["type"] != ty:
            raise Bad("type of %s is %d, want %d" % (name, t["type"], ty))
    extra = set(m["t"]) - set(exp)
    if extra:
        raise Bad("unexpected tensors %s" % sorted(extra)[:3])
    for name in m["t"]:
        if not np.all(np.isfinite(values(m["t"][name]))):
            raise Bad("non-finite values in %s" % name)


MM = {}
MM_FILES = {"vision": "mm-tiny-%s", "audio": "mm-audio-tiny-%s", "both": "mm-both-tiny-%s"}
MM_TOWERS = {"vision": (True, False), "audio": (False, True), "both": (True, True)}


def load_mm(kind, t):
    def f():
        MM[kind, t] = read("%s/%s.gguf" % (D, MM_FILES[kind] % t))
        check_mm_layout(MM[kind, t], t)
        kv = MM[kind, t]["kv"]
        if (kv["clip.has_vision_encoder"], kv["clip.has_audio_encoder"]) != MM_TOWERS[kind]:
            raise Bad("has_vision / has_audio encoder keys")
    return f


for kind in ("vision", "audio", "both"):
    for t in ("f32", "q8_0", "bf16", "f16"):
        check("mmproj-%s-layout-tiny-%s" % (kind, t), load_mm(kind, t))


def mm_values(kind):
    def f():
        f32 = MM[kind, "f32"]["t"]
        for t in ("q8_0", "bf16", "f16"):
            for n, x in MM[kind, t]["t"].items():
                ref = values(f32[n])
                got = values(x)
                if x["type"] == 0 and x["raw"] != f32[n]["raw"]:
                    raise Bad("F32 %s differs in %s" % (n, t))
                rel = {1: 2 ** -11, 30: 2 ** -8, 8: None}.get(x["type"])
                if rel is not None:
                    if np.any(np.abs(got - ref) > rel * np.abs(ref) + 2 ** -24):
                        raise Bad("%s of %s too far from f32" % (t, n))
                elif x["type"] == 8:
                    amax = np.abs(ref.reshape(-1, 32)).max(1, keepdims=True)
                    if np.any(np.abs(got - ref).reshape(-1, 32) > amax / 127 * 0.6 + 1e-7):
                        raise Bad("Q8_0 of %s too far from f32" % n)
        prefix = "v" if kind == "vision" else "a"
        w = values(f32[prefix + ".blk.0.ffn_up.weight"])          # numpy (out, in)
        if not 0.8 < w.std() * np.sqrt(w.shape[1]) < 1.2:
            raise Bad("matrix scale %.3g, want ~1/sqrt(in)" % (w.std() * np.sqrt(w.shape[1])))
        if kind == "vision":
            pe = values(f32["v.position_embd.weight"])
            if pe.shape[0] != 2 or np.allclose(pe[0], pe[1]):
                raise Bad("x and y position tables equal")
            return
        # per_dim_scale is stored after softplus: positive, around softplus(0) = 0.69
        for n in f32:
            if n.endswith("per_dim_scale.weight"):
                p = values(f32[n])
                if not (np.all(p > 0) and 0.4 < p.mean() < 1.0 and p.std() > 0.05):
                    raise Bad("%s = %r does not look like softplus(raw)" % (n, p[:4]))
        # clamp bounds: min < 0 < max, a few times the unit activations; q, k and v differ
        for i in range(MM[kind, "f32"]["kv"][AU + "block_count"]):
            seen = set()
            for lin in AUDIO_CLIPPED:
                b = "a.blk.%d.%s." % (i, lin)
                lo_in, hi_in, lo_out, hi_out = (float(values(f32[b + c])[0]) for c in CLAMPS)
                if not (-6 < lo_in < -1 < 1 < hi_in < 6 and -6 < lo_out < -1 < 1 < hi_out < 6):
                    raise Bad("clamp bounds of %s: %r" % (b, (lo_in, hi_in, lo_out, hi_out)))
                seen.add((lo_in, hi_in))
            if len(seen) != len(AUDIO_CLIPPED):
                raise Bad("block %d: two clipped linears share their input bounds" % i)
    return f


for kind in ("vision", "audio"):
    check("mmproj-%s-values-across-types" % kind, mm_values(kind))


def mm_both_is_union():
    # a combined file is the vision file's tensors then the audio file's, byte for byte,
    # and the union of their metadata
    for t in ("f32", "q8_0", "bf16", "f16"):
        v, a, b = MM["vision", t], MM["audio", t], MM["both", t]
        if b["order"] != v["order"] + a["order"]:
            raise Bad("%s: tensor order / names differ" % t)
        for part in (v, a):
            for n in part["order"]:
                if b["t"][n]["raw"] != part["t"][n]["raw"] or b["t"][n]["ne"] != part["t"][n]["ne"]:
                    raise Bad("%s: %s differs" % (t, n))
            for k, x in part["kv"].items():
                if k.startswith(("clip.vision.", "clip.audio.", "general.")) and \
                        not np.array_equal(b["kv"][k], x):
                    raise Bad("%s: key %s differs" % (t, k))


check("mmproj-both-is-vision-plus-audio", mm_both_is_union)


def mm_text_match():
    # the projection width is the text model's hidden size
    H = M["f32"]["kv"][A + "embedding_length"]
    kv = MM["both", "f32"]["kv"]
    if kv[V + "projection_dim"] != H or kv[AU + "projection_dim"] != H:
        raise Bad("projection_dim != text embedding_length")


check("mmproj-projection-is-text-hidden", mm_text_match)

# the tensor --broken damages: the file's first tower (vision for "both")
MM_EXPECT = {"truncated": "past end of file", "magic": "bad magic",
             "missing": "missing tensor %s.blk.1.ffn_up.weight",
             "shape": "shape of %s.blk.0.attn_q.weight", "type": "unknown ggml type 250",
             "counts": "absurd counts", "counts-tensors": "absurd counts",
             "counts-kv": "absurd counts"}


for kind in ("vision", "audio", "both"):
    for k in MM_EXPECT:
        path = "%s/mm-broken-%s.gguf" % (D, k) if kind == "vision" else \
            "%s/mm-%s-broken-%s.gguf" % (D, kind, k)
        want = MM_EXPECT[k] % "a" if "%s" in MM_EXPECT[k] and kind == "audio" else \
            MM_EXPECT[k].replace("%s", "v")
        check("mmproj-%s-broken-%s-rejected" % (kind, k), broken(path, check_mm_layout, want))


def load_mkmodel():
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("mkmodel_mod", MKMODEL)
    spec = importlib.util.spec_from_loader("mkmodel_mod", loader)
    mk = importlib.util.module_from_spec(spec)
    loader.exec_module(mk)
    return mk


def mm_real_plan():
    # the real preset's plans (not written: 670 MB + 1.2 GB in f32): docs/gguf.md 4 shapes and
    # docs/model.md 9's parameter counts, vision 167,757,824 (tower + embed_vision) and audio
    # 305,611,520 (tower with its 480 clamp scalars + embed_audio)
    mk = load_mkmodel()
    for ftype in ("q8_0", "f16"):
        got = {}
        for kind, exp, count in (
                ("vision", mm_expected(768, 16, 3072, 64, 10240, 512, ftype), 167757824),
                ("audio", mm_audio_expected(1024, 12, 4096, 8, 128, 32, 1536, 5, 128, 512, ftype),
                 305611520)):
            plan = mk.mmproj_plan("real", mk.MMPROJ_KINDS[kind], FT[ftype][1], 1)
            got[kind] = [(n, (tuple(ne), t)) for n, ne, t, _ in plan]
            if dict(got[kind]) != exp:
                diff = sorted(set(got[kind]) ^ set(exp.items()))
                raise Bad("real %s plan differs: %s" % (kind, diff[:3]))
            total = sum(int(np.prod(ne)) for ne, _ in exp.values())
            if total != count:
                raise Bad("real %s parameters %d, want %d" % (kind, total, count))
        scalars = sum(1 for n, _ in got["audio"] if n.endswith(CLAMPS))
        if scalars != 480:
            raise Bad("real audio tower: %d clamp scalars, want 480" % scalars)
        both = mk.mmproj_plan("real", mk.MMPROJ_KINDS["both"], FT[ftype][1], 1)
        if [(n, (tuple(ne), t)) for n, ne, t, _ in both] != got["vision"] + got["audio"]:
            raise Bad("real combined plan is not vision + audio")
    if mk.VISION_PRESETS["tiny"]["P"] < 160:
        raise Bad("tiny position table too short for a 16:9 image at budget 1120")


check("mmproj-real-preset-shapes", mm_real_plan)


def vocab_json(name):
    def f():
        m = read("%s/%s.gguf" % (D, name))
        kv = m["kv"]
        toks = kv["tokenizer.ggml.tokens"]
        if len(toks) != 274 or m["t"]["token_embd.weight"]["ne"] != (64, 274):
            raise Bad("vocab size %d" % len(toks))
        check_layout(m, "q8_0")
        idx, ty = check_vocab(kv, generated=False)
        want = {0: ("<pad>", 3), 3: ("<unk>", 2), 5: ("<0x00>", 6), 260: ("<0xFF>", 6),
                261: ("\u2581", 1), 268: ("\u2581ab", 1), 272: ("<|image>", 3),
                273: ("<custom>", 4)}
        for i, (p, t) in want.items():
            if toks[i] != p or ty[i] != t:
                raise Bad("id %d is %r type %d" % (i, toks[i], ty[i]))
        gaps = toks[269:272]
        if len(set(gaps)) != 3 or any(not g.startswith("<unused_gap") or ty[269 + j] != 3
                                      for j, g in enumerate(gaps)):
            raise Bad("gap fill %r" % gaps)
        if kv["tokenizer.ggml.merges"] != ["a b", "\u2581 a", "ab c", "\u2581 ab"]:
            raise Bad("merges %r" % kv["tokenizer.ggml.merges"])
    return f


check("vocab-json-strings", vocab_json("tok1"))
check("vocab-json-pairs", vocab_json("tok2"))


def json_weights_same():
    a, b = read(D + "/tok1.gguf"), read(D + "/tok2.gguf")
    if [a["t"][n]["raw"] for n in a["order"]] != [b["t"][n]["raw"] for n in b["order"]]:
        raise Bad("string and pair merges give different weights")


check("vocab-json-same-weights", json_weights_same)
print("\n".join(results))
EOF
cat "$T/py.out"
npass=$((npass + $(grep -c '^PASS: ' "$T/py.out")))
nfail=$((nfail + $(grep -c '^FAIL: ' "$T/py.out")))
if ! grep -q '^PASS: vocab-json-same-weights\|^FAIL: vocab-json-same-weights' "$T/py.out"; then
    fail "python-checks" "checker did not finish"
fi

echo "# test_mkmodel: $npass passed, $nfail failed"
[ "$nfail" -eq 0 ]
