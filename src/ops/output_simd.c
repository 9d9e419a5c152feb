/* output_simd.c — ops/output.c's vector paths (output_simd.h). AVX-512
 * VBMI: 64 values a step, an interleaved image's channel taken out of 192
 * bytes by two byte permutes, the table looked up one byte position at a
 * time (two vpermi2b over the 256-entry byte table, the index's top bit
 * picking between them), the byte positions put back together into
 * elements by unpacks (the index permuted first so that the elements come
 * out in order). AVX2: the lookups scalar into a block in the first-level
 * cache, then copied out with streaming stores. A plane's first values,
 * up to the streaming stores' alignment, go the scalar way. */
#include "ops/output_simd.h"

#ifdef FF__OUTPUT_SIMD
#include <immintrin.h>
#include <string.h>

#define CHUNK 2048 /* values looked up per block */

/* Values [start, start + n) of channel c in a row (the plane itself for a
 * planar source), scalar: buf gets them. */
static const uint8_t *values_scalar(const ff__output_src *s, int c, size_t start, size_t n, uint8_t *buf) {
  size_t w = (size_t)s->w;
  if (s->planes) return s->planes + (size_t)c * w * s->h + start;
  size_t y = start / w, x = start % w;
  for (size_t k = 0; k < n; x = 0, y++) {
    const uint8_t *row = s->rows + y * s->stride + (size_t)c;
    size_t m = n - k < w - x ? n - k : w - x;
    for (size_t j = 0; j < m; j++) buf[k + j] = row[(x + j) * 3];
    k += m;
  }
  return buf;
}

static void lookup(const uint32_t *t, int elem, const uint8_t *v, size_t n, void *out) {
  if (elem == 4)
    for (size_t i = 0; i < n; i++) ((uint32_t *)out)[i] = t[v[i]];
  else if (elem == 2)
    for (size_t i = 0; i < n; i++) ((uint16_t *)out)[i] = (uint16_t)t[v[i]];
  else
    for (size_t i = 0; i < n; i++) ((uint8_t *)out)[i] = (uint8_t)t[v[i]];
}

/* How many first values of a plane at dst precede the first `align`-byte
 * boundary (all n when the elements never meet one). */
static size_t head_of(const void *dst, int elem, size_t n, size_t align) {
  size_t off = (align - (uintptr_t)dst % align) % align;
  if (off % (size_t)elem) return n;
  return off / (size_t)elem < n ? off / (size_t)elem : n;
}

#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static void stream_copy32(char *dst, const char *src, size_t n) { /* dst 32-byte aligned */
  size_t i = 0;
  for (; i + 32 <= n; i += 32) _mm256_stream_si256((__m256i *)(dst + i), _mm256_loadu_si256((const __m256i *)(src + i)));
  memcpy(dst + i, src + i, n - i);
}

AVX2 void ff__output_planes_avx2(const uint32_t table[3][256], int elem, const ff__output_src *src, void *dst,
                                 int stream) {
  size_t n = (size_t)src->w * src->h;
  uint8_t buf[CHUNK];
  uint32_t block[CHUNK] __attribute__((aligned(32)));
  for (int c = 0; c < 3; c++) {
    char *d = (char *)dst + (size_t)c * n * elem;
    size_t head = stream ? head_of(d, elem, n, 32) : 0;
    lookup(table[c], elem, values_scalar(src, c, 0, head, buf), head, d);
    for (size_t i = head; i < n; i += CHUNK) {
      size_t k = n - i < CHUNK ? n - i : CHUNK;
      const uint8_t *v = values_scalar(src, c, i, k, buf);
      if (!stream) {
        lookup(table[c], elem, v, k, d + i * elem);
        continue;
      }
      lookup(table[c], elem, v, k, block);
      stream_copy32(d + i * elem, (const char *)block, k * (size_t)elem);
    }
  }
  if (stream) _mm_sfence();
}

AVX2 void ff__output_copy(void *dst, const void *src, size_t n, int stream) {
  size_t head = stream ? head_of(dst, 1, n, 32) : n;
  memcpy(dst, src, head);
  if (head < n) stream_copy32((char *)dst + head, (const char *)src + head, n - head);
}

void ff__output_fence(void) { _mm_sfence(); }

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

/* Values [start, start + n) of channel c, 64 pixels (192 bytes) a step. */
AVX512 static const uint8_t *values_avx512(const ff__output_src *s, int c, size_t start, size_t n, uint8_t *buf) {
  size_t w = (size_t)s->w;
  if (s->planes) return s->planes + (size_t)c * w * s->h + start;
  uint8_t ia[64], ic[64];
  uint64_t from_c = 0;
  for (int i = 0; i < 64; i++) {
    int pos = 3 * i + c;
    ia[i] = (uint8_t)(pos & 127), ic[i] = (uint8_t)(pos >= 128 ? pos - 128 : 0);
    if (pos >= 128) from_c |= 1ull << i;
  }
  const __m512i idx_ab = _mm512_loadu_si512(ia), idx_c = _mm512_loadu_si512(ic);
  size_t y = start / w, x = start % w;
  for (size_t k = 0; k < n; x = 0, y++) {
    const uint8_t *p = s->rows + y * s->stride + x * 3;
    size_t m = n - k < w - x ? n - k : w - x;
    for (size_t j = 0; j < m; j += 64) {
      size_t bytes = 3 * (m - j < 64 ? m - j : 64);
      __mmask64 l0 = bytes >= 64 ? ~0ull : (1ull << bytes) - 1;
      __mmask64 l1 = bytes >= 128 ? ~0ull : bytes > 64 ? (1ull << (bytes - 64)) - 1 : 0;
      __mmask64 l2 = bytes >= 192 ? ~0ull : bytes > 128 ? (1ull << (bytes - 128)) - 1 : 0;
      const uint8_t *q = p + 3 * j;
      __m512i a = _mm512_maskz_loadu_epi8(l0, q), b = _mm512_maskz_loadu_epi8(l1, q + 64);
      __m512i cc = _mm512_maskz_loadu_epi8(l2, q + 128);
      __m512i v = _mm512_permutex2var_epi8(a, idx_ab, b);
      _mm512_storeu_si512(buf + k + j, _mm512_mask_permutexvar_epi8(v, (__mmask64)from_c, idx_c, cc));
    }
    k += m;
  }
  return buf;
}

