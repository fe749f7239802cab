/* model.c - bind a gemma-embedding2 GGUF: hyperparameters from metadata, strict tensor checks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dtype.h"
#include "model.h"

#define ARCH "gemma-embedding2"
#define KEY(k) ARCH "." k

/* Context limit per record (docs/model.md 2.5): the trained length, whatever the config says. */
#define GE_CONTEXT_LIMIT 8192

ge_status ge_tensor_bind(const ge_gguf *g, const char *name, const int64_t ne[4], int split,
                         ge_tensor *t, ge_err *err)
{
    const ge_gguf_tensor *gt = ge_gguf_tensor_find(g, name);
    if (!gt)
        return ge_fail(err, GE_E_FORMAT, "%s: tensor %s is missing (expected shape {%lld, %lld, "
                       "%lld, %lld})", g->path, name, (long long)ne[0], (long long)ne[1],
                       (long long)ne[2], (long long)ne[3]);
    bool shape_ok = true;
    for (int i = 0; i < 4; i++)
        shape_ok = shape_ok && gt->ne[i] == (uint64_t)ne[i];
    if (!shape_ok)
        return ge_fail(err, GE_E_FORMAT,
                       "%s: tensor %s: expected shape {%lld, %lld, %lld, %lld}, found {%llu, "
                       "%llu, %llu, %llu} (%u dims)",
                       g->path, name, (long long)ne[0], (long long)ne[1], (long long)ne[2],
                       (long long)ne[3], (unsigned long long)gt->ne[0],
                       (unsigned long long)gt->ne[1], (unsigned long long)gt->ne[2],
                       (unsigned long long)gt->ne[3], gt->n_dims);
    const ge_dtype_info *ti = ge_dtype(gt->type);
    if (!ti->supported)
        return ge_fail(err, GE_E_UNSUPPORTED,
                       "%s: tensor %s: type %s is not supported (" GE_DTYPE_SUPPORTED " are)",
                       g->path, name, ti->name);
    int64_t ne0 = 1, ne1 = 1;
    for (int i = 0; i < 4; i++)
        *(i < split ? &ne0 : &ne1) *= ne[i];
    if (ne0 % ti->block)
        return ge_fail(err, GE_E_FORMAT, "%s: tensor %s: rows of %lld values do not split into "
                       "%s blocks", g->path, name, (long long)ne0, ti->name);
    t->name = gt->name;
    t->type = gt->type;
    t->ne0 = ne0;
    t->ne1 = ne1;
    t->row_bytes = (size_t)ne0 / ti->block * ti->bytes;
    t->data = gt->data;
    return GE_OK;
}

static ge_status bind(const ge_gguf *g, const char *name, int64_t ne0, int64_t ne1,
                      ge_tensor *t, ge_err *err)
{
    return ge_tensor_bind(g, name, (int64_t[4]){ne0, ne1, 1, 1}, 1, t, err);
}

static ge_status bind_layer(const ge_gguf *g, const ge_hparams *hp, int i, ge_layer *l,
                            ge_err *err)
{
    const int H = hp->n_embd, qd = hp->n_head * l->head_dim, kvd = l->n_kv * l->head_dim;
    const struct {
        const char *suffix;
        int64_t ne0, ne1;
        ge_tensor *t;
    } want[] = {
        {"attn_norm", H, 1, &l->attn_norm},
        {"attn_q", H, qd, &l->wq},
        {"attn_k", H, kvd, &l->wk},
        {"attn_v", H, kvd, &l->wv},
        {"attn_q_norm", l->head_dim, 1, &l->q_norm},
        {"attn_k_norm", l->head_dim, 1, &l->k_norm},
        {"attn_output", qd, H, &l->wo},
        {"post_attention_norm", H, 1, &l->post_attn_norm},
        {"ffn_norm", H, 1, &l->ffn_norm},
        {"ffn_gate", H, hp->n_ff, &l->w_gate},
        {"ffn_up", H, hp->n_ff, &l->w_up},
        {"ffn_down", hp->n_ff, H, &l->w_down},
        {"post_ffw_norm", H, 1, &l->post_ffn_norm},
        {"inp_gate", H, hp->n_ple, &l->ple_gate},
        {"proj", hp->n_ple, H, &l->ple_proj},
        {"post_norm", H, 1, &l->ple_post_norm},
    };
    char name[96];
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        snprintf(name, sizeof name, "blk.%d.%s.weight", i, want[k].suffix);
        ge_status st = bind(g, name, want[k].ne0, want[k].ne1, want[k].t, err);
        if (st)
            return st;
    }
    ge_tensor scale;
    snprintf(name, sizeof name, "blk.%d.layer_output_scale.weight", i);
    ge_status st = bind(g, name, 1, 1, &scale, err);
    if (st)
        return st;
    ge_dequant_row(scale.type, scale.data, &l->out_scale, 1);
    if (!isfinite(l->out_scale)) /* it scales the whole residual stream */
        return ge_fail(err, GE_E_FORMAT, "%s: tensor %s is %g", g->path, name,
                       (double)l->out_scale);
    return GE_OK;
}

