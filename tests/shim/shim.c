/* shim.c — internal entry points exported for the golden tests (ctypes), so
 * that the ops, the planner and the sampler can be compared with torchvision
 * on in-memory images without going through files. Test-only. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "loader/sampler.h"
#include "ops/ops.h"
#include "pipeline/pipeline.h"
#include "pipeline/policy.h"
#include "source/source.h"

#define SHIM_API __attribute__((visibility("default")))

/* Runs `pipeline` (its decode op is skipped) on an HWC RGB uint8 image as
 * sample `index` of `epoch` in `semantics` (ff_semantics). The output (NHWC
 * uint8 or NCHW float32, see *is_float) goes to out; returns the ff_status. */
SHIM_API int ff_shim_run_pipeline_as(const char *pipeline, int semantics, const uint8_t *in, int height,
                                     int width, uint64_t seed, uint64_t epoch, uint64_t index, void *out,
                                     size_t out_cap_bytes, int *out_h, int *out_w, int *is_float, char *errmsg,
                                     int errmsg_cap) {
  static __thread ff__pipeline pipe;
  ff__error err = {0};
  ff_status st = ff__pipeline_parse(pipeline, &pipe, &err);
  if (!st) ff__pipeline_set_semantics(&pipe, semantics);
  ff__op_scratch scratch = {0};
  ff__buf input = {0};
  if (!st) {
    ff__image_info info = {FF__FORMAT_PNG, width, height, 0};
    ff__plan plan;
    ff__plan_make(&pipe, seed, epoch, index, &info, 0, &plan);
    /* the ops work in place (flips): run them on a copy, never on the caller's pixels */
    size_t in_bytes = (size_t)width * height * 3;
    uint8_t *copy = ff__buf_reserve(&input, in_bytes);
    if (copy) memcpy(copy, in, in_bytes);
    ff__image img = {copy, width, height, 3, (size_t)width * 3};
    if (!copy) st = ff__error_set(&err, FF_ENOMEM, "out of memory copying the input");
    else if (plan.decode.crop_width) /* the region the decoder would have cut */
      ff__op_crop(&img, plan.decode.crop_x, plan.decode.crop_y, plan.decode.crop_width,
                  plan.decode.crop_height, NULL, &img);
    if (!st) st = ff__ops_run(&plan, &scratch, &img, &err);
    size_t elem = pipe.output == FF__OUTPUT_NCHW_F32 ? 4 : 1;
    if (!st && (size_t)pipe.out_height * pipe.out_width * 3 * elem > out_cap_bytes)
      st = ff__error_set(&err, FF_EINVAL, "output buffer too small");
    if (!st) {
      ff__op_write_output(&pipe, &img, out, 0);
      if (pipe.output == FF__OUTPUT_NCHW_F32) st = ff__op_erase(&pipe, &plan, out, 0, &scratch);
      *out_h = pipe.out_height, *out_w = pipe.out_width, *is_float = elem == 4;
    }
  }
  ff__op_scratch_free(&scratch);
  ff__buf_free(&input);
  if (st && errmsg) snprintf(errmsg, (size_t)errmsg_cap, "%s", err.msg);
  return st;
}

/* ff_shim_run_pipeline_as in semantics v1. */
SHIM_API int ff_shim_run_pipeline(const char *pipeline, const uint8_t *in, int height, int width, uint64_t seed,
                                  uint64_t epoch, uint64_t index, void *out, size_t out_cap_bytes, int *out_h,
                                  int *out_w, int *is_float, char *errmsg, int errmsg_cap) {
  return ff_shim_run_pipeline_as(pipeline, FF_SEMANTICS_V1, in, height, width, seed, epoch, index, out,
                                 out_cap_bytes, out_h, out_w, is_float, errmsg, errmsg_cap);
}

/* The dataset indices rank `rank` gets in `epoch` (permutation: ff_permutation); returns how many. */
SHIM_API long ff_shim_sampler(long n, int shuffle, int permutation, uint64_t seed, uint64_t epoch, int rank,
                              int world_size, int drop_last, int64_t *perm, int64_t *out) {
  ff__sampler_indices((size_t)n, shuffle, permutation, seed, epoch, rank, world_size, drop_last, perm, out);
  return (long)ff__sampler_num_samples((size_t)n, world_size, drop_last);
}

/* The crop box (x, y, w, h) random_resized_crop draws for sample `index` of
 * `epoch` on a width x height image, as the planner folds it into the decode
 * request. Returns the ff_status of parsing the op's arguments. */
SHIM_API int ff_shim_rrc_box(int height, int width, double scale_lo, double scale_hi,
                             double ratio_lo, double ratio_hi, uint64_t seed, uint64_t epoch,
                             uint64_t index, int box[4]) {
  char text[256];
  snprintf(text, sizeof text,
           "decode | random_resized_crop(size=8, scale=(%.17g, %.17g), ratio=(%.17g, %.17g))",
           scale_lo, scale_hi, ratio_lo, ratio_hi);
  static __thread ff__pipeline pipe;
  ff__error err = {0};
  ff_status st = ff__pipeline_parse(text, &pipe, &err);
  if (st) return st;
  ff__image_info info = {FF__FORMAT_PNG, width, height, 0};
  ff__plan plan;
  ff__plan_make(&pipe, seed, epoch, index, &info, 0, &plan);
  if (plan.decode.crop_width) {
    box[0] = plan.decode.crop_x, box[1] = plan.decode.crop_y;
    box[2] = plan.decode.crop_width, box[3] = plan.decode.crop_height;
  } else { /* not folded: the first step is the crop */
    box[0] = plan.steps[0].x, box[1] = plan.steps[0].y;
    box[2] = plan.steps[0].w, box[3] = plan.steps[0].h;
  }
  return FF_OK;
}

