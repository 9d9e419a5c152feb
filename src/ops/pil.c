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
 * the same matrix; on x86-64 with AVX2 the bilinear and bicubic warps
 * compute a pixel's three channels side by side in double lanes, each lane
 * with the scalar code's operations (warp_avx2). GaussianBlur is
 * ops/pil_blur.c's. Every op reads src and writes a distinct dst; the step
 * runner gives it a fresh buffer. */
#include "ops/pil.h"
#include "ops/pil_blur.h"
#include "ops/lut.h"

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

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FF_HAVE_X86_SIMD 1

/* The bilinear and bicubic warps with the three channels of a pixel side
 * by side in the lanes of a 4-double vector (the fourth lane is spare):
 * every lane does exactly the double operations of ff__pil_warp_px's
 * interior case, in its order, so the bytes are the same. Bicubic: for each
 * of the four source rows the 12 bytes of the four neighbours become the
 * integer coefficients of Pillow's cubic (p1 = v2, p2 = v3 - v1, p3 = 2(v1 -
 * v2) + v3 - v4, p4 = v2 - v1 - v3 + v4: small integers, so exact in int32
 * as in double), then p1 + d*(p2 + d*(p3 + d*p4)) in double; the vertical
 * cubic of the four row values follows the same formula in double (-v1 + v3
 * is v3 - v1 and 2x is x + x, exactly). Pixels whose neighbours leave the
 * image (clamped) go through ff__pil_warp_px. */
__attribute__((target("avx2"))) static inline __m256d cubic_d(__m256d p1, __m256d p2, __m256d p3, __m256d p4,
                                                               __m256d d) {
  __m256d v = _mm256_add_pd(p3, _mm256_mul_pd(d, p4));
  v = _mm256_add_pd(p2, _mm256_mul_pd(d, v));
  return _mm256_add_pd(p1, _mm256_mul_pd(d, v));
}

/* The 12 bytes at p (four RGB pixels) in the low bytes of a vector. */
__attribute__((target("avx2"))) static inline __m128i load12(const uint8_t *p) {
  int64_t lo;
  int32_t hi;
  memcpy(&lo, p, 8), memcpy(&hi, p + 8, 4);
  return _mm_insert_epi32(_mm_cvtsi64_si128(lo), hi, 2);
}

/* One row's cubic over channels: the four pixels' bytes from r. */
__attribute__((target("avx2"))) static inline __m256d cubic_row(const uint8_t *r, __m256d dx) {
  __m128i b = load12(r);
  __m128i v1 = _mm_shuffle_epi8(b, _mm_setr_epi8(0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, -1, -1, -1, -1));
  __m128i v2 = _mm_shuffle_epi8(b, _mm_setr_epi8(3, -1, -1, -1, 4, -1, -1, -1, 5, -1, -1, -1, -1, -1, -1, -1));
  __m128i v3 = _mm_shuffle_epi8(b, _mm_setr_epi8(6, -1, -1, -1, 7, -1, -1, -1, 8, -1, -1, -1, -1, -1, -1, -1));
  __m128i v4 = _mm_shuffle_epi8(b, _mm_setr_epi8(9, -1, -1, -1, 10, -1, -1, -1, 11, -1, -1, -1, -1, -1, -1, -1));
  __m128i a = _mm_sub_epi32(v1, v2), c = _mm_sub_epi32(v3, v4);
  __m128i p2 = _mm_sub_epi32(v3, v1), p3 = _mm_add_epi32(_mm_add_epi32(a, a), c);
  __m128i p4 = _mm_sub_epi32(_mm_setzero_si128(), _mm_add_epi32(a, c));
  return cubic_d(_mm256_cvtepi32_pd(v2), _mm256_cvtepi32_pd(p2), _mm256_cvtepi32_pd(p3), _mm256_cvtepi32_pd(p4), dx);
}

/* The three low int32 lanes of v as bytes at out (four bytes written when
 * room is set: the spare one is the next pixel's, written after). */
