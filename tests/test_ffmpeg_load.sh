#!/usr/bin/env bash
# tests/test_ffmpeg_load.sh - FFmpeg's libraries are loaded on the first media decode, not at
# start (engine/avmem.c): a preloaded dlopen() records every libav*/libsw* library asked for
# and, when told to, refuses them.
#   - --version, --help and a text-only run never load them (ld.so's LD_DEBUG=files);
#   - a video record asks for them and is embedded;
#   - refused, the video record is one error record naming the library, the text record of
#     the same run is written, exit 1.
set -u
cd "$(dirname "$0")/.." || exit 1
BIN=${BIN:-./gemmaembed}
OUT=${OUT:-build/test-out}
. tests/lib.sh
d=$OUT/test_ffmpeg_load
rm -rf "$d" && mkdir -p "$d" && d=$(cd "$d" && pwd)
command -v ffmpeg >/dev/null || { fail "ffmpeg" "not installed (tools/install-deps)"; finish; exit; }

cat >"$d/shim.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
void *dlopen(const char *file, int mode)
{
    static void *(*real)(const char *, int);
    if (file && (!strncmp(file, "libav", 5) || !strncmp(file, "libsw", 5))) {
        const char *mark = getenv("SHIM_MARK");
        FILE *f = mark ? fopen(mark, "a") : NULL;
        if (f)
            fprintf(f, "%s\n", file), fclose(f);
        if (getenv("SHIM_REFUSE"))
            return NULL;
    }
    if (!real)
        real = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
    return real(file, mode);
}
EOF
if ! cc -shared -fPIC -o "$d/shim.so" "$d/shim.c" 2>"$d/cc.err"; then
    fail "the dlopen shim builds" "$(head -3 "$d/cc.err")"
    finish
    exit
fi
# (the sanitizer runtime wants to come first among the preloaded libraries)
export ASAN_OPTIONS="verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
shim() { LD_PRELOAD="$d/shim.so" SHIM_MARK="$d/mark" "$@"; }

printf '{"id":"t","text":"hello"}\n' >"$d/text.jsonl"
# ld.so names every object it loads, linked or dlopen()ed (LD_DEBUG=files)
loaded=
for args in --version --help "-m testdata/tiny-q8_0.gguf $d/text.jsonl"; do
    # shellcheck disable=SC2086
    LD_DEBUG=files "$BIN" $args >"$d/text.out" 2>"$d/text.err" || loaded="$loaded [$args: exit $?]"
    loaded="$loaded$(grep -oE 'file=lib(av|sw)[a-z]*\.so[.0-9]*' "$d/text.err" | sort -u | tr '\n' ' ')"
done
[ -z "$loaded" ] && [ "$(grep -c '"embedding"' "$d/text.out")" -eq 1 ] &&
    pass "--version, --help and a text run load no FFmpeg library" ||
    fail "--version, --help and a text run load no FFmpeg library" "$loaded"

ffmpeg -loglevel error -f lavfi -i testsrc=size=64x48:rate=4 -t 1 -pix_fmt yuv420p \
    "$d/clip.mp4" </dev/null || fail "ffmpeg makes a clip" "exit $?"
printf '{"id":"v","video":"%s"}\n{"id":"t","text":"hello"}\n' "$d/clip.mp4" >"$d/both.jsonl"
run=("$BIN" -m testdata/tiny-q8_0.gguf --mmproj testdata/tiny-mmproj-q8_0.gguf "$d/both.jsonl")
shim "${run[@]}" >"$d/ok.out" 2>"$d/ok.err"
rc=$?
[ "$rc" -eq 0 ] && [ "$(grep -c '"embedding"' "$d/ok.out")" -eq 2 ] &&
    grep -q '^libavformat\.so\.' "$d/mark" 2>/dev/null &&
    pass "a video record loads FFmpeg ($(head -1 "$d/mark" 2>/dev/null)) and is embedded" ||
    fail "a video record loads FFmpeg and is embedded" \
        "rc $rc, $(head -c 300 "$d/ok.err"), asked for: $(tr '\n' ' ' <"$d/mark" 2>/dev/null)"

SHIM_REFUSE=1 shim "${run[@]}" >"$d/no.out" 2>"$d/no.err"
rc=$?
verr=$(grep '"id": *"v"' "$d/no.out")
[ "$rc" -eq 1 ] && [ "$(grep -c '"embedding"' "$d/no.out")" -eq 1 ] &&
    grep -q '"id": *"t".*"embedding"' "$d/no.out" &&
    [[ $verr == *"FFmpeg's libraries could not be loaded"*libavformat.so* ]] &&
    pass "FFmpeg missing: the video is an error record naming the library, the text is written" ||
    fail "FFmpeg missing: the video is an error record naming the library, the text is written" \
        "rc $rc, video row: ${verr:0:300}"
finish
