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
 * the same matrix; on x86-64 with AVX2 the bilinear and bicubic warps run
 * four output pixels per double vector, channel by channel (warp_avx2), each
 * lane with the scalar code's operations. GaussianBlur is ops/pil_blur.c's. Every op
 * reads src and writes a distinct dst; the step runner gives it a fresh
 * buffer. */
#include "ops/pil.h"
#include "ops/pil_blur.h"
#include "ops/lut.h"
#include "kernels/pixel.h"

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

/* Whether every pixel of row y samples at dx = 0 (x maps to x: a0 = 1,
 * no a1 or a2 term; shear_y, translate_y) or at dy = 0 (no a3 term and a
 * whole-pixel row: shear_x, translate_x, translate_y by whole pixels). */
static void row_flat(const ff__pil_warp *wp, int y, int *flat_x, int *flat_y) {
  const double *a = wp->a;
  double yi = y + 0.5, fy = a[3] * 0.5 + a[4] * yi + a[5] - 0.5; /* every pixel's when a3 = 0 */
  *flat_y = a[3] == 0.0 && fy - floor(fy) == 0.0;
  *flat_x = a[0] == 1.0 && a[1] * yi == 0.0 && a[2] == 0.0;
}

/* The bilinear and bicubic warps four output pixels at a time, one per lane
 * of a double vector, channel by channel: the lanes compute
 * ff__pil_warp_at's source position (a0*xi + a1*yi + a2, in that order),
 * its floor and fractions, and ff__pil_warp_px's interior sums with the same
 * double operations in the same order, so the bytes are the same. A byte p
 * enters as the double 2^52 + p (its bits: the byte under the exponent's),
 * from which p and the differences of two bytes follow exactly. Each lane's
 * bytes on a source row come in 8-byte loads. A row runs in chunks of 16
 * groups: first where each samples (so that the loads' addresses are ready
 * early), then the sums; a group with a pixel off the interior (where the
 * taps need no clamping, and whose reads stay in the image), and the row's
 * last w % 4 pixels, go through ff__pil_warp_px. Where a row's dy is 0 for
 * every pixel (no a3 term, whole-pixel a5: shear_x, translate_x,
 * translate_y by whole pixels) the rows but the one at iy are left out, and
 * where its dx is (x maps to x: shear_y, translate_y) the products by dx:
 * a cubic or a lerp at 0 is its first term plus +-0, which changes nothing
 * once clamped and truncated. The image's bytes must fit 32-bit offsets. */
typedef struct warp_ctx {
  const ff__pil_warp *wp;
  const uint8_t *data;
  int w, h;
  long stride;
} warp_ctx;

enum { GROUPS = 16 };

enum { GROUP_PER_PIXEL, GROUP_INTERIOR, GROUP_FILL };

