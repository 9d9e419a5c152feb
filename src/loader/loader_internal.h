/* loader_internal.h — the loader's state (loader.c: the public API and the
 * ordered ring; worker.c: the CPU worker pool; trace.c: the timeline trace) and
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
#include "exec/device.h"
#include "fusionflow/fusionflow.h"
#include "loader/offload.h"
#include "loader/trace.h"
#include "pipeline/pipeline.h"
#include "pipeline/views.h"
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
  float *soft_labels;    /* batch_cap x num_classes: the batch stage's targets, or NULL without one */
  ff__error error;       /* first error of the batch (on_error=raise) */
  uint64_t gen;          /* the loader's generation when it was split */
  int *slot_order;       /* slots in hand-out order: the device's first, so its microbatch starts early */
  unsigned char *placement; /* per slot: its ff_placement, from the split */
  ff_batch_info stats;
  struct { /* its decodes, for ff_stats as it is handed out */
    uint64_t cpu, device, failures, failed_batches, small_batches;
  } decodes;
  /* output on a device (dev_output.c) */
  void *d_images;        /* batch_cap images on out_dev, or NULL */
  ff__devent *ready;     /* recorded on out_stream after the upload */
  ff__devent *released;  /* recorded on the consumer's stream at ff_batch_release_after */
  int release_pending;   /* released is recorded: the next upload waits for it */
  int *dev_slot;         /* per position (after skips): the slot of d_images the offload device wrote
                            that sample into, or -1 (it comes from the host images) */
  /* uint8 transport (host_pipe is not pipe): the host samples go up as uint8 into d_stage and the
   * device converts them (exec/dev_convert.h) through the stage table h_table -> d_table */
  void *d_stage, *d_table, *h_table;
  int *host_positions;   /* batch_cap: the positions converted */
  void *d_mix, *h_mix;   /* mixup_cutmix on out_dev: the plan's table (exec/dev_mix.h), device and pinned */
  int fence;             /* fence.c: 0, FF__FENCE_AWAITED (released, no fence since), or 1 + the fence
                            event whose completion its host images wait for before they are refilled */
};

#define FF__FENCE_AWAITED (-1)

struct ff_loader {
  ff_config cfg;
  ff__error err;
  ff__index index;
  struct ff__stream *stream; /* a streamed index's reader (source/stream.h), or NULL */
  ff__pipeline pipe;
  size_t sample_bytes;   /* one output image */
  ff__pipeline host_pipe;   /* how the host writes a sample into the host images: pipe, or with a float
                               output on a device its uint8 input (dev_output.c: the device converts) */
  size_t host_sample_bytes; /* one sample in the host images */
  size_t num_samples, num_batches, total_items;
  int batch_cap;         /* the most samples a batch holds: batch_size, or the epoch's samples if fewer */
  int64_t *order[2], *perm; /* order[e & 1]: the sample order of epoch e */
  uint32_t *repeat[2];   /* repeat[e & 1][k]: which copy order[e & 1][k] is (repeated augmentation), or NULL */

  pthread_mutex_t mu;
  pthread_cond_t work_cv, ready_cv;
  pthread_cond_t spare_cv; /* where parked spares wait (worker.c) */
  pthread_cond_t park_cv;  /* where guaranteed workers above active_threads wait (worker.c) */
  pthread_t *threads;
  ff__worker *workers;
  int num_threads, started_threads; /* started: the guaranteed workers, then the spares */
  int num_spares;        /* spare workers num_threads.. started in SCHED_IDLE in a node group, or 0 */
  int active_threads;    /* guaranteed workers at or above this index park (ff__loader_set_active_threads) */
  int active_spares;     /* spares at or above num_threads + this park */
  struct ff__coord *coord;             /* the node group this loader lends threads in, or NULL */
  struct ff__coord_report_data report; /* what the last batch interval tells the coordinator */
  int report_pending;
  uint64_t worker_cpu_ns, reported_cpu_ns; /* the workers' CPU time on samples: all, and at the last report */
  uint64_t worker_samples;                 /* the samples the workers finished */
  int reserve_cores; /* the node coordinator's cores kept for the trainers, as of the last report */
  int stop, closed, held;
  int restarting;        /* restart_epoch waits for the samples in flight: no new one is taken */
  uint64_t gen;
  uint64_t out_epoch, item_epoch; /* the consumer's epoch; the workers' (same or next, or the one before
                                   * with every sample taken, until a worker runs) */
  size_t next_item, next_out;     /* next sample to take in item_epoch; next batch to hand out */
  int busy;              /* samples and microbatches in flight outside the lock */
  int parked;            /* 1: published to the node coordinator that every worker waits for work */
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
  const char *device_decoder; /* its decoder's name at open (a static string), or NULL: none */
  /* samples the feeder handed back (ff__offload_result.redo), for the workers to take first */
  struct ff__redo { int entry, slot, why; uint64_t gen; } *redo;
  int redo_head, redo_count, redo_cap;

