/* media.c - images and audio clips into soft-token rows: the media towers opened on first
 * use from the --mmproj files, the hooks that let text waves run between their layers, and
 * the timings of both. It sits above the towers; the towers know only the compute context. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "audio_tower.h"
#include "linear.h"
#include "media.h"
#include "vision.h"

static void pool_run(void *cx, int64_t n_tasks, ge_task_fn fn, void *ctx)
{
    ge_parallel(cx, n_tasks, 0, fn, ctx);
}

ge_status ge_model_audio_features(ge_model *m, const float *pcm, int64_t n, float *feat,
                                  ge_err *err)
{
    ge_runner r = {pool_run, &m->cx};
    return ge_audio_features(pcm, n, (ge_semantics)m->cx.cfg.v[GE_CFG_SEMANTICS], feat, &r, err);
}

/* Close both towers (forgetting why one could not be opened). */
static void towers_free(ge_model *m)
{
    ge_vision_free(m->vision);
    ge_audio_tower_free(m->audio);
    m->vision = NULL;
    m->audio = NULL;
    memset(&m->vision_err, 0, sizeof m->vision_err);
    memset(&m->audio_err, 0, sizeof m->audio_err);
}

void ge_media_free(ge_model *m)
{
    towers_free(m);
    for (int i = 0; i < m->n_mmproj; i++)
        free(m->mmproj[i]);
    m->n_mmproj = 0;
}

/* "this file has no such tower": passed over when another file may have it */
static bool no_encoder(const ge_err *e, bool audio)
{
    return e->code == GE_E_UNSUPPORTED &&
           strstr(e->msg, audio ? GE_NO_AUDIO_ENCODER : GE_NO_VISION_ENCODER);
}

/* The vision or audio tower, opened on first use from the first mmproj that has one (a
 * combined file, or either of a vision and an audio file in any order); a failure is kept
 * and given to every later call. A file without that tower is passed over; a damaged file's
 * error wins over that, and when no file has one the error names them all. */
static ge_status media_tower(ge_model *m, bool audio, ge_err *err)
{
    if (audio ? m->audio != NULL : m->vision != NULL)
        return GE_OK;
    if (!m->n_mmproj)
        return ge_fail(err, GE_E_USAGE, "%s need %s tower: give --mmproj",
                       audio ? "audio clips" : "images", audio ? "an audio" : "a vision");
    ge_err *kept = audio ? &m->audio_err : &m->vision_err;
    if (kept->code == GE_OK) {
        ge_err none = {0};
        for (int i = 0; i < m->n_mmproj; i++) {
            ge_err e = {0};
            e.code = audio ? ge_audio_tower_open(&m->audio, m->mmproj[i], m->hp.n_embd, &e)
                           : ge_vision_open(&m->vision, m->mmproj[i], m->hp.n_embd, &e);
            if (e.code == GE_OK)
                return GE_OK;
            if (!no_encoder(&e, audio)) {
                if (kept->code == GE_OK)
                    *kept = e;
            } else if (none.code == GE_OK) {
                none = e;
            }
        }
        if (kept->code == GE_OK && m->n_mmproj == 1)
            *kept = none;
        else if (kept->code == GE_OK)
            ge_fail(kept, GE_E_UNSUPPORTED, "%s, %s: %s in either mmproj file (%s)",
                    m->mmproj[0], m->mmproj[1],
                    audio ? GE_NO_AUDIO_ENCODER : GE_NO_VISION_ENCODER,
                    audio ? "clip.has_audio_encoder" : "clip.has_vision_encoder");
    }
    *err = *kept;
    return kept->code;
}

ge_status ge_model_set_mmproj(ge_model *m, const char *const *paths, int n, ge_err *err)
{
    for (int i = 0; i < m->n_mmproj; i++)
        free(m->mmproj[i]);
    /* the towers' repacked weights are keyed by addresses in mappings about to go: a new
     * mapping could reuse them */
    if (m->vision || m->audio)
        ge_linear_cache_free(&m->cx);
    towers_free(m);
    m->n_mmproj = 0;
    if (n < 0 || n > 2)
        return ge_fail(err, GE_E_USAGE, "at most two mmproj files");
    for (int i = 0; i < n; i++) {
        if (!(m->mmproj[i] = strdup(paths[i])))
            return ge_fail(err, GE_E_NOMEM, "out of memory");
        m->n_mmproj++;
    }
    if (!n || !m->cx.cfg.v[GE_CFG_PREPACK])
        return GE_OK;
    /* --prepack: open and repack both towers now; a tower no file has is not an error here
     * (its records fail), a damaged file is */
    for (int audio = 0; audio < 2; audio++) {
        ge_status st = media_tower(m, audio, err);
        if (st && !no_encoder(err, audio))
            return st;
        if (!st && (st = audio ? ge_audio_tower_prepack(&m->cx, m->audio, err)
                               : ge_vision_prepack(&m->cx, m->vision, err)))
            return st;
    }
    return GE_OK;
}

