/* test_output.c — batches handed out in a device's memory
 * (ff_config.output_device) on the emulated device: the bytes equal the host
 * batches' whatever share the device prepared; the images are the device's
 * memory and the host images the device's pinned memory; a consumer's
 * stream waits for a batch's ready event; a held batch's memory is not
 * reused, and released after a consumer's stream it is reused only after
 * that stream's work (the upload waits for the release event); bad devices
 * fail the open with a message. The caller's allocator hook gets every
 * device allocation back, and its refusal sends the work to the CPU.
 * Direct aggregation: with the output on the offload device no sample the
 * device prepared comes down to the host (the emulator counts no download)
 * and the batches stay bit-identical, skipped samples included (their
 * gaps close on the device); with host output a microbatch comes down into
 * the pinned batch in one call. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/device_impl.h"
#include "exec/emu_probe.h"
#include "fixtures.h"
#include "fusionflow/fusionflow.h"
#include "loader/loader_internal.h"

#define PIPELINE                                                                                             \
  "decode | random_resized_crop(size=40) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"

static char source[2048];

static int make_dataset(void **state) {
  (void)state;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("output-data"));
  ff_test_make_imagefolder(dir, 3, 12, 60, 160, 9);
  snprintf(source, sizeof source, "imagefolder:%s", dir);
  return 0;
}

static ff_config config(const char *device, const char *output_device) {
  ff_config c;
  ff_config_init(&c);
  c.source = source;
  c.pipeline = PIPELINE;
  c.batch_size = 8;
  c.seed = 11;
  c.num_threads = 2;
  c.rank = 0;
  c.world_size = 1;
  c.device = device;
  c.output_device = output_device;
  return c;
}

static ff_loader *open_or_fail(const ff_config *c, const char *share) {
  if (share) setenv("FF_FORCE_DEVICE_SHARE", share, 1);
  ff_loader *l = NULL;
  ff_status st = ff_loader_open(c, &l);
  unsetenv("FF_FORCE_DEVICE_SHARE");
  if (st) fail_msg("ff_loader_open: %s", ff_loader_errmsg(l));
  return l;
}

static size_t image_bytes(const ff_batch *b) {
  ff_tensor t;
  ff_batch_images(b, &t);
  size_t elem = t.dtype == FF_FLOAT32 ? 4 : t.dtype == FF_BFLOAT16 || t.dtype == FF_FLOAT16 ? 2 : 1;
  return (size_t)(t.shape[0] * t.shape[1] * t.shape[2] * t.shape[3]) * elem;
}

/* One epoch's images, as the host sees them once each batch is ready. */
static uint8_t *epoch_images(ff_loader *l, size_t *len) {
  uint8_t *all = NULL;
  *len = 0;
  ff_batch *b;
  ff_status st;
  while ((st = ff_loader_next(l, &b)) != FF_END) {
    if (st) fail_msg("ff_loader_next: %s", ff_loader_errmsg(l));
    ff_tensor t;
    ff_batch_images(b, &t);
    int dev_type = -1, dev_id = -1;
    ff_batch_dlpack_device(b, &dev_type, &dev_id);
    assert_int_equal(dev_type, 1); /* kDLCPU: emu's device memory is host memory, as is a host batch */
    assert_int_equal(dev_id, 0);
    if (l->out_dev) {
      assert_string_equal(ff_batch_device(b), l->out_device_name);
      assert_non_null(ff_batch_stream(b));
      assert_int_equal(ff_batch_sync(b), FF_OK);
      assert_ptr_not_equal(t.data, b->images);                /* the device's memory, not the host batch */
      assert_true(ff__emu_host_owns(l->host_dev, b->images)); /* which went up from pinned memory */
    } else {
      assert_string_equal(ff_batch_device(b), "cpu");
      assert_null(ff_batch_stream(b));
      assert_null(ff_batch_event(b));
    }
    size_t n = image_bytes(b);
    all = realloc(all, *len + n);
    assert_non_null(all);
    memcpy(all + *len, t.data, n);
    *len += n;
    ff_batch_release(b);
  }
  return all;
}

/* One epoch on the CPU alone with host output: the reference. */
static uint8_t *cpu_epoch(size_t *len) {
  ff_config c = config("cpu", "cpu");
  ff_loader *l = open_or_fail(&c, NULL);
  uint8_t *ref = epoch_images(l, len);
  ff_loader_close(l);
  return ref;
}

