/* device_check.c — the GPU checks of tests/device/run.sh (METHOD.md says
 * what each measures). Usage: device_check [DEVICE] [BATCH] [--json FILE];
 * DEVICE is cuda:0 by default (emu:0 runs the same checks on the emulator,
 * without the memory-pressure part); BATCH 256.
 *
 * 1. Every pipeline (standard, each policy, both layouts) at BATCH samples
 *    of 224x224 from random source images: device output == CPU output,
 *    byte for byte (the ops on the CPU's decoded images: no device decode).
 * 2. Device time per microbatch -> images/s: the kernels (the microbatch's
 *    events, first to last stage) and the upload with them (events around
 *    the submit on its one stream).
 * 3. RandAugment at 224x224, each stage alone (events, best of 5): the
 *    upload of the decoded images, the kernels on images already in device
 *    memory, upload + kernels, the float32 output's download.
 * 4. Pinned upload bandwidth (256 MiB; 16 MiB for a batch under 64).
 * 5. (cuda) Another allocation holds 80% of the free memory: the pool's
 *    limit stays below what is left, microbatches run, none fails with
 *    anything but the budget status; more pressure after a refresh shrinks
 *    the limit, and the pool then holds no cached block above it.
 * Prints one table (line-buffered: a timeout loses no row) and with --json
 * writes every figure to FILE; exits 1 on any mismatch or failure. */
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
static int reps = REPS; /* 2 for a batch under 64 (a dry run: both compared, both timed) */

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
 * Returns FF_OK or the status; *kernels_ms (the microbatch's own events:
 * first to last stage) and *both_ms (events of ours around the submit on
 * its one stream: the upload and the stages) may be NULL. */