static ge_status load_hparams(ge_model *m, ge_err *err)
{
    const ge_gguf *g = m->gguf;
    ge_hparams *hp = &m->hp;
    ge_gguf_str arch;
    ge_status st = ge_gguf_get_str(g, "general.architecture", &arch, err);
    if (st)
        return st;
    if (!ge_gguf_str_eq(arch, ARCH))
        return ge_fail(err, GE_E_UNSUPPORTED,
                       "%s: architecture \"%.*s\" is not supported (expected \"" ARCH "\")",
                       g->path, (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
    const int big = 1 << 20;
    int head_full, head_swa, vfull, vswa, rope_full, rope_swa, swa = 0, ctx;
    if ((st = ge_gguf_get_int_in(g, KEY("embedding_length"), 1, big, &hp->n_embd, err)) ||
        (st = ge_gguf_get_int_in(g, KEY("block_count"), 1, 4096, &hp->n_layer, err)) ||
        (st = ge_gguf_get_int_in(g, KEY("attention.head_count"), 1, 4096, &hp->n_head, err)) ||
        (st = ge_gguf_get_int_in(g, KEY("feed_forward_length"), 1, big, &hp->n_ff, err)) ||
        (st = ge_gguf_get_int_in(g, KEY("embedding_length_per_layer_input"), 1, big, &hp->n_ple, err)) ||
        (st = ge_gguf_get_int_in(g, KEY("embedding_length_out"), 1, big, &hp->n_out, err)) ||
        (st = ge_gguf_get_int_in(g, KEY("attention.key_length"), 2, 65536, &head_full, err)) ||
        (st = ge_gguf_get_int_in(g, KEY("attention.key_length_swa"), 2, 65536, &head_swa, err)) ||
        (st = ge_gguf_get_int_in(g, KEY("attention.value_length"), 2, 65536, &vfull, err)) ||
        (st = ge_gguf_get_int_in(g, KEY("attention.value_length_swa"), 2, 65536, &vswa, err)) ||
        (st = ge_gguf_get_int_in(g, KEY("rope.dimension_count"), 2, 65536, &rope_full, err)) ||
        (st = ge_gguf_get_int_in(g, KEY("rope.dimension_count_swa"), 2, 65536, &rope_swa, err)) ||
        (st = ge_gguf_get_int_in(g, KEY("context_length"), 1, INT32_MAX, &ctx, err)))
        return st;
    if (vfull != head_full || vswa != head_swa)
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: value_length differs from key_length",
                       g->path);
    if (head_full % 2 || head_swa % 2)
        return ge_fail(err, GE_E_FORMAT, "%s: head dims must be even", g->path);
    if (rope_full != head_full || rope_swa != head_swa)
        return ge_fail(err, GE_E_UNSUPPORTED,
                       "%s: partial rotary embedding (rope dims %d/%d, head dims %d/%d) is not "
                       "supported",
                       g->path, rope_full, rope_swa, head_full, head_swa);
    hp->max_tokens = ctx < GE_CONTEXT_LIMIT ? ctx : GE_CONTEXT_LIMIT;

    uint32_t pooling;
    bool causal;
    /* the floats: finite, and the epsilon and rope bases in their meaningful ranges */
    float base_full, base_swa;
    if ((st = ge_gguf_get_u32_or(g, KEY("pooling_type"), 1, &pooling, err)) ||
        (st = ge_gguf_get_bool_or(g, KEY("attention.causal"), false, &causal, err)) ||
        (st = ge_gguf_get_f32_in(g, KEY("attention.layer_norm_rms_epsilon"), 0.0f, 1.0f,
                                 &hp->eps, err)) ||
        (st = ge_gguf_get_f32_in(g, KEY("rope.freq_base"), 1.0f, INFINITY, &base_full, err)) ||
        (st = ge_gguf_get_f32_in(g, KEY("rope.freq_base_swa"), 1.0f, INFINITY, &base_swa, err)))
        return st;
    /* floats the engine does not read (docs/gguf.md 3.1: absent in EmbeddingGemma 2) are still in
     * their meaningful range when present: out of it, the file is damaged */
    static const char *const unread[] = {KEY("attn_logit_softcapping"),
                                         KEY("final_logit_softcapping"),
                                         KEY("rope.scaling.factor")};
    float f;
    for (size_t i = 0; i < sizeof unread / sizeof unread[0]; i++)
        if (ge_gguf_find(g, unread[i]) &&
            (st = ge_gguf_get_f32_in(g, unread[i], 0.0f, INFINITY, &f, err)))
            return st;
    if (pooling != 1)
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: pooling_type %u (only 1 = mean)", g->path,
                       pooling);
    if (causal)
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: causal attention is not an encoder", g->path);

    const int L = hp->n_layer;
    m->layers = calloc((size_t)L, sizeof *m->layers);
    int64_t *pattern = calloc((size_t)L, sizeof *pattern), *kv = calloc((size_t)L, sizeof *kv);
    if (!m->layers || !pattern || !kv) {
        free(pattern);
        free(kv);
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", g->path);
    }
    st = ge_gguf_get_int_array(g, KEY("attention.sliding_window_pattern"), pattern, (size_t)L, err);
    if (!st)
        st = ge_gguf_get_int_array(g, KEY("attention.head_count_kv"), kv, (size_t)L, err);
    for (int i = 0; !st && i < L; i++) {
        ge_layer *l = &m->layers[i];
        /* both ranges are checked on the 64-bit values: a cast first would wrap 2^32 + 2 to 2 */
        if (pattern[i] != 0 && pattern[i] != 1) {
            st = ge_fail(err, GE_E_FORMAT, "%s: " KEY("attention.sliding_window_pattern")
                         ": layer %d is %lld (0 or 1)", g->path, i, (long long)pattern[i]);
            break;
        }
        if (kv[i] < 1 || kv[i] > hp->n_head || hp->n_head % kv[i]) {
            st = ge_fail(err, GE_E_FORMAT, "%s: " KEY("attention.head_count_kv") ": layer %d: "
                         "%lld KV heads do not divide %d query heads", g->path, i,
                         (long long)kv[i], hp->n_head);
            break;
        }
        l->sliding = pattern[i] != 0;
        l->head_dim = l->sliding ? head_swa : head_full;
        l->rope_base = l->sliding ? base_swa : base_full;
        l->n_kv = (int)kv[i];
        if (l->sliding)
            swa = 1;
    }
    free(pattern);
    free(kv);
    if (st)
        return st;
    if (swa) {
        /* llama.cpp stores 2x the HF radius: keys with |i - j| <= n_swa/2 are visible */
        int n_swa;
        if ((st = ge_gguf_get_int_in(g, KEY("attention.sliding_window"), 2, INT32_MAX, &n_swa, err)))
            return st;
        hp->swa_radius = n_swa / 2;
    }
    return GE_OK;
}

