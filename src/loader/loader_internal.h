/* loader_internal.h — the loader's state, shared by its modules: loader.c
 * (the public API, the CPU worker pool and the ordered ring), offload.c (the
 * device side of the cooperative scheduler: batch split, device feeder
 * thread, fallback to the CPU) and trace.c (the timeline trace). Also the
 * internal entry points that other layers call (the node coordinator, the
 * tests). Not part of the public API.
 *
 * Locking: one mutex, `mu`, guards everything below that is not marked
 * otherwise. Samples are decoded and run outside it; a device microbatch is
 * filled under `add_mu` (workers of one batch add to it concurrently) and
 * submitted by the feeder thread outside both. */
#ifndef FF_LOADER_LOADER_INTERNAL_H
#define FF_LOADER_LOADER_INTERNAL_H

#include <pthread.h>

#include "exec/cpu.h"
#include "exec/dev_batch.h"
#include "fusionflow/fusionflow.h"
#include "loader/trace.h"
#include "pipeline/pipeline.h"
#include "sched/cost.h"
#include "sched/coord.h"
#include "sched/policy.h"
#include "source/source.h"

typedef enum ff__buf_state { FF__BUF_FREE, FF__BUF_FILLING, FF__BUF_READY, FF__BUF_HELD } ff__buf_state;

/* A ring entry: one batch being filled, ready, or held by the consumer. */
struct ff_batch {
  ff_loader *loader;
  ff__buf_state state;
  size_t index;          /* batch number in the epoch */
  uint64_t epoch;
  size_t size;           /* samples in it, after skips */
  int pending;           /* samples not finished yet (device ones finish when the feeder has them in) */
  char **skip_msg;       /* per slot: why it was skipped (on_error=skip), or NULL */
  void *images;
  int64_t *labels, *sample_indices;
  ff__error error;       /* first error of the batch (on_error=raise) */
  /* the split (offload.c) */
  int *slot_order;       /* slots in hand-out order: the device's first, so its microbatch starts early */
  unsigned char *to_device; /* per slot: marked for the device */
  int device_left;       /* device-marked samples whose worker has not come back */
  ff__dev_batch *mb;     /* the batch's microbatch (NULL without a device); filled under add_mu */
  ff_batch_info stats;
  /* output on a device (dev_output.c) */
  void *d_images;        /* batch_cap images on out_dev, or NULL */
  ff__devent *ready;     /* recorded on out_stream after the upload */
  ff__devent *released;  /* recorded on the consumer's stream at ff_batch_release_after */
  int release_pending;   /* released is recorded: the next upload waits for it */
};

struct ff_loader {
  ff_config cfg;
  ff__error err;
  ff__index index;
  ff__pipeline pipe;
  size_t sample_bytes;   /* one output image */
  size_t num_samples, num_batches, total_items;
  int batch_cap;         /* the most samples a batch holds: batch_size, or the epoch's samples if fewer */
  int64_t *order[2], *perm; /* order[e & 1]: the sample order of epoch e */

  pthread_mutex_t mu;
  pthread_cond_t work_cv, ready_cv;
  pthread_t *threads;
  ff__worker *workers;
  int num_threads, started_threads;
  int active_threads;    /* workers at or above this index park (ff__loader_set_active_threads) */
  struct ff__coord *coord;             /* the node group this loader lends threads in, or NULL */
  struct ff__coord_report_data report; /* what the last batch interval tells the coordinator */
  int report_pending;
  int stop, closed, held;
  uint64_t gen;
  uint64_t out_epoch, item_epoch; /* the consumer's epoch; the workers' (same or next) */
  size_t next_item, next_out;     /* next sample to take in item_epoch; next batch to hand out */
  int busy;              /* samples and microbatches in flight outside the lock */
  ff_batch *ring;
  int ring_size;

  ff_stats stats;
  ff__op_costs costs;
  char **skipped;
  size_t skipped_kept;

  /* the scheduler */
  ff__sched_params sched_params;
  ff__sched_state sched;
  ff__cost_model cost;
  double forced_share;   /* >= 0: every split uses this share (tests, FF_FORCE_DEVICE_SHARE) */
  uint64_t last_out_ns;  /* when the previous batch was handed out; 0: none since open or a restart */
  uint64_t *split_sizes; /* batch_size encoded sizes, scratch of the split */
  double *split_saving;  /* batch_size predicted savings (ns), scratch of the split */
  ff__plan split_plan;   /* scratch of the split */
  uint64_t *headers;     /* with a device: each sample's header once read (ff__cost_header_pack), else NULL */

  /* the device (offload.c); dev NULL: CPU only */
  char device_name[160];
  ff__device *dev;
  ff__dstream *stream;
  ff__devent *download_done;
  void *d_out;           /* batch_size output samples, taken from the pool at first use */
  pthread_mutex_t add_mu;
  pthread_cond_t feed_cv;
  pthread_t feeder;
  int feeder_started;
  ff_batch **feed_queue; /* ring_size entries from feed_head: batches whose microbatch is complete */
  int feed_head, feed_count;
  ff__op_scratch feed_ops; /* the feeder's scratch for samples it runs on the CPU */
  size_t device_free_bytes; /* pool limit - used at the last refresh */
  int device_errors;     /* consecutive device errors; at FF__DEVICE_MAX_ERRORS offload stops */
  int device_off;        /* offload stopped for good (errors) */
  int backoff, backoff_len; /* splits left without offload after a refusal; the next refusal's length */
  int refused;           /* the pool refused work since the last observation */

