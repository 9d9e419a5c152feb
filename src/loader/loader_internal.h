/* loader_internal.h — the loader's state (loader.c: the public API, the
 * CPU worker pool and the ordered ring; trace.c: the timeline trace) and
 * the internal entry points that other layers call (the node coordinator,
 * the tests). The offload runtime is behind its own face (offload.h) and
 * sees none of this. Not part of the public API.
 *
 * Locking: one mutex, `mu`, guards everything below that is not marked
 * otherwise. Samples are decoded and run outside it. */
#ifndef FF_LOADER_LOADER_INTERNAL_H
#define FF_LOADER_LOADER_INTERNAL_H

#include <pthread.h>
#include <sys/types.h>

#include "exec/cpu.h"
#include "fusionflow/fusionflow.h"
#include "loader/offload.h"
#include "loader/trace.h"
#include "pipeline/pipeline.h"
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
  char **replace_msg;    /* per slot: why its sample was replaced (on_error=replace), or NULL */
  char **warn_msg;       /* per slot: the damage its decoder repaired, or NULL */
  void *images;
  int64_t *labels, *sample_indices;
  ff__error error;       /* first error of the batch (on_error=raise) */
  uint64_t gen;          /* the loader's generation when it was split */
  int *slot_order;       /* slots in hand-out order: the device's first, so its microbatch starts early */
  unsigned char *placement; /* per slot: its ff_placement, from the split */
  ff_batch_info stats;
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
  char **skipped;        /* failed samples' messages (skipped or replaced), as handed out */
  size_t skipped_kept;
  char **warnings;       /* repaired-damage messages, as handed out */
  size_t warnings_kept;
  pid_t pid;             /* the process that opened the loader: a forked child must not touch it */

  /* the scheduler */
  ff__sched_params sched_params;
  ff__sched_state sched;
  double forced_share;   /* >= 0: every split uses this share (tests, FF_FORCE_DEVICE_SHARE) */
  uint64_t last_out_ns;  /* when the previous batch was handed out; 0: none since open or a restart */

  /* the device: the offload runtime (offload.h); NULL: CPU only */
  char device_name[160];
  ff__offload *offload;

  ff__trace *trace;      /* NULL unless tracing (trace.c) */
};

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
