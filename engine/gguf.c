/* gguf.c - GGUF v2/v3 reader: mmap, one validating pass over the header, typed accessors. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtype.h"
#include "gguf.h"

/* ---- mapping registry -------------------------------------------------------------------- */

/* Every open model mapping, readable without a lock: a SIGBUS handler (a model file cut
 * short while mapped) looks addresses up here (ge_mapping_fault). */
#define MAX_MAPPINGS 64
static struct {
    _Atomic(const uint8_t *) base;
    atomic_size_t size;
    _Atomic(const char *) path; /* the ge_gguf's own copy, for messages */
    atomic_bool damaged; /* its pages were replaced by zeros after a fault */
} mappings[MAX_MAPPINGS];
static pthread_mutex_t mappings_lock = PTHREAD_MUTEX_INITIALIZER;

static bool mapping_add(const uint8_t *base, size_t size, const char *path)
{
    bool ok = false;
    pthread_mutex_lock(&mappings_lock);
    for (int i = 0; i < MAX_MAPPINGS && !ok; i++)
        if (!atomic_load(&mappings[i].base)) {
            atomic_store(&mappings[i].size, size);
            atomic_store(&mappings[i].damaged, false);
            atomic_store(&mappings[i].path, path);
            atomic_store(&mappings[i].base, base);
            ok = true;
        }
    pthread_mutex_unlock(&mappings_lock);
    return ok;
}

static void mapping_remove(const uint8_t *base)
{
    pthread_mutex_lock(&mappings_lock);
    for (int i = 0; i < MAX_MAPPINGS; i++)
        if (atomic_load(&mappings[i].base) == base)
            atomic_store(&mappings[i].base, NULL);
    pthread_mutex_unlock(&mappings_lock);
}

/* The slot whose mapping holds [p, p + len), or -1. Lock-free (signal handlers use it). */
static int mapping_of(const void *p, size_t len)
{
    const uint8_t *q = p;
    for (int i = 0; i < MAX_MAPPINGS; i++) {
        const uint8_t *b = atomic_load(&mappings[i].base);
        size_t size = atomic_load(&mappings[i].size);
        if (b && q >= b && (size_t)(q - b) <= size && len <= size - (size_t)(q - b))
            return i;
    }
    return -1;
}

bool ge_mapping_contains(const void *p, size_t len) { return mapping_of(p, len) >= 0; }

