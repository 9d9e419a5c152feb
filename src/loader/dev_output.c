/* dev_output.c — batches handed out in a device's memory
 * (ff_config.output_device "cuda:N" / "emu:N"), so that a trainer on that
 * GPU reads them where they are instead of uploading them on its own
 * thread.
 *
 * Each ring entry has its images on the device (from the device's pool,
 * taken at open: the ring is the loader's standing memory) next to its
 * pinned host images (batch_mem.c pins with the output device). The
 * workers still fill the host images; at ff_loader_next the batch goes up
 * with one asynchronous copy on the loader's output stream, then its ready
 * event is recorded: the consumer's stream waits for that event
 * (ff_batch_wait_on, DLPack's stream argument), not the consumer's thread.
 * The memory's next use waits for the consumer: ff_batch_release_after
 * records an event on the consumer's stream and the next upload into that
 * entry is ordered after it on the device; the host images are reused by
 * the workers only after the upload that read them is done (the release
 * waits for it, sleeping: events are blocking-sync).
 *
 * When the output device is the offload device the two share one handle
 * (one pool, one emulator or context), and the feeder writes its finished
 * samples straight into the entry's device images (direct aggregation,
 * ff__offload_direct), its stream waiting for the consumer's release
 * first; the upload then carries only the host-prepared samples, one copy
 * per run of consecutive positions. A skipped sample (on_error=skip)
 * moves the later ones down: on the device that is a device-to-device
 * copy, queued in position order on the output stream so no source is
 * overwritten before it is read. With another output device the
 * device-prepared samples come down to the host batch and go up again
 * (counted as host round trips). The host's samples go up as uint8 for the
 * device to convert, unless the pipeline erases (random_erasing writes the
 * float32 output on the host): then as float32.
 *
 * A pipeline ending in mixup_cutmix mixes the device batch: after the
 * upload (and the device's conversion) has put every sample in place, the
 * plan the consumer thread drew (loader.c) goes up and one launch mixes
 * the images in place (exec/dev_mix.h), all on the output stream before
 * the ready event, so the consumer sees the mixed batch; the soft labels
 * stay in host memory, as the labels do.
 *
 * A pipeline with views runs on the CPU; on a device output each view's
 * tensor goes up in one copy, at the offset it has in the host batch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/dev_convert.h"
#include "exec/dev_mix.h"
#include "loader/loader_internal.h"

/* Whether the host's samples go up as uint8 for the device to convert. */
static int uint8_transport(const ff_loader *l) {
  return l->host_pipe.output != l->pipe.output || l->host_pipe.out_custom != l->pipe.out_custom;
}

/* The bytes of one batch's images: batch_cap samples, of every view. */
static size_t batch_bytes(const ff_loader *l) {
  int last = l->views.num_views - 1;
  if (!l->views.num_groups) return (size_t)l->batch_cap * l->sample_bytes;
  return l->view_offset[last] + (size_t)l->batch_cap * l->view_bytes[last];
}

void ff__dev_output_host_pipe(ff_loader *l) {
  const char *out = l->cfg.output_device;
  int on_device = out && (!strncmp(out, "cuda", 4) || !strncmp(out, "emu", 3));
  if (!on_device || l->views.num_groups || (l->pipe.output != FF__OUTPUT_NCHW_F32 && !l->pipe.out_custom) ||
      !ff__pipeline_uint8_transport(&l->pipe, &l->host_pipe))
    l->host_pipe = l->pipe;
}

