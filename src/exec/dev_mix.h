/* dev_mix.h — the Mixup/CutMix batch stage on a batch in device memory
 * (output_device cuda:N / emu:N): the plan drawn on the host
 * (ops/batch_mix.h) goes up as a small table and one launch of the stage
 * kernel (kernels/stage.h, FF__DS_BATCH_MIX) mixes the float32 NCHW batch
 * in place with the CPU stage's arithmetic (kernels/batch_mix.h), so the
 * bytes equal the CPU-mixed batch's. */
#ifndef FF_EXEC_DEV_MIX_H
#define FF_EXEC_DEV_MIX_H

#include "core/error.h"
#include "exec/device.h"
#include "ops/batch_mix.h"

/* Bytes of the table for batches of up to n images (host and device
 * copies). */
size_t ff__dev_mix_bytes(int n);

/* Queues on s: the plan's n images of 3 x h x w float32 at d_images
 * (NCHW, contiguous) mixed in place, each from its partners' originals.
 * h_table (pinned, ff__dev_mix_bytes(plan->n), untouched until an event
 * recorded after this completes) is filled and uploaded to d_table (device
 * memory of that size); one launch, none when no image mixes. FF_OK or
 * FF_EDEVICE. */
ff_status ff__dev_mix(ff__device *dev, ff__dstream *s, const ff__mix_plan *plan, int h, int w, void *h_table,
                      void *d_table, void *d_images, ff__error *err);

#endif
