/* resize_avx512.c — ops/resize.c's float32 passes 16 values per AVX-512
 * vector (resize_simd.h): lane for lane the scalar sums' operations (vmulps,
 * vaddps and vfmadd round as the scalar code's float operations and fmaf
 * do), and the scalar rounding (max, min, vcvtps2dq: half to even). */
#include "ops/resize_simd.h"

#ifdef FF__RESIZE_SIMD
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))

AVX512 static inline __m512 u8x16_ps(const uint8_t *p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

/* With VBMI: 16 pixels (48 bytes, one masked load) a step, each plane's
 * 16 bytes picked out by one byte permute. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) static void planes_vbmi(const uint8_t *row, int w,
                                                                                          float *const planes[3]) {
  __m512i pick[3];
  for (int k = 0; k < 3; k++) {
    uint8_t b[64] = {0};
    for (int l = 0; l < 16; l++) b[l] = (uint8_t)(3 * l + k);
    pick[k] = _mm512_loadu_si512(b);
  }
  int p = 0;
  for (; p + 16 <= w; p += 16) {
    __m512i v = _mm512_maskz_loadu_epi8(0xFFFFFFFFFFFFull, row + (size_t)p * 3);
    for (int k = 0; k < 3; k++) {
      __m128i b = _mm512_castsi512_si128(_mm512_permutexvar_epi8(pick[k], v));
      _mm512_storeu_ps(planes[k] + p, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b)));
    }
  }
  for (; p < w; p++)
    for (int k = 0; k < 3; k++) planes[k][p] = (float)row[(size_t)p * 3 + k];
}

AVX512 void ff__resize_planes_avx512(const uint8_t *row, int w, float *const planes[3]) {
  if (__builtin_cpu_supports("avx512vbmi")) {
    planes_vbmi(row, w, planes);
    return;
  }
  /* plane k's lane l is value 3l + k of the 48: out of (a, b) below 32, out of c above */
  __m512i idx[3], idx_c[3];
  __mmask16 from_c[3];
  for (int k = 0; k < 3; k++) {
    int32_t i[16], j[16];
    from_c[k] = 0;
    for (int l = 0; l < 16; l++) {
      int pos = 3 * l + k;
      i[l] = pos & 31, j[l] = pos >= 32 ? pos - 32 : 0;
      if (pos >= 32) from_c[k] |= (__mmask16)(1u << l);
    }
    idx[k] = _mm512_loadu_si512(i), idx_c[k] = _mm512_loadu_si512(j);
  }
  int p = 0;
  for (; p + 16 <= w; p += 16) {
    const uint8_t *q = row + (size_t)p * 3;
    __m512 a = u8x16_ps(q), b = u8x16_ps(q + 16), c = u8x16_ps(q + 32);
    for (int k = 0; k < 3; k++) {
      __m512 v = _mm512_permutex2var_ps(a, idx[k], b);
      _mm512_storeu_ps(planes[k] + p, _mm512_mask_permutexvar_ps(v, from_c[k], idx_c[k], c));
    }
  }
  for (; p < w; p++)
    for (int k = 0; k < 3; k++) planes[k][p] = (float)row[(size_t)p * 3 + k];
}

/* Tap t's inputs of channel c: out of the window (WIDE 2 or 4 vectors from
 * the block's base; index bit 5 picks the pair), or gathered (WIDE 0). */
