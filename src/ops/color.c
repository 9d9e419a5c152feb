/* color.c — the photometric ops that read more than one value per output,
 * on interleaved uint8 images, bit-exact with torchvision's (transforms v1)
 * uint8 tensor path (spec sections 2.8-2.10, 2.15; the per-pixel
 * arithmetic lives in kernels/color.h and kernels/hue.h, shared with the
 * device kernels), and the entry point of every photometric op (the table
 * ops are in color_table.c). Each reads a source image and writes a
 * destination of the same size in one pass: the same memory to work in
 * place, as the step runner does except at the start of an AugMix chain,
 * whose source (the image every chain starts from) must stay.
 *
 * color (the pixel's gray), hue (the pixel's three channels, through HSV),
 * contrast (the image's mean gray; after that it is a table) and sharpness
 * (a 3x3 neighbourhood, read from the source, or in place from a copy of
 * the image in the caller's scratch buffer). Their loops run over whole
 * rows with the neighbour offsets and channel counts as constants, so they
 * vectorise; on x86-64 they are also compiled for AVX2 (the results do not
 * change: nothing is fused, -ffp-contract=off), and hue, color and the
 * contrast mean's gray sum run eight pixels per AVX2 vector with the scalar
 * code's operations (hue8_avx2, saturation_avx2, gray_row_sum_avx2), and
 * with AVX-512 VBMI color, grayscale and the gray sum 16 per vector
 * (saturation_vbmi, gray_row_vbmi, gray_row_sum_vbmi). */
#include <string.h>

#include "kernels/color.h"
#include "kernels/hue.h"
#include "kernels/pixel.h"
#include "ops/augment.h"
#include "ops/color_rows.h"

/* ------------------------------------------------------------ color, contrast */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#define HAVE_AVX2_RGB8 1
#define AVX2_FMA __attribute__((target("avx2,fma")))
/* Eight RGB pixels (24 bytes: a 16- and an 8-byte load, nothing past them)
 * as float vectors of their R, G and B. */
AVX2_FMA static inline void rgb8_load(const uint8_t *p, __m256 c[3]) {
  const __m128i v = _mm_loadu_si128((const __m128i *)p), u = _mm_loadl_epi64((const __m128i *)(p + 16));
  const __m128i from_v[3] = {_mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
                             _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
                             _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1)};
  const __m128i from_u[3] = {_mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, -1, -1, -1, -1, -1, -1, -1, -1),
                             _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, -1, -1, -1, -1, -1, -1, -1, -1),
                             _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, -1, -1, -1, -1, -1, -1, -1, -1)};
  for (int k = 0; k < 3; k++)
    c[k] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_or_si128(_mm_shuffle_epi8(v, from_v[k]), _mm_shuffle_epi8(u, from_u[k]))));
}

/* ff__gray_u8 / ff__gray_v2_u8 of eight pixels, truncated, as int32. */
AVX2_FMA static inline __m256i gray8(const __m256 c[3], int v2) {
  __m256 sr = _mm256_mul_ps(_mm256_set1_ps((float)0.2989), c[0]);
  if (v2) return _mm256_cvttps_epi32(_mm256_fmadd_ps(c[2], _mm256_set1_ps((float)0.114),
                                                     _mm256_fmadd_ps(c[1], _mm256_set1_ps((float)0.587), sr)));
  __m256 sg = _mm256_mul_ps(_mm256_set1_ps((float)0.587), c[1]);
  __m256 sb = _mm256_mul_ps(_mm256_set1_ps((float)0.114), c[2]);
  return _mm256_cvttps_epi32(_mm256_add_ps(_mm256_add_ps(sr, sg), sb));
}

/* ff__blend_u8 / ff__blend_v2_u8 of eight values with y, as int32: max and
 * min are ff__clamp_trunc_u8's comparisons (NaN and -0 give +0). */
AVX2_FMA static inline __m256i blend8(ff__blend_w w, __m256 x, __m256 y) {
  __m256 ax = _mm256_mul_ps(_mm256_set1_ps(w.a), x);
  __m256 v = w.v2 ? _mm256_fmadd_ps(y, _mm256_set1_ps(w.b), ax) : _mm256_add_ps(ax, _mm256_mul_ps(_mm256_set1_ps(w.b), y));
  v = _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
  return _mm256_cvttps_epi32(v);
}

