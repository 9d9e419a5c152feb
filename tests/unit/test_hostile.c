/* test_hostile.c — the loader against hostile and broken datasets: every
 * case must end in a clear per-file error or a correct batch, promptly and
 * in bounded memory, never a hang or a crash. Images whose planned sizes
 * overflow (1 x N PNGs under resize), FIFOs named like images, files that
 * vanish, forked children dropping inherited batches, corrupt JPEG data,
 * and on_error=replace keeping every batch full. Each test runs under a
 * watchdog: a hang fails it instead of stalling the suite. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixtures.h"
#include "fusionflow/fusionflow.h"

static void on_watchdog(int sig) {
  (void)sig;
  static const char msg[] = "watchdog: the test hung (a worker, a read or close never returned)\n";
  if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
  _exit(3);
}

/* Fails the whole process after `seconds`: a hang is a failure, not a stall. */
static void watchdog(unsigned seconds) {
  signal(SIGALRM, on_watchdog);
  alarm(seconds);
}

static void assert_contains(const char *text, const char *part) {
  if (!text || !strstr(text, part)) fail_msg("message \"%s\" does not contain \"%s\"", text ? text : "(null)", part);
}

static ff_config config(const char *source, const char *pipeline) {
  ff_config c;
  ff_config_init(&c);
  c.source = source;
  c.pipeline = pipeline;
  c.batch_size = 1;
  c.shuffle = 0;
  c.num_threads = 2;
  c.rank = 0, c.world_size = 1;
  return c;
}

static ff_loader *open_ok(const ff_config *cfg) {
  ff_loader *l = NULL;
  ff_status st = ff_loader_open(cfg, &l);
  if (st) fail_msg("ff_loader_open: %s", ff_loader_errmsg(l));
  return l;
}

/* Reads the rest of the epoch; returns how many batches came. */
static int count_batches(ff_loader *l) {
  ff_batch *b;
  int n = 0;
  while (ff_loader_next(l, &b) == FF_OK) n++, ff_batch_release(b);
  return n;
}

/* Opens c, whose first batch must succeed and whose second must fail with
 * `want`, naming `name`; closes it. */
static void second_batch_fails(const ff_config *c, ff_status want, const char *name) {
  ff_loader *l = open_ok(c);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_batch_release(b);
  assert_int_equal(ff_loader_next(l, &b), want);
  assert_contains(ff_loader_errmsg(l), name);
  ff_loader_close(l);
}

/* Writes a width x height RGB PNG (a gradient) with libspng. */
static void write_png(const char *path, int width, int height) {
  size_t row = (size_t)width * 3, n = row * (size_t)height;
  uint8_t *px = malloc(n);
  for (size_t i = 0; i < n; i++) px[i] = (uint8_t)(i * 7);
  spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  struct spng_ihdr ihdr = {.width = (uint32_t)width, .height = (uint32_t)height, .bit_depth = 8,
                           .color_type = SPNG_COLOR_TYPE_TRUECOLOR};
  spng_set_ihdr(ctx, &ihdr);
  assert_int_equal(spng_encode_image(ctx, px, n, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE), 0);
  size_t size;
  int rc;
  uint8_t *png = spng_get_png_buffer(ctx, &size, &rc);
  assert_int_equal(rc, 0);
  ff_test_write(path, png, size);
  free(png);
  spng_ctx_free(ctx);
  free(px);
}

/* Writes a width x height JPEG dir/name (ff_test_write_jpeg's picture for seed). */
static void put_jpeg(const char *dir, const char *name, int width, int height, unsigned seed) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  ff_test_write_jpeg(path, width, height, 90, 0, seed);
}

/* Copies a reproducer of tests/data/hostile to dir/name. */
static void copy_repro(const char *name, const char *dir) {
  char from[2048], to[2048];
  snprintf(from, sizeof from, "%s/hostile/%s", FF_TEST_DATA, name);
  snprintf(to, sizeof to, "%s/%s", dir, name);
  size_t n;
  uint8_t *data = ff_test_read(from, &n);
  ff_test_write(to, data, n);
  free(data);
}

