/* test_sample.c — a loader's samples and order outside the ring
 * (ff_loader_sample_info, ff_loader_sample_images, ff_loader_epoch_order),
 * the batch stage turned off (ff_loader_set_mix_enabled) and pinned memory
 * as DataLoader's pin_memory=True asks for it (pin_memory 2): what a script
 * reaches through a DataLoader's dataset and sampler must be what the
 * batches carry. */
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

enum { CLASSES = 3, PER_CLASS = 7, N = CLASSES * PER_CLASS };

static char folder[1024], source[1100];

static int make_folder(void **state) {
  (void)state;
  snprintf(folder, sizeof folder, "%s", ff_test_dir("sample"));
  ff_test_make_imagefolder(folder, CLASSES, PER_CLASS, 30, 70, 11);
  snprintf(source, sizeof source, "imagefolder:%s", folder);
  return 0;
}

/* A loader on the folder; timm's Mixup needs even batches: drop_last with one. */
static ff_loader *open_ok(const char *pipeline, int batch_size, int rank, int world_size, int repeats) {
  ff_config c;
  ff_config_init(&c);
  c.source = source, c.pipeline = pipeline, c.batch_size = batch_size, c.seed = 9, c.num_threads = 2;
  c.drop_last = strstr(pipeline, "mixup_cutmix") != NULL;
  c.rank = rank, c.world_size = world_size, c.repeated_augmentations = repeats;
  ff_loader *l = NULL;
  ff_status st = ff_loader_open(&c, &l);
  if (st) fail_msg("open: %s", ff_loader_errmsg(l));
  return l;
}

static size_t tensor_bytes(const ff_tensor *t) {
  size_t n = 1, elem = t->dtype == FF_UINT8 ? 1 : t->dtype == FF_INT64 ? 8 : t->dtype == FF_FLOAT32 ? 4 : 2;
  for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
  return n * elem;
}

/* Every sample of epoch 1's batches, run alone, gives the bytes of its place in the batch. */
static void check_samples_equal_batches(const char *pipeline, int views) {
  ff_loader *l = open_ok(pipeline, 4, 0, 1, 0);
  assert_int_equal(ff_loader_num_views(l), (size_t)views);
  assert_int_equal(ff_loader_set_epoch(l, 1), FF_OK);
  ff_batch *b;
  int checked = 0;
  while (ff_loader_next(l, &b) == FF_OK) {
    const int64_t *idx = ff_batch_sample_indices(b);
    ff_tensor labels;
    ff_batch_labels(b, &labels);
    for (size_t s = 0; s < ff_batch_size(b); s++, checked++) {
      ff_tensor one[4];
      int64_t label = -2;
      assert_int_equal(ff_loader_sample_images(l, (size_t)idx[s], 1, one, 4, &label), FF_OK);
      assert_int_equal(label, ((const int64_t *)labels.data)[s]);
      for (int v = 0; v < views; v++) {
        ff_tensor batch;
        assert_int_equal(ff_batch_view_images(b, (size_t)v, &batch), FF_OK);
        assert_int_equal(one[v].ndim, 3);
        for (int d = 0; d < 3; d++) assert_int_equal(one[v].shape[d], batch.shape[d + 1]);
        size_t bytes = tensor_bytes(&one[v]);
        assert_memory_equal(one[v].data, (const char *)batch.data + s * bytes, bytes);
      }
      ff_free(one[0].data);
    }
    ff_batch_release(b);
  }
  assert_int_equal(checked, N);
  ff_loader_close(l);
}

static void a_sample_alone_equals_its_place_in_a_batch(void **state) {
  (void)state;
  check_samples_equal_batches("decode | random_resized_crop(size=24) | random_horizontal_flip | "
                              "normalize(mean=imagenet, std=imagenet) | random_erasing(p=0.5)", 1);
  check_samples_equal_batches("decode | center_crop(size=20) | rand_augment", 1);
  check_samples_equal_batches("decode || random_resized_crop(size=24) | to_dtype || 2 x random_resized_crop(size=12)",
                              3);
}

static void sample_info_names_the_file_and_its_label(void **state) {
  (void)state;
  ff_loader *l = open_ok("decode | center_crop(size=8)", 4, 0, 1, 0);
  for (int k = 0; k < CLASSES; k++)
    for (int i = 0; i < PER_CLASS; i++) {
      const char *path = NULL;
      int64_t label = -2;
      char want[1200];
      assert_int_equal(ff_loader_sample_info(l, (size_t)(k * PER_CLASS + i), &path, &label), FF_OK);
      assert_string_equal(path, ff_test_imagefolder_path(folder, k, i, want, sizeof want));
      assert_int_equal(label, k);
    }
  const char *path = "untouched";
  assert_int_equal(ff_loader_sample_info(l, N, &path, NULL), FF_EINVAL);
  assert_string_equal(path, "untouched");
  assert_non_null(strstr(ff_loader_errmsg(l), "past the 21 samples"));
  ff_tensor t;
  int64_t label = 5;
  assert_int_equal(ff_loader_sample_images(l, N, 0, &t, 1, &label), FF_EINVAL);
  assert_int_equal(label, 5);
  ff_loader_close(l);
}

