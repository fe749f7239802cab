/* fuzz_resume.c - libFuzzer target: the --resume state file (cli/resume.c) on arbitrary bytes.
 *
 *  - ge_state_parse never reads outside the input, and what it accepts is sane: byte lengths
 *    of the output >= 0, of the ids and errors files >= -1, a fingerprint that fits.
 *  - What it accepts round-trips: the file rebuilt from the parsed checkpoint and fingerprint
 *    parses to the same checkpoint and fingerprint.
 *  - ge_fp_diff finds no difference between a fingerprint and itself, and names every field
 *    against an empty one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ge.h"
#include "resume.h"

static void fail(const char *what, size_t n)
{
    fprintf(stderr, "fuzz_resume: %s on %zu bytes\n", what, n);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    static ge_fingerprint fp, fp2, empty;
    ge_ckpt c, c2;
    ge_err err;
    char *buf = malloc(n ? n : 1); /* an exact-size copy: ASan sees any read past the end */
    if (!buf)
        return 0;
    memcpy(buf, data, n);
    ge_status st = ge_state_parse(buf, n, &c, &fp, &err);
    free(buf);
    if (st)
        return 0;
    if (c.out < 0 || c.ids < -1 || c.errors < -1 || fp.len >= sizeof fp.text)
        fail("accepted an impossible checkpoint", n);

    /* rebuild: both slots hold c, then the fingerprint */
    static char file[GE_STATE_FP_AT + GE_STATE_FP_MAX + 64];
    size_t bl;
    memset(file, 0, sizeof file);
    ge_state_slot(&c, &fp, file + (c.seq % 2) * GE_STATE_SLOT);
    ge_state_fp_block(&fp, file + GE_STATE_FP_AT, &bl);
    if (ge_state_parse(file, GE_STATE_FP_AT + bl, &c2, &fp2, &err))
        fail("the rebuilt file does not parse", n);
    if (memcmp(&c, &c2, sizeof c) != 0 || fp.len != fp2.len || memcmp(fp.text, fp2.text, fp.len))
        fail("the rebuilt file parses to something else", n);

    char msg[400];
    if (ge_fp_diff(&fp, &fp2, msg, sizeof msg))
        fail("a fingerprint differs from itself", n);
    bool has_field = memchr(fp.text, '\n', fp.len) != NULL;
    if (ge_fp_diff(&fp, &empty, msg, sizeof msg) != has_field)
        fail("a fingerprint with fields agrees with an empty one", n);
    return 0;
}
