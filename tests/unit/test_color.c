/* test_color.c — the colour augmentation ops (ops/color.c) on small images
 * whose results are worked out by hand from torchvision's float32 formulas
 * (spec sections 1.1, 1.2, 2.7-2.15), and the fused table runs, which must
 * be bit-identical to the same ops run one by one. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "kernels/color.h"
#include "ops/augment.h"

/* w x h RGB image over `px` (dense rows). */
static ff__image image_of(uint8_t *px, int w, int h) {
  ff__image img = {px, w, h, 3, (size_t)w * 3};
  return img;
}

static void fill_rgb(uint8_t *px, int n_pixels, uint8_t r, uint8_t g, uint8_t b) {
  for (int i = 0; i < n_pixels; i++)
    px[3 * i] = r, px[3 * i + 1] = g, px[3 * i + 2] = b;
}

static ff_status run_one(ff__aug_op op, double arg, ff__image *img) {
  ff__aug a = {.op = op, .arg = arg};
  ff__buf scratch = {0};
  ff_status st = ff__aug_color(&a, img, img, &scratch);
  ff__buf_free(&scratch);
  return st;
}

static void gray_of_neutral_is_one_lower(void **state) {
  (void)state;
  assert_int_equal(ff__gray_u8(0, 0, 0), 0);
  for (int v = 1; v < 256; v++)
    assert_int_equal(ff__gray_u8((uint8_t)v, (uint8_t)v, (uint8_t)v), v - 1);
  /* 0.2989 * 255 = 76.2195 -> 76; 0.587 * 255 = 149.685 -> 149; 0.114 * 255 = 29.07 -> 29 */
  assert_int_equal(ff__gray_u8(255, 0, 0), 76);
  assert_int_equal(ff__gray_u8(0, 255, 0), 149);
  assert_int_equal(ff__gray_u8(0, 0, 255), 29);
}

static void color_half_darkens_constant_gray(void **state) {
  (void)state;
  uint8_t px[4 * 3 * 3];
  fill_rgb(px, 12, 100, 100, 100);
  ff__image img = image_of(px, 4, 3);
  assert_int_equal(run_one(FF__AUG_COLOR, 0.5, &img), FF_OK);
  for (int i = 0; i < 36; i++)
    assert_int_equal(px[i], 99); /* 0.5 * 100 + 0.5 * 99 = 99.5 */
  fill_rgb(px, 12, 100, 100, 100);
  assert_int_equal(run_one(FF__AUG_COLOR, 1.5, &img), FF_OK);
  for (int i = 0; i < 36; i++)
    assert_int_equal(px[i], 100); /* 150 - 49.5 = 100.5 */
}

static void color_zero_is_gray(void **state) {
  (void)state;
  uint8_t px[3] = {255, 0, 0};
  ff__image img = image_of(px, 1, 1);
  assert_int_equal(run_one(FF__AUG_COLOR, 0.0, &img), FF_OK);
  assert_int_equal(px[0], 76);
  assert_int_equal(px[1], 76);
  assert_int_equal(px[2], 76);
}

static void contrast_on_constant_gray(void **state) {
  (void)state;
  uint8_t px[5 * 4 * 3];
  fill_rgb(px, 20, 100, 100, 100);
  ff__image img = image_of(px, 5, 4);
  /* mean gray 99: 0.73 * 100 + 0.27 * 99 = 99.73 -> 99 */
  assert_int_equal(run_one(FF__AUG_CONTRAST, 0.73, &img), FF_OK);
  for (int i = 0; i < 60; i++)
    assert_int_equal(px[i], 99);
  fill_rgb(px, 20, 100, 100, 100);
  assert_int_equal(run_one(FF__AUG_CONTRAST, 1.3, &img), FF_OK);
  for (int i = 0; i < 60; i++)
    assert_int_equal(px[i], 100);
}