static void device_output_batches_equal_host_output_batches(void **state) {
  (void)state;
  size_t ref_len, len;
  uint8_t *ref = cpu_epoch(&ref_len);
  ff_config c;
  ff_loader *l;
  const char *devices[] = {"cpu", "emu:0"};
  for (int k = 0; k < 2; k++) {
    c = config(devices[k], "emu:1?delay=50");
    l = open_or_fail(&c, k ? "0.5" : NULL);
    assert_non_null(l->out_dev);
    uint8_t *got = epoch_images(l, &len);
    ff_loader_close(l);
    assert_int_equal(len, ref_len);
    assert_memory_equal(got, ref, len);
    free(got);
  }
  free(ref);
}

static void a_held_batch_is_not_reused_and_a_release_after_a_stream_orders_the_reuse(void **state) {
  (void)state;
  ff_config c = config("cpu", "emu:0?delay=100");
  c.prefetch = 1;   /* a ring of two: while a is held, one entry goes round */
  c.batch_size = 4; /* 9 batches */
  ff_loader *l = open_or_fail(&c, NULL);
  ff__dstream *consumer;
  assert_int_equal(ff__device_stream_create(l->out_dev, &consumer, NULL), FF_OK);
  void *handle = ff__device_stream_handle(l->out_dev, consumer);

  ff_batch *a, *b;
  assert_int_equal(ff_loader_next(l, &a), FF_OK);
  assert_int_equal(ff_batch_wait_on(a, handle), FF_OK);
  assert_int_equal(ff__emu_waited(l->out_dev, consumer, a->ready), 1);
  assert_int_equal(ff__device_event_wait(l->out_dev, a->ready, NULL), FF_OK);
  ff_tensor ta;
  ff_batch_images(a, &ta);
  size_t n = image_bytes(a);
  uint8_t *kept = malloc(n);
  memcpy(kept, ta.data, n);
  for (int i = 0; i < 3; i++) { /* with a held, only the other entry goes round */
    assert_int_equal(ff_loader_next(l, &b), FF_OK);
    ff_tensor tb;
    ff_batch_images(b, &tb);
    assert_ptr_not_equal(tb.data, ta.data);
    assert_int_equal(ff_batch_wait_on(b, handle), FF_OK);
    ff_batch_release_after(b, handle);
    ff__device_synchronize(l->out_dev);
    assert_memory_equal(ta.data, kept, n);
  }
  ff_batch_release_after(a, handle);
  int reused = 0; /* a's entry comes round again: its upload waited for the release */
  for (int i = 0; i < 4 && !reused; i++) {
    assert_int_equal(ff_loader_next(l, &b), FF_OK);
    reused = b == a;
    if (!reused) ff_batch_release_after(b, handle);
  }
  assert_true(reused);
  assert_int_equal(ff__emu_waited(l->out_dev, l->out_stream, a->released), 1);
  ff_batch_release(b);
  ff__device_stream_destroy(l->out_dev, consumer);
  ff_loader_close(l);
  free(kept);
}

static void an_output_device_that_cannot_open_fails_the_open(void **state) {
  (void)state;
  const char *names[] = {"tpu:0", "auto", "cuda:9", "emu:0?mem=1K"};
  ff_status want[] = {FF_EINVAL, FF_EINVAL, FF_EDEVICE, FF_EDEVICE};
  for (int k = 0; k < 4; k++) {
    ff_config c = config("cpu", names[k]);
    ff_loader *l = NULL;
    assert_int_equal(ff_loader_open(&c, &l), want[k]);
    if (!strstr(ff_loader_errmsg(l), "output_device")) fail_msg("%s: %s", names[k], ff_loader_errmsg(l));
    ff_loader_close(l);
  }
}

/* ---- the caller's allocator ---- */

typedef struct hook {
  int refuse;
  unsigned allocs, frees;
  size_t live_bytes;
} hook;

static int hook_alloc(void *ctx, size_t size_bytes, void *stream, void **out) {
  hook *h = ctx;
  assert_null(stream);
  if (h->refuse) return 1;
  *out = aligned_alloc(256, (size_bytes + 255) / 256 * 256); /* emu device memory is host memory */
  assert_non_null(*out);
  h->allocs++, h->live_bytes += size_bytes;
  return 0;
}

