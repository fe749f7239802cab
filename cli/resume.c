/* resume.c - the state file's text: checkpoint slots and the fingerprint (resume.h). */
#include "resume.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#define SLOT_MAGIC "gemmaembed-resume 2 "
#define FP_MAGIC "gemmaembed-fingerprint 2\n"

static unsigned long crc_of(const char *p, size_t n)
{
    return crc32(crc32(0L, Z_NULL, 0), (const Bytef *)p, (uInt)n);
}

void ge_fp_add(ge_fingerprint *fp, const char *key, const char *fmt, ...)
{
    char val[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    for (char *p = val; *p; p++) /* one line each, whatever a prompt holds */
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    size_t room = sizeof fp->text - fp->len;
    int k = snprintf(fp->text + fp->len, room, "%s=%s\n", key, val);
    if (k < 0 || (size_t)k >= room)
        fp->overflow = true;
    else
        fp->len += (size_t)k;
}

/* ---- comparing ------------------------------------------------------------------------- */

typedef struct {
    const char *key, *val; /* into the text */
    size_t key_len, val_len, cmp_len; /* cmp_len: the value without its "  # note" */
} field;

/* The next "key=value\n" line at *p (before end) into f; false at the end. */
static bool next_field(const char **p, const char *end, field *f)
{
    if (*p >= end)
        return false;
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    const char *line_end = nl ? nl : end;
    const char *eq = memchr(*p, '=', (size_t)(line_end - *p));
    f->key = *p;
    f->key_len = eq ? (size_t)(eq - *p) : (size_t)(line_end - *p);
    f->val = eq ? eq + 1 : line_end;
    f->val_len = (size_t)(line_end - f->val);
    f->cmp_len = f->val_len;
    for (size_t i = 0; i + 4 <= f->val_len; i++)
        if (memcmp(f->val + i, "  # ", 4) == 0) {
            f->cmp_len = i;
            break;
        }
    *p = nl ? nl + 1 : end;
    return true;
}

static bool find_field(const ge_fingerprint *fp, const field *like, field *out)
{
    const char *p = fp->text, *end = fp->text + fp->len;
    while (next_field(&p, end, out))
        if (out->key_len == like->key_len && memcmp(out->key, like->key, like->key_len) == 0)
            return true;
    return false;
}

static void say_field(char *msg, size_t n, size_t *at, const field *key, const field *was,
                      const field *now)
{
    if (*at >= n)
        return;
    int k = snprintf(msg + *at, n - *at, "%s%.*s (was %.*s, now %.*s)", *at ? ", " : "",
                     (int)key->key_len, key->key, was ? (int)was->val_len : 4,
                     was ? was->val : "none", now ? (int)now->val_len : 4,
                     now ? now->val : "none");
    if (k > 0)
        *at += (size_t)k;
}

bool ge_fp_diff(const ge_fingerprint *was, const ge_fingerprint *now, char *msg, size_t n)
{
    size_t at = 0;
    field f, g;
    if (n)
        msg[0] = 0;
    const char *p = now->text, *end = now->text + now->len;
    while (next_field(&p, end, &f)) {
        bool has = find_field(was, &f, &g);
        if (!has || g.cmp_len != f.cmp_len || memcmp(g.val, f.val, f.cmp_len) != 0)
            say_field(msg, n, &at, &f, has ? &g : NULL, &f);
    }
    p = was->text, end = was->text + was->len;
    while (next_field(&p, end, &f))
        if (!find_field(now, &f, &g))
            say_field(msg, n, &at, &f, &f, NULL);
    if (at >= n && n > 4)
        memcpy(msg + n - 4, "...", 4);
    return at > 0;
}

/* ---- the file's bytes ------------------------------------------------------------------ */

void ge_state_slot(const ge_ckpt *c, const ge_fingerprint *fp, char *slot)
{
    char line[GE_STATE_SLOT + 1];
    int k = snprintf(line, sizeof line,
                     SLOT_MAGIC "seq=%llu records=%llu rows=%llu out=%lld ids=%lld errors=%lld "
                     "fp=%08lx",
                     c->seq, c->records, c->rows, c->out, c->ids, c->errors,
                     crc_of(fp->text, fp->len));
    k += snprintf(line + k, sizeof line - (size_t)k, " crc=%08lx", crc_of(line, (size_t)k));
    memset(line + k, ' ', GE_STATE_SLOT - (size_t)k - 1);
    line[GE_STATE_SLOT - 1] = '\n';
    memcpy(slot, line, GE_STATE_SLOT);
}

void ge_state_fp_block(const ge_fingerprint *fp, char *block, size_t *block_len)
{
    size_t m = sizeof FP_MAGIC - 1;
    memcpy(block, FP_MAGIC, m);
    memcpy(block + m, fp->text, fp->len);
    m += fp->len;
    m += (size_t)sprintf(block + m, "end crc=%08lx\n", crc_of(block, m));
    *block_len = m;
}

/* One slot: 1 valid (into *c, with the fingerprint crc in *fp_crc), 0 not. */
static int parse_slot(const char *p, ge_ckpt *c, unsigned long *fp_crc)
{
    char line[GE_STATE_SLOT + 1];
    memcpy(line, p, GE_STATE_SLOT);
    line[GE_STATE_SLOT] = 0;
    unsigned long crc;
    int used = 0;
    if (memchr(line, 0, GE_STATE_SLOT) ||
        sscanf(line,
               SLOT_MAGIC "seq=%llu records=%llu rows=%llu out=%lld ids=%lld errors=%lld "
               "fp=%8lx crc=%8lx%n",
               &c->seq, &c->records, &c->rows, &c->out, &c->ids, &c->errors, fp_crc, &crc,
               &used) != 8)
        return 0;
    const char *at = strstr(line, " crc=");
    if (!at || crc_of(line, (size_t)(at - line)) != crc)
        return 0;
    if (c->out < 0 || c->ids < -1 || c->errors < -1)
        return 0;
    return 1;
}

ge_status ge_state_parse(const char *buf, size_t len, ge_ckpt *c, ge_fingerprint *fp,
                         ge_err *err)
{
    memset(c, 0, sizeof *c);
    memset(fp, 0, sizeof *fp);
    if (len >= 20 && memcmp(buf, "gemmaembed-resume 1 ", 20) == 0)
        return ge_fail(err, GE_E_FORMAT, "from an older gemmaembed, which did not record the "
                       "model and options");
    /* the fingerprint: magic, lines, "end crc=XXXXXXXX\n" */
    size_t m = sizeof FP_MAGIC - 1;
    if (len < GE_STATE_FP_AT + m || memcmp(buf + GE_STATE_FP_AT, FP_MAGIC, m) != 0)
        return ge_fail(err, GE_E_FORMAT, "damaged: no fingerprint");
    const char *b = buf + GE_STATE_FP_AT, *end = buf + len;
    size_t avail = (size_t)(end - b);
    const char *tail = NULL;
    for (size_t i = m; i + 8 <= avail; ) { /* the first line that starts with "end crc=" */
        if (memcmp(b + i, "end crc=", 8) == 0) {
            tail = b + i;
            break;
        }
        const char *nl = memchr(b + i, '\n', avail - i);
        if (!nl)
            break;
        i = (size_t)(nl - b) + 1;
    }
    unsigned long crc;
    char hex[9] = {0};
    if (!tail || (size_t)(end - tail) < 17 || tail[16] != '\n')
        return ge_fail(err, GE_E_FORMAT, "damaged: the fingerprint is cut short");
    memcpy(hex, tail + 8, 8);
    if (strspn(hex, "0123456789abcdef") != 8 || sscanf(hex, "%8lx", &crc) != 1 ||
        crc_of(b, (size_t)(tail - b)) != crc)
        return ge_fail(err, GE_E_FORMAT, "damaged: the fingerprint's checksum does not match");
    size_t fl = (size_t)(tail - b) - m;
    if (fl >= sizeof fp->text)
        return ge_fail(err, GE_E_FORMAT, "damaged: the fingerprint is too long");
    memcpy(fp->text, b + m, fl);
    fp->len = fl;
    /* only what ge_fp_add writes: "key=value" lines, keys of [a-z0-9-], each key once */
    const char *p = fp->text, *fend = fp->text + fp->len;
    field f, g;
    while (next_field(&p, fend, &f)) {
        if (!f.key_len || f.val == f.key + f.key_len ||
            strspn(f.key, "abcdefghijklmnopqrstuvwxyz0123456789-") < f.key_len)
            return ge_fail(err, GE_E_FORMAT, "damaged: a fingerprint line is not key=value");
        const char *q = fp->text;
        while (next_field(&q, f.key, &g))
            if (g.key_len == f.key_len && memcmp(g.key, f.key, f.key_len) == 0)
                return ge_fail(err, GE_E_FORMAT, "damaged: the fingerprint repeats a key");
    }
    unsigned long fp_crc = crc_of(fp->text, fp->len);

    /* the newest slot that is valid and belongs to this fingerprint */
    int found = 0;
    for (int s = 0; s < 2; s++) {
        ge_ckpt t;
        unsigned long want;
        memset(&t, 0, sizeof t);
        if (parse_slot(buf + s * GE_STATE_SLOT, &t, &want) && want == fp_crc &&
            (!found || t.seq > c->seq)) {
            *c = t;
            found = 1;
        }
    }
    if (!found)
        return ge_fail(err, GE_E_FORMAT, "damaged: no valid checkpoint");
    return GE_OK;
}
