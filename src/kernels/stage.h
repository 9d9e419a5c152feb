/* stage.h — the device executor's work, as the kernels see it.
 *
 * The host lowers each sample's plan to a list of stages (exec/dev_batch.c).
 * A stage is one data-parallel pass over one sample: every element (usually
 * an output pixel) is computed by ff__dstage_elem from the stage's record
 * alone, independently of the others (histograms and sums accumulate with
 * integer atomics, so their order does not matter). The stage records of a
 * microbatch form a table [sample][stage index]; one launch per stage index
 * covers every sample, each reading its own record (a sample whose plan is
 * shorter has FF__DS_NONE there). A CUDA thread computes one element; the
 * emulator's launch is a loop calling the same function for every element —
 * so the emulator checks the device arithmetic, which is the CPU ops' own
 * (kernels/color.h, affine.h, resize.h, mix.h).
 *
 * Every stage reads its source and writes a distinct destination: nothing
 * runs in place, so AugMix's kept image stays intact without a copy. The
 * one exception is the batch stage (FF__DS_BATCH_MIX) on the assembled
 * float32 batch: each of its threads reads every element it writes (an
 * image's and its partners') before writing any, and no two threads touch
 * the same element.
 * Addresses are device addresses as integers (the table is built on the
 * host and uploaded as bytes); images are HWC RGB uint8. */
#ifndef FF_KERNELS_STAGE_H
#define FF_KERNELS_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/affine.h"
#include "kernels/color.h"
#include "kernels/hd.h"
#include "kernels/hue.h"
#include "kernels/mix.h"
#include "kernels/out.h"
#include "kernels/pil.h"
#include "kernels/pil_blur.h"
#include "kernels/pixel.h"
#include "kernels/resize.h"
#include "kernels/aug.h"
#include "kernels/batch_mix.h"

typedef enum ff__dstage_kind {
  FF__DS_NONE,      /* nothing for this sample at this index */
  FF__DS_CROP,      /* dst = box at (p.crop.x, p.crop.y) of src, zeros outside */
  FF__DS_FLIP,      /* p.flip.horizontal ? columns : rows reversed */
  FF__DS_RESIZE_H,  /* a (float, src.height x dst.width x 3; uint8 with p.resize.precision) = horizontal
                       taps (b) over src rows */
  FF__DS_RESIZE_V,  /* dst = round(vertical taps (b) over a's rows) (fixed point with p.resize.precision) */
  FF__DS_AFFINE,    /* dst = warp of src (p.affine) */
  FF__DS_TRANSLATE, /* dst = src shifted by (p.affine.tx, ty) whole pixels, fill outside */
  FF__DS_COLOR,     /* dst = blend(src, gray(src), p.blend) */
  FF__DS_SHARPNESS, /* dst = blend(src, smoothed(src), p.blend) */
  FF__DS_GRAY_SUM,  /* *(uint64 *)a += sum of gray(src) (p.blend.v2: v2's gray) */
  FF__DS_CONTRAST,  /* dst = blend(src, mean gray (from a), p.blend) */
  FF__DS_HISTOGRAM, /* a (uint32 [3][256]) += per-channel counts of src */
  FF__DS_LUT_BUILD, /* element c: tables p.lut.luts[c] of the run b (ff__aug[p.lut.n]), histogram a,
                       scratch p.lut.scratch */
  FF__DS_LUT_APPLY, /* dst = per-channel tables a (uint8 [3][256]) of src */
  FF__DS_MIX_SCALE, /* a (float, packed) = p.mix.weight * src */
  FF__DS_MIX_ADD,   /* a += p.mix.weight * src */
  FF__DS_MIX_TRUNC, /* dst = trunc(a) */
  FF__DS_BATCH_MIX, /* in place on the float32 NCHW batch at dst.addr (images of dst.width x dst.height,
                       count = 3 x width x height elements each): the Mixup/CutMix plans a (ff__mix_elem
                       [p.batch_mix.n]) of pair (p.batch_mix.i, its flipped partner), or of the whole
                       batch rolled by one (p.batch_mix.rolled), each element read before any write */
  FF__DS_OUT_U8,    /* dst (packed NHWC slot) = src */
  FF__DS_OUT_F32,   /* dst.addr (NCHW float slot) = tables a (float [3][256]) of src */
  FF__DS_OUT_FMT,   /* dst.addr (slot in the output format p.out) = element bits a (uint32 [3][256]) of src */
  FF__DS_PIL_WARP,      /* dst = Pillow's affine warp of src (p.pil_warp) */
  FF__DS_PIL_COLOR,     /* dst = Image.blend(luma(src), src, p.pil_alpha) */
  FF__DS_PIL_SHARPNESS, /* dst = Image.blend(SMOOTH(src), src, p.pil_alpha) */
  FF__DS_PIL_LUMA_SUM,  /* *(uint64 *)a += luma of src */
  FF__DS_PIL_LUT_BUILD, /* element c: table c (uint8 [3][256] at p.pil_lut.luts) of op b (ff__pil) from
                           histogram a (uint32 [3][256]) and the luma sum p.pil_lut.sum of src */
  FF__DS_PIL_BLEND,     /* dst = Image.blend(src, the packed image at a, p.pil_alpha) */
  FF__DS_PIL_HUE,       /* dst = adjust_hue(src) by the shift byte p.pil_hue */
  FF__DS_PIL_BOX_H,     /* element (row y, channel c) = y * 3 + c: one pass of GaussianBlur's box p.pil_box
                           along the row (kernels/pil_blur.h), src into dst */
  FF__DS_PIL_BOX_V,     /* element (column x, channel c) = x * 3 + c: the same down the column */
  FF__DS_HUE,       /* dst = adjust_hue(src, p.mix.weight) (kernels/hue.h) */
  FF__DS_ERASE,     /* the src.width x src.height box at (p.crop.x, p.crop.y) of the NCHW float slot
                       dst.addr (dst.width x dst.height) = the floats at a: [3] (p.crop.per_value 0)
                       or [3][box height][box width] (1) */
} ff__dstage_kind;
#define FF__DS_KINDS (FF__DS_ERASE + 1) /* the number of kinds: the last one + 1 */