#define TAP_X(WIDE, c)                                                                                       \
  ((WIDE) == 2   ? _mm512_permutex2var_ps(w##c[0], iv, w##c[1])                                             \
   : (WIDE) == 4 ? _mm512_mask_mov_ps(_mm512_permutex2var_ps(w##c[0], iv, w##c[1]),                        \
                                      _mm512_test_epi32_mask(iv, _mm512_set1_epi32(32)),                  \
                                      _mm512_permutex2var_ps(w##c[2], iv, w##c[3]))                        \
                 : _mm512_i32gather_ps(iv, in[c], 4))

/* One block of 16 output pixels, its three channels side by side, the
 * window and the sums in registers: tap 0's product, then taps 1 .. plain
 * added, the rest fused (MIXED: each lane as its record's fuse mask says). */
AVX512 __attribute__((always_inline)) static inline void hblock(const ff__hpass *h, const ff__hblock *k,
                                                                const float *const in[3], float *const out[3],
                                                                size_t at, const int WIDE, const int MIXED) {
  __m512 w0[4], w1[4], w2[4];
  for (int j = 0; j < WIDE; j++) {
    w0[j] = _mm512_loadu_ps(in[0] + k->base + 16 * j);
    w1[j] = _mm512_loadu_ps(in[1] + k->base + 16 * j);
    w2[j] = _mm512_loadu_ps(in[2] + k->base + 16 * j);
  }
  const int32_t *ip = h->idx + (size_t)k->rec * 16;
  const float *wp = h->w + (size_t)k->rec * 16;
  __m512i iv = _mm512_load_si512(ip);
  __m512 wv = _mm512_load_ps(wp);
  __m512 a0 = _mm512_mul_ps(TAP_X(WIDE, 0), wv), a1 = _mm512_mul_ps(TAP_X(WIDE, 1), wv);
  __m512 a2 = _mm512_mul_ps(TAP_X(WIDE, 2), wv);
  int t = 1;
  if (!MIXED) {
    for (; t <= k->plain; t++) {
      iv = _mm512_load_si512(ip + 16 * t), wv = _mm512_load_ps(wp + 16 * t);
      a0 = _mm512_add_ps(a0, _mm512_mul_ps(TAP_X(WIDE, 0), wv));
      a1 = _mm512_add_ps(a1, _mm512_mul_ps(TAP_X(WIDE, 1), wv));
      a2 = _mm512_add_ps(a2, _mm512_mul_ps(TAP_X(WIDE, 2), wv));
    }
    for (; t < k->taps; t++) {
      iv = _mm512_load_si512(ip + 16 * t), wv = _mm512_load_ps(wp + 16 * t);
      a0 = _mm512_fmadd_ps(TAP_X(WIDE, 0), wv, a0);
      a1 = _mm512_fmadd_ps(TAP_X(WIDE, 1), wv, a1);
      a2 = _mm512_fmadd_ps(TAP_X(WIDE, 2), wv, a2);
    }
  } else {
    for (; t < k->taps; t++) {
      iv = _mm512_load_si512(ip + 16 * t), wv = _mm512_load_ps(wp + 16 * t);
      __mmask16 fuse = (__mmask16)h->fuse[k->rec + t], add = (__mmask16)~fuse;
      __m512 x0 = TAP_X(WIDE, 0), x1 = TAP_X(WIDE, 1), x2 = TAP_X(WIDE, 2);
      a0 = _mm512_mask3_fmadd_ps(x0, wv, _mm512_mask_add_ps(a0, add, a0, _mm512_mul_ps(x0, wv)), fuse);
      a1 = _mm512_mask3_fmadd_ps(x1, wv, _mm512_mask_add_ps(a1, add, a1, _mm512_mul_ps(x1, wv)), fuse);
      a2 = _mm512_mask3_fmadd_ps(x2, wv, _mm512_mask_add_ps(a2, add, a2, _mm512_mul_ps(x2, wv)), fuse);
    }
  }
  _mm512_store_ps(out[0] + at, a0), _mm512_store_ps(out[1] + at, a1), _mm512_store_ps(out[2] + at, a2);
}

/* A block of 16 output pixels of two rows at once (a 2-vector window):
 * each tap's index and weight serve both. */
AVX512 __attribute__((always_inline)) static inline void hblock2(const ff__hpass *h, const ff__hblock *k,
                                                                 const float *const in[6], float *const out[6],
                                                                 size_t at, const int MIXED) {
  __m512 lo[6], hi[6], a[6];
  for (int c = 0; c < 6; c++) lo[c] = _mm512_loadu_ps(in[c] + k->base), hi[c] = _mm512_loadu_ps(in[c] + k->base + 16);
  const int32_t *ip = h->idx + (size_t)k->rec * 16;
  const float *wp = h->w + (size_t)k->rec * 16;
  __m512i iv = _mm512_load_si512(ip);
  __m512 wv = _mm512_load_ps(wp);
  for (int c = 0; c < 6; c++) a[c] = _mm512_mul_ps(_mm512_permutex2var_ps(lo[c], iv, hi[c]), wv);
  int t = 1;
  if (!MIXED) {
    for (; t <= k->plain; t++) {
      iv = _mm512_load_si512(ip + 16 * t), wv = _mm512_load_ps(wp + 16 * t);
      for (int c = 0; c < 6; c++) a[c] = _mm512_add_ps(a[c], _mm512_mul_ps(_mm512_permutex2var_ps(lo[c], iv, hi[c]), wv));
    }
    for (; t < k->taps; t++) {
      iv = _mm512_load_si512(ip + 16 * t), wv = _mm512_load_ps(wp + 16 * t);
      for (int c = 0; c < 6; c++) a[c] = _mm512_fmadd_ps(_mm512_permutex2var_ps(lo[c], iv, hi[c]), wv, a[c]);
    }
  } else {
    for (; t < k->taps; t++) {
      iv = _mm512_load_si512(ip + 16 * t), wv = _mm512_load_ps(wp + 16 * t);
      __mmask16 fuse = (__mmask16)h->fuse[k->rec + t], add = (__mmask16)~fuse;
      for (int c = 0; c < 6; c++) {
        __m512 x = _mm512_permutex2var_ps(lo[c], iv, hi[c]);
        a[c] = _mm512_mask3_fmadd_ps(x, wv, _mm512_mask_add_ps(a[c], add, a[c], _mm512_mul_ps(x, wv)), fuse);
      }
    }
  }
  for (int c = 0; c < 6; c++) _mm512_store_ps(out[c] + at, a[c]);
}

AVX512 void ff__resize_hrow2_avx512(const ff__hpass *h, const float *const in[6], float *const out[6]) {
  for (int b = 0; b < h->blocks; b++) {
    const ff__hblock *k = &h->block[b];
    size_t at = (size_t)b * 16;
    if (k->wide == 2 && k->plain >= 0) {
      hblock2(h, k, in, out, at, 0);
    } else if (k->wide == 2) {
      hblock2(h, k, in, out, at, 1);
    } else {
      for (int r = 0; r < 2; r++) {
        int mixed = k->plain < 0;
        const float *const *i = in + 3 * r;
        float *const *o = out + 3 * r;
        if (k->wide == 4 && !mixed) hblock(h, k, i, o, at, 4, 0);
        else if (k->wide == 4) hblock(h, k, i, o, at, 4, 1);
        else if (!mixed) hblock(h, k, i, o, at, 0, 0);
        else hblock(h, k, i, o, at, 0, 1);
      }
    }
  }
}

AVX512 void ff__resize_hrow_avx512(const ff__hpass *h, const float *const in[3], float *const out[3]) {
  for (int b = 0; b < h->blocks; b++) {
    const ff__hblock *k = &h->block[b];
    size_t at = (size_t)b * 16;
    int mixed = k->plain < 0;
    if (k->wide == 2 && !mixed) hblock(h, k, in, out, at, 2, 0);
    else if (k->wide == 2) hblock(h, k, in, out, at, 2, 1);
    else if (k->wide == 4 && !mixed) hblock(h, k, in, out, at, 4, 0);
    else if (k->wide == 4) hblock(h, k, in, out, at, 4, 1);
    else if (!mixed) hblock(h, k, in, out, at, 0, 0);
    else hblock(h, k, in, out, at, 0, 1);
  }
}

/* nv vectors of the vertical sums from i on, plane c (rows[t] + c * out_pad). */
AVX512 static inline void vsum(const float *const *rows, int n, const float *w, int plain, size_t i, int nv,
                               __m512 *a) {
  const __m512 w0 = _mm512_set1_ps(w[0]);
  for (int j = 0; j < nv; j++) a[j] = _mm512_mul_ps(_mm512_load_ps(rows[0] + i + 16 * j), w0);
  for (int t = 1; t < n; t++) {
    const __m512 wt = _mm512_set1_ps(w[t]);
    if (t <= plain)
      for (int j = 0; j < nv; j++) a[j] = _mm512_add_ps(a[j], _mm512_mul_ps(_mm512_load_ps(rows[t] + i + 16 * j), wt));
    else
      for (int j = 0; j < nv; j++) a[j] = _mm512_fmadd_ps(_mm512_load_ps(rows[t] + i + 16 * j), wt, a[j]);
  }
}

AVX512 static inline __m128i round_u8(__m512 v) {
  v = _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), _mm512_set1_ps(255.0f));
  return _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v));
}

