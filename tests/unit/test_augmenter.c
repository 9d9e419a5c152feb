/* test_augmenter.c — ff_augmenter (fusionflow.h): items in any order, on any
 * number of threads, run after run, give the bytes of the loader's samples of
 * the same index and epoch (float32, and uint8 before normalize); items without
 * bytes are read from the source; each item fails alone, naming it; what an
 * augmenter cannot run is refused at open, and bad run arguments before
 * anything runs. The sanitizer builds run it for the threads' hand-offs. */
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

#define CLASSES 3
#define PER_CLASS 6
#define COUNT (CLASSES * PER_CLASS)
#define SIDE 24
#define OPS "decode | random_resized_crop(size=24) | random_horizontal_flip | rand_augment(num_ops=2, magnitude=9)"
#define NORM OPS " | normalize(mean=imagenet, std=imagenet)"

static char root[512], spec[600];
static uint8_t *files[COUNT];
static size_t file_bytes[COUNT];

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "%s", ff_test_dir("augmenter-folder"));
  snprintf(spec, sizeof spec, "imagefolder:%s", root);
  ff_test_make_imagefolder(root, CLASSES, PER_CLASS, 30, 70, 17);
  char path[1024];
  for (int i = 0; i < COUNT; i++)
    files[i] = ff_test_read(ff_test_imagefolder_path(root, i / PER_CLASS, i % PER_CLASS, path, sizeof path),
                            &file_bytes[i]);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < COUNT; i++) free(files[i]);
  return 0;
}

/* Every sample of the folder as the loader makes it in `epoch`, in index order (one batch). */
static uint8_t *loader_samples(const char *pipeline, uint64_t epoch, size_t *sample_bytes) {
  ff_config c;
  ff_config_init(&c);
  c.source = spec, c.pipeline = pipeline, c.batch_size = COUNT, c.shuffle = 0, c.seed = 9, c.num_threads = 2;
  c.rank = 0, c.world_size = 1;
  ff_loader *l = NULL;
  if (ff_loader_open(&c, &l)) fail_msg("open: %s", ff_loader_errmsg(l));
  assert_int_equal(ff_loader_set_epoch(l, epoch), FF_OK);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_tensor t;
  ff_batch_images(b, &t);
  *sample_bytes = (size_t)(t.shape[1] * t.shape[2] * t.shape[3]) * (t.dtype == FF_FLOAT32 ? 4 : 1);
  uint8_t *all = malloc(COUNT * *sample_bytes);
  memcpy(all, t.data, COUNT * *sample_bytes);
  ff_batch_release(b);
  ff_loader_close(l);
  return all;
}

static ff_augmenter *open_augmenter(const char *pipeline, int threads, int dtype, int format, const char *source) {
  ff_config c;
  ff_config_init(&c);
  c.pipeline = pipeline, c.seed = 9, c.num_threads = threads, c.output_dtype = dtype, c.memory_format = format;
  c.source = source;
  ff_augmenter *a = NULL;
  if (ff_augmenter_open(&c, &a)) fail_msg("open: %s", ff_augmenter_errmsg(a));
  return a;
}

static void test_items_equal_the_loaders_samples_whatever_the_threads(void **state) {
  (void)state;
  size_t bytes;
  uint8_t *want = loader_samples(NORM, 2, &bytes);
  ff_augment_item items[COUNT];
  ff_status statuses[COUNT];
  uint8_t *out = malloc(COUNT * bytes);
  for (int threads = 1; threads <= 4; threads += 3) {
    ff_augmenter *a = open_augmenter(NORM, threads, FF_OUTPUT_DTYPE_AUTO, FF_MEMORY_FORMAT_AUTO, NULL);
    assert_int_equal(ff_augmenter_sample_bytes(a), bytes);
    for (int rep = 0; rep < 3; rep++) { /* reversed, then halves: runs reuse the threads */
      size_t n = rep ? COUNT / 2 : COUNT, first = rep == 2 ? COUNT / 2 : 0;
      for (size_t k = 0; k < n; k++) {
        size_t i = rep ? first + k : COUNT - 1 - k;
        items[k] = (ff_augment_item){files[i], file_bytes[i], i, NULL};
      }
      memset(out, 0xAB, COUNT * bytes);
      assert_int_equal(ff_augmenter_run(a, 2, items, n, out, COUNT * bytes, statuses), FF_OK);
      for (size_t k = 0; k < n; k++) {
        assert_int_equal(statuses[k], FF_OK);
        assert_null(ff_augmenter_item_errmsg(a, k));
        assert_memory_equal(out + k * bytes, want + items[k].index * bytes, bytes);
      }
    }
    ff_augmenter_close(a);
  }
  free(out);
  free(want);
}

