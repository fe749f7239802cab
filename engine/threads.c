/* threads.c - persistent worker pool (spin briefly, then sleep) and sysfs CPU topology. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "threads.h"

/* ---- topology ----------------------------------------------------------------------------- */

/* Parse a sysfs CPU list ("0-3,8,10-11") into a membership bitmap of max entries. */
static bool parse_cpulist(const char *s, bool *member, int max)
{
    while (*s && *s != '\n') {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0)
            return false;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1 || b < a)
                return false;
            s = end;
        }
        for (long i = a; i <= b && i < max; i++)
            member[i] = true;
        if (*s == ',')
            s++;
        else if (*s && *s != '\n')
            return false;
    }
    return true;
}

/* The first line of a small file into buf[n]; false when it cannot be read. */
static bool read_line(const char *path, char *buf, int n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    const bool ok = fgets(buf, n, f) != NULL;
    fclose(f);
    return ok;
}

static bool read_cpulist(const char *path, bool *member, int max)
{
    char buf[4096];
    return read_line(path, buf, sizeof buf) && parse_cpulist(buf, member, max);
}

/* cpu's level-2 and highest-level cache sizes under root (sysfs writes "8192K"); 0 where
 * unlisted. */
static void read_caches(const char *root, int cpu, size_t *l2, size_t *llc)
{
    int top = 0;
    *l2 = *llc = 0;
    for (int i = 0; i < 8; i++) {
        char path[512], buf[64];
        int level = 0;
        unsigned long long size = 0;
        char unit = 0;
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d/cache/index%d/level", root, cpu,
                 i);
        if (!read_line(path, buf, sizeof buf) || sscanf(buf, "%d", &level) != 1 || level < 2)
            continue;
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d/cache/index%d/size", root, cpu,
                 i);
        if (!read_line(path, buf, sizeof buf) || sscanf(buf, "%llu%c", &size, &unit) < 1)
            continue;
        const size_t bytes = (size_t)size << (unit == 'K' ? 10 : unit == 'M' ? 20 : 0);
        if (level == 2)
            *l2 = bytes;
        if (level > top)
            *llc = bytes, top = level;
    }
}

#define MAXCPU 1024

ge_status ge_topo_read(const char *root, const int *allowed, int n_allowed, ge_topo *t,
                       ge_err *err)
{
    static bool pcore[MAXCPU], ecore[MAXCPU], seen_core[MAXCPU], sib[MAXCPU];
    char path[512];
    memset(t, 0, sizeof *t);
    memset(pcore, 0, sizeof pcore);
    memset(ecore, 0, sizeof ecore);
    snprintf(path, sizeof path, "%s/devices/cpu_core/cpus", root);
    bool has_p = read_cpulist(path, pcore, MAXCPU);
    snprintf(path, sizeof path, "%s/devices/cpu_atom/cpus", root);
    bool has_e = read_cpulist(path, ecore, MAXCPU);
    t->hybrid = has_p && has_e;

    /* primary = the lowest-numbered allowed thread of its core */
    int primary[MAXCPU];
    memset(seen_core, 0, sizeof seen_core);
    for (int i = 0; i < n_allowed; i++) {
        int c = allowed[i];
        if (c < 0 || c >= MAXCPU)
            return ge_fail(err, GE_E_LIMIT, "CPU id %d out of range", c);
        primary[i] = 1;
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d/topology/thread_siblings_list",
                 root, c);
        memset(sib, 0, sizeof sib);
        if (read_cpulist(path, sib, MAXCPU))
            for (int j = 0; j < n_allowed; j++)
                if (allowed[j] < c && sib[allowed[j]])
                    primary[i] = 0;
    }
    /* order classes: 0 P-core primaries (or all primaries when not hybrid), 1 E-cores,
     * 2 SMT siblings */
    for (int cls = 0; cls < 3; cls++) {
        for (int i = 0; i < n_allowed; i++) {
            int c = allowed[i], k;
            if (t->hybrid)
                k = ecore[c] ? 1 : primary[i] ? 0 : 2;
            else
                k = primary[i] ? 0 : 2;
            if (k == cls && t->n < MAXCPU)
                t->cpus[t->n++] = c;
        }
        if (cls == 0)
            t->n_pcore = t->n;
    }
    for (int i = 0; i < n_allowed; i++)
        t->n_core += primary[i];
    if (n_allowed > 0)
        read_caches(root, allowed[0], &t->l2_bytes, &t->llc_bytes);
    return GE_OK;
}

int ge_topo_allowed(int *cpus, int max)
{
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        cpus[0] = 0;
        return 1;
    }
    for (int c = 0; c < CPU_SETSIZE && n < max; c++)
        if (CPU_ISSET(c, &set))
            cpus[n++] = c;
    return n ? n : (cpus[0] = 0, 1);
}

/* ---- pool ----------------------------------------------------------------------------------- */

/* A worker's share of a call: tasks [next, end), claimed by whoever increments next (its
 * worker, or another that has run out), one cache line each. */
typedef struct {
    _Alignas(64) _Atomic int64_t next;
    int64_t end;
} share;

