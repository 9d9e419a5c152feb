/* tiff.c — TIFF decoding through libtiff, from memory (TIFFClientOpenExt on
 * the encoded bytes), first image of the file, to RGB8 as Pillow's open +
 * convert('RGB') gives it. libtiff's messages go to a handler on this
 * handle (libtiff 4.5's per-handle handlers: no global state, so workers
 * decode at once) and the first error becomes the sample's message; one
 * allocation of libtiff, and our row buffer, is bounded by the pixel limit.
 *
 * Two paths. The layouts Pillow unpacks itself — strips of interleaved
 * samples, gray (MinIsBlack/MinIsWhite) of 1, 2, 4, 8 or 16 bits, palette
 * of 1..8 bits, RGB of 8 or 16 bits, with or without extra samples — are
 * read row by row (TIFFReadScanline, any compression) and converted as
 * Pillow converts them: gray of b bits scaled by 255 / (2^b - 1), MinIsWhite
 * inverted, the 16-bit colormap's high byte, 16-bit RGB's high byte, and
 * 16-bit gray (Pillow's mode I;16) clipped at 255 by convert('RGB'); extra
 * samples (alpha) dropped. Everything else (tiles, separate planes, YCbCr,
 * CMYK, CIELab, other depths) goes through libtiff's RGBA interface
 * (TIFFReadRGBAImageOriented), whose conversions are libtiff's (Pillow uses
 * the same interface for YCbCr). */
#include "codec/codec_internal.h"

#include <stdio.h>
#include <string.h>

#include <tiffio.h>

typedef struct memfile {
  const uint8_t *data;
  size_t size, at;
  const char *name;
  ff__error *err;
  int failed; /* libtiff reported an error: err holds the first one */
} memfile;

static tmsize_t mem_read(thandle_t h, void *buf, tmsize_t n) {
  memfile *m = h;
  size_t left = m->at < m->size ? m->size - m->at : 0;
  size_t k = (size_t)n < left ? (size_t)n : left;
  memcpy(buf, m->data + m->at, k);
  m->at += k;
  return (tmsize_t)k;
}
static tmsize_t mem_write(thandle_t h, void *buf, tmsize_t n) { return (void)h, (void)buf, (void)n, -1; }
static toff_t mem_seek(thandle_t h, toff_t off, int whence) {
  memfile *m = h;
  uint64_t base = whence == SEEK_CUR ? m->at : whence == SEEK_END ? m->size : 0;
  if (off > UINT64_MAX - base) return (toff_t)-1;
  m->at = (size_t)(base + off);
  return m->at;
}
static int mem_close(thandle_t h) { return (void)h, 0; }
static toff_t mem_size(thandle_t h) { return ((memfile *)h)->size; }
static int mem_map(thandle_t h, void **base, toff_t *size) {
  memfile *m = h;
  *base = (void *)m->data, *size = m->size;
  return 1;
}
static void mem_unmap(thandle_t h, void *base, toff_t size) { (void)h, (void)base, (void)size; }

static int on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
  (void)tif;
  memfile *m = user;
  if (!m->failed) {
    char text[256];
    vsnprintf(text, sizeof text, fmt, ap);
    ff__error_set(m->err, FF_EDATA, "%s: corrupt TIFF: %s%s%s", m->name, module ? module : "",
                  module ? ": " : "", text);
    m->failed = 1;
  }
  return 1;
}
static int on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
  return (void)tif, (void)user, (void)module, (void)fmt, (void)ap, 1;
}

static ff_status tiff_open(memfile *m, uint64_t max_pixels, TIFF **out) {
  TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
  if (!opts) return ff__error_set(m->err, FF_ENOMEM, "%s: out of memory decoding TIFF", m->name);
  TIFFOpenOptionsSetErrorHandlerExtR(opts, on_error, m);
  TIFFOpenOptionsSetWarningHandlerExtR(opts, on_warning, m);
  /* the RGBA raster (4 bytes a pixel) is the largest block we ask for */
  if (max_pixels) TIFFOpenOptionsSetMaxSingleMemAlloc(opts, (tmsize_t)(max_pixels * 4 + (1u << 20)));
  TIFF *tif = TIFFClientOpenExt(m->name, "r", m, mem_read, mem_write, mem_seek, mem_close, mem_size, mem_map,
                                mem_unmap, opts);
  TIFFOpenOptionsFree(opts);
  if (!tif) {
    if (!m->failed) ff__error_set(m->err, FF_EDATA, "%s: not a readable TIFF", m->name);
    return FF_EDATA;
  }
  *out = tif;
  return FF_OK;
}

