/* test_model.c - binding the tiny models: hyperparameters from metadata, strict tensor checks
 * on the --broken variants (argv[1] = folder holding broken-*.gguf), and embedding basics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "linear.h"
#include "model.h"

static double cosine(const float *a, const float *b, int n)
{
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++)
        ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return ab / sqrt(aa * bb);
}

static void embed_text(ge_model *m, const char *text, float *out, ge_err *err)
{
    ge_tokens t = {0};
    if (ge_tokenize(m, NULL, text, strlen(text), &t, err) == GE_OK)
        ge_embed(m, t.ids, t.n, out, err);
    ge_tokens_free(&t);
}

/* --yield: the hook embeds a text between the tower's layers and counts the calls */
typedef struct {
    ge_model *m;
    int calls;
    float vec[768];
} yield_probe;

static void probe_yield(void *ctx)
{
    yield_probe *y = ctx;
    ge_err e = {0};
    y->calls++;
    embed_text(y->m, "text between two tower layers", y->vec, &e);
}

/* An image encoded with a yield hook that runs text waves gives the same rows bit for bit,
 * the hook runs between every two of the tower's layers (never with --no-yield), and the
 * text it embeds equals the same text embedded on its own. The second round also prepacks
 * the tower at ge_model_set_mmproj (--prepack): the same rows again. */
