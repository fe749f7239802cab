/* audio_decode.c - audio files to the waveform the Gemma 4 feature extractor takes (docs/model.md
 * 6.1's input): mono float32 at 16 kHz, cut to a maximum duration.
 *
 * What Hugging Face hands the feature extractor is librosa.load(path, sr=16000): libsndfile
 * (through soundfile) reads float32 samples, librosa.to_mono averages the channels, and
 * librosa.resample runs python-soxr at its default "soxr_hq" quality, then fixes the length
 * to ceil(frames * 16000 / rate). This file does the same with the distribution's libraries:
 *   - libsndfile for WAV, AIFF, FLAC, Ogg Vorbis/Opus (and its other formats), read from
 *     memory through its virtual I/O; integer samples are scaled by libsndfile
 *     (x / 2^(bits-1); 8-bit unsigned: (x - 128) / 128), floats are passed through;
 *   - MP3 (and MPEG layer I/II): libmpg123 with the settings libsndfile's MPEG reader uses
 *     (float output, gapless, no resampling, no "Frankenstein" streams), so the samples are
 *     soundfile's, but called here because libsndfile leaves mpg123's printouts on (a
 *     damaged stream writes warnings to stderr) and we set MPG123_QUIET;
 *   - FFmpeg's libavformat/libavcodec for what libsndfile cannot read: MP4/M4A (AAC, ALAC),
 *     Matroska/WebM, ADTS AAC and a few more audio formats (ffmpeg_formats below), from
 *     memory through a custom AVIOContext; the decoded frames are scaled like libsndfile's;
 *   - channels averaged in float32, summed in channel order (numpy's mean for < 8 channels);
 *   - libsoxr with SOXR_HQ (python-soxr's "HQ"), float32 in and out, one thread, fed in
 *     blocks (the output does not depend on the block size), flushed at the end; the length
 *     fixed as librosa does (zeros appended, or the tail cut).
 * Only what max_seconds keeps is decoded: reading stops as soon as the 16 kHz output is
 * longer than that, and the output is the first round(max_seconds * 16000) samples, the same
 * as resampling everything and cutting (HF's truncation at max_length).
 *
 * Errors: a file whose header promises more data than it holds is "truncated" (WAV/AIFF data
 * chunk sizes, always; FLAC/Ogg frame counts, MP3 Xing/Info frame counts, MP4 sample
 * tables, Matroska durations, when the decoding reaches the cut, i.e. unless it lies past
 * what max_seconds keeps) where soundfile would quietly return the shorter audio. Streamed WAV
 * headers (sizes 0 or >= 0x7fff0000, as ffmpeg and sox write to pipes) are not counted.
 *
 * Library code: nothing is printed. libsndfile never prints, except through libmpg123, which
 * is why MPEG audio never reaches it (is_mpeg_audio); FFmpeg's log goes to a callback
 * that keeps the last error line per thread (for messages) and prints nothing. libsndfile
 * reports a failed open in a process-wide variable, so opens are serialised. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpg123.h>
#include <sndfile.h>
#include <soxr.h>

#include "avmem.h"
#include "ge.h"

#define BLOCK 4096 /* frames read per step */

void ge_audio_free(ge_audio *a)
{
    if (!a)
        return;
    free(a->pcm);
    memset(a, 0, sizeof *a);
}

/* ---- the sink: mono mix, resampling, cut ------------------------------------------------- */

typedef struct {
    const char *fmt;  /* container name, for messages */
    int rate;         /* input rate, 0 until known */
    soxr_t soxr;      /* NULL at 16 kHz */
    int64_t max;      /* output samples kept */
    float *out;       /* [out_cap] */
    int64_t n;
    size_t out_cap;
    int64_t n_in;     /* mono input samples pushed */
    float *mono, *tmp; /* scratch: one block of mono input, one block of soxr output */
    size_t mono_cap, tmp_cap;
    int truncated;    /* input beyond max arrived: stop reading */
} sink;

static void sink_free(sink *s)
{
    if (s->soxr)
        soxr_delete(s->soxr);
    free(s->out);
    free(s->mono);
    free(s->tmp);
    memset(s, 0, sizeof *s);
}

static ge_status grow(float **p, size_t *cap, size_t need, const char *fmt, ge_err *err)
{
    if (need <= *cap)
        return GE_OK;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    float *q = realloc(*p, c * sizeof *q);
    if (!q)
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory for %zu samples", fmt, c);
    *p = q;
    *cap = c;
    return GE_OK;
}

static ge_status check_channels(const char *fmt, int ch, ge_err *err)
{
    if (ch >= 1 && ch <= GE_AUDIO_MAX_CHANNELS)
        return GE_OK;
    return ge_fail(err, ch < 1 ? GE_E_FORMAT : GE_E_LIMIT, "%s: %d channels (at most %d are read)",
                   fmt, ch, GE_AUDIO_MAX_CHANNELS);
}

