/* test_video.c - engine/video_decode.c without a model:
 *   - ge_video_sample against HF's sample_frames (values from tools/ref/video.py, which
 *     tests/test_video.sh also compares on random inputs): 1 fps, other rates, the 32-frame
 *     uniform cap, the clamp to the last frame, one frame for short clips, bad arguments;
 *   - the limits: defaults, bad fps / frame cap / token budget / seek mode are GE_E_USAGE;
 *   - small clips made with ffmpeg (in OUT): the three seek modes give the same bytes, the
 *     resize is ge_image_resize of the raw frame at ge_image_plan's size, duplicated indices
 *     repeat a frame;
 *   - two threads decoding at once get what one thread gets (thread safety);
 *   - hostile input: zero length, text, random bytes, every prefix of an MP4 and a WebM, byte
 *     flips: a clean error with a message and a zeroed ge_video, or a video, never a crash
 *     (run under `make SAN=1` too), and nothing at all written to stderr.
 * tests/test_video.sh compares the frames with the ffmpeg command's, the metadata with
 * ffprobe's packets, and covers the containers, codecs and the error cases made with ffmpeg. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ge.h"
#include "rng.h"

static const char *out_dir = "build/test-out";

typedef struct {
    uint8_t *p;
    size_t n;
} buf;

static buf readfile(const char *path)
{
    buf b = {0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return b;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b.p = malloc(n > 0 ? (size_t)n : 1);
    b.n = b.p && n > 0 ? fread(b.p, 1, (size_t)n, f) : 0;
    fclose(f);
    return b;
}

static int same(const int64_t *a, const int64_t *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

static void test_sample(void)
{
    int64_t idx[GE_VIDEO_FRAMES_CAP];
    /* (duration, src fps, frames, fps, max frames) -> indices, from tools/ref/video.py */
    static const int64_t a[] = {0, 25, 50};
    int n = ge_video_sample(3.0, 25, 75, 1, 32, idx);
    check(n == 3 && same(idx, a, 3), "3 s at 25 fps, 1 fps: frames 0, 25, 50", "n %d", n);
    static const int64_t b[] = {0, 29, 59};
    n = ge_video_sample(3.003, 90 / 3.003, 90, 1, 32, idx);
    check(n == 3 && same(idx, b, 3), "3 s at 29.97 fps: frames 0, 29, 59", "n %d", n);
    static const int64_t c[] = {0, 50, 100, 175, 225, 275, 350, 400, 475, 525, 575, 650, 700,
                                775, 825, 875, 950, 1000, 1050, 1125, 1175, 1250, 1300, 1350,
                                1425, 1475, 1550, 1600, 1650, 1725, 1775, 1850};
    n = ge_video_sample(75.0, 25, 1875, 1, 32, idx);
    check(n == 32 && same(idx, c, 32), "75 s at 25 fps: 32 of the 75 one-second frames, "
          "numpy.linspace's choice", "n %d", n);
    static const int64_t d[] = {0, 3476, 6953, 10429, 13906, 17382, 20859, 24335, 27812, 31288,
                                34765, 38271, 41748, 45224, 48701, 52177, 55654, 59130, 62607,
                                66083, 69560, 73066, 76543, 80019, 83496, 86973, 90449, 93926,
                                97402, 100879, 104355, 107862};
    n = ge_video_sample(3600.0, 30000.0 / 1001, 107892, 1, 32, idx);
    check(n == 32 && same(idx, d, 32), "an hour at 29.97 fps", "n %d", n);
    static const int64_t e[] = {0, 12, 25, 37, 50, 62, 75, 87, 99, 99, 99, 99, 99, 99, 99, 99,
                                99, 99, 99, 99};
    n = ge_video_sample(10.0, 25, 100, 2, 32, idx);
    check(n == 20 && same(idx, e, 20), "2 fps; indices past the last frame are clamped to it",
          "n %d", n);
    n = ge_video_sample(0.04, 25, 1, 1, 32, idx);
    check(n == 1 && idx[0] == 0, "a one-frame clip: frame 0", "n %d", n);
    n = ge_video_sample(0.5, 25, 12, 1, 32, idx);
    check(n == 1 && idx[0] == 0, "half a second: one frame (max(1, floor(D * fps)))", "n %d", n);
    n = ge_video_sample(75.0, 25, 1875, 1, 1, idx);
    check(n == 1 && idx[0] == 0, "a cap of one frame: frame 0 (linspace with one point)",
          "n %d", n);
    n = ge_video_sample(1e300, 25, 1000, 1, 4, idx);
    check(n == 4 && idx[0] == 0 && idx[3] == 999, "an absurd duration is capped, not overflowed",
          "n %d", n);
    int bad = ge_video_sample(1, 25, 0, 1, 32, idx) == -1 &&
              ge_video_sample(1, 0, 25, 1, 32, idx) == -1 &&
              ge_video_sample(1, 25, 25, 0, 32, idx) == -1 &&
              ge_video_sample(-1, 25, 25, 1, 32, idx) == -1 &&
              ge_video_sample(1.0 / 0.0, 25, 25, 1, 32, idx) == -1 &&
              ge_video_sample(1, 25, 25, 1, 0, idx) == -1;
    check(bad, "bad sampling arguments are -1", "one was accepted");
}

