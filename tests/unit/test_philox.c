/* test_philox.c — the RNG against Random123's known-answer vectors, and the
 * properties the planner relies on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/philox.h"

static void philox_matches_random123_known_answers(void **state) {
  (void)state;
  static const uint32_t cases[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e,
       0xa20bc7c6, 0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
       0x5001e420, 0x24126ea1},
  };
  for (int i = 0; i < 3; i++) {
    uint32_t out[4];
    ff__philox4x32_10(cases[i] + 4, cases[i], out);
    for (int k = 0; k < 4; k++) assert_int_equal(out[k], cases[i][6 + k]);
  }
}

static void streams_differ_by_index_and_epoch(void **state) {
  (void)state;
  ff__philox a, b, c;
  ff__philox_init(&a, 7, FF__RNG_AUGMENT, 1, 0);
  ff__philox_init(&b, 7, FF__RNG_AUGMENT, 2, 0);
  ff__philox_init(&c, 7, FF__RNG_AUGMENT, 1, 1);
  uint32_t x = ff__philox_u32(&a);
  assert_int_not_equal(x, ff__philox_u32(&b));
  assert_int_not_equal(x, ff__philox_u32(&c));
  ff__philox_init(&b, 7, FF__RNG_AUGMENT, 1, 0);
  assert_int_equal(x, ff__philox_u32(&b));
}

static void randint_stays_in_range_and_covers_it(void **state) {
  (void)state;
  ff__philox r;
  ff__philox_init(&r, 1, FF__RNG_SHUFFLE, 0, 0);
  int seen[7] = {0};
  for (int i = 0; i < 7000; i++) {
    int64_t v = ff__philox_randint(&r, -3, 3);
    assert_true(v >= -3 && v <= 3);
    seen[v + 3]++;
  }
  for (int k = 0; k < 7; k++) assert_in_range(seen[k], 850, 1150);
}

static void uniform_stays_in_half_open_range(void **state) {
  (void)state;
  ff__philox r;
  ff__philox_init(&r, 3, FF__RNG_AUGMENT, 5, 9);
  double sum = 0;
  for (int i = 0; i < 10000; i++) {
    float u = ff__philox_uniform(&r, 0.08f, 1.0f);
    assert_true(u >= 0.08f && u < 1.0f);
    sum += u;
  }
  assert_in_range((long)(sum / 10000 * 1000), 530, 550); /* mean 0.54 */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(philox_matches_random123_known_answers),
      cmocka_unit_test(streams_differ_by_index_and_epoch),
      cmocka_unit_test(randint_stays_in_range_and_covers_it),
      cmocka_unit_test(uniform_stays_in_half_open_range),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
