/* model.h - the gemma-embedding2 text model bound to a GGUF file.
 *
 * Hyperparameters come from metadata (docs/gguf.md 3); every tensor is looked up by name and its
 * type and shape checked at open. Weight data stays in the read-only mapping. Nothing about
 * the model's size is a compile-time constant, so a tiny random model loads through the
 * same code as the real one. */
#ifndef GE_MODEL_H
#define GE_MODEL_H

#include <stdbool.h>

#include "ge.h"
#include "gguf.h"
#include "kern.h"
#include "threads.h"
#include "tok.h"

/* A weight matrix or vector: rows of ne0 values, ne1 rows, ggml type. */
typedef struct {
    const char *name;
    uint32_t type;
    int64_t ne0, ne1;
    size_t row_bytes;
    const uint8_t *data;
} ge_tensor;

typedef struct {
    bool sliding;    /* sliding-window (local) layer; else full attention */
    int n_kv;        /* KV heads */
    int head_dim;    /* d */
    float rope_base; /* theta */
    ge_tensor attn_norm, wq, wk, wv, q_norm, k_norm, wo, post_attn_norm;
    ge_tensor ffn_norm, w_gate, w_up, w_down, post_ffn_norm;
    ge_tensor ple_gate, ple_proj, ple_post_norm;
    ge_tensor ple_in; /* {H, P}: this layer's rows [li*P, (li+1)*P) of per_layer_model_proj */
    float out_scale; /* layer_output_scale */
} ge_layer;

typedef struct {
    int n_embd;     /* H: hidden width */
    int n_layer;    /* L */
    int n_head;     /* query heads */
    int n_ff;       /* MLP width */
    int n_ple;      /* P: per-layer input width */
    int n_out;      /* E: output width */
    int n_vocab;
    int swa_radius; /* sliding layers see keys with |i - j| <= swa_radius */
    int max_tokens; /* context limit per record */
    float eps;
} ge_hparams;

typedef struct ge_packed_cache ge_packed_cache; /* linear.c */
typedef struct ge_vision ge_vision;             /* vision.c */
typedef struct ge_audio_tower ge_audio_tower;   /* audio_tower.c */
typedef struct ge_wave_ws ge_wave_ws;           /* encoder.c */

struct ge_model {
    ge_config cfg;
    const ge_kern *kern;       /* the selected tier's kernels */
    ge_pool *pool;
    ge_topo topo;
    int threads, max_threads;  /* pool size; cap for one parallel call */
    int wave_threads;          /* cap for the current wave (P-cores only for small waves) */
    float *row_scratch;        /* [threads][row_scratch_len]: one weight row per worker */
    size_t row_scratch_len;
    ge_packed_cache *packed;   /* repacked weights, keyed by data pointer, type and shape */
    ge_wave_ws *wave_ws;       /* the text encoder's buffers, kept between waves */
    float *rope_cos[2], *rope_sin[2]; /* [rope_len][d/2] per layer type (0 sliding, 1 full) */
    int rope_len;
    ge_gguf *gguf;
    ge_hparams hp;
    ge_layer *layers;          /* [n_layer] */
    ge_tensor tok_embd;        /* {H, V} */
    ge_tensor ple_model_proj;  /* {H, L*P} */
    ge_tensor ple_norm;        /* {P} */
    ge_tensor out_norm;        /* {H} */
    ge_tensor out_proj;        /* {H, E} */
    ge_tok *tok;
    char *mmproj[2];           /* --mmproj files */
    int n_mmproj;
    ge_vision *vision;         /* opened on the first image */
    ge_err vision_err;         /* why it could not be opened (code GE_OK: not tried yet) */
    ge_audio_tower *audio;     /* the same for the audio tower */
    ge_err audio_err;
    ge_yield yield;            /* called between media tower layers (--yield) */
    double yield_seconds;      /* spent in it (not tower time) */
    ge_stats stats;
    char describe[256];
};

/* Bind tensor name of a GGUF with exactly the ggml shape ne[4] as a matrix: rows of the
 * product of ne[0..split) values, as many rows as the product of the rest. A missing tensor,
 * another shape or an unsupported type is GE_E_FORMAT / GE_E_UNSUPPORTED naming the file. */
ge_status ge_tensor_bind(const ge_gguf *g, const char *name, const int64_t ne[4], int split,
                         ge_tensor *t, ge_err *err);
/* Grow the per-worker weight-row scratch to rows of n values (towers wider than the text). */
ge_status ge_model_row_scratch(ge_model *m, int64_t n, ge_err *err);

/* encoder.c: free the text encoder's wave workspace (ge_model_free). */
void ge_encoder_free(ge_model *m);

/* Monotonic seconds, for the stats. */
double ge_now(void);
/* n floats, 64-byte aligned and not zeroed (free() them): the GEMM kernels store whole cache
 * lines, which malloc's large blocks (16-byte aligned) would split. */
float *ge_floats(size_t n);

/* ---- linear.c: y = x W^T through the fastest enabled path -------------------------------- */

typedef struct {
    const ge_tensor *w;
    float *y; /* [n_tok, w->ne1] */
} ge_linear_out;

/* y_i = x W_i^T for several weights sharing the input x [n_tok, ne0] (quantised once). */
ge_status ge_linear_many(ge_model *m, const float *x, int n_tok, const ge_linear_out *outs,
                         int n_outs, ge_err *err);
/* The media towers' fast path: as ge_linear_many, with Q8_0 weights by the wide rule
 * (kern.h q8_gemm_wide) when --media-q8-wide is on and the tier has it. clip: NULL, or
 * [lo, hi] to clamp x to first (a clipped linear's input bounds; Q8 GEMMs take it in the
 * quantiser, other paths from a clamped copy). */
