/* test_callback.c — the callback source (ff_source_callbacks): the images of
 * an ImageFolder tree handed in from memory give the same batches as the
 * folder source for the same seed, whatever the thread count; a batch's
 * samples are asked for in one call; every fetch is released exactly once
 * by the time ff_loader_close returns; an item with an error fails its
 * sample naming it, under raise and skip; a count too large to index is
 * FF_ENOMEM, not a crash. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "fusionflow/fusionflow.h"

#define CLASSES 3
#define PER_CLASS 7
#define COUNT (CLASSES * PER_CLASS)
#define PIPELINE "decode | random_resized_crop(size=24) | random_horizontal_flip"

static char root[512];

typedef struct memsource {
  uint8_t *data[COUNT];
  size_t size[COUNT];
  int64_t fail_index; /* -1: none */
  pthread_mutex_t mu;
  size_t fetches, releases, items_fetched, items_released, largest;
} memsource;

static void mem_fetch(void *ctx, const uint64_t *indices, size_t n, ff_source_item *items) {
  memsource *m = ctx;
  for (size_t k = 0; k < n; k++) {
    uint64_t i = indices[k];
    assert_true(i < COUNT);
    if ((int64_t)i == m->fail_index) {
      items[k].error = "KeyError: the shard is gone";
      continue;
    }
    items[k] = (ff_source_item){m->data[i], m->size[i], (int64_t)(i / PER_CLASS), NULL, m};
  }
  pthread_mutex_lock(&m->mu);
  m->fetches++, m->items_fetched += n;
  if (n > m->largest) m->largest = n;
  pthread_mutex_unlock(&m->mu);
}

static void mem_release(void *ctx, ff_source_item *items, size_t n) {
  memsource *m = ctx;
  (void)items;
  pthread_mutex_lock(&m->mu);
  m->releases++, m->items_released += n;
  pthread_mutex_unlock(&m->mu);
}

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "%s", ff_test_dir("callback-folder"));
  ff_test_make_imagefolder(root, CLASSES, PER_CLASS, 30, 60, 11);
  return 0;
}

static void mem_open(memsource *m) {
  memset(m, 0, sizeof *m);
  m->fail_index = -1;
  pthread_mutex_init(&m->mu, NULL);
  char path[1024];
  for (int i = 0; i < COUNT; i++)
    m->data[i] = ff_test_read(ff_test_imagefolder_path(root, i / PER_CLASS, i % PER_CLASS, path, sizeof path),
                              &m->size[i]);
}

static void mem_close(memsource *m) {
  for (int i = 0; i < COUNT; i++)
    free(m->data[i]);
  pthread_mutex_destroy(&m->mu);
}

static ff_config config(int threads) {
  ff_config c;
  ff_config_init(&c);
  c.pipeline = PIPELINE;
  c.batch_size = 4;
  c.seed = 5;
  c.num_threads = threads;
  c.rank = 0, c.world_size = 1;
  return c;
}

/* All batches of epochs 0 and 1, images and labels, concatenated. */
static uint8_t *run(const ff_config *c, size_t *size, size_t *batches) {
  ff_loader *l = NULL;
  ff_status st = ff_loader_open(c, &l);
  if (st) fail_msg("open: %s", ff_loader_errmsg(l));
  uint8_t *all = NULL;
  *size = 0, *batches = 0;
  for (int epoch = 0; epoch < 2; epoch++) {
    ff_batch *b;
    while ((st = ff_loader_next(l, &b)) == FF_OK) {
      ff_tensor img, lab;
      ff_batch_images(b, &img);
      ff_batch_labels(b, &lab);
      size_t ni = (size_t)(img.shape[0] * img.shape[1] * img.shape[2] * img.shape[3]); /* NHWC uint8 */
      size_t nl = ff_batch_size(b) * sizeof(int64_t);
      all = realloc(all, *size + ni + nl);
      memcpy(all + *size, img.data, ni);
      memcpy(all + *size + ni, lab.data, nl);
      *size += ni + nl, ++*batches;
      ff_batch_release(b);
    }
    assert_int_equal(st, FF_END);
  }
  ff_loader_close(l);
  return all;
}

static void test_batches_equal_the_folder_source(void **state) {
  (void)state;
  ff_config folder = config(2);
  char spec[600];
  snprintf(spec, sizeof spec, "imagefolder:%s", root);
  folder.source = spec;
  size_t want_size, want_batches;
  uint8_t *want = run(&folder, &want_size, &want_batches);
  for (int threads = 1; threads <= 3; threads += 2) {
    memsource m;
    mem_open(&m);
    ff_source_callbacks cb = {COUNT, mem_fetch, mem_release, &m, "mem"};
    ff_config c = config(threads);
    c.source_callbacks = &cb;
    size_t got_size, got_batches;
    uint8_t *got = run(&c, &got_size, &got_batches);
    assert_int_equal(got_size, want_size);
    assert_int_equal(got_batches, want_batches);
    assert_memory_equal(got, want, want_size);
    free(got);
    /* one call per batch (a few more where a worker's sample was read after its batch's items went) */
    assert_true(m.fetches >= got_batches && m.fetches <= got_batches + 4);
    assert_int_equal(m.largest, 4);
    assert_int_equal(m.releases, m.fetches);
    assert_int_equal(m.items_released, m.items_fetched);
    mem_close(&m);
  }
  free(want);
}

