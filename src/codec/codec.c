/* codec.c — the decoder front door: recognises the format by its magic bytes
 * (never by the file's name: a .png that holds a JPEG decodes as the JPEG it
 * is) and hands the bytes to that format's file (jpeg.c, png.c, webp.c,
 * tiff.c, pnm.c, bmp.c). The checks the decoders share (pixel limit, region
 * of interest, resource limits) live below them, in limits.c, so that their
 * messages read the same whatever the format. Everything here is pure: no
 * globals, so any number of workers may decode at once. */
#include "codec/codec_internal.h"

#include <string.h>

typedef ff_status (*probe_fn)(const uint8_t *, size_t, const char *, uint64_t, ff__image_info *, ff__error *);
typedef ff_status (*decode_fn)(const uint8_t *, size_t, const char *, const ff__decode_req *, ff__buf *,
                               ff__image *, ff__error *);

typedef struct format_entry {
  ff__format format;
  const char *name;
  probe_fn probe;
  decode_fn decode; /* NULL: JPEG, which decodes in a variant */
} format_entry;

static const format_entry formats[] = {
    {FF__FORMAT_JPEG, "jpeg", ff__jpeg_probe, NULL},
    {FF__FORMAT_PNG, "png", ff__png_probe, ff__png_decode},
    {FF__FORMAT_WEBP, "webp", ff__webp_probe, ff__webp_decode},
    {FF__FORMAT_TIFF, "tiff", ff__tiff_probe, ff__tiff_decode},
    {FF__FORMAT_PNM, "pnm", ff__pnm_probe, ff__pnm_decode},
    {FF__FORMAT_BMP, "bmp", ff__bmp_probe, ff__bmp_decode},
};

static int starts(const uint8_t *data, size_t size, const char *magic, size_t n) {
  return size >= n && !memcmp(data, magic, n);
}

static ff_status sniff(const uint8_t *data, size_t size, const char *name, const format_entry **out,
                       ff__error *err) {
  if (size == 0) return ff__error_set(err, FF_EDATA, "%s: empty file", name);
  ff__format f = 0;
  if (starts(data, size, "\xFF\xD8\xFF", 3))
    f = FF__FORMAT_JPEG;
  else if (starts(data, size, "\x89PNG\r\n\x1A\n", 8))
    f = FF__FORMAT_PNG;
  else if (starts(data, size, "RIFF", 4) && size >= 12 && !memcmp(data + 8, "WEBP", 4))
    f = FF__FORMAT_WEBP;
  else if (starts(data, size, "II*\0", 4) || starts(data, size, "MM\0*", 4) ||
           starts(data, size, "II+\0", 4) || starts(data, size, "MM\0+", 4))
    f = FF__FORMAT_TIFF;
  else if (size >= 2 && data[0] == 'P' && data[1] && strchr("123456fF", data[1]))
    f = FF__FORMAT_PNM;
  else if (starts(data, size, "BM", 2))
    f = FF__FORMAT_BMP;
  if (!f)
    return ff__error_set(err, FF_EDATA, "%s: not an image (JPEG, PNG, WebP, TIFF, PBM/PGM/PPM or BMP)", name);
  *out = &formats[f - 1];
  return FF_OK;
}

int ff__codec_is_image(const uint8_t *head, size_t n) {
  const format_entry *f = NULL;
  return sniff(head, n, "", &f, NULL) == FF_OK;
}

const char *ff__format_name(ff__format format) {
  return format >= FF__FORMAT_JPEG && format <= FF__FORMAT_BMP ? formats[format - 1].name : "?";
}

ff_status ff__codec_probe(const uint8_t *data, size_t size_bytes, const char *name, uint64_t max_pixels,
                          ff__image_info *out, ff__error *err) {
  const format_entry *f = NULL;
  ff_status st = sniff(data, size_bytes, name, &f, err);
  return st ? st : f->probe(data, size_bytes, name, max_pixels, out, err);
}

ff_status ff__codec_decode(const uint8_t *data, size_t size_bytes, const char *name,
                           const ff__decode_req *req, ff__buf *pixels, ff__image *out, ff__error *err) {
  return ff__codec_decode_as(data, size_bytes, name, req, FF__JPEG_EXACT, pixels, out, err);
}

ff_status ff__codec_decode_as(const uint8_t *data, size_t size_bytes, const char *name,
                              const ff__decode_req *req, ff__jpeg_variant variant, ff__buf *pixels,
                              ff__image *out, ff__error *err) {
  const format_entry *f = NULL;
  ff_status st = sniff(data, size_bytes, name, &f, err);
  if (st) return st;
  if (!f->decode) return ff__jpeg_decode_as(data, size_bytes, name, req, variant, pixels, out, err);
  return f->decode(data, size_bytes, name, req, pixels, out, err);
}
