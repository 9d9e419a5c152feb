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
#include "kernels/pil.h"
#include "ops/augment.h"
#include "pipeline/timm.h"
#include "pipeline/policy_file.h"
#include "ops/batch_mix.h"

#define FF__PIPELINE_MAX_OPS 32
#define FF__PLAN_MAX_STEPS 96
#define FF__AUG_MIX_MAX_WIDTH 8 /* aug_mix's largest mixture_width */
#define FF__BLUR_MAX_KSIZE 255  /* gaussian_blur's largest kernel size */

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
  FF__OP_TIMM_RAND_AUGMENT,    /* timm's policies from a config string (op.timm) */
  FF__OP_TIMM_AUTO_AUGMENT,
  FF__OP_TIMM_AUG_MIX,
  FF__OP_PIL,                  /* one Pillow-semantics op with explicit arguments (op.pil) */
  FF__OP_RANDOM_AUG,           /* op.aug with probability p (random_solarize, random_grayscale, ...) */
  FF__OP_COLOR_JITTER,
  FF__OP_GAUSSIAN_BLUR,
  FF__OP_RANDOM_APPLY,         /* the next group_len ops, all with probability p (RandomApply) */
  FF__OP_RANDOM_CHOICE,        /* one of the next group_len ops, op i with weight choice_p[i] (RandomChoice) */
  FF__OP_RANDOM_ERASING,       /* boxes of the normalized float output (RandomErasing, timm's RandomErasing) */
  FF__OP_POLICY_FILE,          /* the pipeline's policy table (policy_file.h), loaded from a JSON file */
  FF__OP_MIXUP_CUTMIX,         /* the batch stage (op.mix), after normalize/to_dtype */
} ff__op_kind;

/* resize / random_resized_crop interpolation. */
typedef enum ff__interp {
  FF__INTERP_BILINEAR,
  FF__INTERP_BICUBIC,
  FF__INTERP_RANDOM, /* timm's `random`: bilinear or bicubic, each with probability 1/2, per sample */
} ff__interp;

/* An op's `semantics=`: torchvision's tensor ops (v1, the default) or
 * Pillow's arithmetic (pil: color_jitter, random_solarize, random_grayscale
 * and gaussian_blur plan FF__STEP_PIL steps with the v1 draws, and
 * three_augment expands to those; gaussian_blur's sigma is then Pillow's
 * radius and it takes no kernel_size). */
typedef enum ff__op_semantics { FF__OP_SEMANTICS_V1, FF__OP_SEMANTICS_PIL } ff__op_semantics;

/* random_erasing's fill: torchvision's `value` (erase_mode FF__ERASE_TORCHVISION) or timm's modes. */
typedef enum ff__erase_mode {
  FF__ERASE_TORCHVISION = -1, /* one box, area scale * image area; value constant or `random` */
  FF__ERASE_CONST,            /* timm mode=const: zeros */
  FF__ERASE_RAND,             /* timm mode=rand: one standard normal value per channel */
  FF__ERASE_PIXEL,            /* timm mode=pixel: one standard normal value per value */
} ff__erase_mode;
#define FF__ERASE_MAX_COUNT 16

#define FF__GROUP_MAX_OPS 8  /* ops in one random_apply / random_choice */

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
  ff__timm timm;                                  /* timm_rand_augment, timm_auto_augment, timm_aug_mix */
  ff__pil pil;                                    /* FF__OP_PIL */
  int interp;              /* resize, random_resized_crop: ff__interp */
  double jitter[4][2];     /* color_jitter: brightness, contrast, saturation, hue (min, max) */
  int jitter_on[4];        /* color_jitter: whether each is drawn (torchvision's None otherwise) */
  double sigma[2];         /* gaussian_blur: (min, max) (semantics=pil: the radius); size[] holds (kernel width,
                              kernel height), v1 only */
  int channels;            /* grayscale: num_output_channels */
  int semantics;           /* ff__op_semantics */
  int group_len;           /* random_apply, random_choice: how many of the following ops are the group's */
  double choice_p[FF__GROUP_MAX_OPS]; /* random_choice: the weights, normalised to sum 1 */
  int erase_mode;          /* random_erasing: ff__erase_mode */
  int erase_random;        /* random_erasing (torchvision): value=random, per-value normal noise */
  float erase_value[3];    /* random_erasing (torchvision): the constant fill per channel */
  int min_count, max_count; /* random_erasing (timm): boxes per sample */
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
  /* The output format (pipeline/output.c, ff_config.output_dtype and
   * memory_format); out_elem_bytes 0: the default of `output` above. */
  int out_dtype;             /* ff_dtype of the elements */
  int out_planar;            /* 1: NCHW planes; 0: NHWC */
  int out_channels_last;     /* NHWC memory reported as (N, 3, H, W) */
  int out_elem_bytes;        /* 1, 2 or 4; 0 before ff__pipeline_set_output */
  int out_custom;            /* not the default format: the generic writer and device stage */
  uint32_t out_table[3][256];/* per channel and uint8 value: the element's bits (kernels/out.h) */
  int semantics;             /* ff_semantics (0 after parsing: v1), see ff__pipeline_set_semantics */
  ff__policy_table policy;   /* policy_file's table (one policy_file per pipeline) */
} ff__pipeline;

