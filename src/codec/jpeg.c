/* jpeg.c — JPEG decoding through libjpeg-turbo's libjpeg API, the same
 * library and settings (ISLOW IDCT, fancy upsampling) that Pillow uses, so a
 * full decode is bit-identical to Pillow's. A request's region of interest
 * is decoded without the rest: rows above it are skipped
 * (jpeg_skip_scanlines), reading stops after its last row, and only the iMCU
 * columns it touches are decoded (jpeg_crop_scanline). With a minimum size
 * the decoder also picks the smallest DCT scaling n/8 that keeps the region
 * at least that big. libjpeg reports errors by longjmp and damage by
 * warnings. A file is truncated when the data ran out before the rows the
 * region needs (or before the last scan of a progressive file): that fails.
 * Bytes after the end-of-image marker and a missing marker after complete
 * baseline data are not damage (libjpeg-turbo decodes both, Pillow the
 * first: see codec.h). Corrupt
 * entropy data that libjpeg repaired is reported as a warning, or fails
 * under strict decoding; a decode that reaches the last row also reads up
 * to the end-of-image marker (jpeg_finish_decompress) so that damage
 * libjpeg only notices there is reported too (damage below a region, which
 * is never read, goes unnoticed). Files with more scans than the request
 * allows are refused before decoding: their scans are counted by walking
 * the marker segments (count_scans), in one pass over the bytes; the
 * progress monitor stays as a second guard. */
#include "codec/codec_internal.h"

#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

/* Why the crop window is wider than the region. Fancy upsampling computes a
 * pixel from its chroma sample and the neighbouring one; jpeg_crop_scanline
 * makes the window's edges behave as image edges (the edge sample is
 * replicated), so the first column of the window and, for an even window
 * width, its last column differ from a full decode when the window stops
 * inside the image. Widening the window by one pixel on each side (the left
 * edge is then rounded down to an iMCU boundary) keeps those columns out of
 * the region; the tests compare region decodes to full decodes pixel by
 * pixel. Vertically jpeg_skip_scanlines keeps the upsampler's context rows,
 * so skipping straight to the region's first row is exact. A window that
 * leaves a subsampled component fewer than 2 columns makes libjpeg-turbo
 * replace fancy upsampling by plain replication (jpeg_crop_scanline resets
 * the upsampler), so the window is also kept at least max_h_samp_factor + 1
 * pixels wide (3 for 4:2:0 and 4:2:2, 5 for 4:1:1), for 1-pixel regions at
 * the image's edges. */
enum { CROP_MARGIN_PX = 1 };

typedef struct jpeg_failure {
  struct jpeg_error_mgr mgr; /* first: libjpeg hands back a pointer to it */
  struct jpeg_progress_mgr progress;
  jmp_buf jump;
  char msg[JMSG_LENGTH_MAX];
  const ff__decode_req *req; /* NULL while probing */
  const char *name;
  ff__error *err;
  int saw_eof;               /* the data ran out (libjpeg then inserts an end-of-image marker) */
  int need_all;              /* reading the header: running out is truncation */
  int damaged;               /* corrupt data was repaired: msg_damage says how */
  char msg_damage[JMSG_LENGTH_MAX];
} jpeg_failure;

enum { JUMP_LIBJPEG = 1, JUMP_STATUS = 2 }; /* why fail() jumped: libjpeg's message, or err set already */

static _Noreturn void fail(j_common_ptr cinfo) {
  jpeg_failure *f = (jpeg_failure *)cinfo->err;
  cinfo->err->format_message(cinfo, f->msg);
  longjmp(f->jump, JUMP_LIBJPEG);
}

static _Noreturn void fail_truncated(jpeg_failure *f) {
  ff__error_set(f->err, FF_EDATA, "%s: truncated JPEG (the data ends before the rows it must decode)", f->name);
  longjmp(f->jump, JUMP_STATUS);
}

/* Trace messages are dropped. The data running out is truncation when
 * rows still need it (libjpeg then meets its inserted end-of-image marker
 * inside the entropy data) or when a multi-scan file has not been read to
 * its end; otherwise (only the final marker missing) it is harmless.
 * Corrupt-data warnings mean libjpeg repaired the image: they are kept
 * for the caller. Other warnings leave the image intact. */