static void contrast_zero_gives_the_mean(void **state) {
  (void)state;
  /* two pixels, grays 76 (pure red) and 0: mean 38 */
  uint8_t px[6] = {255, 0, 0, 0, 0, 0};
  ff__image img = image_of(px, 2, 1);
  assert_int_equal(run_one(FF__AUG_CONTRAST, 0.0, &img), FF_OK);
  for (int i = 0; i < 6; i++)
    assert_int_equal(px[i], 38);
}

static void brightness_scales_and_clamps(void **state) {
  (void)state;
  uint8_t px[6] = {0, 1, 100, 127, 128, 255};
  ff__image img = image_of(px, 2, 1);
  assert_int_equal(run_one(FF__AUG_BRIGHTNESS, 2.0, &img), FF_OK);
  uint8_t want[6] = {0, 2, 200, 254, 255, 255};
  assert_memory_equal(px, want, 6);
  uint8_t px2[3] = {3, 5, 255};
  img = image_of(px2, 1, 1);
  assert_int_equal(run_one(FF__AUG_BRIGHTNESS, 0.5, &img), FF_OK);
  assert_int_equal(px2[0], 1); /* 1.5 truncated */
  assert_int_equal(px2[1], 2);
  assert_int_equal(px2[2], 127);
}

static void posterize_zero_bits_is_black_eight_is_identity(void **state) {
  (void)state;
  uint8_t px[256 * 3], orig[256 * 3];
  for (int i = 0; i < 256 * 3; i++)
    orig[i] = (uint8_t)(i * 7);
  memcpy(px, orig, sizeof px);
  ff__image img = image_of(px, 16, 16);
  assert_int_equal(run_one(FF__AUG_POSTERIZE, 8, &img), FF_OK);
  assert_memory_equal(px, orig, sizeof px);
  assert_int_equal(run_one(FF__AUG_POSTERIZE, 0, &img), FF_OK);
  for (int i = 0; i < 256 * 3; i++)
    assert_int_equal(px[i], 0);
  memcpy(px, orig, sizeof px);
  assert_int_equal(run_one(FF__AUG_POSTERIZE, 3, &img), FF_OK);
  for (int i = 0; i < 256 * 3; i++)
    assert_int_equal(px[i], orig[i] & 0xE0);
  assert_int_equal(ff__posterize_mask(1), 0x80);
}

static void solarize_at_255_and_0(void **state) {
  (void)state;
  uint8_t px[6] = {0, 1, 127, 128, 254, 255};
  ff__image img = image_of(px, 2, 1);
  assert_int_equal(run_one(FF__AUG_SOLARIZE, 255.0, &img), FF_OK);
  uint8_t only_top[6] = {0, 1, 127, 128, 254, 0};
  assert_memory_equal(px, only_top, 6);
  uint8_t px2[6] = {0, 1, 127, 128, 254, 255};
  img = image_of(px2, 2, 1);
  assert_int_equal(run_one(FF__AUG_SOLARIZE, 0.0, &img), FF_OK);
  uint8_t all[6] = {255, 254, 128, 127, 1, 0};
  assert_memory_equal(px2, all, 6);
  uint8_t px3[6] = {0, 1, 127, 128, 254, 255};
  img = image_of(px3, 2, 1);
  assert_int_equal(run_one(FF__AUG_SOLARIZE, 127.5, &img), FF_OK);
  uint8_t half[6] = {0, 1, 127, 127, 1, 0};
  assert_memory_equal(px3, half, 6);
}

static void invert_flips_every_value(void **state) {
  (void)state;
  uint8_t px[6] = {0, 1, 127, 128, 254, 255};
  ff__image img = image_of(px, 2, 1);
  assert_int_equal(run_one(FF__AUG_INVERT, 0, &img), FF_OK);
  uint8_t want[6] = {255, 254, 128, 127, 1, 0};
  assert_memory_equal(px, want, 6);
}

