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
 * the same matrix; on x86-64 with AVX2 the bicubic warp computes where
 * four pixels sample per double vector, then a pixel's three channels side
 * by side in double lanes (bicubic_avx2), the bilinear one four pixels per
 * double vector, channel by channel (bilinear_avx2), each lane with the
 * scalar code's operations. GaussianBlur is ops/pil_blur.c's. Every op
 * reads src and writes a distinct dst; the step runner gives it a fresh
 * buffer. */
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

/* The bicubic warp with the three channels of a pixel side by side in the
 * lanes of a 4-double vector (the fourth lane is spare):
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

/* Whether every pixel of row y samples at dx = 0 (x maps to x: a0 = 1,
 * no a1 or a2 term; shear_y, translate_y) or at dy = 0 (no a3 term and a
 * whole-pixel row: shear_x, translate_x, translate_y by whole pixels). */
static void row_flat(const ff__pil_warp *wp, int y, int *flat_x, int *flat_y) {
  const double *a = wp->a;
  double yi = y + 0.5, fy = a[3] * 0.5 + a[4] * yi + a[5] - 0.5; /* every pixel's when a3 = 0 */
  *flat_y = a[3] == 0.0 && fy - floor(fy) == 0.0;
  *flat_x = a[0] == 1.0 && a[1] * yi == 0.0 && a[2] == 0.0;
}

/* Where the pixels x0 .. x0 + 4*groups - 1 of row y sample, four per
 * double vector with ff__pil_warp_at's operations: whether inside the
 * image (in[]), the neighbour at or before (ix[], iy[]) and the fractions
 * (dx[], dy[]). */
__attribute__((target("avx2"))) static void warp_at4(const ff__pil_warp *wp, int w, int h, int x0, int y, int groups,
                                                     uint8_t *in, int *ix, int *iy, double *dx, double *dy) {
  const __m256d half = _mm256_set1_pd(0.5), zero = _mm256_setzero_pd();
  double yi = y + 0.5;
  __m256d by = _mm256_set1_pd(wp->a[1] * yi), ey = _mm256_set1_pd(wp->a[4] * yi);
  __m256d a0 = _mm256_set1_pd(wp->a[0]), a2 = _mm256_set1_pd(wp->a[2]);
  __m256d a3 = _mm256_set1_pd(wp->a[3]), a5 = _mm256_set1_pd(wp->a[5]);
  __m256d xi = _mm256_add_pd(_mm256_set1_pd(x0), _mm256_setr_pd(0.5, 1.5, 2.5, 3.5)); /* x + 0.5, exactly */
  for (int g = 0; g < groups; g++, xi = _mm256_add_pd(xi, _mm256_set1_pd(4.0))) {
    __m256d fx = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(a0, xi), by), a2);
    __m256d fy = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(a3, xi), ey), a5);
    __m256d inside = _mm256_and_pd(_mm256_and_pd(_mm256_cmp_pd(fx, zero, _CMP_GE_OQ),
                                                 _mm256_cmp_pd(fx, _mm256_set1_pd(w), _CMP_LT_OQ)),
                                   _mm256_and_pd(_mm256_cmp_pd(fy, zero, _CMP_GE_OQ),
                                                 _mm256_cmp_pd(fy, _mm256_set1_pd(h), _CMP_LT_OQ)));
    int m = _mm256_movemask_pd(inside);
    for (int k = 0; k < 4; k++) in[4 * g + k] = (uint8_t)(m >> k & 1);
    fx = _mm256_sub_pd(fx, half), fy = _mm256_sub_pd(fy, half);
    __m256d flx = _mm256_floor_pd(fx), fly = _mm256_floor_pd(fy);
    _mm_storeu_si128((__m128i *)(ix + 4 * g), _mm256_cvttpd_epi32(flx));
    _mm_storeu_si128((__m128i *)(iy + 4 * g), _mm256_cvttpd_epi32(fly));
    _mm256_storeu_pd(dx + 4 * g, _mm256_sub_pd(fx, flx));
    _mm256_storeu_pd(dy + 4 * g, _mm256_sub_pd(fy, fly));
  }
}

/* One source row's cubic at vx, or (flat_x: dx = 0) its byte at column
 * ix; r points at the row's pixel ix - 1. */
