/* peak_dotprod.c - int8 peak with SDOT (vdotq_s32: 16 MACs into 4 int32 lanes), armv8.2-a
 * dotprod (peak_arm.h). */
#define PEAK_OP vdotq_s32
#define PEAK_MACS 16
#define PEAK_NAME ge_peak_int8_dotprod
#include "peak_arm.h"
