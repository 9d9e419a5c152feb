/* affine.c — the geometric ops of the automatic policies (ShearX/Y,
 * TranslateX/Y, Rotate) on interleaved RGB uint8 images, bit-exact with
 * torchvision 0.14's tensor path (spec 1.3, 2.2-2.6).
 *
 * Each op becomes torchvision's inverse affine matrix, built in double in
 * Python's order (kernels/affine_setup.h, shared with the device executor),
 * then a float32 sampling grid and nearest or bilinear sampling
 * whose per-pixel arithmetic lives in kernels/affine.h (shared with the
 * device kernels). The CPU loop works row by row in chunks: a first pass
 * maps a chunk of output pixels to input positions and tap weights (plain
 * float arithmetic the compiler vectorises), a second pass gathers the taps;
 * pixels whose taps are all inside take a short path, pixels whose taps are
 * all outside take the fill, border pixels the general one. The grid cannot be stepped incrementally — f32(x*a0) is not
 * f32((x-1)*a0) + a0 — so every coordinate is computed from its formula.
 *
 * Translations by whole pixels are row copies where that gives the warp's
 * bits (ff__affine_translate_is_exact). */
#include <math.h>
#include <string.h>

#include "kernels/affine.h"
#include "kernels/affine_setup.h"
#include "ops/augment.h"

#define CHUNK 256 /* output pixels mapped per pass */

static void translate(const ff__image *src, ff__image *dst, int tx, int ty, const uint8_t fill[3]) {
  int w = src->width, h = src->height;
  size_t row_bytes = (size_t)w * 3;
  /* columns [j0, j1) of each output row come from input columns j - tx */
  int j0 = tx > 0 ? tx : 0, j1 = tx < 0 ? w + tx : w;
  if (j1 < j0) j1 = j0 = 0;
  uint8_t *fill_row = NULL; /* a finished all-fill output row, copied to the others */
  for (int i = 0; i < h; i++) {
    uint8_t *out = dst->data + (size_t)i * dst->stride;
    int si = i - ty;
    if (si < 0 || si >= h || j0 == j1) {
      if (fill_row) {
        memcpy(out, fill_row, row_bytes);
        continue;
      }
      for (int j = 0; j < w; j++)
        memcpy(out + (size_t)j * 3, fill, 3);
      fill_row = out;
      continue;
    }
    for (int j = 0; j < j0; j++)
      memcpy(out + (size_t)j * 3, fill, 3);
    memcpy(out + (size_t)j0 * 3, src->data + (size_t)si * src->stride + (size_t)(j0 - tx) * 3,
           (size_t)(j1 - j0) * 3);
    for (int j = j1; j < w; j++)
      memcpy(out + (size_t)j * 3, fill, 3);
  }
}

/* ------------------------------------------------------------ the warp */

/* Input positions of output pixels (i, j0 .. j0+n-1). */
static inline void map_chunk(const ff__affine_grid *g, int i, int j0, int n, float *ix, float *iy) {
  float y = ff__affine_centred(i, g->half_h);
  float ya = y * g->a1, yb = y * g->b1;
  for (int k = 0; k < n; k++) {
    float x = ff__affine_centred(j0 + k, g->half_w);
    ix[k] = ff__affine_coord(x * g->a0, ya, g->a2, g->half_w);
    iy[k] = ff__affine_coord(x * g->b0, yb, g->b2, g->half_h);
  }
}

FF_FMA_CLONES
static void warp_nearest(const ff__affine_grid *g, const ff__image *src, ff__image *dst,
                         const uint8_t fill[3]) {
  int w = src->width, h = src->height;
  float ix[CHUNK], iy[CHUNK];
  int u[CHUNK], v[CHUNK];
  for (int i = 0; i < h; i++) {
    uint8_t *out = dst->data + (size_t)i * dst->stride;
    for (int j0 = 0; j0 < w; j0 += CHUNK) {
      int n = w - j0 < CHUNK ? w - j0 : CHUNK;
      map_chunk(g, i, j0, n, ix, iy);
      for (int k = 0; k < n; k++) {
        u[k] = (int)rintf(ff__affine_clamp(ix[k], w));
        v[k] = (int)rintf(ff__affine_clamp(iy[k], h));
      }
      for (int k = 0; k < n; k++) {
        const uint8_t *p = (unsigned)u[k] < (unsigned)w && (unsigned)v[k] < (unsigned)h
                               ? src->data + (size_t)v[k] * src->stride + (size_t)u[k] * 3
                               : fill;
        uint8_t *o = out + (size_t)(j0 + k) * 3;
        o[0] = p[0], o[1] = p[1], o[2] = p[2];
      }
    }
  }
}

