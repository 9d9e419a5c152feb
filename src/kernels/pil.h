/* pil.h — the Pillow-semantics augmentation ops that timm's AutoAugment,
 * RandAugment and AugMix apply (PIL.ImageOps, PIL.ImageEnhance,
 * Image.transform(AFFINE) and Image.rotate), as data and as per-pixel
 * arithmetic shared by the CPU ops (ops/pil.c) and the device kernels.
 *
 * The arithmetic is Pillow's (13.x) on RGB uint8 images, as its
 * documentation describes and as measured against it (docs/pillow-semantics.md
 * states each op's rule and the measured error):
 * - blend(d, x, f) = d + f*(x - d) in float32, each operator rounded, then
 *   truncated toward zero and, for f outside [0, 1], clamped to [0, 255];
 *   f is the Python float rounded to float32. Enhance ops blend a degenerate
 *   image d with the image x.
 * - grayscale (mode "L") = (19595 R + 38470 G + 7471 B + 32768) >> 16.
 * - the SMOOTH filter: 3x3 kernel (1 1 1 / 1 5 1 / 1 1 1) / 13 in float32,
 *   summed row by row (below, centre, above) onto 0.5, truncated; the outer
 *   rows and columns are copied.
 * - the affine warp maps output pixel centres (x + 0.5, y + 0.5) through
 *   (a0 a1 a2 / a3 a4 a5) in double; nearest uses 16.16 fixed point, or
 *   plain truncation when the matrix has no shear terms; bilinear and
 *   bicubic (Keys' cubic with a = -1 as Pillow's transform uses) clamp
 *   neighbours to the image, truncate, and leave positions outside the
 *   image at the fill colour. */
#ifndef FF_KERNELS_PIL_H
#define FF_KERNELS_PIL_H

#include <math.h>
#include <stdint.h>

#include "kernels/hd.h"

typedef enum ff__pil_op {
  FF__PIL_AUTOCONTRAST, /* ImageOps.autocontrast(img), cutoff 0 */
  FF__PIL_EQUALIZE,     /* ImageOps.equalize */
  FF__PIL_INVERT,       /* ImageOps.invert */
  FF__PIL_POSTERIZE,    /* arg: bits kept 0..8 (ImageOps.posterize; 0 gives black, 8 unchanged) */
  FF__PIL_SOLARIZE,     /* arg: threshold 0..256; values >= threshold become 255 - v */
  FF__PIL_SOLARIZE_ADD, /* arg: added to values below 128 (timm's solarize_add), clamped at 255 */
  FF__PIL_COLOR,        /* arg: ImageEnhance.Color factor */
  FF__PIL_CONTRAST,     /* arg: ImageEnhance.Contrast factor */
  FF__PIL_BRIGHTNESS,   /* arg: ImageEnhance.Brightness factor */
  FF__PIL_SHARPNESS,    /* arg: ImageEnhance.Sharpness factor */
  FF__PIL_SHEAR_X,      /* arg: shear factor: transform (1, f, 0, 0, 1, 0) */
  FF__PIL_SHEAR_Y,      /* (1, 0, 0, f, 1, 0) */
  FF__PIL_TRANSLATE_X,  /* arg: pixels (fractional): (1, 0, p, 0, 1, 0): content moves left for p > 0 */
  FF__PIL_TRANSLATE_Y,  /* (1, 0, 0, 0, 1, p) */
  FF__PIL_ROTATE,       /* arg: degrees counter-clockwise about the centre (Image.rotate, expand=False) */
  FF__PIL_HUE,          /* arg: hue factor in [-0.5, 0.5] (torchvision's adjust_hue on a PIL image) */
  FF__PIL_GAUSSIAN_BLUR, /* arg: radius (ImageFilter.GaussianBlur; kernels/pil_blur.h, ops/pil_blur.c) */
  FF__PIL_COUNT
} ff__pil_op;

typedef enum ff__pil_resample { FF__PIL_NEAREST, FF__PIL_BILINEAR, FF__PIL_BICUBIC } ff__pil_resample;