AVX512 void ff__resize_vrow_avx512(const float *const *rows, int n, const float *w, int plain, int out_pad, int width,
                                   uint8_t *const out[3]) {
  const float *r[FF__RESIZE_MAX_VTAPS];
  for (int c = 0; c < 3; c++) {
    for (int t = 0; t < n; t++) r[t] = rows[t] + (size_t)c * out_pad;
    int i = 0;
    for (; i + 64 <= width; i += 64) {
      __m512 a[4];
      vsum(r, n, w, plain, (size_t)i, 4, a);
      for (int j = 0; j < 4; j++) _mm_storeu_si128((__m128i *)(out[c] + i + 16 * j), round_u8(a[j]));
    }
    for (; i < width; i += 16) {
      __m512 a;
      vsum(r, n, w, plain, (size_t)i, 1, &a);
      int m = width - i < 16 ? width - i : 16;
      _mm_mask_storeu_epi8(out[c] + i, (__mmask16)((1u << m) - 1), round_u8(a));
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) void ff__resize_interleave_avx512(
    const uint8_t *const in[3], int n, uint8_t *out) {
  uint8_t order[64];
  for (int i = 0; i < 48; i++) order[i] = (uint8_t)((i % 3) * 16 + i / 3); /* byte i of 16 pixels */
  for (int i = 48; i < 64; i++) order[i] = 0;
  const __m512i perm = _mm512_loadu_si512(order);
  int p = 0;
  for (; p + 16 <= n; p += 16) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(in[0] + p)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(in[1] + p)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(in[2] + p)), 2);
    _mm512_mask_storeu_epi8(out + (size_t)p * 3, (__mmask64)0xFFFFFFFFFFFFull, _mm512_permutexvar_epi8(perm, v));
  }
  for (; p < n; p++) out[3 * p] = in[0][p], out[3 * p + 1] = in[1][p], out[3 * p + 2] = in[2][p];
}
#endif
