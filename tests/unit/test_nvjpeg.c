/* test_nvjpeg.c — nvJPEG loaded at run time (exec/nvjpeg.c), through a stub
 * libnvjpeg (tests/stub/nvjpeg_stub.c) on the same dlopen path: a missing or
 * wrong library is reported with the reason; the handle takes its scratch
 * memory through our allocators, and a refusal there is the budget; the
 * hardware backend is used when there is one, else the hybrid; the support
 * check refuses CMYK and unparsable files on both, asks the hardware
 * backend alone (nvjpegDecodeBatchedSupportedEx) about progressive, 4:1:1
 * and the region decoded, and takes on the hybrid backend what it parses;
 * the hybrid backend takes batches of 51 or more; a batch decodes region or
 * whole image like libjpeg-turbo, and the hardware backend's scale factor
 * like libjpeg-turbo's DCT scaling; each slot has its state, pre-allocated
 * once on the hardware backend; a corrupt stream fails the batch as bad
 * data, an injected failure as the device. */
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

static int takes(ff__nvjpeg *n, const uint8_t *data, size_t size, const ff__nvjpeg_image *region, const char **why) {
  ff__nvjpeg_image im = region ? *region : (ff__nvjpeg_image){0};
  im.data = data, im.size_bytes = size;
  return ff__nvjpeg_takes(n, &im, why);
}

static void the_support_check_refuses_what_the_decoder_cannot_do(void **state) {
  (void)state;
  struct {
    const char *name;
    ff_test_jpeg_kind kind;
    const char *hardware_why, *hybrid_why; /* NULL: taken */
  } cases[] = {
      {"baseline420.jpg", {0, 2, 2, 0}, NULL, NULL},
      {"baseline444.jpg", {0, 1, 1, 0}, NULL, NULL},
      {"gray.jpg", {1, 0, 0, 0}, NULL, NULL},
      {"progressive.jpg", {0, 2, 2, 1}, "progressive", NULL},
      {"sub411.jpg", {0, 4, 1, 0}, "not supported", NULL},
      {"cmyk.jpg", {2, 0, 0, 0}, "CMYK", "CMYK"},
  };
  for (int hw = 0; hw < 2; hw++) {
    counter c = {0};
    ff__nvjpeg *n = open_stub(&c, hw);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      size_t size;
      uint8_t *jpg = jpeg_of(cases[i].name, 48, 32, cases[i].kind, &size);
      const char *why = "", *want = hw ? cases[i].hardware_why : cases[i].hybrid_why;
      int took = takes(n, jpg, size, NULL, &why);
      if (took != !want) fail_msg("%s on %s: takes %d (%s)", cases[i].name, ff__nvjpeg_backend(n), took, why);
      if (want && !strstr(why, want)) fail_msg("%s on %s: '%s'", cases[i].name, ff__nvjpeg_backend(n), why);
      free(jpg);
    }
    const char *why;
    assert_false(takes(n, (const uint8_t *)"not a jpeg at all", 17, NULL, &why));
    assert_non_null(strstr(why, "parse"));
    ff__nvjpeg_close(n);
  }
}

/* The hardware backend answers for the region that will be decoded; the
 * hybrid one decodes the whole image, whatever the region. */
static void the_hardware_support_check_is_asked_about_the_region(void **state) {
  (void)state;
  size_t size;
  uint8_t *jpg = jpeg_of("region.jpg", 64, 48, (ff_test_jpeg_kind){0, 2, 2, 0}, &size);
  ff__nvjpeg_image inside = {.image_width = 64, .image_height = 48, .x = 8, .y = 8, .width = 32, .height = 24};
  ff__nvjpeg_image outside = inside;
  outside.x = 40; /* 40 + 32 > 64 */
  const char *why = "";
  for (int hw = 0; hw < 2; hw++) {
    counter c = {0};
    ff__nvjpeg *n = open_stub(&c, hw);
    assert_true(takes(n, jpg, size, &inside, &why));
    assert_int_equal(takes(n, jpg, size, &outside, &why), !hw);
    if (hw) assert_non_null(strstr(why, "region"));
    assert_int_equal(ff__nvjpeg_min_batch(n), hw ? 1 : 51);
    ff__nvjpeg_close(n);
  }
  free(jpg);
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
    ff__nvjpeg_image im = {jpg, size, 96, 64, 10, 6, 40, 30, 0, dst, pitch};
    long before = c.dev_allocs;
    ff__error err;
    assert_int_equal(ff__nvjpeg_decode(n, 0, &im, 1, NULL, &err), FF_OK);
    assert_true(c.dev_allocs > before); /* its scratch came through our allocator */
    const uint8_t *got = region ? dst : dst + (6 * 96 + 10) * 3;
    for (int y = 0; y < 30; y++)
      if (memcmp(got + (size_t)y * pitch, want.data + (size_t)y * want.stride, 40 * 3))
        fail_msg("%s: row %d differs", ff__nvjpeg_backend(n), y);
    c.refuse = 1;
    assert_int_equal(ff__nvjpeg_decode(n, 0, &im, 1, NULL, &err), FF_EBUDGET);
    c.refuse = 0;
    free(dst);
    ff__nvjpeg_close(n);
  }
  ff__buf_free(&px);
  free(jpg);
}

/* The hardware backend's scale factor on the region of the DCT scale's
 * grid (what exec/device.c asks for when the plan chose a DCT scale) gives
 * the CPU codec's DCT-scaled region decode. */
