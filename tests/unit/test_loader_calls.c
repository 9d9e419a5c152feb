/* test_loader_calls.c — the loader under random sequences of its calls:
 * next, release in any order (up to prefetch + 1 held), set_epoch, seek,
 * position and close with batches held, over sources (folders, indexed and
 * streamed shards), batch sizes, threads, prefetch, drop_last, on_error,
 * devices and pipelines (plain, Mixup/CutMix, views). After every call the
 * loader must be where the header says (the batch handed out is the
 * position's; FF_END exactly after the last batch), the same (epoch, batch)
 * must carry the same bytes however it was reached, and no sequence may
 * stop the loader (an alarm fails the test). Each round's configuration and
 * calls come from a fixed seed, so a failure names a reproducible round. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fixtures.h"
#include "fusionflow/fusionflow.h"

enum { CLASSES = 3, PER_CLASS = 7, N_GOOD = CLASSES * PER_CLASS, MAX_EPOCH = 6, MAX_BATCHES = 32, CALLS = 300 };

static char folder[1024], folder_source[1300], tar_source[1300], stream_source[1300];
static char round_desc[512]; /* the round running, for the alarm's message */

/* One shard of the folder's good images as KEY.jpg + KEY.cls, written with
 * libarchive (gzip-compressed when gz: then the loader streams it). */
