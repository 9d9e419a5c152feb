/* dev_convert.h — the output stage on its own: samples that arrive on a
 * device as NHWC uint8 (prepared on the host, uploaded at a quarter of
 * float32's bytes) converted there into the batch's output format — the
 * same table and the same ff__out_store / normalize lookup as the CPU
 * writer (kernels/out.h), so the bytes equal a host-written batch's. */
#ifndef FF_EXEC_DEV_CONVERT_H
#define FF_EXEC_DEV_CONVERT_H

#include "core/error.h"
#include "exec/device.h"
#include "pipeline/pipeline.h"

/* Bytes of the stage table for n samples (host and device copies). */
size_t ff__dev_convert_bytes(int n);

/* Queues on s: sample positions[i] of d_src (NHWC uint8, H x W x 3 bytes
 * apart) converted into position positions[i] of d_out (pipe's output
 * format), i < n. h_table (pinned, ff__dev_convert_bytes(n), untouched
 * until an event recorded after this completes) is filled and uploaded to
 * d_table (device memory of that size); one launch. FF_OK or FF_EDEVICE. */
ff_status ff__dev_convert(ff__device *dev, ff__dstream *s, const ff__pipeline *pipe, void *h_table, void *d_table,
                          const void *d_src, const int *positions, int n, void *d_out, ff__error *err);

#endif
