/* test_bytes.c — sizes as users write them (core/bytes.h): plain bytes, the
 * K/M/G binary suffixes in either case, and every malformed form refused
 * with *out untouched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/bytes.h"

static void sizes_with_and_without_suffix(void **state) {
  (void)state;
  size_t v = 0;
  assert_true(ff__parse_bytes("0", &v) && v == 0);
  assert_true(ff__parse_bytes("65536", &v) && v == 65536);
  assert_true(ff__parse_bytes("512K", &v) && v == 512u << 10);
  assert_true(ff__parse_bytes("256m", &v) && v == 256u << 20);
  assert_true(ff__parse_bytes("2G", &v) && v == (size_t)2 << 30);
}

static void malformed_sizes_are_refused(void **state) {
  (void)state;
  const char *bad[] = {"", "M", "-5", "+5", " 5", "5 ", "5MB", "5T", "1.5G", "0x10",
                       "99999999999999999999", "17179869184G"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    size_t v = 7;
    assert_false(ff__parse_bytes(bad[i], &v));
    assert_int_equal(v, 7);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sizes_with_and_without_suffix),
      cmocka_unit_test(malformed_sizes_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
