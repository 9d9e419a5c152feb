/* test_codec.c — the decoders against images encoded here with libjpeg and
 * libspng: header probing, region decodes compared pixel by pixel with full
 * decodes, the choice of DCT scale, colour conversions, and the failures
 * (truncated, corrupt, empty, foreign, oversized input). */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h>
#include <spng.h>
#include <sys/resource.h>
#include <zlib.h>

#include "codec/codec.h"

#define NAME "set/img_0042.jpg"

static uint32_t rng_state;
static uint32_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}

/* Gradients plus noise: chroma that changes from pixel to pixel, so that any
 * upsampling difference at a crop edge shows. */
static uint8_t *make_pixels(int w, int h, int comps, uint32_t seed) {
  rng_state = seed;
  uint8_t *p = malloc((size_t)w * h * comps);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < comps; c++)
        p[((size_t)y * w + x) * comps + c] =
            (uint8_t)((x * (c + 1) * 3 + y * 5 + (rng() % 64)) & 255);
  return p;
}

typedef struct jpeg_spec {
  int w, h;
  J_COLOR_SPACE in_cs; /* JCS_RGB, JCS_GRAYSCALE or JCS_CMYK */
  int h_samp, v_samp;  /* luma sampling factors: 2,2 = 4:2:0; 2,1 = 4:2:2; 1,1 = 4:4:4 */
  int progressive;
  int adobe; /* CMYK: write the Adobe marker (inverted inks) */
  int ycck;  /* CMYK: store as YCCK */
  int quality;
  const jpeg_scan_info *scans; /* a scan script of num_scans scans (progressive), or NULL */
  int num_scans;
} jpeg_spec;

static uint8_t *encode_jpeg(const jpeg_spec *s, const uint8_t *px, size_t *size) {
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr jerr;
  c.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&c);
  unsigned char *out = NULL;
  unsigned long n = 0;
  jpeg_mem_dest(&c, &out, &n);
  c.image_width = (JDIMENSION)s->w;
  c.image_height = (JDIMENSION)s->h;
  c.in_color_space = s->in_cs;
  c.input_components = s->in_cs == JCS_GRAYSCALE ? 1 : s->in_cs == JCS_CMYK ? 4 : 3;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, s->quality ? s->quality : 90, TRUE);
  if (s->ycck) jpeg_set_colorspace(&c, JCS_YCCK);
  if (s->in_cs == JCS_CMYK) c.write_Adobe_marker = s->adobe;
  c.comp_info[0].h_samp_factor = s->h_samp ? s->h_samp : 1;
  c.comp_info[0].v_samp_factor = s->v_samp ? s->v_samp : 1;
  if (s->progressive) jpeg_simple_progression(&c);
  if (s->scans) c.scan_info = s->scans, c.num_scans = s->num_scans;
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = (JSAMPROW)px + (size_t)c.next_scanline * s->w * c.input_components;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  *size = n;
  return out;
}

static uint8_t *make_jpeg(const jpeg_spec *s, size_t *size) {
  int comps = s->in_cs == JCS_GRAYSCALE ? 1 : s->in_cs == JCS_CMYK ? 4 : 3;
  uint8_t *px = make_pixels(s->w, s->h, comps, 7);
  uint8_t *jpg = encode_jpeg(s, px, size);
  free(px);
  return jpg;
}

/* Encodes a PNG with libspng; rows holds the samples (16-bit ones host-endian). */
static uint8_t *encode_png(struct spng_ihdr ihdr, const void *rows, size_t rows_bytes,
                           const struct spng_plte *plte, size_t *size) {
  spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  assert_int_equal(spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1), 0);
  assert_int_equal(spng_set_ihdr(ctx, &ihdr), 0);
  if (plte) assert_int_equal(spng_set_plte(ctx, (struct spng_plte *)plte), 0);
  assert_int_equal(spng_encode_image(ctx, rows, rows_bytes, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE), 0);
  int rc = 0;
  uint8_t *png = spng_get_png_buffer(ctx, size, &rc);
  assert_int_equal(rc, 0);
  spng_ctx_free(ctx);
  return png;
}

static ff__decode_req full_req(void) { return (ff__decode_req){0}; }

static ff__decode_req crop_req(int x, int y, int w, int h) {
  return (ff__decode_req){.crop_x = x, .crop_y = y, .crop_width = w, .crop_height = h};
}

/* Decodes and asserts success; the image stays valid until buf is reused. */
static ff__image decode_ok(const uint8_t *data, size_t size, ff__decode_req req, ff__buf *buf) {
  ff__image img;
  ff__error err = {0};
  ff_status st = ff__codec_decode(data, size, NAME, &req, buf, &img, &err);
  if (st) fprintf(stderr, "decode failed: %s\n", err.msg);
  assert_int_equal(st, FF_OK);
  assert_int_equal(img.channels, 3);
  return img;
}

/* Asserts that sub equals full's pixels at (x, y). */
static void assert_same_region(const ff__image *full, int x, int y, const ff__image *sub) {
  for (int r = 0; r < sub->height; r++) {
    const uint8_t *a = full->data + (size_t)(y + r) * full->stride + (size_t)x * 3;
    const uint8_t *b = sub->data + (size_t)r * sub->stride;
    if (memcmp(a, b, (size_t)sub->width * 3)) {
      for (int i = 0; i < sub->width * 3; i++)
        if (a[i] != b[i])
          fail_msg("region %dx%d at (%d,%d): row %d byte %d differs: full %d, region %d",
                   sub->width, sub->height, x, y, r, i, a[i], b[i]);
    }
  }
}

