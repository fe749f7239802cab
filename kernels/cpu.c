/* cpu.c - what the running CPU and OS can execute: CPUID + XCR0 on x86-64; on arm64 the
 * kernel's hwcaps (Linux getauxval) or the FEAT_* sysctls (macOS). */
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
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>

/* Apple silicon: every arm64 Mac has Advanced SIMD; the rest are FEAT_* sysctls (1 or 0,
 * absent on older macOS). Compile-checked only: no Mac runs the tests. */
static int apple_feat(const char *name)
{
    int v = 0;
    size_t n = sizeof v;
    return sysctlbyname(name, &v, &n, NULL, 0) == 0 && v == 1;
}

void ge_cpu_detect(ge_cpu_feats *f)
{
    memset(f, 0, sizeof *f);
    f->arm64 = 1;
    f->neon = 1;
    f->dotprod = apple_feat("hw.optional.arm.FEAT_DotProd");
    f->i8mm = apple_feat("hw.optional.arm.FEAT_I8MM");
    f->bf16 = apple_feat("hw.optional.arm.FEAT_BF16");
}
#elif defined(__aarch64__)
#include <sys/auxv.h>
/* Linux hwcap bits (asm/hwcap.h), spelled out for older headers */
#define GE_HWCAP_ASIMD (1UL << 1)
#define GE_HWCAP_ASIMDDP (1UL << 20)
#define GE_HWCAP2_I8MM (1UL << 13)
#define GE_HWCAP2_BF16 (1UL << 14)

void ge_cpu_detect(ge_cpu_feats *f)
{
    memset(f, 0, sizeof *f);
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    f->arm64 = 1;
    f->neon = (hw & GE_HWCAP_ASIMD) != 0;
    f->dotprod = (hw & GE_HWCAP_ASIMDDP) != 0;
    f->i8mm = (hw2 & GE_HWCAP2_I8MM) != 0;
    f->bf16 = (hw2 & GE_HWCAP2_BF16) != 0;
}
#else
void ge_cpu_detect(ge_cpu_feats *f) { memset(f, 0, sizeof *f); }
#endif
