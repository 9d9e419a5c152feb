/* test_loader.c — the public loader API end to end on generated JPEG
 * datasets: determinism across threads and prefetch, epochs and seeds,
 * coverage and labels, batch tensors, the end of an epoch, every error the
 * header promises (with what its message must name), sources given as
 * lists, sharding from the environment, prompt close and batches held
 * across close or out of order. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fixtures.h"
#include "fusionflow/fusionflow.h"

#define NCHW_PIPELINE                                                                                        \
  "decode | random_resized_crop(size=32) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"
#define NHWC_PIPELINE "decode | random_resized_crop(size=(24, 20)) | random_vertical_flip"
#define TRANSFORMS_PIPELINE                                                                                  \
  "decode | random_resized_crop(size=32, interpolation=random) | random_choice([color_jitter(hue=0.3), "     \
  "gaussian_blur(kernel_size=5), random_grayscale(p=1)]) | normalize(mean=imagenet, std=imagenet) | "       \
  "random_erasing(value=random)"

enum { CLASSES = 5, PER_CLASS = 10, N = CLASSES * PER_CLASS };

static char data_root[1024];   /* 50 JPEGs of 40..120 px, 5 classes */
static char data_source[2048]; /* "imagefolder:" data_root */

static int make_dataset(void **state) {
  (void)state;
  snprintf(data_root, sizeof data_root, "%s", ff_test_dir("loader-data"));
  snprintf(data_source, sizeof data_source, "imagefolder:%s", data_root);
  ff_test_make_imagefolder(data_root, CLASSES, PER_CLASS, 40, 120, 11);
  return 0;
}

static ff_config base_config(const char *source, const char *pipeline) {
  ff_config c;
  ff_config_init(&c);
  c.source = source;
  c.pipeline = pipeline;
  c.batch_size = 8;
  c.seed = 7;
  c.num_threads = 2;
  c.prefetch = 2;
  c.rank = 0; /* explicit: $RANK / $WORLD_SIZE of the test's environment must not leak in */
  c.world_size = 1;
  return c;
}

static ff_loader *open_ok(const ff_config *cfg) {
  ff_loader *l = NULL;
  ff_status st = ff_loader_open(cfg, &l);
  if (st != FF_OK) fprintf(stderr, "ff_loader_open: %s\n", ff_loader_errmsg(l));
  assert_int_equal(st, FF_OK);
  assert_non_null(l);
  return l;
}

/* Opens a loader that must fail with `want`; returns its message (copied). */
static const char *open_fails(const ff_config *cfg, ff_status want) {
  static char msg[1024];
  ff_loader *l = NULL;
  ff_status st = ff_loader_open(cfg, &l);
  assert_non_null(l);
  snprintf(msg, sizeof msg, "%s", ff_loader_errmsg(l));
  ff_loader_close(l);
  if (st != want) fprintf(stderr, "got status %d, message: %s\n", st, msg);
  assert_int_equal(st, want);
  return msg;
}

static void assert_contains(const char *text, const char *part) {
  if (!strstr(text, part)) fail_msg("message \"%s\" does not contain \"%s\"", text, part);
}

static size_t image_bytes(const ff_tensor *t) {
  size_t n = t->dtype == FF_FLOAT32 ? 4 : 1;
  for (int d = 0; d < t->ndim; d++)
    n *= (size_t)t->shape[d];
  return n;
}

/* Everything a run hands out, byte for byte, for comparing runs. */
typedef struct record {
  uint8_t *bytes;
  size_t len, cap;
  size_t batches;
} record;

static void record_add(record *r, const void *p, size_t n) {
  if (r->len + n > r->cap) {
    r->cap = (r->len + n) * 2;
    r->bytes = realloc(r->bytes, r->cap);
    assert_non_null(r->bytes);
  }
  memcpy(r->bytes + r->len, p, n);
  r->len += n;
}

static void record_batch(record *r, const ff_batch *b) {
  ff_tensor img, lab;
  ff_batch_images(b, &img);
  ff_batch_labels(b, &lab);
  size_t n = ff_batch_size(b);
  record_add(r, &n, sizeof n);
  record_add(r, img.data, image_bytes(&img));
  record_add(r, lab.data, n * sizeof(int64_t));
  record_add(r, ff_batch_sample_indices(b), n * sizeof(int64_t));
  r->batches++;
}

/* Consumes the loader's current epoch up to FF_END into r. */
static void record_epoch(ff_loader *l, record *r) {
  ff_batch *b;
  ff_status st;
  while ((st = ff_loader_next(l, &b)) == FF_OK) {
    record_batch(r, b);
    ff_batch_release(b);
  }
  if (st != FF_END) fprintf(stderr, "ff_loader_next: %s\n", ff_loader_errmsg(l));
  assert_int_equal(st, FF_END);
}

/* Epochs 0 .. epochs-1 of a fresh loader with cfg. */
static record record_run(const ff_config *cfg, int epochs) {
  record r = {0};
  ff_loader *l = open_ok(cfg);
  for (int e = 0; e < epochs; e++) {
    assert_int_equal(ff_loader_set_epoch(l, (uint64_t)e), FF_OK);
    record_epoch(l, &r);
  }
  ff_loader_close(l);
  return r;
}

static int records_equal(const record *a, const record *b) {
  return a->len == b->len && a->batches == b->batches && !memcmp(a->bytes, b->bytes, a->len);
}

static void check_threads_and_prefetch_do_not_matter(const char *pipeline) {
  ff_config c = base_config(data_source, pipeline);
  c.num_threads = 1, c.prefetch = 1;
  record one = record_run(&c, 2);
  c.num_threads = 2, c.prefetch = 4;
  record two = record_run(&c, 2);
  c.num_threads = 5, c.prefetch = 2;
  record five = record_run(&c, 2);
  assert_int_equal(one.batches, 2 * 7);
  assert_true(records_equal(&one, &two));
  assert_true(records_equal(&one, &five));
  free(one.bytes), free(two.bytes), free(five.bytes);
}

static void batches_do_not_depend_on_threads_or_prefetch_nchw(void **state) {
  (void)state;
  check_threads_and_prefetch_do_not_matter(NCHW_PIPELINE);
}

static void batches_do_not_depend_on_threads_or_prefetch_nhwc(void **state) {
  (void)state;
  check_threads_and_prefetch_do_not_matter(NHWC_PIPELINE);
}

static void batches_with_the_transforms_do_not_depend_on_threads_or_prefetch(void **state) {
  (void)state;
  check_threads_and_prefetch_do_not_matter(TRANSFORMS_PIPELINE);
}

/* A batch_size far above the data set's size gives one batch of every
 * sample, equal to batch_size = the size, without allocating for the
 * requested size (it would take terabytes). */
static void a_batch_size_beyond_the_data_set_gives_one_batch(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  ff_loader *l = open_ok(&c);
  size_t n = ff_loader_dataset_size(l);
  ff_loader_close(l);
  c.batch_size = (int)n;
  record exact = record_run(&c, 2);
  c.batch_size = 1 << 30;
  record huge = record_run(&c, 2);
  assert_int_equal(exact.batches, 2);
  assert_true(records_equal(&exact, &huge));
  free(exact.bytes), free(huge.bytes);
}

/* The first batch of epoch `epoch` of a fresh loader. */
static record first_batch(ff_config c, uint64_t epoch) {
  record r = {0};
  ff_loader *l = open_ok(&c);
  assert_int_equal(ff_loader_set_epoch(l, epoch), FF_OK);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  record_batch(&r, b);
  ff_batch_release(b);
  ff_loader_close(l);
  return r;
}

