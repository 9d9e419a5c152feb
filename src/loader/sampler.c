/* sampler.c — shuffling and sharding exactly as DistributedSampler does.
 *
 * The permutation is ours (Philox, so it is the same on every machine and
 * independent of torch's generator); padding, truncation and the strided
 * split across ranks follow torch.utils.data.DistributedSampler. */
#include "loader/sampler.h"

#include "core/philox.h"

size_t ff__sampler_num_samples(size_t n, int world_size, int drop_last) {
  size_t w = (size_t)world_size;
  if (drop_last && n % w) return n < w ? 0 : (n - w) / w + ((n - w) % w != 0); /* ceil((n - w) / w) */
  return (n + w - 1) / w;
}

void ff__sampler_indices(size_t n, int shuffle, uint64_t seed, uint64_t epoch, int rank,
                         int world_size, int drop_last, int64_t *perm, int64_t *out) {
  for (size_t i = 0; i < n; i++) perm[i] = (int64_t)i;
  if (shuffle && n > 1) {
    ff__philox rng;
    ff__philox_init(&rng, seed, FF__RNG_SHUFFLE, 0, epoch);
    for (size_t i = n - 1; i > 0; i--) {
      size_t j = (size_t)ff__philox_randint(&rng, 0, (int64_t)i);
      int64_t t = perm[i];
      perm[i] = perm[j], perm[j] = t;
    }
  }
  size_t num = ff__sampler_num_samples(n, world_size, drop_last);
  for (size_t k = 0; k < num; k++) {
    /* Position in the padded (or truncated) list of total_size = num * world. */
    size_t pos = (size_t)rank + k * (size_t)world_size;
    out[k] = perm[pos % n];
  }
}
