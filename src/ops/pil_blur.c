/* pil_blur.c — Pillow's ImageFilter.GaussianBlur(radius) on the CPU: the
 * box of each pass from the radius (the host's half of kernels/pil_blur.h,
 * which the device lowering uses too) and the six passes.
 *
 * The arithmetic is integer and per line, and a box sum is an integer, so
 * the passes may run in any layout and order of lines and sum a box in any
 * order: the bytes are Pillow's. For the boxes of the radii training uses
 * (box radius r <= BOX_DIRECT_MAX), each output value sums its 2r + 3
 * inputs directly (box_line, 16 values side by side): the passes along x
 * run on each row extended by r + 1 copies of its end pixels (Pillow clamps
 * to the ends), the three one after the other on the row while it is in
 * the first-level cache; those along y run over whole rows, the rows above
 * and below the image clamped to its first and last. Larger boxes run
 * Pillow's running sum (ff__pil_box_pass) down the columns of an image, all
 * the values of a row side by side as lanes (a loop the compiler
 * vectorises); the passes along x then run on the image transposed, and the
 * result is transposed back. The step runner gives the op a fresh dst; the
 * intermediate images come from its scratch buffer. */
#include "ops/pil_blur.h"

#include <math.h>
#include <string.h>

#include "kernels/pixel.h"

ff__pil_box ff__pil_blur_box(double radius) {
  ff__pil_box b = {0, 0, 0, 0};
  float sigma = (float)radius; /* Pillow parses the radius as a C float */
  float s2 = sigma * sigma / (float)FF__PIL_BLUR_PASSES;
  float big_l = (float)sqrt(12.0 * (double)s2 + 1.0);
  float l = (float)floor(((double)big_l - 1.0) / 2.0);
  float a = (2.0f * l + 1.0f) * (l * (l + 1.0f) - 3.0f * s2);
  a /= 6.0f * (s2 - (l + 1.0f) * (l + 1.0f));
  float box = l + a;
  if (box == 0.0f) return b;
  b.on = 1;
  b.radius = (int32_t)box;
  b.ww = (uint32_t)((float)(1u << 24) / (box * 2.0f + 1.0f));
  b.fw = ((1u << 24) - (uint32_t)(b.radius * 2 + 1) * b.ww) / 2u;
  return b;
}

/* One pass of b over n rows of `lanes` values each (row r at in + r *
 * in_along): every value of a row is a lane, so the loop over them
 * vectorises (AVX2 where the CPU has it). */
FF_FMA_CLONES_NOINLINE static void pass_rows(const ff__pil_box *b, const uint8_t *in, long in_along, uint8_t *out,
                                             long out_along, long n, int lanes, uint32_t *acc) {
  ff__pil_box_pass(b, in, in_along, out, out_along, n, lanes, acc);
}

/* The largest box radius whose passes sum each box directly. */
#define BOX_DIRECT_MAX 8

/* One pass of b (radius r <= BOX_DIRECT_MAX) over values i .. n - 1: out[i]
 * from v[k][i], k = 0 .. 2r + 2, the values at offsets -r - 1 .. r + 1 of
 * the line: ff__pil_box_value of v[1] + .. + v[2r + 1] and v[0] + v[2r + 2]. */
