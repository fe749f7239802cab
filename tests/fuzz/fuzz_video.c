/* fuzz_video.c - libFuzzer target: engine/video_decode.c (FFmpeg's demuxers and decoders,
 * libswscale and our resize behind it) on arbitrary bytes.
 *
 * ge_video_decode at 2 fps, at most 4 frames, 70 tokens either fails with a message and a
 * zeroed ge_video, or gives 1..4 frames of a 48-multiple size whose token count is the plan's,
 * indices non-decreasing inside the stream, timestamps index / fps, format and codec named.
 * Seeds: tests/fuzz/corpus/video (tiny MP4 h264, WebM VP8, AVI mpeg4, MKV h264). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ge.h"

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_video: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    static const ge_video zero;
    ge_video_limits lim = {.fps = 2, .max_frames = 4, .tokens = 70};
    ge_video v;
    ge_err e = {0};
    if (ge_video_decode(data, n, &lim, &v, &e) != GE_OK) {
        if (!e.msg[0] || memcmp(&v, &zero, sizeof v))
            fail("an error without a message, or with output");
        return 0;
    }
    if (v.n < 1 || v.n > 4 || !v.rgb || !v.index || !v.seconds || !v.format || !v.codec)
        fail("a decode without frames, over the cap, or unnamed");
    if (v.th < 48 || v.tw < 48 || v.th % 48 || v.tw % 48 || v.n_soft != (v.th / 48) * (v.tw / 48))
        fail("a frame size or token count that is not the plan's");
    if (!(v.duration > 0) || !(v.fps > 0) || v.frames < 1)
        fail("bad metadata");
    for (int k = 0; k < v.n; k++) {
        if (v.index[k] < 0 || v.index[k] >= v.frames || (k && v.index[k] < v.index[k - 1]))
            fail("an index outside the stream or out of order");
        if (v.seconds[k] != (double)v.index[k] / v.fps)
            fail("a timestamp that is not index / fps");
    }
    volatile uint8_t sink = 0; /* every byte of the frames was written (ASan/MSan would see) */
    for (size_t i = 0; i < (size_t)v.n * v.th * v.tw * 3; i += 4099)
        sink ^= v.rgb[i];
    (void)sink;
    ge_video_free(&v);
    return 0;
}