/* Where groups 0 .. n-1 (four pixels each, from *xi: their x + 0.5) of row
 * y sample, for a warp of `taps` taps per axis reading `span` bytes from
 * each lane's offset on each of its rows: at[k], the offset of group k's
 * lanes' first tap (back = taps/2 - 1 pixels before the neighbour at or
 * before the centre, on each axis), kind[k] GROUP_INTERIOR when all four
 * are interior, GROUP_FILL when all four centres map outside the image
 * (ff__pil_warp_at's test), and the fractions. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
warp_groups(const warp_ctx *cx, int y, int n, int taps, int span, __m256d *xi, int at[][4], int *kind,
            __m256d *dxs, __m256d *dys) {
  const ff__pil_warp *wp = cx->wp;
  int back = taps / 2 - 1;
  const __m256d a0 = _mm256_set1_pd(wp->a[0]), a2 = _mm256_set1_pd(wp->a[2]);
  const __m256d a3 = _mm256_set1_pd(wp->a[3]), a5 = _mm256_set1_pd(wp->a[5]), half = _mm256_set1_pd(0.5);
  const __m256d zero = _mm256_setzero_pd(), wd = _mm256_set1_pd(cx->w), hd = _mm256_set1_pd(cx->h);
  const __m128i lo = _mm_set1_epi32(back - 1), vback = _mm_set1_epi32(back),
                vstride = _mm_set1_epi32((int)cx->stride);
  const __m128i xmax = _mm_set1_epi32(cx->w - taps + back + 1),
                ymax = _mm_set1_epi32(cx->h - taps + back + 1);
  /* the last offset whose reads on the lowest row stay in the image */
  const __m128i vlast = _mm_set1_epi32((int)((long)(cx->h - taps) * cx->stride + 3L * cx->w - span));
  double yi = y + 0.5;
  const __m256d by = _mm256_set1_pd(wp->a[1] * yi), ey = _mm256_set1_pd(wp->a[4] * yi);
  for (int k = 0; k < n; k++, *xi = _mm256_add_pd(*xi, _mm256_set1_pd(4.0))) {
    __m256d mx = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(a0, *xi), by), a2);
    __m256d my = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(a3, *xi), ey), a5);
    __m256d fx = _mm256_sub_pd(mx, half), fy = _mm256_sub_pd(my, half);
    __m256d flx = _mm256_floor_pd(fx), fly = _mm256_floor_pd(fy);
    __m128i ix = _mm256_cvttpd_epi32(flx), iy = _mm256_cvttpd_epi32(fly);
    __m128i tx = _mm_sub_epi32(ix, vback), ty = _mm_sub_epi32(iy, vback);
    __m128i off = _mm_add_epi32(_mm_mullo_epi32(ty, vstride), _mm_add_epi32(_mm_add_epi32(tx, tx), tx));
    __m128i in = _mm_and_si128(_mm_and_si128(_mm_cmpgt_epi32(ix, lo), _mm_cmpgt_epi32(xmax, ix)),
                               _mm_and_si128(_mm_cmpgt_epi32(iy, lo), _mm_cmpgt_epi32(ymax, iy)));
    kind[k] = GROUP_INTERIOR;
    if (_mm_movemask_epi8(_mm_andnot_si128(_mm_cmpgt_epi32(off, vlast), in)) != 0xffff) {
      __m256d out_x = _mm256_or_pd(_mm256_cmp_pd(mx, zero, _CMP_LT_OQ), _mm256_cmp_pd(mx, wd, _CMP_GE_OQ));
      __m256d out_y = _mm256_or_pd(_mm256_cmp_pd(my, zero, _CMP_LT_OQ), _mm256_cmp_pd(my, hd, _CMP_GE_OQ));
      kind[k] = _mm256_movemask_pd(_mm256_or_pd(out_x, out_y)) == 0xf ? GROUP_FILL : GROUP_PER_PIXEL;
    }
    _mm_storeu_si128((__m128i *)at[k], off);
    dxs[k] = _mm256_sub_pd(fx, flx), dys[k] = _mm256_sub_pd(fy, fly);
  }
}

/* Pixels x .. x + 3 of row y of a group off the interior: the fill colour,
 * or each pixel's ff__pil_warp_px. */
static inline void warp_group_edge(const warp_ctx *cx, int mode, int kind, int x, int y, uint8_t *out) {
  for (int j = 0; j < 4; j++) {
    uint8_t *o = out + 3 * (x + j);
    if (kind == GROUP_FILL)
      memcpy(o, cx->wp->fill, 3);
    else
      ff__pil_warp_px(cx->wp, mode, cx->data, cx->w, cx->h, cx->stride, x + j, y, o);
  }
}

/* The 8 bytes at d + at[l] in lane l, bytes 6 and 7 replaced by the
 * exponent of 2^52. */
__attribute__((target("avx2"))) static inline __m256i lanes8(const uint8_t *d, const int at[4]) {
  __m128i lo = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(d + at[0])),
                                  _mm_loadl_epi64((const __m128i *)(d + at[1])));
  __m128i hi = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(d + at[2])),
                                  _mm_loadl_epi64((const __m128i *)(d + at[3])));
  return _mm256_blend_epi16(_mm256_set_m128i(hi, lo), _mm256_set1_epi64x(0x4330000000000000), 0x88);
}

/* Per 128-bit half (two lanes): channel c of a lane's first (k = 0) or
 * second pixel as 2^52 + p. */
__attribute__((target("avx2"))) static inline void make_picks(__m256i pick[3][2]) {
  for (int c = 0; c < 3; c++)
    for (int k = 0; k < 2; k++) {
      char l = (char)(c + 3 * k), r = (char)(8 + c + 3 * k);
      pick[c][k] = _mm256_setr_epi8(l, -1, -1, -1, -1, -1, 6, 7, r, -1, -1, -1, -1, -1, 14, 15, l, -1, -1, -1, -1, -1,
                                    6, 7, r, -1, -1, -1, -1, -1, 14, 15);
    }
}

__attribute__((target("avx2"))) static inline __m256d pick_pd(__m256i g, __m256i pick) {
  return _mm256_castsi256_pd(_mm256_shuffle_epi8(g, pick));
}

