/* test_normals.c — random_erasing's normal noise (ops/normals.h): the
 * library's build (its AVX2 clone where the CPU has AVX2) gives the floats
 * of this file's scalar build of the same code (tests/CMakeLists.txt
 * compiles it without vectorisation), bit for bit, for any n; and the
 * values are standard normal: mean, variance, the tails, and a
 * Kolmogorov–Smirnov distance to the normal CDF. */
#include <math.h>
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/normals.h"
#include "ops/ops.h"

static int by_value(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static void library_build_equals_scalar_build(void **state) {
  (void)state;
  enum { MAX = 30240 + 5 }; /* a 112x90 box's three planes, and then some */
  static const size_t ns[] = {1, 2, 3, 5, 63, 64, 65, 127, 128, 129, 255, 257, 1001, 30240, MAX};
  float *lib = malloc((MAX + 1) * sizeof *lib), *ref = malloc(MAX * sizeof *ref),
        *whole = malloc(MAX * sizeof *whole);
  assert_non_null(lib), assert_non_null(ref), assert_non_null(whole);
  uint64_t key = 0x9E3779B97F4A7C15u;
  for (int k = 0; k < 40; k++, key = key * 6364136223846793005u + 1442695040888963407u) {
    ff__normals(key, MAX, whole);
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
      size_t n = ns[i];
      memset(lib, 0xff, (MAX + 1) * sizeof *lib), memset(ref, 0xff, MAX * sizeof *ref);
      ff__erase_normals(key, n, lib);
      ff__normals(key, n, ref);
      assert_memory_equal(lib, ref, n * sizeof *lib);
      assert_memory_equal(lib, whole, n * sizeof *lib); /* the first n values do not depend on n */
      assert_true(lib[n] != lib[n]);                    /* nothing written past n: still the NaN pattern */
    }
  }
  free(lib), free(ref), free(whole);
}

static void values_are_standard_normal(void **state) {
  (void)state;
  enum { N = 1 << 20 };
  float *x = malloc(N * sizeof *x);
  assert_non_null(x);
  for (int k = 0; k < 16; k++)
    ff__erase_normals(1000u + (uint64_t)k, N / 16, x + k * (N / 16));
  double sum = 0, sq = 0, quart = 0, top = 0;
  int beyond4 = 0;
  for (int i = 0; i < N; i++) {
    double v = x[i];
    assert_true(isfinite(v));
    sum += v, sq += v * v, quart += v * v * v * v;
    beyond4 += fabs(v) > 4.0;
    top = fabs(v) > top ? fabs(v) : top;
  }
  double mean = sum / N, var = sq / N - mean * mean;
  /* bounds at about five standard errors */
  assert_true(fabs(mean) < 5.0 / sqrt(N));
  assert_true(fabs(var - 1.0) < 5.0 * sqrt(2.0 / N));
  assert_true(fabs(quart / N - 3.0) < 5.0 * sqrt(96.0 / N));
  /* P(|x| > 4) = 6.334e-5: 66.4 expected; |x| reaches 4.5 (6.8 expected
   * beyond it) and at most sqrt(2 ln 2^24) = 5.77 */
  assert_true(beyond4 > 30 && beyond4 < 110);
  assert_true(top > 4.5 && top < 5.78);
  qsort(x, N, sizeof *x, by_value);
  double d = 0;
  for (int i = 0; i < N; i++) {
    double cdf = 0.5 * erfc(-x[i] / sqrt(2.0));
    double lo = cdf - (double)i / N, hi = (double)(i + 1) / N - cdf;
    d = fmax(d, fmax(lo, hi));
  }
  assert_true(d < 1.95 / sqrt(N)); /* KS at the 0.001 level */
  free(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(library_build_equals_scalar_build),
      cmocka_unit_test(values_are_standard_normal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