static void on_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;
  jpeg_failure *f = (jpeg_failure *)cinfo->err;
  switch (cinfo->err->msg_code) {
  case JWRN_JPEG_EOF:
    f->saw_eof = 1;
    if (f->need_all || ((j_decompress_ptr)cinfo)->progressive_mode) fail_truncated(f);
    break;
  case JWRN_HIT_MARKER:
  case JWRN_HUFF_BAD_CODE:
  case JWRN_MUST_RESYNC:
  case JWRN_EXTRANEOUS_DATA:
  case JWRN_NOT_SEQUENTIAL:
  case JWRN_BOGUS_PROGRESSION:
    if (f->saw_eof) fail_truncated(f);
    if (!f->damaged) cinfo->err->format_message(cinfo, f->msg_damage);
    f->damaged = 1;
    break;
  default: break;
  }
}

/* Called by libjpeg as it reads the scans of a multi-scan file. */
static void on_progress(j_common_ptr cinfo) {
  jpeg_failure *f = (jpeg_failure *)cinfo->err;
  if (f->req && ff__codec_check_scans(f->req, ((j_decompress_ptr)cinfo)->input_scan_number, f->name, f->err))
    longjmp(f->jump, JUMP_STATUS);
}

typedef ff_status (*jpeg_job)(j_decompress_ptr cinfo, const char *name, void *arg, ff__error *err);

/* Sets up a decompressor on the bytes, reads the header and runs job; a
 * libjpeg error anywhere in between lands here with everything freed. Damage
 * that libjpeg repaired is reported per the request (ff__codec_damage). */
static ff_status with_header(const uint8_t *data, size_t size_bytes, const char *name,
                             const ff__decode_req *req, jpeg_job job, void *arg, ff__error *err) {
  struct jpeg_decompress_struct cinfo;
  jpeg_failure failure = {.req = req, .name = name, .err = err};
  cinfo.err = jpeg_std_error(&failure.mgr);
  failure.mgr.error_exit = fail;
  failure.mgr.emit_message = on_message;
  failure.progress.progress_monitor = on_progress;
  int why = setjmp(failure.jump);
  if (why) {
    jpeg_destroy_decompress(&cinfo);
    if (why == JUMP_STATUS) return err ? err->status : FF_EDATA;
    if (failure.mgr.msg_code == JERR_OUT_OF_MEMORY)
      return ff__error_set(err, FF_ENOMEM, "%s: out of memory decoding JPEG", name);
    return ff__error_set(err, FF_EDATA, "%s: corrupt JPEG: %s", name, failure.msg);
  }
  jpeg_create_decompress(&cinfo);
  cinfo.progress = &failure.progress;
  jpeg_mem_src(&cinfo, (unsigned char *)data, (unsigned long)size_bytes);
  failure.need_all = 1;
  jpeg_read_header(&cinfo, TRUE);
  failure.need_all = 0;
  ff_status st = job(&cinfo, name, arg, err);
  jpeg_destroy_decompress(&cinfo); /* also aborts a decode stopped after the region */
  if (!st && failure.damaged && req) st = ff__codec_damage(req, name, failure.msg_damage, err);
  return st;
}

typedef struct probe_args {
  uint64_t max_pixels;
  ff__image_info *out;
} probe_args;

static ff_status probe_job(j_decompress_ptr cinfo, const char *name, void *arg, ff__error *err) {
  const probe_args *a = arg;
  int w = (int)cinfo->image_width, h = (int)cinfo->image_height;
  ff_status st = ff__codec_check_pixels(name, w, h, a->max_pixels, err);
  if (st) return st;
  *a->out = (ff__image_info){FF__FORMAT_JPEG, w, h, cinfo->progressive_mode != 0};
  return FF_OK;
}

ff_status ff__jpeg_probe(const uint8_t *data, size_t size_bytes, const char *name,
                         uint64_t max_pixels, ff__image_info *out, ff__error *err) {
  probe_args a = {max_pixels, out};
  return with_header(data, size_bytes, name, NULL, probe_job, &a, err);
}

/* Only the scales n/8 with n in {1, 2, 4, 8} have SIMD inverse DCTs in
 * libjpeg-turbo; the others (3/8, 5/8, ...) run plain C transforms that
 * cost more than they save. The output grid of scale n/8 is
 * ceil(width * n / 8) pixels wide (jpeg_calc_output_dimensions). */
