/* dump_util.h - file, switch and error helpers shared by the test dump tools (image_dump,
 * audio_dump, vision_dump):
 * they exit on any I/O failure, as a test helper may. */
#ifndef GE_DUMP_UTIL_H
#define GE_DUMP_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ge.h"

/* The whole file at path (exit 2 when it cannot be read). */
static inline void *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap);
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            b = realloc(b, cap *= 2);
    }
    fclose(f);
    if (!b) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    *len = n;
    return b;
}

static inline void spit(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
}

static inline int die(const ge_err *e)
{
    printf("error: %s: %s\n", ge_status_name(e->code), e->msg);
    return 1;
}

static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* NAME=VALUE engine switches (e.g. cpu-tier=scalar) from argv[from..argc) into cfg, which
 * starts from the defaults; 0, or 2 after naming a bad one. */
static inline int parse_switches(ge_config *cfg, int from, int argc, char **argv)
{
    ge_err err = {0};
    ge_config_defaults(cfg);
    size_t nsw;
    const ge_switch *sw = ge_config_switches(&nsw);
    for (int a = from; a < argc; a++) {
        const char *eq = strchr(argv[a], '=');
        size_t i = 0;
        while (eq && i < nsw && strncmp(sw[i].flag, argv[a], (size_t)(eq - argv[a])))
            i++;
        if (!eq || i == nsw || ge_config_set(cfg, &sw[i], eq + 1, GE_SRC_FLAG, &err)) {
            fprintf(stderr, "%s: bad switch %s\n", argv[0], argv[a]);
            return 2;
        }
    }
    return 0;
}

/* The median of t[0..n) (sorts t). */
static inline double median(double *t, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1], t[j - 1] = x;
        }
    return t[n / 2];
}

#endif