/* One Pillow op with its parameters (a plan step). */
typedef struct ff__pil {
  ff__pil_op op;
  double arg;       /* see ff__pil_op; the Python float timm hands the op */
  int resample;     /* geometric ops: ff__pil_resample */
  uint8_t fill[3];  /* geometric ops: the colour of positions outside the image */
} ff__pil;

/* Whether op is one of the per-value table ops (autocontrast .. solarize_add). */
FF_HD static inline int ff__pil_is_lut(int op) { return op <= FF__PIL_SOLARIZE_ADD; }
FF_HD static inline int ff__pil_is_geometric(int op) { return op >= FF__PIL_SHEAR_X && op <= FF__PIL_ROTATE; }

/* ------------------------------------------------------------ blend */

/* Image.blend(d, x, f) for one value: alpha is the float32 factor. Within
 * [0, 1] the result lies between d and x and is truncated; outside it is
 * clamped first. Clamping changes nothing in [0, 1], so one branch-free
 * form serves both (and vectorises). */
FF_HD static inline uint8_t ff__pil_blend(uint8_t d, uint8_t x, float alpha) {
  float t = (float)d + alpha * (float)((int)x - (int)d);
  t = t > 0.0f ? t : 0.0f;
  t = t < 255.0f ? t : 255.0f;
  return (uint8_t)(int)t;
}

/* RGB → L (ITU-R 601-2 luma in 16-bit fixed point, rounded). */
FF_HD static inline uint8_t ff__pil_luma(const uint8_t *rgb) {
  return (uint8_t)(((uint32_t)rgb[0] * 19595u + (uint32_t)rgb[1] * 38470u + (uint32_t)rgb[2] * 7471u + 0x8000u) >> 16);
}

/* ImageFilter.SMOOTH at channel value p (pointer into an interior pixel of
 * an RGB image with `stride` bytes per row). Pillow sums nine float32
 * products (weights 1/13 and 5/13) onto 0.5 and truncates. With S the
 * integer sum (8 neighbours + 5 x centre, at most 3315), the exact value
 * S/13 + 0.5 is never within 1/26 of an integer (13 is odd), while the
 * float32 rounding errors of those ten operations stay below 0.002: the
 * truncation is floor(S/13 + 1/2) = (2S + 13) / 26 in integers, exactly. */
FF_HD static inline uint8_t ff__pil_smooth(const uint8_t *p, long stride) {
  const uint8_t *u = p - stride, *d = p + stride;
  int s = u[-3] + u[0] + u[3] + p[-3] + 5 * p[0] + p[3] + d[-3] + d[0] + d[3];
  return (uint8_t)((2 * s + 13) / 26);
}

/* torchvision's adjust_hue on a PIL image for one pixel: RGB → HSV (mode
 * "HSV", colorsys's formulas with Pillow's mix of float32 and double), the
 * hue byte plus `shift` (int32(factor * 255) wrapped to uint8, as numpy's
 * uint8 addition wraps), then HSV → RGB. */