/* The input's layout becomes known: validate it and set up the resampler. */
static ge_status sink_open(sink *s, int rate, int ch, ge_err *err)
{
    ge_status st = check_channels(s->fmt, ch, err);
    if (st)
        return st;
    if (rate < GE_AUDIO_MIN_RATE || rate > GE_AUDIO_MAX_RATE)
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: sample rate %d Hz is outside %d..%d Hz",
                       s->fmt, rate, GE_AUDIO_MIN_RATE, GE_AUDIO_MAX_RATE);
    s->rate = rate;
    if (rate == GE_AUDIO_RATE)
        return GE_OK;
    soxr_error_t e = NULL;
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    soxr_runtime_spec_t rt = soxr_runtime_spec(1);
    s->soxr = soxr_create(rate, GE_AUDIO_RATE, 1, &e, &io, &q, &rt);
    if (!s->soxr || e)
        return ge_fail(err, GE_E_INTERNAL, "%s: resampler for %d Hz: %s", s->fmt, rate,
                       e ? e : "soxr_create failed");
    return GE_OK;
}

/* Keep out[0..k) of the resampler's (or the input's) mono output, up to max. */
static ge_status keep(sink *s, const float *x, size_t k, ge_err *err)
{
    int64_t room = s->max - s->n;
    if ((int64_t)k > room) {
        s->truncated = 1;
        k = (size_t)room;
    }
    if (k == 0)
        return GE_OK;
    ge_status st = grow(&s->out, &s->out_cap, (size_t)s->n + k, s->fmt, err);
    if (st)
        return st;
    memcpy(s->out + s->n, x, k * sizeof *x);
    s->n += (int64_t)k;
    return GE_OK;
}

/* Run the resampler on in[0..k) (NULL: flush) and keep what it gives. */
static ge_status resample(sink *s, const float *in, size_t k, ge_err *err)
{
    /* output room for one call: the ratio's share of the input plus the filter's tail */
    size_t room = (size_t)((double)(k ? k : BLOCK) * GE_AUDIO_RATE / s->rate) + 1024;
    ge_status st = grow(&s->tmp, &s->tmp_cap, room, s->fmt, err);
    if (st)
        return st;
    for (int guard = 0;; guard++) {
        size_t idone = 0, odone = 0;
        soxr_error_t e = soxr_process(s->soxr, in, k, in ? &idone : NULL, s->tmp, s->tmp_cap,
                                      &odone);
        if (e)
            return ge_fail(err, GE_E_INTERNAL, "%s: resampling: %s", s->fmt, e);
        if ((st = keep(s, s->tmp, odone, err)) || s->truncated)
            return st;
        if (in) {
            in += idone;
            k -= idone;
            if (k == 0)
                return GE_OK;
        } else if (odone == 0) {
            return GE_OK;
        }
        if (guard > 1000000) /* soxr always makes progress; never spin on a bug */
            return ge_fail(err, GE_E_INTERNAL, "%s: the resampler stalled", s->fmt);
    }
}

/* Push `frames` interleaved frames of ch channels: average to mono, resample, keep. */
static ge_status sink_push(sink *s, const float *x, size_t frames, int ch, ge_err *err)
{
    if (frames == 0)
        return GE_OK;
    ge_status st = grow(&s->mono, &s->mono_cap, frames, s->fmt, err);
    if (st)
        return st;
    float *m = s->mono;
    if (ch == 1) {
        memcpy(m, x, frames * sizeof *m);
    } else {
        const float count = (float)ch; /* numpy's mean: the float32 sum over the count */
        for (size_t i = 0; i < frames; i++) {
            float acc = x[i * ch];
            for (int c = 1; c < ch; c++)
                acc += x[i * ch + c];
            m[i] = acc / count;
        }
    }
    for (size_t i = 0; i < frames; i++)
        if (!isfinite(m[i]))
            return ge_fail(err, GE_E_FORMAT, "%s: sample %lld is not a finite number", s->fmt,
                           (long long)(s->n_in + (int64_t)i));
    s->n_in += (int64_t)frames;
    return s->soxr ? resample(s, m, frames, err) : keep(s, m, frames, err);
}

/* End of input: flush the resampler, fix the length as librosa does, hand the samples out. */
static ge_status sink_finish(sink *s, ge_audio *out, ge_err *err)
{
    if (s->n_in == 0)
        return ge_fail(err, GE_E_FORMAT, "%s: no audio samples", s->fmt);
    ge_status st;
    if (s->soxr && !s->truncated && (st = resample(s, NULL, 0, err)))
        return st;
    /* librosa: n_samples = int(np.ceil(y.shape[-1] * ratio)), ratio = target_sr / orig_sr
     * in double (which can round up past an exact integer: kept as librosa has it) */
    int64_t want = s->n_in;
    if (s->soxr)
        want = (int64_t)ceil((double)s->n_in * ((double)GE_AUDIO_RATE / (double)s->rate));
    if (want > s->max) {
        want = s->max;
        s->truncated = 1;
    }
    if (s->truncated)
        want = s->max;
    if (want > s->n) { /* zero-padded to the length */
        if ((st = grow(&s->out, &s->out_cap, (size_t)want, s->fmt, err)))
            return st;
        memset(s->out + s->n, 0, (size_t)(want - s->n) * sizeof *s->out);
    }
    out->pcm = s->out;
    out->n = want;
    out->truncated = s->truncated;
    s->out = NULL;
    return GE_OK;
}

