/* affine.c — the geometric ops of the automatic policies (ShearX/Y,
 * TranslateX/Y, Rotate) on interleaved RGB uint8 images, bit-exact with
 * torchvision 0.14's tensor path (spec 1.3, 2.2-2.6).
 *
 * Each op becomes torchvision's inverse affine matrix, built in double in
 * Python's order (the atan/degrees/radians/tan round trip of the shears
 * included), then a float32 sampling grid and nearest or bilinear sampling
 * whose per-pixel arithmetic lives in kernels/affine.h (shared with the
 * device kernels). The CPU loop works row by row in chunks: a first pass
 * maps a chunk of output pixels to input positions and tap weights (plain
 * float arithmetic the compiler vectorises), a second pass gathers the taps;
 * pixels whose taps are all inside take a short path, border pixels the
 * general one. The grid cannot be stepped incrementally — f32(x*a0) is not
 * f32((x-1)*a0) + a0 — so every coordinate is computed from its formula.
 *
 * Translations by whole pixels are row copies: the grid lands within
 * 5e-4 px of the integer shift for sizes up to 4096 (checked exhaustively
 * over every size and shift), which cannot move a nearest tap nor, for
 * bilinear, a rounded value — except for a fill colour close to k + 0.5,
 * which takes the general path. */
#include <math.h>
#include <string.h>

#include "kernels/affine.h"
#include "ops/augment.h"

#define CHUNK 256 /* output pixels mapped per pass */

/* ------------------------------------------------------------ the matrix */

static const double pi = 3.14159265358979323846;

static double radians(double deg) { return deg * (pi / 180.0); }
static double degrees(double rad) { return rad * (180.0 / pi); }

/* torchvision's _get_inverse_affine_matrix: output point → input point, in
 * the frame centred on the image; (cx, cy) is the centre in that frame,
 * angle and shears in degrees. Same operations in the same order as the
 * Python, so the same doubles. */