static void box_tail(const ff__pil_box *b, const uint8_t *const *v, long i, long n, uint8_t *out) {
  const int r = b->radius, far = 2 * r + 2;
  for (; i < n; i++) {
    uint32_t a = v[1][i];
    for (int k = 2; k <= 2 * r + 1; k++) a += v[k][i];
    out[i] = ff__pil_box_value(b, a, (uint32_t)v[0][i] + (uint32_t)v[far][i]);
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#include <immintrin.h>
#define HAVE_BOX_SIMD 1

/* box_tail's values 16 at a time, in uint32 lanes (16 or two times 8);
 * they read no byte past v[k] + n. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void box_line_avx512(const ff__pil_box *b,
                                                                                 const uint8_t *const *v, long n,
                                                                                 uint8_t *out) {
  const int r = b->radius, far = 2 * r + 2;
  const __m512i ww = _mm512_set1_epi32((int)b->ww), fw = _mm512_set1_epi32((int)b->fw);
  const __m512i half = _mm512_set1_epi32(1 << 23);
#define W16(p) _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p)))
  long i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i a = W16(v[1] + i);
    for (int k = 2; k <= 2 * r + 1; k++) a = _mm512_add_epi32(a, W16(v[k] + i));
    __m512i e = _mm512_add_epi32(W16(v[0] + i), W16(v[far] + i));
    __m512i bulk = _mm512_add_epi32(_mm512_mullo_epi32(a, ww), _mm512_mullo_epi32(e, fw));
    _mm_storeu_si128((__m128i *)(out + i), _mm512_cvtepi32_epi8(_mm512_srli_epi32(_mm512_add_epi32(bulk, half), 24)));
  }
#undef W16
  box_tail(b, v, i, n, out);
}

__attribute__((target("avx2"))) static void box_line_avx2(const ff__pil_box *b, const uint8_t *const *v, long n,
                                                          uint8_t *out) {
  const int r = b->radius, far = 2 * r + 2;
  const __m256i ww = _mm256_set1_epi32((int)b->ww), fw = _mm256_set1_epi32((int)b->fw);
  const __m256i half = _mm256_set1_epi32(1 << 23);
#define W8(p) _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p)))
  long i = 0;
  for (; i + 16 <= n; i += 16) { /* two vectors a step: the loop over the box costs half as much */
    __m256i a0 = W8(v[1] + i), a1 = W8(v[1] + i + 8);
    for (int k = 2; k <= 2 * r + 1; k++) a0 = _mm256_add_epi32(a0, W8(v[k] + i)), a1 = _mm256_add_epi32(a1, W8(v[k] + i + 8));
    __m256i e0 = _mm256_add_epi32(W8(v[0] + i), W8(v[far] + i));
    __m256i e1 = _mm256_add_epi32(W8(v[0] + i + 8), W8(v[far] + i + 8));
    __m256i o0 = _mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(a0, ww), _mm256_mullo_epi32(e0, fw)), half);
    __m256i o1 = _mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(a1, ww), _mm256_mullo_epi32(e1, fw)), half);
    /* >> 24: 0..255; packus works within 128-bit halves, the permute puts o0's then o1's eight in order */
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(_mm256_srli_epi32(o0, 24), _mm256_srli_epi32(o1, 24)), 0xD8);
    _mm_storeu_si128((__m128i *)(out + i), _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
  }
#undef W8
  box_tail(b, v, i, n, out);
}
#endif

/* Which box_line runs: 2 AVX-512, 1 AVX2, 0 box_tail alone. */
static int box_simd(void) {
#ifdef HAVE_BOX_SIMD
  if (ff__cpu_avx512()) return 2;
  return ff__cpu_avx2() ? 1 : 0;
#else
  return 0;
#endif
}

/* One pass of b over a line of n values (box_tail's), vectorised where the
 * CPU can (simd: box_simd()). */
static void box_line(const ff__pil_box *b, const uint8_t *const *v, long n, uint8_t *out, int simd) {
#ifdef HAVE_BOX_SIMD
  if (simd == 2) {
    box_line_avx512(b, v, n, out);
    return;
  }
  if (simd == 1) {
    box_line_avx2(b, v, n, out);
    return;
  }
#else
  (void)simd;
#endif
  box_tail(b, v, 0, n, out);
}

/* Line buffer ln (w + 2r + 2 pixels): its middle w pixels extended by r + 1
 * copies of the first and of the last. */
static void extend_line(uint8_t *ln, int w, int r) {
  uint8_t *mid = ln + (size_t)(r + 1) * 3, *end = mid + (size_t)w * 3;
  for (int k = 0; k <= r; k++) {
    memcpy(ln + (size_t)k * 3, mid, 3);
    memcpy(end + (size_t)k * 3, end - 3, 3);
  }
}

/* The three passes of b along x over each row of src into a (packed rows),
 * on two line buffers of w + 2r + 2 pixels. */
static void x_passes_direct(const ff__pil_box *b, const ff__image *src, uint8_t *a, uint8_t *ln0, uint8_t *ln1,
                            int simd) {
  int w = src->width, r = b->radius;
  size_t row = (size_t)w * 3, off = (size_t)(r + 1) * 3;
  const uint8_t *v0[2 * BOX_DIRECT_MAX + 3], *v1[2 * BOX_DIRECT_MAX + 3];
  for (int k = 0; k <= 2 * r + 2; k++) v0[k] = ln0 + (size_t)k * 3, v1[k] = ln1 + (size_t)k * 3;
  for (int y = 0; y < src->height; y++) {
    memcpy(ln0 + off, src->data + (size_t)y * src->stride, row);
    extend_line(ln0, w, r);
    box_line(b, v0, (long)row, ln1 + off, simd);
    extend_line(ln1, w, r);
    box_line(b, v1, (long)row, ln0 + off, simd);
    extend_line(ln0, w, r);
    box_line(b, v0, (long)row, a + (size_t)y * row, simd);
  }
}

