/* shim_pil.c — the Pillow-semantics ops (ops/pil.c) exported for the golden
 * tests (ctypes): one op on an HWC RGB uint8 image. Test-only. */
#include "ops/pil.h"

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
