/* test_offload.c — the cooperative scheduler's runtime end to end on the
 * emulated device `emu:0` (and on `cuda:0` where there is one): a consumer
 * faster than the CPU pool gets a device share, a slow one none; batches
 * are bit-identical whatever the device took, the thread count or a share
 * changed mid-run; a budget too small for any microbatch, refused
 * allocations and a failed kernel send the work back to the CPU without an
 * error, an allocation's device error is not taken for a refusal (no
 * back-off); the consumer thread's current device is the same after open,
 * next and close, and every device call ran with the device current; with
 * pin_memory the ring's images come from the device's host allocator (and
 * outlive close while held), by default only with a CUDA device; per-batch
 * statistics add up; an explicit device that cannot be opened fails the
 * open, "auto" falls back quietly; close is prompt while the device is busy;
 * the active-thread cap parks workers. Whole-sample offload (placement
 * `device`, the emulator's decoder): bit-identical to the CPU, the three
 * placements mixed in one batch, a device sample's CPU time only its read,
 * PNG / progressive / corrupt / oversized files handled as on the CPU, and
 * the determinism contract with an nvJPEG-like decoder. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h> /* after stdio.h: it needs FILE */
#include <spng.h>

#include "exec/device_impl.h"
#include "exec/emu_probe.h"
#include "fixtures.h"
#include "fusionflow/fusionflow.h"
#include "codec/codec.h"
#include "loader/loader_internal.h"

/* Policies and the float output keep the ops busy: the device has work worth taking. */
#define HEAVY_PIPELINE                                                                                       \
  "decode | random_resized_crop(size=64) | rand_augment(num_ops=2, magnitude=9) | normalize(mean=imagenet, " \
  "std=imagenet)"
#define NHWC_PIPELINE "decode | random_resized_crop(size=(40, 36)) | random_horizontal_flip | aug_mix"
/* torchvision's per-sample transforms, groups, bicubic crops and erasing with noise */
#define TRANSFORMS_PIPELINE                                                                                  \
  "decode | random_resized_crop(size=48, interpolation=random) | random_apply(p=0.8, [color_jitter("         \
  "brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1)]) | three_augment | normalize(mean=imagenet, "    \
  "std=imagenet) | random_erasing(p=0.7, mode=pixel, max_count=2)"

static char source[2048]; /* 120 JPEGs of 80..240 px, 4 classes */

static int make_dataset(void **state) {
  (void)state;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("offload-data"));
  ff_test_make_imagefolder(dir, 4, 30, 80, 240, 5);
  snprintf(source, sizeof source, "imagefolder:%s", dir);
  return 0;
}

static ff_config config(const char *pipeline, const char *device, int threads) {
  ff_config c;
  ff_config_init(&c);
  c.source = source;
  c.pipeline = pipeline;
  c.batch_size = 8;
  c.seed = 3;
  c.num_threads = threads;
  c.prefetch = 2;
  c.rank = 0;
  c.world_size = 1;
  c.device = device;
  return c;
}

/* Opens with FF_FORCE_DEVICE_SHARE / FF_EMU_FAULTS set for the open only. */
static ff_loader *open_with(const ff_config *c, const char *share, const char *faults) {
  if (share) setenv("FF_FORCE_DEVICE_SHARE", share, 1);
  if (faults) setenv("FF_EMU_FAULTS", faults, 1);
  ff_loader *l = NULL;
  ff_status st = ff_loader_open(c, &l);
  unsetenv("FF_FORCE_DEVICE_SHARE");
  unsetenv("FF_EMU_FAULTS");
  if (st) fail_msg("ff_loader_open(%s): %s", c->device, ff_loader_errmsg(l));
  return l;
}

static double seconds_since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