static ge_status bind_all(ge_model *m, ge_err *err)
{
    const ge_gguf *g = m->gguf;
    const ge_hparams *hp = &m->hp;
    ge_status st;
    /* token_embd has a row per token: the counts agree before the tokenizer builds anything
     * per token (a few-MB sparse file can claim 64 Mi tokens) */
    const ge_gguf_kv *tokens = ge_gguf_find(g, "tokenizer.ggml.tokens");
    const ge_gguf_tensor *te = ge_gguf_tensor_find(g, "token_embd.weight");
    if (tokens && tokens->type == GE_GGUF_ARR && te && te->ne[1] != tokens->arr_n)
        return ge_fail(err, GE_E_FORMAT, "%s: tokenizer.ggml.tokens has %llu tokens, "
                       "token_embd.weight %llu rows", g->path,
                       (unsigned long long)tokens->arr_n, (unsigned long long)te->ne[1]);
    if ((st = ge_tok_create(&m->tok, g, err)))
        return st;
    m->hp.n_vocab = ge_tok_vocab_size(m->tok);
    if ((st = bind(g, "token_embd.weight", hp->n_embd, hp->n_vocab, &m->tok_embd, err)) ||
        (st = bind(g, "per_layer_model_proj.weight", hp->n_embd,
                   (int64_t)hp->n_layer * hp->n_ple, &m->ple_model_proj, err)) ||
        (st = bind(g, "per_layer_proj_norm.weight", hp->n_ple, 1, &m->ple_norm, err)) ||
        (st = bind(g, "output_norm.weight", hp->n_embd, 1, &m->out_norm, err)) ||
        (st = bind(g, "output.weight", hp->n_embd, hp->n_out, &m->out_proj, err)))
        return st;
    for (int i = 0; i < hp->n_layer; i++) {
        if ((st = bind_layer(g, hp, i, &m->layers[i], err)))
            return st;
        /* the per-layer input projection as one view per layer: each layer computes its own
         * [T, P] slice, so no [T, L, P] buffer is ever needed */
        ge_tensor *v = &m->layers[i].ple_in;
        *v = m->ple_model_proj;
        v->ne1 = hp->n_ple;
        v->data = m->ple_model_proj.data + (size_t)i * hp->n_ple * m->ple_model_proj.row_bytes;
    }
    return GE_OK;
}

