/* op_table.c — the table of pipeline ops (op_table.h): names and
 * arguments are torchvision's in snake_case (timm's for the timm_* ops),
 * defaults are theirs (set by the parser); the summaries are what
 * `fusionflow ops` prints. */
#include "pipeline/op_table.h"

#include <stdio.h>
#include <string.h>

#include "fusionflow/fusionflow.h"
#include "kernels/pil_blur.h"

#define AT(field) offsetof(ff__op, field)
#define INTERP {"interpolation", FF__ARG_INTERP, 0, 0, 0, 0}
#define FILL {"fill", FF__ARG_FILL, 0, 0, 0, 0}
#define TIMM_HPARAMS                                                                  \
  {"interpolation", FF__ARG_PIL_INTERP, 0, 0, 0, 0}, {"img_mean", FF__ARG_FILL, 0, 0, 0, 0},  \
      {"translate_pct", FF__ARG_DOUBLE, 0, AT(timm.translate_pct), 0, 1},                 \
      {"translate_const", FF__ARG_DOUBLE, 0, AT(timm.translate_const), 0, 65535}
#define BIG 1e9
#define SEMANTICS {"semantics", FF__ARG_SEMANTICS, 0, 0, 0, 0}
#define RINTERP {"interpolation", FF__ARG_RINTERP, 0, 0, 0, 0}