static void different_seeds_give_different_batches(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  record a = first_batch(c, 0);
  c.seed = 8;
  record b = first_batch(c, 0);
  assert_false(records_equal(&a, &b));
  /* Augmentation alone differs too: same order (no shuffle), other seed. */
  c.shuffle = 0;
  record d = first_batch(c, 0);
  c.seed = 7;
  record e = first_batch(c, 0);
  assert_int_equal(d.len, e.len);
  size_t idx_off = d.len - 8 * sizeof(int64_t);
  assert_memory_equal(d.bytes + idx_off, e.bytes + idx_off, 8 * sizeof(int64_t));
  assert_memory_not_equal(d.bytes, e.bytes, idx_off);
  free(a.bytes), free(b.bytes), free(d.bytes), free(e.bytes);
}

static void different_epochs_give_different_batches(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  record e0 = first_batch(c, 0);
  record e1 = first_batch(c, 1);
  assert_false(records_equal(&e0, &e1));
  free(e0.bytes), free(e1.bytes);
}

static void set_epoch_reproduces_an_epoch(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  ff_loader *l = open_ok(&c);
  record first = {0}, second = {0}, again = {0}, other = {0};
  record_epoch(l, &first); /* epoch 0 without set_epoch */
  assert_int_equal(ff_loader_set_epoch(l, 3), FF_OK);
  record_epoch(l, &other);
  assert_int_equal(ff_loader_set_epoch(l, 0), FF_OK);
  record_epoch(l, &second);
  assert_true(records_equal(&first, &second));
  assert_false(records_equal(&first, &other));
  ff_loader_close(l);
  /* A fresh loader set to epoch 3 gives what the first one gave. */
  l = open_ok(&c);
  assert_int_equal(ff_loader_set_epoch(l, 3), FF_OK);
  record_epoch(l, &again);
  assert_true(records_equal(&other, &again));
  ff_loader_close(l);
  free(first.bytes), free(second.bytes), free(again.bytes), free(other.bytes);
}

static void set_epoch_mid_epoch_restarts_it(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  record whole = first_batch(c, 2);
  ff_loader *l = open_ok(&c);
  ff_batch *b;
  for (int i = 0; i < 3; i++) {
    assert_int_equal(ff_loader_next(l, &b), FF_OK);
    ff_batch_release(b);
  }
  assert_int_equal(ff_loader_set_epoch(l, 2), FF_OK);
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  assert_int_equal(ff_batch_index(b), 0);
  assert_int_equal(ff_batch_epoch(b), 2);
  record r = {0};
  record_batch(&r, b);
  ff_batch_release(b);
  assert_true(records_equal(&whole, &r));
  ff_loader_close(l);
  free(whole.bytes), free(r.bytes);
}

/* Counts how often each sample index comes in one epoch and checks labels. */
static void check_epoch_coverage(ff_loader *l, uint64_t epoch, int *order) {
  int seen[N] = {0};
  ff_batch *b;
  ff_status st;
  size_t k = 0, batch = 0;
  while ((st = ff_loader_next(l, &b)) == FF_OK) {
    assert_int_equal(ff_batch_index(b), batch++);
    assert_int_equal(ff_batch_epoch(b), epoch);
    ff_tensor lab;
    ff_batch_labels(b, &lab);
    const int64_t *labels = lab.data, *idx = ff_batch_sample_indices(b);
    for (size_t i = 0; i < ff_batch_size(b); i++) {
      assert_in_range(idx[i], 0, N - 1);
      seen[idx[i]]++;
      /* imagefolder order: class folders sorted, files sorted */
      assert_int_equal(labels[i], idx[i] / PER_CLASS);
      if (order) order[k] = (int)idx[i];
      k++;
    }
    ff_batch_release(b);
  }
  assert_int_equal(st, FF_END);
  assert_int_equal(k, N);
  for (int i = 0; i < N; i++)
    assert_int_equal(seen[i], 1);
}

static void shuffled_epoch_visits_every_sample_once_with_its_label(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NHWC_PIPELINE);
  ff_loader *l = open_ok(&c);
  int order0[N], order1[N];
  check_epoch_coverage(l, 0, order0);
  assert_int_equal(ff_loader_set_epoch(l, 1), FF_OK);
  check_epoch_coverage(l, 1, order1);
  assert_memory_not_equal(order0, order1, sizeof order0);
  int identity = 1;
  for (int i = 0; i < N; i++)
    identity &= order0[i] == i;
  assert_false(identity);
  ff_loader_close(l);
}

static void unshuffled_epoch_is_in_dataset_order(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NHWC_PIPELINE);
  c.shuffle = 0;
  ff_loader *l = open_ok(&c);
  int order[N];
  check_epoch_coverage(l, 0, order);
  for (int i = 0; i < N; i++)
    assert_int_equal(order[i], i);
  ff_loader_close(l);
}

static void nchw_float32_batch_has_its_shape_and_strides(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  ff_loader *l = open_ok(&c);
  assert_int_equal(ff_loader_num_batches(l), 7);
  assert_int_equal(ff_loader_num_samples(l), N);
  assert_int_equal(ff_loader_dataset_size(l), N);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_tensor t;
  ff_batch_images(b, &t);
  assert_int_equal(t.dtype, FF_FLOAT32);
  assert_int_equal(t.layout, FF_NCHW);
  assert_int_equal(t.ndim, 4);
  const int64_t shape[4] = {8, 3, 32, 32}, strides[4] = {3 * 32 * 32, 32 * 32, 32, 1};
  assert_memory_equal(t.shape, shape, sizeof shape);
  assert_memory_equal(t.strides, strides, sizeof strides);
  assert_non_null(t.data);
  /* normalized values of uint8 pixels lie in [(0-0.485)/0.229, (1-0.406)/0.225] */
  const float *px = t.data;
  for (size_t i = 0; i < 8 * 3 * 32 * 32; i++)
    assert_true(px[i] >= -2.12f && px[i] <= 2.65f);
  ff_tensor lab;
  ff_batch_labels(b, &lab);
  assert_int_equal(lab.dtype, FF_INT64);
  assert_int_equal(lab.ndim, 1);
  assert_int_equal(lab.shape[0], 8);
  assert_int_equal(lab.strides[0], 1);
  ff_batch_release(b);
  ff_loader_close(l);
}

static void nhwc_uint8_batch_has_its_shape_and_strides(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NHWC_PIPELINE);
  c.batch_size = 16;
  ff_loader *l = open_ok(&c);
  assert_int_equal(ff_loader_num_batches(l), 4);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_tensor t;
  ff_batch_images(b, &t);
  assert_int_equal(t.dtype, FF_UINT8);
  assert_int_equal(t.layout, FF_NHWC);
  assert_int_equal(t.ndim, 4);
  const int64_t shape[4] = {16, 24, 20, 3}, strides[4] = {24 * 20 * 3, 20 * 3, 3, 1};
  assert_memory_equal(t.shape, shape, sizeof shape);
  assert_memory_equal(t.strides, strides, sizeof strides);
  ff_batch_release(b);
  ff_loader_close(l);
}

