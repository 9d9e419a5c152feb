/* offload.c — the device side of the cooperative scheduler: opening the
 * device, splitting each batch between the CPU pool and the device, and the
 * device feeder thread.
 *
 * A batch is split when its first sample is taken (ff__offload_split): the
 * policy's share gives k samples, the cost model picks the k costliest and
 * trims them to what the device memory budget admits. Workers decode those
 * samples and add them to the batch's microbatch (one ff__dev_batch per
 * ring entry, so a batch can fill while the previous one runs); when the
 * last of them is in, the batch goes to the feeder's queue. The feeder — one
 * thread per loader — submits the microbatch on its stream into the output
 * tensor (a batch's samples, from the pool), waits, downloads the finished
 * slots into the host batch and marks them done. When the pool refuses the
 * memory, the device fails, or the device was turned off, the feeder runs
 * those samples on the CPU itself from the staged decoded images, so a
 * batch always completes and stays bit-identical (the kernels do the CPU's
 * arithmetic). A refusal backs offload off for a few batches, doubling;
 * FF__DEVICE_MAX_ERRORS device errors in a row turn it off for good. The
 * device's free memory is re-read once per batch on the consumer thread, so
 * a trainer whose memory grows pushes work back to the CPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "loader/loader_internal.h"

#define MAX_BACKOFF_BATCHES 64

static void *feeder_main(void *arg);

ff_status ff__offload_open(ff_loader *l) {
  const char *name = l->cfg.device;
  if (!strcmp(name, "cpu")) return FF_OK;
  int is_auto = !strcmp(name, "auto");
  ff__device_options opt;
  ff__device_options_init(&opt);
  opt.limit_bytes = l->cfg.device_memory_limit_bytes;
  opt.headroom_bytes = l->cfg.device_headroom_bytes;
  opt.alloc_hook = l->cfg.device_alloc, opt.free_hook = l->cfg.device_free, opt.hook_ctx = l->cfg.device_alloc_ctx;
  ff__error err = {0};
  ff_status st = ff__device_open(name, &opt, &l->dev, &err);
  ff__device_info info;
  if (!st) st = ff__device_query(l->dev, &info, &err);
  if (!st) st = ff__device_stream_create(l->dev, &l->stream, &err);
  if (!st) st = ff__device_event_create(l->dev, &l->download_done, &err);
  for (int i = 0; i < l->ring_size && !st; i++) st = ff__dev_batch_create(l->dev, &l->ring[i].mb, &err);
  if (!st && (!(l->feed_queue = calloc((size_t)l->ring_size, sizeof *l->feed_queue)) ||
              !(l->headers = calloc(l->index.count, sizeof *l->headers))))
    st = ff__error_set(&err, FF_ENOMEM, "out of memory");
  if (!st) {
    int rc = pthread_create(&l->feeder, NULL, feeder_main, l);
    if (rc) st = ff__error_set(&err, FF_ENOMEM, "cannot start the device feeder thread: %s", strerror(rc));
    l->feeder_started = !rc;
  }
  if (st) {
    ff__offload_close(l);
    if (is_auto) return FF_OK; /* auto: the CPU alone, quietly */
    return ff__error_set(&l->err, st, "%s", err.msg); /* the device's message names it */
  }
  snprintf(l->device_name, sizeof l->device_name, "%s", info.name);
  l->device_free_bytes = info.pool.limit_bytes;
  l->stats.device_pool_limit_bytes = info.pool.limit_bytes;
  return FF_OK;
}

void ff__offload_close(ff_loader *l) {
  if (l->feeder_started) {
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->feed_cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->feeder, NULL);
    l->feeder_started = 0;
  }
  if (!l->dev) return;
  for (int i = 0; i < l->ring_size; i++) {
    ff__dev_batch_destroy(l->ring[i].mb);
    l->ring[i].mb = NULL;
  }
  ff__device_free(l->dev, l->d_out);
  ff__device_event_destroy(l->dev, l->download_done);
  ff__device_stream_destroy(l->dev, l->stream);
  ff__device_close(l->dev);
  ff__op_scratch_free(&l->feed_ops);
  free(l->feed_queue);
  free(l->headers);
  l->d_out = NULL, l->download_done = NULL, l->stream = NULL, l->dev = NULL, l->feed_queue = NULL;
  l->headers = NULL;
}

double ff__offload_share(const ff_loader *l) {
  if (!l->dev || l->device_off) return 0;
  return l->forced_share >= 0 ? l->forced_share : l->sched.share;
}

/* The pool's block for the output tensor (batch_cap samples). */
static size_t out_class_bytes(const ff_loader *l) {
  return ff__pool_class_bytes((size_t)l->batch_cap * l->sample_bytes);
}