/* ---- in-memory source (both libraries read through it) --------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t n, at;
} memsrc;

static sf_count_t vio_len(void *u) { return (sf_count_t)((memsrc *)u)->n; }
static sf_count_t vio_tell(void *u) { return (sf_count_t)((memsrc *)u)->at; }

static sf_count_t vio_seek(sf_count_t off, int whence, void *u)
{
    memsrc *m = u;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (sf_count_t)m->at
                                                                  : (sf_count_t)m->n;
    if ((whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) || off < -base ||
        off > (sf_count_t)m->n - base) /* 0 <= base <= n: neither side overflows */
        return -1;
    m->at = (size_t)(base + off);
    return (sf_count_t)m->at;
}

static sf_count_t vio_read(void *dst, sf_count_t count, void *u)
{
    memsrc *m = u;
    size_t k = m->n - m->at;
    if (count < 0)
        return 0;
    if ((size_t)count < k)
        k = (size_t)count;
    memcpy(dst, m->p + m->at, k);
    m->at += k;
    return (sf_count_t)k;
}

static sf_count_t vio_write(const void *src, sf_count_t count, void *u)
{
    (void)src, (void)count, (void)u;
    return 0;
}

/* ---- WAV / AIFF: does the data chunk hold what its header says? -------------------------- */

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* For a RIFF/RIFX WAV or an IFF AIFF(-C): the bytes missing from its sample-data chunk
 * ("data", "SSND"), or 0 when it is complete, streamed (a size of 0 or >= 0x7fff0000, as
 * writers to pipes leave it), absent, or the file is something else. Bounds-checked walk. */
