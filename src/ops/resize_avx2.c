/* resize_avx2.c — ops/resize.c's float32 passes 8 values per AVX2 vector
 * (resize_simd.h): lane for lane the scalar sums' operations (vmulps,
 * vaddps and vfmadd round as the scalar code's float operations and fmaf
 * do), and the scalar rounding (max, min, vcvtps2dq: half to even). */
#include "ops/resize_simd.h"

#ifdef FF__RESIZE_SIMD
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static inline __m256 u8x8_ps(const uint8_t *p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

AVX2 void ff__resize_planes_avx2(const uint8_t *row, int w, float *const planes[3]) {
  /* plane k's lane l is value 3l + k of the 24: vector (3l + k) / 8, lane (3l + k) % 8 */
  __m256i idx[3], in_b[3], in_c[3];
  for (int k = 0; k < 3; k++) {
    int32_t i[8], mb[8], mc[8];
    for (int l = 0; l < 8; l++) {
      int pos = 3 * l + k;
      i[l] = pos % 8, mb[l] = pos / 8 == 1 ? -1 : 0, mc[l] = pos / 8 == 2 ? -1 : 0;
    }
    idx[k] = _mm256_loadu_si256((const __m256i *)i);
    in_b[k] = _mm256_loadu_si256((const __m256i *)mb), in_c[k] = _mm256_loadu_si256((const __m256i *)mc);
  }
  int p = 0;
  for (; p + 8 <= w; p += 8) {
    const uint8_t *q = row + (size_t)p * 3;
    __m256 a = u8x8_ps(q), b = u8x8_ps(q + 8), c = u8x8_ps(q + 16);
    for (int k = 0; k < 3; k++) {
      __m256 v = _mm256_permutevar8x32_ps(a, idx[k]);
      v = _mm256_blendv_ps(v, _mm256_permutevar8x32_ps(b, idx[k]), _mm256_castsi256_ps(in_b[k]));
      v = _mm256_blendv_ps(v, _mm256_permutevar8x32_ps(c, idx[k]), _mm256_castsi256_ps(in_c[k]));
      _mm256_storeu_ps(planes[k] + p, v);
    }
  }
  for (; p < w; p++)
    for (int k = 0; k < 3; k++) planes[k][p] = (float)row[(size_t)p * 3 + k];
}

/* Tap t of a block: the lanes' inputs out of the window (1, 2 or 4
 * vectors from the block's base: index bits 3 and 4 pick the vector), or
 * gathered. */
AVX2 static inline __m256 window_x(const __m256 *win, int wide, __m256i iv, const float *in) {
  if (wide == 0) return _mm256_i32gather_ps(in, iv, 4);
  __m256 x = _mm256_permutevar8x32_ps(win[0], iv);
  if (wide == 1) return x;
  __m256 bit3 = _mm256_castsi256_ps(_mm256_slli_epi32(iv, 28));
  x = _mm256_blendv_ps(x, _mm256_permutevar8x32_ps(win[1], iv), bit3);
  if (wide == 2) return x;
  __m256 y = _mm256_blendv_ps(_mm256_permutevar8x32_ps(win[2], iv), _mm256_permutevar8x32_ps(win[3], iv), bit3);
  return _mm256_blendv_ps(x, y, _mm256_castsi256_ps(_mm256_slli_epi32(iv, 27)));
}

AVX2 void ff__resize_hrow_avx2(const ff__hpass *h, const float *const in[3], float *const out[3]) {
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  for (int b = 0; b < h->blocks; b++) {
    const ff__hblock *k = &h->block[b];
    __m256 win[3][4], acc[3] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int c = 0; c < 3; c++)
      for (int j = 0; j < k->wide; j++) win[c][j] = _mm256_loadu_ps(in[c] + k->base + 8 * j);
    const int32_t *ip = h->idx + (size_t)k->rec * 8;
    const float *wp = h->w + (size_t)k->rec * 8;
    for (int t = 0; t < k->taps; t++) {
      __m256i iv = _mm256_load_si256((const __m256i *)(ip + 8 * t));
      __m256 wv = _mm256_load_ps(wp + 8 * t);
      __m256 fuse = _mm256_setzero_ps();
      if (k->plain < 0) {
        __m256i bits = _mm256_set1_epi32((int)h->fuse[k->rec + t]);
        fuse = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(bits, lane_bit), lane_bit));
      }
      for (int c = 0; c < 3; c++) {
        __m256 x = window_x(win[c], k->wide, iv, in[c]);
        if (t == 0) {
          acc[c] = _mm256_mul_ps(x, wv);
        } else if (k->plain >= 0) {
          acc[c] = t <= k->plain ? _mm256_add_ps(acc[c], _mm256_mul_ps(x, wv)) : _mm256_fmadd_ps(x, wv, acc[c]);
        } else {
          __m256 sum = _mm256_add_ps(acc[c], _mm256_mul_ps(x, wv));
          acc[c] = _mm256_blendv_ps(sum, _mm256_fmadd_ps(x, wv, acc[c]), fuse);
        }
      }
    }
    for (int c = 0; c < 3; c++) _mm256_store_ps(out[c] + (size_t)b * 8, acc[c]);
  }
}

/* nv vectors of the vertical sums from i on. */
AVX2 static inline void vsum(const float *const *rows, int n, const float *w, int plain, size_t i, int nv,
                             __m256 *a) {
  const __m256 w0 = _mm256_set1_ps(w[0]);
  for (int j = 0; j < nv; j++) a[j] = _mm256_mul_ps(_mm256_load_ps(rows[0] + i + 8 * j), w0);
  for (int t = 1; t < n; t++) {
    const __m256 wt = _mm256_set1_ps(w[t]);
    if (t <= plain)
      for (int j = 0; j < nv; j++) a[j] = _mm256_add_ps(a[j], _mm256_mul_ps(_mm256_load_ps(rows[t] + i + 8 * j), wt));
    else
      for (int j = 0; j < nv; j++) a[j] = _mm256_fmadd_ps(_mm256_load_ps(rows[t] + i + 8 * j), wt, a[j]);
  }
}

/* Eight sums rounded half to even and clamped: the low 8 bytes. */
AVX2 static inline __m128i round_u8(__m256 v) {
  v = _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
  __m256i i = _mm256_cvtps_epi32(v);
  __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
  return _mm_packus_epi16(h, h);
}

AVX2 void ff__resize_vrow_avx2(const float *const *rows, int n, const float *w, int plain, int out_pad, int width,
                               uint8_t *const out[3]) {
  const float *r[FF__RESIZE_MAX_VTAPS];
  for (int c = 0; c < 3; c++) {
    for (int t = 0; t < n; t++) r[t] = rows[t] + (size_t)c * out_pad;
    int i = 0;
    for (; i + 32 <= width; i += 32) {
      __m256 a[4];
      vsum(r, n, w, plain, (size_t)i, 4, a);
      for (int j = 0; j < 4; j++) _mm_storel_epi64((__m128i *)(out[c] + i + 8 * j), round_u8(a[j]));
    }
    for (; i < width; i += 8) {
      __m256 a;
      vsum(r, n, w, plain, (size_t)i, 1, &a);
      uint8_t v[16];
      _mm_storeu_si128((__m128i *)v, round_u8(a));
      for (int j = 0; j < 8 && i + j < width; j++) out[c][i + j] = v[j];
    }
  }
}
#endif