static void test_uint8_output_is_the_pixels_before_normalize(void **state) {
  (void)state;
  size_t bytes;
  uint8_t *want = loader_samples(OPS, 1, &bytes); /* NHWC uint8 */
  assert_int_equal(bytes, SIDE * SIDE * 3);
  ff_augmenter *hwc = open_augmenter(NORM, 2, FF_OUTPUT_UINT8, FF_MEMORY_FORMAT_AUTO, spec);
  ff_augmenter *chw = open_augmenter(NORM, 2, FF_OUTPUT_UINT8, FF_MEMORY_FORMAT_CONTIGUOUS, spec);
  ff_tensor t;
  ff_augmenter_sample_shape(hwc, &t);
  assert_int_equal(t.dtype, FF_UINT8);
  assert_true(t.ndim == 3 && t.shape[0] == SIDE && t.shape[2] == 3 && t.strides[0] == SIDE * 3);
  ff_augmenter_sample_shape(chw, &t);
  assert_true(t.layout == FF_NCHW && t.shape[0] == 3 && t.strides[0] == SIDE * SIDE && t.strides[2] == 1);
  ff_augment_item items[COUNT];
  ff_status st[COUNT];
  for (int i = 0; i < COUNT; i++) items[i] = (ff_augment_item){NULL, 0, (uint64_t)i, NULL}; /* read from the source */
  uint8_t *a = malloc(COUNT * bytes), *b = malloc(COUNT * bytes);
  assert_int_equal(ff_augmenter_run(hwc, 1, items, COUNT, a, COUNT * bytes, st), FF_OK);
  assert_int_equal(ff_augmenter_run(chw, 1, items, COUNT, b, COUNT * bytes, st), FF_OK);
  assert_memory_equal(a, want, COUNT * bytes);
  for (int i = 0; i < COUNT; i++)
    for (int p = 0; p < SIDE * SIDE; p++)
      for (int c = 0; c < 3; c++) assert_int_equal(b[i * bytes + c * SIDE * SIDE + p], want[i * bytes + p * 3 + c]);
  assert_int_equal(ff_augmenter_dataset_size(hwc), COUNT);
  const char *path, *member;
  int64_t label;
  char expect[1024];
  assert_int_equal(ff_augmenter_sample(hwc, 13, &path, &member, &label), FF_OK);
  assert_string_equal(path, ff_test_imagefolder_path(root, 13 / PER_CLASS, 13 % PER_CLASS, expect, sizeof expect));
  assert_null(member);
  assert_int_equal(label, 13 / PER_CLASS);
  assert_int_equal(ff_augmenter_sample(hwc, COUNT, &path, NULL, NULL), FF_EINVAL);
  ff_augmenter_close(hwc);
  ff_augmenter_close(chw);
  free(a), free(b), free(want);
}

static void test_each_item_fails_alone_naming_it(void **state) {
  (void)state;
  size_t bytes;
  uint8_t *want = loader_samples(OPS, 0, &bytes);
  ff_augmenter *a = open_augmenter(OPS, 3, FF_OUTPUT_DTYPE_AUTO, FF_MEMORY_FORMAT_AUTO, NULL);
  ff_augment_item items[4] = {
      {files[0], file_bytes[0], 0, NULL},
      {files[1], file_bytes[1] / 10, 1, "s3://bucket/cut.jpg"}, /* truncated */
      {NULL, 0, 2, NULL},                                       /* no bytes, no source */
      {files[3], file_bytes[3], 3, NULL},
  };
  ff_status st[4];
  uint8_t *out = malloc(4 * bytes);
  assert_int_equal(ff_augmenter_run(a, 0, items, 4, out, 4 * bytes, st), FF_OK);
  assert_int_equal(st[0], FF_OK);
  assert_int_equal(st[1], FF_EDATA);
  assert_int_equal(st[2], FF_EINVAL);
  assert_int_equal(st[3], FF_OK);
  assert_true(!strncmp(ff_augmenter_item_errmsg(a, 1), "s3://bucket/cut.jpg: ", 21));
  assert_string_equal(ff_augmenter_item_errmsg(a, 2), "sample[2]: no bytes given and no source to read them from");
  assert_null(ff_augmenter_item_errmsg(a, 4));
  assert_memory_equal(out, want, bytes);
  assert_memory_equal(out + 3 * bytes, want + 3 * bytes, bytes);
  /* the next run starts clean */
  assert_int_equal(ff_augmenter_run(a, 0, items, 1, out, bytes, st), FF_OK);
  assert_null(ff_augmenter_item_errmsg(a, 1));
  ff_augmenter_close(a);
  free(out), free(want);
}

