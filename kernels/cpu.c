/* cpu.c - what the running CPU and OS can execute: CPUID + XCR0 on x86-64, hwcaps on arm64. */
#include <string.h>

#include "kern.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

void ge_cpu_detect(ge_cpu_feats *f)
{
    memset(f, 0, sizeof *f);
    f->x86 = 1;
    unsigned a, b, c, d, max = __get_cpuid_max(0, NULL);
    if (max < 1)
        return;
    __cpuid(1, a, b, c, d);
    f->sse2 = (d >> 26) & 1;
    f->fma = (c >> 12) & 1;
    f->f16c = (c >> 29) & 1;
    f->avx = (c >> 28) & 1;
    int osxsave = (c >> 27) & 1;
    if (osxsave) {
        uint64_t xcr0 = xgetbv0();
        f->os_avx = (xcr0 & 0x6) == 0x6;      /* XMM and YMM state */
        f->os_avx512 = (xcr0 & 0xe6) == 0xe6; /* plus opmask, ZMM_Hi256, Hi16_ZMM */
    }
    if (max >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f->avx2 = (b >> 5) & 1;
        f->avx512f = (b >> 16) & 1;
        f->avx512dq = (b >> 17) & 1;
        f->avx512bw = (b >> 30) & 1;
        f->avx512vl = (b >> 31) & 1;
        f->avx512vnni = (c >> 11) & 1;
        __cpuid_count(7, 1, a, b, c, d);
        f->avxvnni = (a >> 4) & 1;
        f->avx512bf16 = (a >> 5) & 1;
    }
}
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

void ge_cpu_detect(ge_cpu_feats *f)
{
    memset(f, 0, sizeof *f);
    unsigned long hw = getauxval(AT_HWCAP);
    f->arm64 = 1;
    f->neon = (hw & HWCAP_ASIMD) != 0;
    f->dotprod = (hw & HWCAP_ASIMDDP) != 0;
}
#else
void ge_cpu_detect(ge_cpu_feats *f) { memset(f, 0, sizeof *f); }
#endif
