/* status.c - ge_err helpers: one-line messages, context prefixes, stable code names. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ge.h"

/* One line whatever it quotes: messages name keys, tensors and strings read from files, and
 * a hostile one may hold a line break (or a terminal escape). */
static void one_line(char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f)
            *s = '?';
}

ge_status ge_fail(ge_err *err, ge_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        one_line(err->msg);
        err->code = code;
    }
    return code;
}

void ge_err_prefix(ge_err *err, const char *fmt, ...)
{
    if (!err)
        return;
    char head[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    old[sizeof old - 1] = 0;
    size_t hl = strlen(head), cap = sizeof err->msg - 1;
    hl = hl < cap ? hl : cap;
    memcpy(err->msg, head, hl);
    size_t pos = hl;
    for (const char *s = ": "; *s && pos < cap; s++)
        err->msg[pos++] = *s;
    size_t ol = strlen(old);
    ol = ol < cap - pos ? ol : cap - pos;
    memcpy(err->msg + pos, old, ol);
    err->msg[pos + ol] = 0;
    one_line(err->msg);
}

const char *ge_status_name(ge_status code)
{
    switch (code) {
    case GE_OK: return "ok";
    case GE_E_USAGE: return "usage";
    case GE_E_IO: return "io";
    case GE_E_FORMAT: return "format";
    case GE_E_UNSUPPORTED: return "unsupported";
    case GE_E_LIMIT: return "limit";
    case GE_E_INPUT: return "input";
    case GE_E_NOMEM: return "nomem";
    case GE_E_INTERNAL: return "internal";
    }
    return "unknown";
}