bool ge_mapping_fault(const void *addr)
{
    int i = mapping_of(addr, 1);
    if (i < 0)
        return false;
    /* the same range, now anonymous zero pages: the faulting read goes on with zeros, and
     * whoever checks ge_gguf_damaged before trusting a result throws it away */
    void *b = (void *)atomic_load(&mappings[i].base);
    size_t size = atomic_load(&mappings[i].size);
    if (mmap(b, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
        return false;
    atomic_store(&mappings[i].damaged, true);
    return true;
}

const char *ge_mapping_damaged(void)
{
    for (int i = 0; i < MAX_MAPPINGS; i++)
        if (atomic_load(&mappings[i].base) && atomic_load(&mappings[i].damaged))
            return atomic_load(&mappings[i].path);
    return NULL;
}

/* ---- bounded cursor ---------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t pos, size;
    const char *path;
    ge_err *err;
    int fd;          /* the file, for finding holes (-1: none) */
    size_t data_end; /* [pos, data_end) is known to be data, not a hole */
} cursor;

static ge_status need(cursor *c, uint64_t n, const char *what)
{
    if (n > c->size - c->pos)
        return ge_fail(c->err, GE_E_FORMAT,
                       "%s: truncated or corrupt header: %s at byte %zu needs %llu bytes, "
                       "file has %zu",
                       c->path, what, c->pos, (unsigned long long)n, c->size);
    return GE_OK;
}

static ge_status rd(cursor *c, void *dst, size_t n, const char *what)
{
    ge_status st = need(c, n, what);
    if (st)
        return st;
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return GE_OK;
}

static ge_status rd_str(cursor *c, ge_gguf_str *s, const char *what)
{
    uint64_t len;
    ge_status st = rd(c, &len, 8, what);
    if (st || (st = need(c, len, what)))
        return st;
    s->ptr = (const char *)c->p + c->pos;
    s->len = len;
    c->pos += len;
    return GE_OK;
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

/* The length of the hole of a sparse file at pos (0 when pos is in data), found with
 * SEEK_DATA / SEEK_HOLE without touching the pages: a few-MB file can claim a 512 MiB string
 * array of zeros (64 Mi empty strings), and walking it through the mapping would fault in
 * every page. A plain file costs two lseek calls in all. */
static size_t hole_at(cursor *c)
{
    if (c->pos < c->data_end || c->fd < 0)
        return 0;
    off_t d = lseek(c->fd, (off_t)c->pos, SEEK_DATA);
    if (d < 0 && errno == ENXIO) /* no data after pos: a hole to the end */
        return c->size - c->pos;
    if (d > (off_t)c->pos)
        return ((size_t)d < c->size ? (size_t)d : c->size) - c->pos;
    off_t h = d < 0 ? -1 : lseek(c->fd, (off_t)c->pos, SEEK_HOLE);
    c->data_end = h > (off_t)c->pos && (size_t)h < c->size ? (size_t)h : c->size;
    return 0;
}

/* Skip one value of type t (validating it), recording where it starts. */
static ge_status skip_value(cursor *c, ge_gguf_kv *kv, const char *key)
{
    kv->val = c->p + c->pos;
    if (kv->type == GE_GGUF_STR) {
        ge_gguf_str s;
        return rd_str(c, &s, key);
    }
    if (kv->type == GE_GGUF_ARR) {
        ge_status st = rd(c, &kv->arr_type, 4, key);
        if (!st)
            st = rd(c, &kv->arr_n, 8, key);
        if (st)
            return st;
        kv->val = c->p + c->pos;
        if (kv->arr_type == GE_GGUF_STR) {
            for (uint64_t i = 0; i < kv->arr_n; i++) {
                /* a hole is a run of empty strings: step over it without reading it */
                size_t run = hole_at(c) / 8;
                if (run) {
                    run = run < kv->arr_n - i ? run : (size_t)(kv->arr_n - i);
                    c->pos += run * 8;
                    i += run - 1;
                    continue;
                }
                ge_gguf_str s;
                if ((st = rd_str(c, &s, key)))
                    return st;
            }
            return GE_OK;
        }
        size_t es = scalar_size(kv->arr_type);
        if (!es)
            return ge_fail(c->err, GE_E_FORMAT, "%s: metadata %s: bad array element type %u",
                           c->path, key, kv->arr_type);
        if (kv->arr_n > (c->size - c->pos) / es)
            return need(c, UINT64_MAX, key); /* count * size past the end (or overflow) */
        c->pos += kv->arr_n * es;
        return GE_OK;
    }
    size_t sz = scalar_size(kv->type);
    if (!sz)
        return ge_fail(c->err, GE_E_FORMAT, "%s: metadata %s: bad value type %u", c->path, key,
                       kv->type);
    if ((kv->type == GE_GGUF_BOOL) && need(c, 1, key) == GE_OK && c->p[c->pos] > 1)
        return ge_fail(c->err, GE_E_FORMAT, "%s: metadata %s: bool value %u", c->path, key,
                       c->p[c->pos]);
    ge_status st = need(c, sz, key);
    if (!st)
        c->pos += sz;
    return st;
}

/* ---- open / close ------------------------------------------------------------------------ */

/* Room for entry i of an array that grows as the header is read (i == *cap: double it), so
 * that the counts a header claims cost nothing before their entries are there. */
static void *grow(void *v, uint64_t *cap, uint64_t i, size_t size)
{
    if (i < *cap)
        return v;
    uint64_t n = *cap ? 2 * *cap : 64;
    uint8_t *w = realloc(v, (size_t)n * size);
    if (!w)
        return NULL;
    memset(w + (size_t)*cap * size, 0, (size_t)(n - *cap) * size);
    *cap = n;
    return w;
}

static int key_cmp(ge_gguf_str a, ge_gguf_str b)
{
    int r = memcmp(a.ptr, b.ptr, a.len < b.len ? a.len : b.len);
    return r ? r : (a.len > b.len) - (a.len < b.len);
}

static int kv_order(const void *a, const void *b)
{
    return key_cmp((*(const ge_gguf_kv *const *)a)->key, (*(const ge_gguf_kv *const *)b)->key);
}

static int name_order(const void *a, const void *b)
{
    return strcmp((*(const ge_gguf_tensor *const *)a)->name,
                  (*(const ge_gguf_tensor *const *)b)->name);
}

/* by data address, then by position in the file (the same address: two tensors, one data) */
static int data_order(const void *a, const void *b)
{
    const ge_gguf_tensor *x = *(const ge_gguf_tensor *const *)a;
    const ge_gguf_tensor *y = *(const ge_gguf_tensor *const *)b;
    const uint8_t *p = x->data, *q = y->data;
    return p != q ? (p > q) - (p < q) : (x > y) - (x < y);
}

/* The lookup indexes (sorted by key / name), refusing a key or a tensor name given twice:
 * a lookup would silently take one of them. O(n log n). */
static ge_status index_names(ge_gguf *g, ge_err *err)
{
    g->kv_by_key = malloc((g->n_kv ? g->n_kv : 1) * sizeof *g->kv_by_key);
    g->tensor_by_name = malloc((g->n_tensors ? g->n_tensors : 1) * sizeof *g->tensor_by_name);
    if (!g->kv_by_key || !g->tensor_by_name)
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory reading the header", g->path);
    for (uint64_t i = 0; i < g->n_kv; i++)
        g->kv_by_key[i] = &g->kv[i];
    for (uint64_t i = 0; i < g->n_tensors; i++)
        g->tensor_by_name[i] = &g->tensors[i];
    qsort(g->kv_by_key, g->n_kv, sizeof *g->kv_by_key, kv_order);
    qsort(g->tensor_by_name, g->n_tensors, sizeof *g->tensor_by_name, name_order);
    for (uint64_t i = 1; i < g->n_kv; i++) {
        ge_gguf_str k = g->kv_by_key[i]->key;
        if (key_cmp(g->kv_by_key[i - 1]->key, k) == 0)
            return ge_fail(err, GE_E_FORMAT, "%s: duplicate metadata key %.*s", g->path,
                           (int)(k.len < 128 ? k.len : 128), k.ptr);
    }
    for (uint64_t i = 1; i < g->n_tensors; i++)
        if (strcmp(g->tensor_by_name[i - 1]->name, g->tensor_by_name[i]->name) == 0)
            return ge_fail(err, GE_E_FORMAT, "%s: duplicate tensor %s", g->path,
                           g->tensor_by_name[i]->name);
    return GE_OK;
}

/* No two tensors share a byte of data. The engine caches work per tensor (repacked weights)
 * and may drop a tensor's pages once it is repacked: an alias or overlap would hand one
 * tensor's state to another. Sorted by address, each must end before the next starts. */
static ge_status check_overlaps(const ge_gguf *g, ge_err *err)
{
    if (g->n_tensors < 2)
        return GE_OK;
    const ge_gguf_tensor **by = malloc(g->n_tensors * sizeof *by);
    if (!by)
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory reading the header", g->path);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        by[i] = &g->tensors[i];
    qsort(by, g->n_tensors, sizeof *by, data_order);
    ge_status st = GE_OK;
    for (uint64_t i = 1; i < g->n_tensors && !st; i++) {
        const ge_gguf_tensor *a = by[i - 1], *b = by[i];
        const uint8_t *pa = a->data, *pb = b->data;
        if ((uint64_t)(pb - pa) < a->nbytes)
            st = ge_fail(err, GE_E_FORMAT,
                         "%s: tensors %s and %s overlap: data [%llu, +%llu) and [%llu, +%llu)",
                         g->path, a->name, b->name, (unsigned long long)(pa - g->base),
                         (unsigned long long)a->nbytes, (unsigned long long)(pb - g->base),
                         (unsigned long long)b->nbytes);
    }
    free(by);
    return st;
}

static ge_status parse(ge_gguf *g, int fd, ge_err *err)
{
    cursor c = {g->base, 0, g->size, g->path, err, fd, 0};
    char magic[4];
    ge_status st = rd(&c, magic, 4, "magic");
    if (st || memcmp(magic, "GGUF", 4) != 0)
        return ge_fail(err, GE_E_FORMAT, "%s: not a GGUF file (bad magic)", g->path);
    if ((st = rd(&c, &g->version, 4, "version")))
        return st;
    if (g->version != 2 && g->version != 3)
        return ge_fail(err, GE_E_UNSUPPORTED, "%s: GGUF version %u (only 2 and 3 are supported)",
                       g->path, g->version);
    uint64_t n_tensors, n_kv;
    if ((st = rd(&c, &n_tensors, 8, "tensor count")) || (st = rd(&c, &n_kv, 8, "kv count")))
        return st;
    /* each kv needs >= 8+4 bytes and each tensor info >= 8+4+4+8 bytes */
    if (n_kv > g->size / 12 || n_tensors > g->size / 24)
        return ge_fail(err, GE_E_FORMAT,
                       "%s: corrupt header: %llu metadata entries and %llu tensors cannot fit "
                       "in %zu bytes",
                       g->path, (unsigned long long)n_kv, (unsigned long long)n_tensors,
                       g->size);

    g->alignment = 32;
    uint64_t cap = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        ge_gguf_kv *kvs = grow(g->kv, &cap, i, sizeof *kvs);
        if (!kvs)
            return ge_fail(err, GE_E_NOMEM, "%s: out of memory reading the header", g->path);
        g->kv = kvs;
        g->n_kv = i + 1;
        ge_gguf_kv *kv = &g->kv[i];
        char key[160];
        if ((st = rd_str(&c, &kv->key, "metadata key")))
            return st;
        if (kv->key.len == 0 || kv->key.len > 65535) /* the GGUF spec's bounds */
            return ge_fail(err, GE_E_FORMAT, "%s: metadata entry %llu: key length %llu out of "
                           "range", g->path, (unsigned long long)i,
                           (unsigned long long)kv->key.len);
        snprintf(key, sizeof key, "%.*s", (int)(kv->key.len < 128 ? kv->key.len : 128),
                 kv->key.ptr);
        if ((st = rd(&c, &kv->type, 4, key)) || (st = skip_value(&c, kv, key)))
            return st;
        kv->nbytes = (uint64_t)(c.pos - (size_t)(kv->val - g->base));
        if (ge_gguf_str_eq(kv->key, "general.alignment")) {
            uint32_t a;
            if (kv->type != GE_GGUF_U32 || (memcpy(&a, kv->val, 4), a == 0) || (a & (a - 1)))
                return ge_fail(err, GE_E_FORMAT,
                               "%s: general.alignment must be a power-of-two u32", g->path);
            g->alignment = a;
        }
    }

    cap = 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        ge_gguf_tensor *ts = grow(g->tensors, &cap, i, sizeof *ts);
        if (!ts)
            return ge_fail(err, GE_E_NOMEM, "%s: out of memory reading the header", g->path);
        g->tensors = ts;
        g->n_tensors = i + 1;
        ge_gguf_tensor *t = &g->tensors[i];
        ge_gguf_str name;
        if ((st = rd_str(&c, &name, "tensor name")))
            return st;
        if (name.len == 0 || name.len >= sizeof t->name)
            return ge_fail(err, GE_E_FORMAT, "%s: tensor %llu: name length %llu out of range",
                           g->path, (unsigned long long)i, (unsigned long long)name.len);
        if (memchr(name.ptr, 0, name.len)) /* the copy is looked up as a C string */
            return ge_fail(err, GE_E_FORMAT, "%s: tensor %llu: name contains a NUL byte",
                           g->path, (unsigned long long)i);
        memcpy(t->name, name.ptr, name.len);
        t->name[name.len] = 0;
        if ((st = rd(&c, &t->n_dims, 4, t->name)))
            return st;
        if (t->n_dims == 0 || t->n_dims > GE_GGUF_MAX_DIMS)
            return ge_fail(err, GE_E_FORMAT, "%s: tensor %s: %u dimensions (1..4 allowed)",
                           g->path, t->name, t->n_dims);
        uint64_t nel = 1;
        for (uint32_t d = 0; d < GE_GGUF_MAX_DIMS; d++) {
            t->ne[d] = 1;
            if (d < t->n_dims && (st = rd(&c, &t->ne[d], 8, t->name)))
                return st;
            if (t->ne[d] == 0 || t->ne[d] > (uint64_t)INT64_MAX / nel)
                return ge_fail(err, GE_E_FORMAT, "%s: tensor %s: bad dimension %u = %llu",
                               g->path, t->name, d, (unsigned long long)t->ne[d]);
            nel *= t->ne[d];
        }
        uint64_t off;
        if ((st = rd(&c, &t->type, 4, t->name)) || (st = rd(&c, &off, 8, t->name)))
            return st;
        const ge_dtype_info *ti = ge_dtype(t->type);
        if (!ti)
            return ge_fail(err, GE_E_UNSUPPORTED, "%s: tensor %s: unknown tensor type %u",
                           g->path, t->name, t->type);
        if (t->ne[0] % ti->block)
            return ge_fail(err, GE_E_FORMAT,
                           "%s: tensor %s: row length %llu is not a multiple of the %s block "
                           "size %u",
                           g->path, t->name, (unsigned long long)t->ne[0], ti->name, ti->block);
        if (nel / ti->block > UINT64_MAX / ti->bytes)
            return ge_fail(err, GE_E_FORMAT, "%s: tensor %s: size overflows", g->path, t->name);
        t->nbytes = nel / ti->block * ti->bytes;
        t->data = (const void *)(uintptr_t)off; /* relative for now */
    }
    if ((st = index_names(g, err)))
        return st;

    size_t data_start = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (data_start < c.pos || data_start > g->size)
        data_start = g->size; /* no data section: any tensor will be out of bounds below */
    size_t data_size = g->size - data_start;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        ge_gguf_tensor *t = &g->tensors[i];
        uint64_t off = (uint64_t)(uintptr_t)t->data;
        if (off % g->alignment)
            return ge_fail(err, GE_E_FORMAT, "%s: tensor %s: offset %llu not aligned to %u",
                           g->path, t->name, (unsigned long long)off, g->alignment);
        if (off > data_size || t->nbytes > data_size - off)
            return ge_fail(err, GE_E_FORMAT,
                           "%s: tensor %s: data [%llu, +%llu) runs past the end of the file "
                           "(truncated?)",
                           g->path, t->name, (unsigned long long)off,
                           (unsigned long long)t->nbytes);
        t->data = g->base + data_start + off;
    }
    return check_overlaps(g, err);
}