static void sleep_ms(int ms) {
  struct timespec ts = {0, (long)ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- what a run hands out ---- */

typedef struct run {
  uint8_t *bytes; /* every batch's size, images, labels and indices */
  size_t len, cap;
  ff_stats stats;   /* its strings are only valid while the loader is open: see device, decoder */
  char device[64], decoder[64];
  size_t info_cpu, info_device, info_fallbacks; /* sums of ff_batch_stats */
  int mixed_batches; /* batches with samples of all three placements */
  uint64_t wait_ns;                             /* after the first batch */
} run;

static void add(run *r, const void *p, size_t n) {
  if (r->len + n > r->cap) {
    r->cap = (r->len + n) * 2;
    r->bytes = realloc(r->bytes, r->cap);
    assert_non_null(r->bytes);
  }
  memcpy(r->bytes + r->len, p, n);
  r->len += n;
}

/* Takes up to `batches` batches (0: one epoch), sleeping step_ms after each. */
static run consume(ff_loader *l, int batches, int step_ms) {
  run r = {0};
  ff_batch *b;
  ff_status st;
  for (int i = 0; (!batches || i < batches) && (st = ff_loader_next(l, &b)) != FF_END; i++) {
    if (st) fail_msg("ff_loader_next: %s", ff_loader_errmsg(l));
    ff_tensor img, lab;
    ff_batch_images(b, &img);
    ff_batch_labels(b, &lab);
    size_t n = ff_batch_size(b), px = (size_t)(img.shape[1] * img.shape[2] * img.shape[3]);
    add(&r, &n, sizeof n);
    add(&r, img.data, n * px * (img.dtype == FF_FLOAT32 ? 4 : 1));
    add(&r, lab.data, n * sizeof(int64_t));
    add(&r, ff_batch_sample_indices(b), n * sizeof(int64_t));
    ff_batch_info info;
    ff_batch_stats(b, &info);
    assert_int_equal(info.cpu_samples + info.device_samples, n);
    r.info_cpu += info.cpu_samples, r.info_device += info.device_samples;
    r.info_fallbacks += info.device_fallbacks;
    size_t placed = 0;
    for (int p = 0; p < FF_PLACEMENTS; p++) placed += info.placement_samples[p];
    assert_int_equal(placed, n);
    r.mixed_batches += info.placement_samples[0] && info.placement_samples[1] && info.placement_samples[2];
    if (i) r.wait_ns += info.wait_ns;
    ff_batch_release(b);
    if (step_ms) sleep_ms(step_ms);
  }
  ff_loader_stats(l, &r.stats);
  snprintf(r.device, sizeof r.device, "%s", r.stats.device);
  snprintf(r.decoder, sizeof r.decoder, "%s", r.stats.device_decoder);
  return r;
}

/* One epoch of a fresh loader. */
static run epoch_of(const ff_config *c, const char *share, const char *faults) {
  ff_loader *l = open_with(c, share, faults);
  run r = consume(l, 0, 0);
  ff_loader_close(l);
  return r;
}

static void assert_same_batches(const run *a, const run *b, const char *what) {
  if (a->len != b->len || memcmp(a->bytes, b->bytes, a->len)) fail_msg("%s: batches differ", what);
}

/* ---- the share follows the stall ---- */

/* Total wait of the consumer over 30 batches after the first, no step. */
static run fast_consumer(const char *device) {
  ff_config c = config(HEAVY_PIPELINE, device, 1);
  ff_loader *l = open_with(&c, NULL, NULL);
  run r = consume(l, 30, 0);
  ff_loader_close(l);
  return r;
}

static void fast_consumer_gets_a_device_share_on_emu(void **state) {
  (void)state;
  run cpu = fast_consumer("cpu");
  assert_int_equal(cpu.stats.device_samples, 0);
  assert_string_equal(cpu.device, "cpu");
  run emu = fast_consumer("emu:0");
  assert_string_equal(emu.device, "emu:0");
  assert_true(emu.stats.device_samples > 0);
  assert_int_equal(emu.stats.device_samples, emu.info_device);
  assert_int_equal(emu.stats.device_fallbacks, 0);
  assert_true(emu.stats.device_pool_peak_bytes > 0);
  assert_true(emu.stats.device_pool_peak_bytes <= emu.stats.device_pool_limit_bytes);
  /* The emulator runs the kernels on one host thread, about ten times
   * slower per sample than the CPU's ops, and on this test's machines it
   * shares the cores with the worker: it cannot cut the wait (the CUDA test
   * below checks that). The policy's balance point bounds the harm: at a
   * share of 1 the consumer would wait about ten times longer. */
  if (emu.wait_ns > 4 * cpu.wait_ns + 100000000)
    fail_msg("waited %.3f s with emu:0, %.3f s without", emu.wait_ns * 1e-9, cpu.wait_ns * 1e-9);
  free(cpu.bytes), free(emu.bytes);
}

static void fast_consumer_waits_less_with_cuda(void **state) {
  (void)state;
  ff_config c = config(HEAVY_PIPELINE, "cuda:0", 1);
  ff_loader *l = NULL;
  if (ff_loader_open(&c, &l) != FF_OK) {
    print_message("skipped: %s\n", ff_loader_errmsg(l));
    ff_loader_close(l);
    skip();
  }
  ff_loader_close(l);
  /* Timing on a shared machine: the best of three tries must show it. */
  for (int attempt = 1;; attempt++) {
    run cpu = fast_consumer("cpu"), gpu = fast_consumer("cuda:0");
    int ok = gpu.stats.device_samples > 0 && gpu.wait_ns < 0.8 * cpu.wait_ns;
    print_message("attempt %d: waited %.3f s with cuda:0 (%llu device samples), %.3f s without\n", attempt,
                  gpu.wait_ns * 1e-9, (unsigned long long)gpu.stats.device_samples, cpu.wait_ns * 1e-9);
    free(cpu.bytes), free(gpu.bytes);
    if (ok) return;
    if (attempt == 3) fail_msg("the device did not cut the consumer's wait below 0.8x in 3 tries");
  }
}

/* ThreadSanitizer runs the pixel loops (and the emulated device's) some 50x
 * slower: the tests whose premise is a speed say so. */
static int under_tsan(void) {
  const char *sanitizer = getenv("FF_TEST_SANITIZER");
  return sanitizer && strstr(sanitizer, "thread");
}

static void slow_consumer_gets_no_device_share(void **state) {
  (void)state;
  if (under_tsan()) { /* the CPU is no longer faster than the consumer */
    print_message("skipped: a timing premise that ThreadSanitizer's slowdown breaks\n");
    skip();
  }
  ff_config c = config(HEAVY_PIPELINE, "emu:0", 1);
  ff_loader *l = open_with(&c, NULL, NULL);
  run r = consume(l, 12, 50); /* the CPU needs a few ms per batch, the consumer 50 */
  assert_int_equal(r.stats.device_samples, 0);
  assert_true(r.stats.offload_share == 0.0);
  ff_loader_close(l);
  free(r.bytes);
}

/* ---- determinism ---- */

static void check_placement_does_not_matter(const char *pipeline) {
  ff_config c = config(pipeline, "cpu", 1);
  run ref = epoch_of(&c, NULL, NULL);
  c.device = "emu:0";
  run all = epoch_of(&c, "1.0", NULL);
  assert_int_equal(all.stats.device_samples, all.stats.samples); /* every sample on the device */
  assert_same_batches(&ref, &all, "cpu vs emu:0 with share 1");
  c.num_threads = 2;
  run half = epoch_of(&c, "0.5", NULL);
  assert_true(half.stats.device_samples > 0 && half.stats.device_samples < half.stats.samples);
  assert_same_batches(&ref, &half, "cpu vs emu:0 with share 0.5 and 2 threads");
  free(ref.bytes), free(all.bytes), free(half.bytes);
}

static void batches_do_not_depend_on_placement_nchw(void **state) {
  (void)state;
  check_placement_does_not_matter(HEAVY_PIPELINE);
}

static void batches_do_not_depend_on_placement_nhwc(void **state) {
  (void)state;
  check_placement_does_not_matter(NHWC_PIPELINE);
}

static void batches_with_the_transforms_do_not_depend_on_placement(void **state) {
  (void)state;
  check_placement_does_not_matter(TRANSFORMS_PIPELINE);
}

/* Two epochs of a fresh loader (the second one's split predicts each
 * sample's saving from its plan: its header was cached in the first). */
static run two_epochs_of(const ff_config *c, const char *share) {
  ff_loader *l = open_with(c, share, NULL);
  run r = consume(l, 0, 0), second = consume(l, 0, 0); /* the epoch advances by itself */
  ff_loader_close(l);
  assert_int_equal(second.len, r.len);
  add(&r, second.bytes, second.len);
  r.info_device += second.info_device;
  free(second.bytes);
  return r;
}

static void second_epoch_split_by_plan_keeps_batches_identical(void **state) {
  (void)state;
  ff_config c = config(HEAVY_PIPELINE, "cpu", 2);
  run ref = two_epochs_of(&c, NULL);
  c.device = "emu:0";
  run half = two_epochs_of(&c, "0.5");
  assert_true(half.info_device > 0);
  assert_same_batches(&ref, &half, "cpu vs emu:0 with share 0.5 over two epochs");
  free(ref.bytes), free(half.bytes);
}

static void share_changed_mid_run_keeps_batches_identical(void **state) {
  (void)state;
  ff_config c = config(NHWC_PIPELINE, "cpu", 2);
  run ref = epoch_of(&c, NULL, NULL);
  c.device = "emu:0";
  ff_loader *l = open_with(&c, "0.25", NULL);
  run r = {0};
  for (int part = 0; part < 3; part++) { /* 15 batches an epoch: 5 at each share */
    ff__loader_force_device_share(l, part == 0 ? 1.0 : part == 1 ? 0.0 : -1.0);
    run p = consume(l, 5, 0);
    add(&r, p.bytes, p.len);
    free(p.bytes);
  }
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_END);
  assert_same_batches(&ref, &r, "shares 1, 0, policy");
  ff_loader_close(l);
  free(ref.bytes), free(r.bytes);
}

/* ---- the device's limits and faults ---- */

static void a_budget_too_small_for_any_microbatch_keeps_everything_on_the_cpu(void **state) {
  (void)state;
  ff_config c = config(HEAVY_PIPELINE, "cpu", 1);
  run ref = epoch_of(&c, NULL, NULL);
  c.device = "emu:0";
  c.device_memory_limit_bytes = 4096;
  run r = epoch_of(&c, "1.0", NULL);
  assert_int_equal(r.stats.device_samples, 0);
  assert_int_equal(r.stats.device_fallbacks, 0); /* refused at admission: nothing to fall back */
  assert_true(r.stats.device_pool_limit_bytes <= 4096);
  assert_same_batches(&ref, &r, "cpu vs emu:0 with a 4 KiB budget");
  free(ref.bytes), free(r.bytes);
}

static void refused_device_memory_falls_back_to_the_cpu(void **state) {
  (void)state;
  ff_config c = config(HEAVY_PIPELINE, "cpu", 1);
  run ref = epoch_of(&c, NULL, NULL);
  c.device = "emu:0";
  run r = epoch_of(&c, "1.0", "alloc:1"); /* the output tensor gets memory, no microbatch does */
  assert_int_equal(r.stats.device_samples, 0);
  assert_true(r.stats.device_fallbacks > 0);
  assert_int_equal(r.stats.device_fallbacks, r.info_fallbacks);
  assert_same_batches(&ref, &r, "cpu vs emu:0 refusing memory");
  free(ref.bytes), free(r.bytes);
}

static void a_failed_kernel_falls_back_and_the_device_goes_on(void **state) {
  (void)state;
  ff_config c = config(HEAVY_PIPELINE, "cpu", 2);
  run ref = epoch_of(&c, NULL, NULL);
  c.device = "emu:0";
  run r = epoch_of(&c, "1.0", "kernel:3");
  assert_int_equal(r.stats.device_fallbacks, 8); /* one microbatch: a whole batch */
  assert_int_equal(r.stats.device_samples, r.stats.samples - 8);
  assert_same_batches(&ref, &r, "cpu vs emu:0 with a failed kernel");
  free(ref.bytes), free(r.bytes);
}

static void an_allocation_device_error_falls_back_without_backing_off(void **state) {
  (void)state;
  ff_config c = config(HEAVY_PIPELINE, "cpu", 1);
  run ref = epoch_of(&c, NULL, NULL);
  c.device = "emu:0";
  run r = epoch_of(&c, "1.0", "allocerr:2");     /* the first microbatch's memory: a device error */
  assert_int_equal(r.stats.device_fallbacks, 8); /* that batch on the CPU */
  /* and the next batches on the device again: a refusal would have backed off for 2 */
  assert_int_equal(r.stats.device_samples, r.stats.samples - 8);
  assert_same_batches(&ref, &r, "cpu vs emu:0 with an allocation device error");
  free(ref.bytes), free(r.bytes);
}

/* ---- pinned host batches ---- */

static void pinned_batches_come_from_the_devices_host_allocator(void **state) {
  (void)state;
  ff_config c = config(HEAVY_PIPELINE, "cpu", 2);
  run ref = epoch_of(&c, NULL, NULL);
  c.device = "emu:0";
  c.pin_memory = 1;
  ff_loader *l = open_with(&c, "0.5", NULL);
  assert_non_null(l->host_dev);
  ff_batch *held;
  assert_int_equal(ff_loader_next(l, &held), FF_OK);
  ff_tensor img;
  ff_batch_images(held, &img);
  assert_true(ff__emu_host_owns(l->host_dev, img.data));
  for (int i = 0; i < l->ring_size; i++)
    assert_true(ff__emu_host_owns(l->host_dev, l->ring[i].images));
  ff_batch_release(held);
  run r = consume(l, 0, 0);
  ff_loader_close(l);
  size_t first = ref.len - r.len; /* the first batch was taken above: compare the rest */
  assert_true(r.len < ref.len);
  assert_memory_equal(ref.bytes + first, r.bytes, r.len);
  free(r.bytes);

  c.pin_memory = -1; /* by default only a CUDA device pins */
  l = open_with(&c, NULL, NULL);
  assert_null(l->host_dev);
  ff_loader_close(l);
  c.pin_memory = 3; /* -1, 0, 1 and 2 are the values */
  assert_int_equal(ff_loader_open(&c, &l), FF_EINVAL);
  assert_non_null(strstr(ff_loader_errmsg(l), "pin_memory"));
  ff_loader_close(l);
  free(ref.bytes);
}

static void a_held_pinned_batch_outlives_close(void **state) {
  (void)state;
  ff_config c = config(HEAVY_PIPELINE, "emu:0", 1);
  c.pin_memory = 1;
  ff_loader *l = open_with(&c, NULL, NULL);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_tensor img;
  ff_batch_images(b, &img);
  ff__device *host_dev = l->host_dev;
  ff_loader_close(l);
  assert_true(ff__emu_host_owns(host_dev, img.data)); /* still the device's, still valid */
  memset(img.data, 0, ff_batch_size(b) * (size_t)(img.shape[1] * img.shape[2] * img.shape[3]) * 4);
  ff_batch_release(b); /* frees it, then closes the device */
}

/* ---- opening and closing ---- */

static void the_consumer_threads_current_device_is_left_as_it_was(void **state) {
  (void)state;
  ff__emu_set_current_device(4); /* the trainer's */
  ff_config c = config(HEAVY_PIPELINE, "emu:0", 1);
  ff_loader *l = open_with(&c, "1.0", NULL);
  assert_int_equal(ff__emu_current_device(), 4);
  run r = consume(l, 4, 0);
  assert_int_equal(ff__emu_current_device(), 4);
  assert_true(r.stats.device_samples > 0);
  ff__emu_counts counts;
  assert_int_equal(ff__emu_probe(ff__offload_device(l->offload), &counts), FF_OK);
  assert_int_equal(counts.misplaced_calls, 0); /* consumer and feeder alike */
  ff_loader_close(l);
  assert_int_equal(ff__emu_current_device(), 4);
  ff__emu_set_current_device(-1);
  free(r.bytes);
}

static void a_named_device_that_cannot_open_fails_the_open(void **state) {
  (void)state;
  ff_config c = config(HEAVY_PIPELINE, "tpu:0", 1);
  ff_loader *l = NULL;
  assert_int_equal(ff_loader_open(&c, &l), FF_EINVAL);
  assert_non_null(strstr(ff_loader_errmsg(l), "tpu:0"));
  ff_loader_close(l);
  c.device = "cuda:9";
  ff_status st = ff_loader_open(&c, &l);
  assert_int_equal(st, FF_EDEVICE); /* no such GPU here, or no GPU at all */
  assert_non_null(strstr(ff_loader_errmsg(l), "cuda:9"));
  ff_loader_close(l);
  c.device_max_time_share = 0;
  c.device = "emu:0";
  assert_int_equal(ff_loader_open(&c, &l), FF_EINVAL);
  assert_non_null(strstr(ff_loader_errmsg(l), "device_max_time_share"));
  ff_loader_close(l);
}

static void auto_falls_back_to_the_cpu_quietly(void **state) {
  (void)state;
  ff_config c = config(HEAVY_PIPELINE, "auto", 1);
  ff_loader *l = open_with(&c, NULL, NULL);
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_true(!strcmp(s.device, "cpu") || !strncmp(s.device, "cuda:0", 6));
  run r = consume(l, 3, 0);
  free(r.bytes);
  ff_loader_close(l);
}

static void close_is_prompt_while_the_device_is_busy(void **state) {
  (void)state;
  ff_config c =
      config("decode(dct_scale=false) | resize(size=(256, 256)) | aug_mix | normalize(mean=imagenet, "
             "std=imagenet)",
             "emu:0", 2);
  c.prefetch = 4;
  ff_loader *l = open_with(&c, "1.0", NULL);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_batch_release(b);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ff_loader_close(l);
  /* the three microbatches on the device finish, no more (ASan: emulated kernels twice as slow) */
  const char *san = getenv("FF_TEST_SANITIZER");
  double dt = seconds_since(&t0), limit = under_tsan() ? 30.0 : san && *san ? 12.0 : 6.0; /* generous: a loaded 2-core machine */
  if (dt >= limit) fail_msg("ff_loader_close took %.3f s", dt);
}

static void active_thread_cap_parks_workers(void **state) {
  (void)state;
  ff_config c = config(NHWC_PIPELINE, "cpu", 2);
  run ref = epoch_of(&c, NULL, NULL);
  ff_loader *l = open_with(&c, NULL, NULL);
  ff__loader_set_active_threads(l, 1, 0);
  run r = consume(l, 0, 0);
  assert_int_equal(r.stats.num_threads, 1);
  ff__loader_set_active_threads(l, 99, 0); /* clamped to the threads there are */
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_int_equal(s.num_threads, 2);
  assert_same_batches(&ref, &r, "2 threads vs a cap of 1");
  ff_loader_close(l);
  free(ref.bytes), free(r.bytes);
}

static void the_trace_is_a_json_array_with_every_track(void **state) {
  (void)state;
  ff_config c = config(HEAVY_PIPELINE, "emu:0", 2);
  ff_loader *l = open_with(&c, "0.5", NULL);
  char path[1100];
  snprintf(path, sizeof path, "%s/trace.json", ff_test_dir("offload-trace"));
  assert_int_equal(ff_loader_trace_write(l, path, NULL, NULL), FF_EINVAL); /* not started */
  assert_int_equal(ff_loader_trace_start(l, 40), FF_OK);
  run r = consume(l, 6, 0);
  size_t events = 0, dropped = 0;
  assert_int_equal(ff_loader_trace_write(l, path, &events, &dropped), FF_OK);
  assert_int_equal(events, 40);
  assert_true(dropped > 0);
  size_t n;
  char *text = (char *)ff_test_read(path, &n);
  text = realloc(text, n + 1);
  text[n] = 0;
  assert_true(text[0] == '[' && strstr(text, "]\n") == text + n - 2);
  assert_non_null(strstr(text, "capped"));
  assert_non_null(strstr(text, "\"CPU worker 1\""));
  assert_non_null(strstr(text, "\"name\": \"decode\""));
  free(text), free(r.bytes);
  ff_loader_close(l);
}

/* ---- whole-sample offload: the device decodes ---- */

static ff_config device_decode_config(const char *pipeline, const char *device, int threads) {
  ff_config c = config(pipeline, device, threads);
  c.device_decode = FF_DEVICE_DECODE_ON;
  return c;
}

static void check_whole_sample_offload_is_bit_identical(const char *pipeline) {
  ff_config c = config(pipeline, "cpu", 1);
  run ref = epoch_of(&c, NULL, NULL);
  c = device_decode_config(pipeline, "emu:0", 1);
  run all = epoch_of(&c, "1.0", NULL);
  assert_int_equal(all.stats.placement_samples[FF_PLACEMENT_DEVICE], all.stats.samples);
  assert_int_equal(all.stats.device_decode_fallbacks, 0);
  assert_int_equal(all.stats.decode_ns, 0); /* no CPU decode at all */
  assert_same_batches(&ref, &all, "cpu vs emu:0 decoding every sample");
  c.num_threads = 2;
  run half = epoch_of(&c, "0.5", NULL);
  assert_true(half.stats.placement_samples[FF_PLACEMENT_DEVICE] > 0);
  assert_true(half.stats.placement_samples[FF_PLACEMENT_CPU] > 0);
  assert_same_batches(&ref, &half, "cpu vs emu:0 decoding half the samples, 2 threads");
  free(ref.bytes), free(all.bytes), free(half.bytes);
}

static void whole_sample_offload_is_bit_identical_nchw(void **state) {
  (void)state;
  check_whole_sample_offload_is_bit_identical(HEAVY_PIPELINE);
}

static void whole_sample_offload_is_bit_identical_nhwc(void **state) {
  (void)state;
  check_whole_sample_offload_is_bit_identical(NHWC_PIPELINE);
}

/* Transcodes the baseline JPEG at path to a progressive one (the same
 * coefficients), in place. */
static void make_progressive(const char *path) {
  size_t n;
  uint8_t *in = ff_test_read(path, &n);
  struct jpeg_decompress_struct d;
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr e1, e2;
  d.err = jpeg_std_error(&e1);
  c.err = jpeg_std_error(&e2);
  jpeg_create_decompress(&d);
  jpeg_create_compress(&c);
  jpeg_mem_src(&d, in, (unsigned long)n);
  jpeg_read_header(&d, TRUE);
  jvirt_barray_ptr *coefs = jpeg_read_coefficients(&d);
  unsigned char *out = NULL;
  unsigned long out_n = 0;
  jpeg_mem_dest(&c, &out, &out_n);
  jpeg_copy_critical_parameters(&d, &c);
  jpeg_simple_progression(&c);
  jpeg_write_coefficients(&c, coefs);
  jpeg_finish_compress(&c);
  jpeg_finish_decompress(&d);
  jpeg_destroy_compress(&c);
  jpeg_destroy_decompress(&d);
  ff_test_write(path, out, out_n);
  free(out), free(in);
}

/* Replaces the JPEG at path by a PNG of its pixels (path keeps its name:
 * the decoder goes by the magic bytes). */
static void make_png(const char *path, const char *png_path) {
  size_t n;
  uint8_t *in = ff_test_read(path, &n);
  ff__buf px = {0};
  ff__image img;
  ff__decode_req req = {0};
  assert_int_equal(ff__codec_decode(in, n, path, &req, &px, &img, NULL), FF_OK);
  uint8_t *rows = malloc((size_t)img.width * img.height * 3);
  for (int y = 0; y < img.height; y++) memcpy(rows + (size_t)y * img.width * 3, img.data + y * img.stride, (size_t)img.width * 3);
  spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  struct spng_ihdr ihdr = {.width = (uint32_t)img.width, .height = (uint32_t)img.height, .bit_depth = 8,
                           .color_type = SPNG_COLOR_TYPE_TRUECOLOR};
  spng_set_ihdr(ctx, &ihdr);
  assert_int_equal(spng_encode_image(ctx, rows, (size_t)img.width * img.height * 3, SPNG_FMT_PNG,
                                     SPNG_ENCODE_FINALIZE), 0);
  size_t png_n;
  int rc;
  void *png = spng_get_png_buffer(ctx, &png_n, &rc);
  assert_non_null(png);
  remove(path);
  ff_test_write(png_path, png, png_n);
  free(png), spng_ctx_free(ctx), free(rows), ff__buf_free(&px), free(in);
}

/* imagefolder of 48 images in 2 classes: every other one a PNG, every
 * fifth JPEG progressive. */
static const char *mixed_source(void) {
  static char src[2048];
  char dir[1024], path[2048], png[2048];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("offload-mixed"));
  ff_test_make_imagefolder(dir, 2, 24, 60, 160, 9);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 24; i++) {
      ff_test_imagefolder_path(dir, k, i, path, sizeof path);
      if (i % 2) {
        snprintf(png, sizeof png, "%.*s.png", (int)(strlen(path) - 4), path);
        make_png(path, png);
      } else if (i % 5 == 0) {
        make_progressive(path);
      }
    }
  snprintf(src, sizeof src, "imagefolder:%s", dir);
  return src;
}

