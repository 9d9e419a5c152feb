/* loader.c — the public loader: source index, sampler, a pool of CPU worker
 * threads and the ordered ring of batches.
 *
 * Work is handed out one sample at a time in epoch order under one mutex
 * (handing out is serialised, doing it is parallel). Sample k goes to slot
 * k % batch_size of batch k / batch_size, whose buffer is a free entry of
 * the ring of prefetch + 1 entries; a worker waits while none is free, so
 * memory is bounded by the ring. A batch is READY when all its samples are in, and
 * ff_loader_next hands batches out strictly in order. When the workers have
 * taken every sample of the consumer's epoch they go on with the next one,
 * so the ring stays full across the epoch boundary; the orders of these two
 * epochs live in order[epoch & 1]. Jumping to another epoch bumps a
 * generation number and waits for the samples in flight, so no stale write
 * reaches a reused buffer. Batches held by the consumer survive close: the
 * loader's memory goes when it is closed and the last batch is released.
 *
 * With a device the cooperative scheduler joins in through the offload
 * runtime (offload.h): when a batch's first sample is taken the batch is
 * split — the costliest samples, as many as the policy's share and the
 * device memory admit, are placed on the device (`split`: decoded here, ops
 * there; `device`: only read here) and handed out first; a worker does its
 * part of those and hands them over, and the runtime's feeder reports the
 * batch's device samples back (offload_done). Each ff_loader_next folds
 * what it measured into the policy (sched/policy.h), which sets the share
 * of the batches split next. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/cpu.h"
#include "loader/loader_internal.h"
#include "source/stream.h"
#include "loader/sampler.h"
#include "sched/numa.h"
#include "source/callback.h"

#define MAX_SKIPPED_KEPT 1000
#define DEFAULT_TRACE_EVENTS (1u << 18)

void ff_config_init(ff_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->batch_size = 64;
  cfg->shuffle = 1;
  cfg->prefetch = 2;
  cfg->rank = -1;
  cfg->world_size = -1;
  cfg->max_image_pixels = 89478485;
  cfg->device = "cpu";
  cfg->device_headroom_bytes = -1;
  cfg->pin_memory = -1;
  cfg->output_device = "cpu";
  ff__sched_params p;
  ff__sched_params_init(&p, cfg->prefetch);
  cfg->device_max_time_share = p.max_device_time;
  cfg->max_jpeg_scans = 500;
  cfg->max_metadata_bytes = (size_t)16 << 20;
  cfg->shuffle_buffer = 1000;
  cfg->max_member_bytes = FF_MEMBER_BYTES_AUTO;
}

static ff_status env_int(const char *name, int fallback, int *out, ff__error *err) {
  const char *s = getenv(name);
  if (!s || !*s) return *out = fallback, FF_OK;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (*end || errno || v < 0 || v > 1 << 20)
    return ff__error_set(err, FF_EINVAL, "environment variable %s='%s' is not a valid integer", name, s);
  *out = (int)v;
  return FF_OK;
}

static ff_status check_config(ff_config *c, ff__error *err) {
  if (c->struct_size < offsetof(ff_config, max_image_pixels) + sizeof c->max_image_pixels)
    return ff__error_set(err, FF_EINVAL, "config.struct_size is %zu: call ff_config_init first", c->struct_size);
  if (!c->source && !c->source_callbacks)
    return ff__error_set(err, FF_EINVAL, "config.source (or config.source_callbacks) is required");
  if (!c->pipeline) return ff__error_set(err, FF_EINVAL, "config.pipeline is required");
  if (c->batch_size < 1 || c->batch_size > 1 << 30)
    return ff__error_set(err, FF_EINVAL, "batch_size must be in [1, 2**30] (got %d)", c->batch_size);
  if (c->prefetch < 1 || c->prefetch > 1 << 20)
    return ff__error_set(err, FF_EINVAL, "prefetch must be in [1, 2**20] (got %d)", c->prefetch);
  if (c->num_threads < 0 || c->num_threads > 1 << 20)
    return ff__error_set(err, FF_EINVAL, "num_threads must be in [0, 2**20] (got %d)", c->num_threads);
  if (c->on_error != FF_ON_ERROR_RAISE && c->on_error != FF_ON_ERROR_SKIP && c->on_error != FF_ON_ERROR_REPLACE)
    return ff__error_set(err, FF_EINVAL, "on_error must be raise, skip or replace (got %d)", (int)c->on_error);
  if (c->max_jpeg_scans < 0)
    return ff__error_set(err, FF_EINVAL, "max_jpeg_scans must be >= 0 (got %d)", c->max_jpeg_scans);
  if (c->device_decode != FF_DEVICE_DECODE_AUTO && c->device_decode != FF_DEVICE_DECODE_OFF &&
      c->device_decode != FF_DEVICE_DECODE_ON)
    return ff__error_set(err, FF_EINVAL, "device_decode must be auto, off or on (got %d)", (int)c->device_decode);
  if (!c->device_alloc != !c->device_free)
    return ff__error_set(err, FF_EINVAL, "device_alloc and device_free go together: set both or neither");
  if (c->struct_size > offsetof(ff_config, repeated_augmentations) &&
      (c->repeated_augmentations < 0 || c->repeated_augmentations > 4096))
    return ff__error_set(err, FF_EINVAL, "repeated_augmentations must be in [0, 4096] (got %d)",
                         c->repeated_augmentations);
  if (c->repeated_augmentations && c->sampler_drop_last)
    return ff__error_set(err, FF_EINVAL, "repeated_augmentations takes num_selected_samples per rank "
                         "(RepeatAugSampler): sampler_drop_last does not apply");
  if (c->shuffle_buffer >= (size_t)1 << 40)
    return ff__error_set(err, FF_EINVAL, "shuffle_buffer must be in [0, 2**40) (got %zu)", c->shuffle_buffer);
  if (c->permutation != FF_PERMUTATION_PHILOX && c->permutation != FF_PERMUTATION_TORCH)
    return ff__error_set(err, FF_EINVAL, "permutation must be philox or torch (got %d)", (int)c->permutation);
  if (c->semantics != FF_SEMANTICS_V1 && c->semantics != FF_SEMANTICS_V2)
    return ff__error_set(err, FF_EINVAL, "semantics must be v1 or v2 (got %d)", (int)c->semantics);
  if (!c->device) c->device = "cpu";
  if (!c->output_device) c->output_device = "cpu";
  if (!(c->device_max_time_share > 0 && c->device_max_time_share <= 1))
    return ff__error_set(err, FF_EINVAL, "device_max_time_share must be in (0, 1] (got %g)",
                         c->device_max_time_share);
  if (c->device_headroom_bytes < -1)
    return ff__error_set(err, FF_EINVAL, "device_headroom_bytes must be >= 0 or -1 (got %lld)",
                         (long long)c->device_headroom_bytes);
  ff_status st;
  if (c->world_size < 0 && (st = env_int("WORLD_SIZE", 1, &c->world_size, err))) return st;
  if (c->rank < 0 && (st = env_int("RANK", 0, &c->rank, err))) return st;
  if (c->world_size < 1) return ff__error_set(err, FF_EINVAL, "world_size must be >= 1 (got %d)", c->world_size);
  if (c->rank >= c->world_size)
    return ff__error_set(err, FF_EINVAL, "rank must be in [0, world_size) (got rank %d, world_size %d)", c->rank,
                         c->world_size);
  if (!c->num_threads) c->num_threads = ff__cpu_cores();
  return FF_OK;
}

/* Samples of batch b in this epoch (the last may be short). */
static int batch_count(const ff_loader *l, size_t b) {
  size_t start = b * (size_t)l->cfg.batch_size, end = start + (size_t)l->cfg.batch_size;
  return (int)((end > l->total_items ? l->total_items : end) - start);
}

static void clear_skips(ff_loader *l, ff_batch *e) {
  for (int s = 0; s < l->batch_cap; s++) {
    free(e->skip_msg[s]), free(e->replace_msg[s]), free(e->warn_msg[s]);
    e->skip_msg[s] = e->replace_msg[s] = e->warn_msg[s] = NULL;
  }
}

static void compute_order(ff_loader *l, uint64_t epoch) {
  if (l->stream) return ff__stream_order(l->stream, epoch, l->order[epoch & 1]);
  if (l->cfg.repeated_augmentations) {
    ff__sampler_ra_indices(l->index.count, l->cfg.shuffle, l->cfg.permutation, l->cfg.seed, epoch, l->cfg.rank,
                           l->cfg.world_size, l->cfg.repeated_augmentations, l->perm, l->order[epoch & 1],
                           l->repeat[epoch & 1]);
    return;
  }
  ff__sampler_indices(l->index.count, l->cfg.shuffle, l->cfg.permutation, l->cfg.seed, epoch, l->cfg.rank,
                      l->cfg.world_size, l->cfg.sampler_drop_last, l->perm, l->order[epoch & 1]);
}

/* Starts `epoch` at batch `batch`: waits for samples in flight, frees
 * every ring entry the consumer does not hold, computes the order. Locked. */
