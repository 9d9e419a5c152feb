/* test_filter_paths.c — the vectorised grayscale (ops/color.c, colour with
 * factor 0), Gaussian blur (ops/geometry.c ff__op_gaussian_blur) and
 * Pillow GaussianBlur (ops/pil_blur.c ff__pil_blur_run) give, on whatever
 * path this CPU takes (AVX-512, AVX2 or scalar), the bytes of a plain
 * scalar reference written here from the per-element kernels
 * (kernels/color.h ff__gray_u8; the blur's reflect index, taps and
 * rounding; kernels/pil_blur.h ff__pil_box_pass line by line), over image
 * sizes from 1x1 up, odd widths, padded rows and a source that ends at an
 * unreadable page (a read past its last byte faults). Under valgrind,
 * which hides AVX-512 from the CPU checks, it tests the AVX2 paths.
 * torchvision's and
 * Pillow's own values are the golden tests'
 * (tests/golden/test_transforms_golden.py, test_pil_blur_golden.py). */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "kernels/color.h"
#include "kernels/pixel.h"
#include "kernels/resize.h"
#include "ops/augment.h"
#include "ops/ops.h"
#include "ops/pil_blur.h"

static const int SIZES[][2] = {{1, 1},   {1, 6},   {6, 1},   {2, 2},   {3, 3},   {4, 5},    {5, 4},   {7, 5},
                               {8, 8},   {15, 3},  {16, 2},  {17, 9},  {21, 11}, {31, 29},  {33, 47}, {64, 3},
                               {3, 64},  {67, 33}, {97, 61}, {224, 224}, {225, 171}};
#define N_SIZES (sizeof SIZES / sizeof *SIZES)

/* Fails at the first byte of got's rows that differs from want's, or at a
 * write to a row's padding (both were filled with 0xA5). */
static void expect_same(const uint8_t *got, const uint8_t *want, int w, int h, size_t stride, const char *what) {
  for (size_t i = 0; i < (size_t)h * stride; i++)
    if (got[i] != want[i])
      fail_msg("%s, %dx%d stride %zu: byte %zu of pixel (%zu, %zu) is %d, the reference gives %d", what, w, h,
               stride, i % stride % 3, i % stride / 3, i / stride, got[i], want[i]);
}

/* ------------------------------------------------------------ grayscale */

static void grayscale_matches_the_per_pixel_gray(void **state) {
  (void)state;
  uint32_t rng = 3;
  for (size_t s = 0; s < N_SIZES; s++)
    for (int pad = 0; pad < 2; pad++) {
      int w = SIZES[s][0], h = SIZES[s][1];
      size_t stride = (size_t)w * 3 + (size_t)pad * 7, size = (size_t)h * stride;
      ff_test_guarded g = ff_test_guarded_image(w, h, stride, &rng);
      uint8_t *got = test_malloc(size), *want = test_malloc(size);
      memset(got, 0xA5, size), memset(want, 0xA5, size);
      for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
          const uint8_t *p = g.data + (size_t)y * stride + (size_t)x * 3;
          memset(want + (size_t)y * stride + (size_t)x * 3, ff__gray_u8(p[0], p[1], p[2]), 3);
        }
      ff__aug a = {.op = FF__AUG_COLOR, .arg = 0.0};
      ff__image src = {g.data, w, h, 3, stride}, dst = {got, w, h, 3, stride};
      ff__buf scratch = {0};
      assert_int_equal(ff__aug_color(&a, &src, &dst, &scratch), FF_OK);
      expect_same(got, want, w, h, stride, "grayscale");
      /* in place, as the step runner runs it */
      for (int y = 0; y < h; y++) memcpy(got + (size_t)y * stride, g.data + (size_t)y * stride, (size_t)w * 3);
      dst.data = got;
      assert_int_equal(ff__aug_color(&a, &dst, &dst, &scratch), FF_OK);
      expect_same(got, want, w, h, stride, "grayscale in place");
      ff__buf_free(&scratch);
      test_free(got), test_free(want);
      ff_test_guarded_free(&g);
    }
}

/* ------------------------------------------------------------ Gaussian blur */

/* One value of a separable pass: sum over t of x[t] * k[t], the first
 * product rounded, then fused for n <= 4, else plainly (resize's order). */
static float taps_sum(const float *x, size_t step, const float *k, int n) {
  float a = x[0] * k[0];
  for (int t = 1; t < n; t++) a = n <= 4 ? ff__fma_f32(x[(size_t)t * step], k[t], a) : a + x[(size_t)t * step] * k[t];
  return a;
}

static void blur_reference(const uint8_t *src, size_t stride, int w, int h, int kx, int ky, const float *k,
                           float *tmp, float *line, uint8_t *out) {
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < 3; c++) {
        for (int t = 0; t < kx; t++)
          line[t] = (float)src[(size_t)y * stride + (size_t)ff__resize_gauss_index(x - kx / 2 + t, w) * 3 + c];
        tmp[((size_t)y * w + x) * 3 + c] = taps_sum(line, 1, k, kx);
      }
  for (int y = 0; y < h; y++)
    for (size_t i = 0; i < (size_t)w * 3; i++) {
      for (int t = 0; t < ky; t++) line[t] = tmp[(size_t)ff__resize_gauss_index(y - ky / 2 + t, h) * w * 3 + i];
      out[(size_t)y * stride + i] = ff__round_u8(taps_sum(line, 1, k + kx, ky));
    }
}

