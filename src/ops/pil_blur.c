/* pil_blur.c — Pillow's ImageFilter.GaussianBlur(radius) on the CPU: the
 * box of each pass from the radius (the host's half of kernels/pil_blur.h,
 * which the device lowering uses too) and the six passes.
 *
 * The arithmetic is integer and per line, so the passes may run in any
 * layout and order of lines: each pass runs down the columns of an image,
 * all the values of a row side by side as lanes, one row step at a time
 * (a loop the compiler vectorises); the passes along x run on the image
 * transposed (as Pillow runs its passes along y), and the result is
 * transposed back. The step runner gives the op a fresh dst; the two
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
