/* mt19937.h — the Mersenne Twister MT19937 (Matsumoto and Nishimura, ACM
 * TOMACS 8(1), 1998), 32-bit output, seeded by its standard recurrence. It
 * is torch's CPU generator: torch.Generator().manual_seed(s) seeds it with
 * the low 32 bits of s, and its random() is one 32-bit output. The sampler
 * uses it to reproduce torch.randperm, so that an order can match
 * DistributedSampler's sample for sample. */
#ifndef FF_CORE_MT19937_H
#define FF_CORE_MT19937_H

#include <stdint.h>

typedef struct ff__mt19937 {
  uint32_t state[624];
  int next; /* index of the next state word to temper; 624: regenerate first */
} ff__mt19937;

void ff__mt19937_seed(ff__mt19937 *mt, uint32_t seed);
uint32_t ff__mt19937_u32(ff__mt19937 *mt);

#endif