static void autocontrast_maps_41_to_254(void **state) {
  (void)state;
  /* red 0..41, green constant 7, blue 10..20 */
  uint8_t px[42 * 3];
  for (int i = 0; i < 42; i++)
    px[3 * i] = (uint8_t)i, px[3 * i + 1] = 7, px[3 * i + 2] = (uint8_t)(10 + i % 11);
  ff__image img = image_of(px, 42, 1);
  assert_int_equal(run_one(FF__AUG_AUTOCONTRAST, 0, &img), FF_OK);
  assert_int_equal(px[0], 0);
  assert_int_equal(px[41 * 3], 254);     /* 41 * f32(255 / 41) is just below 255 */
  assert_int_equal(px[1], 7);            /* constant channel untouched */
  assert_int_equal(px[2], 0);            /* blue lo -> 0 */
  assert_int_equal(px[10 * 3 + 2], 255); /* blue hi 20: 10 * 25.5 = 255 exactly */
}

static void equalize_leaves_small_images(void **state) {
  (void)state;
  enum { W = 15, H = 17 }; /* 255 pixels: step = (255 - count at max) / 255 = 0 */
  uint8_t px[W * H * 3], orig[W * H * 3];
  uint32_t rng = 7;
  for (int i = 0; i < W * H * 3; i++)
    orig[i] = (uint8_t)ff_test_rand(&rng);
  memcpy(px, orig, sizeof px);
  ff__image img = image_of(px, W, H);
  assert_int_equal(run_one(FF__AUG_EQUALIZE, 0, &img), FF_OK);
  assert_memory_equal(px, orig, sizeof px);
}

static void equalize_two_values(void **state) {
  (void)state;
  /* 16 x 32 = 512 pixels, half 10 half 200: step = 256 / 255 = 1, lut[10] = 0,
   * lut[200] = min(255, 256 + 0) = 255 */
  uint8_t px[512 * 3];
  for (int i = 0; i < 512; i++)
    fill_rgb(px + 3 * i, 1, i % 2 ? 200 : 10, 50, i < 300 ? 0 : 255);
  ff__image img = image_of(px, 32, 16);
  assert_int_equal(run_one(FF__AUG_EQUALIZE, 0, &img), FF_OK);
  assert_int_equal(px[0], 0);
  assert_int_equal(px[3], 255);
  assert_int_equal(px[1], 50); /* constant: unchanged */
  /* blue: 300 zeros and 212 at 255: step = 300 / 255 = 1, lut[255] = min(255, 300) */
  assert_int_equal(px[2], 0);
  assert_int_equal(px[511 * 3 + 2], 255);
}

static void sharpness_leaves_thin_images(void **state) {
  (void)state;
  uint8_t px[2 * 9 * 3], orig[2 * 9 * 3];
  uint32_t rng = 3;
  for (size_t i = 0; i < sizeof px; i++)
    orig[i] = (uint8_t)ff_test_rand(&rng);
  memcpy(px, orig, sizeof px);
  ff__image img = image_of(px, 9, 2);
  assert_int_equal(run_one(FF__AUG_SHARPNESS, 0.1, &img), FF_OK);
  assert_memory_equal(px, orig, sizeof px);
  img = image_of(px, 2, 9);
  assert_int_equal(run_one(FF__AUG_SHARPNESS, 1.9, &img), FF_OK);
  assert_memory_equal(px, orig, sizeof px);
}

static void sharpness_smooths_the_interior(void **state) {
  (void)state;
  /* 3 x 3, red centre 13 and all else 0: S = 13 + 4 * 13 = 65, round(65 / 13) = 5;
   * factor 0 gives the smoothed image itself, the border stays 0 */
  uint8_t px[27] = {0};
  px[4 * 3] = 13;
  ff__image img = image_of(px, 3, 3);
  assert_int_equal(run_one(FF__AUG_SHARPNESS, 0.0, &img), FF_OK);
  for (int i = 0; i < 27; i++)
    assert_int_equal(px[i], i == 12 ? 5 : 0);
  /* factor 2: 2 * 13 - 5 = 21 */
  memset(px, 0, sizeof px);
  px[4 * 3] = 13;
  assert_int_equal(run_one(FF__AUG_SHARPNESS, 2.0, &img), FF_OK);
  assert_int_equal(px[12], 21);
  assert_int_equal(ff__sharp_smooth_u8(13 * 255), 255);
  assert_int_equal(ff__sharp_smooth_u8(6), 0); /* 6 / 13 < 0.5 */
  assert_int_equal(ff__sharp_smooth_u8(7), 1); /* 7 / 13 > 0.5 */
}

