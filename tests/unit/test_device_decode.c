/* test_device_decode.c — the device's JPEG decoder through the loader, with
 * the stub libnvjpeg (tests/stub/nvjpeg_stub.c) on the emulated device
 * (`emu:0?decode=libnvjpeg`: the device layer loads libnvjpeg as on CUDA; the
 * stub decodes as libjpeg-turbo does, so the batches can be compared bit for
 * bit with the CPU's). A corrupt file in a batch fails exactly as on the
 * CPU (same message, same on_error) while the others decode on the device;
 * an image the decoder fails is found alone by bisection and decoded by a
 * worker; a decoder that fails every batch is turned off after three, with
 * one line, and every image is then decoded by the workers (none on the
 * feeder's thread); the hybrid backend decodes without the hardware-only
 * support call and only batches of more than 50 images, leaving smaller
 * ones to the workers; the hardware backend's scale factor gives the CPU's
 * DCT-scaled pixels; every decoder that ran is named in the stats. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/device.h"
#include "fixtures.h"
#include "fusionflow/fusionflow.h"

/* decodes every row, reduced in the DCT domain where it can (the hardware
 * backend's scale factor does it as the CPU does), or at full size (the
 * hybrid backend cannot reduce: its pixels would differ from the CPU's) */
#define FULL_DECODE_PIPELINE "decode | resize(size=(16, 16))"
#define FULL_SIZE_PIPELINE "decode(dct_scale=false) | resize(size=(16, 16))"
#define CORRUPT 5      /* the file cut mid-scan */
#define ODD_WIDTH 77   /* the width of file ODD, which FF_STUB_NVJPEG_FAIL=width:77 fails */
#define ODD 11

/* n JPEGs a/00.jpg .. (even widths 64..), file CORRUPT truncated, file ODD ODD_WIDTH wide. */
static const char *dataset(const char *name, int n) {
  static char src[2048];
  char dir[1024], path[2048];
  snprintf(dir, sizeof dir, "%s", ff_test_dir(name));
  snprintf(path, sizeof path, "%s/a", dir);
  ff_test_mkdir(path);
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/a/%03d.jpg", dir, i);
    ff_test_write_jpeg(path, i == ODD ? ODD_WIDTH : 64 + 2 * (i % 40), 48 + 2 * (i % 30), 90, 0, (unsigned)i + 1);
  }
  snprintf(path, sizeof path, "%s/a/%03d.jpg", dir, CORRUPT);
  size_t bytes;
  uint8_t *jpg = ff_test_read(path, &bytes);
  ff_test_write(path, jpg, bytes / 2); /* cut mid-scan: truncated */
  free(jpg);
  snprintf(src, sizeof src, "imagefolder:%s", dir);
  return src;
}

static ff_config config(const char *source, const char *device, int batch_size) {
  ff_config c;
  ff_config_init(&c);
  c.source = source;
  c.pipeline = FULL_DECODE_PIPELINE;
  c.batch_size = batch_size;
  c.shuffle = 0;
  c.num_threads = 2;
  c.prefetch = 2;
  c.rank = 0, c.world_size = 1;
  c.device = device;
  c.device_decode = FF_DEVICE_DECODE_ON;
  return c;
}

/* Opens c with the stub as libnvjpeg (its hardware backend when hardware)
 * and every sample on the device. */
static ff_loader *open_stub(const ff_config *c, int hardware) {
  setenv("FF_NVJPEG_LIBRARY", getenv("FF_NVJPEG_STUB"), 1);
  if (hardware) setenv("FF_STUB_NVJPEG_HARDWARE", "1", 1);
  setenv("FF_FORCE_DEVICE_SHARE", "1.0", 1);
  ff_loader *l = NULL;
  ff_status st = ff_loader_open(c, &l);
  unsetenv("FF_NVJPEG_LIBRARY"), unsetenv("FF_STUB_NVJPEG_HARDWARE"), unsetenv("FF_FORCE_DEVICE_SHARE");
  if (st) fail_msg("ff_loader_open(%s): %s", c->device, ff_loader_errmsg(l));
  return l;
}

/* One epoch: each batch's status and message, or a hash of its pixels and
 * its size, one line each, into out (cap bytes). */