static void last_batch_is_short_without_drop_last(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NHWC_PIPELINE);
  ff_loader *l = open_ok(&c);
  ff_batch *b;
  for (int i = 0; i < 7; i++) {
    assert_int_equal(ff_loader_next(l, &b), FF_OK);
    size_t want = i < 6 ? 8 : 2; /* 50 = 6 * 8 + 2 */
    assert_int_equal(ff_batch_size(b), want);
    ff_tensor t, lab;
    ff_batch_images(b, &t);
    ff_batch_labels(b, &lab);
    assert_int_equal(t.shape[0], want);
    assert_int_equal(lab.shape[0], want);
    ff_batch_release(b);
  }
  assert_int_equal(ff_loader_next(l, &b), FF_END);
  ff_loader_close(l);
}

static void drop_last_leaves_out_the_short_batch(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NHWC_PIPELINE);
  c.drop_last = 1;
  ff_loader *l = open_ok(&c);
  assert_int_equal(ff_loader_num_batches(l), 6);
  assert_int_equal(ff_loader_num_samples(l), N);
  ff_batch *b;
  for (int i = 0; i < 6; i++) {
    assert_int_equal(ff_loader_next(l, &b), FF_OK);
    assert_int_equal(ff_batch_size(b), 8);
    ff_batch_release(b);
  }
  assert_int_equal(ff_loader_next(l, &b), FF_END);
  ff_loader_close(l);
}

static void end_after_the_last_batch_then_the_next_epoch_follows(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  ff_loader *l = open_ok(&c);
  record first = {0}, second = {0}, expected = {0};
  record_epoch(l, &first);
  assert_int_equal(first.batches, 7);
  ff_batch *b = NULL;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  assert_int_equal(ff_batch_index(b), 0);
  assert_int_equal(ff_batch_epoch(b), 1); /* no set_epoch: the epochs advance */
  record_batch(&second, b);
  ff_batch_release(b);
  record_epoch(l, &second);
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_int_equal(s.batches, 14);
  assert_int_equal(s.samples, 2 * N);
  assert_int_equal(s.skipped, 0);
  assert_int_equal(s.num_threads, 2);
  ff_loader_close(l);
  /* The prepared-ahead epoch equals epoch 1 asked for explicitly. */
  l = open_ok(&c);
  assert_int_equal(ff_loader_set_epoch(l, 1), FF_OK);
  record_epoch(l, &expected);
  assert_true(records_equal(&expected, &second));
  assert_false(records_equal(&first, &second));
  ff_loader_close(l);
  free(first.bytes), free(second.bytes), free(expected.bytes);
}

/* An epoch that fits in the ring whole is prepared ahead while the consumer
 * is still on the one before; the consumer may then take all of it, and reach
 * its end, before any worker runs again: the workers must still go on to the
 * epoch after it. Each round lets the workers fill the ring and wait, then
 * consumes without pause, so on most rounds they wake only after the end. */
static void epochs_the_ring_holds_whole_follow_one_another(void **state) {
  (void)state;
  ff_config c = base_config(data_source, "decode | resize(size=(8, 8))");
  c.batch_size = N; /* one batch an epoch; the ring holds prefetch + 1 = 3 */
  ff_loader *l = open_ok(&c);
  ff_test_stop_on_alarm("its workers wait for work that never comes");
  alarm(60);
  uint64_t epoch = 0;
  for (int round = 0; round < 300; round++) {
    struct timespec nap = {0, 2000000}; /* 2 ms: the workers prepare the next epoch and wait */
    nanosleep(&nap, NULL);
    for (int i = 0; i < 2; i++) {
      ff_batch *b = NULL;
      assert_int_equal(ff_loader_next(l, &b), FF_OK);
      assert_int_equal(ff_batch_epoch(b), epoch);
      ff_batch_release(b);
      assert_int_equal(ff_loader_next(l, &b), FF_END);
      assert_int_equal(ff_loader_set_epoch(l, ++epoch), FF_OK);
    }
  }
  alarm(0);
  ff_loader_close(l);
}

/* A checkpoint taken after an epoch's last batch resumes there: seeking to
 * batch num_batches (past a short last batch) ends that epoch at once, and
 * the next one follows, equal to itself asked for directly. */
static void seek_to_the_end_of_an_epoch_goes_on_to_the_next(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE); /* 50 samples by 8: the last batch has 2 */
  ff_loader *l = open_ok(&c);
  ff_test_stop_on_alarm("its workers wait for work that never comes");
  alarm(60);
  assert_int_equal(ff_loader_seek(l, 2, ff_loader_num_batches(l)), FF_OK);
  ff_batch *b = NULL;
  assert_int_equal(ff_loader_next(l, &b), FF_END);
  record resumed = {0}, expected = {0};
  record_epoch(l, &resumed);
  alarm(0);
  ff_loader_close(l);
  l = open_ok(&c);
  assert_int_equal(ff_loader_set_epoch(l, 3), FF_OK);
  record_epoch(l, &expected);
  assert_true(records_equal(&expected, &resumed));
  ff_loader_close(l);
  free(resumed.bytes), free(expected.bytes);
}

static void seek_resumes_mid_epoch_bit_identically(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  ff_loader *l = open_ok(&c);
  assert_int_equal(ff_loader_set_epoch(l, 3), FF_OK);
  record whole = {0}, tail = {0};
  ff_batch *b;
  for (int i = 0; i < 3; i++) { /* the uninterrupted run, from batch 3 on */
    assert_int_equal(ff_loader_next(l, &b), FF_OK);
    ff_batch_release(b);
  }
  uint64_t epoch;
  size_t batch;
  ff_loader_position(l, &epoch, &batch);
  assert_int_equal(epoch, 3);
  assert_int_equal(batch, 3);
  record_epoch(l, &whole);
  ff_loader_close(l);
  c.num_threads = 1; /* a different machine resuming from the checkpoint */
  l = open_ok(&c);
  assert_int_equal(ff_loader_seek(l, 3, 3), FF_OK);
  record_epoch(l, &tail);
  assert_int_equal(tail.batches, 4);
  assert_true(records_equal(&whole, &tail));
  assert_int_equal(ff_loader_seek(l, 0, 8), FF_EINVAL); /* past the 7 batches */
  ff_loader_close(l);
  free(whole.bytes), free(tail.bytes);
}

/* The worker threads a loader opened with c runs at first. */
static int threads_at_open(const ff_config *c) {
  ff_loader *l = open_ok(c);
  ff_stats s;
  ff_loader_stats(l, &s);
  ff_loader_close(l);
  return s.num_threads;
}

typedef struct open_call {
  const ff_config *c;
  int threads;
} open_call;

static void call_open(void *arg) {
  open_call *o = arg;
  o->threads = threads_at_open(o->c);
}

/* The threads at open; what it wrote on stderr in said. */
static int threads_at_open_said(const ff_config *c, char *said, size_t cap) {
  open_call o = {c, 0};
  snprintf(said, cap, "%s", ff_test_stderr_of(call_open, &o));
  return o.threads;
}