static void geometric_op_is_refused(void **state) {
  (void)state;
  uint8_t px[3] = {1, 2, 3};
  ff__image img = image_of(px, 1, 1);
  assert_int_equal(run_one(FF__AUG_ROTATE, 10, &img), FF_EINVAL);
  assert_int_equal(ff__aug_is_lut(FF__AUG_ROTATE), 0);
  assert_int_equal(ff__aug_is_lut(FF__AUG_SHARPNESS), 0);
  assert_int_equal(ff__aug_is_lut(FF__AUG_EQUALIZE), 1);
}

static void padded_rows_give_the_dense_result(void **state) {
  (void)state;
  enum { W = 7, H = 5, PAD = 4, STRIDE = W * 3 + PAD };
  const ff__aug_op ops[] = {FF__AUG_COLOR,      FF__AUG_CONTRAST, FF__AUG_SHARPNESS,
                            FF__AUG_BRIGHTNESS, FF__AUG_EQUALIZE, FF__AUG_AUTOCONTRAST};
  uint32_t rng = 99;
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    uint8_t dense[W * H * 3], padded[H * STRIDE];
    memset(padded, 0xA5, sizeof padded);
    for (int y = 0; y < H; y++)
      for (int k = 0; k < W * 3; k++)
        dense[y * W * 3 + k] = padded[y * STRIDE + k] = (uint8_t)ff_test_rand(&rng);
    ff__image a = image_of(dense, W, H), b = {padded, W, H, 3, STRIDE};
    assert_int_equal(run_one(ops[i], 0.37, &a), FF_OK);
    assert_int_equal(run_one(ops[i], 0.37, &b), FF_OK);
    for (int y = 0; y < H; y++) {
      assert_memory_equal(padded + y * STRIDE, dense + y * W * 3, W * 3);
      for (int k = W * 3; k < STRIDE; k++)
        assert_int_equal(padded[y * STRIDE + k], 0xA5);
    }
  }
}

/* ------------------------------------------------------------ fusion */

static const ff__aug_op LUT_OPS[] = {FF__AUG_BRIGHTNESS, FF__AUG_POSTERIZE,    FF__AUG_SOLARIZE,
                                     FF__AUG_INVERT,     FF__AUG_AUTOCONTRAST, FF__AUG_EQUALIZE};

static ff__aug random_lut_op(uint32_t *rng) {
  ff__aug a = {.op = LUT_OPS[ff_test_rand(rng) % 6]};
  uint32_t r = ff_test_rand(rng);
  switch (a.op) {
  case FF__AUG_BRIGHTNESS: a.arg = (r % 2000) / 1000.0; break;
  case FF__AUG_POSTERIZE: a.arg = r % 9; break;
  case FF__AUG_SOLARIZE: a.arg = (r % 511) / 2.0; break;
  default: break;
  }
  return a;
}

/* A random image: constant, two-valued, low-range noise, or full noise;
 * the bytes between width * 3 and stride are padding that no op may touch. */
static void random_image(uint32_t *rng, uint8_t *px, int w, int h, size_t stride) {
  int kind = (int)(ff_test_rand(rng) % 4);
  uint8_t a[3], b[3];
  for (int k = 0; k < 3; k++)
    a[k] = (uint8_t)ff_test_rand(rng), b[k] = (uint8_t)ff_test_rand(rng);
  int lo = (int)(ff_test_rand(rng) % 200), span = 1 + (int)(ff_test_rand(rng) % 56);
  memset(px, 0xA5, stride * h);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int k = 0; k < 3; k++) {
        uint8_t *p = px + y * stride + x * 3 + k;
        uint32_t r = ff_test_rand(rng);
        switch (kind) {
        case 0: *p = a[k]; break;
        case 1: *p = r % 2 ? a[k] : b[k]; break;
        case 2: *p = (uint8_t)(lo + r % span); break;
        default: *p = (uint8_t)r;
        }
      }
}

