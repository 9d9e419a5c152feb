/* codec.h — turning encoded bytes into RGB uint8 pixels.
 *
 * JPEG goes through libjpeg-turbo (baseline and progressive; grayscale, CMYK
 * and YCCK converted to RGB), PNG through libspng (8/16-bit, palette, gray;
 * alpha dropped, 16-bit reduced to its high byte as Pillow does). A decode
 * request names a region of interest, so that a random crop decodes only the
 * rows and iMCU columns it needs, and may let the JPEG decoder reduce the
 * image by 1/8..7/8 in the DCT domain while the region stays at least
 * min_width x min_height. */
#ifndef FF_CODEC_CODEC_H
#define FF_CODEC_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/image.h"

typedef enum ff__format { FF__FORMAT_JPEG = 1, FF__FORMAT_PNG = 2 } ff__format;

typedef struct ff__image_info {
  ff__format format;
  int width, height; /* full image, pixels */
  int progressive;   /* JPEG: progressive scan; PNG: interlaced */
} ff__image_info;

/* How a JPEG is decoded: libjpeg-turbo as Pillow sets it up, or the
 * arithmetic of a GPU decoder (nvJPEG: no fancy chroma upsampling, another
 * IDCT), which the emulated device's decoder uses to stand in for it. */
typedef enum ff__jpeg_variant {
  FF__JPEG_EXACT = 0,       /* ISLOW IDCT, fancy upsampling (Pillow's, bit for bit) */
  FF__JPEG_NVJPEG_LIKE = 1, /* IFAST IDCT, no fancy upsampling */
} ff__jpeg_variant;

typedef struct ff__decode_req {
  int crop_x, crop_y, crop_width, crop_height; /* region, full-image pixels; crop_width == 0: whole image */
  int min_width, min_height; /* > 0: JPEG may be DCT-scaled while the region stays at least this big */
  uint64_t max_pixels;       /* refuse images with width*height above this, before allocating; 0 = no limit */
} ff__decode_req;

/* Reads the header only. `name` (the file's path) goes into error messages.
 * Returns FF_OK, FF_EDATA (not a JPEG/PNG, corrupt header), FF_ETOOBIG. */
ff_status ff__codec_probe(const uint8_t *data, size_t size_bytes, const char *name,
                          uint64_t max_pixels, ff__image_info *out, ff__error *err);

/* Decodes req's region of the image to RGB (3 channels) into memory from
 * `pixels` (grown as needed, owned by the caller) and sets *out to it. With
 * DCT scaling the region comes out reduced: out->width/height tell by how
 * much. Returns FF_OK, FF_EDATA (message names the file and libjpeg's or
 * libspng's reason), FF_ETOOBIG, FF_ENOMEM. */
ff_status ff__codec_decode(const uint8_t *data, size_t size_bytes, const char *name,
                           const ff__decode_req *req, ff__buf *pixels, ff__image *out,
                           ff__error *err);

/* ff__codec_decode with a JPEG decoded in `variant`'s arithmetic (PNG as
 * always): what the emulated device's decoder runs. */
ff_status ff__codec_decode_as(const uint8_t *data, size_t size_bytes, const char *name, const ff__decode_req *req,
                              ff__jpeg_variant variant, ff__buf *pixels, ff__image *out, ff__error *err);

#endif
