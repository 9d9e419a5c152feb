/* test_nvjpeg.c — nvJPEG loaded at run time (exec/nvjpeg.c), through a stub
 * libnvjpeg (tests/stub/nvjpeg_stub.c) on the same dlopen path: a missing or
 * wrong library is reported with the reason; the handle takes its scratch
 * memory through our allocators, and a refusal there is the budget; the
 * hardware backend is used when there is one, else the hybrid; the support
 * check refuses progressive, 4:1:1, CMYK and unparsable files; a batch
 * decodes region or whole image like libjpeg-turbo; a corrupt stream fails
 * the batch as bad data. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "exec/nvjpeg.h"
#include "fixtures.h"

/* Allocators over malloc that count, and refuse when told to. */
typedef struct counter {
  long dev_allocs, dev_live, pinned_allocs;
  int refuse;
} counter;

static int dev_malloc(void *ctx, void **p, size_t n, void *stream) {
  (void)stream;
  counter *c = ctx;
  if (c->refuse) return 1;
  c->dev_allocs++, c->dev_live++;
  return !(*p = malloc(n));
}

static int dev_free(void *ctx, void *p, size_t n, void *stream) {
  (void)n, (void)stream;
  ((counter *)ctx)->dev_live--;
  free(p);
  return 0;
}

static int pinned_malloc(void *ctx, void **p, size_t n, void *stream) {
  (void)stream;
  ((counter *)ctx)->pinned_allocs++;
  return !(*p = malloc(n));
}

static int pinned_free(void *ctx, void *p, size_t n, void *stream) {
  (void)ctx, (void)n, (void)stream;
  free(p);
  return 0;
}

static ff_status open_lib(const char *lib, counter *c, ff__nvjpeg **out, ff__error *err) {
  if (lib) setenv("FF_NVJPEG_LIBRARY", lib, 1);
  else unsetenv("FF_NVJPEG_LIBRARY");
  ff__nvjpeg_alloc a = {c, dev_malloc, dev_free, pinned_malloc, pinned_free};
  ff_status st = ff__nvjpeg_open(&a, out, err);
  unsetenv("FF_NVJPEG_LIBRARY");
  return st;
}

static ff__nvjpeg *open_stub(counter *c, int hardware) {
  if (hardware) setenv("FF_STUB_NVJPEG_HARDWARE", "1", 1);
  ff__nvjpeg *n = NULL;
  ff__error err;
  ff_status st = open_lib(getenv("FF_NVJPEG_STUB"), c, &n, &err);
  unsetenv("FF_STUB_NVJPEG_HARDWARE");
  if (st) fail_msg("stub: %s", err.msg);
  return n;
}

static uint8_t *jpeg_of(const char *name, int w, int h, ff_test_jpeg_kind kind, size_t *size) {
  char path[1100];
  snprintf(path, sizeof path, "%s/%s", ff_test_dir(name), name);
  ff_test_write_jpeg_as(path, w, h, 90, &kind, 7);
  return ff_test_read(path, size);
}

static void a_missing_libnvjpeg_is_reported_with_the_reason(void **state) {
  (void)state;
  counter c = {0};
  ff__nvjpeg *n = NULL;
  ff__error err;
  assert_int_equal(open_lib("/nonexistent/libnvjpeg.so.13", &c, &n, &err), FF_EDEVICE);
  assert_null(n);
  assert_non_null(strstr(err.msg, "nvjpeg not available"));
  assert_non_null(strstr(err.msg, "/nonexistent/libnvjpeg.so.13"));
  /* the default search names every library it tried, or finds one */
  if (open_lib(NULL, &c, &n, &err) == FF_OK) {
    ff__nvjpeg_close(n);
  } else {
    assert_non_null(strstr(err.msg, "libnvjpeg.so.13"));
    assert_non_null(strstr(err.msg, "libnvjpeg.so.12"));
  }
  /* a library without nvJPEG's entry points */
  assert_int_equal(open_lib("libm.so.6", &c, &n, &err), FF_EDEVICE);
  assert_non_null(strstr(err.msg, "nvjpegCreateExV2"));
  assert_int_equal(c.dev_allocs, 0);
}

static void the_handle_takes_its_memory_through_our_allocators(void **state) {
  (void)state;
  counter c = {0};
  ff__nvjpeg *n = open_stub(&c, 0);
  assert_string_equal(ff__nvjpeg_backend(n), "nvjpeg-hybrid"); /* the stub has no JPEG engine by default */
  assert_false(ff__nvjpeg_decodes_region(n));
  assert_true(c.dev_allocs > 0);
  ff__nvjpeg_close(n);
  assert_int_equal(c.dev_live, 0);
  n = open_stub(&c, 1);
  assert_string_equal(ff__nvjpeg_backend(n), "nvjpeg-hardware");
  assert_true(ff__nvjpeg_decodes_region(n));
  ff__nvjpeg_close(n);
  setenv("FF_NVJPEG_BACKEND", "hybrid", 1); /* forced, though the engine is there */
  n = open_stub(&c, 1);
  unsetenv("FF_NVJPEG_BACKEND");
  assert_string_equal(ff__nvjpeg_backend(n), "nvjpeg-hybrid");
  ff__nvjpeg_close(n);
  c.refuse = 1; /* the pool says no: no handle */
  ff__error err;
  assert_int_equal(open_lib(getenv("FF_NVJPEG_STUB"), &c, &n, &err), FF_EBUDGET);
  assert_non_null(strstr(err.msg, "ALLOCATOR_FAILURE"));
}