static void restart_epoch(ff_loader *l, uint64_t epoch, size_t batch) {
  l->gen++;
  if (l->stream) ff__stream_restart(l->stream, epoch, batch * (size_t)l->cfg.batch_size); /* waits end now */
  l->busy -= ff__offload_reset(l->offload); /* the feeder must not pick up a stale microbatch */
  l->redo_head = l->redo_count = 0;          /* nor a worker a sample handed back for a stale batch */
  l->restarting = 1; /* no worker takes a sample of the old order meanwhile (a stream would not send it) */
  while (l->busy) pthread_cond_wait(&l->ready_cv, &l->mu);
  ff__remote_reset(l);
  l->restarting = 0;
  for (int i = 0; i < l->ring_size; i++)
    if (l->ring[i].state != FF__BUF_HELD) {
      l->ring[i].state = FF__BUF_FREE;
      clear_skips(l, &l->ring[i]);
    }
  l->out_epoch = l->item_epoch = epoch;
  compute_order(l, epoch);
  l->next_out = batch;
  l->next_item = batch * (size_t)l->cfg.batch_size;
  if (l->next_item > l->total_items) l->next_item = l->total_items; /* the end of an epoch with a short last batch */
  l->last_out_ns = 0; /* the ring fills from empty: no interval to judge yet */
  pthread_cond_broadcast(&l->work_cv);
}

/* The ring entry being filled or ready with batch b of epoch, or NULL.
 * Entries are taken from the free ones in batch order, so a batch the
 * consumer keeps only shrinks the ring until it is released. Locked. */
static ff_batch *entry_of(ff_loader *l, uint64_t epoch, size_t b) {
  for (int i = 0; i < l->ring_size; i++) {
    ff_batch *e = &l->ring[i];
    if ((e->state == FF__BUF_FILLING || e->state == FF__BUF_READY) && e->index == b && e->epoch == epoch) return e;
  }
  return NULL;
}

/* A free entry whose memory no copy of the consumer still reads (fence.c). Locked. */
static ff_batch *free_entry(ff_loader *l) {
  for (int i = 0; i < l->ring_size; i++)
    if (l->ring[i].state == FF__BUF_FREE && ff__fence_clear(l, &l->ring[i])) return &l->ring[i];
  return NULL;
}

/* The device share of the next splits: 0 without a usable device, else
 * the forced share or the policy's. Locked. */
static double device_share(ff_loader *l) {
  if (!ff__offload_usable(l->offload)) return 0;
  return l->forced_share >= 0 ? l->forced_share : l->sched.share;
}

/* Places the samples of a batch just taken and orders its slots, the
 * device's first. Locked. */
static void split(ff_loader *l, ff_batch *e) {
  int n = e->pending;
  double share = device_share(l);
  const int64_t *samples = l->order[e->epoch & 1] + e->index * (size_t)l->cfg.batch_size;
  ff__dev_output_begin(l, e);
  ff__offload_split(l->offload, (int)(e - l->ring), e->images, e->epoch, samples, n, share, &l->costs, e->placement);
  ff__remote_split(l, e);
  int next = 0; /* the device's first, the remote ones last (take_item skips them) */
  for (int rank = 0; rank < 3; rank++)
    for (int slot = 0; slot < n; slot++)
      if ((e->placement[slot] == FF_PLACEMENT_REMOTE ? 2 : e->placement[slot] == FF_PLACEMENT_CPU) == rank)
        e->slot_order[next++] = slot;
  e->gen = l->gen;
  e->stats = (ff_batch_info){.offload_share = share};
  memset(&e->decodes, 0, sizeof e->decodes);
}

/* The remote slots come last in a batch's hand-out order and no worker
 * takes them: once next_item reaches the first, the batch is all taken (so
 * a batch that completes meanwhile is not split again). Locked. */
static void skip_remote(ff_loader *l, ff_batch *e) {
  size_t first = e->index * (size_t)l->cfg.batch_size, pos = l->next_item - first;
  if (pos < e->size && e->placement[e->slot_order[pos]] == FF_PLACEMENT_REMOTE) l->next_item = first + e->size;
}

/* Takes the next sample to run for worker `worker`, or returns 0 when
 * stopping. Workers at or above the active cap park here (the guaranteed
 * ones at active_threads, the spares at num_threads + active_spares).
 * Locked. */
static int take_item(ff_loader *l, int worker, size_t *item, ff_batch **batch, struct ff__redo *redo) {
  redo->slot = -1;
  for (;;) {
    if (l->stop) return 0;
    int spare = worker >= l->num_threads;
    if (spare && worker - l->num_threads >= l->active_spares) {
      /* its own wait: woken by every new sample, a spare would take the
       * lock at idle priority, and hold it wherever the kernel preempts it */
      pthread_cond_wait(&l->spare_cv, &l->mu);
      continue;
    }
    if (!spare && worker >= l->active_threads) {
      /* its own wait too: woken with the others by every batch freed, it
       * would contend for the lock with the consumer that freed it */
      pthread_cond_wait(&l->park_cv, &l->mu);
      continue;
    }
    if (l->restarting) {
      pthread_cond_wait(&l->work_cv, &l->mu);
      continue;
    }
    while (l->redo_count) { /* a sample the feeder handed back: its batch waits for it */
      *redo = l->redo[l->redo_head];
      l->redo_head = (l->redo_head + 1) % l->redo_cap, l->redo_count--;
      ff_batch *e = &l->ring[redo->entry];
      if (redo->gen != l->gen || e->gen != l->gen || e->state != FF__BUF_FILLING) continue;
      *item = e->index * (size_t)l->cfg.batch_size, *batch = e;
      return 1;
    }
    redo->slot = -1;
    /* Every sample of item_epoch taken and the consumer on it, or already past
     * its end (it may take a whole epoch the ring held before a worker runs
     * again): prepare the next epoch. */
    if (l->next_item == l->total_items && l->item_epoch <= l->out_epoch) {
      compute_order(l, ++l->item_epoch);
      l->next_item = 0;
    }
    if (l->next_item < l->total_items) {
      size_t b = l->next_item / (size_t)l->cfg.batch_size;
      ff_batch *e = entry_of(l, l->item_epoch, b);
      if (!e && (e = free_entry(l))) {
        e->state = FF__BUF_FILLING;
        e->index = b;
        e->epoch = l->item_epoch;
        e->pending = batch_count(l, b);
        e->size = (size_t)e->pending;
        e->error.status = FF_OK;
        split(l, e);
        skip_remote(l, e);
        if (ff__remote_flush(l, &l->workers[worker])) continue; /* it unlocked: look again */
        if (l->next_item != b * (size_t)l->cfg.batch_size) continue; /* all of it went remote */
      }
      if (e && e->state == FF__BUF_FILLING) {
        *item = l->next_item++;
        skip_remote(l, e);
        *batch = e;
        if (l->parked) l->parked = 0, ff__coord_publish_cpu(l->coord, l->worker_cpu_ns, 0);
        return 1;
      }
    }
    if (ff__fence_sleep(l)) continue; /* a free entry waits for the consumer's copies */
    /* nothing to take and nothing in flight: the ring is full, and the node's other loaders may
     * have these cores at their next report */
    if (!l->busy && !l->parked) l->parked = 1, ff__coord_publish_cpu(l->coord, l->worker_cpu_ns, 1);
    pthread_cond_wait(&l->work_cv, &l->mu);
  }
}

/* Moves *msg into list (of at most MAX_SKIPPED_KEPT) or frees it. */
/* Keeps a sample's message unless the list has it already (a file that fails
 * in every epoch is listed once) or is full. */
static void keep_msg(char **list, size_t *kept, char **msg) {
  int known = 0;
  for (size_t i = 0; i < *kept && !known; i++) known = !strcmp(list[i], *msg);
  if (!known && *kept < MAX_SKIPPED_KEPT) list[(*kept)++] = *msg;
  else free(*msg);
  *msg = NULL;
}

/* Counts the batch's skipped and replaced samples and its warnings as it is
 * handed out (not when a worker meets them, which may be an epoch ahead)
 * and keeps their messages. Locked. */
static void report_skips(ff_loader *l, ff_batch *e) {
  for (int s = 0; s < l->batch_cap; s++) {
    if (e->skip_msg[s]) l->stats.skipped++, keep_msg(l->skipped, &l->skipped_kept, &e->skip_msg[s]);
    if (e->replace_msg[s]) l->stats.replaced++, keep_msg(l->skipped, &l->skipped_kept, &e->replace_msg[s]);
    if (e->warn_msg[s]) l->stats.warnings++, keep_msg(l->warnings, &l->warnings_kept, &e->warn_msg[s]);
  }
}

static void add_costs(ff_loader *l, ff__op_costs *costs) {
  for (int k = 0; k < FF__COST_COUNT; k++) {
    l->costs.calls[k] += costs->calls[k], l->costs.ns[k] += costs->ns[k];
    l->costs.pixels[k] += costs->pixels[k];
  }
  memset(costs, 0, sizeof *costs);
}

