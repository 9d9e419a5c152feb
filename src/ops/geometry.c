/* geometry.c — crop, Gaussian blur and flips on HWC uint8 images (the
 * resize is ops/resize.c, the batch slot's output ops/output.c).
 *
 * Gaussian blur (torchvision gaussian_blur: its 1-D kernels, reflect
 * padding, rounding half to even) runs as two passes with the blur's taps
 * (ff__resize_axis_gauss's, summed by FF__RESIZE_RULE_BLUR: all fused up to
 * four taps, none past) on an image of unchanged size: separable, where
 * torch convolves with the 2-D outer product, so a value can differ by one
 * level where the two float sums round apart. Its taps are the same for
 * every pixel, so its horizontal pass runs over each row extended by the
 * mirrored pixels as plain contiguous loops into a ring of ksize_y rows, and
 * each output row's vertical pass follows as soon as its input rows are
 * done, while they are in the first-level cache. On x86-64 with AVX2/FMA
 * the passes run vectorised with exactly the scalar float operations per
 * element (taps_avx2, eight independent vectors at a time; with AVX-512,
 * taps_avx512, 16 values per vector), and hflip reverses 5-pixel blocks
 * with pshufb. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/pixel.h"
#include "kernels/resize.h"
#include "ops/ops.h"

ff_status ff__op_crop(const ff__image *src, int x, int y, int w, int h, ff__buf *mem,
                      ff__image *dst) {
  int c = src->channels;
  if (x >= 0 && y >= 0 && x + w <= src->width && y + h <= src->height) {
    *dst = *src;
    dst->data = src->data + (size_t)y * src->stride + (size_t)x * c;
    dst->width = w, dst->height = h;
    return FF_OK;
  }
  size_t stride = (size_t)w * c;
  uint8_t *out = ff__buf_reserve(mem, stride * h);
  if (!out) return FF_ENOMEM;
  memset(out, 0, stride * h);
  int x0 = x < 0 ? 0 : x, x1 = x + w > src->width ? src->width : x + w;
  int y0 = y < 0 ? 0 : y, y1 = y + h > src->height ? src->height : y + h;
  for (int r = y0; r < y1 && x0 < x1; r++)
    memcpy(out + (size_t)(r - y) * stride + (size_t)(x0 - x) * c,
           src->data + (size_t)r * src->stride + (size_t)x0 * c, (size_t)(x1 - x0) * c);
  *dst = (ff__image){out, w, h, c, stride};
  return FF_OK;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FF_HAVE_X86_SIMD 1

/* The sums of n taps over nv (1 or 8) vectors of 8 values from i on:
 * a[j] = x[0][i+8j..] * w[0], then + x[t][i+8j..] * w[t] in t's order,
 * fused for n <= 4 (the blur's rule, FF__RESIZE_RULE_BLUR). nv = 8
 * gives eight independent sums that hide each one's latency. */
__attribute__((target("avx2,fma"), always_inline)) static inline void taps_avx2(const float *const *x, const float *w,
                                                                                 int n, size_t i, int nv, __m256 *a) {
  const __m256 w0 = _mm256_set1_ps(w[0]);
  for (int j = 0; j < nv; j++) a[j] = _mm256_mul_ps(_mm256_loadu_ps(x[0] + i + 8 * j), w0);
  if (n <= 4)
    for (int t = 1; t < n; t++) {
      __m256 wt = _mm256_set1_ps(w[t]);
      for (int j = 0; j < nv; j++) a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(x[t] + i + 8 * j), wt, a[j]);
    }
  else
    for (int t = 1; t < n; t++) {
      __m256 wt = _mm256_set1_ps(w[t]);
      for (int j = 0; j < nv; j++) a[j] = _mm256_add_ps(a[j], _mm256_mul_ps(_mm256_loadu_ps(x[t] + i + 8 * j), wt));
    }
}