/* Eight RGB pixels from their channels' int32 vectors (values 0..255;
 * packus saturates anything else to 0 or 255) as 24 bytes: a 16- and an
 * 8-byte store, nothing past them. */
AVX2_FMA static inline void rgb8_store(uint8_t *q, __m256i r, __m256i g, __m256i b) {
  const __m256i order = _mm256_setr_epi8(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, -1, -1, -1, -1, 0, 4, 8, 1, 5, 9, 2, 6,
                                         10, 3, 7, 11, -1, -1, -1, -1);
  __m256i o = _mm256_shuffle_epi8(_mm256_packus_epi16(_mm256_packus_epi32(r, g), _mm256_packus_epi32(b, b)), order);
  o = _mm256_permutevar8x32_epi32(o, _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7));
  _mm_storeu_si128((__m128i *)q, _mm256_castsi256_si128(o));
  _mm_storel_epi64((__m128i *)(q + 16), _mm256_extracti128_si256(o, 1));
}

/* Color (saturation) on a row's first pixels, eight at a time, each read
 * before it is written (in place works); returns how many (a multiple of 8). */
AVX2_FMA static size_t saturation_row_avx2(const uint8_t *p, uint8_t *q, size_t pixels, ff__blend_w w) {
  size_t x = 0;
  for (; x + 8 <= pixels; x += 8) {
    __m256 c[3];
    rgb8_load(p + 3 * x, c);
    __m256 g = _mm256_cvtepi32_ps(gray8(c, w.v2));
    rgb8_store(q + 3 * x, blend8(w, c[0], g), blend8(w, c[1], g), blend8(w, c[2], g));
  }
  return x;
}

/* Grayscale is color with factor 0, whose blend 0*X + 1*gray (v1) or
 * fma(gray, 1, 0*X) (v2) is the gray value exactly: the gray in all three
 * channels, without the blend (the same bytes), on a row's first pixels as
 * saturation_row_avx2 does. */
AVX2_FMA static size_t gray_row_avx2(const uint8_t *p, uint8_t *q, size_t pixels, int v2) {
  size_t x = 0;
  for (; x + 8 <= pixels; x += 8) {
    __m256 c[3];
    rgb8_load(p + 3 * x, c);
    __m256i g = gray8(c, v2);
    rgb8_store(q + 3 * x, g, g, g);
  }
  return x;
}

/* The sum of the truncated grays of an RGB row's first pixels, eight at a
 * time (< 2^24 pixels: the int32 lanes cannot overflow); *done: how many. */
AVX2_FMA static uint32_t gray_row_sum_avx2(const uint8_t *p, size_t pixels, int v2, size_t *done) {
  __m256i acc = _mm256_setzero_si256();
  size_t x = 0;
  for (; x + 8 <= pixels; x += 8) {
    __m256 c[3];
    rgb8_load(p + 3 * x, c);
    acc = _mm256_add_epi32(acc, gray8(c, v2));
  }
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  *done = x;
  return (uint32_t)_mm_cvtsi128_si32(s);
}
#endif

#ifdef HAVE_VBMI_PATH
/* The float32 arithmetic of kernels/color.h on 16 lanes, operation for
 * operation (max/min are the same comparisons as ff__clamp_trunc_u8's). */
VBMI_TARGET static inline __m512 u8x16_to_ps(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)); }

VBMI_TARGET static inline __m512 gray_ps(__m512 R, __m512 G, __m512 B) {
  __m512 sr = _mm512_mul_ps(_mm512_set1_ps((float)0.2989), R);
  __m512 sg = _mm512_mul_ps(_mm512_set1_ps((float)0.587), G);
  __m512 sb = _mm512_mul_ps(_mm512_set1_ps((float)0.114), B);
  return _mm512_add_ps(_mm512_add_ps(sr, sg), sb); /* >= 0: truncation is cvtt */
}

VBMI_TARGET static inline __m128i blend_x16(ff__blend_w w, __m512 x, __m512 y) {
  __m512 p = _mm512_mul_ps(_mm512_set1_ps(w.a), x);
  __m512 q = _mm512_mul_ps(_mm512_set1_ps(w.b), y);
  __m512 v = _mm512_add_ps(p, q);
  v = _mm512_max_ps(v, _mm512_setzero_ps()); /* v > 0 ? v : 0 */
  v = _mm512_min_ps(v, _mm512_set1_ps(255.0f)); /* v < 255 ? v : 255 */
  return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v));
}

