/* video_decode.c - video files to the frames the vision tower sees (docs/model.md 7): the
 * reference's frame sampling, RGB conversion, and the image preprocessing at one size per
 * video.
 *
 * What the Hugging Face reference sees. transformers' video processors load a file with
 * load_video, whose default backend is torchcodec (PyAV, decord and OpenCV are fallbacks);
 * read_video_torchcodec opens a VideoDecoder(seek_mode="exact") and builds VideoMetadata
 * from it: total_num_frames = metadata.num_frames, fps = metadata.average_fps, duration =
 * metadata.duration_seconds. In "exact" mode torchcodec first demuxes every packet of the
 * stream (no decoding) and takes, from that scan:
 *   - frames: the number of packets;
 *   - begin = min(pts) * av_q2d(time_base), end = max(pts + duration) * av_q2d(time_base)
 *     (pts, or dts when a packet has none), duration D = end - begin;
 *   - fps F = frames / D;
 *   - frame i = the i-th entry of the packets sorted by pts, i.e. the i-th frame in
 *     presentation order, found by seeking to the keyframe before it and decoding forward.
 * We do the same scan and the same arithmetic in double, so D, F, the frame count and the
 * sampled indices are the reference's bit for bit (tools/ref/video.py computes them again
 * from ffprobe's packet list). The header values are not used: nb_frames is absent from
 * Matroska/WebM, avg_frame_rate and r_frame_rate are guesses for variable-rate streams, and
 * the container duration covers the longest stream (audio included). The other loaders differ
 * here (PyAV: stream.frames and average_rate from the header, D = frames / F, frames = 0 and
 * so one sampled frame for Matroska; decord: its own index, D = frames / avg fps); for a
 * constant-rate stream starting at 0 they all agree with this one.
 * Packets flagged AV_PKT_FLAG_DISCARD (before an MP4 edit list's start) are not frames.
 *
 * Sampling: ge_video_sample, HF's EmbeddingGemma2VideoProcessor.sample_frames (docs/model.md 7).
 * Timestamps: index / F (VideoMetadata.timestamps).
 *
 * Reaching the frames. Sequentially (GE_VIDEO_SEEK_NEVER): decode from the start and count,
 * frame i being the i-th frame the decoder outputs. Otherwise each output frame is named by
 * looking its timestamp up in the sorted pts of the scan, and when a keyframe lies between
 * the last decoded frame and the next wanted one (GE_VIDEO_SEEK_AUTO, the default; before
 * every wanted frame with GE_VIDEO_SEEK_ALWAYS) we seek: av_seek_frame(AVSEEK_FLAG_BACKWARD)
 * to that keyframe's pts (the MP4 demuxer compares seek targets with presentation times: its
 * dts would land a GOP early), flush the decoder and decode forward. Packets of frames that
 * are not wanted are decoded with AVDISCARD_NONREF, so frames that no frame refers to (most
 * B-frames) are skipped. When a lookup fails, or a seek landed after the wanted frame, the
 * whole decode starts again sequentially; the tests check that all ways give the same
 * bytes. The scan gives the keyframes (AV_PKT_FLAG_KEY) for free.
 *
 * RGB: libswscale, same size (no scaling: the resize is ours, ge_image_resize, the same as
 * images), SWS_BICUBIC with the frame's colour matrix and range set as the ffmpeg command's
 * auto-inserted scale filter sets them (in_color_matrix=auto, the frame's color_range), so our
 * RGB equals `ffmpeg -i F -pix_fmt rgb24 -f rawvideo` byte for byte (tests/test_video.sh);
 * swscale picks the same unscaled converter whatever the interpolation flag, which is why
 * torchcodec's and PyAV's RGB (SWS_BILINEAR) is the same.
 *
 * Rotation: a stream's display matrix (phone videos) is reported in ge_video.rotation (the
 * counterclockwise angle, as ffprobe prints it, in 0..359) and not applied: torchcodec, PyAV and decord hand the reference the frames as stored. (Images do
 * honour EXIF orientation, as PIL's exif_transpose in HF's load_image does.)
 *
 * Library code: nothing is printed (FFmpeg's log goes to avmem.c's quiet callback); decoders
 * run with one thread (the pipeline runs decoders on its own threads). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "avmem.h"
#include "ge.h"

#define MAX_PACKETS ((int64_t)1 << 26) /* frames in a stream: 18 days at 40 fps */