/* The order of a rank's epoch as the batches hand it out: padding, repeats. */
static void check_order(int batch_size, int rank, int world_size, int repeats) {
  ff_loader *l = open_ok("decode | center_crop(size=8)", batch_size, rank, world_size, repeats);
  size_t n = ff_loader_num_samples(l);
  int64_t *order = malloc(n * sizeof *order);
  assert_non_null(order);
  assert_int_equal(ff_loader_epoch_order(l, 2, order, n - 1), FF_EINVAL);
  assert_int_equal(ff_loader_epoch_order(l, 2, order, n), FF_OK);
  assert_int_equal(ff_loader_set_epoch(l, 2), FF_OK);
  size_t at = 0;
  ff_batch *b;
  while (ff_loader_next(l, &b) == FF_OK) {
    const int64_t *idx = ff_batch_sample_indices(b);
    for (size_t s = 0; s < ff_batch_size(b); s++, at++) assert_int_equal(idx[s], order[at]);
    ff_batch_release(b);
  }
  assert_int_equal(at, n);
  int64_t first[64];
  assert_true(n <= 64);
  assert_int_equal(ff_loader_epoch_order(l, 3, first, n), FF_OK);
  assert_memory_not_equal(first, order, n * sizeof *order); /* another epoch, another permutation */
  free(order);
  ff_loader_close(l);
}

static void epoch_order_is_the_order_batches_hand_out(void **state) {
  (void)state;
  check_order(4, 0, 1, 0);
  check_order(3, 1, 4, 0); /* 21 samples on 4 ranks: padded to 24 */
  check_order(5, 2, 3, 3); /* RepeatAugSampler's positions */
}

/* With mixing off, the batch is its samples as they are and the targets the
 * smoothed one-hot rows; on again, the same batch is mixed. */
static void mixing_turned_off_leaves_the_images_and_smooths_the_targets(void **state) {
  (void)state;
  ff_loader *l = open_ok("decode | center_crop(size=16) | normalize(mean=imagenet, std=imagenet) | "
                         "mixup_cutmix(mixup_alpha=1.0, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=3)",
                         4, 0, 1, 0);
  assert_int_equal(ff_loader_set_mix_enabled(l, 0), FF_OK);
  char *json = NULL;
  assert_int_equal(ff_loader_mix_plan(l, 0, 0, &json), FF_OK);
  assert_non_null(strstr(json, "\"applied\": false"));
  ff_free(json);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  const int64_t *idx = ff_batch_sample_indices(b);
  ff_tensor images, soft, labels;
  ff_batch_images(b, &images);
  ff_batch_labels(b, &labels);
  assert_int_equal(ff_batch_soft_labels(b, &soft), FF_OK);
  size_t bytes = 3 * 16 * 16 * sizeof(float);
  for (int s = 0; s < 4; s++) {
    ff_tensor one;
    int64_t label;
    assert_int_equal(ff_loader_sample_images(l, (size_t)idx[s], 0, &one, 1, &label), FF_OK);
    assert_memory_equal(one.data, (const char *)images.data + s * bytes, bytes);
    ff_free(one.data);
    for (int c = 0; c < 3; c++) {
      float want = c == label ? 1.0f - 0.1f + 0.1f / 3 : 0.1f / 3;
      assert_float_equal(((const float *)soft.data)[s * 3 + c], want, 1e-6);
    }
  }
  float *unmixed = malloc(4 * bytes);
  assert_non_null(unmixed);
  memcpy(unmixed, images.data, 4 * bytes);
  ff_batch_release(b);
  assert_int_equal(ff_loader_set_mix_enabled(l, 1), FF_OK);
  assert_int_equal(ff_loader_seek(l, 0, 0), FF_OK);
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_batch_images(b, &images);
  assert_memory_not_equal(images.data, unmixed, 4 * bytes);
  ff_batch_release(b);
  free(unmixed);
  ff_loader_close(l);
  l = open_ok("decode | center_crop(size=16)", 4, 0, 1, 0);
  assert_int_equal(ff_loader_set_mix_enabled(l, 0), FF_EINVAL);
  assert_non_null(strstr(ff_loader_errmsg(l), "no mixup_cutmix"));
  ff_loader_close(l);
}

/* pin_memory 2 pins where pin_memory 1 can, and otherwise opens with
 * ordinary memory where 1 fails. */
static void pin_memory_2_pins_when_it_can_and_never_fails_for_it(void **state) {
  (void)state;
  for (int emu = 0; emu < 2; emu++) {
    ff_config c;
    ff_config_init(&c);
    c.source = source, c.pipeline = "decode | center_crop(size=8)", c.batch_size = 4, c.num_threads = 1;
    c.device = emu ? "emu:0" : "cpu";
    c.pin_memory = 1;
    ff_loader *strict = NULL;
    int pinnable = ff_loader_open(&c, &strict) == FF_OK;
    ff_loader_close(strict);
    assert_true(pinnable || !emu); /* the emulated device always pins */
    c.pin_memory = 2;
    ff_loader *l = NULL;
    assert_int_equal(ff_loader_open(&c, &l), FF_OK);
    ff_stats s;
    ff_loader_stats(l, &s);
    assert_int_equal(s.host_memory_pinned, pinnable);
    ff_batch *b;
    assert_int_equal(ff_loader_next(l, &b), FF_OK);
    ff_batch_release(b);
    ff_loader_close(l);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_sample_alone_equals_its_place_in_a_batch),
      cmocka_unit_test(sample_info_names_the_file_and_its_label),
      cmocka_unit_test(epoch_order_is_the_order_batches_hand_out),
      cmocka_unit_test(mixing_turned_off_leaves_the_images_and_smooths_the_targets),
      cmocka_unit_test(pin_memory_2_pins_when_it_can_and_never_fails_for_it),
  };
  return cmocka_run_group_tests(tests, make_folder, NULL);
}