static void epoch_outcomes(ff_loader *l, char *out, size_t cap) {
  size_t used = 0;
  out[0] = 0;
  for (;;) {
    ff_batch *b;
    ff_status st = ff_loader_next(l, &b);
    if (st == FF_END) break;
    if (st) {
      used += (size_t)snprintf(out + used, cap - used, "%d %s\n", st, ff_loader_errmsg(l));
      if (used >= cap || st != FF_EDATA) break;
      continue;
    }
    ff_tensor t;
    ff_batch_images(b, &t);
    uint32_t h = 2166136261u; /* FNV-1a of the pixels */
    for (size_t k = 0; k < ff_batch_size(b) * 16 * 16 * 3; k++) h = (h ^ ((uint8_t *)t.data)[k]) * 16777619u;
    used += (size_t)snprintf(out + used, cap - used, "ok %zu %08x\n", ff_batch_size(b), h);
    ff_batch_release(b);
    if (used >= cap) break;
  }
}

static void cpu_outcomes(ff_config c, char *out, size_t cap) {
  c.device = "cpu";
  ff_loader *l = NULL;
  if (ff_loader_open(&c, &l)) fail_msg("cpu: %s", ff_loader_errmsg(l));
  epoch_outcomes(l, out, cap);
  ff_loader_close(l);
}

/* An epoch of c on the CPU and one on the stub's backend (hardware or hybrid). */
typedef struct outcome {
  ff_config c;
  int hardware;
  char want[4096], got[4096]; /* the CPU's epoch, the device's */
  ff_stats s;                 /* the device run's, its strings copied below */
  char decoder[64], note[512], decoders[64];
} outcome;

static void run_device(void *arg) {
  outcome *o = arg;
  ff_loader *l = open_stub(&o->c, o->hardware);
  epoch_outcomes(l, o->got, sizeof o->got);
  ff_loader_stats(l, &o->s);
  snprintf(o->decoder, sizeof o->decoder, "%s", o->s.device_decoder);
  snprintf(o->note, sizeof o->note, "%s", o->s.device_decoder_note);
  snprintf(o->decoders, sizeof o->decoders, "%s", o->s.decoders);
  ff_loader_close(l);
}

static void compare(const ff_config *c, int hardware, outcome *o) {
  o->c = *c, o->hardware = hardware;
  cpu_outcomes(*c, o->want, sizeof o->want);
  run_device(o);
}

static void a_corrupt_file_fails_as_on_the_cpu_and_the_rest_decode_on_the_device(void **state) {
  (void)state;
  const char *src = dataset("decode-corrupt", 24);
  for (int skip = 0; skip < 2; skip++) {
    ff_config c = config(src, "emu:0?decode=libnvjpeg", 8);
    c.on_error = skip ? FF_ON_ERROR_SKIP : FF_ON_ERROR_RAISE;
    outcome o;
    compare(&c, 1, &o);
    assert_string_equal(o.got, o.want);
    assert_non_null(strstr(o.want, skip ? "ok 7" : "005.jpg")); /* the first batch: skipped, or its error */
    assert_string_equal(o.decoder, "nvjpeg-hardware");
    if (skip) { /* the two other batches whole; the first with 7 samples (a failed batch is not handed out) */
      assert_int_equal(o.s.device_decode_failures, 1); /* found alone */
      assert_int_equal(o.s.device_decode_failed_batches, 1);
      assert_int_equal(o.s.skipped, 1);
      assert_int_equal(o.s.samples, 23);
      assert_int_equal(o.s.device_decodes, 23); /* the corrupt one's batch mates on the device */
      assert_string_equal(o.decoders, "nvjpeg-hardware");
      assert_int_equal(o.s.cpu_decodes, 0); /* the corrupt file was tried by a worker and failed there */
    }
  }
}

static void an_image_the_decoder_fails_is_decoded_by_a_worker(void **state) {
  (void)state;
  const char *src = dataset("decode-odd", 24);
  ff_config c = config(src, "emu:0?decode=libnvjpeg", 8);
  c.on_error = FF_ON_ERROR_SKIP;
  setenv("FF_STUB_NVJPEG_FAIL", "width:77", 1); /* file ODD fails any batch it is in */
  outcome o;
  compare(&c, 1, &o);
  unsetenv("FF_STUB_NVJPEG_FAIL");
  assert_string_equal(o.got, o.want);
  assert_int_equal(o.s.device_decode_failures, 2); /* ODD, and the corrupt file in batch 0 */
  assert_int_equal(o.s.device_decode_failed_batches, 2);
  assert_int_equal(o.s.device_decodes, 22);
  assert_int_equal(o.s.cpu_decodes, 1);
  assert_string_equal(o.decoders, "nvjpeg-hardware+libjpeg-turbo");
}

/* The device's decode of 8 (hardware) or 64 (hybrid) files of the data
 * set, file CORRUPT among them: the statuses, the failed calls, the calls. */
