/* test_pil_warp.c — Pillow's affine warps (ops/pil.c ff__pil_run: the AVX2
 * bilinear and bicubic paths where the CPU has them) give the bytes of the
 * per-pixel kernel (kernels/pil.h ff__pil_warp_px, which the scalar build
 * and the device kernels run) for every op, resampling and fill, over image
 * sizes from 1x1 up, odd widths, padded rows and a source that ends at an
 * unreadable page (a read past its last byte faults). Pillow's own values
 * are the golden tests' (tests/golden/test_pil_golden.py). */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "ops/pil.h"

/* Runs op p on src through ff__pil_run and through ff__pil_warp_px pixel by
 * pixel; fails at the first differing byte, or at a write to a row's
 * padding. */
static void check_op(const ff__pil *p, const ff__image *src, const char *what) {
  int w = src->width, h = src->height;
  size_t stride = src->stride, size = (size_t)h * stride;
  uint8_t *got = test_malloc(size), *want = test_malloc(size);
  memset(got, 0xA5, size), memset(want, 0xA5, size);
  ff__image dst = {got, w, h, 3, stride};
  assert_int_equal(ff__pil_run(p, src, &dst), FF_OK);
  ff__pil_warp wp;
  ff__pil_warp_setup(p, w, h, &wp);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      ff__pil_warp_px(&wp, wp.mode, src->data, w, h, (long)stride, x, y,
                      want + (size_t)y * stride + (size_t)x * 3);
  for (size_t i = 0; i < size; i++)
    if (got[i] != want[i]) {
      size_t y = i / stride, x = i % stride / 3;
      fail_msg("%s, %dx%d stride %zu: byte %zu of pixel (%zu, %zu) is %d, the per-pixel kernel gives %d",
               what, w, h, stride, i % stride % 3, x, y, got[i], want[i]);
    }
  test_free(got), test_free(want);
}

static void warps_match_the_per_pixel_kernel(void **state) {
  (void)state;
  static const int sizes[][2] = {{1, 1},  {1, 6},   {6, 1},   {2, 2},    {3, 3},     {4, 4},    {5, 4},
                                 {4, 5},  {7, 5},   {8, 8},   {9, 3},    {13, 11},   {31, 29},  {64, 3},
                                 {3, 64}, {67, 33}, {97, 61}, {128, 96}, {224, 224}, {225, 171}};
  static const double rotations[] = {0.3, -0.3,  7.5,  -20, 30,      45,     89.9,  90,      91, 135,
                                     180, 181.5, -150, 270, -269.75, 359.99, 725.5, -1000.7, 3e5};
  static const double shears[] = {0.09, -0.09, 0.3, -0.3, 1.5, -2.75, 1e-9};
  static const double shifts[] = {0.25, -0.5, 2, -3.5, 7.75, -40.5, 100, 5e4};
  struct {
    ff__pil_op op;
    const double *args;
    int count;
  } ops[] = {{FF__PIL_ROTATE, rotations, sizeof rotations / sizeof *rotations},
             {FF__PIL_SHEAR_X, shears, sizeof shears / sizeof *shears},
             {FF__PIL_SHEAR_Y, shears, sizeof shears / sizeof *shears},
             {FF__PIL_TRANSLATE_X, shifts, sizeof shifts / sizeof *shifts},
             {FF__PIL_TRANSLATE_Y, shifts, sizeof shifts / sizeof *shifts}};
  uint32_t rng = 14;
  int checked = 0;
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
    for (int pad = 0; pad < 2; pad++) {
      int w = sizes[s][0], h = sizes[s][1];
      size_t stride = (size_t)w * 3 + (size_t)pad * 7;
      ff_test_guarded g = ff_test_guarded_image(w, h, stride, &rng);
      ff__image src = {g.data, w, h, 3, stride};
      for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
        for (int a = 0; a < ops[o].count; a++)
          for (int resample = FF__PIL_NEAREST; resample <= FF__PIL_BICUBIC; resample++) {
            uint32_t f = ff_test_rand(&rng);
            ff__pil p = {.op = ops[o].op,
                         .arg = ops[o].args[a],
                         .resample = resample,
                         .fill = {(uint8_t)f, (uint8_t)(f >> 8), (uint8_t)(f >> 16)}};
            char what[96];
            snprintf(what, sizeof what, "op %d arg %g resample %d", (int)p.op, p.arg, resample);
            check_op(&p, &src, what);
            checked++;
          }
      ff_test_guarded_free(&g);
    }
  assert_int_equal(checked, 40 * 49 * 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(warps_match_the_per_pixel_kernel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