void ff__offload_split(ff_loader *l, ff_batch *e, int n) {
  double share = ff__offload_share(l);
  ff__sched_state s = {.share = share};
  int k = ff__sched_device_count(&s, n);
  if (k && l->backoff) l->backoff--, k = 0;
  memset(e->to_device, 0, (size_t)l->batch_cap); /* a short batch leaves no marks of the last */
  if (k) {
    const int64_t *order = l->order[e->epoch & 1] + e->index * (size_t)l->cfg.batch_size;
    for (int i = 0; i < n; i++) { /* what each sample would save the CPU (sched/cost.h) */
      ff__image_info info;
      l->split_sizes[i] = l->index.size_bytes[order[i]];
      if (ff__cost_header_unpack(l->headers[order[i]], &info)) {
        ff__plan_make(&l->pipe, l->cfg.seed, e->epoch, (uint64_t)order[i], &info, l->cfg.max_image_pixels,
                      &l->split_plan);
        l->split_saving[i] = ff__cost_plan_ns(&l->split_plan, &info, &l->costs, l->pipe.out_width,
                                              l->pipe.out_height);
      } else {
        l->split_saving[i] = ff__cost_unknown_ns(&l->cost, l->split_sizes[i]);
      }
    }
    /* the output tensor is taken at the first microbatch and kept */
    size_t out_bytes = l->d_out ? 0 : out_class_bytes(l);
    size_t avail = l->device_free_bytes > out_bytes ? l->device_free_bytes - out_bytes : 0;
    k = ff__cost_split(&l->cost, l->split_saving, l->split_sizes, n, k, avail, e->to_device);
    if (!k) l->refused = 1;
    if (k && ff__dev_batch_begin(e->mb, &l->pipe, NULL)) {
      memset(e->to_device, 0, (size_t)n);
      k = 0;
    }
  }
  int next = 0;
  for (int pass = 1; pass >= 0; pass--)
    for (int slot = 0; slot < n; slot++)
      if (e->to_device[slot] == pass) e->slot_order[next++] = slot;
  e->device_left = k;
  e->stats = (ff_batch_info){.offload_share = share};
}

/* Runs the steps after decode on img and writes it as slot of images. */
static ff_status run_on_cpu(const ff__pipeline *pipe, ff__op_scratch *ops, ff__image *img, const ff__plan *plan,
                            void *images, int slot, const char *path, uint64_t *ops_ns, ff__error *err) {
  uint64_t t0 = ff__now_ns();
  ff_status st = ff__ops_run(plan, ops, img, err);
  if (!st && (img->width != pipe->out_width || img->height != pipe->out_height))
    st = ff__error_set(err, FF_EINTERNAL, "%s: pipeline gave %dx%d instead of %dx%d", path, img->width,
                       img->height, pipe->out_width, pipe->out_height);
  if (!st) ff__op_write_output(pipe, img, images, slot);
  *ops_ns += ff__now_ns() - t0;
  return st;
}

ff_status ff__offload_sample(ff_loader *l, ff__worker *w, ff_batch *e, const ff__sample_job *job, int slot,
                             int *added, int *fell_back, ff__error *err) {
  ff__image img;
  ff__plan plan;
  *added = *fell_back = 0;
  ff_status st = ff__sample_decode(w, &l->pipe, job, &img, &plan, err);
  if (st) return st;
  pthread_mutex_lock(&l->add_mu);
  ff_status add = ff__dev_batch_add(e->mb, &img, &plan, slot, NULL);
  pthread_mutex_unlock(&l->add_mu);
  if (!add) return *added = 1, FF_OK;
  *fell_back = 1; /* no pinned staging for it: the CPU finishes it now */
  return run_on_cpu(&l->pipe, &w->ops, &img, &plan, e->images, slot, job->path, &w->ops_ns, err);
}

void ff__offload_sample_done(ff_loader *l, ff_batch *e) {
  if (--e->device_left || !ff__dev_batch_count(e->mb)) return;
  l->feed_queue[(l->feed_head + l->feed_count++) % l->ring_size] = e;
  pthread_cond_signal(&l->feed_cv);
}

void ff__offload_reset(ff_loader *l) { l->feed_head = l->feed_count = 0; }

void ff__offload_refresh(ff_loader *l) {
  if (!l->dev) return;
  ff__pool_stats pool;
  int ok = !ff__device_refresh(l->dev, &pool, NULL);
  pthread_mutex_lock(&l->mu);
  l->device_free_bytes = ok && pool.limit_bytes > pool.used_bytes ? pool.limit_bytes - pool.used_bytes : 0;
  if (ok) {
    l->stats.device_pool_limit_bytes = pool.limit_bytes;
    l->stats.device_pool_peak_bytes = pool.peak_bytes;
  }
  pthread_mutex_unlock(&l->mu);
}

/* ------------------------------------------------------------ the feeder */

/* What became of one microbatch. */
typedef struct outcome {
  int n;                   /* samples in it */
  ff_status device_status; /* FF_OK: the device prepared them; else why the CPU did */
  uint64_t start_ns, device_ns, cpu_ns;
  size_t device_bytes;
  ff_status status;        /* a sample's error on the CPU fallback (first) */
  ff__error err;
} outcome;

