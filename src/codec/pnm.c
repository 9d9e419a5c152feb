/* pnm.c — Netpbm images (PBM P1/P4, PGM P2/P5, PPM P3/P6) to RGB8, read as
 * Pillow's PpmImagePlugin reads them, so that .convert('RGB') after it and
 * this decoder agree bit for bit. libnetpbm (Debian's libnetpbm10) is not
 * used: it reports errors through one process-wide longjmp buffer (or
 * exit()), reads only from a FILE, and keeps global state, none of which a
 * pool of decoding threads can share; the format is a header of ASCII
 * tokens before raw or ASCII samples, read here in bounds-checked steps.
 *
 * Pillow's semantics, which this follows:
 *   - header tokens are separated by whitespace, '#' starts a comment up to
 *     the end of the line; a token longer than 10 characters is refused;
 *     one whitespace byte separates the header from raw data;
 *   - maxval is 1..65535; raw samples take 1 byte below 256, else 2 (big
 *     endian);
 *   - a sample v becomes round(v / maxval * 255) (round half to even, in
 *     double, as Python's round), except gray with maxval > 255, which Pillow
 *     opens as mode I (round(v / maxval * 65535)) and convert('RGB') then
 *     clips at 255; maxval 255 is taken as is;
 *   - raw samples over maxval are clipped to it (after the scaling above);
 *     in the ASCII forms they are refused, as Pillow refuses them;
 *   - PBM: 1 is black, 0 white; raw rows are padded to a whole byte.
 * PFM (Pf/PF: float samples) is refused with a message. */
#include "codec/codec_internal.h"

#include <math.h>
#include <string.h>

typedef struct pnm_header {
  int kind; /* 1..6: the digit after 'P' */
  int width, height;
  int maxval; /* 1 for PBM */
  size_t data_offset;
} pnm_header;