const ff__op_spec ff__op_specs[] = {
    {"decode", "the file decoded to RGB (JPEG, PNG, WebP, TIFF, BMP, PNM); always the first op",
     FF__OP_DECODE, 0, {{"dct_scale", FF__ARG_BOOL, 0, AT(dct_scale), 0, 0}}},
    {"crop", "the box at (top, left) of height x width, black where it leaves the image (crop)",
     FF__OP_CROP, 0,
     {{"top", FF__ARG_INT, 1, AT(top), -BIG, BIG},
      {"left", FF__ARG_INT, 1, AT(left), -BIG, BIG},
      {"height", FF__ARG_INT, 1, AT(height), 1, 65535},
      {"width", FF__ARG_INT, 1, AT(width), 1, 65535}}},
    {"center_crop", "the centre size N or (H, W) (CenterCrop)",
     FF__OP_CENTER_CROP, 0, {{"size", FF__ARG_SIZE, 1, AT(size), 1, 65535}}},
    {"resize", "the shorter side to N, or to (H, W); antialiased bilinear or bicubic (Resize)",
     FF__OP_RESIZE, 0,
     {{"size", FF__ARG_SIZE, 1, AT(size), 1, 65535}, {"antialias", FF__ARG_BOOL, 0, AT(antialias), 0, 0}, RINTERP}},
    {"random_resized_crop", "a random area and aspect ratio, resized to size (RandomResizedCrop)",
     FF__OP_RANDOM_RESIZED_CROP, 0,
     {{"size", FF__ARG_SIZE, 1, AT(size), 1, 65535},
      /* a share of the image's area; aspect ratios past 1:100 make crops of a pixel's width on
       * common images, rounding to nothing (torchvision then fails inside resize) */
      {"scale", FF__ARG_RANGE, 0, AT(scale), 0, 1},
      {"ratio", FF__ARG_RANGE, 0, AT(ratio), 0.01 - 1e-12, 100},
      {"antialias", FF__ARG_BOOL, 0, AT(antialias), 0, 0}, RINTERP}},
    {"random_horizontal_flip", "mirrored left to right with probability p (RandomHorizontalFlip)",
     FF__OP_RANDOM_HORIZONTAL_FLIP, 0, {{"p", FF__ARG_DOUBLE, 0, AT(p), 0, 1}}},
    {"random_vertical_flip", "flipped upside down with probability p (RandomVerticalFlip)",
     FF__OP_RANDOM_VERTICAL_FLIP, 0, {{"p", FF__ARG_DOUBLE, 0, AT(p), 0, 1}}},
    {"identity", "the image unchanged (the policies' Identity)",
     FF__OP_AUG, FF__AUG_IDENTITY, {{0}}},
    {"shear_x", "sheared along x by shear (the policies' ShearX)",
     FF__OP_AUG, FF__AUG_SHEAR_X, {{"shear", FF__ARG_DOUBLE, 1, AT(aug.arg), -100, 100}, INTERP, FILL}},
    {"shear_y", "sheared along y by shear (the policies' ShearY)",
     FF__OP_AUG, FF__AUG_SHEAR_Y, {{"shear", FF__ARG_DOUBLE, 1, AT(aug.arg), -100, 100}, INTERP, FILL}},
    {"translate_x", "shifted by pixels along x (the policies' TranslateX)",
     FF__OP_AUG, FF__AUG_TRANSLATE_X,
     {{"pixels", FF__ARG_DOUBLE, 1, AT(aug.arg), -65535, 65535}, INTERP, FILL}},
    {"translate_y", "shifted by pixels along y (the policies' TranslateY)",
     FF__OP_AUG, FF__AUG_TRANSLATE_Y,
     {{"pixels", FF__ARG_DOUBLE, 1, AT(aug.arg), -65535, 65535}, INTERP, FILL}},
    {"rotate", "rotated by angle degrees counter-clockwise (the policies' Rotate)",
     FF__OP_AUG, FF__AUG_ROTATE, {{"angle", FF__ARG_DOUBLE, 1, AT(aug.arg), -1e6, 1e6}, INTERP, FILL}},
    {"brightness", "brightness times factor (adjust_brightness)",
     FF__OP_AUG, FF__AUG_BRIGHTNESS, {{"factor", FF__ARG_DOUBLE, 1, AT(aug.arg), 0, 1e6}}},
    {"color", "saturation times factor (adjust_saturation; the policies' Color)",
     FF__OP_AUG, FF__AUG_COLOR, {{"factor", FF__ARG_DOUBLE, 1, AT(aug.arg), 0, 1e6}}},
    {"contrast", "contrast times factor (adjust_contrast)",
     FF__OP_AUG, FF__AUG_CONTRAST, {{"factor", FF__ARG_DOUBLE, 1, AT(aug.arg), 0, 1e6}}},
    {"sharpness", "sharpness times factor (adjust_sharpness)",
     FF__OP_AUG, FF__AUG_SHARPNESS, {{"factor", FF__ARG_DOUBLE, 1, AT(aug.arg), 0, 1e6}}},
    {"posterize", "bits bits kept per channel (posterize)",
     FF__OP_AUG, FF__AUG_POSTERIZE, {{"bits", FF__ARG_WHOLE, 1, AT(aug.arg), 0, 8}}},
    {"solarize", "pixels at or above threshold inverted (solarize)",
     FF__OP_AUG, FF__AUG_SOLARIZE, {{"threshold", FF__ARG_DOUBLE, 1, AT(aug.arg), 0, 255}}},
    {"autocontrast", "each channel stretched to the full range (autocontrast)",
     FF__OP_AUG, FF__AUG_AUTOCONTRAST, {{0}}},
    {"equalize", "each channel's histogram equalized (equalize)",
     FF__OP_AUG, FF__AUG_EQUALIZE, {{0}}},
    {"invert", "every pixel inverted (invert)",
     FF__OP_AUG, FF__AUG_INVERT, {{0}}},
    {"rand_augment", "num_ops random ops at magnitude (RandAugment)",
     FF__OP_RAND_AUGMENT, 0,
     {{"num_ops", FF__ARG_INT, 0, AT(num_ops), 0, 16},
      {"magnitude", FF__ARG_INT, 0, AT(magnitude), 0, 1000},
      {"num_magnitude_bins", FF__ARG_INT, 0, AT(num_magnitude_bins), 2, 1000},
      INTERP, FILL}},
    {"trivial_augment_wide", "one random op at a random magnitude (TrivialAugmentWide)",
     FF__OP_TRIVIAL_AUGMENT_WIDE, 0,
     {{"num_magnitude_bins", FF__ARG_INT, 0, AT(num_magnitude_bins), 2, 1000}, INTERP, FILL}},
    {"auto_augment", "a sub-policy of the imagenet, cifar10 or svhn policy (AutoAugment)",
     FF__OP_AUTO_AUGMENT, 0, {{"policy", FF__ARG_POLICY, 0, AT(policy), 0, 0}, INTERP, FILL}},
    {"aug_mix", "augmentation chains mixed and blended with the image (AugMix)",
     FF__OP_AUG_MIX, 0,
     {{"severity", FF__ARG_INT, 0, AT(severity), 1, 10},
      {"mixture_width", FF__ARG_INT, 0, AT(mixture_width), 1, FF__AUG_MIX_MAX_WIDTH},
      {"chain_depth", FF__ARG_INT, 0, AT(chain_depth), -1, 8},
      {"alpha", FF__ARG_DOUBLE, 0, AT(alpha), 1e-3, 1e3},
      {"all_ops", FF__ARG_BOOL, 0, AT(all_ops), 0, 0},
      INTERP, FILL}},
    {"timm_rand_augment", "timm's RandAugment from a config string such as \"rand-m9-mstd0.5\" (Pillow arithmetic)",
     FF__OP_TIMM_RAND_AUGMENT, 0, {{"config", FF__ARG_TIMM_CONFIG, 1, 0, 0, 0}, TIMM_HPARAMS}},
    {"timm_auto_augment", "timm's AutoAugment from a config string such as \"original\" (Pillow arithmetic)",
     FF__OP_TIMM_AUTO_AUGMENT, 0, {{"config", FF__ARG_TIMM_CONFIG, 1, 0, 0, 0}, TIMM_HPARAMS}},
    {"timm_aug_mix", "timm's AugMix from a config string such as \"augmix-m3-w3\" (Pillow arithmetic)",
     FF__OP_TIMM_AUG_MIX, 0, {{"config", FF__ARG_TIMM_CONFIG, 1, 0, 0, 0}, TIMM_HPARAMS}},
    /* single Pillow-semantics ops (timm's op functions, torchvision's PIL path) */
#define PIL_OP(name, summary, op, ...) {name, summary, FF__OP_PIL, op, {__VA_ARGS__}}
#define PIL_ARG(name, lo, hi) {name, FF__ARG_DOUBLE, 1, AT(pil.arg), lo, hi}
#define PIL_GEOM(name, lo, hi) PIL_ARG(name, lo, hi), {"interpolation", FF__ARG_PIL_INTERP, 0, 0, 0, 0}, FILL
    PIL_OP("pil_autocontrast", "internal (the timm_* policies): Pillow's ImageOps.autocontrast",
     FF__PIL_AUTOCONTRAST, {0}),
    PIL_OP("pil_equalize", "internal (the timm_* policies): Pillow's ImageOps.equalize",
     FF__PIL_EQUALIZE, {0}),
    PIL_OP("pil_invert", "internal (the timm_* policies): Pillow's ImageOps.invert",
     FF__PIL_INVERT, {0}),
    PIL_OP("pil_posterize", "internal (the timm_* policies): Pillow's ImageOps.posterize",
     FF__PIL_POSTERIZE, {"bits", FF__ARG_WHOLE, 1, AT(pil.arg), 0, 8}),
    PIL_OP("pil_solarize", "internal (the timm_* policies): Pillow's ImageOps.solarize",
     FF__PIL_SOLARIZE, PIL_ARG("threshold", 0, 256)),
    PIL_OP("pil_solarize_add", "internal (the timm_* policies): timm's solarize_add",
     FF__PIL_SOLARIZE_ADD, {"add", FF__ARG_WHOLE, 1, AT(pil.arg), 0, 255}),
    PIL_OP("pil_color", "internal (the timm_* policies): Pillow's ImageEnhance.Color",
     FF__PIL_COLOR, PIL_ARG("factor", 0, 1e6)),
    PIL_OP("pil_contrast", "internal (the timm_* policies): Pillow's ImageEnhance.Contrast",
     FF__PIL_CONTRAST, PIL_ARG("factor", 0, 1e6)),
    PIL_OP("pil_brightness", "internal (the timm_* policies): Pillow's ImageEnhance.Brightness",
     FF__PIL_BRIGHTNESS, PIL_ARG("factor", 0, 1e6)),
    PIL_OP("pil_sharpness", "internal (the timm_* policies): Pillow's ImageEnhance.Sharpness",
     FF__PIL_SHARPNESS, PIL_ARG("factor", 0, 1e6)),
    PIL_OP("pil_shear_x", "internal (the timm_* policies): timm's shear_x (Pillow affine)",
     FF__PIL_SHEAR_X, PIL_GEOM("shear", -100, 100)),
    PIL_OP("pil_shear_y", "internal (the timm_* policies): timm's shear_y (Pillow affine)",
     FF__PIL_SHEAR_Y, PIL_GEOM("shear", -100, 100)),
    PIL_OP("pil_translate_x", "internal (the timm_* policies): timm's translate_x_abs (Pillow affine)",
     FF__PIL_TRANSLATE_X, PIL_GEOM("pixels", -65535, 65535)),
    PIL_OP("pil_translate_y", "internal (the timm_* policies): timm's translate_y_abs (Pillow affine)",
     FF__PIL_TRANSLATE_Y, PIL_GEOM("pixels", -65535, 65535)),
    PIL_OP("pil_rotate", "internal (the timm_* policies): timm's rotate (Pillow's Image.rotate)",
     FF__PIL_ROTATE, PIL_GEOM("angle", -1e6, 1e6)),
    PIL_OP("pil_hue", "internal (the timm_* policies): torchvision's adjust_hue on a PIL image",
     FF__PIL_HUE, PIL_ARG("factor", -0.5, 0.5)),
    PIL_OP("pil_gaussian_blur", "internal (the timm_* policies): Pillow's ImageFilter.GaussianBlur(radius)",
     FF__PIL_GAUSSIAN_BLUR, PIL_ARG("radius", 0, FF__PIL_BLUR_MAX_RADIUS)),
#undef PIL_OP
#undef PIL_ARG
#undef PIL_GEOM
    /* torchvision.transforms' per-sample transforms (v1 tensor semantics); defaults are theirs */
    {"grayscale", "converted to gray, kept as 3 channels (Grayscale(num_output_channels=3))",
     FF__OP_AUG, FF__AUG_COLOR, {{"num_output_channels", FF__ARG_INT, 0, AT(channels), 1, 3}}},
    {"random_grayscale", "converted to gray with probability p (RandomGrayscale)",
     FF__OP_RANDOM_AUG, FF__AUG_COLOR, {{"p", FF__ARG_DOUBLE, 0, AT(p), 0, 1}, SEMANTICS}},
    {"random_solarize", "solarized at threshold with probability p (RandomSolarize)",
     FF__OP_RANDOM_AUG, FF__AUG_SOLARIZE,
     {{"threshold", FF__ARG_DOUBLE, 1, AT(aug.arg), 0, 255}, {"p", FF__ARG_DOUBLE, 0, AT(p), 0, 1}, SEMANTICS}},
    {"random_posterize", "posterized to bits with probability p (RandomPosterize)",
     FF__OP_RANDOM_AUG, FF__AUG_POSTERIZE,
     {{"bits", FF__ARG_WHOLE, 1, AT(aug.arg), 0, 8}, {"p", FF__ARG_DOUBLE, 0, AT(p), 0, 1}}},
    {"random_autocontrast", "autocontrast with probability p (RandomAutocontrast)",
     FF__OP_RANDOM_AUG, FF__AUG_AUTOCONTRAST, {{"p", FF__ARG_DOUBLE, 0, AT(p), 0, 1}}},
    {"random_equalize", "equalized with probability p (RandomEqualize)",
     FF__OP_RANDOM_AUG, FF__AUG_EQUALIZE, {{"p", FF__ARG_DOUBLE, 0, AT(p), 0, 1}}},
    {"random_invert", "inverted with probability p (RandomInvert)",
     FF__OP_RANDOM_AUG, FF__AUG_INVERT, {{"p", FF__ARG_DOUBLE, 0, AT(p), 0, 1}}},
    {"random_adjust_sharpness", "sharpness times sharpness_factor with probability p (RandomAdjustSharpness)",
     FF__OP_RANDOM_AUG, FF__AUG_SHARPNESS,
     {{"sharpness_factor", FF__ARG_DOUBLE, 1, AT(aug.arg), 0, 1e6}, {"p", FF__ARG_DOUBLE, 0, AT(p), 0, 1}}},
    {"hue", "hue shifted by factor, in [-0.5, 0.5] (adjust_hue)",
     FF__OP_AUG, FF__AUG_HUE, {{"factor", FF__ARG_DOUBLE, 1, AT(aug.arg), -0.5, 0.5}}},
    {"color_jitter", "brightness, contrast, saturation and hue drawn at random, in random order (ColorJitter)",
     FF__OP_COLOR_JITTER, 0,
     {{"brightness", FF__ARG_JITTER, 0, AT(jitter[0]), 0, BIG},
      {"contrast", FF__ARG_JITTER, 0, AT(jitter[1]), 0, BIG},
      {"saturation", FF__ARG_JITTER, 0, AT(jitter[2]), 0, BIG},
      {"hue", FF__ARG_JITTER, 0, AT(jitter[3]), -0.5, 0.5},
      SEMANTICS}},
    {"gaussian_blur", "Gaussian blur, sigma drawn in (min, max) (GaussianBlur)",
     FF__OP_GAUSSIAN_BLUR, 0,
     {{"kernel_size", FF__ARG_SIZE, 0, AT(size), 1, FF__BLUR_MAX_KSIZE}, /* v1 only: checked below */
      {"sigma", FF__ARG_SIGMA, 0, AT(sigma), 0, 1e6},
      SEMANTICS}},
    {"three_augment", "DeiT III's 3-Augment: one of grayscale, solarize, blur, then colour jitter",
     FF__OP_RANDOM_CHOICE, 0, {{"color_jitter", FF__ARG_DOUBLE, 0, AT(alpha), 0, BIG}, SEMANTICS}},
    {"random_apply", "the ops in [ ], all of them, with probability p (RandomApply)",
     FF__OP_RANDOM_APPLY, 0, {{"p", FF__ARG_DOUBLE, 0, AT(p), 0, 1}}},
    {"random_choice", "one of the ops in [ ], weighted by p (RandomChoice)",
     FF__OP_RANDOM_CHOICE, 0, {{"p", FF__ARG_WEIGHTS, 0, AT(choice_p), 0, BIG}}},
    {"random_erasing", "random boxes of the float output erased (RandomErasing; timm's with mode=)",
     FF__OP_RANDOM_ERASING, 0,
     {{"p", FF__ARG_DOUBLE, 0, AT(p), 0, 1},
      {"scale", FF__ARG_RANGE, 0, AT(scale), 0, 1},
      {"ratio", FF__ARG_RANGE, 0, AT(ratio), 1e-3, 1e3},
      {"value", FF__ARG_ERASE_VALUE, 0, 0, -BIG, BIG},
      {"mode", FF__ARG_ERASE_MODE, 0, 0, 0, 0},
      {"min_count", FF__ARG_INT, 0, AT(min_count), 1, FF__ERASE_MAX_COUNT},
      {"max_count", FF__ARG_INT, 0, AT(max_count), 1, FF__ERASE_MAX_COUNT}}},
    {"policy_file", "an augmentation policy read from a JSON file (docs/policy-file.md)",
     FF__OP_POLICY_FILE, 0, {{"path", FF__ARG_PATH, 1, 0, 0, 0}, INTERP, FILL}},
    {"to_dtype", "float32 in [0, 1] (ToDtype(float32, scale=True)); last, but for random_erasing",
     FF__OP_TO_DTYPE, 0, {{"dtype", FF__ARG_DTYPE, 0, 0, 0, 0}, {"scale", FF__ARG_TRUE, 0, 0, 0, 0}}},
    {"normalize", "(x - mean) / std per channel of the [0, 1] floats (Normalize); last, but for random_erasing",
     FF__OP_NORMALIZE, 0,
     {{"mean", FF__ARG_RGB, 1, AT(mean), -BIG, BIG}, {"std", FF__ARG_RGB, 1, AT(std), 1e-12, BIG}}},
    {"mixup_cutmix", "the batch stage, last: Mixup or CutMix across the batch, soft targets (timm's Mixup)",
     FF__OP_MIXUP_CUTMIX, 0,
     {{"mixup_alpha", FF__ARG_DOUBLE, 0, AT(mix.mixup_alpha), 0, 1e3},
      {"cutmix_alpha", FF__ARG_DOUBLE, 0, AT(mix.cutmix_alpha), 0, 1e3},
      {"cutmix_minmax", FF__ARG_RANGE, 0, AT(mix.cutmix_minmax), 0, 1},
      {"prob", FF__ARG_DOUBLE, 0, AT(mix.prob), 0, 1},
      {"switch_prob", FF__ARG_DOUBLE, 0, AT(mix.switch_prob), 0, 1},
      {"mode", FF__ARG_MIX_MODE, 0, AT(mix.mode), 0, 0},
      {"correct_lam", FF__ARG_BOOL, 0, AT(mix.correct_lam), 0, 0},
      {"label_smoothing", FF__ARG_DOUBLE, 0, AT(mix.label_smoothing), 0, 1},
      {"num_classes", FF__ARG_INT, 0, AT(mix.num_classes), 1, FF_MAX_NUM_CLASSES},
      {"convention", FF__ARG_CONVENTION, 0, AT(mix.convention), 0, 0}}},
};
const size_t ff__num_op_specs = sizeof ff__op_specs / sizeof ff__op_specs[0];

