/* peak.h - register-only loops that measure one thread's peak multiply-accumulate rate, so
 * --bench can report kernels as a fraction of what this machine can do. */
#ifndef GE_PEAK_H
#define GE_PEAK_H

double ge_peak_fp32_scalar(double seconds);
double ge_peak_fp32_avx2(double seconds);
double ge_peak_int8_avx2(double seconds);
double ge_peak_int8_avxvnni(double seconds);
double ge_peak_fp32_avx512(double seconds);
double ge_peak_int8_avx512(double seconds);
double ge_peak_fp32_neon(double seconds);
double ge_peak_int8_neon(double seconds);
double ge_peak_int8_dotprod(double seconds);
double ge_peak_int8_i8mm(double seconds);

/* Monotonic seconds (peak.c). */
double ge_peak_clock(void);

#endif