/* A sample of e that could not be read or decoded: skipped or the batch's
 * error, as on_error says. Locked. */
static void sample_failed(ff_loader *l, ff_batch *e, int slot, const ff__error *err) {
  if (l->cfg.on_error == FF_ON_ERROR_SKIP) {
    /* a message that cannot be copied still marks the slot */
    e->skip_msg[slot] = strdup(err->msg);
    if (!e->skip_msg[slot]) e->skip_msg[slot] = strdup("");
  } else if (!e->error.status) {
    e->error = *err;
  }
}

/* The spans of the sample a worker just ran, laid end to end from t0. */
static void trace_sample(ff_loader *l, int worker, const ff__worker *w, uint64_t t0, int64_t sample) {
  int track = FF__TRACK_WORKER + worker;
  ff__trace_span(l->trace, track, "read", t0, w->read_ns, "sample", sample);
  ff__trace_span(l->trace, track, "decode", t0 + w->read_ns, w->decode_ns, "sample", sample);
  if (w->ops_ns) ff__trace_span(l->trace, track, "ops", t0 + w->read_ns + w->decode_ns, w->ops_ns, "sample", sample);
}

typedef struct worker_arg {
  ff_loader *loader;
  ff__worker *worker;
} worker_arg;

/* Runs one sample on the CPU into `slot` of e: its pipeline, or its views. Unlocked. */
static ff_status run_sample(ff_loader *l, ff__worker *w, ff_batch *e, const ff__sample_job *job, int slot,
                            ff__error *err) {
  if (l->views.num_groups)
    return ff__views_run(&l->views, w, &l->view_scratch[w - l->workers], job, e->images, l->view_offset, slot,
                         err);
  return ff__sample_run(w, &l->host_pipe, job, e->images, slot, err);
}

/* The most samples tried in place of one that failed (on_error=replace). */
#define MAX_REPLACE_TRIES 1000

/* on_error=replace: runs the samples that follow position `at` in the
 * epoch's order (wrapping around, at most MAX_REPLACE_TRIES of them), each
 * with its own index and draws, until one succeeds into `slot`; *used is
 * that sample. A pure function of the
 * order, so the substitute is the same whatever the threads did. The order
 * stays put meanwhile: the workers compute an epoch's order only when the
 * consumer has reached the epoch before it, which needs this batch. On the
 * CPU, unlocked; returns the last error when none succeeds. */
static ff_status replace_sample(ff_loader *l, ff__worker *w, ff_batch *e, size_t at, int slot, int64_t *used,
                                ff__error *err) {
  const int64_t *order = l->order[e->epoch & 1];
  size_t n = l->num_samples, tries = n - 1 < MAX_REPLACE_TRIES ? n - 1 : MAX_REPLACE_TRIES;
  ff_status st = err->status;
  for (size_t k = 1; k <= tries && st; k++) {
    int64_t sample = order[(at + k) % n];
    ff__sample_job job = ff__loader_sample_job(l, e->epoch, (at + k) % n);
    st = run_sample(l, w, e, &job, slot, err);
    if (!st) *used = sample;
  }
  return st;
}