/* The tier cfg asks for on this CPU, the topology and the pool size. */
static ge_status plan(const ge_config *cfg, ge_tier *tier, ge_topo *topo, int *threads,
                      ge_cpu_feats *f, ge_err *err)
{
    ge_cpu_detect(f);
    int t = cfg->v[GE_CFG_CPU_TIER];
    if (t < 0)
        t = ge_tier_best(f);
    else if (!ge_tier_supported(f, (ge_tier)t))
        return ge_fail(err, GE_E_USAGE, "cpu tier %s: this CPU (or its OS) cannot run it",
                       ge_tier_name((ge_tier)t));
    *tier = (ge_tier)t;
    int cpus[1024], n = ge_topo_allowed(cpus, 1024);
    ge_status st = ge_topo_read("/sys", cpus, n, topo, err);
    *threads = cfg->v[GE_CFG_THREADS] > 0 ? cfg->v[GE_CFG_THREADS] : topo->n;
    return st;
}

static void describe_cpu(const ge_topo *t, const ge_cpu_feats *f, char *buf, size_t n)
{
    snprintf(buf, n, "%d CPUs allowed, %d cores%s; %s%s%s%s%s%s%s", t->n, t->n_core,
             t->hybrid ? " (hybrid)" : "", f->x86 ? "x86-64" : f->arm64 ? "arm64" : "other",
             f->avx2 ? " avx2" : "", f->fma ? " fma" : "", f->avxvnni ? " avx-vnni" : "",
             f->avx512f ? " avx512f" : "", f->avx512vnni ? " avx512-vnni" : "",
             f->neon ? " neon" : "");
}

