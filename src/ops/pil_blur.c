/* pil_blur.c — Pillow's ImageFilter.GaussianBlur(radius) on the CPU: the
 * box of each pass from the radius (the host's half of kernels/pil_blur.h,
 * which the device lowering uses too) and the six passes.
 *
 * The arithmetic is integer and per line, so the passes may run in any
 * layout: along x each row's three channels are one pass (row buffers in
 * between, the last pass writing the result); along y all the values of a
 * row are lanes side by side, one row step at a time, which the compiler
 * vectorises. The step runner gives the op a fresh dst; the two
 * intermediate images and the rows come from its scratch buffer. */
#include "ops/pil_blur.h"

#include <math.h>
#include <string.h>

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

/* The three passes along y of in (w x h, in_stride) into dst, through
 * the packed images x and y: in -> x -> y -> dst (x distinct from in, y from x). */
static void passes_y(const ff__pil_box *b, const uint8_t *in, size_t in_stride, int w, int h, uint8_t *x,
                     uint8_t *y, ff__image *dst, uint32_t *acc) {
  long row = (long)w * 3;
  ff__pil_box_pass(b, in, (long)in_stride, x, row, h, (int)row, acc);
  ff__pil_box_pass(b, x, row, y, row, h, (int)row, acc);
  ff__pil_box_pass(b, y, row, dst->data, (long)dst->stride, h, (int)row, acc);
}

ff_status ff__pil_blur_run(double radius, const ff__image *src, ff__image *dst, ff__buf *tmp) {
  if (src->channels != 3 || !(radius >= 0) || !isfinite(radius)) return FF_EINVAL;
  int w = src->width, h = src->height;
  size_t row = (size_t)w * 3, image = row * (size_t)h;
  ff__pil_box b = ff__pil_blur_box(radius);
  if (radius == 0 || !b.on || !w || !h) { /* GaussianBlur(0) copies; so does a box of radius 0 */
    for (int y = 0; y < h; y++) memcpy(dst->data + (size_t)y * dst->stride, src->data + (size_t)y * src->stride, row);
    return FF_OK;
  }
  uint8_t *t = ff__buf_reserve(tmp, 2 * image + 2 * row + row * sizeof(uint32_t) + 16);
  if (!t) return FF_ENOMEM;
  uint8_t *t1 = t, *t2 = t1 + image, *ra = t2 + image, *rb = ra + row;
  uint32_t *acc = (uint32_t *)(void *)(((uintptr_t)(rb + row) + 15) & ~(uintptr_t)15);
  /* along x, row by row: src -> ra -> rb -> t1 (both axes here, as the box is the same for both) */
  for (int y = 0; y < h; y++) {
    const uint8_t *in = src->data + (size_t)y * src->stride;
    ff__pil_box_pass(&b, in, 3, ra, 3, w, 3, acc);
    ff__pil_box_pass(&b, ra, 3, rb, 3, w, 3, acc);
    ff__pil_box_pass(&b, rb, 3, t1 + (size_t)y * row, 3, w, 3, acc);
  }
  passes_y(&b, t1, row, w, h, t2, t1, dst, acc); /* t1 -> t2 -> t1 -> dst */
  return FF_OK;
}
