/* mt19937.c — MT19937, as specified by its authors: the seeding recurrence
 * x[i] = 1812433253 * (x[i-1] ^ (x[i-1] >> 30)) + i, the twist of 624 words
 * with the matrix 0x9908b0df, and the tempering shifts and masks. */
#include "core/mt19937.h"

enum { N = 624, M = 397 };

void ff__mt19937_seed(ff__mt19937 *mt, uint32_t seed) {
  mt->state[0] = seed;
  for (uint32_t i = 1; i < N; i++) mt->state[i] = 1812433253u * (mt->state[i - 1] ^ (mt->state[i - 1] >> 30)) + i;
  mt->next = N;
}

static void twist(ff__mt19937 *mt) {
  uint32_t *x = mt->state;
  for (int k = 0; k < N; k++) {
    uint32_t y = (x[k] & 0x80000000u) | (x[(k + 1) % N] & 0x7fffffffu);
    x[k] = x[(k + M) % N] ^ (y >> 1) ^ (y & 1 ? 0x9908b0dfu : 0);
  }
  mt->next = 0;
}

uint32_t ff__mt19937_u32(ff__mt19937 *mt) {
  if (mt->next >= N) twist(mt);
  uint32_t y = mt->state[mt->next++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}