FF_HD static inline void ff__pil_hue_px(const uint8_t *in, uint8_t shift, uint8_t *out) {
  int r = in[0], g = in[1], b = in[2];
  int maxc = r > g ? (r > b ? r : b) : (g > b ? g : b), minc = r < g ? (r < b ? r : b) : (g < b ? g : b);
  int hh = 0, ss = 0, v = maxc;
  if (minc != maxc) {
    float cr = (float)(maxc - minc), s = cr / (float)maxc;
    float rc = (float)(maxc - r) / cr, gc = (float)(maxc - g) / cr, bc = (float)(maxc - b) / cr, h;
    if (r == maxc) h = bc - gc;
    else if (g == maxc) h = (float)(2.0 + rc - bc);
    else h = (float)(4.0 + gc - rc);
    h = (float)fmod(h / 6.0 + 1.0, 1.0);
    int ih = (int)(h * 255.0), is = (int)(s * 255.0);
    hh = ih < 0 ? 0 : ih > 255 ? 255 : ih;
    ss = is < 0 ? 0 : is > 255 ? 255 : is;
  }
  hh = (hh + shift) & 255;
  if (ss == 0) {
    out[0] = out[1] = out[2] = (uint8_t)v;
    return;
  }
  int i = (int)floor((float)hh * 6.0 / 255.0);
  float f = (float)((float)hh * 6.0 / 255.0 - (float)i), fs = (float)((float)ss / 255.0);
  int p = (int)round((float)v * (1.0 - fs)), q = (int)round((float)v * (1.0 - fs * f));
  int t = (int)round((float)v * (1.0 - fs * (1.0 - f)));
  uint8_t up = (uint8_t)(p < 0 ? 0 : p > 255 ? 255 : p), uq = (uint8_t)(q < 0 ? 0 : q > 255 ? 255 : q);
  uint8_t ut = (uint8_t)(t < 0 ? 0 : t > 255 ? 255 : t), uv = (uint8_t)v;
  switch (i % 6) {
  case 0: out[0] = uv, out[1] = ut, out[2] = up; break;
  case 1: out[0] = uq, out[1] = uv, out[2] = up; break;
  case 2: out[0] = up, out[1] = uv, out[2] = ut; break;
  case 3: out[0] = up, out[1] = uq, out[2] = uv; break;
  case 4: out[0] = ut, out[1] = up, out[2] = uv; break;
  default: out[0] = uv, out[1] = up, out[2] = uq; break;
  }
}

/* The hue shift byte of factor f: int32(f * 255) wrapped to uint8. */
FF_HD static inline uint8_t ff__pil_hue_shift(double f) { return (uint8_t)((int32_t)(f * 255) & 255); }

/* ------------------------------------------------------------ tables */

/* The table of a value op whose table does not depend on the image
 * (invert, posterize, solarize, solarize_add) at value v. */
FF_HD static inline uint8_t ff__pil_point(int op, double arg, int v) {
  switch (op) {
  case FF__PIL_INVERT: return (uint8_t)(255 - v);
  case FF__PIL_POSTERIZE: {
    int bits = (int)arg;
    if (bits >= 8) return (uint8_t)v;
    return (uint8_t)(v & ~((1 << (8 - bits)) - 1) & 255);
  }
  case FF__PIL_SOLARIZE: return (uint8_t)(v < arg ? v : 255 - v);
  case FF__PIL_SOLARIZE_ADD: {
    int add = (int)arg, s = v + add;
    return (uint8_t)(v < 128 ? (s > 255 ? 255 : s < 0 ? 0 : s) : v);
  }
  default: return (uint8_t)v;
  }
}

/* autocontrast's table from one channel's histogram: the lowest and highest
 * used values stretched to 0 and 255, int(v * scale + offset) in double. */
FF_HD static inline void ff__pil_autocontrast_lut(const uint32_t *hist, uint8_t *lut) {
  int lo = 0, hi = 255;
  while (lo < 256 && !hist[lo]) lo++;
  while (hi >= 0 && !hist[hi]) hi--;
  if (hi <= lo) {
    for (int v = 0; v < 256; v++) lut[v] = (uint8_t)v;
    return;
  }
  double scale = 255.0 / (hi - lo), offset = -lo * scale;
  for (int v = 0; v < 256; v++) {
    double t = v * scale + offset;
    long ix = (long)t; /* Python's int(): toward zero */
    lut[v] = (uint8_t)(ix < 0 ? 0 : ix > 255 ? 255 : ix);
  }
}

/* equalize's table from one channel's histogram: step = (pixels - count of
 * the highest used value) // 255, lut[v] = (step // 2 + pixels below v) // step. */
FF_HD static inline void ff__pil_equalize_lut(const uint32_t *hist, uint8_t *lut) {
  uint64_t total = 0, last = 0;
  int used = 0;
  for (int v = 0; v < 256; v++)
    if (hist[v]) total += hist[v], last = hist[v], used++;
  uint64_t step = used > 1 ? (total - last) / 255 : 0;
  uint64_t n = step / 2;
  for (int v = 0; v < 256; v++) {
    uint64_t q = step ? n / step : (uint64_t)v;
    lut[v] = (uint8_t)(q > 255 ? 255 : q);
    n += hist[v];
  }
}