static void node_group_caps_the_threads_and_keeps_batches_identical(void **state) {
  (void)state;
  char group[64];
  snprintf(group, sizeof group, "test-loader-%d", (int)getpid());
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  record alone = record_run(&c, 1), grouped;
  setenv("FF_NODE_GROUP", group, 1);
  setenv("FF_NODE_THREADS", "1", 1); /* the node's budget: one worker thread */
  setenv("FF_NODE_TRAINER_CORES", "0", 1); /* all of it for the allotment */
  ff_loader *l = open_ok(&c);
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_int_equal(s.num_threads, 1); /* of the 2 it owns */
  ff_loader_close(l);
  grouped = record_run(&c, 1);
  /* off in any case is off: the loader runs alone, silently, whatever the budget */
  static const char *const offs[] = {"off", "OFF", "Off", ""};
  for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
    char said[1024];
    setenv("FF_NODE_GROUP", offs[i], 1);
    if (threads_at_open_said(&c, said, sizeof said) != 2 || *said)
      fail_msg("FF_NODE_GROUP='%s' is not off: '%s'", offs[i], said);
  }
  unsetenv("FF_NODE_THREADS");
  /* Joining is opt-in: under torchrun without FF_NODE_GROUP the loader
   * runs alone, with FF_NODE_GROUP=auto it joins the job's group. */
  unsetenv("FF_NODE_GROUP");
  setenv("TORCHELASTIC_RUN_ID", group, 1);
  setenv("FF_NODE_THREADS", "1", 1);
  assert_int_equal(threads_at_open(&c), 2);
  setenv("FF_NODE_GROUP", "auto", 1);
  assert_int_equal(threads_at_open(&c), 1);
  setenv("FF_NODE_GROUP", "Auto", 1);
  assert_int_equal(threads_at_open(&c), 1);
  unsetenv("TORCHELASTIC_RUN_ID");
  unsetenv("FF_NODE_THREADS");
  unsetenv("FF_NODE_TRAINER_CORES");
  unsetenv("FF_NODE_GROUP");
  assert_true(records_equal(&alone, &grouped));
  free(alone.bytes), free(grouped.bytes);
}

/* A group the loader cannot join, or a setting of the join it cannot take,
 * leaves it alone on its own threads, with one line on stderr that names
 * the variable; a reserve that leaves the loaders nothing is said too. */
static void a_node_group_not_joined_is_said_once(void **state) {
  (void)state;
  char group[64], longname[201], said[1024];
  snprintf(group, sizeof group, "test-loader-bad-%d", (int)getpid());
  memset(longname, 'g', sizeof longname - 1);
  longname[sizeof longname - 1] = 0;
  static const struct { const char *group, *var, *value, *named; } cases[] = {
      {NULL, NULL, NULL, "FF_NODE_GROUP"},
      {"auto", NULL, NULL, "FF_NODE_GROUP=auto"},
      {"AUTO", NULL, NULL, "FF_NODE_GROUP=auto"}, /* the keyword in any case */
      {" off", NULL, NULL, "FF_NODE_GROUP=' off'"},
      {"off ", NULL, NULL, "FF_NODE_GROUP='off '"},
      {"", "FF_NODE_THREADS", "abc", "FF_NODE_THREADS='abc'"},
      {"", "FF_NODE_THREADS", "-4", "FF_NODE_THREADS='-4'"},
      {"", "FF_NODE_TRAINER_CORES", "abc", "FF_NODE_TRAINER_CORES='abc'"},
      {"", "FF_NODE_THREADS", " 2", "FF_NODE_THREADS=' 2'"}, /* digits only */
      {"", "FF_NODE_THREADS", "+2", "FF_NODE_THREADS='+2'"},
  };
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  unsetenv("TORCHELASTIC_RUN_ID");
  unsetenv("MASTER_PORT");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    setenv("FF_NODE_GROUP", !cases[i].group ? longname : *cases[i].group ? cases[i].group : group, 1);
    if (cases[i].var) setenv(cases[i].var, cases[i].value, 1);
    assert_int_equal(threads_at_open_said(&c, said, sizeof said), 2);
    if (!strstr(said, cases[i].named) || !strstr(said, "runs alone") || strchr(said, '\n') != said + strlen(said) - 1)
      fail_msg("%s: not one line naming it: '%s'", cases[i].named, said);
    if (cases[i].var) unsetenv(cases[i].var);
  }
  setenv("FF_NODE_GROUP", group, 1);
  setenv("FF_NODE_THREADS", "2", 1);
  setenv("FF_NODE_TRAINER_CORES", "100", 1);
  threads_at_open_said(&c, said, sizeof said);
  if (!strstr(said, "FF_NODE_TRAINER_CORES=100") || strchr(said, '\n') != said + strlen(said) - 1)
    fail_msg("a reserve over the budget is not said in one line: '%s'", said);
  setenv("FF_NODE_TRAINER_CORES", "0", 1);
  assert_int_equal(threads_at_open_said(&c, said, sizeof said), 2);
  assert_string_equal(said, ""); /* a good setting says nothing */
  /* a joiner whose settings differ from the group's is told that the group's apply */
  setenv("FF_NODE_TRAINER_CORES", "Auto", 1);
  setenv("FF_NODE_THREADS", "7", 1);
  ff_loader *first = open_ok(&c);
  setenv("FF_NODE_THREADS", "3", 1);
  threads_at_open_said(&c, said, sizeof said);
  if (!strstr(said, "not this process's FF_NODE_THREADS=3 (the group's: 7)\n") ||
      strchr(said, '\n') != said + strlen(said) - 1)
    fail_msg("a joiner's other settings are not said in one line: '%s'", said);
  ff_stats st;
  ff_loader_stats(first, &st);
  assert_string_equal(st.node_group, group);
  unsetenv("FF_NODE_THREADS"); /* the default (the cores it may use) is no setting of its own */
  assert_string_equal(ff_test_stderr_of(call_open, &(open_call){&c, 0}), "");
  ff_loader_close(first);
  unsetenv("FF_NODE_THREADS");
  unsetenv("FF_NODE_TRAINER_CORES");
  unsetenv("FF_NODE_GROUP");
}

static void stats_count_every_file_read_once(void **state) {
  (void)state;
  uint64_t total = 0, largest = 0;
  char path[2048];
  for (int k = 0; k < CLASSES; k++)
    for (int i = 0; i < PER_CLASS; i++) {
      struct stat sb;
      assert_int_equal(stat(ff_test_imagefolder_path(data_root, k, i, path, sizeof path), &sb), 0);
      total += (uint64_t)sb.st_size;
      largest = (uint64_t)sb.st_size > largest ? (uint64_t)sb.st_size : largest;
    }
  ff_config c = base_config(data_source, NHWC_PIPELINE);
  ff_loader *l = open_ok(&c);
  ff_batch *b;
  for (int i = 0; i < 7; i++) {
    assert_int_equal(ff_loader_next(l, &b), FF_OK);
    ff_batch_release(b);
  }
  /* Every file of the epoch was read once; the workers may have read ahead
   * into the next epoch, at most the ring's prefetch + 1 batches. */
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_true(s.read_bytes >= total);
  assert_true(s.read_bytes <= total + (uint64_t)(c.prefetch + 1) * (uint64_t)c.batch_size * largest);
  assert_int_equal(s.batches, 7);
  assert_int_equal(s.samples, N);
  assert_true(s.decode_ns > 0);
  ff_loader_close(l);
}

static void *release_in_thread(void *batch) {
  ff_batch_release(batch);
  return NULL;
}

static void batch_can_be_released_from_another_thread(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NHWC_PIPELINE);
  c.prefetch = 1;
  ff_loader *l = open_ok(&c);
  alarm(60);
  ff_batch *b;
  for (size_t i = 0; i < 7; i++) {
    assert_int_equal(ff_loader_next(l, &b), FF_OK);
    assert_int_equal(ff_batch_index(b), i);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_in_thread, b), 0);
    pthread_join(t, NULL);
  }
  assert_int_equal(ff_loader_next(l, &b), FF_END);
  alarm(0);
  ff_loader_close(l);
}

