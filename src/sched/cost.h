/* cost.h — the scheduler's cost model: what a sample will cost, predicted
 * from what is known when a batch is split (its encoded size, from the
 * source index) and from coefficients learned as moving averages of
 * measured timings. Pure functions over a small state; the loader's runtime
 * feeds measurements in and asks for predictions under its lock.
 *
 * CPU cost of a sample = read+decode ns per encoded byte x its bytes + ops ns
 * per sample (the sum of the per-op costs after decode). The plan, and so
 * the exact ops, is only known once the header is read, so ops enter as a
 * per-sample mean; the encoded size orders samples the way the FusionFlow
 * paper (PVLDB 17(4), 2023, section 5) sorts its tasks by file size.
 * Device memory of a sample = bytes per encoded byte x its bytes, learned
 * from the microbatches submitted (staging, stage tables, intermediates).
 * The device's time per sample is tracked by the offload policy
 * (ff__sched_state.device_cost_s) from the same measurements. */
#ifndef FF_SCHED_COST_H
#define FF_SCHED_COST_H

#include <stddef.h>
#include <stdint.h>

typedef struct ff__cost_model {
  double alpha;                 /* weight of a new measurement (0..1] */
  double decode_ns_per_byte;    /* read + decode, per encoded byte */
  double ops_ns_per_sample;     /* ops and output conversion, per sample */
  double device_bytes_per_byte; /* device memory of a microbatch per encoded byte */
  long decode_obs, ops_obs, device_obs;
} ff__cost_model;

/* Defaults before any measurement: 10 ns per encoded byte, 0 ns of ops,
 * 32 device bytes per encoded byte (a decoded JPEG is ~10x its file; the
 * stages keep up to three intermediates and a float row buffer). */
void ff__cost_init(ff__cost_model *m);

/* One sample's read+decode time and its encoded size. */
void ff__cost_observe_decode(ff__cost_model *m, uint64_t encoded_bytes, uint64_t ns);
/* One sample's time in the ops after decode. */
void ff__cost_observe_ops(ff__cost_model *m, uint64_t ns);
/* A submitted microbatch: its samples' encoded bytes and the device memory
 * it took (ff__dev_batch_device_bytes). */
void ff__cost_observe_device(ff__cost_model *m, uint64_t encoded_bytes, size_t device_bytes);

/* Predicted CPU ns of a sample of encoded_bytes. */
double ff__cost_cpu_ns(const ff__cost_model *m, uint64_t encoded_bytes);
/* Predicted device bytes of a sample of encoded_bytes. */
size_t ff__cost_device_bytes(const ff__cost_model *m, uint64_t encoded_bytes);

/* Splits a batch of n samples (encoded sizes size_bytes[i]): marks in
 * to_device the k costliest by ff__cost_cpu_ns (ff__sched_pick_costliest),
 * fewer when their predicted device memory exceeds free_bytes — the largest
 * such count that fits. Returns how many were marked. */
int ff__cost_split(const ff__cost_model *m, const uint64_t *size_bytes, int n, int k, size_t free_bytes,
                   unsigned char *to_device);

#endif
