/* augment.h — the single augmentation ops of the automatic policies
 * (RandAugment, TrivialAugmentWide, AutoAugment, AugMix) on interleaved RGB
 * uint8 images, with torchvision's uint8 tensor semantics
 * (torchvision.transforms.functional; formulas in the shared spec). */
#ifndef FF_OPS_AUGMENT_H
#define FF_OPS_AUGMENT_H

#include <stdint.h>

#include "core/error.h"
#include "core/image.h"
#include "kernels/aug.h"

/* Geometric ops (shear, translate, rotate): src → dst, same size, distinct
 * memory (dst->data allocated by the caller, dst->stride set). */
void ff__aug_affine(const ff__aug *a, const ff__image *src, ff__image *dst);

/* Ops whose output pixel depends only on the same pixel's own value in the
 * same channel — brightness, posterize, solarize, invert — and the ones that
 * compute such a table from the image's histogram: autocontrast, equalize. */
int ff__aug_is_lut(ff__aug_op op);

/* Runs n consecutive table ops (all ff__aug_is_lut) on src as one pass into
 * dst: one histogram per channel (of src), the tables composed (each
 * histogram op sees the histogram mapped through the tables before it), one
 * lookup pass from src to dst. Bit-identical to running them one by one.
 * dst has src's size, its data and stride set by the caller; it is either
 * src itself (dst->data == src->data, the same stride: in place) or memory
 * that does not overlap src. */
void ff__aug_lut_run(const ff__aug *ops, int n, const ff__image *src, ff__image *dst);

/* The other colour ops (color, contrast, sharpness, hue) from src into dst, which
 * is src itself (in place) or does not overlap it, as for ff__aug_lut_run;
 * in place, `scratch` holds sharpness's copy of the image (from another
 * image it reads the neighbours from src). Returns FF_OK, FF_ENOMEM, or
 * FF_EINVAL for an image of other than 1 or 3 channels or an op that is not
 * a colour op. */
ff_status ff__aug_color(const ff__aug *a, const ff__image *src, ff__image *dst, ff__buf *scratch);

#endif