void ge_video_free(ge_video *v)
{
    if (!v)
        return;
    free(v->rgb);
    free(v->index);
    free(v->seconds);
    memset(v, 0, sizeof *v);
}

/* ---- sampling ------------------------------------------------------------------------------ */

int ge_video_sample(double duration, double src_fps, int64_t frames, double fps, int max_frames,
                    int64_t *idx)
{
    if (frames < 1 || !(src_fps > 0) || !isfinite(src_fps) || !(fps > 0) || !isfinite(fps) ||
        !(duration >= 0) || !isfinite(duration) || max_frames < 1 || !idx)
        return -1;
    double step = src_fps / fps; /* native frames per sampled frame */
    double nd = floor(duration * fps);
    if (!(nd < 0x1p53))
        nd = 0x1p53;
    int64_t n = nd < 1 ? 1 : (int64_t)nd; /* max(1, int(duration * fps)) */
    int m = n < max_frames ? (int)n : max_frames;
    /* numpy.linspace(0, n - 1, m, dtype=int): k * ((n - 1) / (m - 1)) in double, the last one
     * exactly n - 1, truncated */
    double lstep = m > 1 ? (double)(n - 1) / (double)(m - 1) : 0;
    for (int k = 0; k < m; k++) {
        int64_t i = k;
        if (n > max_frames)
            i = k == m - 1 && m > 1 ? n - 1 : (int64_t)((double)k * lstep);
        double x = (double)i * step;
        int64_t j = x < (double)frames ? (int64_t)x : frames - 1;
        idx[k] = j < frames - 1 ? j : frames - 1;
    }
    return m;
}

/* ---- the demuxer and decoder ---------------------------------------------------------------- */

/* The containers we accept (FFmpeg's demuxer names). Others (image sequences, playlists, raw
 * streams) are not video files. */
static const char *container(const AVInputFormat *f, const uint8_t *p, size_t len)
{
    if (!f)
        return NULL;
    if (!strcmp(f->name, "mov,mp4,m4a,3gp,3g2,mj2"))
        return len >= 12 && !memcmp(p + 4, "ftyp", 4) && memcmp(p + 8, "qt  ", 4) ? "mp4"
                                                                                   : "mov";
    if (!strcmp(f->name, "matroska,webm")) {
        /* the EBML header's DocType: "webm" or "matroska" */
        for (size_t i = 0; i + 4 <= len && i < 64; i++)
            if (!memcmp(p + i, "webm", 4))
                return "webm";
        return "matroska";
    }
    if (!strcmp(f->name, "avi"))
        return "avi";
    return NULL;
}

typedef struct {
    const char *fmt, *codec;
    const AVInputFormat *ifmt;
    ge_av_input in;
    int si;          /* the video stream */
    AVStream *st;
    AVCodecContext *cc;
    AVPacket *pkt;
    AVFrame *frm;
    int drained;     /* the demuxer is at its end and the decoder was sent the flush */
    int64_t packets; /* packets of the stream sent to the decoder */
    const int64_t *want; /* [nwant] sorted pts of the wanted frames: with skip, the decoder
                          * skips the other frames no frame refers to (AVDISCARD_NONREF) */
    int nwant, skip;
    char why[400];
} vdec;

static void vdec_close(vdec *v)
{
    av_frame_free(&v->frm);
    av_packet_free(&v->pkt);
    avcodec_free_context(&v->cc);
    ge_av_close(&v->in);
    v->st = NULL;
}

static ge_status check_size(const char *fmt, int w, int h, ge_err *err)
{
    if (w < 1 || h < 1)
        return ge_fail(err, GE_E_FORMAT, "%s: bad frame size %dx%d", fmt, w, h);
    if (w > GE_VIDEO_MAX_SIDE || h > GE_VIDEO_MAX_SIDE || (int64_t)w * h > GE_VIDEO_MAX_PIXELS)
        return ge_fail(err, GE_E_LIMIT, "%s: frames of %dx%d are too large (at most %d per side "
                       "and %lld pixels)", fmt, w, h, GE_VIDEO_MAX_SIDE,
                       (long long)GE_VIDEO_MAX_PIXELS);
    return GE_OK;
}

