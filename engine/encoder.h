/* encoder.h - the text encoder's part of the model handle (encoder.c; its entry points,
 * ge_embed*, are in ge.h). */
#ifndef GE_ENCODER_H
#define GE_ENCODER_H

#include "model.h"

/* Free the text encoder's state: the wave workspace and the RoPE tables. */
void ge_encoder_free(ge_model *m);

#endif