/* vpermb indices: RGB x16 to planes (R in bytes 0-15, G 16-31, B 32-47) and back. */
VBMI_TARGET static inline __m512i deinterleave3_idx(void) {
  uint8_t d[64];
  for (int i = 0; i < 64; i++)
    d[i] = (uint8_t)(i < 48 ? 3 * (i % 16) + i / 16 : 0);
  return _mm512_loadu_si512((const void *)d);
}

VBMI_TARGET static inline __m512i interleave3_idx(void) {
  uint8_t d[64];
  for (int i = 0; i < 64; i++)
    d[i] = (uint8_t)(i < 48 ? 16 * (i % 3) + i / 3 : 0);
  return _mm512_loadu_si512((const void *)d);
}

/* The 48 bytes of 16 RGB pixels at p into bytes 0-47 (n < 16: the first
 * n pixels, masked by m = tail_mask(3n), the rest 0), and back: masked
 * loads and stores only at a row's end, where they are needed (they are slow). */
VBMI_TARGET static inline __m512i load_rgb16(const uint8_t *p, size_t n, __mmask64 m) {
  if (n < 16) return _mm512_maskz_loadu_epi8(m, p);
  return _mm512_inserti32x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p)),
                            _mm_loadu_si128((const __m128i *)(p + 32)), 2);
}

VBMI_TARGET static inline void store_rgb16(uint8_t *q, size_t n, __mmask64 m, __m512i o) {
  if (n < 16) {
    _mm512_mask_storeu_epi8(q, m, o);
    return;
  }
  _mm256_storeu_si256((__m256i *)q, _mm512_castsi512_si256(o));
  _mm_storeu_si128((__m128i *)(q + 32), _mm512_extracti32x4_epi32(o, 2));
}

VBMI_TARGET static void saturation_vbmi(rows r, ff__blend_w w) {
  size_t pixels = r.bytes / 3;
  __m512i de = deinterleave3_idx(), in = interleave3_idx();
  for (size_t y = 0; y < r.count; y++) {
    const uint8_t *p = r.src + y * r.src_stride;
    uint8_t *q = r.dst + y * r.dst_stride;
    for (size_t x = 0; x < pixels; x += 16) {
      size_t n = pixels - x < 16 ? pixels - x : 16;
      __mmask64 m = tail_mask(3 * n);
      __m512i v = load_rgb16(p + 3 * x, n, m);
      __m512i d = _mm512_permutexvar_epi8(de, v);
      __m512 R = u8x16_to_ps(_mm512_castsi512_si128(d));
      __m512 G = u8x16_to_ps(_mm512_extracti32x4_epi32(d, 1));
      __m512 B = u8x16_to_ps(_mm512_extracti32x4_epi32(d, 2));
      __m512 g = _mm512_cvtepi32_ps(_mm512_cvttps_epi32(gray_ps(R, G, B)));
      __m512i o = _mm512_castsi128_si512(blend_x16(w, R, g));
      o = _mm512_inserti32x4(o, blend_x16(w, G, g), 1);
      o = _mm512_inserti32x4(o, blend_x16(w, B, g), 2);
      o = _mm512_permutexvar_epi8(in, o);
      store_rgb16(q + 3 * x, n, m, o);
    }
  }
}

/* Grayscale (saturation with factor 0: the gray in all three channels, as
 * gray_row_avx2) on one RGB row, 16 pixels per step: a zero-masking vpermb
 * per channel takes its 16 bytes from the 48 into int32 lanes, and one
 * vpermb spreads the low bytes of the 16 gray lanes to 48. */
VBMI_TARGET static void gray_row_vbmi(const uint8_t *p, uint8_t *q, size_t pixels, const __m512i take[3],
                                      __m512i spread) {
  const __mmask64 low = 0x1111111111111111ull; /* byte 0 of each int32 lane */
  for (size_t x = 0; x < pixels; x += 16) {
    size_t n = pixels - x < 16 ? pixels - x : 16;
    __mmask64 m = tail_mask(3 * n);
    __m512i v = load_rgb16(p + 3 * x, n, m);
    __m512 R = _mm512_cvtepi32_ps(_mm512_maskz_permutexvar_epi8(low, take[0], v));
    __m512 G = _mm512_cvtepi32_ps(_mm512_maskz_permutexvar_epi8(low, take[1], v));
    __m512 B = _mm512_cvtepi32_ps(_mm512_maskz_permutexvar_epi8(low, take[2], v));
    __m512i g = _mm512_cvttps_epi32(gray_ps(R, G, B)); /* 0..255 */
    __m512i o = _mm512_permutexvar_epi8(spread, g);
    store_rgb16(q + 3 * x, n, m, o);
  }
}

