/* philox.h — the counter-based RNG every random draw comes from.
 *
 * Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
 * SC'11): a keyed bijection of a 128-bit counter. A stream is identified by
 * its key (the seed, and a domain constant separating the sampler's draws from
 * the augmentation draws) and the high counter words (sample index, epoch);
 * the low word counts draws. So a sample's parameters depend only on
 * (seed, epoch, index) — never on which thread or device runs it. */
#ifndef FF_CORE_PHILOX_H
#define FF_CORE_PHILOX_H

#include <stdint.h>

#include "kernels/hd.h"

typedef struct ff__philox {
  uint32_t key[2];
  uint32_t ctr[4];  /* ctr[0] advances per block of four words */
  uint32_t out[4];
  int used;         /* words of out[] already handed out (4 = none left) */
} ff__philox;

/* Streams are separated by domain: */
enum { FF__RNG_AUGMENT = 0x41554721u, FF__RNG_SHUFFLE = 0x53485546u, FF__RNG_BATCH = 0x42415443u };

/* The key schedule's increments (Weyl sequence) per round. */
enum { FF__PHILOX_W0 = 0x9E3779B9u, FF__PHILOX_W1 = 0xBB67AE85u };

/* One Philox4x32 round on the counter words (c0, c1, c2, c3) with the
 * round's key (k0, k1); a caller making many blocks at once (normals.h)
 * runs each round over all of them, which vectorises. */
FF_HD static inline void ff__philox_round(uint32_t *c0, uint32_t *c1, uint32_t *c2, uint32_t *c3, uint32_t k0,
                                          uint32_t k1) {
  uint64_t p0 = (uint64_t)0xD2511F53u * *c0, p1 = (uint64_t)0xCD9E8D57u * *c2;
  uint32_t n0 = (uint32_t)(p1 >> 32) ^ *c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ *c3 ^ k1;
  *c1 = (uint32_t)p1;
  *c3 = (uint32_t)p0;
  *c0 = n0;
  *c2 = n2;
}

/* One Philox4x32-10 block: out = Philox(key, ctr). */
FF_HD static inline void ff__philox4x32_10(const uint32_t key_in[2], const uint32_t ctr_in[4],
                                           uint32_t out[4]) {
  uint32_t k0 = key_in[0], k1 = key_in[1];
  uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
  for (int round = 0; round < 10; round++, k0 += FF__PHILOX_W0, k1 += FF__PHILOX_W1)
    ff__philox_round(&c0, &c1, &c2, &c3, k0, k1);
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* Starts the stream (seed, domain, index, epoch). */
void ff__philox_init(ff__philox *rng, uint64_t seed, uint32_t domain, uint64_t index,
                     uint64_t epoch);
uint32_t ff__philox_u32(ff__philox *rng);
/* Uniform float in [lo, hi): 24 random bits, computed in float32 as torch's
 * `torch.empty(1).uniform_(lo, hi)` does: lo + u * (hi - lo). */
float ff__philox_uniform(ff__philox *rng, float lo, float hi);
/* Uniform integer in [lo, hi] (inclusive, hi >= lo), without modulo bias. */
int64_t ff__philox_randint(ff__philox *rng, int64_t lo, int64_t hi);

#endif
