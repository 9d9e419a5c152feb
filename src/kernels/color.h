/* color.h — per-pixel arithmetic of the colour augmentation ops (brightness,
 * color, contrast, sharpness, posterize, solarize, autocontrast, invert),
 * shared by the CPU ops (ops/color.c) and the device kernels.
 *
 * Every formula is torchvision 0.14's uint8 tensor path (spec sections 1.1,
 * 1.2 and 2.7-2.15): each float32 multiply and add is a separate, rounded
 * operation — never fused — which is why the library is compiled with
 * -ffp-contract=off (and device code with --fmad=false). Float results go
 * back to uint8 by clamping to [0, 255] and truncating. The helpers are
 * branch-free so that loops over them vectorise. */
#ifndef FF_KERNELS_COLOR_H
#define FF_KERNELS_COLOR_H

#include <stdint.h>

#include "kernels/hd.h"

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

#endif