static ge_status decode(const buf *b, const ge_video_limits *lim, ge_video *v, ge_err *e)
{
    return ge_video_decode(b->p, b->n, lim, v, e);
}

static int is_zero(const ge_video *v)
{
    static const ge_video z;
    return !memcmp(v, &z, sizeof z);
}

static void test_limits(const buf *clip)
{
    ge_video v;
    ge_err e = {0};
    struct {
        ge_video_limits lim;
        const char *what;
    } bad[] = {
        {{.fps = -1}, "fps -1"},
        {{.fps = 5000}, "fps 5000"},
        {{.max_frames = -3}, "max frames -3"},
        {{.max_frames = GE_VIDEO_FRAMES_CAP + 1}, "max frames over the cap"},
        {{.tokens = 100}, "a token budget of 100"},
        {{.seek = 7}, "seek mode 7"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ge_status st = decode(clip, &bad[i].lim, &v, &e);
        check(st == GE_E_USAGE && e.msg[0] && is_zero(&v), bad[i].what, "status %s: %s",
              ge_status_name(st), e.msg);
    }
    ge_status st = decode(clip, NULL, &v, &e);
    check(st == GE_OK && v.n == 2 && v.th == 432 && v.tw == 672 && v.n_soft == 126,
          "NULL limits: 1 fps, 140 tokens (64x96 -> 432x672, 126 tokens)",
          "%s: %s; n %d, %dx%d, %d tokens", ge_status_name(st), e.msg, v.n, v.th, v.tw,
          v.n_soft);
    ge_video_free(&v);
    ge_video_free(&v);
    ge_video_free(NULL);
}

static void test_modes(const buf *clip)
{
    ge_err e = {0};
    ge_video v[3], raw;
    const char *names[] = {"auto", "never", "always"};
    ge_video_limits lim = {.fps = 5, .max_frames = 8}; /* 2 s at 5 fps: 10 -> 8 frames */
    int ok = 1;
    for (int m = 0; m < 3; m++) {
        lim.seek = m;
        ge_status st = decode(clip, &lim, &v[m], &e);
        ok &= check(st == GE_OK && v[m].n == 8, names[m], "%s: %s", ge_status_name(st), e.msg);
    }
    if (!ok)
        return;
    size_t bytes = (size_t)v[0].n * v[0].th * v[0].tw * 3;
    for (int m = 1; m < 3; m++)
        check(v[m].th == v[0].th && v[m].tw == v[0].tw &&
                  !memcmp(v[m].rgb, v[0].rgb, bytes) && same(v[m].index, v[0].index, v[0].n),
              m == 1 ? "sequential decoding gives the frames seeking gives (auto)"
                     : "seeking before every frame gives the same frames",
              "the frames differ");
    lim.seek = GE_VIDEO_SEEK_NEVER;
    lim.raw = 1;
    ge_status st = decode(clip, &lim, &raw, &e);
    if (check(st == GE_OK && raw.th == 64 && raw.tw == 96 && raw.n_soft == 0,
              "raw: frames at the source size", "%s: %s", ge_status_name(st), e.msg)) {
        size_t fs = (size_t)v[0].th * v[0].tw * 3;
        uint8_t *one = malloc(fs);
        int eq = 1;
        for (int k = 0; k < raw.n && one; k++) {
            ge_image_resize(raw.rgb + (size_t)k * 64 * 96 * 3, 64, 96, one, v[0].th, v[0].tw,
                            &e);
            eq &= !memcmp(one, v[0].rgb + k * fs, fs);
        }
        check(one && eq, "each frame is ge_image_resize of the raw frame", "a frame differs");
        free(one);
    }
    ge_video_free(&raw);
    /* 50 fps on a 25 fps clip: neighbouring samples fall on one frame */
    ge_video dup;
    lim = (ge_video_limits){.fps = 50, .max_frames = 100, .raw = 1};
    st = decode(clip, &lim, &dup, &e);
    int rep = 0, eq = 1;
    size_t fs = st ? 0 : (size_t)dup.th * dup.tw * 3;
    for (int k = 1; !st && k < dup.n; k++)
        if (dup.index[k] == dup.index[k - 1]) {
            rep++;
            eq &= !memcmp(dup.rgb + k * fs, dup.rgb + (k - 1) * fs, fs);
        }
    check(!st && rep > 0 && eq, "a repeated index repeats the frame", "%s: %s; %d repeats",
          ge_status_name(st), e.msg, rep);
    ge_video_free(&dup);
    for (int m = 0; m < 3; m++)
        ge_video_free(&v[m]);
}

typedef struct {
    const buf *clip;
    const ge_video *want;
    int ok;
} job;

static void *decode_thrice(void *arg)
{
    job *j = arg;
    ge_video_limits lim = {.fps = 5, .max_frames = 8};
    j->ok = 1;
    for (int r = 0; r < 3; r++) {
        ge_video v;
        ge_err e = {0};
        if (ge_video_decode(j->clip->p, j->clip->n, &lim, &v, &e)) {
            j->ok = 0;
            continue;
        }
        j->ok &= v.n == j->want->n && v.th == j->want->th && v.tw == j->want->tw &&
                 !memcmp(v.rgb, j->want->rgb, (size_t)v.n * v.th * v.tw * 3);
        ge_video_free(&v);
    }
    return NULL;
}

static void test_threads(const buf *a, const buf *b)
{
    ge_video want[2];
    ge_err e = {0};
    ge_video_limits lim = {.fps = 5, .max_frames = 8};
    if (ge_video_decode(a->p, a->n, &lim, &want[0], &e) ||
        ge_video_decode(b->p, b->n, &lim, &want[1], &e)) {
        check(false, "threads: the clips decode", "%s", e.msg);
        return;
    }
    job jobs[4] = {{a, &want[0], 0}, {b, &want[1], 0}, {a, &want[0], 0}, {b, &want[1], 0}};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, decode_thrice, &jobs[i]);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    check(jobs[0].ok && jobs[1].ok && jobs[2].ok && jobs[3].ok,
          "four threads decoding the MP4 and the WebM at once get one thread's frames",
          "a thread got other frames or an error");
    ge_video_free(&want[0]);
    ge_video_free(&want[1]);
}