/* The vertical pass's values from i to the end of the row, one at a time. */
__attribute__((always_inline)) static inline void vpass_tail(const float *tmp, size_t row_elems, const int *idx,
                                                             const float *w, int n, size_t i, uint8_t *out) {
  for (; i < row_elems; i++) {
    float a = tmp[(size_t)idx[0] * row_elems + i] * w[0];
    for (int t = 1; t < n; t++) {
      float xt = tmp[(size_t)idx[t] * row_elems + i];
      a = n <= 4 ? ff__fma_f32(xt, w[t], a) : a + xt * w[t];
    }
    out[i] = ff__round_u8(a);
  }
}

/* The horizontal pass's values from i to n, one at a time. */
__attribute__((always_inline)) static inline void hpass_tail(const float *const *x, const float *k, int ksize,
                                                             size_t i, size_t n, float *out) {
  for (; i < n; i++) {
    float a = x[0][i] * k[0];
    for (int t = 1; t < ksize; t++) a = ksize <= 4 ? ff__fma_f32(x[t][i], k[t], a) : a + x[t][i] * k[t];
    out[i] = a;
  }
}

/* The most taps the vectorised passes take (longer sums run scalar). */
#define SIMD_MAX_TAPS 256

/* One output row of the vertical pass: the scalar loops' float operations
 * per element in their order (taps_avx2), then ff__round_u8: max(v, 0)
 * (NaN gives 0, as maxps returns its second operand), min(v, 255), convert
 * rounding half to even (the default mode, as rintf), pack. */
__attribute__((target("avx2,fma"))) static void vpass_row_avx2(const float *tmp, size_t row_elems,
                                                                const int *idx, const float *w, int n,
                                                                uint8_t *out) {
  const float *x[SIMD_MAX_TAPS];
  int nt = n < SIMD_MAX_TAPS ? n : SIMD_MAX_TAPS;
  for (int t = 0; t < nt; t++) x[t] = tmp + (size_t)idx[t] * row_elems;
  const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.0f);
  size_t i = 0;
#define VPASS_BLOCK(nv)                                                                     \
  for (; i + 8 * (nv) <= row_elems; i += 8 * (nv)) {                                      \
    __m256 a[nv];                                                                         \
    taps_avx2(x, w, n, i, nv, a);                                                         \
    for (int j = 0; j < (nv); j++) {                                                      \
      __m256i v = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(a[j], zero), top));     \
      __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)); \
      _mm_storel_epi64((__m128i *)(out + i + 8 * j), _mm_packus_epi16(h, h));             \
    }                                                                                     \
  }
  if (n <= SIMD_MAX_TAPS) {
    VPASS_BLOCK(8)
    VPASS_BLOCK(1)
  }
#undef VPASS_BLOCK
  vpass_tail(tmp, row_elems, idx, w, n, i, out);
}

/* A blur's horizontal pass over one row (blur_hpass_row), vectorised. */
__attribute__((target("avx2,fma"))) static void blur_hpass_row_avx2(const float *pad, size_t n, int c,
                                                                     const float *k, int ksize, float *out) {
  const float *x[SIMD_MAX_TAPS];
  for (int t = 0; t < ksize; t++) x[t] = pad + (size_t)t * c;
  size_t i = 0;
#define HPASS_BLOCK(nv)                                                \
  for (; i + 8 * (nv) <= n; i += 8 * (nv)) {                         \
    __m256 a[nv];                                                    \
    taps_avx2(x, k, ksize, i, nv, a);                                \
    for (int j = 0; j < (nv); j++) _mm256_storeu_ps(out + i + 8 * j, a[j]); \
  }
  HPASS_BLOCK(8)
  HPASS_BLOCK(1)
#undef HPASS_BLOCK
  hpass_tail(x, k, ksize, i, n, out);
}

/* The same passes 16 values per AVX-512 vector, on CPUs that have it (the
 * same float operations per element, in the same order: vfmadd is as
 * fused, vmul and vadd as rounded at 512 bits as at 256), the rest of a row
 * on the AVX2 code above. */
#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))

