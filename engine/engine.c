/* engine.c - the ge_model handle of ge.h: opening and freeing its parts in order (the text
 * model, the compute context, the encoder's and the media towers' state), and what the CLI
 * reads off it (tier, threads, stats, peaks, weight types, file damage). The top room of the
 * engine: it calls into every part and no part calls back into it. */
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "encoder.h"
#include "linear.h"
#include "media.h"
#include "model.h"

/* --prepack: every weight of the text model the fast paths use */
static ge_status prepack(ge_model *m, ge_err *err)
{
    ge_status st = ge_linear_prepack(&m->cx, (const ge_tensor *const[]){&m->out_proj}, 1, err);
    for (int li = 0; li < m->hp.n_layer && !st; li++) {
        const ge_layer *l = &m->layers[li];
        const ge_tensor *const ts[] = {&l->ple_in, &l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate,
                                       &l->w_up, &l->w_down, &l->ple_gate, &l->ple_proj};
        st = ge_linear_prepack(&m->cx, ts, sizeof ts / sizeof ts[0], err);
    }
    return st;
}

/* The widest weight row the text model's reference paths expand (the scratch row's size). */
static int64_t widest_row(const ge_model *m)
{
    int64_t widest = m->hp.n_embd > m->hp.n_ff ? m->hp.n_embd : m->hp.n_ff;
    widest = widest > m->hp.n_ple ? widest : m->hp.n_ple;
    for (int i = 0; i < m->hp.n_layer; i++)
        if (m->layers[i].wo.ne0 > widest)
            widest = m->layers[i].wo.ne0;
    return widest;
}

ge_status ge_model_open(ge_model **out, const char *path, const ge_config *cfg, ge_err *err)
{
    *out = NULL;
    ge_model *m = calloc(1, sizeof *m);
    if (!m)
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", path);
    ge_config c;
    if (cfg)
        c = *cfg;
    else
        ge_config_defaults(&c);
    ge_status st = ge_text_bind(m, path, err);
    if (!st)
        st = ge_compute_open(&m->cx, &c, widest_row(m), err);
    if (!st && c.v[GE_CFG_PREPACK])
        st = prepack(m, err);
    if (st) {
        ge_model_free(m);
        return st;
    }
    *out = m;
    return GE_OK;
}

void ge_model_free(ge_model *m)
{
    if (!m)
        return;
    ge_linear_cache_free(&m->cx);
    ge_encoder_free(m);
    ge_compute_free(&m->cx);
    ge_media_free(m);
    ge_text_free(m);
    free(m);
}

const char *ge_model_tier(const ge_model *m) { return m->cx.kern->name; }

ge_status ge_model_file_types(const ge_model *m, const char *path, ge_weight_type *out,
                              int max, int *n, ge_err *err)
{
    ge_gguf *g;
    ge_status st = ge_gguf_open(&g, path, err);
    *n = 0;
    if (st)
        return st;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const ge_gguf_tensor *t = &g->tensors[i];
        int e = 0;
        while (e < *n && out[e].type != t->type)
            e++;
        if (e == *n) {
            if (*n == max)
                continue;
            out[(*n)++] = (ge_weight_type){.type = t->type, .name = ge_dtype(t->type)->name};
        }
        if (t->n_dims >= 2 && t->ne[1] > 1) {
            out[e].matrices++;
            out[e].bytes += t->nbytes;
            if (!out[e].kernel[0])
                ge_linear_kernel(&m->cx, t->type, out[e].kernel, sizeof out[e].kernel);
        } else {
            out[e].vectors++;
        }
    }
    ge_gguf_close(g);
    return GE_OK;
}
int ge_model_threads(const ge_model *m) { return m->cx.threads; }

void ge_model_stats(const ge_model *m, ge_stats *out) { *out = m->cx.stats; }

/* A peak is the best rate the loop reaches: the best of three short runs, since one run that
 * meets a host's noisy moment (seen as 13 against 18-19 GMAC/s) makes kernels exceed it. */
static double best_of_3(double (*loop)(double), double seconds)
{
    double best = 0.0;
    for (int i = 0; loop && i < 3; i++) {
        const double r = loop(seconds / 3);
        best = r > best ? r : best;
    }
    return best;
}

void ge_model_peak(const ge_model *m, double seconds, double *int8, double *fp32)
{
    *int8 = best_of_3(m->cx.kern->peak_int8, seconds);
    *fp32 = best_of_3(m->cx.kern->peak_fp32, seconds);
}
void ge_model_stats_reset(ge_model *m) { memset(&m->cx.stats, 0, sizeof m->cx.stats); }

ge_status ge_model_files_check(const ge_model *m, ge_err *err)
{
    (void)m; /* one model per process: the registry's files are its files */
    const char *path = ge_mapping_damaged();
    if (path)
        return ge_fail(err, GE_E_IO, "%s: the file was cut short or overwritten on disk while "
                       "in use; nothing computed from it since is written", path);
    return GE_OK;
}