ff_status ff__dev_output_open(ff_loader *l) {
  const char *name = l->cfg.output_device;
  if (!name || !strcmp(name, "cpu")) return FF_OK;
  if (!strncmp(name, "auto", 4))
    return ff__error_set(&l->err, FF_EINVAL, "output_device '%s': expected cpu, cuda:N or emu:N", name);
  ff__error err = {0};
  ff__device_options opt;
  ff__device_options_init(&opt);
  opt.alloc_hook = l->cfg.device_alloc, opt.free_hook = l->cfg.device_free,
  opt.hook_ctx = l->cfg.device_alloc_ctx;
  ff__device *shared = ff__offload_device(l->offload);
  ff_status st = FF_OK;
  if (ff__device_is(shared, name))
    l->out_dev = ff__device_retain(shared), l->out_direct = 1;
  else
    st = ff__device_open(name, &opt, &l->out_dev, &err);
  if (!st) st = ff__device_stream_create(l->out_dev, &l->out_stream, &err);
  size_t bytes = batch_bytes(l);
  for (int i = 0; i < l->ring_size && !st; i++) {
    ff_batch *e = &l->ring[i];
    e->dev_slot = malloc((size_t)l->batch_cap * sizeof *e->dev_slot);
    if (!e->dev_slot) st = ff__error_set(&err, FF_ENOMEM, "out of memory");
    if (!st) st = ff__device_alloc(l->out_dev, bytes, &e->d_images, &err);
    if (st == FF__EBUDGET)
      st = ff__error_set(&err, FF_EDEVICE, "no device memory for %d batches of %zu bytes: %s", l->ring_size,
                         bytes, err.msg);
    if (!st) st = ff__device_event_create(l->out_dev, &e->ready, &err);
    if (!st) st = ff__device_event_create(l->out_dev, &e->released, &err);
    if (!st && l->pipe.has_mix) {
      size_t table = ff__dev_mix_bytes(l->batch_cap);
      st = ff__device_alloc(l->out_dev, table, &e->d_mix, &err);
      if (!st) st = ff__device_host_alloc(l->out_dev, table, &e->h_mix, &err);
      if (st == FF__EBUDGET)
        st = ff__error_set(&err, FF_EDEVICE, "no device memory for the mixup_cutmix tables of %d batches: %s",
                           l->ring_size, err.msg);
    }
    if (st || !uint8_transport(l)) continue;
    size_t table = ff__dev_convert_bytes(l->batch_cap);
    st = ff__device_alloc(l->out_dev, (size_t)l->batch_cap * l->host_sample_bytes, &e->d_stage, &err);
    if (!st) st = ff__device_alloc(l->out_dev, table, &e->d_table, &err);
    if (!st) st = ff__device_host_alloc(l->out_dev, table, &e->h_table, &err);
    if (!st && !(e->host_positions = malloc((size_t)l->batch_cap * sizeof *e->host_positions)))
      st = ff__error_set(&err, FF_ENOMEM, "out of memory");
    if (st == FF__EBUDGET)
      st = ff__error_set(&err, FF_EDEVICE, "no device memory for the uint8 staging of %d batches: %s", l->ring_size,
                         err.msg);
  }
  if (st) return ff__error_set(&l->err, st, "output_device %s", err.msg);
  snprintf(l->out_device_name, sizeof l->out_device_name, "%s", name);
  return FF_OK;
}

void ff__dev_output_begin(ff_loader *l, ff_batch *e) {
  if (!l->out_dev) return;
  for (int s = 0; s < l->batch_cap; s++) e->dev_slot[s] = -1;
  ff__offload_direct(l->offload, (int)(e - l->ring), l->out_direct ? e->d_images : NULL,
                     e->release_pending ? e->released : NULL);
}

void ff__dev_output_took(ff_loader *l, ff_batch *e, const unsigned char *on_device) {
  if (!l->out_dev) return;
  for (int s = 0; on_device && s < l->batch_cap; s++)
    if (on_device[s]) e->dev_slot[s] = s;
}

/* Queues e's images into e->d_images on the output stream: the host runs
 * up (as uint8 into the staging under uint8 transport, then converted in
 * one launch), the in-place samples moved down where skips left gaps. */
