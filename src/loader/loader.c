/* loader.c — the public loader: open and close, the epoch and position
 * (set_epoch, seek), and the consumer's side of the ordered ring of batches
 * (ff_loader_next, ff_batch_release). The CPU workers that fill the ring
 * are in worker.c, what is counted and learnt in accounting.c.
 *
 * The ring has prefetch + 1 entries; sample k of an epoch's order goes to
 * slot k % batch_size of batch k / batch_size, so memory is bounded by the
 * ring. A batch is READY when all its samples are in, and ff_loader_next
 * hands batches out strictly in order. When the workers have taken every
 * sample of the consumer's epoch they go on with the next one, so the ring
 * stays full across the epoch boundary; the orders of these two epochs
 * live in order[epoch & 1]. Jumping to another epoch bumps a generation
 * number and waits for the samples in flight, so no stale write reaches a
 * reused buffer. Batches held by the consumer survive close: the loader's
 * memory goes when it is closed and the last batch is released. Each
 * ff_loader_next folds what it measured into the policy (sched/policy.h),
 * which sets the device share of the batches split next. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "loader/sampler.h"
#include "loader/worker.h"
#include "sched/numa.h"
#include "source/callback.h"
#include "source/stream.h"

#define DEFAULT_TRACE_EVENTS (1u << 18)

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
      ff__ring_clear_msgs(l, &l->ring[i]);
    }
  l->out_epoch = l->item_epoch = epoch;
  ff__loader_order(l, epoch);
  l->next_out = batch;
  l->next_item = batch * (size_t)l->cfg.batch_size;
  if (l->next_item > l->total_items) l->next_item = l->total_items; /* the end of an epoch with a short last batch */
  l->last_out_ns = 0; /* the ring fills from empty: no interval to judge yet */
  pthread_cond_broadcast(&l->work_cv);
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
    if (l->ring[i].skip_msg && l->ring[i].replace_msg && l->ring[i].warn_msg) ff__ring_clear_msgs(l, &l->ring[i]);
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
    if (ff__loader_start_worker(l, i) || pthread_setschedparam(l->threads[i], SCHED_IDLE, &idle)) break;
    l->num_spares++;
  }
  ff__numa_pin_workers(l->threads + l->num_threads, l->num_spares, gpu);
  ff__loader_set_active_threads(l, ff__coord_threads(l->coord), ff__coord_spares(l->coord));
}

/* The config checked and the pipeline (or views) parsed for it. */
static ff_status open_pipeline(ff_loader *l) {
  ff__error *err = &l->err;
  ff_status st = ff__loader_check_config(&l->cfg, err);
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
  if (!st) st = ff__loader_env_share(&l->forced_share, err);
  return st;
}

/* The source's index, the samples and batches of an epoch for this rank, and the batch stage's checks. */
static ff_status open_source(ff_loader *l) {
  ff__error *err = &l->err;
  ff_status st = FF_OK;
  if (l->cfg.source_callbacks) /* a batch fetch per ring slot, and one to spare per worker */
    st = ff__callback_source_open(l->cfg.source_callbacks, (size_t)l->cfg.prefetch + 2 + (size_t)l->cfg.num_threads,
                                  &l->index, err);
  else
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
  return FF_OK;
}

/* Each ring entry's memory, image_bytes per sample. */
static ff_status alloc_entries(ff_loader *l, size_t image_bytes) {
  ff__error *err = &l->err;
  size_t bs = (size_t)l->batch_cap;
  ff_status st;
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
  return FF_OK;
}

/* The ring's entries, the orders, the workers' state: memory for batches of batch_cap samples. */
static ff_status alloc_ring(ff_loader *l) {
  ff__error *err = &l->err;
  const ff_config *c = &l->cfg;
  size_t bs = (size_t)l->batch_cap;
  ff_status st;
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
  l->skipped = calloc(FF__MESSAGES_KEPT, sizeof *l->skipped);
  l->warnings = calloc(FF__MESSAGES_KEPT, sizeof *l->warnings);
  if (!l->order[0] || !l->order[1] || !l->perm || !l->ring || !l->redo || !l->workers || !l->threads ||
      !l->skipped || !l->warnings)
    return ff__error_set(err, FF_ENOMEM, "out of memory");
  for (size_t i = 0; i < l->index.num_bad; i++) /* counted and listed first, as skipped */
    l->stats.skipped++, ff__account_keep_msg(l->skipped, &l->skipped_kept, &l->index.bad[i]);
  return alloc_entries(l, image_bytes);
}