ge_status ge_compute_plan(const ge_config *cfg, const char **tier, int *threads, char *cpu,
                          size_t n, ge_err *err)
{
    ge_tier t;
    ge_topo topo;
    ge_cpu_feats f;
    ge_status st = plan(cfg, &t, &topo, threads, &f, err);
    if (st)
        return st;
    *tier = ge_tier_name(t);
    describe_cpu(&topo, &f, cpu, n);
    return GE_OK;
}

/* Kernel tier, topology, worker pool and per-worker scratch. */
static ge_status setup_compute(ge_model *m, ge_err *err)
{
    ge_tier tier;
    ge_cpu_feats f;
    ge_status st = plan(&m->cfg, &tier, &m->topo, &m->threads, &f, err);
    if (st)
        return st;
    m->kern = ge_kern_get(tier);
    int cap = m->cfg.v[GE_CFG_THREAD_CAP];
    m->max_threads = cap > 0 && cap < m->threads ? cap : m->threads;
    bool pin = m->cfg.v[GE_CFG_HYBRID] && m->topo.hybrid;
    if ((st = ge_pool_create(&m->pool, m->threads, &m->topo, pin, err)))
        return st;

    int64_t widest = m->hp.n_embd > m->hp.n_ff ? m->hp.n_embd : m->hp.n_ff;
    widest = widest > m->hp.n_ple ? widest : m->hp.n_ple;
    for (int i = 0; i < m->hp.n_layer; i++)
        if (m->layers[i].wo.ne0 > widest)
            widest = m->layers[i].wo.ne0;
    m->row_scratch_len = (size_t)widest;
    m->row_scratch = malloc((size_t)m->threads * m->row_scratch_len * sizeof(float));
    if (!m->row_scratch)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    return GE_OK;
}

void ge_parallel(ge_model *m, int64_t n, int max, ge_task_fn fn, void *ctx)
{
    int cap = m->wave_threads > 0 ? m->wave_threads : m->max_threads;
    ge_pool_run(m->pool, n, max > 0 && max < cap ? max : cap, fn, ctx);
}

/* --prepack: every weight of the text model the fast paths use */
static ge_status prepack(ge_model *m, ge_err *err)
{
    ge_status st = ge_linear_prepack(m, (const ge_tensor *const[]){&m->out_proj}, 1, err);
    for (int li = 0; li < m->hp.n_layer && !st; li++) {
        const ge_layer *l = &m->layers[li];
        const ge_tensor *const ts[] = {&l->ple_in, &l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate,
                                       &l->w_up, &l->w_down, &l->ple_gate, &l->ple_proj};
        st = ge_linear_prepack(m, ts, sizeof ts / sizeof ts[0], err);
    }
    return st;
}

ge_status ge_model_open(ge_model **out, const char *path, const ge_config *cfg, ge_err *err)
{
    *out = NULL;
    ge_model *m = calloc(1, sizeof *m);
    if (!m)
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", path);
    if (cfg)
        m->cfg = *cfg;
    else
        ge_config_defaults(&m->cfg);
    ge_status st = ge_gguf_open(&m->gguf, path, err);
    if (!st)
        st = load_hparams(m, err);
    if (!st)
        st = bind_all(m, err);
    if (!st)
        st = setup_compute(m, err);
    if (!st && m->cfg.v[GE_CFG_PREPACK])
        st = prepack(m, err);
    if (st) {
        ge_model_free(m);
        return st;
    }
    const ge_dtype_info *ti = ge_dtype(m->layers[0].wq.type);
    snprintf(m->describe, sizeof m->describe,
             "gemma-embedding2: %d layers, hidden %d, %d heads, ffn %d, ple %d, out %d, "
             "vocab %d, window radius %d, weights %s",
             m->hp.n_layer, m->hp.n_embd, m->hp.n_head, m->hp.n_ff, m->hp.n_ple, m->hp.n_out,
             m->hp.n_vocab, m->hp.swa_radius, ti->name);
    *out = m;
    return GE_OK;
}