static void held_batch_survives_set_epoch(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  c.prefetch = 1;
  record e0 = first_batch(c, 0), e1 = first_batch(c, 1);
  ff_loader *l = open_ok(&c);
  ff_batch *held, *b;
  assert_int_equal(ff_loader_next(l, &held), FF_OK);
  assert_int_equal(ff_loader_set_epoch(l, 1), FF_OK);
  record r1 = {0}, r0 = {0};
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  assert_int_equal(ff_batch_epoch(b), 1);
  assert_int_equal(ff_batch_index(b), 0);
  record_batch(&r1, b);
  ff_batch_release(b);
  assert_int_equal(ff_loader_next(l, &b), FF_OK); /* keep the workers writing */
  ff_batch_release(b);
  assert_int_equal(ff_batch_epoch(held), 0);
  record_batch(&r0, held); /* not overwritten by epoch 1 */
  ff_batch_release(held);
  assert_true(records_equal(&e0, &r0));
  assert_true(records_equal(&e1, &r1));
  ff_loader_close(l);
  free(e0.bytes), free(e1.bytes), free(r0.bytes), free(r1.bytes);
}

/* ---- configuration and source errors ---- */

static void missing_folder_is_eio_naming_the_path(void **state) {
  (void)state;
  char source[2048];
  snprintf(source, sizeof source, "imagefolder:%s/no-such-folder", data_root);
  ff_config c = base_config(source, NCHW_PIPELINE);
  assert_contains(open_fails(&c, FF_EIO), "no-such-folder");
}

static void folder_without_class_folders_is_eempty(void **state) {
  (void)state;
  const char *dir = ff_test_dir("loader-empty");
  char source[2048];
  snprintf(source, sizeof source, "imagefolder:%s", dir);
  ff_config c = base_config(source, NCHW_PIPELINE);
  open_fails(&c, FF_EEMPTY);
}

static void class_folders_without_images_are_eempty(void **state) {
  (void)state;
  char dir[1024], path[2048];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("loader-noimages"));
  snprintf(path, sizeof path, "%s/cat", dir);
  ff_test_mkdir(path);
  snprintf(path, sizeof path, "%s/cat/readme.txt", dir);
  ff_test_write(path, "x", 1);
  char source[2048];
  snprintf(source, sizeof source, "imagefolder:%s", dir);
  ff_config c = base_config(source, NCHW_PIPELINE);
  open_fails(&c, FF_EEMPTY);
}

static void zero_batch_size_is_einval_naming_batch_size(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  c.batch_size = 0;
  assert_contains(open_fails(&c, FF_EINVAL), "batch_size");
}

static void zero_prefetch_is_einval_naming_prefetch(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  c.prefetch = 0;
  assert_contains(open_fails(&c, FF_EINVAL), "prefetch");
}

static void unknown_semantics_is_einval_naming_semantics(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  c.semantics = (ff_semantics)2;
  assert_contains(open_fails(&c, FF_EINVAL), "semantics must be v1 or v2 (got 2)");
  uint8_t *out = NULL;
  int h, w;
  char msg[256];
  assert_int_equal(ff_image_augment_as("x.png", "decode", (ff_semantics)-1, 0, 0, 0, &out, &h, &w, msg, sizeof msg),
                   FF_EINVAL);
  assert_non_null(strstr(msg, "semantics"));
  assert_null(out);
}

static void bad_pipeline_is_epipeline_naming_the_column(void **state) {
  (void)state;
  ff_config c = base_config(data_source, "decode | flip");
  const char *msg = open_fails(&c, FF_EPIPELINE);
  assert_contains(msg, "column 10");
}

static void rank_not_below_world_size_is_einval(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  c.rank = 2, c.world_size = 2;
  assert_contains(open_fails(&c, FF_EINVAL), "rank");
}

static void next_on_a_failed_loader_is_einval(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  c.batch_size = 0;
  ff_loader *l = NULL;
  assert_int_equal(ff_loader_open(&c, &l), FF_EINVAL);
  ff_batch *b = NULL;
  assert_int_equal(ff_loader_next(l, &b), FF_EINVAL);
  assert_null(b);
  ff_loader_close(l);
  ff_loader_close(NULL); /* no-op */
  ff_batch_release(NULL);
}

static void set_epoch_on_a_failed_loader_is_einval(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  c.batch_size = 0;
  ff_loader *l = NULL;
  assert_int_equal(ff_loader_open(&c, &l), FF_EINVAL);
  assert_int_equal(ff_loader_set_epoch(l, 1), FF_EINVAL);
  ff_loader_close(l);
}

static void drop_last_with_more_ranks_than_samples_is_eempty(void **state) {
  (void)state;
  char dir[1024], source[2048];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("loader-two"));
  ff_test_make_imagefolder(dir, 1, 2, 40, 40, 1);
  snprintf(source, sizeof source, "imagefolder:%s", dir);
  ff_config c = base_config(source, NCHW_PIPELINE);
  c.batch_size = 1, c.world_size = 3, c.rank = 1, c.drop_last = 1, c.sampler_drop_last = 1;
  /* DistributedSampler: num_samples = ceil((2 - 3) / 3) = 0 for every rank */
  open_fails(&c, FF_EEMPTY);
  c.sampler_drop_last = 0; /* padded: one sample each, one full batch of 1 */
  ff_loader *l = open_ok(&c);
  assert_int_equal(ff_loader_num_batches(l), 1);
  ff_loader_close(l);
}

/* DataLoader's drop_last (the short batch) and DistributedSampler's (the
 * shard tail) apart: 10 samples on 4 ranks are padded to 3 per rank, or cut
 * to ceil((10 - 4) / 4) = 2 per rank. */
static void drop_last_and_sampler_drop_last_are_torchs_two_meanings(void **state) {
  (void)state;
  char dir[1024], source[2048];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("loader-ten"));
  ff_test_make_imagefolder(dir, 1, 10, 16, 16, 1);
  snprintf(source, sizeof source, "imagefolder:%s", dir);
  ff_config c = base_config(source, NCHW_PIPELINE);
  c.world_size = 4, c.rank = 3;
  const struct { int batch_size, drop_last, sampler_drop_last; size_t batches; } cases[] = {
      {1, 0, 0, 3}, {1, 0, 1, 2}, {2, 0, 0, 2}, {2, 1, 0, 1}, {2, 1, 1, 1}, {3, 1, 1, 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    c.batch_size = cases[k].batch_size, c.drop_last = cases[k].drop_last;
    c.sampler_drop_last = cases[k].sampler_drop_last;
    if (!cases[k].batches) {
      open_fails(&c, FF_EEMPTY);
      continue;
    }
    ff_loader *l = open_ok(&c);
    assert_int_equal(ff_loader_num_batches(l), cases[k].batches);
    ff_loader_close(l);
  }
}

/* ---- bad samples ---- */

/* 20 images 00..19 in one class, 01.jpg truncated, 09.jpg empty, 17.png
 * garbage: with batch_size 4 and no shuffle, batches 0, 2 and 4 hold one. */
static const char *make_bad_folder(char *source, size_t cap) {
  static char dir[1024];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("loader-bad"));
  char path[2048];
  snprintf(path, sizeof path, "%s/a", dir);
  ff_test_mkdir(path);
  for (int i = 0; i < 20; i++) {
    snprintf(path, sizeof path, "%s/a/%02d.jpg", dir, i);
    if (i == 17) continue;
    ff_test_write_jpeg(path, i == 1 ? 96 : 40, i == 1 ? 96 : 40, 95, 0, (unsigned)i);
  }
  snprintf(path, sizeof path, "%s/a/01.jpg", dir);
  size_t n;
  uint8_t *full = ff_test_read(path, &n);
  assert_non_null(full);
  ff_test_write(path, full, n / 2);
  free(full);
  snprintf(path, sizeof path, "%s/a/09.jpg", dir);
  ff_test_write(path, "", 0);
  snprintf(path, sizeof path, "%s/a/17.png", dir);
  ff_test_write(path, "this is not a PNG file at all", 29);
  snprintf(source, cap, "imagefolder:%s", dir);
  return dir;
}