/* Open the container and find its video stream; with decoder, open the decoder too. */
static ge_status vdec_open(vdec *v, const uint8_t *p, size_t len, bool decoder, ge_err *err)
{
    const char *fmt = v->fmt;
    int r = ge_av_open(&v->in, p, len, v->ifmt);
    if (r == AVERROR(ENOMEM))
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", fmt);
    if (r < 0)
        return ge_fail(err, GE_E_FORMAT, "%s: corrupt or truncated header (%s)", fmt,
                       ge_av_why(v->why, sizeof v->why, r));
    AVFormatContext *fc = v->in.fc;
    if ((r = avformat_find_stream_info(fc, NULL)) < 0)
        return ge_fail(err, GE_E_FORMAT, "%s: corrupt or truncated data (%s)", fmt,
                       ge_av_why(v->why, sizeof v->why, r));
    v->si = -1;
    int others = 0, audio = 0;
    for (unsigned i = 0; i < fc->nb_streams; i++) {
        AVStream *s = fc->streams[i];
        if (s->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
            !(s->disposition & AV_DISPOSITION_ATTACHED_PIC)) { /* cover art is no video */
            if (v->si < 0)
                v->si = (int)i;
        } else {
            others++;
            audio += s->codecpar->codec_type == AVMEDIA_TYPE_AUDIO;
        }
    }
    if (v->si < 0 && fc->nb_streams == 0)
        return ge_fail(err, GE_E_FORMAT, "%s: no streams (a corrupt header?)", fmt);
    if (v->si < 0 && audio == others) /* sound alone: the reference's decoder refuses it too */
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: no video stream (audio only: %d audio "
                       "stream%s)", fmt, audio, audio == 1 ? "" : "s");
    if (v->si < 0)
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: no video stream (%d stream%s of other kinds)",
                       fmt, others, others == 1 ? "" : "s");
    v->st = fc->streams[v->si];
    for (unsigned i = 0; i < fc->nb_streams; i++)
        if ((int)i != v->si)
            fc->streams[i]->discard = AVDISCARD_ALL;
    AVCodecParameters *par = v->st->codecpar;
    v->codec = avcodec_get_name(par->codec_id);
    if (par->width || par->height) {
        ge_status st = check_size(fmt, par->width, par->height, err);
        if (st)
            return st;
    }
    const AVCodec *dec = avcodec_find_decoder(par->codec_id);
    if (!dec)
        return par->codec_id == AV_CODEC_ID_NONE
                   ? ge_fail(err, GE_E_FORMAT, "%s: unknown video codec (tag 0x%x)", fmt,
                             par->codec_tag)
                   : ge_fail(err, GE_E_UNSUPPORTED, "%s: no decoder for the video codec %s",
                             fmt, v->codec);
    if (!decoder)
        return GE_OK;
    if (!(v->cc = avcodec_alloc_context3(dec)) || !(v->pkt = av_packet_alloc()) ||
        !(v->frm = av_frame_alloc()))
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", fmt);
    if ((r = avcodec_parameters_to_context(v->cc, par)) < 0)
        return ge_fail(err, GE_E_FORMAT, "%s: bad %s parameters (%s)", fmt, v->codec,
                       ge_av_why(v->why, sizeof v->why, r));
    v->cc->thread_count = 1;
    v->cc->pkt_timebase = v->st->time_base;
    if ((r = avcodec_open2(v->cc, dec, NULL)) < 0)
        return ge_fail(err, GE_E_FORMAT, "%s: cannot open the %s decoder (%s)", fmt, v->codec,
                       ge_av_why(v->why, sizeof v->why, r));
    v->drained = 0;
    v->packets = 0;
    return GE_OK;
}

/* The next frame the decoder outputs, in v->frm: 1, 0 at the end of the stream, -1 on an
 * error (*st set). */
