/* pil.c — the Pillow-semantics augmentation ops on interleaved RGB uint8
 * images: the ops timm's policies apply through PIL (ImageOps, ImageEnhance,
 * Image.transform, Image.rotate), with Pillow 13's arithmetic (spec in
 * docs/pillow-semantics.md; per-pixel math in kernels/pil.h, shared with
 * the device kernels).
 *
 * Three families. Table ops (autocontrast, equalize, invert, posterize,
 * solarize, solarize_add) and the enhance ops whose degenerate image is
 * constant (brightness: black; contrast: the mean luma) map every value
 * through a per-channel 256-entry table. Color and sharpness blend each
 * value with a per-pixel degenerate (its luma, its SMOOTH-filtered value).
 * The geometric ops sample the source through the warp Pillow would use for
 * the same matrix. GaussianBlur is ops/pil_blur.c's. Every op reads src
 * and writes a distinct dst; the step runner gives it a fresh buffer. */
#include "ops/pil.h"
#include "ops/pil_blur.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Python's round(v, 15): the double nearest to v's exact value rounded to 15
 * decimals (glibc's printf rounds the exact binary value correctly, as
 * Python's dtoa does). */
static double round15(double v) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.15f", v);
  return strtod(buf, NULL);
}

/* Python's float % 360.0 (the result takes the divisor's sign). */
static double mod360(double a) {
  double r = fmod(a, 360.0);
  if (r != 0.0 && r < 0.0) r += 360.0;
  return r == 0.0 ? 0.0 : r;
}

void ff__pil_warp_setup(const ff__pil *p, int w, int h, ff__pil_warp *out) {
  memset(out, 0, sizeof *out);
  memcpy(out->fill, p->fill, 3);
  double *a = out->a;
  a[0] = 1.0, a[4] = 1.0;
  switch (p->op) {
  case FF__PIL_SHEAR_X: a[1] = p->arg; break;
  case FF__PIL_SHEAR_Y: a[3] = p->arg; break;
  case FF__PIL_TRANSLATE_X: a[2] = p->arg; break;
  case FF__PIL_TRANSLATE_Y: a[5] = p->arg; break;
  case FF__PIL_ROTATE: {
    double angle = mod360(p->arg);
    if (angle == 0.0) return (void)(out->mode = FF__PIL_WARP_COPY);
    if (angle == 180.0) return (void)(out->mode = FF__PIL_WARP_ROT180);
    if ((angle == 90.0 || angle == 270.0) && w == h)
      return (void)(out->mode = angle == 90.0 ? FF__PIL_WARP_ROT90 : FF__PIL_WARP_ROT270);
    double r = -(angle * (3.141592653589793 / 180.0)); /* -math.radians(angle) */
    double cx = w / 2.0, cy = h / 2.0;
    a[0] = round15(cos(r)), a[1] = round15(sin(r)), a[3] = round15(-sin(r)), a[4] = round15(cos(r));
    a[2] = a[0] * -cx + a[1] * -cy + 0.0 + cx;
    a[5] = a[3] * -cx + a[4] * -cy + 0.0 + cy;
    break;
  }
  default: break;
  }
  if (p->resample == FF__PIL_BILINEAR) out->mode = FF__PIL_WARP_BILINEAR;
  else if (p->resample == FF__PIL_BICUBIC) out->mode = FF__PIL_WARP_BICUBIC;
  else if (a[1] == 0 && a[3] == 0) out->mode = FF__PIL_WARP_SCALE;
  else {
    /* 16.16 fixed point when all four corners map within +-32768 */
    int fits = 1;
    for (int k = 0; k < 4; k++) {
      double x = k & 1 ? w : 0, y = k & 2 ? h : 0;
      fits &= fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 && fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
    }
    if (!fits) {
      out->mode = FF__PIL_WARP_NEAREST;
      return;
    }
    out->mode = FF__PIL_WARP_FIXED;
    double v[6] = {a[0], a[1], a[2] + a[0] * 0.5 + a[1] * 0.5, a[3], a[4], a[5] + a[3] * 0.5 + a[4] * 0.5};
    for (int k = 0; k < 6; k++) out->fix[k] = (int32_t)floor(v[k] * 65536.0 + 0.5);
  }
}

static void histogram(const ff__image *img, uint32_t hist[3][256]) {
  memset(hist, 0, 3 * 256 * sizeof hist[0][0]);
  for (int y = 0; y < img->height; y++) {
    const uint8_t *p = img->data + (size_t)y * img->stride;
    for (int x = 0; x < img->width; x++, p += 3) hist[0][p[0]]++, hist[1][p[1]]++, hist[2][p[2]]++;
  }
}

static uint64_t luma_sum(const ff__image *src) {
  uint64_t sum = 0;
  for (int y = 0; y < src->height; y++) {
    const uint8_t *p = src->data + (size_t)y * src->stride;
    for (int x = 0; x < src->width; x++, p += 3) sum += ff__pil_luma(p);
  }
  return sum;
}

int ff__pil_tables(const ff__pil *p, const ff__image *src, uint8_t lut[3][256]) {
  if (!ff__pil_has_table(p->op)) return 0;
  uint32_t hist[3][256];
  if (ff__pil_needs_histogram(p->op)) histogram(src, hist);
  int mean = p->op == FF__PIL_CONTRAST ? ff__pil_mean_of(luma_sum(src), (uint64_t)src->width * src->height) : 0;
  for (int c = 0; c < 3; c++) ff__pil_table(p, ff__pil_needs_histogram(p->op) ? hist[c] : NULL, mean, lut[c]);
  return 1;
}

