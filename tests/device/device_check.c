/* device_check.c — the GPU checks of tests/device/run.sh (METHOD.md says
 * what each measures). Usage: device_check [DEVICE] [BATCH]; DEVICE is
 * cuda:0 by default (emu:0 runs the same checks on the emulator, without the
 * memory-pressure part); BATCH 256.
 *
 * 1. Every pipeline (standard, each policy, both layouts) at BATCH samples
 *    of 224x224 from random source images: device output == CPU output,
 *    byte for byte.
 * 2. Device time per microbatch (events: upload + kernels) → images/s.
 * 3. Pinned upload bandwidth.
 * 4. (cuda) Another allocation holds 80% of the free memory: the pool's
 *    limit stays below what is left, microbatches run, none fails with
 *    anything but the budget status; more pressure after a refresh shrinks
 *    the limit again.
 * Prints one table; exits 1 on any mismatch or failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/dev_batch.h"
#include "exec/device.h"
#include "ops/ops.h"
#include "pipeline/pipeline.h"

#ifdef FF_CHECK_CUDA
#include <cuda_runtime_api.h>
#endif

#define SOURCES 16
#define REPS 5

static const char *const pipelines[][2] = {
    {"standard", "decode | random_resized_crop(size=224) | random_horizontal_flip | normalize(mean=imagenet, "
                 "std=imagenet)"},
    {"standard uint8", "decode | random_resized_crop(size=224) | random_horizontal_flip"},
    {"rand_augment", "decode | random_resized_crop(size=224) | random_horizontal_flip | "
                     "rand_augment(num_ops=2, magnitude=9) | normalize(mean=imagenet, std=imagenet)"},
    {"rand_augment bilinear+fill", "decode | random_resized_crop(size=224) | rand_augment(num_ops=3, "
                                   "magnitude=15, interpolation=bilinear, fill=(124, 116, 104))"},
    {"trivial_augment_wide", "decode | random_resized_crop(size=224) | random_horizontal_flip | "
                             "trivial_augment_wide | normalize(mean=imagenet, std=imagenet)"},
    {"auto_augment imagenet", "decode | random_resized_crop(size=224) | random_horizontal_flip | "
                              "auto_augment(policy=imagenet) | normalize(mean=imagenet, std=imagenet)"},
    {"auto_augment cifar10",
     "decode | random_resized_crop(size=224) | auto_augment(policy=cifar10) | to_dtype"},
    {"auto_augment svhn", "decode | random_resized_crop(size=224) | auto_augment(policy=svhn)"},
    {"aug_mix", "decode | random_resized_crop(size=224) | random_horizontal_flip | aug_mix | "
                "normalize(mean=imagenet, std=imagenet)"},
    {"resize+center_crop",
     "decode | resize(size=256) | center_crop(size=224) | normalize(mean=imagenet, std=imagenet)"},
};
#define NUM_PIPELINES (sizeof pipelines / sizeof pipelines[0])

static int failures;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint32_t rnd(uint32_t *s) {
  *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
  return *s;
}

#define CHECK(cond, ...)                                                                                     \
  do {                                                                                                       \
    if (!(cond)) {                                                                                           \
      fprintf(stderr, "FAIL: " __VA_ARGS__);                                                                 \
      fputc('\n', stderr);                                                                                   \
      exit(1);                                                                                               \
    }                                                                                                        \
  } while (0)

/* Source images: smooth gradients with noise and flat patches (so that
 * histograms have gaps), 300..600 px a side. */
static ff__image sources[SOURCES];

static void make_sources(void) {
  uint32_t s = 2024;
  for (int i = 0; i < SOURCES; i++) {
    int w = 300 + (int)(rnd(&s) % 300), h = 300 + (int)(rnd(&s) % 300);
    uint8_t *p = malloc((size_t)w * h * 3);
    CHECK(p, "out of memory");
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++)
        for (int c = 0; c < 3; c++) {
          int v = (x * (c + 1) + y * (3 - c)) / 4 + (int)(rnd(&s) % 24);
          if ((x / 64 + y / 64) % 5 == i % 5) v = 30 * c + i;
          p[((size_t)y * w + x) * 3 + c] = (uint8_t)(v & 255);
        }
    sources[i] = (ff__image){p, w, h, 3, (size_t)w * 3};
  }
}

