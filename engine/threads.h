/* threads.h - the compute pool: persistent workers running parallel-for calls, and the
 * Linux CPU topology that orders (and on hybrid CPUs pins) them.
 *
 * ge_pool_run(p, n, max, fn, ctx) runs fn(ctx, i, worker) for every task i < n on at most
 * max threads (the caller is worker 0) and returns when all are done. Worker w starts on the
 * w-th contiguous share of the tasks (so consecutive calls over the same rows or weights give
 * each worker the same part, still in its caches) and, once done, takes what is left of the
 * others' shares: tasks are claimed dynamically, so results must not depend on which worker
 * runs a task (every kernel writes disjoint outputs with a fixed operation order). */
#ifndef GE_THREADS_H
#define GE_THREADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ge.h"

/* Allowed CPUs in the order the pool uses them. */
typedef struct {
    int n;           /* CPUs listed */
    int cpus[1024];  /* logical CPU ids, best first */
    int n_pcore;     /* leading entries that are P-core primaries (hybrid), else n_core */
    bool hybrid;     /* cpu_core and cpu_atom PMUs both present */
    int n_core;      /* physical cores among the allowed CPUs */
    size_t l2_bytes;  /* the first allowed CPU's level-2 cache (0: not listed) */
    size_t llc_bytes; /* its last-level cache (0: not listed) */
} ge_topo;

/* Read the topology under sysfs_root ("/sys" normally; a fake tree in tests) restricted to the
 * allowed CPU ids (allowed[i] for i < n_allowed). Order: P-core primaries, E-cores, then SMT
 * siblings; on non-hybrid machines: one thread per core first, then siblings. The cache
 * sizes are the first allowed CPU's. */
ge_status ge_topo_read(const char *sysfs_root, const int *allowed, int n_allowed, ge_topo *t,
                       ge_err *err);
/* The CPUs this process may run on (sched_getaffinity). */
int ge_topo_allowed(int *cpus, int max);

typedef struct ge_pool ge_pool;
/* ge_task_fn (fn(ctx, task, worker)) is declared in ge.h */

/* n_threads workers (caller included; 0 = one per allowed CPU). With pin, worker w is pinned
 * to topo->cpus[w] (hybrid CPUs only; elsewhere the pool is left to the scheduler); worker 0
 * is whichever thread calls ge_pool_run, pinned when it calls. One thread at a time may call
 * ge_pool_run. */
ge_status ge_pool_create(ge_pool **out, int n_threads, const ge_topo *topo, bool pin,
                         ge_err *err);
void ge_pool_free(ge_pool *p); /* accepts NULL */
int ge_pool_size(const ge_pool *p);
void ge_pool_run(ge_pool *p, int64_t n_tasks, int max_threads, ge_task_fn fn, void *ctx);

#endif
