/* affine.h — per-pixel arithmetic of torchvision's affine warp on uint8
 * tensors (F.affine / F.rotate → _gen_affine_grid → grid_sample with
 * align_corners=False), shared by the CPU op (ops/affine.c) and the device
 * kernels, so both give the same bits.
 *
 * The warp maps each OUTPUT pixel to an input position through a float32
 * grid (spec 1.3, steps 1-4):
 *   x = j + 0.5 - W/2, y = i + 0.5 - H/2                     (exact)
 *   gx = f32(f32(f32(x*a0) + f32(y*a1)) + a2)                (same for gy, b*)
 *   ix = fma(f32(gx + 1), W/2, -0.5)                         (input column)
 * The grid is torch's bmm of (x, y, 1) by the matrix, which MKL computes
 * in that order on its AVX2 branch but with the y term fused on its
 * AVX-512 branch, gx = f32(fma(y, a1, f32(x*a0)) + a2): the grid's `fused`
 * follows the branch torch's MKL takes on this host (ff__affine_torch_fused),
 * so that the warp gives the bits torchvision gives here, on the CPU and
 * on the device alike.
 * then samples it with "zeros" padding, nearest (round half to even) or
 * bilinear (weights and an fma chain in torch's order). With a fill colour
 * torchvision samples an extra all-ones channel with the same weights and
 * blends toward the fill by it. Each step is one float32 operation with its
 * own rounding except the explicit ff__fma_f32 calls (the library compiles
 * with -ffp-contract=off, CUDA with --fmad=false). */
#ifndef FF_KERNELS_AFFINE_H
#define FF_KERNELS_AFFINE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/hd.h"
#include "kernels/pixel.h"

/* The rescaled float32 matrix of one warp (spec 1.3 step 2) and the half
 * sizes f32(W/2), f32(H/2) of the image (input and output sizes are equal). */
typedef struct ff__affine_grid {
  float a0, a1, a2; /* f32(f32(m0..m2) / f32(W/2)) */
  float b0, b1, b2; /* f32(f32(m3..m5) / f32(H/2)) */
  float half_w, half_h;
  int fused; /* 1: the y term is fused, f32(fma(y, a1, f32(x*a0)) + a2) (MKL's AVX-512 branch) */
} ff__affine_grid;

/* Fills g from the double inverse matrix m (output point → input point in
 * the centred frame, spec 1.3) of a width x height image; fused as the
 * grid's field. */
FF_HD static inline void ff__affine_grid_make(const double m[6], int width, int height, int fused,
                                              ff__affine_grid *g) {
  float hw = (float)(0.5 * width), hh = (float)(0.5 * height);
  g->a0 = (float)m[0] / hw, g->a1 = (float)m[1] / hw, g->a2 = (float)m[2] / hw;
  g->b0 = (float)m[3] / hh, g->b1 = (float)m[4] / hh, g->b2 = (float)m[5] / hh;
  g->half_w = hw, g->half_h = hh;
  g->fused = fused;
}

/* Centred coordinate of pixel index k on an axis of half size `half`:
 * k + 0.5 - half, exact in float32 for any realistic size. */
FF_HD static inline float ff__affine_centred(int k, float half) { return ((float)k + 0.5f) - half; }

/* The y terms of one output row, as two factors each: step 3's sum is
 * fma(ya, sa, xa) for xa = f32(x*a0). Fused, they are y and a1; else
 * f32(y*a1) and 1, whose fma is the rounded sum f32(xa + f32(y*a1)). One
 * formula for both forms, so the callers (and their vector code) have no
 * branch per pixel. */
typedef struct ff__affine_row {
  float ya, sa, yb, sb;
} ff__affine_row;

FF_HD static inline ff__affine_row ff__affine_row_terms(const ff__affine_grid *g, int i) {
  float y = ff__affine_centred(i, g->half_h);
  ff__affine_row r = {y, g->a1, y, g->b1};
  if (!g->fused) r.ya = y * g->a1, r.sa = 1.0f, r.yb = y * g->b1, r.sb = 1.0f;
  return r;
}

/* One input coordinate from the product xa = f32(x*a0) of step 3 (callers
 * may precompute it per column), the row's factors (ff__affine_row_terms),
 * the offset a2 and the half size (step 4, torch's fused
 * un-normalisation). */
FF_HD static inline float ff__affine_coord(float xa, float ry, float rs, float off, float half) {
  float g = ff__fma_f32(ry, rs, xa) + off;
  return ff__fma_f32(g + 1.0f, half, -0.5f);
}

/* Input position (ix, iy) of output pixel (i, j). */
FF_HD static inline void ff__affine_map(const ff__affine_grid *g, int i, int j, float *ix, float *iy) {
  float x = ff__affine_centred(j, g->half_w);
  ff__affine_row r = ff__affine_row_terms(g, i);
  *ix = ff__affine_coord(x * g->a0, r.ya, r.sa, g->a2, g->half_w);
  *iy = ff__affine_coord(x * g->b0, r.yb, r.sb, g->b2, g->half_h);
}

/* Clamps a coordinate to [-2, size + 1] before it becomes an int: every
 * position beyond that range has all its taps outside the image either way
 * (so the result does not change), the int conversion cannot overflow, and
 * NaN goes to -2 (outside). */
FF_HD static inline float ff__affine_clamp(float v, int size) {
  float hi = (float)size + 1.0f;
  v = v > -2.0f ? v : -2.0f;
  return v < hi ? v : hi;
}

