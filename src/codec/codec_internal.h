/* codec_internal.h — the per-format decoders codec.c dispatches to. Each
 * format file implements its pair and uses only the shared checks below it
 * (codec/limits.h); a new format plugs in the same way. */
#ifndef FF_CODEC_CODEC_INTERNAL_H
#define FF_CODEC_CODEC_INTERNAL_H

#include "codec/limits.h"

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

/* The formats below share one pair of signatures: probe (header only) and
 * decode (req's region to RGB8). Each file's opening comment says how its
 * pixels match Pillow's open + convert('RGB'). */
#define FF__DECODER_PAIR(fmt)                                                                          \
  ff_status ff__##fmt##_probe(const uint8_t *data, size_t size_bytes, const char *name, uint64_t max_pixels, \
                              ff__image_info *out, ff__error *err);                                    \
  ff_status ff__##fmt##_decode(const uint8_t *data, size_t size_bytes, const char *name,               \
                               const ff__decode_req *req, ff__buf *pixels, ff__image *out, ff__error *err)
FF__DECODER_PAIR(webp); /* webp.c: libwebp */
FF__DECODER_PAIR(tiff); /* tiff.c: libtiff */
FF__DECODER_PAIR(pnm);  /* pnm.c: PBM/PGM/PPM */
FF__DECODER_PAIR(bmp);  /* bmp.c: Windows bitmaps */

#endif