#define BAD_PIPELINE "decode | resize(size=(16, 16))" /* decodes every row */

static void bad_files_fail_their_batch_naming_the_file(void **state) {
  (void)state;
  char source[2048];
  make_bad_folder(source, sizeof source);
  ff_config c = base_config(source, BAD_PIPELINE);
  c.batch_size = 4, c.shuffle = 0;
  ff_loader *l = open_ok(&c);
  const char *names[5] = {"01.jpg", NULL, "09.jpg", NULL, "17.png"};
  for (size_t i = 0; i < 5; i++) {
    ff_batch *b = NULL;
    ff_status st = ff_loader_next(l, &b);
    if (names[i]) {
      assert_int_equal(st, FF_EDATA);
      assert_null(b);
      assert_contains(ff_loader_errmsg(l), names[i]);
    } else {
      assert_int_equal(st, FF_OK);
      assert_int_equal(ff_batch_index(b), i); /* the error did not stop the epoch */
      assert_int_equal(ff_batch_size(b), 4);
      ff_batch_release(b);
    }
  }
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_END);
  ff_loader_close(l);
}

static void bad_files_are_skipped_and_named_with_on_error_skip(void **state) {
  (void)state;
  char source[2048];
  make_bad_folder(source, sizeof source);
  ff_config c = base_config(source, BAD_PIPELINE);
  c.batch_size = 4, c.shuffle = 0, c.on_error = FF_ON_ERROR_SKIP;
  ff_loader *l = open_ok(&c);
  const int64_t want[5][4] = {
      {0, 2, 3, -1}, {4, 5, 6, 7}, {8, 10, 11, -1}, {12, 13, 14, 15}, {16, 18, 19, -1}};
  for (int i = 0; i < 5; i++) {
    ff_batch *b;
    assert_int_equal(ff_loader_next(l, &b), FF_OK);
    size_t n = want[i][3] < 0 ? 3 : 4;
    assert_int_equal(ff_batch_size(b), n);
    ff_tensor t;
    ff_batch_images(b, &t);
    assert_int_equal(t.shape[0], n);
    assert_memory_equal(ff_batch_sample_indices(b), want[i], n * sizeof(int64_t));
    ff_batch_release(b);
  }
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_END);
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_int_equal(s.skipped, 3);
  assert_int_equal(s.samples, 17);
  /* Workers finish in any order: each file is named once among the three. */
  const char *names[3] = {"01.jpg", "09.jpg", "17.png"};
  for (int k = 0; k < 3; k++) {
    int found = 0;
    for (size_t i = 0; i < 3; i++) {
      assert_non_null(ff_loader_skipped(l, i));
      found += strstr(ff_loader_skipped(l, i), names[k]) != NULL;
    }
    assert_int_equal(found, 1);
  }
  assert_null(ff_loader_skipped(l, 3));
  ff_loader_close(l);
}

static void skipped_samples_leave_the_good_pixels_in_place(void **state) {
  (void)state;
  char source[2048], path[2048], list[4096];
  const char *dir = make_bad_folder(source, sizeof source);
  /* Reference: samples 00, 02, 03 alone (resize draws nothing at random). */
  snprintf(path, sizeof path, "%s/good.txt", dir);
  const char *text = "a/00.jpg\t0\na/02.jpg\t0\na/03.jpg\t0\n";
  ff_test_write(path, text, strlen(text));
  snprintf(list, sizeof list, "list:%s", path);
  ff_config c = base_config(list, BAD_PIPELINE);
  c.batch_size = 3, c.shuffle = 0;
  ff_loader *l = open_ok(&c);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_tensor t;
  ff_batch_images(b, &t);
  uint8_t ref[3][16 * 16 * 3];
  memcpy(ref, t.data, sizeof ref);
  ff_batch_release(b);
  ff_loader_close(l);

  c = base_config(source, BAD_PIPELINE);
  c.batch_size = 4, c.shuffle = 0, c.on_error = FF_ON_ERROR_SKIP;
  l = open_ok(&c);
  assert_int_equal(ff_loader_next(l, &b), FF_OK); /* 00, (01 skipped), 02, 03 */
  ff_batch_images(b, &t);
  assert_int_equal(t.shape[0], 3);
  assert_memory_equal(t.data, ref, sizeof ref);
  ff_batch_release(b);
  ff_loader_close(l);
}

static void unreadable_file_is_eio_naming_it(void **state) {
  (void)state;
  char dir[1024], path[2048], list[4096];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("loader-unreadable"));
  snprintf(path, sizeof path, "%s/good.jpg", dir);
  ff_test_write_jpeg(path, 40, 40, 90, 0, 1);
  snprintf(path, sizeof path, "%s/x.jpg", dir); /* a folder: opens but cannot be read as a file */
  ff_test_mkdir(path);
  snprintf(path, sizeof path, "%s/locked.jpg", dir);
  ff_test_write_jpeg(path, 40, 40, 90, 0, 2);
  chmod(path, 0);
  snprintf(path, sizeof path, "%s/list.txt", dir);
  const char *text = "good.jpg\t0\nx.jpg\t1\nlocked.jpg\t2\n";
  ff_test_write(path, text, strlen(text));
  snprintf(list, sizeof list, "list:%s", path);
  ff_config c = base_config(list, BAD_PIPELINE);
  c.batch_size = 1, c.shuffle = 0;
  ff_loader *l = open_ok(&c);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_batch_release(b);
  assert_int_equal(ff_loader_next(l, &b), FF_EIO);
  assert_contains(ff_loader_errmsg(l), "x.jpg");
  ff_status st = ff_loader_next(l, &b);
  if (geteuid() == 0) { /* root reads a mode-000 file */
    assert_int_equal(st, FF_OK);
    ff_batch_release(b);
  } else {
    assert_int_equal(st, FF_EIO);
    assert_contains(ff_loader_errmsg(l), "locked.jpg");
  }
  assert_int_equal(ff_loader_next(l, &b), FF_END);
  ff_loader_close(l);
}

static void image_over_max_image_pixels_is_etoobig_naming_it(void **state) {
  (void)state;
  char dir[1024], source[2048], path[2048];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("loader-toobig"));
  ff_test_make_imagefolder(dir, 1, 3, 40, 40, 5);
  snprintf(source, sizeof source, "imagefolder:%s", dir);
  ff_config c = base_config(source, "decode | resize(size=(8, 8))"); /* 64 output pixels: within the limit */
  c.batch_size = 1, c.shuffle = 0, c.max_image_pixels = 100;
  ff_loader *l = open_ok(&c);
  ff_batch *b;
  for (int i = 0; i < 3; i++) {
    assert_int_equal(ff_loader_next(l, &b), FF_ETOOBIG);
    assert_contains(ff_loader_errmsg(l), ff_test_imagefolder_path(dir, 0, i, path, sizeof path));
  }
  assert_int_equal(ff_loader_next(l, &b), FF_END);
  ff_loader_close(l);
  c.max_image_pixels = 1600; /* exactly 40 x 40 is allowed */
  l = open_ok(&c);
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_batch_release(b);
  ff_loader_close(l);
}

