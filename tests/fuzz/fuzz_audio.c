/* fuzz_audio.c - libFuzzer target: engine/audio_decode.c (libsndfile, libmpg123, FFmpeg and
 * libsoxr behind it) and the front end on what it decodes, on arbitrary bytes.
 *
 *  - ge_audio_decode (cut at 2 s to keep runs fast) either fails with a message and no
 *    samples, or gives 1..32000 finite samples, the format and codec named;
 *  - ge_audio_features on them (both semantics) gives finite values, ge_audio_frames of them.
 * Seeds: tests/fuzz/corpus/audio (tiny WAV, AIFF, FLAC, Ogg Vorbis, MP3, M4A, WebM). Known
 * leaks inside libsndfile are suppressed by tests/lsan.supp. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ge.h"

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_audio: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    ge_audio_limits lim = {2.0};
    ge_audio a;
    ge_err e = {0};
    if (ge_audio_decode(data, n, &lim, &a, &e) != GE_OK) {
        if (!e.msg[0] || a.pcm || a.n)
            fail("an error without a message, or with samples");
        return 0;
    }
    if (a.n < 1 || a.n > 32000 || !a.pcm || !a.format || !a.codec)
        fail("a decode without samples, over the 2 s cut, or unnamed");
    for (int64_t i = 0; i < a.n; i++)
        if (!isfinite(a.pcm[i]))
            fail("a non-finite sample");
    for (int sem = 0; sem <= 1; sem++) {
        int64_t frames = ge_audio_frames(a.n, (ge_semantics)sem, NULL);
        float *f = malloc(sizeof *f * (size_t)(frames ? frames : 1) * GE_AUDIO_MEL);
        if (!f || ge_audio_features(a.pcm, a.n, (ge_semantics)sem, f, NULL, &e))
            fail("the front end failed");
        for (int64_t i = 0; i < frames * GE_AUDIO_MEL; i++)
            if (!isfinite(f[i]))
                fail("a non-finite feature");
        free(f);
    }
    ge_audio_free(&a);
    return 0;
}
