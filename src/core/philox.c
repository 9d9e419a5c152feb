/* philox.c — stream handling around the Philox4x32-10 block function: words,
 * uniform floats and unbiased bounded integers. */
#include "core/philox.h"

void ff__philox_init(ff__philox *rng, uint64_t seed, uint32_t domain, uint64_t index,
                     uint64_t epoch) {
  rng->key[0] = (uint32_t)seed;
  rng->key[1] = (uint32_t)(seed >> 32) ^ domain;
  rng->ctr[0] = 0;
  rng->ctr[1] = (uint32_t)index;
  rng->ctr[2] = (uint32_t)(index >> 32);
  rng->ctr[3] = (uint32_t)epoch ^ ((uint32_t)(epoch >> 32) * 0x9E3779B9u);
  rng->used = 4;
}

uint32_t ff__philox_u32(ff__philox *rng) {
  if (rng->used == 4) {
    ff__philox4x32_10(rng->key, rng->ctr, rng->out);
    rng->ctr[0]++;
    rng->used = 0;
  }
  return rng->out[rng->used++];
}

float ff__philox_uniform(ff__philox *rng, float lo, float hi) {
  float u = (float)(ff__philox_u32(rng) >> 8) * (1.0f / 16777216.0f);
  return lo + u * (hi - lo);
}

int64_t ff__philox_randint(ff__philox *rng, int64_t lo, int64_t hi) {
  uint64_t range = (uint64_t)(hi - lo) + 1; /* 0 means the full 2^64 range */
  uint64_t x = ((uint64_t)ff__philox_u32(rng) << 32) | ff__philox_u32(rng);
  if (range == 0) return (int64_t)x;
  /* Rejecting the 2^64 mod range lowest values leaves a multiple of range
   * equally likely values, so the modulo is unbiased. */
  uint64_t threshold = (0 - range) % range;
  while (x < threshold) x = ((uint64_t)ff__philox_u32(rng) << 32) | ff__philox_u32(rng);
  return lo + (int64_t)(x % range);
}