static int vdec_next(vdec *v, ge_status *st, ge_err *err)
{
    for (;;) {
        int r = avcodec_receive_frame(v->cc, v->frm);
        if (r >= 0)
            return 1;
        if (r == AVERROR_EOF || (r == AVERROR(EAGAIN) && v->drained))
            return 0;
        if (r != AVERROR(EAGAIN)) {
            *st = ge_fail(err, GE_E_FORMAT, "%s: corrupt %s data after packet %lld (%s)", v->fmt,
                          v->codec, (long long)v->packets, ge_av_why(v->why, sizeof v->why, r));
            return -1;
        }
        r = av_read_frame(v->in.fc, v->pkt);
        if (r == AVERROR_EOF) {
            v->drained = 1;
            avcodec_send_packet(v->cc, NULL);
            continue;
        }
        if (r < 0) {
            *st = ge_fail(err, GE_E_FORMAT, "%s: corrupt or truncated data after %lld packets "
                          "(%s)", v->fmt, (long long)v->packets,
                          ge_av_why(v->why, sizeof v->why, r));
            return -1;
        }
        if (v->pkt->stream_index != v->si) {
            av_packet_unref(v->pkt);
            continue;
        }
        v->packets++;
        if (v->skip) { /* decoding is in packet order here (one thread): per packet */
            int64_t t = v->pkt->pts != AV_NOPTS_VALUE ? v->pkt->pts : v->pkt->dts;
            int lo = 0, hi = v->nwant;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (v->want[mid] < t)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            v->cc->skip_frame = lo < v->nwant && v->want[lo] == t ? AVDISCARD_DEFAULT
                                                                   : AVDISCARD_NONREF;
        }
        r = avcodec_send_packet(v->cc, v->pkt);
        av_packet_unref(v->pkt);
        if (r < 0 && r != AVERROR(EAGAIN)) {
            *st = ge_fail(err, GE_E_FORMAT, "%s: corrupt %s data in packet %lld (%s)", v->fmt,
                          v->codec, (long long)v->packets, ge_av_why(v->why, sizeof v->why, r));
            return -1;
        }
    }
}

/* ---- the scan (torchcodec's exact mode) ----------------------------------------------------- */

typedef struct {
    int64_t pts; /* presentation time (dts when the packet has none), in the stream time base */
    int64_t dts; /* decoding time (pts when the packet has none) */
    int key;
} pinfo;

typedef struct {
    int64_t n;       /* frames (packets of the stream) */
    int64_t *pts;    /* [n] sorted: frame i's pts */
    int64_t *key;    /* [n] frame index of that keyframe */
    double begin, end;
} scan;

static void scan_free(scan *s)
{
    free(s->pts);
    free(s->key);
    memset(s, 0, sizeof *s);
}

static int by_pts(const void *a, const void *b)
{
    const pinfo *x = a, *y = b;
    return x->pts < y->pts ? -1 : x->pts > y->pts ? 1 : x->dts < y->dts ? -1 : x->dts > y->dts;
}