static void assert_decode_fails_req(const uint8_t *data, size_t size, ff__decode_req req, ff_status want,
                                    const char *want_text) {
  ff__buf buf = {0};
  ff__image img = {0};
  ff__error err = {0};
  assert_int_equal(ff__codec_decode(data, size, NAME, &req, &buf, &img, &err), want);
  assert_int_equal(err.status, want);
  assert_non_null(strstr(err.msg, NAME));
  assert_non_null(strstr(err.msg, want_text));
  assert_null(img.data); /* output untouched */
  ff__buf_free(&buf);
}

static void assert_decode_fails(const uint8_t *data, size_t size, ff_status want, const char *want_text) {
  ff__decode_req req = full_req();
  req.max_pixels = 1u << 20;
  assert_decode_fails_req(data, size, req, want, want_text);
}

/* ---- probe ---- */

static void test_probe_reports_size_and_progressive(void **state) {
  (void)state;
  size_t n;
  ff__image_info info;
  ff__error err = {0};
  uint8_t *jpg =
      make_jpeg(&(jpeg_spec){.w = 33, .h = 17, .in_cs = JCS_RGB, .h_samp = 2, .v_samp = 2}, &n);
  assert_int_equal(ff__codec_probe(jpg, n, NAME, 0, &info, &err), FF_OK);
  assert_int_equal(info.format, FF__FORMAT_JPEG);
  assert_int_equal(info.width, 33);
  assert_int_equal(info.height, 17);
  assert_int_equal(info.progressive, 0);
  free(jpg);
  jpg = make_jpeg(&(jpeg_spec){.w = 40, .h = 9, .in_cs = JCS_RGB, .progressive = 1}, &n);
  assert_int_equal(ff__codec_probe(jpg, n, NAME, 0, &info, &err), FF_OK);
  assert_int_equal(info.width, 40);
  assert_int_equal(info.height, 9);
  assert_int_equal(info.progressive, 1);
  free(jpg);

  uint8_t px[5 * 3 * 3] = {0};
  uint8_t *png = encode_png((struct spng_ihdr){.width = 5,
                                               .height = 3,
                                               .bit_depth = 8,
                                               .color_type = SPNG_COLOR_TYPE_TRUECOLOR,
                                               .interlace_method = 1},
                            px, sizeof px, NULL, &n);
  assert_int_equal(ff__codec_probe(png, n, NAME, 0, &info, &err), FF_OK);
  assert_int_equal(info.format, FF__FORMAT_PNG);
  assert_int_equal(info.width, 5);
  assert_int_equal(info.height, 3);
  assert_int_equal(info.progressive, 1);
  free(png);
}

/* ---- region of interest ---- */

/* Regions at the corners and edges, single pixels, odd offsets, and random
 * ones; every region decode must equal the full decode cropped. */
static void check_regions_exact(const jpeg_spec *s) {
  size_t n;
  uint8_t *jpg = make_jpeg(s, &n);
  ff__buf full_buf = {0}, buf = {0};
  ff__image full = decode_ok(jpg, n, full_req(), &full_buf);
  assert_int_equal(full.width, s->w);
  assert_int_equal(full.height, s->h);
  int w = s->w, h = s->h;
  int fixed[][4] = {{0, 0, w, h},           {0, 0, 1, 1},         {w - 1, h - 1, 1, 1},
                    {1, 1, w - 2, h - 2},   {16, 16, 16, 16},     {15, 17, 18, 20},
                    {w - 17, 3, 17, h - 3}, {0, h - 9, 9, 9},     {31, 0, 2, h},
                    {8, 8, 1, 31},          {17, 33, w - 17, 40}, {32, 32, 32, 32},
                    {0, 0, 1, h},           {w - 1, 0, 1, h},     {w - 2, 0, 2, h}};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
    ff__image sub =
        decode_ok(jpg, n, crop_req(fixed[i][0], fixed[i][1], fixed[i][2], fixed[i][3]), &buf);
    assert_int_equal(sub.width, fixed[i][2]);
    assert_int_equal(sub.height, fixed[i][3]);
    assert_same_region(&full, fixed[i][0], fixed[i][1], &sub);
  }
  rng_state = 12345;
  for (int i = 0; i < 60; i++) {
    int cw = 1 + (int)(rng() % (uint32_t)w), ch = 1 + (int)(rng() % (uint32_t)h);
    int x = (int)(rng() % (uint32_t)(w - cw + 1)), y = (int)(rng() % (uint32_t)(h - ch + 1));
    ff__image sub = decode_ok(jpg, n, crop_req(x, y, cw, ch), &buf);
    assert_same_region(&full, x, y, &sub);
  }
  ff__buf_free(&full_buf);
  ff__buf_free(&buf);
  free(jpg);
}

static void test_region_equals_full_decode_420(void **state) {
  (void)state;
  check_regions_exact(&(jpeg_spec){.w = 203, .h = 157, .in_cs = JCS_RGB, .h_samp = 2, .v_samp = 2});
}

static void test_region_equals_full_decode_422(void **state) {
  (void)state;
  check_regions_exact(&(jpeg_spec){.w = 203, .h = 157, .in_cs = JCS_RGB, .h_samp = 2, .v_samp = 1});
}

static void test_region_equals_full_decode_440(void **state) {
  (void)state;
  check_regions_exact(&(jpeg_spec){.w = 203, .h = 157, .in_cs = JCS_RGB, .h_samp = 1, .v_samp = 2});
}

static void test_region_equals_full_decode_444(void **state) {
  (void)state;
  check_regions_exact(&(jpeg_spec){.w = 203, .h = 157, .in_cs = JCS_RGB});
}

static void test_region_equals_full_decode_gray(void **state) {
  (void)state;
  check_regions_exact(&(jpeg_spec){.w = 203, .h = 157, .in_cs = JCS_GRAYSCALE});
}

static void test_region_equals_full_decode_progressive(void **state) {
  (void)state;
  check_regions_exact(&(jpeg_spec){
      .w = 203, .h = 157, .in_cs = JCS_RGB, .h_samp = 2, .v_samp = 2, .progressive = 1});
}