static void write_shard(const char *path, int gz) {
  struct archive *a = archive_write_new();
  assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
  if (gz) assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
  assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
  for (int k = 0, key = 0; k < CLASSES; k++)
    for (int i = 0; i < PER_CLASS; i++, key++) {
      char file[1200], name[32], cls[8];
      size_t size;
      uint8_t *jpeg = ff_test_read(ff_test_imagefolder_path(folder, k, i, file, sizeof file), &size);
      int cls_len = snprintf(cls, sizeof cls, "%d", k);
      for (int member = 0; member < 2; member++) {
        snprintf(name, sizeof name, "%06d.%s", key, member ? "cls" : "jpg");
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, name);
        archive_entry_set_size(e, member ? cls_len : (la_int64_t)size);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        la_ssize_t want = member ? cls_len : (la_ssize_t)size;
        assert_int_equal(archive_write_data(a, member ? (const void *)cls : jpeg, (size_t)want), want);
        archive_entry_free(e);
      }
      free(jpeg);
    }
  assert_int_equal(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

static int make_sources(void **state) {
  (void)state;
  snprintf(folder, sizeof folder, "%s", ff_test_dir("loader-calls"));
  ff_test_make_imagefolder(folder, CLASSES, PER_CLASS, 20, 40, 5);
  char path[1200], shards[1024];
  snprintf(shards, sizeof shards, "%s", ff_test_dir("loader-calls-tar"));
  snprintf(path, sizeof path, "%s/shard.tar", shards);
  write_shard(path, 0);
  snprintf(tar_source, sizeof tar_source, "tar:%s", path);
  snprintf(path, sizeof path, "%s/shard.tar.gz", shards);
  write_shard(path, 1);
  snprintf(stream_source, sizeof stream_source, "tar:%s", path);
  /* two files that do not decode, in the folder only (after the shards) */
  snprintf(path, sizeof path, "%s/c01/zz_bad.jpg", folder);
  ff_test_write(path, "not an image", 12);
  snprintf(path, sizeof path, "%s/c02/zz_cut.jpg", folder);
  ff_test_write(path, "\xff\xd8\xff\xe0 cut", 8);
  snprintf(folder_source, sizeof folder_source, "imagefolder:%s", folder);
  return 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* The bytes of a batch: its first view's images, its labels and sample indices. */
static uint64_t batch_hash(ff_batch *b) {
  assert_int_equal(ff_batch_sync(b), FF_OK);
  ff_tensor t;
  ff_batch_images(b, &t);
  size_t n = t.dtype == FF_FLOAT32 ? 4 : 1;
  for (int i = 0; i < t.ndim; i++) n *= (size_t)t.shape[i];
  uint64_t h = fnv(1469598103934665603ull, t.data, n);
  ff_batch_labels(b, &t);
  h = fnv(h, t.data, (size_t)t.shape[0] * sizeof(int64_t));
  return fnv(h, ff_batch_sample_indices(b), ff_batch_size(b) * sizeof(int64_t));
}

typedef struct round_state {
  ff_loader *l;
  int skip;                /* on_error=skip: a batch of bad samples only is not handed out */
  size_t num_batches;
  uint64_t epoch;          /* where the loader must be */
  size_t batch;
  ff_batch *held[8];
  int num_held, max_held;
  uint64_t seen[MAX_EPOCH + 1][MAX_BATCHES]; /* each (epoch, batch)'s bytes, once met */
} round_state;

static void release_one(round_state *s, uint32_t *rng) {
  int i = (int)(ff_test_rand(rng) % (uint32_t)s->num_held);
  ff_batch_release(s->held[i]);
  s->held[i] = s->held[--s->num_held];
}

static void call_next(round_state *s, uint32_t *rng) {
  if (s->num_held == s->max_held) release_one(s, rng);
  ff_batch *b = NULL;
  ff_status st = ff_loader_next(s->l, &b);
  if (st == FF_END) {
    if (!s->skip) assert_int_equal(s->batch, s->num_batches);
    s->epoch++, s->batch = 0;
    if (ff_test_rand(rng) % 2) assert_int_equal(ff_loader_set_epoch(s->l, s->epoch), FF_OK); /* as a DataLoader does */
    return;
  }
  if (st != FF_OK) fprintf(stderr, "%s: %s\n", round_desc, ff_loader_errmsg(s->l));
  assert_int_equal(st, FF_OK);
  assert_int_equal(ff_batch_epoch(b), s->epoch);
  if (s->skip && ff_batch_index(b) > s->batch) s->batch = ff_batch_index(b);
  assert_int_equal(ff_batch_index(b), s->batch);
  uint64_t h = batch_hash(b);
  if (s->epoch <= MAX_EPOCH && s->batch < MAX_BATCHES) {
    if (s->seen[s->epoch][s->batch]) assert_true(s->seen[s->epoch][s->batch] == h);
    s->seen[s->epoch][s->batch] = h;
  }
  s->batch++;
  if (ff_test_rand(rng) % 3) ff_batch_release(b);
  else s->held[s->num_held++] = b;
}

static void run_round(int round, uint32_t *rng) {
  static const char *pipelines[] = {
      "decode | random_resized_crop(size=8) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)",
      "decode | random_resized_crop(size=8) | normalize(mean=imagenet, std=imagenet) | mixup_cutmix(num_classes=3)",
      ("decode || 2 x random_resized_crop(size=8) | normalize(mean=imagenet, std=imagenet) || "
       "3 x random_resized_crop(size=4, scale=(0.05, 0.4)) | normalize(mean=imagenet, std=imagenet)"),
  };
  ff_config c;
  ff_config_init(&c);
  uint32_t source = ff_test_rand(rng) % 4, pipeline = ff_test_rand(rng) % 3, device = ff_test_rand(rng) % 4;
  c.source = source < 2 ? folder_source : source == 2 ? tar_source : stream_source;
  c.pipeline = pipelines[pipeline];
  c.batch_size = 2 * (int)(1 + ff_test_rand(rng) % 5); /* even (Mixup's pairs), at most a rank's share */
  c.num_threads = (int)(1 + ff_test_rand(rng) % 3);
  c.prefetch = (int)(1 + ff_test_rand(rng) % 3);
  c.drop_last = pipeline == 1 || ff_test_rand(rng) % 2; /* Mixup takes no odd last batch */
  c.on_error = source == 3 || ff_test_rand(rng) % 2 ? FF_ON_ERROR_SKIP : FF_ON_ERROR_REPLACE;
  c.seed = 3;
  c.rank = 0, c.world_size = 1;
  if (pipeline != 2) {
    c.device = device % 2 ? "emu:0" : "cpu";
    c.output_device = device >= 2 ? "emu:0" : "cpu";
  }
  if (source != 3 && ff_test_rand(rng) % 3 == 0) c.repeated_augmentations = 2;
  if (source != 3 && ff_test_rand(rng) % 3 == 0) c.world_size = 2, c.rank = 1;
  snprintf(round_desc, sizeof round_desc,
           "round %d: %s, %s, batch_size %d, %d threads, prefetch %d, drop_last %d, on_error %d, device %s, "
           "output_device %s, repeated_augmentations %d, rank %d of %d",
           round, c.source, c.pipeline, c.batch_size, c.num_threads, c.prefetch, c.drop_last, (int)c.on_error,
           c.device ? c.device : "auto", c.output_device ? c.output_device : "cpu", c.repeated_augmentations, c.rank,
           c.world_size);
  round_state *s = calloc(1, sizeof *s);
  assert_non_null(s);
  ff_status st = ff_loader_open(&c, &s->l);
  if (st != FF_OK) fprintf(stderr, "%s: %s\n", round_desc, ff_loader_errmsg(s->l));
  assert_int_equal(st, FF_OK);
  s->skip = c.on_error == FF_ON_ERROR_SKIP;
  s->num_batches = ff_loader_num_batches(s->l);
  s->max_held = c.prefetch + 1;
  alarm(60);
  for (int call = 0; call < CALLS; call++) {
    uint32_t k = ff_test_rand(rng) % 100;
    if (k < 60) {
      call_next(s, rng);
    } else if (k < 75) {
      if (s->num_held) release_one(s, rng);
    } else if (k < 85) {
      s->epoch = ff_test_rand(rng) % MAX_EPOCH, s->batch = 0;
      assert_int_equal(ff_loader_set_epoch(s->l, s->epoch), FF_OK);
    } else if (k < 95) { /* batch num_batches too: a checkpoint taken after an epoch's last batch */
      s->epoch = ff_test_rand(rng) % MAX_EPOCH, s->batch = ff_test_rand(rng) % (uint32_t)(s->num_batches + 1);
      assert_int_equal(ff_loader_seek(s->l, s->epoch, s->batch), FF_OK);
    } else {
      uint64_t epoch;
      size_t batch;
      ff_loader_position(s->l, &epoch, &batch);
      assert_int_equal(epoch, s->epoch);
      if (!s->skip) assert_int_equal(batch, s->batch);
    }
  }
  alarm(0);
  int close_first = (int)(ff_test_rand(rng) % 2); /* held batches outlive close */
  if (close_first) ff_loader_close(s->l);
  while (s->num_held) ff_batch_release(s->held[--s->num_held]);
  if (!close_first) ff_loader_close(s->l);
  free(s);
}

static void random_call_sequences_keep_the_position_and_the_bytes(void **state) {
  (void)state;
  ff_test_stop_on_alarm(round_desc);
  setenv("FF_FORCE_DEVICE_SHARE", "0.5", 1); /* half of each batch on emu:0 where it is the device */
  uint32_t rng = 20261201;
  int rounds = getenv("FF_TEST_SANITIZER") && *getenv("FF_TEST_SANITIZER") ? 16 : 48;
  for (int round = 0; round < rounds; round++) run_round(round, &rng);
  unsetenv("FF_FORCE_DEVICE_SHARE");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(random_call_sequences_keep_the_position_and_the_bytes),
  };
  return cmocka_run_group_tests(tests, make_sources, NULL);
}
