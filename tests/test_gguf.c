/* test_gguf.c - the GGUF reader on hand-built files (every size/offset/count check) and on
 * the generated tiny models and their --broken variants (argv[1] = folder with broken-*.gguf). */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "dtype.h"
#include "gguf.h"

/* ---- a tiny in-memory GGUF builder --------------------------------------------------------- */

typedef struct {
    uint8_t buf[8192];
    size_t n;
} bytes;

static void put(bytes *b, const void *p, size_t n) { memcpy(b->buf + b->n, p, n), b->n += n; }
static void u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static void u64(bytes *b, uint64_t v) { put(b, &v, 8); }
static void str(bytes *b, const char *s) { u64(b, strlen(s)), put(b, s, strlen(s)); }
static void pad(bytes *b, size_t a) { while (b->n % a) b->buf[b->n++] = 0; }

/* A valid file: 3 kv (arch string, u32 array, alignment) and one F32 tensor "w" {4, 2};
 * optionally a second F32 tensor "v" {4, 2} at offset2, another key in place of
 * "test.values", booleans for its values. */
typedef struct {
    uint64_t n_tensors, n_kv, str_len, arr_n, ne0, offset;
    uint32_t type, n_dims, version;
    int truncate_data;
    const char *key2;    /* the second key (default "test.values") */
    uint32_t arr_type;   /* its element type: GE_GGUF_U32 or GE_GGUF_BOOL (values 1, 0, 2) */
    int second;          /* a second tensor "v" at offset2 */
    uint64_t offset2;
} spec;

static spec good(void)
{
    return (spec){.n_tensors = 1, .n_kv = 3, .str_len = 4, .arr_n = 3, .ne0 = 4,
                  .type = GE_T_F32, .n_dims = 2, .version = 3, .key2 = "test.values",
                  .arr_type = GE_GGUF_U32};
}

static void build(bytes *b, spec s)
{
    b->n = 0;
    put(b, "GGUF", 4);
    u32(b, s.version);
    u64(b, s.n_tensors + (s.second != 0));
    u64(b, s.n_kv);
    str(b, "general.architecture");
    u32(b, GE_GGUF_STR);
    u64(b, s.str_len);
    put(b, "test", 4);
    str(b, s.key2);
    u32(b, GE_GGUF_ARR);
    u32(b, s.arr_type);
    u64(b, s.arr_n);
    for (uint32_t i = 0; i < 3; i++) {
        if (s.arr_type == GE_GGUF_BOOL)
            put(b, &(uint8_t){(uint8_t)((1 + 2 * i) % 3)}, 1);
        else
            u32(b, 10 + i);
    }
    str(b, "general.alignment");
    u32(b, GE_GGUF_U32);
    u32(b, 32);
    for (int t = 0; t <= s.second; t++) {
        str(b, t ? "v" : "w");
        u32(b, s.n_dims);
        u64(b, s.ne0);
        u64(b, 2);
        u32(b, s.type);
        u64(b, t ? s.offset2 : s.offset);
    }
    pad(b, 32);
    for (int i = 0; i < (s.second ? 32 : 8); i++) {
        float f = (float)i;
        put(b, &f, 4);
    }
    if (s.truncate_data)
        b->n -= 4;
}

static ge_status open_spec(spec s, ge_gguf **g, ge_err *err, const char *path)
{
    bytes b;
    build(&b, s);
    FILE *f = fopen(path, "wb");
    if (!f)
        return GE_E_IO;
    fwrite(b.buf, 1, b.n, f);
    fclose(f);
    return ge_gguf_open(g, path, err);
}

static void expect_fail(spec s, ge_status want, const char *what, const char *path)
{
    ge_gguf *g = NULL;
    ge_err err = {0};
    ge_status st = open_spec(s, &g, &err, path);
    check(st == want && g == NULL && strstr(err.msg, path) != NULL && !strchr(err.msg, '\n'),
          what, "status %s (want %s), message \"%s\"", ge_status_name(st), ge_status_name(want),
          err.msg);
    ge_gguf_close(g);
}

/* The messages of the duplicate-key and overlap refusals name what they refuse. */
static void check_messages(const char *path)
{
    ge_gguf *g = NULL;
    ge_err err = {0};
    spec s = good();
    s.key2 = "general.architecture";
    check(open_spec(s, &g, &err, path) == GE_E_FORMAT &&
              strstr(err.msg, "duplicate metadata key general.architecture"),
          "the duplicate key is named", "%s", err.msg);
    s = good(), s.second = 1, s.offset2 = 0;
    check(open_spec(s, &g, &err, path) == GE_E_FORMAT && strstr(err.msg, "tensors w and v") &&
              strstr(err.msg, "overlap"),
          "both overlapping tensors are named", "%s", err.msg);
}