int ff__jpeg_dct_scale(const ff__decode_req *req, int width, int height, int out_region[4]) {
  int rx = 0, ry = 0, rw = width, rh = height;
  if (req->crop_width > 0) rx = req->crop_x, ry = req->crop_y, rw = req->crop_width, rh = req->crop_height;
  int want = req->min_width > 0 && req->min_height > 0;
  for (int n = want ? 1 : 8;; n *= 2) {
    int64_t gw = ((int64_t)width * n + 7) / 8, gh = ((int64_t)height * n + 7) / 8;
    int64_t x0 = (int64_t)rx * n / 8, y0 = (int64_t)ry * n / 8;
    int64_t x1 = ((int64_t)(rx + rw) * n + 7) / 8, y1 = ((int64_t)(ry + rh) * n + 7) / 8;
    if (x1 > gw) x1 = gw;
    if (y1 > gh) y1 = gh;
    if (n == 8 || (x1 - x0 >= req->min_width && y1 - y0 >= req->min_height)) {
      out_region[0] = (int)x0, out_region[1] = (int)y0;
      out_region[2] = (int)(x1 - x0), out_region[3] = (int)(y1 - y0);
      return n;
    }
  }
}

/* a*b/255 rounded to nearest, exactly (the same formula as Pillow's). */
static inline uint8_t mul255(unsigned a, unsigned b) {
  unsigned t = a * b + 128;
  return (uint8_t)((t + (t >> 8)) >> 8);
}

/* CMYK to RGB as Pillow does it: the stored values are read as inverted
 * inks (Adobe's convention, which nearly every CMYK JPEG follows), so
 * R = C*K/255, whether or not the file has an Adobe marker. Pillow and
 * torchvision.io both ignore the marker here. */
static void cmyk_to_rgb(const JSAMPLE *in, uint8_t *out, int width) {
  for (int x = 0; x < width; x++, in += 4, out += 3) {
    unsigned c = in[0], m = in[1], y = in[2], k = in[3];
    out[0] = mul255(c, k);
    out[1] = mul255(m, k);
    out[2] = mul255(y, k);
  }
}

/* After the region's last row: when that is the image's last row, reads on
 * to the end-of-image marker, where libjpeg notices leftover entropy data
 * (on_message records it). */
static ff_status finish(j_decompress_ptr cinfo, const ff__region *s) {
  if ((JDIMENSION)(s->y + s->height) == cinfo->output_height) jpeg_finish_decompress(cinfo);
  return FF_OK;
}

typedef struct decode_args {
  const ff__decode_req *req;
  ff__jpeg_variant variant;
  ff__buf *pixels;
  ff__image *out;
} decode_args;

static ff_status decode_job(j_decompress_ptr cinfo, const char *name, void *arg, ff__error *err) {
  const decode_args *a = arg;
  int w = (int)cinfo->image_width, h = (int)cinfo->image_height;
  ff_status st = ff__codec_check_pixels(name, w, h, a->req->max_pixels, err);
  if (st) return st;
  ff__region r;
  st = ff__codec_region(a->req, w, h, name, &r, err);
  if (st) return st;

  int cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  cinfo->dct_method = a->variant == FF__JPEG_EXACT ? JDCT_ISLOW : JDCT_IFAST;
  cinfo->do_fancy_upsampling = a->variant == FF__JPEG_EXACT;
  int grid[4];
  cinfo->scale_num = (unsigned)ff__jpeg_dct_scale(a->req, w, h, grid);
  cinfo->scale_denom = 8;
  const ff__region s = {grid[0], grid[1], grid[2], grid[3]};

  jpeg_start_decompress(cinfo);
  int full_width = (int)cinfo->output_width;
  int wx0 = s.x - CROP_MARGIN_PX, wx1 = s.x + s.width + CROP_MARGIN_PX;
  if (wx0 < 0) wx0 = 0;
  if (wx1 > full_width) wx1 = full_width;
  int min_window = cinfo->max_h_samp_factor + 1;
  if (wx1 - wx0 < min_window) wx1 = wx0 + min_window < full_width ? wx0 + min_window : full_width;
  if (wx1 - wx0 < min_window) wx0 = wx1 - min_window > 0 ? wx1 - min_window : 0;
  JDIMENSION win_x = (JDIMENSION)wx0, win_width = (JDIMENSION)(wx1 - wx0);
  if ((int)win_width < full_width) jpeg_crop_scanline(cinfo, &win_x, &win_width);
  int comps = cinfo->output_components;
  size_t offset = (size_t)(s.x - (int)win_x) * 3;
  if (s.y > 0) jpeg_skip_scanlines(cinfo, (JDIMENSION)s.y);

  if (cmyk) { /* converted row by row into a packed image */
    size_t stride = (size_t)s.width * 3;
    uint8_t *dst = ff__buf_reserve(a->pixels, stride * (size_t)s.height);
    if (!dst)
      return ff__error_set(err, FF_ENOMEM, "%s: out of memory for %dx%d pixels", name, s.width, s.height);
    JSAMPARRAY row =
        cinfo->mem->alloc_sarray((j_common_ptr)cinfo, JPOOL_IMAGE, win_width * (JDIMENSION)comps, 1);
    for (int y = 0; y < s.height; y++) {
      jpeg_read_scanlines(cinfo, row, 1);
      cmyk_to_rgb(row[0] + (size_t)(s.x - (int)win_x) * (size_t)comps, dst + (size_t)y * stride, s.width);
    }
    *a->out = (ff__image){dst, s.width, s.height, 3, stride};
    return finish(cinfo, &s);
  }
  /* RGB rows go straight into the buffer, the whole window wide; the image
   * is a view of the region inside it (no copy). */
  size_t stride = (size_t)win_width * 3;
  uint8_t *dst = ff__buf_reserve(a->pixels, stride * (size_t)s.height);
  if (!dst)
    return ff__error_set(err, FF_ENOMEM, "%s: out of memory for %dx%d pixels", name, (int)win_width, s.height);
  JSAMPROW rows[16];
  for (int y = 0; y < s.height;) {
    int n = s.height - y < 16 ? s.height - y : 16;
    for (int k = 0; k < n; k++) rows[k] = dst + (size_t)(y + k) * stride;
    y += (int)jpeg_read_scanlines(cinfo, rows, (JDIMENSION)n);
  }
  *a->out = (ff__image){dst + offset, s.width, s.height, 3, stride};
  return finish(cinfo, &s);
}