/* The four pixels of px (channel c in byte c of each int32 lane) as 12
 * bytes at o. */
__attribute__((target("avx2"))) static inline void store4(__m128i px, uint8_t *o) {
  px = _mm_shuffle_epi8(px, _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1));
  _mm_storel_epi64((__m128i *)o, px);
  int32_t tail = _mm_extract_epi32(px, 2);
  memcpy(o + 8, &tail, 4);
}

/* Bilinear, the four pixels of a group whose first taps are at at[]: v1 =
 * p00 + (p01 - p00)*dx, v2 alike on the row below, v1 + (v2 - v1)*dy,
 * truncated; channel c in byte c of each int32 lane. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m128i
bilinear_group(const warp_ctx *cx, const int at[4], __m256d dx, __m256d dy, __m256i pick[3][2],
               const int flat_x, const int flat_y) {
  const __m256d two52 = _mm256_set1_pd(4503599627370496.0);
  __m256i g[2];
  for (int r = 0; r < (flat_y ? 1 : 2); r++)
    g[r] = lanes8(cx->data + r * cx->stride, at);
  __m128i px = _mm_setzero_si128();
  for (int c = 0; c < 3; c++) {
    __m256d v[2];
    for (int r = 0; r < (flat_y ? 1 : 2); r++) {
      __m256d p0 = pick_pd(g[r], pick[c][0]);
      v[r] = _mm256_sub_pd(p0, two52);
      if (!flat_x)
        v[r] = _mm256_add_pd(v[r], _mm256_mul_pd(_mm256_sub_pd(pick_pd(g[r], pick[c][1]), p0), dx));
    }
    __m256d t = flat_y ? v[0] : _mm256_add_pd(v[0], _mm256_mul_pd(_mm256_sub_pd(v[1], v[0]), dy));
    px = _mm_or_si128(px, _mm_slli_epi32(_mm256_cvttpd_epi32(t), 8 * c));
  }
  return px;
}

/* Pillow's cubic p1 + d*(p2 + d*(p3 + d*p4)). */
__attribute__((target("avx2"))) static inline __m256d cubic_d(__m256d p1, __m256d p2, __m256d p3, __m256d p4,
                                                              __m256d d) {
  __m256d v = _mm256_add_pd(p3, _mm256_mul_pd(d, p4));
  v = _mm256_add_pd(p2, _mm256_mul_pd(d, v));
  return _mm256_add_pd(p1, _mm256_mul_pd(d, v));
}

