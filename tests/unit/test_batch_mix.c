/* test_batch_mix.c — the Mixup/CutMix batch stage (mixup_cutmix) on a
 * device batch (output_device emu:N) against the CPU stage on the host
 * batch: whole epochs, images and soft labels, byte for byte, for every
 * mode (batch, pair, elem), both conventions (timm's flipped pairs,
 * torchvision's rolled batch), Mixup alone, CutMix alone (from λ and from
 * cutmix_minmax) and both, whatever the thread count and the share the
 * device prepared (its samples written in place into the device batch, the
 * host's going up as uint8), and with an output device the offload device
 * does not share (its samples going down and up again), random_erasing
 * before it included (the host's erased floats go up as they are). The stage really
 * mixes (the epoch differs from the one without it), nothing comes down to
 * the host with direct aggregation, and an output format the CPU stage
 * refuses is refused on the device with the same message; batches that
 * skipped samples shortened (odd ones too) mix as on the CPU. The CUDA kernel
 * likewise on cuda:0 where there is a GPU (skipped without one). Device
 * decode is off throughout: bit identity compares the CPU's decode. */
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

#define BASE "decode | random_resized_crop(size=(20, 28)) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"
#define NUM_CLASSES 4

static char source[2048];

static int make_dataset(void **state) {
  (void)state;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("batch-mix-data"));
  ff_test_make_imagefolder(dir, 3, 12, 40, 90, 5);
  snprintf(source, sizeof source, "imagefolder:%s", dir);
  return 0;
}

/* The source and on_error of run_epoch's loaders. */
static const char *epoch_source = source;
static int epoch_on_error = FF_ON_ERROR_RAISE;

/* An epoch's bytes: every batch's images then its soft labels. */
typedef struct epoch {
  uint8_t *bytes;
  size_t len, batches, device_samples, round_trips;
  ff__emu_counts counts; /* the output device's, after the epoch (emu output only) */
} epoch;

static void append(epoch *ep, const void *data, size_t n) {
  ep->bytes = realloc(ep->bytes, ep->len + n);
  assert_non_null(ep->bytes);
  memcpy(ep->bytes + ep->len, data, n);
  ep->len += n;
}

/* One epoch; *skipped (when not NULL) set instead of failing when the
 * device cannot be opened (no GPU). */
static epoch run_epoch_or_skip(const char *pipeline, const char *device, const char *output_device, int threads,
                               const char *share, int *skipped) {
  ff_config c;
  ff_config_init(&c);
  c.source = epoch_source;
  c.on_error = epoch_on_error;
  c.pipeline = pipeline;
  c.batch_size = 8; /* 36 samples: 4 batches of 8 and one of 4 (even, as timm asks) */
  c.seed = 23;
  c.num_threads = threads;
  c.rank = 0, c.world_size = 1;
  c.device = device;
  c.output_device = output_device;
  c.device_decode = FF_DEVICE_DECODE_OFF; /* bit identity: the CPU's decode everywhere (nvJPEG's pixels differ) */
  if (share) setenv("FF_FORCE_DEVICE_SHARE", share, 1);
  ff_loader *l = NULL;
  ff_status st = ff_loader_open(&c, &l);
  unsetenv("FF_FORCE_DEVICE_SHARE");
  epoch ep = {0};
  if (st == FF_EDEVICE && skipped) {
    print_message("skipped: %s\n", ff_loader_errmsg(l));
    ff_loader_close(l);
    *skipped = 1;
    return ep;
  }
  if (st) fail_msg("ff_loader_open(%s, %s): %s", device, output_device, ff_loader_errmsg(l));
  ff_batch *b;
  while ((st = ff_loader_next(l, &b)) != FF_END) {
    if (st) fail_msg("ff_loader_next: %s", ff_loader_errmsg(l));
    assert_int_equal(ff_batch_sync(b), FF_OK);
    assert_string_equal(ff_batch_device(b), output_device);
    int dev_type = -1, dev_id = -1;
    ff_batch_dlpack_device(b, &dev_type, &dev_id);
    assert_int_equal(dev_type, strncmp(output_device, "cuda", 4) ? 1 : 2); /* kDLCPU (emu, cpu), kDLCUDA */
    assert_int_equal(dev_id, 0);                                            /* cuda:0 alone here */
    ff_tensor t, soft;
    ff_batch_images(b, &t);
    assert_int_equal(t.dtype, FF_FLOAT32);
    size_t bytes = (size_t)(t.shape[0] * t.shape[1] * t.shape[2] * t.shape[3]) * sizeof(float);
    if (!strncmp(output_device, "cuda", 4)) { /* GPU memory: the test brings it down (emu's is host memory) */
      void *host = malloc(bytes);
      ff__error err = {0};
      assert_non_null(host);
      if (ff__device_download(l->out_dev, l->out_stream, host, t.data, bytes, &err)) fail_msg("%s", err.msg);
      ff__device_synchronize(l->out_dev);
      append(&ep, host, bytes);
      free(host);
    } else {
      append(&ep, t.data, bytes);
    }
    if (ff_batch_soft_labels(b, &soft) == FF_OK) { /* host memory, whatever output_device says */
      assert_int_equal(soft.shape[0], t.shape[0]);
      assert_int_equal(soft.shape[1], NUM_CLASSES);
      assert_ptr_not_equal(soft.data, t.data);
      append(&ep, soft.data, (size_t)(soft.shape[0] * soft.shape[1]) * sizeof(float));
    }
    ff_batch_info bi;
    ff_batch_stats(b, &bi);
    ep.batches++, ep.device_samples += bi.device_samples, ep.round_trips += bi.host_round_trips;
    ff_batch_release(b);
  }
  if (!strncmp(output_device, "emu", 3)) assert_int_equal(ff__emu_probe(l->out_dev, &ep.counts), FF_OK);
  ff_loader_close(l);
  return ep;
}