static void decode_files(const char *src, int hardware, int n, ff_status *status, int *calls_failed, long *calls) {
  setenv("FF_NVJPEG_LIBRARY", getenv("FF_NVJPEG_STUB"), 1);
  if (hardware) setenv("FF_STUB_NVJPEG_HARDWARE", "1", 1);
  ff__device_options opt;
  ff__device_options_init(&opt);
  opt.decoder = 1;
  ff__device *d = NULL;
  ff__error err;
  ff_status st = ff__device_open("emu:0?decode=libnvjpeg", &opt, &d, &err);
  unsetenv("FF_NVJPEG_LIBRARY"), unsetenv("FF_STUB_NVJPEG_HARDWARE");
  if (st) fail_msg("%s", err.msg);
  ff__dstream *s;
  ff__devent *e;
  assert_int_equal(ff__device_stream_create(d, &s, &err), FF_OK);
  assert_int_equal(ff__device_event_create(d, &e, &err), FF_OK);
  ff__device_decode_job jobs[64];
  uint8_t *bytes[64];
  char path[2048];
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/a/%03d.jpg", src + strlen("imagefolder:"), i);
    bytes[i] = ff_test_read(path, &jobs[i].size_bytes);
    jobs[i] = (ff__device_decode_job){.src = bytes[i], .size_bytes = jobs[i].size_bytes, .name = "f"};
    assert_int_equal(ff__codec_probe(bytes[i], jobs[i].size_bytes, "f", 0, &jobs[i].info, &err), FF_OK);
    jobs[i].dst_bytes = ff__device_decode_bytes(d, &jobs[i].info, &jobs[i].req);
    assert_int_equal(ff__device_alloc(d, jobs[i].dst_bytes, &jobs[i].d_dst, &err), FF_OK);
  }
  *calls = ff_test_nvjpeg_stub_count("nvjpegStubBatches");
  assert_int_equal(ff__device_decode(d, s, 0, jobs, n, calls_failed, &err), FF_OK);
  *calls = ff_test_nvjpeg_stub_count("nvjpegStubBatches") - *calls;
  assert_int_equal(ff__device_event_record(d, e, s, &err), FF_OK);
  assert_int_equal(ff__device_event_wait(d, e, &err), FF_OK);
  for (int i = 0; i < n; i++) {
    status[i] = jobs[i].status ? jobs[i].status : jobs[i].result;
    ff__device_free(d, jobs[i].d_dst);
    free(bytes[i]);
  }
  ff__device_event_destroy(d, e);
  ff__device_stream_destroy(d, s);
  ff__device_close(d);
}

static void a_failed_batch_is_halved_until_the_failing_image_is_alone(void **state) {
  (void)state;
  const char *src = dataset("decode-bisect", 64);
  ff_status status[64];
  int failed;
  long calls;
  decode_files(src, 1, 8, status, &failed, &calls);
  for (int i = 0; i < 8; i++) assert_int_equal(status[i], i == CORRUPT ? FF_EDATA : FF_OK);
  assert_int_equal(failed, 4); /* 8, 4 (files 4..7), 2 (4, 5), 1 (5) */
  assert_int_equal(calls, 7);  /* and their good halves */
  /* the hybrid backend takes no batch below 51: 64 cannot be halved, the batch fails as one */
  decode_files(src, 0, 64, status, &failed, &calls);
  for (int i = 0; i < 64; i++) assert_int_equal(status[i], FF_EDATA);
  assert_int_equal(failed, 1);
  assert_int_equal(calls, 1);
  assert_int_equal(ff_test_nvjpeg_stub_count("nvjpegStubSmallHybridBatches"), 0);
}