static uint64_t chunk_shortfall(const uint8_t *p, size_t n)
{
    int le;
    const char *want;
    if (n >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WAVE", 4))
        le = 1, want = "data";
    else if (n >= 12 && !memcmp(p, "RIFX", 4) && !memcmp(p + 8, "WAVE", 4))
        le = 0, want = "data";
    else if (n >= 12 && !memcmp(p, "FORM", 4) &&
             (!memcmp(p + 8, "AIFF", 4) || !memcmp(p + 8, "AIFC", 4)))
        le = 0, want = "SSND";
    else
        return 0;
    for (size_t at = 12; n - at >= 8;) {
        uint32_t size = le ? le32(p + at + 4) : be32(p + at + 4);
        if (!memcmp(p + at, want, 4)) {
            if (size == 0 || size >= 0x7fff0000u)
                return 0;
            size_t have = n - at - 8;
            return size > have ? size - have : 0;
        }
        uint64_t next = (uint64_t)at + 8 + size + (size & 1);
        if (next > n)
            return 0; /* a broken chunk before the data: libsndfile judges it */
        at = (size_t)next;
    }
    return 0;
}

/* ---- libsndfile ------------------------------------------------------------------------- */

static pthread_mutex_t sf_open_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *sf_format_name(int f)
{
    switch (f & SF_FORMAT_TYPEMASK) {
    case SF_FORMAT_WAV: case SF_FORMAT_WAVEX: return "wav";
    case SF_FORMAT_RF64: return "rf64";
    case SF_FORMAT_W64: return "w64";
    case SF_FORMAT_AIFF: return "aiff";
    case SF_FORMAT_AU: return "au";
    case SF_FORMAT_CAF: return "caf";
    case SF_FORMAT_FLAC: return "flac";
    case SF_FORMAT_OGG: return "ogg";
    case SF_FORMAT_MPEG: return "mp3";
    default: return "audio";
    }
}

static const char *sf_codec_name(int f)
{
    switch (f & SF_FORMAT_SUBMASK) {
    case SF_FORMAT_PCM_S8: return "pcm_s8";
    case SF_FORMAT_PCM_U8: return "pcm_u8";
    case SF_FORMAT_PCM_16: return "pcm_s16";
    case SF_FORMAT_PCM_24: return "pcm_s24";
    case SF_FORMAT_PCM_32: return "pcm_s32";
    case SF_FORMAT_FLOAT: return "float";
    case SF_FORMAT_DOUBLE: return "double";
    case SF_FORMAT_ULAW: return "ulaw";
    case SF_FORMAT_ALAW: return "alaw";
    case SF_FORMAT_IMA_ADPCM: return "ima_adpcm";
    case SF_FORMAT_MS_ADPCM: return "ms_adpcm";
    case SF_FORMAT_GSM610: return "gsm610";
    case SF_FORMAT_VORBIS: return "vorbis";
    case SF_FORMAT_OPUS: return "opus";
    case SF_FORMAT_ALAC_16: case SF_FORMAT_ALAC_20: case SF_FORMAT_ALAC_24:
    case SF_FORMAT_ALAC_32: return "alac";
    case SF_FORMAT_MPEG_LAYER_I: return "mp1";
    case SF_FORMAT_MPEG_LAYER_II: return "mp2";
    case SF_FORMAT_MPEG_LAYER_III: return "mp3";
    default: return "other";
    }
}

/* *fallback is set when libsndfile cannot open the data: FFmpeg may (librosa.load falls back
 * to audioread's ffmpeg the same way); *fallback is 1 when libsndfile did not recognise the
 * format at all. */
static ge_status decode_sndfile(const uint8_t *p, size_t len, int64_t max, ge_audio *out,
                                int *fallback, ge_err *err)
{
    memsrc src = {p, len, 0};
    SF_VIRTUAL_IO vio = {vio_len, vio_seek, vio_read, vio_write, vio_tell};
    SF_INFO info;
    memset(&info, 0, sizeof info);
    *fallback = 0;
    pthread_mutex_lock(&sf_open_lock);
    SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &info, &src);
    int code = sf ? 0 : sf_error(NULL);
    char why[256];
    snprintf(why, sizeof why, "%s", sf ? "" : sf_strerror(NULL));
    pthread_mutex_unlock(&sf_open_lock);
    if (!sf) {
        *fallback = code == SF_ERR_UNRECOGNISED_FORMAT ? 1 : 2;
        if (code == SF_ERR_UNRECOGNISED_FORMAT)
            return ge_fail(err, GE_E_UNSUPPORTED,
                           "audio: unsupported format (not WAV, AIFF, FLAC, Ogg, MP3, MP4/M4A "
                           "or Matroska/WebM audio by its first bytes)");
        if (code == SF_ERR_UNSUPPORTED_ENCODING)
            return ge_fail(err, GE_E_UNSUPPORTED, "audio: %s", why);
        return ge_fail(err, GE_E_FORMAT, "audio: corrupt or truncated header: %s", why);
    }
    const char *fmt = sf_format_name(info.format);
    ge_status st = GE_OK;
    sink s = {.fmt = fmt, .max = max};
    float *buf = NULL;
    out->format = fmt;
    out->codec = sf_codec_name(info.format);
    out->rate = info.samplerate;
    out->channels = info.channels;
    if ((st = sink_open(&s, info.samplerate, info.channels, err)))
        goto done;
    if (info.frames == 0) {
        st = ge_fail(err, GE_E_FORMAT, "%s: no audio samples (0 frames)", fmt);
        goto done;
    }
    if (!(buf = malloc(sizeof *buf * BLOCK * (size_t)info.channels))) {
        st = ge_fail(err, GE_E_NOMEM, "%s: out of memory", fmt);
        goto done;
    }
    int64_t got_total = 0;
    while (!s.truncated) {
        sf_count_t got = sf_readf_float(sf, buf, BLOCK); /* libsndfile's own scaling */
        if (got <= 0)
            break;
        got_total += got;
        if ((st = sink_push(&s, buf, (size_t)got, info.channels, err)))
            goto done;
        if (got < BLOCK)
            break;
    }
    if (!s.truncated) {
        int e = sf_error(sf);
        if (e) {
            st = ge_fail(err, GE_E_FORMAT, "%s: corrupt data after %lld frames: %s", fmt,
                         (long long)got_total, sf_error_number(e));
            goto done;
        }
        /* FLAC and Ogg: their headers count the frames exactly */
        int tm = info.format & SF_FORMAT_TYPEMASK;
        if (((tm == SF_FORMAT_FLAC || tm == SF_FORMAT_OGG) && info.frames != SF_COUNT_MAX &&
             got_total < info.frames) || (got_total == 0 && info.frames > 0)) {
            st = ge_fail(err, GE_E_FORMAT,
                         "%s: truncated (the header promises %lld frames, the data ends after "
                         "%lld)", fmt, (long long)info.frames, (long long)got_total);
            goto done;
        }
    }
    st = sink_finish(&s, out, err);
done:
    free(buf);
    sink_free(&s);
    sf_close(sf);
    return st;
}

/* ---- MPEG audio (libmpg123) --------------------------------------------------------------- */

static ssize_t mp3_read(void *u, void *dst, size_t n)
{
    return (ssize_t)vio_read(dst, (sf_count_t)(n > (size_t)1 << 30 ? (size_t)1 << 30 : n), u);
}

static off_t mp3_seek(void *u, off_t off, int whence)
{
    return (off_t)vio_seek((sf_count_t)off, whence, u);
}

static pthread_once_t mpg123_once = PTHREAD_ONCE_INIT;
static int mpg123_ready; /* mpg123_init() result (a no-op in current libmpg123) */
static void mpg123_setup(void) { mpg123_ready = mpg123_init() == MPG123_OK; }

