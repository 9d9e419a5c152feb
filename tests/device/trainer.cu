/* trainer.cu — a trainer stand-in for the cooperative scheduler's goal on a
 * GPU machine (METHOD.md, section 3): it keeps the GPU busy with a "training
 * step" of a set length per batch while it consumes fusionflow batches, once
 * with the CPU pool alone (device cpu), once with offload to cuda:0 in
 * placement split (CPU decode, device ops: device_decode off), once with
 * device decode on (placement device, where nvJPEG loads) and once in
 * placement split with the batches handed out on cuda:0 (output_device:
 * the device's samples written in place, the step's stream waiting for
 * each batch's event and releasing after it), and reports for
 * each the images/s, the share of the run it stalled waiting for
 * batches, the device's share of the samples and the step's length against
 * the same step run alone, and which decoders ran (ff_stats.decoders: the
 * "device" row names nvJPEG's backend only where it decoded): how much of
 * cpu-only's stall cooperative mode removes, and how much it slows the
 * trainer.
 *
 * The step is a kernel that spins on every SM (enough blocks to fill them)
 * for a calibrated number of iterations, on its own stream, timed with
 * events; the loader's device work runs on the loader's streams and shares
 * the SMs with it, as a real trainer's would. The data set is generated
 * (JPEGs of 300-600 px, tests/unit/fixtures.c) unless --data names one
 * (run.sh's), so the check needs no files.
 *
 *   trainer [--step-ms 20] [--batch-size 64] [--threads 2] [--batches 60] [--images 1200]
 *           [--dir DIR | --data IMAGEFOLDER] [--json FILE]
 * Prints one table, line-buffered, each row naming the decoders that ran,
 * and with --json writes every figure to FILE (with the device's and the
 * CPU workers' decodes); exits 0 when the runs
 * completed (the goal line is a measurement, not a pass/fail), 1 on an
 * error, 2 on bad arguments. */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusionflow/fusionflow.h"
extern "C" {
#include "fixtures.h"
}

#define PIPELINE                                                                                             \
  "decode | random_resized_crop(size=224) | random_horizontal_flip | rand_augment(num_ops=2, magnitude=9) | " \
  "normalize(mean=imagenet, std=imagenet)"

#define CHECK(call)                                                                                          \
  do {                                                                                                       \
    cudaError_t e_ = (call);                                                                                 \
    if (e_ != cudaSuccess) {                                                                                 \
      fprintf(stderr, "trainer: %s: %s\n", #call, cudaGetErrorString(e_));                                  \
      exit(1);                                                                                               \
    }                                                                                                        \
  } while (0)

/* The step's work: dependent multiply-adds, one chain per thread, written
 * out so that the compiler cannot drop them. */
__global__ void spin(long iters, float *sink) {
  float x = (float)threadIdx.x, y = 1.0001f;
  for (long i = 0; i < iters; i++) x = x * y + 1e-7f;
  if (x == -1.0f) sink[0] = x; /* never true; keeps x alive */
}

typedef struct step {
  cudaStream_t stream;
  cudaEvent_t start, stop;
  int blocks;
  long iters;
  float *sink;
} step;

/* One step; returns its length in ms (events). */
static float run_step(step *s) {
  CHECK(cudaEventRecord(s->start, s->stream));
  spin<<<s->blocks, 256, 0, s->stream>>>(s->iters, s->sink);
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(s->stop, s->stream));
  CHECK(cudaEventSynchronize(s->stop));
  float ms;
  CHECK(cudaEventElapsedTime(&ms, s->start, s->stop));
  return ms;
}

/* Sets iters so that a step alone takes about step_ms; returns the mean of
 * 10 steps alone. */
