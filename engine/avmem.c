/* avmem.c - FFmpeg's libavformat over a file held in memory, shared by audio_decode.c and
 * video_decode.c (see avmem.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "avmem.h"

struct ge_av_api ge_av;

static _Thread_local char av_last[200]; /* FFmpeg's last error line on this thread */

static void quiet(void *avcl, int level, const char *fmt, va_list vl)
{
    (void)avcl;
    if (level > AV_LOG_ERROR)
        return;
    vsnprintf(av_last, sizeof av_last, fmt, vl);
    size_t k = strlen(av_last);
    while (k && (av_last[k - 1] == '\n' || av_last[k - 1] == '\r'))
        av_last[--k] = 0;
}

#define STR_(x) #x
#define STR(x) STR_(x)
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[300]; /* empty once loaded */

static void setup(void)
{
    /* avformat first: it loads the others it was linked against, the same files */
    static const struct {
        const char *lib, *soname;
    } libs[] = {{"avformat", "libavformat.so." STR(LIBAVFORMAT_VERSION_MAJOR)},
                {"avcodec", "libavcodec.so." STR(LIBAVCODEC_VERSION_MAJOR)},
                {"avutil", "libavutil.so." STR(LIBAVUTIL_VERSION_MAJOR)},
                {"swscale", "libswscale.so." STR(LIBSWSCALE_VERSION_MAJOR)}};
    void *h[sizeof libs / sizeof libs[0]];
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        if (!(h[i] = dlopen(libs[i].soname, RTLD_NOW | RTLD_LOCAL))) {
            const char *e = dlerror();
            snprintf(load_error, sizeof load_error, "%s", e ? e : libs[i].soname);
            return;
        }
    /* the table's members in order: every one a function pointer, so slot k of the struct
     * is the k-th name's (the names stringised before the redirections expand them) */
#define GE_AV_NAME(l, f) {#l, #f},
    static const struct {
        const char *lib, *name;
    } fns[] = {GE_AV_FUNCS(GE_AV_NAME)};
#undef GE_AV_NAME
    _Static_assert(sizeof fns / sizeof fns[0] * sizeof(void *) == sizeof ge_av,
                   "one pointer per name");
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
        void *sym = NULL;
        for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
            if (!strcmp(libs[i].lib, fns[k].lib))
                sym = dlsym(h[i], fns[k].name);
        if (!sym) {
            snprintf(load_error, sizeof load_error, "lib%s has no %s", fns[k].lib,
                     fns[k].name);
            return;
        }
        memcpy((char *)&ge_av + k * sizeof sym, &sym, sizeof sym);
    }
    av_log_set_callback(quiet);
}

ge_status ge_av_quiet(const char *what, ge_err *err)
{
    pthread_once(&once, setup);
    if (load_error[0])
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: FFmpeg's libraries could not be loaded "
                       "(%s)", what, load_error);
    av_last[0] = 0;
    return GE_OK;
}

const AVInputFormat *ge_av_probe(const uint8_t *p, size_t len, int *score)
{
    /* the probe wants zeroed padding after the data */
    size_t np = len < ((size_t)1 << 20) ? len : (size_t)1 << 20;
    *score = 0;
    uint8_t *pb = av_mallocz(np + AVPROBE_PADDING_SIZE);
    if (!pb)
        return NULL;
    memcpy(pb, p, np);
    AVProbeData pd = {.filename = "", .buf = pb, .buf_size = (int)np};
    const AVInputFormat *f = av_probe_input_format3(&pd, 1, score);
    av_free(pb);
    return f;
}

static int mem_read(void *u, uint8_t *buf, int size)
{
    ge_av_input *m = u;
    size_t k = m->n - m->at;
    if (k == 0)
        return AVERROR_EOF;
    if (size >= 0 && (size_t)size < k)
        k = (size_t)size;
    memcpy(buf, m->p + m->at, k);
    m->at += k;
    return (int)k;
}

static int64_t mem_seek(void *u, int64_t off, int whence)
{
    ge_av_input *m = u;
    if (whence & AVSEEK_SIZE)
        return (int64_t)m->n;
    whence &= ~AVSEEK_FORCE;
    int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (int64_t)m->at : (int64_t)m->n;
    if ((whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) || off < -base ||
        off > (int64_t)m->n - base) /* 0 <= base <= n: neither side overflows */
        return AVERROR(EINVAL);
    m->at = (size_t)(base + off);
    return (int64_t)m->at;
}

/* never let a demuxer open another file or URL */
static int no_open(AVFormatContext *s, AVIOContext **pb, const char *url, int flags,
                   AVDictionary **options)
{
    (void)s, (void)pb, (void)url, (void)flags, (void)options;
    return AVERROR(EPERM);
}

int ge_av_open(ge_av_input *in, const uint8_t *p, size_t len, const AVInputFormat *ifmt)
{
    memset(in, 0, sizeof *in);
    in->p = p;
    in->n = len;
    const int iosz = 1 << 16;
    uint8_t *iobuf = av_malloc(iosz);
    in->io = iobuf ? avio_alloc_context(iobuf, iosz, 0, in, mem_read, NULL, mem_seek) : NULL;
    if (!in->io) {
        av_free(iobuf);
        return AVERROR(ENOMEM);
    }
    AVFormatContext *fc = avformat_alloc_context();
    if (!fc) {
        ge_av_close(in);
        return AVERROR(ENOMEM);
    }
    fc->pb = in->io;
    fc->flags |= AVFMT_FLAG_CUSTOM_IO;
    fc->io_open = no_open;
    int r = avformat_open_input(&fc, NULL, ifmt, NULL); /* frees fc on failure */
    if (r < 0) {
        ge_av_close(in);
        return r;
    }
    in->fc = fc;
    return 0;
}

void ge_av_close(ge_av_input *in)
{
    avformat_close_input(&in->fc);
    if (in->io) {
        av_freep(&in->io->buffer);
        avio_context_free(&in->io);
    }
}

const char *ge_av_why(char *buf, size_t n, int ret)
{
    char e[AV_ERROR_MAX_STRING_SIZE];
    av_strerror(ret, e, sizeof e);
    if (av_last[0])
        snprintf(buf, n, "%s; FFmpeg: %s", e, av_last);
    else
        snprintf(buf, n, "%s", e);
    return buf;
}

ge_status ge_media_streams(const void *bytes, size_t len, int *video, int *audio, ge_err *err)
{
    *video = *audio = 0;
    if (ge_av_quiet("media", err))
        return err->code;
    int score = 0;
    const AVInputFormat *f = ge_av_probe(bytes, len, &score);
    ge_av_input in;
    int r = f ? ge_av_open(&in, bytes, len, f) : AVERROR_INVALIDDATA;
    if (r < 0) {
        char why[300];
        return ge_fail(err, r == AVERROR(ENOMEM) ? GE_E_NOMEM : GE_E_FORMAT, "%s: corrupt or "
                       "truncated header (%s)", f ? f->name : "media",
                       ge_av_why(why, sizeof why, r));
    }
    for (unsigned i = 0; i < in.fc->nb_streams; i++) {
        const AVStream *s = in.fc->streams[i];
        if (s->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
            !(s->disposition & AV_DISPOSITION_ATTACHED_PIC))
            ++*video;
        else if (s->codecpar->codec_type == AVMEDIA_TYPE_AUDIO)
            ++*audio;
    }
    ge_av_close(&in);
    return GE_OK;
}