/* taps_avx2 on nv vectors of 16 values from i on. */
AVX512_TARGET __attribute__((always_inline)) static inline void taps_avx512(const float *const *x, const float *w,
                                                                            int n, size_t i, int nv, __m512 *a) {
  const __m512 w0 = _mm512_set1_ps(w[0]);
  for (int j = 0; j < nv; j++) a[j] = _mm512_mul_ps(_mm512_loadu_ps(x[0] + i + 16 * j), w0);
  if (n <= 4)
    for (int t = 1; t < n; t++) {
      __m512 wt = _mm512_set1_ps(w[t]);
      for (int j = 0; j < nv; j++) a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(x[t] + i + 16 * j), wt, a[j]);
    }
  else
    for (int t = 1; t < n; t++) {
      __m512 wt = _mm512_set1_ps(w[t]);
      for (int j = 0; j < nv; j++) a[j] = _mm512_add_ps(a[j], _mm512_mul_ps(_mm512_loadu_ps(x[t] + i + 16 * j), wt));
    }
}

/* vpass_row_avx2, 16 values per vector: the rounding is the same
 * max, min and cvtps (half to even), then a plain narrowing (0..255). */
AVX512_TARGET static void vpass_row_avx512(const float *tmp, size_t row_elems, const int *idx, const float *w,
                                           int n, uint8_t *out) {
  const float *x[SIMD_MAX_TAPS];
  for (int t = 0; t < n; t++) x[t] = tmp + (size_t)idx[t] * row_elems;
  const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps(255.0f);
  size_t i = 0;
#define VPASS_BLOCK(nv)                                                                              \
  for (; i + 16 * (nv) <= row_elems; i += 16 * (nv)) {                                             \
    __m512 a[nv];                                                                                  \
    taps_avx512(x, w, n, i, nv, a);                                                                \
    for (int j = 0; j < (nv); j++)                                                                 \
      _mm_storeu_si128((__m128i *)(out + i + 16 * j),                                              \
                       _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(a[j], zero), top)))); \
  }
  VPASS_BLOCK(4)
  VPASS_BLOCK(1)
#undef VPASS_BLOCK
  vpass_tail(tmp, row_elems, idx, w, n, i, out);
}

/* taps_avx512 for two output rows at once over nv vectors from i on: a
 * sums the n rows x[0 .. n-1], b the n rows x[1 .. n], each loaded vector
 * feeding both (each sum's operations and order are taps_avx512's). */
AVX512_TARGET __attribute__((always_inline)) static inline void taps2_avx512(const float *const *x, const float *w,
                                                                             int n, size_t i, int nv, __m512 *a,
                                                                             __m512 *b) {
  const __m512 w0 = _mm512_set1_ps(w[0]), w1 = _mm512_set1_ps(w[n > 1 ? 1 : 0]);
  for (int j = 0; j < nv; j++) {
    __m512 v = _mm512_loadu_ps(x[1] + i + 16 * j);
    a[j] = _mm512_mul_ps(_mm512_loadu_ps(x[0] + i + 16 * j), w0);
    b[j] = _mm512_mul_ps(v, w0);
    if (n > 1) a[j] = n <= 4 ? _mm512_fmadd_ps(v, w1, a[j]) : _mm512_add_ps(a[j], _mm512_mul_ps(v, w1));
  }
  for (int t = 2; t <= n; t++) {
    __m512 wt = _mm512_set1_ps(w[t < n ? t : 0]), wb = _mm512_set1_ps(w[t - 1]);
    for (int j = 0; j < nv; j++) {
      __m512 v = _mm512_loadu_ps(x[t] + i + 16 * j);
      if (t < n) a[j] = n <= 4 ? _mm512_fmadd_ps(v, wt, a[j]) : _mm512_add_ps(a[j], _mm512_mul_ps(v, wt));
      b[j] = n <= 4 ? _mm512_fmadd_ps(v, wb, b[j]) : _mm512_add_ps(b[j], _mm512_mul_ps(v, wb));
    }
  }
}

/* vpass_row_avx512 for two consecutive output rows whose n rows are
 * idx[0 .. n-1] and idx[1 .. n] (n + 1 entries): each row of tmp is loaded
 * once for both; the same bytes as two vpass_row_avx512 calls. */
