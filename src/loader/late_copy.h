/* late_copy.h — a trainer's late asynchronous copy of a host batch, on the
 * emulated device, for tests (C and, through the extension, Python).
 *
 * torch's images.cuda(non_blocking=True) from pinned memory only queues a
 * copy on the current stream; when that stream is busy the copy reads the
 * host memory later. ff__late_copy_queue queues such a copy of `bytes`
 * bytes at `src` on the loader's pinning emulator, behind a gate that
 * stays shut until ff__late_copy_open, and makes the emulator's default
 * stream (what the consumer fences for emu: a NULL handle, as torch's
 * default stream is 0) wait for it. ff__late_copy_read waits for the copy
 * and gives back what it read. Not part of the public API. */
#ifndef FF_LOADER_LATE_COPY_H
#define FF_LOADER_LATE_COPY_H

#include <stddef.h>

#include "fusionflow/fusionflow.h"

typedef struct ff__late_copy ff__late_copy;

/* FF_OK; FF_EINVAL (the batches are not pinned by an emulator: the message
 * in msg), FF_ENOMEM, FF_EDEVICE. */
ff_status ff__late_copy_queue(ff_loader *l, const void *src, size_t bytes, ff__late_copy **out, char *msg,
                              size_t msg_size);
/* Opens the gate: the copy runs as soon as the emulator gets to it. Any thread. */
void ff__late_copy_open(ff__late_copy *c);
/* Waits for the copy (open it first, or from another thread) and writes the
 * `bytes` bytes it read to dst. FF_OK or FF_EDEVICE. */
ff_status ff__late_copy_read(ff__late_copy *c, void *dst);
/* Opens the gate, waits for the copy and frees it. NULL is ignored. */
void ff__late_copy_free(ff__late_copy *c);

#endif
