/* pil_blur.h — Pillow's ImageFilter.GaussianBlur(radius) on interleaved RGB
 * uint8 images (kernels/pil_blur.h has the arithmetic; docs/pillow-semantics.md
 * the spec): what DINO and DeiT III's 3-Augment apply to their PIL images. */
#ifndef FF_OPS_PIL_BLUR_H
#define FF_OPS_PIL_BLUR_H

#include "core/error.h"
#include "core/image.h"
#include "kernels/pil_blur.h"

/* The extended box of each pass of GaussianBlur(radius) (radius: Pillow's,
 * the Gaussian's standard deviation in pixels, taken as float32 as Pillow
 * takes it). Host only: double sqrt and floor. */
ff__pil_box ff__pil_blur_box(double radius);

/* GaussianBlur(radius) of src into dst (same size, 3 channels, memory
 * distinct from src; data and stride set by the caller), with tmp as
 * scratch (grown to two images of src's size and two rows). Returns
 * FF_OK, FF_EINVAL for an image of other than 3 channels or a radius outside
 * [0, FF__PIL_BLUR_MAX_RADIUS], FF_ENOMEM when tmp cannot grow. */
ff_status ff__pil_blur_run(double radius, const ff__image *src, ff__image *dst, ff__buf *tmp);

#endif