static void three_placements_mix_in_one_batch_and_change_mid_run(void **state) {
  (void)state;
  const char *src = mixed_source();
  ff_config c = config(NHWC_PIPELINE, "cpu", 2);
  c.source = src;
  run ref = epoch_of(&c, NULL, NULL);
  c = device_decode_config(NHWC_PIPELINE, "emu:0", 2);
  c.source = src;
  ff_loader *l = open_with(&c, "0.5", NULL);
  run r = {0};
  for (int part = 0; part < 3; part++) { /* 6 batches an epoch: 2 at each share */
    ff__loader_force_device_share(l, part == 0 ? 0.5 : part == 1 ? 1.0 : 0.25);
    run p = consume(l, 2, 0);
    add(&r, p.bytes, p.len);
    r.mixed_batches += p.mixed_batches;
    r.stats = p.stats;
    free(p.bytes);
  }
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_END);
  ff_loader_close(l);
  assert_true(r.mixed_batches > 0);
  for (int p = 0; p < FF_PLACEMENT_REMOTE; p++) assert_true(r.stats.placement_samples[p] > 0);
  /* the first epoch's PNGs are found out at the worker: the CPU decodes them */
  assert_true(r.stats.device_decode_fallbacks > 0);
  assert_same_batches(&ref, &r, "cpu vs emu:0 with the three placements, shares 0.5, 1, 0.25");
  free(ref.bytes), free(r.bytes);
}

