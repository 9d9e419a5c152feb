/* ops_bench.c — per-op microbenchmarks of fusionflow's CPU ops on one thread.
 *
 * Calls the internal op functions directly (ff__aug_affine, ff__aug_lut_run,
 * ff__aug_color, ff__op_resize, ff__op_hflip, ff__op_write_output,
 * ff__pil_run) and, for
 * the step runner, ff__ops_run on a planned pipeline and on a hand-made
 * AugMix mixing plan, on a fixed pseudo-random but smooth RGB test image
 * (224x224, plus a 320x290 and a 150x150 one for the resizes). Each op is
 * timed as the median over --runs runs of N back-to-back calls, N calibrated
 * so that one run takes about --target-ms. Prints one JSON object on stdout:
 *   {"op": {"us": median microseconds per call, "n": N, "runs": R, ...}, ...}
 *
 * In-place ops (the colour ops, hflip) would change their own input from
 * call to call — autocontrast and equalize converge to images whose table is
 * the identity, which the library then skips — so each call first restores
 * the pristine image with one memcpy. "us" is the time of the call less the
 * median time of that memcpy alone ("copy_us", also reported, with
 * "us_with_copy"), so it is comparable with out-of-place peers that do not
 * copy.
 *
 * Resizes also report "value_taps" (the multiply-adds of both passes:
 * input rows x output values x horizontal taps, plus output rows x output
 * values x vertical taps) and "ns_per_value_tap". The output stage is
 * timed into a cold batch slot (each call writes the next of 64 slots of a
 * 224x224 batch, 38 MB of float32, more than the caches hold) beside a
 * memcpy of the same bytes from a warm buffer into the same slots, run for
 * run in turn ("memcpy_us", "over_memcpy"); "crop_resize_flip_output" is
 * the standard pipeline's work after the decode (a random resized crop's
 * resize, the flip, normalize into a cold slot) as a worker runs it.
 *
 * bench/ops_compare.py runs this next to torchvision and OpenCV. Build:
 *   gcc -O3 -std=c17 -D_GNU_SOURCE -ffp-contract=off -fno-math-errno -Iinclude -Isrc \
 *       bench/ops_bench.c build/libfusionflow.a -ljpeg -lspng -lm -lpthread -o build/ops_bench
 * (or the CMake target ops_bench). Options: --target-ms MS, --runs R,
 * --clock wall|thread (the monotonic clock, the default, or the thread's
 * CPU time, which other processes on a busy machine do not inflate),
 * --only SUBSTRING[,SUBSTRING...], --dump-images DIR (writes the raw RGB test
 * images img224.rgb, img320x290.rgb, img150.rgb for the peers), --list. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/image.h"
#include "kernels/resize.h"
#include "ops/augment.h"
#include "ops/ops.h"
#include "ops/pil_blur.h"
#include "pipeline/pipeline.h"

/* ------------------------------------------------------------ test images */

/* xorshift64*: the test images' noise, the same on every run. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rng_next(void) {
  rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

/* A smooth image (a few low-frequency waves per channel) with +-6 of noise:
 * a full histogram, edges and gradients, no flat areas. */
static void make_image(uint8_t *p, int w, int h) {
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < 3; c++) {
        double fx = (double)x / w, fy = (double)y / h;
        double v = 128.0 + 70.0 * sin(6.2831853 * (1.3 + 0.4 * c) * fx + 2.0 * c) * cos(6.2831853 * 0.9 * fy) +
                   40.0 * sin(6.2831853 * (2.1 * fx + (1.7 - 0.3 * c) * fy) + c) + (double)(rng_next() % 13) - 6.0;
        p[((size_t)y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : (int)v);
      }
}

