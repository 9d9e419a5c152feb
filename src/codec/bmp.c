/* bmp.c — Windows bitmaps to RGB8, read as Pillow's BmpImagePlugin reads
 * them, so that .convert('RGB') after it and this decoder agree bit for bit.
 * Debian has no maintained BMP decoding library with a memory API (the
 * image toolkits that read BMP — GdkPixbuf, SDL_image, ImageMagick — are
 * whole frameworks), so the format's few layouts are read here, every offset
 * checked against the file's size.
 *
 * What is read (Pillow's set): the OS/2 core header (12 bytes, 3-byte
 * palette entries) and the Windows headers of 40, 52, 56, 64, 108 and 124
 * bytes; 1, 4 and 8 bits per pixel through the palette (an index past the
 * palette is black); 16 bits as 5-5-5 (BI_RGB) or the bit fields 5-6-5 and
 * 5-5-5, each field scaled as v * 255 / max (integer division, Pillow's
 * unpackers); 24 bits BGR; 32 bits BGRX (BI_RGB: the fourth byte is not
 * alpha) or the bit-field layouts Pillow lists (alpha dropped, as
 * convert('RGB') drops it). Rows run bottom-up, or top-down for a negative
 * height, each padded to 4 bytes. RLE4/RLE8 compression, embedded JPEG/PNG
 * and other bit-field layouts are refused with a message (Pillow decodes
 * RLE; Pillow refuses the rest). */
#include "codec/codec_internal.h"

#include <string.h>

enum { BI_RGB = 0, BI_RLE8 = 1, BI_RLE4 = 2, BI_BITFIELDS = 3 };

typedef struct bmp_header {
  int width, height, top_down;
  int bits, compression;
  uint32_t masks[4]; /* r, g, b, a bit fields */
  size_t pixel_offset;
  size_t palette_offset, palette_entry; /* 3 (core header) or 4 bytes */
  uint32_t colors;
} bmp_header;