static void the_scale_factor_decodes_as_the_dct_scaled_region(void **state) {
  (void)state;
  size_t size;
  uint8_t *jpg = jpeg_of("scaled.jpg", 200, 152, (ff_test_jpeg_kind){0, 2, 2, 0}, &size);
  ff__decode_req req = {.crop_x = 30, .crop_y = 21, .crop_width = 120, .crop_height = 100, .min_width = 50,
                        .min_height = 40};
  int r[4];
  assert_int_equal(ff__jpeg_dct_scale(&req, 200, 152, r), 4); /* a half */
  ff__buf px = {0};
  ff__image want;
  assert_int_equal(ff__codec_decode(jpg, size, "scaled.jpg", &req, &px, &want, NULL), FF_OK);
  assert_int_equal(want.width, r[2]);
  assert_int_equal(want.height, r[3]);
  counter c = {0};
  ff__nvjpeg *n = open_stub(&c, 1);
  assert_true(ff__nvjpeg_scales(n));
  size_t pitch = (size_t)r[2] * 3;
  uint8_t *dst = calloc(pitch * (size_t)r[3], 1);
  int w = r[2] * 2, h = r[3] * 2;
  if (r[0] * 2 + w > 200) w = 200 - r[0] * 2;
  if (r[1] * 2 + h > 152) h = 152 - r[1] * 2;
  ff__nvjpeg_image im = {jpg, size, 200, 152, r[0] * 2, r[1] * 2, w, h, 1, dst, pitch};
  ff__error err;
  assert_int_equal(ff__nvjpeg_decode(n, 0, &im, 1, NULL, &err), FF_OK);
  for (int y = 0; y < r[3]; y++)
    if (memcmp(dst + (size_t)y * pitch, want.data + (size_t)y * want.stride, pitch)) fail_msg("row %d differs", y);
  free(dst);
  ff__nvjpeg_close(n);
  ff__buf_free(&px);
  free(jpg);
}

/* Two slots, two states: each pre-allocated once on the hardware backend. */
static void each_slot_has_its_state_preallocated_once(void **state) {
  (void)state;
  size_t size;
  uint8_t *jpg = jpeg_of("slots.jpg", 64, 48, (ff_test_jpeg_kind){0, 2, 2, 0}, &size);
  uint8_t *dst = malloc(64 * 48 * 3);
  ff__nvjpeg_image im = {jpg, size, 64, 48, 0, 0, 0, 0, 0, dst, 64 * 3};
  for (int hw = 0; hw < 2; hw++) {
    counter c = {0};
    ff__nvjpeg *n = open_stub(&c, hw);
    long before = ff_test_nvjpeg_stub_count("nvjpegStubPreAllocations");
    ff__error err;
    for (int round = 0; round < 3; round++)
      for (int slot = 0; slot < 2; slot++) assert_int_equal(ff__nvjpeg_decode(n, slot, &im, 1, NULL, &err), FF_OK);
    assert_int_equal(ff_test_nvjpeg_stub_count("nvjpegStubPreAllocations") - before, hw ? 2 : 0);
    ff__nvjpeg_close(n);
  }
  free(dst), free(jpg);
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
  assert_true(takes(n, bad, bad_size, NULL, &why)); /* its header is sound */
  uint8_t *dst = malloc(64 * 48 * 3 * 2);
  ff__nvjpeg_image im[2] = {{good, size, 64, 48, 0, 0, 0, 0, 0, dst, 64 * 3},
                            {bad, bad_size, 64, 48, 0, 0, 0, 0, 0, dst + 64 * 48 * 3, 64 * 3}};
  ff__error err;
  assert_int_equal(ff__nvjpeg_decode(n, 0, im, 2, NULL, &err), FF_EDATA);
  assert_non_null(strstr(err.msg, "NVJPEG_STATUS_BAD_JPEG"));
  assert_int_equal(ff__nvjpeg_decode(n, 0, im, 1, NULL, &err), FF_OK); /* the handle goes on */
  setenv("FF_STUB_NVJPEG_FAIL", "batch", 1); /* a decoder that fails: the device's status, not the data's */
  assert_int_equal(ff__nvjpeg_decode(n, 0, im, 1, NULL, &err), FF_EDEVICE);
  assert_non_null(strstr(err.msg, "EXECUTION_FAILED"));
  setenv("FF_STUB_NVJPEG_FAIL", "width:64", 1); /* an image it refuses fails its whole batch */
  assert_int_equal(ff__nvjpeg_decode(n, 0, im, 1, NULL, &err), FF_EDEVICE);
  assert_non_null(strstr(err.msg, "JPEG_NOT_SUPPORTED"));
  unsetenv("FF_STUB_NVJPEG_FAIL");
  ff__nvjpeg_close(n);
  assert_int_equal(c.dev_live, 0);
  free(dst), free(bad), free(good);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_missing_libnvjpeg_is_reported_with_the_reason),
      cmocka_unit_test(the_handle_takes_its_memory_through_our_allocators),
      cmocka_unit_test(the_support_check_refuses_what_the_decoder_cannot_do),
      cmocka_unit_test(the_hardware_support_check_is_asked_about_the_region),
      cmocka_unit_test(a_batch_decodes_the_region_as_libjpeg_turbo_does),
      cmocka_unit_test(the_scale_factor_decodes_as_the_dct_scaled_region),
      cmocka_unit_test(each_slot_has_its_state_preallocated_once),
      cmocka_unit_test(a_corrupt_stream_fails_the_batch_as_bad_data),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