/* Sample i of the index of source `spec` (opened on each call): its path
 * into path_out and its label into *label_out (when i is in range). Returns
 * the number of samples, or the (negative) ff_status of opening the source
 * (its message then goes to path_out). */
SHIM_API long ff_shim_index(const char *spec, long i, char *path_out, int cap, int64_t *label_out) {
  ff__index index;
  ff__error err = {0};
  ff_status st = ff__source_open(spec, 0, &index, &err);
  if (st) {
    if (path_out && cap > 0) snprintf(path_out, (size_t)cap, "%s", err.msg);
    return (long)st;
  }
  if (i >= 0 && (size_t)i < index.count) {
    if (path_out && cap > 0) snprintf(path_out, (size_t)cap, "%s", index.paths[i]);
    if (label_out) *label_out = index.labels[i];
  }
  long count = (long)index.count;
  ff__index_free(&index);
  return count;
}

/* The plan steps of sample (seed, epoch, index) of `pipeline` for an h x w
 * image, as ff__plan_make lowers them (a leading crop inside the image is
 * folded into the decode request and is not among them). For step i:
 * kinds[i] = ff__step_kind, ops[i] = aug.op (a resize: its filter flags,
 * kernels/resize.h), args[i] = aug.arg (a blur: kernel width * 1000 +
 * height), weights[i] = weight (AugMix; a blur: sigma). Returns the number of steps (at most cap are
 * written), or the ff_status (negative) of parsing the pipeline. */
SHIM_API int ff_shim_plan_steps_as(const char *pipeline, int semantics, int h, int w, uint64_t seed,
                                   uint64_t epoch, uint64_t index, int *kinds, int *ops, double *args,
                                   float *weights, int cap) {
  static __thread ff__pipeline pipe;
  static __thread ff__plan plan;
  ff__error err = {0};
  ff_status st = ff__pipeline_parse_image(pipeline, semantics, &pipe, &err);
  if (st) return (int)st; /* negative */
  ff__image_info info = {FF__FORMAT_PNG, w, h, 0};
  ff__plan_make(&pipe, seed, epoch, index, &info, 0, &plan);
  for (int i = 0; i < plan.num_steps && i < cap; i++) {
    if (kinds) kinds[i] = (int)plan.steps[i].kind;
    const ff__step *st = &plan.steps[i];
    if (ops) ops[i] = st->kind == FF__STEP_RESIZE ? st->antialias : (int)st->aug.op;
    if (args) args[i] = st->kind == FF__STEP_BLUR ? st->x * 1000 + st->y : st->aug.arg;
    if (weights) weights[i] = plan.steps[i].weight;
  }
  return plan.num_steps;
}

/* ff_shim_plan_steps_as in semantics v1. */
SHIM_API int ff_shim_plan_steps(const char *pipeline, int h, int w, uint64_t seed, uint64_t epoch, uint64_t index,
                                int *kinds, int *ops, double *args, float *weights, int cap) {
  return ff_shim_plan_steps_as(pipeline, FF_SEMANTICS_V1, h, w, seed, epoch, index, kinds, ops, args, weights,
                               cap);
}

/* Element k of the planner's float32 torch.linspace(lo, hi, n). */
SHIM_API float ff_shim_linspace(float lo, float hi, int n, int k) { return ff__linspace_f32(lo, hi, n, k); }

/* The erasing boxes (x, y, w, h each) of sample (seed, epoch, index) of
 * `pipeline` for an h x w image, and in fills[3 * k] the fill of box k
 * (NaN: per-value noise). Returns how many (at most cap written), or the
 * ff_status (negative) of parsing. */
SHIM_API int ff_shim_plan_erase_boxes(const char *pipeline, int h, int w, uint64_t seed, uint64_t epoch,
                                      uint64_t index, int *boxes, float *fills, int cap) {
  static __thread ff__pipeline pipe;
  static __thread ff__plan plan;
  ff__error err = {0};
  ff_status st = ff__pipeline_parse_any_size(pipeline, &pipe, &err);
  if (st) return (int)st;
  ff__image_info info = {FF__FORMAT_PNG, w, h, 0};
  ff__plan_make(&pipe, seed, epoch, index, &info, 0, &plan);
  int n = 0;
  for (int i = 0; i < plan.num_steps; i++) {
    const ff__step *s = &plan.steps[i];
    if (s->kind != FF__STEP_ERASE) continue;
    if (n < cap) {
      int box[4] = {s->x, s->y, s->w, s->h};
      memcpy(boxes + 4 * n, box, sizeof box);
      for (int c = 0; c < 3; c++) fills[3 * n + c] = s->antialias ? NAN : s->aug.fill[c];
    }
    n++;
  }
  return n;
}
