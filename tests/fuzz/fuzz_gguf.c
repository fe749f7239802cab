/* fuzz_gguf.c - libFuzzer target: the GGUF reader (engine/gguf.c) and the model binding
 * (engine/model.c, ge_model_open) on arbitrary file contents.
 *
 * The input is written to an anonymous memory file (memfd) that the engine opens by its
 * /proc/self/fd path, so the real open/mmap path runs and nothing is left behind. After a
 * successful ge_gguf_open every pointer the reader handed out is checked against the mapping
 * (the header's promise that later accessors cannot read outside it), every typed accessor
 * is called on every key, and when the metadata holds a tokenizer a few texts (and the
 * input's last bytes) are encoded with it, whatever else is wrong with the file. Then
 * ge_model_open binds the same file; when that works too, a short text is tokenized and
 * embedded, so hyperparameters that pass validation are also safe to compute with. The
 * mmproj towers' loaders bind it too (ge_vision_open, ge_audio_tower_open, at the text width
 * the file's projections claim); a tower that loads encodes a 3x3-patch image or a 16-frame
 * clip as the CLI lays them out, on the fast and the reference path, with the kernels of
 * the tiny text model (GE_FUZZ_TEXT_MODEL, default testdata/tiny-q8_0.gguf; without it the
 * towers are only bound).
 *
 *   make fuzz-build && build/fuzz/fuzz_gguf build/fuzz/corpus/gguf build/fuzz/seeds/gguf
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ge.h"
#include "gguf.h"
#include "model.h"
#include "tok.h"

static int mem_fd = -1;
static char mem_path[64];

/* Put data into the memory file; its path stays /proc/self/fd/N. */
static void put_file(const uint8_t *data, size_t size)
{
    if (mem_fd < 0) {
        mem_fd = memfd_create("fuzz_gguf", 0);
        if (mem_fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(mem_path, sizeof mem_path, "/proc/self/fd/%d", mem_fd);
    }
    if (ftruncate(mem_fd, 0) != 0 || (size && pwrite(mem_fd, data, size, 0) != (ssize_t)size)) {
        perror("memfd write");
        abort();
    }
}

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_gguf: invariant broken: %s\n", what);
        abort();
    }
}

/* [p, p+n) lies inside the mapping */
static int inside(const ge_gguf *g, const void *p, uint64_t n)
{
    const uint8_t *q = p;
    return q >= g->base && (uint64_t)(q - g->base) <= g->size &&
           n <= g->size - (uint64_t)(q - g->base);
}

static size_t scalar_size(uint32_t t)
{
    switch (t) {
    case GE_GGUF_U8: case GE_GGUF_I8: case GE_GGUF_BOOL: return 1;
    case GE_GGUF_U16: case GE_GGUF_I16: return 2;
    case GE_GGUF_U32: case GE_GGUF_I32: case GE_GGUF_F32: return 4;
    case GE_GGUF_U64: case GE_GGUF_I64: case GE_GGUF_F64: return 8;
    default: return 0;
    }
}

static void check_reader(const ge_gguf *g)
{
    must(g->version == 2 || g->version == 3, "version");
    must(g->alignment && !(g->alignment & (g->alignment - 1)), "alignment");
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const ge_gguf_kv *kv = &g->kv[i];
        must(inside(g, kv->key.ptr, kv->key.len), "key inside the file");
        if (kv->type == GE_GGUF_STR) {
            uint64_t len;
            must(inside(g, kv->val, 8), "string length inside the file");
            memcpy(&len, kv->val, 8);
            must(inside(g, kv->val + 8, len), "string inside the file");
        } else if (kv->type == GE_GGUF_ARR) {
            if (kv->arr_type == GE_GGUF_STR) {
                const uint8_t *p = kv->val;
                for (uint64_t k = 0; k < kv->arr_n; k++) {
                    uint64_t len;
                    must(inside(g, p, 8), "array string length inside the file");
                    memcpy(&len, p, 8);
                    must(inside(g, p + 8, len), "array string inside the file");
                    p += 8 + len;
                }
            } else {
                size_t es = scalar_size(kv->arr_type);
                must(es != 0, "array element type");
                must(kv->arr_n <= g->size / es && inside(g, kv->val, kv->arr_n * es),
                     "array inside the file");
            }
        } else {
            size_t es = scalar_size(kv->type);
            must(es != 0, "value type");
            must(inside(g, kv->val, es), "value inside the file");
        }
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const ge_gguf_tensor *t = &g->tensors[i];
        size_t nl = strnlen(t->name, sizeof t->name);
        must(nl > 0 && nl < sizeof t->name, "tensor name");
        must(t->n_dims >= 1 && t->n_dims <= GE_GGUF_MAX_DIMS, "tensor dims");
        for (int d = 0; d < GE_GGUF_MAX_DIMS; d++)
            must(t->ne[d] >= 1, "tensor dimension");
        must(inside(g, t->data, t->nbytes), "tensor data inside the file");
        must(((const uint8_t *)t->data - g->base) % g->alignment == 0, "tensor data aligned");
        must(ge_mapping_contains(t->data, t->nbytes), "tensor data in the mapping registry");
        must(ge_gguf_tensor_find(g, t->name) == t, "tensor names unique");
    }
}