__attribute__((target("avx2"))) static inline __m256d bicubic_row_at(const uint8_t *r, int flat_x, __m256d vx) {
  if (!flat_x) return cubic_row(r, vx);
  int32_t px;
  memcpy(&px, r + 3, 4);
  return _mm256_cvtepi32_pd(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(px)));
}

/* Bicubic: where a row's pixels sample, 64 at a time (warp_at4), then
 * each pixel. Rows with dy = 0 take the row at iy alone, and rows with
 * dx = 0 the four bytes of column ix (a cubic at 0 is p1 + 0*(...) =
 * p1 +- 0: the same byte once clamped). Positions outside the image (or
 * inside but off the range the int32 coordinates hold: they fail the
 * interior test) follow ff__pil_warp_at through ff__pil_warp_px. */
__attribute__((target("avx2"))) static void bicubic_avx2(const ff__pil_warp *wp, const ff__image *src, ff__image *dst) {
  enum { CHUNK = 64 };
  int w = src->width, h = src->height;
  long stride = (long)src->stride;
  const __m256d zero = _mm256_setzero_pd(), top = _mm256_set1_pd(255.0);
  uint8_t in[CHUNK];
  int ixs[CHUNK], iys[CHUNK];
  double dxs[CHUNK], dys[CHUNK];
  for (int y = 0; y < h; y++) {
    uint8_t *out = dst->data + (size_t)y * dst->stride;
    int flat_x, flat_y;
    row_flat(wp, y, &flat_x, &flat_y);
    for (int x0 = 0; x0 < w; x0 += CHUNK) {
      int n = w - x0 < CHUNK ? w - x0 : CHUNK;
      warp_at4(wp, w, h, x0, y, n / 4, in, ixs, iys, dxs, dys);
      for (int j = 0; j < n; j++) {
        int x = x0 + j, ix = ixs[j], iy = iys[j];
        uint8_t *o = out + 3 * x;
        if (j >= n / 4 * 4) {
          ff__pil_warp_px(wp, wp->mode, src->data, w, h, stride, x, y, o);
        } else if (!in[j]) {
          o[0] = wp->fill[0], o[1] = wp->fill[1], o[2] = wp->fill[2];
        } else if (ix >= 1 && ix + 2 < w && iy >= 1 && iy + 2 < h) {
          const uint8_t *r = src->data + (long)(iy - 1) * stride + (long)(ix - 1) * 3;
          __m256d vx = _mm256_set1_pd(dxs[j]), v;
          if (flat_y) {
            v = bicubic_row_at(r + stride, flat_x, vx);
          } else {
            __m256d r0 = bicubic_row_at(r, flat_x, vx), r1 = bicubic_row_at(r + stride, flat_x, vx);
            __m256d r2 = bicubic_row_at(r + 2 * stride, flat_x, vx), r3 = bicubic_row_at(r + 3 * stride, flat_x, vx);
            __m256d a = _mm256_sub_pd(r0, r1);
            __m256d p3 = _mm256_sub_pd(_mm256_add_pd(_mm256_add_pd(a, a), r2), r3);
            __m256d p4 = _mm256_add_pd(_mm256_sub_pd(_mm256_sub_pd(r1, r0), r2), r3);
            v = cubic_d(r1, _mm256_sub_pd(r2, r0), p3, p4, _mm256_set1_pd(dys[j]));
          }
          v = _mm256_min_pd(_mm256_max_pd(v, zero), top);
          store3(_mm256_cvttpd_epi32(v), o, x + 1 < w);
        } else {
          ff__pil_warp_px(wp, wp->mode, src->data, w, h, stride, x, y, o);
        }
      }
    }
  }
}

/* The bilinear warp four output pixels at a time, one per lane of a double
 * vector, channel by channel: the lanes compute ff__pil_warp_at's source
 * position (a0*xi + a1*yi + a2, in that order), its floor and fractions,
 * and ff__pil_warp_px's interior sums (v1 = p00 + (p01 - p00)*dx, v2 alike
 * on the row below, v1 + (v2 - v1)*dy, truncated) with the same double
 * operations in the same order, so the bytes are the same. A byte p enters
 * as the double 2^52 + p (its bits: the byte under the exponent's), from
 * which p and the differences of two bytes follow exactly. Each lane's two
 * source pixels on a row come in one 8-byte load. A row runs in chunks of
 * 16 groups: first where each samples (so that the loads' addresses are
 * ready early), then the sums; a group with a pixel off the interior (or
 * whose read would pass the image's last byte), and the row's last w % 4
 * pixels, go through ff__pil_warp_px. Where a row's dy is 0 for every
 * pixel (no a3 term, whole-pixel a5: shear_x, translate_x, translate_y by
 * whole pixels) the second row's sum is left out, and where its dx is (x
 * maps to x: shear_y, translate_y) the products by dx: they add +-0 to a
 * value >= 0, which changes nothing. The image's bytes must fit 32-bit
 * offsets. */