/* The scans (SOS markers) of a JPEG, counted by walking its marker
 * segments, up to stop + 1: a segment's length skips its payload (an APPn's
 * EXIF thumbnail and the markers inside it), and a scan's entropy-coded data
 * runs to the next 0xFF that is neither stuffing (0xFF00) nor a restart
 * marker. Costs one pass over the bytes, no decoding. */
static int count_scans(const uint8_t *d, size_t n, int stop) {
  int scans = 0;
  size_t i = 2;
  if (n < 2 || d[0] != 0xFF || d[1] != 0xD8) return 0;
  while (i + 1 < n && scans <= stop) {
    const uint8_t *ff = memchr(d + i, 0xFF, n - i); /* bytes between segments: libjpeg skips them too */
    if (!ff || (size_t)(ff - d) + 1 >= n) break;
    i = (size_t)(ff - d);
    uint8_t m = d[i + 1];
    if (m == 0xFF) { /* a fill byte */
      i++;
      continue;
    }
    i += 2;
    if (m == 0xD9) break; /* EOI */
    if (m == 0x00 || m == 0x01 || m == 0xD8 || (m >= 0xD0 && m <= 0xD7)) continue; /* no payload */
    if (i + 2 > n) break;
    size_t len = (size_t)d[i] << 8 | d[i + 1];
    if (len < 2) break;
    i += len;
    if (m != 0xDA) continue;
    scans++;
    while (i + 1 < n) {
      const uint8_t *next = memchr(d + i, 0xFF, n - i - 1);
      if (!next) {
        i = n;
        break;
      }
      i = (size_t)(next - d);
      if (d[i + 1] != 0x00 && !(d[i + 1] >= 0xD0 && d[i + 1] <= 0xD7)) break;
      i += 2;
    }
  }
  return scans;
}

ff_status ff__jpeg_decode(const uint8_t *data, size_t size_bytes, const char *name,
                          const ff__decode_req *req, ff__buf *pixels, ff__image *out,
                          ff__error *err) {
  return ff__jpeg_decode_as(data, size_bytes, name, req, FF__JPEG_EXACT, pixels, out, err);
}

ff_status ff__jpeg_decode_as(const uint8_t *data, size_t size_bytes, const char *name, const ff__decode_req *req,
                             ff__jpeg_variant variant, ff__buf *pixels, ff__image *out, ff__error *err) {
  ff__image img; /* *out only on success: the damage check comes after the decode */
  if (req && req->max_scans > 0) { /* a scan bomb is refused before any scan is decoded */
    ff_status st = ff__codec_check_scans(req, count_scans(data, size_bytes, req->max_scans), name, err);
    if (st) return st;
  }
  decode_args a = {req, variant, pixels, &img};
  ff_status st = with_header(data, size_bytes, name, req, decode_job, &a, err);
  if (!st) *out = img;
  return st;
}
