/* paths.h - the files a run reads and writes, checked against each other before any is
 * opened, and outputs that name a descriptor the run was given.
 *
 * A written path must never be a file the run reads (the model, an mmproj, an input) or
 * another file it writes: opening it for writing would truncate it first. Files are compared
 * by device and inode when they exist, by their resolved path when they do not yet. Only
 * regular files count: a terminal or pipe that is both stdin and stdout destroys nothing.
 *
 * An output path that names one of the process's descriptors (/dev/stdout, /dev/stderr,
 * /dev/fd/N, /proc/self/fd/N, or a symlink to one of those) is written through a duplicate of
 * that descriptor: where it points, at its offset, in append mode when the shell opened it
 * that way (`-o /dev/stdout >> all.jsonl`). Reopening the name would truncate the file. */
#ifndef GE_CLI_PATHS_H
#define GE_CLI_PATHS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ge.h"

typedef struct {
    const char *path; /* as given; NULL: the descriptor fd itself (stdin, stdout, stderr) */
    int fd;           /* with path NULL */
    const char *role; /* for messages: "the model (-m)", "the output (-o)", ... */
    bool write;
} ge_path_use;

/* GE_E_USAGE naming both uses and their roles when a written use is the same regular file as
 * any other use. Two written descriptors (stdout and stderr both `>log 2>&1`) may share a
 * file: they append at a shared offset instead of truncating. */
ge_status ge_paths_check(const ge_path_use *uses, size_t n, ge_err *err);

/* The descriptor path names (following symlinks), or -1 when it names none. */
int ge_path_descriptor(const char *path);

/* path as an absolute path without symlinks: realpath() when it exists, else its directory's
 * realpath and its own name (a file still to be created). Into buf; returns buf. */
const char *ge_path_resolve(const char *path, char *buf, size_t n);

/* Open path for writing: through a duplicate of the descriptor it names (never truncated),
 * else created or truncated ("wb"). NULL with GE_E_IO naming the path on failure. */
FILE *ge_path_create(const char *path, ge_err *err);

/* A file's identity for --resume: its size and a 64-bit content hash (XXH3 of every byte),
 * read without blocking on a FIFO. GE_E_IO naming the path on failure. */
ge_status ge_file_digest(const char *path, unsigned long long *size, unsigned long long *hash,
                         ge_err *err);

#endif
