/* pipeline.h — pipeline text → parsed ops → per-sample plans.
 *
 * A pipeline is parsed once per loader (ff__pipeline_parse). For each sample
 * the planner (ff__plan_make) draws every random parameter from the sample's
 * Philox stream, keyed by (seed, epoch, index), and lowers the ops to concrete
 * steps on the image geometry known from its header. A plan is a pure
 * function of (pipeline, seed, epoch, index, image size): running it anywhere
 * gives the same pixels. */
#ifndef FF_PIPELINE_PIPELINE_H
#define FF_PIPELINE_PIPELINE_H

#include <stdint.h>

#include "codec/codec.h"
#include "core/error.h"
#include "ops/augment.h"
#include "ops/batch_mix.h"

#define FF__PIPELINE_MAX_OPS 32
#define FF__PLAN_MAX_STEPS 96
#define FF__AUG_MIX_MAX_WIDTH 8 /* aug_mix's largest mixture_width */

typedef enum ff__op_kind {
  FF__OP_DECODE,
  FF__OP_CROP,
  FF__OP_CENTER_CROP,
  FF__OP_RESIZE,
  FF__OP_RANDOM_RESIZED_CROP,
  FF__OP_RANDOM_HORIZONTAL_FLIP,
  FF__OP_RANDOM_VERTICAL_FLIP,
  FF__OP_AUG,                  /* one augmentation op with explicit arguments (op.aug) */
  FF__OP_RAND_AUGMENT,
  FF__OP_TRIVIAL_AUGMENT_WIDE,
  FF__OP_AUTO_AUGMENT,
  FF__OP_AUG_MIX,
  FF__OP_TO_DTYPE,
  FF__OP_NORMALIZE,
  FF__OP_MIXUP_CUTMIX,         /* the batch stage (op.mix), after normalize/to_dtype */
} ff__op_kind;

typedef enum ff__aa_policy { FF__AA_IMAGENET, FF__AA_CIFAR10, FF__AA_SVHN } ff__aa_policy;

/* One parsed op with all its arguments (defaults filled in). */
typedef struct ff__op {
  ff__op_kind kind;
  int column;              /* 1-based column of the op's name in the text */
  int size[2];             /* (height, width); resize: width 0 = size sets the shorter side */
  int top, left, height, width;
  double scale[2], ratio[2];
  double p;
  int antialias;
  int dct_scale;
  float mean[3], std[3];
  ff__aug aug;             /* FF__OP_AUG: the op and its argument; policies: interpolation and fill */
  int num_ops, magnitude, num_magnitude_bins;     /* rand_augment, trivial_augment_wide */
  int policy;                                     /* auto_augment: ff__aa_policy */
  int severity, mixture_width, chain_depth, all_ops; /* aug_mix */
  double alpha;
  ff__mix_params mix;      /* mixup_cutmix */
} ff__op;

typedef enum ff__output {
  FF__OUTPUT_NHWC_U8,      /* no to_dtype/normalize at the end */
  FF__OUTPUT_NCHW_F32,     /* to_dtype or normalize at the end */
} ff__output;

typedef struct ff__pipeline {
  ff__op ops[FF__PIPELINE_MAX_OPS];
  int num_ops;
  int out_height, out_width; /* every sample's output size */
  uint64_t peak_pixels;      /* the largest fixed size an op produces, and that op's column */
  int peak_column;
  ff__output output;
  int has_mix;               /* the pipeline ends with the batch stage mixup_cutmix (mix) */
  ff__mix_params mix;
  float lut[3][256];         /* uint8 → float32 output value per channel (NCHW_F32) */
} ff__pipeline;

/* Parses text. Errors are FF_EPIPELINE with a message
 * "pipeline column N: ..." naming what was expected. */
ff_status ff__pipeline_parse(const char *text, ff__pipeline *out, ff__error *err);

/* The same without the fixed output size (one image at a time: out_height
 * and out_width are 0 where the size depends on the image). */
ff_status ff__pipeline_parse_any_size(const char *text, ff__pipeline *out, ff__error *err);

