/* transport.c — what moving a batch costs, on a device (emu:N or cuda:N):
 *
 *   transport DEVICE [BATCH] [BATCHES]
 *
 * 1. upload GB/s of one batch of BATCH x 3 x 224 x 224 float32 from pinned
 *    and from pageable host memory (ff__device_upload on one stream);
 * 2. the loader at device share 1 with the output on the host from
 *    pageable memory, on the host in pinned memory, and on DEVICE itself
 *    (direct aggregation): milliseconds per batch, device-to-host bytes
 *    and host round trips per batch (ff_batch_info), and the consumer's
 *    CPU time per batch while it waits in ff_loader_next and the device
 *    feeder thread's CPU time per batch against the device's time (both
 *    sleep in their waits: events are blocking-sync).
 * One line per figure (line-buffered); exit 1 when direct aggregation brought any
 * device-prepared sample down to the host. emu numbers are the
 * emulator's (host memcpy), not a GPU's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "exec/device.h"
#include "fixtures.h"
#include "fusionflow/fusionflow.h"
#include "loader/loader_internal.h"

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int upload_rate(const char *device, size_t bytes) {
  ff__device *d;
  ff__dstream *s;
  ff__devent *e;
  ff__error err = {0};
  void *dst, *pinned, *pageable = malloc(bytes);
  if (ff__device_open(device, NULL, &d, &err) || ff__device_stream_create(d, &s, &err) ||
      ff__device_event_create(d, &e, &err) || ff__device_alloc(d, bytes, &dst, &err) ||
      ff__device_host_alloc(d, bytes, &pinned, &err) || !pageable) {
    printf("upload: %s\n", err.msg);
    return 1;
  }
  memset(pageable, 1, bytes), memset(pinned, 1, bytes);
  void *src[2] = {pinned, pageable};
  const char *name[2] = {"pinned", "pageable"};
  for (int k = 0; k < 2; k++) {
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
      uint64_t t0 = ff__now_ns();
      if (ff__device_upload(d, s, dst, src[k], bytes, &err) || ff__device_event_record(d, e, s, &err) ||
          ff__device_event_wait(d, e, &err)) {
        printf("upload: %s\n", err.msg);
        return 1;
      }
      double gbs = (double)bytes / (double)(ff__now_ns() - t0);
      if (gbs > best) best = gbs;
    }
    printf("upload_gbs_%s %.2f  (%zu MB, best of 5)\n", name[k], best, bytes >> 20);
  }
  ff__device_host_free(d, pinned);
  ff__device_free(d, dst);
  ff__device_event_destroy(d, e);
  ff__device_stream_destroy(d, s);
  ff__device_close(d);
  free(pageable);
  return 0;
}

/* One run of the loader; returns nonzero on failure. */
static int run_loader(const char *source, const char *device, const char *output, int pin, int batch,
                      int batches, const char *label, size_t *round_trips, uint64_t *down_bytes) {
  ff_config c;
  ff_config_init(&c);
  c.source = source;
  c.pipeline = "decode | resize(size=256) | center_crop(size=224) | normalize(mean=imagenet, std=imagenet)";
  c.batch_size = batch, c.seed = 1, c.num_threads = 2, c.device = device, c.output_device = output;
  c.pin_memory = pin;
  c.device_decode = FF_DEVICE_DECODE_OFF; /* placement split: the CPU decodes, the transport is what varies */
  setenv("FF_FORCE_DEVICE_SHARE", "1.0", 1);
  ff_loader *l = NULL;
  ff_status st = ff_loader_open(&c, &l);
  if (st) {
    printf("%s: %s\n", label, ff_loader_errmsg(l));
    ff_loader_close(l);
    return 1;
  }
  uint64_t wall = 0, cpu = 0, feeder = 0, device_ns = 0;
  size_t n = 0, device_samples = 0;
  *round_trips = 0, *down_bytes = 0;
  for (int i = 0; i < batches + 1; i++) { /* the first batch warms up */
    ff_batch *b;
    uint64_t t0 = ff__now_ns(), c0 = thread_cpu_ns();
    st = ff_loader_next(l, &b);
    if (st == FF_END) break;
    if (st) {
      printf("%s: %s\n", label, ff_loader_errmsg(l));
      ff_loader_close(l);
      return 1;
    }
    ff_batch_sync(b);
    ff_batch_info bi;
    ff_batch_stats(b, &bi);
    if (i) {
      wall += ff__now_ns() - t0, cpu += thread_cpu_ns() - c0, n++;
      device_samples += bi.device_samples, feeder += bi.feeder_cpu_ns, device_ns += bi.device_ns;
      *round_trips += bi.host_round_trips, *down_bytes += bi.device_download_bytes;
    }
    ff_batch_release(b);
  }
  ff_loader_close(l);
  if (!n) return 1;
  printf("%-22s ms_per_batch %.2f  consumer_cpu_ms_per_batch %.3f  feeder_cpu_ms_per_batch %.3f  "
         "device_ms_per_batch %.2f  device_samples_per_batch %.1f  download_mb_per_batch %.1f  "
         "round_trips_per_batch %.1f\n",
         label, (double)wall / 1e6 / (double)n, (double)cpu / 1e6 / (double)n, (double)feeder / 1e6 / (double)n,
         (double)device_ns / 1e6 / (double)n, (double)device_samples / (double)n,
         (double)*down_bytes / 1048576.0 / (double)n, (double)*round_trips / (double)n);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* a timeout loses no line */
  const char *device = argc > 1 ? argv[1] : "emu:0";
  int batch = argc > 2 ? atoi(argv[2]) : 256, batches = argc > 3 ? atoi(argv[3]) : 4;
  if (batch < 1 || batches < 1) return fprintf(stderr, "usage: transport DEVICE [BATCH] [BATCHES]\n"), 2;
  int bad = upload_rate(device, (size_t)batch * 3 * 224 * 224 * 4);
  char dir[1024], source[1100];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("transport"));
  ff_test_make_imagefolder(dir, 2, (batch * (batches + 1) + 1) / 2, 240, 320, 3);
  snprintf(source, sizeof source, "imagefolder:%s", dir);
  size_t trips;
  uint64_t down;
  bad |= run_loader(source, device, "cpu", 0, batch, batches, "host_pageable", &trips, &down);
  bad |= run_loader(source, device, "cpu", 1, batch, batches, "host_pinned", &trips, &down);
  bad |= run_loader(source, device, device, -1, batch, batches, "device_direct", &trips, &down);
  if (!bad && (trips || down)) {
    printf("direct aggregation brought %zu samples (%llu bytes) down to the host\n", trips,
           (unsigned long long)down);
    bad = 1;
  }
  printf("%s\n", bad ? "transport: FAILED" : "transport: direct aggregation made no host round trip");
  return bad;
}
