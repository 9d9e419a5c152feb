/* color.h — per-pixel arithmetic of the colour augmentation ops (brightness,
 * color, contrast, sharpness, posterize, solarize, autocontrast, invert) and
 * the 256-entry tables of the table ops (equalize included, and how a run of
 * them composes), shared by the CPU ops (ops/color.c) and the device kernels.
 *
 * Every formula is torchvision's (transforms v1) uint8 tensor path (spec sections 1.1,
 * 1.2 and 2.7-2.15): each float32 multiply and add is a separate, rounded
 * operation — never fused — which is why the library is compiled with
 * -ffp-contract=off (and device code with --fmad=false). Float results go
 * back to uint8 by clamping to [0, 255] and truncating. The helpers are
 * branch-free so that loops over them vectorise. */
#ifndef FF_KERNELS_COLOR_H
#define FF_KERNELS_COLOR_H

#include <stdint.h>

#include "kernels/hd.h"
#include "kernels/aug.h"

/* The two weights of blend(X, Y, r) = r*X + (1 - r)*Y (spec 1.1): r is a
 * Python float; 1 - r is formed in double, and each is then rounded to
 * float32. */
typedef struct ff__blend_w {
  float a, b;
} ff__blend_w;

FF_HD static inline ff__blend_w ff__blend_weights(double r) {
  ff__blend_w w = {(float)r, (float)(1.0 - r)};
  return w;
}

/* Clamp to [0, 255], then truncate toward zero (NaN gives 0). */
FF_HD static inline uint8_t ff__clamp_trunc_u8(float v) {
  v = v > 0.0f ? v : 0.0f;
  v = v < 255.0f ? v : 255.0f;
  return (uint8_t)(int)v;
}

/* blend(x, y) = trunc(clamp(f32(f32(a*x) + f32(b*y)))): two rounded
 * products and a rounded sum, no fma (spec 1.1). y is a pixel or, for
 * contrast, the float32 mean. */
FF_HD static inline uint8_t ff__blend_u8(ff__blend_w w, float x, float y) {
  float p = w.a * x;
  float q = w.b * y;
  return ff__clamp_trunc_u8(p + q);
}

/* rgb_to_grayscale on uint8 (spec 1.2): (0.2989 R + 0.587 G) + 0.114 B in
 * float32, each product and sum rounded, truncated. The weights sum to
 * 0.9999, so gray(v, v, v) = v - 1 for v >= 1. The weights are Python
 * floats rounded to float32, hence (float)0.2989 (double, then float)
 * rather than 0.2989f. */
FF_HD static inline uint8_t ff__gray_u8(uint8_t r, uint8_t g, uint8_t b) {
  float sr = (float)0.2989 * (float)r;
  float sg = (float)0.587 * (float)g;
  float sb = (float)0.114 * (float)b;
  return (uint8_t)(int)((sr + sg) + sb);
}

/* Sharpness's smoothed interior pixel (spec 2.10): s = the sum of the 3x3
 * neighbourhood + 4 * centre (kernel of ones, 5 at the centre, over 13).
 * torch rounds s/13 half to even in float32; s/13 is never a tie, so
 * floor((2s + 13) / 26) is the same value, exactly. 0 <= s <= 13 * 255. */
FF_HD static inline uint8_t ff__sharp_smooth_u8(int s) { return (uint8_t)((2 * s + 13) / 26); }

/* Posterize (spec 2.11): the AND mask keeping the top `bits` bits; bits 0
 * gives 0 (all black), bits 8 gives 0xFF (identity). */
FF_HD static inline uint8_t ff__posterize_mask(int bits) { return (uint8_t)((0xFF << (8 - bits)) & 0xFF); }

/* Solarize (spec 2.12): pixels at or above the threshold are inverted; the
 * comparison is float32, with the threshold already rounded to float32. */
FF_HD static inline uint8_t ff__solarize_u8(uint8_t x, float threshold_f32) {
  return (float)x < threshold_f32 ? x : (uint8_t)(255 - x);
}

/* Invert (spec 2.15). */
FF_HD static inline uint8_t ff__invert_u8(uint8_t x) { return (uint8_t)(255 - x); }

/* AutoContrast's scale for a channel with minimum lo < maximum hi:
 * torchvision writes 255.0 / (hi - lo) with a float32 tensor on the right,
 * which torch evaluates as reciprocal(hi - lo) * 255 — two rounded float32
 * steps, not the single division spec 2.13 states (lo = 0, hi = 7 maps 7 to
 * 255 in torch, to 254 with a division). */
FF_HD static inline float ff__autocontrast_scale(int lo, int hi) {
  float reciprocal = 1.0f / (float)(hi - lo);
  return reciprocal * 255.0f;
}

/* AutoContrast's output: trunc(clamp(f32((x - lo) * scale))). The maximum
 * can come out as 254 (e.g. lo = 0, hi = 41). */
FF_HD static inline uint8_t ff__autocontrast_u8(uint8_t x, int lo, float scale) {
  return ff__clamp_trunc_u8((float)(x - lo) * scale);
}

/* Contrast's mean (spec 2.9): f32(S) / f32(N) with S the exact integer sum
 * of the gray values and N the pixel count. torch sums in float32, which
 * equals S while S < 2^24 (any image up to 256x256); above that its mean can
 * differ by an ulp. */
