/* model.c - bind a gemma-embedding2 GGUF: hyperparameters from metadata, strict tensor checks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "model.h"

#define ARCH "gemma-embedding2"
#define KEY(k) ARCH "." k

/* Context limit per record (docs/model.md 2.5): the trained length, whatever the config says. */
#define GE_CONTEXT_LIMIT 8192

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

/* Bind the text model of the GGUF at path: hyperparameters, tokenizer, every tensor. */
ge_status ge_text_bind(ge_model *m, const char *path, ge_err *err)
{
    ge_status st = ge_gguf_open(&m->gguf, path, err);
    if (!st)
        st = load_hparams(m, err);
    if (!st)
        st = bind_all(m, err);
    if (st)
        return st;
    const ge_dtype_info *ti = ge_dtype(m->layers[0].wq.type);
    snprintf(m->describe, sizeof m->describe,
             "gemma-embedding2: %d layers, hidden %d, %d heads, ffn %d, ple %d, out %d, "
             "vocab %d, window radius %d, weights %s",
             m->hp.n_layer, m->hp.n_embd, m->hp.n_head, m->hp.n_ff, m->hp.n_ple, m->hp.n_out,
             m->hp.n_vocab, m->hp.swa_radius, ti->name);
    return GE_OK;
}

void ge_text_free(ge_model *m)
{
    ge_tok_free(m->tok);
    free(m->layers);
    ge_gguf_close(m->gguf);
    m->tok = NULL, m->layers = NULL, m->gguf = NULL;
}

int ge_model_dim(const ge_model *m) { return m->hp.n_out; }
int ge_model_max_tokens(const ge_model *m) { return m->hp.max_tokens; }
const char *ge_model_describe(const ge_model *m) { return m->describe; }
