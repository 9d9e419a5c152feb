/* cost.h — the scheduler's cost model: what offloading a sample saves the
 * CPU, predicted when a batch is split, and what it takes on the device.
 * Pure functions over a small state; the loader's runtime feeds
 * measurements in and asks for predictions under its lock.
 *
 * The device executor takes over a sample's steps after the decode (the CPU
 * still reads and decodes it), so the saving is the CPU time of those steps.
 * Once the sample's header has been seen (it is cached from its first
 * decode), its plan is known exactly — (seed, epoch, index) and the image
 * size fix every random choice — and the saving is predicted step by step:
 * each step's input pixels times that op's measured ns per pixel (the
 * loader's per-op costs), a skipped no-op step 0. RandAugment's equalize
 * costs ~15x its brightness, an AugMix sample with three deep chains twice
 * one with shallow ones: the split sends the samples that save the most
 * (the FusionFlow paper, PVLDB 17(4), 2023, section 5, orders tasks by
 * file size instead; with the plan known, that is only the fallback). A
 * sample not seen yet is predicted at the mean measured ops time per
 * sample, ties going to the larger file.
 * With device decode (placement `device`) a sample also saves its CPU
 * decode: predicted as a ns/encoded byte + b ns/decoded pixel, fitted
 * online (least squares with forgetting) to the workers' measured decodes —
 * entropy decoding scales with the bytes, the IDCT, upsampling and colour
 * conversion with the pixels. Of that, a decoder that decodes Huffman on
 * the host (nvJPEG's hybrid backend) gives back only part: the host share
 * of a device decode is learned from the feeder thread's CPU time during
 * the decode call over the predicted CPU decode of the same samples (0 on
 * the hardware engine and on emu, whose decode runs on the device's own
 * thread), and the saving is decode x (1 - host share) + the steps.
 * Device memory of a sample = bytes per encoded byte x its bytes, learned
 * from the microbatches submitted (staging, stage tables, intermediates).
 * The device's time per sample is tracked by the offload policy
 * (ff__sched_state.device_cost_s) from the same measurements. */
#ifndef FF_SCHED_COST_H
#define FF_SCHED_COST_H

#include <stddef.h>
#include <stdint.h>

#include "codec/codec.h"
#include "ops/ops.h"
#include "pipeline/pipeline.h"

typedef struct ff__cost_model {
  double alpha;                 /* weight of a new measurement (0..1] */
  double ops_ns_per_sample;     /* steps after decode and output conversion, per sample */
  double device_bytes_per_byte; /* device memory of a microbatch per encoded byte */
  long ops_obs, device_obs;
  /* CPU decode ns ~ a * encoded bytes + b * decoded pixels: the forgotten sums of the normal equations */
  double dec_bb, dec_bp, dec_pp, dec_bt, dec_pt;
  double decode_ns_per_sample; /* moving average, for samples whose header is not known yet */
  long decode_obs;
  double host_decode_share; /* of a device decode's predicted CPU time, what stays on the host */
  long host_obs;
} ff__cost_model;

/* Defaults before any measurement: 0 ns of ops, 32 device bytes per encoded
 * byte (a decoded JPEG is ~10x its file; the stages keep up to three
 * intermediates and a float row buffer). */
void ff__cost_init(ff__cost_model *m);

/* One sample's time in the steps after decode (CPU). */
void ff__cost_observe_ops(ff__cost_model *m, uint64_t ns);
/* A microbatch, submitted or refused by the pool: its samples' encoded
 * bytes and the device memory it takes (ff__dev_batch_device_bytes). */
void ff__cost_observe_device(ff__cost_model *m, uint64_t encoded_bytes, size_t device_bytes);

/* One CPU decode: encoded bytes, decoded pixels, ns. */
void ff__cost_observe_decode(ff__cost_model *m, uint64_t encoded_bytes, uint64_t pixels, uint64_t ns);
/* Predicted CPU decode ns of a sample (0 before any decode was measured). */
double ff__cost_decode_ns(const ff__cost_model *m, uint64_t encoded_bytes, uint64_t pixels);
/* A device decode call: the host CPU time it took (the caller's thread)
 * and the predicted CPU decode of its samples (ff__cost_decode_ns summed). */
void ff__cost_observe_host_decode(ff__cost_model *m, uint64_t host_ns, double predicted_cpu_ns);
/* What a sample placed `device` saves the CPU beyond its steps: its CPU
 * decode less the host share the device's decoder leaves on the CPU. */
double ff__cost_device_decode_saving_ns(const ff__cost_model *m, uint64_t encoded_bytes, uint64_t pixels);
/* The decoded pixels of plan's region (DCT-scaled as the decoder will scale it). */
uint64_t ff__cost_decoded_pixels(const ff__plan *plan, const ff__image_info *info);

/* A header as the loader caches it per sample: 0 means none yet. */
uint64_t ff__cost_header_pack(const ff__image_info *info);
/* Unpacks a non-zero packed header; returns 0 for 0 (none). */
int ff__cost_header_unpack(uint64_t packed, ff__image_info *info);

/* Predicted CPU ns of plan's steps after decode and the output conversion
 * of an out_width x out_height sample, for an image with header info, from
 * the measured per-op costs (ns / pixels of each kind; a kind not measured
 * yet counts 0). */
double ff__cost_plan_ns(const ff__plan *plan, const ff__image_info *info, const ff__op_costs *costs,
                        int out_width, int out_height);
/* The prediction for a sample whose header is not known yet: the mean ops
 * time, plus a tie-break that prefers the larger file. */
double ff__cost_unknown_ns(const ff__cost_model *m, uint64_t encoded_bytes);
/* Predicted device bytes of a sample of encoded_bytes. */
size_t ff__cost_device_bytes(const ff__cost_model *m, uint64_t encoded_bytes);

/* Splits a batch of n samples (predicted savings saving_ns[i], encoded
 * sizes size_bytes[i]): marks in to_device the k with the largest savings
 * (ff__sched_pick_costliest), fewer when their predicted device memory, plus
 * the 25% the pool's size classes may add, exceeds free_bytes — the largest
 * such count that fits. Returns how many were marked. */
int ff__cost_split(const ff__cost_model *m, const double *saving_ns, const uint64_t *size_bytes, int n, int k,
                   size_t free_bytes, unsigned char *to_device);

#endif
