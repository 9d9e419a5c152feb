/* batch.c — the public face of a batch handed out (ff_batch_*): its
 * tensors (images per view, labels, soft labels) as DLPack-shaped views of
 * the ring entry's memory, its identity and statistics, and the device
 * handles of a batch on an output device. Every accessor only reads the
 * entry, which is the consumer's until ff_batch_release. */
#include <string.h>

#include "loader/loader_internal.h"

size_t ff_batch_size(const ff_batch *b) { return b->size; }
size_t ff_batch_index(const ff_batch *b) { return b->index; }
uint64_t ff_batch_epoch(const ff_batch *b) { return b->epoch; }
const int64_t *ff_batch_sample_indices(const ff_batch *b) { return b->sample_indices; }
void ff_batch_stats(const ff_batch *b, ff_batch_info *out) { *out = b->stats; }
const char *ff_batch_device(const ff_batch *b) { return b->d_images ? b->loader->out_device_name : "cpu"; }
void ff_batch_dlpack_device(const ff_batch *b, int *device_type, int *device_id) {
  const char *name = ff_batch_device(b); /* emu: host memory, as DLPack sees it */
  int cuda = ff__device_name_kind(name) == FF__DEVICE_KIND_CUDA;
  *device_type = cuda ? 2 : 1; /* DLPack's kDLCUDA, kDLCPU */
  *device_id = cuda ? ff__device_name_ordinal(name) : 0;
}
void *ff_batch_stream(const ff_batch *b) {
  return b->d_images ? ff__device_stream_handle(b->loader->out_dev, b->loader->out_stream) : NULL;
}
void *ff_batch_event(const ff_batch *b) { return b->d_images ? (void *)b->ready : NULL; }

ff_status ff_batch_sync(const ff_batch *b) {
  return b->d_images ? ff__device_event_wait(b->loader->out_dev, b->ready, NULL) : FF_OK;
}

ff_status ff_batch_wait_on(const ff_batch *b, void *stream) {
  return b->d_images ? ff__device_foreign_wait(b->loader->out_dev, stream, b->ready, NULL) : FF_OK;
}

size_t ff_loader_num_views(const ff_loader *l) { return l->views.num_groups ? (size_t)l->views.num_views : 1; }

ff_status ff_batch_view_images(const ff_batch *b, size_t view, ff_tensor *out) {
  const ff_loader *l = b->loader;
  if (view >= ff_loader_num_views(l)) return memset(out, 0, sizeof *out), FF_EINVAL;
  const ff__pipeline *p = l->views.num_groups ? &l->views.pipes[l->views.group_of[view]] : &l->pipe;
  int64_t n = (int64_t)b->size, h = p->out_height, w = p->out_width;
  memset(out, 0, sizeof *out);
  out->data = (char *)(b->d_images ? b->d_images : b->images) + (l->views.num_groups ? l->view_offset[view] : 0);
  out->ndim = 4;
  out->dtype = (ff_dtype)p->out_dtype;
  if (p->out_planar) {
    out->layout = FF_NCHW;
    int64_t shape[4] = {n, 3, h, w}, strides[4] = {3 * h * w, h * w, w, 1};
    memcpy(out->shape, shape, sizeof shape), memcpy(out->strides, strides, sizeof strides);
  } else if (p->out_channels_last) { /* NHWC memory as torch's channels_last sees it */
    out->layout = FF_NHWC;
    int64_t shape[4] = {n, 3, h, w}, strides[4] = {h * w * 3, 1, w * 3, 3};
    memcpy(out->shape, shape, sizeof shape), memcpy(out->strides, strides, sizeof strides);
  } else {
    out->layout = FF_NHWC;
    int64_t shape[4] = {n, h, w, 3}, strides[4] = {h * w * 3, w * 3, 3, 1};
    memcpy(out->shape, shape, sizeof shape), memcpy(out->strides, strides, sizeof strides);
  }
  return FF_OK;
}

void ff_batch_images(const ff_batch *b, ff_tensor *out) { ff_batch_view_images(b, 0, out); }

ff_status ff_batch_soft_labels(const ff_batch *b, ff_tensor *out) {
  memset(out, 0, sizeof *out);
  if (!b->soft_labels) return FF_EINVAL;
  out->data = b->soft_labels;
  out->dtype = FF_FLOAT32;
  out->ndim = 2;
  out->shape[0] = (int64_t)b->size, out->shape[1] = b->loader->pipe.mix.num_classes;
  out->strides[0] = out->shape[1], out->strides[1] = 1;
  return FF_OK;
}

void ff_batch_labels(const ff_batch *b, ff_tensor *out) {
  memset(out, 0, sizeof *out);
  out->data = b->labels;
  out->dtype = FF_INT64;
  out->ndim = 1;
  out->shape[0] = (int64_t)b->size;
  out->strides[0] = 1;
}