static ff_status put_images(ff_loader *l, ff_batch *e, ff__error *err) {
  size_t sb = l->sample_bytes, hb = l->host_sample_bytes, n = e->size;
  for (int v = 0; v < l->views.num_views; v++) { /* views: each view's tensor in one copy (all from the host) */
    size_t at = l->view_offset[v], bytes = n * l->view_bytes[v];
    ff_status st = ff__device_upload(l->out_dev, l->out_stream, (char *)e->d_images + at, (char *)e->images + at,
                                     bytes, err);
    if (st) return st;
    e->stats.output_uploads++, e->stats.output_upload_bytes += bytes;
  }
  if (l->views.num_groups) return FF_OK;
  int convert = uint8_transport(l), converted = 0;
  char *d = e->d_images, *up = convert ? e->d_stage : e->d_images;
  const char *h = e->images;
  ff_status st = FF_OK;
  for (size_t i = 0; i < n && !st;) {
    if (e->dev_slot[i] >= 0) {
      size_t from = (size_t)e->dev_slot[i++];
      if (from != i - 1) st = ff__device_copy(l->out_dev, l->out_stream, d + (i - 1) * sb, d + from * sb, sb, err);
      continue;
    }
    size_t run = i;
    for (; i < n && e->dev_slot[i] < 0; i++)
      if (convert) e->host_positions[converted++] = (int)i;
    st = ff__device_upload(l->out_dev, l->out_stream, up + run * hb, h + run * hb, (i - run) * hb, err);
    e->stats.output_uploads++, e->stats.output_upload_bytes += (i - run) * hb;
  }
  if (!st && convert)
    st = ff__dev_convert(l->out_dev, l->out_stream, &l->pipe, e->h_table, e->d_table, e->d_stage,
                         e->host_positions, converted, d, err);
  if (!l->out_direct) e->stats.host_round_trips = e->stats.device_samples;
  return st;
}

ff_status ff__dev_output_hand_out(ff_loader *l, ff_batch *e) {
  if (!l->out_dev) return FF_OK;
  ff__error err = {0};
  ff_status st = FF_OK;
  if (e->release_pending) st = ff__device_stream_wait(l->out_dev, l->out_stream, e->released, &err);
  e->release_pending = 0;
  ff__device_range_push(l->out_dev, "fusionflow: batch to output_device");
  if (!st) st = put_images(l, e, &err);
  if (!st && l->pipe.has_mix)
    st = ff__dev_mix(l->out_dev, l->out_stream, &l->mix_plan, l->pipe.out_height, l->pipe.out_width, e->h_mix,
                     e->d_mix, e->d_images, &err);
  ff__device_range_pop(l->out_dev);
  if (!st) st = ff__device_event_record(l->out_dev, e->ready, l->out_stream, &err);
  pthread_mutex_lock(&l->mu);
  l->stats.output_upload_bytes += e->stats.output_upload_bytes, l->stats.host_round_trips += e->stats.host_round_trips;
  pthread_mutex_unlock(&l->mu);
  if (st) return ff__error_set(&l->err, st, "output_device: %s", err.msg);
  return FF_OK;
}

void ff__dev_output_release(ff_loader *l, ff_batch *e, void *handle) {
  if (!l->out_dev) return;
  if (handle) e->release_pending = !ff__device_foreign_record(l->out_dev, e->released, handle, NULL);
  ff__device_event_wait(l->out_dev, e->ready, NULL); /* the workers rewrite the host images next */
}

void ff__dev_output_close(ff_loader *l) {
  if (!l->out_dev) return;
  ff__device_synchronize(l->out_dev);
  for (int i = 0; i < l->ring_size && l->ring; i++) {
    ff_batch *e = &l->ring[i];
    ff__device_free(l->out_dev, e->d_images);
    ff__device_event_destroy(l->out_dev, e->ready);
    ff__device_event_destroy(l->out_dev, e->released);
    free(e->dev_slot), free(e->host_positions);
    ff__device_free(l->out_dev, e->d_stage);
    ff__device_free(l->out_dev, e->d_table);
    ff__device_host_free(l->out_dev, e->h_table);
    ff__device_free(l->out_dev, e->d_mix);
    ff__device_host_free(l->out_dev, e->h_mix);
    e->d_images = e->d_stage = e->d_table = e->h_table = e->d_mix = e->h_mix = NULL, e->ready = e->released = NULL;
    e->dev_slot = e->host_positions = NULL;
  }
  ff__device_stream_destroy(l->out_dev, l->out_stream);
  ff__device_close(l->out_dev);
  l->out_dev = NULL, l->out_stream = NULL;
}
