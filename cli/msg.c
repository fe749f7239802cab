/* msg.c - ge_say and friends: one line on stderr, written with a single call so that lines
 * from the pipeline's threads never interleave. */
#include "msg.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void say(const char *fmt, va_list ap)
{
    char line[2048], *big = NULL;
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    /* a longer line (a long path or argument) is written whole when memory allows */
    if (n >= (int)sizeof line && (big = malloc((size_t)n + 1)))
        vsnprintf(big, (size_t)n + 1, fmt, again);
    va_end(again);
    if (n < 0)
        return;
    if (!big && (size_t)n >= sizeof line)
        n = sizeof line - 1;
    fprintf(stderr, "gemmaembed: %.*s\n", n, big ? big : line);
    free(big);
}

void ge_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
}

ge_exit ge_say_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
    fputs("Try 'gemmaembed --help' for more information.\n", stderr);
    return GE_EXIT_USAGE;
}

ge_exit ge_say_err(const ge_err *err, ge_exit code)
{
    ge_say("%s", err->msg);
    return code;
}