/* vpermb indices: channel ch of pixel i to byte 4i (take_idx), byte 4i of
 * 16 int32 lanes to bytes 3i .. 3i + 2 (spread3_idx). */
VBMI_TARGET static inline __m512i take_idx(int ch) {
  uint8_t d[64];
  for (int i = 0; i < 64; i++)
    d[i] = (uint8_t)(3 * (i / 4) + ch);
  return _mm512_loadu_si512((const void *)d);
}

VBMI_TARGET static inline __m512i spread3_idx(void) {
  uint8_t d[64];
  for (int i = 0; i < 64; i++)
    d[i] = (uint8_t)(i < 48 ? 4 * (i / 3) : 0);
  return _mm512_loadu_si512((const void *)d);
}

/* saturation_vbmi, or gray_row_vbmi for grayscale. */
VBMI_TARGET static void color_vbmi(rows r, ff__blend_w w) {
  if (!(w.a == 0.0f && w.b == 1.0f)) {
    saturation_vbmi(r, w);
    return;
  }
  const __m512i take[3] = {take_idx(0), take_idx(1), take_idx(2)}, spread = spread3_idx();
  for (size_t y = 0; y < r.count; y++)
    gray_row_vbmi(r.src + y * r.src_stride, r.dst + y * r.dst_stride, r.bytes / 3, take, spread);
}

/* gray_sum of one RGB row of `pixels` pixels (< 2^24). */
VBMI_TARGET static uint32_t gray_row_sum_vbmi(const uint8_t *p, size_t pixels) {
  __m512i de = deinterleave3_idx(), acc = _mm512_setzero_si512();
  for (size_t x = 0; x < pixels; x += 16) {
    size_t n = pixels - x < 16 ? pixels - x : 16;
    __m512i d = _mm512_permutexvar_epi8(de, _mm512_maskz_loadu_epi8(tail_mask(3 * n), p + 3 * x));
    __m512 R = u8x16_to_ps(_mm512_castsi512_si128(d));
    __m512 G = u8x16_to_ps(_mm512_extracti32x4_epi32(d, 1));
    __m512 B = u8x16_to_ps(_mm512_extracti32x4_epi32(d, 2));
    acc = _mm512_add_epi32(acc, _mm512_cvttps_epi32(gray_ps(R, G, B))); /* gray(0,0,0) = 0 */
  }
  return (uint32_t)_mm512_reduce_add_epi32(acc);
}
#endif

/* Color on plain rows in v1's arithmetic or, v2 (a constant after
 * inlining, so that each loop is its own), v2's gray and blend. */
static inline __attribute__((always_inline)) void saturation_rows(rows r, ff__blend_w w, const int v2) {
  size_t pixels = r.bytes / 3;
#ifdef HAVE_AVX2_RGB8
  int vec = ff__cpu_avx2();
  int gray = w.a == 0.0f && w.b == 1.0f; /* grayscale: the blend below gives the gray too */
#endif
  for (size_t y = 0; y < r.count; y++) {
    const uint8_t *p = r.src + y * r.src_stride;
    uint8_t *q = r.dst + y * r.dst_stride;
    size_t x = 0;
#ifdef HAVE_AVX2_RGB8
    if (vec) x = gray ? gray_row_avx2(p, q, pixels, v2) : saturation_row_avx2(p, q, pixels, w);
#endif
    for (; x < pixels; x++) {
      uint8_t R = p[3 * x], G = p[3 * x + 1], B = p[3 * x + 2];
      float g = (float)(v2 ? ff__gray_v2_u8(R, G, B) : ff__gray_u8(R, G, B));
      q[3 * x] = v2 ? ff__blend_v2_u8(w, (float)R, g) : ff__blend_u8(w, (float)R, g);
      q[3 * x + 1] = v2 ? ff__blend_v2_u8(w, (float)G, g) : ff__blend_u8(w, (float)G, g);
      q[3 * x + 2] = v2 ? ff__blend_v2_u8(w, (float)B, g) : ff__blend_u8(w, (float)B, g);
    }
  }
}

