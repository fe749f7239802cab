/* base64.c - RFC 4648 base64 (base64.h). */
#include "base64.h"

#include <stdint.h>

static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t ge_base64_encode(char *out, const unsigned char *in, size_t n)
{
    size_t k = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[k++] = A[v >> 18];
        out[k++] = A[(v >> 12) & 63];
        out[k++] = A[(v >> 6) & 63];
        out[k++] = A[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
        out[k++] = A[v >> 18];
        out[k++] = A[(v >> 12) & 63];
        out[k++] = i + 1 < n ? A[(v >> 6) & 63] : '=';
        out[k++] = '=';
    }
    return k;
}

static int value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

bool ge_base64_decode(const char *s, size_t n, unsigned char *out, size_t *len)
{
    uint32_t acc = 0;
    int bits = 0, pad = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = value(c);
        if (v < 0 || pad) /* outside the alphabet, or data after padding */
            return false;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[k++] = (unsigned char)(acc >> bits);
        }
    }
    /* leftover bits: 0 (complete), 2 (one pad) or 4 (two pads); 6 cannot end a quantum */
    if (bits == 6 || pad > 2 || (pad && pad != bits / 2))
        return false;
    *len = k;
    return true;
}
