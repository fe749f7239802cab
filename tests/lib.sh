# tests/lib.sh - the check helpers shared by the shell tests (sourced).
# Each check prints "PASS: name" or "FAIL: name: detail" (tests/run counts those lines);
# finish prints the script's totals and fails when any check failed.
npass=0 nfail=0
# under the sanitizers (make test SAN=1: tests/run exports SAN; or a BIN from build/san) the
# tests that embed thousands of records scale their inputs down: ASan runs them ~5-10x slower
SAN=${SAN:-0}
case ${BIN:-} in *build/san/*) SAN=1 ;; esac
pass() { echo "PASS: $1"; npass=$((npass + 1)); }
# a check this machine cannot run (tests/run lists it under the totals): NAME REASON
skip() { echo "SKIP: $1: $2"; }
fail() { echo "FAIL: $1: $2"; nfail=$((nfail + 1)); }
# py ARGS...: a Python check script on stdin (run by $PY in the current directory, its output
# kept in py.out); its PASS/FAIL lines are counted as the shell's
py() {
    "$PY" - "$@" >py.out 2>&1 || echo "FAIL: python check: exit $?" >>py.out
    local line
    while IFS= read -r line; do
        case $line in
        PASS:*) pass "${line#PASS: }" ;;
        FAIL:*) line=${line#FAIL: }; fail "${line%%: *}" "${line#*: }" ;;
        *) echo "$line" ;;
        esac
    done <py.out
}
# cpu_tiers: the kernel tiers $BIN runs on this CPU, slowest first (scalar ... the best)
cpu_tiers() {
    local t
    for t in scalar avx2 avxvnni avx512 neon dotprod i8mm; do
        "$BIN" --print-config --cpu-tier "$t" >/dev/null 2>&1 && echo "$t"
    done
}
finish() {
    echo "$(basename "$0" .sh): $npass passed, $nfail failed"
    [ "$nfail" -eq 0 ]
}