static ge_status decode_mpg123(const uint8_t *p, size_t len, int64_t max, ge_audio *out,
                               ge_err *err)
{
    pthread_once(&mpg123_once, mpg123_setup);
    if (!mpg123_ready)
        return ge_fail(err, GE_E_INTERNAL, "mp3: libmpg123 failed to initialise");
    memsrc src = {p, len, 0};
    int e = MPG123_OK;
    mpg123_handle *mh = mpg123_new(NULL, &e);
    if (!mh)
        return ge_fail(err, GE_E_NOMEM, "mp3: %s", mpg123_plain_strerror(e));
    const char *fmt = "mp3";
    ge_status st = GE_OK;
    sink s = {.fmt = fmt, .max = max};
    float *buf = NULL;
    long rate = 0;
    int ch = 0, enc = 0;
    out->format = fmt;
    mpg123_param(mh, MPG123_ADD_FLAGS, MPG123_QUIET, 0);
    mpg123_param(mh, MPG123_REMOVE_FLAGS, MPG123_AUTO_RESAMPLE, 0);
    mpg123_param(mh, MPG123_ADD_FLAGS, MPG123_FORCE_FLOAT | MPG123_GAPLESS, 0);
    mpg123_param(mh, MPG123_ADD_FLAGS, MPG123_NO_FRANKENSTEIN, 0);
    if (mpg123_replace_reader_handle(mh, mp3_read, mp3_seek, NULL) != MPG123_OK ||
        mpg123_open_handle(mh, &src) != MPG123_OK || mpg123_getformat(mh, &rate, &ch, &enc)) {
        st = ge_fail(err, GE_E_FORMAT, "mp3: corrupt or truncated stream (%s)",
                     mpg123_strerror(mh));
        goto done;
    }
    struct mpg123_frameinfo fi = {0};
    out->codec = mpg123_info(mh, &fi) == MPG123_OK && fi.layer == 1 ? "mp1"
                 : fi.layer == 2                                     ? "mp2"
                                                                     : "mp3";
    out->rate = (int)rate;
    out->channels = ch;
    if ((st = sink_open(&s, (int)rate, ch, err)))
        goto done;
    if (enc != MPG123_ENC_FLOAT_32 && mpg123_format(mh, rate, ch, MPG123_ENC_FLOAT_32)) {
        st = ge_fail(err, GE_E_UNSUPPORTED, "mp3: no float output (%s)", mpg123_strerror(mh));
        goto done;
    }
    /* the length is exact when an Xing/Info header gives it ("accurate"), else estimated */
    long accurate = 0;
    off_t length = mpg123_length(mh);
    mpg123_getstate(mh, MPG123_ACCURATE, &accurate, NULL);
    if (!(buf = malloc(sizeof *buf * BLOCK * (size_t)ch))) {
        st = ge_fail(err, GE_E_NOMEM, "mp3: out of memory");
        goto done;
    }
    int64_t got_total = 0;
    while (!s.truncated) {
        size_t done = 0;
        int r = mpg123_read(mh, buf, sizeof *buf * BLOCK * (size_t)ch, &done);
        size_t frames = done / (sizeof *buf * (size_t)ch);
        got_total += (int64_t)frames;
        if ((st = sink_push(&s, buf, frames, ch, err)))
            goto done;
        if (r == MPG123_DONE)
            break;
        if (r == MPG123_NEW_FORMAT) {
            st = ge_fail(err, GE_E_UNSUPPORTED, "mp3: the format changes mid-stream");
            goto done;
        }
        if (r != MPG123_OK) {
            st = ge_fail(err, GE_E_FORMAT, "mp3: corrupt data after %lld frames (%s)",
                         (long long)got_total, mpg123_strerror(mh));
            goto done;
        }
    }
    if (!s.truncated && accurate && length > 0 && got_total < (int64_t)length) {
        st = ge_fail(err, GE_E_FORMAT, "mp3: truncated (the Xing header promises %lld frames, "
                     "the data ends after %lld)", (long long)length, (long long)got_total);
        goto done;
    }
    st = sink_finish(&s, out, err);
done:
    free(buf);
    sink_free(&s);
    mpg123_close(mh);
    mpg123_delete(mh);
    return st;
}

/* MPEG audio: ID3v2 tags, then a frame header (11-bit sync, layer I-III; ADTS AAC has layer
 * bits 00). The tags are skipped as libsndfile's id3_skip does (10 + the syncsafe size each,
 * no footer), so that whatever libsndfile would open as MPEG comes here: libsndfile must
 * never run mpg123 itself (it would print). Tags before something else (FLAC, ...) are left
 * to libsndfile. */
static int is_mpeg_audio(const uint8_t *p, size_t n)
{
    size_t at = 0;
    while (n - at >= 10 && !memcmp(p + at, "ID3", 3)) {
        const uint8_t *h = p + at;
        size_t tag = (size_t)(h[6] & 0x7f) << 21 | (size_t)(h[7] & 0x7f) << 14 |
                     (size_t)(h[8] & 0x7f) << 7 | (size_t)(h[9] & 0x7f);
        if (tag + 10 > n - at)
            return 1; /* a tag with no room for audio: mpg123 says what is wrong */
        at += tag + 10;
    }
    if (n - at < 4)
        return at > 0;
    return p[at] == 0xff && (p[at + 1] & 0xe0) == 0xe0 && (p[at + 1] & 0x06) != 0;
}

/* ---- FFmpeg ------------------------------------------------------------------------------ */