static void a_device_sample_costs_the_cpu_only_its_read(void **state) {
  (void)state;
  ff_config c = device_decode_config(HEAVY_PIPELINE, "emu:0", 1);
  ff_loader *l = open_with(&c, NULL, NULL);
  run r = consume(l, 30, 0);
  ff_loader_close(l);
  const uint64_t *n = r.stats.placement_samples, *cpu = r.stats.placement_cpu_ns, *rd = r.stats.placement_read_ns;
  assert_true(r.stats.offload_share > 0 || n[FF_PLACEMENT_DEVICE] > 0); /* the consumer outpaces one thread */
  assert_true(n[FF_PLACEMENT_DEVICE] > 0);
  assert_true(rd[FF_PLACEMENT_DEVICE] > 0);
  /* no CPU decode, no CPU ops: the read, and the feeder's share of the
   * decode call, which on emu only queues the work) */
  uint64_t host = cpu[FF_PLACEMENT_DEVICE] - rd[FF_PLACEMENT_DEVICE];
  assert_true(cpu[FF_PLACEMENT_DEVICE] >= rd[FF_PLACEMENT_DEVICE]);
  assert_true(r.stats.decode_ns == 0 || n[FF_PLACEMENT_CPU] + n[FF_PLACEMENT_SPLIT] > 0);
  assert_true(cpu[FF_PLACEMENT_CPU] > rd[FF_PLACEMENT_CPU] && n[FF_PLACEMENT_CPU] > 0);
  /* per sample, what a device sample leaves on the CPU besides its read is a
   * small part of what a CPU sample spends decoding and running its ops
   * (about 1% here; a fourth leaves room for a loaded machine) */
  double device_host = (double)host / (double)n[FF_PLACEMENT_DEVICE];
  double cpu_work = (double)(cpu[FF_PLACEMENT_CPU] - rd[FF_PLACEMENT_CPU]) / (double)n[FF_PLACEMENT_CPU];
  if (device_host * 4 > cpu_work)
    fail_msg("a device sample leaves %.0f ns besides its read on the CPU, a CPU sample's decode and ops take %.0f ns",
             device_host, cpu_work);
  assert_string_equal(r.decoder, "libjpeg-turbo");
  print_message("CPU us per sample: cpu %.1f (read %.1f), device %.1f (read %.1f, feeder %.1f)\n",
                cpu[0] * 1e-3 / (double)n[0], rd[0] * 1e-3 / (double)n[0], cpu[2] * 1e-3 / (double)n[2],
                rd[2] * 1e-3 / (double)n[2], host * 1e-3 / (double)n[2]);
  free(r.bytes);
}

