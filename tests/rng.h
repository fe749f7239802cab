/* rng.h - the tests' and benches' random numbers: Marsaglia's xorshift64 (13, 7, 17), one
 * stream per program (tests are single files, as with check.h). The seed is RNG_SEED: define
 * it before including this header to keep a file's own seed (and so its own test data). */
#ifndef GE_TEST_RNG_H
#define GE_TEST_RNG_H

#include <stdint.h>

#ifndef RNG_SEED
#define RNG_SEED 0x9e3779b97f4a7c15ull
#endif

static uint64_t rng_state = RNG_SEED;

static inline uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* uniform in [-1, 1): the top 24 bits of the next value */
static inline float frand(void)
{
    return (float)((rnd() >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

#endif
