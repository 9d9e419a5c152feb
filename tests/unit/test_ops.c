/* test_ops.c — crop, flips, resize and the output writer on tiny images
 * whose results are worked out by hand from torchvision's definitions
 * (spec section 5). */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "ops/ops.h"

/* w x h RGB image over `px` (dense rows). */
static ff__image image_of(uint8_t *px, int w, int h) {
  ff__image img = {px, w, h, 3, (size_t)w * 3};
  return img;
}

/* Pixel value of channel c at (x, y): 100 * c + 10 * y + x, all distinct. */
static void fill(uint8_t *px, int w, int h) {
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < 3; c++)
        px[(y * w + x) * 3 + c] = (uint8_t)(100 * c + 10 * y + x);
}

static uint8_t at(const ff__image *img, int x, int y, int c) {
  return img->data[(size_t)y * img->stride + (size_t)x * 3 + c];
}

static void crop_inside_is_a_view(void **state) {
  (void)state;
  uint8_t px[4 * 3 * 3];
  fill(px, 4, 3);
  ff__image src = image_of(px, 4, 3), dst;
  ff__buf mem = {0};
  assert_int_equal(ff__op_crop(&src, 1, 1, 2, 2, &mem, &dst), FF_OK);
  assert_ptr_equal(dst.data, px + 1 * 12 + 1 * 3); /* no copy */
  assert_int_equal(dst.stride, 12);
  assert_int_equal(dst.width, 2);
  assert_int_equal(dst.height, 2);
  assert_int_equal(at(&dst, 0, 0, 0), 11);  /* source (1, 1) */
  assert_int_equal(at(&dst, 1, 1, 2), 222); /* source (2, 2), blue */
  assert_null(mem.data);
}

static void crop_outside_pads_with_zeros(void **state) {
  (void)state;
  uint8_t px[2 * 2 * 3];
  fill(px, 2, 2);
  ff__image src = image_of(px, 2, 2), dst;
  ff__buf mem = {0};
  /* box x = -1, y = 0, 3 x 3: one zero column on the left, one zero row below */
  assert_int_equal(ff__op_crop(&src, -1, 0, 3, 3, &mem, &dst), FF_OK);
  assert_ptr_equal(dst.data, mem.data);
  assert_int_equal(dst.width, 3);
  assert_int_equal(dst.height, 3);
  assert_int_equal(dst.stride, 9);
  for (int y = 0; y < 3; y++)
    for (int x = 0; x < 3; x++)
      for (int c = 0; c < 3; c++) {
        int sx = x - 1, sy = y; /* source pixel */
        int inside = sx >= 0 && sx < 2 && sy < 2;
        assert_int_equal(at(&dst, x, y, c), inside ? 100 * c + 10 * sy + sx : 0);
      }
  /* a box entirely outside is all zeros */
  assert_int_equal(ff__op_crop(&src, 5, 5, 2, 1, &mem, &dst), FF_OK);
  for (int i = 0; i < 6; i++)
    assert_int_equal(dst.data[i], 0);
  ff__buf_free(&mem);
}

static void hflip_reverses_the_columns(void **state) {
  (void)state;
  uint8_t px[3 * 2 * 3];
  fill(px, 3, 2);
  ff__image img = image_of(px, 3, 2);
  ff__op_hflip(&img);
  /* row y: x = 2, 1, 0 */
  for (int y = 0; y < 2; y++)
    for (int x = 0; x < 3; x++)
      for (int c = 0; c < 3; c++)
        assert_int_equal(at(&img, x, y, c), 100 * c + 10 * y + (2 - x));
}

static void vflip_reverses_the_rows(void **state) {
  (void)state;
  uint8_t px[3 * 2 * 3];
  fill(px, 3, 2);
  ff__image img = image_of(px, 3, 2);
  ff__op_vflip(&img);
  for (int y = 0; y < 2; y++)
    for (int x = 0; x < 3; x++)
      for (int c = 0; c < 3; c++)
        assert_int_equal(at(&img, x, y, c), 100 * c + 10 * (1 - y) + x);
  /* odd height: the middle row stays */
  uint8_t px3[1 * 3 * 3];
  fill(px3, 1, 3);
  img = image_of(px3, 1, 3);
  ff__op_vflip(&img);
  assert_int_equal(at(&img, 0, 0, 0), 20);
  assert_int_equal(at(&img, 0, 1, 0), 10);
  assert_int_equal(at(&img, 0, 2, 0), 0);
}

static void flips_respect_the_stride_of_a_view(void **state) {
  (void)state;
  uint8_t px[4 * 2 * 3];
  fill(px, 4, 2);
  ff__image src = image_of(px, 4, 2), view;
  ff__buf mem = {0};
  assert_int_equal(ff__op_crop(&src, 1, 0, 2, 2, &mem, &view), FF_OK);
  ff__op_hflip(&view);
  assert_int_equal(px[0], 0);     /* column 0 untouched */
  assert_int_equal(px[1 * 3], 2); /* columns 1 and 2 swapped */
  assert_int_equal(px[2 * 3], 1);
  assert_int_equal(px[3 * 3], 3); /* column 3 untouched */
  assert_int_equal(px[12 + 1 * 3], 12);
}

static void resize_to_the_same_size_is_the_identity(void **state) {
  (void)state;
  uint8_t px[7 * 5 * 3], out[7 * 5 * 3];
  for (size_t i = 0; i < sizeof px; i++)
    px[i] = (uint8_t)(i * 37 + 11);
  ff__image src = image_of(px, 7, 5);
  ff__op_scratch s = {0};
  for (int aa = 0; aa < 2; aa++) {
    memset(out, 0, sizeof out);
    ff__image dst = image_of(out, 7, 5);
    assert_int_equal(ff__op_resize(&src, 7, 5, aa, &s, &dst), FF_OK);
    assert_memory_equal(out, px, sizeof px);
  }
  ff__op_scratch_free(&s);
}