static float calibrate(step *s, float step_ms) {
  s->iters = 1000;
  for (int round = 0; round < 20; round++) {
    float ms = run_step(s);
    if (ms > 0.8f * step_ms && ms < 1.2f * step_ms) break;
    s->iters = (long)((double)s->iters * (ms > 0 ? step_ms / ms : 10.0));
    if (s->iters < 1) s->iters = 1;
  }
  float sum = 0;
  for (int i = 0; i < 10; i++) sum += run_step(s);
  return sum / 10;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct result {
  double images_per_s, stall, device_share, step_ms;
  char decoders[48]; /* which decoders ran (ff_stats.decoders): a "device" row is never a silent CPU decode */
  unsigned long long decode_fallbacks, device_decodes, cpu_decodes;
} result;

/* Consumes `batches` timed batches (after 10 untimed) from a loader on
 * `device`, one step per batch. */
static int consume(const char *source, const char *device, const char *output_device, ff_device_decode decode,
                   int batch_size, int threads, int batches, step *s, result *out) {
  ff_config c;
  ff_config_init(&c);
  c.source = source;
  c.pipeline = PIPELINE;
  c.batch_size = batch_size;
  c.num_threads = threads;
  c.seed = 1;
  c.device = device;
  c.device_decode = decode;
  c.output_device = output_device;
  ff_loader *l = NULL;
  if (ff_loader_open(&c, &l) != FF_OK) {
    fprintf(stderr, "trainer: %s: %s\n", device, ff_loader_errmsg(l));
    ff_loader_close(l);
    return 1;
  }
  double t0 = 0, wait = 0, step_ms = 0;
  size_t samples = 0, on_device = 0;
  for (int i = 0; i < 10 + batches; i++) {
    if (i == 10) t0 = now_s();
    ff_batch *b;
    ff_status st = ff_loader_next(l, &b);
    if (st == FF_END) st = ff_loader_next(l, &b); /* the next epoch */
    if (st != FF_OK) {
      fprintf(stderr, "trainer: %s: %s\n", device, ff_loader_errmsg(l));
      ff_loader_close(l);
      return 1;
    }
    ff_batch_info info;
    ff_batch_stats(b, &info);
    if (ff_batch_wait_on(b, s->stream) != FF_OK) { /* the step reads the batch on its stream */
      fprintf(stderr, "trainer: %s: ff_batch_wait_on failed\n", device);
      return 1;
    }
    float ms = run_step(s);
    if (i >= 10) {
      wait += 1e-9 * (double)info.wait_ns;
      step_ms += ms;
      samples += ff_batch_size(b);
      on_device += info.device_samples;
    }
    ff_batch_release_after(b, s->stream);
  }
  double wall = now_s() - t0;
  ff_stats st;
  ff_loader_stats(l, &st);
  *out = (result){(double)samples / wall, wait / wall, (double)on_device / (double)samples, step_ms / batches, "",
                  (unsigned long long)st.device_decode_fallbacks, (unsigned long long)st.device_decodes,
                  (unsigned long long)st.cpu_decodes};
  snprintf(out->decoders, sizeof out->decoders, "%s", st.decoders);
  ff_loader_close(l);
  return 0;
}

static int arg_int(const char *s, int lo, int hi, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == 0 || *end || v < lo || v > hi) return 0;
  *out = (int)v;
  return 1;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int step_ms = 20, batch_size = 64, threads = 2, batches = 60, images = 1200;
  const char *dir = NULL, *json = NULL, *data = NULL;
  for (int i = 1; i < argc; i++) {
    int ok = i + 1 < argc;
    if (ok && !strcmp(argv[i], "--step-ms")) ok = arg_int(argv[++i], 1, 10000, &step_ms);
    else if (ok && !strcmp(argv[i], "--batch-size")) ok = arg_int(argv[++i], 1, 4096, &batch_size);
    else if (ok && !strcmp(argv[i], "--threads")) ok = arg_int(argv[++i], 1, 1024, &threads);
    else if (ok && !strcmp(argv[i], "--batches")) ok = arg_int(argv[++i], 1, 100000, &batches);
    else if (ok && !strcmp(argv[i], "--images")) ok = arg_int(argv[++i], 8, 1000000, &images);
    else if (ok && !strcmp(argv[i], "--dir")) dir = argv[++i];
    else if (ok && !strcmp(argv[i], "--data")) data = argv[++i];
    else if (ok && !strcmp(argv[i], "--json")) json = argv[++i];
    else ok = 0;
    if (!ok) {
      fprintf(stderr, "usage: trainer [--step-ms 20] [--batch-size 64] [--threads 2] [--batches 60] "
                      "[--images 1200] [--dir DIR | --data IMAGEFOLDER] [--json FILE]\n");
      return 2;
    }
  }
  int dev, sms;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  step s = {0};
  s.blocks = 4 * sms;
  CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  CHECK(cudaEventCreate(&s.start));
  CHECK(cudaEventCreate(&s.stop));
  CHECK(cudaMalloc(&s.sink, sizeof(float)));
  float alone = calibrate(&s, (float)step_ms);

  char root[4096], source[4200];
  snprintf(root, sizeof root, "%s", data ? data : dir ? dir : ff_test_dir("trainer-data"));
  if (!data) {
    fprintf(stderr, "trainer: writing %d JPEGs of 300-600 px to %s\n", images, root);
    ff_test_make_imagefolder(root, 10, (images + 9) / 10, 300, 600, 7);
  }
  snprintf(source, sizeof source, "imagefolder:%s", root);

  /* cpu alone; cooperative with placement split (CPU decode, device ops); and
   * with device decode (placement device: nvJPEG decodes, when it loads) */
  result r[4];
  const char *names[4] = {"cpu", "split", "device", "split+out"};
  if (consume(source, "cpu", "cpu", FF_DEVICE_DECODE_OFF, batch_size, threads, batches, &s, &r[0]) ||
      consume(source, "cuda:0", "cpu", FF_DEVICE_DECODE_OFF, batch_size, threads, batches, &s, &r[1]) ||
      consume(source, "cuda:0", "cpu", FF_DEVICE_DECODE_ON, batch_size, threads, batches, &s, &r[2]) ||
      consume(source, "cuda:0", "cuda:0", FF_DEVICE_DECODE_OFF, batch_size, threads, batches, &s, &r[3]))
    return 1;
  printf("trainer stand-in: step %.2f ms alone (%d blocks on %d SMs), batch %d, %d CPU threads, RandAugment, "
         "%d timed batches\n",
         alone, s.blocks, sms, batch_size, threads, batches);
  printf("%-9s %12s %8s %14s %10s %10s  %s\n", "device", "images/s", "stall", "device share", "step ms", "slowdown",
         "decoders");
  for (int i = 0; i < 4; i++)
    printf("%-9s %12.1f %7.1f%% %13.1f%% %10.2f %9.1f%%  %s\n", names[i], r[i].images_per_s, 100 * r[i].stall,
           100 * r[i].device_share, r[i].step_ms, 100 * (r[i].step_ms / alone - 1), r[i].decoders);
  printf("split+out against split (output on the device, no host round trip): step %+.1f%%, images/s %.2fx\n",
         100 * (r[3].step_ms / r[1].step_ms - 1), r[3].images_per_s / r[1].images_per_s);
  FILE *jf = json ? fopen(json, "w") : NULL;
  if (json && !jf) {
    fprintf(stderr, "trainer: cannot write %s\n", json);
    return 1;
  }
  int stalls = r[0].stall > 0.005;
  if (jf)
    fprintf(jf, "{\"threads\": %d, \"batch_size\": %d, \"batches\": %d, \"step_ms_alone\": %.3f, \"sms\": %d, "
                "\"cpu_stalls\": %s, \"runs\": [",
            threads, batch_size, batches, alone, sms, stalls ? "true" : "false");
  for (int i = 0; i < 4; i++) {
    double removed = stalls ? 1 - r[i].stall / r[0].stall : 0;
    double slowdown = r[i].step_ms / alone - 1;
    int met = stalls && removed >= 0.9 && slowdown <= 0.05;
    if (jf)
      fprintf(jf, "%s\n  {\"placement\": \"%s\", \"images_per_s\": %.1f, \"stall\": %.4f, \"device_share\": %.4f, "
                  "\"step_ms\": %.3f, \"slowdown\": %.4f, \"decoders\": \"%s\", \"device_decodes\": %llu, "
                  "\"cpu_decodes\": %llu, \"decode_fallbacks\": %llu, \"stall_removed\": %.4f, \"goal_met\": %s}",
              i ? "," : "", names[i], r[i].images_per_s, r[i].stall, r[i].device_share, r[i].step_ms, slowdown,
              r[i].decoders, r[i].device_decodes, r[i].cpu_decodes, r[i].decode_fallbacks, i ? removed : 0.0,
              i && met ? "true" : "false");
    if (i == 0) continue;
    printf("%s: stall removed %.0f%%, step slowdown %.1f%%, %.2fx the images/s of cpu: goal (>= 90%% removed, "
           "<= 5%% slower) %s\n",
           names[i], 100 * removed, 100 * slowdown, r[i].images_per_s / r[0].images_per_s,
           !stalls ? "not applicable (cpu does not stall: use fewer --threads or a shorter --step-ms)"
           : met   ? "met"
                   : "not met");
  }
  if (jf && (fprintf(jf, "]}\n") < 0 || fclose(jf))) {
    fprintf(stderr, "trainer: cannot write %s\n", json);
    return 1;
  }
  return 0;
}