/* 12 files, no shuffle, batches of 4: 02 a PNG, 05 progressive, 09 corrupt
 * entropy data (its first half and an end marker), the rest baseline. */
static const char *odd_source(void) {
  static char src[2048];
  char dir[1024], path[2048], png[2048];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("offload-odd"));
  snprintf(path, sizeof path, "%s/a", dir);
  ff_test_mkdir(path);
  for (int i = 0; i < 12; i++) {
    snprintf(path, sizeof path, "%s/a/%02d.jpg", dir, i);
    ff_test_write_jpeg(path, 64 + 8 * i, 48 + 4 * i, 90, 0, (unsigned)i + 1);
  }
  snprintf(path, sizeof path, "%s/a/02.jpg", dir);
  snprintf(png, sizeof png, "%s/a/02.png", dir);
  make_png(path, png);
  snprintf(path, sizeof path, "%s/a/05.jpg", dir);
  make_progressive(path);
  snprintf(path, sizeof path, "%s/a/09.jpg", dir);
  size_t n;
  uint8_t *jpg = ff_test_read(path, &n);
  ff_test_write(path, jpg, n / 2); /* cut mid-scan: truncated (an end marker there would be repaired damage) */
  free(jpg);
  snprintf(src, sizeof src, "imagefolder:%s", dir);
  return src;
}