/* The hook, timed so that the tower's time excludes the text it ran. */
static void timed_yield(void *ctx)
{
    ge_model *m = ctx;
    double t0 = ge_now();
    m->yield.fn(m->yield.ctx);
    m->yield_seconds += ge_now() - t0;
}

/* A tower call's accounting: its phase for the operations it runs, and its time less the text
 * waves it yielded to, of which what no operation counted (patch embedding, copies, the
 * audio front end) under "other" (ge_phase_end), one call of it. */
typedef struct {
    double t0, y0;
    ge_phase_mark phase;
} tower_mark;

static tower_mark tower_begin(ge_model *m, ge_phase phase)
{
    return (tower_mark){ge_now(), m->yield_seconds, ge_phase_begin(&m->cx, phase)};
}

static double tower_end(ge_model *m, const tower_mark *k)
{
    const double seconds = ge_now() - k->t0 - (m->yield_seconds - k->y0);
    m->cx.stats.ops[m->cx.phase].calls[GE_OP_OTHER]++;
    ge_phase_end(&m->cx, &k->phase, seconds);
    return seconds;
}

ge_status ge_model_encode_image(ge_model *m, const float *patches, const int32_t *pos, int pw,
                                int ph, float *rows, ge_err *err)
{
    ge_status st = media_tower(m, false, err);
    if (st)
        return st;
    const ge_yield hook = {timed_yield, m};
    const ge_yield *y = m->cx.cfg.v[GE_CFG_YIELD] && m->yield.fn ? &hook : NULL;
    const tower_mark k = tower_begin(m, GE_PHASE_VISION);
    st = ge_vision_encode(&m->cx, m->vision, m->cx.cfg.v[GE_CFG_MEDIA_FAST], patches, pos,
                          pw * ph, pw, ph, rows, y, err);
    m->cx.stats.vision_seconds += tower_end(m, &k);
    m->cx.stats.images++;
    return st;
}

int64_t ge_model_audio_tokens(const ge_model *m, int64_t n)
{
    int64_t valid = 0;
    ge_audio_frames(n, (ge_semantics)m->cx.cfg.v[GE_CFG_SEMANTICS], &valid);
    return (valid + 3) / 4;
}

int64_t ge_model_audio_fit(const ge_model *m, int64_t tokens, int64_t cap)
{
    int64_t lo = 0, hi = cap; /* the tokens grow with the samples */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (ge_model_audio_tokens(m, mid) <= tokens)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

ge_status ge_model_audio_check(const ge_model *m, int64_t n, ge_err *err)
{
    if (ge_model_audio_tokens(m, n) > 0)
        return GE_OK;
    /* name the shortest clip that would do (161 samples officially, 2 under llamacpp) */
    int64_t need = n > 0 ? n + 1 : 1;
    while (need < GE_AUDIO_RATE && ge_model_audio_tokens(m, need) <= 0)
        need++;
    return ge_fail(err, GE_E_INPUT, "too short: %lld samples (%.0f ms) gives no complete 10 ms "
                   "frame (needs at least %lld samples at 16 kHz)", (long long)n,
                   (double)n * 1000.0 / GE_AUDIO_RATE, (long long)need);
}

ge_status ge_model_encode_audio(ge_model *m, const float *pcm, int64_t n, float *rows,
                                ge_err *err)
{
    ge_status st = media_tower(m, true, err);
    if (!st)
        st = ge_model_audio_check(m, n, err);
    if (st)
        return st;
    int64_t valid = 0;
    const int64_t frames = ge_audio_frames(n, (ge_semantics)m->cx.cfg.v[GE_CFG_SEMANTICS], &valid);
    const tower_mark k = tower_begin(m, GE_PHASE_AUDIO);
    float *feat = malloc((size_t)frames * GE_AUDIO_MEL * sizeof *feat);
    const ge_yield hook = {timed_yield, m};
    st = feat ? ge_model_audio_features(m, pcm, n, feat, err)
              : ge_fail(err, GE_E_NOMEM, "out of memory for %lld feature frames",
                        (long long)frames);
    if (!st)
        st = ge_audio_tower_encode(&m->cx, m->audio, m->cx.cfg.v[GE_CFG_MEDIA_FAST], feat, valid,
                                   rows, m->cx.cfg.v[GE_CFG_YIELD] && m->yield.fn ? &hook : NULL,
                                   err);
    free(feat);
    m->cx.stats.audio_seconds += tower_end(m, &k);
    m->cx.stats.clips++;
    m->cx.stats.audio_in_seconds += (double)n / GE_AUDIO_RATE;
    return st;
}

void ge_model_set_yield(ge_model *m, ge_yield y) { m->yield = y; }

void ge_model_trim(ge_model *m)
{
    if (m->vision)
        ge_vision_trim(m->vision);
    if (m->audio)
        ge_audio_tower_trim(m->audio);
}