/* One-pixel-wide regions at both edges of an image whose width - 2 is a
 * multiple of the iMCU width (16 px for 4:2:0, 32 px for 4:1:1), where the
 * window would otherwise leave chroma a single column. */
static void test_region_equals_full_decode_at_aligned_edges(void **state) {
  (void)state;
  check_regions_exact(&(jpeg_spec){.w = 194, .h = 77, .in_cs = JCS_RGB, .h_samp = 2, .v_samp = 2});
  check_regions_exact(&(jpeg_spec){.w = 194, .h = 77, .in_cs = JCS_RGB, .h_samp = 4, .v_samp = 1});
  check_regions_exact(
      &(jpeg_spec){.w = 194, .h = 77, .in_cs = JCS_RGB, .h_samp = 2, .v_samp = 2, .progressive = 1});
}

static void test_region_equals_full_decode_cmyk(void **state) {
  (void)state;
  check_regions_exact(&(jpeg_spec){.w = 203, .h = 157, .in_cs = JCS_CMYK, .adobe = 1});
}

static void test_png_region_is_view_into_full_image(void **state) {
  (void)state;
  uint8_t *px = make_pixels(21, 13, 3, 3);
  size_t n;
  uint8_t *png = encode_png(
      (struct spng_ihdr){
          .width = 21, .height = 13, .bit_depth = 8, .color_type = SPNG_COLOR_TYPE_TRUECOLOR},
      px, 21 * 13 * 3, NULL, &n);
  ff__buf buf = {0};
  ff__image sub = decode_ok(png, n, crop_req(5, 4, 7, 9), &buf);
  assert_int_equal(sub.width, 7);
  assert_int_equal(sub.height, 9);
  assert_int_equal(sub.stride, 21 * 3);
  ff__image src = {px, 21, 13, 3, 21 * 3};
  assert_same_region(&src, 5, 4, &sub);
  ff__buf_free(&buf);
  free(png);
  free(px);
}

/* ---- DCT scaling ---- */

/* The rule, written out independently: region [x, x+w) at scale n/8 covers
 * floor(x*n/8) .. min(ceil((x+w)*n/8), ceil(W*n/8)); n is 1, 2, 4 or 8. */
static int scaled_len(int x, int len, int full, int n) {
  int hi = ((x + len) * n + 7) / 8, cap = (full * n + 7) / 8;
  return (hi < cap ? hi : cap) - x * n / 8;
}

static void test_dct_scale_is_smallest_that_keeps_minimum(void **state) {
  (void)state;
  jpeg_spec s = {.w = 203, .h = 157, .in_cs = JCS_RGB, .h_samp = 2, .v_samp = 2};
  size_t n;
  uint8_t *jpg = make_jpeg(&s, &n);
  ff__buf buf = {0}, full_buf = {0};
  /* Whole image 203x157 with minimum 51x40: 2/8 gives 51x40, 1/8 gives 26x20. */
  ff__decode_req req = {.min_width = 51, .min_height = 40};
  ff__image img = decode_ok(jpg, n, req, &buf);
  assert_int_equal(img.width, 51);
  assert_int_equal(img.height, 40);
  req.min_width = 52; /* 2/8 is now too small in width: 4/8 gives 102x79 (3/8 is not used) */
  img = decode_ok(jpg, n, req, &buf);
  assert_int_equal(img.width, 102);
  assert_int_equal(img.height, 79);
  req = (ff__decode_req){.min_width = 500, .min_height = 1}; /* never upscaled */
  img = decode_ok(jpg, n, req, &buf);
  assert_int_equal(img.width, 203);
  assert_int_equal(img.height, 157);

  rng_state = 99;
  for (int i = 0; i < 40; i++) {
    int cw = 8 + (int)(rng() % 190), ch = 8 + (int)(rng() % 150);
    int x = (int)(rng() % (uint32_t)(s.w - cw + 1)), y = (int)(rng() % (uint32_t)(s.h - ch + 1));
    int mw = 1 + (int)(rng() % (uint32_t)cw), mh = 1 + (int)(rng() % (uint32_t)ch);
    req = (ff__decode_req){
        .crop_x = x, .crop_y = y, .crop_width = cw, .crop_height = ch, .min_width = mw, .min_height = mh};
    img = decode_ok(jpg, n, req, &buf);
    int k = 1;
    while (k < 8 && (scaled_len(x, cw, s.w, k) < mw || scaled_len(y, ch, s.h, k) < mh)) k *= 2;
    assert_int_equal(img.width, scaled_len(x, cw, s.w, k));
    assert_int_equal(img.height, scaled_len(y, ch, s.h, k));
    assert_true(img.width >= mw && img.height >= mh);
    /* The scaled region equals the same scale's full decode, cropped. */
    ff__decode_req whole = {.min_width = (s.w * k + 7) / 8, .min_height = (s.h * k + 7) / 8};
    ff__image full = decode_ok(jpg, n, whole, &full_buf);
    assert_int_equal(full.width, (s.w * k + 7) / 8);
    assert_same_region(&full, x * k / 8, y * k / 8, &img);
  }
  ff__buf_free(&buf);
  ff__buf_free(&full_buf);
  free(jpg);
}

/* ---- colour ---- */

static void assert_pixel_near(const uint8_t *p, int r, int g, int b, int tol) {
  if (abs(p[0] - r) > tol || abs(p[1] - g) > tol || abs(p[2] - b) > tol)
    fail_msg("pixel (%d,%d,%d), want (%d,%d,%d) +-%d", p[0], p[1], p[2], r, g, b, tol);
}