#define FULL_DECODE_PIPELINE "decode | resize(size=(16, 16))" /* decodes every row */

/* Each batch's status and message, or its bytes, for one epoch. */
static void epoch_outcomes(ff_loader *l, char out[4][512]) {
  for (int i = 0; i < 4; i++) {
    ff_batch *b;
    ff_status st = ff_loader_next(l, &b);
    if (st == FF_END) {
      snprintf(out[i], 512, "end");
      continue;
    }
    if (st) {
      snprintf(out[i], 512, "%d %s", st, ff_loader_errmsg(l));
      continue;
    }
    ff_tensor t;
    ff_batch_images(b, &t);
    uint32_t h = 2166136261u; /* FNV-1a of the pixels */
    for (size_t k = 0; k < ff_batch_size(b) * 16 * 16 * 3; k++) h = (h ^ ((uint8_t *)t.data)[k]) * 16777619u;
    snprintf(out[i], 512, "ok %zu %08x", ff_batch_size(b), h);
    ff_batch_release(b);
  }
}

static void odd_files_sent_to_the_device_decoder_fare_as_on_the_cpu(void **state) {
  (void)state;
  const char *src = odd_source();
  for (int skip = 0; skip < 2; skip++) {
    char want[4][512], got[4][512];
    ff_config c = config(FULL_DECODE_PIPELINE, "cpu", 2);
    c.source = src, c.shuffle = 0, c.batch_size = 4, c.on_error = skip ? FF_ON_ERROR_SKIP : FF_ON_ERROR_RAISE;
    ff_loader *l = open_with(&c, NULL, NULL);
    epoch_outcomes(l, want);
    ff_loader_close(l);
    c.device = "emu:0", c.device_decode = FF_DEVICE_DECODE_ON;
    l = open_with(&c, "1.0", NULL);
    epoch_outcomes(l, got);
    ff_stats s;
    ff_loader_stats(l, &s);
    if (skip) {
      assert_int_equal(s.skipped, 1);
      assert_non_null(strstr(ff_loader_skipped(l, 0), "09.jpg"));
      /* the PNG and the corrupt file went back to the CPU decoder; the progressive one did not */
      assert_int_equal(s.device_decode_fallbacks, 2);
      assert_int_equal(s.placement_samples[FF_PLACEMENT_DEVICE], 10);
      assert_int_equal(s.placement_samples[FF_PLACEMENT_SPLIT], 1);
    }
    ff_loader_close(l);
    for (int i = 0; i < 4; i++) assert_string_equal(got[i], want[i]);
    assert_non_null(strstr(want[2], skip ? "ok 3" : "09.jpg"));
  }
}

