/* shim_pil.c — the Pillow-semantics ops (ops/pil.c) exported for the golden
 * tests (ctypes): one op on an HWC RGB uint8 image. Test-only. */
#include <stdio.h>

#include "ops/pil.h"
#include "pipeline/pipeline.h"

#define SHIM_API __attribute__((visibility("default")))

/* Applies Pillow op `op` (an ff__pil_op) with argument arg, resampling
 * `resample` (ff__pil_resample) and fill colour fill[3] to in (h x w x 3,
 * dense) into out. Returns the ff_status. */
SHIM_API int ff_shim_pil(int op, double arg, int resample, const uint8_t *fill, const uint8_t *in_hwc, int h, int w,
                         uint8_t *out_hwc) {
  if (op < 0 || op >= FF__PIL_COUNT || h < 0 || w < 0) return FF_EINVAL;
  ff__image src = {(uint8_t *)in_hwc, w, h, 3, (size_t)w * 3}, dst = {out_hwc, w, h, 3, (size_t)w * 3};
  ff__pil p = {.op = (ff__pil_op)op, .arg = arg, .resample = resample};
  for (int c = 0; c < 3; c++) p.fill[c] = fill[c];
  return ff__pil_run(&p, &src, &dst);
}

/* The plan steps of sample (seed, epoch, index) of `pipeline` for an h x w
 * image with their Pillow fields: for step i, kinds[i] = ff__step_kind,
 * ops[i] = pil.op, args[i] = pil.arg, resample[i] = pil.resample,
 * weights[i] = weight (AugMix). Returns the number of steps (at most cap are
 * written), or the ff_status (negative) of parsing, with the message in
 * msg (msg_cap bytes). */
SHIM_API int ff_shim_plan_pil(const char *pipeline, int h, int w, uint64_t seed, uint64_t epoch, uint64_t index,
                              int *kinds, int *ops, double *args, int *resample, float *weights, int cap, char *msg,
                              int msg_cap) {
  static __thread ff__pipeline pipe;
  static __thread ff__plan plan;
  ff__error err = {0};
  ff_status st = ff__pipeline_parse_any_size(pipeline, &pipe, &err);
  if (st) {
    if (msg && msg_cap > 0) snprintf(msg, (size_t)msg_cap, "%s", err.msg);
    return (int)st;
  }
  ff__image_info info = {FF__FORMAT_PNG, w, h, 0};
  ff__plan_make(&pipe, seed, epoch, index, &info, 0, &plan);
  for (int i = 0; i < plan.num_steps && i < cap; i++) {
    kinds[i] = (int)plan.steps[i].kind;
    ops[i] = (int)plan.steps[i].pil.op;
    args[i] = plan.steps[i].pil.arg;
    resample[i] = plan.steps[i].pil.resample;
    weights[i] = plan.steps[i].weight;
  }
  return plan.num_steps;
}
