/* fuzz_decode.c — encoded bytes through the codec layer (every format: JPEG,
 * PNG, WebP, TIFF, PBM/PGM/PPM, BMP; the seeds hold each) as a
 * worker takes them: the header probe, then the whole image, then a region
 * of interest with DCT scaling, under a pixel limit. Any input must end in
 * FF_OK or a clear error; nothing may crash, leak or read out of bounds. */
#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h"

/* As fuzz_decode_ops: 4096x4096 let a 128-byte CCITT TIFF decode 16M pixels
 * (1 s plain, past the 10 s timeout instrumented on a busy machine). */
#define FUZZ_MAX_PIXELS (2048u * 2048u)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ff__error err = {0};
  ff__image_info info;
  if (ff__codec_probe(data, size, "fuzz", FUZZ_MAX_PIXELS, &info, &err) != FF_OK) return 0;
  ff__buf pixels = {0};
  ff__image img;
  ff__decode_req whole = {.max_pixels = FUZZ_MAX_PIXELS, .max_scans = 500, .max_metadata_bytes = 1 << 20};
  ff__codec_decode(data, size, "fuzz", &whole, &pixels, &img, &err);
  /* the centre half, DCT-scaled down to an eighth of it at most */
  int w = info.width / 2 ? info.width / 2 : 1, h = info.height / 2 ? info.height / 2 : 1;
  ff__decode_req region = {info.width / 4, info.height / 4, w, h, w / 8 + 1, h / 8 + 1, FUZZ_MAX_PIXELS,
                           .max_scans = 500, .max_metadata_bytes = 1 << 20};
  ff__codec_decode(data, size, "fuzz", &region, &pixels, &img, &err);
  ff__buf_free(&pixels);
  return 0;
}
