/* stage_block.h — the stages that run block-wide rather than a thread per
 * element, and the per-element and per-entry arithmetic those blocks share
 * with the per-element path (kernels/stage.h). The CUDA backend runs each
 * shape as a kernel of its own (exec/cuda.cu); the emulator imitates the
 * blocks one after another with the same functions (exec/emu.c), so a
 * fast path whose arithmetic strays from the CPU's shows on the emulator
 * too:
 *   FF__SHAPE_SUM        sum stages (gray, luma): each block of FF__DBLOCK
 *                        elements adds its terms (ff__dstage_sum_term) and
 *                        adds its total to the stage's once
 *   FF__SHAPE_HISTOGRAM  each block counts its elements' source pixels
 *                        (ff__dstage_src_px) in a histogram of its own and
 *                        adds the non-zero counts
 *   FF__SHAPE_LUT_BUILD  one block per sample builds its three tables, a
 *                        thread per table entry (ff__lut_block_entry)
 *   FF__SHAPE_ELEM       everything else: one thread per element
 * Sums and counts are integers, so the totals equal the per-element
 * path's whatever the order. */
#ifndef FF_KERNELS_STAGE_BLOCK_H
#define FF_KERNELS_STAGE_BLOCK_H

#include "kernels/stage.h"

#define FF__DBLOCK 256 /* threads per block; the table builder takes one per entry */

typedef enum ff__dshape { FF__SHAPE_ELEM, FF__SHAPE_SUM, FF__SHAPE_HISTOGRAM, FF__SHAPE_LUT_BUILD } ff__dshape;
#define FF__DSHAPES 4

/* How stages of `kind` run; block = 0 runs every kind per element (the
 * CUDA backend's FF_DEVICE_KERNELS=plain). */
FF_HD static inline ff__dshape ff__dstage_shape(int kind, int block) {
  if (!block) return FF__SHAPE_ELEM;
  switch (kind) {
  case FF__DS_GRAY_SUM:
  case FF__DS_PIL_LUMA_SUM: return FF__SHAPE_SUM;
  case FF__DS_HISTOGRAM: return FF__SHAPE_HISTOGRAM;
  case FF__DS_LUT_BUILD: return FF__SHAPE_LUT_BUILD;
  default: return FF__SHAPE_ELEM;
  }
}

/* Element e's pixel of the stage's source (the histogram counts source pixels). */
FF_HD static inline const uint8_t *ff__dstage_src_px(const ff__dstage *st, uint32_t e) {
  uint32_t w = st->src.width > 0 ? (uint32_t)st->src.width : 1;
  return ff__dimg_px(&st->src, (int)(e / w), (int)(e % w));
}

/* Entry v of op's table in the table builder, once the block knows, for
 * the histogram pushed through the tables so far, now[u] (pixels of value
 * u), scan[u] (of value <= u), the lowest and highest value present (lo,
 * hi; hi < 0: none) and the total: kernels/color.h's entries, as
 * ff__lut_run_channel computes them. */
FF_HD static inline uint8_t ff__lut_block_entry(const ff__aug *op, int v, const unsigned long long *now,
                                                const unsigned long long *scan, int lo, int hi,
                                                unsigned long long total) {
  if (!ff__lut_needs_histogram(op->op)) return ff__lut_value_at(op, v);
  if (op->op == FF__AUG_AUTOCONTRAST) return ff__autocontrast_at(v, lo, hi, op->v2);
  /* equalize: step = (pixels not at the maximum) / 255; 0 leaves the channel */
  unsigned long long step = hi < 0 ? 0 : (total - now[hi]) / 255;
  return !step ? (uint8_t)v : !v ? 0 : ff__equalize_at(scan[v - 1], step);
}

#endif