static void check_flat_cmyk(int adobe, int ycck, int want_r, int want_g, int want_b, int tol) {
  const uint8_t cmyk[4] = {200, 100, 50, 230};
  uint8_t px[16 * 16 * 4];
  for (size_t i = 0; i < sizeof px; i++) px[i] = cmyk[i % 4];
  size_t n;
  jpeg_spec s = {.w = 16, .h = 16, .in_cs = JCS_CMYK, .adobe = adobe, .ycck = ycck, .quality = 100};
  uint8_t *jpg = encode_jpeg(&s, px, &n);
  ff__buf buf = {0};
  ff__image img = decode_ok(jpg, n, full_req(), &buf);
  assert_pixel_near(img.data + 5 * img.stride + 7 * 3, want_r, want_g, want_b, tol);
  ff__buf_free(&buf);
  free(jpg);
}

static void test_cmyk_converts_to_rgb(void **state) {
  (void)state;
  /* Stored values are inverted inks, with or without the Adobe marker (as
   * Pillow and torchvision.io read them): R = C*K/255 = 200*230/255 = 180.4 ... */
  check_flat_cmyk(1, 0, 180, 90, 45, 1);
  check_flat_cmyk(0, 0, 180, 90, 45, 1);
  check_flat_cmyk(1, 1, 180, 90, 45, 2); /* YCCK goes through a lossy YCC step */
}

static void test_gray_jpeg_becomes_equal_rgb(void **state) {
  (void)state;
  size_t n;
  uint8_t *jpg = make_jpeg(&(jpeg_spec){.w = 24, .h = 8, .in_cs = JCS_GRAYSCALE}, &n);
  ff__buf buf = {0};
  ff__image img = decode_ok(jpg, n, full_req(), &buf);
  for (int i = 0; i < 24 * 8; i++) {
    const uint8_t *p = img.data + i * 3;
    assert_int_equal(p[0], p[1]);
    assert_int_equal(p[1], p[2]);
  }
  ff__buf_free(&buf);
  free(jpg);
}

static void test_png_rgb8_and_interlaced_decode_exactly(void **state) {
  (void)state;
  uint8_t *px = make_pixels(19, 11, 3, 5);
  ff__buf buf = {0};
  for (int interlace = 0; interlace <= 1; interlace++) {
    size_t n;
    uint8_t *png = encode_png((struct spng_ihdr){.width = 19,
                                                 .height = 11,
                                                 .bit_depth = 8,
                                                 .color_type = SPNG_COLOR_TYPE_TRUECOLOR,
                                                 .interlace_method = (uint8_t)interlace},
                              px, 19 * 11 * 3, NULL, &n);
    ff__image img = decode_ok(png, n, full_req(), &buf);
    assert_int_equal(img.width, 19);
    assert_int_equal(img.height, 11);
    assert_memory_equal(img.data, px, 19 * 11 * 3);
    free(png);
  }
  ff__buf_free(&buf);
  free(px);
}

static void test_png_16bit_keeps_high_byte_and_drops_alpha(void **state) {
  (void)state;
  const uint16_t px[4] = {0x12ff, 0xab01, 0x8080, 0x0000}; /* RGBA, transparent */
  size_t n;
  uint8_t *png = encode_png(
      (struct spng_ihdr){
          .width = 1, .height = 1, .bit_depth = 16, .color_type = SPNG_COLOR_TYPE_TRUECOLOR_ALPHA},
      px, sizeof px, NULL, &n);
  ff__buf buf = {0};
  ff__image img = decode_ok(png, n, full_req(), &buf);
  assert_pixel_near(img.data, 0x12, 0xab, 0x80, 0);
  free(png);
  /* Gray 16-bit: 0x7fff -> 0x7f on all three channels. */
  const uint16_t gray[1] = {0x7fff};
  png = encode_png(
      (struct spng_ihdr){
          .width = 1, .height = 1, .bit_depth = 16, .color_type = SPNG_COLOR_TYPE_GRAYSCALE},
      gray, sizeof gray, NULL, &n);
  img = decode_ok(png, n, full_req(), &buf);
  assert_pixel_near(img.data, 0x7f, 0x7f, 0x7f, 0);
  free(png);
  ff__buf_free(&buf);
}

static void test_png_palette_and_gray_alpha_become_rgb(void **state) {
  (void)state;
  struct spng_plte plte = {.n_entries = 2};
  plte.entries[0] = (struct spng_plte_entry){10, 20, 30, 0};
  plte.entries[1] = (struct spng_plte_entry){200, 150, 100, 0};
  const uint8_t idx[3] = {1, 0, 1};
  size_t n;
  uint8_t *png = encode_png(
      (struct spng_ihdr){
          .width = 3, .height = 1, .bit_depth = 8, .color_type = SPNG_COLOR_TYPE_INDEXED},
      idx, sizeof idx, &plte, &n);
  ff__buf buf = {0};
  ff__image img = decode_ok(png, n, full_req(), &buf);
  assert_pixel_near(img.data, 200, 150, 100, 0);
  assert_pixel_near(img.data + 3, 10, 20, 30, 0);
  free(png);
  const uint8_t ga[4] = {77, 0, 99, 255}; /* gray 77 alpha 0, gray 99 alpha 255 */
  png = encode_png(
      (struct spng_ihdr){
          .width = 2, .height = 1, .bit_depth = 8, .color_type = SPNG_COLOR_TYPE_GRAYSCALE_ALPHA},
      ga, sizeof ga, NULL, &n);
  img = decode_ok(png, n, full_req(), &buf);
  assert_pixel_near(img.data, 77, 77, 77, 0);
  assert_pixel_near(img.data + 3, 99, 99, 99, 0);
  free(png);
  ff__buf_free(&buf);
}

/* ---- failures ---- */

static uint8_t *make_test_jpeg(size_t *n) {
  return make_jpeg(&(jpeg_spec){.w = 96, .h = 64, .in_cs = JCS_RGB, .h_samp = 2, .v_samp = 2}, n);
}

