/* test_fence.c — host batches and the consumer's asynchronous copies of them
 * (ff_loader_fence), on the emulated device: a copy queued on a consumer's
 * stream that runs late (behind a gate the test opens, as a busy trainer's
 * stream would) reads the batch it was queued from, not a later batch the
 * workers put into the same memory — with the CPU and with the device
 * writing the batches; closing the loader waits for such a copy before the
 * memory goes; a consumer that stops fencing does not starve the ring;
 * ordinary memory needs no fence; bad calls are refused. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/device_impl.h"
#include "exec/emu_probe.h"
#include "fixtures.h"
#include "fusionflow/fusionflow.h"
#include "loader/loader_internal.h"

#define PIPELINE "decode | random_resized_crop(size=24) | random_horizontal_flip"
#define GATE_MS 300

static char source[2048];

static int make_dataset(void **state) {
  (void)state;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("fence-data"));
  ff_test_make_imagefolder(dir, 2, 8, 40, 90, 5);
  snprintf(source, sizeof source, "imagefolder:%s", dir);
  return 0;
}

/* A loader of 4-image batches, prefetch 1 (two ring entries), its host
 * batches pinned by an emulator (pin_memory 1, or 0). */
static ff_loader *open_loader(int pin, double share) {
  ff_config c;
  ff_config_init(&c);
  c.source = source;
  c.pipeline = PIPELINE;
  c.batch_size = 4;
  c.prefetch = 1;
  c.seed = 3;
  c.num_threads = 2;
  c.rank = 0, c.world_size = 1;
  c.device = "emu:0";
  c.pin_memory = pin;
  ff_loader *l = NULL;
  if (ff_loader_open(&c, &l) != FF_OK) fail_msg("open: %s", ff_loader_errmsg(l));
  ff__loader_force_device_share(l, share);
  return l;
}

static ff_batch *next_or_fail(ff_loader *l) {
  ff_batch *b = NULL;
  ff_status st = ff_loader_next(l, &b);
  if (st != FF_OK) fail_msg("next: %s (%s)", ff_status_str(st), ff_loader_errmsg(l));
  return b;
}

static size_t image_bytes(const ff_batch *b) {
  ff_tensor t;
  ff_batch_images(b, &t);
  return (size_t)(t.shape[0] * t.strides[0]);
}

static const void *image_data(const ff_batch *b) {
  ff_tensor t;
  ff_batch_images(b, &t);
  return t.data;
}

/* The consumer: its stream on the pinning device, and a gate in front of it. */
typedef struct consumer {
  ff__device *dev;
  ff__dstream *stream;
  ff__devent *gate, *done;
  void *d_copy;
} consumer;

static void consumer_open(consumer *c, ff_loader *l, size_t bytes) {
  ff__error err = {0};
  c->dev = ff__device_retain(l->host_dev); /* outlives the loader's close */
  assert_non_null(c->dev);
  assert_int_equal(ff__device_stream_create(c->dev, &c->stream, &err), FF_OK);
  assert_int_equal(ff__device_event_create(c->dev, &c->gate, &err), FF_OK);
  assert_int_equal(ff__device_event_create(c->dev, &c->done, &err), FF_OK);
  assert_int_equal(ff__device_alloc(c->dev, bytes, &c->d_copy, &err), FF_OK);
}

/* images.cuda(non_blocking=True) on a trainer's stream that is busy: the
 * copy is queued behind the gate. */
static void late_copy(consumer *c, const void *images, size_t bytes) {
  ff__error err = {0};
  ff__emu_event_hold(c->dev, c->gate);
  assert_int_equal(ff__device_stream_wait(c->dev, c->stream, c->gate, &err), FF_OK);
  assert_int_equal(ff__device_upload(c->dev, c->stream, c->d_copy, images, bytes, &err), FF_OK);
}