/* The demuxers we accept (FFmpeg's probe names) and what we call them. Others, such as
 * playlists or image sequences, are not audio files and would open other files. */
static const struct {
    const char *av, *name;
} ffmpeg_formats[] = {
    {"mov,mp4,m4a,3gp,3g2,mj2", "mp4"}, {"matroska,webm", "matroska"}, {"aac", "aac"},
    {"mp3", "mp3"}, {"ogg", "ogg"}, {"wav", "wav"}, {"flac", "flac"}, {"aiff", "aiff"},
    {"asf", "asf"}, {"caf", "caf"}, {"amr", "amr"}, {"ac3", "ac3"}, {"eac3", "eac3"},
    {"wv", "wavpack"}, {"ape", "ape"}, {"tta", "tta"}, {"w64", "w64"}, {"au", "au"},
};

/* One decoded frame into the sink, converted to float as libsndfile scales samples. */
static ge_status push_frame(sink *s, const AVFrame *f, float **conv, size_t *conv_cap,
                            ge_audio *out, ge_err *err)
{
    int ch = f->ch_layout.nb_channels;
    ge_status st;
    if (s->rate == 0) {
        out->rate = f->sample_rate;
        out->channels = ch;
        if ((st = sink_open(s, f->sample_rate, ch, err)))
            return st;
    } else if ((st = check_channels(s->fmt, ch, err))) { /* may change between frames */
        return st;
    } else if (f->sample_rate != s->rate) {
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: the sample rate changes from %d to %d Hz",
                       s->fmt, s->rate, f->sample_rate);
    }
    size_t k = f->nb_samples > 0 ? (size_t)f->nb_samples : 0, total = k * (size_t)ch;
    if ((st = grow(conv, conv_cap, total, s->fmt, err)))
        return st;
    float *x = *conv;
    int planar = av_sample_fmt_is_planar(f->format);
    enum AVSampleFormat pf = av_get_packed_sample_fmt(f->format);
    for (int c = 0; c < ch; c++) {
        const uint8_t *base = planar ? f->extended_data[c] : f->extended_data[0];
        size_t step = planar ? 1 : (size_t)ch, off = planar ? 0 : (size_t)c;
        for (size_t i = 0; i < k; i++) {
            size_t j = i * step + off;
            float v;
            switch (pf) {
            case AV_SAMPLE_FMT_U8: v = (float)(((const uint8_t *)base)[j] - 128) * (1.0f / 128); break;
            case AV_SAMPLE_FMT_S16: v = (float)((const int16_t *)base)[j] * (1.0f / 32768); break;
            case AV_SAMPLE_FMT_S32: v = (float)((const int32_t *)base)[j] * (1.0f / 2147483648.0f); break;
            case AV_SAMPLE_FMT_S64: v = (float)((double)((const int64_t *)base)[j] * 0x1p-63); break;
            case AV_SAMPLE_FMT_FLT: v = ((const float *)base)[j]; break;
            case AV_SAMPLE_FMT_DBL: v = (float)((const double *)base)[j]; break;
            default:
                return ge_fail(err, GE_E_UNSUPPORTED, "%s: decoder sample format %s", s->fmt,
                               av_get_sample_fmt_name(f->format));
            }
            x[i * ch + c] = v;
        }
    }
    return sink_push(s, x, k, ch, err);
}

