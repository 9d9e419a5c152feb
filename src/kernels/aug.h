/* aug.h — the single augmentation ops of the automatic policies as data:
 * which op, with which parameters. What the CPU ops (ops/augment.h), the
 * planner and the device stage tables (kernels/stage.h) share; the ops
 * themselves are in ops/ and the per-pixel math in kernels/. */
#ifndef FF_KERNELS_AUG_H
#define FF_KERNELS_AUG_H

typedef enum ff__aug_op {
  FF__AUG_IDENTITY,
  FF__AUG_SHEAR_X, /* arg: shear coefficient m (the policies' magnitude); pivot top-left */
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
  FF__AUG_HUE,          /* arg: hue factor in [-0.5, 0.5] (torchvision adjust_hue, kernels/hue.h) */
  FF__AUG_COUNT
} ff__aug_op;

/* One op with its parameters. */
typedef struct ff__aug {
  ff__aug_op op;
  double arg;   /* see ff__aug_op; a Python float as torchvision receives it */
  int bilinear; /* geometric ops: 0 nearest, 1 bilinear */
  int has_fill; /* geometric ops: fill[] for pixels mapped outside, else 0 (black) */
  float fill[3];
  int v2;       /* ff_semantics: 0 torchvision.transforms (v1), 1 torchvision.transforms.v2, whose
                   arithmetic differs in sharpness, color, contrast, autocontrast and the bilinear
                   fill blend (kernels/color.h, kernels/affine.h) */
} ff__aug;

#endif