/* An RGB uint8 image in device memory. */
typedef struct ff__dimg {
  uint64_t addr;
  int32_t width, height;
  uint64_t stride; /* bytes per row */
} ff__dimg;

typedef struct ff__dstage {
  int32_t kind;   /* ff__dstage_kind */
  uint32_t count; /* elements of this stage */
  ff__dimg src, dst;
  uint64_t a, b; /* further buffers, by kind */
  union {
    struct {
      int32_t x, y, per_value;
    } crop;
    struct {
      int32_t horizontal;
    } flip;
    struct {
      int32_t max_taps, rule, precision; /* ff__resize_axis's */
    } resize;
    struct {
      ff__affine_grid grid;
      float fill[3];
      uint8_t fill_u8[3];
      int32_t bilinear, has_fill, tx, ty, v2;
    } affine;
    ff__blend_w blend;
    struct {
      uint64_t luts, scratch;
      int32_t n;
    } lut; /* scratch: per channel 256 uint64 + 256 uint8 */
    struct {
      float weight;
    } mix;
    struct {
      int32_t n, i, rolled;
    } batch_mix;
    struct {
      int32_t elem_bytes, planar;
    } out;
    ff__pil_warp pil_warp;
    ff__pil_box pil_box;
    float pil_alpha;
    uint8_t pil_hue;
    struct {
      uint64_t luts, sum;
    } pil_lut;
  } p;
} ff__dstage;

#define FF__DPTR(type, addr) ((type *)(uintptr_t)(addr))

FF_HD static inline void ff__datomic_add_u32(uint32_t *p, uint32_t v) {
#ifdef __CUDA_ARCH__
  atomicAdd((unsigned int *)p, (unsigned int)v);
#else /* the emulator runs a launch on one thread */
  *p += v;
#endif
}

FF_HD static inline void ff__datomic_add_u64(uint64_t *p, uint64_t v) {
#ifdef __CUDA_ARCH__
  atomicAdd((unsigned long long *)p, (unsigned long long)v);
#else
  *p += v;
#endif
}

