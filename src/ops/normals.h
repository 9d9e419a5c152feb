/* normals.h — standard normal float32 values from a Philox stream: the
 * per-value noise of random_erasing (value=random, mode=pixel) and its
 * per-channel fills (mode=rand).
 *
 * Box–Muller on Philox4x32-10 words, with our own float32 logarithm and
 * sine/cosine (range reduction and a polynomial each, of plain products
 * and sums; the build contracts none of them into FMA) in place of the
 * host's libm, whose results differ between libm versions and between
 * glibc's per-CPU variants. Every step is an IEEE float32 operation or an
 * integer one, applied value by value in fixed-length loops, so a
 * vectorised build (the AVX2 clone, SSE2) gives the same floats as a scalar
 * one, on every host: the CPU worker and the host lowering a device sample
 * make the same noise.
 *
 * The stream comes in chunks of FF__NORMALS_CHUNK values, chunk k from
 * Philox blocks 32k..32k+31 of the stream: block b's words (w0, w1) make
 * pair b, (w2, w3) pair 32 + b; pair j gives value j (radius times cosine)
 * and value 64 + j (radius times sine). The first n values of the stream
 * do not depend on n. */
#ifndef FF_OPS_NORMALS_H
#define FF_OPS_NORMALS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/philox.h"

enum { FF__RNG_ERASE = 0x45524153u, FF__NORMALS_CHUNK = 128 };

static inline uint32_t ff__bits_f32(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static inline float ff__f32_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* Chunk `chunk` of the stream (key, ctr) into out[FF__NORMALS_CHUNK]; both
 * this and ff__normals are inlined, so that a caller built for AVX2 (an
 * FF_FMA_CLONES function) runs them in AVX2. */
static inline __attribute__((always_inline)) void
ff__normals_chunk(const uint32_t key[2], const uint32_t ctr[4], uint32_t chunk, float *out) {
  enum { BLOCKS = FF__NORMALS_CHUNK / 4, PAIRS = FF__NORMALS_CHUNK / 2 };
  /* the blocks' words side by side, each round over all of them: pair b
   * is (c0[b], c1[b]) = u1[b], u2[b]; pair 32 + b is (c2[b], c3[b]) */
  uint32_t u1[PAIRS], u2[PAIRS], *c0 = u1, *c1 = u2, *c2 = u1 + BLOCKS, *c3 = u2 + BLOCKS;
  for (int b = 0; b < BLOCKS; b++)
    c0[b] = ctr[0] + chunk * BLOCKS + (uint32_t)b, c1[b] = ctr[1], c2[b] = ctr[2], c3[b] = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++, k0 += FF__PHILOX_W0, k1 += FF__PHILOX_W1)
    for (int b = 0; b < BLOCKS; b++)
      ff__philox_round(c0 + b, c1 + b, c2 + b, c3 + b, k0, k1);
  for (int j = 0; j < PAIRS; j++) {
    /* radius sqrt(-2 ln u), u = (24 bits + 1) / 2^24 in (0, 1]: up to 5.77.
     * ln u = e ln 2 + ln m, m in [sqrt(1/2), sqrt(2)): ln(1 + x), x = m - 1
     * (exact), as x - x²/2 + x³ P(x); ln 2 in two parts (Cephes' logf). */
    uint32_t ub = ff__bits_f32(((float)(u1[j] >> 8) + 1.0f) * (1.0f / 16777216.0f));
    int32_t e = (int32_t)(ub - 0x3F3504F3u) >> 23;
    float x = ff__f32_bits(ub - ((uint32_t)e << 23)) - 1.0f, fe = (float)e, z = x * x;
    float p = 7.0376836292e-2f;
    p = p * x + -1.1514610310e-1f;
    p = p * x + 1.1676998740e-1f;
    p = p * x + -1.2420140846e-1f;
    p = p * x + 1.4249322787e-1f;
    p = p * x + -1.6668057665e-1f;
    p = p * x + 2.0000714765e-1f;
    p = p * x + -2.4999993993e-1f;
    p = p * x + 3.3333331174e-1f;
    float y = x * z * p + fe * -2.12194440e-4f - 0.5f * z;
    float ln = (x + y) + fe * 0.693359375f;
    float r = sqrtf(-2.0f * ln);
    /* angle 2π t, t = 24 bits / 2^24: the nearest quarter turn q (integer
     * arithmetic, exact) and the rest a in [-π/4, π/4), whose sine and
     * cosine are polynomials (Cephes' sinf, cosf); the quarter turns swap
     * them and flip their signs. */
    int32_t t = (int32_t)(u2[j] >> 8), q = (t + (1 << 21)) >> 22;
    float a = (float)(t - (q << 22)) * (6.2831853f / 16777216.0f), a2 = a * a;
    float sn = a + a * a2 * ((-1.9515295891e-4f * a2 + 8.3321608736e-3f) * a2 + -1.6666654611e-1f);
    float cs = (1.0f - 0.5f * a2) +
               a2 * a2 * ((2.443315711809948e-5f * a2 + -1.388731625493765e-3f) * a2 + 4.166664568298827e-2f);
    uint32_t sb = ff__bits_f32(sn), cb = ff__bits_f32(cs), swap = 0u - (uint32_t)(q & 1);
    uint32_t sin_b = ((sb & ~swap) | (cb & swap)) ^ ((uint32_t)(q & 2) << 30);
    uint32_t cos_b = ((cb & ~swap) | (sb & swap)) ^ ((uint32_t)((q + 1) & 2) << 30);
    out[j] = r * ff__f32_bits(cos_b);
    out[PAIRS + j] = r * ff__f32_bits(sin_b);
  }
}

/* The first n values of the stream keyed by key. */
static inline __attribute__((always_inline)) void ff__normals(uint64_t key, size_t n, float *out) {
  ff__philox rng;
  ff__philox_init(&rng, key, FF__RNG_ERASE, 0, 0);
  for (size_t i = 0; i < n; i += FF__NORMALS_CHUNK) {
    uint32_t chunk = (uint32_t)(i / FF__NORMALS_CHUNK);
    if (n - i >= FF__NORMALS_CHUNK) {
      ff__normals_chunk(rng.key, rng.ctr, chunk, out + i);
    } else {
      float last[FF__NORMALS_CHUNK];
      ff__normals_chunk(rng.key, rng.ctr, chunk, last);
      memcpy(out + i, last, (n - i) * sizeof *out);
    }
  }
}

#endif