static void test_truncated_jpeg_fails(void **state) {
  (void)state;
  size_t n;
  uint8_t *jpg = make_test_jpeg(&n);
  /* The data ends before the rows the region needs: refused. */
  assert_decode_fails(jpg, n / 2, FF_EDATA, "truncated JPEG");
  assert_decode_fails(jpg, 40, FF_EDATA, "truncated JPEG"); /* cut inside the header */
  /* A region above the cut needs none of the missing rows: decoded (its
   * iMCU row and the next, which fancy upsampling reads, are there). */
  ff__buf buf = {0};
  decode_ok(jpg, n * 7 / 8, crop_req(0, 0, 96, 16), &buf);
  assert_decode_fails(jpg, n * 7 / 8, FF_EDATA, "truncated JPEG");
  /* Cut short but ending in a marker: libjpeg repairs it (gray rows), as Pillow
   * decodes it; a warning by default, an error under strict decoding. */
  jpg[n / 2 - 2] = 0xFF, jpg[n / 2 - 1] = 0xD9;
  ff__error warning = {0};
  ff__decode_req req = {.warning = &warning};
  decode_ok(jpg, n / 2, req, &buf);
  assert_int_equal(warning.status, FF_EDATA);
  assert_non_null(strstr(warning.msg, NAME));
  assert_non_null(strstr(warning.msg, "Corrupt JPEG data"));
  req.strict = 1;
  ff__error err = {0};
  ff__image img;
  assert_int_equal(ff__codec_decode(jpg, n / 2, NAME, &req, &buf, &img, &err), FF_EDATA);
  assert_non_null(strstr(err.msg, "strict_decode"));
  ff__buf_free(&buf);
  free(jpg);
}

/* A progressive file cut between two scans: libjpeg would show the scans it
 * has; Pillow refuses it as truncated, and so do we. */
static void test_truncated_progressive_jpeg_fails(void **state) {
  (void)state;
  size_t n;
  uint8_t *jpg = make_jpeg(&(jpeg_spec){.w = 64, .h = 48, .in_cs = JCS_RGB, .progressive = 1}, &n);
  size_t cut = 0; /* the start of the last SOS marker */
  for (size_t i = 2; i + 1 < n; i++)
    if (jpg[i] == 0xFF && jpg[i + 1] == 0xDA) cut = i;
  assert_true(cut > 0);
  assert_decode_fails(jpg, cut, FF_EDATA, "truncated JPEG");
  free(jpg);
}

static void test_corrupt_jpeg_entropy_data_is_a_warning_or_strict_error(void **state) {
  (void)state;
  size_t n;
  uint8_t *jpg = make_test_jpeg(&n);
  /* FF 00 is a stuffed 0xFF: a run of one-bits, which no Huffman code is. */
  for (size_t i = n / 2; i < n / 2 + 64; i += 2) jpg[i] = 0xFF, jpg[i + 1] = 0x00;
  ff__buf buf = {0};
  ff__error warning = {0};
  ff__decode_req req = {.warning = &warning};
  decode_ok(jpg, n, req, &buf); /* decoded, as Pillow decodes it */
  assert_int_equal(warning.status, FF_EDATA);
  assert_non_null(strstr(warning.msg, "Corrupt JPEG data"));
  req.strict = 1;
  assert_decode_fails_req(jpg, n, req, FF_EDATA, "Corrupt JPEG data");
  /* a clean file gives no warning */
  uint8_t *clean = make_test_jpeg(&n);
  warning = (ff__error){0};
  req.strict = 0;
  decode_ok(clean, n, req, &buf);
  assert_int_equal(warning.status, FF_OK);
  ff__buf_free(&buf);
  free(clean);
  free(jpg);
}

/* Bytes after the end-of-image marker (phone motion photos append a video)
 * and a missing marker after complete data: decoded, and equal to the clean
 * file, as libjpeg-turbo and Pillow decode them. Several trailer lengths,
 * across the old 4 KiB window. */
static void test_jpeg_trailing_data_and_missing_eoi_decode(void **state) {
  (void)state;
  size_t n;
  uint8_t *jpg = make_test_jpeg(&n);
  ff__buf ref_buf = {0}, buf = {0};
  ff__image ref = decode_ok(jpg, n, full_req(), &ref_buf);
  static const size_t trailers[] = {1, 100, 4095, 4096, 4097, 5000, 65536, 300000};
  for (size_t t = 0; t < sizeof trailers / sizeof trailers[0]; t++) {
    size_t m = n + trailers[t];
    uint8_t *big = malloc(m);
    memcpy(big, jpg, n);
    rng_state = (uint32_t)t + 1;
    for (size_t i = n; i < m; i++) big[i] = (uint8_t)rng();
    ff__error warning = {0};
    ff__decode_req req = {.warning = &warning};
    ff__image img = decode_ok(big, m, req, &buf);
    assert_same_region(&ref, 0, 0, &img);
    free(big);
  }
  ff__image img = decode_ok(jpg, n - 2, full_req(), &buf); /* no FF D9 */
  assert_same_region(&ref, 0, 0, &img);
  ff__buf_free(&ref_buf);
  ff__buf_free(&buf);
  free(jpg);
}

/* A progressive file whose every AC coefficient has its own scans: 3
 * components x 63 coefficients x 3 successive-approximation passes + 1 DC
 * scan = 568 scans, past the default limit of 500. */