static ff_status dev_run(ff__device *d, ff__dstream *s, ff__dev_batch *b, const job *j, void *d_out,
                         float *kernels_ms, float *both_ms, double *stage_s, ff__error *err) {
  double t0 = now_s();
  ff__devent *e0 = NULL, *e1 = NULL;
  ff_status st = ff__dev_batch_begin(b, j->pipe, err);
  for (int i = 0; i < j->n && !st; i++)
    st = ff__dev_batch_add(b, &j->decoded[i], &j->plans[i], i, err);
  if (stage_s) *stage_s = now_s() - t0;
  if (!st && both_ms) st = ff__device_event_create(d, &e0, err);
  if (!st && both_ms) st = ff__device_event_create(d, &e1, err);
  if (!st && both_ms) st = ff__device_event_record(d, e0, s, err);
  if (!st) st = ff__dev_batch_submit(b, s, d_out, err);
  if (!st && both_ms) st = ff__device_event_record(d, e1, s, err);
  if (!st) st = ff__dev_batch_wait(b, kernels_ms, err);
  if (!st && both_ms) st = ff__device_event_elapsed_ms(d, e0, e1, both_ms, err);
  if (e0) ff__device_event_destroy(d, e0);
  if (e1) ff__device_event_destroy(d, e1);
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

/* Best device time of `reps` events-timed copies, in ms. */
static float timed_copy(ff__device *d, ff__dstream *s, void *dst, const void *src, size_t bytes, int up) {
  ff__devent *e0, *e1;
  ff__error err = {0};
  CHECK(!ff__device_event_create(d, &e0, &err) && !ff__device_event_create(d, &e1, &err), "%s", err.msg);
  float best = 1e30f, ms;
  for (int r = 0; r < reps; r++) {
    CHECK(!ff__device_event_record(d, e0, s, &err) &&
              !(up ? ff__device_upload(d, s, dst, src, bytes, &err) : ff__device_download(d, s, dst, src, bytes, &err)) &&
              !ff__device_event_record(d, e1, s, &err) && !ff__device_event_wait(d, e1, &err) &&
              !ff__device_event_elapsed_ms(d, e0, e1, &ms, &err),
          "%s", err.msg);
    if (ms < best) best = ms;
  }
  ff__device_event_destroy(d, e0);
  ff__device_event_destroy(d, e1);
  return best;
}

typedef struct stage_figures {
  double upload, kernels, upload_kernels, download; /* images/s */
  double in_bytes, out_bytes;                        /* per image: decoded region, output sample */
  int identical;
} stage_figures;

/* RandAugment's stages alone on one microbatch of j->n samples: the decoded
 * images' upload (pinned, one copy as the microbatch makes it), the kernels
 * on images already in device memory (ff__dev_batch_add_device, as the
 * device decoder hands them over), both together, and the output's
 * download (float32 NCHW into pinned memory). */
static stage_figures stages(ff__device *d, ff__dstream *s, ff__dev_batch *b, job *j) {
  ff__error err = {0};
  stage_figures f = {0};
  plan_job(j, 0);
  size_t in = 0, *off = calloc((size_t)j->n, sizeof *off), out = (size_t)j->n * sample_bytes(j->pipe);
  CHECK(off, "out of memory");
  for (int i = 0; i < j->n; i++) off[i] = in, in += (size_t)j->decoded[i].width * j->decoded[i].height * 3;
  void *h_in, *h_out, *d_in, *d_out;
  uint8_t *want = malloc(out);
  CHECK(want, "out of memory");
  CHECK(!ff__device_host_alloc(d, in, &h_in, &err) && !ff__device_host_alloc(d, out, &h_out, &err), "%s", err.msg);
  CHECK(!ff__device_alloc(d, in, &d_in, &err) && !ff__device_alloc(d, out, &d_out, &err), "%s", err.msg);
  for (int i = 0; i < j->n; i++) {
    const ff__image *im = &j->decoded[i];
    for (int y = 0; y < im->height; y++)
      memcpy((uint8_t *)h_in + off[i] + (size_t)y * im->width * 3, im->data + (size_t)y * im->stride,
             (size_t)im->width * 3);
  }
  f.upload = j->n / (timed_copy(d, s, d_in, h_in, in, 1) / 1000.0);
  float best = 1e30f, ms;
  for (int r = 0; r < reps; r++) {
    ff_status st = ff__dev_batch_begin(b, j->pipe, &err);
    for (int i = 0; i < j->n && !st; i++) {
      const ff__image *im = &j->decoded[i];
      st = ff__dev_batch_add_device(b, (uint8_t *)d_in + off[i], im->width, im->height, (size_t)im->width * 3,
                                    &j->plans[i], i, &err);
    }
    if (!st) st = ff__dev_batch_submit(b, s, d_out, &err);
    if (!st) st = ff__dev_batch_wait(b, &ms, &err);
    CHECK(!st, "kernels alone: %s", err.msg);
    if (ms < best) best = ms;
  }
  f.kernels = j->n / (best / 1000.0);
  CHECK(!download(d, s, h_out, d_out, out, &err), "%s", err.msg);
  cpu_run(j, want);
  f.identical = !memcmp(want, h_out, out);
  best = 1e30f;
  for (int r = 0; r < reps; r++) {
    CHECK(!dev_run(d, s, b, j, d_out, NULL, &ms, NULL, &err), "upload + kernels: %s", err.msg);
    if (ms < best) best = ms;
  }
  f.upload_kernels = j->n / (best / 1000.0);
  f.download = j->n / (timed_copy(d, s, h_out, d_out, out, 0) / 1000.0);
  f.in_bytes = (double)in / j->n, f.out_bytes = (double)out / j->n;
  ff__device_free(d, d_in), ff__device_free(d, d_out);
  ff__device_host_free(d, h_in), ff__device_host_free(d, h_out);
  free(off), free(want);
  return f;
}

typedef struct pipeline_figures {
  size_t mismatches, first_sample;
  double kernels, upload_kernels, staging, cpu1; /* images/s */
} pipeline_figures;

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++)
    if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
    else fputc(*s, f);
  fputc('"', f);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *name = "cuda:0", *json = NULL;
  int batch = 256, positional = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (positional == 0) name = argv[i], positional++;
    else if (positional == 1) batch = atoi(argv[i]), positional++;
    else CHECK(0, "usage: device_check [DEVICE] [BATCH] [--json FILE]");
  }
  CHECK(batch > 0, "batch must be > 0");
  if (batch < 64) reps = 2;
  ff__device *d;
  ff__error err = {0};
  CHECK(!ff__device_open(name, NULL, &d, &err), "%s", err.msg);
  ff__device_info info;
  CHECK(!ff__device_query(d, &info, &err), "%s", err.msg);
  char device_name[sizeof info.name];
  snprintf(device_name, sizeof device_name, "%s", info.name);
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
  char value[160];
  printf("\n| %-42s | %-6s | %-48s |\n|%s|%s|%s|\n", "check", "result", "value",
         "--------------------------------------------", "--------",
         "--------------------------------------------------");

  /* 1 + 2: bit-identical, and images/s */
  pipeline_figures pf[NUM_PIPELINES];
  for (size_t k = 0; k < NUM_PIPELINES; k++) {
    static ff__pipeline pipe;
    CHECK(!ff__pipeline_parse(pipelines[k][1], &pipe, &err), "%s", err.msg);
    j.pipe = &pipe;
    size_t bytes = (size_t)batch * sample_bytes(&pipe);
    uint8_t *want = malloc(bytes), *got = malloc(bytes);
    void *d_out;
    CHECK(want && got, "out of memory");
    CHECK(!ff__device_alloc(d, bytes, &d_out, &err), "%s", err.msg);
    float kernels_best = 1e30f, both_best = 1e30f, kernels_ms, both_ms;
    double stage_s = 0, cpu_s = 0;
    size_t mismatches = 0, first = 0;
    for (int r = 0; r < reps; r++) {
      plan_job(&j, (uint64_t)r);
      CHECK(!dev_run(d, s, b, &j, d_out, &kernels_ms, &both_ms, &stage_s, &err), "%s: %s", pipelines[k][0],
            err.msg);
      if (kernels_ms < kernels_best) kernels_best = kernels_ms;
      if (both_ms < both_best) both_best = both_ms;
      if (r < 2) { /* two epochs compared with the CPU, all reps timed */
        CHECK(!download(d, s, got, d_out, bytes, &err), "%s", err.msg);
        cpu_s = cpu_run(&j, want);
        for (size_t i = 0; i < bytes; i++)
          if (want[i] != got[i] && !mismatches++) first = i;
      }
    }
    pf[k] = (pipeline_figures){mismatches, first / sample_bytes(&pipe), batch / (kernels_best / 1000.0),
                               batch / (both_best / 1000.0), batch / stage_s, batch / cpu_s};
    char check[96];
    snprintf(check, sizeof check, "bit-identical: %s", pipelines[k][0]);
    if (mismatches) {
      failures++;
      snprintf(value, sizeof value, "%zu bytes differ, first at sample %zu", mismatches, pf[k].first_sample);
    } else {
      snprintf(value, sizeof value, "%d samples x 2 epochs", batch);
    }
    row(check, mismatches ? "FAIL" : "ok", value);
    snprintf(check, sizeof check, "images/s: %s", pipelines[k][0]);
    snprintf(value, sizeof value, "%.0f kernels, %.0f +upload, %.0f staging, %.0f 1 CPU", pf[k].kernels,
             pf[k].upload_kernels, pf[k].staging, pf[k].cpu1);
    row(check, "", value);
    ff__device_free(d, d_out);
    free(want), free(got);
  }

  /* 3: RandAugment's stages alone */
  static ff__pipeline ra;
  CHECK(!ff__pipeline_parse(pipelines[2][1], &ra, &err), "%s", err.msg);
  j.pipe = &ra;
  stage_figures sf = stages(d, s, b, &j);
  failures += !sf.identical;
  row("bit-identical: rand_augment, device input", sf.identical ? "ok" : "FAIL",
      "images already in device memory, as decoded there");
  snprintf(value, sizeof value, "%.0f upload, %.0f kernels, %.0f both", sf.upload, sf.kernels, sf.upload_kernels);
  row("stages alone, images/s: rand_augment", "", value);
  snprintf(value, sizeof value, "%.0f download (%.0f KiB/image float32)", sf.download, sf.out_bytes / 1024);
  row("stages alone, images/s: rand_augment", "", value);

  /* 4: pinned upload bandwidth */
  double upload_gbs = 0;
  {
    size_t mib = batch >= 64 ? 256 : 16, bytes = mib << 20; /* a small batch is a dry run: 16 MiB */
    void *h, *dbuf;
    CHECK(!ff__device_host_alloc(d, bytes, &h, &err), "%s", err.msg);
    memset(h, 1, bytes);
    if (ff__device_alloc(d, bytes, &dbuf, &err) == FF_OK) {
      upload_gbs = bytes / (timed_copy(d, s, dbuf, h, bytes, 1) / 1000.0) / 1e9;
      snprintf(value, sizeof value, "%.1f GB/s (%zu MiB pinned)", upload_gbs, mib);
      row("upload bandwidth", "", value);
      ff__device_free(d, dbuf);
    }
    ff__device_host_free(d, h);
  }
  CHECK(!ff__device_query(d, &info, &err), "%s", err.msg);
  ff__pool_stats pool = info.pool;
  snprintf(value, sizeof value, "peak %.0f MiB of limit %.0f MiB, %llu raw allocs", pool.peak_bytes / 1048576.0,
           pool.limit_bytes / 1048576.0, (unsigned long long)pool.raw_allocs);
  int within = pool.peak_bytes <= pool.limit_bytes;
  failures += !within;
  row("pool within its limit", within ? "ok" : "FAIL", value);
  ff__dev_batch_destroy(b);
  ff__device_stream_destroy(d, s);
  ff__device_close(d);

  /* 5: the trainer holds 80% of the free memory */
  int pressure_ran = 0, pressure_ok = 0, runs = 0, refused = 0;
  double limit0 = 0, free_left = 0, limit1 = 0;
