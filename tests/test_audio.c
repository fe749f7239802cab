/* test_audio.c - engine/audio_decode.c and audio_mel.c without a model:
 *   - WAV built here (8/16/24/32-bit integer, float; mono/stereo; WAVE_FORMAT_EXTENSIBLE) at
 *     16 kHz decodes to exactly libsndfile's scaling (x / 2^(bits-1), (u8 - 128) / 128), the
 *     channels averaged in float32;
 *   - at 8/44.1/48 kHz the 16 kHz output has librosa's length and equals a one-shot
 *     libsoxr HQ run (so the block-wise feeding changes nothing), a 1 kHz sine stays a 1 kHz
 *     sine of the same amplitude (tolerances measured, see TOL_*), a tone above 8 kHz is
 *     filtered out;
 *   - the max-seconds cut: exact length, the same samples as a longer decode, the flag;
 *   - FLAC, Ogg Vorbis, Ogg Opus, AIFF written with libsndfile in memory decode to the signal
 *     (tolerances in test_formats), MP3, M4A, WebM and a video-only MP4 made with ffmpeg (in
 *     OUT) decode or fail as they should (tests/test_audio.sh compares their samples);
 *   - hostile input: every prefix of small files, byte flips, zero length, huge header
 *     values, text, random bytes, a video-only file: a clean error with a message, never a
 *     crash (run under `make SAN=1` too), and nothing at all written to stderr;
 *   - ge_audio_frames against docs/model.md 6.1's formulas, the front end's output identical
 *     whatever the runner and thread count (also ge_model_audio_features), and its values on
 *     silence and pure tones. tests/audio_check.py compares the values with the NumPy
 *     reference. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sndfile.h>
#include <soxr.h>

#include "check.h"
#include "ge.h"
#include "rng.h"
#include "threads.h"

/* Resampling tolerances, measured on this machine with libsoxr 0.1.3 (SOXR_HQ) on a 0.5
 * amplitude 1 kHz sine, 2 s, away from the first and last 50 ms: amplitude error < 2e-6
 * relative and residual RMS < 3e-7 after a least-squares sine fit at exactly 1 kHz (8, 44.1
 * and 48 kHz inputs). Gated an order of magnitude looser. A 9 kHz tone (above the 8 kHz
 * Nyquist) keeps < 1e-4 of its RMS. */
#define TOL_AMP 2e-5
#define TOL_RESID 3e-6
#define TOL_ALIAS 1e-4

static const char *out_dir = "build/test-out";

/* ---- byte buffers and a WAV writer --------------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t n, cap, at;
} buf;

static void put(buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
static void put16(buf *b, unsigned v) { uint8_t q[2] = {v, v >> 8}; put(b, q, 2); }
static void put32(buf *b, uint32_t v) { uint8_t q[4] = {v, v >> 8, v >> 16, v >> 24}; put(b, q, 4); }

/* kind: 8/16/24/32 integer PCM (8 unsigned), or -32 float. samples: raw integer values (or
 * float bits) in frame order. ext: WAVE_FORMAT_EXTENSIBLE. */
static buf make_wav(int kind, int ch, int rate, size_t frames, const int32_t *s, int ext)
{
    int bits = kind < 0 ? -kind : kind, bps = bits / 8;
    buf b = {0};
    size_t data = frames * ch * bps;
    put(&b, "RIFF", 4);
    put32(&b, (uint32_t)(4 + (8 + (ext ? 40 : 16)) + 8 + data));
    put(&b, "WAVEfmt ", 8);
    put32(&b, ext ? 40 : 16);
    put16(&b, ext ? 0xfffe : kind < 0 ? 3 : 1);
    put16(&b, (unsigned)ch);
    put32(&b, (uint32_t)rate);
    put32(&b, (uint32_t)(rate * ch * bps));
    put16(&b, (unsigned)(ch * bps));
    put16(&b, (unsigned)bits);
    if (ext) {
        put16(&b, 22);
        put16(&b, (unsigned)bits);
        put32(&b, ch == 1 ? 4 : 3); /* channel mask */
        /* KSDATAFORMAT_SUBTYPE_PCM / _IEEE_FLOAT */
        uint8_t guid[16] = {kind < 0 ? 3 : 1, 0, 0, 0, 0, 0, 0x10, 0, 0x80, 0, 0, 0xaa, 0, 0x38, 0x9b, 0x71};
        put(&b, guid, 16);
    }
    put(&b, "data", 4);
    put32(&b, (uint32_t)data);
    for (size_t i = 0; i < frames * ch; i++) {
        uint32_t v = (uint32_t)s[i];
        uint8_t q[4] = {v, v >> 8, v >> 16, v >> 24};
        put(&b, q, (size_t)bps);
    }
    return b;
}

/* what libsndfile's sf_read_float makes of sample v */
static float scaled(int kind, int32_t v)
{
    switch (kind) {
    case 8: return (float)(v - 128) * (1.0f / 0x80);
    case 16: return (float)v * (1.0f / 0x8000);
    case 24: return (float)(v * 256) * (1.0f / 0x80000000u); /* libsndfile shifts into int */
    case 32: return (float)v * (1.0f / 0x80000000u);
    default: {
        float f;
        memcpy(&f, &v, 4);
        return f;
    }
    }
}

