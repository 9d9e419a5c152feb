/* views_window.c — what decoding only the views' shared window saves.
 *
 *   find DIR -name '*.jpg' | sort | views_window [--runs R] PIPELINE
 *
 * PIPELINE is a view pipeline (`decode || 2 x OPS || 8 x OPS`). For each
 * image named on stdin (read into memory first) the views of sample i (its
 * place in the list, seed 0, epoch 0) are planned as the loader plans them
 * and their window is taken (ff__views_window); then, image by image, the
 * window decode and the whole decode (ff__codec_decode, as the loader calls
 * it) are timed one after the other, in alternating order, in this
 * thread's CPU time, so that other processes' load does not count. Each of
 * R runs sums both over the images; the best run of each is kept. Prints
 * one JSON object: images, the share of them whose window is smaller than
 * the image, decoded pixels (window / whole), and milliseconds per image
 * (window, whole, their ratio). One thread. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec/codec.h"
#include "pipeline/views.h"

typedef struct image {
  uint8_t *data;
  size_t size_bytes;
  ff__decode_req window;
  uint64_t whole_pixels, window_pixels;
} image;

static double cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static uint8_t *read_file(const char *path, size_t *size_bytes) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *p = n > 0 ? malloc((size_t)n) : NULL;
  if (p && fread(p, 1, (size_t)n, f) != (size_t)n) free(p), p = NULL;
  fclose(f);
  *size_bytes = (size_t)n;
  return p;
}

/* Decodes image im with req (its window, or the whole image); CPU ms. */
static double decode_ms(const image *im, const ff__decode_req *req, ff__buf *pixels) {
  ff__error err = {0};
  ff__image out;
  double t0 = cpu_ms();
  if (ff__codec_decode(im->data, im->size_bytes, "image", req, pixels, &out, &err)) {
    fprintf(stderr, "views_window: %s\n", err.msg);
    exit(1);
  }
  return cpu_ms() - t0;
}

int main(int argc, char **argv) {
  int runs = 3, a = 1;
  if (argc > 2 && !strcmp(argv[1], "--runs")) runs = atoi(argv[2]), a = 3;
  if (a + 1 != argc || runs < 1) {
    fprintf(stderr, "usage: find DIR -name '*.jpg' | sort | views_window [--runs R] PIPELINE\n");
    return 2;
  }
  ff__views v;
  ff__error err = {0};
  if (ff__views_parse(argv[a], &v, &err) || !v.num_groups) {
    fprintf(stderr, "views_window: %s\n", v.num_groups ? err.msg : "the pipeline has no views ('||')");
    return 2;
  }
  ff__plan *plans = calloc((size_t)v.num_views, sizeof *plans);
  image *images = NULL;
  size_t n = 0, cap = 0, smaller = 0;
  double whole_px = 0, window_px = 0;
  char path[4096];
  while (plans && fgets(path, sizeof path, stdin)) {
    path[strcspn(path, "\n")] = 0;
    if (n == cap && !(images = realloc(images, (cap = cap ? 2 * cap : 256) * sizeof *images))) return 1;
    image *im = &images[n];
    ff__image_info info;
    if (!(im->data = read_file(path, &im->size_bytes)) ||
        ff__codec_probe(im->data, im->size_bytes, path, 0, &info, &err)) {
      fprintf(stderr, "views_window: %s: %s\n", path, err.status ? err.msg : "cannot read");
      return 1;
    }
    for (int k = 0; k < v.num_views; k++)
      ff__plan_make(&v.pipes[v.group_of[k]], 0, 0, ff__view_draw_index(n, 0, k), &info, 0, &plans[k]);
    im->window = (ff__decode_req){0};
    ff__views_window(plans, v.num_views, &info, &im->window);
    im->whole_pixels = (uint64_t)info.width * (uint64_t)info.height;
    im->window_pixels = im->window.crop_width
                            ? (uint64_t)im->window.crop_width * (uint64_t)im->window.crop_height
                            : im->whole_pixels;
    smaller += im->window.crop_width != 0;
    whole_px += (double)im->whole_pixels, window_px += (double)im->window_pixels;
    n++;
  }
  if (!n) {
    fprintf(stderr, "views_window: no images on stdin\n");
    return 2;
  }
  ff__buf pixels = {0};
  const ff__decode_req whole = {0};
  double best_window = 0, best_whole = 0;
  for (int r = 0; r < runs; r++) {
    double t_window = 0, t_whole = 0;
    for (size_t i = 0; i < n; i++) {
      if ((i + (size_t)r) % 2) t_whole += decode_ms(&images[i], &whole, &pixels);
      t_window += decode_ms(&images[i], &images[i].window, &pixels);
      if (!((i + (size_t)r) % 2)) t_whole += decode_ms(&images[i], &whole, &pixels);
    }
    if (!r || t_window < best_window) best_window = t_window;
    if (!r || t_whole < best_whole) best_whole = t_whole;
  }
  printf("{\"images\": %zu, \"window_smaller_share\": %.4f, \"decoded_pixels_window_over_whole\": %.4f, "
         "\"window_ms_per_image\": %.4f, \"whole_ms_per_image\": %.4f, \"time_window_over_whole\": %.4f, "
         "\"runs\": %d}\n",
         n, (double)smaller / (double)n, window_px / whole_px, best_window / (double)n,
         best_whole / (double)n, best_window / best_whole, runs);
  for (size_t i = 0; i < n; i++)
    free(images[i].data);
  free(images);
  free(plans);
  ff__buf_free(&pixels);
  ff__views_free(&v);
  return 0;
}
