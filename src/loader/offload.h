/* offload.h — the offload runtime as the loader sees it: one opaque handle
 * that owns the device, the split of each batch into placements, the
 * microbatches and the device feeder (loader/feeder.c), behind a few calls:
 * open, split a batch, hand it a sample, a sample's worker is back, reset,
 * refresh, close (and what the stats show). The loader's internals stay out
 * of it: what the runtime needs of a batch comes in as arguments (the ring
 * entry's number, its host image buffer, its samples), and what the feeder
 * finishes goes back through one callback (ff__offload_config.done) with the
 * batch's outcome, including the samples it hands back to the CPU workers.
 *
 * Locking: the runtime has its own mutex; every call below takes it itself
 * and is safe from any thread. The loader may call in while holding its own
 * lock (order: loader, then runtime); the feeder calls done() holding no
 * lock of the runtime, so done() may take the loader's. A handle may be
 * NULL (no device): every call then does nothing (the split places every
 * sample on the CPU). */
#ifndef FF_LOADER_OFFLOAD_H
#define FF_LOADER_OFFLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "exec/cpu.h"
#include "exec/device.h"
#include "fusionflow/fusionflow.h"
#include "ops/ops.h"
#include "pipeline/pipeline.h"

typedef struct ff__offload ff__offload;

/* A sample the feeder hands back to the CPU workers (ff__offload_result.redo). */
enum {
  FF__REDO_NONE = 0,
  FF__REDO_SAMPLE = 1, /* the device could not run it (memory, a device error): a worker prepares it */
  FF__REDO_DECODE = 2, /* placed for the device decoder, which did not decode it: a worker decodes and
                          prepares it, so that it fails (if it does) exactly as on the CPU */
};

/* What became of a batch's device-bound samples, reported once by done(). */
typedef struct ff__offload_result {
  int entry;                     /* the ring entry, as given to ff__offload_split */
  int samples;                   /* samples the feeder finished (written by the device) */
  int device_ran;                /* the device prepared them */
  size_t placed[FF_PLACEMENTS];  /* of those written, how many ended under each placement */
  uint64_t placed_cpu_ns[FF_PLACEMENTS];  /* their CPU time (worker and feeder), by placement */
  uint64_t placed_read_ns[FF_PLACEMENTS]; /* of which reading the file */
  size_t decode_fallbacks;       /* of those written, how many were placed for device decode and decoded by
                                    a worker (the decoder did not take them) */
  /* Per slot (batch_cap), valid during done(): FF__REDO_* — the samples it
   * hands back to the CPU workers, which prepare them as CPU samples (the
   * loader counts them as device fallbacks then). */
  const unsigned char *redo;
  int num_redo;
  size_t device_decoded;         /* samples the device's decoder decoded (and the device wrote) */
  size_t decode_failures;        /* images the decoder failed on (each alone, after bisection): handed back */
  int decode_batch_failed;       /* the microbatch's batched decode failed (it was bisected) */
  int decode_small_batch;        /* its device-decode samples were fewer than the decoder takes in one call:
                                    the workers decoded them */
  const char *decode_turned_off; /* not NULL once, when this batch's decode failures turned device decode
                                    off for the run: why (one line) */
  uint64_t device_ns;            /* device time (events): its kernels, and its decodes when they take the SMs */
  size_t device_bytes;           /* device memory the batch took, output tensor included */
  uint64_t start_ns, end_ns;     /* when the feeder took the batch and finished it */
  uint64_t feeder_cpu_ns;        /* the feeder threads' CPU time on it (their waits sleep: their own work) */
  /* Per slot (batch_cap), valid during done(): 1 where the device wrote the
   * sample into the output ring's device images (ff__offload_direct) and
   * not into the host batch; NULL when it wrote none there. */
  const unsigned char *on_device;
  size_t downloads;              /* device-to-host copy calls into the host batch (one per microbatch) */
  uint64_t download_bytes;       /* their bytes */
} ff__offload_result;

typedef void (*ff__offload_done_fn)(void *ctx, const ff__offload_result *r);

typedef struct ff__offload_config {
  const char *device;            /* ff_config.device */
  size_t limit_bytes;            /* ff_config.device_memory_limit_bytes */
  int64_t headroom_bytes;        /* ff_config.device_headroom_bytes */
  ff_device_decode device_decode; /* ff_config.device_decode */
  int deterministic;             /* ff_config.deterministic: device decode off */
  int strict_decode;             /* ff_config.strict_decode: no nvJPEG (it reports no repaired damage) */
  int replace_errors;            /* on_error=replace: device decode off (substitutes are decoded on the CPU) */
  const ff__pipeline *pipe;      /* also the format the device writes in place (ff__offload_direct) */
  const ff__pipeline *host_pipe; /* the format of the host batch's samples (uint8 under uint8 transport) */
  int entries, batch_cap;        /* ring entries; the most samples a batch holds */
  size_t sample_bytes;           /* one output sample */
  size_t host_sample_bytes;      /* one sample in the host batch */
  size_t num_samples;            /* the index's samples (headers are cached per sample) */
  const uint64_t *size_bytes;    /* the index's encoded sizes, num_samples of them */
  uint64_t seed, max_pixels;     /* ff_config.seed, max_image_pixels */
  ff__offload_done_fn done;
  void *ctx;
  int (*alloc_hook)(void *ctx, size_t size_bytes, void *stream, void **out); /* ff_config.device_alloc */
  void (*free_hook)(void *ctx, void *ptr, size_t size_bytes, void *stream);  /* ff_config.device_free */
  void *hook_ctx;                                                             /* ff_config.device_alloc_ctx */
} ff__offload_config;