/* Bicubic, as bilinear_group: on each of the four source rows the cubic of
 * the four bytes v1..v4 (p1 = v2, p2 = v3 - v1, p3 = 2(v1 - v2) + v3 - v4,
 * p4 = v2 - v1 - v3 + v4: small integers, exact in double in any order),
 * then the cubic of the four row values (-v1 + v3 is v3 - v1 and 2x is
 * x + x, exactly), clamped to [0, 255] and truncated. A lane's row comes in
 * two loads, bytes 0..7 (v1, v2) and 6..13 (v3, v4): its reads pass the
 * last tap by two bytes. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m128i
bicubic_group(const warp_ctx *cx, const int at[4], __m256d dx, __m256d dy, __m256i pick[3][2],
              const int flat_x, const int flat_y) {
  const __m256d two52 = _mm256_set1_pd(4503599627370496.0), zero = _mm256_setzero_pd(),
                top = _mm256_set1_pd(255.0);
  __m256d rv[4][3];
  for (int r = flat_y ? 1 : 0; r < (flat_y ? 2 : 4); r++) {
    const uint8_t *d = cx->data + r * cx->stride;
    __m256i g0 = lanes8(d, at);
    __m256i g1 = flat_x ? g0 : lanes8(d + 6, at);
    for (int c = 0; c < 3; c++) {
      __m256d v1 = pick_pd(g0, pick[c][0]), v2 = pick_pd(g0, pick[c][1]);
      rv[r][c] = _mm256_sub_pd(v2, two52);
      if (flat_x) continue;
      __m256d v3 = pick_pd(g1, pick[c][0]), v4 = pick_pd(g1, pick[c][1]);
      __m256d a = _mm256_sub_pd(v1, v2), b = _mm256_sub_pd(v3, v4);
      __m256d p3 = _mm256_add_pd(_mm256_add_pd(a, a), b), p4 = _mm256_sub_pd(zero, _mm256_add_pd(a, b));
      rv[r][c] = cubic_d(rv[r][c], _mm256_sub_pd(v3, v1), p3, p4, dx);
    }
  }
  __m128i px = _mm_setzero_si128();
  for (int c = 0; c < 3; c++) {
    __m256d v = rv[1][c];
    if (!flat_y) {
      __m256d a = _mm256_sub_pd(rv[0][c], rv[1][c]);
      __m256d p3 = _mm256_sub_pd(_mm256_add_pd(_mm256_add_pd(a, a), rv[2][c]), rv[3][c]);
      __m256d p4 = _mm256_add_pd(_mm256_sub_pd(_mm256_sub_pd(rv[1][c], rv[0][c]), rv[2][c]), rv[3][c]);
      v = cubic_d(rv[1][c], _mm256_sub_pd(rv[2][c], rv[0][c]), p3, p4, dy);
    }
    v = _mm256_min_pd(_mm256_max_pd(v, zero), top);
    px = _mm_or_si128(px, _mm_slli_epi32(_mm256_cvttpd_epi32(v), 8 * c));
  }
  return px;
}

/* Row y of a bilinear or bicubic (mode) warp into out. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
warp_row_avx2(const warp_ctx *cx, int y, uint8_t *out, const int mode, const int flat_x, const int flat_y) {
  const int cubic = mode == FF__PIL_WARP_BICUBIC;
  __m256i pick[3][2];
  make_picks(pick);
  int at[GROUPS][4], kind[GROUPS];
  __m256d dxs[GROUPS], dys[GROUPS];
  __m256d xi = _mm256_setr_pd(0.5, 1.5, 2.5, 3.5); /* x + 0.5, exactly */
  for (int x0 = 0; x0 + 4 <= cx->w; x0 += 4 * GROUPS) {
    int n = (cx->w - x0) / 4 < GROUPS ? (cx->w - x0) / 4 : GROUPS;
    warp_groups(cx, y, n, cubic ? 4 : 2, cubic ? 14 : 8, &xi, at, kind, dxs, dys);
    for (int k = 0; k < n; k++) { /* then the groups' sums, their addresses ready */
      int x = x0 + 4 * k;
      if (kind[k] != GROUP_INTERIOR) {
        warp_group_edge(cx, mode, kind[k], x, y, out);
        continue;
      }
      store4(cubic ? bicubic_group(cx, at[k], dxs[k], dys[k], pick, flat_x, flat_y)
                   : bilinear_group(cx, at[k], dxs[k], dys[k], pick, flat_x, flat_y),
             out + 3 * x);
    }
  }
  for (int x = cx->w / 4 * 4; x < cx->w; x++)
    ff__pil_warp_px(cx->wp, mode, cx->data, cx->w, cx->h, cx->stride, x, y, out + 3 * x);
}

/* The bilinear or bicubic warp of src into dst, each row through its mode,
 * flat_x and flat_y specialisation of warp_row_avx2. */
__attribute__((target("avx2"))) static void warp_avx2(const ff__pil_warp *wp, const ff__image *src,
                                                      ff__image *dst) {
  warp_ctx cx = {wp, src->data, src->width, src->height, (long)src->stride};
  const int B = FF__PIL_WARP_BILINEAR, C = FF__PIL_WARP_BICUBIC;
  for (int y = 0; y < cx.h; y++) {
    uint8_t *out = dst->data + (size_t)y * dst->stride;
    int flat_x, flat_y;
    row_flat(wp, y, &flat_x, &flat_y);
    switch ((wp->mode == C) * 4 + flat_x * 2 + flat_y) {
    case 0: warp_row_avx2(&cx, y, out, B, 0, 0); break;
    case 1: warp_row_avx2(&cx, y, out, B, 0, 1); break;
    case 2: warp_row_avx2(&cx, y, out, B, 1, 0); break;
    case 3: warp_row_avx2(&cx, y, out, B, 1, 1); break;
    case 4: warp_row_avx2(&cx, y, out, C, 0, 0); break;
    case 5: warp_row_avx2(&cx, y, out, C, 0, 1); break;
    case 6: warp_row_avx2(&cx, y, out, C, 1, 0); break;
    default: warp_row_avx2(&cx, y, out, C, 1, 1); break;
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
    /* 32-bit load offsets: the last row's start plus its pixels and a few bytes */
    if ((wp.mode == FF__PIL_WARP_BILINEAR || wp.mode == FF__PIL_WARP_BICUBIC) &&
        ff__cpu_avx2() &&
        (size_t)(h - 1) * src->stride + (size_t)w * 3 + 8 < (size_t)INT32_MAX) {
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