/* The scheduler, the offload device, the output device and the remote placement. */
static ff_status open_placements(ff_loader *l) {
  ff__error *err = &l->err;
  const ff_config *c = &l->cfg;
  ff_status st;
  l->active_threads = l->num_threads;
  l->stats.num_threads = l->num_threads;
  ff__sched_params_init(&l->sched_params, c->prefetch);
  l->sched_params.max_device_time = c->device_max_time_share;
  ff__sched_state_init(&l->sched);
  ff__offload_config oc = {c->device, c->device_memory_limit_bytes, c->device_headroom_bytes, c->device_decode,
                           c->deterministic, c->strict_decode, c->on_error == FF_ON_ERROR_REPLACE, &l->pipe,
                           &l->host_pipe, l->ring_size, l->batch_cap, l->sample_bytes, l->host_sample_bytes,
                           l->index.count, l->index.size_bytes, c->seed, c->max_image_pixels,
                           ff__loader_offload_done, l, c->device_alloc, c->device_free, c->device_alloc_ctx};
  if ((st = ff__offload_open(&oc, &l->offload, l->device_name, sizeof l->device_name, err))) return st;
  if ((st = ff__dev_output_open(l))) return st;
  if ((st = ff__remote_open(l))) return st;
  l->stats.device = l->device_name;
  l->stats.device_decoder = ff__offload_decoder(l->offload, &l->stats.device_decoder_note);
  l->device_decoder = l->offload && strcmp(l->stats.device_decoder, "none") ? l->stats.device_decoder : NULL;
  ff__offload_pool(l->offload, &l->stats.device_pool_limit_bytes, &l->stats.device_pool_peak_bytes);
  return FF_OK;
}

static ff_status loader_start(ff_loader *l) {
  ff_status st;
  if ((st = open_pipeline(l)) || (st = open_source(l)) || (st = alloc_ring(l)) || (st = open_placements(l)))
    return st;
  pthread_mutex_lock(&l->mu);
  restart_epoch(l, 0, 0);
  pthread_mutex_unlock(&l->mu);
  for (int i = 0; i < l->num_threads; i++) {
    int rc = ff__loader_start_worker(l, i);
    if (rc) return ff__error_set(&l->err, FF_ENOMEM, "cannot start worker thread: %s", strerror(rc));
  }
  int gpu = ff__numa_rank_gpu(l->cfg.device);
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

/* The next batch of the consumer's epoch once it is ready (*out), FF_END
 * at the epoch's end, or the batch's error. Batches whose every sample was
 * skipped are freed and passed over. Locked. */
static ff_status next_ready(ff_loader *l, int ring_ready, uint64_t t0, ff_batch **out) {
  for (;;) {
    if (l->next_out == l->num_batches) { /* the workers are on the next epoch already */
      l->out_epoch++;
      l->next_out = 0;
      return FF_END;
    }
    if (l->held == l->ring_size)
      return ff__error_set(&l->err, FF_EINVAL, "all %d batches of the ring are held: release one first (prefetch=%d)",
                           l->ring_size, l->cfg.prefetch);
    ff_batch *e;
    while (!(e = ff__ring_entry_of(l, l->out_epoch, l->next_out)) || e->state != FF__BUF_READY)
      ff__remote_wait(l); /* ready_cv, and remote microbatches past their timeout */
    l->next_out++;
    ff_status st;
    if ((st = e->error.status)) {
      l->err = e->error;
      ff__ring_clear_msgs(l, e);
      e->state = FF__BUF_FREE;
      return st;
    }
    ff__account_skips(l, e);
    if (!e->size) { /* every sample skipped: no empty batch goes out */
      e->state = FF__BUF_FREE;
      pthread_cond_broadcast(&l->work_cv);
      continue;
    }
    e->state = FF__BUF_HELD;
    l->held++;
    l->stats.batches++;
    l->stats.samples += e->size;
    ff__account_hand_out(l, e, ring_ready, t0, ff__now_ns());
    *out = e;
    return FF_OK;
  }
}

/* The last interval to the node coordinator, and its answer applied.
 * Unlocked: the node's table may take a moment to get. */
static void report_interval(ff_loader *l, ff__coord_report_data *interval) {
  int threads;
  if (ff__coord_report(l->coord, interval, &threads) == FF_OK) {
    ff__loader_set_active_threads(l, threads, ff__coord_spares(l->coord));
    mark_reserve(l, ff__coord_reserve_cores(l->coord));
  }
}

ff_status ff_loader_next(ff_loader *l, ff_batch **out) {
  if (!l->started_threads) return failed_open(l);
  size_t limit = 0, peak = 0;
  ff__offload_refresh(l->offload, &limit, &peak);
  uint64_t t0 = ff__now_ns();
  pthread_mutex_lock(&l->mu);
  if (l->offload) l->stats.device_pool_limit_bytes = limit, l->stats.device_pool_peak_bytes = peak;
  ff__fence_next(l);
  ff_status st = next_ready(l, ready_batches(l), t0, out);
  uint64_t now = ff__now_ns();
  l->stats.wait_ns += now - t0;
  if (l->trace) ff__trace_span(l->trace, FF__TRACK_CONSUMER, "wait", t0, now - t0, "batch", (int64_t)l->next_out - 1);
  pthread_cond_broadcast(&l->work_cv);
  ff__coord_report_data interval = l->report;
  int pending = l->report_pending;
  l->report_pending = 0;
  pthread_mutex_unlock(&l->mu);
  if (pending) report_interval(l, &interval);
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
  ff__mix_plan_make(&mix, l->cfg.seed, epoch, batch, ff__loader_batch_count(l, batch), l->pipe.out_height,
                    l->pipe.out_width, &plan);
  char *json = ff__mix_plan_json(&mix, &plan);
  ff__mix_plan_free(&plan);
  if (!json) return ff__error_set(&l->err, FF_ENOMEM, "out of memory");
  *json_out = json;
  return FF_OK;
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
  l->stats.offload_share = ff__loader_device_share(l);
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