static uint8_t *make_many_scan_jpeg(int w, int h, size_t *size) {
  static jpeg_scan_info scans[1 + 3 * 63 * 3];
  int k = 0;
  scans[k++] = (jpeg_scan_info){3, {0, 1, 2, 0}, 0, 0, 0, 0};
  for (int comp = 0; comp < 3; comp++)
    for (int coef = 1; coef < 64; coef++) {
      scans[k++] = (jpeg_scan_info){1, {comp, 0, 0, 0}, coef, coef, 0, 2};
      scans[k++] = (jpeg_scan_info){1, {comp, 0, 0, 0}, coef, coef, 2, 1};
      scans[k++] = (jpeg_scan_info){1, {comp, 0, 0, 0}, coef, coef, 1, 0};
    }
  return make_jpeg(&(jpeg_spec){.w = w, .h = h, .in_cs = JCS_RGB, .h_samp = 1, .v_samp = 1, .scans = scans,
                                .num_scans = k},
                   size);
}

static void test_progressive_scan_limit(void **state) {
  (void)state;
  size_t n;
  uint8_t *jpg = make_many_scan_jpeg(48, 32, &n);
  ff__decode_req req = {.max_scans = 500};
  assert_decode_fails_req(jpg, n, req, FF_EDATA, "more than 500 scans (max_jpeg_scans)");
  ff__buf buf = {0};
  req.max_scans = 0; /* no limit: it is a valid file */
  decode_ok(jpg, n, req, &buf);
  req.max_scans = 568;
  decode_ok(jpg, n, req, &buf);
  req.max_scans = 567;
  assert_decode_fails_req(jpg, n, req, FF_EDATA, "max_jpeg_scans");
  /* jpeg_simple_progression writes 10 scans for YCbCr */
  size_t m;
  uint8_t *simple = make_jpeg(&(jpeg_spec){.w = 64, .h = 48, .in_cs = JCS_RGB, .progressive = 1}, &m);
  req.max_scans = 10;
  decode_ok(simple, m, req, &buf);
  req.max_scans = 9;
  assert_decode_fails_req(simple, m, req, FF_EDATA, "max_jpeg_scans");
  ff__buf_free(&buf);
  free(simple);
  free(jpg);
}

/* The byte after the n-th SOS marker (FF DA) of a JPEG, found by search:
 * entropy-coded data never holds FF DA (byte stuffing). */
static size_t nth_sos(const uint8_t *jpg, size_t size, int nth) {
  for (size_t i = 0; i + 1 < size; i++)
    if (jpg[i] == 0xFF && jpg[i + 1] == 0xDA && --nth == 0) return i + 2;
  fail_msg("fewer SOS markers than asked for");
  return 0;
}

/* A scan bomb is refused before its first scan is decoded: its second scan
 * is made invalid (Ss > Se), which the decoder would fail on at once, yet
 * the message is the scan limit's. The count skips an APP1 (an EXIF
 * thumbnail's place) full of SOS markers. */
static void test_scan_bombs_are_counted_before_decoding(void **state) {
  (void)state;
  size_t n;
  uint8_t *jpg = make_many_scan_jpeg(48, 32, &n);
  size_t sos = nth_sos(jpg, n, 2); /* length (2), Ns = 1, Cs and Td/Ta, then Ss, Se */
  jpg[sos + 5] = 63, jpg[sos + 6] = 1;
  ff__decode_req req = {.max_scans = 500};
  assert_decode_fails_req(jpg, n, req, FF_EDATA, "more than 500 scans (max_jpeg_scans): refused before decoding");
  req.max_scans = 0; /* without the limit the decoder meets the bad scan */
  assert_decode_fails_req(jpg, n, req, FF_EDATA, "corrupt JPEG");
  free(jpg);

  size_t m;
  uint8_t *plain = make_jpeg(&(jpeg_spec){.w = 32, .h = 24, .in_cs = JCS_RGB}, &m);
  enum { SOS_IN_APP1 = 600, APP1 = 2 + 6 + 4 * SOS_IN_APP1 };
  uint8_t *exif = malloc(m + 2 + APP1);
  memcpy(exif, plain, 2); /* SOI, then an APP1 of 600 SOS markers, then the rest */
  uint8_t *app = exif + 2;
  app[0] = 0xFF, app[1] = 0xE1, app[2] = (uint8_t)(APP1 >> 8), app[3] = (uint8_t)APP1;
  memcpy(app + 4, "Exif\0\0", 6);
  for (int k = 0; k < SOS_IN_APP1; k++) memcpy(app + 10 + 4 * k, "\xFF\xDA\x00\x02", 4);
  memcpy(exif + 2 + 2 + APP1, plain + 2, m - 2);
  ff__buf buf = {0};
  req.max_scans = 500;
  decode_ok(exif, m + 2 + APP1, req, &buf);
  ff__buf_free(&buf);
  free(exif);
  free(plain);
}

static void test_empty_and_foreign_files_fail(void **state) {
  (void)state;
  uint8_t garbage[256];
  rng_state = 5;
  for (size_t i = 0; i < sizeof garbage; i++) garbage[i] = (uint8_t)rng();
  garbage[0] = 'G';
  assert_decode_fails(garbage, 0, FF_EDATA, "empty file");
  assert_decode_fails(garbage, sizeof garbage, FF_EDATA, "not an image (JPEG, PNG, WebP, TIFF, PBM/PGM/PPM or BMP)");
  const uint8_t soi_only[3] = {0xFF, 0xD8, 0xFF};
  assert_decode_fails(soi_only, sizeof soi_only, FF_EDATA, "truncated JPEG");
}

static uint8_t *make_test_png(size_t *n) {
  uint8_t *px = make_pixels(40, 30, 3, 11);
  uint8_t *png = encode_png(
      (struct spng_ihdr){
          .width = 40, .height = 30, .bit_depth = 8, .color_type = SPNG_COLOR_TYPE_TRUECOLOR},
      px, 40 * 30 * 3, NULL, n);
  free(px);
  return png;
}