static void the_support_check_refuses_what_the_decoder_cannot_do(void **state) {
  (void)state;
  counter c = {0};
  ff__nvjpeg *n = open_stub(&c, 0);
  struct {
    const char *name;
    ff_test_jpeg_kind kind;
    const char *why; /* NULL: taken */
  } cases[] = {
      {"baseline420.jpg", {0, 2, 2, 0}, NULL},
      {"baseline444.jpg", {0, 1, 1, 0}, NULL},
      {"gray.jpg", {1, 0, 0, 0}, NULL},
      {"progressive.jpg", {0, 2, 2, 1}, "not supported"},
      {"sub411.jpg", {0, 4, 1, 0}, "not supported"},
      {"cmyk.jpg", {2, 0, 0, 0}, "CMYK"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    size_t size;
    uint8_t *jpg = jpeg_of(cases[i].name, 48, 32, cases[i].kind, &size);
    const char *why = "";
    int takes = ff__nvjpeg_takes(n, jpg, size, &why);
    if (takes != !cases[i].why) fail_msg("%s: takes %d (%s)", cases[i].name, takes, why);
    if (cases[i].why && !strstr(why, cases[i].why)) fail_msg("%s: '%s'", cases[i].name, why);
    free(jpg);
  }
  const char *why;
  assert_false(ff__nvjpeg_takes(n, (const uint8_t *)"not a jpeg at all", 17, &why));
  assert_non_null(strstr(why, "parse"));
  ff__nvjpeg_close(n);
}

/* Decodes a 4:2:0 image's region with each backend and compares it to the
 * CPU codec's region decode (libjpeg-turbo, the same settings). */
static void a_batch_decodes_the_region_as_libjpeg_turbo_does(void **state) {
  (void)state;
  size_t size;
  uint8_t *jpg = jpeg_of("roi.jpg", 96, 64, (ff_test_jpeg_kind){0, 2, 2, 0}, &size);
  ff__decode_req req = {.crop_x = 10, .crop_y = 6, .crop_width = 40, .crop_height = 30};
  ff__buf px = {0};
  ff__image want;
  assert_int_equal(ff__codec_decode(jpg, size, "roi.jpg", &req, &px, &want, NULL), FF_OK);
  for (int hw = 0; hw < 2; hw++) {
    counter c = {0};
    ff__nvjpeg *n = open_stub(&c, hw);
    int region = ff__nvjpeg_decodes_region(n);
    size_t pitch = (size_t)(region ? 40 : 96) * 3;
    uint8_t *dst = calloc(pitch * 64, 1);
    ff__nvjpeg_image im = {jpg, size, 96, 64, 10, 6, 40, 30, dst, pitch};
    long before = c.dev_allocs;
    ff__error err;
    assert_int_equal(ff__nvjpeg_decode(n, &im, 1, NULL, &err), FF_OK);
    assert_true(c.dev_allocs > before); /* its scratch came through our allocator */
    const uint8_t *got = region ? dst : dst + (6 * 96 + 10) * 3;
    for (int y = 0; y < 30; y++)
      if (memcmp(got + (size_t)y * pitch, want.data + (size_t)y * want.stride, 40 * 3))
        fail_msg("%s: row %d differs", ff__nvjpeg_backend(n), y);
    c.refuse = 1;
    assert_int_equal(ff__nvjpeg_decode(n, &im, 1, NULL, &err), FF_EBUDGET);
    c.refuse = 0;
    free(dst);
    ff__nvjpeg_close(n);
  }
  ff__buf_free(&px);
  free(jpg);
}

static void a_corrupt_stream_fails_the_batch_as_bad_data(void **state) {
  (void)state;
  size_t size;
  uint8_t *good = jpeg_of("good.jpg", 64, 48, (ff_test_jpeg_kind){0, 2, 2, 0}, &size);
  uint8_t *bad = malloc(size);
  memcpy(bad, good, size);
  bad[size / 2] = 0xFF, bad[size / 2 + 1] = 0xD9; /* the entropy data stops half way */
  size_t bad_size = size / 2 + 2;
  counter c = {0};
  ff__nvjpeg *n = open_stub(&c, 0);
  const char *why;
  assert_true(ff__nvjpeg_takes(n, bad, bad_size, &why)); /* its header is sound */
  uint8_t *dst = malloc(64 * 48 * 3 * 2);
  ff__nvjpeg_image im[2] = {{good, size, 64, 48, 0, 0, 0, 0, dst, 64 * 3},
                            {bad, bad_size, 64, 48, 0, 0, 0, 0, dst + 64 * 48 * 3, 64 * 3}};
  ff__error err;
  assert_int_equal(ff__nvjpeg_decode(n, im, 2, NULL, &err), FF_EDATA);
  assert_non_null(strstr(err.msg, "NVJPEG_STATUS_BAD_JPEG"));
  assert_int_equal(ff__nvjpeg_decode(n, im, 1, NULL, &err), FF_OK); /* the handle goes on */
  ff__nvjpeg_close(n);
  assert_int_equal(c.dev_live, 0);
  free(dst), free(bad), free(good);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_missing_libnvjpeg_is_reported_with_the_reason),
      cmocka_unit_test(the_handle_takes_its_memory_through_our_allocators),
      cmocka_unit_test(the_support_check_refuses_what_the_decoder_cannot_do),
      cmocka_unit_test(a_batch_decodes_the_region_as_libjpeg_turbo_does),
      cmocka_unit_test(a_corrupt_stream_fails_the_batch_as_bad_data),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