ge_status ge_gguf_open(ge_gguf **out, const char *path, ge_err *err)
{
    *out = NULL;
    int fd = ge_open_regular(path, err);
    if (fd < 0)
        return GE_E_IO;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return ge_fail(err, GE_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (sb.st_size < 24) {
        close(fd);
        return ge_fail(err, GE_E_FORMAT, "%s: not a GGUF file (%lld bytes)", path,
                       (long long)sb.st_size);
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    if (map == MAP_FAILED) {
        close(fd);
        return ge_fail(err, GE_E_IO, "%s: cannot map: %s", path, strerror(e));
    }

    ge_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(path))) {
        munmap(map, (size_t)sb.st_size);
        close(fd);
        free(g);
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory", path);
    }
    g->base = map;
    g->size = (size_t)sb.st_size;
    ge_status st = parse(g, fd, err); /* the descriptor finds holes while the header is read */
    close(fd);
    if (!st && !mapping_add(g->base, g->size, g->path))
        st = ge_fail(err, GE_E_LIMIT, "%s: too many open model files", path);
    if (st) {
        munmap(map, g->size);
        g->base = NULL;
        ge_gguf_close(g);
        return st;
    }
    *out = g;
    return GE_OK;
}

void ge_gguf_close(ge_gguf *g)
{
    if (!g)
        return;
    if (g->base) {
        mapping_remove(g->base);
        munmap((void *)g->base, g->size);
    }
    free(g->kv);
    free(g->tensors);
    free(g->kv_by_key);
    free(g->tensor_by_name);
    free(g->path);
    free(g);
}

