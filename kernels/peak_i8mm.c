/* peak_i8mm.c - int8 peak with SMMLA (vmmlaq_s32: a 2 x 8 by 8 x 2 product, 32 MACs into a
 * 2 x 2 int32 tile), armv8.6-a i8mm (peak_arm.h). */
#define PEAK_OP vmmlaq_s32
#define PEAK_MACS 32
#define PEAK_NAME ge_peak_int8_i8mm
#include "peak_arm.h"