/* Every typed accessor on every key (the results only have to be safe to compute). */
static void call_accessors(const ge_gguf *g)
{
    for (uint64_t i = 0; i < g->n_kv && i < 4096; i++) {
        const ge_gguf_kv *kv = &g->kv[i];
        char key[256];
        if (kv->key.len >= sizeof key || memchr(kv->key.ptr, 0, kv->key.len))
            continue;
        memcpy(key, kv->key.ptr, kv->key.len);
        key[kv->key.len] = 0;
        ge_err err;
        uint32_t u;
        float f;
        bool b;
        ge_gguf_str s;
        ge_gguf_get_u32(g, key, &u, &err);
        ge_gguf_get_u32_or(g, key, 7, &u, &err);
        ge_gguf_get_f32(g, key, &f, &err);
        ge_gguf_get_bool_or(g, key, true, &b, &err);
        if (ge_gguf_get_str(g, key, &s, &err) == GE_OK)
            must(inside(g, s.ptr, s.len), "get_str inside the file");
        ge_gguf_str *strs;
        size_t n;
        if (ge_gguf_get_str_array(g, key, &strs, &n, &err) == GE_OK) {
            for (size_t k = 0; k < n; k++)
                must(inside(g, strs[k].ptr, strs[k].len), "get_str_array inside the file");
            free(strs);
        }
        const ge_gguf_kv *found = ge_gguf_find(g, key);
        must(found != NULL, "find a key that exists");
        size_t an = found->type == GE_GGUF_ARR ? (size_t)found->arr_n : 3;
        if (an > 1 << 16)
            continue;
        int64_t *iv = malloc((an ? an : 1) * sizeof *iv);
        float *fv = malloc((an ? an : 1) * sizeof *fv);
        if (iv && fv) {
            ge_gguf_get_int_array(g, key, iv, an, &err);
            ge_gguf_get_f32_array(g, key, fv, an, &err);
        }
        free(iv);
        free(fv);
    }
}

/* The tokenizer of a (damaged) vocabulary: ids stay inside it. */
static void tokenizer(const ge_gguf *g, const uint8_t *data, size_t size)
{
    ge_tok *t;
    ge_err err;
    if (ge_tok_create(&t, g, &err) != GE_OK)
        return;
    static const char *const texts[] = {
        "Hello world: the quick brown fox",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 \xc3\xa9",
        "<start_of_turn>user\n<|image|><unk>",
        "  \t\n  ",
        ""};
    ge_tokens out = {0};
    for (size_t k = 0; k <= sizeof texts / sizeof texts[0]; k++) {
        const char *s = k < sizeof texts / sizeof texts[0] ? texts[k] : NULL;
        size_t n = s ? strlen(s) : size < 256 ? size : 256;
        if (!s)
            s = (const char *)data + size - n;
        out.n = 0;
        if (ge_tok_encode(t, s, n, true, &out, &err) != GE_OK)
            continue;
        for (size_t i = 0; i < out.n; i++)
            must(out.ids[i] >= 0 && out.ids[i] < ge_tok_vocab_size(t), "ids in the vocabulary");
        must(ge_tok_find_placeholder(t, out.ids, out.n, NULL) <= out.n, "placeholder index");
    }
    ge_tokens_free(&out);
    ge_tok_free(t);
}

static void model(void)
{
    ge_config cfg;
    ge_config_defaults(&cfg);
    cfg.v[GE_CFG_THREADS] = 1;
    ge_model *m;
    ge_err err;
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("GE_FUZZ_VERBOSE") != NULL;
    if (ge_model_open(&m, mem_path, &cfg, &err) != GE_OK) {
        must(m == NULL && err.msg[0] != 0, "a failed open leaves no model and says why");
        if (verbose)
            fprintf(stderr, "model: %s\n", err.msg);
        return;
    }
    if (verbose)
        fprintf(stderr, "model: %s\n", ge_model_describe(m));
    must(ge_model_dim(m) > 0 && ge_model_max_tokens(m) > 0, "model dims");
    ge_tokens t = {0};
    static const char text[] = "Hello world: ça va? 日本語 <start_of_turn>";
    if (ge_tokenize(m, ge_prompt_find("query"), text, sizeof text - 1, &t, &err) == GE_OK) {
        ge_tokens_truncate(m, &t, (size_t)ge_model_max_tokens(m));
        float *v = malloc((size_t)ge_model_dim(m) * sizeof *v);
        if (v && t.n > 0)
            ge_embed(m, t.ids, t.n, v, &err);
        free(v);
    }
    ge_tokens_free(&t);
    ge_model_free(m);
}