FF_HD static inline uint8_t *ff__dimg_px(const ff__dimg *m, int y, int x) {
  return FF__DPTR(uint8_t, m->addr) + (size_t)y * m->stride + (size_t)x * 3;
}

/* Sharpness at (y, x) of a w x h image (spec 2.10): border pixels are
 * blended with themselves, inner ones with the 3x3 smoothing (ones, 5 at
 * the centre, over 13) — ops/color.c's loop, pixel by pixel. */
FF_HD static inline void ff__dsharp_px(const ff__dimg *m, int y, int x, ff__blend_w w, uint8_t out[3]) {
  const uint8_t *mid = ff__dimg_px(m, y, x);
  if (y == 0 || x == 0 || y == m->height - 1 || x == m->width - 1) {
    for (int c = 0; c < 3; c++)
      out[c] = ff__sharp_sem_u8(w, mid[c], mid[c], 1);
    return;
  }
  const uint8_t *up = mid - m->stride, *down = mid + m->stride;
  for (int c = 0; c < 3; c++) {
    int s = up[c - 3] + up[c] + up[c + 3] + mid[c - 3] + 5 * mid[c] + mid[c + 3] + down[c - 3] + down[c] +
            down[c + 3];
    out[c] = ff__sharp_sem_u8(w, mid[c], ff__sharp_smooth_u8(s), 0);
  }
}

/* The value element e of a sum stage adds to its total: FF__DS_GRAY_SUM's
 * gray (v1 or v2, as p.blend.v2 says), FF__DS_PIL_LUMA_SUM's luma. The one
 * definition the per-element path, the CUDA block sums and the emulator's
 * imitation of them share (kernels/stage_block.h). */
FF_HD static inline uint64_t ff__dstage_sum_term(const ff__dstage *st, int kind, uint32_t e) {
  uint32_t w = st->src.width > 0 ? (uint32_t)st->src.width : 1;
  const uint8_t *i = ff__dimg_px(&st->src, (int)(e / w), (int)(e % w));
  return kind == FF__DS_PIL_LUMA_SUM ? ff__pil_luma(i) : ff__gray_sem_u8(st->p.blend.v2, i[0], i[1], i[2]);
}

/* Element e of stage st, whose kind is `kind` (st->kind: a caller that
 * knows it at compile time, as the CUDA kernel per kind does, lets the
 * compiler keep only that case). */