/* Opens c->device: "cpu" (and an "auto" that does not open) leave *out NULL
 * and return FF_OK; otherwise the device, its streams, one microbatch per
 * ring entry and the feeder's threads. name (cap bytes) gets the device's
 * name ("cpu" without one). Returns FF_OK, FF_EDEVICE / FF_EINVAL (the
 * named device cannot be opened: the device's message), FF_ENOMEM. */
ff_status ff__offload_open(const ff__offload_config *c, ff__offload **out, char *name, size_t cap,
                           ff__error *err);

/* Stops and joins the feeder (the batches on the device finish first, and
 * done() is called for each) and frees every device resource. NULL: nothing. */
void ff__offload_close(ff__offload *o);

/* The device can take work: open, and offload not turned off by errors. */
int ff__offload_usable(ff__offload *o);

/* Whether the device refused work (memory, errors) since the last call. */
int ff__offload_take_refused(ff__offload *o);

/* Splits the batch of ring entry `entry` (n samples; samples[i] is slot
 * i's dataset index; images its host buffer, batch_cap samples) at the
 * device share `share`: fills placement[slot] (an ff_placement) and returns
 * how many go to the device. costs: the loader's measured per-op costs
 * (read during the call). */
int ff__offload_split(ff__offload *o, int entry, void *images, uint64_t epoch, const int64_t *samples, int n,
                      double share, const ff__op_costs *costs, unsigned char *placement);

/* Direct aggregation: the device-prepared samples of the batch of ring
 * entry `entry` about to be split go straight into d_images (device
 * memory of this runtime's device: the output ring's images of that entry,
 * batch_cap samples in the output layout), after the device has passed
 * event `after` (the consumer's release of that memory; NULL: none
 * pending); NULL d_images: they go to the host batch. Call before
 * ff__offload_split; it holds for that entry until the next call. */
void ff__offload_direct(ff__offload *o, int entry, void *d_images, ff__devent *after);

/* What the runtime did with a sample handed to it. */
typedef struct ff__offload_took {
  int added;          /* it is in the batch's microbatch: the feeder finishes it (done()) */
  int placement;      /* not added: where it was prepared (FF_PLACEMENT_CPU after a fallback) */
  int fell_back;      /* not added: it was meant for the device and ran on the CPU */
  int decode_fallback;/* its device decode was refused: the CPU decoded it */
} ff__offload_took;

/* A sample of ring entry `entry` placed on the device (placement split or
 * device), on worker w: reads it (and, for split, decodes it) and adds it
 * to the microbatch; when the microbatch cannot take it the CPU finishes it
 * now into the batch's slot. Returns the sample's status (FF_EIO, FF_EDATA,
 * FF_ETOOBIG, FF_ENOMEM naming the file, as ff__sample_run). Unlocked. */
ff_status ff__offload_sample(ff__offload *o, ff__worker *w, int entry, const ff__sample_job *job, int slot,
                             int placement, ff__offload_took *took, ff__error *err);

/* The worker of a device-placed sample of `entry` is back: when it was the
 * last, the microbatch goes to the feeder and 1 is returned (done() follows),
 * else 0. */
int ff__offload_sample_done(ff__offload *o, int entry);

/* What a worker measured on one sample. */
typedef struct ff__offload_obs {
  int64_t sample;                /* its dataset index */
  const ff__image_info *header;  /* width 0: not read */
  int ran_ops;                   /* ops_ns is a CPU ops time */
  uint64_t ops_ns;
  uint64_t decode_ns, encoded_bytes, decoded_pixels; /* a CPU decode (decoded_pixels 0: none) */
} ff__offload_obs;

/* A sample a worker prepared or read: caches its header (for the next
 * split's plan-exact prediction) and learns its ops and decode times. */
void ff__offload_observe(ff__offload *o, const ff__offload_obs *obs);

/* Drops the microbatches queued for the feeder (an epoch restart) and
 * returns how many: their done() never comes. */
int ff__offload_reset(ff__offload *o);

/* Re-reads the device's free memory (once per batch, consumer thread) and
 * gives the pool's limit and peak now (left untouched without a device). */
void ff__offload_refresh(ff__offload *o, size_t *limit_bytes, size_t *peak_bytes);

/* Times the device memory budget said no since open: splits it admitted no
 * sample of, and microbatches the pool refused (0 without a device). */
uint64_t ff__offload_budget_refusals(ff__offload *o);

/* The pool's limit and peak now, without re-reading (untouched without a device). */
void ff__offload_pool(ff__offload *o, size_t *limit_bytes, size_t *peak_bytes);

/* The decoder of device-placed samples ("none" when device decode is off,
 * unavailable or was turned off by its failures) and *note why it is off
 * ("" when on). Owned by o (static strings when o is NULL), valid until
 * ff__offload_close. */
const char *ff__offload_decoder(const ff__offload *o, const char **note);

/* The device o runs on (NULL for NULL): for tests that look at the device itself. */
ff__device *ff__offload_device(const ff__offload *o);

#endif