static int dump(const char *dir, const char *name, const uint8_t *p, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
    fprintf(stderr, "ops_bench: cannot write %s\n", path);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------ timing */

static clockid_t clock_id = CLOCK_MONOTONIC;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(clock_id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double target_s = 0.05;
static int runs = 7;

typedef struct timing {
  double us, min_us, max_us;
  long n;
} timing;

/* Median over `runs` runs of n calls of fn(ctx), n grown until a run takes
 * about target_s. */
static timing time_fn(void (*fn)(void *), void *ctx) {
  fn(ctx), fn(ctx); /* warm caches, scratch buffers, lazy init */
  long n = 1;
  for (;;) {
    double t0 = now_s();
    for (long i = 0; i < n; i++) fn(ctx);
    double dt = now_s() - t0;
    if (dt >= target_s * 0.5 || n >= (1L << 30)) {
      if (dt > 0) {
        double want = (double)n * target_s / dt;
        n = want < 1 ? 1 : (long)want;
      }
      break;
    }
    n *= dt > 0 && target_s * 0.5 / dt < 8 ? 2 : 8;
  }
  double *t = malloc(sizeof(double) * (size_t)runs);
  if (!t) abort();
  for (int r = 0; r < runs; r++) {
    double t0 = now_s();
    for (long i = 0; i < n; i++) fn(ctx);
    t[r] = (now_s() - t0) / (double)n * 1e6;
  }
  qsort(t, (size_t)runs, sizeof(double), cmp_double);
  timing out = {runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]), t[0], t[runs - 1], n};
  free(t);
  return out;
}

/* Median times of fa(ctx) and fb(ctx) over `runs` runs each, run for run
 * in turn (a, b, a, b, ...) with the same n calls a run, n calibrated on
 * fa: the machine's drift moves both alike. */
static void time_pair(void (*fa)(void *), void (*fb)(void *), void *ctx, timing *ta, timing *tb) {
  *ta = time_fn(fa, ctx);
  long n = ta->n;
  double *t = malloc(sizeof(double) * 2 * (size_t)runs);
  if (!t) abort();
  for (int r = 0; r < runs; r++)
    for (int k = 0; k < 2; k++) {
      double t0 = now_s();
      for (long i = 0; i < n; i++) (k ? fb : fa)(ctx);
      t[k * runs + r] = (now_s() - t0) / (double)n * 1e6;
    }
  for (int k = 0; k < 2; k++) {
    double *u = t + k * runs;
    qsort(u, (size_t)runs, sizeof(double), cmp_double);
    timing x = {runs % 2 ? u[runs / 2] : 0.5 * (u[runs / 2 - 1] + u[runs / 2]), u[0], u[runs - 1], n};
    *(k ? tb : ta) = x;
  }
  free(t);
}

/* ------------------------------------------------------------ the ops */

typedef struct bench {
  const ff__image *src;    /* pristine input */
  ff__image work;          /* in-place ops: restored from src before each call */
  ff__image dst;           /* out-of-place ops */
  ff__aug aug[4];
  int naug;
  int out_w, out_h, antialias;
  ff__op_scratch scratch;
  const ff__pipeline *pipe;
  const ff__plan *plan;
  void *batch;
  ff__pil pil;
  char *cold;        /* COLD_SLOTS samples of slot_bytes: the output stage's cold batch */
  size_t slot_bytes;
  int next_slot;
  const uint8_t *warm; /* slot_bytes of source for the memcpy beside it */
} bench;

#define COLD_SLOTS 64

static void restore(bench *b) {
  memcpy(b->work.data, b->src->data, (size_t)b->src->stride * b->src->height);
}

static void fn_copy(void *p) { restore(p); }

static void fn_affine(void *p) {
  bench *b = p;
  ff__aug_affine(&b->aug[0], b->src, &b->dst);
}

static void fn_lut(void *p) {
  bench *b = p;
  restore(b);
  ff__aug_lut_run(b->aug, b->naug, &b->work, &b->work);
}

static void fn_color(void *p) {
  bench *b = p;
  restore(b);
  if (ff__aug_color(&b->aug[0], &b->work, &b->work, &b->scratch.copy) != FF_OK) abort();
}

static void fn_hflip(void *p) {
  bench *b = p;
  restore(b);
  ff__op_hflip(&b->work);
}

static void fn_resize(void *p) {
  bench *b = p;
  if (ff__op_resize(b->src, b->out_w, b->out_h, b->antialias, &b->scratch, &b->dst) != FF_OK) abort();
}

static void fn_output(void *p) {
  bench *b = p;
  ff__op_write_output(b->pipe, b->src, b->batch, 0);
}

static int cold_slot(bench *b) {
  int k = b->next_slot;
  b->next_slot = (k + 1) % COLD_SLOTS;
  return k;
}