/* floor of a clamped coordinate (|v| far below 2^31) as an int, written so
 * that loops over it vectorise (floorf and float selects need
 * -fno-trapping-math for that); exact. */
FF_HD static inline int ff__affine_floor(float v) {
  int t = (int)v;
  return t - ((float)t > v);
}

/* The uint8 value of a fill channel as torchvision writes it for a pixel
 * mapped entirely outside: f32(fill) rounded half to even, saturated. */
FF_HD static inline uint8_t ff__affine_fill_u8(float fill) { return ff__round_u8(fill); }

/* Nearest: the pixel whose centre is closest (round half to even; torch's
 * round). Writes 3 channels of out from the interleaved RGB src (stride
 * bytes per row), or fill_u8 (the fill, or zeros) when mapped outside. */
FF_HD static inline void ff__affine_nearest(const uint8_t *src, size_t stride, int width, int height,
                                            float ix, float iy, const uint8_t fill_u8[3], uint8_t out[3]) {
  int u = (int)rintf(ff__affine_clamp(ix, width));
  int v = (int)rintf(ff__affine_clamp(iy, height));
  const uint8_t *p = (unsigned)u < (unsigned)width && (unsigned)v < (unsigned)height
                         ? src + (size_t)v * stride + (size_t)u * 3
                         : fill_u8;
  out[0] = p[0], out[1] = p[1], out[2] = p[2];
}

/* Bilinear weights and top-left tap of one position (torch's order). */
typedef struct ff__affine_taps {
  int x0, y0;
  float nw, ne, sw, se;
} ff__affine_taps;

FF_HD static inline ff__affine_taps ff__affine_taps_of(float ix, float iy, int width, int height) {
  ff__affine_taps t;
  ix = ff__affine_clamp(ix, width), iy = ff__affine_clamp(iy, height);
  t.x0 = ff__affine_floor(ix), t.y0 = ff__affine_floor(iy);
  float wx = ix - (float)t.x0, wy = iy - (float)t.y0;
  float ex = 1.0f - wx, sy = 1.0f - wy;
  t.nw = sy * ex, t.ne = sy * wx, t.sw = wy * ex, t.se = wy * wx;
  return t;
}

/* torch's accumulation of the four taps: the first product rounded, the
 * other three fused onto it. */
FF_HD static inline float ff__affine_blend4(float vnw, float vne, float vsw, float vse,
                                            const ff__affine_taps *t) {
  return ff__fma_f32(vse, t->se, ff__fma_f32(vsw, t->sw, ff__fma_f32(vne, t->ne, vnw * t->nw)));
}

/* Blends a sampled value toward the fill by the sampled mask, before
 * rounding: transforms v1 writes img * mask + (1 - mask) * fill_img,
 * transforms.v2 (v2 nonzero; its _apply_grid_transform) (img - fill) * mask
 * + fill, each operation rounded — which differs even where the mask is
 * 1 - 1 ulp inside the image. */
FF_HD static inline float ff__affine_fill_blend(float val, float mask, float fill, int v2) {
  if (v2) return (val - fill) * mask + fill;
  return val * mask + (1.0f - mask) * fill;
}

/* Bilinear with "zeros" padding: a tap outside the image contributes 0 (and
 * 0 to the mask). fill: NULL for black (no mask channel), else the three
 * fill values, blended in v2's way when v2. General form for any position; the CPU op uses it for the
 * pixels whose taps are not all inside. */
FF_HD static inline void ff__affine_bilinear(const uint8_t *src, size_t stride, int width, int height,
                                             const ff__affine_taps *t, const float *fill, int v2,
                                             uint8_t out[3]) {
  int x1 = t->x0 + 1, y1 = t->y0 + 1;
  int in_x0 = (unsigned)t->x0 < (unsigned)width, in_x1 = (unsigned)x1 < (unsigned)width;
  int in_y0 = (unsigned)t->y0 < (unsigned)height, in_y1 = (unsigned)y1 < (unsigned)height;
  int k_nw = in_y0 && in_x0, k_ne = in_y0 && in_x1, k_sw = in_y1 && in_x0, k_se = in_y1 && in_x1;
  const uint8_t *p_nw = k_nw ? src + (size_t)t->y0 * stride + (size_t)t->x0 * 3 : NULL;
  const uint8_t *p_ne = k_ne ? src + (size_t)t->y0 * stride + (size_t)x1 * 3 : NULL;
  const uint8_t *p_sw = k_sw ? src + (size_t)y1 * stride + (size_t)t->x0 * 3 : NULL;
  const uint8_t *p_se = k_se ? src + (size_t)y1 * stride + (size_t)x1 * 3 : NULL;
  float mask = 0.0f;
  if (fill) mask = ff__affine_blend4((float)k_nw, (float)k_ne, (float)k_sw, (float)k_se, t);
  for (int c = 0; c < 3; c++) {
    float val = ff__affine_blend4(p_nw ? (float)p_nw[c] : 0.0f, p_ne ? (float)p_ne[c] : 0.0f,
                                  p_sw ? (float)p_sw[c] : 0.0f, p_se ? (float)p_se[c] : 0.0f, t);
    if (fill) val = ff__affine_fill_blend(val, mask, fill[c], v2);
    out[c] = ff__round_u8(val);
  }
}

#endif