typedef struct bilinear_ctx {
  const ff__pil_warp *wp;
  const uint8_t *data;
  int w, h;
  long stride;
} bilinear_ctx;

__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
bilinear_row_avx2(const bilinear_ctx *cx, int y, uint8_t *out, const int flat_x, const int flat_y) {
  const ff__pil_warp *wp = cx->wp;
  const uint8_t *data = cx->data;
  int w = cx->w, h = cx->h;
  long stride = cx->stride;
  const __m256d a0 = _mm256_set1_pd(wp->a[0]), a2 = _mm256_set1_pd(wp->a[2]);
  const __m256d a3 = _mm256_set1_pd(wp->a[3]), a5 = _mm256_set1_pd(wp->a[5]), half = _mm256_set1_pd(0.5);
  const __m256d four = _mm256_set1_pd(4.0), two52 = _mm256_set1_pd(4503599627370496.0);
  const __m128i below0 = _mm_set1_epi32(-1);
  const __m128i wmax = _mm_set1_epi32(w - 1), hmax = _mm_set1_epi32(h - 1), vstride = _mm_set1_epi32((int)stride);
  /* the last offset whose read of 8 bytes on the row below stays in the image */
  const __m128i vlast = _mm_set1_epi32((int)((long)(h - 1) * stride + 3L * w - 8 - stride));
  const __m256i magic = _mm256_set1_epi64x(0x4330000000000000);
  __m256i pick[3][2]; /* per 128-bit half (two lanes): channel c of the left (k = 0) or right pixel as 2^52 + p */
  for (int c = 0; c < 3; c++)
    for (int k = 0; k < 2; k++) {
      char l = (char)(c + 3 * k), r = (char)(8 + c + 3 * k);
      pick[c][k] = _mm256_setr_epi8(l, -1, -1, -1, -1, -1, 6, 7, r, -1, -1, -1, -1, -1, 14, 15, l, -1, -1, -1, -1, -1,
                                    6, 7, r, -1, -1, -1, -1, -1, 14, 15);
    }
  const __m128i pack = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  double yi = y + 0.5;
  const __m256d by = _mm256_set1_pd(wp->a[1] * yi), ey = _mm256_set1_pd(wp->a[4] * yi);
  enum { GROUPS = 16 };
  int at[GROUPS][4], ok[GROUPS];
  __m256d dxs[GROUPS], dys[GROUPS];
  __m256d xi = _mm256_setr_pd(0.5, 1.5, 2.5, 3.5); /* x + 0.5, exactly */
  for (int x0 = 0; x0 + 4 <= w; x0 += 4 * GROUPS) {
    int n = (w - x0) / 4 < GROUPS ? (w - x0) / 4 : GROUPS;
    for (int k = 0; k < n; k++, xi = _mm256_add_pd(xi, four)) { /* where each group samples */
      __m256d fx = _mm256_sub_pd(_mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(a0, xi), by), a2), half);
      __m256d fy = _mm256_sub_pd(_mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(a3, xi), ey), a5), half);
      __m256d flx = _mm256_floor_pd(fx), fly = _mm256_floor_pd(fy);
      __m128i ix = _mm256_cvttpd_epi32(flx), iy = _mm256_cvttpd_epi32(fly);
      __m128i off = _mm_add_epi32(_mm_mullo_epi32(iy, vstride), _mm_add_epi32(_mm_add_epi32(ix, ix), ix));
      __m128i in = _mm_and_si128(_mm_and_si128(_mm_cmpgt_epi32(ix, below0), _mm_cmpgt_epi32(wmax, ix)),
                                 _mm_and_si128(_mm_cmpgt_epi32(iy, below0), _mm_cmpgt_epi32(hmax, iy)));
      ok[k] = _mm_movemask_epi8(_mm_andnot_si128(_mm_cmpgt_epi32(off, vlast), in)) == 0xffff;
      _mm_storeu_si128((__m128i *)at[k], off);
      dxs[k] = _mm256_sub_pd(fx, flx), dys[k] = _mm256_sub_pd(fy, fly);
    }
    for (int k = 0; k < n; k++) { /* then the groups' sums, their addresses ready */
      int x = x0 + 4 * k;
      if (!ok[k]) {
        for (int j = 0; j < 4; j++)
          ff__pil_warp_px(wp, FF__PIL_WARP_BILINEAR, data, w, h, stride, x + j, y, out + 3 * (x + j));
        continue;
      }
      __m256d dx = dxs[k], dy = dys[k];
      __m256i g[2];
      for (int r = 0; r < (flat_y ? 1 : 2); r++) { /* bytes 6 and 7 of each lane: the exponent of 2^52 */
        const uint8_t *d = data + r * stride;
        __m128i lo = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(d + at[k][0])),
                                        _mm_loadl_epi64((const __m128i *)(d + at[k][1])));
        __m128i hi = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(d + at[k][2])),
                                        _mm_loadl_epi64((const __m128i *)(d + at[k][3])));
        g[r] = _mm256_blend_epi16(_mm256_set_m128i(hi, lo), magic, 0x88);
      }
      __m128i px = _mm_setzero_si128();
      for (int c = 0; c < 3; c++) {
        __m256d v[2];
        for (int r = 0; r < (flat_y ? 1 : 2); r++) {
          __m256d p0 = _mm256_castsi256_pd(_mm256_shuffle_epi8(g[r], pick[c][0]));
          v[r] = _mm256_sub_pd(p0, two52);
          if (!flat_x) {
            __m256d p1 = _mm256_castsi256_pd(_mm256_shuffle_epi8(g[r], pick[c][1]));
            v[r] = _mm256_add_pd(v[r], _mm256_mul_pd(_mm256_sub_pd(p1, p0), dx));
          }
        }
        __m256d t = flat_y ? v[0] : _mm256_add_pd(v[0], _mm256_mul_pd(_mm256_sub_pd(v[1], v[0]), dy));
        px = _mm_or_si128(px, _mm_slli_epi32(_mm256_cvttpd_epi32(t), 8 * c));
      }
      px = _mm_shuffle_epi8(px, pack);
      uint8_t *o = out + 3 * x;
      _mm_storel_epi64((__m128i *)o, px);
      int32_t tail = _mm_extract_epi32(px, 2);
      memcpy(o + 8, &tail, 4);
    }
  }
  for (int x = w / 4 * 4; x < w; x++)
    ff__pil_warp_px(wp, FF__PIL_WARP_BILINEAR, data, w, h, stride, x, y, out + 3 * x);
}