static void resize_two_pixels_to_one_averages_them(void **state) {
  (void)state;
  /* 2 x 1 → 1 x 1 with antialias: scale 2, centre 1, taps 0 and 1 with tent
   * weights 0.75 and 0.75, renormalised to 0.5 each. (10 + 20) / 2 = 15,
   * (20 + 41) / 2 = 30.5 → 30 and (30 + 255) / 2 = 142.5 → 142 (half to even). */
  uint8_t px[2 * 3] = {10, 20, 30, 20, 41, 255}, out[3] = {0};
  ff__image src = image_of(px, 2, 1), dst = image_of(out, 1, 1);
  ff__op_scratch s = {0};
  assert_int_equal(ff__op_resize(&src, 1, 1, 1, &s, &dst), FF_OK);
  assert_int_equal(out[0], 15);
  assert_int_equal(out[1], 30);
  assert_int_equal(out[2], 142);
  /* Without antialias: src = 2 * 0.5 - 0.5 = 0.5 between pixels 0 and 1, the same mean. */
  memset(out, 0, sizeof out);
  assert_int_equal(ff__op_resize(&src, 1, 1, 0, &s, &dst), FF_OK);
  assert_int_equal(out[0], 15);
  assert_int_equal(out[1], 30);
  assert_int_equal(out[2], 142);
  ff__op_scratch_free(&s);
}

static void resize_one_to_two_replicates_the_pixel(void **state) {
  (void)state;
  uint8_t px[3] = {7, 128, 250}, out[2 * 2 * 3];
  ff__image src = image_of(px, 1, 1), dst = image_of(out, 2, 2);
  ff__op_scratch s = {0};
  for (int aa = 0; aa < 2; aa++) {
    memset(out, 0, sizeof out);
    assert_int_equal(ff__op_resize(&src, 2, 2, aa, &s, &dst), FF_OK);
    for (int i = 0; i < 4; i++)
      assert_memory_equal(out + 3 * i, px, 3);
  }
  ff__op_scratch_free(&s);
}

static ff__pipeline parse(const char *text) {
  static ff__pipeline p;
  ff__error err = {0};
  if (ff__pipeline_parse(text, &p, &err)) fail_msg("%s", err.msg);
  return p;
}

static void normalize_output_matches_the_formula(void **state) {
  (void)state;
  ff__pipeline p = parse("decode | center_crop(size=(1, 2)) | normalize(mean=imagenet, std=imagenet)");
  /* two pixels: (128, 0, 255) and (255, 64, 1) */
  uint8_t px[2 * 3] = {128, 0, 255, 255, 64, 1};
  ff__image img = image_of(px, 2, 1);
  float batch[2][3][1][2];
  memset(batch, 0, sizeof batch);
  ff__op_write_output(&p, &img, batch, 1); /* slot 1 */
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
  for (int c = 0; c < 3; c++)
    for (int x = 0; x < 2; x++) {
      float v = (float)px[x * 3 + c];
      float want = ((v / 255.0f) - mean[c]) / std[c]; /* each step rounded to float32 */
      assert_true(batch[1][c][0][x] == want);
      assert_true(batch[0][c][0][x] == 0.0f); /* slot 0 untouched */
    }
  /* By hand: (128/255 - 0.485) / 0.229 = 0.0740645, (0 - 0.456) / 0.224 = -2.0357143,
   * (1 - 0.406) / 0.225 = 2.64 */
  assert_true(fabs(batch[1][0][0][0] - 0.0740645) < 1e-6);
  assert_true(fabs(batch[1][1][0][0] - -2.0357143) < 1e-6);
  assert_true(fabs(batch[1][2][0][0] - 2.64) < 1e-6);
}

static void uint8_output_is_dense_nhwc(void **state) {
  (void)state;
  ff__pipeline p = parse("decode | center_crop(size=2)");
  uint8_t px[3 * 2 * 3];
  fill(px, 3, 2);
  ff__image src = image_of(px, 3, 2), view;
  ff__buf mem = {0};
  assert_int_equal(ff__op_crop(&src, 1, 0, 2, 2, &mem, &view), FF_OK); /* stride 9, width 2 */
  uint8_t batch[2][2][2][3];
  memset(batch, 0xEE, sizeof batch);
  ff__op_write_output(&p, &view, batch, 0);
  for (int y = 0; y < 2; y++)
    for (int x = 0; x < 2; x++)
      for (int c = 0; c < 3; c++)
        assert_int_equal(batch[0][y][x][c], 100 * c + 10 * y + x + 1);
  assert_int_equal(batch[1][0][0][0], 0xEE); /* slot 1 untouched */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(crop_inside_is_a_view),
      cmocka_unit_test(crop_outside_pads_with_zeros),
      cmocka_unit_test(hflip_reverses_the_columns),
      cmocka_unit_test(vflip_reverses_the_rows),
      cmocka_unit_test(flips_respect_the_stride_of_a_view),
      cmocka_unit_test(resize_to_the_same_size_is_the_identity),
      cmocka_unit_test(resize_two_pixels_to_one_averages_them),
      cmocka_unit_test(resize_one_to_two_replicates_the_pixel),
      cmocka_unit_test(normalize_output_matches_the_formula),
      cmocka_unit_test(uint8_output_is_dense_nhwc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
