/* model.h - the model handle of ge.h: the gemma-embedding2 text model bound to a GGUF file,
 * the compute context it runs on, and the media towers' state.
 *
 * Hyperparameters come from metadata (docs/gguf.md 3); every tensor is looked up by name and its
 * type and shape checked at open. Weight data stays in the read-only mapping. Nothing about
 * the model's size is a compile-time constant, so a tiny random model loads through the
 * same code as the real one. */
#ifndef GE_MODEL_H
#define GE_MODEL_H

#include <stdbool.h>

#include "compute.h"
#include "ge.h"
#include "gguf.h"
#include "tensor.h"
#include "tok.h"

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

typedef struct ge_vision ge_vision;           /* vision.h */
typedef struct ge_audio_tower ge_audio_tower; /* audio_tower.h */
typedef struct ge_wave_ws ge_wave_ws;         /* encoder.c */

struct ge_model {
    ge_compute cx;             /* tier, pool, scratch, packed weights, stats (cx.cfg: switches) */
    /* encoder.c's state, kept between waves (freed by ge_encoder_free, encoder.h) */
    ge_wave_ws *wave_ws;       /* the wave's buffers */
    float *rope_cos[2], *rope_sin[2]; /* [rope_len][d/2] per layer type (0 sliding, 1 full) */
    int rope_len;
    /* the text model bound to its file (model.c) */
    ge_gguf *gguf;
    ge_hparams hp;
    ge_layer *layers;          /* [n_layer] */
    ge_tensor tok_embd;        /* {H, V} */
    ge_tensor ple_model_proj;  /* {H, L*P} */
    ge_tensor ple_norm;        /* {P} */
    ge_tensor out_norm;        /* {H} */
    ge_tensor out_proj;        /* {H, E} */
    ge_tok *tok;
    char describe[256];
    /* media.c's state: the towers, opened on first use (freed by ge_media_free, media.h) */
    char *mmproj[2];           /* --mmproj files */
    int n_mmproj;
    ge_vision *vision;         /* opened on the first image */
    ge_err vision_err;         /* why it could not be opened (code GE_OK: not tried yet) */
    ge_audio_tower *audio;     /* the same for the audio tower */
    ge_err audio_err;
    ge_yield yield;            /* called between media tower layers (--yield) */
    double yield_seconds;      /* spent in it (not tower time) */
};

/* Bind the text model of the GGUF at path (hyperparameters, tokenizer, every tensor, with
 * the checks docs/gguf.md 3 lists); ge_text_free releases what it bound, also after a failure. */
ge_status ge_text_bind(ge_model *m, const char *path, ge_err *err);
void ge_text_free(ge_model *m);

#endif