static void test_bad_run_arguments_run_nothing(void **state) {
  (void)state;
  ff_augmenter *a = open_augmenter(OPS, 2, FF_OUTPUT_DTYPE_AUTO, FF_MEMORY_FORMAT_AUTO, NULL);
  ff_augment_item item = {files[0], file_bytes[0], 0, NULL};
  ff_status st = 12345;
  uint8_t out[SIDE * SIDE * 3];
  assert_int_equal(ff_augmenter_run(a, 0, &item, 1, out, sizeof out - 1, &st), FF_EINVAL);
  assert_non_null(strstr(ff_augmenter_errmsg(a), "do not fit"));
  assert_int_equal(st, 12345);
  assert_int_equal(ff_augmenter_run(a, 0, NULL, 1, out, sizeof out, &st), FF_EINVAL);
  assert_int_equal(ff_augmenter_run(a, 0, NULL, 0, NULL, 0, NULL), FF_OK); /* nothing to do */
  assert_int_equal(ff_augmenter_run(NULL, 0, &item, 1, out, sizeof out, &st), FF_EINVAL);
  ff_augmenter_close(a);
  ff_augmenter_close(NULL);
}

static void refused(const char *pipeline, int dtype, const char *source, ff_status want, const char *says) {
  ff_config c;
  ff_config_init(&c);
  c.pipeline = pipeline, c.output_dtype = dtype, c.source = source, c.num_threads = 2;
  ff_augmenter *a = NULL;
  assert_int_equal(ff_augmenter_open(&c, &a), want);
  assert_non_null(a);
  if (!strstr(ff_augmenter_errmsg(a), says)) fail_msg("'%s' does not say '%s'", ff_augmenter_errmsg(a), says);
  ff_augment_item item = {files[0], file_bytes[0], 0, NULL};
  ff_status st;
  uint8_t out[64];
  assert_int_equal(ff_augmenter_run(a, 0, &item, 1, out, sizeof out, &st), FF_EINVAL);
  assert_int_equal(ff_augmenter_sample_bytes(a), 0);
  ff_augmenter_close(a);
}

static void test_what_it_cannot_run_is_refused_at_open(void **state) {
  (void)state;
  refused("decode || 2 x random_resized_crop(size=8) | to_dtype", 0, NULL, FF_EINVAL, "views");
  refused(NORM " | mixup_cutmix(num_classes=3)", 0, NULL, FF_EINVAL, "mixup_cutmix");
  refused(NORM " | random_erasing", FF_OUTPUT_UINT8, NULL, FF_EINVAL, "random_erasing writes the float output");
  refused(OPS " | resize(sise=3)", 0, NULL, FF_EPIPELINE, "pipeline column");
  refused(OPS, 0, "tar:http://127.0.0.1:9/shard-{0..3}.tar", FF_EINVAL, "streamed shards");
  refused(OPS, 0, "imagefolder:/nonexistent-folder", FF_EIO, "/nonexistent-folder");
  ff_augmenter *a = (ff_augmenter *)&a;
  assert_int_equal(ff_augmenter_open(NULL, &a), FF_EINVAL);
  assert_string_equal(ff_augmenter_errmsg(a), "config is NULL");
  ff_augmenter_close(a);
  ff_config c;
  ff_config_init(&c);
  assert_int_equal(ff_augmenter_open(&c, NULL), FF_EINVAL);
  c.struct_size = 0;
  assert_int_equal(ff_augmenter_open(&c, &a), FF_EINVAL);
  ff_augmenter_close(a);
}

static void test_cpu_isa_names_a_path(void **state) {
  (void)state;
  const char *isa = ff_cpu_isa();
  assert_true(!strcmp(isa, "avx512") || !strcmp(isa, "avx2") || !strcmp(isa, "scalar"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_items_equal_the_loaders_samples_whatever_the_threads),
      cmocka_unit_test(test_uint8_output_is_the_pixels_before_normalize),
      cmocka_unit_test(test_each_item_fails_alone_naming_it),
      cmocka_unit_test(test_bad_run_arguments_run_nothing),
      cmocka_unit_test(test_what_it_cannot_run_is_refused_at_open),
      cmocka_unit_test(test_cpu_isa_names_a_path),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