struct ge_pool {
    int n;
    int caller_cpu;         /* CPU for the thread that calls ge_pool_run (-1: no pinning) */
    pthread_t caller;       /* the last caller pinned there */
    bool caller_pinned;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    bool stop;
    /* the current call: generation << 16 | number of workers taking part. One word, so a
     * worker that wakes late never pairs a new call's worker count with an old generation
     * (that mismatch let a worker count itself out twice and hang or cut a call short). */
    _Atomic uint64_t call;
    ge_task_fn fn;
    void *ctx;
    int active;             /* workers taking part in the current call */
    share *shares;          /* [n]: worker w's share of the current call's tasks */
    _Atomic int pending;    /* helper workers still working on this call */
};

typedef struct {
    ge_pool *p;
    int id;
} worker_arg;

/* The worker's own share, then the rest of the others' (64 texts: 3-4% less time than one
 * shared counter, PERF.md "Thread pool: a share per worker"). */
static void drain(ge_pool *p, int worker)
{
    for (int k = 0; k < p->active; k++) {
        share *s = &p->shares[(worker + k) % p->active];
        for (int64_t i; (i = atomic_fetch_add_explicit(&s->next, 1, memory_order_relaxed)) < s->end;)
            p->fn(p->ctx, i, worker);
    }
}

static void *worker_main(void *v)
{
    worker_arg *a = v;
    ge_pool *p = a->p;
    const int id = a->id;
    free(a);
    uint64_t seen = 0;
    for (;;) {
        /* spin a little: waves come back to back, and a futex sleep costs microseconds */
        uint64_t c;
        int spins = 0;
        while ((c = atomic_load_explicit(&p->call, memory_order_acquire)) >> 16 == seen >> 16 &&
               spins++ < 2000)
            sched_yield();
        if (c >> 16 == seen >> 16) {
            pthread_mutex_lock(&p->mu);
            while (!p->stop && (c = atomic_load(&p->call)) >> 16 == seen >> 16)
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (p->stop)
            return NULL;
        seen = c;
        /* a worker counted in this call is waited for, so the call's fields stay valid */
        if (id < (int)(c & 0xffff)) {
            drain(p, id);
            if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
                pthread_mutex_lock(&p->mu);
                pthread_cond_signal(&p->done);
                pthread_mutex_unlock(&p->mu);
            }
        }
    }
}

ge_status ge_pool_create(ge_pool **out, int n_threads, const ge_topo *topo, bool pin,
                         ge_err *err)
{
    *out = NULL;
    if (n_threads <= 0)
        n_threads = topo && topo->n ? topo->n : 1;
    if (n_threads > 4096) /* the worker count shares a word with the call generation */
        return ge_fail(err, GE_E_LIMIT, "%d threads asked for; at most 4096", n_threads);
    ge_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->threads = calloc((size_t)n_threads, sizeof *p->threads)) ||
        !(p->shares = aligned_alloc(64, (size_t)n_threads * sizeof *p->shares))) {
        if (p)
            free(p->threads);
        free(p);
        return ge_fail(err, GE_E_NOMEM, "out of memory for the thread pool");
    }
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    /* the caller of ge_pool_run is worker 0: it is pinned when it calls, not here, so that
     * the thread that creates the pool (and the threads it starts later) stay free */
    p->caller_cpu = pin && topo && topo->n ? topo->cpus[0] : -1;
    for (int i = 1; i < n_threads; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (a)
            *a = (worker_arg){p, i};
        int rc = a ? pthread_create(&p->threads[i], NULL, worker_main, a) : ENOMEM;
        if (rc) {
            free(a);
            p->n = i; /* join only the ones that started */
            ge_pool_free(p);
            return ge_fail(err, GE_E_INTERNAL, "cannot start worker thread %d: %s", i,
                           strerror(rc));
        }
        if (pin && topo && i < topo->n) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(topo->cpus[i], &set);
            pthread_setaffinity_np(p->threads[i], sizeof set, &set);
        }
    }
    *out = p;
    return GE_OK;
}

void ge_pool_free(ge_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    atomic_fetch_add(&p->call, 1 << 16);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p->shares);
    free(p);
}

int ge_pool_size(const ge_pool *p) { return p ? p->n : 1; }

void ge_pool_run(ge_pool *p, int64_t n_tasks, int max_threads, ge_task_fn fn, void *ctx)
{
    if (n_tasks <= 0)
        return;
    int active = p ? p->n : 1;
    if (max_threads > 0 && max_threads < active)
        active = max_threads;
    if ((int64_t)active > n_tasks)
        active = (int)n_tasks;
    if (p && p->caller_cpu >= 0 &&
        (!p->caller_pinned || !pthread_equal(p->caller, pthread_self()))) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(p->caller_cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
        p->caller = pthread_self();
        p->caller_pinned = true;
    }
    if (active <= 1) {
        for (int64_t i = 0; i < n_tasks; i++)
            fn(ctx, i, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->active = active;
    for (int w = 0; w < active; w++) {
        atomic_store_explicit(&p->shares[w].next, n_tasks * w / active, memory_order_relaxed);
        p->shares[w].end = n_tasks * (w + 1) / active;
    }
    atomic_store(&p->pending, active - 1);
    pthread_mutex_lock(&p->mu);
    uint64_t gen = (atomic_load(&p->call) >> 16) + 1;
    atomic_store_explicit(&p->call, gen << 16 | (uint64_t)active, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p, 0);
    /* wait for the helpers (spin first: they finish within microseconds of us) */
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) && spins < 2000;
         spins++)
        sched_yield();
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->pending))
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