/* Color (spec 2.8): blend(X, gray(X), f) on RGB pixels (w.v2: v2's). */
FF_FMA_CLONES static void saturation(const ff__image *src, const ff__image *dst, ff__blend_w w) {
  rows r = rows_of(src, dst);
  if (w.v2) {
    saturation_rows(r, w, 1);
    return;
  }
#ifdef HAVE_VBMI_PATH
  if (have_vbmi()) {
    color_vbmi(r, w);
    return;
  }
#endif
  saturation_rows(r, w, 0);
}

/* The sum of the truncated gray values of an RGB image (or of the pixels of
 * a one-channel one), exact in integers; v2: v2's gray. */
FF_FMA_CLONES static uint64_t gray_sum(const ff__image *img, int v2) {
  rows r = rows_of(img, img);
  uint64_t sum = 0;
#ifdef HAVE_AVX2_RGB8
  int avx2 = ff__cpu_avx2();
#endif
  for (size_t y = 0; y < r.count; y++) {
    const uint8_t *p = r.src + y * r.src_stride;
    uint32_t row = 0; /* < 2^32: a row is at most 2^24 pixels here */
    if (img->channels == 3) {
      size_t pixels = r.bytes / 3;
      size_t x = 0;
#ifdef HAVE_VBMI_PATH
      if (!v2 && have_vbmi()) {
        sum += gray_row_sum_vbmi(p, pixels);
        continue;
      }
#endif
#ifdef HAVE_AVX2_RGB8
      if (avx2) row = gray_row_sum_avx2(p, pixels, v2, &x);
#endif
      if (v2)
        for (; x < pixels; x++)
          row += ff__gray_v2_u8(p[3 * x], p[3 * x + 1], p[3 * x + 2]);
      else
        for (; x < pixels; x++)
          row += ff__gray_u8(p[3 * x], p[3 * x + 1], p[3 * x + 2]);
    } else {
      for (size_t k = 0; k < r.bytes; k++)
        row += p[k];
    }
    sum += row;
  }
  return sum;
}

/* gray_sum over chunks of at most 2^24 pixels, so the per-row uint32 sum
 * cannot overflow even when a dense image is one long row. */
static uint64_t gray_sum_chunked(const ff__image *img, int v2) {
  const size_t chunk = (size_t)1 << 24;
  size_t pixels = (size_t)img->width * (size_t)img->height;
  if (img->stride != (size_t)img->width * img->channels || pixels <= chunk) return gray_sum(img, v2);
  uint64_t sum = 0;
  for (size_t done = 0; done < pixels; done += chunk) {
    size_t m = pixels - done < chunk ? pixels - done : chunk;
    ff__image part = {img->data + done * img->channels, (int)m, 1, img->channels, m * img->channels};
    sum += gray_sum(&part, v2);
  }
  return sum;
}

/* Contrast (spec 2.9): blend(X, mean, f) with the mean of
 * ff__contrast_mean: a table once the mean is known (w.v2: v2's gray and
 * blend). */
static void contrast(const ff__image *src, const ff__image *dst, ff__blend_w w) {
  size_t pixels = (size_t)src->width * (size_t)src->height;
  if (!pixels) return;
  float mean = ff__contrast_mean(gray_sum_chunked(src, w.v2), pixels);
  uint8_t t[256];
  for (int v = 0; v < 256; v++)
    t[v] = ff__blend_sem_u8(w, (float)v, mean);
  ff__color_apply_table(src, dst, t);
}

/* ------------------------------------------------------------ sharpness */

/* One interior row of sharpness: up, mid, down are rows of the original,
 * c (a constant after inlining) the channel count, so neighbours are c
 * bytes apart. The first and last pixel are border: blended with
 * themselves (self[]). */
