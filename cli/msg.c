/* msg.c - ge_say: one line on stderr, written with a single call so that lines from the
 * pipeline's threads never interleave. */
#include "msg.h"

#include <stdarg.h>
#include <stdio.h>

void ge_say(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    fprintf(stderr, "gemmaembed: %.*s\n", n, line);
}