static ff_status read_size(TIFF *tif, const memfile *m, uint64_t max_pixels, int *w, int *h) {
  uint32_t width = 0, height = 0;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height);
  if (!width || !height || width > INT32_MAX || height > INT32_MAX)
    return ff__error_set(m->err, FF_EDATA, "%s: TIFF image of %ux%u pixels", m->name, width, height);
  *w = (int)width, *h = (int)height;
  return ff__codec_check_pixels(m->name, *w, *h, max_pixels, m->err);
}

ff_status ff__tiff_probe(const uint8_t *data, size_t size_bytes, const char *name, uint64_t max_pixels,
                         ff__image_info *out, ff__error *err) {
  memfile m = {data, size_bytes, 0, name, err, 0};
  TIFF *tif;
  ff_status st = tiff_open(&m, max_pixels, &tif);
  if (st) return st;
  int w, h;
  st = read_size(tif, &m, max_pixels, &w, &h);
  TIFFClose(tif);
  if (!st) *out = (ff__image_info){FF__FORMAT_TIFF, w, h, 0};
  return st;
}

typedef struct layout {
  uint16_t photometric, bits, spp;
  uint16_t *cmap[3];
} layout;

/* Whether rows can be read and converted here (see the top of the file). */
static int is_plain(TIFF *tif, layout *L) {
  uint16_t planar = PLANARCONFIG_CONTIG;
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &L->bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &L->spp);
  if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &L->photometric)) return 0;
  uint16_t format = SAMPLEFORMAT_UINT;
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &format);
  if (TIFFIsTiled(tif) || planar != PLANARCONFIG_CONTIG || format != SAMPLEFORMAT_UINT) return 0;
  switch (L->photometric) {
  case PHOTOMETRIC_MINISBLACK:
  case PHOTOMETRIC_MINISWHITE:
    return L->spp >= 1 && (L->bits == 1 || L->bits == 2 || L->bits == 4 || L->bits == 8 || L->bits == 16);
  case PHOTOMETRIC_PALETTE:
    return L->spp == 1 && L->bits >= 1 && L->bits <= 8 &&
           TIFFGetField(tif, TIFFTAG_COLORMAP, &L->cmap[0], &L->cmap[1], &L->cmap[2]);
  case PHOTOMETRIC_RGB: return L->spp >= 3 && (L->bits == 8 || L->bits == 16);
  default: return 0;
  }
}

/* Sample i of a row of b-bit samples (b = 1..8 or 16, big-endian bits, host-order 16-bit). */
static unsigned sample(const uint8_t *row, size_t i, unsigned b) {
  if (b == 8) return row[i];
  if (b == 16) {
    uint16_t v;
    memcpy(&v, row + 2 * i, 2);
    return v;
  }
  size_t bit = i * b;
  return (row[bit / 8] >> (8 - b - bit % 8)) & ((1u << b) - 1);
}

static void convert_row(const layout *L, const uint8_t *row, uint8_t *dst, int width) {
  unsigned b = L->bits, max = b == 16 ? 65535u : (1u << b) - 1;
  for (int x = 0; x < width; x++, dst += 3) {
    size_t i = (size_t)x * L->spp;
    if (L->photometric == PHOTOMETRIC_RGB) {
      for (int c = 0; c < 3; c++)
        dst[c] = (uint8_t)(b == 16 ? sample(row, i + (size_t)c, b) >> 8 : row[i + (size_t)c]);
    } else if (L->photometric == PHOTOMETRIC_PALETTE) {
      unsigned v = sample(row, i, b);
      for (int c = 0; c < 3; c++)
        dst[c] = (uint8_t)(L->cmap[c][v] >> 8);
    } else {
      unsigned v = sample(row, i, b);
      if (L->photometric == PHOTOMETRIC_MINISWHITE) v = max - v;
      unsigned g = b == 16 ? (v > 255 ? 255 : v) : v * 255 / max;
      dst[0] = dst[1] = dst[2] = (uint8_t)g;
    }
  }
}

/* The row buffer is checked before it is taken: an uncompressed row must lie
 * in the file, and any row within libtiff's own allocation bound (a header
 * of a hundred bytes may declare thousands of samples a pixel). */
