/* batch_mix.h — the pixel arithmetic of the Mixup/CutMix batch stage on
 * float32 NCHW images, shared by the CPU stage (ops/batch_mix.c) and the
 * device stage (kernels/stage.h, FF__DS_BATCH_MIX: emu and CUDA). Mixup is
 * out = x * a + y * b with each product rounded to float32 on its own (no
 * fma), as torch computes timm's `x.mul_(lam).add_(x_flipped.mul_(1 - lam))`
 * and torchvision's `x.roll(1, 0).mul_(1 - lam).add_(x.mul(lam))`; CutMix
 * copies the box. */
#ifndef FF_KERNELS_BATCH_MIX_H
#define FF_KERNELS_BATCH_MIX_H

#include "kernels/hd.h"

/* What happens to one image of the batch. */
typedef enum ff__mix_kind { FF__MIX_NONE, FF__MIX_BLEND, FF__MIX_CUT } ff__mix_kind;

/* One image's part of a batch's plan (ops/batch_mix.h); the device stage
 * reads an array of them from device memory, so it holds plain ints and
 * floats only. */
typedef struct ff__mix_elem {
  int partner;        /* the image it takes pixels from (its original, before the stage) */
  int kind;           /* ff__mix_kind */
  float a, b;         /* FF__MIX_BLEND: out = x * a + partner * b (float32, each product rounded) */
  int y0, y1, x0, x1; /* FF__MIX_CUT: rows [y0, y1), columns [x0, x1) come from the partner */
  float ta, tb;       /* targets: own one-hot * ta + partner's one-hot * tb */
} ff__mix_elem;

FF_HD static inline float ff__batch_blend(float x, float y, float a, float b) {
  float p = x * a, q = y * b;
  return p + q;
}

/* Element k (c * h * w + row * w + column) of an image of width w and
 * plane h * w mixed by m: x its own value, y its partner's original. */
FF_HD static inline float ff__batch_mix_value(const ff__mix_elem *m, float x, float y, int w, int plane,
                                              unsigned k) {
  if (m->kind == FF__MIX_BLEND) return ff__batch_blend(x, y, m->a, m->b);
  if (m->kind == FF__MIX_CUT) {
    int p = (int)(k % (unsigned)plane), row = p / w, col = p % w;
    if (row >= m->y0 && row < m->y1 && col >= m->x0 && col < m->x1) return y;
  }
  return x;
}

#endif