static void *worker_loop(void *p) {
  worker_arg *a = p;
  ff_loader *l = a->loader;
  ff__worker *w = a->worker;
  int index = (int)(w - l->workers);
  free(a);
  ff__error err;
  pthread_mutex_lock(&l->mu);
  size_t item;
  ff_batch *e;
  struct ff__redo redo;
  while (take_item(l, index, &item, &e, &redo)) {
    uint64_t gen = l->gen;
    size_t pos = item % (size_t)l->cfg.batch_size;
    int slot = redo.slot >= 0 ? redo.slot : e->slot_order[pos];
    int placement = redo.slot >= 0 ? FF_PLACEMENT_CPU : e->placement[slot];
    size_t at = item - pos + (size_t)slot; /* the sample's place in the epoch's order */
    int64_t sample = l->order[e->epoch & 1][at];
    ff__sample_job job = ff__loader_sample_job(l, e->epoch, at);
    job.hint = (ff__read_hint){l->order[e->epoch & 1] + (item - pos), (int)e->size,
                               e->epoch * (l->num_batches + 1) + e->index};
    l->busy++;
    pthread_mutex_unlock(&l->mu);

    /* the thread's CPU time is what the node coordinator hears as busy (wall time would count the
     * time other processes held the core) */
    uint64_t t0 = ff__now_ns(), cpu0 = ff__thread_cpu_ns();
    ff__offload_took took = {0};
    ff_status st = placement != FF_PLACEMENT_CPU
                       ? ff__offload_sample(l->offload, w, (int)(e - l->ring), &job, slot, placement, &took, &err)
                       : run_sample(l, w, e, &job, slot, &err);
    if (redo.slot >= 0 && redo.why != FF__REDO_REMOTE) /* handed back by the feeder: meant for the device */
      took.fell_back = 1, took.decode_fallback = redo.why == FF__REDO_DECODE, took.placement = FF_PLACEMENT_CPU;
    char *replace_msg = NULL;
    int64_t used = sample; /* the sample whose pixels fill the slot */
    if (st && !took.added && l->cfg.on_error == FF_ON_ERROR_REPLACE) {
      ff__error first = err;
      replace_msg = strdup(err.msg);
      st = replace_sample(l, w, e, at, slot, &used, &err);
      if (st) err = first; /* no substitute: the batch fails with the sample's own error */
      took.fell_back |= placement != FF_PLACEMENT_CPU, took.placement = FF_PLACEMENT_CPU; /* a substitute runs here */
    }
    char *warn_msg = w->warning.status ? strdup(w->warning.msg) : NULL;

    uint64_t worker_cpu_ns = ff__thread_cpu_ns() - cpu0;
    pthread_mutex_lock(&l->mu);
    l->busy--;
    l->worker_cpu_ns += worker_cpu_ns, l->worker_samples++;
    ff__coord_publish_cpu(l->coord, l->worker_cpu_ns, 0); /* its CPU between reports: the reserve, live cores */
    uint64_t cpu_ns = w->read_ns + w->decode_ns + w->ops_ns;
    if (l->trace) trace_sample(l, index, w, t0, sample);
    if (!replace_msg) { /* after substitutes the worker's figures mix several samples */
      ff__offload_obs obs = {used, &w->header, !st && !took.added, w->ops_ns, w->decode_ns,
                             l->index.size_bytes[used], w->decoded_pixels};
      ff__offload_observe(l->offload, &obs);
    }
    l->stats.read_ns += w->read_ns, l->stats.decode_ns += w->decode_ns, l->stats.ops_ns += w->ops_ns;
    l->stats.read_bytes += w->read_bytes;
    if (!st && !took.added && took.placement == FF_PLACEMENT_CPU && !replace_msg) /* one sample, all here */
      l->stats.thread_cpu_samples++, l->stats.thread_cpu_ns += worker_cpu_ns,
          l->stats.thread_decode_cpu_ns += w->decode_cpu_ns;
    uint64_t read_ns = w->read_ns;
    w->read_ns = w->decode_ns = w->ops_ns = w->read_bytes = w->decode_cpu_ns = 0;
    add_costs(l, &w->ops.costs);
    if (gen == l->gen) {
      e->decodes.cpu += w->decoded_pixels > 0;
      e->labels[slot] = l->index.labels ? l->index.labels[used] : w->label;
      e->sample_indices[slot] = used;
      if (placement != FF_PLACEMENT_CPU && ff__offload_sample_done(l->offload, (int)(e - l->ring))) l->busy++;
      if (warn_msg) e->warn_msg[slot] = warn_msg, warn_msg = NULL;
      if (!took.added) { /* finished here; a sample in the microbatch finishes with it, in the feeder */
        if (st) {
          sample_failed(l, e, slot, &err);
          e->stats.device_decode_fallbacks += (size_t)(redo.slot >= 0 && took.decode_fallback); /* it went back */
        } else {
          if (replace_msg) e->replace_msg[slot] = replace_msg, replace_msg = NULL;
          int p = took.placement; /* FF_PLACEMENT_CPU: here, or fallen back */
          e->stats.cpu_samples++, e->stats.cpu_ns += cpu_ns;
          e->stats.placement_samples[p]++, e->stats.placement_cpu_ns[p] += cpu_ns;
          e->stats.placement_read_ns[p] += read_ns;
          e->stats.device_fallbacks += (size_t)took.fell_back;
          e->stats.device_decode_fallbacks += (size_t)took.decode_fallback;
        }
        ff__loader_sample_finished(l, e, 1);
      }
    }
    free(replace_msg);
    free(warn_msg);
    /* the consumer waits for a batch to be ready, a restart for no sample in flight: a wake-up per
     * sample would take the trainer's thread off its core for nothing dozens of times a batch */
    if ((gen == l->gen && e->state == FF__BUF_READY) || (l->restarting && !l->busy))
      pthread_cond_broadcast(&l->ready_cv);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

/* The feeder's report of a batch's device samples (offload.h). Takes the
 * loader's lock; a batch of an older generation is only forgotten. */
static void offload_done(void *ctx, const ff__offload_result *r) {
  ff_loader *l = ctx;
  ff_batch *e = &l->ring[r->entry];
  pthread_mutex_lock(&l->mu);
  l->busy--;
  if (l->trace)
    ff__trace_span(l->trace, r->device_ran ? FF__TRACK_DEVICE : FF__TRACK_FEEDER,
                   r->device_ran ? "microbatch" : "handed back to the workers", r->start_ns, r->end_ns - r->start_ns, "batch",
                   (int64_t)e->index);
  if (e->gen == l->gen && e->state == FF__BUF_FILLING) {
    ff_batch_info *b = &e->stats;
    size_t on_device = r->placed[FF_PLACEMENT_SPLIT] + r->placed[FF_PLACEMENT_DEVICE];
    b->device_samples += on_device, b->cpu_samples += r->placed[FF_PLACEMENT_CPU];
    b->device_decode_fallbacks += r->decode_fallbacks;
    for (int p = 0; p < FF_PLACEMENTS; p++) {
      b->placement_samples[p] += r->placed[p];
      b->placement_cpu_ns[p] += r->placed_cpu_ns[p], b->placement_read_ns[p] += r->placed_read_ns[p];
    }
    b->cpu_ns += r->placed_cpu_ns[FF_PLACEMENT_CPU];
    if (r->device_ran) b->device_ns += r->device_ns;
    b->device_bytes = r->device_bytes;
    b->device_downloads += r->downloads, b->device_download_bytes += r->download_bytes;
    b->feeder_cpu_ns += r->feeder_cpu_ns;
    e->decodes.device += r->device_decoded, e->decodes.failures += r->decode_failures;
    e->decodes.failed_batches += (uint64_t)r->decode_batch_failed;
    e->decodes.small_batches += (uint64_t)r->decode_small_batch;
    ff__dev_output_took(l, e, r->on_device);
    for (int s = 0; s < l->batch_cap && r->num_redo; s++) /* the workers take these first */
      if (r->redo[s]) ff__loader_redo(l, r->entry, s, r->redo[s], l->gen);
    if (r->num_redo) pthread_cond_broadcast(&l->work_cv);
    ff__loader_sample_finished(l, e, r->samples);
  }
  pthread_cond_broadcast(&l->ready_cv);
  pthread_mutex_unlock(&l->mu);
}

static void loader_free(ff_loader *l) {
  ff__remote_free(l);
  ff__fence_free(l); /* the consumer's copies read the images to the end */
  for (int i = 0; i < 2 * l->num_threads && l->workers; i++) ff__worker_free(&l->workers[i]);
  for (int i = 0; l->ring && i < l->ring_size; i++) { /* ring_size is set before the ring is made */
    if (l->ring[i].images) ff__batch_mem_free(l, l->ring[i].images);
    free(l->ring[i].labels);
    free(l->ring[i].soft_labels);
    free(l->ring[i].sample_indices);
    if (l->ring[i].skip_msg && l->ring[i].replace_msg && l->ring[i].warn_msg) clear_skips(l, &l->ring[i]);
    free(l->ring[i].skip_msg);
    free(l->ring[i].replace_msg);
    free(l->ring[i].warn_msg);
    free(l->ring[i].slot_order);
    free(l->ring[i].placement);
  }
  ff__dev_output_close(l);
  ff__batch_mem_close(l);
  ff__trace_destroy(l->trace);
  for (size_t i = 0; i < l->skipped_kept; i++) free(l->skipped[i]);
  free(l->skipped);
  for (size_t i = 0; i < l->warnings_kept; i++) free(l->warnings[i]);
  free(l->warnings);
  free(l->ring);
  free(l->redo);
  free(l->workers);
  free(l->threads);
  free(l->order[0]);
  free(l->order[1]);
  free(l->perm);
  free(l->repeat[0]);
  free(l->repeat[1]);
  for (int i = 0; i < 2 * l->num_threads && l->view_scratch; i++) ff__view_scratch_free(&l->view_scratch[i]);
  free(l->view_scratch);
  ff__views_free(&l->views);
  ff__mix_plan_free(&l->mix_plan);
  free(l->mix_scratch);
  ff__stream_close(l->stream);
  ff__index_free(&l->index);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->work_cv);
  pthread_cond_destroy(&l->spare_cv);
  pthread_cond_destroy(&l->park_cv);
  pthread_cond_destroy(&l->ready_cv);
  free(l);
}

/* FF_FORCE_DEVICE_SHARE=x (0..1) fixes the share of every split (tests,
 * demonstrations); unset: the policy decides. */
static ff_status env_share(double *out, ff__error *err) {
  const char *s = getenv("FF_FORCE_DEVICE_SHARE");
  *out = -1;
  if (!s || !*s) return FF_OK;
  char *end;
  double v = strtod(s, &end);
  if (*end || !(v >= 0 && v <= 1))
    return ff__error_set(err, FF_EINVAL, "environment variable FF_FORCE_DEVICE_SHARE='%s' is not in [0, 1]", s);
  *out = v;
  return FF_OK;
}

/* Starts worker i. Returns 0 or pthread_create's error. */
static int start_worker(ff_loader *l, int i) {
  worker_arg *a = malloc(sizeof *a);
  if (!a) return ENOMEM;
  *a = (worker_arg){l, &l->workers[i]};
  int rc = pthread_create(&l->threads[i], NULL, worker_loop, a);
  if (rc) free(a);
  else l->started_threads++;
  return rc;
}

/* Loaders of one node (one per GPU, as torchrun starts them) share the
 * node's cores through the coordinator when they opt in: FF_NODE_GROUP
 * names the group, or is "auto" for torchrun's run id; unset, empty or
 * "off" (ff__coord_group_off: the keywords in any case), the
 * loader runs on its own threads, as it does if the shared memory cannot
 * be had. In a group it also starts num_threads spare workers in
 * SCHED_IDLE, for good (an unprivileged process cannot raise a thread's
 * priority back): the coordinator's allotment runs on the guaranteed
 * workers, the spares it grants (ff__coord_spares) on spares, which the
 * kernel runs only on cores no normal-priority thread (a trainer's, a
 * peer's allotment) wants. Without spares (SCHED_IDLE refused) it runs its
 * allotment only. */
static void join_node_group(ff_loader *l, int gpu) {
  const char *env = getenv("FF_NODE_GROUP");
  if (ff__coord_group_off(env)) return;
  ff__error err = {0};
  ff__coord *coord;
  if (ff__coord_join(NULL, l->num_threads, &coord, &err) != FF_OK) {
    fprintf(stderr, "fusionflow: %s: this loader runs alone on its %d thread%s\n", err.msg, l->num_threads,
            l->num_threads == 1 ? "" : "s");
    return;
  }
  pthread_mutex_lock(&l->mu); /* the workers, already running, publish to it under the lock */
  l->coord = coord;
  pthread_mutex_unlock(&l->mu);
  /* A spare parks from its start (active_spares is 0) until it is in
   * SCHED_IDLE (thread attributes only take SCHED_OTHER, FIFO and RR); one
   * the kernel refuses stays parked for good, beyond num_spares. */
  struct sched_param idle = {0};
  while (l->num_spares < l->num_threads) {
    int i = l->num_threads + l->num_spares;
    if (start_worker(l, i) || pthread_setschedparam(l->threads[i], SCHED_IDLE, &idle)) break;
    l->num_spares++;
  }
  ff__numa_pin_workers(l->threads + l->num_threads, l->num_spares, gpu);
  ff__loader_set_active_threads(l, ff__coord_threads(l->coord), ff__coord_spares(l->coord));
}

static ff_status loader_start(ff_loader *l) {
  ff__error *err = &l->err;
  ff_status st = check_config(&l->cfg, err);
  if (!st) st = ff__views_parse(l->cfg.pipeline, &l->views, err);
  if (!st && l->views.num_groups) {
    l->pipe = l->views.pipes[0];
    if (!strcmp(l->cfg.device, "auto")) l->cfg.device = "cpu"; /* auto may always stay on the CPU */
    if (strcmp(l->cfg.device, "cpu"))
      st = ff__error_set(err, FF_EINVAL, "a pipeline with views runs on the CPU: device must be cpu (got %s; "
                         "output_device may be a GPU)", l->cfg.device);
    else if (l->cfg.output_dtype != FF_OUTPUT_DTYPE_AUTO || l->cfg.memory_format != FF_MEMORY_FORMAT_AUTO)
      st = ff__error_set(err, FF_EINVAL, "a pipeline with views hands out each view in its default format: "
                         "output_dtype and memory_format must be auto");
    for (int g = 0; g < l->views.num_groups && !st; g++) {
      ff__pipeline_set_semantics(&l->views.pipes[g], l->cfg.semantics);
      st = ff__pipeline_set_output(&l->views.pipes[g], FF_OUTPUT_DTYPE_AUTO, FF_MEMORY_FORMAT_AUTO, err);
      if (l->views.pipes[g].peak_pixels > l->pipe.peak_pixels) l->pipe.peak_pixels = l->views.pipes[g].peak_pixels;
    }
  } else if (!st) {
    st = ff__pipeline_parse(l->cfg.pipeline, &l->pipe, err);
  }
  if (!st) ff__pipeline_set_semantics(&l->pipe, l->cfg.semantics);
  if (!st) st = ff__pipeline_set_output(&l->pipe, l->cfg.output_dtype, l->cfg.memory_format, err);
  if (!st && l->pipe.has_mix && l->pipe.out_custom) /* on the host and on the device alike */
    st = ff__error_set(err, FF_EINVAL, "mixup_cutmix (pipeline column %d) mixes the float32 NCHW batch: "
                       "output_dtype and memory_format must be auto (or float32, contiguous)",
                       l->pipe.ops[l->pipe.num_ops - 1].column);
  if (!st) st = ff__pipeline_check_erasing(&l->pipe, err);
  if (!st) ff__dev_output_host_pipe(l);
  if (!st) st = ff__pipeline_check_peak(&l->pipe, l->cfg.max_image_pixels, err);
  if (!st) st = env_share(&l->forced_share, err);
  if (!st && l->cfg.source_callbacks) /* a batch fetch per ring slot, and one to spare per worker */
    st = ff__callback_source_open(l->cfg.source_callbacks, (size_t)l->cfg.prefetch + 2 + (size_t)l->cfg.num_threads,
                                  &l->index, err);
  else if (!st)
    st = ff__source_open_watched(l->cfg.source, l->cfg.allow_empty, l->cfg.open_progress, l->cfg.open_progress_ctx,
                                 &l->index, err);
  if (!st && l->index.num_bad && l->cfg.on_error == FF_ON_ERROR_RAISE) /* shards' members that make no sample */
    st = ff__error_set(err, FF_EDATA, "%s (%zu problem(s) in the shards; on_error=skip leaves them out and lists "
                       "them)", l->index.bad[0], l->index.num_bad);
  if (st) return st;
  l->stats.source_ignored_files = l->index.ignored_files;
  l->stats.source_ignored_members = l->index.ignored_members;

  const ff_config *c = &l->cfg;
  if (c->permutation == FF_PERMUTATION_TORCH && c->shuffle && l->index.count > FF__TORCH_RANDPERM_MAX_N)
    return ff__error_set(err, FF_EINVAL, "permutation=torch reproduces torch.randperm up to %llu samples, "
                         "not %zu", (unsigned long long)FF__TORCH_RANDPERM_MAX_N, l->index.count);
  if (l->index.streamed) {
    if (c->on_error == FF_ON_ERROR_REPLACE)
      return ff__error_set(err, FF_EINVAL, "%s: on_error=replace needs random access; streamed shards take "
                           "on_error=raise or skip", c->source);
    if (c->repeated_augmentations)
      return ff__error_set(err, FF_EINVAL, "%s: repeated_augmentations needs random access; streamed shards "
                           "are read in their two-level shuffled order", c->source);
    ff__stream_cfg sc = {c->seed, c->shuffle, c->rank, c->world_size, c->shuffle_buffer,
                         (size_t)(c->prefetch + 2) * (size_t)c->batch_size, -1, -1, ff__member_bytes_limit(c),
                         ff__codec_is_image};
    if ((st = ff__stream_open(&l->index, &sc, &l->stream, err))) return st;
    l->num_samples = ff__stream_num_samples(l->stream);
  } else {
    l->num_samples = c->repeated_augmentations
                         ? ff__sampler_ra_num_samples(l->index.count, c->world_size, c->repeated_augmentations)
                         : ff__sampler_num_samples(l->index.count, c->world_size, c->sampler_drop_last);
  }
  size_t bs = (size_t)c->batch_size;
  l->num_batches = c->drop_last ? l->num_samples / bs : (l->num_samples + bs - 1) / bs;
  l->total_items = c->drop_last ? l->num_batches * bs : l->num_samples;
  if (!l->num_batches)
    return ff__error_set(err, FF_EEMPTY, "%s: %zu samples for this rank%s, fewer than batch_size %d with drop_last",
                         c->source, l->num_samples, c->sampler_drop_last && l->index.count < (size_t)c->world_size ?
                         " (sampler_drop_last with fewer samples than ranks)" : "", c->batch_size);
  if (l->pipe.has_mix &&
      (st = ff__mix_check(&l->pipe.mix, l->pipe.out_height, l->pipe.out_width, c->batch_size,
                          (int)(l->total_items % bs), l->pipe.ops[l->pipe.num_ops - 1].column, err)))
    return st;
  for (size_t i = 0; l->pipe.has_mix && l->index.labels && i < l->index.count; i++) /* labels known now */
    if (l->index.labels[i] < 0 || l->index.labels[i] >= l->pipe.mix.num_classes)
      return ff__error_set(err, FF_EPIPELINE, "pipeline column %d: mixup_cutmix: num_classes=%d, but %s has label %lld",
                           l->pipe.ops[l->pipe.num_ops - 1].column, l->pipe.mix.num_classes, l->index.paths[i],
                           (long long)l->index.labels[i]);
  if (l->total_items < bs) bs = l->total_items; /* memory for the largest batch there will be */
  l->batch_cap = (int)bs;

  l->sample_bytes = ff__pipeline_sample_bytes(&l->pipe);
  l->host_sample_bytes = ff__pipeline_sample_bytes(&l->host_pipe);
  size_t image_bytes = l->sample_bytes; /* per sample, all views */
  if (l->views.num_groups) {
    image_bytes = 0;
    for (int v = 0; v < l->views.num_views; v++) {
      l->view_bytes[v] = ff__pipeline_sample_bytes(&l->views.pipes[l->views.group_of[v]]);
      l->view_offset[v] = bs * image_bytes;
      image_bytes += l->view_bytes[v];
    }
    if (!(l->view_scratch = calloc(2 * (size_t)c->num_threads, sizeof *l->view_scratch)))
      return ff__error_set(err, FF_ENOMEM, "out of memory");
  }
  if (l->pipe.has_mix) {
    if ((st = ff__mix_plan_alloc(&l->mix_plan, l->batch_cap, err))) return st;
    if (!(l->mix_scratch = malloc(l->sample_bytes))) return ff__error_set(err, FF_ENOMEM, "out of memory");
  }
  l->ring_size = c->prefetch + 1;
  l->num_threads = c->num_threads;
  l->order[0] = malloc(l->num_samples * sizeof *l->order[0]);
  l->order[1] = malloc(l->num_samples * sizeof *l->order[1]);
  l->perm = malloc(l->index.count * sizeof *l->perm);
  for (int k = 0; k < 2 && c->repeated_augmentations; k++)
    if (!(l->repeat[k] = malloc((l->num_samples ? l->num_samples : 1) * sizeof *l->repeat[k])))
      return ff__error_set(err, FF_ENOMEM, "out of memory");
  l->ring = calloc((size_t)l->ring_size, sizeof *l->ring);
  l->redo_cap = l->ring_size * l->batch_cap; /* every sample of the ring at most once */
  l->redo = malloc((size_t)l->redo_cap * sizeof *l->redo);
  /* num_threads workers, then room for as many spares (join_node_group) */
  l->workers = calloc(2 * (size_t)l->num_threads, sizeof *l->workers);
  l->threads = calloc(2 * (size_t)l->num_threads, sizeof *l->threads);
  l->skipped = calloc(MAX_SKIPPED_KEPT, sizeof *l->skipped);
  l->warnings = calloc(MAX_SKIPPED_KEPT, sizeof *l->warnings);
  if (!l->order[0] || !l->order[1] || !l->perm || !l->ring || !l->redo || !l->workers || !l->threads ||
      !l->skipped || !l->warnings)
    return ff__error_set(err, FF_ENOMEM, "out of memory");
  for (size_t i = 0; i < l->index.num_bad; i++) /* counted and listed first, as skipped */
    l->stats.skipped++, keep_msg(l->skipped, &l->skipped_kept, &l->index.bad[i]);
  if ((st = ff__batch_mem_open(l))) return st;
  for (int i = 0; i < l->ring_size; i++) {
    ff_batch *e = &l->ring[i];
    e->loader = l;
    ff__batch_mem_alloc(l, bs * image_bytes, &e->images);
    e->labels = malloc(bs * sizeof *e->labels);
    if (l->pipe.has_mix && !(e->soft_labels = malloc(bs * (size_t)l->pipe.mix.num_classes * sizeof(float))))
      return ff__error_set(err, FF_ENOMEM, "out of memory for soft labels of %zu x %d", bs, l->pipe.mix.num_classes);
    e->sample_indices = malloc(bs * sizeof *e->sample_indices);
    e->skip_msg = calloc(bs, sizeof *e->skip_msg);
    e->replace_msg = calloc(bs, sizeof *e->replace_msg);
    e->warn_msg = calloc(bs, sizeof *e->warn_msg);
    e->slot_order = malloc(bs * sizeof *e->slot_order);
    e->placement = calloc(bs, sizeof *e->placement);
    if (!e->images || !e->labels || !e->sample_indices || !e->skip_msg || !e->replace_msg || !e->warn_msg ||
        !e->slot_order || !e->placement)
      return ff__error_set(err, FF_ENOMEM, "out of memory for %d batches of %zu bytes", l->ring_size,
                           bs * l->sample_bytes);
  }
  l->active_threads = l->num_threads;
  l->stats.num_threads = l->num_threads;
  ff__sched_params_init(&l->sched_params, c->prefetch);
  l->sched_params.max_device_time = c->device_max_time_share;
  ff__sched_state_init(&l->sched);
  ff__offload_config oc = {c->device, c->device_memory_limit_bytes, c->device_headroom_bytes, c->device_decode,
                           c->deterministic, c->strict_decode, c->on_error == FF_ON_ERROR_REPLACE, &l->pipe, &l->host_pipe, l->ring_size, l->batch_cap, l->sample_bytes, l->host_sample_bytes,
                           l->index.count, l->index.size_bytes, c->seed, c->max_image_pixels, offload_done, l,
                           c->device_alloc, c->device_free, c->device_alloc_ctx};
  if ((st = ff__offload_open(&oc, &l->offload, l->device_name, sizeof l->device_name, err))) return st;
  if ((st = ff__dev_output_open(l))) return st;
  if ((st = ff__remote_open(l))) return st;
  l->stats.device = l->device_name;
  l->stats.device_decoder = ff__offload_decoder(l->offload, &l->stats.device_decoder_note);
  l->device_decoder = l->offload && strcmp(l->stats.device_decoder, "none") ? l->stats.device_decoder : NULL;
  ff__offload_pool(l->offload, &l->stats.device_pool_limit_bytes, &l->stats.device_pool_peak_bytes);

  pthread_mutex_lock(&l->mu);
  restart_epoch(l, 0, 0);
  pthread_mutex_unlock(&l->mu);
  for (int i = 0; i < l->num_threads; i++) {
    int rc = start_worker(l, i);
    if (rc) return ff__error_set(err, FF_ENOMEM, "cannot start worker thread: %s", strerror(rc));
  }
  int gpu = ff__numa_rank_gpu(c->device);
  ff__numa_pin_workers(l->threads, l->num_threads, gpu); /* FF_NODE_NUMA=auto */
  join_node_group(l, gpu);
  return FF_OK;
}

ff_status ff_loader_open(const ff_config *cfg, ff_loader **out) {
  if (!out) return FF_EINVAL;
  ff_loader *l = calloc(1, sizeof *l);
  *out = l;
  if (!l) return FF_ENOMEM;
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->work_cv, NULL);
  pthread_cond_init(&l->spare_cv, NULL);
  pthread_cond_init(&l->park_cv, NULL);
  pthread_cond_init(&l->ready_cv, NULL);
  snprintf(l->device_name, sizeof l->device_name, "cpu");
  l->stats.device = l->device_name;
  l->pid = getpid();
  l->stats.device_decoder = ff__offload_decoder(NULL, &l->stats.device_decoder_note);
  if (!cfg) return ff__error_set(&l->err, FF_EINVAL, "config is NULL");
  /* Copy only the fields the caller's version of ff_config has. */
  ff_config_init(&l->cfg);
  size_t n = cfg->struct_size < sizeof l->cfg ? cfg->struct_size : sizeof l->cfg;
  memcpy(&l->cfg, cfg, n);
  ff_status st = loader_start(l);
  if (st == FF_ENOMEM) { /* out of memory gives no handle (the header's promise) */
    ff_loader_close(l);
    *out = NULL;
  }
  return st;
}