static epoch run_epoch(const char *pipeline, const char *device, const char *output_device, int threads,
                       const char *share) {
  return run_epoch_or_skip(pipeline, device, output_device, threads, share, NULL);
}

static void device_mixed_batches_equal_cpu_mixed_batches(void **state) {
  (void)state;
  static const char *stages[] = {
      "mixup_cutmix(mixup_alpha=0.8, mode=batch",
      "mixup_cutmix(mixup_alpha=0.8, cutmix_alpha=1.0, mode=batch",
      "mixup_cutmix(mixup_alpha=0.8, mode=pair",
      "mixup_cutmix(mixup_alpha=0.8, cutmix_alpha=1.0, switch_prob=0.5, mode=pair",
      "mixup_cutmix(mixup_alpha=1.5, prob=0.7, mode=elem",
      "mixup_cutmix(mixup_alpha=0.8, cutmix_alpha=1.0, mode=elem",
      "mixup_cutmix(cutmix_alpha=1.0, mode=elem",
      "mixup_cutmix(cutmix_minmax=(0.2, 0.8), mode=pair",
      "mixup_cutmix(mixup_alpha=0.8, convention=torchvision",
      "mixup_cutmix(mixup_alpha=0.5, cutmix_alpha=1.0, convention=torchvision",
      "mixup_cutmix(cutmix_alpha=1.0, convention=torchvision",
      "random_erasing(p=0.5, value=random) | mixup_cutmix(mixup_alpha=0.8, cutmix_alpha=1.0, mode=elem", /* DeiT's */
  };
  /* (device, output_device, threads, share): direct aggregation at several shares and thread counts, the
   * host alone with device output, and an output device the offload device does not share */
  static const struct {
    const char *device, *output;
    int threads;
    const char *share;
  } runs[] = {{"emu:0", "emu:0", 2, "1.0"}, {"emu:0", "emu:0", 1, "0.5"}, {"emu:0", "emu:0", 3, "0.25"},
              {"cpu", "emu:0", 2, NULL},     {"emu:0", "emu:1", 2, "1.0"}};
  epoch plain = run_epoch(BASE, "cpu", "cpu", 2, NULL);
  for (size_t k = 0; k < sizeof stages / sizeof *stages; k++) {
    char pipeline[512];
    snprintf(pipeline, sizeof pipeline, "%s | %s, num_classes=%d)", BASE, stages[k], NUM_CLASSES);
    epoch ref = run_epoch(pipeline, "cpu", "cpu", 2, NULL);
    assert_int_equal(ref.len, plain.len + 36 * NUM_CLASSES * sizeof(float));
    if (!memcmp(ref.bytes, plain.bytes, plain.len)) fail_msg("%s: the stage changed no image", stages[k]);
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
      epoch got = run_epoch(pipeline, runs[r].device, runs[r].output, runs[r].threads, runs[r].share);
      assert_int_equal(got.batches, ref.batches);
      assert_int_equal(got.len, ref.len);
      if (memcmp(got.bytes, ref.bytes, ref.len))
        fail_msg("%s: %s -> %s, %d threads, share %s: the epoch differs from the CPU's", stages[k], runs[r].device,
                 runs[r].output, runs[r].threads, runs[r].share ? runs[r].share : "-");
      if (!strcmp(runs[r].device, runs[r].output)) { /* direct aggregation: nothing came down */
        assert_true(got.device_samples > 0);
        assert_int_equal(got.round_trips, 0);
        assert_int_equal(got.counts.copy_calls[FF__COPY_D2H], 0);
        assert_int_equal(got.counts.copy_bytes[FF__COPY_D2H], 0);
      }
      free(got.bytes);
    }
    free(ref.bytes);
  }
  free(plain.bytes);
}

/* Skipped samples (on_error=skip) shorten batches, to odd sizes too (timm
 * then mixes the middle image with itself): the gaps close on the device
 * before the stage, which mixes the short batch as the CPU does. */