/* ---- list sources ---- */

static void pipeline_output_over_max_image_pixels_is_epipeline(void **state) {
  (void)state;
  ff_config c = base_config(data_source, "decode | resize(size=(16, 16)) | resize(size=(20000, 20000)) | "
                                         "center_crop(size=8)");
  const char *msg = open_fails(&c, FF_EPIPELINE);
  assert_contains(msg, "pipeline column 34:");
  assert_contains(msg, "max_image_pixels");
}

static void list_source_reads_relative_and_absolute_paths(void **state) {
  (void)state;
  char dir[1024], path[2048], list[4096], abs_img[2048];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("loader-list"));
  snprintf(path, sizeof path, "%s/imgs", dir);
  ff_test_mkdir(path);
  snprintf(path, sizeof path, "%s/imgs/a.jpg", dir);
  ff_test_write_jpeg(path, 48, 40, 90, 0, 1);
  snprintf(path, sizeof path, "%s/imgs/b.jpg", dir);
  ff_test_write_jpeg(path, 40, 56, 90, 1, 2);
  ff_test_imagefolder_path(data_root, 0, 0, abs_img, sizeof abs_img);
  char text[8192];
  snprintf(text, sizeof text, "# path<TAB>label\n\nimgs/a.jpg\t3\n# another comment\nimgs/b.jpg\t1\n%s\t0\n",
           abs_img);
  snprintf(path, sizeof path, "%s/list.txt", dir);
  ff_test_write(path, text, strlen(text));
  snprintf(list, sizeof list, "list:%s", path);

  char cwd[4096];
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir("/"), 0); /* relative to the list's folder, not the process's */
  ff_config c = base_config(list, "decode | center_crop(size=32)");
  c.batch_size = 4, c.shuffle = 0;
  ff_loader *l = open_ok(&c);
  assert_int_equal(ff_loader_dataset_size(l), 3);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  assert_int_equal(ff_batch_size(b), 3);
  ff_tensor lab;
  ff_batch_labels(b, &lab);
  const int64_t labels[3] = {3, 1, 0}, idx[3] = {0, 1, 2};
  assert_memory_equal(lab.data, labels, sizeof labels);
  assert_memory_equal(ff_batch_sample_indices(b), idx, sizeof idx);
  ff_batch_release(b);
  ff_loader_close(l);
  assert_int_equal(chdir(cwd), 0);
}

static void list_source_malformed_line_is_edata_naming_file_and_line(void **state) {
  (void)state;
  char dir[1024], path[2048], list[4096];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("loader-badlist"));
  snprintf(path, sizeof path, "%s/a.jpg", dir);
  ff_test_write_jpeg(path, 40, 40, 90, 0, 1);
  snprintf(path, sizeof path, "%s/list.txt", dir);
  const char *text = "a.jpg\t0\n# fine\na.jpg 1\n";
  ff_test_write(path, text, strlen(text));
  snprintf(list, sizeof list, "list:%s", path);
  ff_config c = base_config(list, NCHW_PIPELINE);
  const char *msg = open_fails(&c, FF_EDATA);
  char want[4096];
  snprintf(want, sizeof want, "%s:3", path);
  assert_contains(msg, want);

  text = "a.jpg\t-2\n";
  ff_test_write(path, text, strlen(text));
  snprintf(want, sizeof want, "%s:1", path);
  assert_contains(open_fails(&c, FF_EDATA), want);
}

/* ---- sharding from the environment ---- */

static void rank_and_world_size_come_from_the_environment(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NHWC_PIPELINE);
  c.rank = -1, c.world_size = -1, c.shuffle = 0, c.batch_size = 4;
  setenv("WORLD_SIZE", "3", 1);
  setenv("RANK", "2", 1);
  ff_loader *l = open_ok(&c);
  assert_int_equal(ff_loader_num_samples(l), 17); /* ceil(50 / 3) */
  assert_int_equal(ff_loader_num_batches(l), 5);
  assert_int_equal(ff_loader_dataset_size(l), N);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  const int64_t idx[4] = {2, 5, 8, 11}; /* every 3rd index from rank 2 */
  assert_memory_equal(ff_batch_sample_indices(b), idx, sizeof idx);
  ff_batch_release(b);
  ff_loader_close(l);

  setenv("WORLD_SIZE", "4", 1);
  setenv("RANK", "4", 1);
  open_fails(&c, FF_EINVAL);
  setenv("RANK", "x", 1);
  assert_contains(open_fails(&c, FF_EINVAL), "RANK");
  unsetenv("RANK");
  l = open_ok(&c); /* rank 0 of 4 */
  assert_int_equal(ff_loader_num_samples(l), 13);
  ff_loader_close(l);
  unsetenv("WORLD_SIZE");
  l = open_ok(&c);
  assert_int_equal(ff_loader_num_samples(l), N);
  ff_loader_close(l);
}

/* ---- close and held batches ---- */

static char big_source[2048]; /* 200 images for the close tests */

static double seconds_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

static void close_while_workers_are_busy_returns_promptly(void **state) {
  (void)state;
  if (!big_source[0]) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", ff_test_dir("loader-big"));
    ff_test_make_imagefolder(dir, 4, 50, 100, 140, 3);
    snprintf(big_source, sizeof big_source, "imagefolder:%s", dir);
  }
  /* Upscaling every image to 384 x 384 float32 keeps the workers busy. */
  ff_config c = base_config(
      big_source,
      "decode(dct_scale=false) | resize(size=(384, 384)) | normalize(mean=imagenet, std=imagenet)");
  c.batch_size = 16, c.prefetch = 4;
  ff_loader *l = open_ok(&c);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_batch_release(b);
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_int_equal(s.batches, 1);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ff_loader_close(l);
  double dt = seconds_since(&t0);
  if (dt >= 2.0) fail_msg("ff_loader_close took %.3f s", dt);
}

static void held_batch_stays_readable_after_close(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NCHW_PIPELINE);
  record ref = first_batch(c, 0);
  ff_loader *l = open_ok(&c);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_loader_close(l);
  /* The batch outlives its loader until released. */
  record r = {0};
  record_batch(&r, b);
  assert_int_equal(ff_batch_index(b), 0);
  ff_batch_release(b);
  assert_true(records_equal(&ref, &r));
  free(ref.bytes), free(r.bytes);
}

static void holding_the_first_batch_does_not_stall_the_epoch(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NHWC_PIPELINE);
  c.batch_size = 4, c.prefetch = 2;
  ff_loader *l = open_ok(&c);
  alarm(60); /* a hang kills the test instead of the ctest timeout */
  ff_batch *first, *b;
  assert_int_equal(ff_loader_next(l, &first), FF_OK);
  for (size_t i = 1; i < 13; i++) { /* 50 / 4 → 13 batches */
    assert_int_equal(ff_loader_next(l, &b), FF_OK);
    assert_int_equal(ff_batch_index(b), i);
    ff_batch_release(b);
  }
  assert_int_equal(ff_loader_next(l, &b), FF_END);
  assert_int_equal(ff_batch_index(first), 0);
  ff_batch_release(first);
  /* The next epoch follows in full afterwards. */
  int order[N];
  check_epoch_coverage(l, 1, order);
  alarm(0);
  ff_loader_close(l);
}