void ff_loader_close(ff_loader *l) {
  if (!l) return;
  pthread_mutex_lock(&l->mu); /* the workers publish to the handle under the lock */
  ff__coord *coord = l->coord;
  l->coord = NULL;
  pthread_mutex_unlock(&l->mu);
  ff__coord_leave(coord); /* the threads go back to the node's pool first */
  pthread_mutex_lock(&l->mu);
  l->stop = 1;
  pthread_cond_broadcast(&l->work_cv);
  pthread_cond_broadcast(&l->spare_cv);
  pthread_cond_broadcast(&l->park_cv);
  pthread_mutex_unlock(&l->mu);
  ff__stream_stop(l->stream); /* a worker waiting for a streamed sample returns */
  for (int i = 0; i < l->started_threads; i++) pthread_join(l->threads[i], NULL);
  ff__remote_close(l); /* no completion after this */
  ff__offload_close(l->offload); /* the device goes now, not when the last batch is released */
  ff__reader_destroy(l->index.reader); /* no callback after close returns (ff_source_callbacks) */
  l->index.reader = NULL;
  pthread_mutex_lock(&l->mu);
  l->offload = NULL;
  l->stats.device_decoder = ff__offload_decoder(NULL, &l->stats.device_decoder_note);
  l->closed = 1;
  int held = l->held;
  pthread_mutex_unlock(&l->mu);
  if (!held) loader_free(l);
}

