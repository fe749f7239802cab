/* item.c - a record's media items through their kind's entry points (the OPS table below):
 * decode and plan (bytes to resized pixels or cut samples, with their soft-token counts
 * checked against the caller's context), the layout of their parts, and the towers' encode
 * (docs/model.md 5-7). The kinds themselves (pieces, budgets) are modality.c's table. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ge.h"

/* ---- decode and plan --------------------------------------------------------------------- */

static ge_status decode_image(const ge_model *m, ge_item *it, const void *bytes, size_t len,
                              const ge_item_opts *o, const ge_item_budget *b, ge_err *err)
{
    ge_image img = {0};
    ge_status st = ge_image_decode(bytes, len, NULL, &img, err);
    if (!st)
        st = ge_image_plan(img.h, img.w, o->image_tokens, &it->th, &it->tw, &it->n_soft, err);
    if (!st)
        st = b->spend(b->ctx, (size_t)it->n_soft + 2, false, err);
    if (!st && !o->counts_only) {
        it->rgb = malloc((size_t)it->th * it->tw * 3);
        st = it->rgb ? ge_image_resize(img.rgb, img.h, img.w, it->rgb, it->th, it->tw, err)
                     : ge_fail(err, GE_E_NOMEM, "out of memory");
    }
    it->n_frames = 1;
    ge_image_free(&img);
    return st;
}

typedef struct {
    ge_item *it;
    const ge_item_budget *b;
} video_plan;

/* ge_video_limits.check: the planned frame blocks must fit the caller's context */
static ge_status video_check(void *ctx, const ge_video *v, ge_err *err)
{
    video_plan *c = ctx;
    c->it->n_frames = v->n, c->it->n_soft = v->n_soft; /* for the caller's message */
    return c->b->spend(c->b->ctx, (size_t)v->n * ((size_t)v->n_soft + 2), false, err);
}

/* A video's sampled frames, resized once for the whole video (docs/model.md 7); the tower encodes
 * each as an image. The plan's counts are checked before any frame memory exists (1,024
 * frames at 1,120 tokens would be 7.5 GB); counts_only stops at the plan. */
static ge_status decode_video(const ge_model *m, ge_item *it, const void *bytes, size_t len,
                              const ge_item_opts *o, const ge_item_budget *b, ge_err *err)
{
    ge_video v = {0};
    video_plan plan = {it, b};
    ge_video_limits lim = o->video;
    lim.check = video_check;
    lim.check_ctx = &plan;
    lim.plan_only = o->counts_only;
    ge_status st = ge_video_decode(bytes, len, &lim, &v, err);
    if (st)
        return st;
    it->th = v.th, it->tw = v.tw, it->n_soft = v.n_soft, it->n_frames = v.n;
    it->seconds = v.seconds, v.seconds = NULL; /* the layout needs the timestamps */
    if (!o->counts_only)
        it->rgb = v.rgb, v.rgb = NULL;
    ge_video_free(&v);
    return GE_OK;
}

/* A clip decoded to 16 kHz mono and cut at audio_max_seconds silently, as Hugging Face's
 * feature extractor cuts it; its soft-token count comes from its length. The decoding stops
 * a second past what can still fit the room, when that comes before the cut: such a clip
 * cannot fit whatever follows (a clip that ends earlier gives the same samples either way). */
static ge_status decode_audio(const ge_model *m, ge_item *it, const void *bytes, size_t len,
                              const ge_item_opts *o, const ge_item_budget *b, ge_err *err)
{
    ge_audio a = {0};
    ge_audio_limits lim = {o->audio_max_seconds};
    const int64_t cut = (int64_t)floor(lim.max_seconds * GE_AUDIO_RATE + 0.5);
    int64_t stop = cut;
    if (b->room != SIZE_MAX) {
        size_t room = b->room > 2 ? b->room - 2 : 0;
        int64_t fit = ge_model_audio_fit(m, (int64_t)room, cut);
        if (fit < cut - GE_AUDIO_RATE)
            stop = fit + GE_AUDIO_RATE, lim.max_seconds = (double)stop / GE_AUDIO_RATE;
    }
    ge_status st = ge_audio_decode(bytes, len, &lim, &a, err);
    if (st)
        return st;
    if (!(st = ge_model_audio_check(m, a.n, err))) { /* no empty audio block */
        it->n_soft = (int)ge_model_audio_tokens(m, a.n); /* <= 3600 s x 25 */
        it->n_frames = 1;
        /* longer than stop: over, whatever its length */
        st = b->spend(b->ctx, (size_t)it->n_soft + 2, stop < cut && a.truncated, err);
        if (!st && !o->counts_only)
            it->pcm = a.pcm, it->n_pcm = a.n, a.pcm = NULL;
    }
    ge_audio_free(&a);
    return st;
}

/* ---- layout ------------------------------------------------------------------------------ */