__attribute__((target("avx2"))) static inline void store3(__m128i v, uint8_t *out, int room) {
  uint32_t px = (uint32_t)_mm_cvtsi128_si32(_mm_shuffle_epi8(v, _mm_setr_epi8(0, 4, 8, -1, -1, -1, -1, -1, -1, -1, -1,
                                                                                -1, -1, -1, -1, -1)));
  if (room) memcpy(out, &px, 4);
  else out[0] = (uint8_t)px, out[1] = (uint8_t)(px >> 8), out[2] = (uint8_t)(px >> 16);
}

__attribute__((target("avx2"))) static void warp_avx2(const ff__pil_warp *wp, const ff__image *src, ff__image *dst) {
  int w = src->width, h = src->height, bicubic = wp->mode == FF__PIL_WARP_BICUBIC;
  long stride = (long)src->stride;
  const __m256d zero = _mm256_setzero_pd(), top = _mm256_set1_pd(255.0);
  for (int y = 0; y < h; y++) {
    uint8_t *out = dst->data + (size_t)y * dst->stride;
    for (int x = 0; x < w; x++) {
      uint8_t *o = out + 3 * x;
      int ix, iy;
      double dx, dy;
      if (!ff__pil_warp_at(wp, w, h, x, y, &ix, &iy, &dx, &dy)) {
        o[0] = wp->fill[0], o[1] = wp->fill[1], o[2] = wp->fill[2];
      } else if (bicubic && ix >= 1 && ix + 2 < w && iy >= 1 && iy + 2 < h) {
        const uint8_t *r = src->data + (long)(iy - 1) * stride + (long)(ix - 1) * 3;
        __m256d vx = _mm256_set1_pd(dx);
        __m256d r0 = cubic_row(r, vx), r1 = cubic_row(r + stride, vx);
        __m256d r2 = cubic_row(r + 2 * stride, vx), r3 = cubic_row(r + 3 * stride, vx);
        __m256d a = _mm256_sub_pd(r0, r1);
        __m256d p3 = _mm256_sub_pd(_mm256_add_pd(_mm256_add_pd(a, a), r2), r3);
        __m256d p4 = _mm256_add_pd(_mm256_sub_pd(_mm256_sub_pd(r1, r0), r2), r3);
        __m256d v = cubic_d(r1, _mm256_sub_pd(r2, r0), p3, p4, _mm256_set1_pd(dy));
        v = _mm256_min_pd(_mm256_max_pd(v, zero), top);
        store3(_mm256_cvttpd_epi32(v), o, x + 1 < w);
      } else if (!bicubic && ix >= 0 && ix + 1 < w && iy >= 0 && iy + 1 < h) {
        const uint8_t *r = src->data + (long)iy * stride + (long)ix * 3;
        __m256d vx = _mm256_set1_pd(dx), v[2];
        for (int k = 0; k < 2; k++, r += stride) {
          int32_t lo;
          uint16_t hi;
          memcpy(&lo, r, 4), memcpy(&hi, r + 4, 2);
          __m128i b = _mm_insert_epi16(_mm_cvtsi32_si128(lo), hi, 2);
          __m128i a = _mm_cvtepu8_epi32(b), c = _mm_cvtepu8_epi32(_mm_srli_si128(b, 3));
          v[k] = _mm256_add_pd(_mm256_cvtepi32_pd(a), _mm256_mul_pd(_mm256_cvtepi32_pd(_mm_sub_epi32(c, a)), vx));
        }
        __m256d t = _mm256_add_pd(v[0], _mm256_mul_pd(_mm256_sub_pd(v[1], v[0]), _mm256_set1_pd(dy)));
        store3(_mm256_cvttpd_epi32(t), o, x + 1 < w);
      } else {
        ff__pil_warp_px(wp, wp->mode, src->data, w, h, stride, x, y, o);
      }
    }
  }
}
#endif

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
    if (!memcmp(lut[0], lut[1], 256) && !memcmp(lut[0], lut[2], 256)) { /* one table: flat lookups (ops/lut.c) */
      ff__lut_rows(src->data, src->stride, dst->data, dst->stride, (size_t)h, (size_t)w * 3, lut[0]);
      return FF_OK;
    }
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
#ifdef FF_HAVE_X86_SIMD
    if ((wp.mode == FF__PIL_WARP_BILINEAR || wp.mode == FF__PIL_WARP_BICUBIC) && __builtin_cpu_supports("avx2")) {
      warp_avx2(&wp, src, dst);
      return FF_OK;
    }
#endif
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