static void hook_free(void *ctx, void *ptr, size_t size_bytes, void *stream) {
  hook *h = ctx;
  assert_null(stream);
  h->frees++, h->live_bytes -= size_bytes;
  free(ptr);
}

static uint8_t *hooked_epoch(hook *h, const char *output_device, size_t *len, ff_stats *stats) {
  ff_config c = config("emu:0", output_device);
  c.device_alloc = hook_alloc, c.device_free = hook_free, c.device_alloc_ctx = h;
  ff_loader *l = open_or_fail(&c, "1.0");
  uint8_t *bytes = epoch_images(l, len);
  ff_loader_stats(l, stats);
  ff__device_info info;
  assert_int_equal(ff__device_query(ff__offload_device(l->offload), &info, NULL), FF_OK);
  /* per ring entry: its device images, and under uint8 transport (a float pipeline) the staging and the
   * conversion's stage table */
  assert_int_equal(h->allocs, info.pool.raw_allocs + (l->out_dev ? 3u * (unsigned)l->ring_size : 0));
  ff_loader_close(l);
  return bytes;
}

static void the_allocator_hook_gets_every_device_allocation_and_its_refusal_goes_to_the_cpu(void **state) {
  (void)state;
  size_t ref_len, len;
  uint8_t *ref = cpu_epoch(&ref_len);

  hook h = {0};
  ff_stats s;
  uint8_t *got = hooked_epoch(&h, "emu:1", &len, &s);
  assert_true(h.allocs > 0);
  assert_true(s.device_samples > 0);
  assert_int_equal(h.frees, h.allocs); /* all back at close */
  assert_int_equal(h.live_bytes, 0);
  assert_int_equal(len, ref_len);
  assert_memory_equal(got, ref, len);
  free(got);

  h = (hook){.refuse = 1};
  got = hooked_epoch(&h, "cpu", &len, &s);
  assert_int_equal(h.allocs, 0);
  assert_int_equal(s.device_samples, 0);
  assert_true(s.device_fallbacks > 0); /* refused microbatches ran on the CPU */
  assert_int_equal(len, ref_len);
  assert_memory_equal(got, ref, len);
  free(got);
  free(ref);
}


/* One epoch on device `device` with output `output_device` at share 1,
 * checking each batch's transport figures; returns the images. */
typedef struct transport {
  size_t batches, device_samples, downloads, uploads, round_trips;
  uint64_t download_bytes, upload_bytes;
  ff__emu_counts counts; /* the offload device's, after the epoch */
} transport;

static uint8_t *transport_epoch(ff_config *c, size_t *len, transport *t) {
  ff_loader *l = open_or_fail(c, "1.0");
  uint8_t *all = NULL;
  *len = 0;
  *t = (transport){0};
  ff_batch *b;
  ff_status st;
  while ((st = ff_loader_next(l, &b)) != FF_END) {
    if (st) fail_msg("ff_loader_next: %s", ff_loader_errmsg(l));
    ff_batch_info bi;
    ff_batch_stats(b, &bi);
    t->batches++, t->device_samples += bi.device_samples;
    t->downloads += bi.device_downloads, t->download_bytes += bi.device_download_bytes;
    t->uploads += bi.output_uploads, t->upload_bytes += bi.output_upload_bytes;
    t->round_trips += bi.host_round_trips;
    assert_true(bi.device_downloads <= 1); /* one microbatch per batch: one call at most */
    ff_tensor tt;
    ff_batch_images(b, &tt);
    assert_int_equal(ff_batch_sync(b), FF_OK);
    size_t n = image_bytes(b);
    all = realloc(all, *len + n);
    assert_non_null(all);
    memcpy(all + *len, tt.data, n);
    *len += n;
    ff_batch_release(b);
  }
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_int_equal(s.device_download_bytes, t->download_bytes);
  assert_int_equal(s.output_upload_bytes, t->upload_bytes);
  assert_int_equal(s.host_round_trips, t->round_trips);
  assert_int_equal(ff__emu_probe(ff__offload_device(l->offload), &t->counts), FF_OK);
  ff_loader_close(l);
  return all;
}

