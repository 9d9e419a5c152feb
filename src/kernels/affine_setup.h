/* affine_setup.h — how one geometric op of the policies (ShearX/Y,
 * TranslateX/Y, Rotate) runs on a W x H image: torchvision's inverse affine
 * matrix, built in double in Python's order (the atan/degrees/radians/tan
 * round trip of the shears included; spec 1.3, 2.2-2.6), reduced to the
 * float32 grid of kernels/affine.h — or, for a translation by whole pixels
 * whose warp provably lands on the integer shift (a shear or rotation by 0
 * included), to that shift.
 *
 * Host only (transcendental functions are evaluated when planning, never on
 * the device): the CPU op (ops/affine.c) and the device executor both call
 * ff__affine_setup_make, so both run the same warp. */
#ifndef FF_KERNELS_AFFINE_SETUP_H
#define FF_KERNELS_AFFINE_SETUP_H

#include <math.h>

#include "kernels/affine.h"
#include "kernels/aug.h"

/* radians/degrees as Python's math module computes them. */
static inline double ff__affine_radians(double deg) { return deg * (3.14159265358979323846 / 180.0); }
static inline double ff__affine_degrees(double rad) { return rad * (180.0 / 3.14159265358979323846); }

/* torchvision's _get_inverse_affine_matrix: output point → input point, in
 * the frame centred on the image; (cx, cy) is the centre in that frame,
 * angle and shears in degrees. Same operations in the same order as the
 * Python, so the same doubles. */
static inline void ff__affine_inverse(double cx, double cy, double angle, double tx, double ty, double scale,
                                      double shear_x, double shear_y, double m[6]) {
  double rot = ff__affine_radians(angle), sx = ff__affine_radians(shear_x), sy = ff__affine_radians(shear_y);
  double a = cos(rot - sy) / cos(sy);
  double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
  double c = sin(rot - sy) / cos(sy);
  double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
  m[0] = d / scale, m[1] = -b / scale, m[2] = 0.0 / scale;
  m[3] = -c / scale, m[4] = a / scale, m[5] = 0.0 / scale;
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
}

/* Python's int() of a float: toward zero; |arg| beyond the image moves
 * everything out either way, so it is clamped first (no overflow; NaN → 0). */
static inline int ff__affine_shift(double arg, int size) {
  double lim = (double)size + 2.0;
  if (!(arg == arg)) return 0;
  if (arg > lim) arg = lim;
  if (arg < -lim) arg = -lim;
  return (int)arg;
}

/* The matrix of a policy op (spec 1.3, specialisations). */
static inline void ff__affine_op_matrix(const ff__aug *a, int w, int h, double m[6]) {
  double arg = a->arg;
  switch (a->op) {
  case FF__AUG_SHEAR_X: /* centre [0, 0] = the top-left corner */
    ff__affine_inverse(0.0 - w * 0.5, 0.0 - h * 0.5, 0.0, 0.0, 0.0, 1.0, ff__affine_degrees(atan(arg)), 0.0,
                       m);
    break;
  case FF__AUG_SHEAR_Y:
    ff__affine_inverse(0.0 - w * 0.5, 0.0 - h * 0.5, 0.0, 0.0, 0.0, 1.0, 0.0, ff__affine_degrees(atan(arg)),
                       m);
    break;
  case FF__AUG_TRANSLATE_X:
    ff__affine_inverse(0.0, 0.0, 0.0, (double)ff__affine_shift(arg, w), 0.0, 1.0, 0.0, 0.0, m);
    break;
  case FF__AUG_TRANSLATE_Y:
    ff__affine_inverse(0.0, 0.0, 0.0, 0.0, (double)ff__affine_shift(arg, h), 1.0, 0.0, 0.0, m);
    break;
  case FF__AUG_ROTATE: /* F.rotate hands the builder -angle */
    ff__affine_inverse(0.0, 0.0, -arg, 0.0, 0.0, 1.0, 0.0, 0.0, m);
    break;
  default: /* identity */ ff__affine_inverse(0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, m); break;
  }
}