/* ImageEnhance.Contrast's mean: int(sum / count + 0.5) of the luma, in double. */
FF_HD static inline int ff__pil_mean_of(uint64_t luma_sum, uint64_t count) {
  return count ? (int)((double)luma_sum / (double)count + 0.5) : 0;
}

/* Whether op p maps each value through a per-channel table, and whether
 * that table needs the channel's histogram (autocontrast, equalize) or the
 * mean luma (contrast). Brightness blends with black: a table too. */
FF_HD static inline int ff__pil_has_table(int op) {
  return ff__pil_is_lut(op) || op == FF__PIL_BRIGHTNESS || op == FF__PIL_CONTRAST;
}
FF_HD static inline int ff__pil_needs_histogram(int op) { return op == FF__PIL_AUTOCONTRAST || op == FF__PIL_EQUALIZE; }

/* The table of op p (ff__pil_has_table) for one channel, from its
 * histogram (NULL when not needed) and the image's contrast mean. */
FF_HD static inline void ff__pil_table(const ff__pil *p, const uint32_t *hist, int mean, uint8_t *lut) {
  if (p->op == FF__PIL_AUTOCONTRAST) ff__pil_autocontrast_lut(hist, lut);
  else if (p->op == FF__PIL_EQUALIZE) ff__pil_equalize_lut(hist, lut);
  else if (p->op == FF__PIL_BRIGHTNESS || p->op == FF__PIL_CONTRAST)
    for (int v = 0; v < 256; v++) lut[v] = ff__pil_blend((uint8_t)(p->op == FF__PIL_CONTRAST ? mean : 0), (uint8_t)v, (float)p->arg);
  else
    for (int v = 0; v < 256; v++) lut[v] = ff__pil_point(p->op, p->arg, v);
}

/* ------------------------------------------------------------ affine warp */

/* How an affine op samples, set up on the host (ops/pil.c
 * ff__pil_warp_setup) from the op and the image size. */
typedef enum ff__pil_warp_mode {
  FF__PIL_WARP_COPY,      /* rotate by a multiple of 360 */
  FF__PIL_WARP_ROT180,    /* rotate by 180: both axes reversed */
  FF__PIL_WARP_ROT90,     /* rotate by 90 on a square image (transpose, columns reversed) */
  FF__PIL_WARP_ROT270,    /* rotate by 270 on a square image */
  FF__PIL_WARP_SCALE,     /* nearest, no shear terms: truncate each coordinate */
  FF__PIL_WARP_FIXED,     /* nearest in 16.16 fixed point */
  FF__PIL_WARP_NEAREST,   /* nearest in double (a warp past fixed point's range) */
  FF__PIL_WARP_BILINEAR,
  FF__PIL_WARP_BICUBIC,
} ff__pil_warp_mode;

typedef struct ff__pil_warp {
  int32_t mode;      /* ff__pil_warp_mode */
  int32_t fix[6];    /* FIXED: a0, a1, (a2 + a0/2 + a1/2), a3, a4, (a5 + a3/2 + a4/2) in 16.16 */
  double a[6];       /* output → input matrix */
  uint8_t fill[3];
} ff__pil_warp;

/* Pillow's coordinate truncations: COORD gives -1 for any negative value. */
FF_HD static inline int ff__pil_coord(double v) { return v < 0.0 ? -1 : (int)v; }
FF_HD static inline int ff__pil_floor(double v) { return v < 0.0 ? (int)floor(v) : (int)v; }
FF_HD static inline int ff__pil_clampi(int v, int n) { return v < 0 ? 0 : v < n ? v : n - 1; }

FF_HD static inline double ff__pil_cubic(double v1, double v2, double v3, double v4, double d) {
  double p1 = v2;
  double p2 = -v1 + v3;
  double p3 = 2 * (v1 - v2) + v3 - v4;
  double p4 = -v1 + v2 - v3 + v4;
  return p1 + d * (p2 + d * (p3 + d * p4));
}

