/* q8.c - placeholder until the family's kernels land: no pointers set, the engine keeps
 * its reference path. */
#include "kern.h"

void ge_q8_fill(ge_kern *k, ge_tier tier) { (void)k, (void)tier; }
