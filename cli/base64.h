/* base64.h - RFC 4648 base64: jsonl vectors with --encoding base64, and media given inline
 * in a record ("image_b64", data: URIs). */
#ifndef GE_CLI_BASE64_H
#define GE_CLI_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* Encode in[0..n) into out (room for (n + 2) / 3 * 4 bytes, padded with '='); returns the
 * length written (not NUL-terminated). */
size_t ge_base64_encode(char *out, const unsigned char *in, size_t n);

/* Decode s[0..n) into out (room for n / 4 * 3 + 3 bytes). Whitespace is skipped; padding is
 * optional; any other byte outside the alphabet, or a stray '=', is an error. Returns false
 * on an error, else true with *len the decoded length. */
bool ge_base64_decode(const char *s, size_t n, unsigned char *out, size_t *len);

#endif
