/* shim_color.c — the colour augmentation ops (ops/color.c) exported for the
 * golden tests (ctypes), one op or a fused run of table ops on an HWC RGB
 * uint8 image. Test-only. */
#include <string.h>

#include "ops/augment.h"

#define SHIM_API __attribute__((visibility("default")))

/* Applies op `op` (an ff__aug_op) with argument `arg` to in (h x w x 3,
 * dense), written to out (not in place: ff_shim_aug_lut_run covers that):
 * table ops through ff__aug_lut_run with one op, the others through
 * ff__aug_color. Returns the ff_status. */
SHIM_API int ff_shim_aug_color(int op, double arg, const uint8_t *in_hwc, int h, int w, uint8_t *out_hwc) {
  if (op < 0 || op >= FF__AUG_COUNT || h < 0 || w < 0) return FF_EINVAL;
  ff__image src = {(uint8_t *)in_hwc, w, h, 3, (size_t)w * 3}, dst = {out_hwc, w, h, 3, (size_t)w * 3};
  ff__aug a = {.op = (ff__aug_op)op, .arg = arg};
  if (ff__aug_is_lut(a.op)) {
    ff__aug_lut_run(&a, 1, &src, &dst);
    return FF_OK;
  }
  ff__buf scratch = {0};
  ff_status st = ff__aug_color(&a, &src, &dst, &scratch);
  ff__buf_free(&scratch);
  return st;
}

/* Copies in to out and runs the n table ops ops[i] (with args[i]) on out as
 * one fused ff__aug_lut_run. FF_EINVAL when one of them is not a table op. */
SHIM_API int ff_shim_aug_lut_run(const int *ops, const double *args, int n, const uint8_t *in, int h, int w,
                                 uint8_t *out) {
  enum { MAX_OPS = 64 };
  if (n < 0 || n > MAX_OPS || h < 0 || w < 0) return FF_EINVAL;
  ff__aug a[MAX_OPS];
  for (int i = 0; i < n; i++) {
    if (ops[i] < 0 || ops[i] >= FF__AUG_COUNT || !ff__aug_is_lut((ff__aug_op)ops[i])) return FF_EINVAL;
    a[i] = (ff__aug){.op = (ff__aug_op)ops[i], .arg = args[i]};
  }
  memcpy(out, in, (size_t)h * w * 3);
  ff__image img = {out, w, h, 3, (size_t)w * 3};
  ff__aug_lut_run(a, n, &img, &img);
  return FF_OK;
}