static ge_status do_scan(vdec *v, scan *s, ge_err *err)
{
    AVPacket *pkt = av_packet_alloc();
    pinfo *pi = NULL;
    size_t cap = 0;
    int64_t n = 0, minpts = INT64_MAX, maxend = INT64_MIN;
    ge_status st = GE_OK;
    if (!pkt)
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", v->fmt);
    for (;;) {
        int r = av_read_frame(v->in.fc, pkt);
        if (r == AVERROR_EOF)
            break;
        if (r < 0) {
            st = ge_fail(err, GE_E_FORMAT, "%s: corrupt or truncated data after %lld video "
                         "packets (%s)", v->fmt, (long long)n, ge_av_why(v->why, sizeof v->why, r));
            goto done;
        }
        if (pkt->stream_index != v->si || (pkt->flags & AV_PKT_FLAG_DISCARD)) {
            av_packet_unref(pkt);
            continue;
        }
        if (pkt->flags & AV_PKT_FLAG_CORRUPT) {
            st = ge_fail(err, GE_E_FORMAT, "%s: truncated or corrupt video packet %lld", v->fmt,
                         (long long)n);
            goto done;
        }
        int64_t pts = pkt->pts != AV_NOPTS_VALUE ? pkt->pts : pkt->dts;
        int64_t dts = pkt->dts != AV_NOPTS_VALUE ? pkt->dts : pts;
        int key = !!(pkt->flags & AV_PKT_FLAG_KEY);
        int64_t dur = pkt->duration;
        av_packet_unref(pkt);
        if (pts == AV_NOPTS_VALUE) {
            st = ge_fail(err, GE_E_FORMAT, "%s: video packet %lld has no timestamp", v->fmt,
                         (long long)n);
            goto done;
        }
        if (n >= MAX_PACKETS) {
            st = ge_fail(err, GE_E_LIMIT, "%s: more than %lld video frames", v->fmt,
                         (long long)MAX_PACKETS);
            goto done;
        }
        if ((size_t)n == cap) {
            size_t c = cap ? cap * 2 : 1024;
            pinfo *q = realloc(pi, c * sizeof *q);
            if (!q) {
                st = ge_fail(err, GE_E_NOMEM, "%s: out of memory for %zu frames", v->fmt, c);
                goto done;
            }
            pi = q, cap = c;
        }
        pi[n++] = (pinfo){pts, dts, key};
        if (pts < minpts)
            minpts = pts;
        if (pts + dur > maxend) /* torchcodec: max(pts + duration) */
            maxend = pts + dur;
    }
    if (n == 0) {
        st = ge_fail(err, GE_E_FORMAT, "%s: the video stream has no frames", v->fmt);
        goto done;
    }
    /* a header that counts more frames than the data holds: cut (MP4 sample tables, AVI) */
    if (v->st->nb_frames > 0 && n < v->st->nb_frames) {
        st = ge_fail(err, GE_E_FORMAT, "%s: truncated (the header lists %lld video frames, the "
                     "data ends after %lld)", v->fmt, (long long)v->st->nb_frames, (long long)n);
        goto done;
    }
    double tb = av_q2d(v->st->time_base);
    /* Matroska/WebM: a file cut short ends before the duration its header gives for the
     * video track (the DURATION tag FFmpeg's muxer writes per track; else the segment's when
     * the video is the only stream); half a frame of slack for rounding */
    if (!strcmp(v->fmt, "matroska") || !strcmp(v->fmt, "webm")) {
        AVDictionaryEntry *t = av_dict_get(v->st->metadata, "DURATION", NULL, 0);
        int hh, mm;
        double ss, want = -1, end = (double)maxend * tb;
        if (t && sscanf(t->value, "%d:%d:%lf", &hh, &mm, &ss) == 3)
            want = hh * 3600.0 + mm * 60.0 + ss;
        else if (v->in.fc->nb_streams == 1 && v->in.fc->duration > 0)
            want = (double)v->in.fc->duration / AV_TIME_BASE;
        double slack = 0.5 * (end - (double)minpts * tb) / (double)n + 0.001;
        if (want > 0 && end < want - slack) {
            st = ge_fail(err, GE_E_FORMAT, "%s: truncated (the header says the video lasts "
                         "%.3f s, the data ends at %.3f s)", v->fmt, want, end);
            goto done;
        }
    }
    qsort(pi, (size_t)n, sizeof *pi, by_pts);
    s->n = n;
    s->pts = malloc((size_t)n * sizeof *s->pts);
    s->key = malloc((size_t)n * sizeof *s->key);
    if (!s->pts || !s->key) {
        st = ge_fail(err, GE_E_NOMEM, "%s: out of memory for %lld frames", v->fmt, (long long)n);
        goto done;
    }
    /* frames before the first keyframe (in presentation order) are reached from the start */
    int64_t kidx = 0;
    for (int64_t i = 0; i < n; i++) {
        if (pi[i].key)
            kidx = i;
        s->pts[i] = pi[i].pts;
        s->key[i] = kidx;
    }
    s->begin = (double)minpts * tb;
    s->end = (double)maxend * tb;
done:
    free(pi);
    av_packet_free(&pkt);
    return st;
}

/* frame index of timestamp t in the scan, -1 when no frame has it */
static int64_t lookup(const scan *s, int64_t t)
{
    int64_t lo = 0, hi = s->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (s->pts[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n && s->pts[lo] == t ? lo : -1;
}

/* ---- frames to RGB -------------------------------------------------------------------------- */

typedef struct {
    struct SwsContext *sws;
    uint8_t *rgb; /* [h][w][3] of the current frame */
    int h, w;
} conv;

/* v->frm to RGB24 in c->rgb, at the frame's size: as the ffmpeg command's scale filter does */
static ge_status to_rgb(vdec *v, conv *c, ge_err *err)
{
    AVFrame *f = v->frm;
    const char *fmt = v->fmt;
    if (f->width != c->w || f->height != c->h)
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: the frame size changes from %dx%d to %dx%d",
                       fmt, c->w, c->h, f->width, f->height);
    c->sws = sws_getCachedContext(c->sws, f->width, f->height, f->format, f->width, f->height,
                                  AV_PIX_FMT_RGB24, SWS_BICUBIC, NULL, NULL, NULL);
    if (!c->sws)
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: cannot convert %s frames to RGB", fmt,
                       av_get_pix_fmt_name(f->format) ? av_get_pix_fmt_name(f->format) : "?");
    /* vf_scale's in_color_matrix=auto and in_range from the frame (FFmpeg 5.1) */
    int *inv, *tab, in_full, out_full, bri, con, sat;
    if (sws_getColorspaceDetails(c->sws, &inv, &in_full, &tab, &out_full, &bri, &con, &sat) >= 0) {
        const int *m = sws_getCoefficients(f->colorspace);
        if (f->color_range != AVCOL_RANGE_UNSPECIFIED)
            in_full = f->color_range == AVCOL_RANGE_JPEG;
        sws_setColorspaceDetails(c->sws, m, in_full, m, out_full, bri, con, sat);
    }
    uint8_t *dst[4] = {c->rgb, NULL, NULL, NULL};
    int stride[4] = {3 * c->w, 0, 0, 0};
    int r = sws_scale(c->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst,
                      stride);
    if (r != c->h)
        return ge_fail(err, GE_E_INTERNAL, "%s: RGB conversion gave %d of %d rows", fmt, r, c->h);
    return GE_OK;
}