/* Tap positions and weights of one chunk, one array per field (so that the
 * mapping pass vectorises). */
typedef struct chunk_taps {
  const int *x0, *y0;
  const float *nw, *ne, *sw, *se;
  const uint8_t *fill_u8; /* the output of a pixel with all four taps outside */
} chunk_taps;

static inline ff__affine_taps taps_at(const chunk_taps *t, int k) {
  ff__affine_taps tk = {t->x0[k], t->y0[k], t->nw[k], t->ne[k], t->sw[k], t->se[k]};
  return tk;
}

/* Bilinear output of pixel k of a chunk; fill: NULL for black. */
static inline __attribute__((always_inline)) void bilinear_px(const ff__image *src, const chunk_taps *t,
                                                              int k, const float *fill, uint8_t *o) {
  int w = src->width, h = src->height;
  size_t stride = src->stride;
  ff__affine_taps tk = taps_at(t, k);
  if ((unsigned)tk.x0 < (unsigned)(w - 1) && (unsigned)tk.y0 < (unsigned)(h - 1)) {
    /* all four taps inside */
    const uint8_t *p = src->data + (size_t)tk.y0 * stride + (size_t)tk.x0 * 3;
    const uint8_t *q = p + stride;
    float mask = fill ? ff__affine_blend4(1.0f, 1.0f, 1.0f, 1.0f, &tk) : 1.0f;
    for (int c = 0; c < 3; c++) {
      float val = ff__affine_blend4((float)p[c], (float)p[c + 3], (float)q[c], (float)q[c + 3], &tk);
      if (fill) val = ff__affine_fill_blend(val, mask, fill[c]);
      o[c] = ff__round_u8(val);
    }
  } else if (tk.x0 < -1 || tk.x0 >= w || tk.y0 < -1 || tk.y0 >= h) {
    /* all four taps outside: every tap and the mask are 0, so the value is
     * f32(0*0 + 1*fill) = fill (or 0 without fill), rounded */
    o[0] = t->fill_u8[0], o[1] = t->fill_u8[1], o[2] = t->fill_u8[2];
  } else {
    ff__affine_bilinear(src->data, stride, w, h, &tk, fill, o);
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define HAVE_AVX2_PATH 1

/* The gather pass of a chunk with AVX2/FMA, in groups of eight pixels:
 * - all taps of all eight outside: the fill (or zeros), which is what the
 *   sampling gives there (see bilinear_px);
 * - all taps of all eight inside and not in the last two rows: two pixels
 *   per 256-bit vector, the three channels of each (and a spare lane) in
 *   one half; the two upper (lower) taps of a pixel are one 8-byte load
 *   (reading 2 bytes past the taps, hence a row must follow); the 24
 *   output bytes are two 16-byte stores whose last four bytes later
 *   stores rewrite (the last 12 bytes copied near the chunk's end);
 * - the scalar pixel otherwise.
 * The same float32 operations in the same order as the scalar code — one
 * rounding each, vfmadd for ff__fma_f32, cvtps2dq rounding to nearest even
 * as rintf — so the same bits. (AVX2 gathers across pixels were slower.) */
__attribute__((target("avx2,fma"))) static void
gather_bilinear_avx2(const ff__image *src, const chunk_taps *t, int n, const float *fill, uint8_t *out) {
  int w = src->width, h = src->height;
  const __m256i lim_x = _mm256_set1_epi32(w - 1), lim_y = _mm256_set1_epi32(h - 2);
  const __m256i minus1 = _mm256_set1_epi32(-1);
  const size_t stride = src->stride;
  /* (nw of a, nw of b, ne of a, ne of b), 3 bytes and a zero each */
  const __m128i split = _mm_setr_epi8(0, 1, 2, -1, 8, 9, 10, -1, 3, 4, 5, -1, 11, 12, 13, -1);
  const __m256i order8 = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i drop_spare = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2, 4,
                                              5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m256 fill8 = fill ? _mm256_setr_ps(fill[0], fill[1], fill[2], 0.0f, fill[0], fill[1], fill[2], 0.0f)
                            : _mm256_setzero_ps();
  int k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256i x0 = _mm256_loadu_si256((const __m256i *)(t->x0 + k));
    __m256i y0 = _mm256_loadu_si256((const __m256i *)(t->y0 + k));
    /* inside: -1 < x0 < w - 1 and -1 < y0 < h - 2 */
    __m256i ok =
        _mm256_and_si256(_mm256_and_si256(_mm256_cmpgt_epi32(x0, minus1), _mm256_cmpgt_epi32(lim_x, x0)),
                         _mm256_and_si256(_mm256_cmpgt_epi32(y0, minus1), _mm256_cmpgt_epi32(lim_y, y0)));
    /* all taps of all eight outside: x0 < -1, x0 >= w, y0 < -1 or y0 >= h */
    __m256i lim_w = _mm256_set1_epi32(w - 1), lim_h = _mm256_set1_epi32(h - 1);
    __m256i out_all = _mm256_or_si256(
        _mm256_or_si256(_mm256_cmpgt_epi32(minus1, x0), _mm256_cmpgt_epi32(x0, lim_w)),
        _mm256_or_si256(_mm256_cmpgt_epi32(minus1, y0), _mm256_cmpgt_epi32(y0, lim_h)));
    if (_mm256_movemask_epi8(out_all) == -1) {
      for (int q = 0; q < 8; q++) memcpy(out + (size_t)(k + q) * 3, t->fill_u8, 3);
      continue;
    }
    if (_mm256_movemask_epi8(ok) != -1) {
      for (int q = 0; q < 8; q++)
        bilinear_px(src, t, k + q, fill, out + (size_t)(k + q) * 3);
      continue;
    }
    /* two pixels per vector, each with its three channels and a spare
     * lane; the two upper (lower) taps of a pixel are one 8-byte load */
    __m256 wnw = _mm256_loadu_ps(t->nw + k), wne = _mm256_loadu_ps(t->ne + k);
    __m256 wsw = _mm256_loadu_ps(t->sw + k), wse = _mm256_loadu_ps(t->se + k);
    __m256i vi[4];
    for (int q = 0; q < 8; q += 2) {
      const uint8_t *pa = src->data + (size_t)t->y0[k + q] * stride + (size_t)t->x0[k + q] * 3;
      const uint8_t *pb = src->data + (size_t)t->y0[k + q + 1] * stride + (size_t)t->x0[k + q + 1] * 3;
      __m128i top = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)pa), _mm_loadl_epi64((const __m128i *)pb));
      __m128i bot = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(pa + stride)),
                                       _mm_loadl_epi64((const __m128i *)(pb + stride)));
      top = _mm_shuffle_epi8(top, split), bot = _mm_shuffle_epi8(bot, split);
