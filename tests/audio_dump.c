/* audio_dump.c - a helper for tests/audio_check.py and tests/test_audio.sh (not a test itself:
 * tests/run only runs test_* binaries). It exposes engine/audio_decode.c and audio_mel.c:
 *   audio_dump decode FILE OUT.f32 [MAX_SECONDS]
 *       decode; write the 16 kHz mono float32 samples; print "N RATE CHANNELS FORMAT CODEC
 *       TRUNCATED"
 *   audio_dump mel INPUT OUT.f32 official|llamacpp [THREADS [MAX_SECONDS]]
 *       features [FRAMES][128] float32 of INPUT: an audio file (decoded as above) or raw:PATH
 *       (float32 samples at 16 kHz, used as they are); THREADS (default 1) runs the frames on
 *       a pool of that size; print "FRAMES VALID N"
 *   audio_dump sfdecode FILE OUT.f32
 *       the reference for our MP3 reader: libsndfile's own sf_readf_float (as soundfile reads
 *       it), channels averaged in float32; 16 kHz files only (no resampling); print "N"
 *   audio_dump bench SECONDS|FILE... [-t THREADS] [-r REPEAT]
 *       best-of-REPEAT times of the front end on synthetic clips of each length, and of
 *       decode (+ resampling) of WAV files of that length at 16 kHz mono and 44.1 kHz stereo
 *       (16-bit, built in memory); for a FILE, of decoding it (in memory, up to 3600 s);
 *       one line per argument
 *   audio_dump tower TEXT MMPROJ FEAT.f32 VALID fast|ref OUT.f32 [NAME=VALUE switches...]
 *       the audio tower of MMPROJ on features [>= VALID][128] (the first VALID real): write
 *       the (VALID + 3) / 4 soft tokens; with AUDIO_DUMP_REPEAT=N, N more runs after a
 *       warm-up and the median time to stderr
 *   audio_dump clip TEXT MMPROJ INPUT OUT.f32 [NAME=VALUE switches...]
 *       ge_model_encode_audio (front end + tower, as the CLI runs it) on INPUT (an audio file
 *       or raw:PATH); AUDIO_DUMP_REPEAT as for tower; print "TOKENS SAMPLES"
 * Errors print "error: STATUS: MESSAGE" and exit 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sndfile.h>

#include "dump_util.h"
#include "ge.h"
#include "audio_tower.h"
#include "model.h"
#include "threads.h"

static void pool_run(void *pool, int64_t n, ge_task_fn fn, void *ctx)
{
    ge_pool_run(pool, n, ge_pool_size(pool), fn, ctx);
}

/* a 16-bit WAV of n frames of ch channels at rate, from a deterministic mix of tones */
static uint8_t *make_wav(int64_t n, int ch, int rate, size_t *len)
{
    size_t data = (size_t)n * ch * 2;
    uint8_t *b = malloc(44 + data);
    uint32_t v[] = {36 + (uint32_t)data, 16, 1 | (uint32_t)ch << 16, (uint32_t)rate,
                    (uint32_t)(rate * ch * 2), (uint32_t)(ch * 2) | 16u << 16, (uint32_t)data};
    memcpy(b, "RIFF", 4), memcpy(b + 4, &v[0], 4), memcpy(b + 8, "WAVEfmt ", 8);
    memcpy(b + 16, &v[1], 20), memcpy(b + 36, "data", 4), memcpy(b + 40, &v[6], 4);
    int16_t *s = (int16_t *)(b + 44);
    for (int64_t i = 0; i < n; i++)
        for (int c = 0; c < ch; c++) {
            double t = (double)i / rate;
            s[i * ch + c] = (int16_t)(8000 * sin(2 * M_PI * (220 + 110 * c) * t) +
                                      3000 * sin(2 * M_PI * 3100 * t));
        }
    *len = 44 + data;
    return b;
}