const char *ff_loader_errmsg(const ff_loader *l) { return l ? l->err.msg : "out of memory"; }

/* A loader that failed to open keeps its message; calls on it say so. */
static ff_status failed_open(ff_loader *l) {
  if (strncmp(l->err.msg, "the loader failed to open: ", 27)) {
    char reason[FF__ERRMSG_MAX];
    snprintf(reason, sizeof reason, "%s", l->err.msg);
    ff__error_set(&l->err, FF_EINVAL, "the loader failed to open: %s", reason);
  }
  return FF_EINVAL;
}

ff_status ff_loader_set_epoch(ff_loader *l, uint64_t epoch) {
  if (!l->started_threads) return failed_open(l);
  pthread_mutex_lock(&l->mu);
  /* The epoch about to start is already being prepared: keep that work. */
  if (epoch != l->out_epoch || l->next_out) restart_epoch(l, epoch, 0);
  pthread_mutex_unlock(&l->mu);
  return FF_OK;
}

ff_status ff_loader_seek(ff_loader *l, uint64_t epoch, size_t batch) {
  if (!l->started_threads) return failed_open(l);
  if (batch > l->num_batches)
    return ff__error_set(&l->err, FF_EINVAL, "batch %zu is past the %zu batches of an epoch", batch,
                         l->num_batches);
  pthread_mutex_lock(&l->mu);
  if (epoch != l->out_epoch || batch != l->next_out) restart_epoch(l, epoch, batch);
  pthread_mutex_unlock(&l->mu);
  return FF_OK;
}

void ff_loader_position(const ff_loader *l, uint64_t *epoch, size_t *batch) {
  pthread_mutex_lock((pthread_mutex_t *)&l->mu);
  *epoch = l->out_epoch;
  *batch = l->next_out;
  pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
}

size_t ff_loader_num_batches(const ff_loader *l) { return l->num_batches; }
size_t ff_loader_num_samples(const ff_loader *l) { return l->num_samples; }
size_t ff_loader_dataset_size(const ff_loader *l) { return l->index.count; }

static int ready_batches(const ff_loader *l) {
  int n = 0;
  for (int i = 0; i < l->ring_size; i++) n += l->ring[i].state == FF__BUF_READY;
  return n;
}

/* Batch e goes out at `now`: its statistics, and what the interval since
 * the previous batch tells the policy. Locked. */
static void hand_out(ff_loader *l, ff_batch *e, int ring_ready, uint64_t t0, uint64_t now) {
  ff_batch_info *b = &e->stats;
  b->wait_ns = now - t0;
  l->stats.device_samples += b->device_samples;
  l->stats.device_ns += b->device_ns;
  l->stats.device_fallbacks += b->device_fallbacks;
  l->stats.device_decode_fallbacks += b->device_decode_fallbacks;
  l->stats.cpu_decodes += e->decodes.cpu, l->stats.device_decodes += e->decodes.device;
  l->stats.device_decode_failures += e->decodes.failures;
  l->stats.device_decode_failed_batches += e->decodes.failed_batches;
  l->stats.device_decode_small_batches += e->decodes.small_batches;
  l->stats.device_download_bytes += b->device_download_bytes, l->stats.feeder_cpu_ns += b->feeder_cpu_ns;
  for (int p = 0; p < FF_PLACEMENTS; p++) {
    l->stats.placement_samples[p] += b->placement_samples[p];
    l->stats.placement_cpu_ns[p] += b->placement_cpu_ns[p], l->stats.placement_read_ns[p] += b->placement_read_ns[p];
  }
  uint64_t last = l->last_out_ns;
  l->last_out_ns = now;
  if (!last) { /* the first batch after open or a restart: waiting for it is no stall */
    l->reported_cpu_ns = l->worker_cpu_ns; /* and the next report's busy share is of its interval only */
    return;
  }
  ff__sched_obs o = {
      .interval_s = (double)(now - last) * 1e-9,
      .wait_s = (double)b->wait_ns * 1e-9,
      .ring_ready = ring_ready,
      .batch_size = (int)e->size,
      .cpu_samples = (int)b->cpu_samples,
      /* with the CPU part of the device's samples (split: read and decode;
       * device: the read), so that 1 - C/D covers what offload leaves on the
       * CPU (as the simulator attributes it) */
      .cpu_busy_s = (double)(b->cpu_ns + b->placement_cpu_ns[FF_PLACEMENT_SPLIT] +
                             b->placement_cpu_ns[FF_PLACEMENT_DEVICE]) * 1e-9,
      .cpu_threads = l->active_threads + l->active_spares,
      .device_samples = (int)b->device_samples,
      .device_busy_s = (double)b->device_ns * 1e-9,
      .device_ok = ff__offload_usable(l->offload) && !ff__offload_take_refused(l->offload),
  };
  ff__sched_update(&l->sched_params, &l->sched, &o);
  ff__remote_observe(l, &o);
  if (l->coord) {
    double busy_s = (double)(l->worker_cpu_ns - l->reported_cpu_ns) * 1e-9;
    l->reported_cpu_ns = l->worker_cpu_ns;
    l->report =
        (ff__coord_report_data){o.wait_s / o.interval_s, (double)ring_ready / l->cfg.prefetch,
                                busy_s / ((l->active_threads > 0 ? l->active_threads : 1) * o.interval_s),
                                l->worker_cpu_ns, l->worker_samples};
    l->report_pending = 1;
  }
  l->stats.offload_share = device_share(l);
}

