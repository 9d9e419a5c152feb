/* dev_batch.h — a microbatch on a device: decoded images and their plans
 * in, finished samples written into slots of a device batch tensor out.
 *
 * Use: ff__dev_batch_begin; ff__dev_batch_add for each sample (its decoded
 * HWC uint8 image — copied into pinned staging at once, so the caller may
 * reuse its buffer — its plan, and its output slot);
 * ff__dev_batch_submit on a stream (one upload, one kernel launch per stage
 * index for the whole microbatch, a completion event); ff__dev_batch_wait
 * (or _query) before the next begin. The output layout is the CPU loader's:
 * NCHW float32 through the pipeline's table, or NHWC uint8, one sample of
 * out_height x out_width per slot. Two microbatch objects on two streams
 * overlap one's upload with the other's kernels. Not thread-safe: one
 * feeder thread per microbatch object. */
#ifndef FF_EXEC_DEV_BATCH_H
#define FF_EXEC_DEV_BATCH_H

#include "core/error.h"
#include "core/image.h"
#include "exec/device.h"
#include "pipeline/pipeline.h"

typedef struct ff__dev_batch ff__dev_batch;

ff_status ff__dev_batch_create(ff__device *dev, ff__dev_batch **out, ff__error *err);

/* Waits for submitted work, then frees everything. NULL does nothing. */
void ff__dev_batch_destroy(ff__dev_batch *b);

/* Starts an empty microbatch for pipe (kept by pointer until the next
 * begin). FF_EINVAL while submitted work was not waited for. */
ff_status ff__dev_batch_begin(ff__dev_batch *b, const ff__pipeline *pipe, ff__error *err);

/* Adds a sample: img (RGB, any stride) is copied now; plan is copied.
 * FF_EINTERNAL when the plan does not end at the pipeline's output size,
 * FF_ENOMEM (pinned staging). */
ff_status ff__dev_batch_add(ff__dev_batch *b, const ff__image *img, const ff__plan *plan, int slot,
                            ff__error *err);

/* Adds a sample whose decoded image is already in device memory (the
 * device's decoder wrote it: RGB, pitch_bytes per row, valid until the
 * microbatch was waited for). FF_EINTERNAL, FF_ENOMEM. */
ff_status ff__dev_batch_add_device(ff__dev_batch *b, const void *d_image, int width, int height, size_t pitch_bytes,
                                   const ff__plan *plan, int slot, ff__error *err);

/* Samples added since begin. */
int ff__dev_batch_count(const ff__dev_batch *b);

/* Device memory the microbatch will take from the pool when submitted
 * (staging copy and intermediate images), for admission. */
size_t ff__dev_batch_device_bytes(const ff__dev_batch *b);

/* Sample i as added — the staged image, its plan and slot — so that a
 * microbatch the device refused can run on the CPU without decoding again.
 * The image stays valid until the next begin; a sample added with
 * ff__dev_batch_add_device has none (img->data NULL: decode it again). */
void ff__dev_batch_sample(ff__dev_batch *b, int i, ff__image *img, const ff__plan **plan, int *slot);

/* Queues the microbatch on stream s, writing each sample into its slot of
 * d_out (device memory: N x 3 x H x W float32 or N x H x W x 3 uint8).
 * Returns FF_OK, FF__EBUDGET (the pool cannot hold it now: nothing was
 * queued, the samples can go to the CPU), FF_EDEVICE, FF_ENOMEM. */
ff_status ff__dev_batch_submit(ff__dev_batch *b, ff__dstream *s, void *d_out, ff__error *err);

/* ff__dev_batch_submit with the upload queued on stream `up` and the
 * kernels on s, which waits for the upload and for each event of waits
 * (num_waits of them; NULL entries skipped) before its first stage, so that
 * one microbatch's upload overlaps another's kernels and no host waits
 * between the stages that feed it (the decode) and its stages. up may be s. */
ff_status ff__dev_batch_submit_on(ff__dev_batch *b, ff__dstream *up, ff__dstream *s, ff__devent *const *waits,
                                  int num_waits, void *d_out, ff__error *err);

/* The event recorded after the microbatch's last stage (valid once
 * submitted), for work on another stream to wait for. */
ff__devent *ff__dev_batch_done_event(ff__dev_batch *b);

/* *done = 1 when the submitted work has finished (then as ff__dev_batch_wait). */
ff_status ff__dev_batch_query(ff__dev_batch *b, int *done, ff__error *err);

/* Waits for the submitted work and returns its device memory to the pool;
 * *device_ms (may be NULL) gets its device time, first to last stage.
 * FF_EDEVICE when it failed (the slots' contents are then undefined). */
ff_status ff__dev_batch_wait(ff__dev_batch *b, float *device_ms, ff__error *err);

#endif