static int clean_error(ge_status st, const ge_err *e, const ge_video *v)
{
    return st != GE_OK && st != GE_E_INTERNAL && e->msg[0] && is_zero(v);
}

static void test_hostile(const buf *mp4, const buf *webm)
{
    ge_video v;
    ge_err e = {0};
    ge_status st = ge_video_decode(NULL, 0, NULL, &v, &e);
    check(st == GE_E_FORMAT && strstr(e.msg, "empty") && is_zero(&v), "zero length: empty file",
          "%s: %s", ge_status_name(st), e.msg);
    const char *text = "this is not a video, only some text\n";
    st = ge_video_decode(text, strlen(text), NULL, &v, &e);
    check(st == GE_E_UNSUPPORTED && strstr(e.msg, "unsupported format") && is_zero(&v),
          "text: unsupported format", "%s: %s", ge_status_name(st), e.msg);
    uint8_t junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)rnd();
    st = ge_video_decode(junk, sizeof junk, NULL, &v, &e);
    check(clean_error(st, &e, &v), "random bytes: a clean error", "%s: %s", ge_status_name(st),
          e.msg);
    const buf *files[] = {mp4, webm};
    const char *names[] = {"mp4", "webm"};
    ge_video_limits lim = {.fps = 2, .max_frames = 4, .tokens = 70};
    for (int f = 0; f < 2; f++) {
        const buf *b = files[f];
        int bad = 0, ok = 0, errs = 0;
        char first[700] = "";
        size_t step = b->n / 61 + 1;
        for (size_t n = 1; n < b->n; n += step) {
            st = ge_video_decode(b->p, n, &lim, &v, &e);
            if (st == GE_OK) {
                ok++;
                ge_video_free(&v);
            } else if (clean_error(st, &e, &v)) {
                errs++;
            } else if (!bad++) {
                snprintf(first, sizeof first, "prefix %zu: %s: %s", n, ge_status_name(st),
                         e.msg);
            }
        }
        check(bad == 0 && errs > 0, names[f], "%s", first);
        printf("  every %zu-byte prefix of the %s: %d errors, %d decoded\n", step, names[f],
               errs, ok);
        bad = ok = errs = 0;
        uint8_t *c = malloc(b->n);
        for (int t = 0; t < 60 && c; t++) {
            memcpy(c, b->p, b->n);
            for (int k = 0; k < 8; k++)
                c[rnd() % b->n] ^= (uint8_t)(1 + rnd() % 255);
            st = ge_video_decode(c, b->n, &lim, &v, &e);
            if (st == GE_OK) {
                ok++;
                ge_video_free(&v);
            } else if (clean_error(st, &e, &v)) {
                errs++;
            } else if (!bad++) {
                snprintf(first, sizeof first, "flip %d: %s: %s", t, ge_status_name(st), e.msg);
            }
        }
        free(c);
        check(bad == 0, names[f], "%s", first);
        printf("  60 %s copies with 8 bytes flipped: %d errors, %d decoded\n", names[f], errs,
               ok);
    }
}