static void device_samples_are_written_in_place_when_the_output_is_on_the_offload_device(void **state) {
  (void)state;
  size_t ref_len, len;
  uint8_t *ref = cpu_epoch(&ref_len);
  ff_config c;

  transport t;
  c = config("emu:0?delay=50", "emu:0");
  uint8_t *got = transport_epoch(&c, &len, &t);
  assert_true(t.device_samples > 0);
  assert_int_equal(t.downloads, 0); /* no host round trip: nothing came down */
  assert_int_equal(t.download_bytes, 0);
  assert_int_equal(t.round_trips, 0);
  assert_int_equal(t.counts.copy_calls[FF__COPY_D2H], 0);
  assert_int_equal(t.counts.copy_bytes[FF__COPY_D2H], 0);
  size_t sb = ref_len / 36; /* 36 samples of float32 */
  /* only what the host prepared went up, as uint8: a quarter of its float32 bytes */
  assert_int_equal(t.upload_bytes, (36 - t.device_samples) * sb / 4);
  assert_int_equal(t.counts.copy_bytes[FF__COPY_H2D] >= t.upload_bytes, 1);
  assert_int_equal(len, ref_len);
  assert_memory_equal(got, ref, len);
  free(got);

  c = config("emu:0", "emu:1"); /* another output device: the device's samples go down and up again */
  got = transport_epoch(&c, &len, &t);
  assert_true(t.device_samples > 0);
  assert_int_equal(t.round_trips, t.device_samples);
  assert_int_equal(t.download_bytes, t.device_samples * sb / 4); /* as uint8 too */
  assert_memory_equal(got, ref, len);
  free(got);
  free(ref);
}

static void host_output_takes_a_microbatch_down_in_one_call_into_the_pinned_batch(void **state) {
  (void)state;
  size_t ref_len, len;
  uint8_t *ref = cpu_epoch(&ref_len);
  transport t;
  ff_config c = config("emu:0?delay=20", "cpu");
  c.pin_memory = 1;
  uint8_t *got = transport_epoch(&c, &len, &t);
  size_t sb = ref_len / 36;
  assert_true(t.device_samples > 0);
  assert_int_equal(t.round_trips, 0);
  assert_int_equal(t.uploads, 0);
  assert_int_equal(t.download_bytes, t.device_samples * sb);
  /* one call per microbatch, not per slot (the emulator also counts batches of the next epoch made ahead) */
  assert_true(t.counts.copy_calls[FF__COPY_D2H] >= t.downloads);
  assert_true(t.counts.copy_calls[FF__COPY_D2H] <= t.downloads + (size_t)c.prefetch + 1);
  assert_true(t.downloads <= t.batches);
  assert_true(t.downloads < t.device_samples);
  assert_int_equal(len, ref_len);
  assert_memory_equal(got, ref, len);
  free(got);
  free(ref);
}

/* A dataset with unreadable files among the images: under on_error=skip
 * the in-place samples after a gap move down on the device. */
static void skipped_samples_close_their_gaps_in_the_device_batch(void **state) {
  (void)state;
  char dir[1024], path[1200], skip_source[1100];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("output-skip-data"));
  ff_test_make_imagefolder(dir, 2, 10, 60, 120, 5);
  const int bad[][2] = {{0, 1}, {0, 6}, {1, 3}};
  for (int i = 0; i < 3; i++)
    ff_test_write(ff_test_imagefolder_path(dir, bad[i][0], bad[i][1], path, sizeof path), "not an image", 12);
  snprintf(skip_source, sizeof skip_source, "imagefolder:%s", dir);
  ff_config c = config("cpu", "cpu");
  c.source = skip_source, c.on_error = FF_ON_ERROR_SKIP;
  ff_loader *l = open_or_fail(&c, NULL);
  size_t ref_len, len;
  uint8_t *ref = epoch_images(l, &ref_len);
  ff_loader_close(l);

  transport t;
  c.device = "emu:0?delay=30", c.output_device = "emu:0";
  uint8_t *got = transport_epoch(&c, &len, &t);
  assert_true(t.device_samples > 0);
  assert_int_equal(t.counts.copy_calls[FF__COPY_D2H], 0);
  assert_true(t.counts.copy_calls[FF__COPY_D2D] > 0); /* the gaps closed on the device */
  assert_int_equal(len, ref_len);
  assert_memory_equal(got, ref, len);
  free(got);
  free(ref);
}

/* The trainer's figure of spare device memory: at 0 (below the headroom)
 * the loader gives its cached device memory back (the emulator counts the
 * trim) and prepares on the CPU; at -1 the device's own figure is back. */