/* Appends a PNG chunk (length, type, data, CRC) at *at. */
static uint8_t *put_chunk(uint8_t *at, const char *type, const uint8_t *data, size_t n) {
  uint8_t *start = at;
  *at++ = (uint8_t)(n >> 24), *at++ = (uint8_t)(n >> 16), *at++ = (uint8_t)(n >> 8), *at++ = (uint8_t)n;
  memcpy(at, type, 4), at += 4;
  if (n) memcpy(at, data, n), at += n;
  uLong crc = crc32(crc32(0L, Z_NULL, 0), start + 4, (uInt)(n + 4));
  *at++ = (uint8_t)(crc >> 24), *at++ = (uint8_t)(crc >> 16), *at++ = (uint8_t)(crc >> 8), *at++ = (uint8_t)crc;
  return at;
}

/* The 40x30 test PNG with a zTXt chunk inserted after IHDR whose text
 * inflates to text_bytes zero bytes (deflated in a stream: the text itself
 * is never in memory here). */
static uint8_t *make_ztxt_png(size_t text_bytes, size_t *size) {
  size_t n;
  uint8_t *png = make_test_png(&n);
  z_stream z = {0};
  assert_int_equal(deflateInit(&z, 9), Z_OK);
  size_t cap = text_bytes / 512 + 4096;
  uint8_t *deflated = malloc(cap);
  static const uint8_t zeros[65536];
  z.next_out = deflated, z.avail_out = (uInt)cap;
  for (size_t left = text_bytes;;) {
    size_t k = left < sizeof zeros ? left : sizeof zeros;
    z.next_in = (Bytef *)zeros, z.avail_in = (uInt)k;
    left -= k;
    int rc = deflate(&z, left ? Z_NO_FLUSH : Z_FINISH);
    assert_true(z.avail_out > 0);
    if (rc == Z_STREAM_END) break;
  }
  size_t zn = z.total_out;
  deflateEnd(&z);
  uint8_t *body = malloc(zn + 16);
  memcpy(body, "Comment\0\0", 9); /* keyword, NUL, compression method 0 */
  memcpy(body + 9, deflated, zn);
  uint8_t *out = malloc(n + zn + 64);
  size_t ihdr_end = 8 + 8 + 13 + 4;
  memcpy(out, png, ihdr_end);
  uint8_t *at = put_chunk(out + ihdr_end, "zTXt", body, zn + 9);
  memcpy(at, png + ihdr_end, n - ihdr_end);
  *size = (size_t)(at - out) + n - ihdr_end;
  free(body);
  free(deflated);
  free(png);
  return out;
}

static long max_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* A zTXt chunk that inflates to 256 MiB in a 260 KB file: refused at the
 * metadata limit, and the peak memory stays far below what inflating it
 * takes. Smaller texts, under the limit, decode. (First in the group: the
 * peak is the process's.) */
static void test_png_metadata_bomb_is_refused_with_bounded_memory(void **state) {
  (void)state;
  size_t n;
  uint8_t *bomb = make_ztxt_png((size_t)256 << 20, &n);
  long before = max_rss_kb();
  ff__decode_req req = {.max_metadata_bytes = (size_t)16 << 20};
  assert_decode_fails_req(bomb, n, req, FF_EDATA, "max_metadata_bytes");
  long grown_kb = max_rss_kb() - before;
  if (grown_kb > 64 * 1024) fail_msg("decoding the zTXt bomb grew the peak memory by %ld KiB", grown_kb);
  free(bomb);
  /* text bytes, a limit it passes, a limit it does not (libspng counts its
   * working copy of an inflated text too: a text passes under half the limit) */
  static const size_t cases[][3] = {{1000, 1 << 20, 0}, {100000, 1 << 20, 1 << 17}, {900000, 4 << 20, 1 << 18}};
  ff__buf buf = {0};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t *png = make_ztxt_png(cases[i][0], &n);
    req.max_metadata_bytes = cases[i][1];
    decode_ok(png, n, req, &buf);
    req.max_metadata_bytes = cases[i][2];
    if (cases[i][2]) assert_decode_fails_req(png, n, req, FF_EDATA, "max_metadata_bytes");
    free(png);
  }
  ff__buf_free(&buf);
}