static void short_batches_of_skipped_samples_mix_as_on_the_cpu(void **state) {
  (void)state;
  char dir[1024], path[1200], skip_source[1100];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("batch-mix-skip-data"));
  ff_test_make_imagefolder(dir, 2, 10, 40, 90, 6);
  const int bad[][2] = {{0, 1}, {0, 6}, {1, 3}}; /* batches of 8, 8, 4 lose 2, 1 and 0 */
  for (int i = 0; i < 3; i++)
    ff_test_write(ff_test_imagefolder_path(dir, bad[i][0], bad[i][1], path, sizeof path), "not an image", 12);
  snprintf(skip_source, sizeof skip_source, "imagefolder:%s", dir);
  epoch_source = skip_source, epoch_on_error = FF_ON_ERROR_SKIP;
  static const char *stages[] = {
      "mixup_cutmix(mixup_alpha=0.8, cutmix_alpha=1.0, mode=elem",
      "mixup_cutmix(mixup_alpha=0.8, mode=batch",
      "mixup_cutmix(mixup_alpha=0.5, cutmix_alpha=1.0, convention=torchvision",
  };
  for (size_t k = 0; k < sizeof stages / sizeof *stages; k++) {
    char pipeline[512];
    snprintf(pipeline, sizeof pipeline, "%s | %s, num_classes=%d)", BASE, stages[k], NUM_CLASSES);
    epoch ref = run_epoch(pipeline, "cpu", "cpu", 2, NULL);
    assert_int_equal(ref.len, 17 * (3 * 20 * 28 + NUM_CLASSES) * sizeof(float));
    epoch got = run_epoch(pipeline, "emu:0", "emu:0", 2, "0.5");
    assert_true(got.device_samples > 0);
    assert_true(got.counts.copy_calls[FF__COPY_D2D] > 0); /* the gaps closed on the device */
    assert_int_equal(got.len, ref.len);
    if (memcmp(got.bytes, ref.bytes, ref.len)) fail_msg("%s: the short batches differ from the CPU's", stages[k]);
    free(got.bytes), free(ref.bytes);
  }
  epoch_source = source, epoch_on_error = FF_ON_ERROR_RAISE;
}

/* The same on a GPU (the CUDA kernel): skipped without one. */
static void cuda_mixed_batches_equal_cpu_mixed_batches(void **state) {
  (void)state;
  static const char *stages[] = {
      "mixup_cutmix(mixup_alpha=0.8, cutmix_alpha=1.0, switch_prob=0.5, mode=pair",
      "mixup_cutmix(mixup_alpha=0.8, cutmix_alpha=1.0, mode=elem",
      "mixup_cutmix(mixup_alpha=0.5, cutmix_alpha=1.0, convention=torchvision",
  };
  static const char *devices[][2] = {{"cuda:0", "cuda:0"}, {"cpu", "cuda:0"}};
  for (size_t k = 0; k < sizeof stages / sizeof *stages; k++) {
    char pipeline[512];
    snprintf(pipeline, sizeof pipeline, "%s | %s, num_classes=%d)", BASE, stages[k], NUM_CLASSES);
    epoch ref = run_epoch(pipeline, "cpu", "cpu", 2, NULL);
    for (int d = 0; d < 2; d++) {
      int skipped = 0;
      epoch got = run_epoch_or_skip(pipeline, devices[d][0], devices[d][1], 2, "1.0", &skipped);
      if (skipped) {
        free(ref.bytes);
        skip();
      }
      assert_int_equal(got.len, ref.len);
      if (memcmp(got.bytes, ref.bytes, ref.len))
        fail_msg("%s: %s -> %s: the epoch differs from the CPU's", stages[k], devices[d][0], devices[d][1]);
      free(got.bytes);
    }
    free(ref.bytes);
  }
}

static void an_output_format_the_cpu_stage_refuses_is_refused_on_the_device_too(void **state) {
  (void)state;
  const char *outputs[] = {"cpu", "emu:0"};
  char msg[2][FF__ERRMSG_MAX];
  for (int k = 0; k < 2; k++) {
    ff_config c;
    ff_config_init(&c);
    c.source = source;
    c.pipeline = BASE " | mixup_cutmix(mixup_alpha=0.8, num_classes=4)";
    c.batch_size = 8;
    c.device = "cpu";
    c.output_device = outputs[k];
    c.output_dtype = FF_OUTPUT_BFLOAT16;
    ff_loader *l = NULL;
    assert_int_equal(ff_loader_open(&c, &l), FF_EINVAL);
    snprintf(msg[k], sizeof msg[k], "%s", ff_loader_errmsg(l));
    assert_non_null(strstr(msg[k], "mixup_cutmix (pipeline column "));
    assert_non_null(strstr(msg[k], "output_dtype"));
    ff_loader_close(l);
  }
  assert_string_equal(msg[0], msg[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(device_mixed_batches_equal_cpu_mixed_batches),
      cmocka_unit_test(short_batches_of_skipped_samples_mix_as_on_the_cpu),
      cmocka_unit_test(cuda_mixed_batches_equal_cpu_mixed_batches),
      cmocka_unit_test(an_output_format_the_cpu_stage_refuses_is_refused_on_the_device_too),
  };
  return cmocka_run_group_tests(tests, make_dataset, NULL);
}