/* One pass of b along y: out's rows (out_stride apart) from in's h rows of
 * `row` bytes (in_stride apart), the rows past either end clamped. */
static void y_pass_direct(const ff__pil_box *b, const uint8_t *in, size_t in_stride, uint8_t *out,
                          size_t out_stride, int h, size_t row, int simd) {
  int r = b->radius;
  const uint8_t *v[2 * BOX_DIRECT_MAX + 3];
  for (int y = 0; y < h; y++) {
    for (int k = 0; k <= 2 * r + 2; k++) v[k] = in + (size_t)ff__pil_box_clamp(y - r - 1 + k, h - 1) * in_stride;
    box_line(b, v, (long)row, out + (size_t)y * out_stride, simd);
  }
}

/* dst (w rows of h pixels, packed) = src (h rows of w pixels) transposed. */
static void transpose(const uint8_t *src, size_t src_stride, int w, int h, uint8_t *dst) {
  enum { TILE = 32 };
  size_t drow = (size_t)h * 3;
  for (int y0 = 0; y0 < h; y0 += TILE)
    for (int x0 = 0; x0 < w; x0 += TILE)
      for (int y = y0; y < h && y < y0 + TILE; y++) {
        const uint8_t *in = src + (size_t)y * src_stride;
        for (int x = x0; x < w && x < x0 + TILE; x++) memcpy(dst + (size_t)x * drow + (size_t)y * 3, in + (size_t)x * 3, 3);
      }
}

/* The three passes down the columns of in (n rows of `row` values): in ->
 * x -> y -> out, x distinct from in, y from x. */
static void three_passes(const ff__pil_box *b, const uint8_t *in, size_t in_stride, uint8_t *x, uint8_t *y,
                         uint8_t *out, size_t out_stride, long n, long row, uint32_t *acc) {
  pass_rows(b, in, (long)in_stride, x, row, n, (int)row, acc);
  pass_rows(b, x, row, y, row, n, (int)row, acc);
  pass_rows(b, y, row, out, (long)out_stride, n, (int)row, acc);
}

ff_status ff__pil_blur_run(double radius, const ff__image *src, ff__image *dst, ff__buf *tmp) {
  if (src->channels != 3 || !(radius >= 0 && radius <= FF__PIL_BLUR_MAX_RADIUS)) return FF_EINVAL;
  int w = src->width, h = src->height;
  size_t row = (size_t)w * 3, image = row * (size_t)h, longest = (size_t)(w > h ? w : h) * 3;
  ff__pil_box b = ff__pil_blur_box(radius);
  if (radius == 0 || !b.on || !w || !h) { /* GaussianBlur(0) copies; so does a box of radius 0 */
    for (int y = 0; y < h; y++) memcpy(dst->data + (size_t)y * dst->stride, src->data + (size_t)y * src->stride, row);
    return FF_OK;
  }
  if (b.radius <= BOX_DIRECT_MAX) {
    size_t line = (size_t)(w + 2 * b.radius + 2) * 3;
    uint8_t *t = ff__buf_reserve(tmp, 2 * image + 2 * line);
    if (!t) return FF_ENOMEM;
    uint8_t *a = t, *c = a + image;
    int simd = box_simd();
    x_passes_direct(&b, src, a, c + image, c + image + line, simd);
    y_pass_direct(&b, a, row, c, row, h, row, simd);
    y_pass_direct(&b, c, row, a, row, h, row, simd);
    y_pass_direct(&b, a, row, dst->data, dst->stride, h, row, simd);
    return FF_OK;
  }
  uint8_t *t = ff__buf_reserve(tmp, 2 * image + longest * sizeof(uint32_t) + 16);
  if (!t) return FF_ENOMEM;
  uint8_t *a = t, *c = a + image;
  uint32_t *acc = (uint32_t *)(void *)(((uintptr_t)(c + image) + 15) & ~(uintptr_t)15);
  /* along x: the passes down the columns of the transposed image (the box is the same on both axes) */
  long trow = (long)h * 3;
  transpose(src->data, src->stride, w, h, a);
  three_passes(&b, a, (size_t)trow, c, a, c, (size_t)trow, w, trow, acc); /* a -> c -> a -> c */
  transpose(c, (size_t)trow, h, w, a);
  /* along y */
  three_passes(&b, a, row, c, a, dst->data, dst->stride, h, (long)row, acc); /* a -> c -> a -> dst */
  return FF_OK;
}