/* resize with one size s on an h x w image: the shorter side becomes s and
 * the other keeps the aspect ratio, truncated (torchvision
 * _compute_resized_output_size). In 64 bits: a 1 x N image makes a long
 * side of s * N, far past int. Shared by the parser's output size and the
 * planner, which must agree. */
static inline void ff__resize_shorter_side(int64_t s, int64_t *h, int64_t *w) {
  if (*w <= *h) *h = s * *h / *w, *w = s;
  else *w = s * *w / *h, *h = s;
}

/* Concrete steps on a uint8 HWC image, in order. */
typedef enum ff__step_kind {
  FF__STEP_CROP,   /* box (x, y, w, h) in the current image; zero padding outside */
  FF__STEP_RESIZE, /* to (h, w), bilinear, antialias flag */
  FF__STEP_HFLIP,
  FF__STEP_VFLIP,
  FF__STEP_AUG,          /* one augmentation op (aug) */
  FF__STEP_MIX_BEGIN,    /* AugMix: keep the image, mix = weight * image */
  FF__STEP_CHAIN_BEGIN,  /* AugMix: start a chain from the kept image */
  FF__STEP_CHAIN_END,    /* AugMix: mix += weight * chain result */
  FF__STEP_MIX_END,      /* AugMix: the image becomes trunc(mix) */
} ff__step_kind;

typedef struct ff__step {
  ff__step_kind kind;
  int x, y, w, h;
  int antialias;
  ff__aug aug;
  float weight;          /* MIX_BEGIN: m0; CHAIN_END: w_i (AugMix, spec 4.4) */
} ff__step;

/* A DCT-scaled JPEG decode: the decoder returns the region snapped outward
 * to the reduced grid, and the first step (a resize) resamples the region's
 * exact box from it, so that the crop is the box torchvision crops. */
typedef struct ff__dct_box {
  int scale_num;       /* the decode runs at scale_num/8 (1, 2 or 4); 8 or 0: not scaled */
  int width, height;   /* the decoded image's size, pixels of the reduced grid */
  double box[4];       /* the region in that image: x, y, width, height (fractional pixels) */
} ff__dct_box;

typedef struct ff__plan {
  ff__decode_req decode; /* region of interest and DCT-scaling floor folded into decode */
  ff__dct_box dct;       /* set when the decode is DCT-scaled */
  ff__step steps[FF__PLAN_MAX_STEPS];
  int num_steps;
  int64_t peak_width, peak_height; /* the largest image (in pixels) a step makes, in 64 bits: the
                                      steps hold int sizes, valid only when ff__plan_check passes */
} ff__plan;

/* The source box of plan's step i on a w x h image: the exact region after
 * a DCT-scaled decode for the first step when the image is the one the
 * plan expects, NULL (the whole image) otherwise. */
static inline const double *ff__plan_step_box(const ff__plan *plan, int i, int w, int h) {
  const ff__dct_box *d = &plan->dct;
  return i == 0 && d->scale_num > 0 && d->scale_num < 8 && w == d->width && h == d->height ? d->box : NULL;
}

/* The index a sample's draws are keyed by: its data set index, and for a
 * repeated copy (repeated augmentation) the copy number above bit 40, so
 * that copy 0 draws as the sample does without repeats. */
static inline uint64_t ff__draw_index(uint64_t index, uint32_t repeat) { return index + ((uint64_t)repeat << 40); }

/* Plans sample `index` of `epoch` for an image of info->width x
 * info->height. max_pixels goes into the decode request. */
void ff__plan_make(const ff__pipeline *pipe, uint64_t seed, uint64_t epoch, uint64_t index,
                   const ff__image_info *info, uint64_t max_pixels, ff__plan *out);

/* Before anything is allocated for the steps: FF_ETOOBIG, naming `name`
 * (the file), when a step would make an image over max_pixels (0 = no
 * limit) or with a side past INT_MAX. */
ff_status ff__plan_check(const ff__plan *plan, const ff__image_info *info, uint64_t max_pixels, const char *name,
                         ff__error *err);

#endif
