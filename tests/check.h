/* check.h - the test harness: one "PASS: name" or "FAIL: name: detail" line per check, and
 * check_done() turns the count into the exit status. tests/run counts the lines. */
#ifndef GE_CHECK_H
#define GE_CHECK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

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

static inline int check_done(void)
{
    if (check_count == 0) {
        printf("FAIL: no checks ran\n");
        return 1;
    }
    return check_failures ? 1 : 0;
}

#endif