static void test_an_item_error_names_the_sample(void **state) {
  (void)state;
  memsource m;
  mem_open(&m);
  m.fail_index = 9;
  ff_source_callbacks cb = {COUNT, mem_fetch, mem_release, &m, "mem"};
  ff_config c = config(2);
  c.source_callbacks = &cb;
  c.shuffle = 0;
  ff_loader *l = NULL;
  assert_int_equal(ff_loader_open(&c, &l), FF_OK);
  ff_batch *b;
  ff_status st;
  int failed = 0;
  while ((st = ff_loader_next(l, &b)) != FF_END) {
    if (st == FF_OK) {
      ff_batch_release(b);
      continue;
    }
    assert_int_equal(st, FF_EDATA);
    assert_non_null(strstr(ff_loader_errmsg(l), "mem[9]: KeyError: the shard is gone"));
    failed++;
  }
  assert_int_equal(failed, 1);
  ff_loader_close(l);

  c.on_error = FF_ON_ERROR_SKIP;
  assert_int_equal(ff_loader_open(&c, &l), FF_OK);
  size_t samples = 0;
  while (ff_loader_next(l, &b) == FF_OK)
    samples += ff_batch_size(b), ff_batch_release(b);
  assert_int_equal(samples, COUNT - 1);
  assert_non_null(strstr(ff_loader_skipped(l, 0), "mem[9]: KeyError"));
  ff_loader_close(l);
  assert_int_equal(m.releases, m.fetches);
  mem_close(&m);
}

static void test_close_mid_epoch_releases_every_fetch(void **state) {
  (void)state;
  memsource m;
  mem_open(&m);
  ff_source_callbacks cb = {COUNT, mem_fetch, mem_release, &m, NULL};
  ff_config c = config(3);
  c.source_callbacks = &cb;
  c.batch_size = 2;
  c.prefetch = 3;
  ff_loader *l = NULL;
  assert_int_equal(ff_loader_open(&c, &l), FF_OK);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  assert_int_equal(ff_loader_seek(l, 0, 5), FF_OK); /* abandons the batches prepared ahead */
  ff_batch *b2;
  assert_int_equal(ff_loader_next(l, &b2), FF_OK);
  ff_loader_close(l); /* with batches still held */
  pthread_mutex_lock(&m.mu);
  assert_int_equal(m.releases, m.fetches);
  assert_int_equal(m.items_released, m.items_fetched);
  pthread_mutex_unlock(&m.mu);
  ff_batch_release(b);
  ff_batch_release(b2);
  mem_close(&m);
}

static void test_bad_callback_sources_are_refused(void **state) {
  (void)state;
  ff_source_callbacks cb = {0, mem_fetch, NULL, NULL, NULL};
  ff_config c = config(1);
  c.source_callbacks = &cb;
  ff_loader *l = NULL;
  assert_int_equal(ff_loader_open(&c, &l), FF_EEMPTY);
  assert_non_null(strstr(ff_loader_errmsg(l), "count 0"));
  ff_loader_close(l);
  cb.count = 3, cb.fetch = NULL;
  assert_int_equal(ff_loader_open(&c, &l), FF_EINVAL);
  assert_non_null(strstr(ff_loader_errmsg(l), "fetch"));
  ff_loader_close(l);
}

/* The library's own allocations for a count that cannot be indexed fail:
 * under ASan and TSan they must return NULL as they do without them. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "allocator_may_return_null=1"; }

static void test_a_count_too_large_to_index_is_out_of_memory(void **state) {
  (void)state;
  /* 2^62 samples: the size array's calloc fails; the index's cleanup once
   * walked `count` names of the NULL name array */
  ff_source_callbacks cb = {(size_t)1 << 62, mem_fetch, NULL, NULL, "huge"};
  ff_config c = config(1);
  c.source_callbacks = &cb;
  ff_loader *l = NULL;
  assert_int_equal(ff_loader_open(&c, &l), FF_ENOMEM);
  assert_non_null(strstr(ff_loader_errmsg(l), "out of memory"));
  ff_loader_close(l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batches_equal_the_folder_source),
      cmocka_unit_test(test_an_item_error_names_the_sample),
      cmocka_unit_test(test_close_mid_epoch_releases_every_fetch),
      cmocka_unit_test(test_bad_callback_sources_are_refused),
      cmocka_unit_test(test_a_count_too_large_to_index_is_out_of_memory),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
