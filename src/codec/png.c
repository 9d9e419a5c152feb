/* png.c — PNG decoding through libspng. Every PNG kind (1..16-bit, gray,
 * palette, with or without alpha or tRNS, interlaced or not) is decoded
 * straight to RGB8, which libspng supports for all of them: alpha is
 * dropped, not composited, and 16-bit samples keep their high byte, as
 * torchvision.io.decode_png followed by to_dtype(uint8, scale=True) does
 * (and Pillow's convert('RGB') for RGB(A) and gray+alpha; for 16-bit gray
 * without alpha Pillow clips the value to 255 instead). CRCs are checked on
 * every chunk. Metadata is bounded: no chunk (its inflated text included) may
 * be longer than the request's max_metadata_bytes, nor all the ancillary
 * chunks libspng keeps together (libspng would otherwise allocate what a
 * corrupt length declares, or inflate a zTXt bomb); past it the file is
 * refused before the memory is taken (as Pillow refuses text chunks that
 * inflate past its MAX_TEXT_CHUNK). Pixel data (IDAT) is not bound by these
 * limits. PNG has no cheap region decode, so a region is a view into the
 * full image. */
#include "codec/codec_internal.h"

#include <stdint.h>

#include <spng.h>

static ff_status png_error(const char *name, int rc, size_t max_metadata_bytes, ff__error *err) {
  if (rc == SPNG_ECHUNK_LIMITS)
    return ff__error_set(err, FF_EDATA, "%s: PNG metadata (a chunk, or its inflated text) over %zu bytes "
                         "(max_metadata_bytes)", name, max_metadata_bytes);
  return ff__error_set(err, FF_EDATA, "%s: corrupt PNG: %s", name, spng_strerror(rc));
}

/* Opens the stream and reads IHDR: the shared start of probe and decode. */
static ff_status read_header(spng_ctx *ctx, const uint8_t *data, size_t size_bytes,
                             const char *name, uint64_t max_pixels, size_t max_metadata_bytes,
                             struct spng_ihdr *ihdr, ff__error *err) {
  /* One limit for a chunk (inflated text included) and for all kept: libspng
   * wants chunk <= cache and chunk <= INT32_MAX. IDAT is not bound by it. */
  size_t chunk = max_metadata_bytes && max_metadata_bytes < INT32_MAX ? max_metadata_bytes : INT32_MAX;
  size_t cache = max_metadata_bytes ? chunk : SIZE_MAX;
  int rc = spng_set_crc_action(ctx, SPNG_CRC_ERROR, SPNG_CRC_ERROR);
  if (!rc) rc = spng_set_chunk_limits(ctx, chunk, cache);
  if (!rc) rc = spng_set_png_buffer(ctx, data, size_bytes);
  if (!rc) rc = spng_get_ihdr(ctx, ihdr);
  if (rc) return png_error(name, rc, max_metadata_bytes, err);
  return ff__codec_check_pixels(name, (int)ihdr->width, (int)ihdr->height, max_pixels, err);
}

ff_status ff__png_probe(const uint8_t *data, size_t size_bytes, const char *name,
                        uint64_t max_pixels, ff__image_info *out, ff__error *err) {
  spng_ctx *ctx = spng_ctx_new(0);
  if (!ctx) return ff__error_set(err, FF_ENOMEM, "%s: out of memory decoding PNG", name);
  struct spng_ihdr ihdr;
  ff_status st = read_header(ctx, data, size_bytes, name, max_pixels, 0, &ihdr, err);
  spng_ctx_free(ctx);
  if (st) return st;
  *out = (ff__image_info){FF__FORMAT_PNG, (int)ihdr.width, (int)ihdr.height,
                          ihdr.interlace_method != 0};
  return FF_OK;
}

static ff_status decode(spng_ctx *ctx, const uint8_t *data, size_t size_bytes, const char *name,
                        const ff__decode_req *req, ff__buf *pixels, ff__image *out,
                        ff__error *err) {
  struct spng_ihdr ihdr;
  ff_status st = read_header(ctx, data, size_bytes, name, req->max_pixels, req->max_metadata_bytes, &ihdr, err);
  if (st) return st;
  int w = (int)ihdr.width, h = (int)ihdr.height;
  ff__region r;
  st = ff__codec_region(req, w, h, name, &r, err);
  if (st) return st;
  size_t size;
  int rc = spng_decoded_image_size(ctx, SPNG_FMT_RGB8, &size);
  if (rc) return png_error(name, rc, req->max_metadata_bytes, err);
  uint8_t *buf = ff__buf_reserve(pixels, size);
  if (!buf) return ff__error_set(err, FF_ENOMEM, "%s: out of memory for %dx%d pixels", name, w, h);
  rc = spng_decode_image(ctx, buf, size, SPNG_FMT_RGB8, 0);
  if (rc) return png_error(name, rc, req->max_metadata_bytes, err);
  *out = ff__codec_rgb_region(buf, w, &r);
  return FF_OK;
}

ff_status ff__png_decode(const uint8_t *data, size_t size_bytes, const char *name,
                         const ff__decode_req *req, ff__buf *pixels, ff__image *out,
                         ff__error *err) {
  spng_ctx *ctx = spng_ctx_new(0);
  if (!ctx) return ff__error_set(err, FF_ENOMEM, "%s: out of memory decoding PNG", name);
  ff_status st = decode(ctx, data, size_bytes, name, req, pixels, out, err);
  spng_ctx_free(ctx);
  return st;
}