/* The index's bytes in the order the unpacks below take them, so that
 * the elements come out in order. */
AVX512 static __m512i unpack_order(int elem) {
  uint8_t order[64];
  for (int i = 0; i < 64; i++) {
    int lane = i / 16, j = i % 16;
    order[i] = (uint8_t)(elem == 4 ? 16 * (j / 4) + 4 * lane + j % 4 : elem == 2 ? 32 * (j / 8) + 8 * lane + j % 8 : i);
  }
  return _mm512_loadu_si512(order);
}

/* The elements of the q (<= 64) values idx (in order) stored at o: byte
 * position b of each from the byte table t[b] (4 vectors of 64 entries),
 * streaming where a whole vector goes to an aligned place. */
AVX512 __attribute__((always_inline)) static inline void lut_store(const __m512i t[4][4], int elem, __m512i perm,
                                                                   __m512i idx, size_t q, char *o, int stream) {
  size_t per = (size_t)(64 / elem); /* elements per vector */
  if (elem > 1) idx = _mm512_permutexvar_epi8(perm, idx);
  __mmask64 top = _mm512_movepi8_mask(idx);
  __m512i by[4], out[4];
  for (int b = 0; b < elem; b++)
    by[b] = _mm512_mask_blend_epi8(top, _mm512_permutex2var_epi8(t[b][0], idx, t[b][1]),
                                   _mm512_permutex2var_epi8(t[b][2], idx, t[b][3]));
  if (elem == 4) {
    __m512i lo01 = _mm512_unpacklo_epi8(by[0], by[1]), hi01 = _mm512_unpackhi_epi8(by[0], by[1]);
    __m512i lo23 = _mm512_unpacklo_epi8(by[2], by[3]), hi23 = _mm512_unpackhi_epi8(by[2], by[3]);
    out[0] = _mm512_unpacklo_epi16(lo01, lo23), out[1] = _mm512_unpackhi_epi16(lo01, lo23);
    out[2] = _mm512_unpacklo_epi16(hi01, hi23), out[3] = _mm512_unpackhi_epi16(hi01, hi23);
  } else if (elem == 2) {
    out[0] = _mm512_unpacklo_epi8(by[0], by[1]), out[1] = _mm512_unpackhi_epi8(by[0], by[1]);
  } else {
    out[0] = by[0];
  }
  for (int r = 0; r < elem; r++) {
    size_t have = q > r * per ? q - r * per : 0; /* elements of this vector to store */
    char *p = o + 64 * r;
    if (have >= per && stream && !((uintptr_t)p & 63)) _mm512_stream_si512((__m512i *)p, out[r]);
    else if (have >= per) _mm512_storeu_si512(p, out[r]);
    else if (have) _mm512_mask_storeu_epi8(p, (1ull << (have * elem)) - 1, out[r]);
  }
}

AVX512 static void load_tables(const uint8_t bt[4][256], int elem, __m512i t[4][4]) {
  for (int b = 0; b < elem; b++)
    for (int k = 0; k < 4; k++) t[b][k] = _mm512_load_si512(bt[b] + 64 * k);
}

AVX512 void ff__output_planes_avx512(const uint32_t table[3][256], int elem, const ff__output_src *src, void *dst,
                                     int stream) {
  size_t n = (size_t)src->w * src->h;
  uint8_t buf[CHUNK + 64] __attribute__((aligned(64)));
  uint8_t bt[4][256] __attribute__((aligned(64)));
  const __m512i perm = unpack_order(elem);
  for (int c = 0; c < 3; c++) {
    char *d = (char *)dst + (size_t)c * n * elem;
    for (int b = 0; b < elem; b++)
      for (int v = 0; v < 256; v++) bt[b][v] = (uint8_t)(table[c][v] >> (8 * b));
    __m512i t[4][4];
    load_tables(bt, elem, t);
    size_t head = stream ? head_of(d, elem, n, 64) : 0;
    lookup(table[c], elem, values_scalar(src, c, 0, head, buf), head, d);
    for (size_t i = head; i < n; i += CHUNK) {
      size_t k = n - i < CHUNK ? n - i : CHUNK;
      const uint8_t *v = values_avx512(src, c, i, k, buf);
      for (size_t j = 0; j < k; j += 64) {
        size_t q = k - j < 64 ? k - j : 64;
        __m512i idx = _mm512_maskz_loadu_epi8(q == 64 ? ~0ull : (1ull << q) - 1, v + j);
        lut_store(t, elem, perm, idx, q, d + (i + j) * elem, stream);
      }
    }
  }
  if (stream) _mm_sfence();
}
#endif
