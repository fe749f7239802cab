/* check.h - the test harness: one "PASS: name" or "FAIL: name: detail" line per check, and
 * check_done() turns the count into the exit status. tests/run counts the lines. */
#ifndef GE_CHECK_H
#define GE_CHECK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures, check_count;

/* Report one check. detail (printf-style) is printed only on failure. */
static inline bool check(bool ok, const char *name, const char *detail, ...)
    __attribute__((format(printf, 3, 4)));
static inline bool check(bool ok, const char *name, const char *detail, ...)
{
    check_count++;
    if (ok) {
        printf("PASS: %s\n", name);
    } else {
        check_failures++;
        printf("FAIL: %s: ", name);
        va_list ap;
        va_start(ap, detail);
        vprintf(detail, ap);
        va_end(ap);
        printf("\n");
    }
    fflush(stdout);
    return ok;
}

/* A check name built printf-style (one static buffer: use it before the next call). */
static inline const char *nm(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline const char *nm(const char *fmt, ...)
{
    static char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

/* malloc for test data: out of memory is a failed check and the end of the test. */
static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        printf("FAIL: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static inline int check_done(void)
{
    if (check_count == 0) {
        printf("FAIL: no checks ran\n");
        return 1;
    }
    return check_failures ? 1 : 0;
}

#endif
