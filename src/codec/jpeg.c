/* jpeg.c — JPEG decoding through libjpeg-turbo's libjpeg API, the same
 * library and settings (ISLOW IDCT, fancy upsampling) that Pillow uses, so a
 * full decode is bit-identical to Pillow's. A request's region of interest
 * is decoded without the rest: rows above it are skipped
 * (jpeg_skip_scanlines), reading stops after its last row, and only the iMCU
 * columns it touches are decoded (jpeg_crop_scanline). With a minimum size
 * the decoder also picks the smallest DCT scaling n/8 that keeps the region
 * at least that big. libjpeg reports errors by longjmp; the few warnings
 * that mean lost image data (truncation, corrupt entropy data) are turned
 * into errors too, so that a damaged file fails instead of coming back gray
 * (damage below a region, which is never read, goes unnoticed). */
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
 * so skipping straight to the region's first row is exact. */
enum { CROP_MARGIN_PX = 1 };

typedef struct jpeg_failure {
  struct jpeg_error_mgr mgr; /* first: libjpeg hands back a pointer to it */
  jmp_buf jump;
  char msg[JMSG_LENGTH_MAX];
} jpeg_failure;

static _Noreturn void fail(j_common_ptr cinfo) {
  jpeg_failure *f = (jpeg_failure *)cinfo->err;
  cinfo->err->format_message(cinfo, f->msg);
  longjmp(f->jump, 1);
}

/* Trace messages are dropped. Warnings that mean pixels were invented (data
 * ran out, entropy data is corrupt) fail the decode; the others (extraneous
 * bytes before a marker, odd progression) leave the image intact, and Pillow
 * accepts them too. */
static void on_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;
  switch (cinfo->err->msg_code) {
  case JWRN_JPEG_EOF:
  case JWRN_HIT_MARKER:
  case JWRN_HUFF_BAD_CODE:
  case JWRN_MUST_RESYNC: fail(cinfo);
  default: break;
  }
}

typedef ff_status (*jpeg_job)(j_decompress_ptr cinfo, const char *name, void *arg, ff__error *err);

/* Sets up a decompressor on the bytes, reads the header and runs job; a
 * libjpeg error anywhere in between lands here with everything freed. */
static ff_status with_header(const uint8_t *data, size_t size_bytes, const char *name, jpeg_job job,
                             void *arg, ff__error *err) {
  struct jpeg_decompress_struct cinfo;
  jpeg_failure failure;
  cinfo.err = jpeg_std_error(&failure.mgr);
  failure.mgr.error_exit = fail;
  failure.mgr.emit_message = on_message;
  if (setjmp(failure.jump)) {
    jpeg_destroy_decompress(&cinfo);
    if (failure.mgr.msg_code == JERR_OUT_OF_MEMORY)
      return ff__error_set(err, FF_ENOMEM, "%s: out of memory decoding JPEG", name);
    return ff__error_set(err, FF_EDATA, "%s: corrupt JPEG: %s", name, failure.msg);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, (unsigned char *)data, (unsigned long)size_bytes);
  jpeg_read_header(&cinfo, TRUE);
  ff_status st = job(&cinfo, name, arg, err);
  jpeg_destroy_decompress(&cinfo); /* also aborts a decode stopped after the region */
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
  return with_header(data, size_bytes, name, probe_job, &a, err);
}

/* r scaled by n/8 on the output grid of the current scale: the smallest
 * pixel range that covers it. */
static ff__region scale_region(j_decompress_ptr cinfo, const ff__region *r, int n) {
  int x0 = r->x * n / 8, y0 = r->y * n / 8;
  int x1 = (int)(((int64_t)(r->x + r->width) * n + 7) / 8);
  int y1 = (int)(((int64_t)(r->y + r->height) * n + 7) / 8);
  if (x1 > (int)cinfo->output_width) x1 = (int)cinfo->output_width;
  if (y1 > (int)cinfo->output_height) y1 = (int)cinfo->output_height;
  return (ff__region){x0, y0, x1 - x0, y1 - y0};
}

/* Sets the smallest scale n/8, n in {1, 2, 4, 8}, at which the region is
 * still at least the requested minimum (8/8 when there is none or nothing
 * smaller will do) and returns the region on that scale's output grid. Only
 * these four scales have SIMD inverse DCTs in libjpeg-turbo; the others
 * (3/8, 5/8, ...) run plain C transforms that cost more than they save. */
static ff__region choose_scale(j_decompress_ptr cinfo, const ff__region *r,
                               const ff__decode_req *req) {
  int want = req->min_width > 0 && req->min_height > 0;
  ff__region s;
  for (int n = want ? 1 : 8;; n *= 2) {
    cinfo->scale_num = (unsigned)n;
    cinfo->scale_denom = 8;
    jpeg_calc_output_dimensions(cinfo);
    s = scale_region(cinfo, r, n);
    if (n == 8 || (s.width >= req->min_width && s.height >= req->min_height)) return s;
  }
}

/* a*b/255 rounded to nearest, exactly (the same formula as Pillow's). */
static inline uint8_t mul255(unsigned a, unsigned b) {
  unsigned t = a * b + 128;
  return (uint8_t)((t + (t >> 8)) >> 8);
}

/* CMYK to RGB as Pillow does it. Adobe files store the inks inverted, so
 * there R = C*K/255; otherwise R = (255-C)*(255-K)/255. */
static void cmyk_to_rgb(const JSAMPLE *in, uint8_t *out, int width, int adobe) {
  for (int x = 0; x < width; x++, in += 4, out += 3) {
    unsigned c = in[0], m = in[1], y = in[2], k = in[3];
    if (!adobe) c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
    out[0] = mul255(c, k);
    out[1] = mul255(m, k);
    out[2] = mul255(y, k);
  }
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
  const ff__region s = choose_scale(cinfo, &r, a->req);

  jpeg_start_decompress(cinfo);
  int full_width = (int)cinfo->output_width;
  int wx0 = s.x - CROP_MARGIN_PX, wx1 = s.x + s.width + CROP_MARGIN_PX;
  if (wx0 < 0) wx0 = 0;
  if (wx1 > full_width) wx1 = full_width;
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
      cmyk_to_rgb(row[0] + (size_t)(s.x - (int)win_x) * (size_t)comps, dst + (size_t)y * stride, s.width,
                  cinfo->saw_Adobe_marker);
    }
    *a->out = (ff__image){dst, s.width, s.height, 3, stride};
    return FF_OK;
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
  return FF_OK;
}

ff_status ff__jpeg_decode(const uint8_t *data, size_t size_bytes, const char *name,
                          const ff__decode_req *req, ff__buf *pixels, ff__image *out,
                          ff__error *err) {
  return ff__jpeg_decode_as(data, size_bytes, name, req, FF__JPEG_EXACT, pixels, out, err);
}

ff_status ff__jpeg_decode_as(const uint8_t *data, size_t size_bytes, const char *name, const ff__decode_req *req,
                             ff__jpeg_variant variant, ff__buf *pixels, ff__image *out, ff__error *err) {
  decode_args a = {req, variant, pixels, out};
  return with_header(data, size_bytes, name, decode_job, &a, err);
}