static inline void sharpen_row(uint8_t *restrict out, const uint8_t *restrict up, const uint8_t *restrict mid,
                               const uint8_t *restrict down, size_t bytes, const int c, ff__blend_w w,
                               const uint8_t self[256]) {
  for (int k = 0; k < c; k++) {
    out[k] = self[mid[k]];
    out[bytes - c + k] = self[mid[bytes - c + k]];
  }
  /* the semantics chosen outside the loops, so that each vectorises */
#define SUM9(k)                                                                                              \
  (up[(k) - c] + up[k] + up[(k) + c] + mid[(k) - c] + 5 * mid[k] + mid[(k) + c] + down[(k) - c] + down[k] +  \
   down[(k) + c])
  if (w.v2)
    for (size_t k = (size_t)c; k < bytes - c; k++)
      out[k] = ff__sharp_v2_u8(w, mid[k], ff__sharp_smooth_u8(SUM9(k)));
  else
    for (size_t k = (size_t)c; k < bytes - c; k++)
      out[k] = ff__blend_u8(w, (float)mid[k], (float)ff__sharp_smooth_u8(SUM9(k)));
#undef SUM9
}

#ifdef HAVE_VBMI_PATH
/* The interior bytes [c, bytes - c) of one sharpness row, 32 at a time: the
 * 3x3 sums in 16-bit lanes (at most 13 * 255), the smoothed value
 * floor((2s + 13) / 26) = floor((s + 6) / 13) = ((s + 6) * 5042) >> 16
 * (checked for every s in range), then blend_x16's float32 steps. */
VBMI_TARGET static void sharpen_row_vbmi(uint8_t *restrict out, const uint8_t *restrict up,
                                         const uint8_t *restrict mid, const uint8_t *restrict down, size_t bytes,
                                         int c, ff__blend_w w) {
  const __m512i six = _mm512_set1_epi16(6), magic = _mm512_set1_epi16((short)5042);
  size_t end = bytes - (size_t)c;
  for (size_t k = (size_t)c; k < end; k += 32) {
    size_t n = end - k < 32 ? end - k : 32;
    __mmask32 m = n == 32 ? ~(__mmask32)0 : (((__mmask32)1 << n) - 1);
#define LD(ptr) _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, (ptr)))
    __m512i x = LD(mid + k);
    __m512i sum = _mm512_add_epi16(_mm512_add_epi16(LD(up + k - c), LD(up + k)), LD(up + k + c));
    sum = _mm512_add_epi16(sum, _mm512_add_epi16(LD(mid + k - c), LD(mid + k + c)));
    sum = _mm512_add_epi16(sum, _mm512_add_epi16(_mm512_add_epi16(LD(down + k - c), LD(down + k)), LD(down + k + c)));
#undef LD
    sum = _mm512_add_epi16(sum, _mm512_add_epi16(_mm512_slli_epi16(x, 2), x));
    __m512i g = _mm512_mulhi_epu16(_mm512_add_epi16(sum, six), magic);
    __m512 x0 = _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(x)));
    __m512 x1 = _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(x, 1)));
    __m512 g0 = _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(g)));
    __m512 g1 = _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(g, 1)));
    __m256i o = _mm256_inserti128_si256(_mm256_castsi128_si256(blend_x16(w, x0, g0)), blend_x16(w, x1, g1), 1);
    if (n == 32)
      _mm256_storeu_si256((__m256i *)(out + k), o);
    else
      _mm256_mask_storeu_epi8(out + k, m, o);
  }
}
#endif

/* Sharpness (spec 2.10): images of height or width <= 2 are unchanged;
 * otherwise blend(X, B, f) over all pixels, B = X on the border and the
 * smoothed value inside (w.v2: v2's, ff__sharp_sem_u8). The neighbours come from src; in place, from a
 * copy of it in scratch, as the rows above are overwritten before the rows
 * below read them. */