const ff__op_spec *ff__op_spec_find(const char *name) {
  for (size_t i = 0; i < ff__num_op_specs; i++)
    if (!strcmp(ff__op_specs[i].name, name)) return &ff__op_specs[i];
  return NULL;
}

int ff__op_spec_internal(const ff__op_spec *op) { return op->kind == FF__OP_PIL; }

void ff__arg_spec_describe(const ff__arg_spec *a, char *buf, size_t size) {
  switch (a->kind) {
  case FF__ARG_SIZE: snprintf(buf, size, "N or (H, W), %.0f to %.0f", a->lo, a->hi); return;
  case FF__ARG_INT: snprintf(buf, size, "an integer in [%.0f, %.0f]", a->lo, a->hi); return;
  case FF__ARG_DOUBLE: snprintf(buf, size, "a number in [%g, %g]", a->lo, a->hi); return;
  case FF__ARG_WHOLE: snprintf(buf, size, "a whole number in [%g, %g]", a->lo, a->hi); return;
  case FF__ARG_RANGE: snprintf(buf, size, "(min, max) with %g < min <= max <= %g", a->lo, a->hi); return;
  case FF__ARG_BOOL: snprintf(buf, size, "true or false"); return;
  case FF__ARG_TRUE: snprintf(buf, size, "true"); return;
  case FF__ARG_RGB: snprintf(buf, size, "(r, g, b), one number, or imagenet"); return;
  case FF__ARG_DTYPE: snprintf(buf, size, "float32"); return;
  case FF__ARG_INTERP: snprintf(buf, size, "nearest or bilinear"); return;
  case FF__ARG_FILL: snprintf(buf, size, "a value or (r, g, b) in [0, 255]"); return;
  case FF__ARG_POLICY: snprintf(buf, size, "imagenet, cifar10 or svhn"); return;
  case FF__ARG_TIMM_CONFIG: snprintf(buf, size, "timm's config string, quoted"); return;
  case FF__ARG_PIL_INTERP: snprintf(buf, size, "nearest, bilinear, bicubic (or random in a policy)"); return;
  case FF__ARG_RINTERP: snprintf(buf, size, "bilinear, bicubic or random"); return;
  case FF__ARG_JITTER: snprintf(buf, size, "v (the range around the centre) or (min, max) in [%g, %g]", a->lo, a->hi); return;
  case FF__ARG_SIGMA: snprintf(buf, size, "s or (min, max) with 0 < min <= max <= %g", a->hi); return;
  case FF__ARG_SEMANTICS: snprintf(buf, size, "v1 or pil"); return;
  case FF__ARG_WEIGHTS: snprintf(buf, size, "(w, ...), one weight >= 0 per op"); return;
  case FF__ARG_ERASE_VALUE: snprintf(buf, size, "a number, (r, g, b) or random"); return;
  case FF__ARG_ERASE_MODE: snprintf(buf, size, "const, rand or pixel"); return;
  case FF__ARG_PATH: snprintf(buf, size, "a quoted path"); return;
  case FF__ARG_MIX_MODE: snprintf(buf, size, "batch, pair or elem"); return;
  case FF__ARG_CONVENTION: snprintf(buf, size, "timm or torchvision"); return;
  }
  snprintf(buf, size, "a value");
}