/* *probed (may be NULL) is cleared when FFmpeg does not recognise the data either. */
static ge_status decode_ffmpeg(const uint8_t *p, size_t len, int64_t max, ge_audio *out,
                               int *probed, ge_err *err)
{
    if (ge_av_quiet("audio", err))
        return err->code;
    int score = 0;
    const AVInputFormat *ifmt = ge_av_probe(p, len, &score);
    const char *fmt = NULL;
    for (size_t i = 0; ifmt && i < sizeof ffmpeg_formats / sizeof *ffmpeg_formats; i++)
        if (!strcmp(ifmt->name, ffmpeg_formats[i].av))
            fmt = ffmpeg_formats[i].name;
    if (!ifmt || score < AVPROBE_SCORE_MAX / 2 || !fmt) {
        if (probed)
            *probed = 0;
        return ge_fail(err, GE_E_UNSUPPORTED,
                       "audio: unsupported format (not WAV, AIFF, FLAC, Ogg, MP3, MP4/M4A or "
                       "Matroska/WebM audio by its first bytes)");
    }

    ge_status st = GE_OK;
    char why[400];
    sink s = {.fmt = fmt, .max = max};
    ge_av_input in;
    AVCodecContext *cc = NULL;
    AVPacket *pkt = NULL;
    AVFrame *frm = NULL;
    float *conv = NULL;
    size_t conv_cap = 0;
    int64_t packets = 0;
    out->format = fmt;
    int r = ge_av_open(&in, p, len, ifmt);
    if (r == AVERROR(ENOMEM))
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", fmt);
    if (r < 0)
        return ge_fail(err, GE_E_FORMAT, "%s: corrupt or truncated header (%s)", fmt,
                       ge_av_why(why, sizeof why, r));
    AVFormatContext *fc = in.fc;
    const AVCodec *dec = NULL;
    int si = av_find_best_stream(fc, AVMEDIA_TYPE_AUDIO, -1, -1, &dec, 0);
    /* it skips streams whose rate and channels the header leaves open (ADTS): the first
     * audio stream then, its parameters come with the decoded frames */
    for (unsigned i = 0; si == AVERROR_STREAM_NOT_FOUND && i < fc->nb_streams; i++)
        if (fc->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO) {
            si = (int)i;
            dec = avcodec_find_decoder(fc->streams[i]->codecpar->codec_id);
        }
    if (si == AVERROR_STREAM_NOT_FOUND) {
        unsigned video = 0;
        for (unsigned i = 0; i < fc->nb_streams; i++)
            video += fc->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_VIDEO;
        if (video)
            st = ge_fail(err, GE_E_UNSUPPORTED, "%s: no audio stream (a video without sound: %u "
                         "stream%s of other kinds)", fmt, fc->nb_streams,
                         fc->nb_streams == 1 ? "" : "s");
        else
            st = ge_fail(err, GE_E_UNSUPPORTED, "%s: no audio stream (%u stream%s of other "
                         "kinds)", fmt, fc->nb_streams, fc->nb_streams == 1 ? "" : "s");
        goto done;
    }
    if (si < 0 || !dec) {
        AVStream *a = NULL;
        for (unsigned i = 0; i < fc->nb_streams && !a; i++)
            if (fc->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO)
                a = fc->streams[i];
        if (!a || a->codecpar->codec_id == AV_CODEC_ID_NONE)
            st = ge_fail(err, GE_E_FORMAT, "%s: unknown audio codec (tag 0x%x)", fmt,
                         a ? a->codecpar->codec_tag : 0);
        else
            st = ge_fail(err, GE_E_UNSUPPORTED, "%s: no decoder for the audio codec %s", fmt,
                         avcodec_get_name(a->codecpar->codec_id));
        goto done;
    }
    AVStream *as = fc->streams[si];
    for (unsigned i = 0; i < fc->nb_streams; i++)
        if ((int)i != si)
            fc->streams[i]->discard = AVDISCARD_ALL;
    out->codec = avcodec_get_name(as->codecpar->codec_id);
    if (!(cc = avcodec_alloc_context3(dec)) || !(pkt = av_packet_alloc()) ||
        !(frm = av_frame_alloc())) {
        st = ge_fail(err, GE_E_NOMEM, "%s: out of memory", fmt);
        goto done;
    }
    if ((r = avcodec_parameters_to_context(cc, as->codecpar)) < 0) {
        st = ge_fail(err, GE_E_FORMAT, "%s: bad %s parameters (%s)", fmt, out->codec,
                     ge_av_why(why, sizeof why, r));
        goto done;
    }
    cc->thread_count = 1; /* the pipeline runs decoders on its own threads */
    cc->pkt_timebase = as->time_base;
    if ((r = avcodec_open2(cc, dec, NULL)) < 0) {
        st = ge_fail(err, GE_E_FORMAT, "%s: cannot open the %s decoder (%s)", fmt, out->codec,
                     ge_av_why(why, sizeof why, r));
        goto done;
    }
    int eof = 0;
    while (!s.truncated) {
        if (!eof) {
            r = av_read_frame(fc, pkt);
            if (r == AVERROR_EOF) {
                eof = 1;
                r = avcodec_send_packet(cc, NULL);
            } else if (r < 0) {
                st = ge_fail(err, GE_E_FORMAT, "%s: corrupt or truncated data after %lld "
                             "packets (%s)", fmt, (long long)packets, ge_av_why(why, sizeof why, r));
                goto done;
            } else if (pkt->stream_index != si) {
                av_packet_unref(pkt);
                continue;
            } else {
                if (pkt->flags & AV_PKT_FLAG_CORRUPT) {
                    st = ge_fail(err, GE_E_FORMAT, "%s: truncated or corrupt packet %lld", fmt,
                                 (long long)packets);
                    goto done;
                }
                packets++;
                r = avcodec_send_packet(cc, pkt);
                av_packet_unref(pkt);
            }
            if (r < 0 && r != AVERROR(EAGAIN) && r != AVERROR_EOF) {
                st = ge_fail(err, GE_E_FORMAT, "%s: corrupt %s data in packet %lld (%s)", fmt,
                             out->codec, (long long)packets, ge_av_why(why, sizeof why, r));
                goto done;
            }
        }
        while (!s.truncated && (r = avcodec_receive_frame(cc, frm)) >= 0) {
            st = push_frame(&s, frm, &conv, &conv_cap, out, err);
            av_frame_unref(frm);
            if (st)
                goto done;
        }
        if (r == AVERROR_EOF)
            break;
        if (r < 0 && r != AVERROR(EAGAIN)) {
            st = ge_fail(err, GE_E_FORMAT, "%s: corrupt %s data in packet %lld (%s)", fmt,
                         out->codec, (long long)packets, ge_av_why(why, sizeof why, r));
            goto done;
        }
        if (eof && r == AVERROR(EAGAIN))
            break; /* a drained decoder that still says "again": nothing more will come */
    }
    /* MP4's sample table counts the packets, Matroska's header gives the duration (up to
     * a packet or two): less means the file was cut */
    if (!s.truncated && as->nb_frames > 0 && packets < as->nb_frames &&
        !strcmp(fmt, "mp4")) {
        st = ge_fail(err, GE_E_FORMAT, "%s: truncated (the sample table lists %lld packets, "
                     "the data ends after %lld)", fmt, (long long)as->nb_frames,
                     (long long)packets);
        goto done;
    }
    if (!s.truncated && s.rate && fc->duration > 0 && !strcmp(fmt, "matroska") &&
        (double)s.n_in / s.rate < (double)fc->duration / AV_TIME_BASE - 0.1) {
        st = ge_fail(err, GE_E_FORMAT, "%s: truncated (the header says %.3f s, the data ends "
                     "after %.3f s)", fmt, (double)fc->duration / AV_TIME_BASE,
                     (double)s.n_in / s.rate);
        goto done;
    }
    if (s.rate == 0) {
        st = ge_fail(err, GE_E_FORMAT, "%s: no audio samples", fmt);
        goto done;
    }
    st = sink_finish(&s, out, err);
done:
    free(conv);
    sink_free(&s);
    av_frame_free(&frm);
    av_packet_free(&pkt);
    avcodec_free_context(&cc);
    ge_av_close(&in);
    return st;
}

