/* resize.h — torchvision's separable resize (spec 5.3) reduced to tap tables
 * and tap sums, shared by the CPU op (ops/resize.c) and the device kernels
 * so both give the same bits. docs/resize.md derives each rule below from
 * torch's kernels and the tests that pin it.
 *
 * Each axis gets a table of taps (input index, weight) per output index;
 * with antialias the taps are a tent of half-width `scale` renormalised at
 * the borders (torch's _upsample_bilinear2d_aa), without it the two taps of
 * upsample_bilinear2d (align_corners=False). Two arithmetics:
 * - float32 (torchvision v1, which resizes a float copy of the image): the
 *   weights in float32 with torch's own promotions to double, the bicubic
 *   filter with its multiply-adds fused; a sum of n taps starts from the
 *   first tap's rounded product, adds the next 4*floor((n-1)/4) rounded
 *   products and fuses the last (n-1) % 4 (torch's compiled loop: its
 *   vectorised body multiplies, its scalar remainder fuses);
 * - torch's uint8 path (transforms.v2 on uint8 tensors): the weights in
 *   double, scaled to int16 at the precision the axis's largest weight
 *   allows, integer sums rounded and clamped to uint8 after each pass.
 * The tables are built on the host; the sums run on either side. */
#ifndef FF_KERNELS_RESIZE_H
#define FF_KERNELS_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/hd.h"
#include "kernels/pixel.h"

/* Taps of one axis: for output o, taps idx[o*max_taps+t], weight
 * w[o*max_taps+t], t < count[o]. precision 0: float32 weights summed by
 * `rule`; precision p > 0: torch's uint8 path, w holds the int16 weights
 * (exact as floats) of p fraction bits. */
typedef struct ff__resize_axis {
  int max_taps;
  int *count, *idx;
  float *w;
  int rule;      /* FF__RESIZE_RULE_UPSAMPLE or _BLUR (ff__resize_plain_taps) */
  int precision; /* 0, or the fixed-point weights' fraction bits */
} ff__resize_axis;

/* Which taps of a float32 sum are added as rounded products (the rest are
 * fused): torch's upsample kernels add the 4*floor((n-1)/4) after the
 * first and fuse the others; the Gaussian blur's passes (ops/geometry.c)
 * fuse all for n <= 4 and none for more. */
#define FF__RESIZE_RULE_UPSAMPLE 0
#define FF__RESIZE_RULE_BLUR 1

/* How many taps after the first of an n-tap float32 sum are added as
 * rounded products: taps 1 .. that number; the rest are fused. */
FF_HD static inline int ff__resize_plain_taps(int rule, int n) {
  if (rule == FF__RESIZE_RULE_BLUR) return n <= 4 ? 0 : n - 1;
  return n > 1 ? 4 * ((n - 1) / 4) : 0;
}

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
/* With either filter: torch's uint8 arithmetic (transforms.v2 on a uint8
 * tensor) instead of the float32 one. */
#define FF__RESIZE_UINT8 4

/* The most taps an output of the axis has: torch's max_interp_size,
 * ceil(support) * 2 + 1 with support in float32 (in double for the uint8
 * arithmetic), 2 without antialias; sums longer than that are cut to it, as
 * torch cuts them. */
FF_HD static inline int ff__resize_max_taps(int n_in, int n_out, int filter) {
  if (!(filter & FF__RESIZE_ANTIALIAS)) return 2;
  double interp = filter & FF__RESIZE_BICUBIC ? 4.0 : 2.0;
  if (filter & FF__RESIZE_UINT8) {
    double scale = (double)n_in / n_out;
    double support = scale >= 1.0 ? interp * 0.5 * scale : interp * 0.5;
    return (int)ceil(support) * 2 + 1;
  }
  float scale = (float)n_in / (float)n_out;
  float support = (float)(scale >= 1.0f ? interp * 0.5 * (double)scale : interp * 0.5);
  return (int)ceilf(support) * 2 + 1;
}

