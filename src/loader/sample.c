/* sample.c — one sample, or one epoch's order, outside the ring: what a
 * script that reads a DataLoader's dataset and sampler asks of a loader
 * (dataset[i], ImageFolder.samples, iterating the sampler). A sample runs on
 * the calling thread with its own worker memory, planned exactly as a
 * worker plans it for (seed, epoch, index), so it is bit-identical to its
 * place in a batch; the order is computed afresh, as the workers compute
 * it. Nothing here touches the ring, the workers or the lock, and the
 * loader's index and pipelines are read-only once it is open. */
#include <stdlib.h>
#include <string.h>

#include "loader/loader_internal.h"
#include "loader/sampler.h"
#include "source/stream.h"

static ff_status check_open(ff_loader *l) {
  if (!l->started_threads) return ff__error_set(&l->err, FF_EINVAL, "the loader failed to open");
  return FF_OK;
}

ff_status ff_loader_sample_info(const ff_loader *cl, size_t i, const char **path, int64_t *label) {
  ff_loader *l = (ff_loader *)cl; /* only the message on failure is written */
  ff_status st = check_open(l);
  if (st) return st;
  if (i >= l->index.count)
    return ff__error_set(&l->err, FF_EINVAL, "sample %zu is past the %zu samples of the data set", i,
                         l->index.count);
  if (path) *path = l->index.paths[i];
  if (label) *label = l->index.labels ? l->index.labels[i] : -1;
  return FF_OK;
}

/* The pipeline of view v (the loader's pipeline without views). */
static const ff__pipeline *view_pipe(const ff_loader *l, int v) {
  return l->views.num_groups ? &l->views.pipes[l->views.group_of[v]] : &l->pipe;
}

/* One sample's image of pipeline p at data: (3, H, W) or (H, W, 3), as a
 * batch's images less the batch dimension. */
static void sample_tensor(const ff__pipeline *p, void *data, ff_tensor *out) {
  int64_t h = p->out_height, w = p->out_width;
  memset(out, 0, sizeof *out);
  out->data = data;
  out->ndim = 3;
  out->dtype = (ff_dtype)p->out_dtype;
  out->layout = p->out_planar ? FF_NCHW : FF_NHWC;
  int64_t planar[2][3] = {{3, h, w}, {h * w, w, 1}}, last[2][3] = {{3, h, w}, {1, w * 3, 3}},
          hwc[2][3] = {{h, w, 3}, {w * 3, 3, 1}};
  int64_t(*d)[3] = p->out_planar ? planar : p->out_channels_last ? last : hwc;
  memcpy(out->shape, d[0], sizeof d[0]), memcpy(out->strides, d[1], sizeof d[1]);
}

ff_status ff_loader_sample_images(ff_loader *l, size_t i, uint64_t epoch, ff_tensor *views_out, size_t num_views,
                                  int64_t *label) {
  ff_status st = check_open(l);
  if (st) return st;
  int n = l->views.num_groups ? l->views.num_views : 1;
  if (!views_out || !label || num_views < (size_t)n)
    return ff__error_set(&l->err, FF_EINVAL, "views_out (room for %d view(s)) and label are required", n);
  if (i >= l->index.count)
    return ff__error_set(&l->err, FF_EINVAL, "sample %zu is past the %zu samples of the data set", i,
                         l->index.count);
  if (l->index.streamed)
    return ff__error_set(&l->err, FF_EINVAL, "%s: a streamed source has no random access: its samples are "
                         "read in stream order only", l->cfg.source ? l->cfg.source : "the source");
  size_t offset[FF__VIEWS_MAX], bytes = 0;
  for (int v = 0; v < n; v++) offset[v] = bytes, bytes += ff__pipeline_sample_bytes(view_pipe(l, v));
  char *mem = malloc(bytes ? bytes : 1);
  if (!mem) return ff__error_set(&l->err, FF_ENOMEM, "out of memory for a sample of %zu bytes", bytes);

  const ff_config *c = &l->cfg;
  ff__sample_job job = {.path = l->index.paths[i], .seed = c->seed, .epoch = epoch, .index = (uint64_t)i,
                        .max_pixels = c->max_image_pixels, .max_scans = c->max_jpeg_scans,
                        .max_metadata_bytes = c->max_metadata_bytes, .strict = c->strict_decode,
                        .reader = l->index.reader};
  ff__index_locate(&l->index, i, &job.shard, &job.offset, &job.length);
  ff__worker w = {.label = -1};
  ff__view_scratch scratch = {0};
  ff__error err = {0}; /* the handle's message is written only on failure */
  st = l->views.num_groups ? ff__views_run(&l->views, &w, &scratch, &job, mem, offset, 0, &err)
                           : ff__sample_run(&w, &l->pipe, &job, mem, 0, &err);
  int64_t got = l->index.labels ? l->index.labels[i] : w.label;
  ff__view_scratch_free(&scratch);
  ff__worker_free(&w);
  if (st) {
    free(mem);
    return ff__error_set(&l->err, st, "%s", err.msg);
  }
  for (int v = 0; v < n; v++) sample_tensor(view_pipe(l, v), mem + offset[v], &views_out[v]);
  *label = got;
  return FF_OK;
}

void ff_loader_shard(const ff_loader *l, int *rank, int *world_size) {
  if (rank) *rank = l->cfg.rank;
  if (world_size) *world_size = l->cfg.world_size;
}

ff_status ff_loader_epoch_order(ff_loader *l, uint64_t epoch, int64_t *out, size_t cap) {
  ff_status st = check_open(l);
  if (st) return st;
  if (!out || cap < l->num_samples)
    return ff__error_set(&l->err, FF_EINVAL, "out needs room for the %zu samples of an epoch", l->num_samples);
  if (l->stream) {
    ff__stream_order(l->stream, epoch, out);
    return FF_OK;
  }
  const ff_config *c = &l->cfg;
  size_t n = l->index.count;
  int64_t *perm = malloc((n ? n : 1) * sizeof *perm);
  uint32_t *repeat = c->repeated_augmentations ? malloc((l->num_samples ? l->num_samples : 1) * sizeof *repeat)
                                               : NULL;
  if (!perm || (c->repeated_augmentations && !repeat)) {
    free(perm), free(repeat);
    return ff__error_set(&l->err, FF_ENOMEM, "out of memory for the order of %zu samples", n);
  }
  if (c->repeated_augmentations)
    ff__sampler_ra_indices(n, c->shuffle, c->permutation, c->seed, epoch, c->rank, c->world_size,
                           c->repeated_augmentations, perm, out, repeat);
  else
    ff__sampler_indices(n, c->shuffle, c->permutation, c->seed, epoch, c->rank, c->world_size,
                        c->sampler_drop_last, perm, out);
  free(perm), free(repeat);
  return FF_OK;
}
