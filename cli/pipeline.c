/* pipeline.c - the stages of pipeline.h around one ring of records in flight.
 *
 * A record's slot is ring[seq % cap], seq being its position in this run. It moves
 *   EMPTY --reader--> READ --worker--> READY --tower--> DONE --writer--> EMPTY
 * and the counters n_read >= n_claimed (workers) >= n_packed (tower) >= n_written say where
 * each stage is. A stage owns the slots between its counter and the previous stage's, so it
 * works on them without the lock; the lock guards the counters, the states and the waits.
 * Error records (bad JSON, too long, ...) travel the same way and are written in place. */
#include "pipeline.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


enum { SLOT_EMPTY, SLOT_READ, SLOT_READY, SLOT_DONE };

#define DEDUP_BUCKETS 4096

/* Records in flight and their byte budget: the reader waits when either is reached. */
#define RING_RECORDS 4096
#define RING_BYTES ((size_t)256 << 20)
/* A tower window: at most this many records, or WINDOW_WAVES waves' worth of tokens. */
#define WINDOW_RECORDS 1024
#define WINDOW_WAVES 4
/* With fewer records ready than a window, the tower starts anyway once nothing new has been
 * ready for IDLE_NS, or the first of them has waited WAIT_MAX seconds (a slow producer must
 * not wait for a full window). */
#define IDLE_NS 2000000L
#define WAIT_MAX 0.02

/* A record's item: a text, or a media item the decode stage decodes and plans and the tower
 * encodes (the engine's ge_item_decode / ge_item_encode: per kind, modality.c). */
typedef struct {
    ge_item m;         /* kind, soft-token counts, decoded pixels or samples */
    char *data;        /* text, path or inline bytes (freed once decoded) */
    size_t len;
    bool inline_bytes;
    bool by_streams;   /* a container from --input files: its streams make it video or audio */
    char *file;        /* --cache: its file's bytes, read to key the record (then decoded) */
    size_t file_len;
} item;

/* An OpenAI request's inputs are slots of their own, pushed together, one group. */
typedef struct {
    char *custom_id;          /* raw JSON */
    size_t custom_id_len;
    unsigned i, n;            /* input i of n */
    int dim;                  /* "dimensions", 0: the output's */
    bool base64;
    char *model;              /* raw JSON, or NULL */
    size_t model_len;
} request;

/* --chunk / --late-chunk: a passage of a text record, pooled over tokens [lo, hi) of one of
 * the record's sequences (--chunk: a sequence per passage, pooled whole; --late-chunk: a
 * window of the text per sequence, pooled over the spans of the passages it holds). */
typedef struct {
    ge_row_chunk at;          /* chunk of chunks, code points [start, end) of the text */
    size_t seq, lo, hi;
    unsigned char key[GE_CACHE_KEY]; /* --cache: its content key */
    bool keyed, cached;
    float *vec, *full;        /* [dim]; --cache: [model_dim] before --dim, to store */
} passage;

typedef struct {
    int32_t *ids;
    size_t n;
    bool run;                 /* some passage pooled from it is not cached */
} sequence;

typedef struct {
    int state;
    unsigned long long index; /* input records consumed through this one (checkpoints; a
                                 request's inputs but the last: the records before it) */
    unsigned long long rec;   /* its own input record's index (1-based) */
    request *req;             /* the OpenAI request it is an input of, or NULL */
    size_t bytes;             /* charged to the byte budget until written */
    char *id;                 /* raw id bytes */
    size_t id_len;
    char *where;              /* "source:line" */
    const char *err_code;     /* static; NULL for a record to embed */
    char *err_msg;
    char *text, *prefix;      /* until tokenized; prefix NULL = the global one */
    size_t text_len;
    int32_t *tokens;
    size_t n_tokens, orig_tokens;
    bool truncated;
    float *vec;               /* [dim] once embedded */
    float *full;              /* --cache: [model_dim] the vector before --dim, to store */
    unsigned char key[GE_CACHE_KEY]; /* --cache: the content key, when keyed */
    bool keyed, cached;       /* keyed; the vector came from the cache */
    bool owner, dup;          /* the run's first record of its content / a later one */
    item *items;              /* a record with media: its items in order */
    size_t n_items;
    float *rows;              /* [n_rows][hidden]: its media soft tokens, in sequence order */
    size_t n_rows;
    /* --chunk / --late-chunk: a text record's passages and sequences (n_tokens: the tokens of
     * the sequences to run); a record with media is one passage, its text's code points */
    passage *pass;
    size_t n_pass;
    sequence *seqs;
    size_t n_seqs;
    size_t text_cp;
} slot;

typedef struct {
    const ge_pipe_cfg *c;
    const ge_opts *o;
    int model_dim;
    size_t max_tokens, wave_cap;
    ge_item_opts item_opts;   /* how media items are decoded and laid out (from o) */

    pthread_mutex_t mu;
    pthread_cond_t cv_space, cv_read, cv_ready, cv_done;
    slot ring[RING_RECORDS];
    unsigned long long n_read, n_claimed, n_packed, n_written;
    size_t bytes;
    bool eof;                 /* the reader is finished: no record after n_read */
    bool tower_done;          /* the tower thread is finished: no record after n_packed */
    size_t ready_tokens;      /* tokens of the ready records from n_packed on (tower, under mu) */
    atomic_bool abort;        /* a write error or --max-errors: stop everything */
    pthread_t reader;
    ge_exit status;           /* under mu */

    /* writer-owned */
    ge_pipe_result res;
    unsigned long long last_index; /* input records consumed through the last one written */
    double p_t0, p_last;
    size_t p_len;
    unsigned long long p_bytes0;
    ge_pipe_times times;      /* each field written by its stage's thread only */
    /* reader's input position, for the writer's progress line */
    _Atomic unsigned long long pos_done, pos_total;

    slot group[GE_IN_MAX_INPUTS]; /* the reader's slots of one record (a request: several) */

    /* --cache: the contents in flight, by key (dedup.*) */
    pthread_mutex_t dmu;
    struct dedup_entry *dedup[DEDUP_BUCKETS];
} pipe_t;

static slot *at(pipe_t *P, unsigned long long seq) { return &P->ring[seq % RING_RECORDS]; }

static void slot_free(slot *s)
{
    free(s->id), free(s->where), free(s->err_msg), free(s->text), free(s->prefix);
    free(s->tokens), free(s->vec), free(s->full), free(s->rows);
    if (s->req)
        free(s->req->custom_id), free(s->req->model), free(s->req);
    for (size_t i = 0; i < s->n_items; i++) {
        free(s->items[i].data), free(s->items[i].file), ge_item_free(&s->items[i].m);
    }
    free(s->items);
    for (size_t i = 0; i < s->n_pass; i++)
        free(s->pass[i].vec), free(s->pass[i].full);
    for (size_t i = 0; i < s->n_seqs; i++)
        free(s->seqs[i].ids);
    free(s->pass), free(s->seqs);
    memset(s, 0, sizeof *s);
}

/* The width of the record's vector: its request's "dimensions", or the output's. */
static int slot_dim(const pipe_t *P, const slot *s)
{
    return s->req && s->req->dim ? s->req->dim : P->c->dim;
}

