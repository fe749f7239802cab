#!/usr/bin/env bash
# No AVX instruction outside the kernel tier files: every other object must run on baseline
# x86-64 (SSE2), so the default build runs anywhere and picks the tier at run time.
set -u
BUILD=${BUILD:-build/rel}
case "$(uname -m)" in x86_64) ;; *) echo "PASS: not x86-64, nothing to check"; exit 0 ;; esac
command -v objdump >/dev/null || { echo "FAIL: objdump not found (binutils)"; exit 1; }
n=0
for o in $(find "$BUILD/engine" "$BUILD/cli" "$BUILD/kernels" -name '*.o' | sort); do
    case "$o" in *_avx2.o|*_avxvnni.o|*_evex256.o|*_avx512.o) continue ;; esac
    n=$((n + 1))
    # AT&T syntax: VEX/EVEX instructions are the mnemonics starting with 'v' (verr/verw
    # aside), plus anything naming ymm/zmm or opmask registers
    bad=$(objdump -d --no-show-raw-insn "$o" | awk -F'\t' 'NF >= 2 { print $2 }' |
          grep -E '^v[a-z]|%[yz]mm|%k[0-7]' | grep -vE '^ver[rw]' | sort -u | head -5)
    if [ -z "$bad" ]; then
        echo "PASS: baseline ISA only: ${o#$BUILD/}"
    else
        echo "FAIL: baseline ISA only: ${o#$BUILD/}: $(echo "$bad" | tr '\n' ' ')"
    fi
done
[ "$n" -gt 0 ] || echo "FAIL: no objects found under $BUILD"
# and the tier objects do use their instructions (the check above can fail)
t=$(find "$BUILD/kernels" -name '*_avx512.o' | head -1)
if [ -n "$t" ] && objdump -d "$t" | grep -q '%zmm'; then
    echo "PASS: tier objects do contain AVX-512 code (the check can see it)"
elif [ -n "$t" ]; then
    echo "FAIL: $t has no zmm instructions"
fi