static void fn_output_cold(void *p) {
  bench *b = p;
  ff__op_write_output(b->pipe, b->src, b->cold, cold_slot(b));
}

static void fn_memcpy_cold(void *p) {
  bench *b = p;
  memcpy(b->cold + (size_t)cold_slot(b) * b->slot_bytes, b->warm, b->slot_bytes);
}

/* The standard pipeline after its decode, as a worker runs it (exec/cpu.c
 * ff__sample_run): the plan's steps on the decoded image, then the output
 * into the slot, the last resize and flip left to the output stage. */
static void fn_pipeline_cold(void *p) {
  bench *b = p;
  ff__image img = *b->src;
  ff__error err;
  int tail = ff__ops_output_tail(b->plan, b->pipe);
  uint64_t output_ns;
  if (ff__ops_run_until(b->plan, tail >= 0 ? tail : b->plan->num_steps, &b->scratch, &img, &err) != FF_OK) {
    fprintf(stderr, "ops_bench: %s\n", err.msg);
    abort();
  }
  if (tail < 0) ff__op_write_output(b->pipe, &img, b->cold, cold_slot(b));
  else if (ff__ops_resize_to_output(b->pipe, b->plan, tail, &b->scratch, &img, b->cold, cold_slot(b), &output_ns))
    abort();
}

#define HUE 0.1           /* color_jitter(hue=0.1)'s largest factor */
#define BLUR_SIGMA 1.5f   /* gaussian_blur's sigma, within sigma=(0.1, 2.0) */

static void fn_blur(void *p) {
  bench *b = p;
  if (ff__op_gaussian_blur(b->src, b->out_w, b->out_w, BLUR_SIGMA, &b->scratch, &b->dst) != FF_OK) abort();
}

static void fn_pil(void *p) {
  bench *b = p;
  if (ff__pil_run(&b->pil, b->src, &b->dst) != FF_OK) abort();
}

static void fn_pil_blur(void *p) { /* Pillow's GaussianBlur(radius=1.5) */
  bench *b = p;
  if (ff__pil_blur_run(BLUR_SIGMA, b->src, &b->dst, &b->scratch.copy) != FF_OK) abort();
}

static void fn_erase(void *p) {
  bench *b = p;
  if (ff__op_erase(b->pipe, b->plan, b->batch, 0, &b->scratch) != FF_OK) abort();
}

static void fn_ops_run(void *p) {
  bench *b = p;
  ff__image img = *b->src; /* ff__ops_run may replace it by a scratch image */
  ff__error err;
  if (ff__ops_run(b->plan, &b->scratch, &img, &err) != FF_OK) {
    fprintf(stderr, "ops_bench: %s\n", err.msg);
    abort();
  }
}

/* ------------------------------------------------------------ main */

/* RandAugment's magnitudes at magnitude 9 of 31 bins on a 224-pixel image
 * (the values bench/ops_compare.py hands torchvision). */
#define SHEAR 0.09        /* linspace(0, 0.3, 31)[9] */
#define TRANSLATE 30.0    /* int(linspace(0, 150/331 * 224, 31)[9]) */
#define ROTATE 20.0       /* degrees */
#define FACTOR 1.27       /* brightness, color, contrast, sharpness: 1 + linspace(0, 0.9, 31)[9] */
#define POSTERIZE 7.0     /* 8 - round(9 / 7.5) bits */
#define SOLARIZE 178.5    /* linspace(255, 0, 31)[9] */

static const char *only = NULL;

static int wanted(const char *name) {
  if (!only) return 1;
  const char *p = only;
  while (*p) {
    size_t len = strcspn(p, ",");
    char part[256];
    if (len && len < sizeof part) {
      memcpy(part, p, len), part[len] = 0;
      if (strstr(name, part)) return 1;
    }
    p += len + (p[len] == ',');
  }
  return 0;
}

static int first = 1;

/* Extra fields of an op's JSON (value_taps for a resize, memcpy_us for
 * an output stage), 0: none. */
static double emit_taps, emit_memcpy_us = -1;