static void inverse_affine(double cx, double cy, double angle, double tx, double ty, double scale,
                           double shear_x, double shear_y, double m[6]) {
  double rot = radians(angle), sx = radians(shear_x), sy = radians(shear_y);
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
static int shift_of(double arg, int size) {
  double lim = (double)size + 2.0;
  if (!(arg == arg)) return 0;
  if (arg > lim) arg = lim;
  if (arg < -lim) arg = -lim;
  return (int)arg;
}

/* The matrix of a policy op (spec 1.3, specialisations). */
static void op_matrix(const ff__aug *a, int w, int h, double m[6]) {
  double arg = a->arg;
  switch (a->op) {
  case FF__AUG_SHEAR_X: /* centre [0, 0] = the top-left corner */
    inverse_affine(0.0 - w * 0.5, 0.0 - h * 0.5, 0.0, 0.0, 0.0, 1.0, degrees(atan(arg)), 0.0, m);
    break;
  case FF__AUG_SHEAR_Y:
    inverse_affine(0.0 - w * 0.5, 0.0 - h * 0.5, 0.0, 0.0, 0.0, 1.0, 0.0, degrees(atan(arg)), m);
    break;
  case FF__AUG_TRANSLATE_X:
    inverse_affine(0.0, 0.0, 0.0, (double)shift_of(arg, w), 0.0, 1.0, 0.0, 0.0, m);
    break;
  case FF__AUG_TRANSLATE_Y:
    inverse_affine(0.0, 0.0, 0.0, 0.0, (double)shift_of(arg, h), 1.0, 0.0, 0.0, m);
    break;
  case FF__AUG_ROTATE: /* F.rotate hands the builder -angle */
    inverse_affine(0.0, 0.0, -arg, 0.0, 0.0, 1.0, 0.0, 0.0, m);
    break;
  default: /* identity */
    inverse_affine(0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, m);
    break;
  }
}

/* ------------------------------------------------------------ translate */

/* Whether the row-copy translation gives torchvision's bits (see the top). */
static int translate_is_exact(const ff__aug *a, int w, int h) {
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

static void translate(const ff__image *src, ff__image *dst, int tx, int ty, const uint8_t fill[3]) {
  int w = src->width, h = src->height;
  size_t row_bytes = (size_t)w * 3;
  /* columns [j0, j1) of each output row come from input columns j - tx */
  int j0 = tx > 0 ? tx : 0, j1 = tx < 0 ? w + tx : w;
  if (j1 < j0) j1 = j0 = 0;
  uint8_t *fill_row = NULL; /* a finished all-fill output row, copied to the others */
  for (int i = 0; i < h; i++) {
    uint8_t *out = dst->data + (size_t)i * dst->stride;
    int si = i - ty;
    if (si < 0 || si >= h || j0 == j1) {
      if (fill_row) {
        memcpy(out, fill_row, row_bytes);
        continue;
      }
      for (int j = 0; j < w; j++) memcpy(out + (size_t)j * 3, fill, 3);
      fill_row = out;
      continue;
    }
    for (int j = 0; j < j0; j++) memcpy(out + (size_t)j * 3, fill, 3);
    memcpy(out + (size_t)j0 * 3, src->data + (size_t)si * src->stride + (size_t)(j0 - tx) * 3,
           (size_t)(j1 - j0) * 3);
    for (int j = j1; j < w; j++) memcpy(out + (size_t)j * 3, fill, 3);
  }
}

/* ------------------------------------------------------------ the warp */

/* Input positions of output pixels (i, j0 .. j0+n-1). */
static inline void map_chunk(const ff__affine_grid *g, int i, int j0, int n, float *ix, float *iy) {
  float y = ff__affine_centred(i, g->half_h);
  float ya = y * g->a1, yb = y * g->b1;
  for (int k = 0; k < n; k++) {
    float x = ff__affine_centred(j0 + k, g->half_w);
    ix[k] = ff__affine_coord(x * g->a0, ya, g->a2, g->half_w);
    iy[k] = ff__affine_coord(x * g->b0, yb, g->b2, g->half_h);
  }
}

FF_FMA_CLONES
static void warp_nearest(const ff__affine_grid *g, const ff__image *src, ff__image *dst,
                         const uint8_t fill[3]) {
  int w = src->width, h = src->height;
  float ix[CHUNK], iy[CHUNK];
  int u[CHUNK], v[CHUNK];
  for (int i = 0; i < h; i++) {
    uint8_t *out = dst->data + (size_t)i * dst->stride;
    for (int j0 = 0; j0 < w; j0 += CHUNK) {
      int n = w - j0 < CHUNK ? w - j0 : CHUNK;
      map_chunk(g, i, j0, n, ix, iy);
      for (int k = 0; k < n; k++) {
        u[k] = (int)rintf(ff__affine_clamp(ix[k], w));
        v[k] = (int)rintf(ff__affine_clamp(iy[k], h));
      }
      for (int k = 0; k < n; k++) {
        const uint8_t *p = (unsigned)u[k] < (unsigned)w && (unsigned)v[k] < (unsigned)h
                               ? src->data + (size_t)v[k] * src->stride + (size_t)u[k] * 3
                               : fill;
        uint8_t *o = out + (size_t)(j0 + k) * 3;
        o[0] = p[0], o[1] = p[1], o[2] = p[2];
      }
    }
  }
}

/* fill: NULL for black, else the three fill values. */
FF_FMA_CLONES
static void warp_bilinear(const ff__affine_grid *g, const ff__image *src, ff__image *dst,
                          const float *fill) {
  int w = src->width, h = src->height;
  size_t stride = src->stride;
  float ix[CHUNK], iy[CHUNK];
  ff__affine_taps t[CHUNK];
  for (int i = 0; i < h; i++) {
    uint8_t *out = dst->data + (size_t)i * dst->stride;
    for (int j0 = 0; j0 < w; j0 += CHUNK) {
      int n = w - j0 < CHUNK ? w - j0 : CHUNK;
      map_chunk(g, i, j0, n, ix, iy);
      for (int k = 0; k < n; k++) t[k] = ff__affine_taps_of(ix[k], iy[k], w, h);
      for (int k = 0; k < n; k++) {
        const ff__affine_taps *tk = &t[k];
        uint8_t *o = out + (size_t)(j0 + k) * 3;
        if ((unsigned)tk->x0 < (unsigned)(w - 1) && (unsigned)tk->y0 < (unsigned)(h - 1)) {
          /* all four taps inside */
          const uint8_t *p = src->data + (size_t)tk->y0 * stride + (size_t)tk->x0 * 3;
          const uint8_t *q = p + stride;
          float mask = fill ? ff__affine_blend4(1.0f, 1.0f, 1.0f, 1.0f, tk) : 1.0f;
          for (int c = 0; c < 3; c++) {
            float val = ff__affine_blend4((float)p[c], (float)p[c + 3], (float)q[c],
                                          (float)q[c + 3], tk);
            if (fill) val = ff__affine_fill_blend(val, mask, fill[c]);
            o[c] = ff__round_u8(val);
          }
        } else {
          ff__affine_bilinear(src->data, stride, w, h, tk, fill, o);
        }
      }
    }
  }
}

void ff__aug_affine(const ff__aug *a, const ff__image *src, ff__image *dst) {
  int w = src->width, h = src->height;
  if (w <= 0 || h <= 0) return;
  uint8_t fill_u8[3] = {0, 0, 0};
  if (a->has_fill)
    for (int c = 0; c < 3; c++) fill_u8[c] = ff__affine_fill_u8(a->fill[c]);

  if ((a->op == FF__AUG_TRANSLATE_X || a->op == FF__AUG_TRANSLATE_Y) &&
      translate_is_exact(a, w, h)) {
    int tx = a->op == FF__AUG_TRANSLATE_X ? shift_of(a->arg, w) : 0;
    int ty = a->op == FF__AUG_TRANSLATE_Y ? shift_of(a->arg, h) : 0;
    translate(src, dst, tx, ty, fill_u8);
    return;
  }

  double m[6];
  ff__affine_grid g;
  op_matrix(a, w, h, m);
  ff__affine_grid_make(m, w, h, &g);
  if (a->bilinear)
    warp_bilinear(&g, src, dst, a->has_fill ? a->fill : NULL);
  else
    warp_nearest(&g, src, dst, fill_u8);
}
