/* bench.h - gemmaembed --bench: throughput and where the time goes, on the given input or
 * on built-in synthetic texts, in the manner of llama-bench (repetitions, mean +- stddev). */
#ifndef GE_CLI_BENCH_H
#define GE_CLI_BENCH_H

#include "ge.h"
#include "opts.h"

/* Monotonic wall-clock seconds (the process start stamp and every bench timing). */
double ge_bench_now(void);

/* Run the benchmark with an opened model; t_start is when the process started (for the time
 * to first vector). Table on stderr, JSON to o->bench_json when set. Returns an exit code. */
int ge_bench_run(const ge_opts *o, ge_model *m, double t_start);

#endif