/* ---- decode --------------------------------------------------------------------------------- */

/* Decode the frames idx[0..n) (non-decreasing) into out (whose arrays exist). *retry is set
 * when seeking went wrong: the caller starts again with GE_VIDEO_SEEK_NEVER. */
static ge_status decode_frames(const uint8_t *p, size_t len, vdec *v, const scan *s,
                               const int64_t *idx, int n, int seek, const ge_video_limits *l,
                               int budget, ge_video *out, int *retry, ge_err *err)
{
    const int raw = l->raw;
    ge_status st = vdec_open(v, p, len, true, err);
    conv c = {0};
    int64_t cur = -1; /* index of the last frame the decoder gave */
    /* frames are named by their timestamps, or (sequential) counted */
    bool by_ts = seek != GE_VIDEO_SEEK_NEVER;
    size_t fsz = 0;
    int64_t *want = NULL;
    if (st)
        goto done;
    if (by_ts) {
        if (!(want = malloc((size_t)n * sizeof *want))) {
            st = ge_fail(err, GE_E_NOMEM, "%s: out of memory", v->fmt);
            goto done;
        }
        for (int k = 0; k < n; k++) /* idx is non-decreasing, so are their pts */
            want[k] = s->pts[idx[k]];
        v->want = want;
        v->nwant = n;
        v->skip = 1;
    }
    for (int k = 0; k < n; k++) {
        int64_t t = idx[k];
        if (k > 0 && t == idx[k - 1]) { /* the same frame again */
            memcpy(out->rgb + k * fsz, out->rgb + (k - 1) * fsz, fsz);
            continue;
        }
        bool jump = seek == GE_VIDEO_SEEK_ALWAYS ||
                    (seek == GE_VIDEO_SEEK_AUTO && s->key[t] > cur + 1);
        if (jump) {
            int r = av_seek_frame(v->in.fc, v->si, s->pts[s->key[t]], AVSEEK_FLAG_BACKWARD);
            if (r < 0) {
                *retry = 1;
                st = ge_fail(err, GE_E_FORMAT, "%s: seek failed", v->fmt);
                goto done;
            }
            avcodec_flush_buffers(v->cc);
            v->drained = 0;
            cur = -1;
        }
        for (;;) {
            int got = vdec_next(v, &st, err);
            if (got < 0)
                goto done;
            if (got == 0) {
                if (by_ts) {
                    *retry = 1;
                    st = ge_fail(err, GE_E_FORMAT, "%s: frame %lld not found by its timestamp",
                                 v->fmt, (long long)t);
                } else {
                    st = ge_fail(err, GE_E_FORMAT, "%s: frame %lld could not be decoded (the "
                                 "stream gave %lld frames)", v->fmt, (long long)t,
                                 (long long)(cur + 1));
                }
                goto done;
            }
            if (by_ts) {
                int64_t at = lookup(s, v->frm->best_effort_timestamp);
                if (at < 0 || (cur < 0 && at > t)) { /* unknown time, or the seek overshot */
                    *retry = 1;
                    st = ge_fail(err, GE_E_FORMAT, "%s: frame timestamps do not match the index",
                                 v->fmt);
                    goto done;
                }
                cur = at;
            } else {
                cur++;
            }
            if (cur < t) {
                av_frame_unref(v->frm);
                continue;
            }
            if (cur > t) { /* decoding order skipped it */
                *retry = by_ts;
                st = ge_fail(err, GE_E_FORMAT, "%s: frame %lld could not be decoded", v->fmt,
                             (long long)t);
                goto done;
            }
            break;
        }
        AVFrame *f = v->frm;
        if ((f->flags & AV_FRAME_FLAG_CORRUPT) || f->decode_error_flags) {
            st = ge_fail(err, GE_E_FORMAT, "%s: frame %lld is corrupt (decode errors 0x%x)",
                         v->fmt, (long long)t, (unsigned)f->decode_error_flags);
            goto done;
        }
        if (!out->rgb) { /* the first frame sets the size of all */
            if ((st = check_size(v->fmt, f->width, f->height, err)))
                goto done;
            out->w = c.w = f->width;
            out->h = c.h = f->height;
            if (raw) {
                out->th = out->h, out->tw = out->w;
            } else if ((st = ge_image_plan(out->h, out->w, budget, &out->th, &out->tw,
                                           &out->n_soft, err))) {
                goto done;
            }
            /* the plan is complete: the caller's check, then memory for the frames */
            if (l->check && (st = l->check(l->check_ctx, out, err)))
                goto done;
            if (l->plan_only)
                goto done;
            fsz = (size_t)out->th * out->tw * 3;
            c.rgb = malloc((size_t)c.w * c.h * 3);
            out->rgb = malloc(fsz * n);
            if (!c.rgb || !out->rgb) {
                st = ge_fail(err, GE_E_NOMEM, "%s: out of memory for %d frames of %dx%d",
                             v->fmt, n, out->tw, out->th);
                goto done;
            }
        }
        if ((st = to_rgb(v, &c, err)))
            goto done;
        av_frame_unref(f);
        if (raw)
            memcpy(out->rgb + k * fsz, c.rgb, fsz);
        else if ((st = ge_image_resize(c.rgb, c.h, c.w, out->rgb + k * fsz, out->th, out->tw,
                                       err)))
            goto done;
    }
done:
    free(want);
    v->want = NULL;
    v->nwant = v->skip = 0;
    sws_freeContext(c.sws);
    free(c.rgb);
    vdec_close(v);
    return st;
}

