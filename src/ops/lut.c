/* lut.c — a 256-entry byte table over rows of bytes. On x86-64 with AVX2
 * the table is sixteen 16-byte pieces, each broadcast to both lanes of a
 * ymm register: pshufb looks every byte's low nibble up in all sixteen,
 * and a binary tree of fifteen byte blends picks the piece of its high
 * nibble, bit 4 first (each blend selects on a byte's bit 7, so the masks
 * are the bytes shifted left by 3, 2, 1 and 0). Thirty-two bytes per
 * 36 instructions, the same table entries as the scalar loop, which runs
 * the tails and on other CPUs. */
#include "ops/lut.h"

#include <string.h>

#include "kernels/pixel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_LUT 1

__attribute__((target("avx2"))) static inline __m256i lookup32(const __m256i tab[16], __m256i x) {
  __m256i lo = _mm256_and_si256(x, _mm256_set1_epi8(0x0F));
  __m256i l1[8], l2[4];
  __m256i b4 = _mm256_slli_epi16(x, 3), b5 = _mm256_slli_epi16(x, 2), b6 = _mm256_slli_epi16(x, 1);
  for (int j = 0; j < 8; j++)
    l1[j] =
        _mm256_blendv_epi8(_mm256_shuffle_epi8(tab[2 * j], lo), _mm256_shuffle_epi8(tab[2 * j + 1], lo), b4);
  for (int j = 0; j < 4; j++)
    l2[j] = _mm256_blendv_epi8(l1[2 * j], l1[2 * j + 1], b5);
  __m256i a = _mm256_blendv_epi8(l2[0], l2[1], b6), b = _mm256_blendv_epi8(l2[2], l2[3], b6);
  return _mm256_blendv_epi8(a, b, x);
}

__attribute__((target("avx2"))) static void lut_rows_avx2(const uint8_t *src, size_t src_stride, uint8_t *dst,
                                                          size_t dst_stride, size_t rows, size_t bytes,
                                                          const uint8_t t[256]) {
  __m256i tab[16];
  for (int j = 0; j < 16; j++)
    tab[j] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(t + 16 * j)));
  for (size_t y = 0; y < rows; y++) {
    const uint8_t *p = src + y * src_stride;
    uint8_t *q = dst + y * dst_stride;
    size_t k = 0;
    for (; k + 32 <= bytes; k += 32)
      _mm256_storeu_si256((__m256i *)(q + k), lookup32(tab, _mm256_loadu_si256((const __m256i *)(p + k))));
    if (k < bytes) { /* the tail through a 32-byte copy */
      uint8_t in[32] = {0}, out[32];
      memcpy(in, p + k, bytes - k);
      _mm256_storeu_si256((__m256i *)out, lookup32(tab, _mm256_loadu_si256((const __m256i *)in)));
      memcpy(q + k, out, bytes - k);
    }
  }
}
#endif

int ff__lut_vectorised(void) {
#ifdef HAVE_AVX2_LUT
  return ff__cpu_avx2();
#else
  return 0;
#endif
}

void ff__lut_rows(const uint8_t *src, size_t src_stride, uint8_t *dst, size_t dst_stride, size_t rows,
                  size_t bytes, const uint8_t t[256]) {
#ifdef HAVE_AVX2_LUT
  if (ff__lut_vectorised()) {
    lut_rows_avx2(src, src_stride, dst, dst_stride, rows, bytes, t);
    return;
  }
#endif
  for (size_t y = 0; y < rows; y++) {
    const uint8_t *p = src + y * src_stride;
    uint8_t *q = dst + y * dst_stride;
    for (size_t k = 0; k < bytes; k++)
      q[k] = t[p[k]];
  }
}