static uint32_t le32(const uint8_t *p) {
  return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Reads and checks the header, max_pixels (0: no limit) included: the shared start of probe and decode. */
static ff_status read_header(const uint8_t *d, size_t size, const char *name, uint64_t max_pixels, bmp_header *h,
                             ff__error *err) {
  if (size < 18 || d[0] != 'B' || d[1] != 'M')
    return ff__error_set(err, FF_EDATA, "%s: not a BMP image", name);
  *h = (bmp_header){0};
  h->pixel_offset = le32(d + 10);
  uint32_t hsize = le32(d + 14);
  if (hsize != 12 && hsize != 40 && hsize != 52 && hsize != 56 && hsize != 64 && hsize != 108 && hsize != 124)
    return ff__error_set(err, FF_EDATA, "%s: unsupported BMP header size %u", name, hsize);
  if (size < 14 + (size_t)hsize) return ff__error_set(err, FF_EDATA, "%s: truncated BMP header", name);
  const uint8_t *b = d + 14;
  int64_t height;
  if (hsize == 12) {
    h->width = le16(b + 4), height = le16(b + 6), h->bits = le16(b + 10);
    h->palette_entry = 3;
  } else {
    h->width = (int32_t)le32(b + 4), height = (int32_t)le32(b + 8), h->bits = le16(b + 14);
    h->compression = (int)le32(b + 16);
    h->colors = le32(b + 32);
    h->palette_entry = 4;
  }
  h->top_down = height < 0;
  if (height < 0) height = -height;
  if (h->width <= 0 || height <= 0 || height > INT32_MAX)
    return ff__error_set(err, FF_EDATA, "%s: BMP image of %dx%lld pixels", name, h->width, (long long)height);
  h->height = (int)height;
  h->palette_offset = 14 + hsize;
  if (h->compression == BI_BITFIELDS) {
    size_t at =
        hsize >= 52 ? 14 + 40 : 14 + (size_t)hsize; /* masks inside the header, or after a 40-byte one */
    size_t n = hsize >= 56 ? 4 : 3;
    if (size < at + 4 * n) return ff__error_set(err, FF_EDATA, "%s: truncated BMP bit fields", name);
    for (size_t i = 0; i < n; i++)
      h->masks[i] = le32(d + at + 4 * i);
    if (hsize < 52) h->palette_offset += 12;
  } else if (h->compression == BI_RLE8 || h->compression == BI_RLE4) {
    return ff__error_set(err, FF_EDATA, "%s: RLE-compressed BMP images are not supported", name);
  } else if (h->compression != BI_RGB) {
    return ff__error_set(err, FF_EDATA, "%s: unsupported BMP compression %d", name, h->compression);
  }
  int bits = h->bits;
  if (bits != 1 && bits != 4 && bits != 8 && bits != 16 && bits != 24 && bits != 32)
    return ff__error_set(err, FF_EDATA, "%s: unsupported BMP pixel depth %d", name, bits);
  if (bits <= 8) {
    if (!h->colors) h->colors = 1u << bits;
    if (h->colors > 65536)
      return ff__error_set(err, FF_EDATA, "%s: BMP palette of %u colors", name, h->colors);
    if (h->palette_offset + (size_t)h->colors * h->palette_entry > size)
      return ff__error_set(err, FF_EDATA, "%s: truncated BMP palette", name);
  }
  if (h->compression == BI_BITFIELDS) {
    static const uint32_t ok32[][4] = {
        {0xFF0000, 0xFF00, 0xFF, 0},          {0xFF000000, 0xFF0000, 0xFF00, 0},
        {0xFF000000, 0xFF00, 0xFF, 0},        {0xFF000000, 0xFF0000, 0xFF00, 0xFF},
        {0xFF, 0xFF00, 0xFF0000, 0xFF000000}, {0xFF0000, 0xFF00, 0xFF, 0xFF000000},
        {0xFF000000, 0xFF00, 0xFF, 0xFF0000}, {0, 0, 0, 0}};
    int ok = 0;
    if (bits == 32)
      for (size_t i = 0; i < sizeof ok32 / sizeof *ok32; i++)
        ok |= !memcmp(ok32[i], h->masks, sizeof h->masks);
    if (bits == 32 && !memcmp(h->masks, ok32[7], sizeof h->masks)) /* all zero: BGRA, as Pillow takes it */
      h->masks[0] = 0xFF0000, h->masks[1] = 0xFF00, h->masks[2] = 0xFF;
    if (bits == 24) ok = h->masks[0] == 0xFF0000 && h->masks[1] == 0xFF00 && h->masks[2] == 0xFF;
    if (bits == 16)
      ok = (h->masks[0] == 0xF800 && h->masks[1] == 0x7E0 && h->masks[2] == 0x1F) ||
           (h->masks[0] == 0x7C00 && h->masks[1] == 0x3E0 && h->masks[2] == 0x1F);
    if (!ok) return ff__error_set(err, FF_EDATA, "%s: unsupported BMP bit-field layout", name);
  } else if (bits == 16) {
    h->masks[0] = 0x7C00, h->masks[1] = 0x3E0, h->masks[2] = 0x1F;
  } else if (bits >= 24) {
    h->masks[0] = 0xFF0000, h->masks[1] = 0xFF00, h->masks[2] = 0xFF;
  }
  return ff__codec_check_pixels(name, h->width, h->height, max_pixels, err);
}

ff_status ff__bmp_probe(const uint8_t *data, size_t size_bytes, const char *name, uint64_t max_pixels,
                        ff__image_info *out, ff__error *err) {
  bmp_header h;
  ff_status st = read_header(data, size_bytes, name, max_pixels, &h, err);
  if (!st) *out = (ff__image_info){FF__FORMAT_BMP, h.width, h.height, 0};
  return st;
}

/* A bit field's value scaled to 0..255: v * 255 / max, as Pillow's unpackers. */
static uint8_t field(uint32_t px, uint32_t mask) {
  if (!mask) return 0;
  int shift = __builtin_ctz(mask);
  uint32_t max = mask >> shift;
  uint32_t v = (px & mask) >> shift;
  return max == 255 ? (uint8_t)v : (uint8_t)(v * 255 / max);
}

ff_status ff__bmp_decode(const uint8_t *data, size_t size_bytes, const char *name, const ff__decode_req *req,
                         ff__buf *pixels, ff__image *out, ff__error *err) {
  bmp_header h;
  ff_status st = read_header(data, size_bytes, name, req->max_pixels, &h, err);
  ff__region r;
  if (!st) st = ff__codec_region(req, h.width, h.height, name, &r, err);
  if (st) return st;
  size_t row_bytes = ((size_t)h.width * (size_t)h.bits + 31) / 32 * 4;
  if (h.pixel_offset > size_bytes || (size_bytes - h.pixel_offset) / row_bytes < (size_t)h.height)
    return ff__error_set(err, FF_EDATA, "%s: truncated BMP image (the pixel rows end early)", name);
  size_t stride = (size_t)h.width * 3;
  uint8_t *rgb = ff__buf_reserve(pixels, stride * (size_t)h.height);
  if (!rgb)
    return ff__error_set(err, FF_ENOMEM, "%s: out of memory for %dx%d pixels", name, h.width, h.height);
  const uint8_t *pal = data + h.palette_offset;
  int bpp = h.bits / 8;
  for (int y = 0; y < h.height; y++) {
    const uint8_t *src = data + h.pixel_offset + (size_t)(h.top_down ? y : h.height - 1 - y) * row_bytes;
    uint8_t *dst = rgb + (size_t)y * stride;
    for (int x = 0; x < h.width; x++, dst += 3) {
      if (h.bits <= 8) {
        size_t bit = (size_t)x * (size_t)h.bits;
        unsigned idx = (src[bit / 8] >> (8 - h.bits - bit % 8)) & ((1u << h.bits) - 1);
        if (idx < h.colors) {
          const uint8_t *e = pal + (size_t)idx * h.palette_entry;
          dst[0] = e[2], dst[1] = e[1], dst[2] = e[0];
        } else {
          dst[0] = dst[1] = dst[2] = 0;
        }
        continue;
      }
      const uint8_t *p = src + (size_t)x * (size_t)bpp;
      uint32_t px = bpp == 2 ? le16(p) : bpp == 3 ? (uint32_t)(p[0] | p[1] << 8 | p[2] << 16) : le32(p);
      dst[0] = field(px, h.masks[0]), dst[1] = field(px, h.masks[1]), dst[2] = field(px, h.masks[2]);
    }
  }
  *out = ff__codec_rgb_region(rgb, h.width, &r);
  return FF_OK;
}
