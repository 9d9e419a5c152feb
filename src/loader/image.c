/* image.c — one image through a pipeline, outside any loader: what
 * `fusionflow augment` shows and what a user inspects a policy with. The
 * sample is planned exactly as a loader would plan it for the same
 * (seed, epoch, index), so the picture is the one training would see
 * (before the final to_dtype/normalize). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cpu.h"

ff_status ff_image_augment(const char *path, const char *pipeline, uint64_t seed, uint64_t epoch, uint64_t index,
                           uint8_t **out, int *height, int *width, char *errbuf, size_t errbuf_size) {
  return ff_image_augment_as(path, pipeline, FF_SEMANTICS_V1, seed, epoch, index, out, height, width, errbuf,
                             errbuf_size);
}

ff_status ff_image_augment_as(const char *path, const char *pipeline, ff_semantics semantics, uint64_t seed,
                              uint64_t epoch, uint64_t index, uint8_t **out, int *height, int *width, char *errbuf,
                              size_t errbuf_size) {
  ff__error err = {0};
  ff__pipeline *pipe = malloc(sizeof *pipe);
  ff__worker w = {0};
  ff_status st = pipe ? FF_OK : ff__error_set(&err, FF_ENOMEM, "out of memory");
  if (!st && (!path || !out || !height || !width))
    st = ff__error_set(&err, FF_EINVAL, "path, out, height and width are required");
  if (!st) st = ff__pipeline_parse_image(pipeline, semantics, pipe, &err);
  ff__image img;
  if (!st) {
    ff_config c; /* the loader's default limits: every image the pipeline makes is checked */
    ff_config_init(&c);
    ff__sample_job job = {.path = path, .seed = seed, .epoch = epoch, .index = index, .max_pixels = c.max_image_pixels,
                          .max_scans = c.max_jpeg_scans, .max_metadata_bytes = c.max_metadata_bytes,
                          .max_member_bytes = ff__member_bytes_limit(&c)};
    st = ff__sample_image(&w, pipe, &job, &img, NULL, &err);
  }
  if (!st) {
    size_t row = (size_t)img.width * 3;
    uint8_t *pixels = malloc(row * img.height);
    if (!pixels) st = ff__error_set(&err, FF_ENOMEM, "out of memory for %dx%d pixels", img.width, img.height);
    for (int y = 0; pixels && y < img.height; y++) memcpy(pixels + y * row, img.data + y * img.stride, row);
    if (pixels) *out = pixels, *height = img.height, *width = img.width;
  }
  if (errbuf && errbuf_size) /* the error, or on success the damage the decoder repaired ("" for none) */
    snprintf(errbuf, errbuf_size, "%s", st ? err.msg : w.warning.status ? w.warning.msg : "");
  ff__worker_free(&w);
  free(pipe);
  return st;
}

void ff_free(void *ptr) { free(ptr); }