static void fused_run_equals_ops_one_by_one(void **state) {
  (void)state;
  uint32_t rng = 12345;
  enum { MAX_W = 40, MAX_H = 40, PAD = 5, TRIALS = 3000 };
  static uint8_t fused[MAX_H * (MAX_W * 3 + PAD)], single[MAX_H * (MAX_W * 3 + PAD)];
  int differing_runs = 0;
  for (int trial = 0; trial < TRIALS; trial++) {
    int w = 1 + (int)(ff_test_rand(&rng) % MAX_W), h = 1 + (int)(ff_test_rand(&rng) % MAX_H);
    size_t stride = (size_t)w * 3 + (trial % 2 ? PAD : 0);
    random_image(&rng, fused, w, h, stride);
    memcpy(single, fused, stride * h);
    ff__aug ops[8];
    int n = 1 + (int)(ff_test_rand(&rng) % 8);
    for (int i = 0; i < n; i++)
      ops[i] = random_lut_op(&rng);
    if (n > 1 && trial % 3 == 0) ops[1] = ops[0]; /* repeats */

    ff__image img = {fused, w, h, 3, stride};
    ff__aug_lut_run(ops, n, &img, &img);
    img.data = single;
    for (int i = 0; i < n; i++)
      ff__aug_lut_run(&ops[i], 1, &img, &img);
    if (memcmp(fused, single, stride * h) != 0) {
      differing_runs++;
      print_error("trial %d (%dx%d, %d ops) differs\n", trial, w, h, n);
    }
  }
  assert_int_equal(differing_runs, 0);
}

static void fused_histogram_ops_see_earlier_tables(void **state) {
  (void)state;
  /* equalize after posterize 1: the image is two-valued (0, 128) by then */
  enum { N = 600 };
  uint8_t px[N * 3];
  for (int i = 0; i < N; i++)
    fill_rgb(px + 3 * i, 1, (uint8_t)(i % 256), (uint8_t)(i % 256), 200);
  ff__image img = image_of(px, N, 1);
  ff__aug ops[2] = {{.op = FF__AUG_POSTERIZE, .arg = 1}, {.op = FF__AUG_EQUALIZE}};
  ff__aug_lut_run(ops, 2, &img, &img);
  /* 0..127 -> 0 (2 * 128 + 88 = 344 pixels), 128..255 -> 128 (256 pixels):
   * step = 344 / 255 = 1, lut[128] = min(255, 344) = 255 */
  assert_int_equal(px[0], 0);
  assert_int_equal(px[200 * 3], 255);
  assert_int_equal(px[2], 128); /* constant after posterize: equalize leaves it */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gray_of_neutral_is_one_lower),
      cmocka_unit_test(color_half_darkens_constant_gray),
      cmocka_unit_test(color_zero_is_gray),
      cmocka_unit_test(contrast_on_constant_gray),
      cmocka_unit_test(contrast_zero_gives_the_mean),
      cmocka_unit_test(brightness_scales_and_clamps),
      cmocka_unit_test(posterize_zero_bits_is_black_eight_is_identity),
      cmocka_unit_test(solarize_at_255_and_0),
      cmocka_unit_test(invert_flips_every_value),
      cmocka_unit_test(autocontrast_maps_41_to_254),
      cmocka_unit_test(equalize_leaves_small_images),
      cmocka_unit_test(equalize_two_values),
      cmocka_unit_test(sharpness_leaves_thin_images),
      cmocka_unit_test(sharpness_smooths_the_interior),
      cmocka_unit_test(geometric_op_is_refused),
      cmocka_unit_test(padded_rows_give_the_dense_result),
      cmocka_unit_test(fused_run_equals_ops_one_by_one),
      cmocka_unit_test(fused_histogram_ops_see_earlier_tables),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
