/* augment.h — the single augmentation ops of the automatic policies
 * (RandAugment, TrivialAugmentWide, AutoAugment, AugMix) on interleaved RGB
 * uint8 images, with torchvision's uint8 tensor semantics
 * (torchvision.transforms.functional; formulas in the shared spec). */
#ifndef FF_OPS_AUGMENT_H
#define FF_OPS_AUGMENT_H

#include <stdint.h>

#include "core/error.h"
#include "core/image.h"

typedef enum ff__aug_op {
  FF__AUG_IDENTITY,
  FF__AUG_SHEAR_X,      /* arg: shear coefficient m (the policies' magnitude); pivot top-left */
  FF__AUG_SHEAR_Y,
  FF__AUG_TRANSLATE_X,  /* arg: pixels (truncated toward zero), content moves right */
  FF__AUG_TRANSLATE_Y,  /* content moves down */
  FF__AUG_ROTATE,       /* arg: degrees, counter-clockwise, about the centre */
  FF__AUG_BRIGHTNESS,   /* arg: factor (1 = unchanged) */
  FF__AUG_COLOR,        /* arg: saturation factor */
  FF__AUG_CONTRAST,     /* arg: factor */
  FF__AUG_SHARPNESS,    /* arg: factor */
  FF__AUG_POSTERIZE,    /* arg: bits kept, 0..8 */
  FF__AUG_SOLARIZE,     /* arg: threshold, 0..255 (pixels >= threshold are inverted) */
  FF__AUG_AUTOCONTRAST, /* no arg */
  FF__AUG_EQUALIZE,     /* no arg */
  FF__AUG_INVERT,       /* no arg */
  FF__AUG_COUNT
} ff__aug_op;

/* One op with its parameters. */
typedef struct ff__aug {
  ff__aug_op op;
  double arg;      /* see ff__aug_op; a Python float as torchvision receives it */
  int bilinear;    /* geometric ops: 0 nearest, 1 bilinear */
  int has_fill;    /* geometric ops: fill[] for pixels mapped outside, else 0 (black) */
  float fill[3];
} ff__aug;

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

/* The other colour ops (color, contrast, sharpness) from src into dst, which
 * is src itself (in place) or does not overlap it, as for ff__aug_lut_run;
 * in place, `scratch` holds sharpness's copy of the image (from another
 * image it reads the neighbours from src). Returns FF_OK, FF_ENOMEM, or
 * FF_EINVAL for an image of other than 1 or 3 channels or an op that is not
 * a colour op. */
ff_status ff__aug_color(const ff__aug *a, const ff__image *src, ff__image *dst, ff__buf *scratch);

#endif