#ifdef FF_CHECK_CUDA
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
    limit0 = info.pool.limit_bytes / 1073741824.0, free_left = free1 / 1073741824.0;
    j.pipe = &ra;
    void *d_out = NULL;
    for (int phase = 0; phase < 2; phase++) {
      if (phase == 1) { /* the trainer grows: half of what is left */
        size_t f;
        CHECK(!ff__device_query(d, &info, &err), "%s", err.msg);
        ok &= info.pool.peak_bytes <= info.pool.limit_bytes; /* the first phase stayed within its limit */
        CHECK(cudaMemGetInfo(&f, &total) == cudaSuccess && cudaMalloc(&hog2, f / 2) == cudaSuccess,
              "second cudaMalloc");
        CHECK(!ff__device_refresh(d, NULL, &err), "%s", err.msg);
        CHECK(cudaMemGetInfo(&f, &total) == cudaSuccess, "cudaMemGetInfo");
        CHECK(!ff__device_query(d, &info, &err), "%s", err.msg);
        ok &= info.pool.limit_bytes <= info.pool.reserved_bytes + f;
        limit1 = info.pool.limit_bytes / 1073741824.0;
      }
      for (int r = 0; r < 4; r++) {
        ff_status st = d_out ? FF_OK : ff__device_alloc(d, (size_t)batch * sample_bytes(&ra), &d_out, &err);
        plan_job(&j, (uint64_t)r);
        if (!st) st = dev_run(d, s, b, &j, d_out, NULL, NULL, NULL, &err);
        if (st == FF__EBUDGET)
          refused++;
        else if (st)
          ok = 0, fprintf(stderr, "pressure: %s\n", err.msg);
        else
          runs++;
      }
    }
    /* The peak since open may be the first phase's, under its larger limit;
     * after the shrink the pool may keep only blocks in use above the new
     * limit, no cached one. */
    CHECK(!ff__device_query(d, &info, &err), "%s", err.msg);
    ok &= info.pool.reserved_bytes <= info.pool.limit_bytes || info.pool.reserved_bytes == info.pool.used_bytes;
    failures += !ok;
    pressure_ran = 1, pressure_ok = ok;
    snprintf(value, sizeof value, "limit %.1f GiB < %.1f GiB left, then %.1f; %d ran, %d refused", limit0,
             free_left, limit1, runs, refused);
    row("pool under 80% memory pressure", ok ? "ok" : "FAIL", value);
    ff__device_free(d, d_out);
    ff__dev_batch_destroy(b);
    ff__device_stream_destroy(d, s);
    ff__device_close(d);
    cudaFree(hog2);
    cudaFree(hog);
  }