static void holding_more_than_prefetch_plus_one_batches_is_einval(void **state) {
  (void)state;
  ff_config c = base_config(data_source, NHWC_PIPELINE);
  c.batch_size = 4, c.prefetch = 2;
  ff_loader *l = open_ok(&c);
  alarm(60);
  ff_batch *held[3], *b = NULL;
  for (int i = 0; i < 3; i++)
    assert_int_equal(ff_loader_next(l, &held[i]), FF_OK);
  assert_int_equal(ff_loader_next(l, &b), FF_EINVAL);
  assert_null(b);
  assert_contains(ff_loader_errmsg(l), "prefetch");
  ff_batch_release(held[1]);
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  assert_int_equal(ff_batch_index(b), 3); /* nothing was lost */
  ff_batch_release(b);
  ff_batch_release(held[0]);
  ff_batch_release(held[2]);
  alarm(0);
  ff_loader_close(l);
}

/* What the progress of a stalled streamed open saw, and when it gives up. */
typedef struct open_seen {
  int calls, due, first_attempt, max_attempts, backing_off;
  size_t shard_index, num_shards;
  char shard[256];
  double last_s;
} open_seen;

static int give_up_after_half_a_second(void *ctx, const ff_open_progress *p) {
  open_seen *o = ctx;
  if (!o->calls++) {
    o->first_attempt = p->attempt, o->max_attempts = p->max_attempts, o->backing_off = p->backing_off;
    o->shard_index = p->shard_index, o->num_shards = p->num_shards;
    snprintf(o->shard, sizeof o->shard, "%s", p->shard);
  }
  o->last_s = p->elapsed_s;
  o->due += p->due != 0;
  return p->elapsed_s > 0.5;
}

/* A server that takes the connection and never answers: the open of a
 * streamed source tells open_progress which shard and attempt it waits for,
 * again and again while it waits (no line due yet), and gives up when told to (FF_EIO, the
 * message naming the shard), long before the 30 s stall timeout. */
static void a_stalled_streamed_open_tells_its_progress_and_can_be_given_up(void **state) {
  (void)state;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
  assert_int_equal(listen(fd, 4), 0); /* the kernel completes the connection; nobody reads or answers */
  assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
  char url[128], source[160];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/stalled-000.tar", ntohs(addr.sin_port));
  snprintf(source, sizeof source, "tar:%s", url);
  setenv("FF_STREAM_RETRIES", "2", 1);
  ff_config c = base_config(source, NCHW_PIPELINE);
  open_seen seen = {0};
  c.open_progress = give_up_after_half_a_second, c.open_progress_ctx = &seen;
  ff_loader *l = NULL;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(ff_loader_open(&c, &l), FF_EIO);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  const char *msg = ff_loader_errmsg(l);
  if (!strstr(msg, url) || !strstr(msg, "given up")) fail_msg("message: '%s'", msg);
  ff_loader_close(l);
  unsetenv("FF_STREAM_RETRIES");
  close(fd);
  assert_string_equal(seen.shard, url);
  assert_int_equal(seen.first_attempt, 1);
  assert_int_equal(seen.max_attempts, 3);
  assert_int_equal(seen.backing_off, 0);
  assert_int_equal(seen.shard_index, 0);
  assert_int_equal(seen.num_shards, 1);
  assert_true(seen.calls >= 3); /* told again while it waits, not only as the attempt starts */
  assert_int_equal(seen.due, 0); /* no line is due in an open's first 2 s */
  assert_true(seen.last_s > 0.5);
  assert_true(took < 20); /* given up at once, not after the server's 30 s stall */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(batches_do_not_depend_on_threads_or_prefetch_nchw),
      cmocka_unit_test(batches_do_not_depend_on_threads_or_prefetch_nhwc),
      cmocka_unit_test(batches_with_the_transforms_do_not_depend_on_threads_or_prefetch),
      cmocka_unit_test(a_batch_size_beyond_the_data_set_gives_one_batch),
      cmocka_unit_test(different_seeds_give_different_batches),
      cmocka_unit_test(different_epochs_give_different_batches),
      cmocka_unit_test(set_epoch_reproduces_an_epoch),
      cmocka_unit_test(set_epoch_mid_epoch_restarts_it),
      cmocka_unit_test(shuffled_epoch_visits_every_sample_once_with_its_label),
      cmocka_unit_test(unshuffled_epoch_is_in_dataset_order),
      cmocka_unit_test(nchw_float32_batch_has_its_shape_and_strides),
      cmocka_unit_test(nhwc_uint8_batch_has_its_shape_and_strides),
      cmocka_unit_test(last_batch_is_short_without_drop_last),
      cmocka_unit_test(drop_last_leaves_out_the_short_batch),
      cmocka_unit_test(end_after_the_last_batch_then_the_next_epoch_follows),
      cmocka_unit_test(epochs_the_ring_holds_whole_follow_one_another),
      cmocka_unit_test(seek_resumes_mid_epoch_bit_identically),
      cmocka_unit_test(seek_to_the_end_of_an_epoch_goes_on_to_the_next),
      cmocka_unit_test(node_group_caps_the_threads_and_keeps_batches_identical),
      cmocka_unit_test(a_node_group_not_joined_is_said_once),
      cmocka_unit_test(stats_count_every_file_read_once),
      cmocka_unit_test(batch_can_be_released_from_another_thread),
      cmocka_unit_test(held_batch_survives_set_epoch),
      cmocka_unit_test(missing_folder_is_eio_naming_the_path),
      cmocka_unit_test(folder_without_class_folders_is_eempty),
      cmocka_unit_test(class_folders_without_images_are_eempty),
      cmocka_unit_test(zero_batch_size_is_einval_naming_batch_size),
      cmocka_unit_test(zero_prefetch_is_einval_naming_prefetch),
      cmocka_unit_test(unknown_semantics_is_einval_naming_semantics),
      cmocka_unit_test(bad_pipeline_is_epipeline_naming_the_column),
      cmocka_unit_test(rank_not_below_world_size_is_einval),
      cmocka_unit_test(next_on_a_failed_loader_is_einval),
      cmocka_unit_test(set_epoch_on_a_failed_loader_is_einval),
      cmocka_unit_test(drop_last_with_more_ranks_than_samples_is_eempty),
      cmocka_unit_test(drop_last_and_sampler_drop_last_are_torchs_two_meanings),
      cmocka_unit_test(bad_files_fail_their_batch_naming_the_file),
      cmocka_unit_test(bad_files_are_skipped_and_named_with_on_error_skip),
      cmocka_unit_test(skipped_samples_leave_the_good_pixels_in_place),
      cmocka_unit_test(unreadable_file_is_eio_naming_it),
      cmocka_unit_test(image_over_max_image_pixels_is_etoobig_naming_it),
      cmocka_unit_test(pipeline_output_over_max_image_pixels_is_epipeline),
      cmocka_unit_test(list_source_reads_relative_and_absolute_paths),
      cmocka_unit_test(list_source_malformed_line_is_edata_naming_file_and_line),
      cmocka_unit_test(rank_and_world_size_come_from_the_environment),
      cmocka_unit_test(close_while_workers_are_busy_returns_promptly),
      cmocka_unit_test(held_batch_stays_readable_after_close),
      cmocka_unit_test(holding_the_first_batch_does_not_stall_the_epoch),
      cmocka_unit_test(holding_more_than_prefetch_plus_one_batches_is_einval),
      cmocka_unit_test(a_stalled_streamed_open_tells_its_progress_and_can_be_given_up),
  };
  return cmocka_run_group_tests(tests, make_dataset, NULL);
}
