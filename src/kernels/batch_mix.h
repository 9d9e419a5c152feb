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

/* Element k (0 .. 3*h*w - 1) of one image after the stage: dst is the
 * image's original value, src the partner's; kind 1 blends, 2 takes src
 * inside the box [y0, y1) x [x0, x1), 0 keeps dst. */
FF_HD static inline float ff__batch_mix_at(int kind, float a, float b, int y0, int y1, int x0, int x1, int h, int w,
                                           long k, float dst, float src) {
  if (kind == 1) return ff__batch_blend(dst, src, a, b);
  if (kind == 2) {
    long plane = (long)h * w, in = k % plane;
    int y = (int)(in / w), x = (int)(in % w);
    return y >= y0 && y < y1 && x >= x0 && x < x1 ? src : dst;
  }
  return dst;
}

#endif