#endif

  if (json) {
    FILE *f = fopen(json, "w");
    CHECK(f, "cannot write %s", json);
    fprintf(f, "{\"device\": ");
    json_string(f, device_name);
    fprintf(f, ", \"batch\": %d, \"pipelines\": [", batch);
    for (size_t k = 0; k < NUM_PIPELINES; k++) {
      fprintf(f, "%s\n  {\"name\": ", k ? "," : "");
      json_string(f, pipelines[k][0]);
      fprintf(f, ", \"bit_identical\": %s, \"mismatched_bytes\": %zu, \"kernels_images_per_s\": %.1f, "
                 "\"upload_kernels_images_per_s\": %.1f, \"staging_images_per_s\": %.1f, "
                 "\"cpu_1_thread_images_per_s\": %.1f}",
              pf[k].mismatches ? "false" : "true", pf[k].mismatches, pf[k].kernels, pf[k].upload_kernels,
              pf[k].staging, pf[k].cpu1);
    }
    fprintf(f, "],\n \"stages\": {\"pipeline\": \"rand_augment 224x224\", \"upload_images_per_s\": %.1f, "
               "\"kernels_images_per_s\": %.1f, \"upload_kernels_images_per_s\": %.1f, "
               "\"download_images_per_s\": %.1f, \"decoded_bytes_per_image\": %.0f, \"output_bytes_per_image\": %.0f, "
               "\"kernels_bit_identical\": %s, \"kernels_goal_images_per_s\": 50000},\n",
            sf.upload, sf.kernels, sf.upload_kernels, sf.download, sf.in_bytes, sf.out_bytes,
            sf.identical ? "true" : "false");
    fprintf(f, " \"upload_gb_per_s\": %.2f, \"pool\": {\"peak_bytes\": %zu, \"limit_bytes\": %zu, \"raw_allocs\": %llu, "
               "\"within_limit\": %s},\n",
            upload_gbs, pool.peak_bytes, pool.limit_bytes, (unsigned long long)pool.raw_allocs,
            within ? "true" : "false");
    if (pressure_ran)
      fprintf(f, " \"pressure\": {\"ok\": %s, \"limit_gib\": %.2f, \"free_left_gib\": %.2f, \"limit_after_gib\": %.2f, "
                 "\"ran\": %d, \"refused\": %d},\n",
              pressure_ok ? "true" : "false", limit0, free_left, limit1, runs, refused);
    else
      fprintf(f, " \"pressure\": null,\n");
    fprintf(f, " \"failures\": %d}\n", failures);
    CHECK(!fclose(f), "cannot write %s", json);
  }
  free(j.plans), free(j.decoded);
  if (failures)
    printf("\nFAILED: %d check(s)\n", failures);
  else
    printf("\nall device checks passed; rand_augment 224x224 batch %d: kernels %.0f images/s (goal 50,000), "
           "upload+kernels %.0f, download %.0f\n",
           batch, sf.kernels, sf.upload_kernels, sf.download);
  return failures ? 1 : 0;
}