ge_status ge_linear_many_media(ge_model *m, const float *x, int n_tok, const float *clip,
                               const ge_linear_out *outs, int n_outs, ge_err *err);
/* The same through the reference path only (fp32 row dots): the media towers' reference. */
ge_status ge_linear_many_ref(ge_model *m, const float *x, int n_tok, const float *clip,
                             const ge_linear_out *outs, int n_outs, ge_err *err);
/* Repack weights ts[0..n) for the fast paths now rather than on first use (--prepack). */
ge_status ge_linear_prepack(ge_model *m, const ge_tensor *const *ts, size_t n, ge_err *err);
void ge_linear_cache_free(ge_model *m);
/* Which kernel multiplies by a matrix of this ggml type on m's tier and switches, e.g.
 * "kq_gemm avx512, packed" or "reference rows" (--print-config, --bench). */
void ge_linear_kernel(const ge_model *m, uint32_t type, char *buf, size_t n);

/* ---- attention.c ------------------------------------------------------------------------ */

/* Attention for one layer over a packed wave (kern.h ge_attn_args), flash or reference. */
void ge_attention(ge_model *m, const ge_attn_args *a, int64_t n_tok);
/* The same with the path chosen by the caller (fast: the tier's tiled kernel). */
void ge_attention_with(ge_model *m, const ge_attn_args *a, int64_t n_tok, bool fast);
/* Attention where every query row sees every key [0, n_tok) (key_lo 0, key_hi n_tok: the
 * vision tower). fast: the tier's dense kernel (kern.h attn_dense) over K^T / V planes
 * repacked from k and v one KV head at a time, when the tier has one for this head dim;
 * otherwise (or without memory for the planes) ge_attention_with. Each row's bits do not
 * depend on the thread count. */
void ge_attention_dense(ge_model *m, const ge_attn_args *a, int64_t n_tok, bool fast);

/* An mmproj's header for one tower ("vision" or "audio"): architecture "clip",
 * clip.has_<tower>_encoder (else GE_E_UNSUPPORTED with no_encoder in the message) and
 * clip.<tower>.projector_type == projector. */
ge_status ge_mmproj_check(const ge_gguf *g, const char *tower, const char *projector,
                          const char *no_encoder, ge_err *err);

/* ---- vision.c: the gemma4v tower of an mmproj file ---------------------------------------- */

/* Open and bind an mmproj's vision tower; its projection must give text_hidden values. Only
 * the clip.vision.* keys and the v.* / mm.input_projection tensors are read: a combined file's
 * audio tower (clip.audio.*, a.*, mm.a.*) is left alone. A file without a vision encoder (an
 * audio-only mmproj) fails with GE_E_UNSUPPORTED and a message holding GE_NO_VISION_ENCODER. */
ge_status ge_vision_open(ge_vision **out, const char *path, int text_hidden, ge_err *err);
#define GE_NO_VISION_ENCODER "no vision encoder"
void ge_vision_free(ge_vision *v); /* accepts NULL */
void ge_vision_trim(ge_vision *v);  /* free the workspace kept between images */
ge_status ge_vision_prepack(ge_model *m, const ge_vision *v, ge_err *err); /* --prepack */
int ge_vision_patch(const ge_vision *v);  /* patch side in pixels (16) */
int ge_vision_widest(const ge_vision *v); /* widest linear input */
/* Soft tokens of one image: patches [n][patch * patch * 3] in [0, 1] ((y, x, channel) order,
 * row-major over the pw x ph grid), positions pos[2 t] = x, pos[2 t + 1] = y; out gets
 * (pw / 3) * (ph / 3) rows of text_hidden values. fast: the fast path, else the reference.
 * yield (or NULL) is called between layers. The tower keeps its workspace between calls, so
 * one tower encodes one image at a time. */
ge_status ge_vision_encode(ge_model *m, ge_vision *v, bool fast, const float *patches,
                           const int32_t *pos, int n, int pw, int ph, float *out,
                           const ge_yield *yield, ge_err *err);

/* ---- audio_tower.c: the gemma4a audio tower (conformer) of an mmproj ---------------------- */

/* Open and bind an mmproj's audio tower; its projection must give text_hidden values. Only
 * clip.audio.* and the a.* / mm.a.* tensors are read. A file without an audio encoder fails
 * with GE_E_UNSUPPORTED and a message holding GE_NO_AUDIO_ENCODER. */
ge_status ge_audio_tower_open(ge_audio_tower **out, const char *path, int text_hidden,
                              ge_err *err);
void ge_audio_tower_free(ge_audio_tower *t); /* accepts NULL */
void ge_audio_tower_trim(ge_audio_tower *t);  /* free the workspace kept between clips */
ge_status ge_audio_tower_prepack(ge_model *m, const ge_audio_tower *t, ge_err *err);
int ge_audio_tower_widest(const ge_audio_tower *t); /* widest linear input */
/* Soft tokens of one clip: feat [>= n_valid][128] log-mel features (ge_audio_features), of
 * which the first n_valid frames are real; out gets (n_valid + 3) / 4 rows of text_hidden
 * values. fast: the fast path, else the reference. yield (or NULL) is called between layers.
 * The tower keeps its workspace between calls, so one tower encodes one clip at a time. */
ge_status ge_audio_tower_encode(ge_model *m, ge_audio_tower *t, bool fast, const float *feat,
                                int64_t n_valid, float *out, const ge_yield *yield, ge_err *err);

/* Run fn over n tasks on the model's pool (at most max threads; 0 = the configured cap). */
void ge_parallel(ge_model *m, int64_t n, int max, ge_task_fn fn, void *ctx);

/* Row r of a tensor as fp32 (n = ne0 values). */
void ge_tensor_row(const ge_tensor *t, int64_t r, float *dst);

#endif