__attribute__((target("avx2"))) static void bilinear_avx2(const ff__pil_warp *wp, const ff__image *src,
                                                           ff__image *dst) {
  bilinear_ctx cx = {wp, src->data, src->width, src->height, (long)src->stride};
  for (int y = 0; y < cx.h; y++) {
    uint8_t *out = dst->data + (size_t)y * dst->stride;
    int flat_x, flat_y;
    row_flat(wp, y, &flat_x, &flat_y);
    if (flat_y && flat_x) bilinear_row_avx2(&cx, y, out, 1, 1);
    else if (flat_y) bilinear_row_avx2(&cx, y, out, 0, 1);
    else if (flat_x) bilinear_row_avx2(&cx, y, out, 1, 0);
    else bilinear_row_avx2(&cx, y, out, 0, 0);
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
    if (wp.mode == FF__PIL_WARP_BICUBIC && __builtin_cpu_supports("avx2")) {
      bicubic_avx2(&wp, src, dst);
      return FF_OK;
    }
    /* 32-bit gather offsets: 8 bytes past the last row's start plus its pixels */
    if (wp.mode == FF__PIL_WARP_BILINEAR && __builtin_cpu_supports("avx2") &&
        (size_t)(h - 1) * src->stride + (size_t)w * 3 + 8 < (size_t)INT32_MAX) {
      bilinear_avx2(&wp, src, dst);
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