/* Where output pixel (x, y) of a bilinear or bicubic warp samples: 0 when
 * the mapped centre lies outside the w x h image (the pixel takes the fill
 * colour); else 1, with the neighbour (*ix, *iy) at or before the centre
 * (less half a pixel) and the fractions *dx, *dy past it. */
FF_HD static inline int ff__pil_warp_at(const ff__pil_warp *wp, int w, int h, int x, int y, int *ix, int *iy,
                                        double *dx, double *dy) {
  double xi = x + 0.5, yi = y + 0.5;
  double fx = wp->a[0] * xi + wp->a[1] * yi + wp->a[2];
  double fy = wp->a[3] * xi + wp->a[4] * yi + wp->a[5];
  if (fx < 0.0 || fx >= w || fy < 0.0 || fy >= h) return 0;
  fx -= 0.5, fy -= 0.5;
  *ix = ff__pil_floor(fx), *iy = ff__pil_floor(fy);
  *dx = fx - *ix, *dy = fy - *iy;
  return 1;
}

/* Output pixel (x, y) of the warp of src (w x h RGB, stride bytes per row)
 * into out[0..2]; mode is wp->mode (a parameter, so that a loop over one
 * mode compiles to that mode's code alone). side_by_side: a bicubic pixel
 * away from the edges sums its three channels together (the CPU's loops
 * vectorise it); else every bicubic pixel goes a channel, and in it a row,
 * at a time (a GPU thread then holds a row's sums, not sixteen: registers,
 * kernels/hd.h). The same sums in the same order either way. */