#define TAPS(v) _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v))
      __m256 vnw = TAPS(top), vne = TAPS(_mm_srli_si128(top, 8));
      __m256 vsw = TAPS(bot), vse = TAPS(_mm_srli_si128(bot, 8));
#undef TAPS
      __m256i sel = _mm256_setr_epi32(q, q, q, q, q + 1, q + 1, q + 1, q + 1);
      __m256 nw = _mm256_permutevar8x32_ps(wnw, sel), ne = _mm256_permutevar8x32_ps(wne, sel);
      __m256 sw = _mm256_permutevar8x32_ps(wsw, sel), se = _mm256_permutevar8x32_ps(wse, sel);
      __m256 val = _mm256_fmadd_ps(vse, se, _mm256_fmadd_ps(vsw, sw, _mm256_fmadd_ps(vne, ne, _mm256_mul_ps(vnw, nw))));
      if (fill) {
        __m256 one = _mm256_set1_ps(1.0f);
        __m256 mask = _mm256_fmadd_ps(one, se, _mm256_fmadd_ps(one, sw, _mm256_fmadd_ps(one, ne, nw)));
        val = _mm256_add_ps(_mm256_mul_ps(val, mask), _mm256_mul_ps(_mm256_sub_ps(one, mask), fill8));
      }
      val = _mm256_min_ps(_mm256_max_ps(val, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
      vi[q / 2] = _mm256_cvtps_epi32(val);
    }
    /* pixels p0..p7 (r, g, b, spare as int32; pair q in vi[q]) → 24 bytes */
    __m256i p02 = _mm256_packus_epi32(vi[0], vi[1]); /* lanes: p0 p2 | p1 p3 (u16) */
    __m256i p46 = _mm256_packus_epi32(vi[2], vi[3]); /* p4 p6 | p5 p7 */
    __m256i b = _mm256_packus_epi16(p02, p46);       /* p0 p2 p4 p6 | p1 p3 p5 p7 (u8) */
    b = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(b, order8), drop_spare);
    uint8_t *o = out + (size_t)k * 3;
    _mm_storeu_si128((__m128i *)o, _mm256_castsi256_si128(b)); /* 4 spare bytes, rewritten next */
    if (k + 10 <= n) { /* the 4 spare bytes lie in pixels k+8, k+9, written later */
      _mm_storeu_si128((__m128i *)(o + 12), _mm256_extracti128_si256(b, 1));
    } else {
      uint8_t last[16];
      _mm_storeu_si128((__m128i *)last, _mm256_extracti128_si256(b, 1));
      memcpy(o + 12, last, 12);
    }
  }
  for (; k < n; k++)
    bilinear_px(src, t, k, fill, out + (size_t)k * 3);
}
#endif