/* torch's antialias filters at distance x (upsample aa_filter): the tent,
 * or Keys' cubic convolution with a = -0.5, in float32 with the
 * multiply-adds torch's compiled filter fuses. */
FF_HD static inline float ff__resize_filter(float x, int bicubic) {
  float ax = x < 0 ? -x : x;
  if (!bicubic) return ax < 1.0f ? 1.0f - ax : 0.0f;
  const float a = -0.5f;
  if (ax < 1.0f) return ff__fma_f32(ff__fma_f32(a + 2.0f, ax, -(a + 3.0f)) * ax, ax, 1.0f);
  if (ax < 2.0f) return ff__fma_f32(ff__fma_f32(ff__fma_f32(a, ax, -(5.0f * a)), ax, 8.0f * a), ax, -(4.0f * a));
  return 0.0f;
}

/* The same filters in double, for the uint8 arithmetic's weights. */
FF_HD static inline double ff__resize_filter_f64(double x, int bicubic) {
  double ax = x < 0 ? -x : x;
  if (!bicubic) return ax < 1.0 ? 1.0 - ax : 0.0;
  const double a = -0.5;
  if (ax < 1.0) return fma(fma(a + 2.0, ax, -(a + 3.0)) * ax, ax, 1.0);
  if (ax < 2.0) return fma(fma(fma(a, ax, -(5.0 * a)), ax, 8.0 * a), ax, -(4.0 * a));
  return 0.0;
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
 * interval [lo, lo + len), in float32 with torch's promotions: its
 * `center - support + 0.5` and `(j + xmin - center + 0.5) * invscale` add
 * the double 0.5 to a float and multiply in double. */
FF_HD static inline void ff__resize_axis_antialias(ff__resize_axis *a, int n_in, double lo, double len,
                                                  int n_out, int bicubic) {
  float scale = (float)len / (float)n_out;
  float support = (float)(scale >= 1.0f ? (bicubic ? 2.0 : 1.0) * (double)scale : (bicubic ? 2.0 : 1.0));
  float invscale = scale >= 1.0f ? (float)(1.0 / (double)scale) : 1.0f;
  for (int o = 0; o < n_out; o++) {
    float center = (float)(lo + (double)scale * (o + 0.5));
    long long xmin = (long long)((double)(center - support) + 0.5);
    long long xend = (long long)((double)(center + support) + 0.5);
    if (xmin < 0) xmin = 0;
    if (xend > n_in) xend = n_in;
    int n = xend > xmin ? (int)(xend - xmin) : 0;
    if (n > a->max_taps) n = a->max_taps;
    float *w = a->w + (size_t)o * a->max_taps;
    float total = 0.0f;
    for (int t = 0; t < n; t++) {
      float d = (float)(((double)((float)(xmin + t) - center) + 0.5) * (double)invscale);
      w[t] = ff__resize_filter(d, bicubic);
      total += w[t];
    }
    for (int t = 0; t < n; t++) {
      if (total != 0.0f) w[t] /= total;
      a->idx[(size_t)o * a->max_taps + t] = (int)xmin + t;
    }
    a->count[o] = n;
  }
}

/* One output's taps in torch's uint8 path (transforms.v2 on uint8
 * tensors): the window [xmin, xmin + n) and the weights in double, w[t]
 * for t < 2 without antialias, else weight(t) below. */
typedef struct ff__resize_uint8_taps {
  long long xmin, n;
  double center, invscale, total, w[2];
} ff__resize_uint8_taps;

/* Output o's window: with antialias its _compute_indices_min_size_weights_aa
 * in double (the filter's sum over the window in total); without it
 * _compute_indices_min_size_weights for two taps (the source index rounded
 * down in float32, the out-of-range tap's weight added onto the border's). */
FF_HD static inline ff__resize_uint8_taps ff__resize_uint8_window(int n_in, double lo, double scale, int max_taps,
                                                                  int filter, int o) {
  ff__resize_uint8_taps r = {0, 0, 0.0, 1.0, 0.0, {0.0, 0.0}};
  int bicubic = filter & FF__RESIZE_BICUBIC;
  if (filter & FF__RESIZE_ANTIALIAS) {
    double support = (scale >= 1.0 ? scale : 1.0) * (bicubic ? 2.0 : 1.0);
    r.center = lo + scale * (o + 0.5), r.invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
    long long x0 = (long long)(r.center - support + 0.5), x1 = (long long)(r.center + support + 0.5);
    if (x0 < 0) x0 = 0;
    if (x1 > n_in) x1 = n_in;
    r.xmin = x0, r.n = x1 - x0 < 0 ? 0 : x1 - x0 > max_taps ? max_taps : x1 - x0;
    for (long long j = 0; j < r.n; j++)
      r.total += ff__resize_filter_f64(((double)(j + x0) - r.center + 0.5) * r.invscale, bicubic);
    return r;
  }
  double real = lo + scale * (o + 0.5) - 0.5;
  if (real < 0) real = 0;
  long long i = (long long)floorf((float)real);
  if (i > n_in - 1) i = n_in - 1;
  double lambda = real - (double)i;
  lambda = lambda < 0 ? 0 : lambda > 1 ? 1 : lambda;
  long long k = (i + 2 < n_in ? i + 2 : n_in) - i;
  r.xmin = i, r.n = k < 0 ? 0 : k > max_taps ? max_taps : k;
  for (int j = 0, at = 0; j < 2; j++, at++) {
    if (i + j <= 0) at = 0;
    else if (i + j >= n_in - 1) at = (int)r.n - 1;
    r.w[at < 0 ? 0 : at] += ff__resize_filter_f64((double)j - lambda, 0);
  }
  return r;
}

/* Weight t (< r->n) of the output whose window is r. */
FF_HD static inline double ff__resize_uint8_weight(const ff__resize_uint8_taps *r, int filter, int t) {
  if (!(filter & FF__RESIZE_ANTIALIAS)) return t < 2 ? r->w[t] : 0.0;
  double v = ff__resize_filter_f64(((double)(t + r->xmin) - r->center + 0.5) * r->invscale, filter & FF__RESIZE_BICUBIC);
  return r->total != 0.0 ? v / r->total : v;
}

/* The whole axis in torch's uint8 arithmetic: the weights scaled to int16
 * at the precision the axis's largest weight allows
 * (_compute_index_ranges_int16_weights), kept in w as floats. */
FF_HD static inline void ff__resize_axis_uint8(ff__resize_axis *a, int n_in, double lo, double len, int n_out,
                                              int filter) {
  double scale = len / n_out, wt_max = 0.0;
  for (int o = 0; o < n_out; o++) {
    ff__resize_uint8_taps r = ff__resize_uint8_window(n_in, lo, scale, a->max_taps, filter, o);
    for (int t = 0; t < r.n && (r.total != 0.0 || !(filter & FF__RESIZE_ANTIALIAS)); t++) {
      double v = ff__resize_uint8_weight(&r, filter, t);
      if (v > wt_max) wt_max = v;
    }
  }
  int p = 0;
  for (p = 0; p < 22; ++p)
    if ((int)(0.5 + wt_max * (double)(1 << (p + 1))) >= (1 << 15)) break;
  a->precision = p;
  for (int o = 0; o < n_out; o++) {
    ff__resize_uint8_taps r = ff__resize_uint8_window(n_in, lo, scale, a->max_taps, filter, o);
    for (int t = 0; t < a->max_taps; t++) {
      double v = t < r.n ? ff__resize_uint8_weight(&r, filter, t) * (double)(1 << p) : 0.0;
      a->w[(size_t)o * a->max_taps + t] = (float)(v < 0 ? (int)(-0.5 + v) : (int)(0.5 + v));
      a->idx[(size_t)o * a->max_taps + t] = (int)r.xmin + (t < r.n ? t : 0);
    }
    a->count[o] = (int)r.n;
  }
}

/* The taps resampling [lo, lo + len) of n_in inputs to n_out outputs with
 * `filter` (FF__RESIZE_*): a box that is not the whole axis is the exact
 * fractional region left by a DCT-scaled decode (pipeline.h, ff__dct_box). */
FF_HD static inline void ff__resize_axis_build_box(ff__resize_axis *a, int n_in, double lo, double len,
                                                   int n_out, int filter) {
  a->rule = FF__RESIZE_RULE_UPSAMPLE, a->precision = 0;
  if (filter & FF__RESIZE_UINT8)
    ff__resize_axis_uint8(a, n_in, lo, len, n_out, filter);
  else if (filter & FF__RESIZE_ANTIALIAS)
    ff__resize_axis_antialias(a, n_in, lo, len, n_out, filter & FF__RESIZE_BICUBIC);
  else
    ff__resize_axis_bilinear(a, n_in, lo, len, n_out);
}

FF_HD static inline void ff__resize_axis_build(ff__resize_axis *a, int n_in, int n_out, int filter) {
  ff__resize_axis_build_box(a, n_in, 0.0, n_in, n_out, filter);
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
  a->rule = FF__RESIZE_RULE_BLUR, a->precision = 0;
  for (int o = 0; o < n; o++) {
    for (int t = 0; t < ksize; t++) {
      a->idx[(size_t)o * ksize + t] = ff__resize_gauss_index(o - ksize / 2 + t, n);
      a->w[(size_t)o * ksize + t] = k[t];
    }
    a->count[o] = ksize;
  }
}

/* Sum of the n taps of one output over x (consecutive taps `step` floats
 * apart), in torch's order: the first product, then taps 1 .. plain
 * (ff__resize_plain_taps) added as rounded products, the rest fused. */
FF_HD static inline float ff__resize_taps_sum(const float *x, size_t step, const int *idx, const float *w, int n,
                                              int plain) {
  float acc = x[(size_t)idx[0] * step] * w[0];
  for (int t = 1; t < n; t++)
    acc = t <= plain ? acc + x[(size_t)idx[t] * step] * w[t] : ff__fma_f32(x[(size_t)idx[t] * step], w[t], acc);
  return acc;
}

/* The same sum over uint8 inputs (the device's horizontal pass reads the
 * image directly; (float)x is exact, so the bits are those of the float
 * row the CPU converts first). */
FF_HD static inline float ff__resize_taps_sum_u8(const uint8_t *x, size_t step, const int *idx, const float *w,
                                                 int n, int plain) {
  float acc = (float)x[(size_t)idx[0] * step] * w[0];
  for (int t = 1; t < n; t++)
    acc = t <= plain ? acc + (float)x[(size_t)idx[t] * step] * w[t]
                     : ff__fma_f32((float)x[(size_t)idx[t] * step], w[t], acc);
  return acc;
}

/* torch's uint8 sum of one output (basic_loop_aa_horizontal<uint8_t>):
 * 2^(p-1) plus the products of the inputs and the int16 weights w (as
 * floats), shifted right by p, clamped to 0..255. */
FF_HD static inline uint8_t ff__resize_taps_fixed(const uint8_t *x, size_t step, const int *idx, const float *w,
                                                  int n, int p) {
  int32_t acc = (int32_t)1 << (p - 1);
  for (int t = 0; t < n; t++) acc += (int32_t)x[(size_t)idx[t] * step] * (int32_t)w[t];
  if (acc < 0) return 0; /* torch's arithmetic shift then clamp: negative gives 0 */
  acc >>= p;
  return (uint8_t)(acc > 255 ? 255 : acc);
}

#endif
