/* test_affine.c — the geometric augmentation ops (ff__aug_affine): the
 * directions worked out by hand from torchvision's definitions (spec 1.3,
 * 2.2-2.6) and the checksums torchvision gives for the golden image of
 * spec section 8. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "ops/augment.h"

static ff__aug op_of(ff__aug_op op, double arg, int bilinear) {
  ff__aug a = {op, arg, bilinear, 0, {0, 0, 0}, 0};
  return a;
}

/* Runs a on the dense w x h RGB image px; returns a malloc'd dense output. */
static uint8_t *warp(const ff__aug *a, const uint8_t *px, int w, int h) {
  uint8_t *out = malloc((size_t)w * h * 3);
  assert_non_null(out);
  memset(out, 0xAB, (size_t)w * h * 3); /* every byte must be written */
  ff__image src = {(uint8_t *)px, w, h, 3, (size_t)w * 3};
  ff__image dst = {out, w, h, 3, (size_t)w * 3};
  ff__aug_affine(a, &src, &dst);
  return out;
}

static uint8_t at(const uint8_t *px, int w, int x, int y, int c) { return px[((size_t)y * w + x) * 3 + c]; }

static void shear_x_moves_a_vertical_line_with_the_row(void **state) {
  (void)state;
  enum { W = 32, H = 24 };
  static uint8_t px[W * H * 3];
  memset(px, 0, sizeof px);
  for (int y = 0; y < H; y++)
    memset(px + ((size_t)y * W + 10) * 3, 200, 3);
  ff__aug a = op_of(FF__AUG_SHEAR_X, 0.3, 0);
  uint8_t *out = warp(&a, px, W, H);
  const int rows[] = {0, 5, 10, 20}, cols[] = {10, 8, 7, 4};
  for (int k = 0; k < 4; k++)
    for (int x = 0; x < W; x++)
      assert_int_equal(at(out, W, x, rows[k], 1), x == cols[k] ? 200 : 0);
  free(out);
}

static void rotate_90_moves_the_pixel_right_of_centre_above_it(void **state) {
  (void)state;
  enum { W = 5, H = 5 };
  uint8_t px[W * H * 3] = {0};
  px[(2 * W + 3) * 3 + 0] = 77; /* right of the centre pixel (2, 2) */
  ff__aug a = op_of(FF__AUG_ROTATE, 90.0, 0);
  uint8_t *out = warp(&a, px, W, H);
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++)
      assert_int_equal(at(out, W, x, y, 0), x == 2 && y == 1 ? 77 : 0);
  free(out);
}

static void translate_moves_content_right_and_fills_black(void **state) {
  (void)state;
  enum { W = 7, H = 4 };
  uint8_t px[W * H * 3];
  for (int i = 0; i < W * H * 3; i++)
    px[i] = (uint8_t)(i + 1);
  for (int bilinear = 0; bilinear < 2; bilinear++) {
    ff__aug a = op_of(FF__AUG_TRANSLATE_X, 3.0, bilinear);
    uint8_t *out = warp(&a, px, W, H);
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++)
        for (int c = 0; c < 3; c++)
          assert_int_equal(at(out, W, x, y, c), x < 3 ? 0 : at(px, W, x - 3, y, c));
    free(out);
  }
}

static void translate_down_by_rows(void **state) {
  (void)state;
  enum { W = 3, H = 6 };
  uint8_t px[W * H * 3];
  for (int i = 0; i < W * H * 3; i++)
    px[i] = (uint8_t)(i + 1);
  ff__aug a = op_of(FF__AUG_TRANSLATE_Y, 2.9, 0);
  uint8_t *out = warp(&a, px, W, H);
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++)
      assert_int_equal(at(out, W, x, y, 2), y < 2 ? 0 : at(px, W, x, y - 2, 2));
  free(out);
}

static void translate_truncates_toward_zero(void **state) {
  (void)state;
  enum { W = 40, H = 2 };
  uint8_t px[W * H * 3];
  for (int i = 0; i < W * H * 3; i++)
    px[i] = (uint8_t)(i % 251 + 1);
  ff__aug a = op_of(FF__AUG_TRANSLATE_X, -30.45, 0); /* int(-30.45) = -30: left by 30 */
  uint8_t *out = warp(&a, px, W, H);
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++)
      assert_int_equal(at(out, W, x, y, 0), x < 10 ? at(px, W, x + 30, y, 0) : 0);
  free(out);
}