/* The model whose kernels and pool run the towers (opened once; NULL when unavailable). */
static ge_model *text_model(void)
{
    static ge_model *m;
    static int tried;
    if (!tried) {
        tried = 1;
        const char *path = getenv("GE_FUZZ_TEXT_MODEL");
        ge_config cfg;
        ge_config_defaults(&cfg);
        cfg.v[GE_CFG_THREADS] = 1;
        ge_err err;
        if (ge_model_open(&m, path ? path : "testdata/tiny-q8_0.gguf", &cfg, &err) != GE_OK)
            m = NULL;
    }
    return m;
}

/* The vision and audio towers of the input, at the widths its projections claim. */
static void towers(int vision_dim, int audio_dim)
{
    ge_model *m = text_model();
    ge_err err;
    ge_vision *v = NULL;
    const bool verbose = getenv("GE_FUZZ_VERBOSE") != NULL;
    ge_status st = ge_vision_open(&v, mem_path, vision_dim, &err);
    if (verbose)
        fprintf(stderr, "vision: %s\n", st ? err.msg : "loads");
    if (st == GE_OK) {
        must(ge_vision_patch(v) == GE_IMAGE_PATCH, "vision patch size");
        enum { PW = 3, PH = 3, N = PW * PH };
        float *patches = malloc((size_t)N * GE_IMAGE_PATCH_DIM * sizeof *patches);
        float *out = malloc((size_t)vision_dim * sizeof *out);
        int32_t pos[2 * N];
        for (int t = 0; t < N; t++)
            pos[2 * t] = t % PW, pos[2 * t + 1] = t / PW;
        for (size_t i = 0; patches && i < (size_t)N * GE_IMAGE_PATCH_DIM; i++)
            patches[i] = (float)(i * 2654435761u >> 24) / 255.0f;
        for (int fast = 0; m && patches && out && fast < 2; fast++)
            if ((st = ge_vision_encode(m, v, fast, patches, pos, N, PW, PH, out, NULL, &err)) &&
                verbose)
                fprintf(stderr, "vision encode: %s\n", err.msg);
        free(patches);
        free(out);
        ge_vision_free(v);
        if (m)
            ge_linear_cache_free(m); /* keyed by addresses in the mapping just closed */
    }
    ge_audio_tower *a = NULL;
    st = ge_audio_tower_open(&a, mem_path, audio_dim, &err);
    if (verbose)
        fprintf(stderr, "audio: %s\n", st ? err.msg : "loads");
    if (st == GE_OK) {
        enum { FRAMES = 16 };
        float *feat = malloc((size_t)FRAMES * GE_AUDIO_MEL * sizeof *feat);
        float *out = malloc((size_t)(FRAMES + 3) / 4 * audio_dim * sizeof *out);
        for (size_t i = 0; feat && i < (size_t)FRAMES * GE_AUDIO_MEL; i++)
            feat[i] = (float)(i * 2654435761u >> 24) / 64.0f - 2.0f;
        for (int fast = 0; m && feat && out && fast < 2; fast++)
            if ((st = ge_audio_tower_encode(m, a, fast, feat, FRAMES, out, NULL, &err)) &&
                verbose)
                fprintf(stderr, "audio encode: %s\n", err.msg);
        free(feat);
        free(out);
        ge_audio_tower_free(a);
        if (m)
            ge_linear_cache_free(m);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    put_file(data, size);
    ge_gguf *g;
    ge_err err;
    ge_status st = ge_gguf_open(&g, mem_path, &err);
    if (st != GE_OK && getenv("GE_FUZZ_VERBOSE"))
        fprintf(stderr, "gguf: %s\n", err.msg);
    if (st != GE_OK) {
        must(g == NULL && err.code == st && err.msg[0] != 0,
             "a failed open leaves no reader and says why");
        return 0;
    }
    check_reader(g);
    call_accessors(g);
    tokenizer(g, data, size);
    uint32_t vdim = 64, adim = 64;
    ge_gguf_get_u32_or(g, "clip.vision.projection_dim", 64, &vdim, &err);
    ge_gguf_get_u32_or(g, "clip.audio.projection_dim", 64, &adim, &err);
    ge_gguf_close(g);
    model();
    towers(vdim >= 1 && vdim <= 1 << 16 ? (int)vdim : 64,
           adim >= 1 && adim <= 1 << 16 ? (int)adim : 64);
    return 0;
}
