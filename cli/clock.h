/* clock.h - monotonic wall-clock seconds for the CLI (the process start stamp, --bench, the
 * tower's wait and the progress line).
 *
 * The engine has the same clock (ge_now) but does not export it in ge.h, the only engine
 * header cli/ includes; once ge.h does, this header goes and its callers use ge_now. */
#ifndef GE_CLI_CLOCK_H
#define GE_CLI_CLOCK_H

#include <time.h>

static inline double ge_cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
