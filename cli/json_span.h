/* json_span.h - the little hand-written JSON the CLI needs besides jansson.
 *
 * jansson parses and validates every record, but it cannot say where a value was in the
 * text, and ids must be echoed byte for byte (string escapes, 1.50, integers of any size).
 * So a tiny scanner finds the raw byte span of a top-level member's value. It also checks a
 * number's grammar and writes a string as a JSON string literal. Nothing here
 * parses JSON into values. */
#ifndef GE_CLI_JSON_SPAN_H
#define GE_CLI_JSON_SPAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Find the top-level member `key` of the JSON object in s[0..n) and return the span of its
 * raw value text in *off, *len (first match; callers reject duplicate keys beforehand).
 * Keys written with escapes ("\u0069d") are compared after decoding. Returns 1 when found,
 * 0 when absent, -1 when s is not a well-formed object (the scanner never reads outside
 * s[0..n), whatever s holds, but it only fully checks syntax that it needs to skip). */
int ge_json_member_span(const char *s, size_t n, const char *key, size_t *off, size_t *len);

/* True when s[0..n) is exactly one JSON number (RFC 8259 grammar, any number of digits). */
bool ge_json_number_valid(const char *s, size_t n);

/* Copy s[0..n) to out (room for n bytes) with every well-formed number outside strings whose
 * value overflows a double (1e400, an integer of 400 digits) replaced by 0, so that jansson, which
 * keeps numbers as int64 or double, can parse a record whose unused fields hold such numbers.
 * Returns the copy's length; *replaced gets how many numbers were replaced. */
size_t ge_json_zero_huge_numbers(const char *s, size_t n, char *out, size_t *replaced);

/* Write s[0..n) to f as a JSON string literal (quotes included). Control characters are
 * escaped and bytes that are not valid UTF-8 become U+FFFD, so the result is always valid
 * JSON. Returns 0, or -1 when the write failed (check ferror). */
int ge_json_put_string(FILE *f, const char *s, size_t n);

#endif
