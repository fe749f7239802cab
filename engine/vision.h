/* vision.h - the gemma4v vision tower of an mmproj file (vision.c). */
#ifndef GE_VISION_H
#define GE_VISION_H

#include <stdbool.h>
#include <stdint.h>

#include "compute.h"

typedef struct ge_vision ge_vision;

/* Open and bind an mmproj's vision tower; its projection must give text_hidden values. Only
 * the clip.vision.* keys and the v.* / mm.input_projection tensors are read: a combined file's
 * audio tower (clip.audio.*, a.*, mm.a.*) is left alone. A file without a vision encoder (an
 * audio-only mmproj) fails with GE_E_UNSUPPORTED and a message holding GE_NO_VISION_ENCODER. */
ge_status ge_vision_open(ge_vision **out, const char *path, int text_hidden, ge_err *err);
#define GE_NO_VISION_ENCODER "no vision encoder"
void ge_vision_free(ge_vision *v); /* accepts NULL */
void ge_vision_trim(ge_vision *v);  /* free the workspace kept between images */
ge_status ge_vision_prepack(ge_compute *cx, const ge_vision *v, ge_err *err); /* --prepack */
int ge_vision_patch(const ge_vision *v);  /* patch side in pixels (16) */
int ge_vision_widest(const ge_vision *v); /* widest linear input */
/* Soft tokens of one image: patches [n][patch * patch * 3] in [0, 1] ((y, x, channel) order,
 * row-major over the pw x ph grid), positions pos[2 t] = x, pos[2 t + 1] = y; out gets
 * (pw / 3) * (ph / 3) rows of text_hidden values. fast: the fast path, else the reference.
 * yield (or NULL) is called between layers. The tower keeps its workspace between calls, so
 * one tower encodes one image at a time. */
ge_status ge_vision_encode(ge_compute *cx, ge_vision *v, bool fast, const float *patches,
                           const int32_t *pos, int n, int pw, int ph, float *out,
                           const ge_yield *yield, ge_err *err);

#endif