static buf make_clip(const char *name, const char *args)
{
    char path[600], cmd[1400];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    snprintf(cmd, sizeof cmd, "ffmpeg -nostdin -loglevel error -y -f lavfi -i "
             "testsrc2=d=2:s=96x64:r=25 %s '%s' 2>&1", args, path);
    buf b = {0};
    if (system(cmd) == 0)
        b = readfile(path);
    check(b.n > 0, name, "could not be made with: %s", cmd);
    return b;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        out_dir = argv[1];
    test_sample();
    buf mp4 = make_clip("test_video.mp4", "-c:v libx264 -g 8 -pix_fmt yuv420p");
    buf webm = make_clip("test_video.webm", "-c:v libvpx -g 8 -b:v 200k");
    /* the library must print nothing: stderr goes to a file that must stay empty */
    char errpath[600];
    snprintf(errpath, sizeof errpath, "%s/test_video.stderr", out_dir);
    fflush(stderr);
    int saved = dup(2), fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0)
        dup2(fd, 2);
    if (mp4.n && webm.n) {
        test_limits(&mp4);
        test_modes(&mp4);
        test_modes(&webm);
        test_threads(&mp4, &webm);
        test_hostile(&mp4, &webm);
    }
    fflush(stderr);
    if (fd >= 0) {
        dup2(saved, 2);
        close(fd);
    }
    buf err = readfile(errpath);
    check(fd >= 0 && err.n == 0, "nothing was written to stderr by the decoders",
          "%zu bytes, starting: %.200s", err.n, err.n ? (char *)err.p : "");
    free(err.p);
    free(mp4.p);
    free(webm.p);
    return check_done();
}