static int bench(int argc, char **argv)
{
    int threads = 1, reps = 5;
    ge_err e = {0};
    for (int a = 2; a < argc; a++) {
        if (!strcmp(argv[a], "-t") && a + 1 < argc)
            threads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "-r") && a + 1 < argc)
            reps = atoi(argv[++a]);
    }
    ge_pool *pool = NULL;
    if (ge_pool_create(&pool, threads, NULL, false, &e))
        return die(&e);
    ge_runner run = {pool_run, pool};
    ge_audio_limits lim = {GE_AUDIO_SECONDS_CAP};
    for (int a = 2; a < argc; a++) {
        if (!strcmp(argv[a], "-t") || !strcmp(argv[a], "-r")) {
            a++;
            continue;
        }
        char *end;
        double sec = strtod(argv[a], &end);
        if (*end) { /* a file: decode it in memory */
            size_t len;
            void *data = slurp(argv[a], &len);
            double best = 1e9;
            ge_audio au = {0};
            for (int r = 0; r < reps; r++) {
                ge_audio_free(&au);
                double t0 = now();
                if (ge_audio_decode(data, len, &lim, &au, &e))
                    return die(&e);
                best = fmin(best, now() - t0);
            }
            printf("%s: %.1f s of %s/%s at %d Hz, %d ch -> decode + resample %.2f ms (best of %d)\n",
                   argv[a], (double)au.n / GE_AUDIO_RATE, au.format, au.codec, au.rate,
                   au.channels, best * 1e3, reps);
            ge_audio_free(&au);
            free(data);
            continue;
        }
        int64_t n = (int64_t)(sec * GE_AUDIO_RATE);
        float *pcm = malloc(sizeof *pcm * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            pcm[i] = (float)(0.3 * sin(0.07 * i) + 0.1 * sin(0.9 * i + 0.001 * i * i / n));
        int64_t frames = ge_audio_frames(n, GE_SEM_OFFICIAL, NULL);
        float *feat = malloc(sizeof *feat * (size_t)(frames ? frames : 1) * GE_AUDIO_MEL);
        double best_mel = 1e9, best_d16 = 1e9, best_d44 = 1e9;
        size_t l16, l44;
        uint8_t *w16 = make_wav(n, 1, 16000, &l16);
        uint8_t *w44 = make_wav((int64_t)(sec * 44100), 2, 44100, &l44);
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            if (ge_audio_features(pcm, n, GE_SEM_OFFICIAL, feat, &run, &e))
                return die(&e);
            double t1 = now();
            ge_audio au;
            if (ge_audio_decode(w16, l16, &lim, &au, &e))
                return die(&e);
            ge_audio_free(&au);
            double t2 = now();
            if (ge_audio_decode(w44, l44, &lim, &au, &e))
                return die(&e);
            ge_audio_free(&au);
            double t3 = now();
            best_mel = fmin(best_mel, t1 - t0);
            best_d16 = fmin(best_d16, t2 - t1);
            best_d44 = fmin(best_d44, t3 - t2);
        }
        printf("%6.1f s: %5lld frames, front end %7.2f ms (%d thread%s); decode WAV 16 kHz mono "
               "%7.2f ms, 44.1 kHz stereo + resample %7.2f ms (best of %d)\n",
               sec, (long long)frames, best_mel * 1e3, threads, threads == 1 ? "" : "s",
               best_d16 * 1e3, best_d44 * 1e3, reps);
        free(pcm), free(feat), free(w16), free(w44);
    }
    ge_pool_free(pool);
    return 0;
}

/* The pcm of an audio file, or of raw:PATH (float32 at 16 kHz as it is). */
static ge_status load_pcm(const char *arg, const ge_audio_limits *lim, ge_audio *au, ge_err *e)
{
    size_t len;
    memset(au, 0, sizeof *au);
    if (!strncmp(arg, "raw:", 4)) {
        au->pcm = slurp(arg + 4, &len);
        au->n = (int64_t)(len / sizeof(float));
        return GE_OK;
    }
    void *b = slurp(arg, &len);
    ge_status st = ge_audio_decode(b, len, lim, au, e);
    free(b);
    return st;
}