/* Whether a translation by whole pixels as row copies gives torchvision's
 * bits: the grid lands within 5e-4 px of the integer shift for sizes up to
 * 4096 (checked exhaustively over every size and shift), which cannot move
 * a nearest tap nor, for bilinear, a rounded value — except for a fill
 * colour close to k + 0.5, which takes the general path. */
static inline int ff__affine_translate_is_exact(const ff__aug *a, int w, int h) {
  int side = w > h ? w : h;
  if (!a->bilinear) return side <= (1 << 20);
  if (!a->has_fill) return side <= 4096;
  if (side > 2048) return 0;
  for (int c = 0; c < 3; c++) {
    float f = a->fill[c];
    if (!(f >= 0.0f && f <= 255.0f)) return 0;
    if (fabsf(f - floorf(f) - 0.5f) < 0.2f) return 0;
  }
  return 1;
}

/* Whether op a amounts to a shift by whole pixels on a w x h image: a
 * translation whose warp provably lands on the integer shift, or a shear or
 * rotation by 0, which builds the same matrix as a translation by 0 (up to
 * the signs of zeros, which no grid value keeps), so the same proof makes it
 * a copy (AugMix draws magnitude 0 for a third of them). Sets *tx, *ty
 * (content moves right/down) when it does. No matrix is built. */
static inline int ff__affine_as_shift(const ff__aug *a, int w, int h, int *tx, int *ty) {
  int translate = a->op == FF__AUG_TRANSLATE_X || a->op == FF__AUG_TRANSLATE_Y;
  if (!(translate || a->arg == 0.0) || !ff__affine_translate_is_exact(a, w, h)) return 0;
  *tx = a->op == FF__AUG_TRANSLATE_X ? ff__affine_shift(a->arg, w) : 0;
  *ty = a->op == FF__AUG_TRANSLATE_Y ? ff__affine_shift(a->arg, h) : 0;
  return 1;
}

/* Whether torch's affine grid on this host fuses the y term (kernels/affine.h)
 * for an image of more than 66 pixels (below, ff__affine_torch_fused_at):
 * torch's bmm runs on MKL, which takes its AVX-512 branch on an Intel CPU
 * with AVX-512 (F, CD, BW, DQ, VL) unless MKL_ENABLE_INSTRUCTIONS caps it
 * below AVX512 or MKL_CBWR names a branch that does not fuse (COMPATIBLE,
 * SSE*, AVX, AVX2 without STRICT: MKL_CBWR=AVX2 pins torch's grid and ours
 * to the other form on every machine); elsewhere its other branches, which
 * do not fuse (AMD CPUs with AVX-512 have not been checked). Read once
 * (kernels/affine_setup.c). */
int ff__affine_torch_fused(void);

/* ff__affine_torch_fused for a w x h image: torch computes a product of
 * fewer than 400 multiply-adds (3 x 2 per pixel) in its own loop, which
 * does not fuse, not in MKL. */
static inline int ff__affine_torch_fused_at(int w, int h) {
  return 6.0 * w * h >= 400 && ff__affine_torch_fused();
}

/* How op a runs on a w x h image. */
typedef struct ff__affine_setup {
  int translate; /* 1: shift by (tx, ty) whole pixels (content moves right/down) */
  int tx, ty;
  ff__affine_grid grid; /* translate 0: the warp's grid */
  uint8_t fill_u8[3];   /* what a pixel mapped outside becomes (nearest, shift) */
} ff__affine_setup;

static inline void ff__affine_setup_make(const ff__aug *a, int w, int h, ff__affine_setup *s) {
  for (int c = 0; c < 3; c++)
    s->fill_u8[c] = a->has_fill ? ff__affine_fill_u8(a->fill[c]) : 0;
  s->tx = s->ty = 0;
  s->translate = ff__affine_as_shift(a, w, h, &s->tx, &s->ty);
  double m[6];
  ff__affine_op_matrix(a, w, h, m);
  ff__affine_grid_make(m, w, h, ff__affine_torch_fused_at(w, h), &s->grid);
}

#endif