  ff__trace *trace;      /* NULL unless tracing (trace.c) */
  struct ff__remote *remote; /* remote workers (remote.c), or NULL */

  /* views (pipeline/views.h): num_groups 0 without; pipe is then group 0's pipeline */
  ff__views views;
  size_t view_offset[FF__VIEWS_MAX]; /* bytes from a batch's images to view v's (N, ...) tensor */
  size_t view_bytes[FF__VIEWS_MAX];  /* one image of view v */
  struct ff__view_scratch *view_scratch; /* per worker (views.c) */

  /* the batch stage (mixup_cutmix), run by the consumer thread as a batch is handed out */
  ff__mix_plan mix_plan;
  float *mix_scratch;    /* one image */
  int mix_off;           /* ff_loader_set_mix_enabled(0): every draw not applied, targets still smoothed */

  ff__device *out_dev;   /* dev_output.c: where batches are handed out, or NULL (host) */
  char out_device_name[64]; /* its name as configured ("cuda:0") */
  ff__dstream *out_stream;
  int out_direct;        /* out_dev is the offload device: its samples are written in place */
  ff__device *host_dev;  /* batch_mem.c: the device whose host allocator gives the ring's pinned
                            images; NULL: ordinary memory */
  char pinned_device[32]; /* its name, "cuda:0", "emu:0"; "cpu" without */

  /* fence.c: the consumer's copies of released host batches (ff_loader_fence) */
  int fencing;           /* a fence was recorded: a host batch released from now on waits for the next */
  ff__devent **fence_ev; /* fence events on host_dev, made at the first fence (fence_slots of them) */
  int *fence_refs;       /* per event: the ring entries, the last fence and a sleeping worker that use it */
  int fence_slots;
  int last_fence;        /* 1 + the event of the last fence, or 0 */
  int fence_sleeper;     /* a worker sleeps on a fence event; the others wait on work_cv for it */
};

/* ---- config.c, called by loader.c ---- */

/* Checks the caller's config c at open and fills in what the environment
 * and the defaults decide (world_size, rank, num_threads, device names).
 * FF_OK or FF_EINVAL naming the field (message in *err). */
ff_status ff__loader_check_config(ff_config *c, ff__error *err);
/* FF_FORCE_DEVICE_SHARE: *out is its share (0..1), or -1 when unset. FF_OK or FF_EINVAL. */
ff_status ff__loader_env_share(double *out, ff__error *err);

/* ---- views.c, called by worker.c ---- */

/* A worker's memory for the views of its samples. */
typedef struct ff__view_scratch {
  ff__buf plans; /* the sample's plans, one per view */
  ff__buf crop;  /* the view's crop, copied out of the shared decode */
} ff__view_scratch;

void ff__view_scratch_free(ff__view_scratch *s);

/* Plans views 1 .. num_views - 1 of job's sample on its header info, each
 * with its own draws (ff__view_draw_index), beside view 0's plans[0] that
 * ff__sample_read made, and sets *window to plans[0]'s decode request (its
 * limits and warning slot) for the window that holds every view's crop
 * (ff__views_window). FF_OK or ff__plan_check's error naming the file. */
ff_status ff__views_plan(const ff__views *v, const ff__sample_job *job, const ff__image_info *info, ff__plan *plans,
                         ff__decode_req *window, ff__error *err);

/* Reads job's file, plans each of v's views (ff__views_plan), decodes the window they need
 * once (ff__views_window) and runs each view into its part of images (view
 * k at images + view_offset[k]) as `slot`; scratch is the worker's. FF_OK
 * or the sample's error naming the file. */
ff_status ff__views_run(const ff__views *v, ff__worker *w, ff__view_scratch *scratch,
                        const ff__sample_job *job, void *images, const size_t *view_offset, int slot,
                        ff__error *err);

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

/* ---- fence.c, called by loader.c, worker.c and ring.c (locked unless said) ---- */

/* Batch e is released: with fencing on, a host batch waits for the next fence. */
void ff__fence_released(ff_loader *l, ff_batch *e);
/* ff_loader_next: batches released since the last fence wait for that one
 * (the consumer fences right before ff_loader_next, so their copies were
 * queued before it). */
void ff__fence_next(ff_loader *l);
/* Whether free entry e may be refilled now: no fence awaited, and its fence
 * event (if any) completed. */
int ff__fence_clear(ff_loader *l, ff_batch *e);
/* A worker with nothing to take: sleeps (unlocked) on the event of a free
 * entry's fence and returns 1, or returns 0 when there is none to sleep on
 * or another worker sleeps on one (wait on work_cv: it broadcasts). */
int ff__fence_sleep(ff_loader *l);
/* loader_free, before the ring's images go: waits for every fence event in
 * use and destroys them. Unlocked. */
