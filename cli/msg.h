/* msg.h - the one way the CLI talks to the user on stderr ("gemmaembed: <message>"), and the
 * exit status it ends with.
 *
 * Functions in cli/ that can fail return a ge_status and fill a ge_err (engine/ge.h); they do
 * not print. The caller turns that into a line here and an exit status below. */
#ifndef GE_CLI_MSG_H
#define GE_CLI_MSG_H

#include "ge.h"

#ifndef GEMMAEMBED_VERSION
#define GEMMAEMBED_VERSION "0.1.0"
#endif

/* Exit status (docs/product.md section 3; --help lists them too). */
typedef enum {
    GE_EXIT_OK = 0,        /* every record embedded */
    GE_EXIT_RECORDS = 1,   /* some records failed (or --bench could not run a case) */
    GE_EXIT_USAGE = 2,     /* bad command line */
    GE_EXIT_MODEL = 3,     /* the model could not be loaded, or changed on disk while in use */
    GE_EXIT_IO = 4,        /* input or output I/O error */
    GE_EXIT_SIGINT = 130,  /* 128 + the signal, as a shell reports a process it killed */
    GE_EXIT_SIGPIPE = 141, /* the reader of stdout went away (raised again, so rarely seen) */
    GE_EXIT_SIGTERM = 143,
} ge_exit;

/* One line on stderr, "gemmaembed: " + the message, written with a single call. */
void ge_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A usage error: the line, then the hint to --help. Returns GE_EXIT_USAGE. */
ge_exit ge_say_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ge_say(err->msg); returns code (main: `return ge_say_err(&err, GE_EXIT_MODEL)`). */
ge_exit ge_say_err(const ge_err *err, ge_exit code);

#endif