static void a_decoder_that_fails_every_batch_is_turned_off_and_the_workers_decode(void **state) {
  (void)state;
  const char *src = dataset("decode-failing", 8 * 51);
  outcome o = {.c = config(src, "emu:0?decode=libnvjpeg", 51)}; /* the hybrid backend takes 51 */
  o.c.on_error = FF_ON_ERROR_SKIP, o.c.pipeline = FULL_SIZE_PIPELINE;
  cpu_outcomes(o.c, o.want, sizeof o.want);
  ff_config cpu = o.c;
  cpu.device = "cpu";
  ff_loader *l = NULL;
  assert_int_equal(ff_loader_open(&cpu, &l), FF_OK);
  char scratch[4096];
  epoch_outcomes(l, scratch, sizeof scratch);
  ff_stats base;
  ff_loader_stats(l, &base);
  ff_loader_close(l);
  setenv("FF_STUB_NVJPEG_FAIL", "batch", 1);
  const char *err = ff_test_stderr_of(run_device, &o);
  unsetenv("FF_STUB_NVJPEG_FAIL");
  assert_string_equal(o.got, o.want);
  assert_string_equal(o.decoder, "none");
  assert_non_null(strstr(o.note, "nvjpeg-hybrid turned off after 3 batches"));
  assert_non_null(strstr(o.note, "EXECUTION_FAILED"));
  /* one line, once */
  const char *line = strstr(err, "device decode is off for the rest of the run");
  assert_non_null(line);
  assert_null(strstr(line + 1, "device decode is off"));
  /* three in a row turn it off; batches already on their way fail too */
  assert_true(o.s.device_decode_failed_batches >= 3 && o.s.device_decode_failed_batches <= 3 + 3);
  assert_int_equal(o.s.device_decodes, 0);
  assert_string_equal(o.decoders, "libjpeg-turbo");
  /* every image decoded by the workers, as many per worker as without a device */
  assert_int_equal(o.s.samples, base.samples);
  assert_int_equal(o.s.num_threads, base.num_threads);
  assert_int_equal(o.s.cpu_decodes, base.cpu_decodes);
  assert_int_equal(o.s.cpu_decodes, o.s.samples);
  assert_true(o.s.device_fallbacks >= 3 * 50); /* the first three batches went back, less the corrupt file */
}

static void the_hybrid_backend_decodes_only_batches_of_more_than_50(void **state) {
  (void)state;
  const char *src = dataset("decode-hybrid", 128);
  for (int big = 0; big < 2; big++) {
    ff_config c = config(src, "emu:0?decode=libnvjpeg", big ? 64 : 32);
    c.on_error = FF_ON_ERROR_SKIP, c.pipeline = FULL_SIZE_PIPELINE;
    long small = ff_test_nvjpeg_stub_count("nvjpegStubSmallHybridBatches");
    outcome o;
    compare(&c, 0, &o);
    small = ff_test_nvjpeg_stub_count("nvjpegStubSmallHybridBatches") - small;
    assert_string_equal(o.got, o.want);
    assert_string_equal(o.decoder, "nvjpeg-hybrid"); /* no support call refused it */
    assert_int_equal(small, 0);                       /* never 50 or fewer on the hybrid backend */
    if (big) { /* 64 a batch: on the device; the corrupt file's batch cannot be halved (32 < 51): all back */
      assert_int_equal(o.s.device_decodes, 64);
      assert_int_equal(o.s.device_decode_failures, 64);
      assert_int_equal(o.s.device_decode_failed_batches, 1);
      assert_int_equal(o.s.device_decode_small_batches, 0);
      assert_string_equal(o.decoders, "nvjpeg-hybrid+libjpeg-turbo");
    } else { /* 32 a batch: the workers decode them, the device runs the ops */
      assert_int_equal(o.s.device_decodes, 0);
      assert_int_equal(o.s.device_decode_small_batches, 4);
      assert_int_equal(o.s.placement_samples[FF_PLACEMENT_SPLIT], 127);
      assert_string_equal(o.decoders, "libjpeg-turbo");
    }
  }
}

static void the_hardware_scale_factor_gives_the_cpus_dct_scaled_pixels(void **state) {
  (void)state;
  char dir[1024], path[2048], src[2048];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("decode-scaled"));
  snprintf(path, sizeof path, "%s/a", dir);
  ff_test_mkdir(path);
  for (int i = 0; i < 16; i++) {
    snprintf(path, sizeof path, "%s/a/%02d.jpg", dir, i);
    ff_test_write_jpeg(path, 240 + 13 * i, 180 + 7 * i, 90, 0, (unsigned)i + 1);
  }
  snprintf(src, sizeof src, "imagefolder:%s", dir);
  ff_config c = config(src, "emu:0?decode=libnvjpeg", 8);
  c.pipeline = "decode(dct_scale=true) | random_resized_crop(size=16, scale=(0.5, 1.0))";
  outcome o;
  compare(&c, 1, &o);
  assert_int_equal(o.s.device_decodes, 16);
  assert_string_equal(o.got, o.want);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_corrupt_file_fails_as_on_the_cpu_and_the_rest_decode_on_the_device),
      cmocka_unit_test(an_image_the_decoder_fails_is_decoded_by_a_worker),
      cmocka_unit_test(a_failed_batch_is_halved_until_the_failing_image_is_alone),
      cmocka_unit_test(a_decoder_that_fails_every_batch_is_turned_off_and_the_workers_decode),
      cmocka_unit_test(the_hybrid_backend_decodes_only_batches_of_more_than_50),
      cmocka_unit_test(the_hardware_scale_factor_gives_the_cpus_dct_scaled_pixels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