static void gaussian_blur_matches_the_scalar_passes(void **state) {
  (void)state;
  static const int ks[][2] = {{1, 1}, {3, 3}, {5, 5}, {3, 7}, {9, 4}, {23, 23}};
  static const float sigmas[] = {1.5f, 0.7f, 4.0f};
  uint32_t rng = 5;
  int checked = 0;
  for (size_t s = 0; s < N_SIZES; s++)
    for (int pad = 0; pad < 2; pad++) {
      int w = SIZES[s][0], h = SIZES[s][1];
      size_t stride = (size_t)w * 3 + (size_t)pad * 5, size = (size_t)h * stride;
      ff_test_guarded g = ff_test_guarded_image(w, h, stride, &rng);
      uint8_t *got = test_malloc(size), *want = test_malloc(size);
      float *tmp = test_malloc((size_t)w * h * 3 * sizeof(float));
      ff__op_scratch scratch = {0};
      for (size_t q = 0; q < sizeof ks / sizeof *ks; q++) {
        int kx = ks[q][0], ky = ks[q][1];
        float sigma = sigmas[q % 3], k[2 * 23], line[23];
        ff__gauss_kernel1d(kx, sigma, k);
        ff__gauss_kernel1d(ky, sigma, k + kx);
        memset(got, 0xA5, size), memset(want, 0xA5, size);
        blur_reference(g.data, stride, w, h, kx, ky, k, tmp, line, want);
        ff__image src = {g.data, w, h, 3, stride}, dst = {got, w, h, 3, stride};
        assert_int_equal(ff__op_gaussian_blur(&src, kx, ky, sigma, &scratch, &dst), FF_OK);
        char what[64];
        snprintf(what, sizeof what, "gaussian_blur %dx%d sigma %g", kx, ky, (double)sigma);
        expect_same(got, want, w, h, stride, what);
        checked++;
      }
      ff__op_scratch_free(&scratch);
      test_free(tmp), test_free(got), test_free(want);
      ff_test_guarded_free(&g);
    }
  assert_int_equal(checked, (int)N_SIZES * 2 * 6);
}

/* ------------------------------------------------------------ Pillow GaussianBlur */

/* Pillow's order: three passes of the box along each row, then three down
 * each column (kernels/pil_blur.h), into out (stride-byte rows). */
static void pil_blur_reference(double radius, const uint8_t *src, size_t stride, int w, int h, uint8_t *out) {
  ff__pil_box b = ff__pil_blur_box(radius);
  size_t row = (size_t)w * 3, image = row * (size_t)h;
  uint8_t *x = test_malloc(image), *y = test_malloc(image);
  uint32_t *acc = test_malloc(row * sizeof(uint32_t));
  for (int r = 0; r < h; r++) memcpy(x + (size_t)r * row, src + (size_t)r * stride, row);
  if (b.on) {
    for (int pass = 0; pass < 3; pass++) {
      for (int r = 0; r < h; r++) ff__pil_box_pass(&b, x + (size_t)r * row, 3, y + (size_t)r * row, 3, w, 3, acc);
      memcpy(x, y, image);
    }
    for (int pass = 0; pass < 3; pass++) {
      ff__pil_box_pass(&b, x, (long)row, y, (long)row, h, (int)row, acc);
      memcpy(x, y, image);
    }
  }
  for (int r = 0; r < h; r++) memcpy(out + (size_t)r * stride, x + (size_t)r * row, row);
  test_free(x), test_free(y), test_free(acc);
}

static void pil_blur_matches_pillows_passes(void **state) {
  (void)state;
  /* box radii 0 to 4 and 8 (the direct sums, 8 the largest of them), 9
   * and 39 (the running sums on the transposed image) */
  static const double radii[] = {0.3, 0.8, 1.5, 2.0, 3.7, 5.1, 9.0, 10.0, 40.0};
  uint32_t rng = 7;
  int checked = 0, direct = 0, running = 0;
  for (size_t s = 0; s < N_SIZES; s++)
    for (int pad = 0; pad < 2; pad++) {
      int w = SIZES[s][0], h = SIZES[s][1];
      size_t stride = (size_t)w * 3 + (size_t)pad * 7, size = (size_t)h * stride;
      ff_test_guarded g = ff_test_guarded_image(w, h, stride, &rng);
      uint8_t *got = test_malloc(size), *want = test_malloc(size);
      ff__buf scratch = {0};
      for (size_t q = 0; q < sizeof radii / sizeof *radii; q++) {
        memset(got, 0xA5, size), memset(want, 0xA5, size);
        pil_blur_reference(radii[q], g.data, stride, w, h, want);
        ff__image src = {g.data, w, h, 3, stride}, dst = {got, w, h, 3, stride};
        assert_int_equal(ff__pil_blur_run(radii[q], &src, &dst, &scratch), FF_OK);
        char what[64];
        snprintf(what, sizeof what, "pil GaussianBlur(%g)", radii[q]);
        expect_same(got, want, w, h, stride, what);
        ff__pil_box b = ff__pil_blur_box(radii[q]);
        direct += b.on && b.radius <= 8, running += b.radius > 8;
        checked++;
      }
      ff__buf_free(&scratch);
      test_free(got), test_free(want);
      ff_test_guarded_free(&g);
    }
  assert_int_equal(checked, (int)N_SIZES * 2 * 9);
  assert_true(direct == (int)N_SIZES * 2 * 7 && running == (int)N_SIZES * 2 * 2); /* both paths ran */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(grayscale_matches_the_per_pixel_gray),
      cmocka_unit_test(gaussian_blur_matches_the_scalar_passes),
      cmocka_unit_test(pil_blur_matches_pillows_passes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
