/* offload_impl.h — the offload runtime's state, shared by its two halves:
 * offload.c (open and close, the split, the workers' side: staging a
 * sample into its batch's microbatch) and feeder.c (the device feeder: the
 * microbatches through the device, overlapped, and their reports). Internal
 * to loader/offload*.c and loader/feeder.c; the loader sees offload.h.
 *
 * Locking: `mu` guards the queue, the in-flight list, the device's health
 * and the cost model; a ring entry's microbatch and staging are filled under
 * that entry's `add_mu` (the workers of one batch add at once), then belong
 * to the feeder from the moment the entry is queued until done() returns. */
#ifndef FF_LOADER_OFFLOAD_IMPL_H
#define FF_LOADER_OFFLOAD_IMPL_H

#include <pthread.h>

#include "exec/dev_batch.h"
#include "exec/pool.h"
#include "loader/offload.h"
#include "sched/cost.h"

#define NOT_ADDED 255 /* entry.placement[slot] of a slot the feeder does not finish */

/* A sample staged for the device decoder. */
typedef struct staged {
  int slot;
  size_t offset, size_bytes; /* its encoded bytes in the entry's staging */
  const char *path;
  ff__image_info info;
  ff__plan plan;
  void *d_image; /* pool memory the decoder writes, NULL: none taken */
} staged;

/* The runtime's part of one ring entry. */
typedef struct entry {
  ff__dev_batch *mb;
  pthread_mutex_t add_mu;  /* the batch's workers add to mb and the staging at once */
  void *images;            /* the batch's host buffer */
  int device_left;         /* device-placed samples whose worker has not come back */
  unsigned char *placement;/* per slot: the placement of a sample the feeder finishes, or NOT_ADDED */
  const char **paths;      /* per slot: the file, for messages */
  uint64_t *cpu_ns, *read_ns; /* per slot: CPU time spent on it so far, of which reading */
  uint64_t encoded_bytes;  /* of the samples in the microbatch */
  size_t decode_fallbacks; /* of them, placed for device decode and decoded by a worker */
  int small_batch;         /* the split left its device decodes to the workers: too few for the decoder */
  staged *dec;             /* samples for the device decoder */
  int num_dec, cap_dec;
  uint8_t *bytes;          /* pinned staging of their encoded bytes */
  size_t bytes_used, bytes_cap;
  void *d_direct;          /* the output ring's device images for this batch (ff__offload_direct), or NULL */
  ff__devent *after;       /* the consumer's release of them, for the device to wait for, or NULL */
  unsigned char *on_device;/* per slot: the device wrote it into d_direct */
  /* the feeder's, while the microbatch is in flight */
  ff__device_decode_job *jobs; /* batch_cap: its decode call (the device reads them until it completes) */
  int *job_of;             /* batch_cap: each job's staged sample */
  int num_jobs;            /* decodes queued */
  unsigned char *redo;     /* batch_cap: FF__REDO_* per slot */
  ff__devent *decode_start, *decoded, *downloaded;
  int ran;                 /* its microbatch was queued on the device */
  int host_out;            /* ran into a feeder output tensor, downloaded to the host batch */
  int device_was_off;      /* offload was off when the feeder took it: nothing ran, nothing to account */
  int decode_refused;      /* the pool refused memory for a decode */
  ff_status device_status; /* the device's answer when it was queued (FF_OK, FF__EBUDGET, FF_EDEVICE) */
  uint64_t host_decode_ns; /* the feeder's CPU time in the decode call (nvJPEG hybrid: its host phase) */
  ff__offload_result r;    /* the report being built */
} entry;

struct ff__offload {
  ff__offload_config cfg;
  ff__device *dev;
  /* the feeder's streams: decodes, uploads, stages, downloads */
  ff__dstream *s_decode, *s_up, *s_stages, *s_down;
  const char *decoder;     /* NULL: device decode off */
  const char *note;        /* why it is off: "" or a static string, or off_note */
  char off_note[400];      /* why its failures turned it off, written once */
  int decode_failures;     /* microbatches in a row whose decode failed on most images */
  pthread_mutex_t mu;
  pthread_cond_t feed_cv;  /* the feeder: an entry was queued, or stop */
  pthread_cond_t done_cv;  /* the completer: an entry went in flight, or stop */
  pthread_t feeder, completer;
  int feeder_started, completer_started, stop, feeder_exited;
  entry *entries;
  int *queue, head, count; /* entries whose microbatch is complete, cfg.entries from head */
  int *flight, flight_head, flight_count; /* entries on the device, oldest first */
  int finishing;           /* the completer is reporting one (popped from flight) */
  /* host output: two tensors of batch_cap output samples, used in turn; each
   * is free again for the stages once out_free (recorded after its download) has passed */
  void *d_out[2];
  ff__devent *out_free[2];
  int next_out;
  size_t device_free_bytes;/* pool limit - used at the last refresh */
  int device_errors;       /* consecutive device errors; at DEVICE_MAX_ERRORS offload stops */
  int device_off;          /* offload stopped for good (errors) */
  int backoff, backoff_len;/* splits left without offload after a refusal; the next refusal's length */
  int refused;             /* the device refused work since ff__offload_take_refused */
  uint64_t budget_refusals;  /* splits the memory budget admitted nothing of, microbatches the pool refused */
  ff__cost_model cost;
  uint64_t *headers;       /* each sample's header once seen (ff__cost_header_pack), 0: not yet */
  uint64_t *split_sizes;   /* batch_cap: scratch of the split */
  double *split_saving;
  ff__plan split_plan;
  void **dl_dst;           /* batch_cap: the feeder's batched download (runs of finished slots) */
  const void **dl_src;
  size_t *dl_size;
  unsigned char *dl_slot;  /* batch_cap: the slots the device finished, for the runs */
};

/* The pool's block for a feeder output tensor (batch_cap samples in the host batch's format);
 * inline, so that feeder.c needs nothing of offload.c, which starts it. */
static inline size_t ff__offload_out_class_bytes(const ff__offload *o) {
  return ff__pool_class_bytes((size_t)o->cfg.batch_cap * o->cfg.host_sample_bytes);
}

/* feeder.c: the feeder's threads, started by ff__offload_open and stopped
 * (after the entries in flight have finished) by ff__offload_feeder_stop. */
ff_status ff__offload_feeder_start(ff__offload *o, ff__error *err);
void ff__offload_feeder_stop(ff__offload *o);

#endif