static int32_t random_sample(int kind)
{
    switch (kind) {
    case 8: return (int32_t)(rnd() % 256);
    case 16: return (int32_t)(int16_t)rnd();
    case 24: return (int32_t)(rnd() % (1u << 24)) - (1 << 23);
    case 32: return (int32_t)rnd();
    default: {
        float f = frand();
        int32_t v;
        memcpy(&v, &f, 4);
        return v;
    }
    }
}

static ge_status dec(const buf *b, double max_seconds, ge_audio *a, ge_err *e)
{
    ge_audio_limits lim = {max_seconds};
    return ge_audio_decode(b->p, b->n, &lim, a, e);
}

/* ---- libsndfile writing to memory (FLAC, Ogg, AIFF test files) ---------------------------- */

static sf_count_t m_len(void *u) { return (sf_count_t)((buf *)u)->n; }
static sf_count_t m_tell(void *u) { return (sf_count_t)((buf *)u)->at; }
static sf_count_t m_seek(sf_count_t off, int whence, void *u)
{
    buf *b = u;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (sf_count_t)b->at : (sf_count_t)b->n;
    if (base + off < 0)
        return -1;
    b->at = (size_t)(base + off);
    return (sf_count_t)b->at;
}
static sf_count_t m_read(void *dst, sf_count_t n, void *u)
{
    buf *b = u;
    size_t k = b->at < b->n ? b->n - b->at : 0;
    if ((size_t)n < k)
        k = (size_t)n;
    memcpy(dst, b->p + b->at, k);
    b->at += k;
    return (sf_count_t)k;
}
static sf_count_t m_write(const void *src, sf_count_t n, void *u)
{
    buf *b = u;
    if (b->at + (size_t)n > b->cap) {
        b->cap = (b->at + (size_t)n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    if (b->at > b->n)
        memset(b->p + b->n, 0, b->at - b->n);
    memcpy(b->p + b->at, src, (size_t)n);
    b->at += (size_t)n;
    if (b->at > b->n)
        b->n = b->at;
    return n;
}

/* x: frames * ch floats */
static buf sf_make(int format, int ch, int rate, const float *x, size_t frames)
{
    buf b = {0};
    SF_VIRTUAL_IO vio = {m_len, m_seek, m_read, m_write, m_tell};
    SF_INFO info = {.samplerate = rate, .channels = ch, .format = format};
    SNDFILE *sf = sf_open_virtual(&vio, SFM_WRITE, &info, &b);
    if (!sf) {
        fprintf(stdout, "note: libsndfile cannot write format 0x%x: %s\n", format, sf_strerror(NULL));
        return b;
    }
    sf_writef_float(sf, x, (sf_count_t)frames);
    sf_close(sf);
    return b;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static float *sine(size_t n, int ch, int rate, double hz, double amp)
{
    float *x = malloc(sizeof *x * n * ch);
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < ch; c++)
            x[i * ch + c] = (float)(amp * sin(2 * M_PI * hz * (double)i / rate + c));
    return x;
}

static buf wav_float(const float *x, size_t frames, int ch, int rate)
{
    int32_t *s = malloc(sizeof *s * frames * ch + 4);
    memcpy(s, x, sizeof *s * frames * ch);
    buf b = make_wav(-32, ch, rate, frames, s, 0);
    free(s);
    return b;
}

/* least-squares fit of a sin + b cos at hz over x[lo..hi): amplitude and residual RMS */
static void fit(const float *x, size_t lo, size_t hi, double hz, double *amp, double *resid)
{
    double ss = 0, cc = 0, sc = 0, xs = 0, xc = 0;
    for (size_t i = lo; i < hi; i++) {
        double s = sin(2 * M_PI * hz * i / GE_AUDIO_RATE), c = cos(2 * M_PI * hz * i / GE_AUDIO_RATE);
        ss += s * s, cc += c * c, sc += s * c, xs += x[i] * s, xc += x[i] * c;
    }
    double det = ss * cc - sc * sc, a = (xs * cc - xc * sc) / det, b = (xc * ss - xs * sc) / det;
    double r = 0;
    for (size_t i = lo; i < hi; i++) {
        double d = x[i] - a * sin(2 * M_PI * hz * i / GE_AUDIO_RATE) - b * cos(2 * M_PI * hz * i / GE_AUDIO_RATE);
        r += d * d;
    }
    *amp = sqrt(a * a + b * b);
    *resid = sqrt(r / (double)(hi - lo));
}

static double rms(const float *x, size_t lo, size_t hi)
{
    double r = 0;
    for (size_t i = lo; i < hi; i++)
        r += (double)x[i] * x[i];
    return sqrt(r / (double)(hi - lo));
}

/* ---- decoding ------------------------------------------------------------------------------ */

static void test_wav_exact(void)
{
    const int kinds[] = {8, 16, 24, 32, -32};
    for (size_t k = 0; k < 5; k++)
        for (int ch = 1; ch <= 2; ch++)
            for (int ext = 0; ext <= (kinds[k] == 24); ext++) {
                int kind = kinds[k];
                enum { N = 3001 };
                int32_t *s = malloc(sizeof *s * N * ch);
                for (size_t i = 0; i < (size_t)N * ch; i++)
                    s[i] = random_sample(kind);
                if (kind == 16) /* the extremes */
                    s[0] = -32768, s[1] = 32767;
                buf b = make_wav(kind, ch, 16000, N, s, ext);
                ge_audio a;
                ge_err e = {0};
                ge_status st = dec(&b, 0, &a, &e);
                int bad = 0;
                for (size_t i = 0; !st && i < N; i++) {
                    float want = scaled(kind, s[i * ch]);
                    if (ch == 2)
                        want = (want + scaled(kind, s[i * ch + 1])) / 2.0f;
                    bad += memcmp(&want, &a.pcm[i], 4) != 0;
                }
                char nm[128];
                snprintf(nm, sizeof nm, "wav %s%d-bit %s 16 kHz%s decodes bit-exactly (%d samples)",
                         kind < 0 ? "float " : "", kind < 0 ? 32 : kind, ch == 1 ? "mono" : "stereo averaged",
                         ext ? " (extensible)" : "", N);
                check(!st && a.n == N && a.rate == 16000 && a.channels == ch && !a.truncated &&
                          !strcmp(a.format, "wav") && bad == 0,
                      nm, "st %d (%s), n %lld, %d samples differ", st, e.msg, (long long)a.n, bad);
                ge_audio_free(&a);
                free(b.p);
                free(s);
            }
    /* floats outside [-1, 1] pass through (no clipping), as soundfile gives them */
    float big[4] = {1.5f, -3.25f, 1e-30f, 0.0f};
    buf b = wav_float(big, 4, 1, 16000);
    ge_audio a;
    ge_err e = {0};
    check(!dec(&b, 0, &a, &e) && a.n == 4 && !memcmp(a.pcm, big, sizeof big),
          "wav float: values past +-1 are not clipped", "%s", e.msg);
    ge_audio_free(&a);
    free(b.p);
    /* a NaN or infinity is an error */
    float bad[3] = {0.5f, NAN, 0.0f};
    b = wav_float(bad, 3, 1, 16000);
    check(dec(&b, 0, &a, &e) == GE_E_FORMAT && strstr(e.msg, "sample 1") && !a.pcm,
          "wav float: a NaN sample is GE_E_FORMAT naming the sample", "%s", e.msg);
    free(b.p);
}

static void test_resample(void)
{
    const int rates[] = {8000, 44100, 48000, 22050};
    for (size_t r = 0; r < 4; r++) {
        int rate = rates[r], ch = r == 1 ? 2 : 1;
        size_t n = (size_t)rate * 2;
        float *x = sine(n, ch, rate, 1000.0, 0.5);
        if (ch == 2) /* both channels the same tone, so the average is the tone too */
            for (size_t i = 0; i < n; i++)
                x[2 * i + 1] = x[2 * i];
        buf b = wav_float(x, n, ch, rate);
        ge_audio a;
        ge_err e = {0};
        ge_status st = dec(&b, 0, &a, &e);
        int64_t want_n = (int64_t)ceil((double)n * (16000.0 / rate));
        double amp = 0, resid = 1;
        if (!st && a.n == want_n)
            fit(a.pcm, 800, (size_t)a.n - 800, 1000.0, &amp, &resid);
        char nm[160];
        snprintf(nm, sizeof nm, "resample %d Hz %s: 1 kHz sine -> %lld samples, amplitude %.7f "
                 "(err %.1e), residual RMS %.1e", rate, ch == 1 ? "mono" : "stereo",
                 (long long)a.n, amp, fabs(amp - 0.5) / 0.5, resid);
        check(!st && a.n == want_n && fabs(amp - 0.5) / 0.5 < TOL_AMP && resid < TOL_RESID, nm,
              "st %d (%s), n %lld want %lld", st, e.msg, (long long)a.n, (long long)want_n);
        /* the same as libsoxr in one call on the mono signal (librosa's way) */
        float *mono = malloc(sizeof *mono * n);
        for (size_t i = 0; i < n; i++)
            mono[i] = ch == 1 ? x[i] : (x[2 * i] + x[2 * i + 1]) / 2.0f;
        size_t olen = (size_t)want_n + 64, odone = 0;
        float *y = calloc(olen, sizeof *y);
        soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
        soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
        soxr_runtime_spec_t rt = soxr_runtime_spec(1);
        soxr_error_t se = soxr_oneshot(rate, 16000, 1, mono, n, NULL, y, olen, &odone, &io, &q, &rt);
        int same = !st && !se && a.n == want_n;
        int64_t ncmp = (int64_t)odone < want_n ? (int64_t)odone : want_n;
        for (int64_t i = 0; same && i < ncmp; i++)
            same = memcmp(&y[i], &a.pcm[i], 4) == 0;
        for (int64_t i = ncmp; same && i < want_n; i++)
            same = a.pcm[i] == 0.0f;
        snprintf(nm, sizeof nm, "resample %d Hz: equals soxr_oneshot (HQ) bit for bit", rate);
        check(same, nm, "soxr %s, oneshot gave %zu samples", se ? se : "ok", odone);
        free(y), free(mono);
        ge_audio_free(&a);
        free(b.p), free(x);
    }
    /* a 9 kHz tone at 44.1 kHz is above the new Nyquist: filtered out */
    size_t n = 44100;
    float *x = sine(n, 1, 44100, 9000.0, 0.5);
    buf b = wav_float(x, n, 1, 44100);
    ge_audio a;
    ge_err e = {0};
    double r = 1;
    if (!dec(&b, 0, &a, &e))
        r = rms(a.pcm, 800, (size_t)a.n - 800) / (0.5 / sqrt(2));
    check(r < TOL_ALIAS, "resample: a 9 kHz tone at 44.1 kHz is removed", "relative RMS %.2e (%s)", r, e.msg);
    ge_audio_free(&a);
    free(b.p), free(x);
}

static void test_truncate(void)
{
    ge_audio a, full;
    ge_err e = {0};
    /* 45 s at 16 kHz: the first 30 s exactly */
    size_t n = 45 * 16000;
    int32_t *s = malloc(sizeof *s * n);
    for (size_t i = 0; i < n; i++)
        s[i] = (int32_t)(int16_t)(i * 7919u);
    buf b = make_wav(16, 1, 16000, n, s, 0);
    int ok = !dec(&b, 0, &a, &e) && a.n == 480000 && a.truncated;
    for (size_t i = 0; ok && i < 480000; i++)
        ok = a.pcm[i] == scaled(16, s[i]);
    check(ok, "truncate: 45 s at 16 kHz -> the first 480000 samples, flagged", "%s n=%lld", e.msg, (long long)a.n);
    ge_audio_free(&a);
    check(!dec(&b, 7.3, &a, &e) && a.n == 116800 && a.truncated && a.pcm[116799] == scaled(16, s[116799]),
          "truncate: max 7.3 s -> 116800 samples", "%s n=%lld", e.msg, (long long)a.n);
    ge_audio_free(&a);
    free(b.p);
    /* exactly 30 s: not truncated */
    b = make_wav(16, 1, 16000, 480000, s, 0);
    check(!dec(&b, 0, &a, &e) && a.n == 480000 && !a.truncated, "truncate: exactly 30 s is kept whole",
          "%s n=%lld t=%d", e.msg, (long long)a.n, a.truncated);
    ge_audio_free(&a);
    free(b.p), free(s);
    /* 45 s at 44.1 kHz stereo: the cut output equals the first 30 s of a 60 s decode */
    n = 45 * 44100;
    s = malloc(sizeof *s * n * 2);
    for (size_t i = 0; i < n * 2; i++)
        s[i] = (int32_t)(12000 * sin(0.01 * (double)i * (1 + (double)(i % 2))));
    b = make_wav(16, 2, 44100, n, s, 0);
    ge_status st1 = dec(&b, 0, &a, &e), st2 = dec(&b, 60, &full, &e);
    ok = !st1 && !st2 && a.n == 480000 && a.truncated && full.n == 720000 && !full.truncated &&
         !memcmp(a.pcm, full.pcm, 480000 * sizeof(float));
    check(ok, "truncate: 45 s at 44.1 kHz stereo -> 480000 samples equal to the full decode's",
          "%s n=%lld full=%lld", e.msg, (long long)a.n, (long long)full.n);
    ge_audio_free(&a), ge_audio_free(&full);
    free(b.p), free(s);
    /* the limit itself */
    int32_t two[2] = {0, 0};
    buf tiny = make_wav(16, 1, 16000, 2, two, 0);
    check(dec(&tiny, -1, &a, &e) == GE_E_USAGE && dec(&tiny, GE_AUDIO_SECONDS_CAP + 1, &a, &e) == GE_E_USAGE &&
              dec(&tiny, NAN, &a, &e) == GE_E_USAGE,
          "truncate: a negative, NaN or over-cap max seconds is GE_E_USAGE", "%s", e.msg);
    free(tiny.p);
}

/* ---- other formats ------------------------------------------------------------------------- */

/* decode b and compare with x (frames at 16 kHz mono): the max abs error (lossless codecs),
 * or (rel) the RMS of the error over the RMS of x away from the first and last 20 ms (lossy
 * codecs fade in and out at the ends) */
static double decode_err(const buf *b, const float *x, size_t frames, int rel, ge_audio *a,
                         ge_err *e, ge_status *st)
{
    *st = dec(b, 0, a, e);
    if (*st || (size_t)a->n != frames)
        return INFINITY;
    double m = 0, d2 = 0, x2 = 0;
    for (size_t i = 0; i < frames; i++) {
        double d = (double)a->pcm[i] - x[i];
        m = fmax(m, fabs(d));
        if (i >= 320 && i + 320 < frames)
            d2 += d * d, x2 += (double)x[i] * x[i];
    }
    return rel ? sqrt(d2 / x2) : m;
}

static buf readfile(const char *path)
{
    buf b = {0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return b;
    uint8_t tmp[65536];
    size_t k;
    while ((k = fread(tmp, 1, sizeof tmp, f)) > 0)
        put(&b, tmp, k);
    fclose(f);
    return b;
}

static void hostile(const char *name, const buf *b, size_t ok_from, size_t step);

static void test_formats(void)
{
    enum { N = 8000 }; /* 0.5 s at 16 kHz */
    float *x = sine(N, 1, 16000, 440.0, 0.4);
    for (size_t i = 0; i < N; i++)
        x[i] += (float)(0.1 * sin(2 * M_PI * 2500.0 * i / 16000));
    /* lossless: max abs error within the 16/24-bit quantisation step; lossy (libsndfile's
     * default quality): relative RMS error, measured 1.6% (Vorbis) and 2.3% (Opus) */
    struct { const char *name; int format; double tol; int lossy, prefixes; } fm[] = {
        {"flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 1.0 / 32768, 0, 1},
        {"aiff", SF_FORMAT_AIFF | SF_FORMAT_PCM_24, 1.0 / 8388608, 0, 1},
        {"ogg vorbis", SF_FORMAT_OGG | SF_FORMAT_VORBIS, 0.03, 1, 1},
        {"ogg opus", SF_FORMAT_OGG | SF_FORMAT_OPUS, 0.06, 1, 0},
    };
    for (size_t f = 0; f < sizeof fm / sizeof *fm; f++) {
        buf b = sf_make(fm[f].format, 1, 16000, x, N);
        ge_audio a;
        ge_err e = {0};
        ge_status st;
        double err = decode_err(&b, x, N, fm[f].lossy, &a, &e, &st);
        char nm[160];
        snprintf(nm, sizeof nm, "%s (libsndfile-written, %zu bytes): decodes to the signal within %.3g "
                 "(%s %.3g)", fm[f].name, b.n, fm[f].tol, fm[f].lossy ? "relative RMS error" : "max error", err);
        check(b.n > 0 && err <= fm[f].tol, nm, "st %d (%s), n %lld", st, e.msg, (long long)a.n);
        ge_audio_free(&a);
        if (b.n) /* prefixes and flips: clean errors (Ogg pages: a cut file may be a shorter
                  * valid stream, so only the flips and the header prefixes count there) */
            hostile(fm[f].name, &b, fm[f].prefixes ? b.n : 0, b.n > 4000 ? 3 : 1);
        free(b.p);
    }
    free(x);

    /* FFmpeg-made files (and an MP3 for libmpg123): in OUT, from a 16 kHz mono WAV */
    char wav[512], cmd[2048];
    snprintf(wav, sizeof wav, "%s/test_audio_src.wav", out_dir);
    size_t n = 16000;
    int32_t *s = malloc(sizeof *s * n);
    for (size_t i = 0; i < n; i++)
        s[i] = (int32_t)(9000 * sin(2 * M_PI * 440.0 * i / 16000) + 3000 * sin(2 * M_PI * 1700.0 * i / 16000));
    buf src = make_wav(16, 1, 16000, n, s, 0);
    FILE *f = fopen(wav, "wb");
    if (f) {
        fwrite(src.p, 1, src.n, f);
        fclose(f);
    }
    static const struct { const char *ext, *args, *fmt, *codec; } ff[] = {
        {"mp3", "-c:a libmp3lame -b:a 64k", "mp3", "mp3"},
        {"m4a", "-c:a aac -b:a 64k -movflags +faststart", "mp4", "aac"},
        {"webm", "-c:a libopus -b:a 48k", "matroska", "opus"},
        /* a WAV whose codec libsndfile lacks: FFmpeg takes it */
        {"wav", "-c:a libmp3lame -b:a 64k", "wav", "mp3"},
    };
    for (size_t i = 0; i < sizeof ff / sizeof *ff; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/test_audio.%s", out_dir, ff[i].ext);
        snprintf(cmd, sizeof cmd, "ffmpeg -nostdin -loglevel error -y -i %s %s %s 2>/dev/null", wav, ff[i].args, path);
        int rc = system(cmd);
        buf b = readfile(path);
        ge_audio a;
        ge_err e = {0};
        ge_status st = dec(&b, 0, &a, &e);
        char nm[160];
        snprintf(nm, sizeof nm, "%s made by ffmpeg decodes (%s, %s, ~1 s at 16 kHz)", ff[i].ext, ff[i].fmt, ff[i].codec);
        check(rc == 0 && !st && !strcmp(a.format, ff[i].fmt) && !strcmp(a.codec, ff[i].codec) &&
                  a.n > 15000 && a.n < 17500,
              nm, "ffmpeg rc %d, st %d (%s), %s/%s n %lld", rc, st, e.msg, a.format ? a.format : "-",
              a.codec ? a.codec : "-", (long long)a.n);
        ge_audio_free(&a);
        if (b.n && strcmp(ff[i].ext, "wav"))
            hostile(ff[i].ext, &b, strcmp(ff[i].ext, "webm") ? b.n : 0, 5);
        free(b.p);
    }
    /* a video-only MP4 */
    char path[600];
    snprintf(path, sizeof path, "%s/test_audio_video.mp4", out_dir);
    snprintf(cmd, sizeof cmd, "ffmpeg -nostdin -loglevel error -y -f lavfi -i testsrc=d=0.2:s=32x32 -c:v mpeg4 %s 2>/dev/null", path);
    int rc = system(cmd);
    buf b = readfile(path);
    ge_audio a;
    ge_err e = {0};
    check(rc == 0 && dec(&b, 0, &a, &e) == GE_E_UNSUPPORTED && strstr(e.msg, "no audio stream") && !a.pcm,
          "a video-only MP4 is GE_E_UNSUPPORTED: no audio stream", "rc %d: %s", rc, e.msg);
    free(b.p), free(src.p), free(s);
}

/* ---- hostile input -------------------------------------------------------------------------- */

/* every prefix (in steps of `step` past the first 256 bytes) before ok_from must fail with a
 * message; every prefix and 300 byte-flipped copies must decode or fail cleanly */
static void hostile(const char *name, const buf *b, size_t ok_from, size_t step)
{
    int bad = 0, tried = 0;
    for (size_t n = 0; n < b->n; n += n < 256 ? 1 : step) {
        ge_audio a;
        ge_err e = {0};
        ge_status st = ge_audio_decode(b->p, n, NULL, &a, &e);
        tried++;
        if (st == GE_OK) {
            bad += n < ok_from || a.n < 1 || !a.pcm;
            ge_audio_free(&a);
        } else {
            bad += !e.msg[0] || a.pcm != NULL || a.n != 0;
        }
    }
    char nm[160];
    snprintf(nm, sizeof nm, "%s: %d prefixes %s", name, tried,
             ok_from ? "are clean errors" : "decode or fail cleanly");
    check(bad == 0, nm, "%d prefixes decoded or gave no message", bad);
    uint8_t *c = malloc(b->n);
    int errors = 0, unclean = 0;
    for (int t = 0; t < 300; t++) {
        memcpy(c, b->p, b->n);
        for (int k = 0; k < 1 + t % 4; k++)
            c[rnd() % b->n] ^= (uint8_t)(1 + rnd() % 255);
        ge_audio a;
        ge_err e = {0};
        if (ge_audio_decode(c, b->n, NULL, &a, &e) != GE_OK) {
            errors++;
            unclean += !e.msg[0] || a.pcm != NULL;
        } else {
            unclean += a.n < 1 || !a.pcm;
        }
        ge_audio_free(&a);
    }
    free(c);
    snprintf(nm, sizeof nm, "%s: 300 byte-flipped copies decode or fail cleanly (%d failed)", name, errors);
    check(unclean == 0, nm, "%d unclean results", unclean);
}

static buf wav_header(int fmt, int ch, uint32_t rate, int bits, uint32_t data_size, size_t data_have)
{
    buf b = {0};
    put(&b, "RIFF", 4);
    put32(&b, (uint32_t)(36 + data_have));
    put(&b, "WAVEfmt ", 8);
    put32(&b, 16);
    put16(&b, (unsigned)fmt);
    put16(&b, (unsigned)ch);
    put32(&b, rate);
    put32(&b, rate * (uint32_t)ch * (uint32_t)(bits / 8));
    put16(&b, (unsigned)(ch * (bits / 8)));
    put16(&b, (unsigned)bits);
    put(&b, "data", 4);
    put32(&b, data_size);
    for (size_t i = 0; i < data_have; i++)
        put(&b, (uint8_t[]){(uint8_t)(i * 37)}, 1);
    return b;
}

static void test_hostile(void)
{
    /* a small stereo 44.1 kHz WAV: every prefix shorter than the whole is an error */
    enum { N = 300 };
    int32_t s[N * 2];
    for (int i = 0; i < N * 2; i++)
        s[i] = (int32_t)(int16_t)rnd();
    buf b = make_wav(16, 2, 44100, N, s, 0);
    hostile("wav 16-bit stereo 44.1 kHz", &b, b.n, 1);
    free(b.p);

    ge_audio a;
    ge_err e = {0};
    check(ge_audio_decode("", 0, NULL, &a, &e) == GE_E_FORMAT && strstr(e.msg, "empty") &&
              ge_audio_decode(NULL, 0, NULL, &a, &e) == GE_E_FORMAT,
          "zero-length input is GE_E_FORMAT (empty)", "%s", e.msg);
    b = wav_header(1, 1, 16000, 16, 0, 0);
    check(dec(&b, 0, &a, &e) == GE_E_FORMAT && strstr(e.msg, "no audio"),
          "a WAV with no samples is GE_E_FORMAT", "%s", e.msg);
    free(b.p);
    static const struct { const char *what; int fmt, ch; uint32_t rate; int bits; uint32_t size; size_t have; ge_status want; } hv[] = {
        {"65535 channels", 1, 65535, 16000, 16, 1 << 20, 4096, GE_E_FORMAT},
        {"200 channels", 1, 200, 16000, 16, 400, 400, GE_E_LIMIT},
        {"0 channels", 1, 0, 16000, 16, 400, 400, GE_E_FORMAT},
        {"rate 0", 1, 1, 0, 16, 400, 400, GE_E_FORMAT},
        {"rate 500 Hz", 1, 1, 500, 16, 400, 400, GE_E_UNSUPPORTED},
        {"rate 4 GHz", 1, 1, 4000000000u, 16, 400, 400, GE_E_FORMAT},
        {"rate 1 MHz", 1, 1, 1000000, 16, 400, 400, GE_E_UNSUPPORTED},
        {"0 bits", 1, 1, 16000, 0, 400, 400, GE_E_FORMAT},
        {"unknown codec 0x1234", 0x1234, 1, 16000, 16, 400, 400, GE_E_FORMAT},
        {"data size 2^31 - 1 in 400 bytes (streamed: what is there)", 1, 1, 16000, 16, 0x7fffffff, 400, GE_OK},
        {"data size 100000 in 400 bytes", 1, 1, 16000, 16, 100000, 400, GE_E_FORMAT},
    };
    for (size_t i = 0; i < sizeof hv / sizeof *hv; i++) {
        b = wav_header(hv[i].fmt, hv[i].ch, hv[i].rate, hv[i].bits, hv[i].size, hv[i].have);
        ge_status st = dec(&b, 0, &a, &e);
        char nm[160];
        snprintf(nm, sizeof nm, "wav header with %s: %s", hv[i].what, ge_status_name(hv[i].want));
        /* libsndfile rejects some of these itself (GE_E_FORMAT); ours are named */
        check(st == hv[i].want && (st == GE_OK ? a.n == 200 : e.msg[0] && !a.pcm), nm, "got %s: %s",
              ge_status_name(st), st ? e.msg : "ok");
        ge_audio_free(&a);
        free(b.p);
    }
    const char *text = "This is not audio.\nJust some text, a few lines of it.\n";
    check(ge_audio_decode(text, strlen(text), NULL, &a, &e) == GE_E_UNSUPPORTED &&
              strstr(e.msg, "unsupported format"),
          "a text file is GE_E_UNSUPPORTED (unsupported format)", "%s", e.msg);
    uint8_t junk[4096];
    int unclean = 0;
    for (int t = 0; t < 200; t++) {
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (uint8_t)rnd();
        if (t % 4 == 1) /* a frame sync: it goes to libmpg123 */
            junk[0] = 0xff, junk[1] = 0xfb;
        if (t % 4 == 2)
            memcpy(junk, "ID3\3\0\0\0\0\1\0", 10);
        if (t % 4 == 3)
            memcpy(junk, "RIFF\0\1\0\0WAVEfmt ", 16);
        ge_status st = ge_audio_decode(junk, 64 + rnd() % (sizeof junk - 64), NULL, &a, &e);
        unclean += st ? !e.msg[0] || a.pcm != NULL : a.n < 1;
        ge_audio_free(&a);
    }
    check(unclean == 0, "200 random buffers (some with MP3/ID3/RIFF starts) decode or fail cleanly",
          "%d unclean", unclean);
}

/* ---- the front end -------------------------------------------------------------------------- */

static void pool_run(void *pool, int64_t n, ge_task_fn fn, void *ctx)
{
    ge_pool_run(pool, n, ge_pool_size(pool), fn, ctx);
}

static void test_frames(void)
{
    /* n, official frames, valid, llamacpp frames (docs/model.md 6.1 and llama.cpp's gemma4a) */
    static const int64_t t[][4] = {
        {0, 0, 0, 0},           {1, 0, 0, 0},           {2, 0, 0, 1},
        {80, 0, 0, 1},          {128, 0, 0, 1},         {129, 1, 0, 1},
        {160, 1, 0, 1},         {161, 1, 1, 1},         {256, 1, 1, 1},
        {257, 2, 1, 1},         {320, 2, 1, 1},         {321, 2, 2, 2},
        {16000, 99, 99, 99},    {116800, 730, 729, 729}, {479, 3, 2, 2},
        {480000, 2999, 2999, 2999}, {480001, 3000, 3000, 3000}, {-5, 0, 0, 0},
    };
    int bad = 0;
    char detail[200] = "";
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        int64_t v, vl, f = ge_audio_frames(t[i][0], GE_SEM_OFFICIAL, &v);
        int64_t fl = ge_audio_frames(t[i][0], GE_SEM_LLAMACPP, &vl);
        if (f != t[i][1] || v != t[i][2] || fl != t[i][3] || vl != fl) {
            bad++;
            snprintf(detail, sizeof detail, "n=%lld: official %lld/%lld, llamacpp %lld/%lld", (long long)t[i][0],
                     (long long)f, (long long)v, (long long)fl, (long long)vl);
        }
    }
    check(bad == 0, "frames: the docs/model.md 6.1 counts (0..161 samples, 1 s, 7.3 s, 30 s) both semantics",
          "%d wrong, last %s", bad, detail);
    /* soft tokens (L + 3) / 4 from docs/model.md 6.1: 479 / 350 / 199 frames -> 120 / 88 / 50 */
    int64_t v1, v2, v3;
    ge_audio_frames(479 * 160 + 1, GE_SEM_OFFICIAL, &v1);
    ge_audio_frames(350 * 160 + 1, GE_SEM_OFFICIAL, &v2);
    ge_audio_frames(199 * 160 + 1, GE_SEM_OFFICIAL, &v3);
    check(v1 == 479 && v2 == 350 && v3 == 199 && (v1 + 3) / 4 == 120,
          "frames: 479/350/199 valid frames from 160 L + 1 samples", "%lld %lld %lld", (long long)v1,
          (long long)v2, (long long)v3);
}

static void test_features(void)
{
    ge_err e = {0};
    size_t n = 16000 * 7 + 4321;
    float *x = malloc(sizeof *x * n);
    for (size_t i = 0; i < n; i++)
        x[i] = 0.3f * frand() + (float)(0.2 * sin(0.05 * (double)i));
    for (int sem = 0; sem <= 1; sem++) {
        int64_t frames = ge_audio_frames((int64_t)n, sem, NULL);
        size_t bytes = sizeof(float) * (size_t)frames * GE_AUDIO_MEL;
        float *ref = malloc(bytes), *got = malloc(bytes);
        ge_status st = ge_audio_features(x, (int64_t)n, sem, ref, NULL, &e);
        int same = !st;
        for (int threads = 1; threads <= 3; threads++) {
            ge_pool *p = NULL;
            if (ge_pool_create(&p, threads, NULL, false, &e)) {
                same = 0;
                break;
            }
            ge_runner r = {pool_run, p};
            memset(got, 0xff, bytes);
            same &= !ge_audio_features(x, (int64_t)n, sem, got, &r, &e) && !memcmp(ref, got, bytes);
            ge_pool_free(p);
        }
        char nm[128];
        snprintf(nm, sizeof nm, "features %s: byte-identical serial and on 1/2/3-thread pools (%lld frames)",
                 sem ? "llamacpp" : "official", (long long)frames);
        check(same, nm, "%s", e.msg);
        if (sem == GE_SEM_OFFICIAL) {
            ge_config cfg;
            ge_config_defaults(&cfg);
            cfg.v[GE_CFG_THREADS] = 2;
            ge_model *m = NULL;
            st = ge_model_open(&m, "testdata/tiny-f32.gguf", &cfg, &e);
            memset(got, 0xff, bytes);
            check(!st && !ge_model_audio_features(m, x, (int64_t)n, got, &e) && !memcmp(ref, got, bytes),
                  "ge_model_audio_features (2-thread pool, official) equals the serial front end", "%s", e.msg);
            ge_model_free(m);
        }
        free(ref), free(got);
    }
    free(x);

    /* silence: ln(0.001) on valid frames, zeros past them (official); 1000 samples: 6 frames,
     * 6 valid; 1100 samples: padded to 1152, 7 frames, 6 valid */
    float zero[1100] = {0}, f[7 * GE_AUDIO_MEL];
    int ok = !ge_audio_features(zero, 1100, GE_SEM_OFFICIAL, f, NULL, &e);
    for (int i = 0; ok && i < 7 * GE_AUDIO_MEL; i++)
        ok = f[i] == (i < 6 * GE_AUDIO_MEL ? (float)log(0.001) : 0.0f);
    check(ok, "features: silence is ln(0.001), the frame past the audio is zeros", "%s", e.msg);
    /* a tone at 1000 Hz: the strongest band is the one whose centre is nearest 1000 Hz
     * (HTK: m(1000) / m(8000) * 129 - 1 = 44.4 -> band 44 or 45) */
    float *tone = sine(16000, 1, 16000, 1000.0, 0.5), g[99 * GE_AUDIO_MEL];
    ok = !ge_audio_features(tone, 16000, GE_SEM_OFFICIAL, g, NULL, &e);
    int best = 0;
    for (int m = 1; m < GE_AUDIO_MEL; m++)
        if (g[50 * GE_AUDIO_MEL + m] > g[50 * GE_AUDIO_MEL + best])
            best = m;
    check(ok && (best == 44 || best == 45), "features: a 1 kHz tone peaks in mel band 44/45",
          "band %d", best);
    free(tone);
    check(ge_audio_features(zero, -1, GE_SEM_OFFICIAL, f, NULL, &e) == GE_E_USAGE &&
              ge_audio_features(NULL, 10, GE_SEM_OFFICIAL, f, NULL, &e) == GE_E_USAGE &&
              !ge_audio_features(NULL, 0, GE_SEM_OFFICIAL, f, NULL, &e),
          "features: bad arguments are GE_E_USAGE; no samples is no frames", "%s", e.msg);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        out_dir = argv[1];
    /* the library must print nothing: stderr goes to a file that must stay empty */
    char errpath[600];
    snprintf(errpath, sizeof errpath, "%s/test_audio.stderr", out_dir);
    fflush(stderr);
    int saved = dup(2), fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0)
        dup2(fd, 2);
    test_wav_exact();
    test_resample();
    test_truncate();
    test_formats();
    test_hostile();
    test_frames();
    test_features();
    fflush(stderr);
    if (fd >= 0) {
        dup2(saved, 2);
        close(fd);
    }
    buf err = readfile(errpath);
    check(fd >= 0 && err.n == 0, "nothing was written to stderr by the decoders",
          "%zu bytes, starting: %.200s", err.n, err.n ? (char *)err.p : "");
    free(err.p);
    return check_done();
}
