/* audio_tower.h - the gemma4a audio tower (conformer) of an mmproj file (audio_tower.c). */
#ifndef GE_AUDIO_TOWER_H
#define GE_AUDIO_TOWER_H

#include <stdbool.h>
#include <stdint.h>

#include "compute.h"

typedef struct ge_audio_tower ge_audio_tower;

/* Open and bind an mmproj's audio tower; its projection must give text_hidden values. Only
 * clip.audio.* and the a.* / mm.a.* tensors are read. A file without an audio encoder fails
 * with GE_E_UNSUPPORTED and a message holding GE_NO_AUDIO_ENCODER. */
ge_status ge_audio_tower_open(ge_audio_tower **out, const char *path, int text_hidden,
                              ge_err *err);
void ge_audio_tower_free(ge_audio_tower *t); /* accepts NULL */
void ge_audio_tower_trim(ge_audio_tower *t);  /* free the workspace kept between clips */
ge_status ge_audio_tower_prepack(ge_compute *cx, const ge_audio_tower *t, ge_err *err);
int ge_audio_tower_widest(const ge_audio_tower *t); /* widest linear input */
/* Soft tokens of one clip: feat [>= n_valid][128] log-mel features (ge_audio_features), of
 * which the first n_valid frames are real; out gets (n_valid + 3) / 4 rows of text_hidden
 * values. fast: the fast path, else the reference. yield (or NULL) is called between layers.
 * The tower keeps its workspace between calls, so one tower encodes one clip at a time. */
ge_status ge_audio_tower_encode(ge_compute *cx, ge_audio_tower *t, bool fast, const float *feat,
                                int64_t n_valid, float *out, const ge_yield *yield,
                                ge_err *err);

#endif