AVX512_TARGET static void vpass_rows2_avx512(const float *tmp, size_t row_elems, const int *idx, const float *w,
                                             int n, uint8_t *out0, uint8_t *out1) {
  const float *x[SIMD_MAX_TAPS + 1];
  for (int t = 0; t <= n; t++) x[t] = tmp + (size_t)idx[t] * row_elems;
  const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps(255.0f);
  size_t i = 0;
#define ROUND_U8(v) _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(v, zero), top)))
#define VPASS2_BLOCK(nv, taps)                                                 \
  for (; i + 16 * (nv) <= row_elems; i += 16 * (nv)) {                       \
    __m512 a[nv], b[nv];                                                     \
    taps2_avx512(x, w, taps, i, nv, a, b);                                   \
    for (int j = 0; j < (nv); j++) {                                         \
      _mm_storeu_si128((__m128i *)(out0 + i + 16 * j), ROUND_U8(a[j]));      \
      _mm_storeu_si128((__m128i *)(out1 + i + 16 * j), ROUND_U8(b[j]));      \
    }                                                                        \
  }
  /* the usual blur sizes with their taps known, unrolled */
  if (n == 3) {
    VPASS2_BLOCK(4, 3)
  } else if (n == 5) {
    VPASS2_BLOCK(4, 5)
  } else if (n == 7) {
    VPASS2_BLOCK(4, 7)
  } else {
    VPASS2_BLOCK(4, n)
  }
  VPASS2_BLOCK(1, n)
#undef VPASS2_BLOCK
#undef ROUND_U8
  vpass_tail(tmp, row_elems, idx, w, n, i, out0);
  vpass_tail(tmp, row_elems, idx + 1, w, n, i, out1);
}

/* blur_hpass_row_avx512's vectors from 0 on while the taps' window
 * ((ksize - 1) * c + 16 values, at most 32) lies in two vectors of pad:
 * each vector of pad is loaded once, and tap t's values are taken out of it
 * and the next one by a vpermt2ps (moves only: the floats the loads of
 * taps_avx512 give, the same sums). Returns where it stopped. */
AVX512_TARGET __attribute__((always_inline)) static inline size_t blur_hpass_window_avx512(const float *pad,
                                                                                          size_t n, int c,
                                                                                          const float *k,
                                                                                          int ksize, float *out) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i sel[17]; /* (ksize - 1) * c <= 16 */
  __m512 kt[17];
  for (int t = 0; t < ksize; t++) sel[t] = _mm512_add_epi32(lane, _mm512_set1_epi32(t * c)), kt[t] = _mm512_set1_ps(k[t]);
  size_t i = 0, pad_elems = n + (size_t)(ksize - 1) * c;
  if (pad_elems < 32) return 0;
  __m512 lo = _mm512_loadu_ps(pad);
  for (; i + 16 <= n && i + 32 <= pad_elems; i += 16) {
    __m512 hi = _mm512_loadu_ps(pad + i + 16);
    __m512 a = _mm512_mul_ps(lo, kt[0]);
    for (int t = 1; t < ksize; t++) {
      __m512 v = _mm512_permutex2var_ps(lo, sel[t], hi);
      a = ksize <= 4 ? _mm512_fmadd_ps(v, kt[t], a) : _mm512_add_ps(a, _mm512_mul_ps(v, kt[t]));
    }
    _mm512_storeu_ps(out + i, a);
    lo = hi;
  }
  return i;
}

