/* hue.h — torchvision's adjust_hue on one uint8 RGB pixel (transforms v1,
 * _functional_tensor.adjust_hue), shared by the CPU op (ops/color.c) and the
 * device kernels.
 *
 * torchvision converts the image to float32 (x / 255), to HSV (_rgb2hsv),
 * adds the factor to the hue modulo 1, converts back (_hsv2rgb) and to
 * uint8 by trunc(x * 255.999). Every step below is one float32 operation of
 * that code, in its order and unfused (-ffp-contract=off, --fmad=false):
 * h = fmod((hr + hg + hb) / 6 + 1, 1) where each of hr, hg, hb is a branch's
 * value times its 0/1 mask; (h + factor) % 1 is Python's remainder (the sign
 * of the divisor: fmod, plus 1 when negative); the einsum of the six-way
 * mask picks one of (v, q, p, p, t, v) etc. exactly (the other products
 * are zeros). */
#ifndef FF_KERNELS_HUE_H
#define FF_KERNELS_HUE_H

#include <math.h>
#include <stdint.h>

#include "kernels/hd.h"

FF_HD static inline float ff__clamp01(float v) {
  v = v > 0.0f ? v : 0.0f;
  return v < 1.0f ? v : 1.0f;
}

/* fmod(x, 1) for finite x: x - trunc(x) is exact (the fraction of a float
 * is a float), so this is fmodf's value without its library call. */
FF_HD static inline float ff__fmod1(float x) { return x - truncf(x); }

/* out = adjust_hue(in, hue) for one pixel; hue is the factor rounded to float32. */
FF_HD static inline void ff__hue_u8(const uint8_t *in, float hue, uint8_t *out) {
  float r = (float)in[0] / 255.0f, g = (float)in[1] / 255.0f, b = (float)in[2] / 255.0f;
  float maxc = r > g ? r : g, minc = r < g ? r : g;
  maxc = maxc > b ? maxc : b, minc = minc < b ? minc : b;
  int eqc = maxc == minc;
  float cr = maxc - minc;
  float s = cr / (eqc ? 1.0f : maxc);
  float crd = eqc ? 1.0f : cr;
  float rc = (maxc - r) / crd, gc = (maxc - g) / crd, bc = (maxc - b) / crd;
  float hr = maxc == r ? bc - gc : 0.0f;
  float hg = maxc == g && maxc != r ? (2.0f + rc) - bc : 0.0f;
  float hb = maxc != g && maxc != r ? (4.0f + gc) - rc : 0.0f;
  float h = ff__fmod1(((hr + hg) + hb) / 6.0f + 1.0f);
  h = ff__fmod1(h + hue);
  if (h < 0.0f) h = h + 1.0f;
  float h6 = h * 6.0f;
  float fi = floorf(h6);
  float f = h6 - fi;
  int i = (int)fi % 6;
  float v = maxc;
  float p = ff__clamp01(v * (1.0f - s));
  float q = ff__clamp01(v * (1.0f - s * f));
  float t = ff__clamp01(v * (1.0f - s * (1.0f - f)));
  float o[3];
  switch (i) {
  case 0: o[0] = v, o[1] = t, o[2] = p; break;
  case 1: o[0] = q, o[1] = v, o[2] = p; break;
  case 2: o[0] = p, o[1] = v, o[2] = t; break;
  case 3: o[0] = p, o[1] = q, o[2] = v; break;
  case 4: o[0] = t, o[1] = p, o[2] = v; break;
  default: o[0] = v, o[1] = p, o[2] = q; break;
  }
  for (int c = 0; c < 3; c++)
    out[c] = (uint8_t)(int)(o[c] * (float)255.999);
}

#endif
