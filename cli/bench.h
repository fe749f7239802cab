/* bench.h - gemmaembed --bench: throughput and where the time goes, on the given input or
 * on built-in synthetic texts, in the manner of llama-bench (repetitions, mean +- stddev). */
#ifndef GE_CLI_BENCH_H
#define GE_CLI_BENCH_H

#include <stdio.h>

#include "ge.h"
#include "opts.h"

/* Monotonic wall-clock seconds (the process start stamp and every bench timing). */
double ge_bench_now(void);

/* The weight types of the model file and the --mmproj files, one line per file and type:
 * matrices, bytes, and the kernel that runs them (--print-config and --bench). Returns 0, or
 * -1 with err set when a file cannot be read. */
int ge_bench_weights(FILE *f, const ge_opts *o, const ge_model *m, ge_err *err);

/* Run the benchmark with an opened model; t_start is when the process started (for the time
 * to first vector). Table on stderr, JSON to o->bench_json when set. Returns an exit code. */
int ge_bench_run(const ge_opts *o, ge_model *m, double t_start);

#endif
