/* tensor.c - bind a GGUF tensor as a matrix with the strict checks every binding shares. */
#include <stdbool.h>
#include <stdio.h>

#include "dtype.h"
#include "tensor.h"

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


void ge_tensor_row(const ge_tensor *t, int64_t r, float *dst)
{
    ge_dequant_row(t->type, t->data + (size_t)r * t->row_bytes, dst, (size_t)t->ne0);
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