static uint8_t *read_data_file(const char *name, size_t *size) {
  char path[1024];
  snprintf(path, sizeof path, "%s/hostile/%s", FF_TEST_DATA, name);
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  uint8_t *data = malloc((size_t)n);
  assert_int_equal(fread(data, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *size = (size_t)n;
  return data;
}

/* Reproducers: a 2.9 KB PNG whose text chunk declares 2 GiB (refused at
 * the chunk limit, not allocated); a JPEG with 5 KB of trailing data
 * (decoded). */
static void test_reproducers_png_text_2gib_and_jpeg_trailer(void **state) {
  (void)state;
  size_t n;
  uint8_t *png = read_data_file("bigalloc-png-text-chunk-2gib.png", &n);
  ff__decode_req req = {.max_metadata_bytes = (size_t)16 << 20};
  assert_decode_fails_req(png, n, req, FF_EDATA, "max_metadata_bytes");
  free(png);
  uint8_t *jpg = read_data_file("refused-jpeg-trailer-5k.jpg", &n);
  ff__buf buf = {0};
  ff__image img = decode_ok(jpg, n, full_req(), &buf);
  assert_true(img.width > 0 && img.height > 0);
  ff__buf_free(&buf);
  free(jpg);
}

static void test_truncated_png_fails(void **state) {
  (void)state;
  size_t n;
  uint8_t *png = make_test_png(&n);
  assert_decode_fails(png, n / 2, FF_EDATA, "corrupt PNG: ");
  assert_decode_fails(png, 20, FF_EDATA, "corrupt PNG: ");
  free(png);
}

static void test_png_crc_mismatch_fails(void **state) {
  (void)state;
  size_t n;
  uint8_t *png = make_test_png(&n);
  png[n / 2] ^= 0x01; /* inside IDAT */
  assert_decode_fails(png, n, FF_EDATA, "corrupt PNG: ");
  free(png);
}

static void test_huge_header_is_refused_before_allocating(void **state) {
  (void)state;
  size_t n;
  uint8_t *jpg = make_test_jpeg(&n);
  size_t sof = 2;
  while (!(jpg[sof] == 0xFF && jpg[sof + 1] == 0xC0))
    sof += 2 + (size_t)(jpg[sof + 2] << 8 | jpg[sof + 3]);
  /* SOF0: FF C0 len(2) precision(1) height(2) width(2); 60000 = 0xEA60 */
  jpg[sof + 5] = 0xEA, jpg[sof + 6] = 0x60, jpg[sof + 7] = 0xEA, jpg[sof + 8] = 0x60;
  clock_t t0 = clock();
  assert_decode_fails(jpg, n, FF_ETOOBIG,
                      "image is 60000x60000 = 3600000000 pixels, over the limit of 1048576 "
                      "(max_image_pixels)");
  assert_true((double)(clock() - t0) / CLOCKS_PER_SEC < 0.5);
  ff__image_info info;
  ff__error err = {0};
  assert_int_equal(ff__codec_probe(jpg, n, NAME, 1u << 20, &info, &err), FF_ETOOBIG);
  free(jpg);

  uint8_t *png = make_test_png(&n);
  ff__buf buf = {0};
  ff__image img;
  ff__decode_req req = {.max_pixels = 40 * 30 - 1};
  assert_int_equal(ff__codec_decode(png, n, NAME, &req, &buf, &img, &err), FF_ETOOBIG);
  assert_non_null(strstr(err.msg, "40x30 = 1200 pixels"));
  assert_null(buf.data); /* nothing allocated */
  free(png);
}

static void test_region_outside_image_is_invalid(void **state) {
  (void)state;
  size_t n;
  uint8_t *jpg = make_test_jpeg(&n);
  ff__buf buf = {0};
  ff__image img;
  ff__error err = {0};
  ff__decode_req req = crop_req(90, 0, 7, 4);
  assert_int_equal(ff__codec_decode(jpg, n, NAME, &req, &buf, &img, &err), FF_EINVAL);
  assert_non_null(strstr(err.msg, NAME));
  ff__buf_free(&buf);
  free(jpg);
}

/* ---- threads ---- */

typedef struct thread_job {
  const uint8_t *jpg;
  size_t n;
  const ff__image *want;
  int ok;
} thread_job;

static void *decode_many(void *arg) {
  thread_job *j = arg;
  ff__buf buf = {0};
  ff__error err;
  j->ok = 1;
  for (int i = 0; i < 20; i++) {
    ff__image img;
    ff__decode_req req = crop_req(3, 5, 60, 40);
    if (ff__codec_decode(j->jpg, j->n, NAME, &req, &buf, &img, &err) ||
        memcmp(img.data, j->want->data, (size_t)60 * 40 * 3))
      j->ok = 0;
  }
  ff__buf_free(&buf);
  return NULL;
}

static void test_concurrent_decodes_agree(void **state) {
  (void)state;
  size_t n;
  uint8_t *jpg = make_test_jpeg(&n);
  ff__buf buf = {0};
  ff__image want = decode_ok(jpg, n, crop_req(3, 5, 60, 40), &buf);
  pthread_t t[4];
  thread_job jobs[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (thread_job){jpg, n, &want, 0};
    pthread_create(&t[i], NULL, decode_many, &jobs[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    assert_true(jobs[i].ok);
  }
  ff__buf_free(&buf);
  free(jpg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_png_metadata_bomb_is_refused_with_bounded_memory),
      cmocka_unit_test(test_probe_reports_size_and_progressive),
      cmocka_unit_test(test_region_equals_full_decode_420),
      cmocka_unit_test(test_region_equals_full_decode_422),
      cmocka_unit_test(test_region_equals_full_decode_440),
      cmocka_unit_test(test_region_equals_full_decode_444),
      cmocka_unit_test(test_region_equals_full_decode_gray),
      cmocka_unit_test(test_region_equals_full_decode_progressive),
      cmocka_unit_test(test_region_equals_full_decode_at_aligned_edges),
      cmocka_unit_test(test_region_equals_full_decode_cmyk),
      cmocka_unit_test(test_png_region_is_view_into_full_image),
      cmocka_unit_test(test_dct_scale_is_smallest_that_keeps_minimum),
      cmocka_unit_test(test_cmyk_converts_to_rgb),
      cmocka_unit_test(test_gray_jpeg_becomes_equal_rgb),
      cmocka_unit_test(test_png_rgb8_and_interlaced_decode_exactly),
      cmocka_unit_test(test_png_16bit_keeps_high_byte_and_drops_alpha),
      cmocka_unit_test(test_png_palette_and_gray_alpha_become_rgb),
      cmocka_unit_test(test_truncated_jpeg_fails),
      cmocka_unit_test(test_truncated_progressive_jpeg_fails),
      cmocka_unit_test(test_corrupt_jpeg_entropy_data_is_a_warning_or_strict_error),
      cmocka_unit_test(test_jpeg_trailing_data_and_missing_eoi_decode),
      cmocka_unit_test(test_progressive_scan_limit),
      cmocka_unit_test(test_scan_bombs_are_counted_before_decoding),
      cmocka_unit_test(test_empty_and_foreign_files_fail),
      cmocka_unit_test(test_reproducers_png_text_2gib_and_jpeg_trailer),
      cmocka_unit_test(test_truncated_png_fails),
      cmocka_unit_test(test_png_crc_mismatch_fails),
      cmocka_unit_test(test_huge_header_is_refused_before_allocating),
      cmocka_unit_test(test_region_outside_image_is_invalid),
      cmocka_unit_test(test_concurrent_decodes_agree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