/* out[k] = blend(d[k], x[k], alpha) over n values (vectorises). */
static void blend_row(const uint8_t *restrict d, const uint8_t *restrict x, float alpha, uint8_t *restrict out,
                      int n) {
  for (int k = 0; k < n; k++) out[k] = ff__pil_blend(d[k], x[k], alpha);
}

/* Sharpness: the image's border pixels keep their value (SMOOTH copies the
 * outer rows and columns, and blend(v, v) = v); images under 3 x 3 are
 * left as they are. */
static void sharpness(const ff__image *src, ff__image *dst, float alpha) {
  int w = src->width, h = src->height;
  long s = (long)src->stride;
  for (int y = 0; y < h; y++) {
    const uint8_t *in = src->data + (size_t)y * src->stride;
    uint8_t *out = dst->data + (size_t)y * dst->stride;
    if (y == 0 || y == h - 1 || w < 3) {
      memcpy(out, in, (size_t)w * 3);
      continue;
    }
    memcpy(out, in, 3);
    for (int i = 3; i < (w - 1) * 3; i++) out[i] = ff__pil_blend(ff__pil_smooth(in + i, s), in[i], alpha);
    memcpy(out + (w - 1) * 3, in + (w - 1) * 3, 3);
  }
}

ff_status ff__pil_run(const ff__pil *p, const ff__image *src, ff__image *dst) {
  if (src->channels != 3 || (unsigned)p->op >= FF__PIL_COUNT) return FF_EINVAL;
  if (p->op == FF__PIL_GAUSSIAN_BLUR) { /* with scratch of its own (the step runner lends its buffer) */
    ff__buf tmp = {0};
    ff_status st = ff__pil_blur_run(p->arg, src, dst, &tmp);
    ff__buf_free(&tmp);
    return st;
  }
  int w = src->width, h = src->height;
  uint8_t lut[3][256];
  float alpha = (float)p->arg;
  if (ff__pil_tables(p, src, lut)) {
    for (int y = 0; y < h; y++) {
      const uint8_t *in = src->data + (size_t)y * src->stride;
      uint8_t *out = dst->data + (size_t)y * dst->stride;
      for (int x = 0; x < w * 3; x += 3)
        out[x] = lut[0][in[x]], out[x + 1] = lut[1][in[x + 1]], out[x + 2] = lut[2][in[x + 2]];
    }
  } else if (p->op == FF__PIL_COLOR) {
    enum { CHUNK = 512 }; /* pixels: the luma in all three channels, then one flat blend loop */
    uint8_t gray[3 * CHUNK];
    for (int y = 0; y < h; y++) {
      const uint8_t *in = src->data + (size_t)y * src->stride;
      uint8_t *out = dst->data + (size_t)y * dst->stride;
      for (int x0 = 0; x0 < w; x0 += CHUNK) {
        int n = (w - x0 < CHUNK ? w - x0 : CHUNK) * 3;
        const uint8_t *i = in + 3 * x0;
        for (int k = 0; k < n; k += 3) gray[k] = gray[k + 1] = gray[k + 2] = ff__pil_luma(i + k);
        blend_row(gray, i, alpha, out + 3 * x0, n);
      }
    }
  } else if (p->op == FF__PIL_HUE) {
    uint8_t shift = ff__pil_hue_shift(p->arg);
    for (int y = 0; y < h; y++) {
      const uint8_t *in = src->data + (size_t)y * src->stride;
      uint8_t *out = dst->data + (size_t)y * dst->stride;
      for (int x = 0; x < w * 3; x += 3) ff__pil_hue_px(in + x, shift, out + x);
    }
  } else if (p->op == FF__PIL_SHARPNESS) {
    if (h < 3) {
      for (int y = 0; y < h; y++) memcpy(dst->data + (size_t)y * dst->stride, src->data + (size_t)y * src->stride, (size_t)w * 3);
    } else {
      sharpness(src, dst, alpha);
    }
  } else {
    ff__pil_warp wp;
    ff__pil_warp_setup(p, w, h, &wp);
    switch (wp.mode) {
#define WARP(m)                                                                                          \
  case m:                                                                                                \
    for (int y = 0; y < h; y++) {                                                                        \
      uint8_t *out = dst->data + (size_t)y * dst->stride;                                                \
      for (int x = 0; x < w; x++) ff__pil_warp_px(&wp, m, src->data, w, h, (long)src->stride, x, y, out + 3 * x); \
    }                                                                                                    \
    break;
      WARP(FF__PIL_WARP_COPY)
      WARP(FF__PIL_WARP_ROT180)
      WARP(FF__PIL_WARP_ROT90)
      WARP(FF__PIL_WARP_ROT270)
      WARP(FF__PIL_WARP_SCALE)
      WARP(FF__PIL_WARP_FIXED)
      WARP(FF__PIL_WARP_NEAREST)
      WARP(FF__PIL_WARP_BILINEAR)
      WARP(FF__PIL_WARP_BICUBIC)
#undef WARP
    }
  }
  return FF_OK;
}