FF_HD static inline float ff__contrast_mean(uint64_t gray_sum, uint64_t pixels) {
  return (float)(int64_t)gray_sum / (float)pixels;
}

/* ------------------------------------------------------------ tables */

/* Whether a table op derives its table from the image's histogram. */
FF_HD static inline int ff__lut_needs_histogram(ff__aug_op op) {
  return op == FF__AUG_AUTOCONTRAST || op == FF__AUG_EQUALIZE;
}

FF_HD static inline void ff__lut_identity(uint8_t t[256]) {
  for (int v = 0; v < 256; v++)
    t[v] = (uint8_t)v;
}

/* t := next ∘ t */
FF_HD static inline void ff__lut_compose(uint8_t t[256], const uint8_t next[256]) {
  for (int v = 0; v < 256; v++)
    t[v] = next[t[v]];
}

/* Entry v of the table of a value-only op (brightness, posterize,
 * solarize, invert); entry by entry so that a GPU block builds a table
 * with one thread per value. */
FF_HD static inline uint8_t ff__lut_value_at(const ff__aug *a, int v) {
  switch (a->op) {
  case FF__AUG_BRIGHTNESS: /* blend(X, 0, f); the zero term adds exactly 0 */
    return ff__blend_u8(ff__blend_weights(a->arg), (float)v, 0.0f);
  case FF__AUG_POSTERIZE: {
    int bits = a->arg <= 0.0 ? 0 : a->arg >= 8.0 ? 8 : (int)a->arg;
    return (uint8_t)(v & ff__posterize_mask(bits));
  }
  case FF__AUG_SOLARIZE: return ff__solarize_u8((uint8_t)v, (float)a->arg);
  case FF__AUG_INVERT: return ff__invert_u8((uint8_t)v);
  default: return (uint8_t)v;
  }
}

/* The table of a value-only op. */
FF_HD static inline void ff__lut_value(const ff__aug *a, uint8_t t[256]) {
  for (int v = 0; v < 256; v++)
    t[v] = ff__lut_value_at(a, v);
}

/* AutoContrast's entry v for a channel whose lowest and highest values
 * present are lo and hi (lo >= hi: constant or empty, unchanged). */
FF_HD static inline uint8_t ff__autocontrast_at(int v, int lo, int hi) {
  return lo >= hi ? (uint8_t)v : ff__autocontrast_u8((uint8_t)v, lo, ff__autocontrast_scale(lo, hi));
}

/* AutoContrast's table for a channel with histogram h (spec 2.13). */
FF_HD static inline void ff__lut_autocontrast(const uint64_t h[256], uint8_t t[256]) {
  int lo = 0, hi = 255;
  while (lo < 256 && !h[lo])
    lo++;
  while (hi > lo && !h[hi])
    hi--;
  for (int v = 0; v < 256; v++)
    t[v] = ff__autocontrast_at(v, lo, hi);
}

/* Equalize's entry v (v > 0) from the pixels below v and the step (> 0). */
FF_HD static inline uint8_t ff__equalize_at(uint64_t below, uint64_t step) {
  uint64_t q = (below + step / 2) / step;
  return (uint8_t)(q < 255 ? q : 255);
}

/* Equalize's table for a channel with histogram h (spec 2.14, integer
 * arithmetic): step = (pixels not at the maximum value) / 255; step 0 leaves
 * the channel unchanged; lut[v] = min(255, (count below v + step/2) / step). */
FF_HD static inline void ff__lut_equalize(const uint64_t h[256], uint8_t t[256]) {
  uint64_t n = 0;
  int vmax = -1;
  for (int v = 0; v < 256; v++) {
    n += h[v];
    if (h[v]) vmax = v;
  }
  uint64_t step = vmax < 0 ? 0 : (n - h[vmax]) / 255;
  if (step == 0) {
    ff__lut_identity(t);
    return;
  }
  uint64_t below = 0;
  t[0] = 0;
  for (int v = 1; v < 256; v++) {
    below += h[v - 1];
    t[v] = ff__equalize_at(below, step);
  }
}

/* The composed table of one channel for a run of n table ops: each value op
 * composes its table; each histogram op (autocontrast, equalize) builds its
 * table from the channel's histogram `hist` (of the image before the run;
 * NULL when no op of the run needs it) pushed through the composition so
 * far — the histogram of the image it would see run one by one. `now` and
 * `t` are scratch (256 entries each): on a GPU they live in global memory,
 * since per-thread arrays would make the driver reserve local memory for
 * every resident thread. */
FF_HD static inline void ff__lut_run_channel(const ff__aug *ops, int n, const uint32_t *hist, uint8_t lut[256],
                                             uint64_t now[256], uint8_t t[256]) {
  ff__lut_identity(lut);
  for (int i = 0; i < n; i++) {
    if (!ff__lut_needs_histogram(ops[i].op)) {
      ff__lut_value(&ops[i], t);
    } else {
      for (int v = 0; v < 256; v++)
        now[v] = 0;
      for (int v = 0; v < 256; v++)
        now[lut[v]] += hist[v];
      if (ops[i].op == FF__AUG_AUTOCONTRAST)
        ff__lut_autocontrast(now, t);
      else
        ff__lut_equalize(now, t);
    }
    ff__lut_compose(lut, t);
  }
}

#endif
