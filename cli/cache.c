/* cache.c - the content cache in SQLite (cache.h). */
#include "cache.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "msg.h"

/* A lock held by another process (a shard committing) is waited for this long. */
#define BUSY_MS 60000
#define SCHEMA "gemmaembed-cache 1"

struct ge_cache {
    pthread_mutex_t mu;
    sqlite3 *db;
    sqlite3_stmt *get, *put;
    char *path;
    unsigned char ctx[SHA256_DIGEST_SIZE]; /* the run's context, hashed once */
    int dim;
    bool quiet, off, in_txn, warned_damage;
    ge_cache_stats st;
    unsigned char *row; /* [dim * 4] a vector's bytes */
};

/* The check of a row: XXH3 of its vector bytes, seeded with the XXH3 of its key and token
 * counts. */
static int64_t row_check(const unsigned char *key, int64_t tokens, int64_t orig,
                         const void *vec, size_t n)
{
    unsigned char head[GE_CACHE_KEY + 16];
    memcpy(head, key, GE_CACHE_KEY);
    memcpy(head + GE_CACHE_KEY, &tokens, 8);
    memcpy(head + GE_CACHE_KEY + 8, &orig, 8);
    return (int64_t)XXH3_64bits_withSeed(vec, n, XXH3_64bits(head, sizeof head));
}

/* A database error: said once, and the cache is off for the rest of the run (under mu). */
static void turn_off(ge_cache *c, const char *what)
{
    if (!c->off && !c->quiet)
        ge_say("--cache %s: %s: %s; going on without the cache (the records are computed)",
               c->path, what, sqlite3_errmsg(c->db));
    c->off = true;
}

static int exec(ge_cache *c, const char *sql) { return sqlite3_exec(c->db, sql, NULL, NULL, NULL); }