typedef struct job {
  const ff__pipeline *pipe;
  int n;
  ff__plan *plans;
  ff__image *decoded;
} job;

static void plan_job(job *j, uint64_t epoch) {
  for (int i = 0; i < j->n; i++) {
    const ff__image *src = &sources[i % SOURCES];
    ff__image_info info = {FF__FORMAT_PNG, src->width, src->height, 0};
    ff__plan_make(j->pipe, 7, epoch, (uint64_t)i, &info, 0, &j->plans[i]);
    ff__image img = *src;
    const ff__decode_req *r = &j->plans[i].decode;
    if (r->crop_width) {
      img.data += (size_t)r->crop_y * img.stride + (size_t)r->crop_x * 3;
      img.width = r->crop_width, img.height = r->crop_height;
    }
    j->decoded[i] = img;
  }
}

static size_t sample_bytes(const ff__pipeline *p) {
  return (size_t)p->out_height * p->out_width * 3 * (p->output == FF__OUTPUT_NCHW_F32 ? 4 : 1);
}

static double cpu_run(const job *j, uint8_t *out) {
  static ff__op_scratch scratch;
  static ff__buf copy;
  double t0 = now_s();
  for (int i = 0; i < j->n; i++) {
    ff__image img = j->decoded[i];
    size_t row = (size_t)img.width * 3;
    uint8_t *c = ff__buf_reserve(&copy, row * img.height);
    CHECK(c, "out of memory");
    for (int y = 0; y < img.height; y++)
      memcpy(c + y * row, img.data + y * img.stride, row);
    img.data = c, img.stride = row;
    ff__error err = {0};
    CHECK(!ff__ops_run(&j->plans[i], &scratch, &img, &err), "CPU: %s", err.msg);
    ff__op_write_output(j->pipe, &img, out, i);
  }
  return now_s() - t0;
}

/* One microbatch on the device: staging (add), then submit + wait.
 * Returns FF_OK or the status; *device_ms from the events. */
static ff_status dev_run(ff__device *d, ff__dstream *s, ff__dev_batch *b, const job *j, void *d_out,
                         float *device_ms, double *stage_s, ff__error *err) {
  double t0 = now_s();
  ff_status st = ff__dev_batch_begin(b, j->pipe, err);
  for (int i = 0; i < j->n && !st; i++)
    st = ff__dev_batch_add(b, &j->decoded[i], &j->plans[i], i, err);
  if (stage_s) *stage_s = now_s() - t0;
  if (!st) st = ff__dev_batch_submit(b, s, d_out, err);
  if (!st) st = ff__dev_batch_wait(b, device_ms, err);
  (void)d;
  return st;
}

static ff_status download(ff__device *d, ff__dstream *s, void *dst, const void *d_src, size_t bytes,
                          ff__error *err) {
  ff__devent *e;
  ff_status st = ff__device_event_create(d, &e, err);
  if (st) return st;
  st = ff__device_download(d, s, dst, d_src, bytes, err);
  if (!st) st = ff__device_event_record(d, e, s, err);
  if (!st) st = ff__device_event_wait(d, e, err);
  ff__device_event_destroy(d, e);
  return st;
}

static void row(const char *check, const char *result, const char *value) {
  printf("| %-42s | %-6s | %-48s |\n", check, result, value);
}

