/* codec_internal.h — what codec.c shares with the per-format decoders. */
#ifndef FF_CODEC_CODEC_INTERNAL_H
#define FF_CODEC_CODEC_INTERNAL_H

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

ff_status ff__jpeg_probe(const uint8_t *data, size_t size_bytes, const char *name,
                         uint64_t max_pixels, ff__image_info *out, ff__error *err);
ff_status ff__jpeg_decode(const uint8_t *data, size_t size_bytes, const char *name,
                          const ff__decode_req *req, ff__buf *pixels, ff__image *out,
                          ff__error *err);
/* ff__jpeg_decode in another arithmetic (codec.h, ff__jpeg_variant). */
ff_status ff__jpeg_decode_as(const uint8_t *data, size_t size_bytes, const char *name, const ff__decode_req *req,
                             ff__jpeg_variant variant, ff__buf *pixels, ff__image *out, ff__error *err);
ff_status ff__png_probe(const uint8_t *data, size_t size_bytes, const char *name,
                        uint64_t max_pixels, ff__image_info *out, ff__error *err);
ff_status ff__png_decode(const uint8_t *data, size_t size_bytes, const char *name,
                         const ff__decode_req *req, ff__buf *pixels, ff__image *out,
                         ff__error *err);

#endif