static char *dup_mem(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static bool set_error(slot *s, const char *code, const char *msg)
{
    free(s->err_msg);
    s->err_code = code;
    s->err_msg = dup_mem(msg, strlen(msg));
    return s->err_msg != NULL;
}

/* Make s an error record: "source:line: cause". Out of memory for the message itself, it is
 * still one (the writer says "out of memory"). */
static void fail_record(slot *s, const char *code, const char *cause)
{
    char msg[sizeof(ge_err){0}.msg + 700];
    snprintf(msg, sizeof msg, "%s: %s", s->where, cause);
    if (!set_error(s, code, msg)) {
        free(s->err_msg);
        s->err_msg = NULL;
        s->err_code = "out_of_memory";
    }
}

/* Stop every stage early (the records in flight are dropped), waking the reader from a
 * blocked read. */
static void abort_run(pipe_t *P)
{
    atomic_store(&P->abort, true);
    pthread_mutex_lock(&P->mu);
    pthread_cond_broadcast(&P->cv_space);
    pthread_cond_broadcast(&P->cv_read);
    pthread_cond_broadcast(&P->cv_ready);
    pthread_cond_broadcast(&P->cv_done);
    pthread_mutex_unlock(&P->mu);
    if (P->c->wake_signal)
        pthread_kill(P->reader, P->c->wake_signal);
}

static bool stopping(pipe_t *P) { return atomic_load(P->c->stop) || atomic_load(&P->abort); }

static bool stopping_cb(void *P) { return stopping(P); }

static void fail_io(pipe_t *P)
{
    pthread_mutex_lock(&P->mu);
    P->status = GE_EXIT_IO;
    pthread_mutex_unlock(&P->mu);
    abort_run(P);
}

static void deadline_in(struct timespec *ts, long ns)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_nsec += ns;
    ts->tv_sec += ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

/* ---- reader ---------------------------------------------------------------------------- */

/* A slot for what the input gave: copies, since the record's memory is reused. */
static bool fill(slot *s, const ge_rec *r, unsigned long long index)
{
    char where[600];
    memset(s, 0, sizeof *s);
    snprintf(where, sizeof where, "%s:%llu", r->source, r->line);
    s->index = index;
    s->id = dup_mem(r->id, r->id_len);
    s->id_len = r->id_len;
    s->where = dup_mem(where, strlen(where));
    bool ok = s->id && s->where;
    if (r->err_code) {
        ok = ok && set_error(s, r->err_code, r->err_msg);
    } else {
        s->text = dup_mem(r->text ? r->text : "", r->text_len);
        s->text_len = r->text_len;
        ok = ok && s->text;
        if (r->prefix)
            ok = ok && (s->prefix = dup_mem(r->prefix, strlen(r->prefix)));
        if (ok && r->n_items) {
            ok = (s->items = calloc(r->n_items, sizeof *s->items)) != NULL;
            for (size_t i = 0; ok && i < r->n_items; i++) {
                const ge_rec_item *ri = &r->items[i];
                s->items[i] = (item){.m.kind = ri->kind, .len = ri->len,
                                     .inline_bytes = ri->inline_bytes,
                                     .by_streams = ri->by_streams};
                ok = (s->items[i].data = dup_mem(ri->data, ri->len)) != NULL;
                s->n_items = i + 1;
            }
        }
    }
    /* text, then about as many token ids, the vector and the bookkeeping */
    s->bytes = r->id_len + 5 * r->text_len + (size_t)600 + sizeof(float) * 1024;
    for (size_t i = 0; i < r->n_items; i++)
        s->bytes += 5 * r->items[i].len;
    if (!ok)
        slot_free(s);
    return ok;
}

/* Put s[0..k) into the ring together (a request's inputs are never split by a stop),
 * waiting for room. false when the run is aborted. */
static bool push(pipe_t *P, slot *s, size_t k)
{
    size_t bytes = 0;
    for (size_t i = 0; i < k; i++)
        bytes += s[i].bytes;
    pthread_mutex_lock(&P->mu);
    while (!stopping(P) && (P->n_read - P->n_written + k > RING_RECORDS ||
                            (P->bytes + bytes > RING_BYTES && P->n_read > P->n_written))) {
        /* timed: a stop signal handled on this thread does not end a condition wait */
        struct timespec ts;
        deadline_in(&ts, 100000000L);
        pthread_cond_timedwait(&P->cv_space, &P->mu, &ts);
    }
    bool ok = !stopping(P);
    if (ok) {
        for (size_t i = 0; i < k; i++) {
            s[i].state = SLOT_READ;
            *at(P, P->n_read) = s[i];
            P->n_read++;
        }
        P->bytes += bytes;
        pthread_cond_signal(&P->cv_read);
    }
    pthread_mutex_unlock(&P->mu);
    for (size_t i = 0; !ok && i < k; i++)
        slot_free(&s[i]);
    return ok;
}

/* The slots of an OpenAI request, one per input, into g[0..n). A request the output cannot
 * answer as asked (dimensions wider than the model, or other than the rows of a format of
 * fixed width) is one error record instead: *n = 1. false when out of memory. */
static bool fill_request(pipe_t *P, slot *g, size_t *n, const ge_rec *r, unsigned long long index)
{
    const ge_rec_request *q = r->request;
    ge_rec one = *r;
    one.request = NULL;
    char msg[200] = "";
    if (q->dim > P->model_dim)
        snprintf(msg, sizeof msg, "\"dimensions\": %d, and the model's vectors have %d values",
                 q->dim, P->model_dim);
    else if (q->dim && q->dim != P->c->dim && P->c->format != GE_FMT_OPENAI)
        snprintf(msg, sizeof msg, "\"dimensions\": %d, and this output's rows have %d values "
                 "(--format openai-batch answers each request at its own width)", q->dim,
                 P->c->dim);
    if (msg[0]) {
        one.err_code = "bad_request";
        snprintf(one.err_msg, sizeof one.err_msg, "%s:%llu: %s", r->source, r->line, msg);
    }
    *n = msg[0] ? 1 : q->n;
    char *id = malloc(r->id_len + 32);
    bool ok = id != NULL;
    size_t filled = 0;
    for (size_t j = 0; ok && j < *n; j++) {
        if (!msg[0]) {
            one.text = q->texts[j], one.text_len = q->lens[j];
            if (q->list) { /* other formats: a row per input, its id [custom_id, index] */
                one.id = id;
                one.id_len = (size_t)sprintf(id, "[%.*s,%zu]", (int)r->id_len, r->id, j);
            }
        }
        if (!(ok = fill(&g[j], &one, j + 1 < *n ? index - 1 : index))) /* fill frees it */
            break;
        filled++;
        g[j].rec = index;
        request *rq = g[j].req = calloc(1, sizeof *rq);
        if (!(ok = rq != NULL))
            break;
        *rq = (request){.custom_id = dup_mem(r->id, r->id_len), .custom_id_len = r->id_len,
                        .i = (unsigned)j, .n = (unsigned)*n, .dim = q->dim,
                        .base64 = q->base64 < 0 ? P->o->base64 : q->base64 == 1,
                        .model = q->model ? dup_mem(q->model, q->model_len) : NULL,
                        .model_len = q->model_len};
        ok = rq->custom_id && (!q->model || rq->model);
    }
    free(id);
    for (size_t j = 0; !ok && j < filled; j++) /* the slots filled so far */
        slot_free(&g[j]);
    return ok;
}

/* The reader loop on the calling thread. Returns the input records consumed. */
static unsigned long long read_all(pipe_t *P)
{
    const ge_opts *o = P->o;
    ge_in *in = P->c->in;
    ge_err err = {0};
    ge_rec rec;
    unsigned long long index = 0, k, total, done;
    if (P->c->skip) {
        if (ge_in_skip(in, P->c->skip, &k, &err)) {
            ge_say("%s", err.msg);
            fail_io(P);
            return 0;
        }
        index = k;
    }
    ge_in_position(in, &done, &total);
    P->p_bytes0 = done;
    atomic_store(&P->pos_total, total);
    while (!stopping(P)) {
        const double t0 = ge_now();
        int got = 1;
        if (o->shard_n > 1) { /* skip to the next record of this shard */
            unsigned long long want = (o->shard_i + o->shard_n - index % o->shard_n) %
                                      o->shard_n;
            k = 0;
            if (want && ge_in_skip(in, want, &k, &err))
                got = -1;
            index += k;
        }
        if (got > 0)
            got = ge_in_next(in, &rec, &err);
        if (got < 0 && stopping(P))
            break; /* the read was interrupted by the signal */
        if (got < 0) {
            ge_say("%s", err.msg); /* write what was read, then stop */
            pthread_mutex_lock(&P->mu);
            P->status = GE_EXIT_IO;
            pthread_mutex_unlock(&P->mu);
            break;
        }
        if (got == 0)
            break;
        index++;
        P->times.read += ge_now() - t0;
        ge_in_position(in, &done, &total);
        atomic_store(&P->pos_done, done);
        size_t n_slots = 1;
        bool ok;
        if (rec.request && rec.request->n && !rec.err_code) {
            ok = fill_request(P, P->group, &n_slots, &rec, index);
        } else {
            ok = fill(P->group, &rec, index);
            P->group->rec = index;
            if (ok && rec.request && !(P->group->req = calloc(1, sizeof(request))))
                slot_free(P->group), ok = false;
            if (ok && rec.request) /* a request that failed: its line answers alone */
                *P->group->req = (request){.i = 0, .n = 1};
        }
        if (!ok) {
            ge_say("out of memory");
            fail_io(P);
            break;
        }
        if (!push(P, P->group, n_slots))
            break;
    }
    return index;
}

/* ---- decode / tokenize workers ------------------------------------------------------------ */

/* Tokenize one text record (or turn it into an error record). */
static void tokenize(pipe_t *P, slot *s, ge_tokens *toks)
{
    const ge_opts *o = P->o;
    ge_err e = {0};
    char msg[sizeof e.msg + 700];
    const char *prefix = s->prefix ? s->prefix : P->c->prefix;
    if (prefix && !*prefix)
        prefix = NULL;
    toks->n = 0;
    const double t0 = ge_now();
    ge_status st = ge_tokenize(P->c->model, prefix, s->text, s->text_len, toks, &e);
    P->times.tokenize += ge_now() - t0;
    free(s->text), free(s->prefix);
    s->text = s->prefix = NULL;
    bool ok = true;
    if (st) {
        fail_record(s, ge_status_name(st), e.msg);
    } else {
        size_t n = toks->n;
        /* --tokenize shows the whole sequence unless --truncate asks for what would be
         * embedded */
        if (n > P->max_tokens && (o->truncate || !o->tokenize)) {
            if (o->truncate) {
                ge_tokens_truncate(P->c->model, toks, P->max_tokens);
                s->truncated = true;
            } else {
                snprintf(msg, sizeof msg, "too long: %zu tokens, the limit is %zu (see "
                         "--truncate)", n, P->max_tokens);
                fail_record(s, "too_long", msg);
            }
        }
        s->orig_tokens = n;
        if (!s->err_code) {
            s->n_tokens = toks->n;
            s->tokens = malloc(toks->n * sizeof *s->tokens);
            if (s->tokens)
                memcpy(s->tokens, toks->ids, toks->n * sizeof *s->tokens);
            ok = s->tokens != NULL;
        }
    }
    if (!ok)
        fail_record(s, "out_of_memory", "out of memory");
}

/* The whole file at path, at most max bytes (GE_E_LIMIT past that, found from its size
 * before reading). Only a regular file is opened, and never in a way that blocks (a FIFO, a
 * device or a directory is GE_E_IO saying what it is). Messages do not repeat the path: the
 * caller names the item and its file. */
static ge_status read_file(const char *path, size_t max, char **buf, size_t *len, ge_err *err)
{
    *buf = NULL, *len = 0;
    int fd = ge_open_regular(path, err);
    if (fd < 0) {
        size_t pl = strlen(path); /* "path: a FIFO (...)" -> "a FIFO (...)" */
        if (err && !strncmp(err->msg, path, pl) && !strncmp(err->msg + pl, ": ", 2))
            memmove(err->msg, err->msg + pl + 2, strlen(err->msg + pl + 2) + 1);
        return GE_E_IO;
    }
    struct stat sb;
    ge_status st = GE_OK;
    size_t cap = 0;
    if (fstat(fd, &sb) != 0)
        st = ge_fail(err, GE_E_IO, "cannot stat: %s", strerror(errno));
    else if ((unsigned long long)sb.st_size > max)
        st = ge_fail(err, GE_E_LIMIT, "larger than %zu MB (%lld bytes)", max >> 20,
                     (long long)sb.st_size);
    else if (!(*buf = malloc(cap = (size_t)sb.st_size + 1))) /* one more: the end is seen
                                                             * without growing */
        st = ge_fail(err, GE_E_NOMEM, "out of memory");
    while (!st) {
        if (*len == cap) { /* the file grew since fstat */
            size_t c = cap < max / 2 ? cap * 2 : max + 1;
            char *b = *len <= max ? realloc(*buf, c) : NULL;
            if (!b) {
                st = *len <= max ? ge_fail(err, GE_E_NOMEM, "out of memory")
                                 : ge_fail(err, GE_E_LIMIT, "larger than %zu MB", max >> 20);
                break;
            }
            *buf = b, cap = c;
        }
        ssize_t got = read(fd, *buf + *len, cap - *len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            st = ge_fail(err, GE_E_IO, "read error: %s", strerror(errno));
        if (got <= 0)
            break;
        *len += (size_t)got;
    }
    close(fd);
    if (st)
        free(*buf), *buf = NULL, *len = 0;
    return st;
}

/* The most bytes of one media file read into memory (JSONL items and --input files): the
 * decoders take whole files. A larger file is a "limit" error record, seen from its size. */
#define MEDIA_FILE_MAX ((size_t)256 << 20)

/* A record's media blocks so far, against the context: a record whose planned counts
 * already exceed it is too_long before its next item costs memory or time. */
typedef struct {
    size_t used;  /* tokens so far: <bos>, <eos> and the media blocks decoded */
    bool over;    /* the error is a too_long one */
} budget;

static const char *kind_name(ge_kind k) { return ge_modality_of(k)->name; }

/* The too_long error of a record with media: its tokens (at_least: the count stopped early)
 * and the blocks of its media items [0, upto). */
static ge_status media_too_long(const pipe_t *P, const slot *s, size_t upto, size_t tokens,
                                bool at_least, ge_err *e)
{
    char what[256] = "";
    size_t at = 0;
    for (size_t i = 0; i < upto && at < sizeof what - 64; i++) {
        const ge_item *it = &s->items[i].m;
        if (it->kind == GE_KIND_VIDEO)
            at += (size_t)snprintf(what + at, sizeof what - at, "%s%s item %zu: %d frames x %d",
                                   at ? ", " : "; ", kind_name(it->kind), i + 1, it->n_frames,
                                   it->n_soft + 2);
        else if (it->kind != GE_KIND_TEXT)
            at += (size_t)snprintf(what + at, sizeof what - at, "%s%s item %zu: %d", at ? ", " :
                                   "; ", kind_name(it->kind), i + 1, it->n_soft + 2);
    }
    return ge_fail(e, GE_E_LIMIT, "too long: %s%zu tokens with the media%s; the limit is %zu "
                   "(--truncate does not cut records with media)", at_least ? "at least " : "",
                   tokens, what, P->max_tokens);
}

typedef struct {
    const pipe_t *P;
    const slot *s;
    size_t i;
    budget *b;
} spend_ctx;

/* ge_item_budget.spend: media item i of `tokens` tokens joins the record; too_long when the
 * blocks so far are over the context (--tokenize shows every count), or when it is over
 * whatever its size. */
static ge_status spend(void *ctx, size_t tokens, bool over, ge_err *e)
{
    spend_ctx *c = ctx;
    if (!over && (c->P->o->tokenize || c->b->used + tokens <= c->P->max_tokens))
        return GE_OK;
    c->b->over = true;
    return media_too_long(c->P, c->s, c->i + 1, c->b->used + tokens, true, e);
}

/* Decode one image, audio or video item from its file or inline bytes. */
static ge_status decode_media(pipe_t *P, slot *s, size_t i, budget *b, ge_err *err)
{
    item *it = &s->items[i];
    char *file = NULL;
    size_t len = it->len;
    ge_status st = GE_OK;
    const double t0 = ge_now();
    if (it->file) { /* read already, for the cache key */
        file = it->file, len = it->file_len;
        it->file = NULL;
    } else if (!it->inline_bytes &&
               (st = read_file(it->data, MEDIA_FILE_MAX, &file, &len, err))) {
        return st;
    }
    spend_ctx ctx = {P, s, i, b};
    const ge_item_budget ib = {
        P->o->tokenize ? SIZE_MAX : b->used < P->max_tokens ? P->max_tokens - b->used : 0,
        spend, &ctx};
    st = ge_item_decode(P->c->model, &it->m, file ? file : it->data, len, it->by_streams,
                        &P->item_opts, &ib, err);
    free(file);
    free(it->data);
    it->data = NULL;
    P->times.decode[it->m.kind] += ge_now() - t0;
    P->times.decoded[it->m.kind]++;
    return st;
}

/* A record with media: decode its images, clips and videos, then tokenize texts and media
 * blocks together. */
static void decode_record(pipe_t *P, slot *s, ge_tokens *toks)
{
    ge_err e = {0};
    ge_status st = GE_OK;
    budget b = {.used = 2}; /* <bos> and <eos>, in every sequence */
    for (size_t i = 0; !st && i < s->n_items; i++) {
        item *it = &s->items[i];
        if (it->m.kind == GE_KIND_TEXT)
            continue;
        char name[300] = "inline data";
        if (!it->inline_bytes)
            snprintf(name, sizeof name, "%s", it->data);
        st = P->o->n_mmproj ? decode_media(P, s, i, &b, &e)
                            : ge_fail(&e, GE_E_UNSUPPORTED, "%s: give --mmproj",
                                    ge_modality_of(it->m.kind)->tower);
        if (st && !b.over) /* too_long names every item */
            ge_err_prefix(&e, "%s item %zu (%s)", kind_name(it->m.kind), i + 1, name);
        b.used += ge_item_rows(&it->m) + 2 * (size_t)it->m.n_frames;
    }
    /* the parts: a video gives one per frame (two with timestamps) */
    size_t n_parts = 0;
    for (size_t i = 0; !st && i < s->n_items; i++) {
        const ge_item *it = &s->items[i].m;
        n_parts += it->kind == GE_KIND_TEXT ? 1 : ge_item_parts(it, &P->item_opts, NULL, NULL);
    }
    ge_part *parts = st ? NULL : calloc(n_parts ? n_parts : 1, sizeof *parts);
    char *ts = st ? NULL : malloc(n_parts * 9 + 1); /* room for a timestamp per part */
    if (!st && (!parts || !ts))
        st = ge_fail(&e, GE_E_NOMEM, "out of memory");
    size_t np = 0;
    for (size_t i = 0; !st && i < s->n_items; i++) {
        const item *it = &s->items[i];
        if (it->m.kind == GE_KIND_TEXT) {
            parts[np++] = (ge_part){GE_KIND_TEXT, it->data, it->len, 0};
        } else {
            np += ge_item_parts(&it->m, &P->item_opts, parts + np, ts + 9 * np);
        }
    }
    const char *prefix = s->prefix ? s->prefix : P->c->prefix;
    toks->n = 0;
    const double t0 = ge_now();
    if (!st)
        st = ge_tokenize_parts(P->c->model, prefix && *prefix ? prefix : NULL, parts, np, toks,
                               &e);
    P->times.tokenize += ge_now() - t0;
    free(parts), free(ts);
    const char *code = b.over ? "too_long" : NULL;
    if (!st && toks->n > P->max_tokens && !P->o->tokenize) {
        /* the plan's counts, before any tower runs */
        st = media_too_long(P, s, s->n_items, toks->n, false, &e);
        code = "too_long";
    } else if (!st && P->o->chunk && toks->n > P->o->chunk && !P->o->tokenize) {
        st = ge_fail(&e, GE_E_INPUT, "a record with media is not split into passages: %zu "
                     "tokens (%zu of them media), over the passage size %u", toks->n,
                     b.used - 2, P->o->chunk);
        code = "too_long";
    }
    if (!st) {
        s->n_tokens = s->orig_tokens = toks->n;
        if ((s->tokens = malloc(toks->n * sizeof *s->tokens)))
            memcpy(s->tokens, toks->ids, toks->n * sizeof *s->tokens);
        else
            st = ge_fail(&e, GE_E_NOMEM, "out of memory");
    }
    if (st)
        fail_record(s, code ? code : ge_status_name(st), e.msg);
    for (size_t i = 0; i < s->n_items; i++) { /* texts and timestamps are in the tokens now */
        if (s->items[i].m.kind == GE_KIND_TEXT)
            free(s->items[i].data), s->items[i].data = NULL;
        free(s->items[i].m.seconds), s->items[i].m.seconds = NULL;
    }
}

/* ---- the content cache and duplicates (--cache) ------------------------------------------ */

/* A record's vector at the output's width from a model-width one (the same steps as
 * embed_wave's, so the same bits). NULL when out of memory. */
static float *cut(const pipe_t *P, const slot *s, const float *full)
{
    const int dim = slot_dim(P, s);
    float *t = malloc((size_t)P->model_dim * sizeof *t);
    float *v = t ? malloc((size_t)dim * sizeof *v) : NULL;
    if (v) {
        memcpy(t, full, (size_t)P->model_dim * sizeof *t);
        if (dim < P->model_dim)
            ge_matryoshka(t, dim);
        memcpy(v, t, (size_t)dim * sizeof *v);
    }
    free(t);
    return v;
}

/* The record's content key (cache.h): its prompt prefix, then its text, or each item in order
 * (a media file by its bytes, read here and kept for the decoder). false when a media file
 * cannot be read: the decoder then reports it, and the record is not cached. */
static bool cache_key(pipe_t *P, slot *s)
{
    ge_cache_keyer k;
    ge_cache_key_begin(P->c->cache, &k);
    const char *prefix = s->prefix ? s->prefix : P->c->prefix;
    prefix = prefix && *prefix ? prefix : "";
    ge_cache_key_part(&k, 'P', prefix, strlen(prefix));
    if (!s->n_items)
        ge_cache_key_part(&k, 'T', s->text, s->text_len);
    for (size_t i = 0; i < s->n_items; i++) {
        item *it = &s->items[i];
        if (it->m.kind == GE_KIND_TEXT) {
            ge_cache_key_part(&k, 'T', it->data, it->len);
            continue;
        }
        ge_err e;
        if (!it->inline_bytes && !it->file &&
            read_file(it->data, MEDIA_FILE_MAX, &it->file, &it->file_len, &e))
            return false;
        ge_cache_key_part(&k, 0x100 + 2 * (unsigned)it->m.kind + it->by_streams,
                          it->file ? it->file : it->data, it->file ? it->file_len : it->len);
    }
    ge_cache_key_end(&k, s->key);
    return s->keyed = true;
}

/* Look the record up: on a hit it gets its vector and counts and needs no decoding,
 * tokenizing or model. */
static bool cache_hit(pipe_t *P, slot *s)
{
    if (!cache_key(P, s))
        return false;
    float *full = malloc((size_t)P->model_dim * sizeof *full);
    ge_cache_counts n;
    if (!full || !ge_cache_get(P->c->cache, s->key, full, &n) || !(s->vec = cut(P, s, full))) {
        free(full);
        return false;
    }
    free(full);
    s->n_tokens = n.tokens;
    s->orig_tokens = n.orig;
    s->truncated = n.orig != n.tokens;
    s->cached = true;
    free(s->text), free(s->prefix);
    s->text = s->prefix = NULL;
    for (size_t i = 0; i < s->n_items; i++) {
        free(s->items[i].data), free(s->items[i].file);
        s->items[i].data = s->items[i].file = NULL;
    }
    return true;
}

/* The run's records of one content, while any is in flight: the first one (the owner) is
 * embedded, the later ones (dups) take its result when the writer reaches them (it writes
 * in order, so the owner is written first). */
typedef struct dedup_entry {
    struct dedup_entry *next;
    unsigned char key[GE_CACHE_KEY];
    unsigned pending;        /* dups not yet written */
    bool written;            /* the owner is written: full or the error holds its result */
    float *full;
    const char *err_code;
    char *err_msg;
} dedup_entry;

static dedup_entry **dedup_link(pipe_t *P, const unsigned char *key)
{
    dedup_entry **e = &P->dedup[(key[0] | key[1] << 8) % DEDUP_BUCKETS];
    while (*e && memcmp((*e)->key, key, GE_CACHE_KEY) != 0)
        e = &(*e)->next;
    return e;
}

static void dedup_drop(dedup_entry **link)
{
    dedup_entry *e = *link;
    *link = e->next;
    free(e->full), free(e->err_msg), free(e);
}

/* A keyed record that needs the model: the owner of its content, or a dup of one in flight. */
static void dedup_claim(pipe_t *P, slot *s)
{
    pthread_mutex_lock(&P->dmu);
    dedup_entry **l = dedup_link(P, s->key);
    if (*l) {
        (*l)->pending++;
        s->dup = true;
        free(s->tokens), s->tokens = NULL; /* the counts stay: they are the owner's too */
    } else if ((*l = calloc(1, sizeof **l))) {
        memcpy((*l)->key, s->key, GE_CACHE_KEY);
        s->owner = true;
    }
    pthread_mutex_unlock(&P->dmu);
}

/* The owner is written: its result stays for the dups still to come (the vector moves). */
static void dedup_owner_written(pipe_t *P, slot *s)
{
    pthread_mutex_lock(&P->dmu);
    dedup_entry **l = dedup_link(P, s->key), *e = *l;
    if (e && !e->pending) {
        dedup_drop(l);
    } else if (e) {
        e->written = true;
        e->full = s->full, s->full = NULL;
        if (s->err_code) {
            e->err_code = s->err_code;
            e->err_msg = s->err_msg ? dup_mem(s->err_msg, strlen(s->err_msg)) : NULL;
        }
    }
    pthread_mutex_unlock(&P->dmu);
}

/* A dup about to be written: the owner's vector, or its error. */
static void dedup_take(pipe_t *P, slot *s)
{
    pthread_mutex_lock(&P->dmu);
    dedup_entry **l = dedup_link(P, s->key), *e = *l;
    char msg[sizeof(ge_err){0}.msg + 800];
    if (e && e->full) {
        if (!(s->vec = cut(P, s, e->full)))
            fail_record(s, "out_of_memory", "out of memory");
    } else {
        snprintf(msg, sizeof msg, "the same content as %s", e && e->err_msg ? e->err_msg :
                 "an earlier record, which failed");
        fail_record(s, e && e->err_code ? e->err_code : "internal", msg);
    }
    if (e && --e->pending == 0 && e->written)
        dedup_drop(l);
    pthread_mutex_unlock(&P->dmu);
}

/* ---- passages (--chunk, --late-chunk; docs/model.md 2.6) ------------------------------------ */

/* The code points of a record's text (a record with media: of its text items). */
static size_t record_code_points(const slot *s)
{
    size_t k = s->n_items ? 0 : ge_utf8_chars(s->text, s->text_len);
    for (size_t i = 0; i < s->n_items; i++)
        if (s->items[i].m.kind == GE_KIND_TEXT)
            k += ge_utf8_chars(s->items[i].data, s->items[i].len);
    return k;
}

/* --cache: a passage's content key, and its vector when the cache has it. --chunk: the key
 * of a record of just the passage's text (the same sequence, so the same vector);
 * --late-chunk: the whole text and where the passage lies in which window of it. */
static void passage_lookup(pipe_t *P, slot *s, passage *p, const char *prefix,
                           const ge_passage *at, const ge_window *w)
{
    ge_cache_keyer k;
    ge_cache_key_begin(P->c->cache, &k);
    ge_cache_key_part(&k, 'P', prefix ? prefix : "", prefix ? strlen(prefix) : 0);
    if (!w) {
        ge_cache_key_part(&k, 'T', s->text + at->lo, at->hi - at->lo);
    } else {
        char where[100];
        int n = snprintf(where, sizeof where, "%zu %zu %zu %zu", w->lo, w->hi, p->lo, p->hi);
        ge_cache_key_part(&k, 'T', s->text, s->text_len);
        ge_cache_key_part(&k, 'L', where, (size_t)n);
    }
    ge_cache_key_end(&k, p->key);
    p->keyed = true;
    float *full = malloc((size_t)P->model_dim * sizeof *full);
    ge_cache_counts c;
    if (full && ge_cache_get(P->c->cache, p->key, full, &c) && (p->vec = cut(P, s, full)))
        p->cached = true;
    free(full);
}

/* --chunk: each passage's own sequence, prefix + its text tokenized as a record of its own.
 * false (nothing kept) when one is longer than n_max: the plan must leave more room. */
static ge_status passage_sequences(pipe_t *P, slot *s, const char *prefix, const ge_passage *pl,
                                   size_t np, size_t n_max, bool *fits, ge_err *e)
{
    ge_tokens t = {0};
    ge_status st = GE_OK;
    *fits = true;
    for (size_t i = 0; !st && *fits && i < np; i++) {
        t.n = 0;
        st = ge_tokenize(P->c->model, prefix, s->text + pl[i].lo, pl[i].hi - pl[i].lo, &t, e);
        *fits = t.n <= n_max;
        if (!st && *fits && !(s->seqs[i].ids = malloc(t.n * sizeof *t.ids)))
            st = ge_fail(e, GE_E_NOMEM, "out of memory");
        if (!st && *fits) {
            memcpy(s->seqs[i].ids, t.ids, t.n * sizeof *t.ids);
            s->seqs[i].n = t.n;
            s->pass[i].seq = i, s->pass[i].lo = 0, s->pass[i].hi = t.n;
        }
    }
    ge_tokens_free(&t);
    return st;
}

/* --late-chunk: the windows of the text's tokens ids[head, tail) (framed as the record is:
 * ids[0, head) before, ids[tail, n) after) and each passage's span in its window. */
static ge_status window_sequences(pipe_t *P, slot *s, const ge_tokens *toks, size_t head,
                                  size_t tail, const ge_passage *pl, size_t np, ge_window **win,
                                  ge_err *e)
{
    const size_t n = toks->n, frame = n - (tail - head);
    size_t nw, *win_of = malloc(np * sizeof *win_of);
    if (!win_of || ge_chunk_windows(tail - head, P->max_tokens - frame, pl, np, win, &nw,
                                    win_of))
        return free(win_of), ge_fail(e, GE_E_NOMEM, "out of memory");
    sequence *q = calloc(nw, sizeof *q);
    ge_status st = q ? GE_OK : ge_fail(e, GE_E_NOMEM, "out of memory");
    for (size_t j = 0; !st && j < nw; j++) {
        const ge_window *w = &(*win)[j];
        q[j].n = frame + w->hi - w->lo;
        if (!(q[j].ids = malloc(q[j].n * sizeof *q[j].ids))) {
            st = ge_fail(e, GE_E_NOMEM, "out of memory");
            break;
        }
        memcpy(q[j].ids, toks->ids, head * sizeof *q[j].ids);
        memcpy(q[j].ids + head, toks->ids + head + w->lo, (w->hi - w->lo) * sizeof *q[j].ids);
        memcpy(q[j].ids + head + w->hi - w->lo, toks->ids + tail, (n - tail) * sizeof *q->ids);
    }
    s->seqs = q, s->n_seqs = q ? nw : 0;
    for (size_t i = 0; !st && i < np; i++) {
        const ge_window *w = &(*win)[win_of[i]];
        passage *p = &s->pass[i];
        p->seq = win_of[i];
        p->lo = head + pl[i].tok_lo - w->lo, p->hi = head + pl[i].tok_hi - w->lo;
        if (p->lo == p->hi) /* an empty text: its one passage pools the whole sequence */
            p->lo = 0, p->hi = q[p->seq].n;
    }
    free(win_of);
    return st;
}

/* A text record under --chunk / --late-chunk: its passages, the sequences to run for them
 * and, with --cache, the vectors it has already (or an error record). Returns the bytes it
 * added to the slot. */
static size_t chunk_record(pipe_t *P, slot *s, ge_tokens *toks)
{
    const ge_opts *o = P->o;
    ge_err e = {0};
    const char *prefix = s->prefix ? s->prefix : P->c->prefix;
    prefix = prefix && *prefix ? prefix : NULL;
    const size_t plen = prefix ? strlen(prefix) : 0, N = o->chunk;
    size_t *ends = NULL, bos, eos, np = 0;
    bool *mid = NULL;
    ge_passage *pl = NULL;
    ge_window *win = NULL;
    const double t0 = ge_now();
    ge_status st = ge_tokenize_spans(P->c->model, prefix, s->text, s->text_len, toks, &ends,
                                     &mid, &e);
    const size_t n = toks->n;
    ge_tokens_frame(P->c->model, &bos, &eos);
    /* the text's own tokens [head, tail): those that end past the prefix, before <eos> */
    size_t head = bos, tail = n - eos;
    while (!st && head < tail && ends[head] <= plen)
        head++;
    const size_t frame = n - (tail - head);
    const char *code = NULL;
    if (!st && n > N && frame >= N) {
        code = "too_long";
        st = ge_fail(&e, GE_E_INPUT, "the prompt and <bos>/<eos> take %zu tokens: passages of "
                     "%zu leave no room for the text (%zu tokens)", frame, N, tail - head);
    }
    for (size_t i = head; !st && i < tail; i++)
        ends[i] -= plen;
    /* --chunk tokenizes each passage again as a record of its own, which can come out a
     * token or two longer at its ends: plan again with less room until every one fits */
    for (size_t room = N - frame; !st;) {
        free(pl), pl = NULL;
        if (n <= N) {
            if ((pl = malloc(sizeof *pl)))
                pl[0] = (ge_passage){0, tail - head, 0, s->text_len}, np = 1;
        } else {
            const size_t overlap = o->chunk_overlap < room ? o->chunk_overlap : room - 1;
            st = ge_chunk_plan(s->text, s->text_len, ends + head, mid + head, tail - head,
                               room, overlap, &pl, &np);
        }
        s->pass = pl ? calloc(np, sizeof *s->pass) : NULL;
        if (!st && !s->pass)
            st = ge_fail(&e, GE_E_NOMEM, "out of memory");
        if (st || o->late_chunk)
            break;
        if (n <= N) { /* one passage: the record itself */
            if (!(s->seqs = calloc(1, sizeof *s->seqs)) ||
                !(s->seqs[0].ids = malloc(n * sizeof *toks->ids))) {
                st = ge_fail(&e, GE_E_NOMEM, "out of memory");
                break;
            }
            memcpy(s->seqs[0].ids, toks->ids, n * sizeof *toks->ids);
            s->seqs[0].n = n, s->n_seqs = 1;
            s->pass[0] = (passage){.seq = 0, .lo = 0, .hi = n};
            break;
        }
        bool fits = true;
        if (!(s->seqs = calloc(np, sizeof *s->seqs)))
            st = ge_fail(&e, GE_E_NOMEM, "out of memory");
        else
            s->n_seqs = np, st = passage_sequences(P, s, prefix, pl, np, N, &fits, &e);
        if (st || fits)
            break;
        for (size_t i = 0; i < s->n_seqs; i++)
            free(s->seqs[i].ids);
        free(s->seqs), free(s->pass);
        s->seqs = NULL, s->pass = NULL, s->n_seqs = 0;
        if (--room == 0) {
            code = "too_long";
            st = ge_fail(&e, GE_E_INPUT, "no passage of %zu tokens fits the text with its "
                         "prompt", N);
        }
    }
    if (!st && o->late_chunk)
        st = window_sequences(P, s, toks, head, tail, pl, np, &win, &e);
    P->times.tokenize += ge_now() - t0;
    size_t bytes = 0;
    if (!st) {
        s->n_pass = np;
        size_t lo = 0, lo_cp = 0, hi = 0, hi_cp = 0; /* code points counted so far */
        for (size_t i = 0; i < np; i++) {
            passage *p = &s->pass[i];
            lo_cp += ge_utf8_chars(s->text + lo, pl[i].lo - lo), lo = pl[i].lo;
            hi_cp += ge_utf8_chars(s->text + hi, pl[i].hi - hi), hi = pl[i].hi;
            p->at = (ge_row_chunk){i, np, lo_cp, hi_cp};
            if (P->c->cache)
                passage_lookup(P, s, p, prefix, &pl[i], o->late_chunk ? &win[p->seq] : NULL);
            s->seqs[p->seq].run |= !p->cached;
            bytes += 2 * (size_t)P->model_dim * sizeof(float);
        }
        s->cached = true;
        for (size_t j = 0; j < s->n_seqs; j++) {
            s->n_tokens += s->seqs[j].run ? s->seqs[j].n : 0;
            s->cached &= !s->seqs[j].run;
            bytes += s->seqs[j].n * sizeof(int32_t);
        }
        s->orig_tokens = n;
    } else {
        fail_record(s, code ? code : ge_status_name(st), e.msg);
    }
    free(ends), free(mid), free(pl), free(win);
    free(s->text), free(s->prefix);
    s->text = s->prefix = NULL;
    return bytes;
}

/* Does the record go through the towers and the encoder? */
static bool needs_model(const slot *s) { return !s->err_code && !s->cached && !s->dup; }

static void *worker_main(void *v)
{
    pipe_t *P = v;
    ge_tokens toks = {0};
    enum { CLAIM = 8 }; /* records per lock round trip */
    for (;;) {
        pthread_mutex_lock(&P->mu);
        while (!stopping(P) && P->n_claimed == P->n_read && !P->eof)
            pthread_cond_wait(&P->cv_read, &P->mu);
        if (stopping(P) || P->n_claimed == P->n_read) {
            pthread_mutex_unlock(&P->mu);
            break;
        }
        unsigned long long first = P->n_claimed, n = P->n_read - first;
        if (n > CLAIM)
            n = CLAIM;
        P->n_claimed += n;
        pthread_mutex_unlock(&P->mu);
        size_t grown = 0; /* decoded images and clips: charged to the byte budget */
        for (unsigned long long q = first; q < first + n; q++) {
            slot *s = at(P, q);
            const bool passages = P->o->chunk && !s->n_items && !s->err_code;
            if (P->o->chunk && !s->err_code)
                s->text_cp = record_code_points(s);
            if (s->err_code || (P->c->cache && !passages && cache_hit(P, s)))
                continue;
            if (passages) {
                size_t b = chunk_record(P, s, &toks);
                s->bytes += b, grown += b;
            } else if (!s->n_items) {
                tokenize(P, s, &toks);
            } else {
                decode_record(P, s, &toks);
                for (size_t i = 0; i < s->n_items; i++) {
                    size_t b = ge_item_bytes(&s->items[i].m);
                    s->bytes += b, grown += b;
                }
            }
            if (s->keyed && !s->err_code)
                dedup_claim(P, s);
        }
        pthread_mutex_lock(&P->mu);
        P->bytes += grown;
        for (unsigned long long q = first; q < first + n; q++)
            at(P, q)->state = SLOT_READY;
        pthread_cond_signal(&P->cv_ready);
        pthread_mutex_unlock(&P->mu);
    }
    ge_tokens_free(&toks);
    return NULL;
}

/* ---- tower ------------------------------------------------------------------------------ */

/* One sequence for the encoder: a record's tokens (sub == WHOLE), or sequence sub of a
 * record's passages. */
#define WHOLE SIZE_MAX
typedef struct {
    size_t len;
    unsigned long long seq;
    size_t sub;
} job;

static int longest_first(const void *a, const void *b)
{
    const job *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->sub < y->sub ? -1 : x->sub > y->sub;
}

/* The jobs of record seq into out (NULL: only count them): its sequences still to run. */
static size_t record_jobs(pipe_t *P, unsigned long long seq, job *out)
{
    const slot *s = at(P, seq);
    if (!s->seqs) {
        if (out)
            out[0] = (job){s->n_tokens, seq, WHOLE};
        return 1;
    }
    size_t k = 0;
    for (size_t j = 0; j < s->n_seqs; j++)
        if (s->seqs[j].run) {
            if (out)
                out[k] = (job){s->seqs[j].n, seq, j};
            k++;
        }
    return k;
}

/* The spans job j pools, as sequence i of a batch, into out (NULL: only count them). */
static size_t job_spans(pipe_t *P, const job *j, size_t i, ge_span *out)
{
    const slot *s = at(P, j->seq);
    if (j->sub == WHOLE) {
        if (out)
            out[0] = (ge_span){i, 0, s->n_tokens};
        return 1;
    }
    size_t k = 0;
    for (size_t p = 0; p < s->n_pass; p++)
        if (s->pass[p].seq == j->sub) {
            if (out)
                out[k] = (ge_span){i, s->pass[p].lo, s->pass[p].hi};
            k++;
        }
    return k;
}

/* Keep a model-width vector v (finite) as the row at the record's width, and the full one
 * when the cache wants it. */
static ge_status keep_vector(pipe_t *P, const slot *s, float *v, bool keyed, float **vec,
                             float **full, ge_err *e)
{
    for (int k = 0; k < P->model_dim; k++)
        if (!isfinite(v[k]))
            return ge_fail(e, GE_E_INTERNAL, "the embedding has non-finite values");
    const int dim = slot_dim(P, s);
    if (!(*vec = malloc((size_t)dim * sizeof **vec)))
        return ge_fail(e, GE_E_NOMEM, "out of memory");
    if (keyed && (*full = malloc((size_t)P->model_dim * sizeof **full)))
        memcpy(*full, v, (size_t)P->model_dim * sizeof **full);
    if (dim < P->model_dim)
        ge_matryoshka(v, dim);
    memcpy(*vec, v, (size_t)dim * sizeof **vec);
    return GE_OK;
}

/* Embed the sequences of one wave (already checked to fit); a failed wave is redone job by
 * job so that the error lands on the record that caused it. */
static void embed_wave(pipe_t *P, const job *w, size_t n, const int32_t **ids, size_t *lens,
                       ge_media_rows *media)
{
    ge_err e = {0};
    const size_t md = (size_t)P->model_dim;
    size_t n_spans = 0, most = 0;
    for (size_t i = 0; i < n; i++) {
        const slot *s = at(P, w[i].seq);
        const bool whole = w[i].sub == WHOLE;
        ids[i] = whole ? s->tokens : s->seqs[w[i].sub].ids;
        lens[i] = whole ? s->n_tokens : s->seqs[w[i].sub].n;
        media[i] = whole ? (ge_media_rows){s->rows, s->n_rows} : (ge_media_rows){NULL, 0};
        const size_t k = job_spans(P, &w[i], i, NULL);
        n_spans += k, most = k > most ? k : most;
    }
    ge_span *spans = malloc((n_spans + most) * sizeof *spans);
    float *vecs = malloc(n_spans * md * sizeof *vecs);
    ge_status est = spans && vecs ? GE_OK : ge_fail(&e, GE_E_NOMEM, "out of memory");
    for (size_t i = 0, j = 0; !est && i < n; i++)
        j += job_spans(P, &w[i], i, spans + j);
    if (!est)
        est = ge_embed_spans(P->c->model, ids, lens, media, n, spans, n_spans, vecs, &e);
    for (size_t i = 0, j = 0; i < n; i++) {
        slot *s = at(P, w[i].seq);
        float *v = vecs ? vecs + j * md : NULL;
        const size_t k = spans ? job_spans(P, &w[i], 0, spans + n_spans) : 0;
        ge_status st = !spans || !vecs ? est
                       : est ? ge_embed_spans(P->c->model, &ids[i], &lens[i], &media[i], 1,
                                              spans + n_spans, k, v, &e)
                             : GE_OK;
        j += k;
        if (!st && w[i].sub == WHOLE) {
            st = keep_vector(P, s, v, s->keyed, &s->vec, &s->full, &e);
        } else {
            for (size_t p = 0, q = 0; !st && p < s->n_pass; p++) {
                passage *ps = &s->pass[p];
                if (ps->seq != w[i].sub)
                    continue;
                if (!ps->cached)
                    st = keep_vector(P, s, v + q * md, ps->keyed, &ps->vec, &ps->full, &e);
                q++;
            }
        }
        if (st)
            fail_record(s, ge_status_name(st), e.msg);
    }
    free(spans), free(vecs);
}

/* The soft tokens of a record's images, clips and video frames, in sequence order, into
 * s->rows (an error makes it an error record). */
static void encode_media(pipe_t *P, slot *s)
{
    ge_err e = {0};
    const int H = ge_model_hidden(P->c->model);
    size_t total = 0;
    for (size_t i = 0; i < s->n_items; i++)
        total += s->items[i].m.rgb || s->items[i].m.pcm ? ge_item_rows(&s->items[i].m) : 0;
    ge_status st = (s->rows = malloc(total * H * sizeof *s->rows)) || !total
                       ? GE_OK : ge_fail(&e, GE_E_NOMEM, "out of memory");
    for (size_t i = 0, at_row = 0; !st && i < s->n_items; i++) {
        ge_item *it = &s->items[i].m;
        if (!it->rgb && !it->pcm)
            continue;
        int frame;
        st = ge_item_encode(P->c->model, it, s->rows + at_row * H, &frame, &e);
        if (st && it->kind == GE_KIND_VIDEO)
            ge_err_prefix(&e, "video item %zu (frame %d of %d)", i + 1, frame, it->n_frames);
        else if (st)
            ge_err_prefix(&e, "%s item %zu", kind_name(it->kind), i + 1);
        at_row += ge_item_rows(it);
    }
    s->n_rows = total;
    if (st)
        fail_record(s, ge_status_name(st), e.msg);
}

/* The model's files changed on disk while in use: what was computed since is not written,
 * the run stops as after a write error (the output ends at its last checkpoint). */
static void fail_model(pipe_t *P, const ge_err *err)
{
    ge_say("%s", err->msg);
    pthread_mutex_lock(&P->mu);
    P->status = GE_EXIT_MODEL;
    pthread_mutex_unlock(&P->mu);
    abort_run(P);
}

/* Hand the embedded records up to seq end to the writer (under mu). The writer may free
 * their slots (and the reader reuse them) from then on. false, publishing nothing, when a
 * model file was cut short since (their vectors may come from zeroed pages). */
static bool publish(pipe_t *P, unsigned long long end, ge_err *err)
{
    if (ge_model_files_check(P->c->model, err))
        return false;
    for (unsigned long long q = P->n_packed; q < end; q++) {
        at(P, q)->state = SLOT_DONE;
        P->ready_tokens -= at(P, q)->n_tokens;
    }
    if (end > P->n_packed) {
        P->n_packed = end;
        pthread_cond_signal(&P->cv_done);
    }
    return true;
}

/* A window's records and the arrays its waves share. Records [first, first + next) are
 * embedded and handed to the writer; encoding is the record whose media are being encoded. */
typedef struct {
    pipe_t *P;
    unsigned long long first;
    size_t next, encoding;
    const int32_t **ids;
    size_t *lens;
    ge_media_rows *media;
    job *wave;
} window;

/* --yield, between two layers of a media tower: embed one wave of the records before the
 * record being encoded, in input order (up to a wave's tokens; a longer record alone), and
 * hand them to the writer, so that they do not wait for its images or clips. */
static void yield_wave(void *ctx)
{
    window *W = ctx;
    pipe_t *P = W->P;
    size_t k = 0, tokens = 0, i = W->next;
    for (; i < W->encoding; i++) {
        const slot *s = at(P, W->first + i);
        if (!needs_model(s))
            continue;
        if (k && tokens + s->n_tokens > P->wave_cap)
            break;
        k += record_jobs(P, W->first + i, W->wave + k);
        tokens += s->n_tokens;
    }
    if (k)
        embed_wave(P, W->wave, k, W->ids, W->lens, W->media);
    W->next = i;
    ge_err err;
    pthread_mutex_lock(&P->mu);
    bool ok = publish(P, W->first + i, &err);
    pthread_mutex_unlock(&P->mu);
    if (!ok)
        fail_model(P, &err);
}

/* Embed the records among seq [first, first + *n): their media first (images and clips; with
 * --yield, waves of the records before each media record run between its towers' layers),
 * then every sequence left, longest first, packed into waves first-fit-decreasing (a record
 * longer than a wave runs alone). A stop signal between two media records cuts the window
 * there (*n shrinks): the rest is left for --resume rather than held up behind minutes of
 * tower work. */
static bool embed_window(pipe_t *P, unsigned long long first, size_t *n_io)
{
    size_t n = *n_io, nj = 0;
    for (size_t i = 0; i < n; i++)
        nj += record_jobs(P, first + i, NULL);
    job *jobs = malloc(nj * sizeof *jobs);
    size_t *fill_of = malloc(nj * sizeof *fill_of), *bin_of = malloc(nj * sizeof *bin_of);
    window W = {P, first, 0, 0, malloc(nj * sizeof *W.ids), malloc(nj * sizeof *W.lens),
                malloc(nj * sizeof *W.media), malloc(nj * sizeof *W.wave)};
    bool ok = jobs && fill_of && bin_of && W.ids && W.lens && W.media && W.wave;
    size_t m = 0, bins = 0;
    bool media = false;
    /* the media first: their soft tokens go into the sequences */
    for (size_t i = 0; ok && i < n; i++) {
        if (needs_model(at(P, first + i)) && at(P, first + i)->n_items) {
            if (i > 0 && stopping(P)) {
                n = *n_io = i;
                break;
            }
            W.encoding = i;
            ge_model_set_yield(P->c->model, (ge_yield){yield_wave, &W});
            encode_media(P, at(P, first + i));
            media = true;
        }
    }
    ge_model_set_yield(P->c->model, (ge_yield){NULL, NULL});
    if (media) /* the towers' workspaces are not needed by the text waves */
        ge_model_trim(P->c->model);
    for (size_t i = W.next; ok && i < n; i++)
        if (needs_model(at(P, first + i)))
            m += record_jobs(P, first + i, jobs + m);
    if (ok && m) {
        qsort(jobs, m, sizeof *jobs, longest_first);
        for (size_t i = 0; i < m; i++) {
            size_t b = 0;
            while (b < bins && fill_of[b] + jobs[i].len > P->wave_cap)
                b++;
            if (b == bins)
                fill_of[bins++] = 0;
            fill_of[b] += jobs[i].len;
            bin_of[i] = b;
        }
        for (size_t b = 0; b < bins; b++) {
            size_t k = 0;
            for (size_t i = 0; i < m; i++)
                if (bin_of[i] == b)
                    W.wave[k++] = jobs[i];
            embed_wave(P, W.wave, k, W.ids, W.lens, W.media);
        }
    }
    free(jobs), free(fill_of), free(bin_of), free(W.ids), free(W.lens), free(W.media);
    free(W.wave);
    return ok;
}

/* Move *scan past the slots that have become ready, adding up their tokens (under mu). */
static void scan_ready(pipe_t *P, unsigned long long *scan, size_t *tokens)
{
    for (; *scan < P->n_claimed && at(P, *scan)->state == SLOT_READY; ++*scan)
        *tokens += at(P, *scan)->n_tokens;
}

static void *tower_main(void *v)
{
    pipe_t *P = v;
    const size_t window_tokens = WINDOW_WAVES * P->wave_cap;
    unsigned long long scan = 0; /* slots before scan are READY (and at or after n_packed) */
    double t_first = 0; /* when the first record of the next window was seen ready */
    pthread_mutex_lock(&P->mu);
    for (;;) {
        scan_ready(P, &scan, &P->ready_tokens);
        size_t ready = (size_t)(scan - P->n_packed);
        bool all_in = P->eof && scan == P->n_read;
        /* a stop signal: finish the window in the tower, start no other (the records read
         * but not embedded are left for --resume) */
        if (stopping(P) || (all_in && !ready))
            break;
        if (!ready)
            t_first = 0;
        else if (t_first == 0)
            t_first = ge_now();
        if (!ready || (ready < WINDOW_RECORDS && P->ready_tokens < window_tokens && !all_in &&
                       ge_now() - t_first < WAIT_MAX)) {
            struct timespec ts;
            deadline_in(&ts, IDLE_NS);
            unsigned long long before = scan;
            if (pthread_cond_timedwait(&P->cv_ready, &P->mu, &ts) != ETIMEDOUT || !ready)
                continue;
            /* timed out: go with what is ready unless more has become ready meanwhile */
            scan_ready(P, &scan, &P->ready_tokens);
            if (scan != before)
                continue;
        }
        unsigned long long first = P->n_packed;
        size_t n = (size_t)(scan - first) < WINDOW_RECORDS ? (size_t)(scan - first)
                                                            : WINDOW_RECORDS;
        pthread_mutex_unlock(&P->mu);
        const double t0 = ge_now();
        bool ok = P->o->tokenize || embed_window(P, first, &n);
        P->times.tower += ge_now() - t0;
        pthread_mutex_lock(&P->mu);
        if (!ok) {
            pthread_mutex_unlock(&P->mu);
            ge_say("out of memory");
            fail_io(P);
            pthread_mutex_lock(&P->mu);
            break;
        }
        ge_err err;
        if (!publish(P, first + n, &err)) {
            pthread_mutex_unlock(&P->mu);
            fail_model(P, &err);
            pthread_mutex_lock(&P->mu);
            break;
        }
        t_first = 0;
    }
    P->tower_done = true;
    pthread_cond_broadcast(&P->cv_done);
    pthread_mutex_unlock(&P->mu);
    return NULL;
}

/* ---- writer ------------------------------------------------------------------------------- */

/* The progress line on stderr, at most every 0.5 s (final: the last one and a newline). It
 * overwrites itself with '\r' and blanks the rest of the previous line with spaces, so it
 * needs no terminal escape codes. */
static void progress(pipe_t *P, bool final)
{
    if (!P->c->progress)
        return;
    double t = ge_now();
    if (!final && t - P->p_last < 0.5)
        return;
    P->p_last = t;
    double dt = t - P->p_t0 > 1e-6 ? t - P->p_t0 : 1e-6;
    unsigned long long done = atomic_load(&P->pos_done), total = atomic_load(&P->pos_total);
    char line[200], eta[80] = "";
    if (total && done <= total) {
        int k = snprintf(eta, sizeof eta, ", %.1f%%", 100.0 * (double)done / (double)total);
        double rate = (double)(done - (done > P->p_bytes0 ? P->p_bytes0 : done)) / dt;
        if (!final && rate > 0) {
            unsigned long long left = (unsigned long long)((double)(total - done) / rate + 0.5);
            snprintf(eta + k, sizeof eta - (size_t)k, ", ETA %llu:%02llu:%02llu", left / 3600,
                     left / 60 % 60, left % 60);
        }
    }
    int n = snprintf(line, sizeof line, "%llu records, %.1f records/s, %.0f tokens/s%s",
                     P->res.records, (double)P->res.records / dt, (double)P->res.tokens / dt,
                     eta);
    size_t len = n > 0 ? (size_t)n : 0;
    fprintf(stderr, "\r%s%*s%s", line, P->p_len > len ? (int)(P->p_len - len) : 0, "",
            final ? "\n" : "");
    fflush(stderr);
    P->p_len = final ? 0 : len;
}

/* Write one finished record. false on a write error (reported). */
static bool write_one(pipe_t *P, slot *s, ge_err *err)
{
    const ge_opts *o = P->o;
    ge_status st;
    P->res.records++;
    if (s->dup)
        dedup_take(P, s);
    ge_row_request rq;
    ge_row row = {.id = s->id, .id_len = s->id_len, .truncated = s->truncated,
                  .orig_tokens = s->orig_tokens, .used_tokens = s->n_tokens, .vec = s->vec,
                  .dim = slot_dim(P, s), .index = s->rec};
    if (s->req) {
        const request *q = s->req;
        rq = (ge_row_request){q->custom_id ? q->custom_id : s->id,
                              q->custom_id ? q->custom_id_len : s->id_len, q->i, q->n,
                              q->base64, q->model, q->model_len};
        row.req = &rq;
    }
    const ge_row_chunk whole = {0, 1, 0, s->text_cp}; /* a record with media: one passage */
    if (o->chunk && !s->pass)
        row.chunk = &whole;
    if (s->err_code) {
        row.chunk = NULL;
        P->res.failed++;
        st = ge_out_error(P->c->out, &row, s->err_code, s->err_msg ? s->err_msg : "out of memory",
                          err);
    } else if (s->pass) {
        st = GE_OK;
        for (size_t i = 0; !st && i < s->n_pass; i++) {
            const passage *p = &s->pass[i];
            const sequence *q = &s->seqs[p->seq];
            row.chunk = &p->at;
            row.vec = p->vec;
            row.tokens = q->ids + p->lo, row.n_tokens = p->hi - p->lo;
            st = ge_out_row(P->c->out, &row, err);
            if (!st && p->full)
                ge_cache_put(P->c->cache, p->key, p->full,
                             (ge_cache_counts){p->hi - p->lo, p->hi - p->lo});
        }
        if (!o->tokenize)
            P->res.tokens += s->n_tokens;
        P->res.cached += s->cached;
    } else {
        if (s->truncated && !o->quiet && P->c->binary) /* jsonl rows carry "truncated" */
            ge_say("%s: truncated from %zu to %zu tokens", s->where, s->orig_tokens,
                   s->n_tokens);
        if (o->tokenize)
            row.tokens = s->tokens, row.n_tokens = s->n_tokens;
        else
            P->res.tokens += s->n_tokens;
        st = ge_out_row(P->c->out, &row, err);
        if (!st && s->full)
            ge_cache_put(P->c->cache, s->key, s->full,
                         (ge_cache_counts){s->n_tokens, s->orig_tokens});
        P->res.cached += s->cached;
        P->res.deduped += s->dup;
    }
    if (s->owner)
        dedup_owner_written(P, s);
    return st == GE_OK;
}

static void *writer_main(void *v)
{
    pipe_t *P = v;
    const ge_opts *o = P->o;
    ge_err err = {0};
    unsigned long long checkpointed = P->c->skip, last_index = P->c->skip;
    bool failed = false, stop = false;
    bool mid = false; /* inside a request's inputs: no checkpoint (resume redoes the request) */
    pthread_mutex_lock(&P->mu);
    for (;;) {
        unsigned long long first = P->n_written, end = P->n_packed;
        if (first == end) {
            bool finished = P->tower_done || atomic_load(&P->abort);
            pthread_mutex_unlock(&P->mu);
            /* caught up: make what is written durable before waiting */
            if (last_index != checkpointed && !mid) {
                const double t0 = ge_now();
                failed = ge_out_checkpoint(P->c->out, last_index, &err) != GE_OK;
                ge_cache_commit(P->c->cache); /* this run's vectors, for other processes */
                P->times.write += ge_now() - t0;
                checkpointed = last_index;
            }
            progress(P, false);
            pthread_mutex_lock(&P->mu);
            if (failed || (finished && P->n_written == P->n_packed))
                break;
            if (P->n_written == P->n_packed && !P->tower_done && !atomic_load(&P->abort)) {
                struct timespec ts;
                deadline_in(&ts, 500000000L);
                pthread_cond_timedwait(&P->cv_done, &P->mu, &ts);
            }
            continue;
        }
        pthread_mutex_unlock(&P->mu);
        unsigned long long q = first;
        size_t freed = 0;
        const double t0 = ge_now();
        for (; q < end && !failed && !stop; q++) {
            slot *s = at(P, q);
            failed = !write_one(P, s, &err);
            last_index = s->index;
            mid = s->req && s->req->i + 1 < s->req->n;
            stop = o->max_errors && P->res.failed >= o->max_errors;
            freed += s->bytes;
            slot_free(s);
        }
        P->times.write += ge_now() - t0;
        pthread_mutex_lock(&P->mu);
        P->n_written = q;
        P->bytes -= freed;
        pthread_cond_broadcast(&P->cv_space);
        if (failed || stop)
            break;
    }
    pthread_mutex_unlock(&P->mu);
    if (stop && !failed && !mid && ge_out_checkpoint(P->c->out, last_index, &err))
        failed = true;
    P->last_index = last_index;
    if (failed) {
        if (!ge_out_epipe())
            ge_say("%s", err.msg);
        P->res.out_failed = true;
        fail_io(P);
    } else if (stop) {
        P->res.max_errors_hit = true;
        abort_run(P);
    }
    return NULL;
}

/* ---- the run ---------------------------------------------------------------------------- */

ge_status ge_pipe_check_options(const ge_opts *o, const ge_model *m, ge_err *err)
{
    /* the tokens around a clip's soft tokens, as the tokenizer lays a record out */
    ge_tokens t = {0};
    const ge_part one = {GE_KIND_AUDIO, NULL, 0, 1};
    ge_status st = ge_tokenize_parts(m, NULL, &one, 1, &t, NULL);
    size_t around = t.n - 1, max = (size_t)ge_model_max_tokens(m);
    ge_tokens_free(&t);
    if (o->chunk > max)
        return ge_fail(err, GE_E_USAGE, "--%schunk %u: a passage holds at most the model's "
                       "context of %zu tokens", o->late_chunk ? "late-" : "", o->chunk, max);
    if (st || around >= max) /* no audio tokens in this vocabulary: audio records fail anyway */
        return GE_OK;
    const int64_t cap = (int64_t)(GE_AUDIO_SECONDS_CAP * GE_AUDIO_RATE);
    const int64_t fit = ge_model_audio_fit(m, (int64_t)(max - around), cap);
    const int64_t want = (int64_t)floor(o->audio_max_seconds * GE_AUDIO_RATE + 0.5);
    /* the default is nobody's choice: on a model with a short context, clips too long for it
     * are too_long records */
    if (want <= fit || o->audio_max_seconds == GE_AUDIO_MAX_SECONDS)
        return GE_OK;
    /* the largest value with two decimals that still fits */
    const double most = (double)(fit * 100 / GE_AUDIO_RATE) / 100;
    return ge_fail(err, GE_E_USAGE, "--audio-max-seconds %g: no clip that long fits the model's "
                   "context of %zu tokens (%lld audio tokens a clip at most, 25 a second): at "
                   "most %.2f", o->audio_max_seconds, max, (long long)(max - around), most);
}

ge_exit ge_pipeline_run(const ge_pipe_cfg *c, ge_pipe_result *res)
{
    memset(res, 0, sizeof *res);
    pipe_t *P = calloc(1, sizeof *P);
    if (!P) {
        ge_say("out of memory");
        return GE_EXIT_IO;
    }
    P->c = c;
    P->o = c->o;
    P->model_dim = ge_model_dim(c->model);
    P->max_tokens = (size_t)ge_model_max_tokens(c->model);
    P->item_opts = (ge_item_opts){
        .image_tokens = P->o->image_tokens,
        .audio_max_seconds = P->o->audio_max_seconds,
        .video = {.fps = P->o->video_fps, .max_frames = P->o->video_frames,
                  .tokens = P->o->video_tokens},
        .counts_only = P->o->tokenize,
        .timestamps = P->o->cfg.v[GE_CFG_VIDEO_TIMESTAMPS]};
    long wave = P->o->cfg.v[GE_CFG_WAVE_TOKENS];
    P->wave_cap = wave > 0 ? (size_t)wave : 1;
    P->reader = pthread_self();
    ge_in_set_interrupt(c->in, stopping_cb, P);
    P->p_t0 = P->p_last = ge_now();
    pthread_mutex_init(&P->mu, NULL);
    pthread_mutex_init(&P->dmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&P->cv_space, &ca);
    pthread_cond_init(&P->cv_read, &ca);
    pthread_cond_init(&P->cv_ready, &ca);
    pthread_cond_init(&P->cv_done, &ca);
    pthread_condattr_destroy(&ca);

    /* the stages' threads must not take the stop signals: those interrupt the reader */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    if (c->wake_signal)
        sigaddset(&block, c->wake_signal);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    pthread_t worker, tower, writer;
    int started = 0;
    if (pthread_create(&worker, NULL, worker_main, P) == 0) {
        started++;
        if (pthread_create(&tower, NULL, tower_main, P) == 0) {
            started++;
            if (pthread_create(&writer, NULL, writer_main, P) == 0)
                started++;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    unsigned long long index = 0;
    if (started == 3) {
        index = read_all(P);
        ge_in_set_interrupt(c->in, NULL, NULL);
    } else {
        ge_say("cannot start the pipeline's threads");
        P->status = GE_EXIT_IO;
        atomic_store(&P->abort, true);
    }
    pthread_mutex_lock(&P->mu);
    P->eof = true;
    pthread_cond_broadcast(&P->cv_read);
    pthread_cond_broadcast(&P->cv_ready);
    pthread_mutex_unlock(&P->mu);
    if (started > 0)
        pthread_join(worker, NULL);
    if (started > 1)
        pthread_join(tower, NULL);
    if (started > 2)
        pthread_join(writer, NULL);

    /* everything read was written: the final checkpoint covers the records skipped after the
     * last one of this shard too */
    ge_err err = {0};
    if (started == 3 && !atomic_load(&P->abort) && P->n_written == P->n_read &&
        ge_out_checkpoint(c->out, index, &err)) {
        if (!ge_out_epipe())
            ge_say("%s", err.msg);
        P->res.out_failed = true;
        P->status = GE_EXIT_IO;
    }
    progress(P, true);
    for (unsigned long long q = P->n_written; q < P->n_read; q++)
        slot_free(at(P, q)); /* dropped by an abort */
    *res = P->res;
    res->times = P->times;
    /* after a stop or an abort the output ends at the last record written */
    res->index = P->n_written == P->n_read && !atomic_load(&P->abort) ? index : P->last_index;
    ge_exit status = P->status;
    for (size_t b = 0; b < DEDUP_BUCKETS; b++) /* what an abort left */
        while (P->dedup[b])
            dedup_drop(&P->dedup[b]);
    pthread_mutex_destroy(&P->dmu);
    pthread_mutex_destroy(&P->mu);
    pthread_cond_destroy(&P->cv_space);
    pthread_cond_destroy(&P->cv_read);
    pthread_cond_destroy(&P->cv_ready);
    pthread_cond_destroy(&P->cv_done);
    free(P);
    return status;
}