/* blur_hpass_row_avx2, 16 values per vector. */
AVX512_TARGET static void blur_hpass_row_avx512(const float *pad, size_t n, int c, const float *k, int ksize,
                                                float *out) {
  const float *x[SIMD_MAX_TAPS];
  for (int t = 0; t < ksize; t++) x[t] = pad + (size_t)t * c;
  size_t i = 0;
  /* the usual blur sizes with their taps known, unrolled */
  if (c == 3 && ksize == 5)
    i = blur_hpass_window_avx512(pad, n, 3, k, 5, out);
  else if (c == 3 && ksize == 3)
    i = blur_hpass_window_avx512(pad, n, 3, k, 3, out);
  else if (c == 3 && ksize <= 6)
    i = blur_hpass_window_avx512(pad, n, 3, k, ksize, out);
#define HPASS_BLOCK(nv)                                                      \
  for (; i + 16 * (nv) <= n; i += 16 * (nv)) {                             \
    __m512 a[nv];                                                          \
    taps_avx512(x, k, ksize, i, nv, a);                                    \
    for (int j = 0; j < (nv); j++) _mm512_storeu_ps(out + i + 16 * j, a[j]); \
  }
  HPASS_BLOCK(4)
  HPASS_BLOCK(1)
#undef HPASS_BLOCK
  hpass_tail(x, k, ksize, i, n, out);
}

/* out[i] = (float)in[i] for n values, 16 at a time. */
AVX512_TARGET static void u8_to_f32_avx512(const uint8_t *in, size_t n, float *out) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(in + i)))));
  for (; i < n; i++) out[i] = (float)in[i];
}
#endif

/* One output row of the vertical pass: out (row_elems values) from the n
 * float rows of tmp (row_elems apart) at idx[] with weights w[], first
 * product rounded, then fused for n <= 4, else plainly; acc: row_elems
 * floats of room for the scalar loops. */
FF_FMA_CLONES_NOINLINE static void vpass_row(const float *tmp, size_t row_elems, const int *idx, const float *w,
                                             int n, int vec, float *restrict acc, uint8_t *restrict out) {
#ifdef FF_HAVE_X86_SIMD
  if (vec == 2 && n <= SIMD_MAX_TAPS) {
    vpass_row_avx512(tmp, row_elems, idx, w, n, out);
    return;
  }
  if (vec) {
    vpass_row_avx2(tmp, row_elems, idx, w, n, out);
    return;
  }
#else
  (void)vec;
#endif
  const float *x0 = tmp + (size_t)idx[0] * row_elems;
  for (size_t i = 0; i < row_elems; i++) acc[i] = x0[i] * w[0];
  for (int t = 1; t < n; t++) {
    const float *xt = tmp + (size_t)idx[t] * row_elems;
    float wt = w[t];
    if (n <= 4)
      for (size_t i = 0; i < row_elems; i++) acc[i] = ff__fma_f32(xt[i], wt, acc[i]);
    else
      for (size_t i = 0; i < row_elems; i++) acc[i] = acc[i] + xt[i] * wt;
  }
  for (size_t i = 0; i < row_elems; i++) out[i] = ff__round_u8(acc[i]);
}

/* Which passes this CPU runs: 2 the AVX-512 ones, 1 the AVX2/FMA ones, 0
 * the scalar loops. */
static int simd_level(void) {
#ifdef FF_HAVE_X86_SIMD
  if (!ff__cpu_avx2()) return 0;
  return ff__cpu_avx512() ? 2 : 1;
#else
  return 0;
#endif
}

void ff__gauss_kernel1d(int ksize, float sigma, float *k) {
  float half = (float)(ksize - 1) * 0.5f, sum = 0.0f;
  for (int t = 0; t < ksize; t++) {
    /* torch.linspace(-half, half, ksize): exact half-integers */
    float x = (float)t - half, xs = x / sigma;
    k[t] = expf(-0.5f * (xs * xs));
    sum += k[t];
  }
  for (int t = 0; t < ksize; t++) k[t] = k[t] / sum;
}

/* The horizontal pass of a blur over one row: out[i] = sum over t of
 * pad[i + t*c] * k[t] for the n values of the row, pad being the row
 * extended by the mirrored pixels; the sum in resize's order (first
 * product rounded, then fused for ksize <= 4, else plainly), as
 * ff__resize_taps_sum over the blur's taps and rule. Contiguous loops: they
 * vectorise. */