/* Run f(ctx) once, then AUDIO_DUMP_REPEAT more times with the median to stderr. */
static int timed(int (*f)(void *), void *ctx, const char *what)
{
    const char *rep = getenv("AUDIO_DUMP_REPEAT");
    int reps = rep ? atoi(rep) : 0, rc;
    double t[64];
    reps = reps < 64 ? reps : 64;
    if ((rc = f(ctx)))
        return rc;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if ((rc = f(ctx)))
            return rc;
        t[r] = now() - t0;
    }
    if (reps > 0) {
        double lo = t[0], hi = t[0];
        for (int r = 1; r < reps; r++)
            lo = t[r] < lo ? t[r] : lo, hi = t[r] > hi ? t[r] : hi;
        fprintf(stderr, "%s: median %.3f s over %d (min %.3f, max %.3f)\n", what,
                median(t, reps), reps, lo, hi);
    }
    return 0;
}

typedef struct {
    ge_model *m;
    ge_audio_tower *t;
    bool fast;
    const float *feat, *pcm;
    int64_t valid, n;
    float *out;
} tower_run;

static int run_tower(void *ctx)
{
    tower_run *r = ctx;
    ge_err e = {0};
    if (r->t ? ge_audio_tower_encode(&r->m->cx, r->t, r->fast, r->feat, r->valid, r->out, NULL, &e)
             : ge_model_encode_audio(r->m, r->pcm, r->n, r->out, &e))
        return die(&e);
    return 0;
}

static int tower(int argc, char **argv, bool clip)
{
    ge_config cfg;
    ge_err e = {0};
    const int sw = clip ? 6 : 8;
    if (parse_switches(&cfg, sw, argc, argv))
        return 2;
    tower_run r = {0};
    if (ge_model_open(&r.m, argv[2], &cfg, &e))
        return die(&e);
    const int H = ge_model_hidden(r.m);
    size_t len;
    ge_audio au = {0};
    int64_t tokens;
    if (clip) {
        if (ge_model_set_mmproj(r.m, (const char *const[]){argv[3]}, 1, &e) ||
            load_pcm(argv[4], NULL, &au, &e))
            return die(&e);
        r.pcm = au.pcm, r.n = au.n;
        tokens = ge_model_audio_tokens(r.m, au.n);
    } else {
        if (ge_audio_tower_open(&r.t, argv[3], H, &e))
            return die(&e);
        r.feat = slurp(argv[4], &len);
        r.valid = atoll(argv[5]);
        r.fast = !strcmp(argv[6], "fast");
        if ((int64_t)(len / sizeof(float) / GE_AUDIO_MEL) < r.valid) {
            fprintf(stderr, "%s: fewer than %lld frames\n", argv[4], (long long)r.valid);
            return 2;
        }
        tokens = (r.valid + 3) / 4;
    }
    r.out = malloc((size_t)(tokens > 0 ? tokens : 1) * H * sizeof *r.out);
    int rc = timed(run_tower, &r, argv[4]);
    if (!rc && getenv("AUDIO_DUMP_REPEAT")) { /* where the time went, over all the runs */
        ge_stats st;
        ge_model_stats(r.m, &st);
        /* the tower alone runs under the phase the model is in (text); the CLI's way under audio */
        const ge_op_stats *o = &st.ops[r.t ? GE_PHASE_TEXT : GE_PHASE_AUDIO];
        for (int op = 0; op < GE_OP_COUNT; op++)
            if (o->calls[op])
                fprintf(stderr, "  %-10s %8.3f s %8llu calls %8.1f GMAC/s\n", ge_op_name(op),
                        o->seconds[op], o->calls[op],
                        o->seconds[op] > 0 ? o->macs[op] / o->seconds[op] * 1e-9 : 0.0);
        fprintf(stderr, "  audio      %8.3f s (front end + tower)\n", st.audio_seconds);
    }
    if (!rc) {
        spit(argv[clip ? 5 : 7], r.out, (size_t)tokens * H * sizeof *r.out);
        if (clip)
            printf("%lld %lld\n", (long long)tokens, (long long)au.n);
    }
    free(r.out);
    free((void *)r.feat);
    ge_audio_free(&au);
    ge_audio_tower_free(r.t);
    ge_model_free(r.m);
    return rc;
}