static void fill_colour_is_used_outside(void **state) {
  (void)state;
  enum { W = 8, H = 8 };
  uint8_t px[W * H * 3];
  memset(px, 100, sizeof px);
  for (int bilinear = 0; bilinear < 2; bilinear++) {
    ff__aug a = op_of(FF__AUG_ROTATE, 45.0, bilinear);
    a.has_fill = 1, a.fill[0] = 10.0f, a.fill[1] = 20.4f, a.fill[2] = 30.5f; /* rne: 10 20 30 */
    uint8_t *out = warp(&a, px, W, H);
    assert_int_equal(at(out, W, 0, 0, 0), 10);
    assert_int_equal(at(out, W, 0, 0, 1), 20);
    assert_int_equal(at(out, W, 7, 7, 2), 30);
    assert_int_equal(at(out, W, 4, 4, 1), 100);
    free(out);
    a = op_of(FF__AUG_TRANSLATE_Y, -5.0, bilinear);
    a.has_fill = 1, a.fill[0] = 1.0f, a.fill[1] = 2.0f, a.fill[2] = 254.6f;
    out = warp(&a, px, W, H);
    for (int x = 0; x < W; x++) {
      assert_int_equal(at(out, W, x, 2, 0), 100);
      assert_int_equal(at(out, W, x, 3, 0), 1);
      assert_int_equal(at(out, W, x, 7, 2), 255);
    }
    free(out);
  }
}

static void one_pixel_image_keeps_its_pixel_under_nearest(void **state) {
  (void)state;
  uint8_t px[3] = {9, 8, 7};
  for (int op = FF__AUG_SHEAR_X; op <= FF__AUG_ROTATE; op++) {
    ff__aug a = op_of((ff__aug_op)op, op == FF__AUG_ROTATE ? 90.0 : 0.3, 0);
    uint8_t *out = warp(&a, px, 1, 1);
    assert_memory_equal(out, px, 3);
    free(out);
  }
}

/* ------------------------------------------------- spec section 8 golden rows */

enum { GW = 32, GH = 24 };

static void golden_image(uint8_t *px) {
  for (int y = 0; y < GH; y++)
    for (int x = 0; x < GW; x++) {
      uint8_t *p = px + ((size_t)y * GW + x) * 3;
      p[0] = (uint8_t)((8 * x + 3 * y) % 256);
      p[1] = (uint8_t)((5 * x * y + 17) % 256);
      p[2] = (uint8_t)((x * x + 2 * y * y + 40) % 256);
    }
}

/* sum and FNV-1a over the planar CHW bytes, as the spec tabulates them */
static void checksum(const uint8_t *px, long *sum, uint32_t *fnv) {
  *sum = 0, *fnv = 0x811C9DC5u;
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < GW * GH; i++) {
      uint8_t b = px[(size_t)i * 3 + c];
      *sum += b;
      *fnv = (*fnv ^ b) * 0x01000193u;
    }
}

typedef struct golden_row {
  ff__aug_op op;
  double arg;
  int bilinear, has_fill;
  long sum;
  uint32_t fnv;
} golden_row;

static void golden_checksums_match_torchvision(void **state) {
  (void)state;
  static const golden_row rows[] = {
      {FF__AUG_SHEAR_X, 0.3, 0, 0, 259154, 0xd20e9f09u},
      {FF__AUG_SHEAR_X, -0.3, 1, 0, 259239, 0xad84930cu},
      {FF__AUG_SHEAR_Y, 0.3, 0, 0, 224410, 0x0b92d32fu},
      {FF__AUG_SHEAR_Y, -0.2, 1, 0, 245785, 0xc22dd04au},
      {FF__AUG_TRANSLATE_X, 13, 0, 0, 156312, 0x45bdd60du},
      {FF__AUG_TRANSLATE_Y, -7, 0, 0, 206464, 0x2a3db825u},
      {FF__AUG_ROTATE, 30, 0, 0, 242891, 0xfcef2f98u},
      {FF__AUG_ROTATE, -17, 1, 0, 259702, 0xac6dc521u},
      {FF__AUG_ROTATE, 135, 0, 0, 239697, 0xecb2b17au},
      {FF__AUG_ROTATE, 30, 0, 1, 250571, 0x90cc0de0u},
      {FF__AUG_ROTATE, -17, 1, 1, 262582, 0x9cea1509u},
  };
  static uint8_t px[GW * GH * 3];
  golden_image(px);
  for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
    ff__aug a = op_of(rows[k].op, rows[k].arg, rows[k].bilinear);
    if (rows[k].has_fill) a.has_fill = 1, a.fill[0] = 10, a.fill[1] = 20, a.fill[2] = 30;
    uint8_t *out = warp(&a, px, GW, GH);
    long sum;
    uint32_t fnv;
    checksum(out, &sum, &fnv);
    assert_int_equal(sum, rows[k].sum);
    assert_int_equal(fnv, rows[k].fnv);
    free(out);
  }
}

int main(void) {
  /* The spec's checksums are torchvision's on an AVX2 build: the grid as
   * MKL's AVX2 branch rounds it (kernels/affine.h), which this pins on an
   * AVX-512 host too, before the first warp reads it. */
  setenv("MKL_CBWR", "AVX2", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shear_x_moves_a_vertical_line_with_the_row),
      cmocka_unit_test(rotate_90_moves_the_pixel_right_of_centre_above_it),
      cmocka_unit_test(translate_moves_content_right_and_fills_black),
      cmocka_unit_test(translate_down_by_rows),
      cmocka_unit_test(translate_truncates_toward_zero),
      cmocka_unit_test(fill_colour_is_used_outside),
      cmocka_unit_test(one_pixel_image_keeps_its_pixel_under_nearest),
      cmocka_unit_test(golden_checksums_match_torchvision),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