FF_HD static inline void ff__pil_warp_px_as(const ff__pil_warp *wp, int mode, int side_by_side, const uint8_t *src,
                                            int w, int h, long stride, int x, int y, uint8_t *out) {
  int sx = -1, sy = -1;
  switch (mode) {
  case FF__PIL_WARP_COPY: sx = x, sy = y; break;
  case FF__PIL_WARP_ROT180: sx = w - 1 - x, sy = h - 1 - y; break;
  case FF__PIL_WARP_ROT90: sx = w - 1 - y, sy = x; break;
  case FF__PIL_WARP_ROT270: sx = y, sy = h - 1 - x; break;
  case FF__PIL_WARP_SCALE:
    sx = ff__pil_coord((wp->a[2] + wp->a[0] * 0.5) + x * wp->a[0]);
    sy = ff__pil_coord((wp->a[5] + wp->a[4] * 0.5) + y * wp->a[4]);
    break;
  case FF__PIL_WARP_FIXED: {
    int64_t xx = (int64_t)wp->fix[2] + (int64_t)y * wp->fix[1] + (int64_t)x * wp->fix[0];
    int64_t yy = (int64_t)wp->fix[5] + (int64_t)y * wp->fix[4] + (int64_t)x * wp->fix[3];
    sx = (int)(xx >> 16), sy = (int)(yy >> 16);
    break;
  }
  case FF__PIL_WARP_NEAREST: {
    double xi = x + 0.5, yi = y + 0.5;
    sx = ff__pil_coord(wp->a[0] * xi + wp->a[1] * yi + wp->a[2]);
    sy = ff__pil_coord(wp->a[3] * xi + wp->a[4] * yi + wp->a[5]);
    break;
  }
  default: { /* bilinear, bicubic */
    int ix, iy;
    double dx, dy;
    if (!ff__pil_warp_at(wp, w, h, x, y, &ix, &iy, &dx, &dy)) break;
    if (mode == FF__PIL_WARP_BICUBIC && !side_by_side) { /* a channel, and in it a row, at a time */
      FF_DEVICE_NO_UNROLL
      for (int c = 0; c < 3; c++) {
        double rv0 = 0, rv1 = 0, rv2 = 0, rv3 = 0, row = 0;
        FF_DEVICE_NO_UNROLL
        for (int k = 0; k < 4; k++) {
          int ry = iy - 1 + k;
          if (k == 0 || (ry >= 0 && ry < h)) { /* a row past the edge repeats the one before */
            const uint8_t *r = src + (long)ff__pil_clampi(ry, h) * stride + c;
            row = ff__pil_cubic(r[ff__pil_clampi(ix - 1, w) * 3], r[ff__pil_clampi(ix, w) * 3],
                                r[ff__pil_clampi(ix + 1, w) * 3], r[ff__pil_clampi(ix + 2, w) * 3], dx);
          }
          if (k == 0) rv0 = row;
          else if (k == 1) rv1 = row;
          else if (k == 2) rv2 = row;
          else rv3 = row;
        }
        double v = ff__pil_cubic(rv0, rv1, rv2, rv3, dy);
        out[c] = v <= 0.0 ? 0 : v >= 255.0 ? 255 : (uint8_t)(int)v;
      }
      return;
    }
    if (mode == FF__PIL_WARP_BICUBIC && ix >= 1 && ix + 2 < w && iy >= 1 && iy + 2 < h) {
      /* inside: no clamping (the same sums), the three channels side by side */
      const uint8_t *r = src + (long)(iy - 1) * stride + (long)(ix - 1) * 3;
      double rv[4][3];
      for (int k = 0; k < 4; k++, r += stride)
        for (int c = 0; c < 3; c++) rv[k][c] = ff__pil_cubic(r[c], r[c + 3], r[c + 6], r[c + 9], dx);
      for (int c = 0; c < 3; c++) {
        double v = ff__pil_cubic(rv[0][c], rv[1][c], rv[2][c], rv[3][c], dy);
        out[c] = v <= 0.0 ? 0 : v >= 255.0 ? 255 : (uint8_t)(int)v;
      }
      return;
    }
    for (int c = 0; c < 3; c++) {
      double v;
      if (mode == FF__PIL_WARP_BILINEAR) {
        long x0 = ff__pil_clampi(ix, w) * 3 + c, x1 = ff__pil_clampi(ix + 1, w) * 3 + c;
        const uint8_t *r0 = src + ff__pil_clampi(iy, h) * stride;
        double v1 = r0[x0] + (r0[x1] - r0[x0]) * dx, v2 = v1;
        if (iy + 1 >= 0 && iy + 1 < h) {
          const uint8_t *r1 = src + (long)(iy + 1) * stride;
          v2 = r1[x0] + (r1[x1] - r1[x0]) * dx;
        }
        v = v1 + (v2 - v1) * dy;
        out[c] = (uint8_t)(int)v;
      } else {
        long xs[4];
        for (int k = 0; k < 4; k++) xs[k] = ff__pil_clampi(ix - 1 + k, w) * 3 + c;
        double rv[4];
        for (int k = 0; k < 4; k++) {
          int ry = iy - 1 + k;
          if (k > 0 && !(ry >= 0 && ry < h)) {
            rv[k] = rv[k - 1];
            continue;
          }
          const uint8_t *r = src + (long)ff__pil_clampi(ry, h) * stride;
          rv[k] = ff__pil_cubic(r[xs[0]], r[xs[1]], r[xs[2]], r[xs[3]], dx);
        }
        v = ff__pil_cubic(rv[0], rv[1], rv[2], rv[3], dy);
        out[c] = v <= 0.0 ? 0 : v >= 255.0 ? 255 : (uint8_t)(int)v;
      }
    }
    return;
  }
  }
  if (sx >= 0 && sx < w && sy >= 0 && sy < h) {
    const uint8_t *p = src + (long)sy * stride + (long)sx * 3;
    out[0] = p[0], out[1] = p[1], out[2] = p[2];
  } else {
    out[0] = wp->fill[0], out[1] = wp->fill[1], out[2] = wp->fill[2];
  }
}

/* ff__pil_warp_px_as as the CPU's loops run it. */
FF_HD static inline void ff__pil_warp_px(const ff__pil_warp *wp, int mode, const uint8_t *src, int w, int h,
                                         long stride, int x, int y, uint8_t *out) {
  ff__pil_warp_px_as(wp, mode, 1, src, w, h, stride, x, y, out);
}

#endif