static ff_status decode_rows(TIFF *tif, memfile *m, const layout *L, int w, int h, uint64_t max_pixels,
                             uint8_t *rgb, ff__buf *row_buf) {
  tmsize_t n = TIFFScanlineSize(tif);
  size_t need = ((size_t)w * L->spp * L->bits + 7) / 8;
  if (n <= 0 || (size_t)n < need)
    return m->failed ? FF_EDATA : ff__error_set(m->err, FF_EDATA, "%s: corrupt TIFF (row size)", m->name);
  uint16_t compression = COMPRESSION_NONE;
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
  if (compression == COMPRESSION_NONE && (uint64_t)n > m->size)
    return ff__error_set(m->err, FF_EDATA, "%s: corrupt TIFF: uncompressed rows of %lld bytes (%d pixels of %u "
                         "samples of %u bits) in a file of %zu bytes", m->name, (long long)n, w, L->spp, L->bits,
                         m->size);
  if (max_pixels && (uint64_t)n > max_pixels * 4 + (1u << 20))
    return ff__error_set(m->err, FF_ETOOBIG, "%s: TIFF rows of %lld bytes (%d pixels of %u samples of %u bits): "
                         "over the memory the pixel limit allows (max_image_pixels %llu)", m->name, (long long)n, w,
                         L->spp, L->bits, (unsigned long long)max_pixels);
  uint8_t *row = ff__buf_reserve(row_buf, (size_t)n);
  if (!row) return ff__error_set(m->err, FF_ENOMEM, "%s: out of memory decoding TIFF", m->name);
  for (int y = 0; y < h; y++) {
    if (TIFFReadScanline(tif, row, (uint32_t)y, 0) < 0 || m->failed)
      return m->failed ? FF_EDATA : ff__error_set(m->err, FF_EDATA, "%s: corrupt TIFF (row %d)", m->name, y);
    convert_row(L, row, rgb + (size_t)y * (size_t)w * 3, w);
  }
  return FF_OK;
}

/* libtiff's RGBA interface: an ABGR raster, then packed to RGB in place. */
static ff_status decode_rgba(TIFF *tif, memfile *m, int w, int h, uint8_t *raster) {
  char why[1024];
  if (!TIFFRGBAImageOK(tif, why))
    return ff__error_set(m->err, FF_EDATA, "%s: unsupported TIFF: %s", m->name, why);
  if (!TIFFReadRGBAImageOriented(tif, (uint32_t)w, (uint32_t)h, (uint32_t *)(void *)raster,
                                 ORIENTATION_TOPLEFT, 0) ||
      m->failed)
    return m->failed ? FF_EDATA : ff__error_set(m->err, FF_EDATA, "%s: corrupt TIFF", m->name);
  for (size_t i = 0, n = (size_t)w * (size_t)h; i < n; i++) {
    uint32_t px;
    memcpy(&px, raster + 4 * i, 4);
    raster[3 * i] = (uint8_t)TIFFGetR(px), raster[3 * i + 1] = (uint8_t)TIFFGetG(px),
               raster[3 * i + 2] = (uint8_t)TIFFGetB(px);
  }
  return FF_OK;
}

ff_status ff__tiff_decode(const uint8_t *data, size_t size_bytes, const char *name, const ff__decode_req *req,
                          ff__buf *pixels, ff__image *out, ff__error *err) {
  memfile m = {data, size_bytes, 0, name, err, 0};
  TIFF *tif;
  ff_status st = tiff_open(&m, req->max_pixels, &tif);
  if (st) return st;
  int w = 0, h = 0;
  ff__region r;
  st = read_size(tif, &m, req->max_pixels, &w, &h);
  if (!st) st = ff__codec_region(req, w, h, name, &r, err);
  layout L = {0};
  int plain = !st && is_plain(tif, &L);
  size_t count = (size_t)w * (size_t)h;
  uint8_t *rgb = st ? NULL : ff__buf_reserve(pixels, count * (plain ? 3 : 4));
  if (!st && !rgb) st = ff__error_set(err, FF_ENOMEM, "%s: out of memory for %dx%d pixels", name, w, h);
  if (!st && plain) {
    ff__buf row = {0};
    st = decode_rows(tif, &m, &L, w, h, req->max_pixels, rgb, &row);
    ff__buf_free(&row);
  } else if (!st) {
    st = decode_rgba(tif, &m, w, h, rgb);
  }
  TIFFClose(tif);
  if (!st) *out = ff__codec_rgb_region(rgb, w, &r);
  return st;
}
