/* utf8.c - UTF-8 validation shared by the tokenizer and the CLI's record readers. */
#include "ge.h"

size_t ge_utf8_seq(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* no overlong forms */
        if (c == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F; /* at most U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xBF)
            return 0;
    return len;
}

size_t ge_utf8_check(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t k = ge_utf8_seq(s + i, len - i);
        if (!k)
            break;
        i += k;
    }
    return i;
}

size_t ge_utf8_chars(const char *s, size_t len)
{
    size_t k = 0;
    for (size_t i = 0; i < len; i++)
        k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}