static void *open_gate_later(void *arg) {
  consumer *c = arg;
  struct timespec t = {0, GATE_MS * 1000000L};
  nanosleep(&t, NULL);
  ff__emu_event_signal(c->dev, c->gate);
  return NULL;
}

static void copy_finish(consumer *c) {
  ff__error err = {0};
  assert_int_equal(ff__device_event_record(c->dev, c->done, c->stream, &err), FF_OK);
  assert_int_equal(ff__device_event_wait(c->dev, c->done, &err), FF_OK);
}

static void consumer_close(consumer *c) {
  ff__device_free(c->dev, c->d_copy);
  ff__device_event_destroy(c->dev, c->gate);
  ff__device_event_destroy(c->dev, c->done);
  ff__device_stream_destroy(c->dev, c->stream);
  ff__device_close(c->dev);
}

/* Batch 0's copy waits behind the gate while the consumer releases it and
 * takes batches 1 and 2; batch 2 needs batch 0's memory (two entries). */
static void late_copy_reads_its_own_batch(double share) {
  ff_test_stop_on_alarm("a fenced batch was never refilled");
  alarm(120);
  ff_loader *l = open_loader(1, share);
  assert_string_equal(ff_loader_pinned_device(l), "emu:0");
  assert_int_equal(ff_loader_pinned_cuda_device(l), -1); /* the emulator is no CUDA device */
  assert_int_equal(ff_loader_fence(l, NULL), FF_OK); /* fencing from the first batch on */
  ff_batch *b0 = next_or_fail(l);
  size_t bytes = image_bytes(b0);
  const void *memory = image_data(b0);
  uint8_t *want = malloc(bytes);
  memcpy(want, memory, bytes);
  consumer c;
  consumer_open(&c, l, bytes);
  late_copy(&c, memory, bytes);
  void *handle = ff__device_stream_handle(c.dev, c.stream);
  pthread_t gate;
  assert_int_equal(pthread_create(&gate, NULL, open_gate_later, &c), 0);
  ff_batch_release(b0);
  assert_int_equal(ff_loader_fence(l, handle), FF_OK);
  ff_batch *b1 = next_or_fail(l);
  ff_batch_release(b1);
  assert_int_equal(ff_loader_fence(l, handle), FF_OK);
  ff_batch *b2 = next_or_fail(l); /* in batch 0's memory, once the copy has read it */
  assert_ptr_equal(image_data(b2), memory);
  copy_finish(&c);
  assert_memory_equal(c.d_copy, want, bytes);
  ff_batch_release(b2);
  pthread_join(gate, NULL);
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_int_equal(s.fences, 3);
  assert_true(s.fence_wait_ns > 0); /* a worker slept on the gate */
  ff_loader_close(l);
  consumer_close(&c);
  free(want);
  alarm(0);
}

static void a_late_copy_reads_the_batch_the_cpu_made(void **state) {
  (void)state;
  late_copy_reads_its_own_batch(0);
}

static void a_late_copy_reads_the_batch_the_device_made(void **state) {
  (void)state;
  late_copy_reads_its_own_batch(1); /* the feeder downloads into the host batch */
}

static void closing_waits_for_a_late_copy_before_the_memory_goes(void **state) {
  (void)state;
  ff_test_stop_on_alarm("close never returned");
  alarm(120);
  ff_loader *l = open_loader(1, 0);
  assert_int_equal(ff_loader_fence(l, NULL), FF_OK);
  ff_batch *b0 = next_or_fail(l);
  size_t bytes = image_bytes(b0);
  uint8_t *want = malloc(bytes);
  memcpy(want, image_data(b0), bytes);
  consumer c;
  consumer_open(&c, l, bytes);
  late_copy(&c, image_data(b0), bytes);
  pthread_t gate;
  assert_int_equal(pthread_create(&gate, NULL, open_gate_later, &c), 0);
  ff_batch_release(b0);
  assert_int_equal(ff_loader_fence(l, ff__device_stream_handle(c.dev, c.stream)), FF_OK);
  ff_loader_close(l); /* frees the pinned images after the copy (ASan: no use after free) */
  copy_finish(&c);
  assert_memory_equal(c.d_copy, want, bytes);
  pthread_join(gate, NULL);
  consumer_close(&c);
  free(want);
  alarm(0);
}

