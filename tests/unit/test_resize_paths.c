/* test_resize_paths.c — the resize (ops/resize.c) gives, on whatever path
 * this process takes (AVX-512, AVX2 or scalar: CMake runs this test once
 * per $FF_CPU_ISA), the bytes of a plain reference written here from the
 * shared kernels (kernels/resize.h's tables, tap sums and rounding, value
 * by value): every filter (bilinear and bicubic with antialias, bilinear
 * without, each in the float32 and the uint8 arithmetic), downscales from
 * 1x to 9x and upscales, fractional source boxes, the flip folded in, into
 * interleaved rows with padding (untouched) and into planes, from sources
 * that end at an unreadable page. torchvision's own values are the golden
 * tests' (tests/golden/test_ops_golden.py, test_v2_golden.py). */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "fusionflow/fusionflow.h"
#include "kernels/pixel.h"
#include "kernels/resize.h"
#include "ops/ops.h"

/* in_w, in_h, out_w, out_h */
static const int SIZES[][4] = {
    {1, 1, 1, 1},       {1, 1, 5, 3},      {7, 5, 3, 2},       {2, 9, 17, 4},     {40, 30, 40, 30},
    {33, 47, 16, 16},   {100, 80, 17, 33}, {320, 290, 224, 224}, {448, 336, 224, 224}, {150, 150, 224, 224},
    {500, 375, 224, 224}, {700, 90, 77, 60}, {900, 60, 100, 31},  {64, 64, 63, 65},  {19, 200, 31, 23},
    {257, 3, 255, 1},   {5, 300, 1, 40},   {613, 411, 341, 256}};
#define N_SIZES (sizeof SIZES / sizeof *SIZES)

static const int FILTERS[] = {FF__RESIZE_ANTIALIAS,
                              FF__RESIZE_ANTIALIAS | FF__RESIZE_BICUBIC,
                              0,
                              FF__RESIZE_ANTIALIAS | FF__RESIZE_UINT8,
                              FF__RESIZE_ANTIALIAS | FF__RESIZE_BICUBIC | FF__RESIZE_UINT8,
                              FF__RESIZE_UINT8};
#define N_FILTERS (sizeof FILTERS / sizeof *FILTERS)

static ff__resize_axis axis_of(int n_in, double lo, double len, int n_out, int filter) {
  ff__resize_axis a = {ff__resize_max_taps(n_in, n_out, filter), 0, 0, 0, 0, 0};
  void *mem = test_malloc(ff__resize_axis_bytes(n_out, a.max_taps));
  ff__resize_axis_place(&a, mem, n_out);
  ff__resize_axis_build_box(&a, n_in, lo, len, n_out, filter);
  return a;
}

/* Output value (r, p, c) as kernels/resize.h defines it: the horizontal
 * sums of the rows it reads, then the vertical sum over them. */
static uint8_t reference(const uint8_t *src, size_t stride, const ff__resize_axis *ax, const ff__resize_axis *ay,
                         int out_w, int r, int p, int c, int hflip) {
  int o = hflip ? out_w - 1 - p : p, n = ay->count[r];
  const int *iy = ay->idx + (size_t)r * ay->max_taps;
  const int *ix = ax->idx + (size_t)o * ax->max_taps;
  const float *wx = ax->w + (size_t)o * ax->max_taps, *wy = ay->w + (size_t)r * ay->max_taps;
  int taps[256];
  float h[256];
  uint8_t h8[256];
  for (int t = 0; t < n; t++) {
    const uint8_t *row = src + (size_t)iy[t] * stride + c;
    if (ax->precision) h8[t] = ff__resize_taps_fixed(row, 3, ix, wx, ax->count[o], ax->precision);
    else h[t] = ff__resize_taps_sum_u8(row, 3, ix, wx, ax->count[o], ff__resize_plain_taps(ax->rule, ax->count[o]));
    taps[t] = t;
  }
  if (ay->precision) return ff__resize_taps_fixed(h8, 1, taps, wy, n, ay->precision);
  return ff__round_u8(ff__resize_taps_sum(h, 1, taps, wy, n, ff__resize_plain_taps(ay->rule, n)));
}

