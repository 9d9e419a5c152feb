/* batch_mix.h — the pixel arithmetic of the Mixup/CutMix batch stage on
 * float32 NCHW images, shared by the CPU stage (ops/batch_mix.c) and the
 * device kernels. Mixup is out = x * a + y * b with each product rounded to
 * float32 on its own (no fma), as torch computes timm's
 * `x.mul_(lam).add_(x_flipped.mul_(1 - lam))` and torchvision's
 * `x.roll(1, 0).mul_(1 - lam).add_(x.mul(lam))`; CutMix copies the box. */
#ifndef FF_KERNELS_BATCH_MIX_H
#define FF_KERNELS_BATCH_MIX_H

#include "kernels/hd.h"

FF_HD static inline float ff__batch_blend(float x, float y, float a, float b) {
  float p = x * a, q = y * b;
  return p + q;
}

#endif