/* A string array over a hole (a sparse file: 16 Mi empty strings, 128 MiB of zeros that are
 * not on disk) is stepped over without faulting in its pages. */
static void check_hole(const char *path)
{
    const uint64_t n = 16u << 20;
    bytes b = {.n = 0};
    put(&b, "GGUF", 4);
    u32(&b, 3);
    u64(&b, 0);
    u64(&b, 1);
    str(&b, "tokenizer.ggml.tokens");
    u32(&b, GE_GGUF_ARR);
    u32(&b, GE_GGUF_STR);
    u64(&b, n);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b.buf, 1, b.n, f) != b.n || ftruncate(fileno(f), (off_t)(b.n + 8 * n))) {
        check(false, "sparse file written", "%s", path);
        if (f)
            fclose(f);
        return;
    }
    fclose(f);
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    ge_gguf *g = NULL;
    ge_err err = {0};
    ge_status st = ge_gguf_open(&g, path, &err);
    getrusage(RUSAGE_SELF, &r1);
    const ge_gguf_kv *kv = st == GE_OK ? ge_gguf_find(g, "tokenizer.ggml.tokens") : NULL;
    uint64_t len0 = 1;
    if (kv)
        memcpy(&len0, kv->val, 8);
    check(kv && kv->arr_n == n && len0 == 0, "a string array over a hole opens", "%s", err.msg);
    check(r1.ru_maxrss - r0.ru_maxrss < 8192,
          "a 128 MiB hole of empty strings is not read (peak RSS)", "+%ld KB",
          r1.ru_maxrss - r0.ru_maxrss);
    ge_gguf_close(g);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "build/test-out";
    char path[512];
    snprintf(path, sizeof path, "%s/test_gguf.%d.gguf", dir, (int)getpid());

    ge_gguf *g = NULL;
    ge_err err = {0};
    ge_status st = open_spec(good(), &g, &err, path);
    if (check(st == GE_OK, "hand-built file opens", "%s", err.msg)) {
        ge_gguf_str arch;
        int64_t vals[3];
        uint32_t align;
        check(ge_gguf_get_str(g, "general.architecture", &arch, &err) == GE_OK &&
                  ge_gguf_str_eq(arch, "test"),
              "string accessor", "%s", err.msg);
        check(ge_gguf_get_int_array(g, "test.values", vals, 3, &err) == GE_OK && vals[0] == 10 &&
                  vals[2] == 12,
              "integer array accessor", "%s", err.msg);
        check(ge_gguf_get_int_array(g, "test.values", vals, 2, &err) == GE_E_FORMAT,
              "array length is checked", "accepted");
        check(ge_gguf_get_u32(g, "general.alignment", &align, &err) == GE_OK && align == 32,
              "u32 accessor", "%s", err.msg);
        check(ge_gguf_get_u32(g, "general.architecture", &align, &err) == GE_E_FORMAT &&
                  strstr(err.msg, "general.architecture"),
              "type mismatch names the key", "%s", err.msg);
        check(ge_gguf_get_u32(g, "no.such.key", &align, &err) == GE_E_FORMAT &&
                  strstr(err.msg, "no.such.key"),
              "missing key names the key", "%s", err.msg);
        const ge_gguf_tensor *t = ge_gguf_tensor_find(g, "w");
        check(t && t->ne[0] == 4 && t->ne[1] == 2 && t->nbytes == 32 &&
                  ((const float *)t->data)[5] == 5.0f,
              "tensor info and data", "bad tensor");
        check(t && ge_mapping_contains(t->data, t->nbytes) &&
                  !ge_mapping_contains(t->data, t->nbytes + 4096) &&
                  !ge_mapping_contains(&err, 1),
              "mapping registry bounds", "wrong answer");
        const void *data = t ? t->data : NULL;
        ge_gguf_close(g);
        check(!ge_mapping_contains(data, 4), "mapping unregistered at close", "still there");
    }

    spec s;
    s = good(), s.version = 1;
    expect_fail(s, GE_E_UNSUPPORTED, "GGUF v1 rejected", path);
    s = good(), s.n_kv = 1ull << 62;
    expect_fail(s, GE_E_FORMAT, "absurd kv count", path);
    s = good(), s.n_tensors = UINT64_MAX;
    expect_fail(s, GE_E_FORMAT, "absurd tensor count", path);
    s = good(), s.str_len = UINT64_MAX - 3;
    expect_fail(s, GE_E_FORMAT, "string length overflow", path);
    s = good(), s.arr_n = 1ull << 62;
    expect_fail(s, GE_E_FORMAT, "array count * size overflow", path);
    s = good(), s.ne0 = 1ull << 62;
    expect_fail(s, GE_E_FORMAT, "dims product overflow", path);
    s = good(), s.n_dims = 5;
    expect_fail(s, GE_E_FORMAT, "too many dims", path);
    s = good(), s.type = 250;
    expect_fail(s, GE_E_UNSUPPORTED, "unknown tensor type", path);
    s = good(), s.type = GE_T_Q8_0;
    expect_fail(s, GE_E_FORMAT, "row not a multiple of the block", path);
    s = good(), s.offset = 4;
    expect_fail(s, GE_E_FORMAT, "misaligned tensor offset", path);
    s = good(), s.offset = 1ull << 63;
    expect_fail(s, GE_E_FORMAT, "tensor offset past the end", path);
    s = good(), s.truncate_data = 1;
    expect_fail(s, GE_E_FORMAT, "truncated tensor data", path);

    /* keys and tensors named twice, empty keys, tensors sharing data (issue 14) */
    s = good(), s.key2 = "general.architecture";
    expect_fail(s, GE_E_FORMAT, "duplicate key", path);
    s = good(), s.key2 = "";
    expect_fail(s, GE_E_FORMAT, "empty key", path);
    s = good(), s.second = 1, s.offset2 = 0;
    expect_fail(s, GE_E_FORMAT, "two tensors, one offset", path);
    s = good(), s.second = 1, s.offset2 = 32, s.ne0 = 8; /* w is 64 bytes: v starts inside */
    expect_fail(s, GE_E_FORMAT, "partly overlapping tensors", path);
    s = good(), s.second = 1, s.offset2 = 32;
    g = NULL;
    check(open_spec(s, &g, &err, path) == GE_OK && ge_gguf_tensor_find(g, "v") &&
              ge_gguf_tensor_find(g, "w"),
          "adjacent tensors open", "%s", err.msg);
    ge_gguf_close(g);
    s = good(), s.arr_type = GE_GGUF_BOOL;
    g = NULL;
    if (check(open_spec(s, &g, &err, path) == GE_OK, "bool array opens", "%s", err.msg)) {
        int64_t v[3];
        check(ge_gguf_get_int_array(g, "test.values", v, 3, &err) == GE_E_FORMAT &&
                  strstr(err.msg, "test.values") && strstr(err.msg, "entry 2"),
              "a bool array element of 2 is refused, naming the key and entry", "%s", err.msg);
        ge_gguf_close(g);
    }
    check_messages(path);
    check_hole(path);

    /* every truncation of a valid file fails cleanly */
    bytes b;
    build(&b, good());
    int bad = 0;
    for (size_t cut = 0; cut < b.n; cut++) {
        FILE *f = fopen(path, "wb");
        if (!f)
            break;
        fwrite(b.buf, 1, cut, f);
        fclose(f);
        ge_gguf *h = NULL;
        if (ge_gguf_open(&h, path, &err) == GE_OK)
            bad++;
        ge_gguf_close(h);
    }
    check(bad == 0, "every prefix of a valid file is rejected", "%d accepted", bad);
    unlink(path);

    check(ge_gguf_open(&g, "/nonexistent/model.gguf", &err) == GE_E_IO &&
              strstr(err.msg, "/nonexistent/model.gguf"),
          "missing file", "%s", err.msg);
    check(ge_gguf_open(&g, "/", &err) == GE_E_IO, "directory", "%s", err.msg);

    /* the generated models (tests/run makes the broken ones) */
    const char *kinds[] = {"truncated", "magic", "missing", "shape", "type", "counts"};
    for (int k = 0; k < 6; k++) {
        char p[512], name[64];
        snprintf(p, sizeof p, "%s/broken-%s.gguf", dir, kinds[k]);
        if (access(p, R_OK) != 0)
            continue;
        ge_gguf *h = NULL;
        st = ge_gguf_open(&h, p, &err);
        snprintf(name, sizeof name, "broken-%s reader verdict", kinds[k]);
        /* missing and shape are well-formed GGUF: the model binding rejects them */
        bool want_ok = k == 2 || k == 3;
        check(want_ok ? st == GE_OK : (st != GE_OK && strstr(err.msg, p)), name, "%s: %s",
              ge_status_name(st), err.msg);
        ge_gguf_close(h);
    }
    st = ge_gguf_open(&g, "testdata/tiny-q8_0.gguf", &err);
    if (check(st == GE_OK, "tiny q8_0 model opens", "%s", err.msg)) {
        const ge_gguf_tensor *t = ge_gguf_tensor_find(g, "per_layer_model_proj.weight");
        const ge_gguf_tensor *e = ge_gguf_tensor_find(g, "token_embd.weight");
        check(t && t->type == GE_T_BF16 && e && e->type == GE_T_Q8_0,
              "q8_0 file keeps per_layer_model_proj in BF16", "types differ");
        ge_gguf_close(g);
    }
    return check_done();
}