int main(int argc, char **argv) {
  const char *name = argc > 1 ? argv[1] : "cuda:0";
  int batch = argc > 2 ? atoi(argv[2]) : 256;
  CHECK(batch > 0, "batch must be > 0");
  ff__device *d;
  ff__error err = {0};
  CHECK(!ff__device_open(name, NULL, &d, &err), "%s", err.msg);
  ff__device_info info;
  CHECK(!ff__device_query(d, &info, &err), "%s", err.msg);
  fprintf(stderr, "%s: %.1f GiB, %.1f GiB free, pool limit %.1f GiB\n", info.name,
          info.total_bytes / 1073741824.0, info.free_bytes / 1073741824.0,
          info.pool.limit_bytes / 1073741824.0);
  make_sources();
  ff__dstream *s;
  ff__dev_batch *b;
  CHECK(!ff__device_stream_create(d, &s, &err), "%s", err.msg);
  CHECK(!ff__dev_batch_create(d, &b, &err), "%s", err.msg);
  job j = {NULL, batch, calloc((size_t)batch, sizeof(ff__plan)), calloc((size_t)batch, sizeof(ff__image))};
  CHECK(j.plans && j.decoded, "out of memory");
  char value[128];
  printf("\n| %-42s | %-6s | %-48s |\n|%s|%s|%s|\n", "check", "result", "value",
         "--------------------------------------------", "--------",
         "--------------------------------------------------");

  /* 1 + 2: bit-identical, and images/s */
  for (size_t k = 0; k < NUM_PIPELINES; k++) {
    static ff__pipeline pipe;
    CHECK(!ff__pipeline_parse(pipelines[k][1], &pipe, &err), "%s", err.msg);
    j.pipe = &pipe;
    size_t bytes = (size_t)batch * sample_bytes(&pipe);
    uint8_t *want = malloc(bytes), *got = malloc(bytes);
    void *d_out;
    CHECK(want && got, "out of memory");
    CHECK(!ff__device_alloc(d, bytes, &d_out, &err), "%s", err.msg);
    float ms_best = 1e30f, ms;
    double stage_s = 0, cpu_s = 0;
    size_t mismatches = 0, first = 0;
    for (int r = 0; r < REPS; r++) {
      plan_job(&j, (uint64_t)r);
      CHECK(!dev_run(d, s, b, &j, d_out, &ms, &stage_s, &err), "%s: %s", pipelines[k][0], err.msg);
      if (ms < ms_best) ms_best = ms;
      if (r < 2) { /* two epochs compared with the CPU, all reps timed */
        CHECK(!download(d, s, got, d_out, bytes, &err), "%s", err.msg);
        cpu_s = cpu_run(&j, want);
        for (size_t i = 0; i < bytes; i++)
          if (want[i] != got[i] && !mismatches++) first = i;
      }
    }
    char check[96];
    snprintf(check, sizeof check, "bit-identical: %s", pipelines[k][0]);
    if (mismatches) {
      failures++;
      snprintf(value, sizeof value, "%zu bytes differ, first at sample %zu", mismatches,
               first / sample_bytes(&pipe));
    } else {
      snprintf(value, sizeof value, "%d samples x 2 epochs", batch);
    }
    row(check, mismatches ? "FAIL" : "ok", value);
    snprintf(check, sizeof check, "images/s: %s", pipelines[k][0]);
    snprintf(value, sizeof value, "%.0f device, %.0f staging, %.0f 1 CPU thread", batch / (ms_best / 1000.0),
             batch / stage_s, batch / cpu_s);
    row(check, "", value);
    ff__device_free(d, d_out);
    free(want), free(got);
  }

  /* 3: pinned upload bandwidth */
  {
    size_t bytes = (size_t)256 << 20;
    void *h, *dbuf;
    ff__devent *e0, *e1;
    CHECK(!ff__device_host_alloc(d, bytes, &h, &err), "%s", err.msg);
    memset(h, 1, bytes);
    if (ff__device_alloc(d, bytes, &dbuf, &err) == FF_OK) {
      CHECK(!ff__device_event_create(d, &e0, &err) && !ff__device_event_create(d, &e1, &err), "%s", err.msg);
      float best = 1e30f, ms;
      for (int r = 0; r < 3; r++) {
        CHECK(!ff__device_event_record(d, e0, s, &err) && !ff__device_upload(d, s, dbuf, h, bytes, &err) &&
                  !ff__device_event_record(d, e1, s, &err) && !ff__device_event_wait(d, e1, &err) &&
                  !ff__device_event_elapsed_ms(d, e0, e1, &ms, &err),
              "%s", err.msg);
        if (ms < best) best = ms;
      }
      snprintf(value, sizeof value, "%.1f GB/s (256 MiB pinned)", bytes / (best / 1000.0) / 1e9);
      row("upload bandwidth", "", value);
      ff__device_event_destroy(d, e0);
      ff__device_event_destroy(d, e1);
      ff__device_free(d, dbuf);
    }
    ff__device_host_free(d, h);
  }
  CHECK(!ff__device_query(d, &info, &err), "%s", err.msg);
  snprintf(value, sizeof value, "peak %.0f MiB of limit %.0f MiB, %llu raw allocs",
           info.pool.peak_bytes / 1048576.0, info.pool.limit_bytes / 1048576.0,
           (unsigned long long)info.pool.raw_allocs);
  int within = info.pool.peak_bytes <= info.pool.limit_bytes;
  failures += !within;
  row("pool within its limit", within ? "ok" : "FAIL", value);
  ff__dev_batch_destroy(b);
  ff__device_stream_destroy(d, s);
  ff__device_close(d);

#ifdef FF_CHECK_CUDA
  /* 4: the trainer holds 80% of the free memory */
  if (!strncmp(name, "cuda:", 5)) {
    size_t free0, total;
    void *hog = NULL, *hog2 = NULL;
    CHECK(cudaSetDevice(atoi(name + 5)) == cudaSuccess && cudaMemGetInfo(&free0, &total) == cudaSuccess,
          "cudaMemGetInfo");
    CHECK(cudaMalloc(&hog, free0 / 10 * 8) == cudaSuccess, "cudaMalloc of 80%% of free memory");
    ff__device_options opt;
    ff__device_options_init(&opt);
    CHECK(!ff__device_open(name, &opt, &d, &err), "%s", err.msg);
    CHECK(!ff__device_stream_create(d, &s, &err) && !ff__dev_batch_create(d, &b, &err), "%s", err.msg);
    size_t free1;
    CHECK(cudaMemGetInfo(&free1, &total) == cudaSuccess, "cudaMemGetInfo");
    CHECK(!ff__device_query(d, &info, &err), "%s", err.msg);
    int ok = info.pool.limit_bytes < free1;
    static ff__pipeline pipe;
    CHECK(!ff__pipeline_parse(pipelines[2][1], &pipe, &err), "%s", err.msg);
    j.pipe = &pipe;
    int runs = 0, refused = 0;
    void *d_out = NULL;
    for (int phase = 0; phase < 2; phase++) {
      if (phase == 1) { /* the trainer grows: half of what is left */
        size_t f;
        CHECK(cudaMemGetInfo(&f, &total) == cudaSuccess && cudaMalloc(&hog2, f / 2) == cudaSuccess,
              "second cudaMalloc");
        CHECK(!ff__device_refresh(d, NULL, &err), "%s", err.msg);
        CHECK(cudaMemGetInfo(&f, &total) == cudaSuccess, "cudaMemGetInfo");
        CHECK(!ff__device_query(d, &info, &err), "%s", err.msg);
        ok &= info.pool.limit_bytes <= info.pool.reserved_bytes + f;
      }
      for (int r = 0; r < 4; r++) {
        ff_status st = d_out ? FF_OK : ff__device_alloc(d, (size_t)batch * sample_bytes(&pipe), &d_out, &err);
        plan_job(&j, (uint64_t)r);
        if (!st) st = dev_run(d, s, b, &j, d_out, NULL, NULL, &err);
        if (st == FF__EBUDGET)
          refused++;
        else if (st)
          ok = 0, fprintf(stderr, "pressure: %s\n", err.msg);
        else
          runs++;
      }
    }
    CHECK(!ff__device_query(d, &info, &err), "%s", err.msg);
    ok &= info.pool.peak_bytes <= info.pool.limit_bytes || info.pool.reserved_bytes == info.pool.used_bytes;
    failures += !ok;
    snprintf(value, sizeof value, "limit %.1f GiB < %.1f GiB left; %d ran, %d refused",
             info.pool.limit_bytes / 1073741824.0, free1 / 1073741824.0, runs, refused);
    row("pool under 80% memory pressure", ok ? "ok" : "FAIL", value);
    ff__device_free(d, d_out);
    ff__dev_batch_destroy(b);
    ff__device_stream_destroy(d, s);
    ff__device_close(d);
    cudaFree(hog2);
    cudaFree(hog);
  }
#endif
  free(j.plans), free(j.decoded);
  printf("\n%s\n", failures ? "FAILED" : "all device checks passed");
  return failures ? 1 : 0;
}
