/* tensor.h - a weight of a GGUF file bound as a matrix: rows of ne0 values, with the checks
 * every binding shares (the text model's and the media towers'). */
#ifndef GE_TENSOR_H
#define GE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "ge.h"
#include "gguf.h"

/* A weight matrix or vector: rows of ne0 values, ne1 rows, ggml type. */
typedef struct {
    const char *name;
    uint32_t type;
    int64_t ne0, ne1;
    size_t row_bytes;
    const uint8_t *data;
} ge_tensor;

/* Bind tensor name of a GGUF with exactly the ggml shape ne[4] as a matrix: rows of the
 * product of ne[0..split) values, as many rows as the product of the rest. A missing tensor,
 * another shape or an unsupported type is GE_E_FORMAT / GE_E_UNSUPPORTED naming the file. */
ge_status ge_tensor_bind(const ge_gguf *g, const char *name, const int64_t ne[4], int split,
                         ge_tensor *t, ge_err *err);

/* Row r of a tensor as fp32 (n = ne0 values). */
void ge_tensor_row(const ge_tensor *t, int64_t r, float *dst);

/* An mmproj's header for one tower ("vision" or "audio"): architecture "clip",
 * clip.has_<tower>_encoder (else GE_E_UNSUPPORTED with no_encoder in the message) and
 * clip.<tower>.projector_type == projector. */
ge_status ge_mmproj_check(const ge_gguf *g, const char *tower, const char *projector,
                          const char *no_encoder, ge_err *err);

#endif