/* Writes a list file dir/list.txt of the given names (label 0 each) and
 * returns "list:" + its path. */
static const char *list_of(const char *dir, const char *const *names, int n) {
  static char spec[2100];
  char path[2048], text[8192] = "";
  for (int i = 0; i < n; i++) {
    size_t used = strlen(text);
    snprintf(text + used, sizeof text - used, "%s\t0\n", names[i]);
  }
  snprintf(path, sizeof path, "%s/list.txt", dir);
  ff_test_write(path, text, strlen(text));
  snprintf(spec, sizeof spec, "list:%s", path);
  return spec;
}

static long max_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* The reproducers of the resize overflow: each fails alone with FF_ETOOBIG
 * naming the file and the limit, promptly (the 1 x 10^7 one used to spin
 * forever and hang close), before allocating (the 81-byte 1 x 300 PNG took
 * 941 MB), and the loader closes at once. (First in the group: the peak
 * memory is the process's.) */
static void resize_overflow_reproducers_fail_promptly_naming_the_file(void **state) {
  (void)state;
  watchdog(60);
  const char *dir = ff_test_dir("hostile-resize");
  long rss_before = max_rss_kb();
  static const struct {
    const char *file, *pipeline;
  } cases[] = {
      {"hang-resize-overflow-1x10M.png", "decode | resize(size=256) | center_crop(size=224)"},
      {"bigalloc-resize-1x300.png", "decode | resize(size=1024) | center_crop(size=8)"},
      {"bigalloc-resize-1x300.png", "decode | resize(size=4096) | center_crop(size=8)"},
      {"oom-resize-1x300k.png", "decode | resize(size=256) | center_crop(size=8)"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    copy_repro(cases[k].file, dir);
    const char *names[] = {cases[k].file};
    ff_config c = config(list_of(dir, names, 1), cases[k].pipeline);
    ff_loader *l = open_ok(&c);
    ff_batch *b = NULL;
    assert_int_equal(ff_loader_next(l, &b), FF_ETOOBIG);
    assert_contains(ff_loader_errmsg(l), cases[k].file);
    assert_contains(ff_loader_errmsg(l), "max_image_pixels");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ff_loader_close(l);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (s > 5) fail_msg("close took %.1f s", s);
  }
  long grown_kb = max_rss_kb() - rss_before;
  if (grown_kb > 128 * 1024) fail_msg("the refused resizes grew the peak memory by %ld KiB", grown_kb);
  /* and through ff_image_augment, which checks every image the pipeline makes */
  char path[2048], errbuf[4096];
  snprintf(path, sizeof path, "%s/oom-resize-1x300k.png", dir);
  uint8_t *out = NULL;
  int h, w;
  assert_int_equal(ff_image_augment(path, "decode | resize(size=256)", 0, 0, 0, &out, &h, &w, errbuf, sizeof errbuf),
                   FF_ETOOBIG);
  assert_contains(errbuf, "oom-resize-1x300k.png");
  assert_null(out);
  /* a padded crop of 20000 x 20000 (400 Mpx) was written out unchecked */
  assert_int_equal(
      ff_image_augment(path, "decode | center_crop(size=20000)", 0, 0, 0, &out, &h, &w, errbuf, sizeof errbuf),
      FF_ETOOBIG);
  assert_contains(errbuf, "max_image_pixels");
  alarm(0);
}

/* Generated: 1 x N and N x 1 images under resize(size=256): the planned
 * image has 256 * 256 * N pixels; it passes exactly when that is within
 * max_image_pixels, and fails naming the file otherwise. */
static void one_by_n_images_are_checked_in_64_bits(void **state) {
  (void)state;
  watchdog(120);
  const char *dir = ff_test_dir("hostile-1xn");
  static const int sizes[] = {2, 300, 1365, 1366, 5000, 100000, 1 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
    for (int tall = 0; tall < 2; tall++) {
      char name[64], path[2048];
      snprintf(name, sizeof name, "%s-%d.png", tall ? "tall" : "wide", sizes[k]);
      snprintf(path, sizeof path, "%s/%s", dir, name);
      write_png(path, tall ? 1 : sizes[k], tall ? sizes[k] : 1);
      const char *names[] = {name};
      ff_config c = config(list_of(dir, names, 1), "decode | resize(size=256) | center_crop(size=16)");
      ff_loader *l = open_ok(&c);
      ff_batch *b = NULL;
      uint64_t planned = 256ull * 256ull * (uint64_t)sizes[k];
      ff_status st = ff_loader_next(l, &b);
      if (planned <= c.max_image_pixels) {
        if (st) fail_msg("%s: %s", name, ff_loader_errmsg(l));
        ff_batch_release(b);
      } else {
        assert_int_equal(st, FF_ETOOBIG);
        assert_contains(ff_loader_errmsg(l), name);
      }
      ff_loader_close(l);
    }
  alarm(0);
}

/* A FIFO listed as an image fails its sample at once ("not a regular
 * file") instead of blocking a worker forever; so does a missing file; the
 * epoch goes on and close returns. */
static void fifo_and_missing_files_fail_their_sample_without_blocking(void **state) {
  (void)state;
  watchdog(30);
  const char *dir = ff_test_dir("hostile-fifo");
  char path[2048];
  put_jpeg(dir, "good.jpg", 32, 32, 1);
  snprintf(path, sizeof path, "%s/fifo.jpg", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  snprintf(path, sizeof path, "%s/dangling.jpg", dir);
  assert_int_equal(symlink("nowhere.jpg", path), 0);
  const char *names[] = {"good.jpg", "fifo.jpg", "missing.jpg", "dangling.jpg", "good.jpg"};
  ff_config c = config(list_of(dir, names, 5), "decode | resize(size=(8, 8))");
  c.on_error = FF_ON_ERROR_SKIP;
  ff_loader *l = open_ok(&c); /* a missing entry is not a failed open */
  assert_int_equal(count_batches(l), 2);
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_int_equal(s.skipped, 3);
  const char *why[3] = {ff_loader_skipped(l, 0), ff_loader_skipped(l, 1), ff_loader_skipped(l, 2)};
  assert_contains(why[0], "fifo.jpg: not a regular file");
  assert_contains(why[1], "missing.jpg");
  assert_contains(why[2], "dangling.jpg");
  ff_loader_close(l);
  /* on_error=raise: the FIFO's batch fails, naming it */
  c.on_error = FF_ON_ERROR_RAISE;
  second_batch_fails(&c, FF_EIO, "fifo.jpg");
  alarm(0);
}

/* Children of fork() drop a batch they inherited while the parent's
 * workers are busy: none may hang (the parent's mutex may have been held
 * by a worker at the fork, and no thread of the child will release it). */
static void forked_children_dropping_a_batch_never_hang(void **state) {
  (void)state;
  watchdog(120);
  const char *dir = ff_test_dir("hostile-fork");
  ff_test_make_imagefolder(dir, 2, 40, 64, 200, 3);
  char source[2048];
  snprintf(source, sizeof source, "imagefolder:%s", dir);
  ff_config c = config(source, "decode | random_resized_crop(size=48) | rand_augment");
  c.batch_size = 2, c.prefetch = 8, c.num_threads = 4, c.shuffle = 1;
  ff_loader *l = open_ok(&c);
  int hung = 0;
  for (int k = 0; k < 60; k++) {
    ff_batch *b;
    ff_status st = ff_loader_next(l, &b);
    if (st == FF_END) continue;
    assert_int_equal(st, FF_OK);
    pid_t pid = fork();
    if (pid == 0) {
      alarm(5); /* the default action ends a hung child */
      ff_batch_release(b);
      _exit(0);
    }
    ff_batch_release(b);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    hung += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  ff_loader_close(l);
  if (hung) fail_msg("%d of 60 children did not exit cleanly after ff_batch_release", hung);
  alarm(0);
}

/* The dataset of the on_error tests: 12 JPEGs, of which #3, #4 (in a row)
 * and #11 (the last: its substitute wraps around to #0) are broken. */
static const char *make_partly_broken(char *source, size_t cap) {
  const char *dir = ff_test_dir("hostile-replace");
  char path[2048];
  for (int i = 0; i < 12; i++) {
    snprintf(path, sizeof path, "%s/c/%02d.jpg", dir, i);
    if (i == 3 || i == 11) {
      ff_test_mkdir(path); /* placeholder to create the folder */
      rmdir(path);
      ff_test_write(path, "not a jpeg", 10);
    } else if (i == 4) {
      ff_test_write(path, "", 0);
    } else {
      char d[2048];
      snprintf(d, sizeof d, "%s/c", dir);
      ff_test_mkdir(d);
      ff_test_write_jpeg(path, 40 + i, 36 + 2 * i, 90, 0, (unsigned)i + 1);
    }
  }
  snprintf(source, cap, "imagefolder:%s", dir);
  return dir;
}

/* Reads an epoch: the concatenated images, the sample indices, and batch sizes. */
typedef struct epoch_rec {
  uint8_t images[16][12 * 12 * 3];
  int64_t index[16];
  int64_t label[16];
  size_t sizes[8];
  int batches, samples;
} epoch_rec;

static void read_epoch(ff_loader *l, epoch_rec *r) {
  memset(r, 0, sizeof *r);
  ff_batch *b;
  ff_status st;
  while ((st = ff_loader_next(l, &b)) == FF_OK) {
    ff_tensor t, lab;
    ff_batch_images(b, &t);
    ff_batch_labels(b, &lab);
    size_t n = ff_batch_size(b);
    memcpy(r->images[r->samples], t.data, n * sizeof r->images[0]);
    memcpy(r->index + r->samples, ff_batch_sample_indices(b), n * sizeof(int64_t));
    memcpy(r->label + r->samples, lab.data, n * sizeof(int64_t));
    r->sizes[r->batches++] = n;
    r->samples += (int)n;
    ff_batch_release(b);
  }
  assert_int_equal(st, FF_END);
}

/* on_error=replace: every batch keeps its size; a failed sample's slot
 * holds the next good sample of the epoch's order (wrapping around), with
 * that sample's own pixels and label; the failures are counted and named;
 * the result does not depend on the thread count. */
static void replace_keeps_every_batch_full_and_deterministic(void **state) {
  (void)state;
  watchdog(60);
  char source[2048];
  make_partly_broken(source, sizeof source);
  ff_config c = config(source, "decode | random_resized_crop(size=12) | random_horizontal_flip");
  c.batch_size = 4, c.shuffle = 0, c.on_error = FF_ON_ERROR_REPLACE, c.seed = 5;
  static epoch_rec one, many, clean;
  c.num_threads = 1;
  ff_loader *l = open_ok(&c);
  read_epoch(l, &one);
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_int_equal(s.replaced, 3);
  assert_int_equal(s.skipped, 0);
  const char *names[3] = {"03.jpg", "04.jpg", "11.jpg"};
  for (int k = 0; k < 3; k++) {
    int found = 0;
    for (size_t i = 0; i < 3; i++) found += strstr(ff_loader_skipped(l, i), names[k]) != NULL;
    assert_int_equal(found, 1);
  }
  ff_loader_close(l);
  assert_int_equal(one.batches, 3);
  for (int i = 0; i < 3; i++) assert_int_equal(one.sizes[i], 4);
  static const int64_t want[12] = {0, 1, 2, 5, 5, 5, 6, 7, 8, 9, 10, 0};
  assert_memory_equal(one.index, want, sizeof want);

  c.num_threads = 4, c.prefetch = 3;
  l = open_ok(&c);
  read_epoch(l, &many);
  ff_loader_close(l);
  assert_memory_equal(&one, &many, sizeof one);

  /* and whatever share the device took: every sample marked for emu:0 */
  c.device = "emu:0";
  setenv("FF_FORCE_DEVICE_SHARE", "1", 1);
  l = open_ok(&c);
  unsetenv("FF_FORCE_DEVICE_SHARE");
  read_epoch(l, &many);
  ff_stats ds;
  ff_loader_stats(l, &ds);
  ff_loader_close(l);
  assert_true(ds.device_samples > 0);
  assert_int_equal(ds.replaced, 3);
  assert_memory_equal(&one, &many, sizeof one);
  c.device = "cpu";

  /* no good sample at all: the batch fails with the sample's own error */
  const char *dir = ff_test_dir("hostile-replace-none");
  char bad[2048];
  snprintf(bad, sizeof bad, "%s/x.jpg", dir);
  ff_test_write(bad, "not a jpeg", 10);
  snprintf(bad, sizeof bad, "%s/y.jpg", dir);
  ff_test_write(bad, "", 0);
  const char *bad_names[] = {"x.jpg", "y.jpg"};
  ff_config none = config(list_of(dir, bad_names, 2), "decode | resize(size=(8, 8))");
  none.on_error = FF_ON_ERROR_REPLACE;
  l = open_ok(&none);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_EDATA);
  assert_contains(ff_loader_errmsg(l), "x.jpg: not an image (JPEG");
  ff_loader_close(l);

  /* a substitute is that sample as it comes with its own draws */
  c.on_error = FF_ON_ERROR_SKIP;
  l = open_ok(&c);
  read_epoch(l, &clean);
  ff_loader_close(l);
  for (int i = 0; i < 12; i++)
    for (int j = 0; j < clean.samples; j++)
      if (clean.index[j] == one.index[i]) {
        assert_memory_equal(one.images[i], clean.images[j], sizeof one.images[0]);
        assert_int_equal(one.label[i], clean.label[j]);
      }
  alarm(0);
}

/* A corrupt JPEG (a run of bad Huffman codes) decodes as Pillow decodes it,
 * with a counted warning naming the file; under strict_decode it fails;
 * ff_image_augment (fusionflow augment) hands the warning back. */
static void corrupt_jpeg_data_is_a_warning_or_a_strict_error(void **state) {
  (void)state;
  watchdog(30);
  const char *dir = ff_test_dir("hostile-corrupt");
  put_jpeg(dir, "good.jpg", 64, 64, 1);
  put_jpeg(dir, "bad.jpg", 64, 64, 2);
  char path[2048];
  snprintf(path, sizeof path, "%s/bad.jpg", dir);
  size_t n;
  uint8_t *jpg = ff_test_read(path, &n);
  for (size_t i = n / 2; i < n / 2 + 64; i += 2) jpg[i] = 0xFF, jpg[i + 1] = 0x00;
  ff_test_write(path, jpg, n);
  free(jpg);
  const char *names[] = {"good.jpg", "bad.jpg"};
  ff_config c = config(list_of(dir, names, 2), "decode | resize(size=(8, 8))");
  ff_loader *l = open_ok(&c);
  assert_int_equal(count_batches(l), 2);
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_int_equal(s.warnings, 1);
  assert_contains(ff_loader_warning(l, 0), "bad.jpg");
  assert_contains(ff_loader_warning(l, 0), "Corrupt JPEG data");
  assert_null(ff_loader_warning(l, 1));
  ff_loader_close(l);
  c.strict_decode = 1;
  second_batch_fails(&c, FF_EDATA, "bad.jpg");
  /* one image through a pipeline (fusionflow augment) says what was repaired, in errbuf */
  uint8_t *px = NULL;
  int h, w;
  char msg[4608] = "x";
  assert_int_equal(ff_image_augment(path, "decode | resize(size=(8, 8))", 0, 0, 0, &px, &h, &w, msg, sizeof msg), FF_OK);
  assert_contains(msg, "bad.jpg");
  assert_contains(msg, "Corrupt JPEG data");
  ff_free(px);
  snprintf(path, sizeof path, "%s/good.jpg", dir);
  assert_int_equal(ff_image_augment(path, "decode | resize(size=(8, 8))", 0, 0, 0, &px, &h, &w, msg, sizeof msg), FF_OK);
  assert_string_equal(msg, "");
  ff_free(px);
  alarm(0);
}

/* max_member_bytes: a file over it fails its sample as FF_ETOOBIG naming the
 * limit, before it is read; by default the limit is 8 bytes a pixel of
 * max_image_pixels plus 16 MiB (a sparse file of 17 MiB is over it for 1,000
 * pixels), and 0 turns it off. */
static void files_over_max_member_bytes_fail_before_they_are_read(void **state) {
  (void)state;
  watchdog(30);
  const char *dir = ff_test_dir("hostile-member-bytes");
  put_jpeg(dir, "small.jpg", 16, 16, 3);
  put_jpeg(dir, "large.jpg", 256, 256, 4);
  char path[2048];
  snprintf(path, sizeof path, "%s/large.jpg", dir);
  size_t large;
  free(ff_test_read(path, &large));
  const char *names[] = {"small.jpg", "large.jpg"};
  ff_config c = config(list_of(dir, names, 2), "decode | resize(size=(8, 8))");
  c.max_member_bytes = large - 1;
  second_batch_fails(&c, FF_ETOOBIG, "large.jpg: a file of");
  second_batch_fails(&c, FF_ETOOBIG, "bytes, over max_member_bytes (");
  c.max_member_bytes = 0; /* no limit: the pixel limit refuses it from its header instead */
  c.max_image_pixels = 32 * 32;
  second_batch_fails(&c, FF_ETOOBIG, "(max_image_pixels)");
  c.max_member_bytes = FF_MEMBER_BYTES_AUTO; /* 8 x 1000 + 16 MiB = 16785216 bytes */
  c.max_image_pixels = 1000;
  snprintf(path, sizeof path, "%s/large.jpg", dir);
  assert_int_equal(truncate(path, 17 << 20), 0); /* sparse: no disk, and never read */
  second_batch_fails(&c, FF_ETOOBIG, "a file of 17825792 bytes, over max_member_bytes (16785216)");
  alarm(0);
}

/* A message with a path of 1500 bytes keeps the path's end (the
 * file name) and the reason. */
static void long_paths_keep_the_file_name_and_reason(void **state) {
  (void)state;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("hostile-long"));
  while (strlen(dir) < 1500) { /* past the old 511-byte messages */
    strcat(dir, "/a_rather_long_folder_name_to_fill_the_path");
    ff_test_mkdir(dir);
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/broken_file_at_the_end.jpg", dir);
  ff_test_write(path, "not a jpeg", 10);
  const char *names[] = {path};
  ff_config c = config(list_of(dir, names, 1), "decode | resize(size=(8, 8))");
  ff_loader *l = open_ok(&c);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_EDATA);
  assert_contains(ff_loader_errmsg(l), "broken_file_at_the_end.jpg: not an image (JPEG");
  ff_loader_close(l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(resize_overflow_reproducers_fail_promptly_naming_the_file),
      cmocka_unit_test(one_by_n_images_are_checked_in_64_bits),
      cmocka_unit_test(fifo_and_missing_files_fail_their_sample_without_blocking),
      cmocka_unit_test(forked_children_dropping_a_batch_never_hang),
      cmocka_unit_test(replace_keeps_every_batch_full_and_deterministic),
      cmocka_unit_test(corrupt_jpeg_data_is_a_warning_or_a_strict_error),
      cmocka_unit_test(long_paths_keep_the_file_name_and_reason),
      cmocka_unit_test(files_over_max_member_bytes_fail_before_they_are_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