FF_FMA_CLONES static ff_status sharpness(const ff__image *src, const ff__image *dst, ff__blend_w w,
                                         ff__buf *scratch) {
  int c = src->channels, h = src->height;
  if (h <= 2 || src->width <= 2) {
    copy_rows(src, dst);
    return FF_OK;
  }
  size_t bytes = (size_t)src->width * (size_t)c, in_stride = src->stride;
  const uint8_t *in = src->data;
  if (in == dst->data) {
    uint8_t *copy = ff__buf_reserve(scratch, bytes * (size_t)h);
    if (!copy) return FF_ENOMEM;
    for (int y = 0; y < h; y++)
      memcpy(copy + (size_t)y * bytes, in + (size_t)y * in_stride, bytes);
    in = copy, in_stride = bytes;
  }

  uint8_t self[256];
  for (int v = 0; v < 256; v++)
    self[v] = ff__sharp_sem_u8(w, v, v, 1);
  for (size_t k = 0; k < bytes; k++) {
    dst->data[k] = self[in[k]];
    dst->data[(size_t)(h - 1) * dst->stride + k] = self[in[(size_t)(h - 1) * in_stride + k]];
  }
#ifdef HAVE_VBMI_PATH
  if (!w.v2 && have_vbmi()) {
    for (int y = 1; y < h - 1; y++) {
      uint8_t *out = dst->data + (size_t)y * dst->stride;
      const uint8_t *mid = in + (size_t)y * in_stride;
      for (int k = 0; k < c; k++) {
        out[k] = self[mid[k]];
        out[bytes - c + k] = self[mid[bytes - c + k]];
      }
      sharpen_row_vbmi(out, mid - in_stride, mid, mid + in_stride, bytes, c, w);
    }
    return FF_OK;
  }
#endif
  for (int y = 1; y < h - 1; y++) {
    uint8_t *out = dst->data + (size_t)y * dst->stride;
    const uint8_t *mid = in + (size_t)y * in_stride;
    if (c == 3)
      sharpen_row(out, mid - in_stride, mid, mid + in_stride, bytes, 3, w, self);
    else if (c == 1)
      sharpen_row(out, mid - in_stride, mid, mid + in_stride, bytes, 1, w, self);
    else
      sharpen_row(out, mid - in_stride, mid, mid + in_stride, bytes, c, w, self);
  }
  return FF_OK;
}

/* ------------------------------------------------------------ entry point */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#define HAVE_AVX2_HUE 1
/* adjust_hue (ff__hue_u8) on eight pixels at once: each lane does the
 * scalar code's float32 operations in its order (IEEE division, min/max as
 * its comparisons pick, truncation and floor by vroundps, the branches as
 * masks and blends; a lane's i is (int)fi % 6 for fi in [0, 6]). The eight
 * pixels are read before any is written, so in place works. */
