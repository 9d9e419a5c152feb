/* late_copy.c — a trainer's late copy of a host batch on emu (late_copy.h).
 *
 * On a stream of its own: a wait on the gate (an event held shut), the
 * upload, an event `done`; the emulator's default stream then waits for
 * `done`, so that a fence recorded on it afterwards completes only after
 * the copy has read the host memory, as for a copy queued on that stream
 * itself. */
#include "loader/late_copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/device_impl.h"
#include "loader/loader_internal.h"

struct ff__late_copy {
  ff__device *dev;
  ff__dstream *stream;
  ff__devent *gate, *done;
  void *d_copy;
  size_t bytes;
  int queued; /* `done` recorded after the upload */
};

ff_status ff__late_copy_queue(ff_loader *l, const void *src, size_t bytes, ff__late_copy **out, char *msg,
                              size_t msg_size) {
  *out = NULL;
  if (!l || !l->host_dev || strncmp(l->pinned_device, "emu:", 4)) {
    snprintf(msg, msg_size, "a late copy needs host batches pinned by an emulated device (emu:N), not %s",
             l ? l->pinned_device : "no loader");
    return FF_EINVAL;
  }
  ff__late_copy *c = calloc(1, sizeof *c);
  if (!c) return FF_ENOMEM;
  ff__error err = {0};
  c->dev = ff__device_retain(l->host_dev); /* outlives the loader's close */
  c->bytes = bytes;
  ff_status st = ff__device_stream_create(c->dev, &c->stream, &err);
  if (!st) st = ff__device_event_create(c->dev, &c->gate, &err);
  if (!st) st = ff__device_event_create(c->dev, &c->done, &err);
  if (!st) st = ff__device_alloc(c->dev, bytes ? bytes : 1, &c->d_copy, &err);
  if (!st) {
    ff__emu_event_hold(c->dev, c->gate);
    st = ff__device_stream_wait(c->dev, c->stream, c->gate, &err);
  }
  if (!st) st = ff__device_upload(c->dev, c->stream, c->d_copy, src, bytes, &err);
  if (!st) st = ff__device_event_record(c->dev, c->done, c->stream, &err);
  c->queued = !st;
  if (!st) st = ff__device_foreign_wait(c->dev, NULL, c->done, &err);
  if (st) {
    snprintf(msg, msg_size, "%s", err.msg);
    ff__late_copy_free(c);
    return st;
  }
  *out = c;
  return FF_OK;
}

void ff__late_copy_open(ff__late_copy *c) {
  if (c && c->gate) ff__emu_event_signal(c->dev, c->gate);
}

ff_status ff__late_copy_read(ff__late_copy *c, void *dst) {
  ff__error err = {0};
  ff_status st = ff__device_event_wait(c->dev, c->done, &err);
  if (!st) st = ff__device_download(c->dev, c->stream, dst, c->d_copy, c->bytes, &err);
  if (!st) st = ff__device_event_record(c->dev, c->done, c->stream, &err);
  if (!st) st = ff__device_event_wait(c->dev, c->done, &err);
  return st;
}

void ff__late_copy_free(ff__late_copy *c) {
  if (!c) return;
  ff__late_copy_open(c);
  if (c->queued) ff__device_event_wait(c->dev, c->done, NULL);
  else if (c->stream) ff__device_synchronize(c->dev); /* whatever part of it was queued */
  if (c->d_copy) ff__device_free(c->dev, c->d_copy);
  if (c->done) ff__device_event_destroy(c->dev, c->done);
  if (c->gate) ff__device_event_destroy(c->dev, c->gate);
  if (c->stream) ff__device_stream_destroy(c->dev, c->stream);
  ff__device_close(c->dev);
  free(c);
}