static int is_space(uint8_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Skips whitespace and comments from *at. */
static void skip_space(const uint8_t *data, size_t size, size_t *at) {
  while (*at < size) {
    if (is_space(data[*at])) {
      (*at)++;
    } else if (data[*at] == '#') {
      while (*at < size && data[*at] != '\n' && data[*at] != '\r')
        (*at)++;
    } else {
      return;
    }
  }
}

/* A header number: decimal digits only, at most 10 of them, fitting an int. */
static ff_status read_number(const uint8_t *data, size_t size, size_t *at, const char *name, const char *what,
                             int *out, ff__error *err) {
  skip_space(data, size, at);
  int64_t v = 0;
  size_t digits = 0;
  while (*at < size && data[*at] >= '0' && data[*at] <= '9' && digits <= 10)
    v = v * 10 + (data[(*at)++] - '0'), digits++;
  if (!digits || digits > 10 || v > INT32_MAX || (*at < size && !is_space(data[*at]) && data[*at] != '#'))
    return ff__error_set(err, FF_EDATA, "%s: corrupt Netpbm header: bad %s", name, what);
  *out = (int)v;
  return FF_OK;
}

/* Reads and checks the header, max_pixels (0: no limit) included: the shared start of probe and decode. */
static ff_status read_header(const uint8_t *data, size_t size, const char *name, uint64_t max_pixels,
                             pnm_header *h, ff__error *err) {
  if (size < 2 || data[0] != 'P') return ff__error_set(err, FF_EDATA, "%s: not a Netpbm image", name);
  if (data[1] == 'f' || data[1] == 'F')
    return ff__error_set(err, FF_EDATA, "%s: PFM (floating-point Netpbm) images are not supported", name);
  if (data[1] < '1' || data[1] > '6')
    return ff__error_set(err, FF_EDATA, "%s: Netpbm kind P%c is not supported (P1..P6)", name, data[1]);
  h->kind = data[1] - '0';
  size_t at = 2;
  if (at < size && !is_space(data[at]) && data[at] != '#')
    return ff__error_set(err, FF_EDATA, "%s: corrupt Netpbm header: bad magic number", name);
  ff_status st = read_number(data, size, &at, name, "width", &h->width, err);
  if (!st) st = read_number(data, size, &at, name, "height", &h->height, err);
  h->maxval = 1;
  if (!st && h->kind != 1 && h->kind != 4) st = read_number(data, size, &at, name, "maxval", &h->maxval, err);
  if (st) return st;
  if (h->width <= 0 || h->height <= 0)
    return ff__error_set(err, FF_EDATA, "%s: Netpbm image of %dx%d pixels", name, h->width, h->height);
  if (h->maxval < 1 || h->maxval > 65535)
    return ff__error_set(err, FF_EDATA, "%s: Netpbm maxval %d (must be 1..65535)", name, h->maxval);
  if (at >= size) return ff__error_set(err, FF_EDATA, "%s: truncated Netpbm image (no pixel data)", name);
  h->data_offset = at + 1; /* the single whitespace byte after the header */
  return ff__codec_check_pixels(name, h->width, h->height, max_pixels, err);
}

ff_status ff__pnm_probe(const uint8_t *data, size_t size_bytes, const char *name, uint64_t max_pixels,
                        ff__image_info *out, ff__error *err) {
  pnm_header h;
  ff_status st = read_header(data, size_bytes, name, max_pixels, &h, err);
  if (!st) *out = (ff__image_info){FF__FORMAT_PNM, h.width, h.height, 0};
  return st;
}

/* The 8-bit value of a sample as Pillow's open + convert('RGB') gives it. */
static uint8_t scale_sample(unsigned v, int maxval, int gray) {
  if (maxval == 255) return (uint8_t)v;
  if (gray && maxval > 255) {
    double i = nearbyint((double)v / maxval * 65535.0);
    return i > 255.0 ? 255 : (uint8_t)i;
  }
  double s = nearbyint((double)v / maxval * 255.0);
  return s > 255.0 ? 255 : (uint8_t)s;
}

/* Raw samples (P5, P6) into dst, channels per pixel. */
static ff_status decode_raw(const uint8_t *data, size_t size, const pnm_header *h, int channels, uint8_t *dst,
                            const char *name, ff__error *err) {
  size_t bps = h->maxval < 256 ? 1 : 2;
  size_t n = (size_t)h->width * (size_t)h->height * (size_t)channels;
  if (size < h->data_offset || (size - h->data_offset) / bps < n)
    return ff__error_set(err, FF_EDATA, "%s: truncated Netpbm image (%zu bytes of pixel data, %zu needed)",
                         name, size < h->data_offset ? 0 : size - h->data_offset, n * bps);
  const uint8_t *p = data + h->data_offset;
  for (size_t i = 0; i < n; i++) {
    unsigned v = bps == 1 ? p[i] : (unsigned)p[2 * i] << 8 | p[2 * i + 1];
    if (v > (unsigned)h->maxval) v = (unsigned)h->maxval;
    dst[i] = scale_sample(v, h->maxval, channels == 1);
  }
  return FF_OK;
}

/* ASCII samples (P1, P2, P3): numbers separated by whitespace or comments;
 * P1's digits may also be written without separators. */
static ff_status decode_plain(const uint8_t *data, size_t size, const pnm_header *h, int channels,
                              uint8_t *dst, const char *name, ff__error *err) {
  size_t n = (size_t)h->width * (size_t)h->height * (size_t)channels;
  size_t at = h->data_offset;
  for (size_t i = 0; i < n; i++) {
    skip_space(data, size, &at);
    if (at >= size)
      return ff__error_set(err, FF_EDATA, "%s: truncated Netpbm image (%zu of %zu samples)", name, i, n);
    if (h->kind == 1) {
      if (data[at] != '0' && data[at] != '1')
        return ff__error_set(err, FF_EDATA, "%s: corrupt PBM data (a sample is not 0 or 1)", name);
      dst[i] = data[at++] == '1' ? 0 : 255;
      continue;
    }
    unsigned v = 0;
    size_t digits = 0;
    while (at < size && data[at] >= '0' && data[at] <= '9' && digits < 10)
      v = v * 10 + (unsigned)(data[at++] - '0'), digits++;
    if (!digits || (at < size && !is_space(data[at]) && data[at] != '#'))
      return ff__error_set(err, FF_EDATA, "%s: corrupt Netpbm data (sample %zu is not a number)", name, i);
    if (v > (unsigned)h->maxval)
      return ff__error_set(err, FF_EDATA, "%s: Netpbm sample %u over maxval %d", name, v, h->maxval);
    dst[i] = scale_sample(v, h->maxval, channels == 1);
  }
  return FF_OK;
}

/* Raw PBM (P4): rows of bits, most significant first, padded to a byte. */
static ff_status decode_bits(const uint8_t *data, size_t size, const pnm_header *h, uint8_t *dst,
                             const char *name, ff__error *err) {
  size_t row = ((size_t)h->width + 7) / 8;
  if (size < h->data_offset || (size - h->data_offset) / row < (size_t)h->height)
    return ff__error_set(err, FF_EDATA, "%s: truncated PBM image", name);
  const uint8_t *p = data + h->data_offset;
  for (int y = 0; y < h->height; y++)
    for (int x = 0; x < h->width; x++)
      dst[(size_t)y * (size_t)h->width + (size_t)x] =
          (p[(size_t)y * row + (size_t)x / 8] >> (7 - x % 8)) & 1 ? 0 : 255;
  return FF_OK;
}

/* The fewest bytes of pixel data the file must hold after its header:
 * checked before the pixels are allocated, so that a header of a few bytes
 * declaring millions of pixels takes no memory. ASCII samples take a byte
 * each at least (P1 may run its digits together), P2/P3 a separator too. */
static size_t min_data_bytes(const pnm_header *h, int channels) {
  size_t n = (size_t)h->width * (size_t)h->height * (size_t)channels;
  switch (h->kind) {
  case 1: return n;
  case 2:
  case 3: return 2 * n - 1;
  case 4: return ((size_t)h->width + 7) / 8 * (size_t)h->height;
  default: return n * (h->maxval < 256 ? 1 : 2);
  }
}

ff_status ff__pnm_decode(const uint8_t *data, size_t size_bytes, const char *name, const ff__decode_req *req,
                         ff__buf *pixels, ff__image *out, ff__error *err) {
  pnm_header h;
  ff_status st = read_header(data, size_bytes, name, req->max_pixels, &h, err);
  ff__region r;
  if (!st) st = ff__codec_region(req, h.width, h.height, name, &r, err);
  if (st) return st;
  int channels = h.kind == 3 || h.kind == 6 ? 3 : 1;
  size_t count = (size_t)h.width * (size_t)h.height;
  size_t held = size_bytes > h.data_offset ? size_bytes - h.data_offset : 0;
  if (held < min_data_bytes(&h, channels))
    return ff__error_set(err, FF_EDATA, "%s: truncated Netpbm image (%zu bytes of pixel data for %dx%d pixels, at "
                         "least %zu needed)", name, held, h.width, h.height, min_data_bytes(&h, channels));
  /* gray samples first go behind the RGB image's first third, then spread out in place */
  uint8_t *rgb = ff__buf_reserve(pixels, count * 3);
  if (!rgb)
    return ff__error_set(err, FF_ENOMEM, "%s: out of memory for %dx%d pixels", name, h.width, h.height);
  uint8_t *samples = channels == 3 ? rgb : rgb + 2 * count;
  if (h.kind == 4)
    st = decode_bits(data, size_bytes, &h, samples, name, err);
  else if (h.kind <= 3)
    st = decode_plain(data, size_bytes, &h, channels, samples, name, err);
  else
    st = decode_raw(data, size_bytes, &h, channels, samples, name, err);
  if (st) return st;
  if (channels == 1) ff__codec_gray_to_rgb(samples, rgb, count);
  *out = ff__codec_rgb_region(rgb, h.width, &r);
  return FF_OK;
}
