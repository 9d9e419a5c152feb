/* pixel.h — per-pixel arithmetic shared by the CPU ops and the device kernels.
 *
 * torchvision's uint8 tensor ops run in float32 with one rounding per
 * operator, except where PyTorch's compiled kernels fuse a multiply-add
 * (spec section 0). A fused a*b+c is computed here in double: the product
 * of two float32 values is exact in double, so one more rounding gives the
 * fused result (but for a double-rounding tie, vanishingly rare) on any
 * host or device, with or without an FMA unit. */
#ifndef FF_KERNELS_PIXEL_H
#define FF_KERNELS_PIXEL_H

#include <math.h>
#include <stdint.h>

#include "kernels/hd.h"

FF_HD static inline float ff__fma_f32(float a, float b, float c) {
  return (float)((double)a * (double)b + (double)c);
}

/* Round half to even and saturate to uint8 (torchvision's round() then cast). */
FF_HD static inline uint8_t ff__round_u8(float v) {
  if (!(v > 0.0f)) return 0;
  if (v >= 255.0f) return 255;
  return (uint8_t)lrintf(v);
}

#endif
