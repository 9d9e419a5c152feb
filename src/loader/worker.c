/* worker.c — the loader's CPU worker threads. Each loops: take a sample
 * (locked), run it where its batch's split placed it (unlocked), commit it
 * into its slot (locked); the figures go to accounting.c. Beside them, the
 * offload feeder's report of a batch's device samples comes in here.
 *
 * Invariants: samples are handed out one at a time in epoch order under
 * the loader's mutex, a batch being split when its first sample is taken
 * (the device's slots first, the remote ones last and never taken here);
 * samples handed back (redo) are taken before new ones; `busy` counts what
 * runs outside the lock; a sample commits only into a batch of the
 * generation it was taken in. on_error=replace runs the samples that follow
 * in the epoch's order, so the substitute is the same whatever the threads
 * did. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "loader/worker.h"

/* Places the samples of batch b just taken into entry e and orders its
 * slots, the device's first, the remote ones last. Locked. */
static void split(ff_loader *l, ff_batch *e, size_t b) {
  e->state = FF__BUF_FILLING;
  e->index = b;
  e->epoch = l->item_epoch;
  e->pending = ff__loader_batch_count(l, b);
  e->size = (size_t)e->pending;
  e->error.status = FF_OK;
  int n = e->pending;
  double share = ff__loader_device_share(l);
  const int64_t *samples = l->order[e->epoch & 1] + e->index * (size_t)l->cfg.batch_size;
  ff__dev_output_begin(l, e);
  ff__offload_split(l->offload, (int)(e - l->ring), e->images, e->epoch, samples, n, share, &l->costs, e->placement);
  ff__remote_split(l, e);
  int next = 0;
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

/* Waits once when worker `worker` may not take work now and returns 1: it
 * is parked (the guaranteed ones at or above active_threads, the spares at
 * or above num_threads + active_spares) or a restart is under way. Locked. */
static int wait_turn(ff_loader *l, int worker) {
  int spare = worker >= l->num_threads;
  if (spare && worker - l->num_threads >= l->active_spares) {
    /* its own wait: woken by every new sample, a spare would take the
     * lock at idle priority, and hold it wherever the kernel preempts it */
    pthread_cond_wait(&l->spare_cv, &l->mu);
    return 1;
  }
  if (!spare && worker >= l->active_threads) {
    /* its own wait too: woken with the others by every batch freed, it
     * would contend for the lock with the consumer that freed it */
    pthread_cond_wait(&l->park_cv, &l->mu);
    return 1;
  }
  if (!l->restarting) return 0;
  pthread_cond_wait(&l->work_cv, &l->mu);
  return 1;
}

/* A sample the feeder or the remote placement handed back, whose batch
 * waits for it: 1 and *redo, *item, *batch; else 0 (redo->slot -1). Locked. */
static int take_redo(ff_loader *l, size_t *item, ff_batch **batch, struct ff__redo *redo) {
  while (l->redo_count) {
    *redo = l->redo[l->redo_head];
    l->redo_head = (l->redo_head + 1) % l->redo_cap, l->redo_count--;
    ff_batch *e = &l->ring[redo->entry];
    if (redo->gen != l->gen || e->gen != l->gen || e->state != FF__BUF_FILLING) continue;
    *item = e->index * (size_t)l->cfg.batch_size, *batch = e;
    return 1;
  }
  redo->slot = -1;
  return 0;
}

enum { TOOK, AGAIN, NONE };

/* The next sample of the workers' epoch: TOOK (*item, *batch), AGAIN (the
 * lock was dropped or the new batch went remote: look again) or NONE.
 * Locked. */
static int take_new(ff_loader *l, int worker, size_t *item, ff_batch **batch) {
  /* Every sample of item_epoch taken and the consumer on it, or already past
   * its end (it may take a whole epoch the ring held before a worker runs
   * again): prepare the next epoch. */
  if (l->next_item == l->total_items && l->item_epoch <= l->out_epoch) {
    ff__loader_order(l, ++l->item_epoch);
    l->next_item = 0;
  }
  if (l->next_item >= l->total_items) return NONE;
  size_t b = l->next_item / (size_t)l->cfg.batch_size;
  ff_batch *e = ff__ring_entry_of(l, l->item_epoch, b);
  if (!e && (e = ff__ring_free_entry(l))) {
    split(l, e, b);
    skip_remote(l, e);
    if (ff__remote_flush(l, &l->workers[worker])) return AGAIN;    /* it unlocked */
    if (l->next_item != b * (size_t)l->cfg.batch_size) return AGAIN; /* all of it went remote */
  }
  if (!e || e->state != FF__BUF_FILLING) return NONE;
  *item = l->next_item++;
  skip_remote(l, e);
  *batch = e;
  if (l->parked) l->parked = 0, ff__coord_publish_cpu(l->coord, l->worker_cpu_ns, 0);
  return TOOK;
}

/* Takes the next sample to run for worker `worker` into *r and counts it
 * busy, or returns 0 when stopping. Locked. */
static int take(ff_loader *l, int worker, ff__ran *r) {
  size_t item;
  ff_batch *e;
  for (;;) {
    if (l->stop) return 0;
    if (wait_turn(l, worker)) continue;
    if (take_redo(l, &item, &e, &r->redo)) break;
    int got = take_new(l, worker, &item, &e);
    if (got == TOOK) break;
    if (got == AGAIN || ff__fence_sleep(l)) continue; /* ff__fence_sleep: a free entry waits for the consumer */
    /* nothing to take and nothing in flight: the ring is full, and the node's other loaders may
     * have these cores at their next report */
    if (!l->busy && !l->parked) l->parked = 1, ff__coord_publish_cpu(l->coord, l->worker_cpu_ns, 1);
    pthread_cond_wait(&l->work_cv, &l->mu);
  }
  size_t pos = item % (size_t)l->cfg.batch_size;
  r->batch = e, r->gen = l->gen;
  r->slot = r->redo.slot >= 0 ? r->redo.slot : e->slot_order[pos];
  r->placement = r->redo.slot >= 0 ? FF_PLACEMENT_CPU : e->placement[r->slot];
  r->at = item - pos + (size_t)r->slot;
  r->sample = r->used = l->order[e->epoch & 1][r->at];
  r->job = ff__loader_sample_job(l, e->epoch, r->at);
  r->job.hint = (ff__read_hint){l->order[e->epoch & 1] + (item - pos), (int)e->size,
                                e->epoch * (l->num_batches + 1) + e->index};
  l->busy++;
  return 1;
}

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

/* on_error=replace for r, which failed: runs the samples that follow its
 * position in the epoch's order (wrapping around, at most MAX_REPLACE_TRIES
 * of them), each with its own index and draws, until one succeeds into its
 * slot on the CPU; r->used is that sample. The order stays put meanwhile:
 * the workers compute an epoch's order only when the consumer has reached
 * the epoch before it, which needs this batch. With no substitute the
 * batch fails with the sample's own error. Unlocked. */
static void replace(ff_loader *l, ff__worker *w, ff__ran *r) {
  ff__error first = r->err;
  r->replace_msg = strdup(r->err.msg);
  const int64_t *order = l->order[r->batch->epoch & 1];
  size_t n = l->num_samples, tries = n - 1 < MAX_REPLACE_TRIES ? n - 1 : MAX_REPLACE_TRIES;
  r->st = r->err.status;
  for (size_t k = 1; k <= tries && r->st; k++) {
    ff__sample_job job = ff__loader_sample_job(l, r->batch->epoch, (r->at + k) % n);
    r->st = run_sample(l, w, r->batch, &job, r->slot, &r->err);
    if (!r->st) r->used = order[(r->at + k) % n];
  }
  if (r->st) r->err = first;
  r->took.fell_back |= r->placement != FF_PLACEMENT_CPU, r->took.placement = FF_PLACEMENT_CPU;
}

/* Runs r's sample where it was placed (the CPU, or read here for the
 * device), and its substitutes when it failed under on_error=replace.
 * Unlocked. */
static void run(ff_loader *l, ff__worker *w, ff__ran *r) {
  ff_batch *e = r->batch;
  /* the thread's CPU time is what the node coordinator hears as busy (wall time would count the
   * time other processes held the core) */
  r->t0 = ff__now_ns();
  uint64_t cpu0 = ff__thread_cpu_ns();
  r->took = (ff__offload_took){0};
  r->st = r->placement != FF_PLACEMENT_CPU
              ? ff__offload_sample(l->offload, w, (int)(e - l->ring), &r->job, r->slot, r->placement, &r->took,
                                   &r->err)
              : run_sample(l, w, e, &r->job, r->slot, &r->err);
  if (r->redo.slot >= 0 && r->redo.why != FF__REDO_REMOTE) /* handed back by the feeder: meant for the device */
    r->took.fell_back = 1, r->took.decode_fallback = r->redo.why == FF__REDO_DECODE,
    r->took.placement = FF_PLACEMENT_CPU;
  r->replace_msg = NULL;
  if (r->st && !r->took.added && l->cfg.on_error == FF_ON_ERROR_REPLACE) replace(l, w, r);
  r->warn_msg = w->warning.status ? strdup(w->warning.msg) : NULL;
  r->cpu_ns = ff__thread_cpu_ns() - cpu0;
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

/* r goes into its slot of a batch still of its generation: label, index,
 * messages; it finishes here unless the device's microbatch took it (it
 * finishes in the feeder then). cpu_ns, read_ns: its worker's times. Locked. */
static void fill_slot(ff_loader *l, const ff__worker *w, ff__ran *r, uint64_t cpu_ns, uint64_t read_ns) {
  ff_batch *e = r->batch;
  e->decodes.cpu += w->decoded_pixels > 0;
  e->labels[r->slot] = l->index.labels ? l->index.labels[r->used] : w->label;
  e->sample_indices[r->slot] = r->used;
  if (r->placement != FF_PLACEMENT_CPU && ff__offload_sample_done(l->offload, (int)(e - l->ring))) l->busy++;
  if (r->warn_msg) e->warn_msg[r->slot] = r->warn_msg, r->warn_msg = NULL;
  if (r->took.added) return;
  if (r->st) {
    sample_failed(l, e, r->slot, &r->err);
    e->stats.device_decode_fallbacks += (size_t)(r->redo.slot >= 0 && r->took.decode_fallback); /* it went back */
  } else {
    if (r->replace_msg) e->replace_msg[r->slot] = r->replace_msg, r->replace_msg = NULL;
    ff__account_batch_sample(e, &r->took, cpu_ns, read_ns);
  }
  ff__loader_sample_finished(l, e, 1);
}

/* r is back: the loader's figures, then its slot (a batch restarted
 * meanwhile is left alone). Locked. */
static void commit(ff_loader *l, ff__worker *w, int worker, ff__ran *r) {
  l->busy--;
  uint64_t cpu_ns = w->read_ns + w->decode_ns + w->ops_ns, read_ns = w->read_ns;
  ff__account_sample(l, w, worker, r);
  int current = r->gen == l->gen;
  if (current) fill_slot(l, w, r, cpu_ns, read_ns);
  free(r->replace_msg), free(r->warn_msg);
  r->replace_msg = r->warn_msg = NULL;
  /* the consumer waits for a batch to be ready, a restart for no sample in flight: a wake-up per
   * sample would take the trainer's thread off its core for nothing dozens of times a batch */
  if ((current && r->batch->state == FF__BUF_READY) || (l->restarting && !l->busy))
    pthread_cond_broadcast(&l->ready_cv);
}

typedef struct worker_arg {
  ff_loader *loader;
  ff__worker *worker;
} worker_arg;

static void *worker_loop(void *p) {
  worker_arg *a = p;
  ff_loader *l = a->loader;
  ff__worker *w = a->worker;
  int index = (int)(w - l->workers);
  free(a);
  ff__ran r = {0};
  pthread_mutex_lock(&l->mu);
  while (take(l, index, &r)) {
    pthread_mutex_unlock(&l->mu);
    run(l, w, &r);
    pthread_mutex_lock(&l->mu);
    commit(l, w, index, &r);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

int ff__loader_start_worker(ff_loader *l, int i) {
  worker_arg *a = malloc(sizeof *a);
  if (!a) return ENOMEM;
  *a = (worker_arg){l, &l->workers[i]};
  int rc = pthread_create(&l->threads[i], NULL, worker_loop, a);
  if (rc) free(a);
  else l->started_threads++;
  return rc;
}

/* A batch of an older generation is only forgotten. */
void ff__loader_offload_done(void *ctx, const ff__offload_result *r) {
  ff_loader *l = ctx;
  ff_batch *e = &l->ring[r->entry];
  pthread_mutex_lock(&l->mu);
  l->busy--;
  if (l->trace)
    ff__trace_span(l->trace, r->device_ran ? FF__TRACK_DEVICE : FF__TRACK_FEEDER,
                   r->device_ran ? "microbatch" : "handed back to the workers", r->start_ns, r->end_ns - r->start_ns,
                   "batch", (int64_t)e->index);
  if (e->gen == l->gen && e->state == FF__BUF_FILLING) {
    ff__account_device_samples(e, r);
    ff__dev_output_took(l, e, r->on_device);
    for (int s = 0; s < l->batch_cap && r->num_redo; s++) /* the workers take these first */
      if (r->redo[s]) ff__loader_redo(l, r->entry, s, r->redo[s], l->gen);
    if (r->num_redo) pthread_cond_broadcast(&l->work_cv);
    ff__loader_sample_finished(l, e, r->samples);
  }
  pthread_cond_broadcast(&l->ready_cv);
  pthread_mutex_unlock(&l->mu);
}
