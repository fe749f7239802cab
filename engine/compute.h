/* compute.h - the compute context under every engine layer: the kernel tier's table, the
 * worker pool and CPU topology, per-worker scratch, the repacked-weight cache and the
 * operation stats. The text encoder, the linears, attention and the media towers run on
 * one; none of them knows the model that owns it. */
#ifndef GE_COMPUTE_H
#define GE_COMPUTE_H

#include <stddef.h>
#include <stdint.h>

#include "ge.h"
#include "kern.h"
#include "threads.h"

typedef struct ge_packed_cache ge_packed_cache; /* linear.c */

typedef struct {
    ge_config cfg;             /* the switches the layers read (fast paths, semantics...) */
    const ge_kern *kern;       /* the selected tier's kernels */
    ge_pool *pool;
    ge_topo topo;
    int threads, max_threads;  /* pool size; cap for one parallel call (--thread-cap) */
    int call_threads;          /* cap for the current call (ge_compute_limit); 0: none */
    float *row_scratch;        /* [threads][row_scratch_len]: one weight row per worker */
    size_t row_scratch_len;
    ge_packed_cache *packed;   /* repacked weights and activation scratch; the owner frees
                                  it with ge_linear_cache_free before ge_compute_free */
    ge_stats stats;
    ge_phase phase;            /* whose operations ge_compute_count is counting now */
} ge_compute;

/* Pick the tier cfg asks for on this CPU, read the topology, start the pool and give each
 * worker a scratch row of row_len values. */
ge_status ge_compute_open(ge_compute *cx, const ge_config *cfg, int64_t row_len, ge_err *err);
void ge_compute_free(ge_compute *cx); /* accepts a cx whose open failed */

/* Grow the per-worker scratch to rows of n values (towers wider than the text). */
ge_status ge_compute_row_scratch(ge_compute *cx, int64_t n, ge_err *err);

/* Count one operation for --bench under the current phase: the time since t0 and macs. */
void ge_compute_count(ge_compute *cx, ge_op op, double t0, double macs);

/* One call of a part of the model (a text wave, a tower) for --bench: ge_phase_begin makes
 * phase the current one; ge_phase_end puts the call's seconds that no operation counted under
 * its "other" and restores the phase before. */
typedef struct {
    ge_phase prev;
    ge_op_stats before;
} ge_phase_mark;
ge_phase_mark ge_phase_begin(ge_compute *cx, ge_phase phase);
void ge_phase_end(ge_compute *cx, const ge_phase_mark *k, double seconds);

/* Run fn over n tasks on the pool, on at most max threads (0: the current cap). */
void ge_parallel(ge_compute *cx, int64_t n, int max, ge_task_fn fn, void *ctx);

/* Cap the threads of the parallel calls that follow at n (0: back to --thread-cap); returns
 * the previous cap, for the caller to restore (a text wave run between two layers of a media
 * tower restores the tower's). */
int ge_compute_limit(ge_compute *cx, int n);

/* n floats, 64-byte aligned and not zeroed (free() them): the GEMM kernels store whole cache
 * lines, which malloc's large blocks (16-byte aligned) would split. */
float *ge_floats(size_t n);

#endif
