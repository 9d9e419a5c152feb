/* shim.c — internal entry points exported for the golden tests (ctypes), so
 * that the ops, the planner and the sampler can be compared with torchvision
 * on in-memory images without going through files. Test-only. */
#include <stdio.h>
#include <string.h>

#include "loader/sampler.h"
#include "ops/ops.h"
#include "pipeline/pipeline.h"

#define SHIM_API __attribute__((visibility("default")))

/* Runs `pipeline` (its decode op is skipped) on an HWC RGB uint8 image as
 * sample `index` of `epoch`. The output (NHWC uint8 or NCHW float32, see
 * *is_float) goes to out; returns the ff_status. */
SHIM_API int ff_shim_run_pipeline(const char *pipeline, const uint8_t *in, int height, int width,
                                  uint64_t seed, uint64_t epoch, uint64_t index, void *out,
                                  size_t out_cap_bytes, int *out_h, int *out_w, int *is_float,
                                  char *errmsg, int errmsg_cap) {
  static __thread ff__pipeline pipe;
  ff__error err = {0};
  ff_status st = ff__pipeline_parse(pipeline, &pipe, &err);
  ff__op_scratch scratch = {0};
  if (!st) {
    ff__image_info info = {FF__FORMAT_PNG, width, height, 0};
    ff__plan plan;
    ff__plan_make(&pipe, seed, epoch, index, &info, 0, &plan);
    ff__image img = {(uint8_t *)in, width, height, 3, (size_t)width * 3};
    if (plan.decode.crop_width) /* the region the decoder would have cut */
      ff__op_crop(&img, plan.decode.crop_x, plan.decode.crop_y, plan.decode.crop_width,
                  plan.decode.crop_height, NULL, &img);
    st = ff__ops_run(&plan, &scratch, &img, &err);
    size_t elem = pipe.output == FF__OUTPUT_NCHW_F32 ? 4 : 1;
    if (!st && (size_t)pipe.out_height * pipe.out_width * 3 * elem > out_cap_bytes)
      st = ff__error_set(&err, FF_EINVAL, "output buffer too small");
    if (!st) {
      ff__op_write_output(&pipe, &img, out, 0);
      *out_h = pipe.out_height, *out_w = pipe.out_width, *is_float = elem == 4;
    }
  }
  ff__op_scratch_free(&scratch);
  if (st && errmsg) snprintf(errmsg, (size_t)errmsg_cap, "%s", err.msg);
  return st;
}

/* The dataset indices rank `rank` gets in `epoch`; returns how many. */
SHIM_API long ff_shim_sampler(long n, int shuffle, uint64_t seed, uint64_t epoch, int rank,
                              int world_size, int drop_last, int64_t *perm, int64_t *out) {
  ff__sampler_indices((size_t)n, shuffle, seed, epoch, rank, world_size, drop_last, perm, out);
  return (long)ff__sampler_num_samples((size_t)n, world_size, drop_last);
}
