/* bench.h - gemmaembed --bench: throughput and where the time goes, on the given input or
 * on built-in synthetic texts, in the manner of llama-bench (repetitions, mean +- stddev). */
#ifndef GE_CLI_BENCH_H
#define GE_CLI_BENCH_H

#include <stdio.h>

#include "ge.h"
#include "msg.h"
#include "opts.h"

/* The weight types of the model file and the --mmproj files, one line per file and type:
 * matrices, bytes, and the kernel that runs them (--print-config and --bench). An error when
 * a file cannot be read. */
ge_status ge_bench_weights(FILE *f, const ge_opts *o, const ge_model *m, ge_err *err);

/* Run the benchmark with an opened model; t_start is when the process started (ge_cli_now,
 * for the time to first vector). Table on stderr, JSON to o->bench_json when set. */
ge_exit ge_bench_run(const ge_opts *o, ge_model *m, double t_start);

#endif
