/* dump_util.h - file and error helpers shared by the test dump tools (image_dump, audio_dump):
 * they exit on any I/O failure, as a test helper may. */
#ifndef GE_DUMP_UTIL_H
#define GE_DUMP_UTIL_H

#include <stdio.h>
#include <stdlib.h>
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

#endif