AVX2_FMA static void hue8_avx2(const uint8_t *in, float hue, uint8_t *out) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  __m256 ch[3];
  rgb8_load(in, ch);
  for (int c = 0; c < 3; c++) ch[c] = _mm256_div_ps(ch[c], _mm256_set1_ps(255.0f));
  __m256 r = ch[0], g = ch[1], b = ch[2];
  __m256 maxc = _mm256_max_ps(_mm256_max_ps(r, g), b), minc = _mm256_min_ps(_mm256_min_ps(r, g), b);
  __m256 eqc = _mm256_cmp_ps(maxc, minc, _CMP_EQ_OQ);
  __m256 cr = _mm256_sub_ps(maxc, minc);
  __m256 s = _mm256_div_ps(cr, _mm256_blendv_ps(maxc, one, eqc));
  __m256 crd = _mm256_blendv_ps(cr, one, eqc);
  __m256 rc = _mm256_div_ps(_mm256_sub_ps(maxc, r), crd), gc = _mm256_div_ps(_mm256_sub_ps(maxc, g), crd);
  __m256 bc = _mm256_div_ps(_mm256_sub_ps(maxc, b), crd);
  __m256 is_r = _mm256_cmp_ps(maxc, r, _CMP_EQ_OQ), is_g = _mm256_cmp_ps(maxc, g, _CMP_EQ_OQ);
  __m256 hr = _mm256_and_ps(is_r, _mm256_sub_ps(bc, gc));
  __m256 hg = _mm256_andnot_ps(is_r, _mm256_and_ps(is_g, _mm256_sub_ps(_mm256_add_ps(_mm256_set1_ps(2.0f), rc), bc)));
  __m256 hb = _mm256_andnot_ps(_mm256_or_ps(is_r, is_g), _mm256_sub_ps(_mm256_add_ps(_mm256_set1_ps(4.0f), gc), rc));
  __m256 h = _mm256_add_ps(_mm256_div_ps(_mm256_add_ps(_mm256_add_ps(hr, hg), hb), _mm256_set1_ps(6.0f)), one);
  h = _mm256_sub_ps(h, _mm256_round_ps(h, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
  h = _mm256_add_ps(h, _mm256_set1_ps(hue));
  h = _mm256_sub_ps(h, _mm256_round_ps(h, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
  h = _mm256_blendv_ps(h, _mm256_add_ps(h, one), _mm256_cmp_ps(h, zero, _CMP_LT_OQ));
  __m256 h6 = _mm256_mul_ps(h, _mm256_set1_ps(6.0f));
  __m256 fi = _mm256_round_ps(h6, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m256 f = _mm256_sub_ps(h6, fi);
  __m256i i = _mm256_cvttps_epi32(fi);
  i = _mm256_sub_epi32(i, _mm256_and_si256(_mm256_cmpgt_epi32(i, _mm256_set1_epi32(5)), _mm256_set1_epi32(6)));
  __m256 v = maxc;
#define CLAMP01(x) _mm256_min_ps(_mm256_max_ps((x), zero), one)
  __m256 p = CLAMP01(_mm256_mul_ps(v, _mm256_sub_ps(one, s)));
  __m256 q = CLAMP01(_mm256_mul_ps(v, _mm256_sub_ps(one, _mm256_mul_ps(s, f))));
  __m256 t = CLAMP01(_mm256_mul_ps(v, _mm256_sub_ps(one, _mm256_mul_ps(s, _mm256_sub_ps(one, f)))));
#undef CLAMP01
  /* the six cases of (o0, o1, o2): (v,t,p) (q,v,p) (p,v,t) (p,q,v) (t,p,v) (v,p,q) */
  const __m256 *pick[3][6] = {{&v, &q, &p, &p, &t, &v}, {&t, &v, &v, &q, &p, &p}, {&p, &p, &t, &v, &v, &q}};
  __m256i o[3]; /* in 0..255 (x in [0, 1]); a NaN's INT_MIN packs to 0, as (uint8_t) takes it */
  for (int c = 0; c < 3; c++) {
    __m256 x = *pick[c][0];
    for (int k = 1; k < 6; k++)
      x = _mm256_blendv_ps(x, *pick[c][k], _mm256_castsi256_ps(_mm256_cmpeq_epi32(i, _mm256_set1_epi32(k))));
    o[c] = _mm256_cvttps_epi32(_mm256_mul_ps(x, _mm256_set1_ps((float)255.999)));
  }
  rgb8_store(out, o[0], o[1], o[2]);
}
#undef AVX2_FMA
#endif

/* adjust_hue (kernels/hue.h), pixel by pixel (eight at a time with AVX2):
 * in place reads each pixel before writing it. */
static void hue(const ff__image *src, const ff__image *dst, float factor) {
#ifdef HAVE_AVX2_HUE
  int vec = ff__cpu_avx2();
#endif
  for (int y = 0; y < src->height; y++) {
    const uint8_t *p = src->data + (size_t)y * src->stride;
    uint8_t *q = dst->data + (size_t)y * dst->stride;
    int x = 0;
#ifdef HAVE_AVX2_HUE
    if (vec)
      for (; x + 8 <= src->width; x += 8) hue8_avx2(p + 3 * x, factor, q + 3 * x);
#endif
    for (; x < src->width; x++) ff__hue_u8(p + 3 * x, factor, q + 3 * x);
  }
}

ff_status ff__aug_color(const ff__aug *a, const ff__image *src, ff__image *dst, ff__buf *scratch) {
  if (ff__aug_is_lut(a->op)) {
    ff__aug_lut_run(a, 1, src, dst);
    return FF_OK;
  }
  if (src->channels != 1 && src->channels != 3) return FF_EINVAL;
  ff__blend_w w = ff__blend_weights_of(a);
  switch (a->op) {
  case FF__AUG_IDENTITY: copy_rows(src, dst); return FF_OK;
  case FF__AUG_COLOR: /* one-channel images have no saturation to change */
    if (src->channels == 3)
      saturation(src, dst, w);
    else
      copy_rows(src, dst);
    return FF_OK;
  case FF__AUG_HUE: /* as torchvision, one-channel images keep their values */
    if (src->channels == 3)
      hue(src, dst, (float)a->arg);
    else
      copy_rows(src, dst);
    return FF_OK;
  case FF__AUG_CONTRAST: contrast(src, dst, w); return FF_OK;
  case FF__AUG_SHARPNESS: return sharpness(src, dst, w, scratch);
  default: /* a geometric op: not ours */ return FF_EINVAL;
  }
}