FF_HD static inline void ff__dstage_elem_as(const ff__dstage *st, int kind, uint32_t e) {
  const ff__dimg *src = &st->src, *dst = &st->dst;
  int dw = dst->width > 0 ? dst->width : 1;
  int y = (int)(e / (uint32_t)dw), x = (int)(e % (uint32_t)dw);    /* e as a pixel of dst */
  int sx = (int)(e % (uint32_t)(src->width > 0 ? src->width : 1)); /* e as a pixel of src */
  int sy = (int)(e / (uint32_t)(src->width > 0 ? src->width : 1));
  switch ((ff__dstage_kind)kind) {
  case FF__DS_NONE: break;
  case FF__DS_CROP: {
    int cx = x + st->p.crop.x, cy = y + st->p.crop.y;
    int inside = (unsigned)cx < (unsigned)src->width && (unsigned)cy < (unsigned)src->height;
    uint8_t *o = ff__dimg_px(dst, y, x);
    const uint8_t *i = inside ? ff__dimg_px(src, cy, cx) : NULL;
    for (int c = 0; c < 3; c++)
      o[c] = i ? i[c] : 0;
    break;
  }
  case FF__DS_FLIP: {
    const uint8_t *i = st->p.flip.horizontal ? ff__dimg_px(src, y, src->width - 1 - x)
                                             : ff__dimg_px(src, src->height - 1 - y, x);
    uint8_t *o = ff__dimg_px(dst, y, x);
    o[0] = i[0], o[1] = i[1], o[2] = i[2];
    break;
  }
  case FF__DS_RESIZE_H: { /* e: (input row, output column) */
    ff__resize_axis ax;
    ax.max_taps = st->p.resize.max_taps;
    ff__resize_axis_place(&ax, FF__DPTR(void, st->b), dst->width);
    const int *idx = ax.idx + (size_t)x * ax.max_taps;
    const float *w = ax.w + (size_t)x * ax.max_taps;
    const uint8_t *row = ff__dimg_px(src, y, 0);
    int n = ax.count[x], p = st->p.resize.precision, plain = ff__resize_plain_taps(st->p.resize.rule, n);
    size_t at = ((size_t)y * dst->width + x) * 3;
    for (int c = 0; c < 3; c++)
      if (p) FF__DPTR(uint8_t, st->a)[at + c] = ff__resize_taps_fixed(row + c, 3, idx, w, n, p);
      else FF__DPTR(float, st->a)[at + c] = ff__resize_taps_sum_u8(row + c, 3, idx, w, n, plain);
    break;
  }
  case FF__DS_RESIZE_V: {
    ff__resize_axis ay;
    ay.max_taps = st->p.resize.max_taps;
    ff__resize_axis_place(&ay, FF__DPTR(void, st->b), dst->height);
    const int *idx = ay.idx + (size_t)y * ay.max_taps;
    const float *w = ay.w + (size_t)y * ay.max_taps;
    size_t row_elems = (size_t)dst->width * 3;
    int n = ay.count[y], p = st->p.resize.precision, plain = ff__resize_plain_taps(st->p.resize.rule, n);
    uint8_t *o = ff__dimg_px(dst, y, x);
    for (int c = 0; c < 3; c++)
      o[c] = p ? ff__resize_taps_fixed(FF__DPTR(const uint8_t, st->a) + (size_t)x * 3 + c, row_elems, idx, w, n, p)
               : ff__round_u8(ff__resize_taps_sum(FF__DPTR(const float, st->a) + (size_t)x * 3 + c, row_elems, idx, w,
                                                  n, plain));
    break;
  }
  case FF__DS_AFFINE: {
    float ix, iy;
    ff__affine_map(&st->p.affine.grid, y, x, &ix, &iy);
    const uint8_t *base = FF__DPTR(const uint8_t, src->addr);
    uint8_t *o = ff__dimg_px(dst, y, x);
    if (st->p.affine.bilinear) {
      ff__affine_taps t = ff__affine_taps_of(ix, iy, src->width, src->height);
      ff__affine_bilinear(base, src->stride, src->width, src->height, &t,
                          st->p.affine.has_fill ? st->p.affine.fill : NULL, st->p.affine.v2, o);
    } else {
      ff__affine_nearest(base, src->stride, src->width, src->height, ix, iy, st->p.affine.fill_u8, o);
    }
    break;
  }
  case FF__DS_TRANSLATE: {
    int cx = x - st->p.affine.tx, cy = y - st->p.affine.ty;
    int inside = (unsigned)cx < (unsigned)src->width && (unsigned)cy < (unsigned)src->height;
    const uint8_t *i = inside ? ff__dimg_px(src, cy, cx) : st->p.affine.fill_u8;
    uint8_t *o = ff__dimg_px(dst, y, x);
    o[0] = i[0], o[1] = i[1], o[2] = i[2];
    break;
  }
  case FF__DS_COLOR: {
    const uint8_t *i = ff__dimg_px(src, y, x);
    uint8_t *o = ff__dimg_px(dst, y, x);
    float g = (float)ff__gray_sem_u8(st->p.blend.v2, i[0], i[1], i[2]);
    for (int c = 0; c < 3; c++)
      o[c] = ff__blend_sem_u8(st->p.blend, (float)i[c], g);
    break;
  }
  case FF__DS_SHARPNESS: ff__dsharp_px(src, y, x, st->p.blend, ff__dimg_px(dst, y, x)); break;
  case FF__DS_HUE: ff__hue_u8(ff__dimg_px(src, y, x), st->p.mix.weight, ff__dimg_px(dst, y, x)); break;
  case FF__DS_GRAY_SUM:
  case FF__DS_PIL_LUMA_SUM: ff__datomic_add_u64(FF__DPTR(uint64_t, st->a), ff__dstage_sum_term(st, kind, e)); break;
  case FF__DS_CONTRAST: {
    float mean =
        ff__contrast_mean(*FF__DPTR(const uint64_t, st->a), (uint64_t)src->width * (uint64_t)src->height);
    const uint8_t *i = ff__dimg_px(src, y, x);
    uint8_t *o = ff__dimg_px(dst, y, x);
    for (int c = 0; c < 3; c++)
      o[c] = ff__blend_sem_u8(st->p.blend, (float)i[c], mean);
    break;
  }
  case FF__DS_HISTOGRAM: {
    const uint8_t *i = ff__dimg_px(src, sy, sx);
    uint32_t *h = FF__DPTR(uint32_t, st->a);
    for (int c = 0; c < 3; c++)
      ff__datomic_add_u32(h + c * 256 + i[c], 1);
    break;
  }
  case FF__DS_LUT_BUILD: {
    uint64_t *now = FF__DPTR(uint64_t, st->p.lut.scratch) + (size_t)e * (256 + 32);
    ff__lut_run_channel(FF__DPTR(const ff__aug, st->b), st->p.lut.n,
                        FF__DPTR(const uint32_t, st->a) + e * 256,
                        FF__DPTR(uint8_t, st->p.lut.luts) + e * 256, now, (uint8_t *)(now + 256));
    break;
  }
  case FF__DS_LUT_APPLY: {
    const uint8_t *t = FF__DPTR(const uint8_t, st->a);
    const uint8_t *i = ff__dimg_px(src, y, x);
    uint8_t *o = ff__dimg_px(dst, y, x);
    o[0] = t[i[0]], o[1] = t[256 + i[1]], o[2] = t[512 + i[2]];
    break;
  }
  case FF__DS_MIX_SCALE:
  case FF__DS_MIX_ADD: {
    const uint8_t *i = ff__dimg_px(src, sy, sx);
    float *m = FF__DPTR(float, st->a) + (size_t)e * 3;
    for (int c = 0; c < 3; c++)
      m[c] = kind == FF__DS_MIX_SCALE ? ff__mix_scale(st->p.mix.weight, i[c])
                                          : ff__mix_add(m[c], st->p.mix.weight, i[c]);
    break;
  }
  case FF__DS_MIX_TRUNC: {
    const float *m = FF__DPTR(const float, st->a) + (size_t)e * 3;
    uint8_t *o = ff__dimg_px(dst, y, x);
    for (int c = 0; c < 3; c++)
      o[c] = ff__mix_trunc_u8(m[c]);
    break;
  }
  case FF__DS_BATCH_MIX: { /* timm pairs i, n-1-i (disjoint); torchvision's chain i <- i-1, from the end */
    const ff__mix_elem *m = FF__DPTR(const ff__mix_elem, st->a);
    float *img = FF__DPTR(float, dst->addr) + e;
    size_t step = st->count;
    int n = st->p.batch_mix.n, plane = dst->width * dst->height;
    if (st->p.batch_mix.rolled) {
      float last = img[(size_t)(n - 1) * step];
      for (int i = n - 1; i >= 1; i--)
        img[i * step] = ff__batch_mix_value(&m[i], img[i * step], img[(i - 1) * step], dst->width, plane, e);
      img[0] = ff__batch_mix_value(&m[0], img[0], last, dst->width, plane, e);
      break;
    }
    int i = st->p.batch_mix.i, j = n - 1 - i;
    float xi = img[i * step], xj = img[j * step];
    img[i * step] = ff__batch_mix_value(&m[i], xi, xj, dst->width, plane, e);
    if (j != i) img[j * step] = ff__batch_mix_value(&m[j], xj, xi, dst->width, plane, e);
    break;
  }
  case FF__DS_OUT_U8: {
    const uint8_t *i = ff__dimg_px(src, y, x);
    uint8_t *o = FF__DPTR(uint8_t, dst->addr) + (size_t)e * 3;
    o[0] = i[0], o[1] = i[1], o[2] = i[2];
    break;
  }
  case FF__DS_OUT_FMT:
    ff__out_store(FF__DPTR(const uint32_t, st->a), st->p.out.elem_bytes, st->p.out.planar,
                  (size_t)dst->width * dst->height, e, ff__dimg_px(src, y, x), FF__DPTR(void, dst->addr));
    break;
  case FF__DS_PIL_WARP:
    ff__pil_warp_px_as(&st->p.pil_warp, st->p.pil_warp.mode, 0, FF__DPTR(const uint8_t, src->addr), src->width,
                       src->height, (long)src->stride, x, y, ff__dimg_px(dst, y, x));
    break;
  case FF__DS_PIL_COLOR: {
    const uint8_t *i = ff__dimg_px(src, y, x);
    uint8_t *o = ff__dimg_px(dst, y, x), l = ff__pil_luma(i);
    for (int c = 0; c < 3; c++)
      o[c] = ff__pil_blend(l, i[c], st->p.pil_alpha);
    break;
  }
  case FF__DS_PIL_SHARPNESS: { /* ops/pil.c's loop, pixel by pixel: the border is copied */
    const uint8_t *i = ff__dimg_px(src, y, x);
    uint8_t *o = ff__dimg_px(dst, y, x);
    int border = y == 0 || x == 0 || y == src->height - 1 || x == src->width - 1;
    for (int c = 0; c < 3; c++)
      o[c] = border ? i[c] : ff__pil_blend(ff__pil_smooth(i + c, (long)src->stride), i[c], st->p.pil_alpha);
    break;
  }
  case FF__DS_PIL_HUE: ff__pil_hue_px(ff__dimg_px(src, y, x), st->p.pil_hue, ff__dimg_px(dst, y, x)); break;
  case FF__DS_PIL_BOX_H:
  case FF__DS_PIL_BOX_V: { /* one line of one channel per element: a thread walks its line */
    uint32_t acc, line = e / 3, c = e % 3;
    if (kind == FF__DS_PIL_BOX_H)
      ff__pil_box_pass(&st->p.pil_box, ff__dimg_px(src, (int)line, 0) + c, 3, ff__dimg_px(dst, (int)line, 0) + c, 3,
                       src->width, 1, &acc);
    else
      ff__pil_box_pass(&st->p.pil_box, ff__dimg_px(src, 0, (int)line) + c, (long)src->stride,
                       ff__dimg_px(dst, 0, (int)line) + c, (long)dst->stride, src->height, 1, &acc);
    break;
  }
  case FF__DS_PIL_LUT_BUILD: {
    const ff__pil *op = FF__DPTR(const ff__pil, st->b);
    int mean = ff__pil_mean_of(*FF__DPTR(const uint64_t, st->p.pil_lut.sum), (uint64_t)src->width * src->height);
    ff__pil_table(op, FF__DPTR(const uint32_t, st->a) + e * 256, mean, FF__DPTR(uint8_t, st->p.pil_lut.luts) + e * 256);
    break;
  }
  case FF__DS_PIL_BLEND: {
    const uint8_t *i = ff__dimg_px(src, y, x), *m = FF__DPTR(const uint8_t, st->a) + (size_t)e * 3;
    uint8_t *o = ff__dimg_px(dst, y, x);
    for (int c = 0; c < 3; c++)
      o[c] = ff__pil_blend(i[c], m[c], st->p.pil_alpha);
    break;
  }
  case FF__DS_ERASE: {
    const float *v = FF__DPTR(const float, st->a);
    size_t plane = (size_t)dst->width * dst->height, box = (size_t)src->width * src->height;
    float *o = FF__DPTR(float, dst->addr) + (size_t)(sy + st->p.crop.y) * dst->width + sx + st->p.crop.x;
    for (int c = 0; c < 3; c++)
      o[c * plane] = st->p.crop.per_value ? v[c * box + e] : v[c];
    break;
  }
  case FF__DS_OUT_F32: {
    const float *t = FF__DPTR(const float, st->a);
    const uint8_t *i = ff__dimg_px(src, y, x);
    float *o = FF__DPTR(float, dst->addr) + e;
    size_t plane = (size_t)dst->width * dst->height;
    o[0] = t[i[0]], o[plane] = t[256 + i[1]], o[2 * plane] = t[512 + i[2]];
    break;
  }
  }
}

/* Element e of stage st (of its own kind). */
FF_HD static inline void ff__dstage_elem(const ff__dstage *st, uint32_t e) { ff__dstage_elem_as(st, st->kind, e); }

#endif