static void a_shrinking_trainer_figure_trims_the_pool_and_sends_work_to_the_cpu(void **state) {
  (void)state;
  ff_config c = config("emu:0", "cpu");
  c.device_headroom_bytes = (int64_t)1 << 30; /* of emu's 2 GiB: the pool keeps 1 GiB free for the trainer */
  c.batch_size = 4, c.prefetch = 1;           /* 9 batches in a ring of two */
  ff_loader *l = open_or_fail(&c, "1.0");
  ff__device *dev = ff__offload_device(l->offload);
  ff_batch *held[2];
  ff_batch_info bi;
  size_t before_figure = 0, after_figure = 0;
  for (int i = 0; i < 2; i++) { /* both held: the ring is full, the feeder idle, its memory cached */
    assert_int_equal(ff_loader_next(l, &held[i]), FF_OK);
    ff_batch_stats(held[i], &bi);
    before_figure += bi.device_samples;
  }
  ff__emu_counts before, after;
  assert_int_equal(ff__emu_probe(dev, &before), FF_OK);
  assert_int_equal(ff_loader_set_device_free_bytes(l, 0), FF_OK);
  assert_int_equal(ff__emu_probe(dev, &after), FF_OK);
  assert_true(after.trims > before.trims);
  ff__device_info info;
  assert_int_equal(ff__device_query(dev, &info, NULL), FF_OK);
  assert_true(info.pool.limit_bytes <= info.pool.reserved_bytes);
  ff_batch_release(held[0]), ff_batch_release(held[1]); /* the next splits see the figure */
  for (int i = 0; i < 4; i++) {
    ff_batch *b;
    assert_int_equal(ff_loader_next(l, &b), FF_OK);
    ff_batch_stats(b, &bi);
    after_figure += bi.device_samples;
    ff_batch_release(b);
  }
  assert_true(before_figure > 0);
  assert_int_equal(after_figure, 0);
  assert_int_equal(ff_loader_set_device_free_bytes(l, -1), FF_OK); /* the device's own figure again */
  assert_int_equal(ff__device_query(dev, &info, NULL), FF_OK);
  assert_true(info.pool.limit_bytes > info.pool.reserved_bytes);
  ff_loader_close(l);
  c = config("cpu", "cpu");
  l = open_or_fail(&c, NULL);
  assert_int_equal(ff_loader_set_device_free_bytes(l, 0), FF_OK); /* no device: nothing to do */
  ff_loader_close(l);
}

/* Output dtypes and memory formats: on the device (in place and from uint8
 * uploads) the bytes equal the host's; channels_last and planar uint8 are
 * the default layouts transposed. */
static uint8_t *format_epoch(const char *device, const char *output_device, const char *pipeline, int dtype,
                             int memory_format, size_t *len, ff_tensor *first) {
  ff_config c = config(device, output_device);
  c.pipeline = pipeline, c.output_dtype = dtype, c.memory_format = memory_format;
  ff_loader *l = open_or_fail(&c, strcmp(device, "cpu") ? "0.5" : NULL);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_batch_images(b, first);
  ff_batch_release(b);
  ff_loader_set_epoch(l, 0);
  uint8_t *all = epoch_images(l, len);
  ff_loader_close(l);
  return all;
}

