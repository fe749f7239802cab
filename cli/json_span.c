/* json_span.c - raw value spans, number grammar and string literals (json_span.h).
 *
 * The span scanner is deliberately small: it is run on lines that jansson has already
 * accepted, so it only has to skip values correctly, never to diagnose them. Every index is
 * still bounds-checked, so hostile input can make it fail but never read out of bounds. */
#include "json_span.h"
#include "ge.h"

#include <jansson.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* s[i] is the opening quote of a string: return the index just past its closing quote, or
 * 0 when the string is not closed. A backslash always escapes the next byte (\" and \\ are
 * the only escapes that matter for finding the end; \uXXXX is plain hex after the 'u'). */
static size_t skip_string(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return 0;
}

/* s[i] starts a value: return the index just past it, or 0 when it runs off the end.
 * Objects and arrays are skipped by counting brackets, stepping over strings whole (a
 * bracket inside a string does not count). Scalars (numbers, true, false, null) end at the
 * first delimiter. */
static size_t skip_value(const char *s, size_t n, size_t i)
{
    if (i >= n)
        return 0;
    if (s[i] == '"')
        return skip_string(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        size_t depth = 0;
        while (i < n) {
            char c = s[i];
            if (c == '"') {
                i = skip_string(s, n, i);
                if (!i)
                    return 0;
                continue;
            }
            if (c == '{' || c == '[')
                depth++;
            else if ((c == '}' || c == ']') && --depth == 0)
                return i + 1;
            i++;
        }
        return 0;
    }
    size_t start = i;
    while (i < n && !strchr(",}] \t\r\n", s[i]) && s[i] != '\0')
        i++;
    return i > start ? i : 0;
}

/* Does the key literal s[a..b) (quotes included) name `key`? Plain keys compare bytes; a key
 * with escapes is decoded by jansson so "\u0069d" matches "id" exactly as jansson saw it. */
static bool key_is(const char *s, size_t a, size_t b, const char *key)
{
    size_t klen = strlen(key);
    if (!memchr(s + a, '\\', b - a))
        return b - a == klen + 2 && memcmp(s + a + 1, key, klen) == 0;
    json_error_t je;
    json_t *k = json_loadb(s + a, b - a, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    bool same = k && json_is_string(k) && json_string_length(k) == klen &&
                memcmp(json_string_value(k), key, klen) == 0;
    json_decref(k);
    return same;
}

int ge_json_member_span(const char *s, size_t n, const char *key, size_t *off, size_t *len)
{
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '{')
        return -1;
    i = skip_ws(s, n, i + 1);
    if (i < n && s[i] == '}')
        return 0; /* {} */
    for (;;) {
        /* "key" ws : ws value ws (, or }) */
        if (i >= n || s[i] != '"')
            return -1;
        size_t ka = i, kb = skip_string(s, n, i);
        if (!kb)
            return -1;
        i = skip_ws(s, n, kb);
        if (i >= n || s[i] != ':')
            return -1;
        size_t va = skip_ws(s, n, i + 1), vb = skip_value(s, n, va);
        if (!vb)
            return -1;
        if (key_is(s, ka, kb, key)) {
            *off = va;
            *len = vb - va;
            return 1;
        }
        i = skip_ws(s, n, vb);
        if (i < n && s[i] == '}')
            return 0;
        if (i >= n || s[i] != ',')
            return -1;
        i = skip_ws(s, n, i + 1);
    }
}

static size_t digits(const char *s, size_t n, size_t i)
{
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    return i;
}

bool ge_json_number_valid(const char *s, size_t n)
{
    /* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
    size_t i = 0, j;
    if (i < n && s[i] == '-')
        i++;
    if (i < n && s[i] == '0')
        i++;
    else if (i < n && s[i] >= '1' && s[i] <= '9')
        i = digits(s, n, i);
    else
        return false;
    if (i < n && s[i] == '.') {
        j = digits(s, n, i + 1);
        if (j == i + 1)
            return false;
        i = j;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        j = digits(s, n, i);
        if (j == i)
            return false;
        i = j;
    }
    return i == n;
}

/* Does the number text s[0..n) overflow a double? strtod needs a terminated copy. */
static bool huge_number(const char *s, size_t n)
{
    char small[64], *c = n < sizeof small ? small : malloc(n + 1);
    if (!c)
        return false;
    memcpy(c, s, n);
    c[n] = 0;
    errno = 0;
    double v = strtod(c, NULL);
    bool huge = errno == ERANGE && isinf(v);
    if (c != small)
        free(c);
    return huge;
}

size_t ge_json_zero_huge_numbers(const char *s, size_t n, char *out, size_t *replaced)
{
    size_t o = 0;
    bool in_string = false;
    *replaced = 0;
    for (size_t i = 0; i < n;) {
        char c = s[i];
        if (in_string) {
            out[o++] = c;
            if (c == '\\' && i + 1 < n)
                out[o++] = s[++i];
            else if (c == '"')
                in_string = false;
            i++;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t j = i + 1;
            while (j < n && (strchr("0123456789+-.eE", s[j]) && s[j]))
                j++;
            if (ge_json_number_valid(s + i, j - i) && huge_number(s + i, j - i)) {
                out[o++] = '0';
                ++*replaced;
            } else {
                memcpy(out + o, s + i, j - i);
                o += j - i;
            }
            i = j;
        } else {
            in_string = c == '"';
            out[o++] = c;
            i++;
        }
    }
    return o;
}

int ge_json_put_string(FILE *f, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    putc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t k = ge_utf8_seq(s + i, n - i);
        if (!k) {
            fputs("\\ufffd", f);
            i++;
        } else if (c == '"' || c == '\\') {
            putc('\\', f);
            putc((int)c, f);
            i++;
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
            i++;
        } else {
            fwrite(u + i, 1, k, f);
            i += k;
        }
    }
    putc('"', f);
    return ferror(f) ? -1 : 0;
}