static void an_oversized_image_is_refused_before_any_device_memory(void **state) {
  (void)state;
  char dir[1024], path[2048], src[2048];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("offload-bomb"));
  snprintf(path, sizeof path, "%s/a", dir);
  ff_test_mkdir(path);
  for (int i = 0; i < 8; i++) { /* 40x40 files whose headers claim 20000x20000 */
    snprintf(path, sizeof path, "%s/a/%d.jpg", dir, i);
    ff_test_write_jpeg(path, 40, 40, 90, 0, (unsigned)i + 1);
    size_t n;
    uint8_t *jpg = ff_test_read(path, &n);
    for (size_t k = 0; k + 8 < n; k++)
      if (jpg[k] == 0xFF && jpg[k + 1] == 0xC0) {
        jpg[k + 5] = jpg[k + 7] = 0x4E, jpg[k + 6] = jpg[k + 8] = 0x20;
        break;
      }
    ff_test_write(path, jpg, n);
    free(jpg);
  }
  snprintf(src, sizeof src, "imagefolder:%s", dir);
  ff_config c = device_decode_config(HEAVY_PIPELINE, "emu:0", 2);
  c.source = src, c.on_error = FF_ON_ERROR_SKIP, c.shuffle = 0;
  ff_loader *l = open_with(&c, "1.0", NULL);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_END);
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_int_equal(s.skipped, 8);
  assert_non_null(strstr(ff_loader_skipped(l, 0), "20000x20000"));
  assert_non_null(strstr(ff_loader_skipped(l, 0), "max_image_pixels"));
  assert_int_equal(s.device_pool_peak_bytes, 0); /* no decode target, no output tensor */
  ff_loader_close(l);
}

/* ---- the determinism contract ---- */

typedef struct pixels_and_draws {
  uint8_t *images;
  size_t images_len;
  int64_t ids[256]; /* labels and sample indices */
  size_t ids_len;
  char decoder[64], note[256]; /* ff_stats' strings, which live as long as the loader */
} pixels_and_draws;

#define PLAIN_PIPELINE "decode | random_resized_crop(size=(40, 36)) | random_horizontal_flip"

static pixels_and_draws nhwc_epoch(const ff_config *c, const char *share, size_t sample_bytes, ff_stats *stats) {
  ff_loader *l = open_with(c, share, NULL);
  pixels_and_draws r = {0};
  ff_batch *b;
  while (ff_loader_next(l, &b) == FF_OK) {
    ff_tensor img, lab;
    ff_batch_images(b, &img);
    ff_batch_labels(b, &lab);
    size_t n = ff_batch_size(b), bytes = n * sample_bytes;
    r.images = realloc(r.images, r.images_len + bytes);
    memcpy(r.images + r.images_len, img.data, bytes);
    r.images_len += bytes;
    for (size_t i = 0; i < n && r.ids_len + 2 <= 256; i++) {
      r.ids[r.ids_len++] = ((int64_t *)lab.data)[i];
      r.ids[r.ids_len++] = ff_batch_sample_indices(b)[i];
    }
    ff_batch_release(b);
  }
  ff_loader_stats(l, stats);
  snprintf(r.decoder, sizeof r.decoder, "%s", stats->device_decoder);
  snprintf(r.note, sizeof r.note, "%s", stats->device_decoder_note);
  stats->device_decoder = stats->device_decoder_note = stats->device = NULL;
  ff_loader_close(l);
  return r;
}

static void an_nvjpeg_like_device_decode_differs_only_in_pixels(void **state) {
  (void)state;
  ff_stats s;
  ff_config c = config(PLAIN_PIPELINE, "cpu", 2);
  pixels_and_draws ref = nhwc_epoch(&c, NULL, 40 * 36 * 3, &s);
  c = device_decode_config(PLAIN_PIPELINE, "emu:0?decode=nvjpeg", 2);
  pixels_and_draws dev = nhwc_epoch(&c, "1.0", 40 * 36 * 3, &s);
  assert_string_equal(dev.decoder, "nvjpeg-like");
  assert_int_equal(s.placement_samples[FF_PLACEMENT_DEVICE], s.samples);
  /* exact in samples, labels and draws ... */
  assert_int_equal(dev.ids_len, ref.ids_len);
  assert_memory_equal(dev.ids, ref.ids, ref.ids_len * sizeof *ref.ids);
  assert_int_equal(dev.images_len, ref.images_len);
  /* ... not in pixels: the documented difference, a few levels on average */
  uint64_t sum = 0;
  int max = 0;
  for (size_t i = 0; i < ref.images_len; i++) {
    int d = abs((int)dev.images[i] - (int)ref.images[i]);
    sum += (uint64_t)d, max = d > max ? d : max;
  }
  double mean = (double)sum / (double)ref.images_len;
  print_message("nvjpeg-like vs libjpeg-turbo: mean |diff| %.3f, max %d\n", mean, max);
  assert_true(max > 0);
  assert_true(mean > 0.05 && mean < 4.0);
  /* deterministic=1 and device_decode=off keep the bits, whatever the device's decoder */
  for (int k = 0; k < 2; k++) {
    c.deterministic = k == 0, c.device_decode = k == 0 ? FF_DEVICE_DECODE_ON : FF_DEVICE_DECODE_OFF;
    pixels_and_draws same = nhwc_epoch(&c, "1.0", 40 * 36 * 3, &s);
    assert_string_equal(same.decoder, "none");
    assert_string_equal(same.note, k == 0 ? "deterministic=1" : "device_decode=off");
    assert_int_equal(s.placement_samples[FF_PLACEMENT_DEVICE], 0);
    assert_int_equal(s.placement_samples[FF_PLACEMENT_SPLIT], s.samples);
    assert_int_equal(same.images_len, ref.images_len);
    assert_memory_equal(same.images, ref.images, ref.images_len);
    free(same.images);
  }
  free(ref.images), free(dev.images);
}