static void output_dtypes_and_memory_formats_are_the_same_on_the_device_and_the_host(void **state) {
  (void)state;
  const char *u8_pipe = "decode | random_resized_crop(size=40) | random_horizontal_flip";
  struct {
    const char *pipe;
    int dtype, format, elem, want_dtype;
  } cases[] = {
      {PIPELINE, FF_OUTPUT_BFLOAT16, FF_MEMORY_FORMAT_AUTO, 2, FF_BFLOAT16},
      {PIPELINE, FF_OUTPUT_FLOAT16, FF_MEMORY_FORMAT_CHANNELS_LAST, 2, FF_FLOAT16},
      {PIPELINE, FF_OUTPUT_FLOAT32, FF_MEMORY_FORMAT_CHANNELS_LAST, 4, FF_FLOAT32},
      {u8_pipe, FF_OUTPUT_UINT8, FF_MEMORY_FORMAT_CONTIGUOUS, 1, FF_UINT8},
  };
  for (int k = 0; k < 4; k++) {
    size_t ref_len, len, dlen;
    ff_tensor t, dt, ft;
    uint8_t *ref = format_epoch("cpu", "cpu", cases[k].pipe, FF_OUTPUT_DTYPE_AUTO, FF_MEMORY_FORMAT_AUTO, &ref_len, &dt);
    uint8_t *host = format_epoch("cpu", "cpu", cases[k].pipe, cases[k].dtype, cases[k].format, &len, &t);
    assert_int_equal(t.dtype, cases[k].want_dtype);
    assert_int_equal(t.shape[1], 3); /* (N, 3, H, W) in every one of these */
    int64_t h = t.shape[2], w = t.shape[3], plane = h * w;
    if (cases[k].format == FF_MEMORY_FORMAT_CHANNELS_LAST) {
      assert_int_equal(t.strides[1], 1), assert_int_equal(t.strides[2], 3 * w), assert_int_equal(t.strides[3], 3);
    } else {
      assert_int_equal(t.strides[1], plane), assert_int_equal(t.strides[3], 1);
    }
    assert_int_equal(len, ref_len / (dt.dtype == FF_FLOAT32 ? 4 : 1) * (size_t)cases[k].elem);
    if (cases[k].dtype == FF_OUTPUT_FLOAT32 || cases[k].dtype == FF_OUTPUT_UINT8) { /* the default transposed */
      size_t eb = (size_t)cases[k].elem, n = len / eb / (size_t)(3 * plane);
      int ref_planar = cases[k].dtype == FF_OUTPUT_FLOAT32;
      for (size_t i = 0; i < n; i++)
        for (int64_t c = 0; c < 3; c++)
          for (int64_t p = 0; p < plane; p++) {
            size_t planar = ((size_t)i * 3 * plane + (size_t)(c * plane + p)) * eb;
            size_t inter = ((size_t)i * 3 * plane + (size_t)(p * 3 + c)) * eb;
            if (memcmp(host + (ref_planar ? inter : planar), ref + (ref_planar ? planar : inter), eb))
              fail_msg("case %d: sample %zu channel %lld pixel %lld differs from the default layout", k, i,
                       (long long)c, (long long)p);
          }
    }
    const char *devices[][2] = {{"emu:0?delay=20", "emu:0"}, {"cpu", "emu:0"}, {"emu:0", "cpu"}};
    for (int d = 0; d < 3; d++) {
      uint8_t *got = format_epoch(devices[d][0], devices[d][1], cases[k].pipe, cases[k].dtype, cases[k].format,
                                  &dlen, &ft);
      assert_int_equal(dlen, len);
      if (memcmp(got, host, len)) fail_msg("case %d: %s -> %s differs from the host's bytes", k, devices[d][0], devices[d][1]);
      free(got);
    }
    free(host), free(ref);
  }
  ff_config c = config("cpu", "cpu");
  c.output_dtype = FF_OUTPUT_UINT8; /* with a final normalize */
  ff_loader *l = NULL;
  assert_int_equal(ff_loader_open(&c, &l), FF_EINVAL);
  assert_non_null(strstr(ff_loader_errmsg(l), "output_dtype"));
  ff_loader_close(l);
  c = config("cpu", "cpu");
  c.pipeline = u8_pipe, c.output_dtype = FF_OUTPUT_BFLOAT16; /* without one */
  assert_int_equal(ff_loader_open(&c, &l), FF_EINVAL);
  assert_non_null(strstr(ff_loader_errmsg(l), "normalize"));
  ff_loader_close(l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(device_output_batches_equal_host_output_batches),
      cmocka_unit_test(a_held_batch_is_not_reused_and_a_release_after_a_stream_orders_the_reuse),
      cmocka_unit_test(an_output_device_that_cannot_open_fails_the_open),
      cmocka_unit_test(the_allocator_hook_gets_every_device_allocation_and_its_refusal_goes_to_the_cpu),
      cmocka_unit_test(device_samples_are_written_in_place_when_the_output_is_on_the_offload_device),
      cmocka_unit_test(host_output_takes_a_microbatch_down_in_one_call_into_the_pinned_batch),
      cmocka_unit_test(skipped_samples_close_their_gaps_in_the_device_batch),
      cmocka_unit_test(a_shrinking_trainer_figure_trims_the_pool_and_sends_work_to_the_cpu),
      cmocka_unit_test(output_dtypes_and_memory_formats_are_the_same_on_the_device_and_the_host),
  };
  return cmocka_run_group_tests(tests, make_dataset, NULL);
}
