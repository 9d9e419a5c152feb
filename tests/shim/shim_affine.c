/* shim_affine.c — the geometric augmentation ops (ff__aug_affine) exported
 * for the golden tests (ctypes). Test-only. */
#include <stdint.h>

#include "ops/augment.h"

#define SHIM_API __attribute__((visibility("default")))

/* Runs op (an ff__aug_op: shear, translate or rotate) with `arg` on the
 * dense HWC RGB image in_hwc (h x w) into out_hwc (same size). fill3: three
 * floats, read when has_fill. Returns 0, or -1 for a bad argument. */
SHIM_API int ff_shim_aug_affine(int op, double arg, int bilinear, int has_fill, const float *fill3,
                                const uint8_t *in_hwc, int h, int w, uint8_t *out_hwc) {
  if (op < FF__AUG_SHEAR_X || op > FF__AUG_ROTATE || h <= 0 || w <= 0 || (has_fill && !fill3)) return -1;
  ff__aug a = {(ff__aug_op)op, arg, bilinear != 0, has_fill != 0, {0, 0, 0}, 0};
  if (has_fill) a.fill[0] = fill3[0], a.fill[1] = fill3[1], a.fill[2] = fill3[2];
  ff__image src = {(uint8_t *)in_hwc, w, h, 3, (size_t)w * 3};
  ff__image dst = {out_hwc, w, h, 3, (size_t)w * 3};
  ff__aug_affine(&a, &src, &dst);
  return 0;
}
