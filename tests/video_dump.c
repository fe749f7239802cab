/* video_dump.c - a helper for tests/test_video.sh (not a test itself: tests/run only runs
 * test_* binaries). It exposes engine/video_decode.c:
 *   video_dump decode FILE OUT.rgb [raw] [seek=auto|never|always] [fps=F] [frames=N]
 *                     [tokens=T]
 *       decode; write the frames [n][th][tw][3] (raw: at the source size, not resized); print
 *       "n th tw n_soft h w fps duration frames rotation format codec", then the sampled
 *       indices on one line and their timestamps (%.17g) on the next
 *   video_dump sample DURATION SRC_FPS FRAMES FPS MAX_FRAMES
 *       ge_video_sample; print the indices on one line
 *   video_dump bench FILE... [-r REPEAT]
 *       best-of-REPEAT (default 3) wall time of ge_video_decode at the defaults on each file
 *       (read into memory first); one line per file
 * Errors print "error: STATUS: MESSAGE" and exit 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump_util.h"
#include "ge.h"

static int decode(int argc, char **argv)
{
    ge_video_limits lim = {0};
    for (int a = 4; a < argc; a++) {
        const char *s = argv[a];
        if (!strcmp(s, "raw"))
            lim.raw = 1;
        else if (!strcmp(s, "seek=auto"))
            lim.seek = GE_VIDEO_SEEK_AUTO;
        else if (!strcmp(s, "seek=never"))
            lim.seek = GE_VIDEO_SEEK_NEVER;
        else if (!strcmp(s, "seek=always"))
            lim.seek = GE_VIDEO_SEEK_ALWAYS;
        else if (!strncmp(s, "fps=", 4))
            lim.fps = atof(s + 4);
        else if (!strncmp(s, "frames=", 7))
            lim.max_frames = atoi(s + 7);
        else if (!strncmp(s, "tokens=", 7))
            lim.tokens = atoi(s + 7);
        else {
            fprintf(stderr, "unknown option %s\n", s);
            return 2;
        }
    }
    size_t len;
    void *b = slurp(argv[2], &len);
    ge_video v;
    ge_err e = {0};
    ge_status st = ge_video_decode(b, len, &lim, &v, &e);
    free(b);
    if (st)
        return die(&e);
    spit(argv[3], v.rgb, (size_t)v.n * v.th * v.tw * 3);
    printf("%d %d %d %d %d %d %.17g %.17g %lld %d %s %s\n", v.n, v.th, v.tw, v.n_soft, v.h, v.w,
           v.fps, v.duration, (long long)v.frames, v.rotation, v.format, v.codec);
    for (int k = 0; k < v.n; k++)
        printf("%s%lld", k ? " " : "", (long long)v.index[k]);
    printf("\n");
    for (int k = 0; k < v.n; k++)
        printf("%s%.17g", k ? " " : "", v.seconds[k]);
    printf("\n");
    ge_video_free(&v);
    return 0;
}

static int bench(int argc, char **argv)
{
    int reps = 3;
    for (int a = 2; a < argc; a++)
        if (!strcmp(argv[a], "-r") && a + 1 < argc)
            reps = atoi(argv[a + 1]);
    for (int a = 2; a < argc; a++) {
        if (!strcmp(argv[a], "-r")) {
            a++;
            continue;
        }
        size_t len;
        void *b = slurp(argv[a], &len);
        double best = 1e30;
        ge_video v = {0};
        for (int r = 0; r < reps; r++) {
            ge_err e = {0};
            ge_video_free(&v);
            double t0 = now();
            if (ge_video_decode(b, len, NULL, &v, &e))
                return die(&e);
            double t = now() - t0;
            best = t < best ? t : best;
        }
        printf("%s: %.3f s to decode and resize %d frames (of %lld, %.1f s, %dx%d %s in %s) "
               "at the defaults\n", argv[a], best, v.n, (long long)v.frames, v.duration, v.w,
               v.h, v.codec, v.format);
        ge_video_free(&v);
        free(b);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "decode"))
        return decode(argc, argv);
    if (argc == 7 && !strcmp(argv[1], "sample")) {
        int64_t idx[GE_VIDEO_FRAMES_CAP];
        int mx = atoi(argv[6]);
        if (mx > GE_VIDEO_FRAMES_CAP)
            return 2;
        int n = ge_video_sample(atof(argv[2]), atof(argv[3]), atoll(argv[4]), atof(argv[5]), mx,
                                idx);
        for (int k = 0; k < n; k++)
            printf("%s%lld", k ? " " : "", (long long)idx[k]);
        printf(n < 0 ? "error\n" : "\n");
        return n < 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "bench"))
        return bench(argc, argv);
    fprintf(stderr, "usage: see the comment at the top of tests/video_dump.c\n");
    return 2;
}