/* Mean and largest absolute difference, and PSNR (dB), of two uint8 buffers. */
static void difference(const uint8_t *a, const uint8_t *b, size_t n, double *mean, int *max, double *psnr) {
  double sum = 0, sq = 0;
  *max = 0;
  for (size_t i = 0; i < n; i++) {
    int d = abs((int)a[i] - (int)b[i]);
    sum += d, sq += (double)d * d, *max = d > *max ? d : *max;
  }
  *mean = sum / (double)n;
  *psnr = sq > 0 ? 10 * log10(255.0 * 255.0 / (sq / (double)n)) : INFINITY;
}

/* On a GPU with nvJPEG: the device decode of FF_DEMO_DATA (or this test's
 * images), a 64x64 centre region, against the CPU's (libjpeg-turbo, the
 * decode Pillow and torchvision use): the documented difference, measured. */
static void nvjpeg_decode_on_cuda_differs_as_documented(void **state) {
  (void)state;
  const char *demo = getenv("FF_DEMO_DATA");
  char src[2048];
  snprintf(src, sizeof src, "imagefolder:%s", demo ? demo : "");
  ff_config c = device_decode_config("decode(dct_scale=false) | center_crop(size=(64, 64))", "cuda:0", 2);
  if (demo) c.source = src;
  ff_loader *l = NULL;
  ff_stats s = {.device_decoder = "none", .device_decoder_note = "out of memory"};
  if (ff_loader_open(&c, &l) == FF_OK) ff_loader_stats(l, &s);
  if (!l || ff_loader_errmsg(l)[0] || strcmp(s.device_decoder, "none") == 0) {
    print_message("skipped: %s\n", l && ff_loader_errmsg(l)[0] ? ff_loader_errmsg(l) : s.device_decoder_note);
    ff_loader_close(l);
    skip();
  }
  ff_loader_close(l);
  c.device = "cpu";
  pixels_and_draws ref = nhwc_epoch(&c, NULL, 64 * 64 * 3, &s);
  c.device = "cuda:0";
  pixels_and_draws dev = nhwc_epoch(&c, "1.0", 64 * 64 * 3, &s);
  assert_int_equal(dev.images_len, ref.images_len);
  assert_memory_equal(dev.ids, ref.ids, ref.ids_len * sizeof *ref.ids);
  double mean, psnr;
  int max;
  difference(dev.images, ref.images, ref.images_len, &mean, &max, &psnr);
  print_message("%s vs libjpeg-turbo on %llu samples (%llu decoded on the device, %llu fallbacks): mean |diff| "
                "%.3f, max %d, PSNR %.1f dB\n", dev.decoder, (unsigned long long)s.samples,
                (unsigned long long)s.placement_samples[FF_PLACEMENT_DEVICE],
                (unsigned long long)s.device_decode_fallbacks, mean, max, psnr);
  assert_true(s.placement_samples[FF_PLACEMENT_DEVICE] > 0);
  assert_true(psnr > 30); /* a decode of the same image, not another image */
  free(ref.images), free(dev.images);
}

static void auto_device_decode_is_off_on_emu(void **state) {
  (void)state;
  ff_config c = config(PLAIN_PIPELINE, "emu:0", 1);
  ff_loader *l = open_with(&c, NULL, NULL);
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_string_equal(s.device_decoder, "none");
  assert_non_null(strstr(s.device_decoder_note, "CUDA"));
  ff_loader_close(l);
  c.device = "cpu";
  l = open_with(&c, NULL, NULL);
  ff_loader_stats(l, &s);
  assert_string_equal(s.device_decoder, "none");
  ff_loader_close(l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fast_consumer_gets_a_device_share_on_emu),
      cmocka_unit_test(fast_consumer_waits_less_with_cuda),
      cmocka_unit_test(slow_consumer_gets_no_device_share),
      cmocka_unit_test(batches_do_not_depend_on_placement_nchw),
      cmocka_unit_test(batches_do_not_depend_on_placement_nhwc),
      cmocka_unit_test(batches_with_the_transforms_do_not_depend_on_placement),
      cmocka_unit_test(second_epoch_split_by_plan_keeps_batches_identical),
      cmocka_unit_test(share_changed_mid_run_keeps_batches_identical),
      cmocka_unit_test(a_budget_too_small_for_any_microbatch_keeps_everything_on_the_cpu),
      cmocka_unit_test(refused_device_memory_falls_back_to_the_cpu),
      cmocka_unit_test(a_failed_kernel_falls_back_and_the_device_goes_on),
      cmocka_unit_test(an_allocation_device_error_falls_back_without_backing_off),
      cmocka_unit_test(the_consumer_threads_current_device_is_left_as_it_was),
      cmocka_unit_test(pinned_batches_come_from_the_devices_host_allocator),
      cmocka_unit_test(a_held_pinned_batch_outlives_close),
      cmocka_unit_test(a_named_device_that_cannot_open_fails_the_open),
      cmocka_unit_test(auto_falls_back_to_the_cpu_quietly),
      cmocka_unit_test(close_is_prompt_while_the_device_is_busy),
      cmocka_unit_test(active_thread_cap_parks_workers),
      cmocka_unit_test(the_trace_is_a_json_array_with_every_track),
      cmocka_unit_test(whole_sample_offload_is_bit_identical_nchw),
      cmocka_unit_test(whole_sample_offload_is_bit_identical_nhwc),
      cmocka_unit_test(three_placements_mix_in_one_batch_and_change_mid_run),
      cmocka_unit_test(a_device_sample_costs_the_cpu_only_its_read),
      cmocka_unit_test(odd_files_sent_to_the_device_decoder_fare_as_on_the_cpu),
      cmocka_unit_test(an_oversized_image_is_refused_before_any_device_memory),
      cmocka_unit_test(an_nvjpeg_like_device_decode_differs_only_in_pixels),
      cmocka_unit_test(auto_device_decode_is_off_on_emu),
      cmocka_unit_test(nvjpeg_decode_on_cuda_differs_as_documented),
  };
  return cmocka_run_group_tests(tests, make_dataset, NULL);
}
