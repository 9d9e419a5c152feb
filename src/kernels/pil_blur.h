/* pil_blur.h — Pillow's ImageFilter.GaussianBlur(radius) (Pillow 13) as
 * integer arithmetic shared by the CPU op (ops/pil_blur.c), the emulated
 * device and the CUDA kernels (kernels/stage.h). The spec, in our words
 * (docs/pillow-semantics.md has it with the measured error):
 *
 * GaussianBlur is three passes of an "extended" box filter along x, then
 * three along y, on the uint8 values of each channel separately; each pass
 * rounds to uint8. Radius 0 returns the image unchanged.
 *
 * The box. The radius (Pillow's name for the Gaussian's standard deviation
 * sigma, handed to C as a float32) gives each pass a fractional box radius
 * r + f, from Gwosdek et al., "Theoretical foundations of Gaussian
 * convolution by extended box filtering" (SSVM 2011), in float32 but for
 * two steps in double: s2 = sigma * sigma / 3; L = sqrt(12 s2 + 1) (double,
 * stored as float32); l = floor((L - 1) / 2) (double, stored as float32);
 * a = (2l + 1) * (l (l + 1) - 3 s2) / (6 (s2 - (l + 1)^2)); box radius
 * R = l + a. R = 0 skips the axis (both axes: a copy).
 *
 * The weights, in 8.24 fixed point (2^24 = 1): r = int(R); each of the 2r+1
 * values of the box weighs ww = uint32(2^24 / (2R + 1)) (the division in
 * float32, truncated), and the two values just outside it (r + 1 away)
 * weigh fw = (2^24 - (2r + 1) ww) / 2 (uint32 arithmetic, truncated).
 *
 * One pass along a line v[0..n-1], positions outside clamped to the ends:
 *   out[x] = (ww * sum(v[x-r .. x+r]) + fw * (v[x-r-1] + v[x+r+1]) + 2^23) >> 24
 * with every product and sum in uint32 (wrapping, as Pillow's does: it
 * never wraps for the weights a radius gives). Pillow keeps the box sum as
 * a running sum (start at the box around x = -1, then add the value
 * entering and subtract the one leaving at each step); the sum is an
 * integer, so any order gives the same value and the same bits. */
#ifndef FF_KERNELS_PIL_BLUR_H
#define FF_KERNELS_PIL_BLUR_H

#include <stdint.h>

#include "kernels/hd.h"

#define FF__PIL_BLUR_PASSES 3         /* ImageFilter.GaussianBlur's passes per axis */
#define FF__PIL_BLUR_MAX_RADIUS 1e6   /* the largest radius taken (the box sums stay far from 2^32) */

/* One axis's extended box (ops/pil_blur.c, ff__pil_blur_box, makes it on
 * the host from the radius). */
typedef struct ff__pil_box {
  int32_t on;     /* 0: the box radius is 0 and the axis is left as it is */
  int32_t radius; /* r, the whole part of the box radius */
  uint32_t ww;    /* the weight of each of the 2r + 1 values of the box, 2^24 = 1 */
  uint32_t fw;    /* the weight of each of the two values r + 1 away */
} ff__pil_box;

FF_HD static inline long ff__pil_box_clamp(long v, long last) { return v < 0 ? 0 : v > last ? last : v; }

/* One output value of box b from the sum of the 2r + 1 values of the box
 * and the sum of the two values r + 1 away (Pillow's rounding). */
FF_HD static inline uint8_t ff__pil_box_value(const ff__pil_box *b, uint32_t box_sum, uint32_t edge_sum) {
  return (uint8_t)((box_sum * b->ww + edge_sum * b->fw + (1u << 23)) >> 24);
}

/* One pass of box b along `lanes` lines side by side: the value of lane l
 * at position x is in[x * in_along + l] (out likewise, with out_along);
 * n positions. acc holds `lanes` running sums. in and out are distinct. */
FF_HD static inline void ff__pil_box_pass(const ff__pil_box *b, const uint8_t *in, long in_along, uint8_t *out,
                                          long out_along, long n, int lanes, uint32_t *acc) {
  long r = b->radius, last = n - 1, m = r + 1 < n ? r + 1 : n;
  for (int l = 0; l < lanes; l++) { /* the box around x = -1: r + 1 copies of v[0], v[0..r-1] clamped */
    uint32_t a = (uint32_t)(r + 1) * in[l] + (uint32_t)(r + 1 - m) * in[last * in_along + l];
    for (long k = 0; k + 1 < m; k++) a += in[k * in_along + l];
    acc[l] = a;
  }
  for (long x = 0; x < n; x++) {
    const uint8_t *leave = in + ff__pil_box_clamp(x - r - 1, last) * in_along;
    const uint8_t *enter = in + ff__pil_box_clamp(x + r, last) * in_along;
    const uint8_t *far = in + ff__pil_box_clamp(x + r + 1, last) * in_along;
    uint8_t *o = out + x * out_along;
    for (int l = 0; l < lanes; l++) {
      uint32_t a = acc[l] + ((uint32_t)enter[l] - (uint32_t)leave[l]);
      acc[l] = a;
      o[l] = ff__pil_box_value(b, a, (uint32_t)leave[l] + (uint32_t)far[l]);
    }
  }
}

#endif