static void towers_free(ge_model *m)
{
    ge_vision_free(m->vision);
    ge_audio_tower_free(m->audio);
    m->vision = NULL;
    m->audio = NULL;
    memset(&m->vision_err, 0, sizeof m->vision_err);
    memset(&m->audio_err, 0, sizeof m->audio_err);
}

void ge_model_free(ge_model *m)
{
    if (!m)
        return;
    ge_linear_cache_free(m);
    ge_encoder_free(m);
    ge_pool_free(m->pool);
    free(m->row_scratch);
    for (int i = 0; i < 2; i++)
        free(m->rope_cos[i]), free(m->rope_sin[i]);
    ge_tok_free(m->tok);
    towers_free(m);
    for (int i = 0; i < m->n_mmproj; i++)
        free(m->mmproj[i]);
    free(m->layers);
    ge_gguf_close(m->gguf);
    free(m);
}

ge_status ge_model_row_scratch(ge_model *m, int64_t n, ge_err *err)
{
    if ((size_t)n <= m->row_scratch_len)
        return GE_OK;
    float *r = realloc(m->row_scratch, (size_t)m->threads * (size_t)n * sizeof *r);
    if (!r)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    m->row_scratch = r;
    m->row_scratch_len = (size_t)n;
    return GE_OK;
}

ge_status ge_mmproj_check(const ge_gguf *g, const char *tower, const char *projector,
                          const char *no_encoder, ge_err *err)
{
    ge_gguf_str s;
    char key[64];
    ge_status st = ge_gguf_get_str(g, "general.architecture", &s, err);
    if (!st && !ge_gguf_str_eq(s, "clip"))
        st = ge_fail(err, GE_E_UNSUPPORTED, "%s: architecture \"%.*s\" is not an mmproj "
                     "(expected \"clip\")", g->path, (int)(s.len > 64 ? 64 : s.len), s.ptr);
    bool has = false;
    snprintf(key, sizeof key, "clip.has_%s_encoder", tower);
    if (!st)
        st = ge_gguf_get_bool_or(g, key, false, &has, err);
    if (!st && !has)
        st = ge_fail(err, GE_E_UNSUPPORTED, "%s: the mmproj has %s (%s)", g->path, no_encoder,
                     key);
    snprintf(key, sizeof key, "clip.%s.projector_type", tower);
    if (!st)
        st = ge_gguf_get_str(g, key, &s, err);
    if (!st && !ge_gguf_str_eq(s, projector))
        st = ge_fail(err, GE_E_UNSUPPORTED, "%s: %s projector \"%.*s\" is not supported "
                     "(expected \"%s\")", g->path, tower, (int)(s.len > 64 ? 64 : s.len),
                     s.ptr, projector);
    return st;
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
        ge_linear_cache_free(m);
    towers_free(m);
    m->n_mmproj = 0;
    if (n < 0 || n > 2)
        return ge_fail(err, GE_E_USAGE, "at most two mmproj files");
    for (int i = 0; i < n; i++) {
        if (!(m->mmproj[i] = strdup(paths[i])))
            return ge_fail(err, GE_E_NOMEM, "out of memory");
        m->n_mmproj++;
    }
    if (!n || !m->cfg.v[GE_CFG_PREPACK])
        return GE_OK;
    /* --prepack: open and repack both towers now; a tower no file has is not an error here
     * (its records fail), a damaged file is */
    for (int audio = 0; audio < 2; audio++) {
        ge_status st = media_tower(m, audio, err);
        if (st && !no_encoder(err, audio))
            return st;
        if (!st && (st = audio ? ge_audio_tower_prepack(m, m->audio, err)
                               : ge_vision_prepack(m, m->vision, err)))
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

ge_status ge_model_encode_image(ge_model *m, const float *patches, const int32_t *pos, int pw,
                                int ph, float *rows, ge_err *err)
{
    ge_status st = media_tower(m, false, err);
    if (st)
        return st;
    double t0 = ge_now(), y0 = m->yield_seconds;
    const ge_yield hook = {timed_yield, m};
    st = ge_vision_encode(m, m->vision, m->cfg.v[GE_CFG_MEDIA_FAST], patches, pos, pw * ph, pw,
                          ph, rows, m->cfg.v[GE_CFG_YIELD] && m->yield.fn ? &hook : NULL, err);
    m->stats.vision_seconds += ge_now() - t0 - (m->yield_seconds - y0);
    m->stats.images++;
    return st;
}

int64_t ge_model_audio_tokens(const ge_model *m, int64_t n)
{
    int64_t valid = 0;
    ge_audio_frames(n, (ge_semantics)m->cfg.v[GE_CFG_SEMANTICS], &valid);
    return (valid + 3) / 4;
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
    const int64_t frames = ge_audio_frames(n, (ge_semantics)m->cfg.v[GE_CFG_SEMANTICS], &valid);
    double t0 = ge_now(), y0 = m->yield_seconds;
    float *feat = malloc((size_t)frames * GE_AUDIO_MEL * sizeof *feat);
    if (!feat)
        return ge_fail(err, GE_E_NOMEM, "out of memory for %lld feature frames",
                       (long long)frames);
    const ge_yield hook = {timed_yield, m};
    double tf = ge_now();
    st = ge_model_audio_features(m, pcm, n, feat, err);
    m->stats.seconds[GE_OP_OTHER] += ge_now() - tf; /* the log-mel front end */
    m->stats.calls[GE_OP_OTHER]++;
    if (!st)
        st = ge_audio_tower_encode(m, m->audio, m->cfg.v[GE_CFG_MEDIA_FAST], feat, valid, rows,
                                   m->cfg.v[GE_CFG_YIELD] && m->yield.fn ? &hook : NULL, err);
    free(feat);
    m->stats.audio_seconds += ge_now() - t0 - (m->yield_seconds - y0);
    m->stats.clips++;
    m->stats.audio_in_seconds += (double)n / GE_AUDIO_RATE;
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

int ge_model_dim(const ge_model *m) { return m->hp.n_out; }
int ge_model_max_tokens(const ge_model *m) { return m->hp.max_tokens; }
const char *ge_model_describe(const ge_model *m) { return m->describe; }
const char *ge_model_tier(const ge_model *m) { return m->kern->name; }

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
                ge_linear_kernel(m, t->type, out[e].kernel, sizeof out[e].kernel);
        } else {
            out[e].vectors++;
        }
    }
    ge_gguf_close(g);
    return GE_OK;
}
int ge_model_threads(const ge_model *m) { return m->threads; }