/* The batch stage's settings now: with mixing turned off (timm's
 * mixup_enabled = False) no draw applies, so every image stays itself and
 * its target is its smoothed one-hot row, as timm's Mixup gives then. */
static ff__mix_params mix_params(ff_loader *l) {
  ff__mix_params p = l->pipe.mix;
  pthread_mutex_lock(&l->mu);
  if (l->mix_off) p.prob = 0;
  pthread_mutex_unlock(&l->mu);
  return p;
}

ff_status ff_loader_set_mix_enabled(ff_loader *l, int enabled) {
  if (!l->started_threads) return failed_open(l);
  if (!l->pipe.has_mix) return ff__error_set(&l->err, FF_EINVAL, "the pipeline has no mixup_cutmix stage");
  pthread_mutex_lock(&l->mu);
  l->mix_off = !enabled;
  pthread_mutex_unlock(&l->mu);
  return FF_OK;
}

/* Mixup/CutMix on the batch just taken: its draws and its soft labels
 * (host memory), and its images — here in host memory, or with an output
 * device on the device batch once it is assembled (dev_output.c queues
 * the same plan there). Consumer thread, unlocked. FF_OK or FF_EDATA (a
 * label past num_classes). */
static ff_status batch_stage(ff_loader *l, ff_batch *e) {
  uint64_t t0 = ff__now_ns();
  int h = l->pipe.out_height, w = l->pipe.out_width, n = (int)e->size;
  ff__mix_params mix = mix_params(l);
  ff__mix_plan_make(&mix, l->cfg.seed, e->epoch, e->index, n, h, w, &l->mix_plan);
  int bad = ff__mix_targets(&l->mix_plan, l->pipe.mix.num_classes, e->labels, e->soft_labels);
  if (bad >= 0)
    return ff__error_set(&l->err, FF_EDATA, "%s: label %lld is not below mixup_cutmix's num_classes=%d",
                         l->index.paths[e->sample_indices[bad]], (long long)e->labels[bad], l->pipe.mix.num_classes);
  if (!l->out_dev) ff__mix_apply_images(&l->mix_plan, e->images, h, w, l->mix_scratch);
  uint64_t ns = ff__now_ns() - t0;
  e->stats.batch_stage_ns = ns;
  pthread_mutex_lock(&l->mu);
  l->stats.batch_stage_ns += ns;
  pthread_mutex_unlock(&l->mu);
  return FF_OK;
}

/* A mark on the consumer's track where the cores the node coordinator
 * keeps for the trainers changed (the adaptive reserve moves with the
 * node's CPU use beside the loaders). */
static void mark_reserve(ff_loader *l, int cores) {
  pthread_mutex_lock(&l->mu);
  if (l->trace && cores != l->reserve_cores)
    ff__trace_span(l->trace, FF__TRACK_CONSUMER, "reserve", ff__now_ns(), 0, "cores", cores);
  l->reserve_cores = cores;
  pthread_mutex_unlock(&l->mu);
}

ff_status ff_loader_next(ff_loader *l, ff_batch **out) {
  if (!l->started_threads) return failed_open(l);
  size_t limit = 0, peak = 0;
  ff__offload_refresh(l->offload, &limit, &peak);
  uint64_t t0 = ff__now_ns();
  ff_status st = FF_OK;
  pthread_mutex_lock(&l->mu);
  if (l->offload) l->stats.device_pool_limit_bytes = limit, l->stats.device_pool_peak_bytes = peak;
  ff__fence_next(l);
  int ring_ready = ready_batches(l);
  for (;;) {
    if (l->next_out == l->num_batches) { /* the workers are on the next epoch already */
      l->out_epoch++;
      l->next_out = 0;
      st = FF_END;
      break;
    }
    if (l->held == l->ring_size) {
      st = ff__error_set(&l->err, FF_EINVAL, "all %d batches of the ring are held: release one first (prefetch=%d)",
                         l->ring_size, l->cfg.prefetch);
      break;
    }
    ff_batch *e;
    while (!(e = entry_of(l, l->out_epoch, l->next_out)) || e->state != FF__BUF_READY)
      ff__remote_wait(l); /* ready_cv, and remote microbatches past their timeout */
    l->next_out++;
    if ((st = e->error.status)) {
      l->err = e->error;
      clear_skips(l, e);
      e->state = FF__BUF_FREE;
      break;
    }
    report_skips(l, e);
    if (!e->size) { /* every sample skipped: no empty batch goes out */
      e->state = FF__BUF_FREE;
      pthread_cond_broadcast(&l->work_cv);
      continue;
    }
    e->state = FF__BUF_HELD;
    l->held++;
    l->stats.batches++;
    l->stats.samples += e->size;
    hand_out(l, e, ring_ready, t0, ff__now_ns());
    *out = e;
    break;
  }
  uint64_t now = ff__now_ns();
  l->stats.wait_ns += now - t0;
  if (l->trace) ff__trace_span(l->trace, FF__TRACK_CONSUMER, "wait", t0, now - t0, "batch", (int64_t)l->next_out - 1);
  pthread_cond_broadcast(&l->work_cv);
  ff__coord_report_data interval = l->report;
  int pending = l->report_pending;
  l->report_pending = 0;
  pthread_mutex_unlock(&l->mu);
  /* Outside the lock: the node's table may take a moment to get. */
  int threads;
  if (pending && ff__coord_report(l->coord, &interval, &threads) == FF_OK) {
    ff__loader_set_active_threads(l, threads, ff__coord_spares(l->coord));
    mark_reserve(l, ff__coord_reserve_cores(l->coord));
  }
  if (!st && l->pipe.has_mix && (st = batch_stage(l, *out))) {
    ff_batch_release(*out);
    *out = NULL;
  }
  if (!st && (st = ff__dev_output_hand_out(l, *out))) {
    ff_batch_release(*out);
    *out = NULL;
  }
  return st;
}

void ff_batch_release(ff_batch *b) { ff_batch_release_after(b, NULL); }

void ff_batch_release_after(ff_batch *b, void *stream) {
  if (!b) return;
  ff_loader *l = b->loader;
  /* A forked child has a copy of the loader without its threads: its mutex
   * may have been held by one of them at the fork, and nothing there waits
   * for the buffer. Touch nothing (the child's copy of the memory goes with
   * the child). */
  if (getpid() != l->pid) return;
  ff__dev_output_release(l, b, stream);
  pthread_mutex_lock(&l->mu);
  b->state = FF__BUF_FREE;
  ff__fence_released(l, b);
  int last = --l->held == 0 && l->closed;
  pthread_cond_broadcast(&l->work_cv);
  pthread_mutex_unlock(&l->mu);
  if (last) loader_free(l);
}

size_t ff_batch_size(const ff_batch *b) { return b->size; }
size_t ff_batch_index(const ff_batch *b) { return b->index; }
uint64_t ff_batch_epoch(const ff_batch *b) { return b->epoch; }
const int64_t *ff_batch_sample_indices(const ff_batch *b) { return b->sample_indices; }
void ff_batch_stats(const ff_batch *b, ff_batch_info *out) { *out = b->stats; }
const char *ff_batch_device(const ff_batch *b) { return b->d_images ? b->loader->out_device_name : "cpu"; }
void *ff_batch_stream(const ff_batch *b) {
  return b->d_images ? ff__device_stream_handle(b->loader->out_dev, b->loader->out_stream) : NULL;
}
void *ff_batch_event(const ff_batch *b) { return b->d_images ? (void *)b->ready : NULL; }

ff_status ff_batch_sync(const ff_batch *b) {
  return b->d_images ? ff__device_event_wait(b->loader->out_dev, b->ready, NULL) : FF_OK;
}

ff_status ff_batch_wait_on(const ff_batch *b, void *stream) {
  return b->d_images ? ff__device_foreign_wait(b->loader->out_dev, stream, b->ready, NULL) : FF_OK;
}

