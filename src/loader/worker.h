/* worker.h — the CPU worker loop (worker.c) and the loader's accounting
 * (accounting.c) as loader.c calls them, and the record of one sample that
 * passes from the loop to the accounting. Not part of the public API.
 * Locked means under the loader's mutex (loader_internal.h). */
#ifndef FF_LOADER_WORKER_H
#define FF_LOADER_WORKER_H

#include "loader/loader_internal.h"

/* One sample a worker took (locked), ran (unlocked) and commits (locked). */
typedef struct ff__ran {
  ff_batch *batch;
  uint64_t gen;            /* the loader's generation when it was taken */
  int slot, placement;     /* its slot in batch; where it was placed (ff_placement; CPU for a redo) */
  size_t at;               /* its position in the epoch's order */
  int64_t sample, used;    /* the sample taken; the one whose pixels fill the slot (on_error=replace) */
  struct ff__redo redo;    /* slot >= 0: handed back by the feeder or the remote placement */
  ff__sample_job job;
  ff_status st;            /* how it ended, and the error when it failed */
  ff__error err;
  ff__offload_took took;
  char *replace_msg;       /* why it was replaced, or NULL; owned until the commit */
  char *warn_msg;          /* the damage its decoder repaired, or NULL; owned until the commit */
  uint64_t t0, cpu_ns;     /* when it started (the trace); the worker thread's CPU time on it */
} ff__ran;

/* ---- worker.c, called by loader.c ---- */

/* Starts worker thread i (of l->workers, l->threads). Returns 0 or pthread_create's error. */
int ff__loader_start_worker(ff_loader *l, int i);
/* The offload feeder's report of a batch's device samples (ff__offload_config's done). Takes the lock. */
void ff__loader_offload_done(void *ctx, const ff__offload_result *r);

/* ---- accounting.c, called by worker.c and loader.c (locked unless said) ---- */

/* The most messages of skipped, replaced or warned samples kept (ff_loader_skipped, ff_loader_warning). */
#define FF__MESSAGES_KEPT 1000

/* Moves *msg into list (of at most FF__MESSAGES_KEPT) unless the list has it already, else frees it. */
void ff__account_keep_msg(char **list, size_t *kept, char **msg);
/* Batch e goes out: counts its skipped, replaced and warned samples and keeps their messages. */
void ff__account_skips(ff_loader *l, ff_batch *e);
/* The loader-wide figures of r, run on worker w (index `worker`): CPU time (published to the node
 * coordinator), trace spans, the offload cost model's observation, ff_stats, op costs. Clears w's
 * per-sample times. */
void ff__account_sample(ff_loader *l, ff__worker *w, int worker, const ff__ran *r);
/* A sample of e finished on the CPU: cpu_ns and read_ns are its worker's times. */
void ff__account_batch_sample(ff_batch *e, const ff__offload_took *took, uint64_t cpu_ns, uint64_t read_ns);
/* The feeder's report r of e's device samples. */
void ff__account_device_samples(ff_batch *e, const ff__offload_result *r);
/* Batch e goes out at `now` (the consumer asked at t0, ring_ready batches were ready then): its
 * figures into ff_stats, its interval into the policy and the coordinator's next report. */
void ff__account_hand_out(ff_loader *l, ff_batch *e, int ring_ready, uint64_t t0, uint64_t now);
/* The device share of the next splits: 0 without a usable device, else the forced share or the policy's. */
double ff__loader_device_share(ff_loader *l);

#endif
