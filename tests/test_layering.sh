#!/usr/bin/env bash
# The layers: cli/ sees only engine/ge.h, kernels/ nothing of engine/, and no circle among
# the engine's files (includes, and calls read off the objects); each rule is also shown to
# fail on a planted violation (tests/layering_check.py).
set -u
BUILD=${BUILD:-build/rel}
PYTHON=${PYTHON:-python3}
command -v nm >/dev/null || { echo "FAIL: nm not found (binutils)"; exit 1; }
exec "$PYTHON" "$(dirname "$0")/layering_check.py" --selftest "$(dirname "$0")/.." "$BUILD"