/* Sets p's output format from ff_config's output_dtype (ff_output_dtype)
 * and memory_format (ff_memory_format), after parsing. FF_EINVAL naming
 * the option when the combination cannot be (a float type without a final
 * normalize / to_dtype, uint8 with one, an unknown value). */
ff_status ff__pipeline_set_output(ff__pipeline *p, int output_dtype, int memory_format, ff__error *err);

/* FF_EINVAL naming its column when p has random_erasing, which writes the
 * float32 NCHW output, and another output format; else FF_OK. */
ff_status ff__pipeline_check_erasing(const ff__pipeline *p, ff__error *err);

/* Whether p's samples can travel as NHWC uint8 for a device to convert
 * (not when an op writes the float32 output: random_erasing), and then, in
 * *out, the same pipeline writing NHWC uint8 (the output stage's input). */
int ff__pipeline_uint8_transport(const ff__pipeline *p, ff__pipeline *out);

/* FF_EPIPELINE naming the op's column when an op of p makes images of a
 * fixed size over max_pixels (0: no limit); else FF_OK. */
ff_status ff__pipeline_check_peak(const ff__pipeline *p, uint64_t max_pixels, ff__error *err);

/* Bytes of one output sample in p's format. */
size_t ff__pipeline_sample_bytes(const ff__pipeline *p);

/* Parses text. Errors are FF_EPIPELINE with a message
 * "pipeline column N: ..." naming what was expected. */
ff_status ff__pipeline_parse(const char *text, ff__pipeline *out, ff__error *err);

/* The same without the fixed output size (one image at a time: out_height
 * and out_width are 0 where the size depends on the image). */
ff_status ff__pipeline_parse_any_size(const char *text, ff__pipeline *out, ff__error *err);

/* Sets the pipeline's ff_semantics (FF_SEMANTICS_V1 or _V2): every op's
 * aug.v2, which the planner copies into each step it makes, so that the CPU
 * ops and the device kernels run that semantics' arithmetic. */
void ff__pipeline_set_semantics(ff__pipeline *pipe, int semantics);

/* ff__pipeline_parse_any_size in `semantics`: one image outside a loader
 * (ff_image_augment_as, ff_image_plan_as). FF_EINVAL for a semantics that
 * is not an ff_semantics. */
ff_status ff__pipeline_parse_image(const char *text, int semantics, ff__pipeline *out, ff__error *err);

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
  FF__STEP_RESIZE, /* to (h, w), antialias: the filter (kernels/resize.h, FF__RESIZE_ANTIALIAS | BICUBIC) */
  FF__STEP_HFLIP,
  FF__STEP_VFLIP,
  FF__STEP_AUG,          /* one augmentation op (aug) */
  FF__STEP_MIX_BEGIN,    /* AugMix: keep the image, mix = weight * image */
  FF__STEP_CHAIN_BEGIN,  /* AugMix: start a chain from the kept image */
  FF__STEP_CHAIN_END,    /* AugMix: mix += weight * chain result */
  FF__STEP_MIX_END,      /* AugMix: the image becomes trunc(mix) */
  FF__STEP_PIL,          /* one Pillow-semantics op (pil) */
  FF__STEP_PIL_MIX_END,  /* timm's AugMix: the image becomes Image.blend(kept, trunc(mix), weight) */
  FF__STEP_BLUR,         /* Gaussian blur, kernel x by y taps, sigma in weight (ops.h, ff__op_gaussian_blur) */
  FF__STEP_ERASE,        /* box (x, y, w, h) of the float output: aug.fill (antialias 0), or per-value
                            normal noise from the stream keyed by noise_key (antialias 1); ops.h, ff__op_erase */
} ff__step_kind;

typedef struct ff__step {
  ff__step_kind kind;
  int x, y, w, h;
  int antialias;
  ff__aug aug;
  ff__pil pil;           /* FF__STEP_PIL */
  float weight;          /* MIX_BEGIN: m0; CHAIN_END: w_i (AugMix, spec 4.4); PIL_MIX_END: timm's m; BLUR: sigma */
  uint64_t noise_key;    /* ERASE with noise */
} ff__step;

/* A DCT-scaled JPEG decode: the decoder returns the region snapped outward
 * to the reduced grid, and the first step (a resize) resamples the region's
 * exact box from it, so that the crop is the box torchvision crops. */
typedef struct ff__dct_box {
  int scale_num;       /* the decode runs at scale_num/8 (1, 2 or 4); 8 or 0: not scaled */
  int width, height;   /* the decoded image's size, pixels of the reduced grid */
  double box[4];       /* the region in that image: x, y, width, height (fractional pixels) */
} ff__dct_box;

/* A flip whose draw said no: not a step (nothing runs), kept so that a plan's
 * JSON (ff_loader_plan) shows it as not applied; at: the steps before it. */
typedef struct ff__unflipped {
  uint8_t vertical, at;
} ff__unflipped;
#define FF__PLAN_MAX_UNFLIPPED FF__PIPELINE_MAX_OPS

typedef struct ff__plan {
  ff__decode_req decode; /* region of interest and DCT-scaling floor folded into decode */
  ff__dct_box dct;       /* set when the decode is DCT-scaled */
  ff__step steps[FF__PLAN_MAX_STEPS];
  int num_steps;
  ff__unflipped unflipped[FF__PLAN_MAX_UNFLIPPED];
  int num_unflipped;
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