static void check_yield(void)
{
    const int pw = 9, ph = 6, n = pw * ph;
    const char *mmproj = "testdata/tiny-mmproj-f32.gguf";
    float *first = NULL;
    for (int on = 1; on >= 0; on--) {
        ge_config cfg;
        ge_config_defaults(&cfg);
        cfg.v[GE_CFG_YIELD] = on;
        cfg.v[GE_CFG_PREPACK] = !on;
        ge_model *m = NULL;
        ge_err err = {0};
        if (!check(ge_model_open(&m, "testdata/tiny-f32.gguf", &cfg, &err) == GE_OK &&
                       ge_model_set_mmproj(m, &mmproj, 1, &err) == GE_OK,
                   "yield: the tiny model and mmproj open", "%s", err.msg))
            return;
        float *patches = malloc((size_t)n * 768 * sizeof *patches);
        int32_t pos[2 * 54];
        for (int i = 0; i < n * 768; i++)
            patches[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
        for (int t = 0; t < n; t++)
            pos[2 * t] = t % pw, pos[2 * t + 1] = t / pw;
        const size_t rows = (size_t)(pw / 3) * (ph / 3) * ge_model_hidden(m);
        float *plain = malloc(rows * sizeof *plain), *yielded = malloc(rows * sizeof *yielded);
        yield_probe y = {.m = m};
        float alone[768];
        embed_text(m, "text between two tower layers", alone, &err);
        ge_status s1 = ge_model_encode_image(m, patches, pos, pw, ph, plain, &err);
        ge_model_set_yield(m, (ge_yield){probe_yield, &y});
        ge_status s2 = ge_model_encode_image(m, patches, pos, pw, ph, yielded, &err);
        ge_model_set_yield(m, (ge_yield){NULL, NULL});
        if (on) {
            check(!s1 && !s2 && memcmp(plain, yielded, rows * sizeof *plain) == 0,
                  "yield: text waves between the tower's layers leave the image's rows unchanged",
                  "%s", err.msg);
            check(y.calls == 2, "yield: the hook runs between every two layers (3 layers: 2)",
                  "%d calls", y.calls);
            check(memcmp(alone, y.vec, sizeof alone) == 0,
                  "yield: a text embedded inside the hook equals it embedded alone", "differs");
            first = plain, plain = NULL;
        } else {
            check(!s2 && y.calls == 0, "--no-yield: the hook is never called", "%d calls",
                  y.calls);
            check(!s1 && first && memcmp(first, plain, rows * sizeof *plain) == 0,
                  "--prepack: the prepacked tower gives the same rows", "%s", err.msg);
        }
        free(patches), free(plain), free(yielded);
        ge_model_free(m);
    }
    free(first);
}

/* The repacked-weight cache tells apart two weights whose data starts at the same address:
 * wq's first half as its own weight, repacked first, must not hand its (half-size) buffer to
 * wq (an out-of-bounds read under the sanitizers, wrong rows otherwise). wq alone in a fresh
 * model gives the reference rows; the Q8_0 file takes the Q8 GEMM, the f32 file the SGEMM. */
static void check_pack_identity(const char *path)
{
    const int n_tok = 5;
    float *rows[2] = {NULL, NULL}, *x = malloc((size_t)n_tok * 64 * sizeof *x);
    float *half = malloc((size_t)n_tok * 64 * sizeof *half);
    size_t n_out = 0;
    for (int k = 0; k < n_tok * 64; k++)
        x[k] = sinf(0.37f * (float)k);
    for (int aliased = 0; aliased < 2; aliased++) {
        ge_model *m = NULL;
        ge_err err = {0};
        if (!check(ge_model_open(&m, path, NULL, &err) == GE_OK, "pack identity: model opens",
                   "%s", err.msg))
            break;
        const ge_tensor *wq = &m->layers[0].wq;
        ge_tensor first = *wq;
        first.ne1 = wq->ne1 / 2;
        n_out = (size_t)wq->ne1;
        rows[aliased] = malloc((size_t)n_tok * n_out * sizeof(float));
        ge_status st = aliased ? ge_linear_many(&m->cx, x, n_tok, &(ge_linear_out){&first, half}, 1,
                                                &err)
                               : GE_OK;
        if (!st)
            st = ge_linear_many(&m->cx, x, n_tok, &(ge_linear_out){wq, rows[aliased]}, 1, &err);
        check(st == GE_OK, "pack identity: the linears run", "%s", err.msg);
        ge_model_free(m);
    }
    char name[160];
    snprintf(name, sizeof name, "%s: a weight sharing another's data address gets its own "
             "repacked copy", path);
    check(rows[0] && rows[1] && !memcmp(rows[0], rows[1], n_tok * n_out * sizeof(float)), name,
          "rows differ");
    free(rows[0]), free(rows[1]), free(x), free(half);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "build/test-out";
    ge_model *m = NULL;
    ge_err err = {0};
    if (!check(ge_model_open(&m, "testdata/tiny-f32.gguf", NULL, &err) == GE_OK, "tiny f32 binds",
               "%s", err.msg))
        return check_done();
    const ge_hparams *hp = &m->hp;
    check(hp->n_embd == 64 && hp->n_layer == 4 && hp->n_head == 4 && hp->n_ff == 32 &&
              hp->n_ple == 32 && hp->n_out == 768 && hp->swa_radius == 8 &&
              hp->max_tokens == 8192,
          "tiny hyperparameters from metadata", "%s", ge_model_describe(m));
    check(m->layers[0].sliding && !m->layers[1].sliding && !m->layers[3].sliding &&
              m->layers[0].head_dim == 16 && m->layers[0].n_kv == 2 &&
              m->layers[1].head_dim == 32 && m->layers[1].n_kv == 1 &&
              m->layers[0].rope_base == 10000.0f && m->layers[1].rope_base == 1e6f,
          "per-layer types, head dims, KV heads and rope bases", "%s", ge_model_describe(m));

    float *a = malloc(768 * 4), *b = malloc(768 * 4), *c = malloc(768 * 4);
    embed_text(m, "the cat sat on the mat", a, &err);
    embed_text(m, "the cat sat on the mat", b, &err);
    embed_text(m, "a completely different sentence about code", c, &err);
    double n2 = 0;
    for (int i = 0; i < 768; i++)
        n2 += (double)a[i] * a[i];
    check(fabs(sqrt(n2) - 1.0) < 1e-5, "embedding is unit length", "%g", n2);
    check(memcmp(a, b, 768 * 4) == 0, "embedding is deterministic", "differs");
    check(cosine(a, c, 768) < 0.99, "different texts give different vectors", "cosine %.6f",
          cosine(a, c, 768));
    ge_matryoshka(a, 128);
    n2 = 0;
    for (int i = 0; i < 128; i++)
        n2 += (double)a[i] * a[i];
    check(fabs(n2 - 1.0) < 1e-5, "matryoshka renormalises", "%g", n2);

    int32_t bad_id = hp->n_vocab;
    check(ge_embed(m, &bad_id, 1, a, &err) == GE_E_INPUT, "out-of-vocabulary id rejected",
          "%s", err.msg);
    int32_t *many = calloc(8193, sizeof *many);
    check(ge_embed(m, many, 8193, a, &err) == GE_E_LIMIT, "over the context limit rejected",
          "%s", err.msg);
    free(many);

    ge_tokens t = {0};
    ge_tokenize(m, NULL, "one two three four five six seven", 33, &t, &err);
    size_t n = t.n;
    int32_t last = t.ids[n - 1];
    ge_tokens_truncate(m, &t, 4);
    check(t.n == 4 && t.ids[3] == last && n > 4, "truncation keeps <eos>", "n=%zu", t.n);
    ge_tokens_free(&t);

    /* media rows: a placeholder whose row is the scaled embedding of the token it replaced
     * gives that text's vector exactly; counts must match */
    int32_t ph = ge_tok_find(m->tok, "<|image|>", 9);
    if (check(ph >= 0, "the tiny vocabulary has <|image|>", "missing")) {
        ge_tokenize(m, NULL, "the cat sat on the mat", 22, &t, &err);
        embed_text(m, "the cat sat on the mat", a, &err);
        const int H = hp->n_embd;
        float *rows = malloc(2 * (size_t)H * sizeof *rows);
        size_t pos[2] = {2, t.n - 2};
        for (int k = 0; k < 2; k++) {
            ge_tensor_row(&m->tok_embd, t.ids[pos[k]], rows + (size_t)k * H);
            for (int i = 0; i < H; i++)
                rows[(size_t)k * H + i] *= sqrtf((float)H);
            t.ids[pos[k]] = ph;
        }
        const int32_t *ids = t.ids;
        ge_media_rows mr = {rows, 2};
        ge_status st = ge_embed_batch_media(m, &ids, &t.n, &mr, 1, b, &err);
        check(st == GE_OK && memcmp(a, b, 768 * 4) == 0,
              "media rows equal to the scaled token rows give the text's vector", "%s",
              st ? err.msg : "differs");
        mr.n = 1;
        check(ge_embed_batch_media(m, &ids, &t.n, &mr, 1, b, &err) == GE_E_INPUT,
              "fewer media rows than placeholders rejected", "%s", err.msg);
        check(ge_embed(m, t.ids, t.n, b, &err) == GE_E_INPUT,
              "a placeholder without media rows rejected", "%s", err.msg);
        free(rows);
        ge_tokens_free(&t);

        /* parts: <bos> query: a photo <|image> <|image|> x4 <image|> of a cat <eos> */
        ge_tokens want = {0}, got = {0}, piece = {0};
        ge_tokenize(m, "query: ", "a photo", 7, &piece, &err);
        for (size_t i = 0; i + 1 < piece.n; i++) /* up to its <eos> */
            want.ids = realloc(want.ids, (want.n + 1) * 4), want.ids[want.n++] = piece.ids[i];
        int32_t block[6] = {ge_tok_find(m->tok, "<|image>", 8), ph, ph, ph, ph,
                            ge_tok_find(m->tok, "<image|>", 8)};
        want.ids = realloc(want.ids, (want.n + 6) * 4);
        memcpy(want.ids + want.n, block, sizeof block), want.n += 6;
        piece.n = 0;
        ge_tokenize(m, NULL, " of a cat", 9, &piece, &err);
        want.ids = realloc(want.ids, (want.n + piece.n) * 4);
        memcpy(want.ids + want.n, piece.ids + 1, (piece.n - 1) * 4), want.n += piece.n - 1;
        ge_part parts[] = {{GE_KIND_TEXT, "a photo", 7, 0}, {GE_KIND_IMAGE, NULL, 0, 4},
                           {GE_KIND_TEXT, " of a cat", 9, 0}};
        ge_status st2 = ge_tokenize_parts(m, "query: ", parts, 3, &got, &err);
        check(st2 == GE_OK && got.n == want.n && !memcmp(got.ids, want.ids, want.n * 4),
              "parts: prompt and texts around the image block, in order", "%s n %zu/%zu",
              st2 ? err.msg : "ids differ", got.n, want.n);
        parts[0].text = "a <|image|> photo", parts[0].len = 17;
        got.n = 0;
        check(ge_tokenize_parts(m, NULL, parts, 3, &got, &err) == GE_E_INPUT && got.n == 0,
              "parts: a placeholder written in a text is refused", "%s", err.msg);
        ge_tokens_free(&want), ge_tokens_free(&got), ge_tokens_free(&piece);
    }
    free(a), free(b), free(c);
    ge_model_free(m);

    /* broken files: one line naming the file (and the tensor where there is one) */
    const struct {
        const char *kind, *needle;
    } broken[] = {{"truncated", "past the end"}, {"magic", "magic"},
                  {"missing", "is missing"},     {"shape", "expected shape"},
                  {"type", "unknown tensor type"}, {"counts", "corrupt header"}};
    for (size_t k = 0; k < sizeof broken / sizeof broken[0]; k++) {
        char path[512], name[64];
        snprintf(path, sizeof path, "%s/broken-%s.gguf", dir, broken[k].kind);
        snprintf(name, sizeof name, "broken-%s gives a clear error", broken[k].kind);
        if (access(path, R_OK) != 0) {
            check(false, name, "%s was not generated", path);
            continue;
        }
        ge_status st = ge_model_open(&m, path, NULL, &err);
        check(st != GE_OK && m == NULL && strstr(err.msg, path) &&
                  strstr(err.msg, broken[k].needle) && !strchr(err.msg, '\n'),
              name, "%s: %s", ge_status_name(st), err.msg);
    }
    check_yield();
    check_pack_identity("testdata/tiny-q8_0.gguf");
    check_pack_identity("testdata/tiny-f32.gguf");
    return check_done();
}