/* ---- lookups and typed accessors ------------------------------------------------------- */

bool ge_gguf_str_eq(ge_gguf_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

const ge_gguf_kv *ge_gguf_find(const ge_gguf *g, const char *key)
{
    const ge_gguf_str k = {key, strlen(key)};
    uint64_t lo = 0, hi = g->n_kv;
    while (lo < hi) { /* the first key >= k */
        uint64_t mid = lo + (hi - lo) / 2;
        if (key_cmp(g->kv_by_key[mid]->key, k) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < g->n_kv && key_cmp(g->kv_by_key[lo]->key, k) == 0 ? g->kv_by_key[lo] : NULL;
}

const ge_gguf_tensor *ge_gguf_tensor_find(const ge_gguf *g, const char *name)
{
    uint64_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (strcmp(g->tensor_by_name[mid]->name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < g->n_tensors && strcmp(g->tensor_by_name[lo]->name, name) == 0
               ? g->tensor_by_name[lo]
               : NULL;
}

static ge_status missing(const ge_gguf *g, const char *key, ge_err *err)
{
    return ge_fail(err, GE_E_FORMAT, "%s: metadata key %s is missing", g->path, key);
}

static ge_status bad_type(const ge_gguf *g, const char *key, const char *want, ge_err *err)
{
    return ge_fail(err, GE_E_FORMAT, "%s: metadata key %s: expected %s", g->path, key, want);
}

/* Read scalar integer element of type t at p; false when t is not an integer type.
 * *neg_or_big: a u64 over INT64_MAX, or a bool other than 0 and 1. */
static bool load_int(uint32_t t, const uint8_t *p, int64_t *v, bool *neg_or_big)
{
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            uint64_t u64; int64_t i64; } u;
    size_t sz = scalar_size(t);
    if (!sz || t == GE_GGUF_F32 || t == GE_GGUF_F64)
        return false;
    memcpy(&u, p, sz);
    *neg_or_big = false;
    switch (t) {
    case GE_GGUF_BOOL: /* array elements are not checked at open: a bool is 0 or 1 */
        *v = u.u8;
        *neg_or_big = u.u8 > 1;
        break;
    case GE_GGUF_U8: *v = u.u8; break;
    case GE_GGUF_I8: *v = u.i8; break;
    case GE_GGUF_U16: *v = u.u16; break;
    case GE_GGUF_I16: *v = u.i16; break;
    case GE_GGUF_U32: *v = u.u32; break;
    case GE_GGUF_I32: *v = u.i32; break;
    case GE_GGUF_I64: *v = u.i64; break;
    case GE_GGUF_U64:
        *v = (int64_t)u.u64;
        if (u.u64 > INT64_MAX)
            *neg_or_big = true;
        break;
    }
    return true;
}

ge_status ge_gguf_get_u32_or(const ge_gguf *g, const char *key, uint32_t dflt, uint32_t *out,
                             ge_err *err)
{
    const ge_gguf_kv *kv = ge_gguf_find(g, key);
    if (!kv) {
        *out = dflt;
        return GE_OK;
    }
    int64_t v;
    bool big;
    if (kv->type == GE_GGUF_ARR || !load_int(kv->type, kv->val, &v, &big))
        return bad_type(g, key, "an integer", err);
    if (big || v < 0 || v > UINT32_MAX)
        return ge_fail(err, GE_E_FORMAT, "%s: metadata key %s: value out of range", g->path,
                       key);
    *out = (uint32_t)v;
    return GE_OK;
}

ge_status ge_gguf_get_u32(const ge_gguf *g, const char *key, uint32_t *out, ge_err *err)
{
    if (!ge_gguf_find(g, key))
        return missing(g, key, err);
    return ge_gguf_get_u32_or(g, key, 0, out, err);
}

ge_status ge_gguf_get_int_in(const ge_gguf *g, const char *key, int lo, int hi, int *out,
                             ge_err *err)
{
    uint32_t v;
    ge_status st = ge_gguf_get_u32(g, key, &v, err);
    if (st)
        return st;
    if (v < (uint32_t)lo || v > (uint32_t)hi)
        return ge_fail(err, GE_E_FORMAT, "%s: metadata %s = %u is out of range [%d, %d]",
                       g->path, key, v, lo, hi);
    *out = (int)v;
    return GE_OK;
}

ge_status ge_gguf_get_f32(const ge_gguf *g, const char *key, float *out, ge_err *err)
{
    const ge_gguf_kv *kv = ge_gguf_find(g, key);
    if (!kv)
        return missing(g, key, err);
    if (kv->type == GE_GGUF_F32) {
        memcpy(out, kv->val, 4);
    } else if (kv->type == GE_GGUF_F64) {
        double d;
        memcpy(&d, kv->val, 8);
        /* out of float's range is undefined behaviour for the cast: infinity (or NaN) */
        *out = fabs(d) <= FLT_MAX ? (float)d : d > 0 ? INFINITY : d < 0 ? -INFINITY : NAN;
    } else {
        return bad_type(g, key, "a float", err);
    }
    return GE_OK;
}

ge_status ge_gguf_get_f32_in(const ge_gguf *g, const char *key, float lo, float hi, float *out,
                             ge_err *err)
{
    ge_status st = ge_gguf_get_f32(g, key, out, err);
    if (!st && !(isfinite(*out) && *out > lo && *out < hi))
        st = ge_fail(err, GE_E_FORMAT, "%s: metadata %s = %g is out of range (%g, %g)", g->path,
                     key, (double)*out, (double)lo, (double)hi);
    return st;
}

ge_status ge_gguf_get_bool_or(const ge_gguf *g, const char *key, bool dflt, bool *out,
                              ge_err *err)
{
    const ge_gguf_kv *kv = ge_gguf_find(g, key);
    if (!kv) {
        *out = dflt;
        return GE_OK;
    }
    if (kv->type != GE_GGUF_BOOL)
        return bad_type(g, key, "a bool", err);
    *out = kv->val[0] != 0;
    return GE_OK;
}

ge_status ge_gguf_get_str(const ge_gguf *g, const char *key, ge_gguf_str *out, ge_err *err)
{
    const ge_gguf_kv *kv = ge_gguf_find(g, key);
    if (!kv)
        return missing(g, key, err);
    if (kv->type != GE_GGUF_STR)
        return bad_type(g, key, "a string", err);
    memcpy(&out->len, kv->val, 8);
    out->ptr = (const char *)kv->val + 8;
    return GE_OK;
}

ge_status ge_gguf_get_int_array(const ge_gguf *g, const char *key, int64_t *out, size_t n,
                                ge_err *err)
{
    const ge_gguf_kv *kv = ge_gguf_find(g, key);
    if (!kv)
        return missing(g, key, err);
    int64_t v;
    bool big;
    if (kv->type != GE_GGUF_ARR) {
        if (!load_int(kv->type, kv->val, &v, &big) || big)
            return bad_type(g, key, "an integer or integer array", err);
        for (size_t i = 0; i < n; i++)
            out[i] = v;
        return GE_OK;
    }
    if (kv->arr_n != n)
        return ge_fail(err, GE_E_FORMAT, "%s: metadata key %s: %llu entries, expected %zu",
                       g->path, key, (unsigned long long)kv->arr_n, n);
    size_t es = scalar_size(kv->arr_type);
    for (size_t i = 0; i < n; i++) {
        if (!load_int(kv->arr_type, kv->val + i * es, &out[i], &big))
            return bad_type(g, key, "an integer array", err);
        if (big)
            return ge_fail(err, GE_E_FORMAT, "%s: metadata key %s: entry %zu is out of range "
                           "(%s)", g->path, key, i,
                           kv->arr_type == GE_GGUF_BOOL ? "a bool is 0 or 1" : "over 2^63");
    }
    return GE_OK;
}

ge_status ge_gguf_get_f32_array(const ge_gguf *g, const char *key, float *out, size_t n,
                                ge_err *err)
{
    const ge_gguf_kv *kv = ge_gguf_find(g, key);
    if (!kv)
        return missing(g, key, err);
    if (kv->type != GE_GGUF_ARR || kv->arr_n != n)
        return ge_fail(err, GE_E_FORMAT, "%s: metadata key %s: expected an array of %zu",
                       g->path, key, n);
    if (kv->arr_type == GE_GGUF_F32) {
        memcpy(out, kv->val, n * 4);
        return GE_OK;
    }
    size_t es = scalar_size(kv->arr_type);
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        bool big;
        if (!load_int(kv->arr_type, kv->val + i * es, &v, &big))
            return bad_type(g, key, "a numeric array", err);
        out[i] = (float)v;
    }
    return GE_OK;
}

ge_status ge_gguf_get_str_iter(const ge_gguf *g, const char *key, ge_gguf_str_iter *it,
                               ge_err *err)
{
    *it = (ge_gguf_str_iter){0};
    const ge_gguf_kv *kv = ge_gguf_find(g, key);
    if (!kv)
        return missing(g, key, err);
    if (kv->type != GE_GGUF_ARR || kv->arr_type != GE_GGUF_STR)
        return bad_type(g, key, "a string array", err);
    *it = (ge_gguf_str_iter){kv->val, kv->arr_n, kv->arr_n, kv->nbytes};
    return GE_OK;
}

ge_status ge_gguf_get_str_array(const ge_gguf *g, const char *key, ge_gguf_str **strs,
                                size_t *n, ge_err *err)
{
    *strs = NULL;
    *n = 0;
    ge_gguf_str_iter it;
    ge_status st = ge_gguf_get_str_iter(g, key, &it, err);
    if (st)
        return st;
    ge_gguf_str *s = malloc((it.n ? it.n : 1) * sizeof *s);
    if (!s)
        return ge_fail(err, GE_E_NOMEM, "%s: out of memory reading %s", g->path, key);
    for (uint64_t i = 0; it.left; i++)
        s[i] = ge_gguf_str_next(&it);
    *strs = s;
    *n = it.n;
    return GE_OK;
}