/* Submit, wait, download every slot the microbatch wrote. Feeder only. */
static ff_status run_on_device(ff_loader *l, ff_batch *e, outcome *o, ff__error *err) {
  size_t sb = l->sample_bytes;
  ff_status st = l->d_out ? FF_OK : ff__device_alloc(l->dev, (size_t)l->batch_cap * sb, &l->d_out, err);
  if (st) return st;
  o->device_bytes = ff__dev_batch_device_bytes(e->mb) + out_class_bytes(l);
  float ms = 0;
  st = ff__dev_batch_submit(e->mb, l->stream, l->d_out, err);
  if (!st) st = ff__dev_batch_wait(e->mb, &ms, err);
  for (int i = 0; i < o->n && !st; i++) {
    ff__image img;
    const ff__plan *plan;
    int slot;
    ff__dev_batch_sample(e->mb, i, &img, &plan, &slot);
    st = ff__device_download(l->dev, l->stream, (char *)e->images + (size_t)slot * sb,
                             (const char *)l->d_out + (size_t)slot * sb, sb, err);
  }
  if (!st) st = ff__device_event_record(l->dev, l->download_done, l->stream, err);
  if (!st) st = ff__device_event_wait(l->dev, l->download_done, err);
  o->device_ns = (uint64_t)((double)ms * 1e6);
  return st;
}

/* Prepares the microbatch of e on the device or, failing that, on the CPU
 * from its staged decoded images. Feeder only, unlocked. */
static void run_microbatch(ff_loader *l, ff_batch *e, int device_off, outcome *o) {
  ff__error err;
  *o = (outcome){.n = ff__dev_batch_count(e->mb), .start_ns = ff__now_ns()};
  o->device_status = device_off ? FF_EDEVICE : run_on_device(l, e, o, &err);
  if (!o->device_status) return;
  for (int i = 0; i < o->n; i++) {
    ff__image img;
    const ff__plan *plan;
    int slot;
    ff__dev_batch_sample(e->mb, i, &img, &plan, &slot);
    ff_status st = run_on_cpu(&l->pipe, &l->feed_ops, &img, plan, e->images, slot,
                              l->index.paths[e->sample_indices[slot]], &o->cpu_ns, &err);
    if (st && !o->status) o->status = st, o->err = err;
  }
}

/* Folds a microbatch's outcome into the device's health. Locked. */
static void account_device(ff_loader *l, const outcome *o, int device_off) {
  if (device_off) return;
  if (!o->device_status) {
    l->device_errors = 0, l->backoff_len = 0;
  } else if (o->device_status == FF__EBUDGET) {
    l->refused = 1;
    l->backoff_len = l->backoff_len ? 2 * l->backoff_len : 2;
    if (l->backoff_len > MAX_BACKOFF_BATCHES) l->backoff_len = MAX_BACKOFF_BATCHES;
    l->backoff = l->backoff_len;
  } else {
    l->refused = 1;
    if (++l->device_errors >= FF__DEVICE_MAX_ERRORS) l->device_off = 1;
  }
}

static void *feeder_main(void *arg) {
  ff_loader *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->stop && !l->feed_count) pthread_cond_wait(&l->feed_cv, &l->mu);
    if (l->stop) break;
    ff_batch *e = l->feed_queue[l->feed_head];
    l->feed_head = (l->feed_head + 1) % l->ring_size, l->feed_count--;
    uint64_t gen = l->gen, encoded_bytes = 0;
    for (int s = 0; s < l->batch_cap; s++)
      if (e->to_device[s]) encoded_bytes += l->index.size_bytes[e->sample_indices[s]];
    int device_off = l->device_off;
    l->busy++;
    pthread_mutex_unlock(&l->mu);

    outcome o;
    run_microbatch(l, e, device_off, &o);

    pthread_mutex_lock(&l->mu);
    l->busy--;
    account_device(l, &o, device_off);
    ff__loader_add_costs(l, &l->feed_ops.costs);
    l->stats.ops_ns += o.cpu_ns;
    uint64_t end = ff__now_ns();
    if (l->trace)
      ff__trace_span(l->trace, o.device_status ? FF__TRACK_FEEDER : FF__TRACK_DEVICE,
                     o.device_status ? "cpu fallback" : "microbatch", o.start_ns, end - o.start_ns, "batch",
                     (int64_t)e->index);
    if (gen == l->gen) {
      ff_batch_info *b = &e->stats;
      if (o.device_bytes) /* what it needed, also when the pool refused it */
        ff__cost_observe_device(&l->cost, encoded_bytes, o.device_bytes - out_class_bytes(l));
      if (!o.device_status) {
        b->device_samples += (size_t)o.n, b->device_ns += o.device_ns, b->device_bytes = o.device_bytes;
      } else {
        b->device_fallbacks += (size_t)o.n, b->cpu_ns += o.cpu_ns;
        b->cpu_samples += (size_t)o.n;
        if (o.status && !e->error.status) e->error = o.err;
      }
      ff__loader_sample_finished(l, e, o.n);
    }
    pthread_cond_broadcast(&l->ready_cv);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}