void ff__fence_free(ff_loader *l);

/* ---- dev_output.c, called by loader.c and worker.c ---- */

/* Opens cfg.output_device (nothing for "cpu"): its stream and, per ring
 * entry, device images and events; when it is the offload device, the
 * offload's handle is shared (one pool, pointers valid on both). FF_OK,
 * FF_EDEVICE / FF_EINVAL (message in l->err). After the ring is allocated
 * and the offload opened. */
ff_status ff__dev_output_open(ff_loader *l);
/* Sets l->host_pipe from l->pipe and cfg.output_device (at open, after
 * the pipeline's output format is set). */
void ff__dev_output_host_pipe(ff_loader *l);
/* Batch e is being split (locked): where its device samples go (the
 * output ring's images when out_dev is the offload device). */
void ff__dev_output_begin(ff_loader *l, ff_batch *e);
/* The feeder reported e's device samples (locked): on_device[slot] marks
 * those written into e->d_images (may be NULL). */
void ff__dev_output_took(ff_loader *l, ff_batch *e, const unsigned char *on_device);
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

/* ---- remote.c, called by loader.c, worker.c and accounting.c (locked unless said) ---- */

typedef struct ff__remote ff__remote;

/* A sample handed back by the remote placement (ff__loader_redo's why). */
#define FF__REDO_REMOTE 3

/* Opens the remote placement of cfg.remote (nothing without one), after
 * the ring and before the workers start. FF_OK, FF_EINVAL (a bad executor,
 * or a pipeline or source remote workers cannot take; message in l->err),
 * FF_ENOMEM. Unlocked. */
ff_status ff__remote_open(ff_loader *l);
/* Batch e was just split: places the remote share of its CPU samples
 * (FF_PLACEMENT_REMOTE) and queues their microbatches. */
void ff__remote_split(ff_loader *l, ff_batch *e);
/* Submits the queued microbatches (reading their bytes on w when they are
 * sent); returns 1 when it dropped the lock meanwhile. */
int ff__remote_flush(ff_loader *l, ff__worker *w);
/* A restart (after the samples in flight are in): forgets every microbatch. */
void ff__remote_reset(ff_loader *l);
/* The consumer's wait on ready_cv, which takes back microbatches past their timeout. */
void ff__remote_wait(ff_loader *l);
/* A batch was handed out: the policy learns from its interval. */
void ff__remote_observe(ff_loader *l, const ff__sched_obs *o);
/* Stops the executor (ff_loader_close, after the workers are joined). Unlocked. */
void ff__remote_close(ff_loader *l);
void ff__remote_free(ff_loader *l);

/* ---- ring.c, called by loader.c, worker.c and remote.c (locked) ---- */

/* Samples of batch b in an epoch (the last may be short). */
int ff__loader_batch_count(const ff_loader *l, size_t b);
/* Computes epoch's sample order into order[epoch & 1] (and repeat[epoch & 1]). */
void ff__loader_order(ff_loader *l, uint64_t epoch);
/* The ring entry being filled or ready with batch b of epoch, or NULL. */
ff_batch *ff__ring_entry_of(ff_loader *l, uint64_t epoch, size_t b);
/* A free entry whose memory no copy of the consumer still reads (fence.c), or NULL. */
ff_batch *ff__ring_free_entry(ff_loader *l);
/* Frees e's per-slot skip, replace and warning messages. */
void ff__ring_clear_msgs(ff_loader *l, ff_batch *e);

/* Hands slot `slot` of ring entry `entry` (split in generation gen) to the
 * workers, which take it before new samples; why: FF__REDO_*. */
void ff__loader_redo(ff_loader *l, int entry, int slot, int why, uint64_t gen);
/* count samples of e are in place. */
void ff__loader_sample_finished(ff_loader *l, ff_batch *e, int count);
/* What a worker needs to run the sample at position `at` of epoch's order. */
ff__sample_job ff__loader_sample_job(const ff_loader *l, uint64_t epoch, size_t at);

/* ---- entry points for other layers ---- */

/* Caps the CPU worker threads that take work at n guaranteed ones
 * (clamped to 1 .. num_threads, or 0 .. when spares run) and `spares` spare
 * ones (clamped to 0 .. num_spares); the workers above park until the cap
 * rises. For the node coordinator (sched/coord), which moves threads
 * between the loaders of one node. Thread-safe. */
void ff__loader_set_active_threads(ff_loader *l, int n, int spares);

/* Fixes the device share of every following split at share (0..1), or
 * gives it back to the policy (share < 0). The share is still bounded by
 * the device memory admission. For tests; FF_FORCE_DEVICE_SHARE=x in the
 * environment does the same at open. Thread-safe. */
void ff__loader_force_device_share(ff_loader *l, double share);

#endif
