/* pil.h — the Pillow-semantics augmentation ops (kernels/pil.h) on
 * interleaved RGB uint8 images: what timm's AutoAugment, RandAugment and
 * AugMix apply through PIL (docs/pillow-semantics.md). */
#ifndef FF_OPS_PIL_H
#define FF_OPS_PIL_H

#include "core/error.h"
#include "core/image.h"
#include "kernels/pil.h"

/* The warp of a geometric op p on a w x h image: Image.transform(AFFINE)'s
 * matrix as timm builds it (shear, translate) or Image.rotate does (the
 * angle taken modulo 360, cos and sin rounded to 15 decimals, about
 * (w/2, h/2)), and the sampling mode Pillow picks for it. Host only. */
void ff__pil_warp_setup(const ff__pil *p, int w, int h, ff__pil_warp *out);

/* The per-channel tables of op p for image src when it is a table op
 * (ff__pil_has_table: autocontrast and equalize from src's histogram,
 * contrast from its mean luma). Returns 1 when p is such an op, else 0. */
int ff__pil_tables(const ff__pil *p, const ff__image *src, uint8_t lut[3][256]);

/* Runs op p from src into dst (same size, 3 channels, memory distinct from
 * src, data and stride set by the caller). Returns FF_OK, or FF_EINVAL for
 * an image of other than 3 channels or an unknown op; GaussianBlur returns
 * ff__pil_blur_run's statuses (its scratch allocated and freed here). */
ff_status ff__pil_run(const ff__pil *p, const ff__image *src, ff__image *dst);

#endif
