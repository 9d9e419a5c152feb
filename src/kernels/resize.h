/* resize.h — torchvision's separable resize (spec 5.3) reduced to tap tables
 * and tap sums, shared by the CPU op (ops/geometry.c) and the device kernels
 * so both give the same bits.
 *
 * Each axis gets a table of taps (input index, weight) per output index;
 * with antialias the taps are a tent of half-width `scale` renormalised at
 * the borders (torch's _upsample_bilinear2d_aa), without it the two taps of
 * upsample_bilinear2d (align_corners=False). A sum starts from the first
 * tap's rounded product; up to four taps are fused onto it (torch's
 * kernel), longer windows are multiplied and added separately. The tables
 * are built on the host; the sums run on either side. */
#ifndef FF_KERNELS_RESIZE_H
#define FF_KERNELS_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/hd.h"
#include "kernels/pixel.h"

/* Taps of one axis: for output o, taps idx[o*max_taps+t], weight
 * w[o*max_taps+t], t < count[o]. */
typedef struct ff__resize_axis {
  int max_taps;
  int *count, *idx;
  float *w;
} ff__resize_axis;

/* Bytes of the tables of an axis with n_out outputs. */
FF_HD static inline size_t ff__resize_axis_bytes(int n_out, int max_taps) {
  return (size_t)n_out * (sizeof(int) + (size_t)max_taps * (sizeof(int) + sizeof(float)));
}

/* The filter of a resize, as the `antialias` argument of the functions
 * below and of the resize steps carries it: FF__RESIZE_ANTIALIAS alone is
 * torchvision's bilinear with antialias=True; with FF__RESIZE_BICUBIC it is
 * bicubic with antialias=True (torch's _upsample_bicubic2d_aa: Keys' cubic
 * with a = -0.5, support 2 scaled by the downscaling factor); 0 is bilinear
 * without antialias. (Bicubic exists only antialiased.) */
#define FF__RESIZE_ANTIALIAS 1
#define FF__RESIZE_BICUBIC 2

FF_HD static inline int ff__resize_max_taps(int n_in, int n_out, int antialias) {
  float scale = (float)n_in / (float)n_out;
  if (!antialias) return 2;
  float support = (antialias & FF__RESIZE_BICUBIC ? 2.0f : 1.0f) * (scale >= 1.0f ? scale : 1.0f);
  return (int)(support * 2.0f) + 3;
}

/* torch's antialias filters at distance x (upsample aa_filter): the tent,
 * or Keys' cubic convolution with a = -0.5, each operation in float32 in
 * torch's order. */
FF_HD static inline float ff__resize_filter(float x, int bicubic) {
  float ax = x < 0 ? -x : x;
  if (!bicubic) return ax < 1.0f ? 1.0f - ax : 0.0f;
  const float a = -0.5f;
  if (ax < 1.0f) return (((a + 2.0f) * ax - (a + 3.0f)) * ax) * ax + 1.0f;
  if (ax < 2.0f) return (((a * ax - 5.0f * a) * ax + 8.0f * a) * ax) - 4.0f * a;
  return 0.0f;
}

/* Points a (whose max_taps is set) at its tables in mem (ff__resize_axis_bytes). */
FF_HD static inline void ff__resize_axis_place(ff__resize_axis *a, void *mem, int n_out) {
  a->count = (int *)mem;
  a->idx = a->count + n_out;
  a->w = (float *)(a->idx + (size_t)n_out * a->max_taps);
}

/* torch's upsample_bilinear2d (align_corners=False) index and lambda rules,
 * over the source interval [lo, lo + len) of the n_in inputs (lo = 0,
 * len = n_in: torch's own); torch evaluates f32(x1*l1) first and fuses
 * x0*l0 onto it. */
FF_HD static inline void ff__resize_axis_bilinear(ff__resize_axis *a, int n_in, double lo, double len,
                                                 int n_out) {
  float scale = (float)len / (float)n_out;
  for (int o = 0; o < n_out; o++) {
    double src_d = lo + (double)scale * (o + 0.5) - 0.5;
    float src = src_d < 0 ? 0.0f : (float)src_d;
    int i0 = (int)src;
    int i1 = i0 < n_in - 1 ? i0 + 1 : i0;
    float l1 = src - (float)i0, l0 = 1.0f - l1;
    a->count[o] = 2;
    a->idx[o * 2] = i1, a->w[o * 2] = l1;
    a->idx[o * 2 + 1] = i0, a->w[o * 2 + 1] = l0;
  }
}

/* torch's _upsample_bilinear2d_aa / _upsample_bicubic2d_aa weights (the
 * filter renormalised at the borders of the n_in inputs), over the source
 * interval [lo, lo + len). */