ge_status ge_cache_open(ge_cache **out, const char *dir, const char *context, int dim,
                        bool quiet, ge_err *err)
{
    *out = NULL;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return ge_fail(err, GE_E_USAGE, "--cache %s: cannot create it: %s", dir,
                       strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return ge_fail(err, GE_E_USAGE, "--cache %s: not a directory", dir);
    ge_cache *c = calloc(1, sizeof *c);
    size_t n = strlen(dir) + sizeof "/cache.sqlite";
    if (!c || !(c->path = malloc(n)) || !(c->row = malloc((size_t)dim * 4))) {
        if (c)
            free(c->path);
        free(c);
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    }
    snprintf(c->path, n, "%s/cache.sqlite", dir);
    pthread_mutex_init(&c->mu, NULL);
    c->dim = dim;
    c->quiet = quiet;
    struct sha256_ctx h;
    sha256_init(&h);
    sha256_update(&h, sizeof SCHEMA, (const uint8_t *)SCHEMA);
    sha256_update(&h, strlen(context), (const uint8_t *)context);
    sha256_digest(&h, sizeof c->ctx, c->ctx);

    const char *what = "cannot open it";
    int rc = sqlite3_open_v2(c->path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                             SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(c->db, BUSY_MS);
        what = "cannot set it up";
        /* WAL: readers never wait for a writer, and a killed writer leaves a log that the
         * next open replays; NORMAL: a crash may lose the last commits, never consistency */
        rc = exec(c, "PRAGMA journal_mode=WAL");
        if (!rc)
            rc = exec(c, "PRAGMA synchronous=NORMAL");
        if (!rc)
            rc = exec(c, "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, "
                         "tokens INTEGER NOT NULL, orig_tokens INTEGER NOT NULL, "
                         "vec BLOB NOT NULL, check_ INTEGER NOT NULL) WITHOUT ROWID");
        if (!rc)
            rc = sqlite3_prepare_v2(c->db, "SELECT tokens, orig_tokens, vec, check_ FROM "
                                    "vectors WHERE key = ?1", -1, &c->get, NULL);
        if (!rc)
            rc = sqlite3_prepare_v2(c->db, "INSERT OR REPLACE INTO vectors VALUES (?1, ?2, ?3, "
                                    "?4, ?5)", -1, &c->put, NULL);
    }
    if (rc != SQLITE_OK) {
        /* a damaged or foreign file, a lock held too long: the run goes on without it */
        turn_off(c, what);
    }
    *out = c;
    return GE_OK;
}

void ge_cache_key_begin(const ge_cache *c, ge_cache_keyer *k)
{
    sha256_init(&k->h);
    sha256_update(&k->h, sizeof c->ctx, c->ctx);
}

void ge_cache_key_part(ge_cache_keyer *k, unsigned tag, const void *data, size_t n)
{
    uint8_t head[9] = {(uint8_t)tag};
    for (int i = 0; i < 8; i++) /* the length, so that parts cannot run into each other */
        head[1 + i] = (uint8_t)((uint64_t)n >> (8 * i));
    sha256_update(&k->h, sizeof head, head);
    sha256_update(&k->h, n, data);
}

void ge_cache_key_end(ge_cache_keyer *k, unsigned char key[GE_CACHE_KEY])
{
    sha256_digest(&k->h, GE_CACHE_KEY, key);
}

bool ge_cache_get(ge_cache *c, const unsigned char key[GE_CACHE_KEY], float *vec,
                  ge_cache_counts *counts)
{
    bool hit = false;
    pthread_mutex_lock(&c->mu);
    if (c->off)
        goto out;
    sqlite3_reset(c->get);
    sqlite3_bind_blob(c->get, 1, key, GE_CACHE_KEY, SQLITE_STATIC);
    int rc = sqlite3_step(c->get);
    if (rc == SQLITE_ROW) {
        const int64_t tokens = sqlite3_column_int64(c->get, 0);
        const int64_t orig = sqlite3_column_int64(c->get, 1);
        const void *v = sqlite3_column_blob(c->get, 2);
        const size_t n = (size_t)sqlite3_column_bytes(c->get, 2);
        if (n == (size_t)c->dim * 4 && v && tokens >= 0 && orig >= tokens &&
            sqlite3_column_int64(c->get, 3) == row_check(key, tokens, orig, v, n)) {
            for (int i = 0; i < c->dim; i++) { /* little-endian float32 */
                const unsigned char *b = (const unsigned char *)v + 4 * i;
                uint32_t u = b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                             (uint32_t)b[3] << 24;
                memcpy(&vec[i], &u, 4);
            }
            *counts = (ge_cache_counts){(size_t)tokens, (size_t)orig};
            hit = true;
        } else {
            c->st.damaged++;
            if (!c->warned_damage && !c->quiet)
                ge_say("--cache %s: a damaged entry (its check fails): recomputed; the count "
                       "is in the summary", c->path);
            c->warned_damage = true;
        }
    } else if (rc != SQLITE_DONE) {
        turn_off(c, "cannot read it");
    }
    sqlite3_reset(c->get);
out:
    hit ? c->st.hits++ : c->st.misses++;
    pthread_mutex_unlock(&c->mu);
    return hit;
}

void ge_cache_put(ge_cache *c, const unsigned char key[GE_CACHE_KEY], const float *vec,
                  ge_cache_counts counts)
{
    pthread_mutex_lock(&c->mu);
    if (c->off)
        goto out;
    if (!c->in_txn) {
        if (exec(c, "BEGIN IMMEDIATE") != SQLITE_OK) {
            turn_off(c, "cannot write to it");
            goto out;
        }
        c->in_txn = true;
    }
    for (int i = 0; i < c->dim; i++) {
        uint32_t u;
        memcpy(&u, &vec[i], 4);
        for (int k = 0; k < 4; k++)
            c->row[4 * i + k] = (unsigned char)(u >> (8 * k));
    }
    const size_t n = (size_t)c->dim * 4;
    sqlite3_reset(c->put);
    sqlite3_bind_blob(c->put, 1, key, GE_CACHE_KEY, SQLITE_STATIC);
    sqlite3_bind_int64(c->put, 2, (int64_t)counts.tokens);
    sqlite3_bind_int64(c->put, 3, (int64_t)counts.orig);
    sqlite3_bind_blob(c->put, 4, c->row, (int)n, SQLITE_STATIC);
    sqlite3_bind_int64(c->put, 5, row_check(key, (int64_t)counts.tokens,
                                            (int64_t)counts.orig, c->row, n));
    if (sqlite3_step(c->put) != SQLITE_DONE)
        turn_off(c, "cannot write to it");
    else
        c->st.stored++;
    sqlite3_reset(c->put);
out:
    pthread_mutex_unlock(&c->mu);
}

void ge_cache_commit(ge_cache *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    if (c->in_txn && !c->off && exec(c, "COMMIT") != SQLITE_OK)
        turn_off(c, "cannot commit to it");
    c->in_txn = false;
    pthread_mutex_unlock(&c->mu);
}

ge_cache_stats ge_cache_get_stats(const ge_cache *c)
{
    return c ? c->st : (ge_cache_stats){0};
}

void ge_cache_close(ge_cache *c)
{
    if (!c)
        return;
    ge_cache_commit(c);
    sqlite3_finalize(c->get);
    sqlite3_finalize(c->put);
    sqlite3_close(c->db);
    pthread_mutex_destroy(&c->mu);
    free(c->path);
    free(c->row);
    free(c);
}
