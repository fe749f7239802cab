/* fuzz_json_span.c - libFuzzer target: cli/json_span.c against jansson on arbitrary bytes.
 *
 *  - ge_json_member_span: when jansson accepts the input as an object (duplicates rejected,
 *    as the reader does), the scanner must find exactly the members jansson has, and each
 *    span must parse to the value jansson holds for that member. On any input a found span
 *    lies inside it.
 *  - ge_json_number_valid: a valid number is a JSON number to jansson (or too large for a
 *    double), and every number jansson reads without surrounding blanks is valid.
 *  - ge_json_put_string: the literal is always valid JSON, and it decodes back to the input
 *    when the input is valid UTF-8. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ge.h"
#include "json_span.h"

static void fail(const char *what, const uint8_t *s, size_t n)
{
    fprintf(stderr, "fuzz_json_span: %s on %zu bytes: \"", what, n);
    for (size_t i = 0; i < n && i < 400; i++)
        fprintf(stderr, s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' ? "%c" : "\\x%02x", s[i]);
    fprintf(stderr, "\"\n");
    abort();
}

static bool blank(uint8_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static void check_member(const uint8_t *data, size_t n, json_t *obj, const char *key)
{
    const char *s = (const char *)data;
    size_t off = 0, len = 0;
    int rc = ge_json_member_span(s, n, key, &off, &len);
    if (rc < -1 || rc > 1)
        fail("member_span return value", data, n);
    if (rc == 1 && (off > n || len > n - off))
        fail("member_span span outside the input", data, n);
    if (!obj)
        return;
    json_t *want = json_object_get(obj, key);
    if (rc != (want ? 1 : 0))
        fail(want ? "member_span missed a member" : "member_span found a missing member", data,
             n);
    if (!want)
        return;
    json_error_t je;
    json_t *got = json_loadb(s + off, len, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL |
                             JSON_ALLOW_NUL, &je);
    if (!got || !json_equal(got, want))
        fail("member_span span is not the member's value", data, n);
    json_decref(got);
}

static void check_number(const uint8_t *data, size_t n)
{
    const char *s = (const char *)data;
    bool valid = ge_json_number_valid(s, n);
    json_error_t je;
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &je);
    bool number = v && json_is_number(v);
    bool overflow = !v && json_error_code(&je) == json_error_numeric_overflow;
    json_decref(v);
    if (valid && !number && !overflow)
        fail("number_valid accepts what jansson does not read as a number", data, n);
    /* (jansson reads a top-level scalar followed by a NUL byte as the scalar alone) */
    if (number && n > 0 && !blank(data[0]) && !blank(data[n - 1]) && !memchr(data, 0, n) &&
        !valid)
        fail("number_valid rejects a JSON number", data, n);
}

static void check_put_string(const uint8_t *data, size_t n)
{
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (!f)
        abort();
    if (ge_json_put_string(f, (const char *)data, n) != 0)
        fail("put_string write error", data, n);
    fclose(f);
    json_error_t je;
    json_t *v = json_loadb(buf, blen, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!v || !json_is_string(v))
        fail("put_string wrote invalid JSON", data, n);
    if (ge_utf8_check((const char *)data, n) == n &&
        (json_string_length(v) != n || memcmp(json_string_value(v), data, n) != 0))
        fail("put_string does not round-trip valid UTF-8", data, n);
    json_decref(v);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *obj = json_loadb((const char *)data, size,
                             JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL,
                             &je);
    /* no member oracle for an array (not a record), nor when there is a NUL byte: jansson
     * 2.14 drops a raw NUL that follows a number ("{\"a\":1\0}" parses, which JSON does not
     * allow; the scanner stops there) */
    if (obj && (!json_is_object(obj) || memchr(data, 0, size))) {
        json_decref(obj);
        obj = NULL;
    }
    static const char *const keys[] = {"id", "text", "", "a"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        check_member(data, size, obj, keys[k]);
    /* and the first key of the object, whatever it is (when it is a C string) */
    void *it = obj ? json_object_iter(obj) : NULL;
    if (it) {
        const char *k = json_object_iter_key(it);
        check_member(data, size, obj, k);
    }
    json_decref(obj);
    check_number(data, size);
    check_put_string(data, size);
    return 0;
}