float *ge_floats(size_t n)
{
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    return aligned_alloc(64, bytes ? bytes : 64);
}

double ge_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *ge_op_name(ge_op op)
{
    static const char *const names[GE_OP_COUNT] = {"q8_gemm", "kq_gemm", "sgemm", "linear_ref", "quantize",
                                                   "attention", "norm", "other"};
    return op < GE_OP_COUNT ? names[op] : "?";
}

void ge_model_stats(const ge_model *m, ge_stats *out) { *out = m->stats; }

void ge_model_peak(const ge_model *m, double seconds, double *int8, double *fp32)
{
    *int8 = m->kern->peak_int8 ? m->kern->peak_int8(seconds) : 0.0;
    *fp32 = m->kern->peak_fp32 ? m->kern->peak_fp32(seconds) : 0.0;
}
void ge_model_stats_reset(ge_model *m) { memset(&m->stats, 0, sizeof m->stats); }


void ge_tensor_row(const ge_tensor *t, int64_t r, float *dst)
{
    ge_dequant_row(t->type, t->data + (size_t)r * t->row_bytes, dst, (size_t)t->ne0);
}

ge_status ge_model_files_check(const ge_model *m, ge_err *err)
{
    (void)m; /* one model per process: the registry's files are its files */
    const char *path = ge_mapping_damaged();
    if (path)
        return ge_fail(err, GE_E_IO, "%s: the file was cut short or overwritten on disk while "
                       "in use; nothing computed from it since is written", path);
    return GE_OK;
}