size_t ff_loader_num_views(const ff_loader *l) { return l->views.num_groups ? (size_t)l->views.num_views : 1; }

ff_status ff_batch_view_images(const ff_batch *b, size_t view, ff_tensor *out) {
  const ff_loader *l = b->loader;
  if (view >= ff_loader_num_views(l)) return memset(out, 0, sizeof *out), FF_EINVAL;
  const ff__pipeline *p = l->views.num_groups ? &l->views.pipes[l->views.group_of[view]] : &l->pipe;
  int64_t n = (int64_t)b->size, h = p->out_height, w = p->out_width;
  memset(out, 0, sizeof *out);
  out->data = (char *)(b->d_images ? b->d_images : b->images) + (l->views.num_groups ? l->view_offset[view] : 0);
  out->ndim = 4;
  out->dtype = (ff_dtype)p->out_dtype;
  if (p->out_planar) {
    out->layout = FF_NCHW;
    int64_t shape[4] = {n, 3, h, w}, strides[4] = {3 * h * w, h * w, w, 1};
    memcpy(out->shape, shape, sizeof shape), memcpy(out->strides, strides, sizeof strides);
  } else if (p->out_channels_last) { /* NHWC memory as torch's channels_last sees it */
    out->layout = FF_NHWC;
    int64_t shape[4] = {n, 3, h, w}, strides[4] = {h * w * 3, 1, w * 3, 3};
    memcpy(out->shape, shape, sizeof shape), memcpy(out->strides, strides, sizeof strides);
  } else {
    out->layout = FF_NHWC;
    int64_t shape[4] = {n, h, w, 3}, strides[4] = {h * w * 3, w * 3, 3, 1};
    memcpy(out->shape, shape, sizeof shape), memcpy(out->strides, strides, sizeof strides);
  }
  return FF_OK;
}

void ff_batch_images(const ff_batch *b, ff_tensor *out) { ff_batch_view_images(b, 0, out); }

ff_status ff_batch_soft_labels(const ff_batch *b, ff_tensor *out) {
  memset(out, 0, sizeof *out);
  if (!b->soft_labels) return FF_EINVAL;
  out->data = b->soft_labels;
  out->dtype = FF_FLOAT32;
  out->ndim = 2;
  out->shape[0] = (int64_t)b->size, out->shape[1] = b->loader->pipe.mix.num_classes;
  out->strides[0] = out->shape[1], out->strides[1] = 1;
  return FF_OK;
}

ff_status ff_loader_mix_plan(ff_loader *l, uint64_t epoch, size_t batch, char **json_out) {
  if (!l->started_threads) return failed_open(l);
  if (!json_out) return ff__error_set(&l->err, FF_EINVAL, "json_out is NULL");
  if (!l->pipe.has_mix) return ff__error_set(&l->err, FF_EINVAL, "the pipeline has no mixup_cutmix stage");
  if (batch >= l->num_batches)
    return ff__error_set(&l->err, FF_EINVAL, "batch %zu is past the %zu batches of an epoch", batch, l->num_batches);
  ff__mix_plan plan;
  ff_status st = ff__mix_plan_alloc(&plan, l->batch_cap, &l->err);
  if (st) return st;
  ff__mix_params mix = mix_params(l);
  ff__mix_plan_make(&mix, l->cfg.seed, epoch, batch, batch_count(l, batch), l->pipe.out_height,
                    l->pipe.out_width, &plan);
  char *json = ff__mix_plan_json(&mix, &plan);
  ff__mix_plan_free(&plan);
  if (!json) return ff__error_set(&l->err, FF_ENOMEM, "out of memory");
  *json_out = json;
  return FF_OK;
}

void ff_batch_labels(const ff_batch *b, ff_tensor *out) {
  memset(out, 0, sizeof *out);
  out->data = b->labels;
  out->dtype = FF_INT64;
  out->ndim = 1;
  out->shape[0] = (int64_t)b->size;
  out->strides[0] = 1;
}

/* Which decoders decoded the samples handed out (ff_stats.decoders): a static string. */
static const char *decoders_of(const char *device_decoder, uint64_t cpu, uint64_t device) {
  static const char *const both[][2] = {{"nvjpeg-hardware", "nvjpeg-hardware+libjpeg-turbo"},
                                        {"nvjpeg-hybrid", "nvjpeg-hybrid+libjpeg-turbo"},
                                        {"nvjpeg-like", "nvjpeg-like+libjpeg-turbo"}};
  if (!device || !device_decoder) return cpu ? "libjpeg-turbo" : "none";
  for (size_t i = 0; cpu && i < sizeof both / sizeof *both; i++)
    if (!strcmp(device_decoder, both[i][0])) return both[i][1];
  return device_decoder; /* alone, or the emulator's libjpeg-turbo beside the CPU's */
}

void ff_loader_stats(const ff_loader *l, ff_stats *out) {
  pthread_mutex_lock((pthread_mutex_t *)&l->mu);
  *out = l->stats;
  if (l->offload) /* the feeder turns device decode off when it keeps failing */
    out->device_decoder = ff__offload_decoder(l->offload, &out->device_decoder_note);
  out->decoders = decoders_of(l->device_decoder, out->samples > out->device_decodes, out->device_decodes);
  pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
  /* the pool's figures now, not as of the last batch */
  ff__offload_pool(l->offload, &out->device_pool_limit_bytes, &out->device_pool_peak_bytes);
  out->device_budget_refusals = ff__offload_budget_refusals(l->offload);
  out->node_group = ff__coord_group(l->coord);
}

size_t ff_loader_op_costs(const ff_loader *l, ff_op_cost *out, size_t cap) {
  size_t n = 0;
  pthread_mutex_lock((pthread_mutex_t *)&l->mu);
  for (int k = 0; k < FF__COST_COUNT; k++) {
    if (!l->costs.calls[k]) continue;
    if (n < cap)
      out[n] = (ff_op_cost){ff__cost_name(k), l->costs.calls[k], l->costs.ns[k], l->costs.pixels[k]};
    n++;
  }
  pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
  return n;
}

const char *ff_loader_skipped(const ff_loader *l, size_t i) {
  return i < l->skipped_kept ? l->skipped[i] : NULL;
}

const char *ff_loader_warning(const ff_loader *l, size_t i) {
  return i < l->warnings_kept ? l->warnings[i] : NULL;
}

void ff__loader_set_active_threads(ff_loader *l, int n, int spares) {
  pthread_mutex_lock(&l->mu);
  spares = spares < 0 ? 0 : spares > l->num_spares ? l->num_spares : spares;
  n = n < (spares ? 0 : 1) ? (spares ? 0 : 1) : n > l->num_threads ? l->num_threads : n;
  /* A mark on the consumer's track where the node coordinator changed the allotment. */
  if (l->trace && n != l->active_threads) ff__trace_span(l->trace, FF__TRACK_CONSUMER, "threads", ff__now_ns(), 0, "threads", n);
  /* Only the workers a raise lets run are woken: a spare woken at every
   * report takes the lock at idle priority, and where the kernel preempts
   * it there (beside busy threads a SCHED_IDLE thread waits for an idle
   * core) the workers and the trainer wait for it, up to hundreds of ms. */
  if (n > l->active_threads) pthread_cond_broadcast(&l->park_cv);
  if (spares > l->active_spares) pthread_cond_broadcast(&l->spare_cv);
  l->active_threads = n;
  l->active_spares = spares;
  l->stats.num_threads = l->active_threads;
  pthread_mutex_unlock(&l->mu);
}

void ff__loader_force_device_share(ff_loader *l, double share) {
  pthread_mutex_lock(&l->mu);
  l->forced_share = share < 0 ? -1 : share > 1 ? 1 : share;
  l->stats.offload_share = device_share(l);
  pthread_mutex_unlock(&l->mu);
}

ff_status ff_loader_trace_start(ff_loader *l, size_t max_events) {
  if (!l->started_threads) return failed_open(l);
  ff__trace *t = ff__trace_create(max_events ? max_events : DEFAULT_TRACE_EVENTS);
  if (!t) return ff__error_set(&l->err, FF_ENOMEM, "out of memory for a trace of %zu events", max_events);
  pthread_mutex_lock(&l->mu);
  ff__trace *old = l->trace;
  l->trace = t;
  pthread_mutex_unlock(&l->mu);
  ff__trace_destroy(old);
  return FF_OK;
}

ff_status ff_loader_trace_write(ff_loader *l, const char *path, size_t *events, size_t *dropped) {
  if (!l->started_threads) return failed_open(l);
  pthread_mutex_lock(&l->mu);
  ff_status st = l->trace ? ff__trace_write(l->trace, path, l->num_threads + l->num_spares, &l->err)
                          : ff__error_set(&l->err, FF_EINVAL, "no trace was started (ff_loader_trace_start)");
  size_t kept = 0, lost = 0;
  if (l->trace) ff__trace_counts(l->trace, &kept, &lost);
  pthread_mutex_unlock(&l->mu);
  if (events) *events = kept;
  if (dropped) *dropped = lost;
  return st;
}
