/* limits.h — the checks every format decoder makes the same way: the pixel
 * limit, the region of interest, and the resource limits of a decode
 * request (scans, metadata), with messages that read the same whatever the
 * format. The lowest file of src/codec/: the format decoders (jpeg.c,
 * png.c) call it, codec.c dispatches to them; nothing here calls up. */
#ifndef FF_CODEC_LIMITS_H
#define FF_CODEC_LIMITS_H

#include "codec/codec.h"

/* A region of interest in pixels of the image it refers to. */
typedef struct ff__region {
  int x, y, width, height;
} ff__region;

/* FF_ETOOBIG (naming the file) when width*height exceeds max_pixels (0 = no limit). */
ff_status ff__codec_check_pixels(const char *name, int width, int height, uint64_t max_pixels,
                                 ff__error *err);

/* Resolves req's region for a width x height image into *out (the whole
 * image when crop_width == 0); FF_EINVAL when it is empty or leaves the image. */
ff_status ff__codec_region(const ff__decode_req *req, int width, int height, const char *name,
                           ff__region *out, ff__error *err);

/* Region r of the whole RGB8 image at rgb, width pixels wide (rows width * 3
 * bytes apart): the decoders that decode the whole image hand out its region so. */
ff__image ff__codec_rgb_region(uint8_t *rgb, int width, const ff__region *r);

/* FF_EDATA naming the file when a JPEG has read more than req->max_scans scans (0 = no limit). */
ff_status ff__codec_check_scans(const ff__decode_req *req, int scans, const char *name, ff__error *err);

/* Damage the decoder repaired (corrupt entropy data): FF_EDATA with the
 * message under req->strict; otherwise the message goes to req->warning (the
 * first one of the image is kept) and FF_OK is returned. */
ff_status ff__codec_damage(const ff__decode_req *req, const char *name, const char *what, ff__error *err);

/* Spreads count gray bytes into count RGB pixels (r = g = b). gray may lie
 * inside rgb at offset 2 * count or later (converted in place, front to back). */
void ff__codec_gray_to_rgb(const uint8_t *gray, uint8_t *rgb, size_t count);

#endif