/* ---- decode: dispatch on the magic bytes ------------------------------------------------- */

/* Containers only FFmpeg reads here: MP4/MOV ("ftyp" box), Matroska/WebM (EBML), ADTS AAC
 * (a sync word with layer bits 00, which MP3's frames never have). */
static int ffmpeg_first(const uint8_t *p, size_t n)
{
    return (n >= 8 && !memcmp(p + 4, "ftyp", 4)) ||
           (n >= 4 && p[0] == 0x1a && p[1] == 0x45 && p[2] == 0xdf && p[3] == 0xa3) ||
           (n >= 2 && p[0] == 0xff && (p[1] & 0xf6) == 0xf0);
}

ge_status ge_audio_decode(const void *bytes, size_t len, const ge_audio_limits *lim,
                          ge_audio *out, ge_err *err)
{
    memset(out, 0, sizeof *out);
    double sec = lim && lim->max_seconds != 0 ? lim->max_seconds : GE_AUDIO_MAX_SECONDS;
    if (!(sec > 0 && sec <= GE_AUDIO_SECONDS_CAP))
        return ge_fail(err, GE_E_USAGE, "audio: max seconds %g: must be in (0, %g]", sec,
                       GE_AUDIO_SECONDS_CAP);
    int64_t max = (int64_t)floor(sec * GE_AUDIO_RATE + 0.5);
    if (max < 1)
        max = 1;
    const uint8_t *p = bytes;
    if (!p || len == 0)
        return ge_fail(err, GE_E_FORMAT, "audio: empty file");
    /* an image: say so; a video file's sound is read, as librosa.load reads it through
     * audioread's FFmpeg */
    ge_media_type t = ge_media_sniff(p, len < GE_SNIFF_BYTES ? len : GE_SNIFF_BYTES);
    if (t.truncated)
        return ge_fail(err, GE_E_FORMAT, "audio: truncated: the file ends after %zu bytes, inside "
                       "the signature of %s", len, t.what);
    if (t.kind == GE_MEDIA_IMAGE)
        return ge_fail(err, GE_E_UNSUPPORTED, "audio: %s, not audio", t.what);
    /* WAV and AIFF say how much data follows (libsndfile would quietly shorten it) */
    uint64_t shortfall = chunk_shortfall(p, len);
    if (shortfall)
        return ge_fail(err, GE_E_FORMAT, "%s: truncated (the data chunk lacks %llu bytes of what "
                       "its header says)", p[0] == 'F' ? "aiff" : "wav",
                       (unsigned long long)shortfall);
    ge_status st;
    if (ffmpeg_first(p, len)) {
        st = decode_ffmpeg(p, len, max, out, NULL, err);
    } else if (is_mpeg_audio(p, len)) {
        st = decode_mpg123(p, len, max, out, err);
    } else {
        int fallback = 0;
        st = decode_sndfile(p, len, max, out, &fallback, err);
        if (st && fallback) {
            /* when both fail: FFmpeg's error when it knows the format and libsndfile did
             * not, or when it names an unsupported codec; else libsndfile's */
            ge_err first = err ? *err : (ge_err){0};
            ge_status st1 = st;
            ge_audio_free(out);
            int probed = 1;
            st = decode_ffmpeg(p, len, max, out, &probed, err);
            if (st && (!probed || (fallback == 2 && st != GE_E_UNSUPPORTED))) {
                st = st1;
                if (err)
                    *err = first;
            }
        }
    }
    if (st != GE_OK)
        ge_audio_free(out);
    return st;
}