static void emit(const char *name, timing t, double copy_us, const char *note) {
  printf("%s\n  \"%s\": {\"us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f, \"n\": %ld, \"runs\": %d", first ? "{" : ",",
         name, t.us - copy_us, t.min_us - copy_us, t.max_us - copy_us, t.n, runs);
  if (copy_us > 0) printf(", \"copy_us\": %.3f, \"us_with_copy\": %.3f", copy_us, t.us);
  if (emit_taps > 0)
    printf(", \"value_taps\": %.0f, \"ns_per_value_tap\": %.4f", emit_taps, (t.us - copy_us) * 1e3 / emit_taps);
  if (emit_memcpy_us >= 0)
    printf(", \"memcpy_us\": %.3f, \"over_memcpy\": %.3f", emit_memcpy_us, t.us / emit_memcpy_us);
  if (note) printf(", \"note\": \"%s\"", note);
  printf("}");
  emit_taps = 0, emit_memcpy_us = -1;
  fflush(stdout);
  first = 0;
  fprintf(stderr, "ops_bench: %-35s %10.2f us  (n=%ld)\n", name, t.us - copy_us, t.n);
}

/* The multiply-adds of a resize of an in_w x in_h RGB image to out_w x
 * out_h: the horizontal pass over every input row, the vertical one over
 * every output row (kernels/resize.h's taps). */
static double resize_value_taps(int in_w, int in_h, int out_w, int out_h, int antialias) {
  double sum[2] = {0, 0};
  for (int axis = 0; axis < 2; axis++) {
    int n_in = axis ? in_h : in_w, n_out = axis ? out_h : out_w;
    ff__resize_axis a = {ff__resize_max_taps(n_in, n_out, antialias), 0, 0, 0, 0, 0};
    void *mem = malloc(ff__resize_axis_bytes(n_out, a.max_taps));
    if (!mem) abort();
    ff__resize_axis_place(&a, mem, n_out);
    ff__resize_axis_build(&a, n_in, n_out, antialias);
    for (int o = 0; o < n_out; o++) sum[axis] += a.count[o];
    free(mem);
  }
  return 3.0 * ((double)in_h * sum[0] + (double)out_w * sum[1]);
}

static ff__aug aug_of(ff__aug_op op, double arg, int bilinear) {
  ff__aug a = {op, arg, bilinear, 0, {0, 0, 0}, 0};
  return a;
}

static uint8_t *xmalloc(size_t n) {
  uint8_t *p = malloc(n);
  if (!p) {
    fprintf(stderr, "ops_bench: out of memory\n");
    exit(1);
  }
  return p;
}