int main(int argc, char **argv)
{
    ge_err e = {0};
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "decode")) {
        ge_audio_limits lim = {argc == 5 ? atof(argv[4]) : 0};
        size_t len;
        void *b = slurp(argv[2], &len);
        ge_audio au;
        ge_status st = ge_audio_decode(b, len, &lim, &au, &e);
        free(b);
        if (st)
            return die(&e);
        spit(argv[3], au.pcm, (size_t)au.n * sizeof *au.pcm);
        printf("%lld %d %d %s %s %d\n", (long long)au.n, au.rate, au.channels, au.format,
               au.codec, au.truncated);
        ge_audio_free(&au);
        return 0;
    }
    if (argc >= 5 && argc <= 7 && !strcmp(argv[1], "mel")) {
        ge_semantics sem = !strcmp(argv[4], "llamacpp") ? GE_SEM_LLAMACPP : GE_SEM_OFFICIAL;
        int threads = argc >= 6 ? atoi(argv[5]) : 1;
        ge_audio_limits lim = {argc == 7 ? atof(argv[6]) : 0};
        ge_audio au;
        if (load_pcm(argv[2], &lim, &au, &e))
            return die(&e);
        int64_t valid, frames = ge_audio_frames(au.n, sem, &valid);
        float *feat = malloc(sizeof *feat * (size_t)(frames ? frames : 1) * GE_AUDIO_MEL);
        ge_pool *pool = NULL;
        if (ge_pool_create(&pool, threads, NULL, false, &e))
            return die(&e);
        ge_runner run = {pool_run, pool};
        if (ge_audio_features(au.pcm, au.n, sem, feat, threads > 1 ? &run : NULL, &e))
            return die(&e);
        spit(argv[3], feat, (size_t)frames * GE_AUDIO_MEL * sizeof *feat);
        printf("%lld %lld %lld\n", (long long)frames, (long long)valid, (long long)au.n);
        ge_pool_free(pool);
        free(feat);
        ge_audio_free(&au);
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "sfdecode")) {
        SF_INFO info = {0};
        SNDFILE *sf = sf_open(argv[2], SFM_READ, &info);
        if (!sf || info.samplerate != GE_AUDIO_RATE) {
            printf("error: libsndfile: %s\n", sf ? "not a 16 kHz file" : sf_strerror(NULL));
            return 1;
        }
        size_t cap = 1 << 20, n = 0;
        float *mono = malloc(sizeof *mono * cap), *buf = malloc(sizeof *buf * 4096 * info.channels);
        sf_count_t got;
        while ((got = sf_readf_float(sf, buf, 4096)) > 0)
            for (sf_count_t i = 0; i < got; i++) {
                float acc = buf[i * info.channels];
                for (int c = 1; c < info.channels; c++)
                    acc += buf[i * info.channels + c];
                if (n == cap)
                    mono = realloc(mono, sizeof *mono * (cap *= 2));
                mono[n++] = acc / (float)info.channels;
            }
        sf_close(sf);
        spit(argv[3], mono, n * sizeof *mono);
        printf("%zu\n", n);
        free(mono), free(buf);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "bench"))
        return bench(argc, argv);
    if (argc >= 8 && !strcmp(argv[1], "tower"))
        return tower(argc, argv, false);
    if (argc >= 6 && !strcmp(argv[1], "clip"))
        return tower(argc, argv, true);
    fprintf(stderr, "usage: audio_dump decode|mel|sfdecode|bench|tower|clip ... (see "
            "tests/audio_dump.c)\n");
    return 2;
}