size_t ge_item_parts(const ge_item *it, const ge_item_opts *o, ge_part *parts, char *ts)
{
    if (it->kind != GE_KIND_VIDEO) {
        if (parts)
            parts[0] = (ge_part){it->kind, NULL, 0, it->n_soft};
        return 1;
    }
    /* each frame's block, with timestamps after "MM:SS " (frames joined by " ", docs/model.md
     * 2.3) */
    size_t n = 0;
    for (int f = 0; f < it->n_frames; f++) {
        if (o->timestamps) {
            if (parts) {
                const long s = (long)it->seconds[f];
                char *text = ts + 9 * n; /* the text of part n */
                int len = snprintf(text, 9, "%s%02ld:%02ld ", f ? " " : "", s / 60, s % 60);
                len = len > 8 ? 8 : len; /* over 99 minutes: "MMM:SS" is cut, never past it */
                parts[n] = (ge_part){GE_KIND_TEXT, text, (size_t)len, 0};
            }
            n++;
        }
        if (parts)
            parts[n] = (ge_part){GE_KIND_VIDEO, NULL, 0, it->n_soft};
        n++;
    }
    return n;
}

size_t ge_item_rows(const ge_item *it)
{
    return it->kind == GE_KIND_TEXT ? 0 : (size_t)it->n_soft * (size_t)it->n_frames;
}

size_t ge_item_bytes(const ge_item *it)
{
    return (it->rgb ? (size_t)it->n_frames * it->th * it->tw * 3 : 0) +
           (it->pcm ? (size_t)it->n_pcm * sizeof *it->pcm : 0);
}

/* ---- encode ------------------------------------------------------------------------------ */

/* Patch one resized image (or video frame) rgb [th][tw][3] and encode it into rows. */
static ge_status encode_image(ge_model *m, const uint8_t *rgb, int th, int tw, float *rows,
                              ge_err *e)
{
    const int pw = tw / GE_IMAGE_PATCH, ph = th / GE_IMAGE_PATCH;
    const size_t np = (size_t)pw * ph;
    float *patches = malloc(np * GE_IMAGE_PATCH_DIM * sizeof *patches);
    int32_t *pos = malloc(np * 2 * sizeof *pos);
    ge_status st = patches && pos ? ge_image_patchify(rgb, th, tw, patches, pos, e)
                                  : ge_fail(e, GE_E_NOMEM, "out of memory");
    if (!st)
        st = ge_model_encode_image(m, patches, pos, pw, ph, rows, e);
    free(patches), free(pos);
    return st;
}

/* An image or a video's frames, each through the vision tower; *frame: the one that failed */
static ge_status encode_frames(ge_model *m, const ge_item *it, float *rows, int *frame,
                               ge_err *err)
{
    const int H = ge_model_hidden(m);
    const size_t size = (size_t)it->th * it->tw * 3;
    ge_status st = GE_OK;
    int f = 0;
    for (; !st && f < it->n_frames; f++)
        st = encode_image(m, it->rgb + f * size, it->th, it->tw,
                          rows + (size_t)f * it->n_soft * H, err);
    *frame = st && it->kind == GE_KIND_VIDEO ? f : 0;
    return st;
}

static ge_status encode_clip(ge_model *m, const ge_item *it, float *rows, int *frame,
                             ge_err *err)
{
    *frame = 0;
    return ge_model_encode_audio(m, it->pcm, it->n_pcm, rows, err);
}

/* ---- the kinds' entry points ------------------------------------------------------------- */

typedef ge_status (*decode_fn)(const ge_model *m, ge_item *it, const void *bytes, size_t len,
                               const ge_item_opts *o, const ge_item_budget *b, ge_err *err);
typedef ge_status (*encode_fn)(ge_model *m, const ge_item *it, float *rows, int *frame,
                               ge_err *err);
static const struct {
    decode_fn decode; /* bytes to pixels or samples, with the counts */
    encode_fn encode; /* those to soft-token rows */
} OPS[GE_KIND_COUNT] = {
    [GE_KIND_IMAGE] = {decode_image, encode_frames},
    [GE_KIND_AUDIO] = {decode_audio, encode_clip},
    [GE_KIND_VIDEO] = {decode_video, encode_frames},
};

ge_status ge_item_decode(const ge_model *m, ge_item *it, const void *bytes, size_t len,
                         bool by_streams, const ge_item_opts *o, const ge_item_budget *b,
                         ge_err *err)
{
    int video, audio;
    if (by_streams && !ge_media_streams(bytes, len, &video, &audio, NULL) && !video && audio)
        it->kind = GE_KIND_AUDIO; /* sound alone (else the video decoder says what is wrong) */
    ge_status st = it->kind < GE_KIND_COUNT && OPS[it->kind].decode
                       ? OPS[it->kind].decode(m, it, bytes, len, o, b, err)
                       : ge_fail(err, GE_E_USAGE, "not a media item");
    if (st) {
        free(it->rgb), free(it->pcm);
        it->rgb = NULL, it->pcm = NULL;
    }
    return st;
}

ge_status ge_item_encode(ge_model *m, ge_item *it, float *rows, int *frame, ge_err *err)
{
    *frame = 0;
    ge_status st = it->rgb || it->pcm ? OPS[it->kind].encode(m, it, rows, frame, err) : GE_OK;
    free(it->rgb), free(it->pcm);
    it->rgb = NULL, it->pcm = NULL;
    return st;
}

void ge_item_free(ge_item *it)
{
    if (!it)
        return;
    free(it->rgb), free(it->pcm), free(it->seconds);
    it->rgb = NULL, it->pcm = NULL, it->seconds = NULL;
}
