/* sampler.c — shuffling and sharding exactly as DistributedSampler does,
 * and repeated augmentation as timm's RepeatAugSampler (DeiT's RASampler).
 *
 * The permutation is ours by default (Philox, the same on every machine) or,
 * on request, torch's own: torch.randperm on torch's CPU generator (MT19937),
 * so that a script moving from DistributedSampler keeps its sample order.
 * Padding, truncation and the strided split across ranks follow
 * torch.utils.data.DistributedSampler. With repeated augmentation each
 * index of the permutation appears `repeats` times in a row before the
 * strided split, so its copies land on different ranks (or, on one rank,
 * in a row); each copy carries its repeat number, which keys its own
 * augmentation draws. */
#include "loader/sampler.h"

#include "core/mt19937.h"
#include "core/philox.h"
#include "fusionflow/fusionflow.h"

size_t ff__sampler_num_samples(size_t n, int world_size, int drop_last) {
  size_t w = (size_t)world_size;
  if (drop_last && n % w) return n < w ? 0 : (n - w) / w + ((n - w) % w != 0); /* ceil((n - w) / w) */
  return (n + w - 1) / w;
}

static void philox_permutation(size_t n, uint64_t seed, uint64_t epoch, int64_t *perm) {
  ff__philox rng;
  ff__philox_init(&rng, seed, FF__RNG_SHUFFLE, 0, epoch);
  for (size_t i = n - 1; i > 0; i--) {
    size_t j = (size_t)ff__philox_randint(&rng, 0, (int64_t)i);
    int64_t t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
}

/* torch.randperm(n, generator=g) with g.manual_seed(seed) (ATen's CPU
 * randperm below 2^32 / 20 elements): for i ascending, swap element i with
 * element i + random() % (n - i). */
static void torch_randperm(size_t n, uint64_t seed, int64_t *perm) {
  ff__mt19937 mt;
  ff__mt19937_seed(&mt, (uint32_t)seed);
  for (size_t i = 0; i + 1 < n; i++) {
    size_t j = i + ff__mt19937_u32(&mt) % (n - i);
    int64_t t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
}

static void permute(size_t n, int shuffle, int permutation, uint64_t seed, uint64_t epoch, int64_t *perm) {
  for (size_t i = 0; i < n; i++) perm[i] = (int64_t)i;
  if (shuffle && n > 1) {
    if (permutation == FF_PERMUTATION_TORCH) torch_randperm(n, seed + epoch, perm);
    else philox_permutation(n, seed, epoch, perm);
  }
}

void ff__sampler_indices(size_t n, int shuffle, int permutation, uint64_t seed, uint64_t epoch, int rank,
                         int world_size, int drop_last, int64_t *perm, int64_t *out) {
  permute(n, shuffle, permutation, seed, epoch, perm);
  size_t num = ff__sampler_num_samples(n, world_size, drop_last);
  for (size_t k = 0; k < num; k++) {
    /* Position in the padded (or truncated) list of total_size = num * world. */
    size_t pos = (size_t)rank + k * (size_t)world_size;
    out[k] = perm[pos % n];
  }
}

/* RepeatAugSampler: num_samples = ceil(n * repeats / world) positions per
 * rank of which num_selected_samples are taken: with selected_round = 256
 * and selected_ratio = world (its defaults), floor(n // 256 * 256 / world)
 * when n >= 256, else ceil(n / world), at most num_samples. */
size_t ff__sampler_ra_num_samples(size_t n, int world_size, int repeats) {
  size_t w = (size_t)world_size, num_samples = (n * (size_t)repeats + w - 1) / w;
  size_t selected = n >= 256 ? n / 256 * 256 / w : (n + w - 1) / w;
  return selected < num_samples ? selected : num_samples;
}

void ff__sampler_ra_indices(size_t n, int shuffle, int permutation, uint64_t seed, uint64_t epoch, int rank,
                            int world_size, int repeats, int64_t *perm, int64_t *out, uint32_t *out_repeat) {
  permute(n, shuffle, permutation, seed, epoch, perm);
  size_t total = n * (size_t)repeats, num = ff__sampler_ra_num_samples(n, world_size, repeats);
  for (size_t k = 0; k < num; k++) {
    size_t pos = ((size_t)rank + k * (size_t)world_size) % total; /* in [p0 x r, p1 x r, ...] */
    out[k] = perm[pos / (size_t)repeats];
    out_repeat[k] = (uint32_t)(pos % (size_t)repeats);
  }
}
