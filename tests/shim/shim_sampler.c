/* shim_sampler.c — the repeated-augmentation sampler for the golden tests
 * (tests/golden/test_ra_sampler_golden.py, against timm's RepeatAugSampler). */
#include <stdint.h>

#include "loader/sampler.h"

#define SHIM_API __attribute__((visibility("default")))

/* The dataset indices (and copy numbers) rank `rank` gets in `epoch`; returns how many. */
SHIM_API long ff_shim_ra_sampler(long n, int shuffle, int permutation, uint64_t seed, uint64_t epoch,
                                 int rank, int world_size, int repeats, int64_t *perm, int64_t *out,
                                 uint32_t *out_repeat) {
  ff__sampler_ra_indices((size_t)n, shuffle, permutation, seed, epoch, rank, world_size, repeats, perm, out,
                         out_repeat);
  return (long)ff__sampler_ra_num_samples((size_t)n, world_size, repeats);
}
