/* cache.h - the content cache (--cache DIR): full-width float vectors in an SQLite database,
 * DIR/cache.sqlite, keyed by a SHA-256 of what decides them.
 *
 * Key: SHA-256 of the run's context (cache_ctx: the model and mmproj files by size and
 * content hash, the prompt, the options and switches that change the vectors, the kernel tier
 * that runs and the version) and of the record's content: its own prompt or title prefix and
 * each item in order, a text by its bytes and a media item by its kind and the bytes of its
 * file (not its path), each length-prefixed. --dim and --precision are applied after the
 * cache, so one cache serves them all.
 *
 * Rows: key, the vector (model-width little-endian float32), its token counts and a check
 * (XXH3 of them all). A row whose check fails is reported once per run, counted, and
 * recomputed (and replaced). The database runs in WAL mode with a busy timeout, so several
 * processes (the shards of one job) share it; this run's rows are committed whenever the
 * output is checkpointed. Any database error (a damaged page, a full disk, a lock held past
 * the timeout) is reported once and turns the cache off for the rest of the run: the records
 * are then computed as without --cache, so nothing is lost or wrong. All calls are
 * thread-safe (one lock). */
#ifndef GE_CLI_CACHE_H
#define GE_CLI_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nettle/sha2.h>

#include "ge.h"

#define GE_CACHE_KEY 32

typedef struct ge_cache ge_cache;

typedef struct {
    unsigned long long hits, misses, damaged, stored;
} ge_cache_stats;

/* Open or create DIR (mode 0777 & ~umask) and DIR/cache.sqlite for vectors of dim floats.
 * context: what decides the vectors besides the record (cache_ctx text), hashed into every
 * key. quiet: no warnings on stderr. GE_E_IO / GE_E_USAGE naming DIR on failure (the run does
 * not start: a cache the user asked for and cannot have is a usage problem). */
ge_status ge_cache_open(ge_cache **c, const char *dir, const char *context, int dim,
                        bool quiet, ge_err *err);

/* A record's key, built part by part. */
typedef struct {
    struct sha256_ctx h; /* nettle's SHA-256 */
} ge_cache_keyer;
void ge_cache_key_begin(const ge_cache *c, ge_cache_keyer *k);
void ge_cache_key_part(ge_cache_keyer *k, unsigned tag, const void *data, size_t n);
void ge_cache_key_end(ge_cache_keyer *k, unsigned char key[GE_CACHE_KEY]);

/* A record's token counts: embedded, and before --truncate cut it (equal when it did not). */
typedef struct {
    size_t tokens, orig;
} ge_cache_counts;

/* The vector of key into vec (dim floats) and its counts: true on a hit. A damaged row is a
 * miss (counted); after a database error every call is a miss. */
bool ge_cache_get(ge_cache *c, const unsigned char key[GE_CACHE_KEY], float *vec,
                  ge_cache_counts *n);
/* Store a computed vector (in this run's open transaction). */
void ge_cache_put(ge_cache *c, const unsigned char key[GE_CACHE_KEY], const float *vec,
                  ge_cache_counts n);
/* Commit the rows stored since the last commit; accepts NULL. */
void ge_cache_commit(ge_cache *c);
ge_cache_stats ge_cache_get_stats(const ge_cache *c);
/* Commit and close; accepts NULL. */
void ge_cache_close(ge_cache *c);

#endif