FF_FMA_CLONES_NOINLINE static void blur_hpass_row(const float *restrict pad, size_t n, int c, const float *k,
                                                  int ksize, int vec, float *restrict out) {
#ifdef FF_HAVE_X86_SIMD
  if (vec && ksize <= SIMD_MAX_TAPS) {
    if (vec == 2)
      blur_hpass_row_avx512(pad, n, c, k, ksize, out);
    else
      blur_hpass_row_avx2(pad, n, c, k, ksize, out);
    return;
  }
#else
  (void)vec;
#endif
  for (size_t i = 0; i < n; i++) out[i] = pad[i] * k[0];
  for (int t = 1; t < ksize; t++) {
    const float *x = pad + (size_t)t * c;
    float kt = k[t];
    if (ksize <= 4)
      for (size_t i = 0; i < n; i++) out[i] = ff__fma_f32(x[i], kt, out[i]);
    else
      for (size_t i = 0; i < n; i++) out[i] = out[i] + x[i] * kt;
  }
}

/* One row of a blur's input as floats, extended by the mirrored pixels:
 * pad position j holds input j - ksize/2 (ff__resize_gauss_index). */
FF_FMA_CLONES_NOINLINE static void blur_pad_row(const uint8_t *restrict in, int w, int c, int ksize, int vec,
                                                float *restrict pad) {
  int half = ksize / 2;
  float *mid = pad + (size_t)half * c;
#ifdef FF_HAVE_X86_SIMD
  if (vec == 2)
    u8_to_f32_avx512(in, (size_t)w * c, mid);
  else
#else
  (void)vec;
#endif
    for (size_t i = 0; i < (size_t)w * c; i++) mid[i] = (float)in[i];
  for (int j = 0; j < w + ksize - 1; j++) {
    if (j == half) j += w; /* past the row itself */
    if (j >= w + ksize - 1) break;
    const uint8_t *from = in + (size_t)ff__resize_gauss_index(j - half, w) * c;
    for (int ch = 0; ch < c; ch++) pad[(size_t)j * c + ch] = (float)from[ch];
  }
}

/* The rows of the horizontal pass that output row o of a blur of ksize
 * rows reads (ff__resize_gauss_index), into idx; returns the last done. */
static int blur_rows(int o, int ksize, int h, int *idx) {
  int last = 0;
  for (int t = 0; t < ksize; t++) {
    idx[t] = ff__resize_gauss_index(o - ksize / 2 + t, h);
    last = idx[t] > last ? idx[t] : last;
  }
  return last;
}

ff_status ff__op_gaussian_blur(const ff__image *src, int ksize_x, int ksize_y, float sigma, ff__op_scratch *s,
                               ff__image *dst) {
  float k[2 * FF__BLUR_MAX_KSIZE];
  if (ksize_x < 1 || ksize_y < 1 || ksize_x > FF__BLUR_MAX_KSIZE || ksize_y > FF__BLUR_MAX_KSIZE) return FF_EINVAL;
  ff__gauss_kernel1d(ksize_x, sigma, k);
  ff__gauss_kernel1d(ksize_y, sigma, k + ksize_x);
  int c = src->channels, w = src->width, h = src->height, vec = simd_level();
  size_t row_elems = (size_t)w * c, pad_elems = (size_t)(w + ksize_x - 1) * c;
  /* The horizontal pass's rows in a ring of `ring` rows (row y in slot y %
   * ring): an output row reads rows at most ksize_y - 1 before the last
   * one done, a pair of them ksize_y, so they stay in the first-level
   * cache. Then the padded row
   * and the scalar vertical pass's row. */
  int ring = h < ksize_y + 1 ? h : ksize_y + 1;
  float *tmp = ff__buf_reserve(&s->floats, ((size_t)ring * row_elems + pad_elems + row_elems) * sizeof(float));
  if (!tmp) return FF_ENOMEM;
  float *pad = tmp + (size_t)ring * row_elems, *acc = pad + pad_elems;
  int idx[FF__BLUR_MAX_KSIZE + 1];
  for (int y = 0, o = 0; y < h; y++) {
    blur_pad_row(src->data + (size_t)y * src->stride, w, c, ksize_x, vec, pad);
    blur_hpass_row(pad, row_elems, c, k, ksize_x, vec, tmp + (size_t)(y % ring) * row_elems);
    /* each output row as soon as the rows it reads are done; with AVX-512,
     * away from the mirrored edges, two rows at a time once both can be */
    for (; o < h; o++) {
#ifdef FF_HAVE_X86_SIMD
      int first = o - ksize_y / 2;
      if (vec == 2 && first >= 0 && first + ksize_y < h) {
        if (first + ksize_y > y) break;
        for (int t = 0, r = first % ring; t <= ksize_y; t++, r = r + 1 == ring ? 0 : r + 1) idx[t] = r;
        vpass_rows2_avx512(tmp, row_elems, idx, k + ksize_x, ksize_y, dst->data + (size_t)o * dst->stride,
                           dst->data + (size_t)(o + 1) * dst->stride);
        o++;
        continue;
      }
#endif
      if (blur_rows(o, ksize_y, h, idx) > y) break;
      for (int t = 0; t < ksize_y; t++) idx[t] %= ring;
      vpass_row(tmp, row_elems, idx, k + ksize_x, ksize_y, vec, acc, dst->data + (size_t)o * dst->stride);
    }
  }
  return FF_OK;
}