int main(int argc, char **argv) {
  const char *dump_dir = NULL;
  int list = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--target-ms") && i + 1 < argc) target_s = atof(argv[++i]) / 1000.0;
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--dump-images") && i + 1 < argc) dump_dir = argv[++i];
    else if (!strcmp(argv[i], "--list")) list = 1;
    else if (!strcmp(argv[i], "--clock") && i + 1 < argc && (!strcmp(argv[i + 1], "wall") || !strcmp(argv[i + 1], "thread")))
      clock_id = !strcmp(argv[++i], "thread") ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
    else {
      fprintf(stderr,
              "usage: ops_bench [--target-ms MS] [--runs R] [--clock wall|thread] [--only SUB[,SUB...]] "
              "[--dump-images DIR] [--list]\n");
      return 2;
    }
  }
  if (runs < 1 || !(target_s > 0)) {
    fprintf(stderr, "ops_bench: --runs and --target-ms must be positive\n");
    return 2;
  }

  const int W = 224, H = 224;
  uint8_t *p224 = xmalloc((size_t)W * H * 3), *p320 = xmalloc(320 * 290 * 3), *p150 = xmalloc(150 * 150 * 3);
  uint8_t *p448 = xmalloc(448 * 336 * 3);
  make_image(p448, 448, 336);
  make_image(p224, W, H);
  make_image(p320, 320, 290);
  make_image(p150, 150, 150);
  if (dump_dir && (dump(dump_dir, "img224.rgb", p224, (size_t)W * H * 3) ||
                   dump(dump_dir, "img320x290.rgb", p320, 320 * 290 * 3) ||
                   dump(dump_dir, "img150.rgb", p150, 150 * 150 * 3)))
    return 1;
  ff__image img224 = {p224, W, H, 3, (size_t)W * 3};
  ff__image img320 = {p320, 320, 290, 3, 320 * 3};
  ff__image img150 = {p150, 150, 150, 3, 150 * 3};
  ff__image img448 = {p448, 448, 336, 3, 448 * 3};

  bench b;
  memset(&b, 0, sizeof b);
  b.src = &img224;
  b.work = (ff__image){xmalloc((size_t)W * H * 3), W, H, 3, (size_t)W * 3};
  b.dst = (ff__image){xmalloc((size_t)W * H * 3), W, H, 3, (size_t)W * 3};

  /* ---- the list of benchmarks */
  typedef struct item {
    const char *name;
    int kind; /* 0 affine, 1 lut, 2 color, 3 hflip, 4 resize, 5 output, 6 ops_run plan, 7 mix, 8 blur, 9 erase,
                 10 Pillow blur, 11 output into a cold slot beside memcpy (antialias: the pipeline), 12 the
                 standard pipeline after its decode into a cold slot */
    ff__aug aug[3];
    int naug;
    const ff__image *src;
    int out_w, out_h, antialias;
    const char *note;
  } item;
  static const struct {
    const char *name;
    ff__aug_op op;
    double arg;
  } geo[] = {{"shear_x", FF__AUG_SHEAR_X, SHEAR},
             {"shear_y", FF__AUG_SHEAR_Y, SHEAR},
             {"translate_x", FF__AUG_TRANSLATE_X, TRANSLATE},
             {"translate_y", FF__AUG_TRANSLATE_Y, TRANSLATE},
             {"rotate", FF__AUG_ROTATE, ROTATE}};
  item items[64];
  int n_items = 0;
  static char geo_names[10][64];
  for (int g = 0; g < 5; g++)
    for (int bil = 0; bil < 2; bil++) {
      char *nm = geo_names[g * 2 + bil];
      snprintf(nm, 64, "%s_%s", geo[g].name, bil ? "bilinear" : "nearest");
      items[n_items++] = (item){nm, 0, {aug_of(geo[g].op, geo[g].arg, bil)}, 1, &img224, 0, 0, 0, NULL};
    }
  items[n_items++] = (item){"brightness", 1, {aug_of(FF__AUG_BRIGHTNESS, FACTOR, 0)}, 1, &img224, 0, 0, 0, NULL};
  items[n_items++] = (item){"color", 2, {aug_of(FF__AUG_COLOR, FACTOR, 0)}, 1, &img224, 0, 0, 0, NULL};
  items[n_items++] = (item){"contrast", 2, {aug_of(FF__AUG_CONTRAST, FACTOR, 0)}, 1, &img224, 0, 0, 0, NULL};
  items[n_items++] = (item){"sharpness", 2, {aug_of(FF__AUG_SHARPNESS, FACTOR, 0)}, 1, &img224, 0, 0, 0, NULL};
  items[n_items++] = (item){"posterize", 1, {aug_of(FF__AUG_POSTERIZE, POSTERIZE, 0)}, 1, &img224, 0, 0, 0, NULL};
  items[n_items++] = (item){"solarize", 1, {aug_of(FF__AUG_SOLARIZE, SOLARIZE, 0)}, 1, &img224, 0, 0, 0, NULL};
  items[n_items++] = (item){"autocontrast", 1, {aug_of(FF__AUG_AUTOCONTRAST, 0, 0)}, 1, &img224, 0, 0, 0, NULL};
  items[n_items++] = (item){"equalize", 1, {aug_of(FF__AUG_EQUALIZE, 0, 0)}, 1, &img224, 0, 0, 0, NULL};
  items[n_items++] = (item){"invert", 1, {aug_of(FF__AUG_INVERT, 0, 0)}, 1, &img224, 0, 0, 0, NULL};
  items[n_items++] = (item){"fused_posterize_solarize_brightness",
                            1,
                            {aug_of(FF__AUG_POSTERIZE, POSTERIZE, 0), aug_of(FF__AUG_SOLARIZE, SOLARIZE, 0),
                             aug_of(FF__AUG_BRIGHTNESS, FACTOR, 0)},
                            3,
                            &img224,
                            0,
                            0,
                            0,
                            "one ff__aug_lut_run over 3 table ops"};
  items[n_items++] = (item){"resize_320x290_to_224_antialias", 4, {{0}}, 0, &img320, 224, 224, 1, NULL};
  items[n_items++] = (item){"resize_320x290_to_224_bilinear", 4, {{0}}, 0, &img320, 224, 224, 0, "antialias=false"};
  items[n_items++] = (item){"resize_150_to_224_upscale", 4, {{0}}, 0, &img150, 224, 224, 1, "antialias=true"};
  items[n_items++] = (item){"resize_320x290_to_224_bicubic", 4, {{0}}, 0, &img320, 224, 224,
                            FF__RESIZE_ANTIALIAS | FF__RESIZE_BICUBIC, "antialias=true"};
  items[n_items++] = (item){"resize_448x336_to_224_antialias", 4, {{0}}, 0, &img448, 224, 224, 1,
                            "a random resized crop's region: scales 2 and 1.5"};
  items[n_items++] = (item){"resize_448x336_to_224_bicubic", 4, {{0}}, 0, &img448, 224, 224,
                            FF__RESIZE_ANTIALIAS | FF__RESIZE_BICUBIC, "antialias=true"};
  items[n_items++] = (item){"hue", 2, {aug_of(FF__AUG_HUE, HUE, 0)}, 1, &img224, 0, 0, 0, "adjust_hue(0.1)"};
  items[n_items++] = (item){"grayscale", 2, {aug_of(FF__AUG_COLOR, 0, 0)}, 1, &img224, 0, 0, 0,
                            "3 channels (color factor 0)"};
  items[n_items++] = (item){"gaussian_blur_k5", 8, {{0}}, 0, &img224, 5, 0, 0, "sigma 1.5"};
  items[n_items++] = (item){"gaussian_blur_k23", 8, {{0}}, 0, &img224, 23, 0, 0, "sigma 1.5"};
  items[n_items++] = (item){"pil_gaussian_blur_r1.5", 10, {{0}}, 0, &img224, 0, 0, 0,
                            "Pillow's ImageFilter.GaussianBlur(1.5), gaussian_blur(semantics=pil)"};
  items[n_items++] = (item){"random_erasing_pixel", 9, {{0}}, 0, &img224, 0, 0, 1,
                            "one 112x90 box of normal noise on the float output"};
  items[n_items++] = (item){"random_erasing_const", 9, {{0}}, 0, &img224, 0, 0, 0,
                            "one 112x90 box of a constant on the float output"};
  items[n_items++] = (item){"hflip", 3, {{0}}, 0, &img224, 0, 0, 0, NULL};
  items[n_items++] = (item){"normalize_nchw_f32", 5, {{0}}, 0, &img224, 0, 0, 0, "ff__op_write_output, imagenet"};
  items[n_items++] = (item){"output_nchw_f32_cold", 11, {{0}}, 0, &img224, 0, 0, 0,
                            "ff__op_write_output, imagenet normalize, float32 NCHW, into a cold slot"};
  items[n_items++] = (item){"output_nchw_bf16_cold", 11, {{0}}, 0, &img224, 0, 0, 1,
                            "ff__op_write_output, imagenet normalize, bfloat16 NCHW, into a cold slot"};
  items[n_items++] = (item){"crop_resize_flip_output", 12, {{0}}, 0, &img448, 0, 0, 0,
                            "crop view 448x336 -> resize 224 (antialias) -> hflip -> normalize float32 NCHW, cold slot"};
  items[n_items++] = (item){"aug_mix_mixing", 7, {{0}}, 0, &img224, 0, 0, 0,
                            "ff__ops_run of MIX_BEGIN, 3x(CHAIN_BEGIN, CHAIN_END), MIX_END; no chain ops"};
  items[n_items++] = (item){"rotate_bilinear_via_ops_run", 6, {{0}}, 0, &img224, 0, 0, 0,
                            "ff__pipeline_parse + ff__plan_make + ff__ops_run, crop view + rotate(20)"};

  /* timm's geometric ops through Pillow's warp (bicubic, bilinear), fill timm's img_mean */
  static const struct {
    const char *name;
    ff__pil_op op;
    double arg;
    int resample;
  } pil_geo[] = {{"pil_rotate_bicubic", FF__PIL_ROTATE, ROTATE, FF__PIL_BICUBIC},
                 {"pil_rotate_bilinear", FF__PIL_ROTATE, ROTATE, FF__PIL_BILINEAR},
                 {"pil_shear_x_bicubic", FF__PIL_SHEAR_X, SHEAR, FF__PIL_BICUBIC},
                 {"pil_shear_x_bilinear", FF__PIL_SHEAR_X, SHEAR, FF__PIL_BILINEAR}};
  if (list) {
    for (int i = 0; i < n_items; i++) printf("%s\n", items[i].name);
    for (int g = 0; g < 4; g++) printf("%s\n", pil_geo[g].name);
    return 0;
  }

  /* ---- pipelines for the output conversion and the step runner */
  ff__error err;
  static ff__pipeline pipe_norm, pipe_rot, pipe_bf16, pipe_std;
  if (ff__pipeline_parse("decode | crop(top=0,left=0,height=224,width=224) | normalize(mean=imagenet, std=imagenet)",
                         &pipe_norm, &err) != FF_OK ||
      ff__pipeline_parse("decode | crop(top=0,left=0,height=224,width=224) | rotate(angle=20, interpolation=bilinear)",
                         &pipe_rot, &err) != FF_OK) {
    fprintf(stderr, "ops_bench: %s\n", err.msg);
    return 1;
  }
  /* the pipelines' own output setting, as the loader makes it */
  if (ff__pipeline_parse("decode | crop(top=0,left=0,height=224,width=224) | normalize(mean=imagenet, std=imagenet)",
                         &pipe_bf16, &err) != FF_OK ||
      ff__pipeline_set_output(&pipe_bf16, FF_OUTPUT_BFLOAT16, FF_MEMORY_FORMAT_CONTIGUOUS, &err) != FF_OK ||
      ff__pipeline_parse("decode | crop(top=0,left=0,height=336,width=448) | resize(size=(224, 224)) "
                         "| random_horizontal_flip(p=1) | normalize(mean=imagenet, std=imagenet)",
                         &pipe_std, &err) != FF_OK ||
      ff__pipeline_set_output(&pipe_std, FF_OUTPUT_DTYPE_AUTO, 0, &err) != FF_OK) {
    fprintf(stderr, "ops_bench: %s\n", err.msg);
    return 1;
  }
  static ff__plan plan_rot, plan_mix, plan_std;
  ff__image_info info;
  memset(&info, 0, sizeof info);
  info.width = W, info.height = H;
  ff__plan_make(&pipe_rot, 0, 0, 0, &info, 0, &plan_rot);
  ff__image_info info448 = info;
  info448.width = 448, info448.height = 336;
  ff__plan_make(&pipe_std, 0, 0, 0, &info448, 0, &plan_std);
  /* AugMix's mixing alone (fixed weights: m0 = 0.3, chain weights 0.7 *
   * (0.5, 0.3, 0.2)); each chain is empty, so this is the copies and the
   * float32 accumulation the runner adds around the chains' ops. */
  static const float chain_w[3] = {0.35f, 0.21f, 0.14f};
  plan_mix.steps[plan_mix.num_steps++] = (ff__step){.kind = FF__STEP_MIX_BEGIN, .weight = 0.3f};
  for (int c = 0; c < 3; c++) {
    plan_mix.steps[plan_mix.num_steps++] = (ff__step){.kind = FF__STEP_CHAIN_BEGIN};
    plan_mix.steps[plan_mix.num_steps++] = (ff__step){.kind = FF__STEP_CHAIN_END, .weight = chain_w[c]};
  }
  plan_mix.steps[plan_mix.num_steps++] = (ff__step){.kind = FF__STEP_MIX_END};
  static ff__plan plan_erase[2]; /* const, noise */
  for (int k = 0; k < 2; k++) {
    plan_erase[k].steps[0] = (ff__step){.kind = FF__STEP_ERASE, .x = 50, .y = 60, .w = 112, .h = 90, .antialias = k,
                                        .noise_key = 12345};
    plan_erase[k].num_steps = 1;
  }
  float *batch = malloc(sizeof(float) * 3 * W * H);
  if (!batch) return 1;
  b.slot_bytes = sizeof(float) * 3 * W * H;
  b.cold = (char *)xmalloc(b.slot_bytes * COLD_SLOTS);
  memset(b.cold, 0, b.slot_bytes * COLD_SLOTS); /* its pages mapped, as a reused batch's are */
  uint8_t *warm = xmalloc(b.slot_bytes);
  memset(warm, 1, b.slot_bytes);
  b.warm = warm;

  /* the memcpy that restores the image before each in-place op: timed
   * before the first in-place op (not at all when none is selected) */
  timing copy = {-1, 0, 0, 0};

  for (int i = 0; i < n_items; i++) {
    const item *it = &items[i];
    if (!wanted(it->name)) continue;
    b.src = it->src;
    memcpy(b.aug, it->aug, sizeof it->aug);
    b.naug = it->naug;
    b.out_w = it->out_w, b.out_h = it->out_h, b.antialias = it->antialias;
    if (it->kind == 4) b.dst = (ff__image){b.dst.data, it->out_w, it->out_h, 3, (size_t)it->out_w * 3};
    else b.dst = (ff__image){b.dst.data, W, H, 3, (size_t)W * 3};
    if (it->kind >= 1 && it->kind <= 3 && copy.us < 0) {
      copy = time_fn(fn_copy, &b);
      fprintf(stderr, "ops_bench: %-35s %10.2f us  (n=%ld)\n", "(restore memcpy)", copy.us, copy.n);
    }
    timing t;
    double sub = 0;
    switch (it->kind) {
    case 0: t = time_fn(fn_affine, &b); break;
    case 1: t = time_fn(fn_lut, &b), sub = copy.us; break;
    case 2: t = time_fn(fn_color, &b), sub = copy.us; break;
    case 3: t = time_fn(fn_hflip, &b), sub = copy.us; break;
    case 4:
      t = time_fn(fn_resize, &b);
      emit_taps = resize_value_taps(it->src->width, it->src->height, it->out_w, it->out_h, it->antialias);
      break;
    case 11: {
      timing m;
      const ff__pipeline *pp = it->antialias ? &pipe_bf16 : &pipe_norm;
      b.pipe = pp, b.slot_bytes = ff__pipeline_sample_bytes(pp);
      time_pair(fn_output_cold, fn_memcpy_cold, &b, &t, &m);
      emit_memcpy_us = m.us;
      break;
    }
    case 12: {
      timing m;
      b.pipe = &pipe_std, b.plan = &plan_std, b.slot_bytes = ff__pipeline_sample_bytes(&pipe_std);
      time_pair(fn_pipeline_cold, fn_memcpy_cold, &b, &t, &m);
      emit_memcpy_us = m.us;
      break;
    }
    case 5:
      b.pipe = &pipe_norm, b.batch = batch;
      t = time_fn(fn_output, &b);
      break;
    case 6:
      b.plan = &plan_rot;
      t = time_fn(fn_ops_run, &b);
      break;
    case 8: t = time_fn(fn_blur, &b); break;
    case 10: t = time_fn(fn_pil_blur, &b); break;
    case 9:
      b.pipe = &pipe_norm, b.batch = batch, b.plan = &plan_erase[it->antialias];
      t = time_fn(fn_erase, &b);
      break;
    default:
      b.plan = &plan_mix;
      t = time_fn(fn_ops_run, &b);
      break;
    }
    emit(it->name, t, sub, it->note);
  }
  b.src = &img224, b.dst = (ff__image){b.dst.data, W, H, 3, (size_t)W * 3};
  for (int g = 0; g < 4; g++) {
    if (!wanted(pil_geo[g].name)) continue;
    b.pil = (ff__pil){pil_geo[g].op, pil_geo[g].arg, pil_geo[g].resample, {124, 116, 104}};
    emit(pil_geo[g].name, time_fn(fn_pil, &b), 0, "Pillow semantics, fill (124, 116, 104)");
  }
  printf("%s\n", first ? "{}" : "\n}");
  ff__op_scratch_free(&b.scratch);
  free(batch), free(b.work.data), free(b.dst.data), free(p224), free(p320), free(p150), free(p448);
  free(b.cold), free(warm);
  return 0;
}