FF_HD static inline void ff__resize_axis_antialias(ff__resize_axis *a, int n_in, double lo, double len,
                                                  int n_out, int bicubic) {
  float scale = (float)len / (float)n_out;
  float support = (bicubic ? 2.0f : 1.0f) * (scale >= 1.0f ? scale : 1.0f);
  float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
  for (int o = 0; o < n_out; o++) {
    float center = (float)(lo + (double)scale * (o + 0.5));
    int xmin = (int)((center - support) + 0.5f);
    int xend = (int)((center + support) + 0.5f);
    if (xmin < 0) xmin = 0;
    if (xend > n_in) xend = n_in;
    int n = xend - xmin;
    if (n > a->max_taps) n = a->max_taps;
    float *w = a->w + (size_t)o * a->max_taps;
    float total = 0.0f;
    for (int t = 0; t < n; t++) {
      float d = ((float)(xmin + t) - center + 0.5f) * invscale;
      w[t] = ff__resize_filter(d, bicubic);
      total += w[t];
    }
    for (int t = 0; t < n; t++) {
      if (total != 0.0f) w[t] /= total;
      a->idx[(size_t)o * a->max_taps + t] = xmin + t;
    }
    a->count[o] = n;
  }
}

/* The taps resampling [lo, lo + len) of n_in inputs to n_out outputs: a
 * box that is not the whole axis is the exact fractional region left by a
 * DCT-scaled decode (pipeline.h, ff__dct_box). */
FF_HD static inline void ff__resize_axis_build_box(ff__resize_axis *a, int n_in, double lo, double len,
                                                   int n_out, int antialias) {
  if (antialias)
    ff__resize_axis_antialias(a, n_in, lo, len, n_out, antialias & FF__RESIZE_BICUBIC);
  else
    ff__resize_axis_bilinear(a, n_in, lo, len, n_out);
}

FF_HD static inline void ff__resize_axis_build(ff__resize_axis *a, int n_in, int n_out, int antialias) {
  ff__resize_axis_build_box(a, n_in, 0.0, n_in, n_out, antialias);
}

/* Gaussian blur along an axis of n pixels as the taps of a resize to the
 * same size (torchvision gaussian_blur): output o takes k[t] times input
 * o - ksize/2 + t, mirrored at the borders without repeating the edge
 * (torch's reflect padding; where torch refuses a pad as large as the
 * image, the mirroring repeats). max_taps = ksize; k from ff__gauss_kernel1d.
 * ff__resize_gauss_index is that mirroring: the input read for position i
 * of an axis of n pixels. */
FF_HD static inline int ff__resize_gauss_index(int i, int n) {
  while (n > 1 && (i < 0 || i >= n))
    i = i < 0 ? -i : 2 * (n - 1) - i;
  return n > 1 ? i : 0;
}

FF_HD static inline void ff__resize_axis_gauss(ff__resize_axis *a, int n, const float *k, int ksize) {
  for (int o = 0; o < n; o++) {
    for (int t = 0; t < ksize; t++) {
      a->idx[(size_t)o * ksize + t] = ff__resize_gauss_index(o - ksize / 2 + t, n);
      a->w[(size_t)o * ksize + t] = k[t];
    }
    a->count[o] = ksize;
  }
}

/* Sum of the n taps of one output over x (consecutive taps `step` floats
 * apart), in torch's order: ≤ 4 taps fused, longer windows plainly. */
FF_HD static inline float ff__resize_taps_sum(const float *x, size_t step, const int *idx, const float *w,
                                              int n) {
  float acc = x[(size_t)idx[0] * step] * w[0];
  if (n <= 4)
    for (int t = 1; t < n; t++)
      acc = ff__fma_f32(x[(size_t)idx[t] * step], w[t], acc);
  else
    for (int t = 1; t < n; t++)
      acc = acc + x[(size_t)idx[t] * step] * w[t];
  return acc;
}

/* The same sum over uint8 inputs (the device's horizontal pass reads the
 * image directly; (float)x is exact, so the bits are those of the float
 * row the CPU converts first). */
FF_HD static inline float ff__resize_taps_sum_u8(const uint8_t *x, size_t step, const int *idx,
                                                 const float *w, int n) {
  float acc = (float)x[(size_t)idx[0] * step] * w[0];
  if (n <= 4)
    for (int t = 1; t < n; t++)
      acc = ff__fma_f32((float)x[(size_t)idx[t] * step], w[t], acc);
  else
    for (int t = 1; t < n; t++)
      acc = acc + (float)x[(size_t)idx[t] * step] * w[t];
  return acc;
}

#endif
