/* codec.c — the decoder front door: recognises the format by its magic bytes
 * and hands the bytes to jpeg.c or png.c. It also holds the checks both
 * decoders share (pixel limit, region of interest), so that their messages
 * read the same whatever the format. Everything here is pure: no globals, so
 * any number of workers may decode at once. */
#include "codec/codec_internal.h"

#include <string.h>

static const uint8_t jpeg_magic[3] = {0xFF, 0xD8, 0xFF};
static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

/* A JPEG ends with an EOI marker (FF D9), perhaps followed by a little
 * padding. A region decode stops at the region's last row, so a file cut
 * short below it would pass or fail depending on the random crop; checking
 * for the marker up front refuses a truncated file every time, as Pillow
 * does. */
static int has_jpeg_end(const uint8_t *data, size_t size_bytes) {
  size_t tail = size_bytes < 4096 ? size_bytes : 4096;
  for (size_t i = size_bytes - 1; i > size_bytes - tail; i--)
    if (data[i] == 0xD9 && data[i - 1] == 0xFF) return 1;
  return 0;
}

static ff_status sniff(const uint8_t *data, size_t size_bytes, const char *name, ff__format *out,
                       ff__error *err) {
  if (size_bytes == 0) return ff__error_set(err, FF_EDATA, "%s: empty file", name);
  if (size_bytes >= sizeof jpeg_magic && !memcmp(data, jpeg_magic, sizeof jpeg_magic)) {
    if (!has_jpeg_end(data, size_bytes))
      return ff__error_set(err, FF_EDATA, "%s: truncated JPEG (no end-of-image marker)", name);
    *out = FF__FORMAT_JPEG;
  } else if (size_bytes >= sizeof png_magic && !memcmp(data, png_magic, sizeof png_magic)) {
    *out = FF__FORMAT_PNG;
  } else {
    return ff__error_set(err, FF_EDATA, "%s: not a JPEG or PNG image", name);
  }
  return FF_OK;
}

ff_status ff__codec_check_pixels(const char *name, int width, int height, uint64_t max_pixels,
                                 ff__error *err) {
  uint64_t n = (uint64_t)width * (uint64_t)height;
  if (max_pixels && n > max_pixels)
    return ff__error_set(err, FF_ETOOBIG,
                         "%s: image is %dx%d = %llu pixels, over the limit of %llu "
                         "(max_image_pixels)",
                         name, width, height, (unsigned long long)n,
                         (unsigned long long)max_pixels);
  return FF_OK;
}

ff_status ff__codec_region(const ff__decode_req *req, int width, int height, const char *name,
                           ff__region *out, ff__error *err) {
  if (req->crop_width == 0) {
    *out = (ff__region){0, 0, width, height};
    return FF_OK;
  }
  const ff__region r = {req->crop_x, req->crop_y, req->crop_width, req->crop_height};
  if (r.x < 0 || r.y < 0 || r.width <= 0 || r.height <= 0 || r.x > width - r.width ||
      r.y > height - r.height)
    return ff__error_set(err, FF_EINVAL,
                         "%s: region %dx%d at (%d, %d) is not inside the %dx%d image", name,
                         r.width, r.height, r.x, r.y, width, height);
  *out = r;
  return FF_OK;
}

ff_status ff__codec_probe(const uint8_t *data, size_t size_bytes, const char *name,
                          uint64_t max_pixels, ff__image_info *out, ff__error *err) {
  ff__format format;
  ff_status st = sniff(data, size_bytes, name, &format, err);
  if (st) return st;
  if (format == FF__FORMAT_JPEG)
    return ff__jpeg_probe(data, size_bytes, name, max_pixels, out, err);
  return ff__png_probe(data, size_bytes, name, max_pixels, out, err);
}

ff_status ff__codec_decode(const uint8_t *data, size_t size_bytes, const char *name,
                           const ff__decode_req *req, ff__buf *pixels, ff__image *out,
                           ff__error *err) {
  return ff__codec_decode_as(data, size_bytes, name, req, FF__JPEG_EXACT, pixels, out, err);
}

ff_status ff__codec_decode_as(const uint8_t *data, size_t size_bytes, const char *name, const ff__decode_req *req,
                              ff__jpeg_variant variant, ff__buf *pixels, ff__image *out, ff__error *err) {
  ff__format format;
  ff_status st = sniff(data, size_bytes, name, &format, err);
  if (st) return st;
  if (format == FF__FORMAT_JPEG)
    return ff__jpeg_decode_as(data, size_bytes, name, req, variant, pixels, out, err);
  return ff__png_decode(data, size_bytes, name, req, pixels, out, err);
}
