/* media.h - the media towers' part of the model handle (media.c; its entry points,
 * ge_model_encode_image / _audio and friends, are in ge.h). */
#ifndef GE_MEDIA_H
#define GE_MEDIA_H

#include "model.h"

/* Close the media towers and forget the --mmproj files. */
void ge_media_free(ge_model *m);

#endif
