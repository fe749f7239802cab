#!/usr/bin/env bash
# Tier instructions live only in their tier files: every other object runs on the baseline of
# its architecture, so the default build runs anywhere and picks the tier at run time.
#   x86-64: no AVX (VEX/EVEX) instruction outside kernels/*_{avx2,avxvnni,evex256,avx512}.o;
#   arm64 (make ARCH=aarch64): no SDOT/UDOT outside *_dotprod.o and *_i8mm.o, no SMMLA/UMMLA/
#     USMMLA or BF16 instruction outside *_i8mm.o, no SVE anywhere.
# The checker is also shown to fail on a planted leak (an object compiled here with a tier's
# flags under a plain name), and to see the tier objects' own instructions.
set -u
BUILD=${BUILD:-build/rel}
objs=$(find "$BUILD/engine" "$BUILD/cli" "$BUILD/kernels" -name '*.o' 2>/dev/null | sort)
[ -n "$objs" ] || { echo "FAIL: no objects found under $BUILD"; exit 0; }
first=$(echo "$objs" | head -1)
case "$(od -An -j18 -N2 -tu2 "$first" | tr -d ' ')" in # ELF e_machine
62) arch=x86_64 OBJDUMP=objdump CC_ARCH=${CC:-cc} ;;
183) arch=aarch64 OBJDUMP=aarch64-linux-gnu-objdump CC_ARCH=aarch64-linux-gnu-gcc ;;
*) echo "PASS: objects of another architecture, nothing to check"; exit 0 ;;
esac
command -v "$OBJDUMP" >/dev/null || { echo "FAIL: $OBJDUMP not found (binutils)"; exit 1; }

# one instruction per line: mnemonic and operands (arm64 objdump puts a tab between them)
mnemonics() { "$OBJDUMP" -d --no-show-raw-insn "$1" | awk -F'\t' 'NF >= 2 { print $2 " " $3 }'; }

# The instructions of object $1 that its file name does not allow (at most 5), or nothing.
leaks()
{
    local o=$1 m
    m=$(mnemonics "$o")
    if [ $arch = x86_64 ]; then
        case "$o" in *_avx2.o | *_avxvnni.o | *_evex256.o | *_avx512.o) return ;; esac
        # AT&T syntax: VEX/EVEX instructions are the mnemonics starting with 'v' (verr/verw
        # aside), plus anything naming ymm/zmm or opmask registers
        echo "$m" | grep -E '^v[a-z]|%[yz]mm|%k[0-7]' | grep -vE '^ver[rw]'
    else
        local sve='[[:space:]]z[0-9]+\.|[[:space:]]p[0-9]+/[zm]' # SVE registers
        local mm='smmla|ummla|usmmla|bfdot|bfmmla|bfmlalb|bfmlalt|bfcvt|bfcvtn|bfcvtn2'
        local dot='sdot|udot|usdot|sudot' bad
        case "$o" in
        *_i8mm.o) bad=$sve ;;
        *_dotprod.o) bad="$sve|^($mm) " ;;
        *) bad="$sve|^($mm|$dot) " ;;
        esac
        echo "$m" | grep -E "$bad"
    fi | sort -u | head -5
}

for o in $objs; do
    bad=$(leaks "$o")
    if [ -z "$bad" ]; then
        echo "PASS: baseline ISA only: ${o#"$BUILD"/}"
    else
        echo "FAIL: baseline ISA only: ${o#"$BUILD"/}: $(echo "$bad" | tr '\n' ' ')"
    fi
done

# the tier objects do hold their instructions (so the check above can see them)
has()
{
    local o=$1 pat=$2
    if [ ! -f "$o" ]; then
        echo "FAIL: $o not built"
    elif mnemonics "$o" | grep -qE "$pat"; then
        echo "PASS: ${o#"$BUILD"/} holds its tier's instructions ($pat)"
    else
        echo "FAIL: ${o#"$BUILD"/} has no $pat"
    fi
}
# a planted leak: an object with tier instructions under a plain name fails the check
plant()
{
    local flags=$1 body=$2 dir
    dir=$(mktemp -d) || return
    printf '%s\n' "$body" >"$dir/leak.c"
    if ! "$CC_ARCH" -O2 "$flags" -c -o "$dir/leak.o" "$dir/leak.c" 2>"$dir/err"; then
        echo "FAIL: planted leak ($flags) did not compile: $(head -1 "$dir/err")"
    elif [ -n "$(leaks "$dir/leak.o")" ]; then
        echo "PASS: a planted leak ($flags) in a plain object is caught"
    else
        echo "FAIL: a planted leak ($flags) in a plain object went unseen"
    fi
    rm -rf "$dir"
}
if [ $arch = x86_64 ]; then
    has "$BUILD/kernels/q8_avx512.o" '%zmm'
    plant -mavx2 '#include <immintrin.h>
__m256i f(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }'
else
    has "$BUILD/kernels/q8_dotprod.o" '^sdot '
    has "$BUILD/kernels/q8_i8mm.o" '^smmla '
    plant -march=armv8.2-a+dotprod '#include <arm_neon.h>
int32x4_t f(int32x4_t a, int8x16_t b, int8x16_t c) { return vdotq_s32(a, b, c); }'
    plant -march=armv8.2-a+i8mm '#include <arm_neon.h>
int32x4_t f(int32x4_t a, int8x16_t b, int8x16_t c) { return vmmlaq_s32(a, b, c); }'
    # the macOS branch of the CPU detection (FEAT_* sysctls) compiles, against a stand-in for
    # <sys/sysctl.h> with Apple's prototype (no macOS SDK here)
    stub=$(mktemp -d) && mkdir -p "$stub/sys" &&
        echo 'int sysctlbyname(const char *, void *, unsigned long *, void *, unsigned long);' \
            >"$stub/sys/sysctl.h"
    if "$CC_ARCH" -std=c11 -Wall -Wextra -Werror -D__APPLE__ -I"$stub" -Ikernels -fsyntax-only \
        kernels/cpu.c 2>"$stub/err"; then
        echo "PASS: the macOS CPU detection compiles (sysctlbyname FEAT_*)"
    else
        echo "FAIL: the macOS CPU detection does not compile: $(head -3 "$stub/err" | tr '\n' ' ')"
    fi
    rm -rf "$stub"
    plant -march=armv8.2-a+sve '#include <arm_sve.h>
svfloat32_t f(svfloat32_t a, svfloat32_t b) { return svadd_f32_x(svptrue_b32(), a, b); }'
fi
