/* codec.c — the decoder front door: recognises the format by its magic bytes
 * and hands the bytes to jpeg.c or png.c. The checks both decoders share
 * (pixel limit, region of interest, resource limits) live below them, in
 * limits.c, so that their messages read the same whatever the format.
 * Everything here is pure: no globals, so any number of workers may decode
 * at once. */
#include "codec/codec_internal.h"

#include <string.h>

static const uint8_t jpeg_magic[3] = {0xFF, 0xD8, 0xFF};
static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

static ff_status sniff(const uint8_t *data, size_t size_bytes, const char *name, ff__format *out,
                       ff__error *err) {
  if (size_bytes == 0) return ff__error_set(err, FF_EDATA, "%s: empty file", name);
  if (size_bytes >= sizeof jpeg_magic && !memcmp(data, jpeg_magic, sizeof jpeg_magic)) {
    *out = FF__FORMAT_JPEG;
  } else if (size_bytes >= sizeof png_magic && !memcmp(data, png_magic, sizeof png_magic)) {
    *out = FF__FORMAT_PNG;
  } else {
    return ff__error_set(err, FF_EDATA, "%s: not a JPEG or PNG image", name);
  }
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