#ifdef FF_HAVE_X86_SIMD
/* hflip of one RGB row of w pixels: the row is copied aside, then written
 * back reversed five pixels (15 bytes) per pshufb; each 16-byte store's
 * spare last byte is overwritten by the next store, the last pixels are
 * copied one by one. Pure byte moves: the same bytes as the scalar loop. */
__attribute__((target("ssse3"))) static void hflip_rgb_row_ssse3(uint8_t *row, int w, uint8_t *tmp) {
  memcpy(tmp, row, (size_t)w * 3);
  const __m128i rev5 = _mm_setr_epi8(12, 13, 14, 9, 10, 11, 6, 7, 8, 3, 4, 5, 0, 1, 2, 15);
  int j = 0;
  /* loads read tmp[3(w-5-j) .. +16): one byte past the row at j == 0 (tmp
   * has room); stores write row[3j .. 3j+16) inside the row while j+6 <= w */
  for (; j + 6 <= w; j += 5) {
    __m128i v = _mm_loadu_si128((const __m128i *)(tmp + (size_t)(w - 5 - j) * 3));
    _mm_storeu_si128((__m128i *)(row + (size_t)j * 3), _mm_shuffle_epi8(v, rev5));
  }
  for (; j < w; j++) {
    const uint8_t *p = tmp + (size_t)(w - 1 - j) * 3;
    row[j * 3] = p[0], row[j * 3 + 1] = p[1], row[j * 3 + 2] = p[2];
  }
}
#endif

void ff__op_hflip(ff__image *img) {
  int c = img->channels;
#ifdef FF_HAVE_X86_SIMD
  if (c == 3 && img->width <= 4096 && ff__isa_allows(FF__ISA_AVX2) && __builtin_cpu_supports("ssse3")) {
    uint8_t tmp[4096 * 3 + 16];
    for (int y = 0; y < img->height; y++) hflip_rgb_row_ssse3(img->data + (size_t)y * img->stride, img->width, tmp);
    return;
  }
#endif
  for (int y = 0; y < img->height; y++) {
    uint8_t *l = img->data + (size_t)y * img->stride, *r = l + (size_t)(img->width - 1) * c;
    for (; l < r; l += c, r -= c)
      for (int ch = 0; ch < c; ch++) {
        uint8_t t = l[ch];
        l[ch] = r[ch], r[ch] = t;
      }
  }
}

void ff__op_vflip(ff__image *img) {
  size_t n = (size_t)img->width * img->channels;
  for (int y = 0; y < img->height / 2; y++) {
    uint8_t *a = img->data + (size_t)y * img->stride;
    uint8_t *b = img->data + (size_t)(img->height - 1 - y) * img->stride;
    for (size_t i = 0; i < n; i++) {
      uint8_t t = a[i];
      a[i] = b[i], b[i] = t;
    }
  }
}