/* A fence on the emulator's default stream (NULL, as torch's default
 * stream is 0), then no more fences: the epochs still run to the end. */
static void a_consumer_that_stops_fencing_does_not_starve_the_ring(void **state) {
  (void)state;
  ff_test_stop_on_alarm("the ring starved after the fences stopped");
  alarm(120);
  ff_loader *l = open_loader(1, 0);
  assert_int_equal(ff_loader_fence(l, NULL), FF_OK);
  size_t n = 0;
  for (int epoch = 0; epoch < 2; epoch++) {
    ff_batch *b;
    ff_status st;
    while ((st = ff_loader_next(l, &b)) == FF_OK) {
      n++;
      ff_batch_release(b);
    }
    assert_int_equal(st, FF_END);
  }
  assert_int_equal(n, 2 * ff_loader_num_batches(l));
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_int_equal(s.fences, 1);
  ff_loader_close(l);
  alarm(0);
}

/* Fencing at every next, on the default stream: the same batches as
 * without pinning. */
static void fenced_batches_equal_unpinned_ones(void **state) {
  (void)state;
  ff_loader *a = open_loader(1, 0.5), *b = open_loader(0, 0.5);
  assert_string_equal(ff_loader_pinned_device(b), "cpu");
  assert_int_equal(ff_loader_pinned_cuda_device(b), -1);
  for (size_t i = 0; i < ff_loader_num_batches(a); i++) {
    assert_int_equal(ff_loader_fence(a, NULL), FF_OK);
    assert_int_equal(ff_loader_fence(b, NULL), FF_OK); /* ordinary memory: nothing to do */
    ff_batch *x = next_or_fail(a), *y = next_or_fail(b);
    assert_int_equal(image_bytes(x), image_bytes(y));
    assert_memory_equal(image_data(x), image_data(y), image_bytes(x));
    ff_batch_release(x), ff_batch_release(y);
  }
  ff_stats s;
  ff_loader_stats(a, &s);
  assert_int_equal(s.fences, ff_loader_num_batches(a));
  ff_loader_stats(b, &s);
  assert_int_equal(s.fences, 0);
  ff_loader_close(a), ff_loader_close(b);
}

static void a_fence_on_no_loader_or_a_failed_one_is_refused(void **state) {
  (void)state;
  assert_int_equal(ff_loader_fence(NULL, NULL), FF_EINVAL);
  assert_string_equal(ff_loader_pinned_device(NULL), "cpu");
  assert_int_equal(ff_loader_pinned_cuda_device(NULL), -1);
  ff_config c;
  ff_config_init(&c);
  c.source = "imagefolder:/nonexistent-fence-test";
  c.pipeline = PIPELINE;
  ff_loader *l = NULL;
  assert_int_not_equal(ff_loader_open(&c, &l), FF_OK);
  assert_int_equal(ff_loader_fence(l, NULL), FF_EINVAL);
  assert_non_null(strstr(ff_loader_errmsg(l), "failed to open"));
  ff_loader_close(l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_late_copy_reads_the_batch_the_cpu_made),
      cmocka_unit_test(a_late_copy_reads_the_batch_the_device_made),
      cmocka_unit_test(closing_waits_for_a_late_copy_before_the_memory_goes),
      cmocka_unit_test(a_consumer_that_stops_fencing_does_not_starve_the_ring),
      cmocka_unit_test(fenced_batches_equal_unpinned_ones),
      cmocka_unit_test(a_fence_on_no_loader_or_a_failed_one_is_refused),
  };
  return cmocka_run_group_tests(tests, make_dataset, NULL);
}
