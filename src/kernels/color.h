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
 * branch-free so that loops over them vectorise.
 *
 * The *_v2 helpers are torchvision.transforms.v2's arithmetic (its
 * functional/_color.py, torchvision 0.29): v2 writes its blends and its
 * grayscale as x.mul(a).add_(y, alpha=b), which torch's CPU kernel computes
 * as one fused multiply-add onto the rounded product (ff__fma_f32, correctly
 * rounded everywhere), and derives autocontrast's scale another way. Each
 * was checked against torchvision 0.29 on torch 2.15: gray on all 2^24 RGB
 * triples, autocontrast on every (min, max, value). */
#ifndef FF_KERNELS_COLOR_H
#define FF_KERNELS_COLOR_H

#include <stdint.h>

#include "kernels/hd.h"
#include "kernels/aug.h"
#include "kernels/pixel.h"

/* The two weights of blend(X, Y, r) = r*X + (1 - r)*Y (spec 1.1): r is a
 * Python float; 1 - r is formed in double, and each is then rounded to
 * float32. */
typedef struct ff__blend_w {
  float a, b;
  int v2; /* ff__aug.v2: the blends below in v2's arithmetic */
} ff__blend_w;

FF_HD static inline ff__blend_w ff__blend_weights(double r) {
  ff__blend_w w = {(float)r, (float)(1.0 - r), 0};
  return w;
}

/* The weights of a blend op (color, contrast, sharpness: arg is the factor)
 * in a's semantics. */
FF_HD static inline ff__blend_w ff__blend_weights_of(const ff__aug *a) {
  ff__blend_w w = ff__blend_weights(a->arg);
  w.v2 = a->v2;
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

/* v2's _blend(x, y, r) = x.mul(r).add_(y, alpha=1 - r): the product r*x
 * rounded, then fma(y, 1 - r, that), clamped and truncated. */
FF_HD static inline uint8_t ff__blend_v2_u8(ff__blend_w w, float x, float y) {
  return ff__clamp_trunc_u8(ff__fma_f32(y, w.b, w.a * x));
}

/* ff__blend_u8 or ff__blend_v2_u8, as w says. */
FF_HD static inline uint8_t ff__blend_sem_u8(ff__blend_w w, float x, float y) {
  return w.v2 ? ff__blend_v2_u8(w, x, y) : ff__blend_u8(w, x, y);
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

/* v2's gray for saturation and contrast: r.mul(0.2989).add_(g,
 * alpha=0.587).add_(b, alpha=0.114), two fused multiply-adds, floored
 * (differs from ff__gray_u8 on 21 of the 2^24 triples). */
FF_HD static inline uint8_t ff__gray_v2_u8(uint8_t r, uint8_t g, uint8_t b) {
  float s = ff__fma_f32((float)g, (float)0.587, (float)0.2989 * (float)r);
  return (uint8_t)(int)ff__fma_f32((float)b, (float)0.114, s);
}

FF_HD static inline uint8_t ff__gray_sem_u8(int v2, uint8_t r, uint8_t g, uint8_t b) {
  return v2 ? ff__gray_v2_u8(r, g, b) : ff__gray_u8(r, g, b);
}

/* Sharpness's smoothed interior pixel (spec 2.10): s = the sum of the 3x3
 * neighbourhood + 4 * centre (kernel of ones, 5 at the centre, over 13).
 * torch rounds s/13 half to even in float32; s/13 is never a tie, so
 * floor((2s + 13) / 26) is the same value, exactly. 0 <= s <= 13 * 255. */
FF_HD static inline uint8_t ff__sharp_smooth_u8(int s) { return (uint8_t)((2 * s + 13) / 26); }

/* v2's sharpness of an interior pixel x with smoothed value s:
 * x.add_(s - x, alpha=1 - f), one fused multiply-add (v2 leaves the border
 * pixels as they are, where v1 blends them with themselves). */
FF_HD static inline uint8_t ff__sharp_v2_u8(ff__blend_w w, int x, int s) {
  return ff__clamp_trunc_u8(ff__fma_f32((float)(s - x), w.b, (float)x));
}

/* Sharpness's output of x with smoothed value s (s = x on the border) in
 * w's semantics. */
FF_HD static inline uint8_t ff__sharp_sem_u8(ff__blend_w w, int x, int s, int border) {
  if (!w.v2) return ff__blend_u8(w, (float)x, (float)s);
  return border ? (uint8_t)x : ff__sharp_v2_u8(w, x, s);
}

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

/* v2's AutoContrast: inv = f32(f32(hi - lo) * f32(1 / 255)), then
 * trunc(clamp(f32(x - lo) / inv)) (equal to torchvision 0.29's on every
 * lo < hi and lo <= x <= hi; v1's differs on 101,483 of those 2,828,800,
 * in 24,565 of the 32,640 (lo, hi) pairs). */
FF_HD static inline float ff__autocontrast_inv_v2(int lo, int hi) { return (float)(hi - lo) * (float)(1.0 / 255.0); }

FF_HD static inline uint8_t ff__autocontrast_v2_u8(uint8_t x, int lo, float inv) {
  return ff__clamp_trunc_u8((float)(x - lo) / inv);
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
 * present are lo and hi (lo >= hi: constant or empty, unchanged; v2:
 * transforms.v2's arithmetic). */
FF_HD static inline uint8_t ff__autocontrast_at(int v, int lo, int hi, int v2) {
  if (lo >= hi) return (uint8_t)v;
  if (v2) return ff__autocontrast_v2_u8((uint8_t)v, lo, ff__autocontrast_inv_v2(lo, hi));
  return ff__autocontrast_u8((uint8_t)v, lo, ff__autocontrast_scale(lo, hi));
}

/* AutoContrast's table for a channel with histogram h (spec 2.13; v2:
 * transforms.v2's arithmetic). */
FF_HD static inline void ff__lut_autocontrast(const uint64_t h[256], uint8_t t[256], int v2) {
  int lo = 0, hi = 255;
  while (lo < 256 && !h[lo])
    lo++;
  while (hi > lo && !h[hi])
    hi--;
  for (int v = 0; v < 256; v++)
    t[v] = ff__autocontrast_at(v, lo, hi, v2);
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
        ff__lut_autocontrast(now, t, ops[i].v2);
      else
        ff__lut_equalize(now, t);
    }
    ff__lut_compose(lut, t);
  }
}

#endif