static void resize_matches_the_reference_value_by_value(void **state) {
  (void)state;
  uint32_t rng = 11;
  int checked = 0;
  ff__op_scratch scratch = {0};
  for (size_t s = 0; s < N_SIZES; s++) {
    int in_w = SIZES[s][0], in_h = SIZES[s][1], out_w = SIZES[s][2], out_h = SIZES[s][3];
    size_t stride = (size_t)in_w * 3 + (s % 2) * 5, ostride = (size_t)out_w * 3 + 7;
    ff_test_guarded g = ff_test_guarded_image(in_w, in_h, stride, &rng);
    uint8_t *got = test_malloc(ostride * out_h), *planes = test_malloc((size_t)3 * out_w * out_h);
    for (size_t f = 0; f < N_FILTERS; f++)
      for (int boxed = 0; boxed < 2; boxed++)
        for (int hflip = 0; hflip < 2; hflip++) {
          int filter = FILTERS[f];
          if (boxed && (in_w < 3 || in_h < 3)) continue;
          /* a fractional box well inside, as a DCT-scaled decode leaves */
          double box[4] = {0.37, 1.25, in_w - 1.9, in_h - 2.6}, *b = boxed ? box : NULL;
          if (b && (b[2] <= 0 || b[3] <= 0)) continue;
          ff__resize_axis ax = axis_of(in_w, b ? b[0] : 0, b ? b[2] : in_w, out_w, filter);
          ff__resize_axis ay = axis_of(in_h, b ? b[1] : 0, b ? b[3] : in_h, out_h, filter);
          memset(got, 0xA5, ostride * out_h);
          ff__image src = {g.data, in_w, in_h, 3, stride}, dst = {got, out_w, out_h, 3, ostride};
          assert_int_equal(ff__op_resize_box(&src, b, out_w, out_h, filter, hflip, &scratch, &dst), FF_OK);
          assert_int_equal(ff__op_resize_planar(&src, b, out_w, out_h, filter, hflip, &scratch, planes), FF_OK);
          for (int r = 0; r < out_h; r++) {
            for (int p = 0; p < out_w; p++)
              for (int c = 0; c < 3; c++) {
                uint8_t want = reference(g.data, stride, &ax, &ay, out_w, r, p, c, hflip);
                uint8_t row = got[(size_t)r * ostride + (size_t)p * 3 + c];
                uint8_t plane = planes[((size_t)c * out_h + r) * out_w + p];
                if (row != want || plane != want)
                  fail_msg("%s: %dx%d -> %dx%d filter %d box %d hflip %d: (row %d, col %d, ch %d) rows %d planes %d, "
                           "reference %d", ff_cpu_isa(), in_w, in_h, out_w, out_h, filter, boxed, hflip, r, p, c, row,
                           plane, want);
              }
            for (size_t i = (size_t)out_w * 3; i < ostride; i++)
              if (got[(size_t)r * ostride + i] != 0xA5) fail_msg("%s: row %d's padding written", ff_cpu_isa(), r);
          }
          test_free(ax.count), test_free(ay.count);
          checked++;
        }
    test_free(got), test_free(planes);
    ff_test_guarded_free(&g);
  }
  ff__op_scratch_free(&scratch);
  assert_true(checked > (int)N_SIZES * (int)N_FILTERS * 3);
}

/* The float32 sums' rule: taps 1 .. 4*floor((n-1)/4) added as rounded
 * products, the rest fused; the blur keeps its own. */
static void plain_taps_follow_torchs_compiled_loop(void **state) {
  (void)state;
  static const int n[] = {1, 2, 3, 4, 5, 6, 8, 9, 10, 13, 14};
  static const int up[] = {0, 0, 0, 0, 4, 4, 4, 8, 8, 12, 12};
  static const int blur[] = {0, 0, 0, 0, 4, 5, 7, 8, 9, 12, 13};
  for (size_t i = 0; i < sizeof n / sizeof *n; i++) {
    assert_int_equal(ff__resize_plain_taps(FF__RESIZE_RULE_UPSAMPLE, n[i]), up[i]);
    assert_int_equal(ff__resize_plain_taps(FF__RESIZE_RULE_BLUR, n[i]), blur[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(plain_taps_follow_torchs_compiled_loop),
      cmocka_unit_test(resize_matches_the_reference_value_by_value),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