ge_status ge_video_decode(const void *bytes, size_t len, const ge_video_limits *lim,
                          ge_video *out, ge_err *err)
{
    memset(out, 0, sizeof *out);
    ge_video_limits l = lim ? *lim : (ge_video_limits){0};
    double fps = l.fps != 0 ? l.fps : GE_VIDEO_FPS;
    int maxf = l.max_frames ? l.max_frames : GE_VIDEO_MAX_FRAMES;
    int budget = l.tokens ? l.tokens : GE_VIDEO_TOKENS;
    if (!(fps > 0 && fps <= 1000))
        return ge_fail(err, GE_E_USAGE, "video: fps %g: must be in (0, 1000]", fps);
    if (maxf < 1 || maxf > GE_VIDEO_FRAMES_CAP)
        return ge_fail(err, GE_E_USAGE, "video: max frames %d: must be in 1..%d", maxf,
                       GE_VIDEO_FRAMES_CAP);
    if (l.seek < GE_VIDEO_SEEK_AUTO || l.seek > GE_VIDEO_SEEK_ALWAYS)
        return ge_fail(err, GE_E_USAGE, "video: bad seek mode %d", l.seek);
    if (ge_image_plan(480, 640, budget, NULL, NULL, NULL, err)) /* 70, 140, ... or GE_E_USAGE */
        return GE_E_USAGE;
    const uint8_t *p = bytes;
    if (!p || len == 0)
        return ge_fail(err, GE_E_FORMAT, "video: empty file");
    /* an image or a sound file: say what it is (FFmpeg would try to read an AVIF or HEIC as an
     * MP4 and find no "moov" box); M4A is a container, whose streams FFmpeg reports */
    ge_media_type t = ge_media_sniff(p, len < GE_SNIFF_BYTES ? len : GE_SNIFF_BYTES);
    if (t.truncated)
        return ge_fail(err, GE_E_FORMAT, "video: truncated: the file ends after %zu bytes, inside "
                       "the signature of %s", len, t.what);
    if (t.kind == GE_MEDIA_IMAGE && t.supported)
        return ge_fail(err, GE_E_UNSUPPORTED, "video: %s, not a video", t.what);
    if (t.kind == GE_MEDIA_IMAGE)
        return ge_fail(err, GE_E_UNSUPPORTED, "video: %s, not a video (and %s images are not "
                       "supported: JPEG, PNG, WebP are)", t.what, t.name);
    if (t.kind == GE_MEDIA_AUDIO && strcmp(t.name, "M4A") != 0)
        return ge_fail(err, GE_E_UNSUPPORTED, "video: %s, not a video", t.what);
    if (ge_av_quiet("video", err))
        return err->code;
    int score = 0;
    vdec v = {0};
    v.ifmt = ge_av_probe(p, len, &score);
    v.fmt = container(v.ifmt, p, len);
    if ((!v.fmt || score < AVPROBE_SCORE_MAX / 4) && t.kind == GE_MEDIA_AV)
        return ge_fail(err, GE_E_UNSUPPORTED, "video: unsupported format: %s (MP4/MOV, "
                       "Matroska/WebM and AVI are read)", t.what);
    if (!v.fmt || score < AVPROBE_SCORE_MAX / 4)
        return ge_fail(err, GE_E_UNSUPPORTED, "video: unsupported format (not MP4/MOV, "
                       "Matroska/WebM or AVI by its first bytes)");
    scan s = {0};
    int ph = 0, pw = 0; /* the frame size the header gives (0: none) */
    ge_status st = vdec_open(&v, p, len, false, err);
    if (!st) {
        ph = v.st->codecpar->height, pw = v.st->codecpar->width;
        out->format = v.fmt;
        out->codec = v.codec;
        const uint8_t *dm = av_stream_get_side_data(v.st, AV_PKT_DATA_DISPLAYMATRIX, NULL);
        if (dm) {
            double deg = av_display_rotation_get((const int32_t *)dm); /* counterclockwise */
            if (isfinite(deg)) {
                int r = (int)lround(deg / 90) * 90 % 360;
                out->rotation = r < 0 ? r + 360 : r;
            }
        }
        st = do_scan(&v, &s, err);
    }
    vdec_close(&v);
    if (st)
        goto fail;
    out->frames = s.n;
    out->duration = s.end - s.begin;
    if (!(out->duration > 0)) {
        st = ge_fail(err, GE_E_FORMAT, "%s: zero duration (%lld frame%s)", v.fmt,
                     (long long)s.n, s.n == 1 ? "" : "s");
        goto fail;
    }
    out->fps = (double)s.n / out->duration;
    out->index = malloc((size_t)maxf * sizeof *out->index);
    out->seconds = malloc((size_t)maxf * sizeof *out->seconds);
    if (!out->index || !out->seconds) {
        st = ge_fail(err, GE_E_NOMEM, "%s: out of memory", v.fmt);
        goto fail;
    }
    out->n = ge_video_sample(out->duration, out->fps, out->frames, fps, maxf, out->index);
    if (out->n < 1) {
        st = ge_fail(err, GE_E_FORMAT, "%s: cannot sample (duration %g s, %g fps)", v.fmt,
                     out->duration, out->fps);
        goto fail;
    }
    for (int k = 0; k < out->n; k++)
        out->seconds[k] = (double)out->index[k] / out->fps;
    int retry = 0;
    if (l.check && ph > 0 && pw > 0 && !l.raw &&
        !ge_image_plan(ph, pw, budget, &out->th, &out->tw, &out->n_soft, NULL)) {
        /* the header's frame size: the check before a frame is decoded (the first decoded
         * frame's size is checked again) */
        out->h = ph, out->w = pw;
        if ((st = l.check(l.check_ctx, out, err)))
            goto fail;
        out->h = out->w = out->th = out->tw = out->n_soft = 0;
    }
    st = decode_frames(p, len, &v, &s, out->index, out->n, l.seek, &l, budget, out, &retry,
                       err);
    if (st && retry && l.seek != GE_VIDEO_SEEK_NEVER) {
        free(out->rgb);
        out->rgb = NULL;
        retry = 0;
        out->h = out->w = out->th = out->tw = out->n_soft = 0;
        st = decode_frames(p, len, &v, &s, out->index, out->n, GE_VIDEO_SEEK_NEVER, &l,
                           budget, out, &retry, err);
    }
    if (st)
        goto fail;
    scan_free(&s);
    return GE_OK;
fail:
    scan_free(&s);
    ge_video_free(out);
    return st;
}
