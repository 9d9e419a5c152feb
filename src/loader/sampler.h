/* sampler.h — the epoch's sample order for one rank. */
#ifndef FF_LOADER_SAMPLER_H
#define FF_LOADER_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

/* torch.utils.data.DistributedSampler's num_samples for a dataset of n. */
size_t ff__sampler_num_samples(size_t n, int world_size, int drop_last);

/* The largest data set FF_PERMUTATION_TORCH reproduces: torch.randperm
 * draws 64-bit numbers from here on, an algorithm not reproduced. */
#define FF__TORCH_RANDPERM_MAX_N (UINT32_MAX / 20 - 1)

/* Writes the num_samples dataset indices of `rank` for `epoch` to out: a
 * seeded permutation of 0..n-1 or the identity, padded by repeating its
 * start or cut to a multiple of world_size, then every world_size-th index
 * from rank — DistributedSampler.__iter__'s rules. The permutation
 * (ff_permutation): FF_PERMUTATION_PHILOX, Fisher-Yates on the Philox
 * shuffle stream keyed by (seed, epoch); FF_PERMUTATION_TORCH,
 * torch.randperm(n) after manual_seed(seed + epoch), as DistributedSampler
 * draws it (n <= FF__TORCH_RANDPERM_MAX_N). `perm` is scratch for n values. */
void ff__sampler_indices(size_t n, int shuffle, int permutation, uint64_t seed, uint64_t epoch, int rank,
                         int world_size, int drop_last, int64_t *perm, int64_t *out);

/* timm.data.distributed_sampler.RepeatAugSampler (DeiT's RASampler) with
 * num_repeats = repeats (an integer >= 1) and its default selected_round
 * (256) and selected_ratio (world_size): the positions per rank. */
size_t ff__sampler_ra_num_samples(size_t n, int world_size, int repeats);

/* Its index list for `rank` in `epoch`: the permutation as above (torch's
 * is torch.randperm after manual_seed(seed + epoch); RepeatAugSampler seeds
 * with the epoch alone, i.e. seed 0), each index repeated `repeats` times in
 * a row, every world_size-th position from rank (wrapping around), the
 * first ff__sampler_ra_num_samples. out_repeat[k] gets which copy (0 ..
 * repeats - 1) out[k] is. `perm` is scratch for n values. */
void ff__sampler_ra_indices(size_t n, int shuffle, int permutation, uint64_t seed, uint64_t epoch, int rank,
                            int world_size, int repeats, int64_t *perm, int64_t *out, uint32_t *out_repeat);

#endif
