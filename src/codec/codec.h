/* codec.h — turning encoded bytes into RGB uint8 pixels.
 *
 * The format is recognised from the bytes (magic numbers), whatever the
 * file's name says. JPEG goes through libjpeg-turbo (baseline and
 * progressive; grayscale, CMYK and YCCK converted to RGB), PNG through
 * libspng (8/16-bit, palette, gray; alpha dropped, 16-bit reduced to its
 * high byte as torchvision.io's decode_png + to_dtype(uint8, scale=True)
 * does), WebP through libwebp, TIFF through libtiff, PBM/PGM/PPM and BMP
 * through small readers of their own (pnm.c, bmp.c); those four give
 * Pillow's open + convert('RGB') pixels (alpha dropped). A decode
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

typedef enum ff__format {
  FF__FORMAT_JPEG = 1,
  FF__FORMAT_PNG = 2,
  FF__FORMAT_WEBP = 3,
  FF__FORMAT_TIFF = 4,
  FF__FORMAT_PNM = 5, /* PBM, PGM, PPM */
  FF__FORMAT_BMP = 6,
} ff__format;

/* The format's short name ("jpeg", "png", "webp", "tiff", "pnm", "bmp"). */
const char *ff__format_name(ff__format format);

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
  int max_scans;             /* JPEG: refuse a file past this many scans (FF_EDATA); 0 = no limit */
  size_t max_metadata_bytes; /* PNG: the most bytes of ancillary chunks kept or any one chunk may have; 0 = no limit */
  int strict;                /* corrupt data the decoder repairs is an error (FF_EDATA), not a warning */
  ff__error *warning;        /* not NULL: gets the first repaired-damage message of the image (status FF_EDATA) */
} ff__decode_req;

/* Reads the header only. `name` (the file's path) goes into error messages.
 * Returns FF_OK, FF_EDATA (none of the formats above, corrupt header), FF_ETOOBIG. */
/* Whether the first n bytes of a file (n >= 12 for WebP) carry an image's
 * signature: what the decoder would take, without reading further. */
int ff__codec_is_image(const uint8_t *head, size_t n);

ff_status ff__codec_probe(const uint8_t *data, size_t size_bytes, const char *name,
                          uint64_t max_pixels, ff__image_info *out, ff__error *err);

/* The DCT scale n/8 (n = 1, 2, 4 or 8) at which a JPEG decode of req on a
 * width x height image runs: the smallest at which req's region stays at
 * least min_width x min_height (8 without a minimum). out_region gets the
 * region on that scale's pixel grid, the smallest range that covers it
 * (x, y, width, height): the image the decode returns. The planner uses it
 * to resample the region's exact fractional box from that image. req's
 * region must lie in the image (ff__codec_decode checks it). */
int ff__jpeg_dct_scale(const ff__decode_req *req, int width, int height, int out_region[4]);

/* Decodes req's region of the image to RGB (3 channels) into memory from
 * `pixels` (grown as needed, owned by the caller) and sets *out to it. With
 * DCT scaling the region comes out reduced: out->width/height tell by how
 * much. A JPEG is truncated when the rows the region needs ran out of data,
 * or a progressive file ends before its last scan. Bytes after the
 * end-of-image marker are accepted, as Pillow and libjpeg-turbo accept them;
 * so is a baseline file whose data is complete but lacks the final marker
 * (libjpeg-turbo decodes it with a warning; Pillow 9.4 and 13.0 refuse it as
 * truncated although every pixel is there); corrupt
 * entropy data that libjpeg repairs goes to req->warning, or fails under
 * req->strict. Returns FF_OK, FF_EDATA (message names the file and
 * the decoding library's reason), FF_ETOOBIG, FF_ENOMEM. */
ff_status ff__codec_decode(const uint8_t *data, size_t size_bytes, const char *name,
                           const ff__decode_req *req, ff__buf *pixels, ff__image *out,
                           ff__error *err);

/* ff__codec_decode with a JPEG decoded in `variant`'s arithmetic (PNG as
 * always): what the emulated device's decoder runs. */
ff_status ff__codec_decode_as(const uint8_t *data, size_t size_bytes, const char *name, const ff__decode_req *req,
                              ff__jpeg_variant variant, ff__buf *pixels, ff__image *out, ff__error *err);

#endif