  ff__trace *trace;      /* NULL unless tracing (trace.c) */

  ff__device *out_dev;   /* dev_output.c: where batches are handed out, or NULL (host) */
  char out_device_name[64]; /* its name as configured ("cuda:0") */
  ff__dstream *out_stream;
  ff__device *host_dev;  /* batch_mem.c: the device whose host allocator gives the ring's pinned
                            images; NULL: ordinary memory */
};

#define FF__DEVICE_MAX_ERRORS 3

/* ---- offload.c, called by loader.c ---- */

/* Opens cfg.device (sets device_name) and, with a device, its stream, the
 * ring entries' microbatches and the feeder thread. "cpu" and a failed
 * "auto" leave dev NULL. Returns FF_OK, FF_EDEVICE / FF_EINVAL (the named
 * device cannot be opened; message in l->err), FF_ENOMEM. */
ff_status ff__offload_open(ff_loader *l);
/* Stops and joins the feeder and frees every device resource. Idempotent. */
void ff__offload_close(ff_loader *l);
/* Splits batch e of n samples (its first take): marks the device's samples
 * and orders the slots. Locked. */
void ff__offload_split(ff_loader *l, ff_batch *e, int n);
/* A device-marked sample on a worker: read and decode it, add it to the
 * batch's microbatch; when the microbatch cannot take it, run it on the CPU
 * (*fell_back = 1). *added = 1 when the feeder will finish it. Returns the
 * sample's read/decode status. Unlocked. */
ff_status ff__offload_sample(ff_loader *l, ff__worker *w, ff_batch *e, const ff__sample_job *job, int slot,
                             int *added, int *fell_back, ff__error *err);
/* The worker of a device-marked sample of e came back (gen current): when it
 * was the last, the microbatch goes to the feeder. Locked. */
void ff__offload_sample_done(ff_loader *l, ff_batch *e);
/* The device share of the next splits: 0 without a working device, else
 * the forced share or the policy's. Locked. */
double ff__offload_share(const ff_loader *l);
/* Drops the feeder's queue (restart of the epoch, after busy == 0). Locked. */
void ff__offload_reset(ff_loader *l);
/* Re-reads the device's free memory (once per batch, consumer thread,
 * unlocked) and refreshes the admission figure and the pool stats. */
void ff__offload_refresh(ff_loader *l);

/* ---- batch_mem.c, called by loader.c ---- */

/* Decides whether the ring's images are pinned (cfg.pin_memory) and opens
 * the device whose host allocator gives them. Returns FF_OK (also when the
 * default cannot pin: ordinary memory then), FF_EINVAL (bad pin_memory),
 * FF_EDEVICE (pin_memory 1 and no device to pin with; message in l->err). */
ff_status ff__batch_mem_open(ff_loader *l);
/* Image memory for one ring entry: FF_OK or FF_ENOMEM. */
ff_status ff__batch_mem_alloc(ff_loader *l, size_t size_bytes, void **out);
void ff__batch_mem_free(ff_loader *l, void *ptr); /* NULL does nothing */
/* After every ring entry's images are freed. */
void ff__batch_mem_close(ff_loader *l);

/* ---- dev_output.c, called by loader.c ---- */

/* Opens cfg.output_device (nothing for "cpu"): its stream and, per ring
 * entry, device images and events. FF_OK, FF_EDEVICE / FF_EINVAL (message
 * in l->err). After the ring is allocated. */
ff_status ff__dev_output_open(ff_loader *l);
/* Batch e is handed out: after the consumer's last use of its memory, its
 * images go up, then its ready event. Consumer thread, unlocked. FF_OK or
 * FF_EDEVICE (message in l->err). */
ff_status ff__dev_output_hand_out(ff_loader *l, ff_batch *e);
/* Batch e is released, after the work on the consumer's stream handle
 * (NULL: the consumer is done with it); waits for its upload, whose host
 * memory the workers reuse. Unlocked. */
void ff__dev_output_release(ff_loader *l, ff_batch *e, void *handle);
/* Frees it all (loader_free, before batch_mem_close). */
void ff__dev_output_close(ff_loader *l);

/* loader.c: a batch's sample is in (pending - 1); the last makes it READY. Locked. */
void ff__loader_sample_finished(ff_loader *l, ff_batch *e, int count);
/* loader.c: adds a thread's op costs to the loader's and zeroes them. Locked. */
void ff__loader_add_costs(ff_loader *l, ff__op_costs *costs);

/* ---- entry points for other layers ---- */

/* Caps the CPU worker threads that take work at n (clamped to 1 ..
 * num_threads); the workers above park until the cap rises. For the node
 * coordinator (sched/coord), which moves threads between the loaders of one
 * node. Thread-safe. */
void ff__loader_set_active_threads(ff_loader *l, int n);

/* Fixes the device share of every following split at share (0..1), or
 * gives it back to the policy (share < 0). The share is still bounded by
 * the device memory admission. For tests; FF_FORCE_DEVICE_SHARE=x in the
 * environment does the same at open. Thread-safe. */
void ff__loader_force_device_share(ff_loader *l, double share);

#endif