/* Tap positions and weights of output pixels (i, j0 .. j0+n-1). */
static inline void map_taps(const ff__affine_grid *g, int i, int j0, int n, int w, int h, int *restrict x0,
                            int *restrict y0, float *restrict nw, float *restrict ne, float *restrict sw,
                            float *restrict se) {
  float y = ff__affine_centred(i, g->half_h), ya = y * g->a1, yb = y * g->b1;
  float a0 = g->a0, a2 = g->a2, b0 = g->b0, b2 = g->b2, hw = g->half_w, hh = g->half_h;
  for (int k = 0; k < n; k++) {
    float x = ff__affine_centred(j0 + k, hw);
    float ix = ff__affine_clamp(ff__affine_coord(x * a0, ya, a2, hw), w);
    float iy = ff__affine_clamp(ff__affine_coord(x * b0, yb, b2, hh), h);
    int fx = ff__affine_floor(ix), fy = ff__affine_floor(iy);
    float wx = ix - (float)fx, wy = iy - (float)fy, ex = 1.0f - wx, sy = 1.0f - wy;
    x0[k] = fx, y0[k] = fy;
    nw[k] = sy * ex, ne[k] = sy * wx, sw[k] = wy * ex, se[k] = wy * wx;
  }
}

/* fill: NULL for black, else the three fill values. */
FF_FMA_CLONES
static void warp_bilinear(const ff__affine_grid *g, const ff__image *src, ff__image *dst, const float *fill) {
  int w = src->width, h = src->height;
  int x0[CHUNK], y0[CHUNK];
  float nw[CHUNK], ne[CHUNK], sw[CHUNK], se[CHUNK];
  uint8_t fill_u8[3] = {0, 0, 0};
  if (fill)
    for (int c = 0; c < 3; c++) fill_u8[c] = ff__affine_fill_u8(fill[c]);
  chunk_taps t = {x0, y0, nw, ne, sw, se, fill_u8};
#ifdef HAVE_AVX2_PATH
  int vector = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  for (int i = 0; i < h; i++) {
    uint8_t *out = dst->data + (size_t)i * dst->stride;
    for (int j0 = 0; j0 < w; j0 += CHUNK) {
      int n = w - j0 < CHUNK ? w - j0 : CHUNK;
      map_taps(g, i, j0, n, w, h, x0, y0, nw, ne, sw, se);
#ifdef HAVE_AVX2_PATH
      if (vector) {
        gather_bilinear_avx2(src, &t, n, fill, out + (size_t)j0 * 3);
        continue;
      }
#endif
      for (int k = 0; k < n; k++)
        bilinear_px(src, &t, k, fill, out + (size_t)(j0 + k) * 3);
    }
  }
}

void ff__aug_affine(const ff__aug *a, const ff__image *src, ff__image *dst) {
  int w = src->width, h = src->height;
  if (w <= 0 || h <= 0) return;
  ff__affine_setup set;
  ff__affine_setup_make(a, w, h, &set);
  if (set.translate) translate(src, dst, set.tx, set.ty, set.fill_u8);
  else if (a->bilinear) warp_bilinear(&set.grid, src, dst, a->has_fill ? a->fill : NULL);
  else warp_nearest(&set.grid, src, dst, set.fill_u8);
}
